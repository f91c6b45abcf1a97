// What an agent's layer changed, as whole before/after pairs per path: the input of diffs,
// patches, apply and checkpoints. The layer's change list names paths (a deleted directory is
// one entry; a directory the agent deleted and made again hides the folder's files in it); here
// every file and symlink that differs is listed once, with the folder's side as it is now and
// the agent's side as its layer shows it. Directories themselves are not listed (git tracks
// none); the directories the agent made or removed are returned apart, for apply.
//
// What a repository keeps for itself never leaves a layer as files: paths with a `.git` part (the
// repository, a submodule's or worktree's `.git` file) are left out, and so, unless asked, are
// the files the folder's git ignores (build output, caches, logs); both are named in `excluded`.
import { AsyncLocalStorage } from 'async_hooks';
import * as fs from 'fs';
import * as path from 'path';
import type { FileChange, Side } from '../patch';
import { ShadowError } from '../common/errors';
import { normalizeRelPath } from '../common/paths';
import { platform } from '../platform';
import type { Layer, Shadow } from '../shadow';
import { addon, type ChangeBase } from '../shadow/native';
import { Beneath } from './beneath';
import { ignoredPaths } from './branch';
import { LARGE_FILE_BYTES, fdPieces, gitBlobIdOf, layerPieces, readAt } from './content';

// One side of a path and one path's change, as the patch module takes them: `old` is the folder's
// side now (null: nothing there), `new` the agent's (null: deleted in the layer).
export type { FileChange, Side } from '../patch';

export interface Collected {
  /** Paths whose sides differ, in path order. */
  files: FileChange[];
  /** Base records of files the layer copied from the folder (what the folder's file was then). */
  bases: Map<string, ChangeBase>;
  /** Directories the layer made (not in the folder now) and those it removed (in the folder now). */
  dirsAdded: string[];
  dirsRemoved: string[];
  /** Paths left out: devices, fifos and sockets have no content to diff. */
  skipped: string[];
  /** Changed paths left out because they are the repository's own metadata or ignored by git. */
  excluded: Excluded[];
}

export type ExcludedReason = 'repository-metadata' | 'ignored';
export interface Excluded {
  path: string;
  reason: ExcludedReason;
}

export interface CollectOptions {
  /** Keep the files the folder's git ignores (default: leave them out). */
  includeIgnored?: boolean;
  /** Leave nothing out, `.git` included (checkpoints keep a layer whole). */
  everything?: boolean;
  /** Filled with what each collect under these options left out. */
  excluded?: Excluded[];
}

// Options for the collect() calls made inside a job (apply collects itself, and takes no such option).
const ambient = new AsyncLocalStorage<CollectOptions>();

/** Runs `job` with `opts` as the options of every collect() it makes that names none. */
export function withCollectOptions<T>(opts: CollectOptions, job: () => Promise<T>): Promise<T> {
  return ambient.run(opts, job);
}

/**
 * Whether `rel` is (or is under) a `.git` entry: a repository's own data, never work. Names that
 * Windows takes for `.git` count too, on every platform, as git's own core.protectNTFS does: the
 * Win32 layer drops trailing dots and spaces (`.git.`, `.git `), NTFS opens a directory through
 * its streams (`.git::$INDEX_ALLOCATION`) and through its 8.3 short name (`GIT~1`). A layer that
 * has one would otherwise write into the user's `.git` when applied on Windows.
 */
export function isRepositoryMetadata(rel: string): boolean {
  return rel.split(/[\\/]/).some(isDotGitName);
}

// `.git`, or what NTFS resolves to it: any case, then dots and spaces, then nothing or a stream.
const DOT_GIT_ON_NTFS = /^(?:\.git|git~[0-9]+)[. ]*(?::.*)?$/i;

function isDotGitName(part: string): boolean {
  return DOT_GIT_ON_NTFS.test(part);
}

/** The names that make a directory a repository to git (is_git_directory): HEAD, objects and refs. */
const REPOSITORY_NAMES = ['HEAD', 'objects', 'refs'];
/** What git obeys or runs in a directory it takes for a repository. */
const CONTROL_NAMES = ['config', 'config.worktree', 'hooks', 'commondir'];

/**
 * The changed `paths` that would make a directory of the folder a repository git runs hooks and
 * obeys a config in, or give one its hooks or config: a change that brings the last of HEAD,
 * objects and refs into a directory that lacks them in the folder (and everything beneath it),
 * and a change to the config, hooks or `objects/info/alternates` of a directory that holds all
 * three in the folder or will once applied. A layer's guard sees only that layer with the folder
 * as it was at the write: two agents' layers (or one layer and your own later work) could each
 * bring part of one, and apply would assemble it (an adversarial review did, and the user's
 * `git log` there ran the agent's pager). Conservative: any changed path counts as present.
 */
function repositoryMaking(folder: string, paths: string[]): Set<string> {
  const fold = (n: string): string => (platform.caseInsensitiveNames ? n.toLowerCase() : n);
  // Per directory that a changed path names a repository or control entry of: those entries.
  const touched = new Map<string, Map<string, string[]>>();
  for (const p of paths) {
    const parts = p.split('/');
    for (let i = 0; i < parts.length; i++) {
      const name = fold(parts[i]);
      if (![...REPOSITORY_NAMES, ...CONTROL_NAMES].some((n) => fold(n) === name)) continue;
      const dir = parts.slice(0, i).join('/');
      const entries = touched.get(dir) ?? new Map<string, string[]>();
      const list = entries.get(name) ?? [];
      list.push(p);
      entries.set(name, list);
      touched.set(dir, entries);
    }
  }
  const out = new Set<string>();
  for (const [dir, entries] of touched) {
    let inFolder: Set<string>;
    try {
      inFolder = new Set(fs.readdirSync(path.join(folder, dir)).map(fold));
    } catch {
      inFolder = new Set();
    }
    const names = REPOSITORY_NAMES.map(fold);
    const wasRepository = names.every((n) => inFolder.has(n));
    const willBe = names.every((n) => inFolder.has(n) || entries.has(n));
    if (!willBe) continue;
    // It becomes one: the entries that complete it stay out (so it does not), and its control files.
    if (!wasRepository) for (const n of names) if (!inFolder.has(n)) for (const p of entries.get(n) ?? []) out.add(p);
    for (const n of CONTROL_NAMES.map(fold)) for (const p of entries.get(n) ?? []) out.add(p);
    for (const p of entries.get(fold('objects')) ?? [])
      if (/^objects\/info\/(?:http-)?alternates$/i.test(p.slice(dir ? dir.length + 1 : 0))) out.add(p);
  }
  return out;
}

/**
 * Why each of `paths` is left out of diffs, patches and apply (absent: it is not). `dirs` are the
 * ones that are directories (git's "dir/" patterns match them only when told).
 */
export async function exclusions(
  folder: string,
  paths: string[],
  dirs: Set<string>,
  includeIgnored = false,
): Promise<Map<string, ExcludedReason>> {
  const out = new Map<string, ExcludedReason>();
  const rest: string[] = [];
  const repository = repositoryMaking(folder, paths);
  for (const p of paths) {
    if (isRepositoryMetadata(p) || repository.has(p)) out.set(p, 'repository-metadata');
    else rest.push(p);
  }
  if (!includeIgnored && rest.length) {
    const asked = rest.map((p) => (dirs.has(p) ? `${p}/` : p));
    const ignored = await ignoredPaths(folder, asked);
    rest.forEach((p, i) => {
      if (ignored.has(asked[i])) out.set(p, 'ignored');
    });
  }
  return out;
}

const FILE = 0o100644;
const EXEC = 0o100755;
const LINK = 0o120000;
const EMPTY = Buffer.alloc(0);

function gitMode(perm: number): number {
  return perm & 0o111 ? EXEC : FILE;
}

/**
 * The folder's side at `rel` now, 'dir' for a directory, 'other' for what holds no content (a
 * FIFO, device or socket), or null: read beneath the folder, never through a link (a path through
 * a link of the folder names nothing in it: null, so no content from outside the folder is ever
 * shown as the folder's), and never opening anything but a regular file (with O_NONBLOCK, then
 * checked by fstat, so a FIFO swapped in cannot hang the read). A file over LARGE_FILE_BYTES is a
 * `large` side: hashed by streaming, not held in memory.
 */
export async function folderSide(folder: string | Beneath, rel: string): Promise<Side | 'dir' | 'other' | null> {
  if (typeof folder !== 'string') return folderSideIn(folder, rel);
  const root = Beneath.open(folder);
  try {
    return await folderSideIn(root, rel);
  } finally {
    root.close();
  }
}

async function folderSideIn(root: Beneath, rel: string): Promise<Side | 'dir' | 'other' | null> {
  let st: fs.Stats | null;
  try {
    st = root.lstat(rel);
  } catch (err) {
    if (err instanceof ShadowError && err.code === 'PATH_THROUGH_SYMLINK') return null;
    throw err;
  }
  if (!st) return null;
  if (st.isDirectory()) return 'dir';
  if (st.isSymbolicLink()) return { kind: 'symlink', mode: LINK, data: Buffer.from(root.readlink(rel)) };
  if (!st.isFile()) return 'other';
  let opened: { fd: number; stat: fs.Stats };
  try {
    opened = root.openFile(rel);
  } catch (err) {
    const c = (err as { code?: string }).code;
    if (c === 'INVALID_ARGUMENT') return 'other'; // swapped for a FIFO or device since the lstat
    if (c === 'ENOENT') return null;
    if (c === 'PATH_THROUGH_SYMLINK' || c === 'ELOOP') return 'other'; // swapped for a link while looked at: left out
    throw err;
  }
  const { fd, stat } = opened;
  try {
    const mode = gitMode(stat.mode);
    if (stat.size > LARGE_FILE_BYTES) {
      const what = `${rel} in the folder`;
      return {
        kind: 'file',
        mode,
        data: EMPTY,
        large: { size: stat.size, id: await gitBlobIdOf(fdPieces(fd, stat.size, what), stat.size, what) },
      };
    }
    return { kind: 'file', mode, data: await readWhole(fd, stat.size) };
  } finally {
    fs.closeSync(fd);
  }
}

/** Reads the open file `fd` to its end (expected: about `size` bytes, which is small). */
async function readWhole(fd: number, size: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  for (;;) {
    const buf = Buffer.allocUnsafe(Math.max(size - total, 0) + 1);
    const bytesRead = await readAt(fd, buf, 0, buf.length, total);
    if (bytesRead === 0) break;
    parts.push(buf.subarray(0, bytesRead));
    total += bytesRead;
    if (total > LARGE_FILE_BYTES) throw new ShadowError('CONFLICT', 'a folder file grew while it was read; try again');
  }
  return Buffer.concat(parts, total);
}

/** The content of the folder's regular file at `rel` in pieces (read beneath the folder, see folderSide). */
export async function* folderPieces(root: Beneath, rel: string): AsyncGenerator<Buffer> {
  const { fd, stat } = root.openFile(rel);
  try {
    yield* fdPieces(fd, stat.size, `${rel} in the folder`);
  } finally {
    fs.closeSync(fd);
  }
}

/** The agent's side at `rel` as its layer shows it, 'dir', or null (a file over LARGE_FILE_BYTES: a `large` side, streamed). */
export async function layerSide(layer: Layer, rel: string): Promise<Side | 'dir' | 'other' | null> {
  let st;
  try {
    st = await layer.stat(rel);
  } catch (err) {
    if ((err as { code?: string }).code === 'NOT_FOUND' || (err as { code?: string }).code === 'NOT_A_DIRECTORY') return null;
    throw err;
  }
  if (st.type === 'directory') return 'dir';
  const stamp = st.stamp;
  if (st.type === 'symlink') return { kind: 'symlink', mode: LINK, data: Buffer.from(await layer.readlink(rel)), stamp };
  if (st.type !== 'file') return 'other';
  if (st.size > LARGE_FILE_BYTES) {
    const ext = await layer.dataExtents(rel);
    const what = `${rel} in the layer of ${layer.agentId}`;
    return {
      kind: 'file',
      mode: gitMode(st.mode),
      data: EMPTY,
      large: { size: ext.size, id: await gitBlobIdOf(layerPieces(layer, rel, ext), ext.size, what) },
      stamp,
    };
  }
  return { kind: 'file', mode: gitMode(st.mode), data: await layer.readFile(rel), stamp };
}

/** Whether the folder's object at `abs` is the one `base` recorded (inode, size, mtime, ctime). */
export function sameIdentity(abs: string, base: ChangeBase): boolean {
  try {
    const st = fs.lstatSync(abs, { bigint: true });
    return (
      Number(st.ino) === base.ino &&
      Number(st.size) === base.size &&
      String(st.mtimeNs) === base.mtimeNs &&
      String(st.ctimeNs) === base.ctimeNs
    );
  } catch {
    return false;
  }
}

export function sameSide(a: Side | null, b: Side | null): boolean {
  if (!a || !b) return a === b;
  if (a.kind !== b.kind || a.mode !== b.mode) return false;
  if (a.large || b.large) return !!a.large && !!b.large && a.large.size === b.large.size && a.large.id === b.large.id;
  return a.data.equals(b.data);
}

/** Whether `p` is `scope` or lies under it. */
function within(p: string, scope: string): boolean {
  return p === scope || p.startsWith(scope + '/');
}

/** Every file and symlink under the folder's directory `rel` (depth first, path order), read beneath the folder: a link is listed, never entered. */
function folderFiles(root: Beneath, rel: string, out: string[], dirs?: string[]): void {
  let names: fs.Dirent[];
  try {
    names = root.readdir(rel);
  } catch {
    return; // not a directory (a link to one included), or gone
  }
  dirs?.push(rel);
  for (const d of names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const child = rel ? `${rel}/${d.name}` : d.name;
    if (d.isDirectory()) folderFiles(root, child, out, dirs);
    else out.push(child);
  }
}

/** Adds every file under the folder's directory `rel` to `files`, and it and its subdirectories to `dirs`. */
function folderTree(root: Beneath, rel: string, files: Set<string>, dirs: Set<string>): void {
  const gone: string[] = [];
  const sub: string[] = [];
  folderFiles(root, rel, gone, sub);
  gone.forEach((g) => files.add(g));
  sub.forEach((d) => dirs.add(d));
}

/**
 * The changes of `agent`'s layer (or only those at or under `only`'s paths), read from the layer
 * and the folder without switching the shared mount.
 */
export async function collect(shadow: Shadow, agent: string, only?: string[], options?: CollectOptions): Promise<Collected> {
  const opts = options ?? ambient.getStore() ?? {};
  // Paths as the caller gave them: an absolute or escaping one is INVALID_PATH, not "no changes";
  // the root ("." or "") is everything.
  const named = only?.map((p) => normalizeRelPath(p, { allowRoot: true }));
  only = named?.includes('') ? undefined : named;
  const all = await collectAll(shadow, agent, only);
  if (opts.everything) return all;
  const dirs = new Set([...all.dirsAdded, ...all.dirsRemoved]);
  const why = await exclusions(
    shadow.folder,
    [...all.files.map((f) => f.path), ...dirs, ...all.skipped],
    dirs,
    opts.includeIgnored === true,
  );
  const excluded: Excluded[] = [...all.files.map((f) => f.path), ...all.skipped]
    .filter((p) => why.has(p))
    .sort(byteOrder)
    .map((p) => ({ path: p, reason: why.get(p) as ExcludedReason }));
  opts.excluded?.push(...excluded);
  return {
    files: all.files.filter((f) => !why.has(f.path)),
    bases: all.bases,
    dirsAdded: all.dirsAdded.filter((d) => !why.has(d)),
    dirsRemoved: all.dirsRemoved.filter((d) => !why.has(d)),
    skipped: all.skipped.filter((p) => !why.has(p)),
    excluded,
  };
}

async function collectAll(shadow: Shadow, agent: string, only?: string[]): Promise<Collected> {
  const root = Beneath.open(shadow.folder);
  try {
    return await collectBeneath(shadow, root, agent, only);
  } finally {
    root.close();
  }
}

/**
 * Whether `rel` is there by that very spelling, every component of it, in a side whose directories
 * `list` gives (null: none there). A side that matches names without regard to case finds
 * `foo.txt` when it holds `Foo.txt`: without this a case-only rename would read as the same file
 * on both sides (and the old name's files as changed under both). Listings are read once per call.
 */
function spelledAs(list: (dir: string) => Promise<string[] | null>): (rel: string) => Promise<boolean> {
  const listed = new Map<string, Promise<Set<string> | null>>();
  return async (rel) => {
    const parts = rel.split('/');
    for (let i = 0; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      let names = listed.get(dir);
      if (!names) {
        names = list(dir).then((n) => n && new Set(n));
        listed.set(dir, names);
      }
      if (!(await names)?.has(parts[i])) return false;
    }
    return true;
  };
}

async function collectBeneath(shadow: Shadow, root: Beneath, agent: string, only?: string[]): Promise<Collected> {
  const layer = shadow.layer(agent);
  // Sides that fold case are read only by their exact names: the layer's when the shadow matches
  // names without regard to case, the folder's when its file system does (Windows).
  const layerHas = shadow.caseInsensitive
    ? spelledAs(async (d) => (await layer.readdir(d).catch(() => null))?.map((e) => e.name) ?? null)
    : null;
  const folderHas =
    platform.caseInsensitiveNames || shadow.caseInsensitive
      ? spelledAs(async (d) => {
          try {
            return root.readdir(d).map((e) => e.name);
          } catch {
            return null;
          }
        })
      : null;
  const layerSideOf = async (rel: string): Promise<Side | 'dir' | 'other' | null> =>
    !layerHas || (await layerHas(rel)) ? layerSide(layer, rel) : null;
  const folderSideOf = async (rel: string): Promise<Side | 'dir' | 'other' | null> =>
    !folderHas || (await folderHas(rel)) ? folderSide(root, rel) : null;
  const changes = (await layer.changes()).filter(
    (c) => !only || only.length === 0 || only.some((s) => within(c.path, s) || within(s, c.path)),
  );
  const candidates = new Set<string>();
  const bases = new Map<string, ChangeBase>();
  const dirsAdded = new Set<string>();
  const dirsRemoved = new Set<string>();
  const skipped: string[] = [];
  // Directories whose whole tree was compared with the folder's (below).
  const walked = new Set<string>();
  // A directory the agent made or replaced, all the way down: a directory moved or renamed in
  // the layer (`mv lib lib2`) is one change, and what it holds (the folder's files, read from
  // where they were) is named by no other, so every file and link under it is a candidate, every
  // directory under it the folder lacks is made, and the folder's entries it no longer shows go.
  const walkLayerTree = async (rel: string): Promise<void> => {
    if (walked.has(rel)) return;
    walked.add(rel);
    const mine = await layer.readdir(rel);
    const names = new Set(mine.map((e) => e.name));
    for (const e of mine) {
      const child = `${rel}/${e.name}`;
      if (unplain(child)) {
        skipped.push(child);
        continue;
      }
      if (e.type !== 'directory') {
        candidates.add(child);
        if ((await folderSideOf(child)) === 'dir') folderTree(root, child, candidates, dirsRemoved);
        continue;
      }
      const inFolder = await folderSideOf(child);
      if (inFolder !== 'dir') {
        dirsAdded.add(child);
        if (inFolder !== null) candidates.add(child); // a folder file or link where the agent has a directory
      }
      await walkLayerTree(child);
    }
    let theirs: fs.Dirent[] = [];
    try {
      theirs = root.readdir(rel);
    } catch {
      // not in the folder, gone, or not a directory beneath it
    }
    for (const d of theirs) {
      if (names.has(d.name)) continue;
      const child = `${rel}/${d.name}`;
      if (d.isDirectory()) folderTree(root, child, candidates, dirsRemoved);
      else candidates.add(child);
    }
  };
  for (const c of changes) {
    if (c.base) bases.set(c.path, c.base);
    if (c.type === 'special' || unplain(c.path)) {
      skipped.push(c.path);
      continue;
    }
    if (c.type !== 'directory') {
      candidates.add(c.path);
      // A file where the folder has a directory: the folder's files under it go.
      if ((await folderSideOf(c.path)) === 'dir') folderTree(root, c.path, candidates, dirsRemoved);
      continue;
    }
    const inFolder = (await folderSideOf(c.path)) === 'dir';
    const inLayer = (await layerSideOf(c.path)) === 'dir';
    if (inLayer && !inFolder) dirsAdded.add(c.path);
    if (!inFolder && !inLayer) continue;
    if (!inLayer) {
      // Deleted (or replaced by a file): every folder file under it.
      folderTree(root, c.path, candidates, dirsRemoved);
      continue;
    }
    // Made, moved there, or emptied and refilled (which hides the folder's entries): the change
    // list names neither what it holds from elsewhere nor what it hides. A change of its mode or
    // times alone leaves its entries as they were.
    if (c.kind !== 'metadata') await walkLayerTree(c.path);
  }
  // What the agent's mask hides does not exist for it: a folder file under a directory the agent
  // removed or replaced (one the user put there since included) is neither shown nor touched.
  const globs = shadow.maskOf(agent).globs;
  if (globs.length) {
    const masked = (ps: Set<string>): void => {
      const list = [...ps];
      addon()
        .maskHides(globs, shadow.caseInsensitive, list)
        .forEach((hidden, i) => hidden && ps.delete(list[i]));
    };
    masked(candidates);
    masked(dirsRemoved);
  }
  const files: FileChange[] = [];
  for (const rel of [...candidates].sort(byteOrder)) {
    if (only && only.length && !only.some((s) => within(rel, s))) continue;
    if (unplain(rel)) {
      skipped.push(rel);
      continue;
    }
    const before = await folderSideOf(rel);
    const after = await layerSideOf(rel);
    if (before === 'other' || after === 'other') {
      skipped.push(rel);
      continue;
    }
    const old = before === 'dir' ? null : before;
    const now = after === 'dir' ? null : after;
    if (!sameSide(old, now)) files.push({ path: rel, old, new: now });
  }
  return {
    files,
    bases,
    dirsAdded: [...dirsAdded].sort(byteOrder),
    dirsRemoved: [...dirsRemoved].sort(byteOrder),
    skipped: [...new Set(skipped)],
    excluded: [],
  };
}

/**
 * A path with a backslash in a name: a plain character on Linux and macOS, a separator on Windows,
 * which the folder's reader refuses (INVALID_PATH) rather than guess. Such a path is skipped (listed,
 * never written), so that one such name does not stop the diff, patch and apply of every other.
 */
function unplain(rel: string): boolean {
  return rel.includes('\\');
}

/** Byte-wise order of '/'-separated paths (git's order). */
export function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
