// `shadowfs mask <shadow> [--agent A] [--set GLOB...] [--default] [--clear]`: masked paths, the
// paths of the folder that do not exist for an agent (docs/masked-paths.md).
import type { Argv, CommandModule } from 'yargs';
import { ShadowError } from '../../common/errors';
import { withClient } from '../daemon-call';

interface Args {
  shadow: string;
  agent?: string;
  set?: string[];
  default: boolean;
  clear: boolean;
  json: boolean;
}

export const maskCommand: CommandModule<object, Args> = {
  command: 'mask <shadow>',
  describe:
    "Show or set the paths an agent must not see (--agent A; without it, the shadow's default for agents without a mask of their own)",
  builder: (y: Argv) =>
    y
      .positional('shadow', { type: 'string', demandOption: true })
      .option('agent', { type: 'string', describe: "the agent (default: the shadow's default mask)" })
      .option('set', { type: 'string', array: true, describe: 'mask these globs, as in .gitignore (".env", "*.pem", ".aws/**")' })
      .option('default', { type: 'boolean', default: false, describe: 'mask the list shadowfs offers (.env, keys, credentials)' })
      .option('clear', { type: 'boolean', default: false, describe: "remove the mask (an agent's: the default applies again)" })
      .option('json', { type: 'boolean', default: false })
      .example('$0 mask web --default', 'every agent of shadow web: no .env, keys or credentials')
      .example("$0 mask web --agent a --set .env '*.pem' config/secrets.json", 'agent a: these') as Argv<Args>,
  handler: (args) =>
    withClient(
      args,
      async (c) => {
        const given = [args.set !== undefined, args.default, args.clear].filter(Boolean).length;
        if (given > 1) throw new ShadowError('INVALID_ARGUMENT', 'give one of --set, --default and --clear (none: show the mask)');
        return c.request('layer.mask', {
          shadow: args.shadow,
          agent: args.agent ?? null,
          ...(args.set !== undefined ? { globs: args.set } : {}),
          ...(args.default ? { offered: true } : {}),
          ...(args.clear ? { clear: true } : {}),
        });
      },
      (r) => {
        const who = r.agent === null ? 'Default mask' : `Mask of ${r.agent}`;
        const from =
          r.source === 'default' && r.agent !== null
            ? " (the shadow's default)"
            : r.source === 'inherited'
              ? ' (of the layer it was copied from)'
              : '';
        if (r.globs.length === 0) return `${who}: nothing masked${r.agent === null ? '' : from}.`;
        return `${who}${from}:\n${r.globs.map((g) => `  ${g}`).join('\n')}`;
      },
    ),
};
