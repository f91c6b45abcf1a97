// Apply: the one place where shadowfs writes the user's folder, and only when asked. An agent's
// changes are written file by file, each atomically (written beside under a temporary name,
// then renamed over), and every path written leaves the agent's layer (the folder shows through
// there again). A file the user changed since the agent's copy was taken is a conflict: nothing
// is written for it unless the caller says how to resolve it; text conflicts come with a
// three-way merge (node-diff3) when the base the agent started from can be found. Every step
// resolves beneath the folder with links refused (./beneath): apply never writes or removes
// through a link, whoever made it. Type changes (a directory replaced by a file or link, ...) and
// links out of the folder are applied only when confirmed; a directory is removed only when the
// change accounts for everything in it, never recursively.
import { execFileSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { addon, type ChangeBase } from '../shadow/native';
import { normalizeRelPath } from '../common/paths';
import type { Layer, Shadow } from '../shadow';
import { hasNulPrefix, isUtf8 } from '../patch/git-format';
import { platform } from '../platform';
import { Beneath } from './beneath';
import { byteOrder, collect, folderSide, isRepositoryMetadata, sameIdentity, sameSide, type FileChange, type Side } from './collect';
import { layerSpans } from './content';

// node-diff3 ships ESM typings only; its CommonJS build is what require() loads (when a merge is needed).
type Diff3Region = { ok?: string[]; conflict?: { a: string[]; o: string[]; b: string[] } };
function diff3Merge(a: string[], o: string[], b: string[], opts?: { excludeFalseConflicts?: boolean }): Diff3Region[] {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const m = require('node-diff3') as {
    diff3Merge: (a: string[], o: string[], b: string[], opts?: { excludeFalseConflicts?: boolean }) => Diff3Region[];
  };
  return m.diff3Merge(a, o, b, opts);
}

export type Resolution = 'agent' | 'folder' | 'merged' | { content: string };

export interface ApplyOptions {
  paths?: string[];
  dryRun?: boolean;
  /** How to resolve conflicts, by path: take the agent's version, keep the folder's, write the clean three-way merge, or write given content. */
  resolutions?: Record<string, Resolution>;
  /** Base contents known from checkpoints (path → bytes the agent started from), for merges. */
  baseContents?: Map<string, Buffer>;
  /** Base records that win over the layer's own (a layer restored from a checkpoint). */
  restoredBases?: Map<string, ChangeBase>;
  /**
   * When the layer started (ms since the epoch; see Provenance.layerSince). Where the layer
   * recorded no base, a folder file changed after it is one the agent never saw; unknown: every
   * such file counts as changed.
   */
  layerSince?: number;
  /**
   * The folder's directories this agent's earlier applies changed, each with its times as the
   * apply left it ("mtimeNs:ctimeNs"); apply adds the ones it changes. A directory still so is
   * not counted as changed after the agent started (see movedInAfter): its change was the agent's.
   */
  appliedDirs?: Map<string, string>;
  /**
   * Confirms type changes (a directory replaced by a file or link, a file or link by a
   * directory, a file by a link, ...) and links that point out of the folder. Without it they
   * are refused and reported as conflicts (with whatever lies under them); the rest is applied.
   */
  allowTypeChanges?: boolean;
  /** Conflicts carry the text of the merge's common version too (`base`), for a merge tool. */
  includeBase?: boolean;
  /**
   * Per path, what to write to the folder instead of the agent's version: some of its hunks
   * (src/patch/review). The layer keeps the agent's version over the new folder file, so what is
   * left of its change is the hunks not taken.
   */
  partial?: Map<string, Side>;
  /**
   * Other shadows whose folder holds this one's or lies in it (the daemon's): their layers take
   * their own copies of what their agents moved from the paths this apply changes, as this
   * shadow's layers do, before the folder changes.
   */
  neighbours?: () => Shadow[];
  /** @internal For tests: called after a step's checks, right before it touches the folder. */
  beforeStep?: (rel: string, step: string) => void;
}

export type EntryKind = 'file' | 'directory' | 'symlink';

export interface ApplyConflict {
  path: string;
  reason: string;
  /** The folder's version now (text, or null when absent or binary), and the agent's. */
  folder: string | null;
  agent: string | null;
  binary: boolean;
  /** Three-way merge with conflict markers (null: no base to merge from, or binary). */
  merged: string | null;
  /** Conflicting regions in `merged` (0: it merged cleanly; resolve with "merged"). */
  mergeConflicts: number;
  /** What the merge took as the common version: the one the agent started from, or git's HEAD version (a guess: the layer did not record which it started from). */
  mergeBase?: 'recorded' | 'git-head';
  /** With ApplyOptions.includeBase: that common version's text (null: none known, or binary), for a merge tool. */
  base?: string | null;
  /** Each conflicting region of `merged` with REGION_CONTEXT lines around it: what a reviewer reads instead of whole files. */
  regions?: ConflictRegion[];
}

export interface ConflictRegion {
  /** 1-based lines of `merged` the excerpt spans. */
  startLine: number;
  endLine: number;
  text: string;
}

/** Lines of context around a conflicting region in its excerpt. */
export const REGION_CONTEXT = 3;

/** The markers a merge writes; a file that still holds them is not resolved. */
const UNRESOLVED = [/^<<<<<<< folder$/m, /^>>>>>>> agent$/m];

export function hasConflictMarkers(text: string): boolean {
  return UNRESOLVED.every((re) => re.test(text));
}

export interface ApplyResult {
  dryRun: boolean;
  /** What was (or, dry run, would be) done to the folder. */
  applied: Array<{ path: string; action: 'write' | 'create' | 'delete' | 'mode' | 'keep-folder' | 'same' }>;
  conflicts: ApplyConflict[];
  /** Paths written to the folder that the layer could not give back (under a directory it replaced): the layer still holds them, equal to the folder now. */
  kept: string[];
  skipped: string[];
  /** Entries whose type the change makes different (applied: done; else refused or dry run). Always set by applyLayer. */
  typeChanges?: Array<{ path: string; from: EntryKind; to: EntryKind; applied: boolean }>;
  /** Every symbolic link the change writes, with its target. Always set by applyLayer. */
  links?: Array<{ path: string; target: string }>;
}

/**
 * Content apply does not handle as text, as the diff does not: large, a NUL in its first 8000
 * bytes, or not valid UTF-8 (Latin-1, UTF-16: decoded as UTF-8 its bytes would come back as
 * U+FFFD, so a merge or conflict markers written from it would change every such byte).
 */
function isBinary(side: Side | null | undefined): boolean {
  return !!side && (!!side.large || hasNulPrefix(side.data) || !isUtf8(side.data));
}

function text(side: Side | null): string | null {
  return side && side.kind === 'file' && !isBinary(side) ? side.data.toString('utf8') : null;
}

/** Whether two sides hold the same bytes (modes aside); large ones by size and blob id. */
function sameContent(a: Side, b: Side): boolean {
  if (a.kind !== b.kind) return false;
  if (a.large || b.large) return !!a.large && !!b.large && a.large.size === b.large.size && a.large.id === b.large.id;
  return a.data.equals(b.data);
}

/** Whether the folder's file at `abs` is still what `base` recorded (identity, else content hash). */
function unchangedSince(abs: string, base: ChangeBase, now: Side | null): boolean {
  if (sameIdentity(abs, base)) return true;
  return !!(base.hash && now && now.kind === 'file' && !now.large && addon().contentHash(now.data) === base.hash);
}

/** How far a file time may lag the moment it was made (the kernel's coarse clock: a few ms; generous). */
const COARSE_CLOCK_SLACK_MS = 100;

/** Changed after `since` (mtime or ctime), or since unknown. */
function touchedAfter(abs: string, since: number | undefined): boolean {
  if (since === undefined) return true;
  try {
    const st = fs.lstatSync(abs);
    return Math.max(st.mtimeMs, st.ctimeMs) > since;
  } catch {
    return false;
  }
}

/**
 * The version to merge from: the bytes the agent started from when they are known for sure (kept
 * by a checkpoint, or git's HEAD version when its hash is the one the layer recorded), else git's
 * HEAD version as the best guess (the layer replaced the file without reading it, or recorded no
 * base), said so in `mergeBase`.
 */
function baseContent(
  folder: string,
  rel: string,
  base: ChangeBase | undefined,
  known?: Map<string, Buffer>,
): { data: Buffer; from: 'recorded' | 'git-head' } | null {
  const k = known?.get(rel);
  if (k) return { data: k, from: 'recorded' };
  let blob: Buffer;
  try {
    blob = execFileSync('git', ['-C', folder, 'show', `HEAD:./${rel}`], { stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 << 20 });
  } catch {
    return null; // not a git repository, or the file is not in HEAD
  }
  if (base?.hash) return addon().contentHash(blob) === base.hash ? { data: blob, from: 'recorded' } : null;
  return { data: blob, from: 'git-head' };
}

function mergeText(folder: string, base: string, agent: string): { merged: string; conflicts: number; regions: ConflictRegion[] } {
  const split = (s: string) => s.split('\n');
  const regions = diff3Merge(split(folder), split(base), split(agent), { excludeFalseConflicts: true });
  const out: string[] = [];
  const spans: Array<[number, number]> = []; // 0-based, end exclusive
  for (const r of regions) {
    if (r.ok) out.push(...r.ok);
    else if (r.conflict) {
      const start = out.length;
      out.push('<<<<<<< folder', ...r.conflict.a, '||||||| base', ...r.conflict.o, '=======', ...r.conflict.b, '>>>>>>> agent');
      spans.push([start, out.length]);
    }
  }
  // Regions whose context would overlap are shown as one excerpt.
  const shown: ConflictRegion[] = [];
  for (const [a, b] of spans) {
    const from = Math.max(0, a - REGION_CONTEXT);
    const to = Math.min(out.length, b + REGION_CONTEXT);
    const last = shown[shown.length - 1];
    if (last && from <= last.endLine) {
      last.endLine = to;
      last.text = out.slice(last.startLine - 1, to).join('\n');
    } else shown.push({ startLine: from + 1, endLine: to, text: out.slice(from, to).join('\n') });
  }
  return { merged: out.join('\n'), conflicts: spans.length, regions: shown };
}

/**
 * What is at `rel` in the folder now, read beneath it (never through a link; a FIFO or device is
 * 'other', never opened but with O_NONBLOCK; a large file is hashed by streaming).
 */
async function folderNow(root: Beneath, rel: string): Promise<Side | 'dir' | 'other' | null> {
  root.lstat(rel); // a path through a link of the folder: PATH_THROUGH_SYMLINK, reported
  return folderSide(root, rel);
}

/** The agent's large file `rel`, as spans for Beneath.writeFrom, checked to be the content `side` recorded. */
async function* checkedSpans(layer: Layer, rel: string, side: Side): AsyncGenerator<Buffer | number> {
  const sha = crypto.createHash('sha1').update(`blob ${side.large!.size}\0`);
  for await (const s of layerSpans(layer, rel)) {
    if (typeof s === 'number')
      for (let left = s; left > 0; left -= ZERO_PIECE.length) sha.update(ZERO_PIECE.subarray(0, Math.min(left, ZERO_PIECE.length)));
    else sha.update(s);
    yield s;
  }
  if (sha.digest('hex') !== side.large!.id)
    throw new ShadowError('CONFLICT', `${rel} changed in the layer while apply ran; apply it again`);
}
const ZERO_PIECE = Buffer.alloc(1 << 20);

/** Whether `p` is `d` or lies under it. */
function under(p: string, d: string): boolean {
  return p === d || p.startsWith(d + '/');
}

/** The directories above `p` ('a/b/c' → 'a/b', 'a'). */
function ancestors(p: string): string[] {
  const out: string[] = [];
  for (let i = p.lastIndexOf('/'); i > 0; i = p.lastIndexOf('/', i - 1)) out.push(p.slice(0, i));
  return out;
}

/** Whether a link at `rel` to `target` points out of the folder (absolute, or up past its root). */
function leavesFolder(rel: string, target: string): boolean {
  if (path.posix.isAbsolute(target) || path.win32.isAbsolute(target)) return true;
  const n = path.posix.normalize(path.posix.join(path.posix.dirname(rel), target.replace(/\\/g, '/')));
  return n === '..' || n.startsWith('../');
}

/**
 * Whether a link at `rel` (inside the folder) leads into a repository's metadata: through it,
 * what the user's tools write at the link's path would land in `.git` (a hook, the config).
 */
function intoRepository(rel: string, target: string): boolean {
  return isRepositoryMetadata(path.posix.normalize(path.posix.join(path.posix.dirname(rel), target.replace(/\\/g, '/'))));
}

function message(err: unknown): string {
  if (err instanceof ShadowError) return err.message;
  const e = err as NodeJS.ErrnoException;
  return e.code ? `the folder refused it (${e.code})` : String(err);
}

const CONFIRM = 'confirm it with allowTypeChanges (shadowfs apply --allow-type-changes)';

export async function applyLayer(shadow: Shadow, agent: string, opts: ApplyOptions = {}): Promise<ApplyResult> {
  const root = Beneath.open(shadow.folder);
  const holds: Array<() => void> = []; // keepMoved's, until the folder is done with
  try {
    return await applyBeneath(shadow, root, agent, opts, holds);
  } finally {
    for (const release of holds) release();
    root.close();
  }
}

async function applyBeneath(
  shadow: Shadow,
  root: Beneath,
  agent: string,
  opts: ApplyOptions,
  holds: Array<() => void>,
): Promise<ApplyResult> {
  const only = opts.paths?.map((p) => normalizeRelPath(p));
  const typeChanges: NonNullable<ApplyResult['typeChanges']> = [];
  const links: NonNullable<ApplyResult['links']> = [];
  const res: ApplyResult = { dryRun: !!opts.dryRun, applied: [], conflicts: [], kept: [], skipped: [], typeChanges, links };
  const c = await collect(shadow, agent, only);
  res.skipped.push(...c.skipped);
  const since = opts.layerSince;
  const layer = shadow.layer(agent);
  // Whether a directory above `rel`, among those the agent's layer has changes of (made,
  // removed, replaced, or its mode or times), was changed in the folder after the agent started:
  // a directory moved in there (mv) keeps the times of all it holds, so only the directory
  // shows the move. Such files are not what the agent saw (a
  // conflict, as any file changed since), whatever their own times say.
  const agentDirs = (await layer.changes()).filter((x) => x.type === 'directory').map((x) => x.path);
  /** Whether the folder's directory `d` changed after the agent started, other than by its own earlier applies. */
  const dirChangedSince = (d: string): boolean => {
    const abs = path.join(shadow.folder, d);
    const own = opts.appliedDirs?.get(d);
    return touchedAfter(abs, since) && (own === undefined || own !== dirStamp(abs));
  };
  const dirTouched = new Map<string, boolean>();
  const movedInAfter = (rel: string): boolean =>
    ancestors(rel)
      .filter((d) => agentDirs.some((a) => under(d, a)))
      .some((d) => {
        let t = dirTouched.get(d);
        if (t === undefined) dirTouched.set(d, (t = dirChangedSince(d)));
        return t;
      });
  const resolutions = new Map(Object.entries(opts.resolutions ?? {}).map(([k, v]) => [normalizeRelPath(k), v]));
  const dirsAdded = c.dirsAdded.filter((d) => !only || only.length === 0 || only.some((s) => under(d, s)));
  const conflict = (p: string, reason: string, f?: FileChange): void => {
    res.conflicts.push({
      path: p,
      reason,
      folder: text(f?.old ?? null),
      agent: text(f?.new ?? null),
      binary: false,
      merged: null,
      mergeConflicts: 0,
    });
  };
  // What is in the folder at `rel` now; a path through a link of the folder is reported and held.
  const linked = new Map<string, string>();
  const kindNow = (rel: string): EntryKind | 'other' | null => {
    try {
      const st = root.lstat(rel);
      return !st ? null : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : st.isFile() ? 'file' : 'other';
    } catch (err) {
      linked.set(rel, message(err));
      return 'other';
    }
  };

  // Type changes (a directory replaced by a file or link, a link or file by a directory, a file
  // by a link...) and links out of the folder: shown, and applied only when confirmed. Whatever
  // lies under such a path waits with it ("held").
  const held = new Map<string, string>(); // path at or under which nothing is done → why
  const typeChange = new Map<string, NonNullable<ApplyResult['typeChanges']>[number]>();
  for (const f of c.files) {
    if (!f.new) continue;
    const now = kindNow(f.path);
    const from = now === 'directory' ? 'directory' : f.old && f.old.kind !== f.new.kind ? f.old.kind : null;
    if (from) typeChange.set(f.path, { path: f.path, from, to: f.new.kind, applied: false });
    if (f.new.kind === 'symlink') links.push({ path: f.path, target: f.new.data.toString() });
  }
  const appeared = new Set<string>(); // a file or link the folder has where the agent made a directory, made after the agent started
  for (const d of dirsAdded) {
    const now = kindNow(d);
    if (now !== 'file' && now !== 'symlink') continue;
    const base = opts.restoredBases?.get(d) ?? c.bases.get(d);
    const abs = path.join(shadow.folder, d);
    // File times come from the kernel's coarse clock, which can lag Date.now() (when `since` was
    // taken) by a tick: a link made just after the agent started may carry an earlier time. Doubt
    // makes it "appeared", a conflict, so the user's new entry is never replaced without asking.
    if (base ? sameIdentity(abs, base) : !touchedAfter(abs, since === undefined ? undefined : since - COARSE_CLOCK_SLACK_MS))
      typeChange.set(d, { path: d, from: now, to: 'directory', applied: false });
    else appeared.add(d);
  }
  for (const d of appeared)
    if (![...linked.keys()].some((p) => p.startsWith(d + '/')))
      held.set(d, `the folder has a ${kindNow(d)} at ${d} now, made after the agent started, where the agent made a directory`);
    else held.set(d, '');
  // Under a link of the folder: held, unless the change replaces that link by a directory.
  for (const [p, why] of linked)
    if (![...typeChange.values()].some((t) => t.to === 'directory' && t.from !== 'directory' && p.startsWith(t.path + '/')))
      held.set(p, why);
  for (const t of [...typeChange.values()].sort((a, b) => byteOrder(a.path, b.path))) {
    typeChanges.push(t);
    if (!opts.allowTypeChanges) held.set(t.path, `type change: ${t.path} ${t.from} -> ${t.to}; ${CONFIRM}`);
  }
  for (const l of links)
    if (!opts.allowTypeChanges && !held.has(l.path))
      if (leavesFolder(l.path, l.target)) held.set(l.path, `symlink: ${l.path} -> ${l.target} points out of the folder; ${CONFIRM}`);
      else if (intoRepository(l.path, l.target))
        held.set(l.path, `symlink: ${l.path} -> ${l.target} points into a repository's .git; ${CONFIRM}`);
  const heldBy = (p: string): string | undefined => [...held.keys()].find((h) => under(p, h));

  const writes: Array<{ f: FileChange; side: Side | null; action: ApplyResult['applied'][number]['action'] }> = [];
  const give: string[] = []; // paths that leave the layer
  const keptFolder = new Set<string>(); // of those, the ones the user kept their version of
  // A file the agent moved and then wrote names no origin any more, but its base is the folder
  // file it was copied from: one the layer deletes, found by its inode number (in the whole
  // layer, so that applying either half alone is seen as half of a move).
  const layerChanges = await layer.changes();
  const deletedIno = new Map<number, string>();
  for (const x of layerChanges)
    if (x.kind === 'deleted' && x.type === 'file')
      try {
        deletedIno.set(fs.lstatSync(path.join(shadow.folder, x.path)).ino, x.path);
      } catch {
        // gone meanwhile: nothing was moved from it
      }
  const movedAndWritten: Array<{ path: string; origin: string }> = [];
  // Or, in a directory the agent moved, the file at the same place under the directory's origin.
  const movedDirs = layerChanges
    .filter((x) => x.type === 'directory' && x.origin !== undefined)
    .sort((a, b) => b.path.length - a.path.length);
  const sameInode = (rel: string, ino: number): boolean => {
    try {
      return fs.lstatSync(path.join(shadow.folder, rel)).ino === ino;
    } catch {
      return false;
    }
  };
  for (const x of layerChanges) {
    const base = opts.restoredBases?.get(x.path) ?? x.base;
    if (x.type !== 'file' || x.origin !== undefined || !base || (x.kind !== 'added' && x.kind !== 'modified')) continue;
    let from = x.kind === 'added' ? deletedIno.get(base.ino) : undefined;
    if (from === undefined) {
      const d = movedDirs.find((m) => under(x.path, m.path) && m.path !== x.path);
      const there = d ? d.origin! + x.path.slice(d.path.length) : undefined;
      if (there !== undefined && sameInode(there, base.ino)) from = there;
    }
    if (from !== undefined && unchangedSince(path.join(shadow.folder, from), base, null))
      movedAndWritten.push({ path: x.path, origin: from });
  }
  for (const f of c.files) {
    const abs = path.join(shadow.folder, f.path);
    const base = opts.restoredBases?.get(f.path) ?? c.bases.get(f.path);
    let why: string | null = null;
    if (base) {
      // A file moved from a folder file still as the agent copied it: nothing of the user's is at stake at its new name.
      // (or where the folder's file is one the agent replaces as it found it, in a rotation)
      const moved = (f.old === null || !touchedAfter(abs, since)) && movedAndWritten.some((m) => m.path === f.path);
      if (!moved && !unchangedSince(abs, base, f.old)) why = 'the folder file changed since the agent copied it';
    } else if (f.old && touchedAfter(abs, since)) {
      why =
        f.new === null
          ? 'the agent deletes a file that changed in the folder after the agent started'
          : 'the folder file changed (or appeared) after the agent started, and the agent never saw that version';
    } else if (f.old && movedInAfter(f.path)) {
      why = `a directory above ${f.path} changed in the folder after the agent started (something was moved in, out or made there), so this may not be the file the agent saw`;
    }
    const kind = f.old && f.new ? (sameContent(f.old, f.new) ? 'mode' : 'write') : f.new ? 'create' : 'delete';
    const agentNow = text(f.new);
    if (!why && agentNow !== null && hasConflictMarkers(agentNow) && !(f.old && text(f.old) !== null && hasConflictMarkers(text(f.old)!)))
      why =
        "the agent's file still holds conflict markers (<<<<<<< folder ... >>>>>>> agent): resolve them in the layer, or take it as it is";
    const hold = heldBy(f.path);
    const chosen = opts.partial?.get(f.path);
    if (!why) {
      if (hold) continue; // reported with the path that holds it
      writes.push({ f, side: chosen ?? f.new, action: chosen ? 'write' : kind });
      give.push(f.path);
      continue;
    }
    const how = hold ? undefined : resolutions.get(f.path);
    const binary = isBinary(f.old) || isBinary(f.new);
    const baseBytes = binary ? null : baseContent(shadow.folder, f.path, base, opts.baseContents);
    const folderText = text(f.old);
    const agentText = text(f.new);
    const m =
      baseBytes && folderText !== null && agentText !== null ? mergeText(folderText, baseBytes.data.toString('utf8'), agentText) : null;
    if (how === 'agent') {
      writes.push({ f, side: chosen ?? f.new, action: chosen ? 'write' : kind });
      give.push(f.path);
    } else if (how === 'folder') {
      res.applied.push({ path: f.path, action: 'keep-folder' });
      give.push(f.path);
      keptFolder.add(f.path);
    } else if (how === 'merged' && m && m.conflicts === 0) {
      writes.push({ f, side: { kind: 'file', mode: f.new!.mode, data: Buffer.from(m.merged) }, action: 'write' });
      give.push(f.path);
    } else if (how && typeof how === 'object' && typeof how.content === 'string') {
      writes.push({
        f,
        side: { kind: 'file', mode: f.new?.mode ?? f.old?.mode ?? 0o100644, data: Buffer.from(how.content) },
        action: 'write',
      });
      give.push(f.path);
    } else {
      res.conflicts.push({
        path: f.path,
        reason:
          how === 'merged'
            ? `${why}; the merge is not clean (${m ? m.conflicts : binary ? 'binary, or not UTF-8 text: nothing is merged line by line' : 'no base to merge from'})`
            : why,
        folder: folderText,
        agent: agentText,
        binary,
        merged: m?.merged ?? null,
        mergeConflicts: m?.conflicts ?? 0,
        ...(m && baseBytes ? { mergeBase: baseBytes.from } : {}),
        ...(m && m.conflicts ? { regions: m.regions } : {}),
        ...(opts.includeBase ? { base: baseBytes ? baseBytes.data.toString('utf8') : null } : {}),
      });
    }
  }

  // A directory goes only when everything in it is accounted for: each file in it deleted by
  // the change without conflict, each directory in it removed by the change. Otherwise neither
  // it nor what would replace it is touched (never a recursive removal of the user's work).
  const deleting = new Set(writes.filter((w) => w.side === null).map((w) => w.f.path));
  // A directory holding a file whose version you keep stays, as you asked: no conflict to say so.
  const removing = new Set(c.dirsRemoved.filter((d) => !heldBy(d) && ![...keptFolder].some((k) => under(k, d))));
  const unaccounted = (d: string): string | null => {
    let names: fs.Dirent[];
    try {
      names = root.readdir(d);
    } catch (err) {
      return message(err);
    }
    for (const e of names) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory()) {
        const u = removing.has(p) ? unaccounted(p) : `${p} is not removed by the change`;
        if (u) return u;
      } else if (!deleting.has(p))
        return res.conflicts.some((x) => x.path === p) ? `${p} is in conflict` : `${p} is not accounted for by the change`;
    }
    return null;
  };
  for (const t of typeChanges) {
    if (held.has(t.path) || t.from !== 'directory') continue;
    const u = unaccounted(t.path);
    if (u)
      held.set(
        t.path,
        `type change: ${t.path} directory -> ${t.to} refused: the folder's directory ${t.path} holds what the change does not remove (${u})`,
      );
  }
  // Report each holding path once; what it holds stays in the layer.
  for (const [p, why] of [...held].sort((a, b) => byteOrder(a[0], b[0]))) {
    if (!why) continue; // reported by the paths under it
    const waiting = [...writes.filter((w) => under(w.f.path, p)).map((w) => w.f.path), ...dirsAdded.filter((d) => under(d, p))];
    const f = c.files.find((x) => x.path === p);
    const own = res.conflicts.find((x) => x.path === p);
    const others = waiting.filter((w) => w !== p).length;
    const reason = others ? `${why} (${others} path(s) under it wait with it)` : why;
    if (own) own.reason = `${reason}; ${own.reason}`;
    else conflict(p, reason, f);
  }
  const isHeld = (p: string): boolean => heldBy(p) !== undefined;
  // A step refused at the last moment is a conflict, and the path stays in the layer.
  const refuse = (w: (typeof writes)[number], reason: string): void => {
    conflict(w.f.path, reason, w.f);
    const i = give.indexOf(w.f.path);
    if (i >= 0) give.splice(i, 1);
    const t = typeChange.get(w.f.path);
    if (t) t.applied = false;
  };
  let todo = writes.filter((w) => !isHeld(w.f.path));

  // What the agent moved or renamed: the layer reads it from where it was (its origin) until the
  // agent writes it, and before this apply changes an origin every layer takes its own copy
  // (step 0). The folder path is removed or replaced only when what was moved from it, with all
  // it holds, is applied in the same go: otherwise the folder would lose its own version while
  // the moved one is still only the agent's (the other half of the rename waits with it).
  const refs = layerChanges
    .filter((x) => x.origin !== undefined && x.kind !== 'deleted')
    .map((x) => ({ path: x.path, origin: x.origin! }))
    .concat(movedAndWritten);
  const readers = (p: string): Array<{ path: string; origin: string }> =>
    refs.filter((r) => r.origin === p || under(p, r.origin) || under(r.origin, p));
  const collectedUnder = (d: string): string[] =>
    [...c.files.map((f) => f.path), ...c.excluded.map((e) => e.path), ...c.skipped, ...dirsAdded].filter((p) => under(p, d));
  /** Whether `d` and all the layer has under it is (or is to be) applied: every path in `done`. */
  const wholly = (d: string, done: Set<string>): boolean =>
    (!only || only.length === 0 || only.some((o) => under(d, o))) &&
    collectedUnder(d).every((p) => done.has(p)) &&
    ![...held.keys()].some((h) => under(h, d) || under(d, h)) &&
    !res.conflicts.some((x) => under(x.path, d) || under(d, x.path));
  const planned = new Set([...todo.map((w) => w.f.path), ...dirsAdded.filter((d) => !isHeld(d))]);
  const whollyPlanned = new Map<string, boolean>();
  const isWhollyPlanned = (d: string): boolean => {
    let v = whollyPlanned.get(d);
    if (v === undefined) whollyPlanned.set(d, (v = wholly(d, planned)));
    return v;
  };
  const unreadBy = (p: string): string | null => {
    const r = readers(p).find((x) => !isWhollyPlanned(x.path));
    return r
      ? `${p} stays in the folder: the agent moved ${r.origin} to ${r.path}, which is not applied with this (in conflict, held, left out, or not among the paths asked for); apply both halves of the move together`
      : null;
  };
  // A move out of a name with a backslash: that name is skipped (collect's unplain), so its
  // deletion never comes; the moved copy alone would leave the original beside it.
  for (const w of todo) {
    const r = refs.find((x) => x.origin.includes('\\') && under(w.f.path, x.path));
    if (r)
      refuse(
        w,
        `${w.f.path} is held: the agent moved it from ${r.origin}, a name with a backslash, which apply skips; written alone it would leave the original beside the copy`,
      );
  }
  todo = todo.filter((w) => !res.conflicts.some((x) => x.path === w.f.path));
  // Until nothing more is refused: a refusal under an entry that others read makes it partial.
  for (let more = true; more;) {
    more = false;
    whollyPlanned.clear();
    for (const w of todo)
      if (w.f.old) {
        const why = unreadBy(w.f.path);
        if (why) {
          refuse(w, why);
          planned.delete(w.f.path);
          more = true;
        }
      }
    todo = todo.filter((w) => !res.conflicts.some((x) => x.path === w.f.path));
  }
  for (const d of [...removing]) {
    const why = unreadBy(d);
    if (why) {
      removing.delete(d);
      if (!res.conflicts.some((x) => x.path === d)) conflict(d, why);
    }
  }
  // A directory of the folder made after the agent started (the user's) is not the agent's to remove.
  for (const d of [...removing])
    if (dirChangedSince(d)) {
      removing.delete(d);
      conflict(d, `the folder's directory ${d} changed after the agent started (made or filled by you since); it was not removed`);
    }
  // What would take the place of a folder directory that stays waits with it (the dry run says so too).
  for (const w of todo)
    if (w.side !== null && c.dirsRemoved.includes(w.f.path) && !removing.has(w.f.path) && !res.conflicts.some((x) => x.path === w.f.path))
      refuse(w, `${w.f.path} is a directory in the folder that stays (see the conflicts under it)`);
  todo = todo.filter((w) => !res.conflicts.some((x) => x.path === w.f.path));
  for (const w of writes) if (!todo.includes(w) && give.includes(w.f.path)) give.splice(give.indexOf(w.f.path), 1);
  for (const t of typeChanges) t.applied = !opts.dryRun && !isHeld(t.path) && !res.conflicts.some((x) => x.path === t.path);

  if (opts.dryRun) {
    for (const w of todo) res.applied.push({ path: w.f.path, action: w.action });
    for (const t of typeChanges) t.applied = false;
    res.applied.sort((a, b) => byteOrder(a.path, b.path));
    return res;
  }

  const step = (rel: string, what: string): void => opts.beforeStep?.(rel, what);
  /** Checked again right before touching the folder: it may have changed while we looked. */
  const stillOld = async (w: (typeof writes)[number]): Promise<string | null> => {
    let now;
    try {
      now = await folderNow(root, w.f.path);
    } catch (err) {
      return message(err);
    }
    if (now === 'dir') return `${w.f.path} is a directory in the folder (not removed: it holds what the change does not account for)`;
    if (now === 'other' || (!sameSide(now, w.f.old) && !resolutions.has(w.f.path))) return 'the folder file changed while apply ran';
    return null;
  };

  // 0. What any agent moved or renamed is read from where it was in the folder (its origin) until
  //    that agent writes it: every layer takes its own copy of what it reads from a path this
  //    apply changes, so no agent's work (this one's half-applied rename, another's) changes
  //    or disappears with the folder's. Should that fail, nothing in the folder has changed.
  const changing = [...new Set([...todo.map((w) => w.f.path), ...removing, ...dirsAdded.filter((d) => !isHeld(d))])];
  //    Until apply is done, an agent moving one of these paths meanwhile takes its copy at once.
  holds.push((await shadow.keepMoved(changing)).release);
  for (const other of opts.neighbours?.() ?? []) {
    if (other === shadow || !other.mounted) continue;
    const theirs = translated(shadow.folder, other.folder, changing);
    if (!theirs.length) continue;
    try {
      holds.push((await other.keepMoved(theirs)).release);
    } catch (err) {
      if (other.mounted) throw err; // unmounted meanwhile: its layers are gone with it
    }
  }
  const refused = (w: (typeof writes)[number]): boolean => res.conflicts.some((x) => x.path === w.f.path);
  // Removals that make room for what the change puts at or around the same path (a file replaced
  // by a directory, a directory by a file, a name whose case changed, which is the same name on
  // a case-insensitive file system) come first; every other removal comes last, once everything
  // was written, so nothing the agent moved is lost should a write fail.
  const fold = (p: string): string => (platform.caseInsensitiveNames ? p.toLowerCase() : p);
  const putting = [...todo.filter((w) => w.side !== null && !refused(w)).map((w) => w.f.path), ...dirsAdded.filter((d) => !isHeld(d))].map(
    fold,
  );
  const makesRoom = (p: string): boolean => {
    const f = fold(p);
    return putting.some((q) => q === f || under(q, f) || under(f, q));
  };
  const remove = async (w: (typeof writes)[number]): Promise<void> => {
    const why = await stillOld(w);
    if (why) {
      refuse(w, why);
      return;
    }
    try {
      step(w.f.path, 'unlink');
      root.unlink(w.f.path);
      res.applied.push({ path: w.f.path, action: w.action });
    } catch (err) {
      refuse(w, message(err));
    }
  };
  const notRemoved: string[] = [];
  const removeDirs = (dirs: string[]): void => {
    for (const d of dirs
      .filter((x) => !isHeld(x))
      .sort(byteOrder)
      .reverse()) {
      if (notRemoved.some((n) => under(n, d))) continue; // holds one that stayed
      try {
        step(d, 'rmdir');
        root.rmdir(d);
        give.push(d);
      } catch (err) {
        notRemoved.push(d);
        const e = code(err);
        conflict(
          d,
          e === 'ENOTEMPTY' || e === 'EEXIST'
            ? `the folder's directory ${d} holds what the change does not account for (or what is in conflict); it was not removed`
            : `the folder's directory ${d} was not removed: ${message(err)}`,
        );
        const t = typeChange.get(d);
        if (t) t.applied = false;
      }
    }
  };
  // 1. Removals that make room, deepest first: files and links themselves, then directories that are empty now.
  const removals = todo.filter((x) => x.side === null && !refused(x));
  for (const w of removals.filter((x) => makesRoom(x.f.path))) await remove(w);
  removeDirs([...removing].filter(makesRoom));
  // 2. Directories the agent made (empty ones included), parents first; a file or link the
  //    agent replaced by a directory goes first (itself, never what it points to).
  const made: string[] = [];
  // A directory made only to hold what is in conflict is not made (it would be an empty one of
  // the user's to find); one the agent made empty, anywhere under it, is.
  const onlyConflicts = (d: string): boolean => {
    const files = c.files.filter((f) => under(f.path, d) && f.path !== d);
    return (
      files.length > 0 &&
      files.every((f) => res.conflicts.some((x) => x.path === f.path)) &&
      dirsAdded.every((e) => e === d || !under(e, d) || c.files.some((f) => under(f.path, e)))
    );
  };
  for (const d of dirsAdded) {
    if (isHeld(d) || notRemoved.some((n) => under(d, n)) || onlyConflicts(d)) continue;
    try {
      const t = typeChange.get(d);
      if (t && t.from !== 'directory') {
        const abs = path.join(shadow.folder, d);
        const base = opts.restoredBases?.get(d) ?? c.bases.get(d);
        if (base ? !sameIdentity(abs, base) : touchedAfter(abs, since)) {
          conflict(d, `type change: ${d} ${t.from} -> directory refused: the folder's ${t.from} changed after the agent started`);
          t.applied = false;
          notRemoved.push(d);
          continue;
        }
        step(d, 'unlink');
        root.unlink(d);
      }
      step(d, 'mkdir');
      root.mkdir(d);
      made.push(d);
    } catch (err) {
      conflict(d, message(err));
      notRemoved.push(d);
      const t = typeChange.get(d);
      if (t) t.applied = false;
    }
  }
  // 3. Files and links, each atomically (beside, then renamed over).
  let failed = notRemoved.length > 0;
  for (const w of todo.filter((x) => x.side !== null)) {
    if (refused(w)) {
      failed = true;
      continue;
    }
    const side = w.side!;
    const blocked = notRemoved.find((n) => under(w.f.path, n) || n === w.f.path);
    if (blocked !== undefined) {
      refuse(w, `${blocked} could not be changed in the folder (see its conflict)`);
      failed = true;
      continue;
    }
    const why = await stillOld(w);
    if (why) {
      refuse(w, why);
      failed = true;
      continue;
    }
    try {
      step(w.f.path, w.action);
      if (w.action === 'mode' && side.kind === 'file') root.chmod(w.f.path, side.mode);
      else if (side.large) await root.writeFrom(w.f.path, checkedSpans(layer, w.f.path, side), side.mode);
      else root.write(w.f.path, side.kind === 'symlink' ? { link: side.data.toString() } : { data: side.data, mode: side.mode });
      res.applied.push({ path: w.f.path, action: w.action });
    } catch (err) {
      refuse(w, message(err));
      failed = true;
    }
  }
  // 4. The other removals, unless something was refused on the way: the layer may read what the
  //    agent moved from the very files these would remove, so they wait in the layer then.
  const later = removals.filter((x) => !makesRoom(x.f.path) && !refused(x));
  const laterDirs = [...removing].filter((d) => !makesRoom(d));
  if (failed) {
    for (const w of later)
      refuse(
        w,
        'not removed from the folder: another change of this apply was refused (see its conflict), and the agent may have moved this file; apply again once that is settled',
      );
    for (const d of laterDirs) notRemoved.push(d);
  } else {
    for (const w of later) await remove(w);
    removeDirs(laterDirs);
  }
  const conflicted = new Set(res.conflicts.map((x) => x.path));
  /** Whether the layer shows anything at or under `d` other than what the folder has there now. */
  const differsUnder = async (d: string): Promise<boolean> => {
    const again = await collect(shadow, agent, [d]);
    return again.files.length + again.excluded.length + again.skipped.length + again.dirsAdded.length + again.dirsRemoved.length > 0;
  };
  // Directories the agent made go back whole, with all they hold (parents before children, as
  // one renamed or made over a deletion hides the folder's entries below it), unless something
  // under one stays the agent's: a held link, a refused write, an excluded .git or ignored file.
  const mine = new Set([...give, ...made]);
  const stays = made.length ? (await layer.changes()).map((x) => x.path).filter((p) => !mine.has(p)) : [];
  const holding = new Set(stays.flatMap(ancestors));
  // Applied in this go: a directory goes back only when all the layer has under it did (a
  // directory the agent moved is one change, and what it holds is known from collect alone).
  const appliedNow = new Set([...res.applied.map((x) => x.path), ...made]);
  const madeBack = made.filter((d) => !holding.has(d) && wholly(d, appliedNow));
  // What the layer held at each file's path when collect read it ("-": nothing, a deletion).
  const stamps = new Map<string, string>();
  for (const f of c.files) stamps.set(f.path, f.new ? (f.new.stamp ?? '') : '-');
  for (const [p, s] of stamps) if (s === '') stamps.delete(p);
  // The applied paths leave the layer (the folder shows through there now).
  for (const p of [...give, ...madeBack].sort(byteOrder)) {
    if (conflicted.has(p)) continue; // refused after all (by its own path): it stays the agent's
    try {
      const kept = opts.partial?.has(p) ? c.files.find((f) => f.path === p)?.new : undefined;
      if (kept) {
        // Some hunks went to the folder: the layer keeps the agent's version over the new folder
        // file (taken again, so its base is the file just written, and the rest is still its change).
        const perm = (await layer.stat(p)).mode & 0o7777;
        await layer.revert(p);
        await layer.write(p, kept.data, { mode: perm });
        // write's mode is for a new file; this one is the folder's again: its mode change (a unit
        // not chosen) stays the agent's too.
        if (((await layer.stat(p)).mode & 0o7777) !== perm) await layer.chmod(p, perm);
        continue;
      }
      // Yours kept where the agent deleted or emptied a directory above: the layer stops deleting it.
      // Otherwise only while the layer still holds what was read for this apply: a write (or a
      // deletion) of the agent's made meanwhile stays in the layer (CONFLICT: reported as kept).
      const through = keptFolder.has(p);
      await layer.revert(p, { through, stamp: through ? undefined : stamps.get(p) });
    } catch (err) {
      if (err instanceof ShadowError && err.code === 'CONFLICT') res.kept.push(p);
      else throw err;
    }
  }
  // Directories the agent replaced as a whole go back once nothing under them is left over.
  for (const d of c.dirsRemoved) {
    if (res.kept.some((k) => k.startsWith(d + '/')) && ![...conflicted].some((p) => under(p, d))) {
      await layer.revert(d).catch(() => undefined);
    }
  }
  // So does a directory the agent emptied and refilled, or moved over the folder's (it hides
  // the folder's entries, so its own cannot go back one by one), once everything of the layer's
  // under it was applied: the folder has what it showed now. Kept, a directory moved into it
  // would go on reading from where it came from, which apply has just removed.
  if (res.kept.length) {
    const layerNow = await layer.changes();
    const replaced = layerNow.filter((x) => x.type === 'directory' && x.kind === 'modified').map((x) => x.path);
    for (const d of replaced.sort(byteOrder)) {
      if (!res.kept.some((k) => under(k, d)) || [...conflicted].some((p) => under(p, d)) || !wholly(d, appliedNow)) continue;
      // Something else of the layer's is under it: it goes back only if the folder shows the
      // same there now (what the layer took a copy of before the folder changed, step 0).
      if (layerNow.some((x) => x.path !== d && under(x.path, d) && !mine.has(x.path)) && (await differsUnder(d))) continue;
      try {
        await layer.revert(d);
      } catch (err) {
        if (!(err instanceof ShadowError && (err.code === 'CONFLICT' || err.code === 'NOT_FOUND'))) throw err;
      }
    }
  }
  // A directory the layer still has, above what this apply wrote, where the folder has the same
  // directory now and nothing of the layer's is left under it, goes back too: kept, it would
  // hide the user's later changes there from the agent, and a later apply would make it again
  // after the user removed it.
  const touched = new Set([...give, ...made].flatMap((p) => [p, ...ancestors(p)]));
  const disputed = new Set([...conflicted].flatMap((p) => [p, ...ancestors(p)]));
  const now = await layer.changes();
  const below = new Map<string, number>(); // directory → how many of the layer's paths are under it
  for (const x of now) for (const a of ancestors(x.path)) below.set(a, (below.get(a) ?? 0) + 1);
  const dirs = now.filter((x) => x.type === 'directory' && x.kind !== 'deleted' && touched.has(x.path)).map((x) => x.path);
  for (const d of dirs.sort(byteOrder).reverse()) {
    if ((below.get(d) ?? 0) > 0 || disputed.has(d) || !wholly(d, appliedNow)) continue;
    const folderDir = kindNow(d) === 'directory' ? root.lstat(d) : null;
    if (!folderDir) continue;
    if (root.hasPermissionBits && ((await layer.stat(d)).mode & 0o7777) !== (folderDir.mode & 0o7777)) continue;
    try {
      await layer.revert(d);
      for (const a of ancestors(d)) below.set(a, (below.get(a) ?? 1) - 1);
    } catch (err) {
      if (!(err instanceof ShadowError && err.code === 'CONFLICT')) throw err;
    }
  }
  const left = new Set((await layer.changes()).map((x) => x.path));
  res.kept = res.kept.filter((k) => left.has(k));
  res.applied.sort((a, b) => byteOrder(a.path, b.path));
  res.conflicts.sort((a, b) => byteOrder(a.path, b.path));
  if (opts.appliedDirs) {
    // The directories this apply changed, as it left them: a later apply of the same agent does
    // not take its own changes there for the user's.
    const dirs = new Set([...res.applied.map((x) => x.path), ...made].flatMap((p) => [p, ...ancestors(p)]));
    for (const d of dirs) {
      const stamp = dirStamp(path.join(shadow.folder, d));
      if (stamp) opts.appliedDirs.set(d, stamp);
    }
  }
  return res;
}

/** A directory's modification and change times ("mtimeNs:ctimeNs"), or null when it is not one. */
function dirStamp(abs: string): string | null {
  try {
    const st = fs.lstatSync(abs, { bigint: true });
    return st.isDirectory() ? `${st.mtimeNs}:${st.ctimeNs}` : null;
  } catch {
    return null;
  }
}

/**
 * Paths relative to the folder `from`, as paths relative to the folder `to` (one holds the other;
 * what lies outside `to` is left out). Directories are told apart by identity (device and inode),
 * not by name: one folder reached by two names (a bind mount of it, or of a directory above it)
 * is one folder, and a shadow of either reads what apply changes through the other.
 */
function translated(from: string, to: string, rels: string[]): string[] {
  const inside = placeIn(to, from);
  if (inside !== null) return inside === '' ? rels : rels.map((p) => `${inside}/${p}`);
  const back = placeIn(from, to);
  if (back === null) return [];
  return rels.filter((p) => under(p, back) && p !== back).map((p) => p.slice(back.length + 1));
}

/**
 * Where the directory `inner` lies in the directory `outer` ('/'-separated, '' when it is
 * `outer`), or null when it is not inside it: `inner` and each directory above it by name is
 * compared with `outer` by identity. Two binds of different directories of one tree are not
 * related this way (neither path passes through the other).
 */
function placeIn(outer: string, inner: string): string | null {
  const id = identity(outer);
  if (id === null) return null;
  const names: string[] = [];
  for (let at = inner; ;) {
    if (identity(at) === id) return names.reverse().join('/');
    const up = path.dirname(at);
    if (up === at) return null;
    names.push(path.basename(at));
    at = up;
  }
}

/** A directory's device and inode, or null when it cannot be read. */
function identity(p: string): string | null {
  try {
    const st = fs.statSync(p, { bigint: true });
    return `${st.dev}:${st.ino}`;
  } catch {
    return null;
  }
}

function code(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code;
}
