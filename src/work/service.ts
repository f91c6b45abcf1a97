// Getting work out of one shadow: diffs and patches of an agent's layer, apply-back, and
// checkpoints with autosave. One WorkService per shadow, owned by the daemon's manager (or made
// directly by SDK users of Shadow).
import type { Change, Shadow } from '../shadow';
import { formatPatch, type PatchFile } from '../patch';
import { reviewUnits, withChosen, withoutDropped, type ReviewUnit } from '../patch/review';
import { excerptOf, linesOf, RejectionStore, type Rejection } from './review';
import { applyLayer, type ApplyOptions, type ApplyResult } from './apply';
import { fetchAgentBranch, type BranchResult } from './branch';
import type { CheckpointInfo } from './checkpoint-manifest';
import { CheckpointStore } from './checkpoints';
import { collect, exclusions, folderPieces, withCollectOptions, type Excluded, type ExcludedReason } from './collect';
import { Beneath } from './beneath';
import { Provenance } from './provenance';
import { Radar } from './radar';
import { layerPieces, streamedLiteral } from './content';
import { ShadowError } from '../common/errors';

export const AUTOSAVE_NAME = 'autosave';

export interface DiffResult {
  text: string;
  files: PatchFile[];
  skipped: string[];
  /** Changed paths left out: the repository's own metadata (.git), and ignored files unless included. */
  excluded: Excluded[];
}

export interface OutOptions {
  /** Include the files the folder's git ignores (default: left out, like .git always is). */
  includeIgnored?: boolean;
}

export interface WorkApplyOptions extends Omit<ApplyOptions, 'restoredBases' | 'baseContents' | 'layerSince' | 'appliedDirs'>, OutOptions {
  /** Bring the agent's commits (its HEAD) into the folder's repository as this new branch instead of writing files. */
  branch?: string;
  /** With branch: replace a branch of that name (never the one checked out). */
  force?: boolean;
  /**
   * Apply only these review units (ids from hunks()), plus the whole of `paths` when given: a file
   * of which some hunks are chosen gets the folder's text with those hunks in, and the layer keeps
   * the rest as its change. An id that is not a unit of the layer now is CONFLICT (list again).
   */
  hunks?: string[];
  /**
   * Write each conflicting text file whose three-way merge has conflicting regions into the
   * agent's layer with conflict markers, over the folder's file as it is now, so the user resolves
   * it there (apply refuses a file that still holds the markers). The folder is not written.
   */
  markConflicts?: boolean;
  /**
   * Hunks the user edited before applying (git add -p's "e"), by id: the hunk's text as edited.
   * Each is applied as edited (its id need not be in `hunks` too); the layer keeps the agent's
   * version, so the difference stays its change.
   */
  edited?: Record<string, string>;
}

/** A review unit, with why apply would not write its path as it stands (the folder changed since the agent's copy). */
export type ReviewHunk = ReviewUnit & { conflict?: string };

export interface HunksResult {
  hunks: ReviewHunk[];
  skipped: string[];
  excluded: Excluded[];
}

export type WorkApplyResult = ApplyResult & { excluded: Excluded[]; branch?: BranchResult; marked?: string[] };

/** A path a rejection with revert could not take out of the layer, and why (its error). */
export interface NotReverted {
  path: string;
  code: string;
  message: string;
}

/** Errors of one path's revert that leave the rest of a rejection to go on. */
const REVERT_REFUSALS = new Set(['CONFLICT', 'PATH_PROTECTED', 'PATH_MASKED']);

/** A change entry, marked when diffs, patches and apply leave it out. */
export type MarkedChange = Change & { excluded?: ExcludedReason };

export class WorkService {
  readonly store: CheckpointStore;
  /** When each layer started and what it was restored from, kept from the shadow's layer events. */
  readonly provenance: Provenance;
  /** Where agents' work collides (two layers on one path, a copy whose folder base moved), kept from events. */
  readonly radar: Radar;
  private timer: NodeJS.Timeout | undefined;
  /** Per agent: a fingerprint of the layer's change list at the last autosave. */
  private readonly saved = new Map<string, string>();
  /** Per agent, the folder's directories its applies changed, as they left them (ApplyOptions.appliedDirs). */
  private readonly appliedDirs = new Map<string, Map<string, string>>();
  private saving: Promise<void> | undefined;
  /** Lets blob collection take the restored bases' contents again (dispose). */
  private readonly releaseBases: () => void;

  readonly rejectionStore: RejectionStore;

  constructor(
    readonly shadow: Shadow,
    private readonly opts: { autosaveMs?: number; log?: (line: string) => void; neighbours?: () => Shadow[] } = {},
  ) {
    this.store = new CheckpointStore(shadow.folder);
    this.store.log = opts.log;
    this.provenance = new Provenance(shadow);
    // A restored layer's base contents are checkpoint blobs apply merges with (and the next
    // checkpoint records again): kept while the layer may need them, though their checkpoint goes.
    this.releaseBases = this.store.hold(() => this.provenance.restoredBlobs());
    this.radar = new Radar(shadow, this.provenance, { log: opts.log });
    this.rejectionStore = new RejectionStore(shadow.folder);
    if (opts.autosaveMs && opts.autosaveMs > 0) {
      this.timer = setInterval(() => void this.autosave(), opts.autosaveMs);
      this.timer.unref();
    }
  }

  /** A unified diff (binary files named, not shown) of the agent's layer against the folder. */
  async diff(agent: string, paths?: string[], opts: OutOptions = {}): Promise<DiffResult> {
    const c = await collect(this.shadow, agent, paths, { includeIgnored: opts.includeIgnored === true });
    const p = formatPatch(c.files, { binary: false });
    return { text: p.text, files: p.files, skipped: c.skipped, excluded: c.excluded };
  }

  /**
   * A git-format patch (binary hunks included) that `git apply` reproduces byte for byte. A file
   * too large to hold in memory has its literal made by streaming it (holes cost nothing to read);
   * one that compresses to more than a patch carries is FILE_TOO_LARGE.
   */
  async patch(agent: string, paths?: string[], opts: OutOptions = {}): Promise<DiffResult> {
    const c = await collect(this.shadow, agent, paths, { includeIgnored: opts.includeIgnored === true });
    if (c.files.some((f) => f.old?.large || f.new?.large)) {
      const root = Beneath.open(this.shadow.folder);
      try {
        const layer = this.shadow.layer(agent);
        for (const f of c.files) {
          if (!(f.old?.large || f.new?.large)) continue;
          for (const [side, pieces, where] of [
            [f.old, () => folderPieces(root, f.path), 'the folder'],
            [f.new, () => layerPieces(layer, f.path), `the layer of ${agent}`],
          ] as const) {
            if (!side?.large) continue;
            const what = `${f.path} in ${where}`;
            const lit = await streamedLiteral(pieces(), side.large.size, what);
            if (lit.id !== side.large.id) throw new ShadowError('CONFLICT', `${what} changed while the patch was made; try again`);
            side.large.literal = lit.hunk;
          }
        }
      } finally {
        root.close();
      }
    }
    const p = formatPatch(c.files, { binary: true });
    return { text: p.text, files: p.files, skipped: c.skipped, excluded: c.excluded };
  }

  /** The layer's change list, each entry marked when diffs, patches and apply leave it out. */
  async changes(agent: string): Promise<MarkedChange[]> {
    const changes = await this.shadow.layer(agent).changes();
    const dirs = new Set(changes.filter((c) => c.type === 'directory').map((c) => c.path));
    const why = await exclusions(
      this.shadow.folder,
      changes.map((c) => c.path),
      dirs,
    );
    return changes.map((c) => {
      const reason = why.get(c.path);
      return reason ? { ...c, excluded: reason } : c;
    });
  }

  async apply(agent: string, opts: WorkApplyOptions = {}): Promise<WorkApplyResult> {
    const { markConflicts, ...rest } = opts;
    const r = await this.applyChosen(agent, rest);
    if (!markConflicts || r.dryRun) return r;
    const marked: string[] = [];
    const layer = this.shadow.layer(agent);
    for (const x of r.conflicts) {
      if (x.merged === null || x.mergeConflicts === 0) continue;
      // Taken again over the folder's file as it is: the layer's base is that file, so once the
      // markers are resolved the file applies without a conflict.
      const perm = (await layer.stat(x.path)).mode & 0o7777;
      await layer.revert(x.path);
      await layer.write(x.path, x.merged, { mode: perm });
      marked.push(x.path);
    }
    return { ...r, marked };
  }

  private async applyChosen(agent: string, opts: Omit<WorkApplyOptions, 'markConflicts'>): Promise<WorkApplyResult> {
    const { branch, force, includeIgnored, edited, ...chosenOpts } = opts;
    const edits = new Map(Object.entries(edited ?? {}));
    const hunks = chosenOpts.hunks === undefined && !edits.size ? undefined : [...(chosenOpts.hunks ?? []), ...edits.keys()];
    delete chosenOpts.hunks;
    const fileOpts = chosenOpts;
    if (branch !== undefined) {
      const b = await fetchAgentBranch(this.shadow, agent, branch, { force: force === true, dryRun: opts.dryRun === true });
      return { dryRun: opts.dryRun === true, applied: [], conflicts: [], kept: [], skipped: [], excluded: [], branch: b };
    }
    if (hunks === undefined) return this.applyFiles(agent, fileOpts, includeIgnored === true);
    const c = await collect(this.shadow, agent, undefined, { includeIgnored: includeIgnored === true });
    const units = reviewUnits(c.files);
    const known = new Set(units.map((u) => u.id));
    const unknown = hunks.filter((id) => !known.has(id));
    if (unknown.length)
      throw new ShadowError(
        'CONFLICT',
        `${unknown.join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not among the layer's hunks now (the layer or the folder changed since they were listed): list the hunks again`,
      );
    const notHunks = [...edits.keys()].filter((id) => units.find((u) => u.id === id)?.unit !== 'hunk');
    if (notHunks.length)
      throw new ShadowError(
        'INVALID_ARGUMENT',
        `${notHunks.join(', ')}: only a hunk of a text file can be edited, not a whole-file or mode unit`,
      );
    const chosen = new Set(hunks);
    const whole = new Set(fileOpts.paths ?? []);
    const partial = new Map<string, ReturnType<typeof withChosen>>();
    for (const f of c.files) {
      const mine = units.filter((u) => u.path === f.path);
      const taken = mine.filter((u) => chosen.has(u.id));
      if (!taken.length) continue;
      if (taken.length === mine.length && !taken.some((u) => edits.has(u.id))) whole.add(f.path);
      else partial.set(f.path, withChosen(f, chosen, edits));
    }
    const paths = [...whole, ...partial.keys()];
    if (!paths.length) return { dryRun: opts.dryRun === true, applied: [], conflicts: [], kept: [], skipped: [], excluded: c.excluded };
    return this.applyFiles(agent, { ...fileOpts, paths, partial }, includeIgnored === true);
  }

  private async applyFiles(
    agent: string,
    fileOpts: Omit<ApplyOptions, 'restoredBases' | 'baseContents' | 'layerSince' | 'appliedDirs'>,
    includeIgnored: boolean,
  ): Promise<WorkApplyResult> {
    const restored = this.provenance.restoredBases(agent);
    const baseContents = new Map<string, Buffer>();
    for (const [p, o] of restored) {
      const b = o.blob ? this.store.baseContent(o.blob) : null;
      if (b) baseContents.set(p, b);
    }
    // applyLayer collects the changes itself: what it leaves out is said through the ambient options.
    const excluded: Excluded[] = [];
    const r = await withCollectOptions({ includeIgnored, excluded }, () =>
      applyLayer(this.shadow, agent, {
        ...fileOpts,
        restoredBases: new Map([...restored].map(([p, o]) => [p, o.base])),
        baseContents,
        layerSince: this.provenance.layerSince(agent),
        appliedDirs: this.appliedDirsOf(agent),
        ...(this.opts.neighbours ? { neighbours: this.opts.neighbours } : {}),
      }),
    );
    this.saved.delete(agent);
    return { ...r, excluded };
  }

  private appliedDirsOf(agent: string): Map<string, string> {
    let m = this.appliedDirs.get(agent);
    if (!m) this.appliedDirs.set(agent, (m = new Map()));
    return m;
  }

  /**
   * The layer's changes as review units with stable ids (hunks of text files; whole files
   * otherwise), each marked with the conflict apply would report for its path.
   */
  async hunks(agent: string, paths?: string[], opts: OutOptions = {}): Promise<HunksResult> {
    const c = await collect(this.shadow, agent, paths, { includeIgnored: opts.includeIgnored === true });
    const units = reviewUnits(c.files);
    const dry = units.length
      ? await this.applyFiles(agent, { paths: [...new Set(units.map((u) => u.path))], dryRun: true }, opts.includeIgnored === true)
      : null;
    const why = new Map((dry?.conflicts ?? []).map((x) => [x.path, x.reason]));
    return {
      hunks: units.map((u) => (why.has(u.path) ? { ...u, conflict: why.get(u.path)! } : u)),
      skipped: c.skipped,
      excluded: c.excluded,
    };
  }

  /**
   * Records the user's rejection of units (ids from hunks()) with a reason each, for the agent to
   * be told; with `revert`, also takes them out of the agent's layer (a hunk: the folder's lines
   * there again; a whole-file unit: the path reverted).
   */
  async reject(
    agent: string,
    items: Array<{ id: string; reason: string }>,
    opts: { revert?: boolean } = {},
  ): Promise<{ rejected: Rejection[]; reverted: string[]; notReverted: NotReverted[] }> {
    const c = await collect(this.shadow, agent, undefined, { includeIgnored: true });
    const units = reviewUnits(c.files);
    const byId = new Map(units.map((u) => [u.id, u]));
    const unknown = items.filter((i) => !byId.has(i.id)).map((i) => i.id);
    if (unknown.length) throw new ShadowError('CONFLICT', `${unknown.join(', ')}: not among the layer's hunks now (list the hunks again)`);
    const at = new Date().toISOString();
    const rejected: Rejection[] = items.map((i) => {
      const u = byId.get(i.id)!;
      return {
        id: u.id,
        path: u.path,
        lines: linesOf(u),
        excerpt: excerptOf(u.text),
        reason: i.reason,
        at,
        delivered: false,
        reverted: opts.revert === true,
      };
    });
    const reverted: string[] = [];
    const notReverted: NotReverted[] = [];
    if (opts.revert) {
      const layer = this.shadow.layer(agent);
      const dropped = new Set(items.map((i) => i.id));
      for (const f of c.files) {
        const mine = units.filter((u) => u.path === f.path);
        const out = mine.filter((u) => dropped.has(u.id));
        if (!out.length) continue;
        try {
          if (out.length === mine.length) await layer.revert(f.path);
          else {
            const side = withoutDropped(f, dropped);
            const perm = side.mode === f.new?.mode ? (await layer.stat(f.path)).mode & 0o7777 : side.mode & 0o777;
            await layer.write(f.path, side.data, { mode: perm });
          }
          reverted.push(f.path);
        } catch (err) {
          // One path the layer cannot give back (under a directory it moved, beside hooks it
          // wrote) stops neither the others nor the record: the rejection stands, unreverted.
          if (!(err instanceof ShadowError) || !REVERT_REFUSALS.has(err.code)) throw err;
          notReverted.push({ path: f.path, code: err.code, message: err.message });
          for (const r of rejected) if (r.path === f.path) r.reverted = false;
        }
      }
    }
    this.rejectionStore.add(agent, rejected);
    return { rejected, reverted, notReverted };
  }

  /** The rejections recorded for `agent`, oldest first; with `take`, only those it was not told of, marked told now. */
  rejections(agent: string, take = false): Rejection[] {
    return take ? this.rejectionStore.take(agent) : this.rejectionStore.list(agent);
  }

  async checkpoint(agent: string, name: string): Promise<CheckpointInfo> {
    // A checkpoint keeps the layer whole (.git and ignored files too): it is the agent's state, not work out.
    return withCollectOptions({ everything: true }, () => this.store.save(this.shadow, this.provenance, agent, name));
  }

  async restore(agent: string, name: string): Promise<{ name: string; paths: number }> {
    const r = await this.store.restore(this.shadow, this.provenance, agent, name);
    this.saved.delete(agent);
    return r;
  }

  checkpoints(agent: string): CheckpointInfo[] {
    return this.store.list(agent);
  }

  /**
   * Saves every layer that changed since its last autosave as checkpoint "autosave" (one at a
   * time; a call while one runs waits for it).
   */
  async autosave(): Promise<string[]> {
    while (this.saving) await this.saving;
    const done: string[] = [];
    let release!: () => void;
    this.saving = new Promise<void>((r) => (release = r));
    try {
      if (!this.shadow.mounted) return done;
      for (const agent of await this.shadow.agents()) {
        // One job's copy (a run that discards its writes): dropped when it ends, never brought back.
        if (this.shadow.isScratch(agent)) continue;
        const changes = await this.shadow.layer(agent).changes();
        // Sizes and times are not in the change list: read what it says plus each file's stat.
        const parts: string[] = [];
        for (const c of changes) {
          const st =
            c.type === 'file' && c.kind !== 'deleted'
              ? await this.shadow
                  .layer(agent)
                  .stat(c.path)
                  .catch(() => null)
              : null;
          parts.push(`${c.path}|${c.kind}|${c.type}|${st ? `${st.size}:${st.mtimeMs}:${st.mode}` : ''}`);
        }
        // The audit trail grows without changes too (opens, reads): a new entry is worth an autosave.
        const audited = (await this.shadow.layer(agent).auditRecord()).nextSeq;
        parts.push(`audit|${audited}`);
        const print = parts.join('\n');
        if (this.saved.get(agent) === print) continue;
        if (changes.length === 0 && audited === 1 && !this.saved.has(agent) && !this.store.latest(agent)) {
          this.saved.set(agent, print);
          continue;
        }
        // One agent's autosave that fails (its checkpoint directory was tampered with, say) does not stop the others'.
        try {
          await withCollectOptions({ everything: true }, () => this.store.save(this.shadow, this.provenance, agent, AUTOSAVE_NAME, true));
        } catch (err) {
          this.opts.log?.(`autosave of ${agent} on ${this.shadow.mountPoint} failed: ${(err as Error).message}`);
          continue;
        }
        this.saved.set(agent, print);
        done.push(agent);
      }
    } catch (err) {
      this.opts.log?.(`autosave of ${this.shadow.mountPoint} failed: ${(err as Error).message}`);
    } finally {
      this.saving = undefined;
      release();
    }
    return done;
  }

  /** Per agent: path → what it looked like at the last pollChanges (kind, type, size, mtime, mode). */
  private readonly lastSeen = new Map<string, Map<string, { kind: string; type: string; sig: string }>>();
  private lastActivity = -1;
  private lastPoll = 0;

  /**
   * What changed in the layers since the last call, by any means (programs writing through the
   * mount included): per agent, the paths whose change entry appeared, went ("reverted": the
   * layer no longer changes them) or whose content or mode changed again. Cheap when nothing
   * happened: the mount's request counter has to move, or five seconds pass (API writes do not
   * go through the mount).
   */
  async pollChanges(): Promise<
    Array<{
      agent: string;
      changes: Array<{ path: string; kind: 'added' | 'modified' | 'deleted' | 'metadata' | 'reverted'; type: string }>;
    }>
  > {
    if (!this.shadow.mounted) return [];
    const activity = this.shadow.activity();
    const now = Date.now();
    if (activity === this.lastActivity && now - this.lastPoll < 5000) return [];
    this.lastActivity = activity;
    this.lastPoll = now;
    const out: Array<{
      agent: string;
      changes: Array<{ path: string; kind: 'added' | 'modified' | 'deleted' | 'metadata' | 'reverted'; type: string }>;
    }> = [];
    const agents = await this.shadow.agents();
    for (const gone of [...this.lastSeen.keys()]) if (!agents.includes(gone)) this.lastSeen.delete(gone);
    for (const agent of agents) {
      const layer = this.shadow.layer(agent);
      const next = new Map<string, { kind: string; type: string; sig: string }>();
      for (const c of await layer.changes().catch(() => [])) {
        const st = c.kind !== 'deleted' && c.type !== 'directory' ? await layer.stat(c.path).catch(() => null) : null;
        next.set(c.path, { kind: c.kind, type: c.type, sig: st ? `${st.size}:${st.mtimeMs}:${st.mode}` : '' });
      }
      // A layer not seen before starts empty: everything it holds is news.
      const before = this.lastSeen.get(agent) ?? new Map<string, { kind: string; type: string; sig: string }>();
      this.lastSeen.set(agent, next);
      const changes: Array<{ path: string; kind: 'added' | 'modified' | 'deleted' | 'metadata' | 'reverted'; type: string }> = [];
      for (const [p, n] of next) {
        const b = before.get(p);
        if (!b || b.kind !== n.kind || b.sig !== n.sig)
          changes.push({ path: p, kind: n.kind as 'added' | 'modified' | 'deleted' | 'metadata', type: n.type });
      }
      for (const [p, b] of before) if (!next.has(p)) changes.push({ path: p, kind: 'reverted', type: b.type });
      if (changes.length) out.push({ agent, changes: changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)) });
    }
    // Writes through the mount reach the radar only this way (the mount never calls into JavaScript).
    for (const a of out) this.radar.layerChanges(a.agent, a.changes);
    return out;
  }

  /**
   * Removes the autosave of `agent`, whose layer was dropped (after an autosave under way, which
   * may have saved the layer as it was).
   */
  async forgetAutosave(agent: string): Promise<void> {
    while (this.saving) await this.saving;
    this.saved.delete(agent);
    this.store.remove(agent, AUTOSAVE_NAME);
  }

  /** Stops autosave; with `flush`, saves once more first. */
  async dispose(flush = false): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (flush) await this.autosave();
    this.radar.dispose();
    this.provenance.dispose();
    this.releaseBases();
  }
}
