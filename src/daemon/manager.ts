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

interface Entry {
  name: string;
  shadow: Shadow;
  /** Its language servers, started on the first lints/lsp request. */
  diagnostics?: DiagnosticsService;
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
  }>;
}

const NAME_RE = /^[A-Za-z0-9._-]{1,64}$/;

export interface ManagerOptions {
  statePath: string;
  /** Unmount (keeping layers) a shadow nobody used for this long. */
  idleMs: number;
  log: Logger;
  notify: <N extends NotificationName>(method: N, params: NotificationParamsOf<N>) => void;
}

export class ShadowManager {
  private readonly entries = new Map<string, Entry>();
  private idleTimer: NodeJS.Timeout | undefined;

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
    let state: StateFile;
    try {
      state = JSON.parse(fs.readFileSync(statePath, 'utf8')) as StateFile;
    } catch {
      return [];
    }
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
    allowOther?: boolean;
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
      allowOther: params.allowOther === true,
    });
    const name = params.name ?? this.freeName(path.basename(shadow.lower));
    const now = Date.now();
    const entry: Entry = { name, shadow, lastUsed: now, lastActivity: shadow.activity() };
    this.entries.set(name, entry);
    this.saveState();
    this.opts.log.info('mounted', { name, lower: shadow.lower, mountPoint: shadow.mountPoint });
    this.opts.notify('shadow/changed', { shadow: name, event: 'mounted' });
    return await this.info(entry);
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
    await e.shadow.unmount({ lazy });
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
    for (const e of this.entries.values()) {
      await this.stopServers(e);
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
        views: [...e.shadow.views].map((v) => ({ mountPoint: v.mountPoint, createdMountPoint: v.ownsMountPoint })),
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
