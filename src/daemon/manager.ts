// The daemon's shadows: mounted by name, found by name or mount point, suspended when idle
// (unmounted, layers kept; the next request mounts them again), and written to a state file so
// that a daemon started after a crash can find and clean the mounts its predecessor left.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import type { Logger } from 'winston';
import { ShadowError } from '../errors';
import { mountedPaths } from '../platform';
import type { NotificationName, NotificationParamsOf, ShadowInfo } from '../protocol/methods';
import { DiagnosticsService } from '../diagnostics/service';
import { mount, Shadow } from '../shadow';
import type { IoMode } from '../shadow';
import { AUTOSAVE_NAME, WorkService } from '../work/service';

interface Entry {
  name: string;
  shadow: Shadow;
  /** Its language servers, started on the first lints/lsp request. */
  diagnostics?: DiagnosticsService;
  /** Diffs, apply, checkpoints and autosave. */
  work: WorkService;
  lastUsed: number;
  lastActivity: number;
}

interface StateFile {
  pid: number;
  shadows: Array<{
    name: string;
    lower: string;
    mountPoint: string;
    /** The daemon made the mount point, so it removes it (when empty) with the mount. */
    createdMountPoint?: boolean;
    views?: Array<{ mountPoint: string; createdMountPoint: boolean }>;
    /** The agent the shared mount showed (null: the folder), so a crash does not change it. */
    active?: string | null;
    /** How it was mounted, so that a crash recovery mounts it the same way. */
    backend?: string;
    io?: IoMode;
  }>;
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
}

export class ShadowManager {
  private readonly entries = new Map<string, Entry>();
  private idleTimer: NodeJS.Timeout | undefined;
  private feedTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: ManagerOptions) {}

  get size(): number {
    return this.entries.size;
  }

  /**
   * Unmounts what a crashed daemon left behind, as its state file lists it (views first, then
   * the shared mount), and removes the mount directories it had made for them once they are
   * empty. Only mounts that are still in the mount table and are shadowfs mounts are touched;
   * the folders never are. Returns the mounts it cleaned.
   */
  static recoverStale(statePath: string, log: Logger): string[] {
    const state = ShadowManager.readState(statePath);
    if (!state) return [];
    const recovered: string[] = [];
    const mounted = mountedPaths();
    for (const s of state.shadows ?? []) {
      if (typeof s?.mountPoint !== 'string') continue;
      const points = [
        ...(Array.isArray(s.views) ? s.views : []).filter((v) => typeof v?.mountPoint === 'string'),
        { mountPoint: s.mountPoint, createdMountPoint: s.createdMountPoint === true },
      ];
      for (const p of points) {
        if (mounted.has(p.mountPoint) && isShadowfsMount(p.mountPoint)) {
          try {
            execFileSync('umount', ['-l', p.mountPoint], { stdio: 'ignore' });
          } catch {
            try {
              execFileSync('fusermount3', ['-uz', p.mountPoint], { stdio: 'ignore' });
            } catch (err) {
              log.warn('could not clean a stale mount', { mountPoint: p.mountPoint, error: (err as Error).message });
              continue;
            }
          }
          log.warn('cleaned a stale mount left by a crashed daemon', { name: s.name, mountPoint: p.mountPoint, lower: s.lower });
          recovered.push(p.mountPoint);
        }
        if (p.createdMountPoint === true && !mountedPaths().has(p.mountPoint)) {
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

  /** The state file a previous daemon left, if any. */
  static readState(statePath: string): StateFile | undefined {
    try {
      const st = JSON.parse(fs.readFileSync(statePath, 'utf8')) as StateFile;
      return st && Array.isArray(st.shadows) ? st : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Mounts again, under their names, the shadows a crashed daemon served (after recoverStale
   * cleaned their mounts); mount() brings their layers back from autosave. A folder that is
   * gone, or a mount that fails, is logged and left out.
   */
  async remountAfterCrash(state: StateFile | undefined): Promise<string[]> {
    const back: string[] = [];
    for (const s of state?.shadows ?? []) {
      if (typeof s?.lower !== 'string' || typeof s.name !== 'string' || this.entries.has(s.name)) continue;
      try {
        const mp = typeof s.mountPoint === 'string' && !mountedPaths().has(s.mountPoint) ? s.mountPoint : undefined;
        const info = await this.mount({
          folder: s.lower,
          name: s.name,
          ...(mp && s.createdMountPoint !== true ? { mountPoint: mp } : {}),
          ...(typeof s.backend === 'string' ? { backend: s.backend } : {}),
          ...(s.io === 'cached' || s.io === 'open' || s.io === 'passthrough' ? { io: s.io } : {}),
        });
        // The shared mount shows again what it showed: the agent whose layer came back, or the folder.
        const wanted = s.active;
        if (wanted !== undefined && wanted !== info.active && (wanted === null || info.agents.includes(wanted))) {
          await this.entries.get(s.name)?.shadow.activate(wanted);
          this.saveState();
        }
        back.push(s.name);
        this.opts.log.warn('mounted again after a crash of the previous daemon', { name: s.name, lower: s.lower });
      } catch (err) {
        this.opts.log.error('could not mount again after a crash', { name: s.name, lower: s.lower, error: (err as Error).message });
      }
    }
    return back;
  }

  /** Watches every mounted shadow's layers and notifies "layer/changed" (event "changed") about once a second, coalesced. */
  startChangeFeed(intervalMs = 1000, wanted: () => boolean = () => true): void {
    let busy = false;
    this.feedTimer = setInterval(() => {
      if (busy || !wanted()) return;
      busy = true;
      void (async () => {
        for (const e of this.entries.values()) {
          try {
            for (const a of await e.work.pollChanges())
              this.opts.notify('layer/changed', { shadow: e.name, agent: a.agent, event: 'changed', changes: a.changes });
          } catch (err) {
            this.opts.log.debug('change feed', { name: e.name, error: (err as Error).message });
          }
        }
      })().finally(() => (busy = false));
    }, intervalMs);
    this.feedTimer.unref();
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
    /** Bring back agents' layers from their autosave checkpoints for this folder (default true). */
    restore?: boolean;
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
    const shadow = await mount(params.folder, {
      mountPoint: params.mountPoint,
      cacheTimeout: params.cacheTimeout,
      backend: params.backend,
      ...(params.io ? { io: params.io } : {}),
      allowOther: params.allowOther === true,
    });
    const name = params.name ?? this.freeName(path.basename(shadow.lower));
    const now = Date.now();
    const work = new WorkService(shadow, {
      autosaveMs: this.opts.autosaveMs,
      log: (line) => this.opts.log.warn(line, { shadow: name }),
    });
    const entry: Entry = { name, shadow, work, lastUsed: now, lastActivity: shadow.activity() };
    this.entries.set(name, entry);
    this.saveState();
    // Layers a crash (or a reboot) took away come back from their autosave checkpoints.
    const restored: string[] = [];
    if (params.restore !== false) {
      for (const agent of work.store.agents()) {
        if (!work.store.list(agent).some((c) => c.name === AUTOSAVE_NAME)) continue;
        try {
          await work.restore(agent, AUTOSAVE_NAME);
          restored.push(agent);
        } catch (err) {
          this.opts.log.error('could not restore a layer from its autosave', { name, agent, error: (err as Error).message });
        }
      }
    }
    this.opts.log.info('mounted', { name, lower: shadow.lower, mountPoint: shadow.mountPoint, ...(restored.length ? { restored } : {}) });
    this.opts.notify('shadow/changed', { shadow: name, event: 'mounted' });
    return { ...(await this.info(entry)), ...(restored.length ? { restored } : {}) };
  }

  /** Finds a shadow by name or by (a path inside) its mount point. */
  get(nameOrDir: string): Entry {
    const byName = this.entries.get(nameOrDir);
    if (byName) return byName;
    const abs = path.resolve(nameOrDir);
    for (const e of this.entries.values()) {
      if (abs === e.shadow.mountPoint || abs.startsWith(`${e.shadow.mountPoint}/`)) return e;
    }
    throw new ShadowError('UNKNOWN_SHADOW', `no shadow named or mounted at ${JSON.stringify(nameOrDir)}; see "shadowfs list"`);
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

  /** The shadow's diagnostics service (its language servers), mounting it again if idle. */
  async diagnostics(nameOrDir: string): Promise<DiagnosticsService> {
    const e = this.get(nameOrDir);
    await this.use(e);
    e.diagnostics ??= new DiagnosticsService(e.shadow, {
      // The servers' stderr and window/logMessage lines, tagged with the shadow.
      log: (line) => this.opts.log.debug(line, { shadow: e.name }),
    });
    return e.diagnostics;
  }

  /** The shadow's diffs, apply and checkpoints, mounting it again if idle. */
  async work(nameOrDir: string): Promise<WorkService> {
    const e = this.get(nameOrDir);
    await this.use(e);
    return e.work;
  }

  /** Stops a shadow's language servers (before its mount goes away). */
  private async stopServers(e: Entry): Promise<void> {
    const d = e.diagnostics;
    e.diagnostics = undefined;
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
    for (const a of new Set([...agents, ...e.work.store.agents()])) e.work.store.remove(a, AUTOSAVE_NAME);
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
    return {
      name: e.name,
      lower: e.shadow.lower,
      mountPoint: e.shadow.mountPoint,
      backend: e.shadow.backend,
      io: e.shadow.io,
      ...(mounted ? { transport: e.shadow.transport() } : {}),
      mounted,
      active: mounted ? e.shadow.active : null,
      agents,
      views: [...e.shadow.views].map((v) => ({ id: v.viewId, agent: v.agentId, mountPoint: v.mountPoint })),
      idleSeconds: Math.round((Date.now() - e.lastUsed) / 1000),
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
      if (activity !== e.lastActivity) {
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
        lower: e.shadow.lower,
        mountPoint: e.shadow.mountPoint,
        createdMountPoint: e.shadow.ownsMountPoint,
        backend: e.shadow.backend,
        io: e.shadow.io,
        views: [...e.shadow.views].map((v) => ({ mountPoint: v.mountPoint, createdMountPoint: v.ownsMountPoint })),
        ...(e.shadow.mounted ? { active: e.shadow.active } : {}),
      })),
    };
    const tmp = `${this.opts.statePath}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(state, null, 2), { mode: 0o600 });
    fs.renameSync(tmp, this.opts.statePath);
  }
}

function isShadowfsMount(mountPoint: string): boolean {
  try {
    const lines = fs.readFileSync('/proc/self/mounts', 'utf8').split('\n');
    return lines.some((l) => {
      const f = l.split(' ');
      return f[1] === mountPoint.replace(/ /g, '\\040') && f[2] === 'fuse.shadowfs';
    });
  } catch {
    return false;
  }
}
