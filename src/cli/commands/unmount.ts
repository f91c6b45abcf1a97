// `shadowfs unmount <name|dir> [--lazy]`
import type { Argv, CommandModule } from 'yargs';
import { withClient } from '../daemon-call';

interface Args {
  shadow: string;
  lazy: boolean;
  json: boolean;
}

export const unmountCommand: CommandModule<object, Args> = {
  command: 'unmount <shadow>',
  describe: 'Unmount a shadow (by name or mount point) and drop its layers',
  builder: (y: Argv) =>
    y
      .positional('shadow', { type: 'string', demandOption: true, describe: 'name or mount point' })
      .option('lazy', { type: 'boolean', default: false, describe: 'detach now even if programs still use it' })
      .option('json', { type: 'boolean', default: false }) as Argv<Args>,
  handler: (args) =>
    withClient(
      args,
      (c) => c.request('unmount', { shadow: args.shadow, lazy: args.lazy }),
      (r) => `Unmounted ${r.name}.`,
      { autostart: false },
    ),
};
