// Warm language servers for one root: started on first use, restarted after a crash, stopped
// when idle.

import { LanguageServerSession } from './session';
import type { SessionOptions } from './session';
import type { ServerSpec } from './servers';

export interface PoolOptions extends SessionOptions {
  /** A server not asked for (get) during this long is stopped. Default 15 minutes. */
  idleMs?: number;
}

interface Entry {
  spec: ServerSpec;
  starting: Promise<LanguageServerSession>;
  session?: LanguageServerSession;
  idleTimer?: NodeJS.Timeout;
}

export class ServerPool {
  readonly root: string;
  private readonly opts: PoolOptions;
  private readonly entries = new Map<string, Entry>();
  private disposed = false;
  /** Ends the starts still waiting for initialize when the pool is disposed. */
  private readonly stopping = new AbortController();

  constructor(root: string, opts: PoolOptions = {}) {
    this.root = root;
    this.opts = opts;
  }

  /**
   * The running session for spec (by id), started if needed. A session that exited (crash,
   * kill) is replaced by a new one here; its open documents are gone, so callers sync before
   * each use (sync re-opens what the new session has not seen). Each get() counts as use for
   * the idle timer.
   */
  async get(spec: ServerSpec): Promise<LanguageServerSession> {
    if (this.disposed) throw new Error('the language server pool was disposed');
    let entry = this.entries.get(spec.id);
    if (entry?.session?.exited) {
      this.forget(entry);
      entry = undefined;
    }
    if (!entry) {
      const e: Entry = { spec, starting: LanguageServerSession.start(spec, this.root, { ...this.opts, signal: this.stopping.signal }) };
      this.entries.set(spec.id, e);
      entry = e;
      e.starting.then(
        (s) => {
          e.session = s;
          s.onExit(() => {
            if (e.idleTimer) clearTimeout(e.idleTimer);
          });
          // The pool was disposed while this server started: stop it right away.
          if (this.disposed || this.entries.get(spec.id) !== e) void s.dispose();
        },
        () => {
          if (this.entries.get(spec.id) === e) this.entries.delete(spec.id);
        },
      );
    }
    this.touch(entry);
    return entry.starting;
  }

  /** Stops spec's server (waits until it is gone); the next get() starts a fresh one. */
  async restart(spec: ServerSpec): Promise<void> {
    const entry = this.entries.get(spec.id);
    if (!entry) return;
    this.forget(entry);
    try {
      await (await entry.starting).dispose();
    } catch {
      // it never started
    }
  }

  /** The sessions running now (for diagnostics and tests). */
  running(): LanguageServerSession[] {
    return [...this.entries.values()].flatMap((e) => (e.session && !e.session.exited ? [e.session] : []));
  }

  private touch(entry: Entry): void {
    if (entry.idleTimer) clearTimeout(entry.idleTimer);
    entry.idleTimer = setTimeout(
      () => {
        if (this.entries.get(entry.spec.id) !== entry) return;
        this.forget(entry);
        void entry.starting.then((s) => s.dispose()).catch(() => undefined);
      },
      this.opts.idleMs ?? 15 * 60_000,
    );
    entry.idleTimer.unref();
  }

  private forget(entry: Entry): void {
    if (entry.idleTimer) clearTimeout(entry.idleTimer);
    if (this.entries.get(entry.spec.id) === entry) this.entries.delete(entry.spec.id);
  }

  /** Stops every server (waits until their processes are gone). */
  async dispose(): Promise<void> {
    this.disposed = true;
    // A server that never answers initialize is stopped now, not at its 60 s deadline.
    this.stopping.abort();
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(
      all.map(async (e) => {
        if (e.idleTimer) clearTimeout(e.idleTimer);
        try {
          const s = await e.starting;
          await s.dispose();
        } catch {
          // it never started
        }
      }),
    );
  }
}
