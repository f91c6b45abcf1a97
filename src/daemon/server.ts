// The daemon: one per user, JSON-RPC 2.0 (vscode-jsonrpc) over a Unix socket in a private
// directory (Linux) or a named pipe with an unpredictable name (Windows). Every connection is
// checked to come from this user before it is served; parameters are validated with the
// protocol's schemas before anything is touched; malformed, oversized or unknown messages get a
// JSON-RPC error and never take the daemon down. Without its native module (not built, broken,
// Windows without WinFsp) it still answers everything that does not mount.
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import { type CancellationToken, ResponseError } from 'vscode-jsonrpc/node';
import type { Logger } from 'winston';
import { type DaemonPaths, proofMatches, proofOf } from '../endpoint';
import { ShadowError } from '../errors';
import { addon, nativeStatus } from '../native';
import { normalizeRelPath } from '../paths';
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
import { RunPolicy } from '../run/policy';
import { runInShadow } from '../run/runner';
import type { Shadow } from '../shadow';
import { ShadowManager } from './manager';
import * as files from '../work/files';
import { openConnection, type RpcConnection } from './rpc';
import { hears, narrowResult, type Scope, type ScopeContext, scopeRefusal } from './scope';

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
  /** Autosave changed layers this often (0: never). Default 30 s. */
  autosaveMs?: number;
  /** How long a connection that must prove itself (Windows) may take to say hello; default HELLO_DEADLINE_MS. */
  helloDeadlineMs?: number;
}

/** What a handler knows about the connection that asked. */
interface CallContext {
  notify<N extends NotificationName>(method: N, params: NotificationParamsOf<N>): void;
  /** Aborted when the client cancels the request or the connection closes before it is answered. */
  signal: AbortSignal;
  client: Client;
}

type Handlers = { [M in MethodName]: (params: CheckedParamsOf<M>, ctx: CallContext) => Promise<ResultOf<M>> };

interface Client {
  rpc: RpcConnection;
  /** Windows: set by a hello whose proof matched; Linux: the kernel vouched for the peer. */
  trusted: boolean;
  closed: AbortController;
  /** The name it gave in hello, for status and the log. */
  name?: string;
  /** Set by session.restrict, never unset: what the connection may still reach (see scope.ts). */
  scope?: Scope;
}

/** A checkpoint name from the time: cp-20261122-104501. */
/**
 * The daemon's memory for `status`. Test hook (test/rpc-fuzz.test.ts): with SHADOWFS_TEST_GC=1 and
 * the daemon started with --expose-gc (NODE_OPTIONS), V8 collects garbage first, so that heapUsed
 * is what is live.
 */
function memoryNow(): { rss: number; heapUsed: number; heapTotal: number; external: number; arrayBuffers: number } {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (process.env.SHADOWFS_TEST_GC === '1' && typeof gc === 'function') gc();
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers };
}

function defaultCheckpointName(): string {
  return `cp-${new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15)}`;
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
/** How long an unmount waits for the runs in its shadow to end once cancelled. */
const CANCEL_RUNS_MS = 5000;
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
  /** Runs in progress by id: how to cancel one, the shadow it runs in, and its end. */
  private readonly runs = new Map<string, { controller: AbortController; shadow: Shadow; ended: Promise<unknown> }>();
  /** Runs cancelled (run.cancel) before they started. */
  private readonly cancelledEarly = new Set<string>();
  /** Which connection asked for each run in progress (see handle()). */
  private readonly runOwners = new Map<string, Client>();
  /** Where clients reach this daemon: the socket path, or the pipe name on Windows. */
  private endpoint = '';
  /** Windows: the secret of the hello handshake, published in the endpoint file. */
  private readonly secret = platform.transport.newSecret();
  private ownsPidFile = false;
  /** Resolves when the daemon has stopped. */
  readonly done: Promise<void>;
  private resolveDone: () => void = () => undefined;

  constructor(private readonly opts: DaemonOptions) {
    this.done = new Promise((r) => (this.resolveDone = r));
    this.manager = new ShadowManager({
      statePath: opts.paths.state,
      idleMs: opts.idleMs,
      autosaveMs: opts.autosaveMs ?? 30_000,
      log: opts.log,
      notify: (method, params) => this.broadcast(method, params),
      busy: (shadow) => this.hasRuns(shadow),
    });
    const m = this.manager;
    const shadowOf = async (p: { shadow: string }) => m.use(m.get(p.shadow));
    const rel = (p: { path: string }) => normalizeRelPath(p.path);
    this.handlers = {
      hello: async (p, ctx) => {
        if (this.secret) {
          if (!p.nonce || !proofMatches(proofOf(this.secret, 'client', p.nonce), p.proof)) {
            ctx.client.trusted = false;
            setTimeout(() => ctx.client.rpc.socket.destroy(), 100).unref();
            throw new ShadowError(
              'PEER_REFUSED',
              "the client did not prove it runs as the daemon's user (hello needs a nonce and the proof made with the secret in the daemon's endpoint file)",
            );
          }
          ctx.client.trusted = true;
        }
        this.opts.log.debug('hello', { client: p.client });
        if (p.client !== undefined) ctx.client.name = p.client;
        return {
          version: VERSION,
          protocol: PROTOCOL_VERSION,
          pid: process.pid,
          ...(this.secret && p.nonce ? { proof: proofOf(this.secret, 'server', p.nonce) } : {}),
        };
      },
      'session.restrict': async (p, ctx) => {
        // A restricted connection reaches here only with the same shadow and agent (scope.ts).
        const current = ctx.client.scope;
        if (current) {
          current.allowApply &&= p.allowApply === true;
          return { shadow: current.name, agent: current.agent, allowApply: current.allowApply };
        }
        const entry = m.get(p.shadow);
        if (p.agent === '' || p.agent.includes('/'))
          throw new ShadowError('INVALID_AGENT', `agent id must be non-empty and without "/", got ${JSON.stringify(p.agent)}`);
        const scope: Scope = { name: entry.name, shadow: entry.shadow, agent: p.agent, allowApply: p.allowApply === true };
        ctx.client.scope = scope;
        this.opts.log.info('a connection restricted itself to one agent', {
          client: ctx.client.name,
          shadow: scope.name,
          agent: scope.agent,
          allowApply: scope.allowApply,
        });
        return { shadow: scope.name, agent: scope.agent, allowApply: scope.allowApply };
      },
      version: async () => {
        const native = nativeStatus();
        return {
          version: VERSION,
          protocol: PROTOCOL_VERSION,
          platform: platform.name,
          backends: native.available ? addon().backends : [],
          native,
        };
      },
      health: async () => ({
        ok: true as const,
        pid: process.pid,
        uptimeSeconds: this.uptime(),
        shadows: m.size,
        native: nativeStatus().available,
      }),
      status: async () => ({
        pid: process.pid,
        socket: this.endpoint,
        logFile: opts.paths.log,
        uptimeSeconds: this.uptime(),
        shadows: await m.list(),
        recovered: this.recovered,
        recovering: [...this.recovering],
        clients: [...this.clients].map((c) => ({
          ...(c.name === undefined ? {} : { client: c.name }),
          ...(c.scope ? { scope: { shadow: c.scope.name, agent: c.scope.agent, allowApply: c.scope.allowApply } } : {}),
        })),
        native: nativeStatus(),
        memory: memoryNow(),
      }),
      mount: async (p) => {
        addon(); // NATIVE_UNAVAILABLE / WINFSP_MISSING before anything else
        return m.mount(p);
      },
      unmount: async (p) => {
        // A run's namespace holds its own copy of the shadow, which would outlive the unmount:
        // the runs in it end first (their results say cancelled).
        await this.cancelRuns(m.get(p.shadow).shadow);
        return { name: await m.unmount(p.shadow, p.lazy === true) };
      },
      list: async () => ({ shadows: await m.list() }),
      'layer.create': async (p) => {
        await (await shadowOf(p)).createLayer(p.agent);
        return { agent: p.agent };
      },
      'layer.drop': async (p) => {
        await (await shadowOf(p)).dropLayer(p.agent);
        this.broadcast('layer/changed', { shadow: p.shadow, agent: p.agent, event: 'dropped' });
        return { agent: p.agent };
      },
      'layer.clone': async (p) => {
        await (await shadowOf(p)).cloneLayer(p.agent, p.to);
        this.broadcast('layer/changed', { shadow: p.shadow, agent: p.to, event: 'cloned', from: p.agent });
        return { agent: p.agent, to: p.to };
      },
      'layer.list': async (p) => {
        const s = await shadowOf(p);
        return { agents: await s.agents(), active: s.active };
      },
      'layer.write': async (p) => {
        const s = await shadowOf(p);
        const data = Buffer.from(p.data, 'base64');
        await s.layer(p.agent).write(rel(p), data, p.mode === undefined ? {} : { mode: p.mode });
        this.broadcast('layer/changed', { shadow: p.shadow, agent: p.agent, event: 'written', path: rel(p) });
        return { path: rel(p), bytes: data.length };
      },
      'layer.remove': async (p) => {
        await (await shadowOf(p)).layer(p.agent).remove(rel(p));
        this.broadcast('layer/changed', { shadow: p.shadow, agent: p.agent, event: 'removed', path: rel(p) });
        return { path: rel(p) };
      },
      'layer.revert': async (p) => {
        const shadow = await shadowOf(p);
        await shadow.layer(p.agent).revert(rel(p));
        this.broadcast('layer/changed', { shadow: p.shadow, agent: p.agent, event: 'reverted', path: rel(p) });
        return { path: rel(p) };
      },
      'layer.read': async (p) => files.readLayerRange((await shadowOf(p)).layer(p.agent), rel(p), { offset: p.offset, length: p.length }),
      'layer.reset': async (p) => {
        await (await shadowOf(p)).layer(p.agent).reset();
        this.broadcast('layer/changed', { shadow: p.shadow, agent: p.agent, event: 'reset' });
        return { agent: p.agent };
      },
      'layer.changes': async (p) => {
        await shadowOf(p);
        return { changes: await (await m.work(p.shadow)).changes(p.agent) };
      },
      'layer.diff': async (p) => (await m.work(p.shadow)).diff(p.agent, p.paths, { includeIgnored: p.includeIgnored === true }),
      'layer.patch': async (p) => (await m.work(p.shadow)).patch(p.agent, p.paths, { includeIgnored: p.includeIgnored === true }),
      'layer.apply': async (p) => {
        const work = await m.work(p.shadow);
        const r = await work.apply(p.agent, {
          paths: p.paths,
          dryRun: p.dryRun === true,
          resolutions: p.resolutions,
          includeIgnored: p.includeIgnored === true,
          allowTypeChanges: p.allowTypeChanges === true,
          ...(p.branch !== undefined ? { branch: p.branch, force: p.force === true } : {}),
        });
        if (!r.dryRun && r.applied.length)
          this.broadcast('layer/changed', {
            shadow: p.shadow,
            agent: p.agent,
            event: 'applied',
            changes: r.applied.map((a) => ({ path: a.path, kind: a.action === 'delete' ? 'deleted' : 'modified', type: 'file' })),
          });
        this.opts.log.info('applied a layer to the folder', {
          shadow: p.shadow,
          agent: p.agent,
          dryRun: r.dryRun,
          applied: r.applied.length,
          conflicts: r.conflicts.length,
          ...(r.branch ? { branch: r.branch.name, commit: r.branch.commit } : {}),
        });
        return r;
      },
      'layer.checkpoint': async (p) => {
        const w = await m.work(p.shadow);
        await w.shadow.createLayer(p.agent);
        return w.checkpoint(p.agent, p.name ?? defaultCheckpointName());
      },
      'layer.restore': async (p) => {
        const w = await m.work(p.shadow);
        const name = p.name ?? w.checkpoints(p.agent).at(-1)?.name;
        if (!name)
          throw new ShadowError(
            'UNKNOWN_CHECKPOINT',
            `agent ${p.agent} has no checkpoint for this folder (make one with "shadowfs checkpoint")`,
          );
        const r = await w.restore(p.agent, name);
        this.broadcast('layer/changed', { shadow: p.shadow, agent: p.agent, event: 'restored' });
        return r;
      },
      'layer.checkpoints': async (p) => ({ checkpoints: (await m.work(p.shadow)).checkpoints(p.agent) }),
      'file.read': async (p) => files.readText((await shadowOf(p)).layer(p.agent), p.path, { startLine: p.startLine, endLine: p.endLine }),
      'file.write': async (p) => {
        const r = await files.writeText(
          await (await shadowOf(p)).createLayer(p.agent),
          p.path,
          p.content,
          p.mode === undefined ? {} : { mode: p.mode },
        );
        this.broadcast('layer/changed', { shadow: p.shadow, agent: p.agent, event: 'written', path: r.path });
        return r;
      },
      'file.edit': async (p) => {
        const r = await files.editText(await (await shadowOf(p)).createLayer(p.agent), p.path, p.oldText, p.newText, {
          replaceAll: p.replaceAll === true,
        });
        this.broadcast('layer/changed', { shadow: p.shadow, agent: p.agent, event: 'written', path: r.path });
        return r;
      },
      'file.list': async (p) =>
        files.list((await shadowOf(p)).layer(p.agent), p.path ?? '', {
          recursive: p.recursive,
          includeIgnored: p.includeIgnored,
          limit: p.limit,
        }),
      'file.glob': async (p) =>
        files.glob((await shadowOf(p)).layer(p.agent), p.pattern, { cwd: p.cwd, includeIgnored: p.includeIgnored, limit: p.limit }),
      'file.grep': async (p) =>
        files.grep((await shadowOf(p)).layer(p.agent), p.pattern, {
          path: p.path,
          glob: p.glob,
          ignoreCase: p.ignoreCase,
          fixedStrings: p.fixedStrings,
          context: p.context,
          includeIgnored: p.includeIgnored,
          maxMatches: p.maxMatches,
          timeoutMs: p.timeoutMs,
        }),
      activate: async (p) => {
        const s = await shadowOf(p);
        if (p.agent !== null) await s.createLayer(p.agent);
        const r = await s.activate(p.agent);
        m.saveState(); // a crash brings the shadow back showing this layer
        this.broadcast('layer/changed', { shadow: p.shadow, agent: p.agent, event: 'activated' });
        return { active: s.active, ...r };
      },
      'view.open': async (p) => {
        const v = await (await shadowOf(p)).openView(p.agent, { mountPoint: p.mountPoint });
        m.saveState();
        return { view: v.viewId, agent: v.agentId, mountPoint: v.mountPoint };
      },
      'view.close': async (p) => {
        const s = await shadowOf(p);
        const v = [...s.views].find((x) => x.viewId === p.view);
        if (!v) throw new ShadowError('NOT_FOUND', `shadow ${p.shadow} has no open view ${p.view}`);
        await v.close({ lazy: p.lazy === true });
        m.saveState();
        return { view: p.view };
      },
      stats: async (p) => (await shadowOf(p)).stats(),
      run: async (p, ctx) => {
        const s = await shadowOf(p);
        const env: Record<string, string> = {};
        for (const kv of p.env ?? []) {
          const i = kv.indexOf('=');
          if (i <= 0) throw new ShadowError('INVALID_ARGUMENT', `environment entries look like NAME=value, got ${JSON.stringify(kv)}`);
          env[kv.slice(0, i)] = kv.slice(i + 1);
        }
        const runId = p.runId ?? Math.random().toString(16).slice(2, 14);
        if (this.runs.has(runId)) throw new ShadowError('INVALID_ARGUMENT', `a run with id ${runId} is in progress; pick another runId`);
        const controller = new AbortController();
        ctx.signal.addEventListener('abort', () => controller.abort(), { once: true });
        // Cancelled before it started (run.cancel while the request waited): it never starts.
        if (ctx.signal.aborted || this.cancelledEarly.delete(runId)) controller.abort();
        let ended!: () => void;
        this.runs.set(runId, { controller, shadow: s, ended: new Promise<void>((r) => (ended = r)) });
        try {
          return await runInShadow(s, {
            agent: p.agent,
            argv: p.argv,
            runId,
            cwd: p.cwd,
            env,
            timeoutMs: p.timeout === undefined ? undefined : p.timeout * 1000,
            discardWrites: p.discardWrites === true,
            shell: p.shell === true,
            originalPath: p.originalPath,
            atOriginalPath: p.atOriginalPath === true,
            unprotected: p.unprotected === true,
            noNetwork: p.noNetwork === true,
            ...(p.limits ? { limits: p.limits } : {}),
            policy: this.opts.policy,
            signal: controller.signal,
            onOutput: (stream, chunk) => ctx.notify('run/output', { runId, stream, data: chunk.toString('base64') }),
          });
        } finally {
          this.runs.delete(runId);
          ended();
        }
      },
      lints: async (p) => (await m.diagnostics(p.shadow)).lints(p),
      'lsp.definition': async (p) => {
        const r = await (await m.diagnostics(p.shadow)).at('definition', p);
        return { status: r.status, ...(r.error ? { error: r.error } : {}), locations: r.locations };
      },
      'lsp.references': async (p) => {
        const r = await (await m.diagnostics(p.shadow)).at('references', p);
        return { status: r.status, ...(r.error ? { error: r.error } : {}), locations: r.locations };
      },
      'lsp.hover': async (p) => {
        const r = await (await m.diagnostics(p.shadow)).at('hover', p);
        return { status: r.status, ...(r.error ? { error: r.error } : {}), contents: r.contents, ...(r.range ? { range: r.range } : {}) };
      },
      'run.cancel': async (p) => {
        const c = this.runs.get(p.runId)?.controller;
        c?.abort();
        // Asked for, not started yet (waiting for recovery): it is cancelled as it starts.
        if (!c && this.runOwners.has(p.runId)) {
          this.cancelledEarly.add(p.runId);
          return { runId: p.runId, cancelled: true };
        }
        return { runId: p.runId, cancelled: c !== undefined };
      },
    };
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
    this.endpoint = await platform.transport.listen(paths, this.secret, (where) => this.listen(where));
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
   * Cancels the runs in `shadow` and waits until they have ended, for at most a few seconds: a
   * process stuck on a hung file system cannot be ended, and the unmount goes on without it (its
   * copy of the shadow is then served until it goes).
   */
  private async cancelRuns(shadow: Shadow): Promise<void> {
    const mine = [...this.runs.entries()].filter(([, r]) => r.shadow === shadow);
    for (const [, r] of mine) r.controller.abort();
    let timer: NodeJS.Timeout | undefined;
    const late = await Promise.race([
      Promise.all(mine.map(([, r]) => r.ended)).then(() => false),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(true), CANCEL_RUNS_MS))),
    ]);
    clearTimeout(timer);
    if (late)
      this.opts.log.warn('runs did not end within the time given; unmounting anyway', {
        runs: mine.filter(([id]) => this.runs.has(id)).map(([id]) => id),
      });
  }

  /** Whether runs are going on in `shadow` (an idle unmount waits for them). */
  private hasRuns(shadow: Shadow): boolean {
    return [...this.runs.values()].some((r) => r.shadow === shadow);
  }

  /**
   * Waits for recovery before a request that could see a shadow half recovered; after a moment,
   * tells the client what it waits for (daemon/waiting).
   */
  private async waitForRecovery(method: string, notify: CallContext['notify'], signal: AbortSignal): Promise<void> {
    const recovery = this.recovery;
    if (!recovery || ANSWERED_DURING_RECOVERY.has(method)) return;
    // A client that cancels or leaves while it waits is answered at once, and nothing is done for it.
    const cancelled = (): ShadowError => new ShadowError('ABORTED', `${method} was cancelled while it waited for the daemon's recovery`);
    if (signal.aborted) throw cancelled();
    let onAbort!: () => void;
    const aborted = new Promise<never>((_, reject) => (onAbort = () => reject(cancelled())));
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => {
      const names = [...this.recovering];
      notify('daemon/waiting', {
        method,
        waitingFor: `the daemon is still recovering what a crashed daemon left${names.length ? ` (the shadows ${names.join(', ')})` : ''}; see ${this.opts.paths.log}`,
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
      if (other && isAlive(other)) {
        const where = platform.transport.locate(paths)?.where;
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
    await this.manager.shutdown();
    for (const c of this.clients) c.rpc.socket.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    const mine = platform.transport.ownFiles(this.opts.paths);
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
    const refusal = platform.transport.refusePeer(socket);
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
      if (this.runOwners.has(p.runId))
        throw new ResponseError(RpcErrorCodes.InvalidArgument, clip(`a run with id ${p.runId} is in progress; pick another runId`), {
          code: 'INVALID_ARGUMENT',
        });
      ownRun = p.runId;
      this.runOwners.set(ownRun, client);
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
      await this.waitForRecovery(method, ctx.notify, signal);
      // Asked for while the daemon recovered, and it was told to stop meanwhile: the shutdown
      // would undo whatever this did (a mount made now is unmounted at once), so it is not done.
      if (this.stopping && !ANSWERED_DURING_RECOVERY.has(method))
        throw new ShadowError('ABORTED', `${method} was not done: the daemon is stopping`);
      const handler = this.handlers[method] as (p: unknown, c: CallContext) => Promise<unknown>;
      let result = await handler(checked.value, ctx);
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
      if (ownRun !== undefined) {
        this.runOwners.delete(ownRun);
        this.cancelledEarly.delete(ownRun);
      }
      client.rpc.end();
    }
  }

  /** What scope.ts asks of the daemon about one connection. */
  private scopeContext(client: Client): ScopeContext {
    return {
      resolve: (ref) => this.shadowNamed(ref),
      ownsRun: (runId) => this.runOwners.get(runId) === client,
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
      if (c.scope && !hears(method, params, c.scope, (ref) => this.shadowNamed(ref))) continue;
      try {
        void c.rpc.connection.sendNotification(method, params).catch(() => undefined);
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

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
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
