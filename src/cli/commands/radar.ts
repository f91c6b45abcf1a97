// `shadowfs radar <shadow> [--agent A] [--json] [--watch]`: where agents' work on a shadow
// collides now (the daemon's conflict radar): paths two layers change to different contents, and
// copies whose file in the folder changed since the agent took them. --watch goes on printing
// each change as the daemon tells it (radar/changed) until Ctrl-C.
import type { Argv, CommandModule } from 'yargs';
import type { ShadowClient } from '../../client/client';
import type { NotificationParamsOf, Overlap } from '../../protocol/methods';
import { connectCli } from '../daemon-call';
import { emit, reportError, shownName } from '../output';

interface Args {
  shadow: string;
  agent?: string;
  json: boolean;
  watch: boolean;
}

const clock = (iso: string): string => new Date(iso).toLocaleTimeString();

/** One overlap as a line for people. */
export function describeOverlap(o: Overlap): string {
  if (o.kind === 'layers') return `${shownName(o.path)}: changed by ${o.agents.join(' and ')} (since ${clock(o.since)})`;
  const now = o.folder ? `now ${o.folder.size} bytes` : 'now removed';
  const was = o.base ? `was ${o.base.size} bytes` : 'had no such file when the agent made its own';
  return `${shownName(o.path)}: changed in the folder since ${o.agents[0]} copied it (${was}, ${now}; since ${clock(o.since)})`;
}

export const radarCommand: CommandModule<object, Args> = {
  command: 'radar <shadow>',
  describe:
    "Where agents' work collides: paths two agents changed differently, and files the developer changed in the folder since an agent copied them",
  builder: (y: Argv) =>
    y
      .positional('shadow', { type: 'string', demandOption: true, describe: 'the shadow name or mount point' })
      .option('agent', { type: 'string', describe: 'only the overlaps that name this agent' })
      .option('watch', { type: 'boolean', default: false, describe: 'go on printing changes as they happen, until Ctrl-C' })
      .option('json', { type: 'boolean', default: false }) as unknown as Argv<Args>,
  handler: async (args) => {
    let client: ShadowClient | undefined;
    try {
      client = await connectCli();
      const c = client;
      // Listening before asking: nothing that happens between the answer and the watch is lost.
      const later: Array<NotificationParamsOf<'radar/changed'>> = [];
      let live = false;
      const print = (n: NotificationParamsOf<'radar/changed'>): void =>
        emit(
          args,
          { event: 'radar/changed', ...n },
          [...n.added.map((o) => `+ ${describeOverlap(o)}`), ...n.cleared.map((o) => `- ${describeOverlap(o)}`)].join('\n'),
        );
      let shadow = args.shadow;
      if (args.watch)
        c.on('radar/changed', (n) => {
          if (n.shadow !== shadow) return;
          const mine = (o: Overlap): boolean => args.agent === undefined || o.agents.includes(args.agent);
          const f = { ...n, added: n.added.filter(mine), cleared: n.cleared.filter(mine) };
          if (f.added.length || f.cleared.length) {
            if (live) print(f);
            else later.push(f);
          }
        });
      const r = await c.request('radar', { shadow: args.shadow, ...(args.agent !== undefined ? { agent: args.agent } : {}) });
      shadow = r.shadow;
      emit(args, r, r.overlaps.length === 0 ? `no overlaps on ${r.shadow}` : r.overlaps.map(describeOverlap).join('\n'));
      if (!args.watch) return;
      for (const n of later.splice(0)) print(n);
      live = true;
      await new Promise<void>((resolve) => {
        process.once('SIGINT', () => resolve());
        process.once('SIGTERM', () => resolve());
        c.onClose(() => resolve());
      });
    } catch (err) {
      reportError(args, err);
    } finally {
      client?.close();
    }
  },
};
