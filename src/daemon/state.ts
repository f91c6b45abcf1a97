// The daemon's state file and what a daemon started after a crash does with it: the shadows it
// records (read back with every field checked, for the file may be forged), the stale mounts of a
// crashed predecessor that may be cleaned, and the folders that may be shadowed again.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import type { Logger } from 'winston';
import * as z from 'zod';
import { mountedPaths, type MountLine, mountTable, platform, runtimeDir, runWithin, unanswered } from '../platform';
import { MasksFile } from '../work/checkpoints';

// The state file is input, not truth: whoever can write the runtime directory (an agent's
// process of this user, say) can forge it before a crash. Every field is checked for shape here;
// what a recovering daemon does with the paths is checked again against the kernel's mount
// table (see recoverStale), so a forged entry can neither unmount nor remove anything that is
// not a stale mount of this daemon.

/** No NUL, absolute and written the way path.normalize writes it (no "..", ".", "//" or trailing "/"). */
function isCleanAbsolute(p: string): boolean {
  if (p.includes('\0') || !path.isAbsolute(p)) return false;
  if (platform.isDriveRoot(p)) return true; // a drive letter mount point ("X:\\")
  return path.normalize(p) === p && (p.length === 1 || !p.endsWith(path.sep));
}

const AbsPath = z.string().min(1).max(4096).refine(isCleanAbsolute, { message: 'not an absolute, normalized path without NUL' });

/** Agent ids as shadow.ts takes them: 1-128 bytes, no "/" or NUL. */
const AgentId = z
  .string()
  .min(1)
  .refine((a) => Buffer.byteLength(a) <= 128 && !/[/\0]/.test(a), { message: 'not an agent id' });

const ViewState = z.strictObject({ mountPoint: AbsPath, createdMountPoint: z.boolean() });

const ShadowState = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/),
  /** The folder the shadow shows (`lower` in a state file a daemon before issue #30's renames wrote: see fromFormerShape). */
  folder: AbsPath,
  mountPoint: AbsPath,
  /** The daemon made the mount point, so it removes it (when empty) with the mount. */
  createdMountPoint: z.boolean().optional(),
  views: z.array(z.unknown()).max(1024).optional(),
  /** The agent the shared mount showed (null: the folder), so a crash does not change it. */
  active: AgentId.nullable().optional(),
  /** How it was mounted, so that a crash recovery mounts it the same way. */
  backend: z
    .string()
    .regex(/^[a-z0-9_]{1,32}$/)
    .optional(),
  io: z.enum(['cached', 'open', 'passthrough']).optional(),
  /** Mounted with protectGit false (MountOptions.protectGit), so a crash recovery does the same. */
  protectGit: z.boolean().optional(),
  /** Masked paths (src/shadow/mask.ts), so a crash does not unmask an agent. Checked again as globs when given back. */
  masks: MasksFile.optional(),
});

/**
 * A shadow entry as a daemon before the rename wrote it (`lower` where `folder` is now), read as
 * the entry it is: a daemon upgraded while shadows are mounted must recover what its predecessor
 * recorded. Anything else, an entry naming both included, is left to the shape check (which
 * refuses `lower` beside `folder`: no daemon wrote both).
 */
function fromFormerShape(entry: unknown): unknown {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry) || !('lower' in entry) || 'folder' in entry) return entry;
  const { lower, ...rest } = entry as Record<string, unknown>;
  return { ...rest, folder: lower };
}

type ViewEntry = z.infer<typeof ViewState>;
export type ShadowEntry = Omit<z.infer<typeof ShadowState>, 'views'> & { views?: ViewEntry[] };

export interface StateFile {
  pid: number;
  shadows: ShadowEntry[];
}

const StateTop = z.object({ pid: z.number().int().positive(), shadows: z.array(z.unknown()).max(4096) });

/** A state file is small (a few hundred bytes a shadow): anything this big is not one. */
const MAX_STATE_BYTES = 4 * 1024 * 1024;

function issues(err: z.ZodError): string {
  return err.issues
    .slice(0, 3)
    .map((i) => `${i.path.join('.') || 'entry'}: ${i.message}`)
    .join('; ');
}

/** Whether `child` is `parent` or lies beneath it (both absolute and normalized). */
function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/**
 * Why the mount at `mountPoint` is not provably a stale mount of the shadow of `folder` that a
 * daemon of this user made, or undefined when it is: the topmost mount there (the one umount
 * would take) is a shadowfs FUSE mount (native/platform/fuse_loop.h names them
 * "shadowfs:<folder>", type fuse.shadowfs) of that very folder, mounted by this user, and its
 * server is gone (a statfs there fails with ENOTCONN; a live mount belongs to a process that still
 * serves it, which a crashed daemon is not).
 */
async function whyNotStaleShadow(mountPoint: string, folder: string, table: MountLine[]): Promise<string | undefined> {
  const top = table.filter((m) => m.mountPoint === mountPoint).at(-1);
  if (!top) return 'nothing is mounted there';
  if (top.fstype !== 'fuse.shadowfs') return `the mount there is ${top.fstype}, not a shadowfs mount`;
  if (top.source !== `shadowfs:${folder}`) return `the shadowfs mount there is ${JSON.stringify(top.source)}, not the folder recorded`;
  const uid = process.getuid?.();
  if (uid !== undefined && !top.options.includes(`user_id=${uid}`)) return 'the shadowfs mount there belongs to another user';
  // In a child with a time limit: a mount whose server hangs must not hang this daemon. statfs,
  // not stat: the kernel answers a stat of the root from its attribute cache while that is
  // valid, after the server died too (a mount in use just before the crash), but it sends every
  // statfs to the server, so a dead one fails it with ENOTCONN.
  const answer = await run(
    process.execPath,
    [
      '-e',
      "try{require('fs').statfsSync(process.argv[1]);process.stdout.write('LIVE')}catch(e){process.stdout.write(String(e.code))}",
      mountPoint,
    ],
    STALE_PROBE_MS,
  );
  if (answer !== 'ENOTCONN') return `the shadowfs mount there is still served by a live process (${answer || 'no answer'})`;
  return undefined;
}

/**
 * How long the check of one recorded mount may take (a hung server answers nothing):
 * $SHADOWFS_STALE_PROBE_MS, else 5 s. Requests wait for recovery meanwhile (status does not).
 */
const STALE_PROBE_MS = Number(process.env.SHADOWFS_STALE_PROBE_MS) > 0 ? Number(process.env.SHADOWFS_STALE_PROBE_MS) : 5000;

/** Runs a program with no environment and a time limit; its stdout, or '' when it timed out. */
async function run(file: string, args: string[], timeout: number): Promise<string> {
  const r = await runWithin(file, args, timeout);
  return r.timedOut ? '' : r.stdout;
}

/** Why a folder the state file names must not be shadowed again after a crash, or undefined. */
export async function whyNotRemount(folder: string): Promise<string | undefined> {
  if (path.parse(folder).root === folder) return 'the folder is the root of the file system';
  const stuck = await unanswered(folder, STALE_PROBE_MS);
  if (stuck) return stuck;
  let real: string;
  try {
    real = fs.realpathSync(folder);
  } catch {
    return 'the folder does not exist';
  }
  if (real !== folder) return `the folder's path leads elsewhere now (${real}) through a symbolic link`;
  if (!fs.statSync(real).isDirectory()) return 'the folder is not a directory';
  return undefined;
}

/** The daemon's own directory of mount points it makes (shadow.ts), if it is a real directory. */
function ownMountsDir(): string | undefined {
  try {
    const dir = path.join(runtimeDir(), 'mounts');
    const st = fs.lstatSync(dir);
    return st.isDirectory() && !st.isSymbolicLink() && fs.realpathSync(dir) === dir ? dir : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Why the daemon must not remove the directory `dir`, or undefined when it may (it is empty,
 * which rmdir checks): it is a real directory (not a link), directly in the daemon's own mounts
 * directory, nothing is mounted there, and it is neither inside nor equal to any recorded folder.
 */
function whyNotRemovable(dir: string, mountsDir: string | undefined, folders: string[]): string | undefined {
  if (!mountsDir) return 'the daemon has no mounts directory of its own';
  if (path.dirname(dir) !== mountsDir) return `it is not in the daemon's own mounts directory ${mountsDir}`;
  if (folders.some((f) => isInside(dir, f))) return 'it lies inside a folder a shadow shows';
  const st = fs.lstatSync(dir, { throwIfNoEntry: false });
  if (!st) return 'it is gone already';
  if (st.isSymbolicLink() || !st.isDirectory()) return 'it is not a directory';
  if (mountedPaths().has(dir)) return 'something is still mounted there';
  return undefined;
}

/**
 * Unmounts what a crashed daemon left behind, as its state file lists it (views first, then
 * the shared mount), and removes the mount directories it had made for them once they are
 * empty. The state file may be forged, so it only names candidates: a mount is unmounted only
 * when the kernel's mount table shows, at exactly that point, a shadowfs mount of the recorded
 * folder, made by this user, whose server is gone (whyNotStaleShadow); a directory is removed
 * only when it is an empty real directory directly in the daemon's own mounts directory and
 * outside every recorded folder (whyNotRemovable). The folders are never touched. Whatever is
 * refused is logged with the reason. Returns the mounts it cleaned.
 * Adds each mount it cleaned to `proven` (the only recorded mount points remountAfterCrash
 * mounts at again).
 */
export async function recoverStale(state: StateFile | undefined, log: Logger, proven: Set<string>): Promise<string[]> {
  if (!state) return [];
  const recovered: string[] = [];
  const table = mountTable();
  const mountsDir = ownMountsDir();
  const folders = state.shadows.map((s) => s.folder);
  // The live checks of every recorded mount at once: each has its own time limit.
  const checks = new Map<string, Promise<string | undefined>>();
  for (const s of state.shadows)
    for (const p of [...(s.views ?? []), { mountPoint: s.mountPoint }])
      if (!checks.has(`${p.mountPoint}\0${s.folder}`) && table.some((m) => m.mountPoint === p.mountPoint))
        checks.set(`${p.mountPoint}\0${s.folder}`, whyNotStaleShadow(p.mountPoint, s.folder, table));
  for (const s of state.shadows) {
    const points = [...(s.views ?? []), { mountPoint: s.mountPoint, createdMountPoint: s.createdMountPoint === true }];
    for (const p of points) {
      // A normal mount refuses both (MOUNTPOINT_INSIDE_FOLDER, FOLDER_INSIDE_MOUNTPOINT): only a forged entry has them.
      if (isInside(p.mountPoint, s.folder) || isInside(s.folder, p.mountPoint)) {
        log.warn('the state file names a mount point inside (or around) its own folder; left alone', {
          name: s.name,
          mountPoint: p.mountPoint,
          folder: s.folder,
        });
        continue;
      }
      const onTable = table.some((m) => m.mountPoint === p.mountPoint);
      const why = onTable ? await checks.get(`${p.mountPoint}\0${s.folder}`) : undefined;
      if (why) {
        log.warn(`the state file names a mount that is not a stale mount of this daemon (${why}); left alone`, {
          name: s.name,
          mountPoint: p.mountPoint,
          folder: s.folder,
        });
        continue;
      }
      if (onTable) {
        if (!(await platform.forceUnmount(p.mountPoint, STALE_PROBE_MS))) {
          log.warn('could not clean a stale mount (umount -l and fusermount3 -uz failed)', { mountPoint: p.mountPoint });
          continue;
        }
        log.warn('cleaned a stale mount left by a crashed daemon', { name: s.name, mountPoint: p.mountPoint, folder: s.folder });
        recovered.push(p.mountPoint);
        proven.add(p.mountPoint);
      }
      if (p.createdMountPoint) {
        const whyKept = whyNotRemovable(p.mountPoint, mountsDir, folders);
        if (whyKept) {
          if (fs.existsSync(p.mountPoint))
            log.warn(`left a mount directory the state file says the daemon made (${whyKept})`, {
              name: s.name,
              mountPoint: p.mountPoint,
            });
          continue;
        }
        try {
          fs.rmdirSync(p.mountPoint); // only when empty: never anything with content in it
          log.info('removed the empty mount directory a crashed daemon had made', { mountPoint: p.mountPoint });
        } catch {
          // gone already, or not empty: leave it
        }
      }
    }
  }
  return recovered;
}

/**
 * The state file a previous daemon left, if any, with every entry checked for shape: a file
 * that is not one (a link, not JSON, not the shape) counts as none, and an entry (a shadow or
 * one of its views) that is not valid is left out, with a warning on `log` naming why.
 */
export function readState(statePath: string, log?: Logger): StateFile | undefined {
  let text: string;
  try {
    // Not through a link: the state file is a plain file the daemon wrote (renamed into place).
    const fd = fs.openSync(statePath, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0));
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile() || st.size > MAX_STATE_BYTES) {
        log?.warn('the state file is not a plain file of a sensible size; ignored', { statePath });
        return undefined;
      }
      text = fs.readFileSync(fd, 'utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      log?.warn('the state file cannot be read (a link?); ignored', { statePath, error: (err as Error).message });
    return undefined;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    log?.warn('the state file is not JSON; ignored', { statePath });
    return undefined;
  }
  const top = StateTop.safeParse(raw);
  if (!top.success) {
    log?.warn(`the state file is not of the daemon's shape (${issues(top.error)}); ignored`, { statePath });
    return undefined;
  }
  const shadows: ShadowEntry[] = [];
  const names = new Set<string>();
  top.data.shadows.forEach((entry, i) => {
    const s = ShadowState.safeParse(fromFormerShape(entry));
    if (!s.success) {
      log?.warn(`the state file's shadow #${i} is not valid (${issues(s.error)}); skipped`, { statePath });
      return;
    }
    if (names.has(s.data.name)) {
      log?.warn(`the state file names the shadow ${s.data.name} twice; the second one is skipped`, { statePath });
      return;
    }
    names.add(s.data.name);
    const views: ViewEntry[] = [];
    (s.data.views ?? []).forEach((v, j) => {
      const view = ViewState.safeParse(v);
      if (view.success) views.push(view.data);
      else log?.warn(`the state file's view #${j} of ${s.data.name} is not valid (${issues(view.error)}); skipped`, { statePath });
    });
    shadows.push({ ...s.data, views });
  });
  return { pid: top.data.pid, shadows };
}

/** Writes the state file: to a fresh name, then renamed into place. */
export function writeState(statePath: string, state: StateFile): void {
  // A fresh name, created exclusively: a link planted at a predictable name is never followed.
  const tmp = `${statePath}.${crypto.randomBytes(6).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(state, null, 2), { mode: 0o600, flag: 'wx' });
  fs.renameSync(tmp, statePath);
}
