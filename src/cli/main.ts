// The shadowfs command line: one yargs command module per command (src/cli/commands).
import * as path from 'path';
import yargs from 'yargs';
import { activateCommand } from './commands/activate';
import { demoCommand } from './commands/demo';
import { doctorCommand } from './commands/doctor';
import { layerCommand } from './commands/layer';
import { lintsCommand } from './commands/lints';
import { listCommand } from './commands/list';
import { maskCommand } from './commands/mask';
import { mountCommand } from './commands/mount';
import { runCommand } from './commands/run';
import { serveCommand } from './commands/serve';
import { radarCommand } from './commands/radar';
import { auditCommand } from './commands/audit';
import { shellCommand } from './commands/shell';
import { statsCommand } from './commands/stats';
import { statusCommand } from './commands/status';
import { unmountCommand } from './commands/unmount';
import { viewCommand } from './commands/view';
import { reviewCommand } from './commands/review';
import { applyCommand, checkpointCommand, checkpointsCommand, diffCommand, patchCommand, restoreCommand } from './commands/work';
import { fileCommand } from './commands/file';
import { mcpCommand } from './commands/mcp';
import { stopCommand } from './commands/stop';
import { ExitCode } from './output';

/** The commands whose `[paths..]` "--" may come before. */
const PATH_COMMANDS = new Set(['diff', 'patch', 'apply', 'review', 'lints']);

export function main(argv: string[]): void {
  // Output into a pipe whose reader left (`shadowfs run … | head -1`): end as a program killed by
  // SIGPIPE does (128 + 13), not with an unhandled error.
  for (const out of [process.stdout, process.stderr])
    out.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(141);
      throw err;
    });
  refuseStrayDoubleDash(argv);
  void yargs(dashAsPath(argv))
    .scriptName('shadowfs')
    // A shadow named by a path (".", "../proj", "/home/me/proj/src": its folder or mount point, or
    // a path inside either) is sent absolute: the daemon stands elsewhere. Names have no "/".
    .middleware((a) => {
      if (typeof a.shadow === 'string' && (a.shadow === '.' || a.shadow === '..' || a.shadow.includes('/')))
        a.shadow = path.resolve(a.shadow);
    })
    // "--" ends the options: before a command (run, shell), which reads what follows it, or, as
    // in git, before paths (diff, patch, apply, review, lints), which take them as their paths.
    // Anywhere else it would be dropped silently, and a path command given none means every path
    // (an `apply S -- one/file` applied the whole layer), so it is refused.
    .middleware((a) => {
      const rest = ((a['--'] as unknown[] | undefined) ?? []).map(String);
      if (rest.length === 0) return;
      const command = String(a._[0] ?? '');
      if (command === 'run' || command === 'shell') return;
      if (PATH_COMMANDS.has(command) && a._.length === 1) {
        a.paths = [...((a.paths as unknown[] | undefined) ?? []).map(String), ...rest];
        a['--'] = [];
        return;
      }
      strayDoubleDash(a._.map(String), rest);
    })
    .command(mountCommand)
    .command(unmountCommand)
    .command(listCommand)
    .command(layerCommand)
    .command(activateCommand)
    .command(maskCommand)
    .command(viewCommand)
    .command(runCommand)
    .command(shellCommand)
    .command(radarCommand)
    .command(auditCommand)
    .command(lintsCommand)
    .command(diffCommand)
    .command(patchCommand)
    .command(applyCommand)
    .command(reviewCommand)
    .command(checkpointCommand)
    .command(restoreCommand)
    .command(checkpointsCommand)
    .command(fileCommand)
    .command(mcpCommand)
    .command(statsCommand)
    .command(statusCommand)
    .command(stopCommand)
    .command(serveCommand)
    .command(doctorCommand)
    .command(demoCommand)
    .demandCommand(1, 'name a command (see --help)')
    .parserConfiguration({ 'populate--': true })
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

/**
 * Refuses a "--" after a command that takes neither a command nor paths after it, before yargs
 * reads the words: `layer write S A -- --take` would otherwise end as "not enough non-option
 * arguments", which says nothing of the "--" nor of how to name such a file.
 */
function refuseStrayDoubleDash(argv: string[]): void {
  const at = argv.indexOf('--');
  if (at < 0) return;
  const words = argv.slice(0, at).filter((w) => !w.startsWith('-'));
  // Options may come before the command (`--agent a run S -- cmd`), and their values are words
  // too: any word that names a command taking what follows "--" leaves it to yargs and the
  // middleware below, which knows the command for sure.
  if (words.some((w) => w === 'run' || w === 'shell' || PATH_COMMANDS.has(w))) return;
  strayDoubleDash(words, argv.slice(at + 1));
}

/**
 * yargs reads a lone "-" given for a single `<path>` as an empty string, the shadow root
 * (`layer cat S A -` said "path names the shadow root itself"): for the commands that take one
 * (`layer …` and `file …`, which give "-" no meaning of its own), it is passed as "./-", the same
 * relative path. Every other command's words are left as they are: a run's command after "--"
 * (`run S --agent a -- tar cf - src`) keeps its "-", one without "--" is refused (yargs would
 * drop the "-"; review), and paths after "--" are kept by yargs.
 */
function dashAsPath(argv: string[]): string[] {
  const at = argv.indexOf('--');
  const end = at < 0 ? argv.length : at;
  const command = argv.slice(0, end).find((w) => !w.startsWith('-'));
  if ((command === 'run' || command === 'shell') && at < 0 && argv.includes('-')) {
    // yargs drops a lone "-" from a command given without "--" (`run S --agent a echo - x` ran
    // `echo x`): refused, never run as something else.
    process.stderr.write(
      `shadowfs: a "-" in the command of ${command} is kept only after "--": shadowfs ${command} … -- ${argv.slice(argv.indexOf(command) + 1).join(' ')}\n` +
        'Run "shadowfs --help" for usage.\n',
    );
    process.exit(ExitCode.USAGE);
  }
  if (command !== 'layer' && command !== 'file') return argv;
  return argv.map((w, i) => (i < end && w === '-' ? './-' : w));
}

function strayDoubleDash(before: string[], rest: string[]): never {
  const paths = [...PATH_COMMANDS].join(', ');
  const dashed = rest.find((w) => w.startsWith('-'));
  process.stderr.write(
    `shadowfs: "--" goes before a command (run, shell) or before paths (${paths}); ${before.join(' ') || 'shadowfs'} takes no arguments after it: ${rest.join(' ')}\n` +
      (dashed ? `Name a path that starts with "-" as ./${dashed}.\n` : '') +
      'Run "shadowfs --help" for usage.\n',
  );
  process.exit(ExitCode.USAGE);
}
