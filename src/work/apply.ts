// Apply: the one place where shadowfs writes the user's folder, and only when asked. An agent's
// changes are written file by file, each atomically (written beside under a temporary name,
// then renamed over), and every path written leaves the agent's layer (the folder shows through
// there again). A file the user changed since the agent's copy was taken is a conflict: nothing
// is written for it unless the caller says how to resolve it; text conflicts come with a
// three-way merge (node-diff3) when the base the agent started from can be found.
import { execFileSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../errors';
import { addon, type ChangeBase } from '../native';
import { normalizeRelPath } from '../paths';
import type { Shadow } from '../shadow';
import { byteOrder, collect, folderSide, sameIdentity, sameSide, type FileChange, type Side } from './collect';

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
  baseOverrides?: Map<string, ChangeBase>;
}

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
}

export interface ApplyResult {
  dryRun: boolean;
  /** What was (or, dry run, would be) done to the folder. */
  applied: Array<{ path: string; action: 'write' | 'create' | 'delete' | 'mode' | 'keep-folder' | 'same' }>;
  conflicts: ApplyConflict[];
  /** Paths written to the folder that the layer could not give back (under a directory it replaced): the layer still holds them, equal to the folder now. */
  kept: string[];
  skipped: string[];
}

function isBinary(b: Buffer | null | undefined): boolean {
  return !!b && b.subarray(0, 8000).includes(0);
}

function text(side: Side | null): string | null {
  return side && side.kind === 'file' && !isBinary(side.data) ? side.data.toString('utf8') : null;
}

/** Whether the folder's file at `abs` is still what `base` recorded (identity, else content hash). */
function unchangedSince(abs: string, base: ChangeBase, now: Side | null): boolean {
  if (sameIdentity(abs, base)) return true;
  return !!(base.hash && now && now.kind === 'file' && addon().contentHash(now.data) === base.hash);
}

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
  lower: string,
  rel: string,
  base: ChangeBase | undefined,
  known?: Map<string, Buffer>,
): { data: Buffer; from: 'recorded' | 'git-head' } | null {
  const k = known?.get(rel);
  if (k) return { data: k, from: 'recorded' };
  let blob: Buffer;
  try {
    blob = execFileSync('git', ['-C', lower, 'show', `HEAD:./${rel}`], { stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 << 20 });
  } catch {
    return null; // not a git repository, or the file is not in HEAD
  }
  if (base?.hash) return addon().contentHash(blob) === base.hash ? { data: blob, from: 'recorded' } : null;
  return { data: blob, from: 'git-head' };
}

function mergeText(folder: string, base: string, agent: string): { merged: string; conflicts: number } {
  const split = (s: string) => s.split('\n');
  const regions = diff3Merge(split(folder), split(base), split(agent), { excludeFalseConflicts: true });
  const out: string[] = [];
  let conflicts = 0;
  for (const r of regions) {
    if (r.ok) out.push(...r.ok);
    else if (r.conflict) {
      conflicts++;
      out.push('<<<<<<< folder', ...r.conflict.a, '||||||| base', ...r.conflict.o, '=======', ...r.conflict.b, '>>>>>>> agent');
    }
  }
  return { merged: out.join('\n'), conflicts };
}

/** The first ancestor of `rel` in the folder that is a symlink (a write there would land elsewhere), or null. */
function symlinkAncestor(lower: string, rel: string): string | null {
  const parts = rel.split('/');
  for (let i = 1; i < parts.length; i++) {
    const anc = parts.slice(0, i).join('/');
    const st = fs.lstatSync(path.join(lower, anc), { throwIfNoEntry: false });
    if (!st) return null;
    if (st.isSymbolicLink()) return anc;
  }
  return null;
}

/** Writes `side` at `abs` atomically: beside it under a temporary name, then renamed over. */
function writeAtomic(abs: string, side: Side): void {
  fs.mkdirSync(path.dirname(abs), { recursive: true });
  const tmp = path.join(path.dirname(abs), `.${path.basename(abs)}.shadowfs-${crypto.randomBytes(6).toString('hex')}`);
  try {
    if (side.kind === 'symlink') fs.symlinkSync(side.data.toString(), tmp);
    else {
      const fd = fs.openSync(tmp, 'wx', side.mode & 0o777);
      try {
        fs.writeSync(fd, side.data);
        fs.fchmodSync(fd, side.mode & 0o777);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
    }
    // A directory in the way (the agent replaced a directory by a file) goes first.
    if (fs.lstatSync(abs, { throwIfNoEntry: false })?.isDirectory()) fs.rmSync(abs, { recursive: true });
    fs.renameSync(tmp, abs);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

export async function applyLayer(shadow: Shadow, agent: string, opts: ApplyOptions = {}): Promise<ApplyResult> {
  const only = opts.paths?.map((p) => normalizeRelPath(p));
  const res: ApplyResult = { dryRun: !!opts.dryRun, applied: [], conflicts: [], kept: [], skipped: [] };
  const c = await collect(shadow, agent, only);
  res.skipped.push(...c.skipped);
  const since = shadow.layerSince(agent);
  const layer = shadow.layer(agent);
  const resolutions = new Map(Object.entries(opts.resolutions ?? {}).map(([k, v]) => [normalizeRelPath(k), v]));
  const writes: Array<{ f: FileChange; side: Side | null; action: ApplyResult['applied'][number]['action'] }> = [];
  const give: string[] = []; // paths that leave the layer
  for (const f of c.files) {
    const abs = path.join(shadow.lower, f.path);
    const base = opts.baseOverrides?.get(f.path) ?? c.bases.get(f.path);
    let conflict: string | null = null;
    if (base) {
      if (!unchangedSince(abs, base, f.old)) conflict = 'the folder file changed since the agent copied it';
    } else if (f.old && touchedAfter(abs, since)) {
      conflict =
        f.new === null
          ? 'the agent deletes a file that changed in the folder after the agent started'
          : 'the folder file changed (or appeared) after the agent started, and the agent never saw that version';
    }
    const kind =
      f.old && f.new ? (f.old.kind === f.new.kind && f.old.data.equals(f.new.data) ? 'mode' : 'write') : f.new ? 'create' : 'delete';
    if (!conflict) {
      writes.push({ f, side: f.new, action: kind });
      give.push(f.path);
      continue;
    }
    const how = resolutions.get(f.path);
    const binary = isBinary(f.old?.data) || isBinary(f.new?.data);
    const baseBytes = binary ? null : baseContent(shadow.lower, f.path, base, opts.baseContents);
    const folderText = text(f.old);
    const agentText = text(f.new);
    const m =
      baseBytes && folderText !== null && agentText !== null ? mergeText(folderText, baseBytes.data.toString('utf8'), agentText) : null;
    if (how === 'agent') {
      writes.push({ f, side: f.new, action: kind });
      give.push(f.path);
    } else if (how === 'folder') {
      res.applied.push({ path: f.path, action: 'keep-folder' });
      give.push(f.path);
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
        reason: how === 'merged' ? `${conflict}; the merge is not clean (${m ? m.conflicts : 'no base to merge from'})` : conflict,
        folder: folderText,
        agent: agentText,
        binary,
        merged: m?.merged ?? null,
        mergeConflicts: m?.conflicts ?? 0,
        ...(m && baseBytes ? { mergeBase: baseBytes.from } : {}),
      });
    }
  }
  if (opts.dryRun) {
    for (const w of writes) res.applied.push({ path: w.f.path, action: w.action });
    res.applied.sort((a, b) => byteOrder(a.path, b.path));
    return res;
  }
  for (const w of writes) {
    const abs = path.join(shadow.lower, w.f.path);
    // Checked again right before writing: the folder may have changed while we looked.
    // A write refused at the last moment is a conflict, and the path stays in the layer.
    const refuse = (reason: string): void => {
      res.conflicts.push({ path: w.f.path, reason, folder: null, agent: text(w.f.new), binary: false, merged: null, mergeConflicts: 0 });
      give.splice(give.indexOf(w.f.path), 1);
    };
    // Never through a symlink of the folder: the write would land outside the path it names.
    const link = symlinkAncestor(shadow.lower, w.f.path);
    if (link !== null) {
      refuse(`${link} is a symbolic link in the folder now; shadowfs does not write through links`);
      continue;
    }
    const now = await folderSide(shadow.lower, w.f.path);
    const stillOld = now === 'dir' ? w.f.old === null : now === 'other' ? false : sameSide(now, w.f.old);
    if (!stillOld && !resolutions.has(w.f.path)) {
      refuse('the folder file changed while apply ran');
      continue;
    }
    if (w.side) {
      if (w.action === 'mode' && w.side.kind === 'file') fs.chmodSync(abs, w.side.mode & 0o777);
      else writeAtomic(abs, w.side);
    } else fs.rmSync(abs, { force: true });
    res.applied.push({ path: w.f.path, action: w.action });
  }
  // Directories the agent made (empty ones included) and removed.
  for (const d of c.dirsAdded)
    if (!only || only.some((s) => d === s || d.startsWith(s + '/'))) fs.mkdirSync(path.join(shadow.lower, d), { recursive: true });
  const conflicted = new Set(res.conflicts.map((x) => x.path));
  for (const d of [...c.dirsRemoved].reverse()) {
    if ([...conflicted].some((p) => p.startsWith(d + '/'))) continue;
    try {
      fs.rmdirSync(path.join(shadow.lower, d));
      give.push(d);
    } catch {
      // not empty: the folder has files the agent never saw there; leave it
    }
  }
  // The applied paths leave the layer (the folder shows through there now).
  for (const p of [...give, ...c.dirsAdded].sort(byteOrder)) {
    try {
      await layer.revert(p);
    } catch (err) {
      if (err instanceof ShadowError && err.code === 'CONFLICT') res.kept.push(p);
      else throw err;
    }
  }
  // Directories the agent replaced as a whole go back once nothing under them is left over.
  for (const d of c.dirsRemoved) {
    if (res.kept.some((k) => k.startsWith(d + '/')) && ![...conflicted].some((p) => p.startsWith(d + '/'))) {
      await layer.revert(d).catch(() => undefined);
    }
  }
  const left = new Set((await layer.changes()).map((x) => x.path));
  res.kept = res.kept.filter((k) => left.has(k));
  res.applied.sort((a, b) => byteOrder(a.path, b.path));
  return res;
}
