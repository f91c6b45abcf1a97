// Shadow: one shadow of a folder, mounted. Its layers (one per agent) and which of them the
// shared mount shows; the scheduler that time-slices agents on that mount (withLayer, runAs);
// views for agents that run at once; suspend, resume and unmount. Everything that changes a
// layer is told to onLayer listeners, so that services keep what they need to know about a
// layer's history (src/work keeps when each started and what it was restored from) themselves.
import * as fs from 'fs';
import * as path from 'path';
import { type ErrnoTable, fromNative, ShadowError } from '../common/errors';
import type { LayerStats, MemoryBudgetStats, NativeChange, NativeFolderChanges, NativeShadow } from './native';
import { memoryBudgetStats } from './budget';
import { JobOptions, LayerScheduler, SchedulerStats } from './scheduler';
import { platform } from '../platform';
import { checkAgent } from './checks';
import { ERRNOS } from './errnos';
import { Layer } from './layer';
import { checkGlobs, type MaskInfo, MaskPolicy, type MaskState } from './mask';
import type { IoMode } from './mount';
import { networkPrefix, prepareMountPoint, volumeFor, type WindowsVolume } from './mount-point';
import { runAs, type RunAsJob, type RunAsOptions } from './run-as';
import { View } from './view';

export type { LayerStats };

export type Change = NativeChange;

/** A mount of the shadow that ended without being asked to (see Shadow.onGone). */
export interface GoneEvent {
  /** A sentence saying why. */
  reason: string;
  /** The view's mount point when a view went; undefined when the shared mount went. */
  view?: string;
}

/**
 * Something that changed a layer, told to Shadow.onLayer listeners once it is done, on the JS
 * thread; `at` is when (ms since the epoch). Programs writing through a mount are not told here
 * (they never wait on JavaScript): only what went through this API.
 */
export type LayerEvent = { agent: string; at: number } & (
  | /** The layer came into being (createLayer, or the first write of an agent that had none). */ { kind: 'created' }
  | /** The layer is a copy of `from`'s (cloneLayer). */ { kind: 'cloned'; from: string }
  | /** Every change of the layer was dropped. */ { kind: 'reset' }
  | /** The layer and its changes are gone. */ { kind: 'dropped' }
  | /** A path was written, removed, made or had its mode changed through the API. */ { kind: 'written'; path: string }
  | /** The layer gave a path back to the folder (after apply wrote it there). */ { kind: 'reverted'; path: string }
  | /** The shared mount shows this layer now. */ { kind: 'activated' }
);

/** LayerEvent without its time: what a part of the shadow says happened. */
type LayerNews = LayerEvent extends infer E ? (E extends LayerEvent ? Omit<E, 'at'> : never) : never;

/** The scheduler queue of jobs that need no layer active (no agent id has a NUL byte). */
const FOLDER_QUEUE = '\0folder';
/** The scheduler's name for the switch back to the pinned layer (Shadow.pin). */
const PIN_QUEUE = '\0pin';

/** Job options whose onWait hears the folder's own queue as '(folder)', the name stats give it. */
function named<O extends JobOptions>(options: O): O {
  const onWait = options.onWait;
  return onWait ? { ...options, onWait: (a: string) => onWait(a === FOLDER_QUEUE ? '(folder)' : a === PIN_QUEUE ? '(pin)' : a) } : options;
}

export class Shadow {
  /** Where the shared, time-sliced mount is. */
  readonly mountPoint: string;
  /** The real path of the folder it shadows. */
  readonly folder: string;
  /** The mount backend serving it (and its views). */
  readonly backend: string;
  /** How fuse_ll serves opens (MountOptions.io); fuse_hl always answers "open". */
  readonly io: IoMode;
  private native: NativeShadow | undefined;
  private readonly createdMountPoint: boolean;
  /** Layers known to exist: created, cloned or activated through this object (the only way to make one). */
  private readonly known = new Set<string>();
  /** Layers that live only for one job (a run's copy with discarded writes, a restore's replay): never saved. */
  private readonly scratch = new Set<string>();
  /** Masked paths per agent (mask.ts); every layer gets its agent's mask when it comes into being. */
  private readonly masks = new MaskPolicy();
  private readonly layerListeners = new Set<(e: LayerEvent) => void>();
  /** When this shadow was mounted (ms since the epoch): none of its layers started earlier. */
  readonly mountedAt = Date.now();
  /** @internal */
  readonly views = new Set<View>();
  // Jobs activate their layer themselves (see withLayer), so a scratch layer can stand in.
  private readonly scheduler = new LayerScheduler(async () => undefined);
  /**
   * What the user chose the shared mount to show between jobs (pin): a layer, null for the
   * folder itself, undefined when nobody chose (the last job's layer stays, which spares the
   * next job of the same agent a switch).
   */
  private pinnedTo: string | null | undefined;
  private readonly goneListeners = new Set<(e: GoneEvent) => void>();
  private goneReason: string | undefined;
  /** Windows, winfsp: the shared mount's volume form (MountOptions.volume); undefined elsewhere. */
  readonly volume: WindowsVolume | undefined;
  /** Whether layers may not write git's control files (MountOptions.protectGit). */
  readonly protectGit: boolean;
  /** The folder's own paths layers may not write besides them (its hooks directory), as anchored globs. */
  readonly protectedPaths: readonly string[];
  /** Whether the mount and its layers match names without regard to case (MountOptions.caseInsensitive). */
  readonly caseInsensitive: boolean;

  /** @internal use mount() */
  constructor(
    native: NativeShadow,
    folder: string,
    mountPoint: string,
    createdMountPoint: boolean,
    backend: string,
    io: IoMode = 'open',
    volume?: WindowsVolume,
    guard: { protectGit: boolean; protectedPaths: readonly string[]; caseInsensitive?: boolean } = { protectGit: true, protectedPaths: [] },
  ) {
    this.native = native;
    this.folder = folder;
    this.backend = backend;
    this.io = backend === 'fuse_ll' ? io : 'open';
    this.mountPoint = mountPoint;
    this.createdMountPoint = createdMountPoint;
    this.volume = volume;
    this.protectGit = guard.protectGit;
    this.protectedPaths = Object.freeze([...guard.protectedPaths]);
    this.caseInsensitive = guard.caseInsensitive === true;
    // The addon calls this on the JS thread when a mount ends on its own (the native object
    // holds it as a property: a cycle within the JS heap, which the GC collects).
    native.onGone = (reason, view) => this.gone(reason, view);
  }

  /** @deprecated The former name of folder (the overlay's word); use folder. */
  get lower(): string {
    return this.folder;
  }

  /**
   * Calls `listener` whenever a mount of this shadow ends without being asked to: its WinFsp dispatcher stopped (the
   * volume or the driver went away), or its kernel connection ended. The shared mount is then `suspended` (its layers
   * are kept; resume() mounts it again); a view is closed. Returns a function that removes the listener.
   */
  onGone(listener: (e: GoneEvent) => void): () => void {
    this.goneListeners.add(listener);
    return () => this.goneListeners.delete(listener);
  }

  /** Why the shared mount ended on its own, until resume() mounts it again; undefined otherwise. */
  get lost(): string | undefined {
    return this.native !== undefined && !this.native.mounted ? this.goneReason : undefined;
  }

  private gone(reason: string, viewId: number | null): void {
    const native = this.native;
    if (!native) return; // unmounted for good meanwhile
    let event: GoneEvent;
    if (viewId === null) {
      this.goneReason = reason;
      event = { reason };
    } else {
      const v = [...this.views].find((x) => x.viewId === viewId);
      if (!v) return;
      v.markGone();
      this.views.delete(v);
      // Lets the backend go (nothing is mounted any more: a lazy close cannot be refused).
      native.closeView(viewId, true).catch(() => undefined);
      event = { reason, view: v.mountPoint };
    }
    for (const l of this.goneListeners) {
      try {
        l(event);
      } catch {
        // a listener's own failure is its own
      }
    }
  }

  get mounted(): boolean {
    return this.native?.mounted ?? false;
  }

  /** @internal whether unmounting removes the mount point (it was made for this shadow) */
  get ownsMountPoint(): boolean {
    return this.createdMountPoint;
  }

  /**
   * Which of these paths (relative to the folder, "/"-separated) no layer of this shadow may write: git's control files
   * and the folder's hooks directory while protectGit is on (MountOptions.protectGit); none otherwise. A path whose
   * `links` entry is true stands for a symbolic link to be made there, which is refused beneath any `.git` as well.
   */
  protects(relPaths: string[], links?: boolean[]): boolean[] {
    if (!this.native) return relPaths.map(() => false);
    return this.native.guarded(relPaths, links);
  }

  /** The agent whose layer the shared mount shows, or null (the folder exactly, read-only). */
  get active(): string | null {
    return this.native?.active ?? null;
  }

  /** What the shared mount returns to once no job is running or queued (see pin). */
  get pinned(): string | null | undefined {
    return this.pinnedTo;
  }

  /**
   * Shows `agentId`'s layer (null: the folder itself) on the shared mount now, and again each
   * time the jobs that switch it for other agents (withLayer, withFolder, runs) have ended and
   * none is waiting: what you choose to look at stays what you see. undefined lets the last
   * job's layer stay, as before any choice.
   */
  async pin(agentId: string | null | undefined): Promise<{ paths: number; epoch: boolean; ms: number }> {
    if (agentId === undefined) {
      this.pinnedTo = undefined;
      return { paths: 0, epoch: false, ms: 0 };
    }
    const id = agentId === null ? null : checkAgent(agentId);
    this.pinnedTo = id;
    // A job that has the mount keeps it: the switch then comes when the last one ends
    // (backToPin), and the caller is not held up for as long as a run takes.
    const now = this.scheduler.snapshot();
    if (now.running !== null || now.queued > 0) return { paths: 0, epoch: false, ms: 0 };
    return this.activateBetweenJobs(id);
  }

  /**
   * activate, queued with the jobs (withLayer, withFolder, runs) so that it never pulls the mount
   * from under one that is running: a job has the mount it asked for until it ends (a review
   * switched layers one second into an agent's run, which then read and wrote the other layer).
   */
  activateBetweenJobs(agentId: string | null): Promise<{ paths: number; epoch: boolean; ms: number }> {
    const id = agentId === null ? null : checkAgent(agentId);
    return this.scheduler.run(PIN_QUEUE, async () => (this.active === id ? { paths: 0, epoch: false, ms: 0 } : this.activate(id)));
  }

  /** After a job: back to the pinned choice once nothing runs or waits (as a job of its own, so that none overlaps it). */
  private backToPin(): void {
    if (this.pinnedTo === undefined || this.active === this.pinnedTo) return;
    const now = this.scheduler.snapshot();
    if (now.running !== null || now.queued > 0) return; // the job that ends last brings it back
    this.scheduler
      .run(PIN_QUEUE, async () => {
        const want = this.pinnedTo;
        if (want === undefined || this.active === want || !this.mounted) return;
        // A pinned layer dropped since shows the folder instead.
        await this.activate(want !== null && !(await this.agents()).includes(want) ? null : want);
      })
      .catch(() => undefined); // unmounted meanwhile: nothing to show
  }

  /**
   * @internal Runs a native call (a Promise settled off the JS thread) doing `what`; its errors
   * become ShadowErrors by the call's own errno meanings (`errnos`, see ./errnos), over those of
   * any call on this mount.
   */
  async call<T>(what: string, fn: (n: NativeShadow) => Promise<T>, errnos: ErrnoTable = {}): Promise<T> {
    if (!this.native || !this.native.mounted)
      throw new ShadowError('NOT_MOUNTED', `the shadow at ${this.mountPoint} is not mounted any more`);
    try {
      return await fn(this.native);
    } catch (err) {
      throw fromNative(err, what, { ...ERRNOS.onMount(this.mountPoint), ...errnos });
    }
  }

  /**
   * Calls `listener` after each change of a layer made through this object (see LayerEvent), in
   * the order they happened. Returns a function that removes the listener.
   */
  onLayer(listener: (e: LayerEvent) => void): () => void {
    this.layerListeners.add(listener);
    return () => this.layerListeners.delete(listener);
  }

  /** @internal tells the layer listeners (a listener's own failure is its own). */
  emit(news: LayerNews): void {
    const e = { ...news, at: Date.now() } as LayerEvent;
    for (const l of this.layerListeners) {
      try {
        l(e);
      } catch {
        // not the caller's failure
      }
    }
  }

  /**
   * A handle on `agentId`'s layer. Creates nothing: the layer comes into being with its first
   * write() or remove(), or with createLayer(); until then its queries fail with UNKNOWN_AGENT.
   */
  layer(agentId: string): Layer {
    return new Layer(this, checkAgent(agentId));
  }

  /** Creates `agentId`'s layer (empty) if it does not exist yet, and returns it. */
  async createLayer(agentId: string): Promise<Layer> {
    const id = checkAgent(agentId);
    await this.ensureLayer(id);
    return new Layer(this, id);
  }

  /** @internal creates the layer unless this object knows it exists. */
  async ensureLayer(id: string): Promise<void> {
    if (this.known.has(id)) return;
    await this.call(`create the layer of ${id}`, (n) => n.createLayer(id));
    // Masked before anything can show it: it is in no mount and no view yet (a new layer has no mask).
    if (this.masks.of(id).globs.length) await this.applyMask(id);
    this.known.add(id);
    this.emit({ kind: 'created', agent: id });
  }

  /** Makes `to` a copy of `from`'s layer (later changes to either stay apart). LAYER_EXISTS if `to` has a layer. */
  /** Whether `agent`'s layer lives for one job only (markScratch, createScratchLayer): autosave passes it by. */
  isScratch(agent: string): boolean {
    return this.scratch.has(agent);
  }

  /** Marks `agent`'s layer as one job's copy (dropped when the job ends), which is never saved. */
  markScratch(agent: string): void {
    this.scratch.add(checkAgent(agent));
  }

  async cloneLayer(from: string, to: string): Promise<Layer> {
    const a = checkAgent(from);
    const b = checkAgent(to);
    await this.call(`copy the layer of ${a} to ${b}`, (n) => n.cloneLayer(a, b), ERRNOS.cloneLayer(b));
    // The copy hides what its source hides (the core copied the mask), unless it has its own.
    this.masks.copied(a, b);
    if (this.masks.of(b).source === 'agent') await this.applyMask(b);
    this.known.add(b);
    this.emit({ kind: 'cloned', agent: b, from: a });
    return new Layer(this, b);
  }

  /**
   * An empty layer `to` that hides what `like`'s hides (its mask follows `like`'s, as a copy's
   * does): where work meant for `like` is done first, so that a refusal halfway leaves `like` as
   * it was (moveLayer then hands it over). LAYER_EXISTS if `to` has a layer.
   */
  async createScratchLayer(like: string, to: string): Promise<Layer> {
    const a = checkAgent(like);
    const b = checkAgent(to);
    await this.call(`create the layer of ${b}`, (n) => n.createLayer(b), ERRNOS.cloneLayer(b));
    this.scratch.add(b);
    this.masks.copied(a, b);
    if (this.masks.of(b).globs.length) await this.applyMask(b);
    this.known.add(b);
    this.emit({ kind: 'created', agent: b });
    return new Layer(this, b);
  }

  /**
   * Gives `to`'s layer every change of `from`'s in place of its own, in one step for every mount
   * and view that shows it (as activate is); `from`'s is left empty. Heard as a reset of both,
   * then as `to`'s changes written (`paths`, what the caller knows it holds).
   */
  async moveLayer(from: string, to: string, paths: readonly string[] = []): Promise<void> {
    const a = checkAgent(from);
    const b = checkAgent(to);
    await this.call(`give the changes of ${a} to ${b}`, (n) => n.moveLayer(a, b));
    this.emit({ kind: 'reset', agent: a });
    this.emit({ kind: 'reset', agent: b });
    for (const p of paths) this.emit({ kind: 'written', agent: b, path: p });
  }

  /**
   * Masks paths for an agent (or, with agent null, for every agent without a mask of its own):
   * under `globs` (native/core/mask.h: as in .gitignore) the folder's objects do not exist for
   * it, through the mount while its layer is shown, in its views and runs, in the file tools and
   * in its changes; it cannot create them either. The developer's folder, and the shared mount
   * while no layer is shown, are untouched. `globs` null: the agent's own mask goes (the
   * default applies again), or the default goes. Takes effect at once, in mounts already
   * showing the layer too. Returns what is now in force for `agent` (for null: the default).
   */
  async setMask(agentId: string | null, globs: string[] | null): Promise<MaskInfo> {
    const id = agentId === null ? null : checkAgent(agentId);
    const list = globs === null ? null : checkGlobs(globs);
    this.masks.set(id, list);
    const layers = await this.agents();
    for (const a of layers) if (id === null || a === id || this.masks.of(a).source === 'inherited') await this.applyMask(a);
    return id === null ? { globs: this.masks.defaultMask, source: this.masks.defaultMask.length ? 'default' : 'none' } : this.masks.of(id);
  }

  /**
   * The limits of every layer's audit trail (docs/audit-trail.md), now and for layers made
   * later: past either, the oldest entries are dropped (and counted).
   */
  async setAuditLimits(limits: { maxEntries: number; maxBytes: number }): Promise<void> {
    for (const [k, v] of Object.entries(limits))
      if (!Number.isInteger(v) || v < 1 || v > Number.MAX_SAFE_INTEGER)
        throw new ShadowError('INVALID_ARGUMENT', `${k} must be a whole number, 1 or more`);
    await this.call('set the audit trail limits', (n) => n.setAuditLimits(limits.maxEntries, limits.maxBytes));
  }

  /** The mask in force for an agent, and where it comes from (its own, the default, ...). */
  maskOf(agentId: string): MaskInfo {
    return this.masks.of(checkAgent(agentId));
  }

  /** The shadow's default mask (empty: none). */
  get defaultMask(): string[] {
    return this.masks.defaultMask;
  }

  /** @internal the masks to save (the daemon's state file), and to give back after a crash, before any layer exists. */
  get maskState(): MaskState {
    return this.masks.state();
  }
  set maskState(s: MaskState) {
    this.masks.load(s);
  }

  private async applyMask(id: string): Promise<void> {
    const globs = this.masks.of(id).globs;
    await this.call(`mask paths of ${id}`, (n) => n.setMask(id, globs));
  }

  /** Agent ids that have a layer. */
  async agents(): Promise<string[]> {
    return this.call('list layers', (n) => n.layers());
  }

  /** Drops an agent's layer and all its changes. Refused (LAYER_BUSY) while it is active or has a view. */
  async dropLayer(agentId: string): Promise<void> {
    const id = checkAgent(agentId);
    try {
      await this.call(`drop the layer of ${id}`, (n) => n.dropLayer(id), ERRNOS.dropLayer(id));
    } finally {
      this.known.delete(id);
      this.scratch.delete(id);
      this.masks.dropped(id);
    }
    // A pinned layer that is gone leaves the folder pinned (a new layer of the same name later is
    // not the one you chose to look at).
    if (this.pinnedTo === id) this.pinnedTo = null;
    this.emit({ kind: 'dropped', agent: id });
  }

  /**
   * Makes `agentId`'s layer the one the shared mount shows (null: the folder exactly). Waits for
   * file-system calls in flight; when it returns, no program sees the previous layer any more.
   * `ms` is the time the switch itself took (on the native worker thread).
   */
  async activate(agentId: string | null): Promise<{ paths: number; epoch: boolean; ms: number }> {
    const id = agentId === null ? null : checkAgent(agentId);
    const r = await this.call(`activate ${id ?? 'no layer'}`, (n) => n.activate(id));
    if (id !== null) {
      this.known.add(id);
      this.emit({ kind: 'activated', agent: id });
    }
    return r;
  }

  private activeLayer(): Layer {
    if (!this.native || !this.native.mounted)
      throw new ShadowError('NOT_MOUNTED', `the shadow at ${this.mountPoint} is not mounted any more`);
    const a = this.native.active;
    if (a === null)
      throw new ShadowError('NO_ACTIVE_LAYER', 'no layer is active on this shadow; activate one with shadow.activate(agentId)');
    return new Layer(this, a);
  }

  /** Writes a whole file into the active layer (parents are created as needed). */
  async write(relPath: string, data: string | Uint8Array, options: { mode?: number } = {}): Promise<void> {
    return this.activeLayer().write(relPath, data, options);
  }

  /** Removes a file or a whole directory from the active layer's view (the folder itself is untouched). */
  async remove(relPath: string): Promise<void> {
    return this.activeLayer().remove(relPath);
  }

  /** Drops every change of the active layer. */
  async reset(): Promise<void> {
    return this.activeLayer().reset();
  }

  /** What the active layer changed, relative to the folder, in path order. */
  async changes(): Promise<Change[]> {
    return this.activeLayer().changes();
  }

  /**
   * The folder paths are about to be changed on purpose (an apply): what any layer reads from
   * there because its agent moved or renamed it (a change's `origin`) becomes the layer's own
   * copy first, so no agent's work changes or disappears with the folder's; and until `release`
   * is called, a move of those paths in any layer takes its copy at once (an agent may move one
   * while the apply runs). Resolves to each entry that took a copy.
   */
  async keepMoved(paths: string[]): Promise<{ kept: Array<{ layer: string; path: string }>; release: () => void }> {
    if (!paths.length) return { kept: [], release: () => undefined };
    const r = await this.call('keep what agents moved before the folder changes', (n) => n.keepMoved(paths));
    let released = false;
    return {
      kept: r.kept,
      release: () => {
        if (released) return;
        released = true;
        this.native?.releaseMoved(r.hold);
      },
    };
  }

  /** The time-slicing queue of the shared mount as it is now: who holds it, who waits behind whom. */
  schedulerStats(): SchedulerStats {
    const scheduler = this.scheduler.snapshot();
    for (const [queue, shown] of [
      [FOLDER_QUEUE, '(folder)'],
      [PIN_QUEUE, '(pin)'],
    ] as const) {
      if (scheduler.agents[queue]) {
        scheduler.agents[shown] = scheduler.agents[queue];
        delete scheduler.agents[queue];
      }
      if (scheduler.running === queue) scheduler.running = shown;
      for (const w of scheduler.waiting) {
        if (w.agent === queue) w.agent = shown;
        if (w.waitingFor === queue) w.waitingFor = shown;
      }
    }
    return scheduler;
  }

  /** Memory and spill per layer, the process's memory budget (shared by every shadow), and the time-slicing queue. */
  async stats(): Promise<{ layers: Record<string, LayerStats>; budget: MemoryBudgetStats; scheduler: SchedulerStats }> {
    const scheduler = this.schedulerStats(); // as it is when asked
    const layers: Record<string, LayerStats> = {};
    const agents = await this.agents();
    const all = await Promise.all(
      agents.map((a) => this.call(`read the stats of ${a}`, (n) => n.stats(a)).catch((err: unknown) => ({ err }))),
    );
    // A layer dropped between the two questions is left out.
    agents.forEach((a, i) => {
      if (!('err' in all[i])) layers[a] = all[i] as LayerStats;
    });
    return { layers, budget: memoryBudgetStats(), scheduler };
  }

  /**
   * Runs `job` while `agentId`'s layer is active on the shared mount. Jobs of different agents
   * never overlap; agents are served round robin. `job` gets the mount point and an AbortSignal
   * that fires on timeout or cancellation (the shadow is released at once either way).
   */
  withLayer<T>(
    agentId: string,
    job: (dir: string, signal: AbortSignal) => Promise<T>,
    options: JobOptions & {
      /** Activate this layer instead of the agent's own (a scratch copy), still queued as the agent. */ layer?: string;
    } = {},
  ): Promise<T> {
    let id: string;
    let target: string;
    try {
      id = checkAgent(agentId);
      target = options.layer === undefined ? id : checkAgent(options.layer);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.afterJob(
      this.scheduler.run(
        id,
        async (signal) => {
          if (this.active !== target) {
            await this.ensureLayer(target);
            await this.activate(target);
          }
          return job(this.mountPoint, signal);
        },
        named(options),
      ),
    );
  }

  /**
   * Runs `job` while no layer is active: the shared mount shows the folder itself, read-only
   * (what the lints service checks a baseline on). Queued with the agents' jobs.
   */
  withFolder<T>(job: (dir: string, signal: AbortSignal) => Promise<T>, options: JobOptions = {}): Promise<T> {
    return this.afterJob(
      this.scheduler.run(
        FOLDER_QUEUE,
        async (signal) => {
          if (this.active !== null) await this.activate(null);
          return job(this.mountPoint, signal);
        },
        named(options),
      ),
    );
  }

  /** `done`, once it settles, brings the shared mount back to the pinned choice (pin). */
  private afterJob<T>(done: Promise<T>): Promise<T> {
    return done.finally(() => this.backToPin());
  }

  /**
   * Runs `job` as `agentId`: in its open view if it has one, else queued on the shared mount with
   * its layer active; with `discardWrites`, on a scratch copy of its layer dropped afterwards (see
   * ./run-as). The layer is created if needed.
   */
  runAs<T>(agentId: string, job: RunAsJob<T>, options: RunAsOptions = {}): Promise<T> {
    return runAs(this, agentId, job, options);
  }

  /** The open view of `agentId`'s layer, if it has one. */
  viewOf(agentId: string): View | undefined {
    return [...this.views].find((v) => v.agentId === agentId && v.open);
  }

  /** Mounts a second mount point that always shows `agentId`'s layer, for agents that must run at the same time as others. */
  async openView(agentId: string, options: { mountPoint?: string; volume?: WindowsVolume } = {}): Promise<View> {
    const id = checkAgent(agentId);
    await this.ensureLayer(id);
    const name = `${path.basename(this.folder) || 'root'}-${id}`;
    // A view is a WinFsp volume of its own, with its own network name when it is a network one.
    const prefix = volumeFor(this.backend, options.mountPoint, options.volume) === 'network' ? networkPrefix(name) : undefined;
    const { mountPoint, created } = prepareMountPoint(options.mountPoint, this.folder, name);
    let viewId: number;
    try {
      viewId = await this.call(`open a view of ${id}`, (n) => (prefix ? n.openView(id, mountPoint, prefix) : n.openView(id, mountPoint)));
    } catch (err) {
      if (created) {
        try {
          fs.rmdirSync(mountPoint);
        } catch {
          // leave it
        }
      }
      throw err;
    }
    const v = new View(this, viewId, id, mountPoint, created);
    this.views.add(v);
    return v;
  }

  /** File-system requests served so far (all mounts of this shadow), for idle detection. */
  activity(): number {
    return this.native?.activity() ?? 0;
  }

  /**
   * Handles programs hold open on the shared mount and its views (winfsp: opens not yet closed, an image section
   * counting as one); null where the backend does not count them (the FUSE backends, where a plain unmount is refused
   * with EBUSY instead), 0 while unmounted.
   */
  openHandles(): number | null {
    return this.native?.openHandles?.() ?? (this.native ? null : 0);
  }

  /**
   * The shared mount's FUSE requests by kind since it was mounted: on fuse_ll `lookup`, `getattr`, `setattr`, `open`,
   * `create`, `mknod`, `release`, `flush`, `read`, `write`, `opendir`, `readdir`, `readdirplus`, `releasedir`,
   * `getxattr`, `forget`, and `ring`: how many requests of any kind came through io_uring ring entries (0 when
   * `kernelTransport().ioUring` is false), and `read_spliced`: how many READ replies were spliced from a file
   * rather than copied (native/fuse_ll/splice_reply.h); on fuse_hl the high-level API's kinds (`getattr`, which stands for the
   * kernel's LOOKUPs too, `open`, `read`, `write`, `create`, `release`, `opendir`, `readdir`, `getxattr` and the other
   * operations by name); empty on a backend that does not count them. For measuring round trips (tests, benchmarks).
   */
  requestCounts(): Record<string, number> {
    return this.native?.requestCounts() ?? {};
  }

  /**
   * What the shared mount's kernel connection agreed to, by feature: fuse_ll reports noOpen/noOpendir (opens without a
   * round trip, MountOptions.io "cached" on a kernel that offers it), readdirplus, epoch (one notification invalidates
   * every name on a switch; known after the first switch), passthrough (MountOptions.io "passthrough", agreed and not refused since) and ioUring (the
   * kernel hands requests to io_uring ring entries instead of /dev/fuse: MountOptions.ioUring). Empty for fuse_hl.
   * The kernel transport, not the daemon's endpoint (docs/glossary.md).
   */
  kernelTransport(): Record<string, boolean> {
    return this.native?.transport() ?? {};
  }

  /** @deprecated The former name of kernelTransport; use kernelTransport. */
  transport(): Record<string, boolean> {
    return this.kernelTransport();
  }

  /**
   * @internal The folder changes the shared mount's own watcher saw after `since` (see
   * NativeShadow.folderChanges); null when its backend has none (use FolderChanges, which falls
   * back to a watcher of its own).
   */
  folderChanges(since: number): NativeFolderChanges | null {
    return this.native?.folderChanges(since) ?? null;
  }

  /** True while unmounted by suspend(): the layers are kept and resume() mounts again. */
  get suspended(): boolean {
    return this.native !== undefined && !this.native.mounted;
  }

  /**
   * Unmounts the shared mount (and closes the views) but keeps every layer in memory, for a
   * shadow nobody uses; resume() mounts it again at the same place.
   */
  async suspend(options: { lazy?: boolean } = {}): Promise<void> {
    const native = this.native;
    if (!native || !native.mounted) return;
    try {
      await native.unmount(options.lazy === true);
    } catch (err) {
      throw fromNative(err, `suspend ${this.mountPoint}`, ERRNOS.suspend(this.mountPoint));
    }
    for (const v of this.views) await v.close().catch(() => undefined);
    this.views.clear();
  }

  async resume(): Promise<void> {
    const native = this.native;
    if (!native) throw new ShadowError('NOT_MOUNTED', `the shadow at ${this.mountPoint} was unmounted for good`);
    if (native.mounted) return;
    // Linux mounts on a directory that exists; WinFsp makes its own (see the platform modules).
    platform.remakeMountPoint(this.mountPoint);
    try {
      await native.remount(this.mountPoint);
    } catch (err) {
      throw fromNative(err, `cannot mount the shadow at ${this.mountPoint} again`, ERRNOS.mount);
    }
    this.goneReason = undefined;
  }

  /**
   * Unmounts the views and the shared mount. Fails with MOUNT_BUSY while programs use them
   * unless `lazy` is set, which detaches them at once and ends them when the last program lets go.
   */
  async unmount(options: { lazy?: boolean } = {}): Promise<void> {
    if (!this.native) return;
    const native = this.native;
    try {
      // Files closed by a process that just died are let go a few milliseconds later (the kernel
      // may finish the close on a worker thread), and until then the mount is busy: measured
      // 10-30 ms after language servers were killed. A short retry tells that apart from a
      // program that really still uses the shadow.
      for (let attempt = 0; ; attempt++) {
        try {
          await native.unmount(options.lazy === true, true);
          break;
        } catch (err) {
          if ((err as { code?: string }).code !== 'EBUSY' || attempt >= 10) throw err;
          await new Promise((r) => setTimeout(r, 25));
        }
      }
    } catch (err) {
      throw fromNative(err, `unmount ${this.mountPoint}`, ERRNOS.unmount(this.mountPoint));
    }
    this.native = undefined;
    for (const v of this.views) await v.close().catch(() => undefined);
    if (this.createdMountPoint) {
      try {
        fs.rmdirSync(this.mountPoint);
      } catch {
        // Still in use after a lazy unmount, or the user put something there: leave it.
      }
    }
  }
}
