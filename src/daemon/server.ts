// The daemon: one per user, JSON-RPC 2.0 over a Unix socket in a private directory (a named pipe
// on Windows). Requests are checked against the protocol module before anything is touched;
// malformed, oversized or unknown messages get a JSON-RPC error and never take the daemon down.
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import type { Logger } from 'winston';
import { ShadowError } from '../errors';
import { addon } from '../native';
import { normalizeRelPath } from '../paths';
import { encodeMessage, MAX_MESSAGE_BYTES, MessageDecoder } from '../protocol/framing';
import {
  checkParams,
  isMethod,
  MethodName,
  Notifications,
  PROTOCOL_VERSION,
  Results,
  rpcCodeFor,
  RpcErrorCodes,
} from '../protocol/messages';
import { DaemonPaths } from './paths';
import { ShadowManager } from './manager';
import { RunPolicy } from '../run/policy';
import { runInShadow } from '../run/runner';

const VERSION = (JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as { version: string })
  .version;

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
}

/** What a handler knows about the connection that asked. */
interface CallContext {
  notify(method: string, params: object): void;
  /** Aborted when the connection closes before the request is answered. */
  signal: AbortSignal;
}

type Handler = (params: Record<string, unknown>, ctx: CallContext) => Promise<unknown>;

export class Daemon {
  private server: net.Server | undefined;
  private readonly clients = new Set<net.Socket>();
  private readonly manager: ShadowManager;
  private readonly started = Date.now();
  private recovered: string[] = [];
  private exitTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  private readonly handlers: { [M in MethodName]: Handler };
  private readonly runs = new Map<string, AbortController>();
  /** Resolves when the daemon has stopped. */
  readonly done: Promise<void>;
  private resolveDone: () => void = () => undefined;

  constructor(private readonly opts: DaemonOptions) {
    this.done = new Promise((r) => (this.resolveDone = r));
    this.manager = new ShadowManager({
      statePath: opts.paths.state,
      idleMs: opts.idleMs,
      log: opts.log,
      notify: (method, params) => this.broadcast(method, params),
    });
    const m = this.manager;
    const shadowOf = async (p: Record<string, unknown>) => m.use(m.get(p.shadow as string));
    const rel = (p: Record<string, unknown>) => normalizeRelPath(p.path);
    this.handlers = {
      version: async () =>
        ({
          version: VERSION,
          protocol: PROTOCOL_VERSION,
          platform: process.platform,
          backends: addon().backends,
        }) satisfies Results['version'],
      health: async () => ({ ok: true, pid: process.pid, uptimeSeconds: this.uptime(), shadows: m.size }) satisfies Results['health'],
      status: async () =>
        ({
          pid: process.pid,
          socket: opts.paths.socket,
          logFile: opts.paths.log,
          uptimeSeconds: this.uptime(),
          shadows: await m.list(),
          recovered: this.recovered,
        }) satisfies Results['status'],
      mount: async (p) =>
        m.mount(p as { folder: string; mountPoint?: string; name?: string; cacheTimeout?: number; backend?: string; allowOther?: boolean }),
      unmount: async (p) => ({ name: await m.unmount(p.shadow as string, p.lazy === true) }),
      list: async () => ({ shadows: await m.list() }),
      'layer.create': async (p) => {
        await (await shadowOf(p)).createLayer(p.agent as string);
        return { agent: p.agent };
      },
      'layer.drop': async (p) => {
        await (await shadowOf(p)).dropLayer(p.agent as string);
        this.broadcast(Notifications.layerChanged, { shadow: p.shadow, agent: p.agent, event: 'dropped' });
        return { agent: p.agent };
      },
      'layer.clone': async (p) => {
        await (await shadowOf(p)).cloneLayer(p.agent as string, p.to as string);
        this.broadcast(Notifications.layerChanged, { shadow: p.shadow, agent: p.to, event: 'cloned', from: p.agent });
        return { agent: p.agent, to: p.to };
      },
      'layer.list': async (p) => {
        const s = await shadowOf(p);
        return { agents: await s.agents(), active: s.active };
      },
      'layer.write': async (p) => {
        const s = await shadowOf(p);
        const data = Buffer.from(p.data as string, 'base64');
        await s.layer(p.agent as string).write(rel(p), data, p.mode === undefined ? {} : { mode: p.mode as number });
        this.broadcast(Notifications.layerChanged, { shadow: p.shadow, agent: p.agent, event: 'written', path: rel(p) });
        return { path: rel(p), bytes: data.length };
      },
      'layer.remove': async (p) => {
        await (await shadowOf(p)).layer(p.agent as string).remove(rel(p));
        this.broadcast(Notifications.layerChanged, { shadow: p.shadow, agent: p.agent, event: 'removed', path: rel(p) });
        return { path: rel(p) };
      },
      'layer.read': async (p) => ({
        path: rel(p),
        data: (await (await shadowOf(p)).layer(p.agent as string).readFile(rel(p))).toString('base64'),
      }),
      'layer.reset': async (p) => {
        await (await shadowOf(p)).layer(p.agent as string).reset();
        this.broadcast(Notifications.layerChanged, { shadow: p.shadow, agent: p.agent, event: 'reset' });
        return { agent: p.agent };
      },
      'layer.changes': async (p) => ({ changes: await (await shadowOf(p)).layer(p.agent as string).changes() }),
      activate: async (p) => {
        const s = await shadowOf(p);
        const agent = p.agent as string | null;
        if (agent !== null) await s.createLayer(agent);
        const r = await s.activate(agent);
        this.broadcast(Notifications.layerChanged, { shadow: p.shadow, agent, event: 'activated' });
        return { active: s.active, ...r };
      },
      'view.open': async (p) => {
        const v = await (await shadowOf(p)).openView(p.agent as string, { mountPoint: p.mountPoint as string | undefined });
        m.saveState();
        return { view: v.viewId, agent: v.agentId, mountPoint: v.mountPoint };
      },
      'view.close': async (p) => {
        const s = await shadowOf(p);
        const v = [...s.views].find((x) => x.viewId === p.view);
        if (!v) throw new ShadowError('NOT_FOUND', `shadow ${String(p.shadow)} has no open view ${String(p.view)}`);
        await v.close({ lazy: p.lazy === true });
        m.saveState();
        return { view: p.view };
      },
      stats: async (p) => (await shadowOf(p)).stats(),
      run: async (p, ctx) => {
        const s = await shadowOf(p);
        const env: Record<string, string> = {};
        for (const kv of (p.env as string[] | undefined) ?? []) {
          const i = kv.indexOf('=');
          if (i <= 0) throw new ShadowError('INVALID_ARGUMENT', `environment entries look like NAME=value, got ${JSON.stringify(kv)}`);
          env[kv.slice(0, i)] = kv.slice(i + 1);
        }
        const runId = (p.runId as string | undefined) ?? Math.random().toString(16).slice(2, 14);
        if (this.runs.has(runId)) throw new ShadowError('INVALID_ARGUMENT', `a run with id ${runId} is in progress; pick another runId`);
        const controller = new AbortController();
        ctx.signal.addEventListener('abort', () => controller.abort(), { once: true });
        this.runs.set(runId, controller);
        try {
          return await runInShadow(s, {
            agent: p.agent as string,
            argv: p.argv as string[],
            runId,
            cwd: p.cwd as string | undefined,
            env,
            timeoutMs: p.timeout === undefined ? undefined : (p.timeout as number) * 1000,
            discardWrites: p.discardWrites === true,
            shell: p.shell === true,
            originalPath: p.originalPath as boolean | undefined,
            atOriginalPath: p.atOriginalPath === true,
            unprotected: p.unprotected === true,
            noNetwork: p.noNetwork === true,
            policy: this.opts.policy,
            signal: controller.signal,
            onOutput: (stream, chunk) => ctx.notify(Notifications.runOutput, { runId, stream, data: chunk.toString('base64') }),
          });
        } finally {
          this.runs.delete(runId);
        }
      },
      'run.cancel': async (p) => {
        const c = this.runs.get(p.runId as string);
        c?.abort();
        return { runId: p.runId, cancelled: c !== undefined };
      },
    };
  }

  /** Recovers what a crashed daemon left, then listens. Throws DAEMON_RUNNING if one is alive. */
  async start(): Promise<void> {
    const { paths, log } = this.opts;
    const other = readPid(paths.pid);
    if (other && other !== process.pid && isAlive(other) && (await canConnect(paths.socket))) {
      throw new ShadowError('DAEMON_RUNNING', `a shadowfs daemon (pid ${other}) already serves this user at ${paths.socket}`);
    }
    fs.writeFileSync(paths.pid, String(process.pid), { mode: 0o600 });
    this.recovered = ShadowManager.recoverStale(paths.state, log);
    try {
      fs.unlinkSync(paths.socket); // stale socket of a daemon that is gone
    } catch {
      // none
    }
    this.server = net.createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(paths.socket, () => resolve());
    });
    fs.chmodSync(paths.socket, 0o600);
    this.manager.startIdleChecks(Math.max(250, Math.min(30_000, this.opts.idleMs / 4)));
    this.armExit();
    log.info('daemon listening', { socket: paths.socket, pid: process.pid, recovered: this.recovered });
  }

  async stop(): Promise<void> {
    if (this.stopping) return this.done;
    this.stopping = true;
    clearTimeout(this.exitTimer);
    await this.manager.shutdown();
    for (const c of this.clients) c.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    for (const f of [this.opts.paths.socket, this.opts.paths.pid]) {
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
    if (this.manager.size > 0 || this.clients.size > 0 || this.stopping) return;
    this.exitTimer = setTimeout(() => {
      if (this.manager.size === 0 && this.clients.size === 0) {
        this.opts.log.info('nothing left to serve; exiting');
        void this.stop();
      }
    }, this.opts.exitAfterMs);
  }

  private accept(socket: net.Socket): void {
    this.clients.add(socket);
    socket.setMaxListeners(0); // one 'close' listener per request in flight
    clearTimeout(this.exitTimer);
    const decoder = new MessageDecoder(this.opts.maxMessageBytes ?? MAX_MESSAGE_BYTES);
    socket.on('data', (chunk: Buffer) => {
      for (const d of decoder.push(chunk)) {
        if (d.kind === 'message') {
          void this.handle(socket, d.value);
        } else if (d.reason === 'json') {
          this.send(socket, {
            jsonrpc: '2.0',
            id: null,
            error: { code: RpcErrorCodes.ParseError, message: `the message is not valid JSON: ${d.detail}` },
          });
        } else {
          // Framing is lost: answer once, then close this connection (only this one).
          this.opts.log.warn('closing a connection after a framing error', { reason: d.reason, detail: d.detail });
          this.send(socket, {
            jsonrpc: '2.0',
            id: null,
            error: {
              code: RpcErrorCodes.InvalidRequest,
              message: `${d.reason === 'too-large' ? 'message too large' : 'bad message framing'}: ${d.detail}`,
            },
          });
          socket.end();
        }
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.clients.delete(socket);
      this.armExit();
    });
  }

  private async handle(socket: net.Socket, msg: unknown): Promise<void> {
    const m = msg as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
    const id = typeof m?.id === 'number' || typeof m?.id === 'string' ? m.id : null;
    const reply = (body: object) => this.send(socket, { jsonrpc: '2.0', id, ...body });
    if (typeof m !== 'object' || m === null || Array.isArray(m) || m.jsonrpc !== '2.0' || typeof m.method !== 'string') {
      return reply({
        error: {
          code: RpcErrorCodes.InvalidRequest,
          message: 'expected a JSON-RPC 2.0 request object with "jsonrpc":"2.0" and a "method" string',
        },
      });
    }
    if (m.id === undefined) return; // a notification from a client: nothing to answer
    if (!isMethod(m.method)) {
      return reply({ error: { code: RpcErrorCodes.MethodNotFound, message: `unknown method ${JSON.stringify(m.method)}` } });
    }
    const problem = checkParams(m.method, m.params);
    if (problem) return reply({ error: { code: RpcErrorCodes.InvalidParams, message: `${m.method}: ${problem}` } });
    const method = m.method;
    const closed = new AbortController();
    const onClose = (): void => closed.abort();
    socket.once('close', onClose);
    const ctx: CallContext = { notify: (nm, params) => this.send(socket, { jsonrpc: '2.0', method: nm, params }), signal: closed.signal };
    try {
      const result = await this.handlers[method]((m.params ?? {}) as Record<string, unknown>, ctx);
      reply({ result });
    } catch (err) {
      if (err instanceof ShadowError) {
        reply({
          error: {
            code: rpcCodeFor(err.code),
            message: err.message,
            data: { code: err.code, ...(err.errno === undefined ? {} : { errno: err.errno }) },
          },
        });
      } else {
        this.opts.log.error('internal error', { method, error: (err as Error)?.stack ?? String(err) });
        reply({
          error: {
            code: RpcErrorCodes.InternalError,
            message: `internal error in ${method}: ${(err as Error)?.message ?? String(err)}`,
            data: { code: 'INTERNAL' },
          },
        });
      }
    }
  }

  private send(socket: net.Socket, msg: object): void {
    if (!socket.destroyed && socket.writable) socket.write(encodeMessage(msg));
  }

  private broadcast(method: string, params: object): void {
    for (const c of this.clients) this.send(c, { jsonrpc: '2.0', method, params });
  }
}

function readPid(file: string): number | undefined {
  try {
    const n = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function canConnect(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(socketPath);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
