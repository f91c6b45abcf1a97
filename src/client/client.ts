// The client every front end uses to talk to this user's daemon (the CLI, the VS Code extension,
// the MCP server, the PowerShell module through the CLI). JSON-RPC on vscode-jsonrpc; methods and
// notifications typed from the protocol's schemas. Starts the daemon when none answers, unless
// told not to. Before sending anything it checks that the daemon runs as this user. Loads neither
// the native module nor winston, nor zod and the protocol's schemas (types only): a CLI command
// starts in half the time without them (shadowfs/client, ./index.ts, re-exports the protocol).
import { spawn } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import {
  CancellationTokenSource,
  createMessageConnection,
  type DataCallback,
  type Disposable,
  ErrorCodes as JsonRpcErrorCodes,
  type Message,
  type MessageConnection,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-jsonrpc/node';
import { daemonPaths, proofMatches, proofOf } from '../common/endpoint';
import { platform } from '../platform';
import { isErrorCode, ShadowError } from '../protocol/errors';
import type { MethodName, NotificationName, NotificationParamsOf, ParamsOf, ResultOf } from '../protocol/methods';

/** How long a daemon that accepted a connection may take to answer hello. */
const HELLO_TIMEOUT_MS = 10_000;

export interface ClientOptions {
  /** Socket (Linux) to use instead of this user's daemon's; the daemon is not started then. */
  socketPath?: string;
  /** Start the daemon if none answers (default true). */
  autostart?: boolean;
  /** How long to wait for a daemon that is starting (default 30 s). */
  startTimeoutMs?: number;
  /** Named in the daemon's log. */
  clientName?: string;
  /** How to start the daemon (default: this Node running bin/shadowfs.js serve). */
  daemonCommand?: { command: string; args: string[]; env?: NodeJS.ProcessEnv };
  /**
   * Told, once, what connect() waits for when a daemon it started takes a moment to answer
   * (after about a second); for front ends that show progress.
   */
  onWait?: (what: string) => void;
  /**
   * Restrict the connection to one agent's layer on one shadow (session.restrict) right after
   * hello, before connect() returns it: for front ends that serve an untrusted agent. Irrevocable.
   */
  scope?: ParamsOf<'session.restrict'>;
}

export interface RequestOptions {
  /** Cancels the request ($/cancelRequest); the promise rejects with ABORTED. */
  signal?: AbortSignal;
}

/** A method's parameters are optional when every one of them is. */
type RequestArgs<M extends MethodName> =
  Record<never, never> extends ParamsOf<M>
    ? [params?: ParamsOf<M>, options?: RequestOptions]
    : [params: ParamsOf<M>, options?: RequestOptions];

type AnyListener = (method: string, params: unknown) => void;

export class ShadowClient {
  private readonly listeners = new Set<AnyListener>();
  private readonly closeListeners = new Set<(reason: ShadowError) => void>();
  private closed = false;
  private closeReason: ShadowError | undefined;
  /** True when connect() had to start the daemon. */
  startedDaemon = false;
  /** The daemon's process id, once hello answered. */
  daemonPid = 0;
  /** What the connection is restricted to, once session.restrict answered (see ClientOptions.scope). */
  scope: ResultOf<'session.restrict'> | undefined;
  /** Why the daemon refused the connection, when it said so before closing it. */
  private refusal: ShadowError | undefined;

  private constructor(
    private readonly socket: net.Socket,
    private readonly connection: MessageConnection,
  ) {
    connection.onNotification((method: string, params: unknown) => {
      for (const l of this.listeners) l(method, params);
    });
    connection.onClose(() => this.markClosed());
    socket.on('close', () => this.markClosed());
    socket.on('error', (err) => {
      this.closeReason =
        this.refusal ?? new ShadowError('DAEMON_UNAVAILABLE', `lost the connection to the daemon: ${err.message}`, { cause: err });
    });
    connection.listen();
  }

  /**
   * The daemon refuses a connection (another user, or a process inside a run) with one error
   * that answers no request (id null) and closes it; vscode-jsonrpc would only log that, so the
   * reader hands it here first, and it becomes what every pending and later request fails with.
   */
  private heardRefusal(message: Message): void {
    const m = message as { id?: unknown; method?: unknown; error?: { message?: unknown; data?: { code?: unknown } } };
    if (m.id !== null || m.method !== undefined || typeof m.error !== 'object' || m.error === null) return;
    const code = m.error.data?.code;
    const text = typeof m.error.message === 'string' ? m.error.message : 'the daemon refused the connection';
    this.refusal = new ShadowError(isErrorCode(code) ? code : 'PROTOCOL', text);
    this.closeReason = this.refusal;
  }

  /** Connects to this user's daemon, starting it if needed. */
  static async connect(options: ClientOptions = {}): Promise<ShadowClient> {
    const first = await attempt(options);
    if (first) return first;
    const where = options.socketPath ?? describeEndpoint();
    if (options.autostart === false || options.socketPath !== undefined) {
      throw new ShadowError('DAEMON_UNAVAILABLE', `no shadowfs daemon answers at ${where}; start one with "shadowfs serve"`);
    }
    startDaemon(options);
    const timeout = options.startTimeoutMs ?? 30_000;
    const started = Date.now();
    const deadline = started + timeout;
    let told = false;
    while (Date.now() < deadline) {
      if (!told && options.onWait && Date.now() - started >= 1000) {
        told = true;
        options.onWait(`started the shadowfs daemon; waiting for it to answer at ${describeEndpoint()} (its log: ${daemonPaths().log})`);
      }
      await new Promise((r) => setTimeout(r, 50));
      const c = await attempt(options);
      if (c) {
        c.startedDaemon = true;
        return c;
      }
    }
    throw new ShadowError(
      'DAEMON_UNAVAILABLE',
      `started the shadowfs daemon but it did not answer at ${describeEndpoint()} within ${timeout} ms; see ${daemonPaths().log} (and ${daemonPaths().log}.start)`,
    );
  }

  /** Sends one request; resolves with its result or rejects with a ShadowError. */
  async request<M extends MethodName>(method: M, ...args: RequestArgs<M>): Promise<ResultOf<M>> {
    const [params, opts] = args;
    if (this.closed) throw this.closeReason ?? new ShadowError('DAEMON_UNAVAILABLE', 'the connection to the daemon is closed');
    const source = new CancellationTokenSource();
    const signal = opts?.signal;
    if (signal?.aborted) throw new ShadowError('ABORTED', `${method} was cancelled before it was sent`);
    const onAbort = (): void => source.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return (await this.connection.sendRequest(method, params ?? {}, source.token)) as ResultOf<M>;
    } catch (err) {
      throw this.toShadowError(err, method, signal);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      source.dispose();
    }
  }

  /** Receives one kind of the daemon's notifications, typed; returns a function that stops it. */
  on<N extends NotificationName>(method: N, fn: (params: NotificationParamsOf<N>) => void): () => void {
    return this.onNotification((m, p) => {
      if (m === method) fn(p as NotificationParamsOf<N>);
    });
  }

  /** Receives every notification of the daemon (shadow/changed, layer/changed, run/output). */
  onNotification(fn: AnyListener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Called once when the connection closes (the daemon went away, or close() was called). */
  onClose(fn: (reason: ShadowError) => void): () => void {
    this.closeListeners.add(fn);
    return () => this.closeListeners.delete(fn);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  close(): void {
    if (!this.closed) {
      this.closed = true;
      this.closeReason = new ShadowError('DAEMON_UNAVAILABLE', 'the connection to the daemon is closed');
      this.fireClose();
    }
    this.connection.dispose();
    this.socket.end();
    this.socket.destroy();
  }

  private markClosed(): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason = this.refusal ?? this.closeReason;
    this.closeReason ??= new ShadowError(
      'DAEMON_UNAVAILABLE',
      'the daemon closed the connection (did it crash? see its log, "shadowfs status")',
    );
    this.fireClose();
    // Requests still waiting can never be answered now: they fail with the reason (vscode-jsonrpc
    // rejects them only when the connection is disposed).
    this.connection.dispose();
  }

  private fireClose(): void {
    const reason = this.closeReason ?? new ShadowError('DAEMON_UNAVAILABLE', 'the connection to the daemon is closed');
    for (const l of [...this.closeListeners]) l(reason);
    this.closeListeners.clear();
  }

  private toShadowError(err: unknown, method: string, signal: AbortSignal | undefined): ShadowError {
    if (err instanceof ResponseError) {
      const data = err.data as { code?: unknown; errno?: unknown } | undefined;
      if (data && isErrorCode(data.code)) {
        return new ShadowError(data.code, err.message, { errno: typeof data.errno === 'number' ? data.errno : undefined });
      }
      if (err.code === -32800 || signal?.aborted) return new ShadowError('ABORTED', `${method} was cancelled`);
      if (err.code === JsonRpcErrorCodes.PendingResponseRejected && this.closed)
        return this.closeReason ?? new ShadowError('DAEMON_UNAVAILABLE', 'the connection to the daemon closed before it answered');
      return new ShadowError('PROTOCOL', `${method}: ${err.message} (JSON-RPC error ${err.code})`);
    }
    if (signal?.aborted) return new ShadowError('ABORTED', `${method} was cancelled`);
    if (this.closed || /connection (got )?(closed|disposed)/i.test((err as Error)?.message ?? '')) {
      return this.closeReason ?? new ShadowError('DAEMON_UNAVAILABLE', 'the connection to the daemon closed before it answered');
    }
    return new ShadowError('PROTOCOL', `${method}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }

  /** Connects, checks the daemon's user, and says hello (with the Windows proof). */
  static async open(where: string, secret: string | undefined, options: ClientOptions, daemonPid?: number): Promise<ShadowClient> {
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(where);
      s.once('connect', () => {
        s.removeAllListeners('error');
        resolve(s);
      });
      s.once('error', reject);
    });
    try {
      platform.endpoint.verifyServer(socket, where, daemonPid);
    } catch (err) {
      socket.destroy();
      throw err;
    }
    const reader = new RefusalReader(socket);
    const connection = createMessageConnection(reader, new StreamMessageWriter(socket));
    const client = new ShadowClient(socket, connection);
    reader.peek = (m) => client.heardRefusal(m); // before any byte is read: that waits for the event loop
    const nonce = crypto.randomBytes(16).toString('hex');
    // hello answers at once from a daemon that works (even while it recovers): one that accepts
    // the connection and says nothing is stuck, and waiting on it would wait for ever.
    let timer: NodeJS.Timeout | undefined;
    const silent = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        client.close();
        reject(
          new ShadowError(
            'DAEMON_UNAVAILABLE',
            `the daemon at ${where} accepted the connection but did not answer hello within ${HELLO_TIMEOUT_MS / 1000} s; it may be stuck (see ${daemonPaths().log})`,
          ),
        );
      }, HELLO_TIMEOUT_MS);
    });
    const hello = await Promise.race([
      client.request('hello', {
        client: options.clientName ?? `shadowfs-client ${process.pid}`,
        ...(secret ? { nonce, proof: proofOf(secret, 'client', nonce) } : {}),
      }),
      silent,
    ]).finally(() => clearTimeout(timer));
    if (secret && !proofMatches(proofOf(secret, 'server', nonce), hello.proof)) {
      client.close();
      throw new ShadowError(
        'PEER_REFUSED',
        `the process serving ${where} could not prove it is this user's shadowfs daemon; refusing to use it`,
      );
    }
    client.daemonPid = hello.pid;
    if (options.scope) {
      try {
        client.scope = await client.request('session.restrict', options.scope);
      } catch (err) {
        client.close();
        throw err;
      }
    }
    return client;
  }
}

/** A reader that shows each message to `peek` before vscode-jsonrpc has it. */
class RefusalReader extends StreamMessageReader {
  peek: (m: Message) => void = () => undefined;

  override listen(callback: DataCallback): Disposable {
    return super.listen((m) => {
      this.peek(m);
      callback(m);
    });
  }
}

/** Where this user's daemon listens, for messages. */
function describeEndpoint(): string {
  return platform.endpoint.describe(daemonPaths());
}

/** One try at this user's daemon: a client, or undefined when nothing answers there. */
async function attempt(options: ClientOptions): Promise<ShadowClient | undefined> {
  let where: string;
  let secret: string | undefined;
  let pid: number | undefined;
  if (options.socketPath !== undefined) {
    where = options.socketPath;
  } else {
    const found = platform.endpoint.locate(daemonPaths());
    if (!found) return undefined;
    ({ where, secret, pid } = found);
  }
  try {
    return await ShadowClient.open(where, secret, options, pid);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ECONNREFUSED') return undefined; // nobody there (yet)
    if (err instanceof ShadowError) throw err;
    throw new ShadowError('DAEMON_UNAVAILABLE', `cannot reach the shadowfs daemon at ${where}: ${(err as Error).message}`, { cause: err });
  }
}

/** Starts `shadowfs serve` in the background, detached from this process. */
function startDaemon(options: ClientOptions): void {
  const bin = path.join(__dirname, '..', '..', '..', 'bin', 'shadowfs.js');
  const log = daemonPaths().log;
  const out = fs.openSync(`${log}.start`, 'a', 0o600);
  const cmd = options.daemonCommand ?? { command: process.execPath, args: [bin, 'serve', '--foreground', '--no-console'] };
  // Its log goes to the log file; this file only catches what happens before logging starts.
  const child = spawn(cmd.command, cmd.args, {
    detached: true,
    stdio: ['ignore', out, out],
    env: cmd.env ?? process.env,
    windowsHide: true,
  });
  child.unref();
  fs.closeSync(out);
}
