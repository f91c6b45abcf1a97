// The process of a language server: started directly, or confined like a run through the launcher
// (src/run/launcher.ts), and how a failure reads when the other end of its pipes is gone.
import * as cp from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { commandEnv, launchArgs, type LaunchPlan, launcherPath, parseStatus, privateTempDir, probeConfinement } from '../run/launcher';
import type { ServerSpec } from './servers';

/** The shadowfs installation: the built-in servers' scripts are read from it. */
const INSTALLATION = path.resolve(__dirname, '..', '..', '..');

/**
 * Starts a server through the launcher: PID, user and mount namespaces, the system read-only, the
 * shadow, shadowfs's installation and the `readable` directories that exist read-only at their
 * own paths, Landlock and seccomp. Where no namespace can be made, the launcher's Landlock and
 * seccomp alone (logged).
 */
export function startConfined(spec: ServerSpec, root: string, readable: string[], log: (line: string) => void): cp.ChildProcess {
  const probe = probeConfinement(false);
  const noNamespaces = !('protections' in probe);
  if (noNamespaces) log(`[${spec.id}] started without namespaces (${probe.problem}): Landlock and seccomp only`);
  const scratch = noNamespaces ? privateTempDir() : undefined;
  const dirs = [...new Set([root, INSTALLATION, ...readable.filter((d) => fs.existsSync(d))].map((d) => fs.realpathSync(d)))];
  const plan: LaunchPlan = {
    binds: noNamespaces ? [] : dirs.map((dir) => ({ source: dir, target: dir, readOnly: true })),
    cwd: root,
    env: commandEnv(scratch ? { TMPDIR: scratch } : {}),
    noNamespaces,
    writable: scratch ? [scratch] : [],
  };
  const proc = cp.spawn(launcherPath(), launchArgs(plan, [spec.command, ...spec.args]), {
    cwd: '/',
    env: {},
    stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    detached: true,
  });
  let status = '';
  const fd3 = proc.stdio[3] as NodeJS.ReadableStream;
  fd3.on('data', (c: Buffer) => (status += c.toString()));
  if (scratch) proc.once('exit', () => fs.rmSync(scratch, { recursive: true, force: true }));
  fd3.on('end', () => {
    const said = parseStatus(status);
    if (said.error) log(`[${spec.id}] not started: ${said.error.message}`);
  });
  return proc;
}

/**
 * Starts a server directly, in its own process group, with a temporary directory of its own
 * (TMPDIR, and TMP and TEMP for Windows) that goes when it exits. Servers leave files there and
 * do not remove them: typescript-language-server makes an empty folder in the system's
 * temporary directory for each tsserver it starts (its cancellation files), two per start.
 */
export function startDirect(spec: ServerSpec, root: string): cp.ChildProcess {
  sweep();
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), `${SCRATCH_PREFIX}${process.pid}-`));
  // Windows spells its variables in any case: drop every spelling before setting them.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(TMPDIR|TMP|TEMP)$/i.test(k)));
  Object.assign(env, { TMPDIR: scratch, TMP: scratch, TEMP: scratch });
  let proc: cp.ChildProcess;
  try {
    proc = cp.spawn(spec.command, spec.args, { cwd: root, env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  } catch (err) {
    fs.rmSync(scratch, { recursive: true, force: true });
    throw err;
  }
  // 'close': the server and whatever kept its pipes (tsserver) are gone, or a spawn failed.
  proc.once('close', () => removeQuietly(scratch));
  return proc;
}

const SCRATCH_PREFIX = 'shadowfs-server-tmp-';

/**
 * Removes the temporary directories of servers whose daemon (the pid in the name) is gone,
 * killed before its servers' directories could go. Servers start seldom: a listing each time.
 */
function sweep(): void {
  let names: string[];
  try {
    names = fs.readdirSync(os.tmpdir());
  } catch {
    return;
  }
  for (const name of names) {
    const m = name.startsWith(SCRATCH_PREFIX) ? /^(\d+)-/.exec(name.slice(SCRATCH_PREFIX.length)) : null;
    if (m && !alive(Number(m[1]))) removeQuietly(path.join(os.tmpdir(), name));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes a server's temporary directory; one that cannot be removed stays (nothing to report it to). */
function removeQuietly(dir: string): void {
  try {
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
  } catch {
    // a file still being written there by a process of the server's that outlived it
  }
}

/** A failure that means the other end of the server's pipes is gone. */
export function brokenPipe(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (['EPIPE', 'ECONNRESET', 'ERR_STREAM_DESTROYED', 'ERR_STREAM_WRITE_AFTER_END'].includes(code)) return true;
  return (
    typeof e?.message === 'string' && /\bEPIPE\b|\bECONNRESET\b|Connection is (closed|disposed)|Pending response rejected/.test(e.message)
  );
}
