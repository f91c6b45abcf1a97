// `shadowfs demo [folder]`: shows what a shadow does, on the bundled example project or on a
// folder of yours (which it never writes).
import type { Argv, CommandModule } from 'yargs';
import { reportError } from '../output';

interface Args {
  folder?: string;
  json: boolean;
}

export const demoCommand: CommandModule<object, Args> = {
  command: 'demo [folder]',
  describe: 'Mount a shadow, edit and delete files inside it, show the real folder unchanged, unmount',
  builder: (y: Argv) =>
    y
      .positional('folder', { type: 'string', describe: 'folder to shadow (default: the bundled example project)' })
      .option('json', { type: 'boolean', default: false, describe: 'print a JSON summary at the end instead of prose' }) as Argv<Args>,
  handler: async (args) => {
    try {
      // Loaded here: the demo mounts in this process (the native module, the shadow's code).
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { runDemo } = require('../../demo') as typeof import('../../demo');
      const summary = await runDemo(args.folder, args.json ? () => undefined : (line) => process.stdout.write(`${line}\n`));
      if (args.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
      if (!summary.folderUnchanged) process.exitCode = 1;
    } catch (err) {
      reportError(args, err);
    }
  },
};
