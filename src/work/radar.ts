// The conflict radar of one shadow: the paths on which agents' work will collide, known as it
// happens rather than at apply time. It keeps the current "overlaps":
//   - "layers": a path two or more layers change, to different contents (two layers that hold the
//     same bytes at a path, a clone and its source say, agree: no overlap);
//   - "folder": a path a layer changes whose base in the folder moved since: the developer (or
//     anything outside the shadow) changed, made or removed the folder's file after the layer took
//     its copy, so applying the layer would overwrite that change (apply reports it as a conflict).
//
// What drives it (no polling of git, no periodic scan of the folder or of every layer):
//   - layer events (Shadow.onLayer): writes, removals and reverts made through the daemon's API
//     (file tools, layer.write, apply giving paths back), resets, drops, at once;
//   - the change feed (WorkService.pollChanges, which the daemon runs about once a second while a
//     client is connected and the mount's request counter moved; `radar` runs it before it
//     answers): what programs wrote through the mount, which never calls into JavaScript;
//   - one fs.watch per folder directory that holds a path some layer changes (inotify on Linux,
//     ReadDirectoryChangesW on Windows): the developer's edits of those files, within a few
//     milliseconds. The shared mount's own change journal (FolderChanges) is not enough here: it
//     watches only the directories the kernel holds, and the file tools edit without any lookup.
// What it can miss, and what it does then:
//   - a watch that cannot be made (ENOSPC: the system is out of inotify watches; more than
//     MAX_WATCHES directories) or that fails: the paths in that directory are checked again, one
//     stat each, whenever the overlaps are listed (a bounded rescan of the layers' own paths);
//   - a path a layer holds in a directory the folder does not have: the nearest folder ancestor
//     is watched instead, and the path is checked again when anything in it changes;
//   - a change the folder got before the radar heard of the layer's copy: checked once when the
//     radar first hears of the path (its base against the folder then);
//   - writes through the mount while no client is connected: heard at the next feed.
import * as fs from 'fs';
import * as path from 'path';
import type { LayerEvent, Shadow } from '../shadow';
import { addon, type ChangeBase } from '../shadow/native';
import { Beneath } from './beneath';
import { sameIdentity } from './collect';
import type { Provenance } from './provenance';

/** One place where agents' work collides. */
export interface Overlap {
  /** Stable while the overlap lasts: "layers:<path>" or "folder:<agent>:<path>". */
  id: string;
  kind: 'layers' | 'folder';
  path: string;
  /** layers: the agents whose layers change the path (sorted); folder: the agent whose copy's base moved. */
  agents: string[];
  /** When the radar noticed it (ms since the epoch). */
  since: number;
  /** layers: per agent, when the radar first heard that its layer changes the path. */
  changedAt?: Record<string, number>;
  /** folder: what the folder's file was when the layer took its copy; null when the layer recorded none (it made the path, or replaced it unread). */
  base?: { size: number; mtimeNs: string; hash: string | null } | null;
  /** folder: what the folder has at the path now; null when it has nothing there. */
  folder?: { size: number; mtimeNs: string } | null;
}

export interface RadarDelta {
  /** Overlaps new or changed (a client replaces by id). */
  added: Overlap[];
  /** Overlaps gone: a layer gave the path back, was reset or dropped, or the folder is back at the base. */
  cleared: Overlap[];
}

/** Directories watched at most, per shadow; past it, paths are checked when the overlaps are listed. */
export const MAX_WATCHES = 2048;
/** Files compared by content up to this size; larger ones count as different unless size and time agree. */
const COMPARE_MAX_BYTES = 16 * 1024 * 1024;
/** Folder events are gathered this long before they are checked (an editor's save is several events). */
const SETTLE_MS = 30;

/** Layers of runs that discard their writes (Shadow.runAs: `<agent>~run-<id>`): never an agent's work. */
const isScratch = (agent: string): boolean => agent.includes('~run-');

interface Watch {
  /** The folder directory watched (relative, '' = the root). */
  dir: string;
  watcher: fs.FSWatcher | undefined;
  /** Held paths this watch stands for (in it, or below it when their own directory is missing). */
  paths: Set<string>;
}

export class Radar {
  /** Per agent: the paths its layer changes (files, links, deletions), with when the radar heard of each. */
  private readonly held = new Map<string, Map<string, number>>();
  private readonly overlaps = new Map<string, Overlap>();
  /** Per watched folder directory. */
  private readonly watches = new Map<string, Watch>();
  /** Per held path: the directory whose watch covers it ('' and more), or null when unwatched. */
  private readonly watchedBy = new Map<string, string | null>();
  private readonly listeners = new Set<(d: RadarDelta) => void>();
  private readonly unsubscribe: () => void;
  /** Paths whose overlaps are to be looked at again: layers (two-layer) and folder (base) checks. */
  private readonly dueLayers = new Set<string>();
  private readonly dueFolder = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  /** The check in progress (one at a time, in order). */
  private chain: Promise<void> = Promise.resolve();
  private disposed = false;

  constructor(
    private readonly shadow: Shadow,
    private readonly provenance: Provenance,
    private readonly opts: { log?: (line: string) => void; maxWatches?: number } = {},
  ) {
    this.unsubscribe = shadow.onLayer((e) => this.heard(e));
  }

  /** Calls `listener` with each change of the overlaps. Returns a function that removes it. */
  onChange(listener: (d: RadarDelta) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The current overlaps (of one agent's: those that name it), by path. Checks unwatched paths first. */
  async list(agent?: string): Promise<Overlap[]> {
    for (const [p, by] of this.watchedBy) if (by === null) this.dueFolder.add(p);
    this.schedule();
    await this.settled();
    return [...this.overlaps.values()]
      .filter((o) => agent === undefined || o.agents.includes(agent))
      .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.id < b.id ? -1 : 1));
  }

  /** Resolves once every check asked for so far is done. */
  async settled(): Promise<void> {
    for (;;) {
      if (this.timer) {
        // Asked for now: no need to wait for events to settle.
        clearTimeout(this.timer);
        this.timer = undefined;
        this.run();
      }
      const c = this.chain;
      await c;
      if (c === this.chain && !this.timer) return;
    }
  }

  /** What the change feed saw a layer change (by any means, programs writing through the mount included). */
  layerChanges(agent: string, changes: ReadonlyArray<{ path: string; kind: string; type: string }>): void {
    if (isScratch(agent)) return;
    for (const c of changes) {
      if (c.kind === 'reverted') this.release(agent, c.path);
      else if (c.type !== 'directory') this.hold(agent, c.path);
    }
    this.schedule();
  }

  private heard(e: LayerEvent): void {
    if (this.disposed || isScratch(e.agent)) return;
    switch (e.kind) {
      case 'written':
        // A directory made through the API is held too; the two-layer check below drops it (its
        // "content" is the same in both layers).
        this.hold(e.agent, e.path);
        break;
      case 'reverted':
        this.release(e.agent, e.path);
        break;
      case 'reset':
      case 'dropped':
        for (const p of [...(this.held.get(e.agent)?.keys() ?? [])]) this.release(e.agent, p);
        this.held.delete(e.agent);
        break;
      case 'cloned':
        // The copy changes what its source changes, to the same contents: an overlap only once one of them changes it again.
        for (const p of this.held.get(e.from)?.keys() ?? []) this.hold(e.agent, p);
        break;
      default:
        return;
    }
    this.schedule();
  }

  private hold(agent: string, p: string): void {
    let m = this.held.get(agent);
    if (!m) this.held.set(agent, (m = new Map()));
    if (!m.has(p)) {
      m.set(p, Date.now());
      this.arm(p);
      // The folder may have moved before the radar heard of the copy.
      this.dueFolder.add(p);
    }
    this.dueLayers.add(p);
  }

  private release(agent: string, p: string): void {
    const m = this.held.get(agent);
    if (!m?.delete(p)) return;
    this.dueLayers.add(p);
    this.dueFolder.add(p);
    if (![...this.held.values()].some((x) => x.has(p))) this.disarm(p);
  }

  private holders(p: string): string[] {
    return [...this.held].filter(([, m]) => m.has(p)).map(([a]) => a);
  }

  // ---- folder watches ---------------------------------------------------------------------------

  /** Watches the folder directory of `p` (or its nearest ancestor the folder has). */
  private arm(p: string): void {
    if (this.watchedBy.has(p)) return;
    let dir = path.posix.dirname(p);
    if (dir === '.') dir = '';
    for (;;) {
      const w = this.watch(dir);
      if (w === 'missing' && dir !== '') {
        dir = path.posix.dirname(dir);
        if (dir === '.') dir = '';
        continue;
      }
      if (w === 'missing' || w === 'refused') {
        this.watchedBy.set(p, null);
        return;
      }
      w.paths.add(p);
      this.watchedBy.set(p, dir);
      return;
    }
  }

  private disarm(p: string): void {
    const dir = this.watchedBy.get(p);
    this.watchedBy.delete(p);
    if (dir === undefined || dir === null) return;
    const w = this.watches.get(dir);
    if (!w) return;
    w.paths.delete(p);
    if (w.paths.size === 0) {
      w.watcher?.close();
      this.watches.delete(dir);
    }
  }

  private watch(dir: string): Watch | 'missing' | 'refused' {
    const have = this.watches.get(dir);
    if (have) return have;
    if (this.watches.size >= (this.opts.maxWatches ?? MAX_WATCHES)) return 'refused';
    const abs = dir === '' ? this.shadow.folder : path.join(this.shadow.folder, ...dir.split('/'));
    try {
      if (!fs.lstatSync(abs).isDirectory()) return 'missing'; // a file or a link where the layer has a directory
    } catch {
      return 'missing';
    }
    const w: Watch = { dir, watcher: undefined, paths: new Set() };
    try {
      w.watcher = fs.watch(abs, { persistent: false }, (_event, name) => this.folderEvent(w, name === null ? null : String(name)));
    } catch (err) {
      this.opts.log?.(`radar: cannot watch ${abs}: ${(err as Error).message}; its paths are checked when listed`);
      return 'refused';
    }
    w.watcher.on('error', () => {
      // The directory went (removed or moved away) or the watch broke: look at its paths again, watch anew.
      w.watcher?.close();
      if (this.watches.get(dir) === w) this.watches.delete(dir);
      for (const p of w.paths) {
        this.watchedBy.delete(p);
        this.dueFolder.add(p);
      }
      if (!this.disposed) for (const p of w.paths) if (this.holders(p).length) this.arm(p);
      this.schedule();
    });
    this.watches.set(dir, w);
    return w;
  }

  private folderEvent(w: Watch, name: string | null): void {
    if (this.disposed) return;
    const prefix = w.dir === '' ? '' : `${w.dir}/`;
    const changed = name === null ? null : prefix + name.split(path.sep).join('/');
    for (const p of w.paths) {
      if (changed !== null && p !== changed && !p.startsWith(`${changed}/`)) continue;
      this.dueFolder.add(p);
      // A path watched through an ancestor: its own directory may exist now.
      if (path.posix.dirname(p) !== (w.dir || '.')) {
        this.disarm(p);
        this.arm(p);
      }
    }
    this.schedule(SETTLE_MS);
  }

  // ---- checks -------------------------------------------------------------------------------------

  private schedule(ms = 0): void {
    if (this.disposed || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.run();
    }, ms);
    this.timer.unref();
  }

  private run(): void {
    this.chain = this.chain.then(() => this.check()).catch((err: unknown) => this.opts.log?.(`radar: ${(err as Error).message}`));
  }

  private async check(): Promise<void> {
    // Suspended (idle): the layers cannot be read; what is due stays due for the next check.
    if (this.disposed || !this.shadow.mounted) return;
    const layers = [...this.dueLayers];
    const folder = [...this.dueFolder];
    this.dueLayers.clear();
    this.dueFolder.clear();
    const delta: RadarDelta = { added: [], cleared: [] };
    for (const p of layers) await this.checkLayers(p, delta);
    if (folder.length) await this.checkFolder(folder, delta);
    if (delta.added.length === 0 && delta.cleared.length === 0) return;
    for (const l of this.listeners) {
      try {
        l(delta);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  private set(o: Overlap, delta: RadarDelta): void {
    const before = this.overlaps.get(o.id);
    if (before) {
      o.since = before.since;
      if (JSON.stringify(before) === JSON.stringify(o)) return;
    }
    this.overlaps.set(o.id, o);
    delta.added.push(o);
  }

  private clear(id: string, delta: RadarDelta): void {
    const before = this.overlaps.get(id);
    if (!before) return;
    this.overlaps.delete(id);
    delta.cleared.push(before);
  }

  /** The two-layer overlap of `p`: the layers that change it, unless they all hold the same there. */
  private async checkLayers(p: string, delta: RadarDelta): Promise<void> {
    const agents = this.holders(p).sort();
    const id = `layers:${p}`;
    if (agents.length < 2) return this.clear(id, delta);
    const versions = new Set<string>();
    for (const a of agents) versions.add(await this.versionIn(a, p));
    if (versions.size < 2) return this.clear(id, delta);
    const changedAt: Record<string, number> = {};
    for (const a of agents) changedAt[a] = this.held.get(a)!.get(p)!;
    this.set({ id, kind: 'layers', path: p, agents, since: Date.now(), changedAt }, delta);
  }

  /** What a layer has at `p`, as a string two layers agree on when they hold the same. */
  private async versionIn(agent: string, p: string): Promise<string> {
    const layer = this.shadow.layer(agent);
    try {
      const st = await layer.stat(p);
      if (st.type === 'directory') return 'directory';
      if (st.type === 'symlink') return `link:${await layer.readlink(p)}`;
      if (st.type !== 'file' || st.size > COMPARE_MAX_BYTES) return `${st.type}:${agent}`; // not compared: different
      return `file:${st.mode}:${addon().contentHash(await layer.readFile(p))}`;
    } catch (err) {
      const code = (err as { code?: string }).code;
      return code === 'NOT_FOUND' || code === 'ENOENT' ? 'absent' : `unknown:${agent}`;
    }
  }

  /** The folder overlaps of `paths`: for each layer that changes one, whether its base moved. */
  private async checkFolder(paths: string[], delta: RadarDelta): Promise<void> {
    const byAgent = new Map<string, string[]>();
    for (const p of paths) {
      const holders = this.holders(p);
      // A layer that gave the path back (or went) has no copy whose base could move.
      for (const o of [...this.overlaps.values()])
        if (o.kind === 'folder' && o.path === p && !holders.includes(o.agents[0])) this.clear(o.id, delta);
      for (const a of holders) {
        let l = byAgent.get(a);
        if (!l) byAgent.set(a, (l = []));
        l.push(p);
      }
    }
    if (byAgent.size === 0) return;
    const root = Beneath.open(this.shadow.folder);
    try {
      for (const [agent, ps] of byAgent) {
        // The bases are in the layer's change list (one listing for all of this agent's paths).
        let changes: Awaited<ReturnType<ReturnType<Shadow['layer']>['changes']>>;
        try {
          changes = await this.shadow.layer(agent).changes();
        } catch {
          continue; // dropped meanwhile: its events clear it
        }
        const byPath = new Map(changes.map((c) => [c.path, c]));
        for (const p of ps) {
          const id = `folder:${agent}:${p}`;
          const c = byPath.get(p);
          if (!c || c.type === 'directory') {
            this.clear(id, delta);
            continue;
          }
          const base = this.provenance.restoredBase(agent, p)?.base ?? c.base;
          const now = folderNow(root, p);
          if (!this.baseMoved(root, agent, p, base, now)) {
            this.clear(id, delta);
            continue;
          }
          this.set(
            {
              id,
              kind: 'folder',
              path: p,
              agents: [agent],
              since: Date.now(),
              base: base ? { size: base.size, mtimeNs: base.mtimeNs, hash: base.hash } : null,
              folder: now,
            },
            delta,
          );
        }
      }
    } finally {
      root.close();
    }
  }

  /** Whether the folder's `p` is no longer what the layer took (as apply judges it: identity, else content; no base: touched since the layer started). */
  private baseMoved(root: Beneath, agent: string, p: string, base: ChangeBase | undefined, now: Overlap['folder']): boolean {
    const abs = path.join(this.shadow.folder, ...p.split('/'));
    if (!base) {
      if (!now) return false; // the layer made it, or removed it unread, and the folder has none: nothing to lose
      const since = this.provenance.layerSince(agent);
      return since === undefined || mtimeMs(now.mtimeNs) > since;
    }
    if (!now) return true;
    if (sameIdentity(abs, base)) return false;
    if (!base.hash || now.size !== base.size) return true;
    try {
      return addon().contentHash(root.readFile(p).data) !== base.hash;
    } catch {
      return true;
    }
  }

  /** Stops listening and watching. */
  dispose(): void {
    this.disposed = true;
    this.unsubscribe();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const w of this.watches.values()) w.watcher?.close();
    this.watches.clear();
  }
}

function folderNow(root: Beneath, p: string): Overlap['folder'] {
  try {
    const st = root.lstat(p);
    if (!st) return null;
    const big = fs.lstatSync(path.join(root.root, ...p.split('/')), { bigint: true });
    return { size: Number(big.size), mtimeNs: String(big.mtimeNs) };
  } catch {
    return null;
  }
}

function mtimeMs(ns: string): number {
  return Number(BigInt(ns) / 1_000_000n);
}
