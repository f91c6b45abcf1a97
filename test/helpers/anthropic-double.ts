// A stand-in for Anthropic's Messages API, for running the real Claude Code CLI in tests on a
// machine that cannot reach api.anthropic.com (this one reaches only the npm and Debian mirrors).
//
// What it models, from Anthropic's public API documentation ("Messages" and "Streaming
// messages", platform.claude.com/docs): `POST /v1/messages` with a JSON body holding `model`,
// `messages` (each `{role, content}`, content a string or a list of blocks: `text`, `tool_use`,
// `tool_result` with the `tool_use_id` it answers), `tools` and `stream`. A streamed answer is
// server-sent events, each `event: <type>` plus `data: <json with the same type>`: message_start
// (the message without content), then per content block content_block_start, content_block_delta
// (`text_delta`, or `input_json_delta` carrying the tool input's JSON text) and content_block_stop,
// then message_delta (`stop_reason`: `tool_use` or `end_turn`) and message_stop. Unstreamed, the
// same message comes back whole as JSON.
//
// What it cannot be: a model. It answers from a script: when a request that offers tools holds
// the script's trigger text in a user message, it answers with the script's next step, counting
// the steps already answered by the `tool_result` blocks the client sent back (so the agent
// really runs each tool and reports what happened before the next step comes). Every other
// request (Claude Code's side calls: titles, summaries, a quota probe) gets a short text. It
// never checks the API key, counts tokens for real, or models errors, rate limits or thinking.
import * as http from 'http';
import type { AddressInfo } from 'net';

export type ScriptStep = { kind: 'tool'; name: string; input: Record<string, unknown> } | { kind: 'text'; text: string };

export interface ToolResult {
  step: number;
  content: string;
  isError: boolean;
}

interface Block {
  type: string;
  text?: string;
  tool_use_id?: string;
  content?: unknown;
  is_error?: boolean;
}

function blocksOf(content: unknown): Block[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return Array.isArray(content) ? (content as Block[]) : [];
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return blocksOf(content)
    .map((b) => (b.type === 'text' ? (b.text ?? '') : ''))
    .join('');
}

export class AnthropicDouble {
  /** What the client sent back for each tool step, in order. */
  readonly results: ToolResult[] = [];
  /** Requests seen (method and path), for a failing test's message. */
  readonly seen: string[] = [];
  private server?: http.Server;

  constructor(
    private readonly trigger: string,
    private readonly script: ScriptStep[],
  ) {}

  private toolId(step: number): string {
    return `toolu_shadowfs_${step}`;
  }

  async start(): Promise<string> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString('utf8')));
      req.on('end', () => this.answer(req, body, res));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /** How many script steps have been answered with a tool result. */
  get done(): number {
    return this.results.length;
  }

  private answer(req: http.IncomingMessage, body: string, res: http.ServerResponse): void {
    this.seen.push(`${req.method} ${req.url}`);
    if (req.method !== 'POST' || !(req.url ?? '').startsWith('/v1/messages')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
      return;
    }
    let request: { model?: string; stream?: boolean; tools?: unknown[]; messages?: { role: string; content: unknown }[] };
    try {
      request = JSON.parse(body) as typeof request;
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'body is not JSON' } }));
      return;
    }
    const messages = request.messages ?? [];
    const asked = messages.some((m) => m.role === 'user' && textOf(m.content).includes(this.trigger));
    let step: ScriptStep = { kind: 'text', text: 'ok' };
    let index = -1;
    if (asked && (request.tools ?? []).length > 0) {
      // The tool results sent back so far say how far the script has got.
      const answered = new Map<number, Block>();
      for (const m of messages)
        for (const b of blocksOf(m.content))
          if (b.type === 'tool_result')
            for (let i = 0; i < this.script.length; i++) if (b.tool_use_id === this.toolId(i)) answered.set(i, b);
      for (const [i, b] of [...answered].sort((a, c) => a[0] - c[0]))
        if (!this.results.some((r) => r.step === i))
          this.results.push({ step: i, content: resultText(b.content), isError: b.is_error === true });
      index = answered.size;
      step = this.script[Math.min(index, this.script.length - 1)];
    }
    const message = {
      id: `msg_shadowfs_${this.seen.length}`,
      type: 'message',
      role: 'assistant',
      model: request.model ?? 'unknown',
      content: [] as unknown[],
      stop_reason: null as string | null,
      stop_sequence: null,
      usage: { input_tokens: 1, output_tokens: 1 },
    };
    const block =
      step.kind === 'tool'
        ? { type: 'tool_use', id: this.toolId(index), name: step.name, input: step.input }
        : { type: 'text', text: step.text };
    const stop = step.kind === 'tool' ? 'tool_use' : 'end_turn';
    if (!request.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ...message, content: [block], stop_reason: stop }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const event = (type: string, data: Record<string, unknown>): void => {
      res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    };
    event('message_start', { message });
    if (block.type === 'tool_use') {
      event('content_block_start', { index: 0, content_block: { ...block, input: {} } });
      event('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } });
    } else {
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: block.text } });
    }
    event('content_block_stop', { index: 0 });
    event('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 1 } });
    event('message_stop', {});
    res.end();
  }
}

function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  return blocksOf(content)
    .map((b) => (b.type === 'text' ? (b.text ?? '') : ''))
    .join('\n');
}
