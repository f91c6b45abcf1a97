// Notes to the agent: what the user decided about its work since its last tool call, appended
// to its next MCP tool result once (the daemon marks them told). Today: the hunks the user
// rejected in review, with the reason. Kept apart from the tools themselves (server.ts) so that
// any tool's result carries them. Asked through the DaemonLink, so after a daemon restart they are
// asked of the new daemon (what the user decided is in its state, not in a connection).
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { DaemonLink } from './link';

/** The notes not yet told to `agent`, one line each ('' when none, or when they cannot be read now). */
export async function pendingNotes(link: DaemonLink, shadow: string, agent: string): Promise<string> {
  let r;
  try {
    r = await link.request('layer.rejections', { shadow, agent, take: true });
  } catch {
    return ''; // told next time
  }
  return r.rejections
    .map(
      (x) =>
        `the user rejected your change to ${x.path}${x.lines ? ` lines ${x.lines}` : ''}: ${x.reason}` +
        (x.reverted ? ' (it was taken out of your layer)' : ' (it is still in your layer; change or revert it)'),
    )
    .join('\n');
}

/** `result` with the pending notes as a text part of its own at the end. */
export async function withNotes(link: DaemonLink, shadow: string, agent: string, result: CallToolResult): Promise<CallToolResult> {
  const notes = await pendingNotes(link, shadow, agent);
  return notes ? { ...result, content: [...result.content, { type: 'text', text: `Note from shadowfs:\n${notes}` }] } : result;
}
