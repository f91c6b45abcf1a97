// Handlers about the daemon and the connection itself: hello (the Windows proof), session.restrict,
// version, health and status. They touch no shadow.
import * as fs from 'fs';
import * as path from 'path';
import type { Logger } from 'winston';
import { proofMatches, proofOf } from '../../common/endpoint';
import { ShadowError } from '../../common/errors';
import { addon, nativeStatus, type MemoryBudgetStats } from '../../shadow/native';
import { memoryBudgetStats } from '../../shadow/budget';
import { platform } from '../../platform';
import { PROTOCOL_VERSION, type ResultOf } from '../../protocol/methods';
import type { ShadowManager } from '../manager';
import type { Scope } from '../scope';
import type { ShellInfo } from '../../protocol/shell';
import type { Client, Handlers } from './context';
import type { RunActivity } from './run';

const VERSION = (JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', '..', 'package.json'), 'utf8')) as { version: string })
  .version;

/** What the daemon tells these handlers about itself. */
export interface DaemonFacts {
  /** Windows: the secret of the hello handshake; empty where the kernel vouches for the peer. */
  readonly secret: string;
  readonly logFile: string;
  /** Where clients reach the daemon: the socket path, or the pipe name on Windows. */
  endpoint(): string;
  uptimeSeconds(): number;
  /** Shadows a crashed predecessor left, cleaned up. */
  recovered(): string[];
  /** Shadows of a crashed predecessor still being cleaned up or mounted again. */
  recovering(): string[];
  clients(): Iterable<Client>;
  /** Runs in progress and shell sessions, for status. */
  activity(): { runs: RunActivity[]; shells: ShellInfo[] };
  /** Stops the daemon once the answer in flight has been written (shutdown). */
  stopSoon(): void;
}

/**
 * The daemon's memory for `status`. Test hook (test/rpc-fuzz.test.ts): with SHADOWFS_TEST_GC set
 * to the client name a connection gave in hello, and the daemon started with --expose-gc
 * (NODE_OPTIONS), V8 collects garbage before it answers that connection's `status`, so that
 * heapUsed is what is live. Only that connection's: the fuzzer's own thousands of `status`
 * requests would otherwise each cost a full collection (a third of the test's time went there).
 */
function memoryNow(client: string | undefined): ResultOf<'status'>['memory'] {
  const gc = (globalThis as { gc?: () => void }).gc;
  const collectFor = process.env.SHADOWFS_TEST_GC;
  if (collectFor && client === collectFor && typeof gc === 'function') gc();
  const m = process.memoryUsage();
  let budget: MemoryBudgetStats | undefined;
  try {
    budget = memoryBudgetStats();
  } catch {
    budget = undefined; // $SHADOWFS_MEMORY_BUDGET does not parse: mounts say so
  }
  return {
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    ...(budget ? { budget } : {}),
  };
}

export function adminHandlers(m: ShadowManager, daemon: DaemonFacts, log: Logger) {
  const { secret } = daemon;
  return {
    hello: async (p, ctx) => {
      if (secret) {
        if (!p.nonce || !proofMatches(proofOf(secret, 'client', p.nonce), p.proof)) {
          ctx.client.trusted = false;
          setTimeout(() => ctx.client.rpc.socket.destroy(), 100).unref();
          throw new ShadowError(
            'PEER_REFUSED',
            "the client did not prove it runs as the daemon's user (hello needs a nonce and the proof made with the secret in the daemon's endpoint file)",
          );
        }
        ctx.client.trusted = true;
      }
      log.debug('hello', { client: p.client });
      if (p.client !== undefined) ctx.client.name = p.client;
      return {
        version: VERSION,
        protocol: PROTOCOL_VERSION,
        pid: process.pid,
        ...(secret && p.nonce ? { proof: proofOf(secret, 'server', p.nonce) } : {}),
      };
    },
    'session.restrict': async (p, ctx) => {
      // A restricted connection reaches here only with the same shadow and agent (scope.ts).
      const current = ctx.client.scope;
      // The shadow of that name showing another folder (one mounted under the name after a daemon
      // restart: the front end's agent was given the first folder, not this one).
      const sameFolder = (name: string, folder: string): void => {
        if (p.folder !== undefined && p.folder !== folder)
          throw new ShadowError(
            'UNKNOWN_SHADOW',
            `shadow ${JSON.stringify(name)} shows ${folder} now, not ${p.folder}, the folder this connection is for: it is another shadow`,
          );
      };
      if (current) {
        sameFolder(current.name, current.folder);
        current.allowApply &&= p.allowApply === true;
        return { shadow: current.name, agent: current.agent, allowApply: current.allowApply, folder: current.folder };
      }
      const entry = m.get(p.shadow);
      sameFolder(entry.name, entry.shadow.folder);
      if (p.agent === '' || p.agent.includes('/'))
        throw new ShadowError('INVALID_AGENT', `agent id must be non-empty and without "/", got ${JSON.stringify(p.agent)}`);
      const scope: Scope = {
        name: entry.name,
        shadow: entry.shadow,
        folder: entry.shadow.folder,
        agent: p.agent,
        allowApply: p.allowApply === true,
      };
      ctx.client.scope = scope;
      log.info('a connection restricted itself to one agent', {
        client: ctx.client.name,
        shadow: scope.name,
        agent: scope.agent,
        allowApply: scope.allowApply,
      });
      return { shadow: scope.name, agent: scope.agent, allowApply: scope.allowApply, folder: scope.folder };
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
      uptimeSeconds: daemon.uptimeSeconds(),
      shadows: m.size,
      native: nativeStatus().available,
    }),
    shutdown: async () => {
      const result = {
        pid: process.pid,
        shadows: m.all().map((e) => e.name),
        sessions: daemon.activity().shells.filter((x) => x.running).length,
      };
      log.info('asked to stop', result);
      daemon.stopSoon();
      return result;
    },
    status: async (_p, ctx) => ({
      pid: process.pid,
      socket: daemon.endpoint(),
      logFile: daemon.logFile,
      uptimeSeconds: daemon.uptimeSeconds(),
      shadows: await m.list(),
      recovered: daemon.recovered(),
      recovering: daemon.recovering(),
      clients: [...daemon.clients()].map((c) => ({
        ...(c.name === undefined ? {} : { client: c.name }),
        ...(c.scope ? { scope: { shadow: c.scope.name, agent: c.scope.agent, allowApply: c.scope.allowApply } } : {}),
      })),
      native: nativeStatus(),
      memory: memoryNow(ctx.client.name),
      activity: {
        ...daemon.activity(),
        queues: m
          .all()
          .filter((e) => e.shadow.mounted)
          .map((e) => {
            const q = e.shadow.schedulerStats();
            return {
              shadow: e.name,
              running: q.running,
              ...(q.runningMs === undefined ? {} : { runningMs: q.runningMs }),
              waiting: q.waiting,
            };
          }),
      },
    }),
  } satisfies Partial<Handlers>;
}
