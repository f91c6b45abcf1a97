// Root hooks: the integration tests need a usable /dev/fuse and fail loudly without it (never
// skip); mounts leaked by an earlier, killed run (dead ones: their server is gone) are removed
// first so they cannot break this one, and only this run's own mounts are checked for leaks.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { execFileSync } from 'child_process';
import { ShadowClient } from '../../src/client';
import { daemonPaths } from '../../src/common/endpoint';
import { mountedPaths } from '../../src/platform';
import { deadTestMounts, FolderGuard, leakedTestMounts, removeTempDirs } from './fixtures';

// A private runtime directory for this run: daemons, sockets and default mount points of the
// tests never meet the user's own (and are all removed afterwards).
const runtime = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-test-rt-'));
fs.chmodSync(runtime, 0o700);
process.env.XDG_RUNTIME_DIR = runtime;
// Checkpoints the tests make stay in this run's directory too, and so does the record a daemon
// leaves for processes without XDG_RUNTIME_DIR: under the user's HOME, it would lead the user's
// own MCP clients to a test daemon while the suite runs.
process.env.SHADOWFS_STATE_DIR = path.join(runtime, 'state');
process.env.SHADOWFS_RUNTIME_RECORD = path.join(runtime, 'daemon-runtime.json');
// Daemons the tests start check every result against the protocol's schema.
process.env.SHADOWFS_CHECK_RESULTS = '1';

/** Whether `pid` still runs: a zombie (a child of this process not reaped yet) does not. */
export function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Stops a daemon the tests started (CLI commands start one on demand), and returns once it is
 * gone: the next test may start one of its own, which would stop at once if this one still held
 * the lock. A daemon that does not stop within 30 s on SIGTERM is killed, and said so.
 */
/**
 * What a failed CLI call should say beyond its own output: how it ended (a timeout kills it
 * with no output of its own) and the end of the daemon's log, so that a failure seen once in
 * CI can be explained from the log alone.
 */
export function cliFailure(r: {
  status: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
  stdout: string;
  stderr: string;
}): string {
  let log = '';
  try {
    log = fs.readFileSync(daemonPaths().log, 'utf8').split('\n').slice(-40).join('\n');
  } catch (err) {
    log = `(no daemon log: ${(err as Error).message})`;
  }
  return `status ${r.status}, signal ${r.signal}${r.error ? `, ${r.error.message}` : ''}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\nthe daemon's log ends:\n${log}`;
}

export function stopTestDaemon(): void {
  const pidFile = path.join(runtime, 'shadowfs', 'daemon.pid');
  let pid = 0;
  try {
    pid = Number(fs.readFileSync(pidFile, 'utf8'));
  } catch {
    return;
  }
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const waitGone = (ms: number): boolean => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      if (!running(pid)) return true;
      execFileSync('sleep', ['0.05']);
    }
    return !running(pid);
  };
  if (waitGone(30_000)) return;
  process.stderr.write(`      (the test daemon ${pid} did not stop within 30 s of SIGTERM; killed)\n`);
  process.kill(pid, 'SIGKILL');
  waitGone(10_000);
}

/** Unmounts whatever the test daemon serves and stops it, so that the next test starts clean. */
export async function stopDaemonAndShadows(): Promise<void> {
  try {
    const c = await ShadowClient.connect({ autostart: false });
    try {
      for (const s of (await c.request('list')).shadows) await c.request('unmount', { shadow: s.name, lazy: true });
    } finally {
      c.close();
    }
  } catch {
    // no daemon
  }
  stopTestDaemon();
  for (const m of mountedPaths()) if (m.startsWith(daemonPaths().dir)) execFileSync('umount', ['-l', m], { stdio: 'ignore' });
}

function runtimeMounts(): string[] {
  return fs
    .readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1] ?? '')
    .filter((m) => m.startsWith(runtime));
}

/** The user's own runtime record (under the real HOME), when it names this run's runtime directory. */
function recordUnderHome(): string | undefined {
  const file = path.join(os.userInfo().homedir, '.local', 'state', 'shadowfs', 'daemon-runtime.json');
  try {
    const rec = JSON.parse(fs.readFileSync(file, 'utf8')) as { dir?: unknown };
    return typeof rec.dir === 'string' && rec.dir.startsWith(runtime) ? file : undefined;
  } catch {
    return undefined;
  }
}

export const mochaHooks = {
  beforeAll(): void {
    try {
      fs.accessSync('/dev/fuse', fs.constants.R_OK | fs.constants.W_OK);
    } catch {
      throw new Error(
        '/dev/fuse is missing or not usable: the shadowfs integration tests mount real FUSE file systems. ' +
          'Load the fuse module (modprobe fuse) or give the container the device (--device /dev/fuse --cap-add SYS_ADMIN).',
      );
    }
    for (const mp of deadTestMounts()) {
      try {
        execFileSync('umount', ['-l', mp], { stdio: 'ignore' });
      } catch {
        execFileSync('fusermount3', ['-uz', mp], { stdio: 'ignore' });
      }
    }
  },
  afterAll(): void {
    for (const g of FolderGuard.all) g.stop();
    stopTestDaemon();
    for (const m of runtimeMounts()) execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    const leaked = leakedTestMounts();
    const recorded = recordUnderHome();
    removeTempDirs();
    fs.rmSync(runtime, { recursive: true, force: true });
    if (leaked.length > 0) throw new Error(`tests leaked mounts: ${leaked.join(', ')}`);
    if (recorded) throw new Error(`a test daemon recorded its runtime directory in the user's ${recorded}`);
  },
};
