// The run service: runs a command inside a shadow as an agent. Where it runs is the shadow's
// business (Shadow.runAs: the agent's view, or its turn on the shared mount, or a scratch copy of
// its layer that is dropped); this module confines and spawns the command there, streams its
// output, and on exit, timeout or cancel kills every process it started.
import { type ChildProcessByStdio, spawn } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import type { Readable, Writable } from 'stream';
import { ShadowError } from '../common/errors';
import { normalizeRelPath } from '../common/paths';
import type { RunResult } from '../protocol/methods';
import type { Shadow } from '../shadow';
import { commandEnv, launchArgs, type LaunchPlan, launcherPath, parseStatus, privateTempDir, probeConfinement } from './launcher';
import { checkPolicy, RunPolicy } from './policy';
import { platform, RUN_MARKER, type RunLimits } from '../platform';
import { isWin32Group } from '../platform/win32-processes';

export type { RunResult };

export interface RunOptions {
  agent: string;
  /** The command and its arguments; run without a shell unless `shell` is set. */
  argv: string[];
  /** Working directory relative to the shadow root (default: the root). */
  cwd?: string;
  env?: Record<string, string>;
  /**
   * Milliseconds the command may run once it has the shadow (default DEFAULT_RUN_TIMEOUT_MS);
   * 0: no limit. Past it the run is interrupted and then killed, as a cancel is.
   */
  timeoutMs?: number;
  /** Run on a scratch copy of the agent's layer that is dropped afterwards. */
  discardWrites?: boolean;
  /** Run argv joined by spaces as a shell line: `sh -c` (Linux), `cmd.exe /d /s /c` (Windows). */
  shell?: boolean;
  /**
   * Linux, default true: the command runs in a private mount namespace in which the folder's
   * own path shows the shadow, so it cannot write the folder even through its absolute path.
   * false opts out; the result then says `protected: false`.
   */
  originalPath?: boolean;
  /** Older name of `originalPath: true`, which is now the default; still accepted. */
  atOriginalPath?: boolean;
  /**
   * Where the run's protection cannot be made (Linux: the mount namespace; Windows: a Low
   * integrity token), run without it (`protected: false`) instead of refusing with
   * NAMESPACE_UNAVAILABLE.
   */
  unprotected?: boolean;
  /** Linux: run in a network namespace of its own with only loopback. */
  noNetwork?: boolean;
  /**
   * Memory, processes and CPU the whole run may use (its cgroups on Linux, its Job Object on
   * Windows). A limit this system cannot set refuses the run with NOT_SUPPORTED; a run past its
   * memory limit is killed, and `limitsHit` says so.
   */
  limits?: RunLimits;
  /** Cancels the run: taken out of the queue, or interrupted and then killed (see STOP_GRACE_MS). */
  signal?: AbortSignal;
  /**
   * Hears, while the run waits for the shared mount, which agent's job holds it: when the run is
   * queued, and again each time another job starts ahead of it. Never called once the run started.
   */
  onWait?: (waitingFor: string) => void;
  /** Called once the run has its place (the queue is behind it) and its command is about to start. */
  onStart?: () => void;
  policy?: RunPolicy;
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  /** How much of each stream the result keeps (default 8 MiB; the stream itself is not cut). */
  maxOutputBytes?: number;
  runId?: string;
}

/** How long a run may take once it has the shadow unless told otherwise: a run never holds the shared mount for good. */
export const DEFAULT_RUN_TIMEOUT_MS = 10 * 60 * 1000;

/**
 * How long a cancelled or timed-out run has between its SIGINT (what Ctrl-C would send) and
 * SIGKILL of everything it started: time to clean up, not to go on.
 */
export const STOP_GRACE_MS = 3000;

/**
 * What makes a tool that would wait for a human fail at once instead: a run has no terminal and
 * no one to answer it. An editor that says why and fails (git runs `$GIT_EDITOR "$@"` through
 * the shell, so the file name it appends is ignored); pagers that only print; no credential
 * prompts. The caller's own env entries win over these.
 */
const NO_EDITOR = `echo 'shadowfs: a run has no terminal, so no editor can open; give the text on the command line (git commit -m MESSAGE)' >&2; false`;
export const NON_INTERACTIVE_ENV: Readonly<Record<string, string>> = {
  GIT_EDITOR: NO_EDITOR,
  EDITOR: NO_EDITOR,
  VISUAL: NO_EDITOR,
  GIT_SEQUENCE_EDITOR: NO_EDITOR,
  GIT_TERMINAL_PROMPT: '0',
  GCM_INTERACTIVE: 'never',
  PAGER: 'cat',
  GIT_PAGER: 'cat',
  MANPAGER: 'cat',
  DEBIAN_FRONTEND: 'noninteractive',
  PIP_NO_INPUT: '1',
};

const ENABLE_NAMESPACES =
  'run shadowfs (the daemon) as root, or enable unprivileged user namespaces ' +
  '(sysctl -w kernel.unprivileged_userns_clone=1 where the kernel has that switch, and user.max_user_namespaces above 0; ' +
  'in a container, allow the unshare system call)';

/** How a run is confined (see launcher.ts and native/launcher/linux_launch.cc). */
interface Confinement {
  /** Linux: through the launcher; false elsewhere (Windows: the run's Job Object). */
  launcher: boolean;
  /**
   * Windows: protected is decided when the command starts, by whether its token read back Low
   * (Win32ProcessGroup.launchRun); `protected` here is false until then.
   */
  atLaunch?: boolean;
  /** No namespaces could be made and the caller accepted that: Landlock, seccomp and the environment only. */
  noNamespaces: boolean;
  protected: boolean;
  unprotectedReason?: string;
}

/** The confinement a run gets; throws NAMESPACE_UNAVAILABLE when it may not run. */
function chooseConfinement(shadow: Shadow, opts: RunOptions): Confinement {
  // Windows (no namespaces; --no-network was refused in checkArgs): the Low-integrity token is
  // made, or refused, as the command starts.
  if (platform.name === 'win32') return { launcher: false, noNamespaces: true, protected: false, atLaunch: true };
  const net = opts.noNetwork === true;
  const probe = probeConfinement(net);
  if ('protections' in probe) return { launcher: true, noNamespaces: false, protected: true };
  if (net)
    throw new ShadowError(
      'NAMESPACE_UNAVAILABLE',
      `--no-network cannot create its network namespace (${probe.problem}); ${ENABLE_NAMESPACES}`,
    );
  if (!opts.unprotected) {
    throw new ShadowError(
      'NAMESPACE_UNAVAILABLE',
      `cannot create the private mount namespace that keeps this run from writing ${shadow.folder} through its absolute path ` +
        `(${probe.problem}); ${ENABLE_NAMESPACES}. To run without that protection, pass --unprotected (API and RPC: unprotected: true).`,
    );
  }
  return {
    launcher: platform.namespaces && fs.existsSync(launcherPath()),
    noNamespaces: true,
    protected: false,
    unprotectedReason: `the mount namespace could not be created (${probe.problem}); --unprotected ran it anyway`,
  };
}

/** Run ids name cgroups and log lines: a safe alphabet only. */
const RUN_ID = /^[A-Za-z0-9_-]{1,64}$/;

function checkArgs(opts: RunOptions): { cwd: string } {
  if (!Array.isArray(opts.argv) || opts.argv.length === 0 || !opts.argv.every((a) => typeof a === 'string')) {
    throw new ShadowError('INVALID_ARGUMENT', 'argv must be a non-empty list of strings (the command and its arguments)');
  }
  if (opts.argv.some((a) => a.includes('\0'))) throw new ShadowError('INVALID_ARGUMENT', 'an argument contains a NUL byte');
  for (const [k, v] of Object.entries(opts.env ?? {})) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) || typeof v !== 'string' || v.includes('\0')) {
      throw new ShadowError('INVALID_ARGUMENT', `bad environment variable ${JSON.stringify(k)}`);
    }
  }
  if (opts.timeoutMs !== undefined && !(opts.timeoutMs >= 0))
    throw new ShadowError('INVALID_ARGUMENT', `timeout must be a number of milliseconds (0: no limit), got ${String(opts.timeoutMs)}`);
  if (opts.noNetwork && !platform.namespaces) throw new ShadowError('NOT_SUPPORTED', '--no-network needs Linux namespaces');
  if (opts.runId !== undefined && !RUN_ID.test(opts.runId))
    throw new ShadowError('INVALID_ARGUMENT', `a run id is 1 to 64 letters, digits, '-' or '_', got ${JSON.stringify(opts.runId)}`);
  if (opts.atOriginalPath === true && opts.originalPath === false) {
    throw new ShadowError('INVALID_ARGUMENT', 'atOriginalPath and originalPath: false contradict each other; pass only one');
  }
  return { cwd: opts.cwd === undefined ? '' : normalizeRelPath(opts.cwd, { allowRoot: true }) };
}

export async function runInShadow(shadow: Shadow, opts: RunOptions): Promise<RunResult> {
  const { cwd } = checkArgs(opts);
  const ns = chooseConfinement(shadow, opts);
  // Windows resolves the command where it runs (its PATH, its directory in the agent's layer) and
  // judges it then, before anything starts (Win32ProcessGroup.launchRun).
  const argv = opts.shell && !ns.atLaunch ? ['sh', '-c', opts.argv.join(' ')] : opts.argv;
  if (!ns.atLaunch) checkPolicy(opts.policy, argv);
  const runId = opts.runId ?? crypto.randomBytes(6).toString('hex');
  // A cancel while queued takes the job out of the queue; once it runs, the run itself kills the
  // processes and reports `cancelled`, so the shadow is released only when they are gone.
  return shadow.runAs(
    opts.agent,
    async ({ dir, queuedMs }) => {
      opts.onStart?.();
      return spawnAndWait(shadow, dir, cwd, argv, ns, runId, opts, queuedMs);
    },
    { discardWrites: opts.discardWrites === true, scratchId: runId, signal: opts.signal, onWait: opts.onWait },
  );
}

async function spawnAndWait(
  shadow: Shadow,
  dir: string,
  cwd: string,
  argv: string[],
  ns: Confinement,
  runId: string,
  opts: RunOptions,
  queuedMs: number,
): Promise<RunResult> {
  // Before anything is made for the run (its cgroup or Job Object), which a refusal would leave behind.
  await checkWorkdir(dir, cwd, opts.agent);
  const limited = opts.limits !== undefined && Object.values(opts.limits).some((v) => v !== undefined);
  // Linux limits live in cgroups the launcher joins before the command starts; a command started
  // without the launcher could not be put in them.
  if (limited && platform.name !== 'win32' && !ns.launcher)
    throw new ShadowError(
      'NOT_SUPPORTED',
      `limits need the run launcher (${launcherPath()}), which is not built; build it with npm run build`,
    );
  const tracker = platform.processes.group(runId, limited ? opts.limits : undefined);
  const win = isWin32Group(tracker) ? tracker : undefined;
  const started = Date.now();
  const atFolder = opts.originalPath !== false && !ns.noNamespaces;
  const root = atFolder ? shadow.folder : dir;
  const workdir = path.join(root, cwd);
  const scratch = ns.launcher && ns.noNamespaces ? privateTempDir() : undefined;
  let env: Record<string, string>;
  try {
    env = commandEnv({
      ...(scratch ? { TMPDIR: scratch } : {}),
      // Windows: TEMP, TMP and npm's cache in the run's own directory under LocalLow.
      ...(win ? win.runEnv() : {}),
      ...NON_INTERACTIVE_ENV,
      ...opts.env,
      [RUN_MARKER]: runId,
      SHADOWFS_AGENT: opts.agent,
    });
  } catch (err) {
    await tracker.dispose();
    throw err;
  }
  let protection = { protected: ns.protected, unprotectedReason: ns.unprotectedReason };
  let status = '';
  const max = opts.maxOutputBytes ?? 8 * 1024 * 1024;
  const out = { stdout: [] as Buffer[], stderr: [] as Buffer[], bytes: { stdout: 0, stderr: 0 }, truncated: false };
  let timedOut = false;
  let cancelled = false;
  // Linux: through the launcher, which confines the command and reports on fd 3. Windows:
  // started through the run's Job Object (ProcessGroup.launch), so the command is in it before
  // it can start anything.
  let child: ChildProcessByStdio<Writable | null, Readable, Readable>;
  if (ns.launcher) {
    const plan: LaunchPlan = {
      binds: ns.noNamespaces ? [] : [{ source: dir, target: root }],
      cwd: workdir,
      env,
      cgroups: tracker.joins ?? (tracker.cgroup ? [tracker.cgroup] : []),
      noNetwork: opts.noNetwork,
      noNamespaces: ns.noNamespaces,
      writable: ns.noNamespaces ? [dir, ...(scratch ? [scratch] : [])] : [],
    };
    const spawned = spawn(launcherPath(), launchArgs(plan, argv), {
      cwd: '/',
      env: {},
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    (spawned.stdio[3] as Readable).on('data', (c: Buffer) => (status += c.toString()));
    child = spawned as unknown as ChildProcessByStdio<null, Readable, Readable>;
  } else if (win) {
    // Resolved, judged, lowered and let go; refused (nothing started, the group disposed) when
    // the token cannot be lowered and the caller did not accept that.
    const run = await win.launchRun({
      argv,
      shell: opts.shell === true,
      cwd: workdir,
      env,
      folder: shadow.folder,
      unprotected: opts.unprotected === true,
      check: (resolved) => checkPolicy(opts.policy, argv, resolved),
    });
    child = run.child;
    protection = { protected: run.protected, unprotectedReason: run.unprotectedReason };
  } else if (tracker.launches) {
    child = await tracker.launch(argv, { cwd: workdir, env });
  } else {
    child = spawn(argv[0], argv.slice(1), { cwd: workdir, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  }
  // Every stream, the launcher's status descriptor included, has ended once 'close' is emitted.
  const closed = new Promise<void>((r) => child.once('close', () => r()));
  const collect = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
    opts.onOutput?.(stream, chunk);
    if (out.bytes[stream] < max) {
      out[stream].push(chunk.subarray(0, max - out.bytes[stream]));
      if (out.bytes[stream] + chunk.length > max) out.truncated = true;
    } else out.truncated = true;
    out.bytes[stream] += chunk.length;
  };
  child.stdout.on('data', collect('stdout'));
  child.stderr.on('data', collect('stderr'));
  const killTree = async (): Promise<void> => {
    if (child.pid) platform.processes.killGroup(child.pid);
    await tracker.killAll();
  };
  // A cancel or a timeout first interrupts the run as Ctrl-C would (SIGINT to its process group;
  // the launcher passes it on to the command), then kills everything it started after a grace
  // period. Windows has no SIGINT to send: the Job Object is ended at once.
  let stopping = false;
  let grace: NodeJS.Timeout | undefined;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    if (platform.name === 'win32' || !child.pid) return void killTree();
    try {
      process.kill(-child.pid, 'SIGINT');
    } catch {
      // the group is gone already
    }
    grace = setTimeout(() => void killTree(), STOP_GRACE_MS);
  };
  const limit = opts.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS;
  const timer = limit === 0 ? undefined : setTimeout(() => ((timedOut = true), stop()), limit);
  const onAbort = (): void => {
    cancelled = true;
    stop();
  };
  // Past its memory limit the kernel kills one process of the run (the largest); the run is then
  // ended whole, as a timeout ends it, and reported by what it hit.
  let overMemory = false;
  const watch = !tracker.limitsHit
    ? undefined
    : setInterval(() => {
        if (!overMemory && tracker.limitsHit?.().includes('memory')) {
          overMemory = true;
          void killTree();
        }
      }, 200);
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const [exitCode, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', (err) => reject(new ShadowError('NOT_FOUND', `cannot start ${argv[0]}: ${err.message}`, { cause: err })));
    child.once('exit', (code, sig) => resolve([code, sig]));
  }).finally(() => {
    clearTimeout(timer);
    clearTimeout(grace);
    clearInterval(watch);
    opts.signal?.removeEventListener('abort', onAbort);
  });
  // Background children of the command: a run never leaves processes behind (the launcher's
  // PID namespace ends with the command; the cgroup or Job Object catches the rest).
  let leftover = tracker.alive().length;
  if (child.pid) platform.processes.killGroup(child.pid);
  const hits = tracker.limitsHit?.() ?? [];
  await tracker.dispose();
  await closed;
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  const said = parseStatus(status);
  if (said.error?.code === 'NOT_FOUND') throw new ShadowError('NOT_FOUND', said.error.message);
  if (said.error && !said.protections) {
    // The command never started: the launcher could not confine it.
    throw new ShadowError('NAMESPACE_UNAVAILABLE', `${said.error.message}; the command did not run`);
  }
  leftover = Math.max(leftover, said.leftover ?? 0);
  return {
    runId,
    exitCode,
    signal,
    stdout: Buffer.concat(out.stdout).toString('utf8'),
    stderr: Buffer.concat(out.stderr).toString('utf8'),
    durationMs: Date.now() - started,
    queuedMs,
    timedOut,
    ...(limit === 0 ? {} : { timeoutMs: limit }),
    cancelled,
    leftoverProcesses: leftover,
    outputTruncated: out.truncated,
    protected: protection.protected,
    protections: said.protections ?? [],
    ...(protection.unprotectedReason === undefined ? {} : { unprotectedReason: protection.unprotectedReason }),
    ...(hits.length > 0 ? { limitsHit: hits } : {}),
  };
}

/**
 * The run's working directory must be a directory of the agent's shadow: said in the caller's
 * words (the cwd it gave) rather than as the spawn error it would become.
 */
async function checkWorkdir(dir: string, cwd: string, agent: string): Promise<void> {
  // Component by component, never following a link: a link the agent made in its layer names a
  // path on this machine, outside the run's view, and what stat said of it (missing, a file, a
  // directory the launcher then cannot enter) told the agent what is there.
  // Split as this system will read the path when it enters it: "\" separates names on Windows
  // only; on Linux `a\b` is one name, and checking `a` then `b` would check another path than the
  // one entered (a review made `a\b` a link to /etc beside a real a/b). ".." as the system reads
  // it ("sub\..\.." on Windows) is refused: the cwd is a path inside the shadow.
  const parts = cwd.split(platform.name === 'win32' ? /[\\/]/ : '/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..'))
    throw new ShadowError('INVALID_PATH', `the working directory (cwd) ${JSON.stringify(cwd)} leaves the shadow ("..")`);
  let st: fs.Stats | undefined;
  let at = dir;
  for (const part of ['', ...parts]) {
    at = part === '' ? at : path.join(at, part);
    try {
      st = await fs.promises.lstat(at);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR')
        throw new ShadowError('NOT_FOUND', `the working directory (cwd) ${JSON.stringify(cwd)} does not exist in agent ${agent}'s shadow`);
      throw err;
    }
    if (st.isSymbolicLink())
      throw new ShadowError(
        'PATH_THROUGH_SYMLINK',
        `the working directory (cwd) ${JSON.stringify(cwd)} goes through a symbolic link in agent ${agent}'s shadow; name the real directory`,
      );
  }
  if (!st!.isDirectory())
    throw new ShadowError(
      'NOT_A_DIRECTORY',
      `the working directory (cwd) ${JSON.stringify(cwd)} is not a directory in agent ${agent}'s shadow`,
    );
}
