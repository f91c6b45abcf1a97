// A shell session's program on Windows: started on a pseudo console (ConPTY, through node-pty,
// which the caller hands in) inside the session's Job Object, at Low integrity, exactly as a run's
// command is (win32-processes.ts launchRun): resolved as Windows users write it, then started
// through a launcher that starts nothing until the daemon has put it in the job and lowered its
// token. A run's launcher reads its "go" from its stdin; a session's stdin is the terminal the
// user types into, so its launcher (win32-launcher.ts SESSION_LAUNCHER) reads it from a named pipe
// of this daemon's instead. Everything the program starts is born in the job and dies with it.
//
// What differs from Linux: there are no mount namespaces, so the program runs at the view's own
// mount point, not at the folder's path (the folder stays visible there, and the Low-integrity
// token is what keeps the program from writing it, as for runs); there are no signals, so closing
// a session closes its pseudo console (CTRL_CLOSE_EVENT to everything on it) and then ends the job.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as net from 'net';
import { ShadowError } from '../common/errors';
import { resolveWindowsCommand, type WindowsSpawn } from './win32-command';
import { INTEGRITY_RID, integrityName, lowerIntegrity } from './win32-integrity';
import { launcherCommand, GO } from './win32-launcher';
import type { Win32ProcessGroup } from './win32-processes';

/** What the session needs of its pseudo console: the first process's pid, and a way to end it. */
export interface SessionConsole {
  readonly pid: number;
  kill(): void;
}

export interface Win32SessionOptions<P extends SessionConsole> {
  /** The program and its arguments, as a Windows user writes them (never a cmd.exe line: pass cmd.exe /c for that). */
  argv: string[];
  /** Where it starts: a directory in the agent's view. */
  cwd: string;
  /** The program's whole environment (PATH, PATHEXT and ComSpec are read from it). */
  env: Record<string, string>;
  /** The folder, for messages. */
  folder: string;
  /** Start even when the token cannot be lowered (protected: false), instead of NAMESPACE_UNAVAILABLE. */
  unprotected: boolean;
  /** The session's group, whose Job Object the program is started in. */
  group: Win32ProcessGroup;
  /** Starts `file` with the finished command line `commandLine` on a new pseudo console. */
  spawn: (file: string, commandLine: string, opts: { cwd: string; env: Record<string, string> }) => P;
  /** How long the launcher has to connect to the daemon's pipe (default 60 s: node.exe's start under load). */
  connectTimeoutMs?: number;
}

export interface Win32Session<P> {
  console: P;
  resolved: WindowsSpawn;
  protected: boolean;
  unprotectedReason?: string;
}

/**
 * The first Windows build on which node-pty uses the pseudo console (ConPTY, there since 1809,
 * build 17763, fixed until this build; the first release past it is Windows 10 1903): before it,
 * node-pty would use winpty, which is neither shipped nor tested.
 */
export const CONPTY_BUILD = 18309;

/** Throws NOT_SUPPORTED on a Windows older than CONPTY_BUILD (`release` as os.release() says it, e.g. 10.0.19045). */
export function checkConPty(release: string): void {
  const build = Number(/^\d+\.\d+\.(\d+)/.exec(release)?.[1] ?? 0);
  if (build < CONPTY_BUILD)
    throw new ShadowError(
      'NOT_SUPPORTED',
      `shell sessions need the Windows pseudo console (ConPTY) of Windows 10 1903 or later (build ${CONPTY_BUILD}); this is Windows ${release}`,
    );
}

/** The program's default: the user's command interpreter (%ComSpec%, else cmd.exe in System32). */
export function defaultWindowsShell(env: NodeJS.ProcessEnv): string {
  for (const [k, v] of Object.entries(env)) if (k.toUpperCase() === 'COMSPEC' && v) return v;
  const root = Object.entries(env).find(([k]) => k.toUpperCase() === 'SYSTEMROOT')?.[1] ?? 'C:\\Windows';
  return `${root}\\System32\\cmd.exe`;
}

/**
 * One argument quoted for a program that splits its command line as the Microsoft C runtime does
 * (node.exe does): as it is when it needs no quotes, else in double quotes with each quote escaped
 * and the backslashes before a quote (or before the closing quote) doubled.
 */
export function quoteWindowsArgument(arg: string): string {
  if (arg !== '' && !/[\s"]/.test(arg)) return arg;
  let out = '"';
  let slashes = 0;
  for (const ch of arg) {
    if (ch === '\\') slashes++;
    else if (ch === '"') {
      out += '\\'.repeat(slashes * 2 + 1) + '"';
      slashes = 0;
    } else {
      out += '\\'.repeat(slashes) + ch;
      slashes = 0;
    }
  }
  return out + '\\'.repeat(slashes * 2) + '"';
}

/**
 * Starts a session's program: resolved (NOT_FOUND when it cannot be found), its launcher started
 * on a new pseudo console, put in the group's job once it has connected to the daemon's pipe, its
 * token lowered to Low integrity, and only then let go. When the token cannot be lowered (always
 * under wine, which does not implement integrity levels) nothing starts and this throws
 * NAMESPACE_UNAVAILABLE, unless opts.unprotected. The caller disposes of the group on failure.
 */
export async function startWin32Session<P extends SessionConsole>(opts: Win32SessionOptions<P>): Promise<Win32Session<P>> {
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(opts.cwd);
  } catch {
    // said below
  }
  if (!st?.isDirectory()) throw new ShadowError('NOT_FOUND', `the session's working directory ${opts.cwd} is not a directory of the view`);
  const resolved = resolveWindowsCommand(opts.argv, { shell: false, cwd: opts.cwd, env: opts.env });
  // A name nobody can guess: whoever else connected first would only keep the session from starting.
  const pipe = `\\\\.\\pipe\\shadowfs-session-${crypto.randomBytes(16).toString('hex')}`;
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(pipe, () => resolve());
  });
  const connected = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
  let term: P | undefined;
  let channel: net.Socket | undefined;
  try {
    const cmd = launcherCommand([resolved.file, ...resolved.args], opts.env, {
      windowsVerbatimArguments: resolved.windowsVerbatimArguments,
      goPipe: pipe,
    });
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(cmd.env)) if (v !== undefined) env[k] = v;
    term = opts.spawn(cmd.file, cmd.args.map(quoteWindowsArgument).join(' '), { cwd: opts.cwd, env });
    // The launcher connects at Medium integrity, before it is lowered: a Low process could not
    // open a pipe this daemon made. It waits there, starting nothing, until it reads "go".
    const limit = opts.connectTimeoutMs ?? 60_000;
    let timer: NodeJS.Timeout | undefined;
    channel = await Promise.race([
      connected,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(new ShadowError('INTERNAL', `the session's launcher did not reach the daemon within ${limit} ms; nothing was started`)),
          limit,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    opts.group.job.assign(term.pid);
    let outcome: { protected: true } | { protected: false; why: string };
    try {
      const level = lowerIntegrity(term.pid);
      outcome =
        level.rid <= INTEGRITY_RID.low ? { protected: true } : { protected: false, why: `its token reads ${integrityName(level.rid)}` };
    } catch (err) {
      outcome = { protected: false, why: (err as Error).message };
    }
    if (!outcome.protected && !opts.unprotected)
      throw new ShadowError(
        'NAMESPACE_UNAVAILABLE',
        `cannot start this session at Low integrity, which keeps it from writing ${opts.folder} (${outcome.why}); ` +
          'the program did not start. To start it without that protection, pass --unprotected (RPC: unprotected: true).',
      );
    channel.end(GO);
    return outcome.protected
      ? { console: term, resolved, protected: true }
      : {
          console: term,
          resolved,
          protected: false,
          unprotectedReason: `the program's token could not be lowered to Low integrity (${outcome.why}); --unprotected started it anyway`,
        };
  } catch (err) {
    // Never let go: the launcher ends with 125 having started nothing, and the console is closed.
    channel?.destroy();
    try {
      term?.kill();
    } catch {
      // already gone
    }
    throw err;
  } finally {
    server.close();
  }
}

/** The parts of node-pty 1.x's Windows terminal that hold a pseudo console (see releaseConsole). */
interface HeldConsole {
  _agent?: {
    _pty?: number;
    _useConptyDll?: boolean;
    _ptyNative?: { kill?: (pty: number, useConptyDll: boolean) => void };
    _conoutSocketWorker?: { dispose?: () => void };
  };
}

/**
 * Lets go of the pseudo console of a program that has exited (ClosePseudoConsole, and node-pty's
 * output thread, which otherwise keeps the daemon's event loop alive). node-pty's own kill() would
 * do it too, but first asks a helper process for the processes still on the console and, when that
 * fails (it always does once the program is gone: "AttachConsole failed" on stderr), kills the
 * program's old process id five seconds later, which by then may be another process's. The job
 * has already ended whatever the program left behind, so only the console is released here; with
 * a node-pty whose insides differ from 1.x this falls back to kill().
 */
export function releaseConsole(term: SessionConsole): void {
  const agent = (term as HeldConsole)._agent;
  const native = agent?._ptyNative;
  if (
    agent &&
    typeof agent._pty === 'number' &&
    typeof native?.kill === 'function' &&
    typeof agent._conoutSocketWorker?.dispose === 'function'
  ) {
    native.kill(agent._pty, agent._useConptyDll === true);
    agent._conoutSocketWorker.dispose();
    return;
  }
  term.kill();
}
