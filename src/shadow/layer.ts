// Layer: a handle on one agent's layer of a shadow, active or not. Writes, reads and queries of
// that layer's tree go straight to the native module (the shared mount is not switched); what
// changes the layer is told to the shadow's layer listeners (Shadow.onLayer).
import type { LayerStats, NativeDirEntry, NativeShadow, NativeStat } from './native';
import { normalizeRelPath } from '../common/paths';
import { checkByteCount, checkMode, checkSymlinkTarget, MAX_RANGE_BYTES, toBuffer } from './checks';
import type { MaskInfo } from './mask';
import { type AuditQuery, type AuditRecord, type AuditResult, queryAudit } from './audit';
import type { Change, Shadow } from './shadow';
import { ERRNOS } from './errnos';

/**
 * One agent's layer of changes on a shadow, whether or not it is active. A Layer is a handle:
 * getting one never creates anything. The layer itself is created by its first write() or
 * remove() (or by shadow.createLayer()); the read-only queries (readFile, changes, stats) and
 * reset() of an agent that has no layer fail with UNKNOWN_AGENT.
 */
export class Layer {
  /** @internal use shadow.layer() */
  constructor(
    private readonly shadow: Shadow,
    readonly agentId: string,
  ) {}

  /** The masked paths in force for this agent (Shadow.setMask), and where they come from. */
  get mask(): MaskInfo {
    return this.shadow.maskOf(this.agentId);
  }

  /**
   * Writes a whole file into this layer (parents are created as needed, and the layer too).
   * A Uint8Array is read in place when the write runs: do not change it until this settles.
   */
  async write(relPath: string, data: string | Uint8Array, options: { mode?: number } = {}): Promise<void> {
    const p = normalizeRelPath(relPath);
    const buf = toBuffer(data);
    const mode = checkMode(options.mode ?? 0o644);
    await this.shadow.ensureLayer(this.agentId);
    await this.shadow.call(`write ${p}`, (n) => n.write(this.agentId, p, buf, mode, process.getuid?.() ?? 0, process.getgid?.() ?? 0));
    this.shadow.emit({ kind: 'written', agent: this.agentId, path: p });
  }

  /**
   * One native job on the file `p` of this layer (the layer is created if needed): `fn` calls one of
   * the native shadow's single-job file operations (writeFile, editFile); a result with status
   * "written" is told to the layer's listeners. For work/files.ts's writeText and editText.
   */
  async fileJob<T extends { status: string }>(p: string, what: string, fn: (n: NativeShadow) => Promise<T>): Promise<T> {
    await this.shadow.ensureLayer(this.agentId);
    const r = await this.shadow.call(what, fn);
    if (r.status === 'written') this.shadow.emit({ kind: 'written', agent: this.agentId, path: p });
    return r;
  }

  /** Removes a file or a whole directory from what this layer shows (the folder is untouched; the layer is created if needed). */
  async remove(relPath: string): Promise<void> {
    const p = normalizeRelPath(relPath);
    await this.shadow.ensureLayer(this.agentId);
    await this.shadow.call(`remove ${p}`, (n) => n.remove(this.agentId, p));
    this.shadow.emit({ kind: 'written', agent: this.agentId, path: p });
  }

  /** Reads a whole file as this layer shows it, active or not. */
  async readFile(relPath: string): Promise<Buffer> {
    const p = normalizeRelPath(relPath);
    return this.shadow.call(`read ${p} in the layer of ${this.agentId}`, (n) => n.readFile(this.agentId, p));
  }

  /**
   * At most `length` bytes at `offset` of a file as this layer shows it (fewer at its end, none
   * past it), and the file's size: any file, however large, read a piece at a time.
   */
  async readRange(relPath: string, offset: number, length: number): Promise<{ data: Buffer; size: number }> {
    const p = normalizeRelPath(relPath);
    checkByteCount('offset', offset, Number.MAX_SAFE_INTEGER);
    checkByteCount('length', length, MAX_RANGE_BYTES);
    return this.shadow.call(`read ${p} in the layer of ${this.agentId}`, (n) => n.readRange(this.agentId, p, offset, length));
  }

  /**
   * Where a file as this layer shows it holds data: sorted, disjoint [offset, length] pairs; the
   * rest of its `size` bytes are holes (zeros). Where the system cannot tell, one pair covers it all.
   */
  async dataExtents(relPath: string): Promise<{ size: number; extents: Array<[number, number]> }> {
    const p = normalizeRelPath(relPath);
    return this.shadow.call(`read ${p} in the layer of ${this.agentId}`, (n) => n.dataExtents(this.agentId, p));
  }

  /** Writes `data` at `offset` into a file this layer already shows (a gap before it reads as zeros). */
  async writeAt(relPath: string, data: Uint8Array, offset: number): Promise<void> {
    const p = normalizeRelPath(relPath);
    checkByteCount('offset', offset, Number.MAX_SAFE_INTEGER);
    const buf = toBuffer(data);
    await this.shadow.call(`write ${p}`, (n) => n.writeAt(this.agentId, p, buf, offset));
    this.shadow.emit({ kind: 'written', agent: this.agentId, path: p });
  }

  /** Sets the size of a file this layer already shows (growing a large one leaves a hole, not zeros in memory). */
  async truncate(relPath: string, size: number): Promise<void> {
    const p = normalizeRelPath(relPath);
    checkByteCount('size', size, Number.MAX_SAFE_INTEGER);
    await this.shadow.call(`truncate ${p}`, (n) => n.truncate(this.agentId, p, size));
    this.shadow.emit({ kind: 'written', agent: this.agentId, path: p });
  }

  /** Drops every change of this layer. */
  async reset(): Promise<void> {
    await this.shadow.call(`reset the layer of ${this.agentId}`, (n) => n.reset(this.agentId));
    this.shadow.emit({ kind: 'reset', agent: this.agentId });
  }

  /** What this layer changed, relative to the folder, in path order. */
  async changes(): Promise<Change[]> {
    return this.shadow.call(`list the changes of ${this.agentId}`, (n) => n.changes(this.agentId));
  }

  /** Memory and paths this layer holds. */
  async stats(): Promise<LayerStats> {
    return this.shadow.call(`read the stats of ${this.agentId}`, (n) => n.stats(this.agentId));
  }

  /**
   * What programs did through a mount showing this layer (its audit trail, docs/audit-trail.md):
   * opens, execs, creations, writes (bytes per open), truncations, deletions, renames, links;
   * the entries `q` asks for, oldest first, and how many the record dropped to stay bounded.
   */
  async audit(q: AuditQuery = {}): Promise<AuditResult> {
    return queryAudit(this.agentId, await this.auditRecord(), q);
  }

  /** This layer's whole audit trail (what a checkpoint keeps). */
  async auditRecord(): Promise<AuditRecord> {
    return this.shadow.call(`read the audit trail of ${this.agentId}`, (n) => n.auditRead(this.agentId));
  }

  /** Makes `record` this layer's audit trail (a checkpoint restored); entries beyond the limits are dropped and counted. */
  async loadAudit(record: Pick<AuditRecord, 'entries' | 'dropped' | 'nextSeq'>): Promise<void> {
    await this.shadow.call(`restore the audit trail of ${this.agentId}`, (n) =>
      n.auditLoad(this.agentId, { entries: record.entries, dropped: record.dropped, nextSeq: record.nextSeq }),
    );
  }

  // The tree as this layer shows it, active or not, without switching the shared mount.

  /** Type, permission bits, size and mtime of a path as this layer shows it (symlinks not followed). */
  async stat(relPath: string): Promise<NativeStat> {
    const p = normalizeRelPath(relPath, { allowRoot: true });
    return this.shadow.call(`stat ${p || '.'} in the layer of ${this.agentId}`, (n) => n.stat(this.agentId, p));
  }

  /** A directory's entries as this layer shows it (unsorted; no "." or ".."). */
  async readdir(relPath: string): Promise<NativeDirEntry[]> {
    const p = normalizeRelPath(relPath, { allowRoot: true });
    return this.shadow.call(`list ${p || '.'} in the layer of ${this.agentId}`, (n) => n.readdir(this.agentId, p));
  }

  /** A symlink's target as this layer shows it. */
  async readlink(relPath: string): Promise<string> {
    const p = normalizeRelPath(relPath);
    return this.shadow.call(`read the link ${p} in the layer of ${this.agentId}`, (n) => n.readlink(this.agentId, p));
  }

  /**
   * Makes a symlink in this layer (the layer is created if needed). The target is stored so it
   * leads to the same place from the mount as from the agent's runs, which see the shadow at the
   * folder's real path: into the folder it becomes relative, climbing above the root it becomes
   * absolute; PATH_PROTECTED where no such form is safe (native/core/link_targets.cc).
   */
  async symlink(target: string, relPath: string): Promise<void> {
    const p = normalizeRelPath(relPath);
    checkSymlinkTarget(target);
    await this.shadow.ensureLayer(this.agentId);
    await this.shadow.call(
      `make the link ${p}`,
      (n) => n.symlink(this.agentId, target, p, process.getuid?.() ?? 0, process.getgid?.() ?? 0),
      ERRNOS.symlink(target),
    );
    this.shadow.emit({ kind: 'written', agent: this.agentId, path: p });
  }

  /** Makes a directory in this layer (the layer is created if needed). */
  async mkdir(relPath: string, options: { mode?: number } = {}): Promise<void> {
    const p = normalizeRelPath(relPath);
    const mode = checkMode(options.mode ?? 0o755);
    await this.shadow.ensureLayer(this.agentId);
    await this.shadow.call(`make the directory ${p}`, (n) =>
      n.mkdir(this.agentId, p, mode, process.getuid?.() ?? 0, process.getgid?.() ?? 0),
    );
    this.shadow.emit({ kind: 'written', agent: this.agentId, path: p });
  }

  /**
   * Drops this layer's own entry at a path (and everything under it), so the folder shows
   * through there again; used after apply wrote the folder. Refused (EXDEV → CONFLICT) under a
   * directory the layer deleted, replaced or moved: only that directory as a whole can go back.
   * Refused (EPERM → PATH_PROTECTED) where it would bring back the last of HEAD, objects and
   * refs beside hooks, config, alternates or links the layer wrote there (native/core/overlay.h).
   * `through`: under a directory the layer deleted or emptied too; that directory merges with the
   * folder's again, every other entry of the folder's there deleted (a kept file of the user's).
   * `stamp` (from stat): only while the layer's object there is still that one, else CONFLICT and
   * the layer keeps it (a write of the agent's made while apply ran is never dropped).
   */
  async revert(relPath: string, opts: { through?: boolean; stamp?: string } = {}): Promise<void> {
    const p = normalizeRelPath(relPath);
    await this.shadow.call(
      `give ${p} back to the folder`,
      (n) => n.revert(this.agentId, p, opts.through === true, opts.stamp),
      opts.stamp === undefined ? {} : ERRNOS.revertStamped(this.agentId),
    );
    this.shadow.emit({ kind: 'reverted', agent: this.agentId, path: p });
  }

  /** Changes a path's permission bits in this layer (the layer is created if needed). */
  async chmod(relPath: string, mode: number): Promise<void> {
    const p = normalizeRelPath(relPath);
    checkMode(mode);
    await this.shadow.ensureLayer(this.agentId);
    await this.shadow.call(`change the mode of ${p}`, (n) => n.chmod(this.agentId, p, mode));
    this.shadow.emit({ kind: 'written', agent: this.agentId, path: p });
  }
}
