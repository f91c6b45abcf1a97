// The extension's one connection to this user's shadowfs daemon, through the installed package's
// `shadowfs/client`: connects on first use (starting the daemon with the configured executable
// when none answers), passes notifications on, and notices when the daemon goes away. No VS Code
// API here.
import { EventEmitter } from 'events';
import type * as ClientModule from 'shadowfs/client';
import { daemonCommand, type Installation } from './locate';

export type Client = ClientModule.ShadowClient;
export type DaemonState =
  { kind: 'connecting' } | { kind: 'connected'; pid: number; started: boolean } | { kind: 'disconnected'; reason: string };

export interface DaemonSettings {
  installation: Installation;
  idleTimeoutSeconds: number;
  clientName: string;
  /** Environment the daemon starts with (default: this process's). */
  env?: NodeJS.ProcessEnv;
}

export class Daemon {
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;
  private module: typeof ClientModule | undefined;
  private disposed = false;
  private stateNow: DaemonState = { kind: 'disconnected', reason: 'not connected yet' };
  private readonly events = new EventEmitter();

  private loadedFrom: string | undefined;

  /** settings() is asked at each connection; it throws (LocateError) when shadowfs is not found. */
  constructor(private readonly settings: () => DaemonSettings) {}

  get state(): DaemonState {
    return this.stateNow;
  }

  /** The client module of the installation (its error codes, its ShadowError). */
  private clientModule(file: string): typeof ClientModule {
    // Loaded from the installation at run time; never bundled into the extension.
    if (this.loadedFrom !== file) {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- a path known only at run time
      this.module = require(file) as typeof ClientModule;
      this.loadedFrom = file;
    }
    return this.module as typeof ClientModule;
  }

  /** The settings changed: the next connection uses them (a new installation: reconnect). */
  reconfigure(): void {
    let file: string | undefined;
    try {
      file = this.settings().installation.clientModule;
    } catch {
      file = undefined;
    }
    if (file !== this.loadedFrom && this.client) {
      // A deliberate close: the next use connects with the new installation.
      this.closing = true;
      this.client.close();
      this.closing = false;
    }
  }

  onState(fn: (s: DaemonState) => void): () => void {
    this.events.on('state', fn);
    return () => this.events.off('state', fn);
  }

  onNotification(fn: (method: string, params: unknown) => void): () => void {
    this.events.on('notification', fn);
    return () => this.events.off('notification', fn);
  }

  /** The connected client, connecting (and starting the daemon) first when needed. */
  async get(): Promise<Client> {
    if (this.disposed) throw new Error('the shadowfs extension is shutting down');
    if (this.client && !this.client.isClosed) return this.client;
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /** The client when connected now, without connecting. */
  current(): Client | undefined {
    return this.client && !this.client.isClosed ? this.client : undefined;
  }

  private async connect(): Promise<Client> {
    this.setState({ kind: 'connecting' });
    try {
      const { installation, idleTimeoutSeconds, clientName, env } = this.settings();
      const mod = this.clientModule(installation.clientModule);
      const client = await mod.ShadowClient.connect({
        clientName,
        daemonCommand: { ...daemonCommand(installation.executable, idleTimeoutSeconds), env: env ?? process.env },
      });
      client.onNotification((method, params) => this.events.emit('notification', method, params));
      client.onClose((reason) => {
        if (this.client !== client) return;
        this.client = undefined;
        this.setState({ kind: 'disconnected', reason: reason.message });
        // The daemon went away (a crash, a restart): connect again, which starts a new one;
        // it mounts the crashed one's shadows again with their layers from autosave.
        if (!this.disposed && !this.closing) this.retry(0);
      });
      this.client = client;
      this.retries = 0;
      this.setState({ kind: 'connected', pid: client.daemonPid, started: client.startedDaemon });
      return client;
    } catch (err) {
      this.setState({ kind: 'disconnected', reason: (err as Error).message });
      throw err;
    }
  }

  private retries = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private closing = false;

  /** Connects again after a delay that grows with each failure (1 s, 2 s, 4 s … 60 s). */
  private retry(delayMs = Math.min(60_000, 1000 * 2 ** this.retries)): void {
    if (this.retryTimer || this.disposed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.disposed || this.current()) return;
      this.get().catch(() => {
        this.retries++;
        this.retry();
      });
    }, delayMs);
  }

  private setState(s: DaemonState): void {
    this.stateNow = s;
    this.events.emit('state', s);
  }

  dispose(): void {
    this.disposed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.client?.close();
    this.client = undefined;
    this.events.removeAllListeners();
  }
}
