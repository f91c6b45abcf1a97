// `shadowfs activate <shadow> <agent>` or `shadowfs activate <shadow> --none`
import type { Argv, CommandModule } from 'yargs';
import { ShadowError } from '../../common/errors';
import { withClient } from '../daemon-call';

interface Args {
  shadow: string;
  agent?: string;
  none: boolean;
  json: boolean;
}

export const activateCommand: CommandModule<object, Args> = {
  command: 'activate <shadow> [agent]',
  describe: "Show an agent's layer on the shared mount (--none: the folder exactly, read-only)",
  builder: (y: Argv) =>
    y
      .positional('shadow', { type: 'string', demandOption: true })
      .positional('agent', { type: 'string' })
      .option('none', { type: 'boolean', default: false, describe: 'activate no layer' })
      .option('json', { type: 'boolean', default: false }) as Argv<Args>,
  handler: (args) =>
    withClient(
      args,
      async (c) => {
        if (args.none === (args.agent !== undefined)) throw new ShadowError('INVALID_AGENT', 'give exactly one of an agent id or --none');
        return c.request('activate', { shadow: args.shadow, agent: args.none ? null : (args.agent ?? null) });
      },
      (r) =>
        r.pinned !== undefined && r.pinned !== r.active
          ? `Active: ${r.active ?? 'none (the folder, read-only)'} for a running job; ${r.pinned ?? 'the folder'} once the jobs end`
          : `Active: ${r.active ?? 'none (the folder, read-only)'} (${r.ms.toFixed(2)} ms, ${r.epoch ? 'epoch' : 'per-entry'} invalidation of ${r.paths} paths)`,
    ),
};
