// Running a command as an unprivileged user (nobody, no capabilities, no supplementary groups)
// for the tests that are about other users: runs of a user who is not root, shadows mounted by
// one, and the permission checks the kernel makes for one.
//
// Every command runs in a private mount namespace of its own (made while still root), so what
// it mounts, and the two files bound there for it, are seen by nobody else:
// - /dev/fuse: this machine's device is mode 0600 (a container's device node), while
//   distributions ship it 0666 so that any user can mount through fusermount3; a node of the
//   same device with that usual mode is bound over it.
// - /etc/fuse.conf, when the test gives its content (whether user_allow_other is there).
// With `denyNamespaces`, the command also runs in a user namespace whose limit of user
// namespaces is 0 and in which it holds no capability, so every unshare it tries is refused by
// the kernel, as on a system that does not allow unprivileged namespaces.
import { execFileSync, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { tempDir } from './fixtures';

export const NOBODY = 65534;
export const NOGROUP = 65534;

export interface AsNobodyOptions {
  denyNamespaces?: boolean;
  /** Content of /etc/fuse.conf as the command sees it. */
  fuseConf?: string;
  env?: Record<string, string>;
  cwd?: string;
  timeoutMs?: number;
  /** Called with the pid once the command runs (its mounts can be reached as /proc/<pid>/root/...). */
  onStart?: (pid: number) => void;
}

export interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** A new temporary directory that belongs to nobody. */
export function nobodyDir(label: string): string {
  const dir = tempDir(label);
  fs.chownSync(dir, NOBODY, NOGROUP);
  fs.chmodSync(dir, 0o755);
  return dir;
}

/** Hands a tree to nobody (lchown of every entry), as if nobody had made it. */
export function chownTree(dir: string, uid = NOBODY, gid = NOGROUP): void {
  fs.lchownSync(dir, uid, gid);
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) chownTree(p, uid, gid);
    else fs.lchownSync(p, uid, gid);
  }
}

let fuseNode: string | undefined;

/** A 0666 node of the FUSE device (see the top of this file). */
function usualFuseDevice(): string {
  if (fuseNode && fs.existsSync(fuseNode)) return fuseNode;
  const st = fs.statSync('/dev/fuse');
  const dir = tempDir('devfuse');
  fs.chmodSync(dir, 0o755);
  fuseNode = path.join(dir, 'fuse');
  execFileSync('mknod', ['-m', '666', fuseNode, 'c', String(Math.floor(st.rdev / 256)), String(st.rdev % 256)]);
  return fuseNode;
}

/** Runs argv as nobody (see the top of this file); resolves when it exits, whatever its status. */
export async function asNobody(argv: string[], opts: AsNobodyOptions = {}): Promise<Ran> {
  if (process.geteuid?.() !== 0) throw new Error('tests that run commands as another user need root (they use setpriv and unshare)');
  const node = usualFuseDevice();
  let conf = '';
  if (opts.fuseConf !== undefined) {
    conf = path.join(tempDir('fuseconf'), 'fuse.conf');
    fs.writeFileSync(conf, opts.fuseConf, { mode: 0o644 });
  }
  const home = nobodyDir('home');
  const setpriv = ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOGROUP}`, '--clear-groups', '--inh-caps=-all', '--', ...argv];
  // Bound as root in the private mount namespace, then on to the command.
  const preamble =
    'mount --bind "$0" /dev/fuse || exit 90; if [ -n "$1" ]; then mount --bind "$1" /etc/fuse.conf || exit 91; fi; shift; exec "$@"';
  const inner = opts.denyNamespaces
    ? [
        'unshare',
        '--user',
        '--mount',
        '--propagation',
        'private',
        '--keep-caps',
        '--',
        'sh',
        '-c',
        'read go && echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"',
        'sh',
        ...setpriv,
      ]
    : setpriv;
  const child = spawn('unshare', ['--mount', '--propagation', 'private', '--', 'sh', '-c', preamble, node, conf, ...inner], {
    cwd: opts.cwd ?? home,
    detached: true,
    stdio: [opts.denyNamespaces ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      TMPDIR: home,
      XDG_RUNTIME_DIR: home,
      ...(process.env.SHADOWFS_BACKEND ? { SHADOWFS_BACKEND: process.env.SHADOWFS_BACKEND } : {}),
      // A run against another build of the native module uses it as nobody too.
      ...(process.env.SHADOWFS_NATIVE_MODULE ? { SHADOWFS_NATIVE_MODULE: process.env.SHADOWFS_NATIVE_MODULE } : {}),
      ...opts.env,
    },
  });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout?.on('data', (c: Buffer) => out.push(c));
  child.stderr?.on('data', (c: Buffer) => err.push(c));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const pid = child.pid as number;
  const timer = setTimeout(() => {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone
    }
  }, opts.timeoutMs ?? 90_000);
  try {
    if (opts.denyNamespaces) {
      // The inner unshare has made its user namespace once /proc/<pid>/ns/user is not ours;
      // then root (outside) maps root and nobody into it, and lets it go on.
      const ours = fs.readlinkSync('/proc/self/ns/user');
      const deadline = Date.now() + 10_000;
      for (;;) {
        let theirs = ours;
        try {
          theirs = fs.readlinkSync(`/proc/${pid}/ns/user`);
        } catch {
          break; // it ended early: its status says why
        }
        if (theirs !== ours) {
          const map = `0 0 1\n${NOBODY} ${NOBODY} 1\n`;
          fs.writeFileSync(`/proc/${pid}/uid_map`, map);
          fs.writeFileSync(`/proc/${pid}/gid_map`, `0 0 1\n${NOGROUP} ${NOGROUP} 1\n`);
          child.stdin?.end('go\n');
          break;
        }
        if (Date.now() > deadline) throw new Error('the user namespace for the test was not made within 10 s');
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    opts.onStart?.(pid);
    const status = await exited;
    return { status, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
  } finally {
    clearTimeout(timer);
    try {
      process.kill(-pid, 'SIGKILL'); // whatever of its process group is left
    } catch {
      // all gone
    }
  }
}
