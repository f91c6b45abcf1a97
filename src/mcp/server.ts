// The MCP face of shadowfs: one agent's tools on one shadow, over stdio, built on the official
// MCP TypeScript SDK. Every tool is a thin call to the daemon through shadowfs/client; its input
// schema is the protocol's own parameter schema with the shadow and agent taken out (they are
// fixed when the server starts), so MCP clients see the same names, types and descriptions as
// the JSON-RPC protocol. Writing the user's folder (apply) is offered only when the server was
// started with it allowed. The client must come restricted to this shadow and agent
// (ClientOptions.scope): the daemon, not this server, is what holds the agent to its layer.
import * as crypto from 'crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { ShadowClient } from '../client';
import { ShadowError } from '../common/errors';
import { Requests, type MethodName, type ParamsOf } from '../protocol/methods';
import { withNotes } from './notes';
import { RadarNotes } from './radar-notes';
import { boundedApply } from './render';

export interface McpOptions {
  shadow: string;
  agent: string;
  /** Offer the apply tool (writes the user's folder). */
  allowApply?: boolean;
  version: string;
}

interface ToolDef {
  name: string;
  method: MethodName;
  title: string;
  description?: string;
  /** Protocol parameters the tool does not expose besides shadow and agent. */
  hide?: string[];
  /** Shapes the answer for the model (default: the result as JSON). */
  render?: (result: unknown) => string;
  readOnly?: boolean;
  destructive?: boolean;
}

const json = (r: unknown): string => JSON.stringify(r, null, 1);

const TOOLS: ToolDef[] = [
  {
    name: 'read_file',
    method: 'file.read',
    title: 'Read a file',
    readOnly: true,
    render: (r) => {
      const x = r as {
        path: string;
        content: string;
        startLine: number;
        endLine: number;
        totalLines: number;
        binary: boolean;
        hash?: string;
      };
      // The hash is what write_file and edit_file take in expect.hash (write only if unchanged since).
      const hash = x.hash ? ` (hash ${x.hash})` : '';
      if (x.binary) return `${x.path} is a binary file${hash}`;
      return `${x.path} lines ${x.startLine}-${x.endLine} of ${x.totalLines}${hash}:\n${x.content}`;
    },
  },
  { name: 'write_file', method: 'file.write', title: 'Write a file', hide: ['mode'] },
  { name: 'edit_file', method: 'file.edit', title: 'Replace exact text in a file' },
  { name: 'list_directory', method: 'file.list', title: 'List a directory', readOnly: true },
  { name: 'glob', method: 'file.glob', title: 'Find files by glob', readOnly: true },
  { name: 'grep', method: 'file.grep', title: 'Search file contents', readOnly: true },
  {
    name: 'run_command',
    method: 'run',
    title: 'Run a command in the shadow',
    description:
      "Runs a command (argv) in the shadow with this agent's changes visible, taking turns with other agents; the folder itself is never written. Output comes back when it ends. It has no terminal and no input: editors and prompts fail at once (give git commit -m). It may run 600 s unless timeout (seconds; 0: no limit) says otherwise; cancelling the call interrupts it. While it waits for another agent's run, progress notifications say whom it waits for.",
    hide: ['runId', 'atOriginalPath', 'originalPath', 'unprotected', 'discardWrites'],
    render: (r) => {
      const x = r as {
        exitCode: number | null;
        signal: string | null;
        stdout: string;
        stderr: string;
        timedOut: boolean;
        timeoutMs?: number;
        cancelled: boolean;
        durationMs: number;
      };
      const limit =
        x.timeoutMs === undefined
          ? ''
          : ` after ${x.timeoutMs / 1000} s; pass a larger timeout (seconds, 0: no limit) to let it run longer`;
      return [
        `exit code ${x.exitCode ?? 'none'}${x.signal ? ` (signal ${x.signal})` : ''}${x.timedOut ? ` (timed out${limit})` : ''}${x.cancelled ? ' (cancelled)' : ''}, ${x.durationMs} ms`,
        x.stdout ? `--- stdout\n${x.stdout}` : '',
        x.stderr ? `--- stderr\n${x.stderr}` : '',
      ]
        .filter(Boolean)
        .join('\n');
    },
  },
  { name: 'lints', method: 'lints', title: 'Diagnostics for the change', readOnly: false },
  {
    name: 'diff',
    method: 'layer.diff',
    title: 'Diff of the changes',
    readOnly: true,
    render: (r) => (r as { text: string }).text || '(no changes)',
  },
  {
    name: 'patch',
    method: 'layer.patch',
    title: 'Git patch of the changes',
    readOnly: true,
    render: (r) => (r as { text: string }).text || '(no changes)',
  },
  { name: 'checkpoint', method: 'layer.checkpoint', title: 'Save a checkpoint' },
  { name: 'restore_checkpoint', method: 'layer.restore', title: 'Restore a checkpoint', destructive: true },
  { name: 'list_checkpoints', method: 'layer.checkpoints', title: 'List checkpoints', readOnly: true },
];

/** The user's side of review, offered with apply: the changes as hunks with ids that apply's hunks parameter takes. */
const REVIEW: ToolDef = {
  name: 'review_hunks',
  method: 'layer.hunks',
  title: 'List the changes as hunks',
  description:
    "This agent's changes as hunks with stable ids (whole files where they cannot be cut); apply with hunks: [ids] writes only those to the user's folder.",
  readOnly: true,
};

const APPLY: ToolDef = {
  name: 'apply',
  method: 'layer.apply',
  title: "Apply the changes to the user's folder",
  description:
    "Writes this agent's changes into the user's real folder (the only tool that does). Files the user changed meanwhile come back as conflicts and are not written unless resolutions say how. With branch, no file is written: this agent's commits (its HEAD) come into the user's repository as that new branch instead (force replaces an existing one).",
  destructive: true,
  render: boundedApply,
};

/** The protocol's parameter schema of `method` without shadow, agent and `hide`. */
function inputSchemaOf(def: ToolDef) {
  const omit: Record<string, true> = { shadow: true, agent: true };
  for (const h of def.hide ?? []) omit[h] = true;
  const params = Requests[def.method].params as unknown as { omit: (m: Record<string, true>) => unknown };
  return params.omit(omit) as never;
}

function errorResult(err: unknown): CallToolResult {
  const e = err instanceof ShadowError ? err : new ShadowError('INTERNAL', (err as Error)?.message ?? String(err));
  return { isError: true, content: [{ type: 'text', text: `${e.code}: ${e.message}` }] };
}

export function createMcpServer(client: ShadowClient, opts: McpOptions): McpServer {
  const scope = client.scope;
  if (!scope || scope.agent !== opts.agent || scope.allowApply !== (opts.allowApply === true))
    throw new ShadowError(
      'SCOPE_DENIED',
      `the MCP server serves an agent only over a connection restricted to that agent (connect with scope {shadow, agent: ${JSON.stringify(opts.agent)}})`,
    );
  const server = new McpServer(
    { name: 'shadowfs', version: opts.version },
    {
      instructions: `Tools on shadow "${opts.shadow}" as agent "${opts.agent}": your edits go to your own layer, never to the user's folder${opts.allowApply ? ' (except the apply tool, when asked)' : ''}. Paths are relative to the project root.`,
    },
  );
  // Overlaps with other agents' work or the user's edits, told on the next tool result.
  const radar = new RadarNotes(client, opts.shadow, opts.agent);
  for (const def of opts.allowApply ? [...TOOLS, REVIEW, APPLY] : TOOLS) {
    server.registerTool(
      def.name,
      {
        title: def.title,
        description: def.description ?? Requests[def.method].summary,
        inputSchema: inputSchemaOf(def),
        annotations: { readOnlyHint: def.readOnly === true, destructiveHint: def.destructive === true, openWorldHint: false },
      },
      (async (args: Record<string, unknown>, extra: RequestHandlerExtra<ServerRequest, ServerNotification>): Promise<CallToolResult> => {
        let unlisten: (() => void) | undefined;
        try {
          const params = { ...args, shadow: opts.shadow, agent: opts.agent } as Record<string, unknown>;
          if (def.method === 'run') unlisten = progressWhileQueued(client, params, extra);
          // The MCP client's cancel (notifications/cancelled) cancels the daemon's request, which
          // for a run interrupts its command, then kills it.
          const result = await (client.request as (m: MethodName, p: unknown, o: { signal: AbortSignal }) => Promise<unknown>)(
            def.method,
            params as ParamsOf<typeof def.method>,
            { signal: extra.signal },
          );
          // What the user decided (rejections) and the radar's overlaps, told on the next tool result.
          return await withNotes(
            client,
            opts.shadow,
            opts.agent,
            await radar.addTo({ content: [{ type: 'text', text: (def.render ?? json)(result) }] }),
          );
        } catch (err) {
          return await withNotes(client, opts.shadow, opts.agent, await radar.addTo(errorResult(err)));
        } finally {
          unlisten?.();
        }
      }) as never,
    );
  }
  return server;
}

/**
 * A run gets an id of the server's own, and while it waits for another agent's job on the shared
 * mount, the MCP client hears it as progress (when it gave a progressToken): whom it waits for and
 * for how long. Returns how to stop listening.
 */
function progressWhileQueued(
  client: ShadowClient,
  params: Record<string, unknown>,
  extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
): (() => void) | undefined {
  const token = extra._meta?.progressToken;
  if (token === undefined) return undefined;
  const runId = `mcp-${crypto.randomBytes(6).toString('hex')}`;
  params.runId = runId;
  let progress = 0;
  return client.on('run/queued', (p) => {
    if (p.runId !== runId) return;
    progress++;
    void extra
      .sendNotification({
        method: 'notifications/progress',
        params: {
          progressToken: token,
          progress,
          message: `queued for ${Math.round(p.queuedMs / 1000)} s behind agent ${p.waitingFor}'s job on the shared mount`,
        },
      })
      .catch(() => undefined);
  });
}
