// The shadowfs command line: one yargs command module per command (src/cli/commands).
import yargs from 'yargs';
import { demoCommand } from './commands/demo';
import { mountCommand } from './commands/mount';
import { ExitCode } from './output';

export function main(argv: string[]): void {
  void yargs(argv)
    .scriptName('shadowfs')
    .command(mountCommand)
    .command(demoCommand)
    .demandCommand(1, 'name a command (see --help)')
    .strict()
    .fail((msg, err, y) => {
      if (err) throw err;
      process.stderr.write(`${y.help() && ''}shadowfs: ${msg}\nRun "shadowfs --help" for usage.\n`);
      process.exit(ExitCode.USAGE);
    })
    .help()
    .version()
    .parseAsync();
}
