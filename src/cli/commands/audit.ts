// `shadowfs audit <shadow> --agent A [--json] [--since T] [--path GLOB] [--op OP...] [--limit N]`:
// what the agent's programs did through the shadow (its layer's audit trail, docs/audit-trail.md):
// opens, execs, creations, writes with their byte counts, truncations, deletions, renames, links;
// oldest first, and how many older entries the bounded record dropped.
import type { Argv, CommandModule } from 'yargs';
import type { ShadowClient } from '../../client/client';
import type { AuditEntry } from '../../protocol/audit';
import { AUDIT_OP_NAMES } from '../../protocol/constants';
import { connectCli } from '../daemon-call';
import { emit, reportError, shownName } from '../output';

interface Args {
  shadow: string;
  agent: string;
  json: boolean;
  since?: string;
  path?: string;
  op?: string[];
  limit?: number;
}

/** One entry as a line for people: time, process, op, path(s), bytes. */
export function describeAuditEntry(e: AuditEntry): string {
  const who = `${shownName(e.comm) || '?'}[${e.pid || '?'}]`;
  const op = e.op === 'open' && e.write ? 'open-w' : e.op;
  const [p, to] = [shownName(e.path), shownName(e.to ?? '')];
  const where = e.op === 'rename' || e.op === 'link' || e.op === 'symlink' ? `${p} -> ${to}` : p;
  const bytes = e.bytes ? ` (${e.bytes} bytes written)` : '';
  return `${e.time}  ${who.padEnd(22)} ${op.padEnd(8)} ${where}${bytes}`;
}

export const auditCommand: CommandModule<object, Args> = {
  command: 'audit <shadow>',
  describe: "What an agent's programs did through the shadow: opened, executed, created, wrote, deleted, renamed (its layer's audit trail)",
  builder: (y: Argv) =>
    y
      .positional('shadow', { type: 'string', demandOption: true, describe: 'the shadow name or mount point' })
      .option('agent', { type: 'string', demandOption: true, describe: 'whose layer' })
      .option('since', {
        type: 'string',
        describe: 'only entries since this time: ISO 8601, or a duration back from now (90s, 15m, 2h, 1d)',
      })
      .option('path', {
        type: 'string',
        describe: 'only entries whose path matches this glob (*, ?, **; without "/": a name at any depth)',
      })
      .option('op', { type: 'string', array: true, describe: `only these ops (${AUDIT_OP_NAMES.join(', ')})` })
      .option('limit', { type: 'number', describe: 'only the newest N of those that match' })
      .option('json', { type: 'boolean', default: false }) as unknown as Argv<Args>,
  handler: async (args) => {
    let client: ShadowClient | undefined;
    try {
      // Durations are taken here, against this machine's clock, and sent as a time.
      // The parser lives with the audit's own code (zod): loaded only when asked.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { parseSince } = require('../../shadow/audit') as typeof import('../../shadow/audit');
      const since = args.since === undefined ? undefined : String(parseSince(args.since));
      client = await connectCli();
      const r = await client.request('layer.audit', {
        shadow: args.shadow,
        agent: args.agent,
        ...(since === undefined ? {} : { since }),
        ...(args.path === undefined ? {} : { path: args.path }),
        ...(args.op === undefined ? {} : { ops: args.op as Array<(typeof AUDIT_OP_NAMES)[number]> }),
        ...(args.limit === undefined ? {} : { limit: args.limit }),
      });
      const lines = r.entries.map(describeAuditEntry);
      if (r.matched > r.entries.length) lines.unshift(`(${r.matched - r.entries.length} older matching entries not shown: --limit)`);
      if (r.dropped > 0)
        lines.unshift(
          `(${r.dropped} entries were dropped: the oldest, to keep the record within ${r.maxEntries} entries / ${r.maxBytes} bytes)`,
        );
      if (r.entries.length === 0) lines.push(`nothing recorded for ${r.agent}${r.kept ? ' that matches' : ''}`);
      emit(args, r, lines.join('\n'));
    } catch (err) {
      reportError(args, err);
    } finally {
      client?.close();
    }
  },
};
