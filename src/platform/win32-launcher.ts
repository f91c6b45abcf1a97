// The launcher a run's command is started through on Windows: Node cannot create a process
// suspended, so the launcher (`process.execPath -e LAUNCHER`) is started first, put in the run's
// Job Object (win32-job.ts), and only then let go with one line on its stdin; the command it
// spawns is born inside the job. This file holds the launcher's script, its exit codes and the
// command line and environment it is started with.

/**
 * Processes of a run's job that are not the command's: the launcher (a node process that stays
 * until the command exits). ActiveProcessLimit is the run's `processes` plus this.
 */
export const LAUNCHER_PROCESSES = 1;

/** The line that lets a launcher start its command. */
export const GO = 'go\n';
/** Exit code of a launcher that was never let go (its stdin ended or said something else). */
export const LAUNCHER_NOT_STARTED = 125;
/** Exit code of a launcher whose command could not be started (as a shell says for a missing command). */
export const LAUNCHER_CANNOT_START = 127;
/**
 * The launcher's own node must not see the run's NODE_OPTIONS (a --require or --inspect meant for
 * the command would act on the launcher); it is handed over under this name and restored for the
 * command.
 */
const NODE_OPTIONS_CARRIER = 'SHADOWFS_LAUNCHER_NODE_OPTIONS';
/**
 * Set ("1") in the launcher's environment when the command's arguments are one finished command
 * line (a cmd.exe line from win32-command.ts) that the launcher's spawn must pass as it is, with
 * windowsVerbatimArguments; never passed on to the command.
 */
const VERBATIM_FLAG = 'SHADOWFS_LAUNCHER_VERBATIM';

/**
 * The launcher, run as `node -e LAUNCHER -- command args...`. It reads its stdin up to the first
 * newline; that line must be "go", else (or at the end of stdin) it exits with 125 and starts
 * nothing. Then it spawns the command with its own stdout and stderr (stdin: nothing; the
 * launcher's stdin is the daemon's channel), with windowsVerbatimArguments when the daemon said so
 * in SHADOWFS_LAUNCHER_VERBATIM (so Node does not quote a finished cmd.exe line again), passes on
 * SIGINT, SIGTERM, SIGBREAK and SIGHUP, and exits with the command's exit code (127 with a message
 * when the command cannot start).
 */
export const LAUNCHER = `'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const argv = process.argv.slice(1);
const say = (m) => { try { fs.writeSync(2, 'shadowfs: ' + m + '\\n'); } catch {} };
let line = '';
let decided = false;
const notStarted = (why) => {
  if (decided) return;
  decided = true;
  say('the command did not start: ' + why);
  process.exit(${LAUNCHER_NOT_STARTED});
};
const start = () => {
  decided = true;
  process.stdin.removeAllListeners('data');
  process.stdin.destroy();
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.toUpperCase() === 'NODE_OPTIONS') delete env[k];
  if (env.${NODE_OPTIONS_CARRIER} !== undefined) env.NODE_OPTIONS = env.${NODE_OPTIONS_CARRIER};
  delete env.${NODE_OPTIONS_CARRIER};
  const verbatim = env.${VERBATIM_FLAG} === '1';
  delete env.${VERBATIM_FLAG};
  let child;
  try {
    child = spawn(argv[0], argv.slice(1), {
      stdio: ['ignore', 'inherit', 'inherit'],
      env,
      windowsHide: true,
      windowsVerbatimArguments: verbatim,
    });
  } catch (err) {
    say('cannot start ' + argv[0] + ': ' + err.message);
    process.exit(${LAUNCHER_CANNOT_START});
  }
  child.once('error', (err) => {
    say('cannot start ' + argv[0] + ': ' + err.message);
    process.exit(${LAUNCHER_CANNOT_START});
  });
  child.once('exit', (code) => process.exit(code === null ? 1 : code));
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGBREAK', 'SIGHUP']) {
    process.on(sig, () => {
      try { child.kill(sig); } catch {}
    });
  }
};
if (argv.length === 0) notStarted('no command was given');
process.stdin.on('data', (chunk) => {
  line += chunk.toString('latin1');
  const nl = line.indexOf('\\n');
  if (nl < 0) return;
  if (line.slice(0, nl).replace(/\\r$/, '') === 'go') start();
  else notStarted('the daemon did not let it go');
});
process.stdin.on('end', () => notStarted('the daemon closed its channel before letting it go'));
process.stdin.on('error', (err) => notStarted('its channel to the daemon failed: ' + err.message));
`;

/**
 * Set in a session launcher's environment (SESSION_LAUNCHER): the named pipe it reads its "go"
 * line from (its stdin is the terminal, which the user types into). Never passed on to the command.
 */
const GO_PIPE = 'SHADOWFS_LAUNCHER_GO_PIPE';

/**
 * The launcher of a shell session (win32-session.ts), run on the session's pseudo console as
 * `node -e SESSION_LAUNCHER -- command args...`. Its stdin is the terminal, so it takes its "go"
 * line from the named pipe named in SHADOWFS_LAUNCHER_GO_PIPE instead (no line, or another one, or
 * the pipe failing: exit 125, nothing started). Then it spawns the command on the same console:
 * with its own standard handles when they are the console's (Windows), else with handles it opens
 * on CONIN$ and CONOUT$ (wine starts a pseudo console's first process with no standard handles).
 * It ignores Ctrl-C and Ctrl-Break: the console delivers them to every process on it, the command
 * included, which decides for itself. It exits with the command's exit code.
 */
export const SESSION_LAUNCHER = `'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const net = require('net');
const tty = require('tty');
const argv = process.argv.slice(1);
let stdio = 'inherit';
let err = 2;
if (!tty.isatty(0) || !tty.isatty(1)) {
  try {
    const i = fs.openSync('\\\\\\\\.\\\\CONIN$', 'r+');
    const o = fs.openSync('\\\\\\\\.\\\\CONOUT$', 'r+');
    stdio = [i, o, o];
    err = o;
  } catch {}
}
const say = (m) => { try { fs.writeSync(err, 'shadowfs: ' + m + '\\r\\n'); } catch {} };
const pipe = process.env.${GO_PIPE};
delete process.env.${GO_PIPE};
let decided = false;
const notStarted = (why) => {
  if (decided) return;
  decided = true;
  say('the session did not start: ' + why);
  process.exit(${LAUNCHER_NOT_STARTED});
};
for (const sig of ['SIGINT', 'SIGBREAK']) process.on(sig, () => {});
const start = () => {
  decided = true;
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.toUpperCase() === 'NODE_OPTIONS') delete env[k];
  if (env.${NODE_OPTIONS_CARRIER} !== undefined) env.NODE_OPTIONS = env.${NODE_OPTIONS_CARRIER};
  delete env.${NODE_OPTIONS_CARRIER};
  const verbatim = env.${VERBATIM_FLAG} === '1';
  delete env.${VERBATIM_FLAG};
  let child;
  try {
    child = spawn(argv[0], argv.slice(1), { stdio, env, windowsVerbatimArguments: verbatim });
  } catch (e) {
    say('cannot start ' + argv[0] + ': ' + e.message);
    process.exit(${LAUNCHER_CANNOT_START});
  }
  child.once('error', (e) => {
    say('cannot start ' + argv[0] + ': ' + e.message);
    process.exit(${LAUNCHER_CANNOT_START});
  });
  child.once('exit', (code) => process.exit(code === null ? 1 : code));
};
if (argv.length === 0) notStarted('no command was given');
else if (!pipe) notStarted('no channel to the daemon was given');
else {
  let line = '';
  const channel = net.connect(pipe);
  channel.on('data', (chunk) => {
    line += chunk.toString('latin1');
    const nl = line.indexOf('\\n');
    if (nl < 0 || decided) return;
    if (line.slice(0, nl).replace(/\\r$/, '') === 'go') start();
    else notStarted('the daemon did not let it go');
    channel.destroy();
  });
  channel.on('end', () => notStarted('the daemon closed its channel before letting it go'));
  channel.on('error', (e) => notStarted('its channel to the daemon failed: ' + e.message));
}
`;

/** Options of launch(); stdin of the command is always nothing, stdout and stderr are pipes. */
export interface LaunchOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /**
   * argv[1..] is one finished command line (win32-command.ts's cmd.exe lines): the launcher
   * spawns the command with windowsVerbatimArguments, so Node adds no quotes of its own.
   */
  windowsVerbatimArguments?: boolean;
  /**
   * Called with the launcher's pid once it is in the job and before it is let go (the run lowers
   * its token here). When it throws, the launcher is never let go: it is killed having started
   * nothing, and launch() throws what it threw.
   */
  beforeGo?: (pid: number) => void;
}

/** The launcher's command line and environment for `argv` (argv[0] is the program). */
export function launcherCommand(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  opts: {
    windowsVerbatimArguments?: boolean;
    /** A session's launcher (SESSION_LAUNCHER) reading its go line from this named pipe; default: a run's (LAUNCHER). */
    goPipe?: string;
  } = {},
): { file: string; args: string[]; env: NodeJS.ProcessEnv } {
  if (argv.length === 0) throw new Error('launcherCommand: no command given');
  const out: NodeJS.ProcessEnv = {};
  let nodeOptions: string | undefined;
  for (const [k, v] of Object.entries(env)) {
    const name = k.toUpperCase();
    if (name === 'NODE_OPTIONS') nodeOptions = v;
    // The launcher's own variables are the daemon's to set, never the run's environment's.
    else if (name !== NODE_OPTIONS_CARRIER && name !== VERBATIM_FLAG && name !== GO_PIPE) out[k] = v;
  }
  if (nodeOptions !== undefined) out[NODE_OPTIONS_CARRIER] = nodeOptions;
  if (opts.windowsVerbatimArguments) out[VERBATIM_FLAG] = '1';
  if (opts.goPipe !== undefined) out[GO_PIPE] = opts.goPipe;
  const script = opts.goPipe === undefined ? LAUNCHER : SESSION_LAUNCHER;
  // `--` ends node's own options, so a command that starts with "-" is not taken for one.
  return { file: process.execPath, args: ['-e', script, '--', ...argv], env: out };
}
