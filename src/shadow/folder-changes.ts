// What changed in the user's folder since a reader last asked: the paths (relative, '/'-separated)
// edited, created or removed by anything outside the shadow, or "overflow" when that is no
// longer known exactly. The lints service asks before each question to a language server,
// so servers and cached baselines follow edits made in the folder (FUSE raises no change events
// in the mount for them, so a server's own file watchers never see them).
//
// Two sources: the shared mount's own watcher (fuse_ll keeps a journal of what its inotify watch
// on the folder reported; no extra cost, and it covers exactly the directories programs in the
// shadow looked at), or, for backends without one, a recursive fs.watch of the folder started
// here (ReadDirectoryChangesW on Windows, one inotify watch per directory on Linux).
import * as fs from 'fs';
import * as path from 'path';
import type { Shadow } from './index';

export interface FolderDelta {
  paths: string[];
  /** Some changes are not known: treat everything as changed. */
  overflow: boolean;
}

/** Reads above this many pending paths from fs.watch count as an overflow (bounded memory). */
const MAX_PENDING = 10_000;

export class FolderChanges {
  private mount = -1;
  private seq = 0;
  private watcher: fs.FSWatcher | undefined;
  private pending = new Set<string>();
  private lost = false;
  /** Which source answered last ('mount' | 'fs.watch' | 'none'), for logs and tests. */
  source: 'mount' | 'fs.watch' | 'none' = 'none';

  constructor(private readonly shadow: Shadow) {
    // Start where the folder is now: what happened before the reader existed is its baseline.
    this.take();
  }

  /** What changed since the last call (or since construction). */
  take(): FolderDelta {
    const j = this.shadow.folderChanges(this.seq);
    if (j) {
      this.stopWatching();
      this.source = 'mount';
      // A new mount (resume after suspend) starts a new journal: changes in between are unknown.
      const overflow = j.overflow || (this.mount !== -1 && j.mount !== this.mount);
      const first = this.mount === -1;
      this.mount = j.mount;
      this.seq = j.seq;
      if (first) return { paths: [], overflow: false };
      return { paths: overflow ? [] : j.paths, overflow };
    }
    // Not mounted (suspended): nobody can be reading through it, and nothing is watched.
    if (!this.shadow.mounted) return { paths: [], overflow: true };
    const first = this.source !== 'fs.watch';
    if (!this.watcher && !this.startWatching()) {
      this.source = 'none';
      return { paths: [], overflow: true };
    }
    this.source = 'fs.watch';
    if (first) {
      this.pending.clear();
      this.lost = false;
      return { paths: [], overflow: this.mount !== -1 };
    }
    const out = { paths: this.lost ? [] : [...this.pending], overflow: this.lost };
    this.pending = new Set();
    this.lost = false;
    return out;
  }

  dispose(): void {
    this.stopWatching();
  }

  private startWatching(): boolean {
    try {
      const w = fs.watch(this.shadow.folder, { recursive: true, persistent: false }, (_event, name) => {
        if (name === null || name === undefined) {
          this.lost = true;
          return;
        }
        const rel = String(name).split(path.sep).join('/');
        if (this.pending.size >= MAX_PENDING) this.lost = true;
        else this.pending.add(rel);
      });
      w.on('error', () => {
        this.lost = true;
        this.stopWatching();
      });
      this.watcher = w;
      return true;
    } catch {
      return false;
    }
  }

  private stopWatching(): void {
    this.watcher?.close();
    this.watcher = undefined;
  }
}
