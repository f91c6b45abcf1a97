// Mounts on Linux: the one reader of the kernel's mount table (/proc/self/mounts), which file
// systems may hang, the FUSE device and fusermount3's allow_other rule, mount-point preparation,
// and the forced (lazy) unmount of a stale mount.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { checkNesting, runWithin } from './common';
import type { MountLine } from './types';

/** The kernel's mount table as this process sees it (empty where there is none to read): the one parser of /proc/self/mounts. */
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
 * (and every path where there is no mount table) are not probed.
 */
export async function unanswered(p: string, ms = 5000): Promise<string | undefined> {
  if (!path.isAbsolute(p) || !mayHang(path.resolve(p))) return undefined;
  const r = await runWithin(process.execPath, ['-e', "try{require('fs').realpathSync(process.argv[1])}catch{}", p], ms);
  return r.timedOut ? `${p} does not answer within ${ms} ms (it is on a FUSE or network file system whose server hangs)` : undefined;
}

/** Mount points of every shadowfs mount in the kernel's mount table, whoever made it. */
export function shadowfsMounts(): string[] {
  return mountTable()
    .filter((m) => m.fstype === 'fuse.shadowfs' || m.source === 'shadowfs' || m.source.startsWith('shadowfs:'))
    .map((m) => m.mountPoint);
}

export function checkFuseDevice(): void {
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

function nearestExisting(p: string): string {
  let cur = p;
  while (!fs.existsSync(cur)) {
    const up = path.dirname(cur);
    if (up === cur) break;
    cur = up;
  }
  return cur;
}

/**
 * A directory, created when missing, that must be empty and have nothing mounted on it; without a
 * request, a fresh one under `mountsDir`. Returns its real path and whether it was created here
 * (then it is removed with the mount).
 */
export function prepareMountPoint(
  requested: string | undefined,
  folder: string,
  name: string,
  mountsDir: () => string,
): { mountPoint: string; created: boolean } {
  let mp: string;
  let created = false;
  if (requested === undefined) {
    const dir = mountsDir();
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    mp = path.join(dir, `${name}-${crypto.randomBytes(4).toString('hex')}`);
  } else {
    mp = path.resolve(requested);
  }
  const abs = path.resolve(mp);
  if (mountTable().some((m) => m.mountPoint === abs))
    throw new ShadowError(
      'MOUNTPOINT_IN_USE',
      `something is already mounted at ${abs}; unmount it first (fusermount3 -u ${abs}) or pick another --at`,
    );
  let st: fs.Stats | undefined;
  try {
    st = fs.lstatSync(abs);
  } catch {
    st = undefined;
  }
  // Decide about nesting before creating anything, so a refused mount leaves no directory behind.
  const probe = st ? fs.realpathSync(abs) : path.join(fs.realpathSync(nearestExisting(abs)), path.relative(nearestExisting(abs), abs));
  checkNesting(folder, probe, abs);
  if (st) {
    if (!st.isDirectory()) throw new ShadowError('MOUNTPOINT_NOT_DIRECTORY', `the mount point ${abs} exists and is not a directory`);
    if (fs.readdirSync(abs).length > 0)
      throw new ShadowError('MOUNTPOINT_NOT_EMPTY', `the mount point ${abs} is not empty; use an empty or new directory`);
  } else {
    fs.mkdirSync(abs, { recursive: true, mode: 0o755 });
    created = true;
  }
  return { mountPoint: fs.realpathSync(abs), created };
}

/** Linux mounts on a directory that exists: one removed while the shadow was suspended is made again. */
export function remakeMountPoint(mountPoint: string): void {
  if (!fs.existsSync(mountPoint)) fs.mkdirSync(mountPoint, { recursive: true, mode: 0o755 });
}

/**
 * Detaches a stale mount lazily (umount -l as root, fusermount3 -uz otherwise; the native
 * module's unmount does the same for its own live mounts); whether it is gone.
 */
export async function forceUnmount(mountPoint: string, timeoutMs: number): Promise<boolean> {
  const tries: Array<[string, string[]]> = [
    ['umount', ['-l', mountPoint]],
    ['fusermount3', ['-uz', mountPoint]],
  ];
  for (const [file, args] of tries) if ((await runWithin(file, args, timeoutMs, process.env)).status === 0) return true;
  return false;
}
