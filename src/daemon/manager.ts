// The daemon's shadows: mounted by name, found by name or mount point, suspended when idle
// (unmounted, layers kept; the next request mounts them again), and written to a state file so
// that a daemon started after a crash can find and clean the mounts its predecessor left (state.ts).
import * as fs from 'fs';
import * as path from 'path';
import type { Logger } from 'winston';
import { ShadowError } from '../common/errors';
import { unanswered } from '../platform';
import type { NotificationName, NotificationParamsOf, ShadowInfo } from '../protocol/methods';
import { LintsService } from '../lints/service';
import { mount, Shadow } from '../shadow';
import type { GoneEvent, IoMode, MaskState, WindowsVolume } from '../shadow';
import { unionMasks } from '../shadow/mask';
import type { Overlap } from '../work/radar';
import { radarDelta } from './radar-wire';
import { CheckpointStore } from '../work/checkpoints';
import { AUTOSAVE_NAME, WorkService } from '../work/service';
import { auditLimitsOf } from '../shadow/audit';
import { readState, recoverStale, type ShadowEntry, type StateFile, whyNotRemount, writeState } from './state';

interface Entry {
  name: string;
  shadow: Shadow;
  /** Its language servers, started on the first lints/lsp request. */
  lints?: LintsService;
  /** Diffs, apply, checkpoints and autosave. */
  work: WorkService;
  lastUsed: number;
  lastActivity: number;
  /** The change feed's poll of this shadow in progress (one at a time: it keeps what it saw last). */
  feeding?: Promise<void>;
}

const NAME_RE = /^[A-Za-z0-9._-]{1,64}$/;

export interface ManagerOptions {
  statePath: string;
  /** Unmount (keeping layers) a shadow nobody used for this long. */
  idleMs: number;
  log: Logger;
  /** Save every changed layer as its "autosave" checkpoint this often (0: never). */
  autosaveMs?: number;
  notify: <N extends NotificationName>(method: N, params: NotificationParamsOf<N>) => void;
  /** Whether a shadow is in use beyond what its activity shows (runs in progress): never idle then. */
  busy?: (shadow: Shadow) => boolean;
}

export class ShadowManager {
  private readonly entries = new Map<string, Entry>();
  /** Per folder, the masks last kept beside its autosaves (saveState), as JSON. */
  private readonly keptMasks = new Map<string, string>();
  private idleTimer: NodeJS.Timeout | undefined;
  private feedTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: ManagerOptions) {}

  get size(): number {
    return this.entries.size;
  }

  /** Every shadow served, with its name. */
  all(): { name: string; shadow: Shadow }[] {
    return [...this.entries.values()].map((e) => ({ name: e.name, shadow: e.shadow }));
  }

  /**
   * Mount points recoverStale proved were stale mounts of the previous daemon and unmounted:
   * the only recorded mount points remountAfterCrash mounts at again.
   */
  private static proven = new Set<string>();

  /** Unmounts what a crashed daemon left behind (recoverStale in state.ts); returns the mounts it cleaned. */
  static async recoverStale(state: StateFile | undefined, log: Logger): Promise<string[]> {
    ShadowManager.proven = new Set();
    return recoverStale(state, log, ShadowManager.proven);
  }

  /** The state file a previous daemon left, if any, every entry checked for shape (readState in state.ts). */
  static readState(statePath: string, log?: Logger): StateFile | undefined {
    return readState(statePath, log);
  }

  /**
   * Mounts again, under their names, the shadows a crashed daemon served (after recoverStale
   * cleaned their mounts); mount() brings their layers back from autosave. Each entry passes what
   * a normal mount checks (mount() runs those checks again), and more, for the state file may be
   * forged: its folder must be an existing directory named by its real path, and not the root
   * of the file system; it goes back to the mount point the user had given only when
   * recoverStale proved a stale mount of this folder was there (else to a new one in the
   * daemon's own mounts directory). A refused entry, or a mount that fails, is logged and left out.
   */
  async remountAfterCrash(state: StateFile | undefined, done: (name: string) => void = () => undefined): Promise<string[]> {
    const back: string[] = [];
    for (const s of state?.shadows ?? []) {
      try {
        if (await this.remountOne(s)) back.push(s.name);
      } finally {
        done(s.name);
      }
    }
    return back;
  }

  /** remountAfterCrash for one entry: whether it is mounted again. */
  private async remountOne(s: ShadowEntry): Promise<boolean> {
    if (this.entries.has(s.name)) return false;
    const why = await whyNotRemount(s.folder);
    if (why) {
      this.opts.log.warn(`refused to mount again a shadow the state file names: ${why}`, { name: s.name, folder: s.folder });
      return false;
    }
    try {
      const atRecorded = s.createdMountPoint !== true && ShadowManager.proven.has(s.mountPoint);
      if (s.createdMountPoint !== true && !atRecorded)
        this.opts.log.warn('mounting again in a new mount point: no stale mount of this shadow was found at the recorded one', {
          name: s.name,
          mountPoint: s.mountPoint,
        });
      const info = await this.mount({
        folder: s.folder,
        name: s.name,
        ...(atRecorded ? { mountPoint: s.mountPoint } : {}),
        ...(s.backend !== undefined ? { backend: s.backend } : {}),
        ...(s.io !== undefined ? { io: s.io } : {}),
        ...(s.protectGit === false ? { protectGit: false } : {}),
        ...(s.masks !== undefined ? { masks: s.masks } : {}),
      });
      // The shared mount shows again what it showed: the agent whose layer came back, or the folder.
      const wanted = s.active;
      if (wanted !== undefined && wanted !== info.active && (wanted === null || info.agents.includes(wanted))) {
        await this.entries.get(s.name)?.shadow.activate(wanted);
        this.saveState();
      }
      this.opts.log.warn('mounted again after a crash of the previous daemon', { name: s.name, folder: s.folder });
      return true;
    } catch (err) {
      this.opts.log.error('could not mount again after a crash', { name: s.name, folder: s.folder, error: (err as Error).message });
      return false;
    }
  }

  /** Watches every mounted shadow's layers and notifies "layer/changed" (event "changed") about once a second, coalesced. */
  startChangeFeed(intervalMs = 1000, wanted: () => boolean = () => true): void {
    let busy = false;
    this.feedTimer = setInterval(() => {
      if (busy || !wanted()) return;
      busy = true;
      void (async () => {
        for (const e of this.entries.values()) await this.feed(e);
      })().finally(() => (busy = false));
    }, intervalMs);
    this.feedTimer.unref();
  }

  /** One poll of the change feed for one shadow (joins one in progress): notifies what it saw and tells the radar. */
  private feed(e: Entry): Promise<void> {
    e.feeding ??= (async () => {
      try {
        for (const a of await e.work.pollChanges())
          this.opts.notify('layer/changed', { shadow: e.name, agent: a.agent, event: 'changed', changes: a.changes });
      } catch (err) {
        this.opts.log.debug('change feed', { name: e.name, error: (err as Error).message });
      } finally {
        e.feeding = undefined;
      }
    })();
    return e.feeding;
  }

  /**
   * The radar's overlaps of a shadow (those naming `agent` when given), after the change feed has
   * looked at the layers once more (writes through the mount reach the radar only through it).
   */
  async radar(nameOrDir: string, agent?: string): Promise<{ shadow: string; overlaps: Overlap[] }> {
    const e = this.get(nameOrDir);
    await this.use(e);
    await this.feed(e);
    return { shadow: e.name, overlaps: await e.work.radar.list(agent) };
  }

  startIdleChecks(intervalMs: number): void {
    this.idleTimer = setInterval(() => void this.idleTick(), intervalMs);
    this.idleTimer.unref();
  }

  async mount(params: {
    folder: string;
    mountPoint?: string;
    name?: string;
    cacheTimeout?: number;
    backend?: string;
    io?: IoMode;
    allowOther?: boolean;
    /** Refuse layer writes to git's control files (MountOptions.protectGit; default true). */
    protectGit?: boolean;
    /** Windows, winfsp: the volume form (see MountOptions.volume). */
    volume?: WindowsVolume;
    /** Bring back agents' layers from their autosave checkpoints for this folder (default true). */
    restore?: boolean;
    /** Masked paths to start with (a crashed daemon's, from its state file), before any layer comes back. */
    masks?: MaskState;
  }): Promise<ShadowInfo> {
    if (params.name !== undefined && !NAME_RE.test(params.name)) {
      throw new ShadowError(
        'INVALID_ARGUMENT',
        `a shadow name is 1-64 letters, digits, ".", "_" or "-"; got ${JSON.stringify(params.name)}`,
      );
    }
    if (params.name !== undefined && this.entries.has(params.name)) {
      throw new ShadowError('MOUNTPOINT_IN_USE', `a shadow named ${params.name} exists already; pick another --name`);
    }
    // The checks below run on the daemon's own thread: a path on a hung FUSE or network server
    // must prove it answers first, in a child with a time limit.
    for (const p of [params.folder, params.mountPoint]) {
      const stuck = p === undefined ? undefined : await unanswered(p);
      if (stuck) throw new ShadowError('TIMEOUT', `cannot mount: ${stuck}`);
    }
    const shadow = await mount(params.folder, {
      mountPoint: params.mountPoint,
      cacheTimeout: params.cacheTimeout,
      backend: params.backend,
      ...(params.io ? { io: params.io } : {}),
      ...(params.volume ? { volume: params.volume } : {}),
      allowOther: params.allowOther === true,
      protectGit: params.protectGit !== false,
    });
    try {
      // A crashed daemon's masks (its state file), else those kept beside the folder's autosaves
      // by the last daemon that showed it, before any layer comes back from them.
      // (Read with restore false too: the autosaves stay on disk, and a later mount that brings
      // them back must find their masks.)
      const masks = params.masks ?? new CheckpointStore(shadow.folder).loadMasks();
      if (masks) shadow.maskState = masks;
    } catch (err) {
      // A forged or damaged entry: no layer exists yet, so refusing the shadow loses nothing.
      await shadow.unmount({ lazy: true });
      throw err;
    }
    const limits = auditLimitsOf(process.env);
    if (limits) await shadow.setAuditLimits(limits);
    const name = params.name ?? this.freeName(path.basename(shadow.folder));
    const now = Date.now();
    const work = new WorkService(shadow, {
      autosaveMs: this.opts.autosaveMs,
      log: (line) => this.opts.log.warn(line, { shadow: name }),
      neighbours: () => [...this.entries.values()].map((e) => e.shadow),
    });
    const entry: Entry = { name, shadow, work, lastUsed: now, lastActivity: shadow.activity() };
    this.entries.set(name, entry);
    work.radar.onChange((d) => {
      if (this.entries.get(name) === entry) this.opts.notify('radar/changed', { shadow: name, ...radarDelta(d) });
    });
    shadow.onGone((e) => {
      this.lost(entry, e).catch((err: unknown) =>
        this.opts.log.error('handling a lost mount failed', { name, error: (err as Error).message }),
      );
    });
    this.saveState();
    // Layers a crash (or a reboot) took away come back from their autosave checkpoints.
    const restored: string[] = [];
    if (params.restore !== false) {
      for (const agent of work.store.agents()) {
        try {
          await work.restore(agent, AUTOSAVE_NAME);
          restored.push(agent);
        } catch (err) {
          // No autosave is no error; a damaged (or forged) one is refused whole and said so.
          if ((err as { code?: string }).code === 'UNKNOWN_CHECKPOINT') continue;
          this.opts.log.error('could not restore a layer from its autosave', { name, agent, error: (err as Error).message });
        }
      }
    }
    this.opts.log.info('mounted', { name, folder: shadow.folder, mountPoint: shadow.mountPoint, ...(restored.length ? { restored } : {}) });
    this.opts.notify('shadow/changed', { shadow: name, event: 'mounted' });
    return { ...(await this.info(entry)), ...(restored.length ? { restored } : {}) };
  }

  /**
   * Finds a shadow by name, by (a path inside) its mount point, or by (a path inside) its folder
   * when one shadow shows that folder. Paths are absolute: a relative one would be resolved where
   * the daemon stands, not where the caller does (the CLI makes its paths absolute).
   */
  get(nameOrDir: string): Entry {
    const byName = this.entries.get(nameOrDir);
    if (byName) return byName;
    if (path.isAbsolute(nameOrDir)) {
      const abs = path.resolve(nameOrDir);
      const under = (dir: string, root: string): boolean =>
        dir === root || dir.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
      for (const e of this.entries.values()) if (under(abs, e.shadow.mountPoint)) return e;
      let real = abs;
      try {
        real = fs.realpathSync(abs);
      } catch {
        // not there (any more): compared as given
      }
      const showing = [...this.entries.values()].filter((e) => under(real, e.shadow.folder));
      if (showing.length === 1) return showing[0];
      if (showing.length > 1)
        throw new ShadowError(
          'UNKNOWN_SHADOW',
          `${showing.length} shadows show the folder of ${JSON.stringify(nameOrDir)} (${showing.map((e) => e.name).join(', ')}): name one`,
        );
    }
    throw new ShadowError('UNKNOWN_SHADOW', `no shadow named, mounted at or showing ${JSON.stringify(nameOrDir)}; see "shadowfs list"`);
  }

  /** Marks a shadow used, mounting it again if it was suspended for being idle. */
  async use(entry: Entry): Promise<Shadow> {
    entry.lastUsed = Date.now();
    if (entry.shadow.suspended) {
      await entry.shadow.resume();
      this.opts.log.info('mounted again after idling', { name: entry.name });
      this.opts.notify('shadow/changed', { shadow: entry.name, event: 'remounted' });
    }
    return entry.shadow;
  }

  /** The shadow's lints service (its language servers), mounting it again if idle. */
  async lints(nameOrDir: string): Promise<LintsService> {
    const e = this.get(nameOrDir);
    await this.use(e);
    e.lints ??= new LintsService(e.shadow, {
      // The servers' stderr and window/logMessage lines, tagged with the shadow.
      log: (line) => this.opts.log.debug(line, { shadow: e.name }),
    });
    return e.lints;
  }

  /** The shadow's diffs, apply and checkpoints, mounting it again if idle. */
  async work(nameOrDir: string): Promise<WorkService> {
    const e = this.get(nameOrDir);
    await this.use(e);
    return e.work;
  }

  /**
   * A mount of the shadow ended without the daemon asking (the WinFsp dispatcher stopped: the volume or the driver went
   * away; a kernel connection ended). The shadow is treated as gone away, not as dropped: its layers stay in memory
   * (and in their autosaves), the shared mount reads as not mounted with the reason (info().lost), its language servers
   * (which ran in a mount that is no more) are stopped, the state file forgets its views, and every client is told
   * ("shadow/changed", event "lost"). The next request that uses it mounts it again, as after an idle unmount.
   */
  private async lost(entry: Entry, e: GoneEvent): Promise<void> {
    if (this.entries.get(entry.name) !== entry) return; // unmounted for good meanwhile
    this.opts.log.warn(e.view ? 'a view of the shadow went away' : 'the shadow went away', {
      name: entry.name,
      reason: e.reason,
      ...(e.view ? { view: e.view } : {}),
    });
    if (!e.view) await this.stopServers(entry);
    this.saveState();
    this.opts.notify('shadow/changed', { shadow: entry.name, event: 'lost', reason: e.reason, ...(e.view ? { view: e.view } : {}) });
  }

  /** Stops a shadow's language servers (before its mount goes away). */
  private async stopServers(e: Entry): Promise<void> {
    const d = e.lints;
    e.lints = undefined;
    await d
      ?.dispose()
      .catch((err: unknown) => this.opts.log.warn('stopping language servers failed', { name: e.name, error: (err as Error).message }));
  }

  async unmount(nameOrDir: string, lazy: boolean): Promise<string> {
    const e = this.get(nameOrDir);
    await this.stopServers(e);
    const agents = e.shadow.mounted ? await e.shadow.agents().catch(() => []) : [];
    await e.shadow.unmount({ lazy });
    // Unmounting drops the layers on purpose: their autosaves must not bring them back.
    await e.work.dispose(false);
    // Another shadow of the same folder shares its autosaves and masks.json (they are per folder
    // and agent): its agents' autosaves stay, and the masks are written again for it (saveState).
    const others = [...this.entries.values()].filter((x) => x !== e && x.shadow.folder === e.shadow.folder);
    // (One unmounted while idle cannot list its layers: then every autosave stays.)
    const kept = new Set<string>();
    let keepAll = false;
    for (const x of others) {
      if (!x.shadow.mounted) keepAll = true;
      else for (const a of await x.shadow.agents().catch(() => [])) kept.add(a);
    }
    if (!keepAll) for (const a of new Set([...agents, ...e.work.store.agents()])) if (!kept.has(a)) e.work.store.remove(a, AUTOSAVE_NAME);
    if (others.length === 0) e.work.store.saveMasks({});
    this.keptMasks.delete(e.shadow.folder);
    this.entries.delete(e.name);
    this.saveState();
    this.opts.log.info('unmounted', { name: e.name, lazy });
    this.opts.notify('shadow/changed', { shadow: e.name, event: 'unmounted' });
    return e.name;
  }

  async list(): Promise<ShadowInfo[]> {
    return Promise.all([...this.entries.values()].map((e) => this.info(e)));
  }

  async info(e: Entry): Promise<ShadowInfo> {
    const mounted = e.shadow.mounted;
    // A shadow unmounted meanwhile (idle) simply lists no agents.
    const agents = mounted ? await e.shadow.agents().catch(() => []) : [];
    const lost = e.shadow.lost;
    const handles = e.shadow.openHandles();
    return {
      name: e.name,
      folder: e.shadow.folder,
      lower: e.shadow.folder, // folder's former name, sent through protocol 2
      mountPoint: e.shadow.mountPoint,
      backend: e.shadow.backend,
      io: e.shadow.io,
      protectGit: e.shadow.protectGit,
      protectedPaths: [...e.shadow.protectedPaths],
      ...(e.shadow.volume ? { volume: e.shadow.volume } : {}),
      ...(lost !== undefined ? { lost } : {}),
      ...(mounted ? { transport: e.shadow.kernelTransport() } : {}),
      mounted,
      active: mounted ? e.shadow.active : null,
      agents,
      views: [...e.shadow.views].map((v) => ({ id: v.viewId, agent: v.agentId, mountPoint: v.mountPoint })),
      idleSeconds: Math.round((Date.now() - e.lastUsed) / 1000),
      ...(handles !== null && mounted ? { openHandles: handles } : {}),
    };
  }

  /** Unmounts everything (lazily: the daemon is going away). */
  async shutdown(): Promise<void> {
    clearInterval(this.idleTimer);
    clearInterval(this.feedTimer);
    for (const e of this.entries.values()) {
      await this.stopServers(e);
      // The layers go with this daemon: their last state is saved for the next mount.
      await e.work.dispose(true);
      try {
        await e.shadow.unmount({ lazy: true });
      } catch (err) {
        this.opts.log.error('unmount at shutdown failed', { name: e.name, error: (err as Error).message });
      }
    }
    this.entries.clear();
    this.saveState();
  }

  private async idleTick(): Promise<void> {
    const now = Date.now();
    for (const e of this.entries.values()) {
      if (!e.shadow.mounted) continue;
      const activity = e.shadow.activity();
      // A run in progress uses its shadow even while it is quiet (its namespace holds a copy), and
      // so does a program with a file open (counted by winfsp; FUSE refuses the unmount instead).
      if (activity !== e.lastActivity || this.opts.busy?.(e.shadow) || (e.shadow.openHandles() ?? 0) > 0) {
        e.lastActivity = activity;
        e.lastUsed = now;
        continue;
      }
      if (now - e.lastUsed < this.opts.idleMs || e.shadow.views.size > 0) continue;
      try {
        await this.stopServers(e);
        await e.shadow.suspend();
        this.saveState(); // its views are gone
        e.lastActivity = e.shadow.activity();
        this.opts.log.info('unmounted for being idle; layers kept', { name: e.name, idleSeconds: Math.round((now - e.lastUsed) / 1000) });
        this.opts.notify('shadow/changed', { shadow: e.name, event: 'idle-unmounted' });
      } catch (err) {
        // Busy means somebody uses it after all: try again later.
        e.lastUsed = now;
        this.opts.log.debug('idle unmount postponed', { name: e.name, error: (err as Error).message });
      }
    }
  }

  private freeName(base: string): string {
    const clean = base.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 56) || 'shadow';
    if (!this.entries.has(clean)) return clean;
    for (let i = 2; ; i++) if (!this.entries.has(`${clean}-${i}`)) return `${clean}-${i}`;
  }

  /** Writes the state file (call after anything a crash recovery must know about changed: mounts, views). */
  saveState(): void {
    const state: StateFile = {
      pid: process.pid,
      shadows: [...this.entries.values()].map((e) => ({
        name: e.name,
        folder: e.shadow.folder,
        mountPoint: e.shadow.mountPoint,
        createdMountPoint: e.shadow.ownsMountPoint,
        backend: e.shadow.backend,
        io: e.shadow.io,
        // Only the exception is kept: a state file without it protects, as a daemon before it did not.
        ...(e.shadow.protectGit ? {} : { protectGit: false }),
        views: [...e.shadow.views].map((v) => ({ mountPoint: v.mountPoint, createdMountPoint: v.ownsMountPoint })),
        ...(e.shadow.mounted ? { active: e.shadow.active } : {}),
        ...(Object.keys(e.shadow.maskState).length ? { masks: e.shadow.maskState } : {}),
      })),
    };
    writeState(this.opts.statePath, state);
    // The masks also go beside the folder's autosaves, which outlive this state (a stop, a reboot):
    // per folder, every shadow of it together.
    const byFolder = new Map<string, Entry[]>();
    for (const e of this.entries.values()) byFolder.set(e.shadow.folder, [...(byFolder.get(e.shadow.folder) ?? []), e]);
    for (const [folder, es] of byFolder) {
      const union = unionMasks(es.map((e) => e.shadow.maskState));
      const json = JSON.stringify(union);
      if (json === this.keptMasks.get(folder)) continue;
      try {
        es[0].work.store.saveMasks(union);
        this.keptMasks.set(folder, json);
      } catch (err) {
        this.opts.log.error('could not keep the masks beside the autosaves', { folder, error: (err as Error).message });
      }
    }
  }
}
