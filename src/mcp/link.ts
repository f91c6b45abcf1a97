// The MCP server's connection to the daemon, kept alive across a daemon restart: when the
// connection has closed, the next tool call connects again through `reconnect` (restricted to the
// same agent again: the caller's function does that, as the first connection did), and the
// notification listeners registered here hear the new connection too. It also knows where the
// shadow's root is on disk (its folder, mount point and this agent's views), for absolute paths.
import type { ShadowClient } from '../client/client';
import { ShadowError } from '../common/errors';
import type { MethodName, NotificationName, NotificationParamsOf, ParamsOf, ResultOf } from '../protocol/methods';
import type { Roots } from './paths';

export class DaemonLink {
  private client: ShadowClient;
  private pending: Promise<ShadowClient> | undefined;
  private readonly listeners = new Set<(method: string, params: unknown) => void>();
  private detach: (() => void) | undefined;
  private knownRoots: Roots | undefined;
  private readonly reconnected = new Set<() => Promise<void>>();
  /** Bumped at each new connection: what was started on an older one (background runs) is gone. */
  generation = 0;

  constructor(
    first: ShadowClient,
    private readonly shadow: string,
    private readonly agent: string,
    private readonly reconnect: (() => Promise<ShadowClient>) | undefined,
  ) {
    this.client = first;
    this.attach(first);
  }

  /** The current connection, connecting again first when the daemon went away. */
  async current(): Promise<ShadowClient> {
    if (!this.client.isClosed) return this.client;
    if (!this.reconnect) throw new ShadowError('DAEMON_UNAVAILABLE', 'the connection to the daemon is closed');
    this.pending ??= (async () => {
      try {
        const c = await this.reconnect!();
        // The restarted daemon knows the shadow again (its state), but this agent's layer may be new.
        await c.request('layer.create', { shadow: this.shadow, agent: this.agent });
        this.client = c;
        this.generation++;
        this.knownRoots = undefined;
        this.attach(c);
        for (const fn of this.reconnected) await fn();
        return c;
      } finally {
        this.pending = undefined;
      }
    })();
    return this.pending;
  }

  async request<M extends MethodName>(method: M, params: ParamsOf<M>, signal?: AbortSignal): Promise<ResultOf<M>> {
    const c = await this.current();
    return (c.request as (m: M, p: ParamsOf<M>, o: { signal?: AbortSignal }) => Promise<ResultOf<M>>)(method, params, { signal });
  }

  /** Hears one kind of notification on this and every later connection; returns how to stop. */
  on<N extends NotificationName>(method: N, fn: (params: NotificationParamsOf<N>) => void): () => void {
    const l = (m: string, p: unknown): void => {
      if (m === method) fn(p as NotificationParamsOf<N>);
    };
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  /**
   * Runs `fn` on each new connection, after the agent's layer is made and before the call that
   * connected goes on (what the agent set up on the old daemon, such as its view, made again).
   */
  onReconnect(fn: () => Promise<void>): void {
    this.reconnected.add(fn);
  }

  /** Whether the current connection is open (nothing is connected to find out). */
  get connected(): boolean {
    return !this.client.isClosed;
  }

  /** Asks for the roots again at the next use (a view was opened). */
  forgetRoots(): void {
    this.knownRoots = undefined;
  }

  /** Where the shadow's root is on disk (asked once per connection). */
  async roots(): Promise<Roots | undefined> {
    if (this.knownRoots) return this.knownRoots;
    try {
      const { shadows } = await this.request('list', {});
      const s = shadows.find((x) => x.name === this.shadow || x.mountPoint === this.shadow);
      if (!s) return undefined;
      this.knownRoots = {
        folder: s.folder,
        others: [s.mountPoint, ...s.views.filter((v) => v.agent === this.agent).map((v) => v.mountPoint)],
      };
    } catch {
      return undefined;
    }
    return this.knownRoots;
  }

  close(): void {
    this.detach?.();
    this.client.close();
  }

  private attach(c: ShadowClient): void {
    this.detach?.();
    this.detach = c.onNotification((m, p) => {
      for (const l of this.listeners) l(m, p);
    });
  }
}
