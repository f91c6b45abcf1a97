// The shell sessions of one daemon: starting one in an agent's own view (opened for it when the
// agent has none, closed again when the agent's last session ends), finding them again by id or
// by shadow and agent, and ending them when their shadow goes. An ended session is kept a
// minute, so a terminal that joins late still learns how it ended.
import type { Shadow, View } from '../shadow';
import { ShellSession, type ShellOptions } from './session';

export { ShellSession } from './session';
export type { ShellExit, ShellOptions } from './session';

/** How long an ended session stays listed (with its exit status and last output). */
const KEEP_ENDED_MS = 60_000;

export class ShellSessions {
  private readonly sessions = new Map<string, ShellSession>();
  /** Views opened for sessions, with how many running sessions use each. */
  private readonly views = new Map<View, number>();

  /** Views being opened, by shadow and agent: two sessions starting at once share one. */
  private readonly opening = new Map<string, Promise<View>>();

  /** Told when a view opened for sessions opens or closes (the daemon records its views for a crash recovery). */
  onViews: () => void = () => undefined;

  async start(shadow: Shadow, opts: ShellOptions): Promise<ShellSession> {
    const view = await this.viewFor(shadow, opts.agent);
    // A view opened for sessions is counted (closed with its last session); one the user opened is not.
    const counted = this.views.has(view);
    // Counted before the start, which waits (Windows): a session starting beside it must not close the view.
    if (counted) this.views.set(view, (this.views.get(view) ?? 0) + 1);
    let session: ShellSession;
    try {
      session = await ShellSession.start(shadow, view.mountPoint, opts);
    } catch (err) {
      await this.release(view);
      throw err;
    }
    this.sessions.set(session.id, session);
    void session.ended().then(async () => {
      await this.release(view);
      setTimeout(() => this.sessions.delete(session.id), KEEP_ENDED_MS).unref();
    });
    return session;
  }

  /** The agent's open view, or one opened for sessions (counted from 0), shared by sessions starting at once. */
  private viewFor(shadow: Shadow, agent: string): Promise<View> {
    const existing = shadow.viewOf(agent);
    if (existing) return Promise.resolve(existing);
    const key = `${shadow.mountPoint}\0${agent}`;
    let pending = this.opening.get(key);
    if (!pending) {
      pending = shadow
        .openView(agent)
        .then((v) => {
          this.views.set(v, 0);
          this.onViews();
          return v;
        })
        .finally(() => this.opening.delete(key));
      this.opening.set(key, pending);
    }
    return pending;
  }

  get(id: string): ShellSession | undefined {
    return this.sessions.get(id);
  }

  /** The sessions of `shadow` (all shadows when undefined), running ones first, oldest first. */
  list(shadow?: Shadow): ShellSession[] {
    return [...this.sessions.values()]
      .filter((s) => shadow === undefined || s.shadow === shadow)
      .sort((a, b) => Number(b.running) - Number(a.running) || a.startedAt - b.startedAt);
  }

  /** The running session of `agent` in `shadow` started first, if any. */
  runningOf(shadow: Shadow, agent: string): ShellSession | undefined {
    return this.list(shadow).find((s) => s.running && s.agent === agent);
  }

  /** Whether sessions run in `shadow` (an idle unmount leaves it mounted). */
  busy(shadow: Shadow): boolean {
    return this.list(shadow).some((s) => s.running);
  }

  /** Ends every session of `shadow` (hang-up, then the tree killed), before it is unmounted. */
  async closeIn(shadow: Shadow): Promise<void> {
    await Promise.all(this.list(shadow).map((s) => s.close()));
  }

  /** Ends every session (the daemon stops). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => s.close()));
  }

  private async release(view: View): Promise<void> {
    const n = this.views.get(view);
    if (n === undefined) return;
    if (n > 1) {
      this.views.set(view, n - 1);
      return;
    }
    this.views.delete(view);
    if (view.open) await view.close({ lazy: true }).catch(() => undefined);
    this.onViews();
  }
}
