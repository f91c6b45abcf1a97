// The run service: runs a command inside a shadow as an agent. The command gets the agent's
// layer (through the scheduler on the shared mount, or the agent's own view when it has one),
// what it writes stays in that layer (or in a scratch copy that is dropped), its output is
// streamed, and on exit, timeout or cancel every process it started is killed.
import { spawn, spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as path from 'path';
import { ShadowError } from '../errors';
import { normalizeRelPath } from '../paths';
import type { RunResult } from '../protocol/methods';
import type { Shadow } from '../shadow';
import { checkPolicy, RunPolicy } from './policy';
import { ProcessTracker, RUN_MARKER } from './tracker';

export type { RunResult };

export interface RunOptions {
  agent: string;
  /** The command and its arguments; run without a shell unless `shell` is set. */
  argv: string[];
  /** Working directory relative to the shadow root (default: the root). */
  cwd?: string;
  env?: Record<string, string>;
  /** Milliseconds before the whole process tree is killed. */
  timeoutMs?: number;
  /** Run on a scratch copy of the agent's layer that is dropped afterwards. */
  discardWrites?: boolean;
  /** Run argv joined by spaces with `sh -c`. */
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
   * Where the mount namespace cannot be made, run without it (`protected: false`) instead of
   * refusing with NAMESPACE_UNAVAILABLE.
   */
  unprotected?: boolean;
  /** Linux: run in a network namespace of its own with only loopback. */
  noNetwork?: boolean;
  signal?: AbortSignal;
  policy?: RunPolicy;
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  /** How much of each stream the result keeps (default 8 MiB; the stream itself is not cut). */
  maxOutputBytes?: number;
  runId?: string;
}

const namespaceCheck = new Map<string, string | null>();

/**
 * How a run enters its namespaces. Root unshares them directly. Any other user first makes a
 * user namespace in which it is root (needed to mount), and once the shadow is in place, a
 * second one that maps it back to its own uid and gid, so the command runs as that user with no
 * privileges, exactly as it would without the namespace.
 */
interface NamespacePlan {
  /** unshare's flags; empty when the run needs no namespace. */
  flags: string[];
  /** The command that drops back to the caller's ids (non-root callers), before the user's command. */
  dropPrefix: string[];
}

function namespacePlan(mountNs: boolean, netNs: boolean): NamespacePlan {
  const flags = [...(mountNs ? ['--mount', '--propagation', 'private'] : []), ...(netNs ? ['--net'] : [])];
  if (flags.length === 0 || process.geteuid?.() === 0) return { flags, dropPrefix: [] };
  const uid = String(process.geteuid?.() ?? 0);
  const gid = String(process.getegid?.() ?? 0);
  return {
    flags: ['--user', '--map-root-user', ...flags],
    dropPrefix: ['unshare', '--user', `--map-user=${uid}`, `--map-group=${gid}`, '--'],
  };
}

/** Whether this system lets us make the namespaces of `plan`; null if yes, else the reason. */
function namespaceProblem(plan: NamespacePlan): string | null {
  if (process.platform !== 'linux') return `${process.platform} has no Linux namespaces`;
  const key = [...plan.flags, ...plan.dropPrefix].join(' ');
  if (!namespaceCheck.has(key)) {
    const r = spawnSync('unshare', [...plan.flags, '--', ...plan.dropPrefix, 'true'], { encoding: 'utf8' });
    namespaceCheck.set(key, r.status === 0 ? null : (r.error?.message ?? r.stderr.trim()) || `unshare exited with ${r.status}`);
  }
  return namespaceCheck.get(key) ?? null;
}

const ENABLE_NAMESPACES =
  'run shadowfs (the daemon) as root, or enable unprivileged user namespaces ' +
  '(sysctl -w kernel.unprivileged_userns_clone=1 where the kernel has that switch, and user.max_user_namespaces above 0; ' +
  'in a container, allow the unshare system call)';

/** The namespaces a run gets, and whether it is protected; throws NAMESPACE_UNAVAILABLE when it may not run. */
function chooseNamespaces(shadow: Shadow, opts: RunOptions): { plan: NamespacePlan; protected: boolean; unprotectedReason?: string } {
  const wantMount = opts.originalPath !== false;
  const net = opts.noNetwork === true;
  if (!wantMount) {
    const plan = namespacePlan(false, net);
    const problem = net ? namespaceProblem(plan) : null;
    if (problem)
      throw new ShadowError('NAMESPACE_UNAVAILABLE', `--no-network cannot create its network namespace (${problem}); ${ENABLE_NAMESPACES}`);
    return { plan, protected: false, unprotectedReason: 'asked to run without the original-path namespace (--no-original-path)' };
  }
  const plan = namespacePlan(true, net);
  const problem = namespaceProblem(plan);
  if (!problem) return { plan, protected: true };
  if (!opts.unprotected) {
    throw new ShadowError(
      'NAMESPACE_UNAVAILABLE',
      `cannot create the private mount namespace that keeps this run from writing ${shadow.lower} through its absolute path ` +
        `(${problem}); ${ENABLE_NAMESPACES}. To run without that protection, pass --unprotected (API and RPC: unprotected: true).`,
    );
  }
  const fallback = namespacePlan(false, net);
  const netProblem = net ? namespaceProblem(fallback) : null;
  if (netProblem)
    throw new ShadowError(
      'NAMESPACE_UNAVAILABLE',
      `--no-network cannot create its network namespace (${netProblem}); ${ENABLE_NAMESPACES}`,
    );
  return {
    plan: fallback,
    protected: false,
    unprotectedReason: `the mount namespace could not be created (${problem}); --unprotected ran it anyway`,
  };
}

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
  if (opts.timeoutMs !== undefined && !(opts.timeoutMs > 0))
    throw new ShadowError('INVALID_ARGUMENT', `timeout must be a positive number of milliseconds, got ${String(opts.timeoutMs)}`);
  if (opts.noNetwork && process.platform !== 'linux') throw new ShadowError('NOT_SUPPORTED', '--no-network needs Linux namespaces');
  if (opts.atOriginalPath === true && opts.originalPath === false) {
    throw new ShadowError('INVALID_ARGUMENT', 'atOriginalPath and originalPath: false contradict each other; pass only one');
  }
  return { cwd: opts.cwd === undefined ? '' : normalizeRelPath(opts.cwd, { allowRoot: true }) };
}

export async function runInShadow(shadow: Shadow, opts: RunOptions): Promise<RunResult> {
  const { cwd } = checkArgs(opts);
  const argv = opts.shell ? ['sh', '-c', opts.argv.join(' ')] : opts.argv;
  checkPolicy(opts.policy, argv);
  const ns = chooseNamespaces(shadow, opts);
  const runId = opts.runId ?? crypto.randomBytes(6).toString('hex');
  const agent = opts.agent;
  await shadow.createLayer(agent);
  const view = [...shadow.views].find((v) => v.agentId === agent && v.open);
  const scratch = opts.discardWrites ? `${agent}~run-${runId}` : undefined;
  if (scratch) await shadow.cloneLayer(agent, scratch);
  const queuedAt = Date.now();
  let startedAt = queuedAt;
  const execute = async (dir: string): Promise<RunResult> => {
    startedAt = Date.now();
    return spawnAndWait(shadow, dir, cwd, argv, ns, runId, opts, () => startedAt - queuedAt);
  };
  // A cancel while queued takes the job out of the queue; once it runs, the run itself kills the
  // processes and reports `cancelled`, so the shadow is released only when they are gone.
  const whileQueued = new AbortController();
  let running = false;
  const onAbort = (): void => {
    if (!running) whileQueued.abort();
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  if (opts.signal?.aborted) whileQueued.abort();
  try {
    if (view && !scratch) return await execute(view.mountPoint);
    return await shadow.withLayer(
      agent,
      (dir) => {
        running = true;
        return execute(dir);
      },
      { layer: scratch ?? agent, signal: whileQueued.signal },
    );
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    if (scratch && shadow.mounted) {
      if (shadow.active === scratch) await shadow.activate(agent);
      await shadow.dropLayer(scratch);
    }
  }
}

async function spawnAndWait(
  shadow: Shadow,
  dir: string,
  cwd: string,
  argv: string[],
  ns: ReturnType<typeof chooseNamespaces>,
  runId: string,
  opts: RunOptions,
  queuedMs: () => number,
): Promise<RunResult> {
  const tracker = new ProcessTracker(runId);
  const started = Date.now();
  const workdir = path.join(dir, cwd);
  // One small sh script joins the run's cgroup and, in a fresh mount namespace, puts the shadow
  // over the folder's own path; then it execs the command itself (no shell in between).
  const mountNs = ns.plan.flags.includes('--mount');
  let script = tracker.joinScript();
  if (mountNs) {
    script +=
      'mount --bind "$SHADOWFS_SHADOW" "$SHADOWFS_LOWER" || { echo "shadowfs: cannot show the shadow at $SHADOWFS_LOWER; the command did not run" >&2; exit 126; }; ' +
      'cd "$SHADOWFS_LOWER/$SHADOWFS_CWD" || exit 126; ';
  }
  if (opts.noNetwork) script += 'ip link set lo up 2>/dev/null; ';
  script += 'exec "$@"';
  const command = [...ns.plan.dropPrefix, ...argv];
  const wrapped = script === 'exec "$@"' ? command : ['sh', '-c', script, 'sh', ...command];
  const full = ns.plan.flags.length ? ['unshare', ...ns.plan.flags, '--', ...wrapped] : wrapped;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...opts.env,
    [RUN_MARKER]: runId,
    SHADOWFS_AGENT: opts.agent,
    SHADOWFS_SHADOW: dir,
    SHADOWFS_LOWER: shadow.lower,
    SHADOWFS_CWD: cwd,
  };
  const max = opts.maxOutputBytes ?? 8 * 1024 * 1024;
  const out = { stdout: [] as Buffer[], stderr: [] as Buffer[], bytes: { stdout: 0, stderr: 0 }, truncated: false };
  let timedOut = false;
  let cancelled = false;
  // Windows: started through the run's Job Object (ProcessTracker.launch), so the command is in it
  // before it can start anything.
  const child = tracker.job
    ? await tracker.launch(full, { cwd: workdir, env })
    : spawn(full[0], full.slice(1), { cwd: workdir, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
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
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // group already gone
    }
    await tracker.killAll();
  };
  const timer = opts.timeoutMs === undefined ? undefined : setTimeout(() => ((timedOut = true), void killTree()), opts.timeoutMs);
  const onAbort = (): void => {
    cancelled = true;
    void killTree();
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const [exitCode, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', (err) => reject(new ShadowError('NOT_FOUND', `cannot start ${argv[0]}: ${err.message}`, { cause: err })));
    child.once('exit', (code, sig) => resolve([code, sig]));
  }).finally(() => {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  });
  // Background children of the command: a run never leaves processes behind.
  const leftover = tracker.alive().length;
  try {
    if (child.pid) process.kill(-child.pid, 'SIGKILL');
  } catch {
    // group already gone
  }
  await tracker.dispose();
  await new Promise<void>((r) => (child.stdout.readableEnded && child.stderr.readableEnded ? r() : child.once('close', () => r())));
  return {
    runId,
    exitCode,
    signal,
    stdout: Buffer.concat(out.stdout).toString('utf8'),
    stderr: Buffer.concat(out.stderr).toString('utf8'),
    durationMs: Date.now() - started,
    queuedMs: queuedMs(),
    timedOut,
    cancelled,
    leftoverProcesses: leftover,
    outputTruncated: out.truncated,
    protected: ns.protected,
    ...(ns.unprotectedReason === undefined ? {} : { unprotectedReason: ns.unprotectedReason }),
  };
}
