// A shell session: an interactive program (by default the user's shell) on a real
// pseudo-terminal, as one agent, in that agent's own view of a shadow (a mount that always shows
// its layer, so the session neither waits for nor blocks other agents), at the folder's own path
// and confined exactly as runs are (the launcher: mount, user and PID namespaces, Landlock,
// seccomp). The terminal is node-pty's; whoever is attached reads its output and types into it.
// The session outlives the connection that started it: the program goes on until it exits or
// the session is closed, and keeps a bounded copy of its recent output for whoever joins again.
// On Windows the terminal is a ConPTY pseudo console (node-pty) and the program is started as a
// run's command is, in a Job Object at Low integrity (src/platform/win32-session.ts), at the
// view's own mount point: Windows cannot show the view at the folder's path.
import { EventEmitter } from 'events';
import * as crypto from 'crypto';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { normalizeRelPath } from '../common/paths';
import { platform } from '../platform';
import { isWin32Group } from '../platform/win32-processes';
import { checkConPty, defaultWindowsShell, releaseConsole, startWin32Session } from '../platform/win32-session';
import { checkExtraDirs, commandEnv, launchArgs, launcherPath, probeConfinement, unseenProgram, type LaunchPlan } from '../run/launcher';
import type { Shadow } from '../shadow';

/** The part of node-pty a session uses (the package is optional: see loadPty). */
interface Pty {
  readonly pid: number;
  /** The terminal's master descriptor (Linux). */
  readonly fd?: number;
  onData(fn: (data: Buffer | string) => void): { dispose(): void };
  onExit(fn: (e: { exitCode: number; signal?: number }) => void): { dispose(): void };
  write(data: string | Buffer): void;
  resize(cols: number, rows: number): void;
  kill(signal?: string): void;
}
interface PtyModule {
  /** On Windows `args` may be one finished command line. */
  spawn(file: string, args: string[] | string, opts: Record<string, unknown>): Pty;
}

let ptyModule: PtyModule | undefined;

/** node-pty, loaded when the first session starts; a clear error when it did not install. */
function loadPty(): PtyModule {
  if (ptyModule) return ptyModule;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional: loaded only when a session starts
    ptyModule = require('node-pty') as PtyModule;
    return ptyModule;
  } catch (err) {
    const how =
      platform.name === 'win32'
        ? 'on Windows the npm package and the MSI both bring it (its prebuilt conpty.node): reinstall shadowfs'
        : 'it is an optional dependency built at install time: install a C++ compiler, python3 and make, then run npm install again';
    throw new ShadowError(
      'NOT_SUPPORTED',
      `shell sessions need the node-pty package, which did not load (${(err as Error).message.split('\n')[0]}); ${how}`,
      {
        cause: err,
      },
    );
  }
}

export interface ShellOptions {
  agent: string;
  /** The program and its arguments; default: the user's shell ($SHELL, else /bin/sh). */
  argv?: string[];
  /** Where it starts, relative to the folder's root; default: the root. */
  cwd?: string;
  cols: number;
  rows: number;
  /** The terminal type the program is told ($TERM); default xterm-256color. */
  term?: string;
  /** Variables the program gets besides the short list runs get. */
  env?: Record<string, string>;
  /** Only loopback networking (a network namespace). */
  noNetwork?: boolean;
  /**
   * Directories outside the folder the program may also write, at their own paths (an agent CLI's
   * own configuration and login, e.g. ~/.claude): the home directory is otherwise private and empty.
   */
  writable?: string[];
  /** Directories outside the folder the program may read, at their own paths. */
  readable?: string[];
  /**
   * Windows: start the program even when its token cannot be lowered to Low integrity (always so
   * under wine), instead of refusing with NAMESPACE_UNAVAILABLE. Linux sessions are always confined.
   */
  unprotected?: boolean;
}

export interface ShellExit {
  exitCode: number | null;
  signal: string | null;
}

/** What a joining terminal is sent first: the end of the output so far. */
const SCROLLBACK_BYTES = 256 * 1024;
/** How long a closed session's program has to end after SIGHUP before its whole tree is killed. */
const HANGUP_GRACE_MS = 3000;

const SIGNAL_NAMES: Record<number, string> = { 1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 6: 'SIGABRT', 9: 'SIGKILL', 15: 'SIGTERM' };

/** Where a session starts, relative to the folder's root ('.' for the root). */
function sessionCwd(cwd: string | undefined): string {
  return cwd === undefined || cwd === '' || cwd === '.' ? '.' : normalizeRelPath(cwd);
}

export class ShellSession extends EventEmitter {
  readonly id: string;
  readonly startedAt = Date.now();
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private exitInfo: ShellExit | undefined;
  private readonly exited: Promise<ShellExit>;
  private size: { cols: number; rows: number };

  private constructor(
    readonly shadow: Shadow,
    readonly agent: string,
    readonly argv: string[],
    readonly cwd: string,
    readonly protections: string[],
    private readonly pty: Pty,
    private readonly group: ReturnType<typeof platform.processes.group>,
    size: { cols: number; rows: number },
    id: string,
    /** Why the program runs without its protection, when it does (Windows: the token was not lowered). */
    readonly unprotectedReason?: string,
  ) {
    super();
    this.id = id;
    this.size = size;
    pty.onData((d) => {
      const b = typeof d === 'string' ? Buffer.from(d, 'utf8') : d;
      this.keep(b);
      this.emit('data', b);
    });
    this.exited = new Promise<ShellExit>((resolve) => {
      pty.onExit((e) => {
        void (async () => {
          // What the program left behind (background jobs) goes with it, as a run's does.
          await this.group.dispose().catch(() => undefined);
          // Windows: node-pty keeps the pseudo console and its output thread until told to let them go.
          if (platform.name === 'win32') {
            try {
              releaseConsole(pty);
            } catch {
              // already released
            }
          }
          const signal = e.signal ? (SIGNAL_NAMES[e.signal] ?? `signal ${e.signal}`) : null;
          this.exitInfo = { exitCode: e.signal ? null : e.exitCode, signal };
          resolve(this.exitInfo);
          this.emit('exit', this.exitInfo);
        })();
      });
    });
  }

  /** Starts `opts.argv` on a new terminal, in `dir` (a mount showing `opts.agent`'s layer of `shadow`) put at the folder's path. */
  static async start(shadow: Shadow, dir: string, opts: ShellOptions): Promise<ShellSession> {
    if (platform.name === 'win32') return ShellSession.startOnWindows(shadow, dir, opts);
    if (!platform.namespaces) throw new ShadowError('NOT_SUPPORTED', 'shell sessions are built for Linux and Windows only');
    if (opts.unprotected)
      throw new ShadowError('NOT_SUPPORTED', 'a Linux session is always confined as runs are: unprotected is for Windows only');
    const pty = loadPty();
    const cwd = sessionCwd(opts.cwd);
    const argv = opts.argv && opts.argv.length > 0 ? opts.argv : [process.env.SHELL || '/bin/sh'];
    // The same confinement as a run; a system that cannot give it refuses, as a run does.
    const probe = probeConfinement(opts.noNetwork === true);
    if ('problem' in probe) throw new ShadowError('NAMESPACE_UNAVAILABLE', `${probe.problem}; the session did not start`);
    const writable = checkExtraDirs(opts.writable ?? [], shadow.folder, 'writable');
    const readable = checkExtraDirs(opts.readable ?? [], shadow.folder, 'readable');
    const id = crypto.randomBytes(6).toString('hex');
    const group = platform.processes.group(`shell-${id}`);
    let term: Pty;
    try {
      const workdir = path.join(shadow.folder, cwd);
      const env = commandEnv({
        TERM: opts.term ?? 'xterm-256color',
        ...opts.env,
        SHADOWFS_AGENT: opts.agent,
        SHADOWFS_SHELL: id,
      });
      const plan: LaunchPlan = {
        binds: [{ source: dir, target: shadow.folder }, ...readable.map((d) => ({ source: d, target: d, readOnly: true }))],
        writable,
        cwd: workdir,
        env,
        cgroups: group.joins ?? (group.cgroup ? [group.cgroup] : []),
        noNetwork: opts.noNetwork,
      };
      // A program installed where the session cannot see (a home directory, a build folder) would
      // only fail with "No such file or directory": say where it is and what shows it instead.
      const unseen = unseenProgram(argv[0], plan, env.PATH ?? '');
      if (unseen)
        throw new ShadowError(
          'INVALID_ARGUMENT',
          `${argv[0] === unseen ? unseen : `${argv[0]} (${unseen})`} is where a session cannot see (it sees the system directories, those of the daemon's PATH, your folder and --readable/--writable directories); add --readable ${path.dirname(unseen)}`,
        );
      const args = launchArgs(plan, argv);
      // No status descriptor: the terminal is all a session has. launchArgs puts it first; only
      // that pair goes (a filter over the whole list also took the command's own arguments
      // "--status-fd" and the one after it).
      if (args[0] === '--status-fd') args.splice(0, 2);
      term = pty.spawn(launcherPath(), args, {
        name: opts.term ?? 'xterm-256color',
        cols: opts.cols,
        rows: opts.rows,
        cwd: '/',
        env: {},
        encoding: null,
      });
    } catch (err) {
      void group.dispose().catch(() => undefined);
      throw err;
    }
    // node-pty leaves the terminal's master inheritable: git, a language server or another run
    // started by the daemon while the session lasts would hold this session's terminal.
    try {
      if (typeof term.fd === 'number') platform.closeOnExec?.(term.fd);
    } catch (err) {
      term.kill('SIGKILL');
      void group.dispose().catch(() => undefined);
      throw new ShadowError(
        'INTERNAL',
        `the session's terminal could not be kept from other programs, so it was ended: ${(err as Error).message}`,
      );
    }
    return new ShellSession(shadow, opts.agent, argv, cwd, probe.protections, term, group, { cols: opts.cols, rows: opts.rows }, id);
  }

  /**
   * Windows: the program on a ConPTY pseudo console, in the session's Job Object at Low integrity
   * (win32-session.ts), at `dir` itself (no namespaces: the view cannot be put at the folder's path).
   * No --no-network, --writable or --readable: a Low-integrity program could not write those
   * directories anyway, and Windows has no per-process network namespace.
   */
  private static async startOnWindows(shadow: Shadow, dir: string, opts: ShellOptions): Promise<ShellSession> {
    if (opts.noNetwork) throw new ShadowError('NOT_SUPPORTED', '--no-network needs Linux namespaces');
    if ((opts.writable?.length ?? 0) > 0 || (opts.readable?.length ?? 0) > 0)
      throw new ShadowError(
        'NOT_SUPPORTED',
        '--writable and --readable are for Linux sessions only (a Low-integrity program cannot write your directories)',
      );
    checkConPty(os.release());
    const pty = loadPty();
    const cwd = sessionCwd(opts.cwd);
    const argv = opts.argv && opts.argv.length > 0 ? opts.argv : [defaultWindowsShell(process.env)];
    const id = crypto.randomBytes(6).toString('hex');
    const group = platform.processes.group(`shell-${id}`);
    if (!isWin32Group(group)) throw new ShadowError('INTERNAL', 'a Windows session needs a Job Object group');
    try {
      const env = commandEnv({
        // TEMP, TMP and npm's cache in the session's own directory under LocalLow, as a run's.
        ...group.runEnv(),
        TERM: opts.term ?? 'xterm-256color',
        ...opts.env,
        SHADOWFS_AGENT: opts.agent,
        SHADOWFS_SHELL: id,
      });
      const started = await startWin32Session({
        argv,
        cwd: path.join(dir, cwd),
        env,
        folder: shadow.folder,
        unprotected: opts.unprotected === true,
        group,
        spawn: (file, commandLine, o) =>
          pty.spawn(file, commandLine, { name: opts.term ?? 'xterm-256color', cols: opts.cols, rows: opts.rows, cwd: o.cwd, env: o.env }),
      });
      const protections = started.protected ? ['job', 'low-integrity'] : ['job'];
      return new ShellSession(
        shadow,
        opts.agent,
        argv,
        cwd,
        protections,
        started.console,
        group,
        { cols: opts.cols, rows: opts.rows },
        id,
        started.unprotectedReason,
      );
    } catch (err) {
      await group.dispose().catch(() => undefined);
      throw err;
    }
  }

  get pid(): number {
    return this.pty.pid;
  }

  get exit(): ShellExit | undefined {
    return this.exitInfo;
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  get cols(): number {
    return this.size.cols;
  }

  get rows(): number {
    return this.size.rows;
  }

  /** The program's recent output (at most SCROLLBACK_BYTES), for a terminal that joins. */
  scrollback(): Buffer {
    return Buffer.concat(this.chunks);
  }

  /** Types into the terminal (keys, pasted text; Ctrl-C is the byte 0x03, as on any terminal). */
  write(data: Buffer): void {
    if (this.running) this.pty.write(data);
  }

  resize(cols: number, rows: number): void {
    if (!this.running) return;
    this.size = { cols, rows };
    this.pty.resize(cols, rows);
  }

  /** Ends the session as a closed terminal does (SIGHUP), then kills what is left; resolves with how it ended. */
  async close(): Promise<ShellExit> {
    if (this.running) {
      try {
        // Windows has no SIGHUP: closing the pseudo console sends CTRL_CLOSE_EVENT to what is on it.
        if (platform.name === 'win32') this.pty.kill();
        else this.pty.kill('SIGHUP');
      } catch {
        // already gone
      }
      const timer = setTimeout(() => void this.group.killAll().catch(() => undefined), HANGUP_GRACE_MS);
      try {
        return await this.ended();
      } finally {
        clearTimeout(timer);
      }
    }
    return this.ended();
  }

  /** Resolves when the program has exited and its tree is gone. */
  ended(): Promise<ShellExit> {
    return this.exited;
  }

  private keep(b: Buffer): void {
    this.chunks.push(b);
    this.kept += b.length;
    while (this.kept > SCROLLBACK_BYTES && this.chunks.length > 1) this.kept -= this.chunks.shift()!.length;
  }
}
