// Checkpoints of agents' layers, persisted in the per-user state directory so that a layer comes
// back after a daemon crash or a reboot. Cheap: contents are stored once by their SHA-256 (a
// checkpoint is a small manifest naming blobs), so unchanged files cost nothing the second time.
// Each checkpoint also keeps, where the folder still has it, the content the agent started from
// (its base), so that apply can make three-way merges later, and the base records themselves,
// so that a restored layer still knows which folder version each file came from.
//
// Layout: <state>/checkpoints/<folder key>/blobs/<sha256>
//                                          /<agent>/<name>.json
// where <folder key> is a hash of the folder's real path (a shadow's name may change; the folder
// is what the layer is relative to). Every file is written beside and renamed into place, so a
// crash never leaves a half-written checkpoint. A blob no manifest references any more (its
// checkpoint saved over or removed, an autosave replaced or forgotten) is removed: collect(),
// after every save and remove, which also says how a save under way is kept safe from it.
//
// What is on disk is input, not truth: a process of this user (an agent's, say) may have forged
// any of it. Every read checks it: a manifest's shape, its paths (normalizeRelPath), its blob ids
// (64 hex digits) and recorded bases; a blob is read only from a plain file (never through a
// link) inside this folder's directory, and only if its content has the hash that names it.
// Nothing is read or written through a link in the directories. A checkpoint that fails is
// refused whole, before anything of the layer changes (corrupt()).
//
// The manifest's format and those checks are in checkpoint-manifest.ts; the link-refusing reads
// and writes of the state directory's files in checkpoint-files.ts.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as z from 'zod';
import { ShadowError } from '../common/errors';
import type { ChangeBase } from '../shadow/native';
import { normalizeRelPath } from '../common/paths';
import { stateDir } from '../platform';
import type { Layer, Shadow } from '../shadow';
import { type AuditRecord, AuditRecordSchema, restoredAudit } from '../shadow/audit';
import {
  BLOB_RE,
  checkAgentDir,
  checkName,
  checkpointMaxFileBytes,
  type CheckpointChunk,
  type CheckpointEntry,
  type CheckpointInfo,
  type CheckpointManifest,
  CHUNK_BYTES,
  corrupt,
  manifestBlobs,
  ManifestSchema,
  MAX_MANIFEST_BYTES,
} from './checkpoint-manifest';
import { checkRealDir, makeRealDirs, readPlain, writeAtomic } from './checkpoint-files';
import type { MaskState } from '../shadow/mask';
import { collect, folderSide, sameIdentity } from './collect';
import type { Provenance } from './provenance';

/** Bytes of data in `extents` (what a file stores in a checkpoint). */
function dataBytes(extents: Array<[number, number]>): number {
  return extents.reduce((s, [, len]) => s + len, 0);
}

function changedWhileSaved(rel: string): ShadowError {
  return new ShadowError('CONFLICT', `${rel} changed while the checkpoint was made; make it again`);
}

/** A base no folder file has (inode 0, no hash): apply reports any file there as a conflict. */
const NO_BASE: ChangeBase = { ino: 0, size: 0, mtimeNs: '0', ctimeNs: '0', hash: null };

/** Whether the folder has something at `abs` changed (or made) after `since` (ms; unknown: yes). */
function changedInFolderSince(abs: string, since: number | undefined): boolean {
  const st = fs.lstatSync(abs, { throwIfNoEntry: false });
  if (!st) return false;
  return since === undefined || Math.max(st.mtimeMs, st.ctimeMs) > since;
}

/** Masks as saveMasks writes them (and the daemon's state file holds them); the globs are checked again when a shadow takes them. */
const MaskAgent = z.string().refine((a) => a.length > 0 && Buffer.byteLength(a) <= 128 && !/[/\0]/.test(a), { message: 'not an agent id' });
export const MasksFile = z.strictObject({
  default: z.array(z.string()).max(256).optional(),
  agents: z.record(MaskAgent, z.array(z.string()).max(256)).optional(),
  copied: z.record(MaskAgent, MaskAgent).optional(),
});

/**
 * What this process still needs of a store's blobs beyond its manifests, per store root (several
 * stores, one per shadow of a folder, share a root): `pins` counts the blobs each save or restore
 * under way has put or will read (see collect()); `holders` list blobs kept in memory for later
 * (a restored layer's base contents, which apply merges with and the next save records again).
 */
interface InUse {
  pins: Map<string, number>;
  holders: Set<() => Iterable<string>>;
}
const inUse = new Map<string, InUse>();

/** A name in blobs/: a blob, or what writeAtomic writes beside one (left there by a crash, see collect()). */
const BLOB_FILE_RE = /^([0-9a-f]{64})(\.[0-9a-f]{12}\.tmp)?$/;

export class CheckpointStore {
  readonly root: string;
  /**
   * The most data one file (in the layer, or a base in the folder) may store in a checkpoint;
   * unset: SHADOWFS_CHECKPOINT_MAX_FILE_BYTES, else 256 MiB. It counts stored bytes: a file's
   * data extents, not its holes, so a 4 GiB sparse file with a few KiB of data is stored (in a
   * few KiB); a file with more data is refused with FILE_TOO_LARGE before any of it is read.
   * Files are read and stored a chunk (CHUNK_BYTES) at a time, never whole.
   */
  maxFileBytes?: number;
  /** Where a blob collection that failed after a save or remove (which themselves succeeded) is said. */
  log?: (line: string) => void;
  /** The directories from the state directory down to root, each checked to be no link. */
  private readonly chain: string[];

  constructor(readonly folder: string) {
    const key = crypto.createHash('sha256').update(folder).digest('hex').slice(0, 24);
    const checkpoints = path.join(stateDir(), 'checkpoints');
    this.root = path.join(checkpoints, key);
    this.chain = [checkpoints, this.root];
  }

  /** The error for a file of `size` bytes over the cap `max`. */
  private tooLarge(rel: string, size: number, max: number): ShadowError {
    return new ShadowError(
      'FILE_TOO_LARGE',
      `cannot checkpoint ${rel}: it holds ${size} bytes of data (holes not counted), more than the ${max} a checkpoint stores per file; remove it from the layer, or raise the cap with SHADOWFS_CHECKPOINT_MAX_FILE_BYTES (in the daemon's environment)`,
    );
  }

  /** Fails unless root and `sub` (a directory in it) are real directories where they exist. */
  private checkDirs(sub?: string): void {
    for (const d of sub === undefined ? this.chain : [...this.chain, path.join(this.root, sub)]) checkRealDir(d);
  }

  private blobPath(hash: string): string {
    if (typeof hash !== 'string' || !BLOB_RE.test(hash)) throw corrupt(`${JSON.stringify(hash)} is not a blob id (64 hex digits)`);
    return path.join(this.root, 'blobs', hash);
  }

  /** The blobs this process needs of this store beyond its manifests (made when first asked for). */
  private inUse(): InUse {
    let u = inUse.get(this.root);
    if (!u) inUse.set(this.root, (u = { pins: new Map(), holders: new Set() }));
    return u;
  }

  /** Keeps `hash` from collect() until unpin(held). */
  private pin(hash: string, held: string[]): void {
    const pins = this.inUse().pins;
    pins.set(hash, (pins.get(hash) ?? 0) + 1);
    held.push(hash);
  }

  private unpin(held: string[]): void {
    const u = this.inUse();
    for (const h of held.splice(0)) {
      const n = (u.pins.get(h) ?? 1) - 1;
      if (n > 0) u.pins.set(h, n);
      else u.pins.delete(h);
    }
    if (!u.pins.size && !u.holders.size) inUse.delete(this.root);
  }

  /**
   * Keeps the blobs `blobs()` lists (asked at each collection) until the returned function is
   * called: what this process holds by id in memory, outside any manifest.
   */
  hold(blobs: () => Iterable<string>): () => void {
    this.inUse().holders.add(blobs);
    return () => {
      const u = this.inUse();
      u.holders.delete(blobs);
      if (!u.pins.size && !u.holders.size) inUse.delete(this.root);
    };
  }

  /** Stores `data` as a blob, pinned (in `held`) until the manifest that names it is written. */
  private putBlob(data: Buffer, held: string[]): string {
    const hash = crypto.createHash('sha256').update(data).digest('hex');
    const file = this.blobPath(hash);
    // Pinned before it is looked at, in the same synchronous step: no collection runs in between.
    this.pin(hash, held);
    // Kept when a plain file of that size is there (reads check its hash); anything else is replaced.
    const st = fs.lstatSync(file, { throwIfNoEntry: false });
    if (!st || !st.isFile() || st.size !== data.length) {
      makeRealDirs([...this.chain, path.join(this.root, 'blobs')]);
      writeAtomic(file, data);
    }
    return hash;
  }

  /** A blob's content, checked: a plain file inside this folder's directory whose SHA-256 is its id. */
  private getBlob(hash: string): Buffer {
    const file = this.blobPath(hash);
    this.checkDirs('blobs');
    const data = readPlain(file);
    if (!data) throw new ShadowError('STATE_CORRUPT', `checkpoint content ${hash} is missing from ${this.root}; the checkpoint is damaged`);
    if (crypto.createHash('sha256').update(data).digest('hex') !== hash)
      throw corrupt(`the content of ${file} does not have the hash that names it`);
    return data;
  }

  private manifestPath(agent: string, name: string): string {
    return path.join(this.root, checkAgentDir(agent), `${checkName(name)}.json`);
  }

  /**
   * Stores one file of the layer: whole (one blob) when it is all data and fits one chunk, else
   * by its data extents, a chunk (blob) at a time, so neither memory nor the store ever holds
   * its holes. FILE_TOO_LARGE when it holds more data than `max`.
   */
  private async putFile(
    shadow: Shadow,
    agent: string,
    rel: string,
    max: number,
    held: string[],
  ): Promise<{ bytes: number; content: Pick<CheckpointEntry, 'blob' | 'size' | 'chunks'> }> {
    const layer = shadow.layer(agent);
    const ext = await layer.dataExtents(rel);
    const data = dataBytes(ext.extents);
    if (data > max) throw this.tooLarge(rel, data, max);
    const whole = ext.size === 0 || (ext.extents.length === 1 && ext.extents[0][0] === 0 && ext.extents[0][1] === ext.size);
    if (whole && ext.size <= CHUNK_BYTES) {
      const r = await layer.readRange(rel, 0, CHUNK_BYTES);
      if (r.size !== ext.size || r.data.length !== ext.size) throw changedWhileSaved(rel);
      return { bytes: r.data.length, content: { blob: this.putBlob(r.data, held) } };
    }
    const chunks: CheckpointChunk[] = [];
    for (const [off, len] of ext.extents) {
      for (let at = off; at < off + len; at += CHUNK_BYTES) {
        const n = Math.min(CHUNK_BYTES, off + len - at);
        const r = await layer.readRange(rel, at, n);
        if (r.size !== ext.size || r.data.length !== n) throw changedWhileSaved(rel);
        chunks.push({ offset: at, length: n, blob: this.putBlob(r.data, held) });
      }
    }
    return { bytes: data, content: { size: ext.size, chunks } };
  }

  /**
   * Saves `agent`'s layer as checkpoint `name` (replacing one of that name), then removes the
   * blobs no checkpoint references any more (those of the one it replaced, say: collect()).
   */
  async save(shadow: Shadow, provenance: Provenance, agent: string, name: string, auto = false): Promise<CheckpointInfo> {
    checkName(name);
    checkAgentDir(agent);
    // The blobs this save put or names, pinned until its manifest names them (or it failed).
    const held: string[] = [];
    try {
      return await this.saveHeld(shadow, provenance, agent, name, auto, held);
    } finally {
      this.unpin(held);
      this.collectAfter(`saving the checkpoint ${name} of ${agent}`);
    }
  }

  private async saveHeld(
    shadow: Shadow,
    provenance: Provenance,
    agent: string,
    name: string,
    auto: boolean,
    held: string[],
  ): Promise<CheckpointInfo> {
    const layer = shadow.layer(agent);
    const max = this.maxFileBytes ?? checkpointMaxFileBytes();
    const changes = await layer.changes();
    // Every file within the cap before any is read. The cap counts the bytes a file stores: its
    // data, not its holes (a sparse file of 4 GiB with 4 KiB of data stores 4 KiB).
    for (const ch of changes) {
      if (ch.kind === 'deleted' || ch.type !== 'file') continue;
      const ext = await layer.dataExtents(ch.path).catch(() => null);
      const data = ext ? dataBytes(ext.extents) : 0;
      if (data > max) throw this.tooLarge(ch.path, data, max);
    }
    // Everything, ignored files and .git included: a checkpoint keeps a layer whole.
    const c = await collect(shadow, agent, undefined, { everything: true });
    const entries: CheckpointEntry[] = [];
    const seen = new Set<string>();
    let bytes = 0;
    const addDeleted = (p: string, layerBase?: ChangeBase) => {
      if (!seen.has(p)) {
        // What the folder's file was when the agent deleted it: restored with the deletion, so
        // that deleting a file the user edited since stays a conflict.
        const base = provenance.restoredBase(agent, p)?.base ?? layerBase ?? c.bases.get(p);
        entries.push(base ? { path: p, type: 'deleted', base } : { path: p, type: 'deleted' });
      }
      seen.add(p);
    };
    // Deletions: the folder's files and directories the layer no longer shows.
    for (const ch of changes) if (ch.kind === 'deleted') addDeleted(ch.path, ch.base);
    for (const f of c.files) if (f.new === null) addDeleted(f.path);
    for (const d of c.dirsRemoved) addDeleted(d);
    const addPresent = async (p: string, layerBase?: ChangeBase): Promise<void> => {
      const st = await layer.stat(p).catch(() => null);
      if (!st) return;
      seen.add(p);
      if (st.type === 'directory') entries.push({ path: p, type: 'dir', mode: st.mode });
      else if (st.type === 'symlink') entries.push({ path: p, type: 'symlink', target: await layer.readlink(p) });
      else if (st.type === 'file') {
        const stored = await this.putFile(shadow, agent, p, max, held);
        bytes += stored.bytes;
        const e: CheckpointEntry = { path: p, type: 'file', mode: st.mode, ...stored.content };
        const base = provenance.restoredBase(agent, p)?.base ?? layerBase;
        if (base) {
          e.base = base;
          const known = provenance.restoredBase(agent, p)?.blob;
          if (known) {
            e.baseBlob = known;
            this.pin(known, held);
          } else {
            // The folder's file is still the one the agent started from: keep its content.
            // (Not a base larger than the cap: the checkpoint then has the base's identity only.)
            const now = base.size <= max ? await folderSide(shadow.folder, p) : null;
            if (now && typeof now === 'object' && now.kind === 'file' && !now.large && sameIdentity(path.join(shadow.folder, p), base))
              e.baseBlob = this.putBlob(now.data, held);
          }
        }
        entries.push(e);
      }
    };
    for (const ch of changes) if (ch.kind !== 'deleted' && ch.type !== 'special') await addPresent(ch.path, ch.base);
    // What a directory the agent moved or renamed holds is named by no change of its own: collect
    // walks it (the layer reads those files from where they were in the folder).
    for (const d of c.dirsAdded) if (!seen.has(d)) await addPresent(d);
    for (const f of c.files) if (f.new && !seen.has(f.path)) await addPresent(f.path);
    entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    // The audit trail as it is now (docs/audit-trail.md): restoring the checkpoint brings it back.
    const audit = this.putBlob(Buffer.from(JSON.stringify(await layer.auditRecord())), held);
    const m: CheckpointManifest = {
      // Version 1 where every file is whole, so that a checkpoint without sparse or large files reads as before.
      version: entries.some((e) => e.chunks) ? 2 : 1,
      name,
      agent,
      folder: this.folder,
      createdAt: new Date().toISOString(),
      ...(provenance.layerSince(agent) === undefined ? {} : { layerSince: provenance.layerSince(agent) }),
      auto,
      entries,
      audit,
    };
    makeRealDirs([...this.chain, path.join(this.root, agent)]);
    writeAtomic(this.manifestPath(agent, name), JSON.stringify(m));
    return { name, createdAt: m.createdAt, auto, files: entries.filter((e) => e.type === 'file').length, bytes };
  }

  /**
   * Checkpoint `name` of `agent`, every part of it checked (see the top of this file): its shape,
   * that it is the checkpoint of this agent, name and folder, its paths and its blob ids.
   */
  read(agent: string, name: string): CheckpointManifest {
    const file = this.manifestPath(agent, name);
    this.checkDirs(agent);
    const data = readPlain(file, MAX_MANIFEST_BYTES);
    if (!data) throw new ShadowError('UNKNOWN_CHECKPOINT', `agent ${agent} has no checkpoint named ${name} (see "shadowfs checkpoints")`);
    const what = `the checkpoint ${name} of ${agent} (${file})`;
    let raw: unknown;
    try {
      raw = JSON.parse(data.toString('utf8'));
    } catch {
      throw corrupt(`${what} is not JSON`);
    }
    const parsed = ManifestSchema.safeParse(raw);
    if (!parsed.success) {
      const why = parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.') || 'manifest'}: ${i.message}`)
        .join('; ');
      throw corrupt(`${what} is not of the shape of a checkpoint (${why})`);
    }
    const m = parsed.data;
    if (m.name !== name || m.agent !== agent || m.folder !== this.folder)
      throw corrupt(
        `${what} says it is the checkpoint ${JSON.stringify(m.name)} of ${JSON.stringify(m.agent)} for ${JSON.stringify(m.folder)}`,
      );
    const entries: CheckpointEntry[] = [];
    for (const e of m.entries) {
      let p: string;
      try {
        p = normalizeRelPath(e.path);
      } catch (err) {
        throw corrupt(`${what} names a path outside the folder: ${(err as Error).message}`);
      }
      entries.push({ ...e, path: p });
    }
    if (m.version === 1 && entries.some((e) => e.chunks)) throw corrupt(`${what} is of version 1 but stores a file by chunks`);
    return { ...m, entries };
  }

  list(agent: string): CheckpointInfo[] {
    let names: string[];
    try {
      this.checkDirs(checkAgentDir(agent));
      names = fs.readdirSync(path.join(this.root, agent)).filter((n) => n.endsWith('.json'));
    } catch {
      return [];
    }
    const out: CheckpointInfo[] = [];
    for (const n of names) {
      try {
        const m = this.read(agent, n.slice(0, -5));
        out.push({
          name: m.name,
          createdAt: m.createdAt,
          auto: m.auto,
          files: m.entries.filter((e) => e.type === 'file').length,
          bytes: m.entries.reduce(
            (s, e) =>
              s +
              [e.blob, ...(e.chunks ?? []).map((c) => c.blob)].reduce(
                (t, b) => t + (b ? (fs.lstatSync(this.blobPath(b), { throwIfNoEntry: false })?.size ?? 0) : 0),
                0,
              ),
            0,
          ),
        });
      } catch {
        // a damaged manifest is left out of the list
      }
    }
    return out.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
  }

  /** Where the folder's masks are kept beside its checkpoints (saveMasks). */
  private get masksPath(): string {
    return path.join(this.root, 'masks.json');
  }

  /**
   * Keeps a shadow's masks beside the folder's checkpoints, so that a layer brought back from
   * its autosave (after `shadowfs stop`, a reboot, or a crash recovery that could not mount the
   * shadow again) comes back masked as it was. No mask at all: the file is removed.
   */
  saveMasks(s: MaskState): void {
    if (!s.default?.length && !Object.keys(s.agents ?? {}).length) {
      this.checkDirs();
      fs.rmSync(this.masksPath, { force: true });
      return;
    }
    makeRealDirs(this.chain);
    writeAtomic(this.masksPath, JSON.stringify(s));
  }

  /** The masks saveMasks kept, or undefined when there are none; a file of another shape is refused (STATE_CORRUPT). */
  loadMasks(): MaskState | undefined {
    this.checkDirs();
    // Not corrupt()'s advice to remove it: removed, the layers would come back unmasked.
    const damaged = (why: string): ShadowError =>
      new ShadowError(
        'STATE_CORRUPT',
        `${this.masksPath} ${why}: it holds the masks of this folder's agents and is damaged or was tampered with, so the folder was not mounted and nothing was changed. Mend it ({"default": [globs], "agents": {"<agent>": [globs]}}), or move it away and set the masks again (shadowfs mask) before any agent works: without it, their layers come back from autosave with no mask`,
      );
    let raw: Buffer | undefined;
    try {
      raw = readPlain(this.masksPath, 1 << 20);
    } catch {
      throw damaged('is not a plain file of its size (a link, a device, too big?)');
    }
    if (!raw) return undefined;
    let v: unknown;
    try {
      v = JSON.parse(raw.toString('utf8'));
    } catch {
      throw damaged('is not JSON');
    }
    const r = MasksFile.safeParse(v);
    if (!r.success) throw damaged(`is not of the shape of masks (${r.error.issues[0]?.message ?? 'invalid'})`);
    return r.data;
  }

  /** Agents with checkpoints for this folder. */
  agents(): string[] {
    try {
      this.checkDirs();
      return fs
        .readdirSync(this.root, { withFileTypes: true })
        .filter((d) => d.isDirectory() && d.name !== 'blobs') // links to directories are not directories here
        .map((d) => d.name)
        .filter((a) => {
          try {
            return checkAgentDir(a) === a;
          } catch {
            return false;
          }
        });
    } catch {
      return [];
    }
  }

  /** The newest checkpoint of `agent`, if any. */
  latest(agent: string): CheckpointInfo | undefined {
    return this.list(agent).at(-1);
  }

  /**
   * Makes `agent`'s layer exactly what checkpoint `name` holds (its current changes are dropped).
   * The whole checkpoint, blobs included, is checked before the layer is touched: a damaged one
   * leaves the layer as it was.
   */
  async restore(shadow: Shadow, provenance: Provenance, agent: string, name: string): Promise<{ name: string; paths: number }> {
    const m = this.read(agent, name);
    // Its blobs are read until the replay ends: pinned, so that saving over this checkpoint (or
    // removing it) meanwhile does not take them away halfway (read and pinned in one synchronous step).
    const held: string[] = [];
    for (const h of manifestBlobs(m)) this.pin(h, held);
    try {
      return await this.restoreHeld(shadow, provenance, agent, name, m);
    } finally {
      this.unpin(held);
    }
  }

  private async restoreHeld(
    shadow: Shadow,
    provenance: Provenance,
    agent: string,
    name: string,
    m: CheckpointManifest,
  ): Promise<{ name: string; paths: number }> {
    for (const e of m.entries) {
      if (e.blob) this.getBlob(e.blob);
      for (const c of e.chunks ?? [])
        if (this.getBlob(c.blob).length !== c.length)
          throw corrupt(`the checkpoint ${name} of ${agent} has a chunk of ${e.path} of the wrong length`);
    }
    const audit = m.audit === undefined ? undefined : this.auditOf(m.audit, `the checkpoint ${name} of ${agent}`);
    // A checkpoint of a shadow whose layers could write git's control files (protectGit off, or
    // a daemon before it), restored where they cannot: refused before the layer is touched, as
    // the first such write would otherwise fail halfway through.
    const guarded = shadow.protects(
      m.entries.map((e) => e.path),
      m.entries.map((e) => e.type === 'symlink'),
    );
    const refused = m.entries.filter((_, i) => guarded[i]).map((e) => e.path);
    if (refused.length) {
      throw new ShadowError(
        'PATH_PROTECTED',
        `the checkpoint ${name} of ${agent} holds git's control files or links beneath a .git (${refused.slice(0, 5).join(', ')}${refused.length > 5 ? ', …' : ''}), which the layers of this shadow may not write; nothing was changed: mount the folder with --writable-git (protectGit: false) to restore it`,
      );
    }
    const target = await shadow.createLayer(agent);
    // Replayed into a scratch layer that hides what the agent's hides, then handed over in one
    // step: a write refused halfway (a path guarded since, a link that may not be made any more,
    // the memory budget) leaves the agent's layer as it was.
    const scratch = `.restore-${crypto.randomBytes(6).toString('hex')}`;
    const layer = await shadow.createScratchLayer(agent, scratch);
    try {
      await this.replay(m, layer);
      await shadow.moveLayer(
        scratch,
        agent,
        m.entries.map((e) => e.path),
      );
    } finally {
      await shadow.dropLayer(scratch).catch(() => undefined);
    }
    // The audit trail as the checkpoint saw it, then every entry the layer's record has that the
    // checkpoint does not: a restore takes nothing out of it (restoredAudit). One made before
    // audit trails existed leaves the layer's as it is; loadAudit drops (and counts) the oldest
    // past the limits.
    if (audit) await target.loadAudit(restoredAudit(audit, await target.auditRecord()));
    provenance.setLayerSince(agent, m.layerSince);
    provenance.clearRestoredBases(agent);
    // Each path keeps the base the checkpoint recorded (the earliest: a checkpoint of a restored
    // layer records the restored one). Without one, what the folder has there now is no base the
    // agent ever saw if it changed after the agent started: writing the checkpoint's content over
    // it made the layer record it as the base, which would let apply overwrite the user's edit.
    // An impossible base makes that a conflict instead.
    for (const e of m.entries) {
      if (e.base) provenance.setRestoredBase(agent, e.path, e.base, e.baseBlob);
      else if (e.type !== 'dir' && changedInFolderSince(path.join(shadow.folder, e.path), m.layerSince))
        provenance.setRestoredBase(agent, e.path, NO_BASE);
    }
    return { name, paths: m.entries.length };
  }

  /** Writes a checkpoint's entries into an empty layer. */
  private async replay(m: CheckpointManifest, layer: Layer): Promise<void> {
    // Deletions first, shallowest first; then directories, files and links in path order.
    const deleted = m.entries.filter((e) => e.type === 'deleted');
    for (const e of deleted) {
      await layer.remove(e.path).catch((err: unknown) => {
        if ((err as { code?: string }).code !== 'NOT_FOUND') throw err;
      });
    }
    for (const e of m.entries) {
      if (e.type === 'dir') {
        await layer.mkdir(e.path, { mode: e.mode ?? 0o755 }).catch(async (err: unknown) => {
          // The folder has it already (the agent changed its mode): set the mode.
          if ((err as { errno?: number }).errno === os.constants.errno.EEXIST) await layer.chmod(e.path, e.mode ?? 0o755);
          else throw err;
        });
      } else if (e.type === 'file' && e.chunks) {
        // By extents: an empty file grown to its size (a hole: spilled files stay sparse), then its data.
        await layer.write(e.path, Buffer.alloc(0), { mode: e.mode ?? 0o644 });
        await layer.truncate(e.path, e.size ?? 0);
        for (const c of e.chunks) await layer.writeAt(e.path, this.getBlob(c.blob), c.offset);
        await layer.chmod(e.path, e.mode ?? 0o644);
      } else if (e.type === 'file') {
        await layer.write(e.path, this.getBlob(e.blob!), { mode: e.mode ?? 0o644 });
        // Writing over a folder file keeps that file's mode: set the checkpoint's.
        await layer.chmod(e.path, e.mode ?? 0o644);
      } else if (e.type === 'symlink') {
        // The folder may have something there (the agent retargeted a link): the layer's link replaces it.
        await layer.remove(e.path).catch((err: unknown) => {
          if ((err as { code?: string }).code !== 'NOT_FOUND') throw err;
        });
        await layer.symlink(e.target!, e.path);
      }
    }
  }

  /** A checkpoint's audit trail, checked: its blob (getBlob's checks), JSON of the shape of a record. */
  private auditOf(hash: string, what: string): AuditRecord {
    let raw: unknown;
    try {
      raw = JSON.parse(this.getBlob(hash).toString('utf8'));
    } catch (err) {
      if (err instanceof ShadowError) throw err;
      throw corrupt(`the audit trail of ${what} is not JSON`);
    }
    const parsed = AuditRecordSchema.safeParse(raw);
    if (!parsed.success) throw corrupt(`the audit trail of ${what} is not of the shape of one`);
    return parsed.data;
  }

  /** Bytes of a base blob recorded by a checkpoint (null when it is missing or fails its checks). */
  baseContent(hash: string): Buffer | null {
    try {
      return this.getBlob(hash);
    } catch {
      return null;
    }
  }

  /** Removes checkpoint `name` of `agent`, then the blobs no checkpoint references any more (collect()). */
  remove(agent: string, name: string): void {
    checkName(name);
    try {
      checkAgentDir(agent);
    } catch {
      return; // no checkpoint can exist for it
    }
    const file = this.manifestPath(agent, name);
    this.checkDirs(agent); // never through a linked directory; rmSync removes a link itself, not its target
    fs.rmSync(file, { force: true });
    this.collectAfter(`removing the checkpoint ${name} of ${agent}`);
  }

  /** collect() after a save or remove that succeeded: a collection that fails is said (log), not theirs to fail. */
  private collectAfter(what: string): void {
    try {
      this.collect();
    } catch (err) {
      this.log?.(`unused checkpoint contents of ${this.folder} were not removed after ${what}: ${(err as Error).message}`);
    }
  }

  /**
   * Removes every blob no manifest of this folder references (manifestBlobs) and that no save or
   * restore under way, nor anything held (hold()), still needs; returns how many it removed.
   *
   * Safe against a save under way, by construction rather than by timing: a save writes its
   * blobs before its manifest, and pins each (in memory, per root, for every store of the
   * folder in this process) in the same synchronous step that looks for or writes it, until
   * its manifest is written. This collection is synchronous from its first read of a manifest to
   * its last unlink, so in this single-threaded process no save (nor restore) runs in the middle
   * of it: a blob is either pinned when it looks, or put (again) after it is done. Not a lock
   * that would make saves wait for one another, and not a grace period by age, which a slow save
   * (a large layer, a loaded machine) could outlast. It holds for the daemon, the one process
   * that saves a user's checkpoints; another process saving into the same folder's store at the
   * same time is not guarded against.
   *
   * It is conservative: a manifest that fails its checks keeps every blob id its text names
   * (it may be mended), one that cannot be read stops the collection (nothing removed), and
   * nothing beneath a link is read or removed; only names of blobs/ (a link there is removed
   * itself, never its target). What writeAtomic leaves beside a blob when a crash stops it
   * (<sha256>.<hex>.tmp) is removed too: none is being written while this runs.
   */
  collect(): number {
    const blobs = path.join(this.root, 'blobs');
    this.checkDirs('blobs');
    if (!fs.lstatSync(blobs, { throwIfNoEntry: false })) return 0;
    const keep = this.referenced();
    const u = inUse.get(this.root);
    for (const h of u?.pins.keys() ?? []) keep.add(h);
    for (const holder of u?.holders ?? []) for (const h of holder()) keep.add(h);
    this.checkDirs('blobs'); // again, just before removing: still no link
    let removed = 0;
    for (const d of fs.readdirSync(blobs, { withFileTypes: true })) {
      const m = BLOB_FILE_RE.exec(d.name);
      if (!m || d.isDirectory() || (!m[2] && keep.has(m[1]))) continue;
      try {
        fs.unlinkSync(path.join(blobs, d.name)); // a link is removed itself: unlink never follows one
        removed++;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    return removed;
  }

  /** The blob ids the manifests of every agent's directory name (see collect()). */
  private referenced(): Set<string> {
    const out = new Set<string>();
    this.checkDirs();
    for (const d of fs.readdirSync(this.root, { withFileTypes: true })) {
      // Every real directory but blobs/ (not only those named as agents are), never a link to one.
      if (!d.isDirectory() || d.name === 'blobs') continue;
      const dir = path.join(this.root, d.name);
      checkRealDir(dir);
      for (const f of fs.readdirSync(dir, { withFileTypes: true })) {
        if (!f.name.endsWith('.json')) continue; // a manifest's .tmp a crash left names nothing restorable
        const file = path.join(dir, f.name);
        const st = fs.lstatSync(file, { throwIfNoEntry: false });
        // What read() refuses without opening (a link, not a plain file, too big) is no checkpoint.
        if (!st || !st.isFile() || st.size > MAX_MANIFEST_BYTES) continue;
        const text = readPlain(file, MAX_MANIFEST_BYTES)?.toString('utf8') ?? '';
        let parsed: ReturnType<typeof ManifestSchema.safeParse> | undefined;
        try {
          parsed = ManifestSchema.safeParse(JSON.parse(text));
        } catch {
          parsed = undefined;
        }
        if (parsed?.success) for (const h of manifestBlobs(parsed.data)) out.add(h);
        else for (const h of text.match(/[0-9a-f]{64}/g) ?? []) out.add(h);
      }
    }
    return out;
  }
}
