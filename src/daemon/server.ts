// The daemon: one per user, JSON-RPC 2.0 (vscode-jsonrpc) over a Unix socket in a private
// directory (Linux) or a named pipe with an unpredictable name (Windows). Every connection is
// checked to come from this user before it is served; parameters are validated with the
// protocol's schemas before anything is touched; malformed, oversized or unknown messages get a
// JSON-RPC error and never take the daemon down. Without its native module (not built, broken,
// Windows without WinFsp) it still answers everything that does not mount.
//
// This file accepts connections, checks who they come from (auth), dispatches requests, holds
// the single-instance lock and runs the daemon's lifecycle (start, recovery, idle exit, stop).
// What each method does is in handlers/, one module per area.
import * as fs from 'fs';
import * as net from 'net';
import { type CancellationToken, ResponseError } from 'vscode-jsonrpc/node';
import type { Logger } from 'winston';
import type { DaemonPaths } from '../common/endpoint';
import { ShadowError } from '../common/errors';
import { nativeStatus } from '../shadow/native';
import { platform } from '../platform';
import { RpcErrorCodes, rpcCodeFor } from '../protocol/errors';
import {
  checkParams,
  type CheckedParamsOf,
  isMethod,
  type MethodName,
  type NotificationName,
  type NotificationParamsOf,
  PROTOCOL_VERSION,
  Requests,
  type ResultOf,
} from '../protocol/methods';
import type { RunPolicy } from '../run/policy';
import { type CallContext, changeOf, type Client, type Handlers, handlerTable, Runs, Shells } from './handlers';
import { ShadowManager } from './manager';
import { openConnection } from './rpc';
import { heard, narrowResult, type ScopeContext, scopeRefusal } from './scope';
import { processAlive } from '../common/pid';

export interface DaemonOptions {
  paths: DaemonPaths;
  log: Logger;
  /** Unmount shadows nobody used for this long (layers kept). */
  idleMs: number;
  /** Exit when there has been no shadow and no client for this long. */
  exitAfterMs: number;
  maxMessageBytes?: number;
  /** Which commands `run` may start. */
  policy?: RunPolicy;
  /** Autosave changed layers this often (0: never). Default 30 s. */
  autosaveMs?: number;
  /** How long a connection that must prove itself (Windows) may take to say hello; default HELLO_DEADLINE_MS. */
  helloDeadlineMs?: number;
}

/** Methods a Windows client may call before its hello proved who it is. */
const BEFORE_HELLO = new Set<MethodName>(['hello']);
/** More connections than this at once are refused (each may hold a partial message in memory). */
const MAX_CLIENTS = 512;
/**
 * A connection that must prove itself with hello (Windows, where nothing vouches for a pipe's
 * client) and has not within this long is closed: else a client that says nothing holds one of
 * the MAX_CLIENTS slots, and keeps the daemon from exiting, for ever. A real client says hello
 * at once after it connects.
 */
export const HELLO_DEADLINE_MS = 5000;
/** Requests that answer while the daemon recovers; the others wait for it (they could see a shadow half recovered). */
const ANSWERED_DURING_RECOVERY = new Set<string>(['hello', 'version', 'health', 'status', 'run.cancel']);
/** A request that waits this long for recovery hears why (daemon/waiting). */
const WAITING_NOTICE_MS = 300;

export class Daemon {
  private server: net.Server | undefined;
  private readonly clients = new Set<Client>();
  private readonly manager: ShadowManager;
  private readonly started = Date.now();
  private recovered: string[] = [];
  /** Shadows of a crashed predecessor still being cleaned up or mounted again (see start()). */
  private readonly recovering = new Set<string>();
  /** Settles when recovery is done; undefined then. */
  private recovery: Promise<void> | undefined;
  private exitTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  private readonly handlers: Handlers;
  /** Runs in progress, and which connection asked for each. */
  private readonly runs: Runs;
  /** Shell sessions, and which connections are joined to each. */
  private readonly shells = new Shells();
  /** Where clients reach this daemon: the socket path, or the pipe name on Windows. */
  private endpoint = '';
  /** Windows: the secret of the hello handshake, published in the endpoint file. */
  private readonly secret = platform.endpoint.newSecret();
  private ownsPidFile = false;
  /** Removes the record of the runtime directory for clients without XDG_RUNTIME_DIR (platform.announceRuntimeDir). */
  private unannounce: (() => void) | undefined;
  /** Resolves when the daemon has stopped. */
  readonly done: Promise<void>;
  private resolveDone: () => void = () => undefined;

  constructor(private readonly opts: DaemonOptions) {
    this.done = new Promise((r) => (this.resolveDone = r));
    this.runs = new Runs(opts.log);
    this.manager = new ShadowManager({
      statePath: opts.paths.state,
      idleMs: opts.idleMs,
      autosaveMs: opts.autosaveMs ?? 30_000,
      log: opts.log,
      notify: (method, params) => this.broadcast(method, params),
      busy: (shadow) => this.runs.busy(shadow) || this.shells.busy(shadow),
    });
    this.handlers = handlerTable({
      manager: this.manager,
      runs: this.runs,
      shells: this.shells,
      log: opts.log,
      policy: opts.policy,
      daemon: {
        secret: this.secret,
        logFile: opts.paths.log,
        endpoint: () => this.endpoint,
        uptimeSeconds: () => this.uptime(),
        recovered: () => this.recovered,
        recovering: () => [...this.recovering],
        clients: () => this.clients,
        activity: () => ({ runs: this.runs.list(), shells: this.shells.list() }),
        // After the answer is on its way: stop() closes every connection, the asker's too.
        stopSoon: () => void setTimeout(() => void this.stop(), 50),
      },
    });
  }

  /**
   * Listens, then recovers what a crashed daemon left, in the background. Throws DAEMON_RUNNING
   * if one is alive. Recovery checks the recorded mounts (a hung one answers nothing for a while)
   * and mounts the shadows again: requests that could see a shadow half recovered wait for it
   * (see handle()), while hello, version, health and status answer at once.
   */
  async start(): Promise<void> {
    const { paths, log } = this.opts;
    await this.takeLock();
    // Read before anything can be mounted: a mount made now writes the state file anew.
    const previous = ShadowManager.readState(paths.state, log);
    for (const s of previous?.shadows ?? []) this.recovering.add(s.name);
    this.server = net.createServer((socket) => this.accept(socket));
    this.server.maxConnections = MAX_CLIENTS;
    // We hold the lock: a socket left by a daemon that is gone is replaced.
    this.endpoint = await platform.endpoint.listen(paths, this.secret, (where) => this.listen(where));
    this.unannounce = platform.announceRuntimeDir?.(paths.dir);
    this.recovery = this.recover(previous);
    this.manager.startIdleChecks(Math.max(250, Math.min(30_000, this.opts.idleMs / 4)));
    // The change feed runs while somebody is connected to hear it.
    this.manager.startChangeFeed(1000, () => this.clients.size > 0);
    this.armExit();
    log.info('daemon listening', { endpoint: this.endpoint, pid: process.pid, recovering: [...this.recovering], native: nativeStatus() });
  }

  /** Cleans what a crashed predecessor left and mounts its shadows again; never throws. */
  private async recover(previous: ReturnType<typeof ShadowManager.readState>): Promise<void> {
    const { log } = this.opts;
    try {
      this.recovered = await ShadowManager.recoverStale(previous, log);
      // What the crashed daemon served is mounted again, its layers back from autosave.
      if (previous && previous.pid !== process.pid) await this.manager.remountAfterCrash(previous, (name) => this.recovering.delete(name));
    } catch (err) {
      log.error('recovering what the previous daemon left failed', { error: (err as Error).message });
    } finally {
      this.recovering.clear();
      this.recovery = undefined;
      this.armExit();
      if (previous) log.info('recovered what the previous daemon left', { recovered: this.recovered });
    }
  }

  /**
   * Waits for recovery before a request that could see a shadow half recovered; after a moment,
   * tells the client what it waits for (daemon/waiting).
   */
  private async waitForRecovery(method: string, notify: CallContext['notify'], signal: AbortSignal, restricted: boolean): Promise<void> {
    const recovery = this.recovery;
    if (!recovery || ANSWERED_DURING_RECOVERY.has(method)) return;
    // A client that cancels or leaves while it waits is answered at once, and nothing is done for it.
    const cancelled = (): ShadowError => new ShadowError('ABORTED', `${method} was cancelled while it waited for the daemon's recovery`);
    if (signal.aborted) throw cancelled();
    let onAbort!: () => void;
    const aborted = new Promise<never>((_, reject) => (onAbort = () => reject(cancelled())));
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => {
      // An agent's restricted connection is not told the other shadows' names, nor where the log is.
      const names = restricted ? [] : [...this.recovering];
      notify('daemon/waiting', {
        method,
        waitingFor: `the daemon is still recovering what a crashed daemon left${names.length ? ` (the shadows ${names.join(', ')})` : ''}${restricted ? '' : `; see ${this.opts.paths.log}`}`,
      });
    }, WAITING_NOTICE_MS);
    try {
      await Promise.race([recovery, aborted]);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
    if (signal.aborted) throw cancelled();
  }

  private listen(where: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.server!.once('error', onError);
      this.server!.listen(where, () => {
        this.server!.off('error', onError);
        resolve();
      });
    });
  }

  /**
   * The pid file, created exclusively, is the single-instance lock: a second daemon finds it and
   * stops, unless the daemon it names is gone (or has not answered for long: its pid was reused).
   */
  private async takeLock(): Promise<void> {
    const { paths } = this.opts;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        fs.writeFileSync(paths.pid, String(process.pid), { mode: 0o600, flag: 'wx' });
        this.ownsPidFile = true;
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const other = readPid(paths.pid);
      if (other === process.pid) return;
      if (other && processAlive(other)) {
        const where = platform.endpoint.locate(paths)?.where;
        const answers = where !== undefined && (await canConnect(where));
        let age = 0;
        try {
          age = Date.now() - fs.statSync(paths.pid).mtimeMs;
        } catch {
          // removed meanwhile: try again
        }
        if (answers || age < 30_000) {
          throw new ShadowError(
            'DAEMON_RUNNING',
            `a shadowfs daemon (pid ${other}) already serves this user${where ? ` at ${where}` : ''}`,
          );
        }
      }
      try {
        fs.unlinkSync(paths.pid); // its daemon is gone
      } catch {
        // somebody else removed it
      }
    }
    throw new ShadowError('DAEMON_RUNNING', `could not take the daemon lock ${paths.pid}: another daemon is starting`);
  }

  async stop(): Promise<void> {
    if (this.stopping) return this.done;
    this.stopping = true;
    clearTimeout(this.exitTimer);
    // A shadow still being mounted again would be left behind by the shutdown: let recovery end first.
    await this.recovery;
    // Shell sessions hold their views: they are hung up before the shadows go.
    await this.shells.sessions.closeAll();
    await this.manager.shutdown();
    for (const c of this.clients) c.rpc.socket.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    this.unannounce?.();
    const mine = platform.endpoint.ownFiles(this.opts.paths);
    if (this.ownsPidFile) mine.push(this.opts.paths.pid);
    for (const f of mine) {
      try {
        fs.unlinkSync(f);
      } catch {
        // already gone
      }
    }
    this.opts.log.info('daemon stopped');
    this.resolveDone();
    return this.done;
  }

  private uptime(): number {
    return Math.round((Date.now() - this.started) / 1000);
  }

  /** Exit once there is nothing left to serve: no shadow and no client for exitAfterMs. */
  private armExit(): void {
    clearTimeout(this.exitTimer);
    if (this.manager.size > 0 || this.clients.size > 0 || this.stopping || this.recovery) return;
    this.exitTimer = setTimeout(() => {
      if (this.manager.size === 0 && this.clients.size === 0 && !this.recovery) {
        this.opts.log.info('nothing left to serve; exiting');
        void this.stop();
      }
    }, this.opts.exitAfterMs);
  }

  private accept(socket: net.Socket): void {
    socket.on('error', () => undefined);
    const refusal = platform.endpoint.refusePeer(socket);
    if (refusal) {
      this.opts.log.warn('refused a connection', { reason: refusal });
      const body = JSON.stringify({
        jsonrpc: '2.0',
        id: null,
        error: { code: RpcErrorCodes.PeerRefused, message: refusal, data: { code: 'PEER_REFUSED' } },
      });
      socket.end(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      setTimeout(() => socket.destroy(), 1000).unref();
      return;
    }
    const rpc = openConnection(socket, {
      maxMessageBytes: this.opts.maxMessageBytes,
      onViolation: (v) => this.opts.log.warn('closing a connection after a framing error', v),
      logger: { error: (msg) => this.opts.log.debug('rpc', { msg: msg.slice(0, 500) }) },
    });
    // Where the kernel vouched for the peer there is no secret; otherwise hello must prove it.
    const client: Client = { rpc, trusted: !this.secret, closed: new AbortController() };
    this.clients.add(client);
    clearTimeout(this.exitTimer);
    rpc.connection.onRequest((method, params, token) => this.handle(client, method, params, token));
    rpc.connection.onNotification(() => undefined); // a client's notifications need no answer
    rpc.connection.onError(() => undefined);
    socket.on('close', () => {
      client.closed.abort();
      rpc.connection.dispose();
      this.clients.delete(client);
      this.armExit();
    });
    if (!client.trusted) {
      const deadline = this.opts.helloDeadlineMs ?? HELLO_DEADLINE_MS;
      const timer = setTimeout(() => {
        if (client.trusted) return;
        this.opts.log.warn('closed a connection that did not prove itself with hello in time', { deadlineMs: deadline });
        socket.destroy();
      }, deadline);
      timer.unref();
      socket.once('close', () => clearTimeout(timer));
    }
    rpc.connection.listen();
  }

  private async handle(client: Client, method: string, params: unknown, token: CancellationToken): Promise<unknown> {
    if (!isMethod(method)) {
      throw new ResponseError(
        RpcErrorCodes.MethodNotFound,
        clip(`unknown method ${JSON.stringify(method)} (this daemon speaks protocol ${PROTOCOL_VERSION})`),
        {
          code: 'NOT_SUPPORTED',
        },
      );
    }
    if (!client.trusted && !BEFORE_HELLO.has(method)) {
      throw new ResponseError(RpcErrorCodes.PeerRefused, 'say hello first: on Windows a client proves who it is before anything else', {
        code: 'PEER_REFUSED',
      });
    }
    const checked = checkParams(method, params);
    if (!checked.ok)
      throw new ResponseError(RpcErrorCodes.InvalidParams, clip(`${method}: ${checked.problem}`), { code: 'INVALID_ARGUMENT' });
    const scope = client.scope;
    if (scope) {
      const refusal = scopeRefusal(method, checked.value, scope, this.scopeContext(client));
      if (refusal) {
        this.opts.log.warn("refused a request beyond its connection's scope", { method, client: client.name, reason: refusal });
        throw new ResponseError(RpcErrorCodes.ScopeDenied, clip(refusal), { code: 'SCOPE_DENIED' });
      }
    }
    let ownRun: string | undefined;
    if (method === 'run') {
      // A run's id is taken here, before anything waits, and remembered with the connection that
      // asked: a restricted connection may cancel its own runs only (scope.ts).
      const p = checked.value as CheckedParamsOf<'run'>;
      p.runId ??= Math.random().toString(16).slice(2, 14);
      if (!this.runs.claim(p.runId, client))
        throw new ResponseError(RpcErrorCodes.InvalidArgument, clip(`a run with id ${p.runId} is in progress; pick another runId`), {
          code: 'INVALID_ARGUMENT',
        });
      ownRun = p.runId;
    }
    const signal = AbortSignal.any([client.closed.signal, abortSignalOf(token)]);
    const ctx: CallContext = {
      notify: (nm, p) => {
        if (client.rpc.socket.destroyed) return;
        try {
          void client.rpc.connection.sendNotification(nm, p).catch(() => undefined);
        } catch {
          // the client is going away: what it asked goes on, its notifications stop
        }
      },
      signal,
      client,
    };
    client.rpc.begin();
    try {
      await this.waitForRecovery(method, ctx.notify, signal, client.scope !== undefined || method === 'session.restrict');
      // Asked for while the daemon recovered, and it was told to stop meanwhile: the shutdown
      // would undo whatever this did (a mount made now is unmounted at once), so it is not done.
      if (this.stopping && !ANSWERED_DURING_RECOVERY.has(method))
        throw new ShadowError('ABORTED', `${method} was not done: the daemon is stopping`);
      const handler = this.handlers[method] as (p: unknown, c: CallContext) => Promise<unknown>;
      let result = await handler(checked.value, ctx);
      const change = changeOf(method, checked.value, result as ResultOf<typeof method>);
      if (change) this.broadcast('layer/changed', change);
      if (scope) result = narrowResult(method, result as ResultOf<typeof method>, scope, this.scopeContext(client));
      if (process.env.SHADOWFS_CHECK_RESULTS === '1') {
        const r = Requests[method].result.safeParse(result);
        if (!r.success) throw new Error(`the result of ${method} does not match its schema: ${r.error.message}`);
      }
      return result;
    } catch (err) {
      if (err instanceof ShadowError) {
        throw new ResponseError(rpcCodeFor(err.code), clip(err.message), {
          code: err.code,
          ...(err.errno === undefined ? {} : { errno: err.errno }),
        });
      }
      this.opts.log.error('internal error', { method, error: (err as Error)?.stack ?? String(err) });
      throw new ResponseError(RpcErrorCodes.InternalError, clip(`internal error in ${method}: ${(err as Error)?.message ?? String(err)}`), {
        code: 'INTERNAL',
      });
    } finally {
      if (ownRun !== undefined) this.runs.release(ownRun);
      client.rpc.end();
    }
  }

  /** What scope.ts asks of the daemon about one connection. */
  private scopeContext(client: Client): ScopeContext {
    return {
      resolve: (ref) => this.shadowNamed(ref),
      ownsRun: (runId) => this.runs.ownedBy(runId, client),
      viewAgent: (ref, view) => {
        try {
          return [...this.manager.get(ref).shadow.views].find((v) => v.viewId === view && v.open)?.agentId;
        } catch {
          return undefined;
        }
      },
      viewsOf: (ref, agent) => {
        try {
          return [...this.manager.get(ref).shadow.views].filter((v) => v.agentId === agent && v.open).length;
        } catch {
          return 0;
        }
      },
      pinned: (ref) => {
        try {
          return this.manager.get(ref).shadow.pinned;
        } catch {
          return undefined;
        }
      },
    };
  }

  /** The shadow a name or path names, or undefined. */
  private shadowNamed(ref: string): object | undefined {
    try {
      return this.manager.get(ref).shadow;
    } catch {
      return undefined;
    }
  }

  /**
   * Tells every trusted client. Never throws: the change it reports has happened, and a client
   * that is going away (vscode-jsonrpc throws at once on a connection it has closed, before its
   * socket is destroyed) must not turn the request that made the change into an error.
   */
  private broadcast<N extends NotificationName>(method: N, params: NotificationParamsOf<N>): void {
    for (const c of this.clients) {
      if (!c.trusted || c.rpc.socket.destroyed) continue;
      // A restricted connection hears of its own shadow and agent only.
      const told = c.scope ? heard(method, params, c.scope, (ref) => this.shadowNamed(ref)) : params;
      if (told === undefined) continue;
      try {
        void c.rpc.connection.sendNotification(method, told).catch(() => undefined);
      } catch {
        // closed meanwhile: its own close handler removes it
      }
    }
  }
}

/**
 * Error messages quote what they refuse (a path, a method name); a request may carry megabytes of
 * it, so a reply keeps the first 2,000 characters.
 */
function clip(message: string, max = 2000): string {
  return message.length <= max ? message : `${message.slice(0, max)}… (${message.length - max} more characters)`;
}

function abortSignalOf(token: CancellationToken): AbortSignal {
  const c = new AbortController();
  if (token.isCancellationRequested) c.abort();
  else token.onCancellationRequested(() => c.abort());
  return c.signal;
}

function readPid(file: string): number | undefined {
  try {
    const n = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

function canConnect(where: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(where);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
