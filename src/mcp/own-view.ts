// A view of the agent's own (view.open), asked for with the use_own_view tool or
// `shadowfs mcp --own-view`: a mount that always shows this agent's layer, so that its runs,
// lints and definition/references/hover go there at once instead of taking turns with other
// agents on the shared mount (the daemon sends them there whenever the agent has an open view).
// The view this server opened is closed when it ends; after a daemon restart (views do not
// survive one) it is opened again on the new connection.
import { ShadowError } from '../common/errors';
import type { DaemonLink } from './link';

export class OwnView {
  /** Whether the agent asked for a view (then one is kept open, across reconnects). */
  private wanted = false;
  /** The view this server opened on the current connection (closed when the server ends). */
  private opened: { view: number; generation: number } | undefined;
  private opening: Promise<string> | undefined;

  constructor(
    private readonly link: DaemonLink,
    private readonly shadow: string,
    private readonly agent: string,
  ) {
    link.onReconnect(async () => {
      this.opened = undefined;
      if (this.wanted) await this.ensure().catch(() => undefined); // said at the next use_own_view, or runs queue again
    });
  }

  /** Opens the view unless the agent has one already; a sentence for the agent saying where it is. */
  async use(): Promise<string> {
    this.wanted = true;
    const { mountPoint, fresh } = await this.ensureWithNews();
    return `${fresh ? 'opened a view of your own' : 'you already have a view of your own'} at ${mountPoint}: run_command, lints, definition, references and hover now go there at once, without taking turns with other agents (runs still see the project at its own path). It stays open until this server ends.`;
  }

  private async ensure(): Promise<string> {
    return (await this.ensureWithNews()).mountPoint;
  }

  private async ensureWithNews(): Promise<{ mountPoint: string; fresh: boolean }> {
    const existing = await this.existing();
    if (existing) return { mountPoint: existing, fresh: false };
    this.opening ??= (async () => {
      try {
        const r = await this.link.request('view.open', { shadow: this.shadow, agent: this.agent });
        this.opened = { view: r.view, generation: this.link.generation };
        this.link.forgetRoots(); // absolute paths inside the view are the project's too
        return r.mountPoint;
      } finally {
        this.opening = undefined;
      }
    })();
    return { mountPoint: await this.opening, fresh: true };
  }

  /** The mount point of the agent's open view, if the daemon lists one. */
  private async existing(): Promise<string | undefined> {
    const { shadows } = await this.link.request('list', {});
    const s = shadows.find((x) => x.name === this.shadow || x.mountPoint === this.shadow);
    if (!s) throw new ShadowError('UNKNOWN_SHADOW', `no shadow ${this.shadow}`);
    return s.views.find((v) => v.agent === this.agent)?.mountPoint;
  }

  /** Closes the view this server opened (best effort: the server is ending). */
  async close(): Promise<void> {
    const o = this.opened;
    this.opened = undefined;
    this.wanted = false;
    // Not on a connection made since (its view ids are another daemon's), nor by making one now.
    if (!o || o.generation !== this.link.generation || !this.link.connected) return;
    await this.link.request('view.close', { shadow: this.shadow, view: o.view }).catch(() => undefined);
  }
}
