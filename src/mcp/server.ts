// The MCP face of shadowfs: one agent's tools on one shadow, over stdio, built on the official
// MCP TypeScript SDK. Every tool is a thin call to the daemon through shadowfs/client (tools.ts:
// their schemas and calls; shape.ts: results bounded for a model's context). Writing the user's
// folder (apply) is offered only when the server was started with it allowed. The client must
// come restricted to this shadow and agent (ClientOptions.scope): the daemon, not this server, is
// what holds the agent to its layer; after a daemon restart the server connects again through
// McpOptions.reconnect, restricted the same way.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ShadowClient } from '../client/client';
import { type ErrorCode, ShadowError } from '../common/errors';
import { DaemonLink } from './link';
import { withNotes } from './notes';
import { OwnView } from './own-view';
import { RadarNotes } from './radar-notes';
import { BackgroundRuns } from './runs';
import { output, toolResult, type ToolOutput } from './shape';
import { APPLY, REVIEW, TOOLS, type Extra, type ToolContext } from './tools';

export interface McpOptions {
  shadow: string;
  agent: string;
  /** Offer the apply tool (writes the user's folder). */
  allowApply?: boolean;
  version: string;
  /** Connects again (restricted to this agent) when the daemon went away; without it a lost daemon stays lost. */
  reconnect?: () => Promise<ShadowClient>;
  /** Open a view of the agent's own before the first tool call is served (use_own_view at once). */
  ownView?: boolean;
}

/** What an agent can do about each error: said after the code and message of every error result. */
const WHAT_TO_DO: Partial<Record<ErrorCode, string>> = {
  NOT_FOUND: 'check the path with glob or list_directory (paths are relative to the project root)',
  INVALID_PATH: 'give a path relative to the project root (or absolute inside it), without ".."',
  IS_DIRECTORY: 'name a file; list_directory shows what the directory holds',
  NOT_A_DIRECTORY: 'a part of the path is a file, not a directory: check it with list_directory',
  PATH_THROUGH_SYMLINK: 'give the path the link points to',
  NO_MATCH: 'read_file the lines again and copy oldText exactly, whitespace and indentation included',
  AMBIGUOUS_MATCH: 'include more surrounding lines in oldText so that it occurs once, or pass replaceAll: true',
  CONFLICT: 'the file changed since you read it, or the path is in the way: read it again and redo the change',
  INVALID_ARGUMENT: "check the arguments against the tool's input schema (tools/list)",
  FILE_TOO_LARGE: 'read it in parts with offset and limit, or work on it with run_command',
  TIMEOUT: 'narrow the request (a simpler pattern, a path) or give a larger timeout',
  ABORTED: 'the call was cancelled; call again if it is still needed',
  SCOPE_DENIED: 'this server does not let this agent do that; ask the user',
  POLICY_DENIED: "the user's policy forbids it; ask the user",
  DAEMON_UNAVAILABLE:
    'call the tool again: the server connects to the daemon again; if that fails too, ask the user to start it (shadowfs serve)',
  UNKNOWN_SHADOW: 'ask the user to mount the project again (shadowfs mount), or to start this server with --folder',
  NOT_MOUNTED: 'call again (the daemon mounts it again); if it persists, ask the user to check shadowfs status',
  UNKNOWN_AGENT: 'write or edit a file first: your layer is made then',
  NAMESPACE_UNAVAILABLE: 'runs cannot be confined on this system: ask the user',
  NOT_SUPPORTED: 'this system cannot do that: try without that option',
  LAYER_BUSY: 'another of your calls is using the layer: try again in a moment',
  MOUNT_BUSY: 'try again in a moment',
  INTERNAL: 'this is a shadowfs bug: tell the user (its daemon log says more) and go on another way',
};

/** An error as an agent reads it: the code first, what happened, then what to do. */
export function errorOutput(err: unknown): ToolOutput {
  const e = err instanceof ShadowError ? err : new ShadowError('INTERNAL', (err as Error)?.message ?? String(err));
  const todo = WHAT_TO_DO[e.code] ?? 'read the message above: it says what is wrong';
  return { ...output(`${e.code}: ${e.message}\nWhat to do: ${todo}.`), isError: true };
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
      instructions: `Tools on shadow "${opts.shadow}" as agent "${opts.agent}": your edits go to your own layer, never to the user's folder${opts.allowApply ? ' (except the apply tool, when asked)' : ''}. Paths are relative to the project root; absolute paths inside the project (as pwd and stack traces in runs show them) work too. Line numbers are 1-based everywhere. Results are bounded in size and say how to get what they leave out.`,
    },
  );
  // The SDK answers arguments its schema refuses (and unknown tools) with its own message; it
  // gets the same code-first shape as every other error.
  (server as unknown as { createToolError: (message: string) => CallToolResult }).createToolError = (message) =>
    toolResult(errorOutput(new ShadowError('INVALID_ARGUMENT', message)));
  const link = new DaemonLink(client, opts.shadow, opts.agent, opts.reconnect);
  // Overlaps with other agents' work or the user's edits, told on the next tool result (heard on every connection).
  const radar = new RadarNotes(link, opts.shadow, opts.agent);
  const ownView = new OwnView(link, opts.shadow, opts.agent);
  // With --own-view, no tool runs before the view is there (or failed to open: then said once).
  let ready: Promise<string | undefined> = opts.ownView
    ? ownView.use().then(
        () => undefined,
        (err: unknown) =>
          `no view of your own could be opened (${errorOutput(err).text.split('\n')[0]}): your runs and lints take turns with other agents; call use_own_view to try again`,
      )
    : Promise.resolve(undefined);
  // The view this server opened is closed as it ends.
  const closeServer = server.close.bind(server);
  server.close = async () => {
    await ownView.close();
    await closeServer();
  };
  const ctx: ToolContext = {
    shadow: opts.shadow,
    agent: opts.agent,
    link,
    ownView,
    runs: new BackgroundRuns(link),
    progressWhileQueued: (runId, extra) => progressWhileQueued(link, runId, extra),
  };
  for (const def of opts.allowApply ? [...TOOLS, REVIEW, APPLY] : TOOLS) {
    server.registerTool(
      def.name,
      {
        title: def.title,
        description: def.description,
        inputSchema: def.inputSchema as never,
        annotations: { readOnlyHint: def.readOnly === true, destructiveHint: def.destructive === true, openWorldHint: false },
      },
      (async (args: Record<string, unknown>, extra: Extra): Promise<CallToolResult> => {
        let out: ToolOutput;
        const failedView = await ready;
        ready = Promise.resolve(undefined);
        try {
          // The MCP client's cancel (notifications/cancelled) aborts extra.signal, which cancels
          // the daemon's request: for a run, its command is interrupted, then killed.
          out = await def.call(ctx, args, extra);
        } catch (err) {
          out = errorOutput(err);
        }
        if (failedView) out = { ...out, notes: [...out.notes, `[shadowfs] ${failedView}`] };
        // What the user decided (rejections of its hunks) and the radar's overlaps, told on the next result.
        return withNotes(link, opts.shadow, opts.agent, await radar.addTo(toolResult(out)));
      }) as never,
    );
  }
  return server;
}

/**
 * While a run waits for another agent's job on the shared mount, the MCP client hears it as
 * progress (when it gave a progressToken): whom it waits for and for how long. Returns how to
 * stop listening.
 */
function progressWhileQueued(link: DaemonLink, runId: string, extra: Extra): (() => void) | undefined {
  const token = extra._meta?.progressToken;
  if (token === undefined) return undefined;
  let progress = 0;
  return link.on('run/queued', (p) => {
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
