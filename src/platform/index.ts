// The one place that knows per-OS conventions: runtime directory, mount table, FUSE device.
import { execFile, execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../errors';

/**
 * A private per-user directory: mount points and the daemon's socket, state and log. Linux: mode
 * 0700 under XDG_RUNTIME_DIR (or a per-uid directory in the temp dir). Windows: %LOCALAPPDATA%\shadowfs,
 * which inherits the profile's access list (this user, SYSTEM and administrators only).
 */
export function runtimeDir(): string {
  if (process.platform === 'win32') {
    const local = process.env.LOCALAPPDATA;
    if (!local) throw new ShadowError('INTERNAL', 'LOCALAPPDATA is not set, so there is no per-user directory for the daemon');
    const dir = path.join(local, 'shadowfs');
    fs.mkdirSync(dir, { recursive: true });
    return dir;
  }
  const base =
    process.env.XDG_RUNTIME_DIR && fs.existsSync(process.env.XDG_RUNTIME_DIR)
      ? path.join(process.env.XDG_RUNTIME_DIR, 'shadowfs')
      : path.join(os.tmpdir(), `shadowfs-${process.getuid?.() ?? 'user'}`);
  fs.mkdirSync(base, { recursive: true, mode: 0o700 });
  const st = fs.lstatSync(base);
  if (!st.isDirectory() || (process.getuid && st.uid !== process.getuid())) {
    throw new ShadowError('INTERNAL', `the runtime directory ${base} is not a directory owned by you; remove it and retry`);
  }
  fs.chmodSync(base, 0o700);
  return base;
}

/**
 * The per-user directory for what must outlive the daemon and a reboot (checkpoints):
 * $SHADOWFS_STATE_DIR, else $XDG_STATE_HOME/shadowfs or ~/.local/state/shadowfs on Linux, and
 * %LOCALAPPDATA%\shadowfs\state on Windows. Private to the user (0700 on Linux).
 */
export function stateDir(): string {
  let dir: string;
  if (process.env.SHADOWFS_STATE_DIR) dir = process.env.SHADOWFS_STATE_DIR;
  else if (process.platform === 'win32') dir = path.join(runtimeDir(), 'state');
  else dir = path.join(process.env.XDG_STATE_HOME || path.join(os.homedir(), '.local', 'state'), 'shadowfs');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (process.platform !== 'win32') fs.chmodSync(dir, 0o700);
  return dir;
}

/** One line of the kernel's mount table, its octal escapes undone. */
export interface MountLine {
  source: string;
  mountPoint: string;
  fstype: string;
  options: string[];
}

/** The kernel's mount table as this process sees it (Linux; empty elsewhere): the one parser of /proc/self/mounts. */
export function mountTable(): MountLine[] {
  let text = '';
  try {
    text = fs.readFileSync('/proc/self/mounts', 'utf8');
  } catch {
    return [];
  }
  const un = (f: string) => f.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
  const out: MountLine[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(' ');
    if (f.length < 4) continue;
    out.push({ source: un(f[0]), mountPoint: un(f[1]), fstype: f[2], options: f[3].split(',') });
  }
  return out;
}

/**
 * Runs a program with a time limit that holds even when the program cannot be ended: a process
 * waiting on a hung FUSE or network server sleeps uninterruptibly, and SIGKILL does not end it
 * until the server answers. Resolves with its exit status and stdout, or with `timedOut` once the
 * limit passed (the child is sent SIGKILL then, and left behind).
 */
export function runWithin(
  file: string,
  args: string[],
  ms: number,
  env: NodeJS.ProcessEnv = {},
): Promise<{ status: number | null; stdout: string; timedOut: boolean }> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (r: { status: number | null; stdout: string; timedOut: boolean }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(r);
    };
    const child = execFile(file, args, { encoding: 'utf8', env, killSignal: 'SIGKILL' }, (err, stdout) =>
      finish({ status: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout: String(stdout), timedOut: false }),
    );
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      finish({ status: null, stdout: '', timedOut: true });
    }, ms);
  });
}

/** File systems whose server may never answer: FUSE ones and network ones. */
const MAY_HANG = /^(fuse|fuseblk|nfs4?|cifs|smb3|smbfs|9p|ceph|glusterfs|afs|davfs|ncpfs|lustre)(\.|$)/;

/** Whether `p` lies on a file system whose server may hang (FUSE, network), from the mount table alone. */
export function mayHang(p: string): boolean {
  let best: MountLine | undefined;
  for (const m of mountTable()) {
    const inside = p === m.mountPoint || p.startsWith(m.mountPoint === '/' ? '/' : `${m.mountPoint}/`);
    if (inside && (!best || m.mountPoint.length >= best.mountPoint.length)) best = m;
  }
  return best !== undefined && MAY_HANG.test(best.fstype);
}

/**
 * Why `p` cannot be relied on to answer, or undefined: a path on a FUSE or network file system
 * must answer a stat (of it and of each directory above it) within `ms` in a child process before
 * the daemon's own thread touches it; a hung server there would stop the daemon. Paths elsewhere
 * are not probed.
 */
export async function unanswered(p: string, ms = 5000): Promise<string | undefined> {
  if (process.platform !== 'linux' || !path.isAbsolute(p) || !mayHang(path.resolve(p))) return undefined;
  const r = await runWithin(process.execPath, ['-e', "try{require('fs').realpathSync(process.argv[1])}catch{}", p], ms);
  return r.timedOut ? `${p} does not answer within ${ms} ms (it is on a FUSE or network file system whose server hangs)` : undefined;
}

/** Mount points currently in the kernel's mount table (Linux). */
export function mountedPaths(): Set<string> {
  return new Set(mountTable().map((m) => m.mountPoint));
}

/** Mount points of every shadowfs mount in the kernel's mount table (Linux), whoever made it. */
export function shadowfsMounts(): string[] {
  return mountTable()
    .filter((m) => m.fstype === 'fuse.shadowfs' || m.source === 'shadowfs' || m.source.startsWith('shadowfs:'))
    .map((m) => m.mountPoint);
}

export function checkFuseDevice(): void {
  // Windows mounts through WinFsp: the native module checks it (WINFSP_MISSING).
  if (process.platform === 'win32') return;
  if (process.platform !== 'linux') {
    throw new ShadowError('NOT_SUPPORTED', `shadowfs mounts only on Linux in this version (this is ${process.platform})`);
  }
  try {
    fs.accessSync('/dev/fuse', fs.constants.R_OK | fs.constants.W_OK);
  } catch (err) {
    throw new ShadowError(
      'FUSE_UNAVAILABLE',
      'cannot open /dev/fuse: load the module (modprobe fuse), install fuse3, or run the container with --device /dev/fuse --cap-add SYS_ADMIN',
      { errno: (err as NodeJS.ErrnoException).errno, cause: err },
    );
  }
}

/** The FUSE configuration file fusermount3 reads. */
export const FUSE_CONF = '/etc/fuse.conf';

/**
 * allow_other is FUSE's option that lets users other than the mounter in. The kernel takes it
 * from root; for anyone else fusermount3 refuses it unless /etc/fuse.conf has a line
 * "user_allow_other". Checked before mounting, so the refusal says what to change.
 */
export function checkAllowOther(): void {
  if (process.geteuid?.() === 0) return;
  let conf = '';
  try {
    conf = fs.readFileSync(FUSE_CONF, 'utf8');
  } catch {
    // a missing file allows nothing
  }
  if (conf.split('\n').some((l) => l.trim() === 'user_allow_other')) return;
  throw new ShadowError(
    'ALLOW_OTHER_DENIED',
    `allowOther (--allow-other) lets other users into the shadow, and FUSE allows that to a user other than root only when ` +
      `${FUSE_CONF} has a line "user_allow_other"; add that line (as root: echo user_allow_other >> ${FUSE_CONF}) or mount as root`,
  );
}

/**
 * Windows: where WinFsp is installed, as its installer records it (HKLM\SOFTWARE\WOW6432Node\WinFsp,
 * value InstallDir), when its DLL is there; undefined when it is not installed.
 */
export function winfspInstallDir(): string | undefined {
  if (process.platform !== 'win32') return undefined;
  let out = '';
  try {
    out = execFileSync('reg', ['query', 'HKLM\\SOFTWARE\\WOW6432Node\\WinFsp', '/v', 'InstallDir'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      windowsHide: true,
    });
  } catch {
    return undefined; // no such key: not installed
  }
  const m = /InstallDir\s+REG_[A-Z_]+\s+(.+)/.exec(out);
  if (!m) return undefined;
  const dir = m[1].trim();
  return fs.existsSync(path.join(dir, 'bin', 'winfsp-x64.dll')) ? dir : undefined;
}

/**
 * Windows mount points, by WinFsp's rules (its mount.c; research note §4.1): a drive letter ("X:" or "X:\\", given back as "X:\\"), which must be free
 * (WinFsp defines it for the mounting logon session and removes it with the volume), or a directory that does not
 * exist yet and whose parent does (WinFsp creates it as a junction to the volume, refuses one that exists, and removes
 * it at unmount; an existing empty one is removed here first, a non-empty one refused). Nothing is created here but
 * the parent; `created` says WinFsp will create (and remove) the directory. Without a request: the highest free drive
 * letter, Z: down to D: as WinFsp itself picks one, since only a drive letter can hold the network volume on which
 * realpath works (see MountOptions.volume in shadow.ts). The same rules hold at every resume after an idle suspend:
 * the directory is WinFsp's to make again, the drive letter must still be free.
 */
export function prepareWin32MountPoint(
  requested: string | undefined,
  lower: string,
  name: string,
  inside: (child: string, parent: string) => boolean,
): { mountPoint: string; created: boolean } {
  if (requested === undefined) {
    const letter = 'ZYXWVUTSRQPONMLKJIHGFED'.split('').find((l) => !fs.existsSync(`${l}:\\`));
    if (!letter)
      throw new ShadowError(
        'MOUNTPOINT_IN_USE',
        `every drive letter from D: to Z: is in use, so ${name} has nowhere to mount by default; unmount a shadow, or give a directory that does not exist yet as the mount point (realpath does not work there)`,
      );
    return { mountPoint: `${letter}:\\`, created: false };
  }
  if (/^[A-Za-z]:\\?$/.test(requested)) {
    // Given back as the drive's root ("X:\\"): "X:" alone is the current directory on drive X, so
    // path.join("X:", "src") would name "X:src", relative to it.
    const letter = requested.slice(0, 2).toUpperCase();
    if (fs.existsSync(`${letter}\\`))
      throw new ShadowError('MOUNTPOINT_IN_USE', `the drive ${letter} is in use; pick a free drive letter or a new directory`);
    return { mountPoint: `${letter}\\`, created: false };
  }
  const probe = path.resolve(requested);
  if (inside(lower, probe))
    throw new ShadowError('LOWER_INSIDE_MOUNTPOINT', `the folder ${lower} is inside the mount point ${probe}; mount somewhere outside it`);
  if (inside(probe, lower))
    throw new ShadowError(
      'MOUNTPOINT_INSIDE_LOWER',
      `the mount point ${probe} is inside the folder it would shadow (${lower}); mount somewhere outside it`,
    );
  const st = fs.lstatSync(probe, { throwIfNoEntry: false });
  if (st) {
    if (!st.isDirectory()) throw new ShadowError('MOUNTPOINT_NOT_DIRECTORY', `the mount point ${probe} exists and is not a directory`);
    if (fs.readdirSync(probe).length > 0)
      throw new ShadowError(
        'MOUNTPOINT_NOT_EMPTY',
        `the mount point ${probe} is not empty; give a new directory (WinFsp creates it) or a drive letter`,
      );
    fs.rmdirSync(probe); // WinFsp mounts only where nothing is
  }
  fs.mkdirSync(path.dirname(probe), { recursive: true });
  return { mountPoint: probe, created: true };
}
