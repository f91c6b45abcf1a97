// ShadowClient: the SDK every front end uses to talk to the daemon (the CLI here; any Node
// program can use it too). Starts the daemon when it is not running, unless told not to.
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import { ErrorCodes, ShadowError } from './errors';
import type { ErrorCode } from './errors';
import { daemonPaths } from './daemon/paths';
import { encodeMessage, MessageDecoder } from './protocol/framing';
import type { MethodName, Results } from './protocol/messages';

export interface ClientOptions {
  /** Socket (or pipe) to use; default: this user's daemon. */
  socketPath?: string;
  /** Start the daemon if none answers (default true). */
  autostart?: boolean;
  /** How long to wait for a daemon that is starting (default 15 s). */
  startTimeoutMs?: number;
}

type Pending = { resolve: (v: unknown) => void; reject: (e: unknown) => void; method: string };

export class ShadowClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly listeners = new Set<(method: string, params: unknown) => void>();
  private closed = false;
  /** True when connect() had to start the daemon. */
  startedDaemon = false;

  private constructor(private readonly socket: net.Socket) {
    const decoder = new MessageDecoder();
    socket.on('data', (chunk: Buffer) => {
      for (const d of decoder.push(chunk)) {
        if (d.kind !== 'message') {
          this.failAll(new ShadowError('PROTOCOL', `the daemon sent something unreadable (${d.reason}: ${d.detail})`));
          socket.destroy();
          return;
        }
        this.dispatch(d.value);
      }
    });
    socket.on('error', (err) =>
      this.failAll(new ShadowError('DAEMON_UNAVAILABLE', `lost the connection to the daemon: ${err.message}`, { cause: err })),
    );
    socket.on('close', () => {
      this.closed = true;
      this.failAll(
        new ShadowError('DAEMON_UNAVAILABLE', 'the daemon closed the connection (did it crash? see its log, "shadowfs status")'),
      );
    });
  }

  /** Connects to this user's daemon, starting it if needed. */
  static async connect(options: ClientOptions = {}): Promise<ShadowClient> {
    const socketPath = options.socketPath ?? daemonPaths().socket;
    const first = await tryConnect(socketPath);
    if (first) return new ShadowClient(first);
    if (options.autostart === false) {
      throw new ShadowError('DAEMON_UNAVAILABLE', `no shadowfs daemon answers at ${socketPath}; start one with "shadowfs serve"`);
    }
    startDaemon();
    const deadline = Date.now() + (options.startTimeoutMs ?? 15_000);
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      const s = await tryConnect(socketPath);
      if (s) {
        const c = new ShadowClient(s);
        c.startedDaemon = true;
        return c;
      }
    }
    throw new ShadowError(
      'DAEMON_UNAVAILABLE',
      `started the shadowfs daemon but it did not answer at ${socketPath} within ${options.startTimeoutMs ?? 15_000} ms; see ${daemonPaths().log}`,
    );
  }

  /** Sends one request; resolves with its result or rejects with a ShadowError. */
  request<M extends MethodName>(method: M, params: object = {}): Promise<Results[M]> {
    if (this.closed) return Promise.reject(new ShadowError('DAEMON_UNAVAILABLE', 'the connection to the daemon is closed'));
    const id = this.nextId++;
    return new Promise<Results[M]>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, method });
      this.socket.write(encodeMessage({ jsonrpc: '2.0', id, method, params }));
    });
  }

  /** Receives the daemon's notifications (shadow/changed, layer/changed). */
  onNotification(fn: (method: string, params: unknown) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  close(): void {
    this.closed = true;
    this.socket.end();
    this.socket.destroy();
  }

  private dispatch(msg: unknown): void {
    const m = msg as {
      id?: unknown;
      method?: string;
      params?: unknown;
      result?: unknown;
      error?: { code: number; message: string; data?: { code?: string; errno?: number } };
    };
    if (typeof m.method === 'string' && m.id === undefined) {
      for (const l of this.listeners) l(m.method, m.params);
      return;
    }
    if (typeof m.id !== 'number') {
      if (m.error) this.failAll(new ShadowError('PROTOCOL', m.error.message));
      return;
    }
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (m.error) {
      const code = m.error.data?.code;
      const known = code !== undefined && Object.prototype.hasOwnProperty.call(ErrorCodes, code);
      p.reject(new ShadowError(known ? (code as ErrorCode) : 'PROTOCOL', m.error.message, { errno: m.error.data?.errno }));
    } else {
      p.resolve(m.result);
    }
  }

  private failAll(err: ShadowError): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}

function tryConnect(socketPath: string): Promise<net.Socket | undefined> {
  return new Promise((resolve) => {
    const s = net.connect(socketPath);
    s.once('connect', () => {
      s.removeAllListeners('error');
      resolve(s);
    });
    s.once('error', () => resolve(undefined));
  });
}

/** Starts `shadowfs serve` in the background, detached from this process. */
function startDaemon(): void {
  const bin = path.join(__dirname, '..', '..', 'bin', 'shadowfs.js');
  const log = daemonPaths().log;
  const out = fs.openSync(`${log}.start`, 'a', 0o600);
  // Its log goes to the log file; this file only catches what happens before logging starts.
  const child = spawn(process.execPath, [bin, 'serve', '--foreground', '--no-console'], {
    detached: true,
    stdio: ['ignore', out, out],
    env: process.env,
  });
  child.unref();
  fs.closeSync(out);
}
