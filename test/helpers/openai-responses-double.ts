// A stand-in for OpenAI's Responses API, for running the real Codex CLI in tests on a machine
// that cannot reach api.openai.com (this one reaches only the npm and Debian mirrors).
//
// What it models, from OpenAI's public API documentation ("Streaming API responses",
// developers.openai.com/docs/guides/streaming-responses, and the Responses API reference):
// `POST <base>/responses` with a JSON body holding `model`, `input` (a list of items: messages,
// `function_call`s the model made, and the client's `function_call_output`s, each naming the
// `call_id` it answers), `tools` and `stream: true`. The answer is server-sent events, each
// `event: <type>` plus `data: <json with the same type>`: response.created, then per output item
// response.output_item.added, for text response.output_text.delta, response.output_item.done
// (the whole item: a `message` with `output_text` content, or a `function_call` with `name`,
// `call_id` and its `arguments` as JSON text), and last response.completed with the response's
// output and usage.
//
// What it cannot be: a model. It answers from a script: when a request that offers tools holds
// the script's trigger text, it answers with the script's next step, counting the steps already
// answered by the `function_call_output` items the client sent back (so the agent really runs
// each tool and reports what happened first). Every other request (side calls without tools) gets
// a short text. It never checks the API key, counts tokens, or models errors, reasoning items or
// rate limits; no `sequence_number` is sent.
import * as http from 'http';
import type { AddressInfo } from 'net';

export type ResponsesStep = { kind: 'call'; name: string; arguments: Record<string, unknown> } | { kind: 'text'; text: string };

export interface CallOutput {
  step: number;
  output: string;
}

interface InputItem {
  type?: string;
  call_id?: string;
  output?: unknown;
}

export class OpenAIResponsesDouble {
  /** What the client sent back for each call step, in order. */
  readonly outputs: CallOutput[] = [];
  /** Requests seen (method and path), for a failing test's message. */
  readonly seen: string[] = [];
  private server?: http.Server;

  constructor(
    private readonly trigger: string,
    private readonly script: ResponsesStep[],
  ) {}

  private callId(step: number): string {
    return `call_shadowfs_${step}`;
  }

  /** Starts listening; returns the base URL a client puts before `/responses`. */
  async start(): Promise<string> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString('utf8')));
      req.on('end', () => this.answer(req, body, res));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  private answer(req: http.IncomingMessage, body: string, res: http.ServerResponse): void {
    this.seen.push(`${req.method} ${req.url}`);
    if (req.method !== 'POST' || !(req.url ?? '').endsWith('/responses')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'not modelled', type: 'invalid_request_error' } }));
      return;
    }
    let request: { model?: string; tools?: unknown[]; input?: InputItem[] };
    try {
      request = JSON.parse(body) as typeof request;
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'body is not JSON', type: 'invalid_request_error' } }));
      return;
    }
    const input = Array.isArray(request.input) ? request.input : [];
    let step: ResponsesStep = { kind: 'text', text: 'ok' };
    let index = -1;
    if ((request.tools ?? []).length > 0 && JSON.stringify(input).includes(this.trigger)) {
      const answered = new Map<number, InputItem>();
      for (const item of input)
        if (item.type === 'function_call_output')
          for (let i = 0; i < this.script.length; i++) if (item.call_id === this.callId(i)) answered.set(i, item);
      for (const [i, item] of [...answered].sort((a, b) => a[0] - b[0]))
        if (!this.outputs.some((o) => o.step === i))
          this.outputs.push({ step: i, output: typeof item.output === 'string' ? item.output : JSON.stringify(item.output) });
      index = answered.size;
      step = this.script[Math.min(index, this.script.length - 1)];
    }
    const id = `resp_shadowfs_${this.seen.length}`;
    const item =
      step.kind === 'call'
        ? {
            type: 'function_call',
            id: `fc_shadowfs_${index}`,
            call_id: this.callId(index),
            name: step.name,
            arguments: JSON.stringify(step.arguments),
            status: 'completed',
          }
        : {
            type: 'message',
            id: `msg_shadowfs_${this.seen.length}`,
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text: step.text, annotations: [] }],
          };
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const event = (type: string, data: Record<string, unknown>): void => {
      res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    };
    event('response.created', { response: { id, object: 'response', model: request.model, status: 'in_progress', output: [] } });
    event('response.output_item.added', {
      output_index: 0,
      item:
        item.type === 'function_call' ? { ...item, arguments: '', status: 'in_progress' } : { ...item, content: [], status: 'in_progress' },
    });
    if (step.kind === 'text')
      event('response.output_text.delta', { output_index: 0, content_index: 0, item_id: item.id, delta: step.text });
    event('response.output_item.done', { output_index: 0, item });
    event('response.completed', {
      response: {
        id,
        object: 'response',
        model: request.model,
        status: 'completed',
        output: [item],
        usage: {
          input_tokens: 1,
          output_tokens: 1,
          total_tokens: 2,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens_details: { reasoning_tokens: 0 },
        },
      },
    });
    res.end();
  }
}
