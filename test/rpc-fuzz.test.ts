// RPC fuzzing: well over 100,000 malformed, random and hostile messages to a running daemon
// (random JSON, wrong types for every method's parameters, edge numbers, long strings, deep
// nesting, unknown and prototype method names, ids of every type, batches, bad cancels,
// notifications, responses, mutated real requests, odd but valid headers, broken framing, half
// messages then a disconnect, floods, dribbles, 200 connections at once). Throughout, a
// well-behaved client keeps reading a known file of a layer and listing; afterwards the same
// daemon still runs, its memory stayed bounded, and the shadow, its layers and the folder are as
// they were.
//
// Every generated message is checked before it is sent to be unable to change the shadow under
// test even if the daemon accepted it (see harm() in helpers/rpc-fuzz.ts): messages for methods
// that change something (mount, unmount, layer.create/drop/clone/write/remove/reset, activate,
// view.*, run, run.cancel) only ever name shadows that do not exist ("nosuch-..."), and a
// fuzzed mount only a folder that does not exist; read-only methods (layer.read, layer.list,
// layer.changes, stats, list, ...) are aimed at the real shadow too.
//
// The seed is printed; SHADOWFS_FUZZ_SEED=<seed> replays the same messages (their interleaving
// across connections depends on timing).
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { daemonPaths } from '../src/common/endpoint';
import { mountedPaths } from '../src/platform';
import { FolderGuard, makeProject, ownsTestPath, repoRoot, tempDir, testRootPrefix } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';
import { ReplyDecoder } from './helpers/raw-rpc';
import {
  brokenFraming,
  type Category,
  deepArray,
  deepObject,
  type Expected,
  expectFor,
  frame,
  type Framed,
  Gen,
  halfMessage,
  INTERNAL_ERROR,
  INVALID_REQUEST,
  Rng,
  type Target,
  toJson,
} from './helpers/rpc-fuzz';

const SHADOW = 'fuzzed';
const AGENT = 'keeper';
const FILE = 'notes/known.txt';
const KNOWN = 'the known content, which no fuzzed message may change\n';
/** Connections open at once in the crowd rounds. */
const CROWD = 200;
const CROWD_ROUNDS = 5;
/** Requests one connection pipelines in a flood. */
const FLOOD = 15_000;
/** Big notifications one connection pipelines in a flood. */
const BULK = 80_000;
const MIB = 1024 * 1024;
/**
 * Memory bounds. The daemon bounds what one connection may hold (a 16 MiB message; 256 messages
 * or 16 MiB read but not yet dispatched; 256 requests in flight), so its memory may depend on
 * what is in flight, never on how many messages came before. RSS is what V8 took from the
 * system, not what is live: V8 grows its heap under load, to a multiple of the largest live set,
 * and gives it back lazily. Measured on the 2-core development machine (over a dozen runs, both
 * backends):
 * - ROUND_RISE: in every round but the heavy one, the RSS may rise by this much over where it
 *   was when the round began. The 200-connection crowd rounds rose by up to 175 MiB, the floods
 *   (400 MB of notifications plus 30,000 requests) by 7-99 MiB; a daemon that reads ahead of its
 *   dispatcher holds what a flood sends (+310 MiB for 250 MB, measured before that was fixed).
 * - HEAVY_RISE: the heavy round's messages cost 100-135 MiB each while the daemon works on them (a
 *   16 MiB body is copied several times; 1,000,000 levels of nesting are a million objects), and
 *   V8 grows and keeps the heap they need: on a fresh daemon, 30 of them one after another
 *   plateau at +375 MiB; in the runs the heavy round rose by 116-407 MiB.
 * - PEAK, over the RSS before the fuzzing: a backstop against growth from round to round (the
 *   runs peaked at +233..+529 MiB, in the heavy round).
 * - LIVE, over the live memory before the fuzzing (V8's heapUsed plus external, right after a
 *   full garbage collection: the daemon runs with --expose-gc and SHADOWFS_TEST_GC, and its
 *   `status` to the well-behaved client collects before it reports), once the fuzzing is over: what the daemon still holds.
 *   A leak of 1 KB per message would add about 100 MiB. (This replaced a bound on the RSS once
 *   idle, which depended on when V8 gave memory back: +77..+153 MiB in ten runs, with a minute's
 *   wait.)
 */
const ROUND_RISE_BOUND = 256 * MIB;
const HEAVY_RISE_BOUND = 512 * MIB;
const PEAK_BOUND = 768 * MIB;
const LIVE_BOUND = 64 * MIB;
/** How long one wait may take before the test calls it a hang (not a performance bound). */
const HANG_MS = 120_000;
/** The well-behaved client's name in hello: the daemon collects garbage before its `status` answers only (SHADOWFS_TEST_GC). */
const KEEPER_NAME = 'rpc-fuzz keeper';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');

function cliJson<T>(args: string[], env: NodeJS.ProcessEnv = process.env): T {
  const r = spawnSync(process.execPath, [cliPath, ...args, '--json'], { encoding: 'utf8', timeout: 60_000, env });
  assert.strictEqual(r.status, 0, `shadowfs ${args.join(' ')} failed: ${r.stdout}${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  assert.ok(m, `no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

const mib = (n: number): string => `${(n / MIB).toFixed(1)} MiB`;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

interface Reply {
  jsonrpc?: unknown;
  id?: unknown;
  result?: unknown;
  error?: { code?: unknown; message?: unknown; data?: unknown };
}

/** Why a message from the daemon is not a well-formed JSON-RPC 2.0 response, or undefined. */
function malformed(r: Reply): string | undefined {
  if (r === null || typeof r !== 'object' || Array.isArray(r)) return 'not an object';
  if (r.jsonrpc !== '2.0') return 'no "jsonrpc":"2.0"';
  if (!('id' in r)) return 'no id';
  if ('result' in r === 'error' in r) return 'not exactly one of result and error';
  if ('error' in r) {
    const e = r.error;
    if (e === null || typeof e !== 'object' || !Number.isInteger(e.code) || typeof e.message !== 'string') return 'a malformed error';
  }
  return undefined;
}

/** A raw connection: writes whatever it is given, collects the daemon's replies. */
class Conn {
  static readonly open = new Set<Conn>();
  readonly socket: net.Socket;
  readonly replies: Reply[] = [];
  closed = false;
  /** The daemon ended the connection (before this side destroyed it). */
  endedByDaemon = false;
  private destroyedHere = false;
  private readonly decoder = new ReplyDecoder();
  private readonly wakers = new Set<() => void>();
  problem: string | undefined;

  constructor(where: string) {
    this.socket = net.connect(where);
    Conn.open.add(this);
    this.socket.on('data', (d: Buffer) => {
      try {
        for (const v of this.decoder.push(d)) if (!(v as { method?: unknown }).method) this.replies.push(v as Reply);
      } catch (err) {
        this.problem ??= `the daemon's reply could not be decoded: ${(err as Error).message}`;
      }
      this.wake();
    });
    this.socket.on('end', () => {
      if (!this.destroyedHere) this.endedByDaemon = true;
    });
    this.socket.on('close', () => {
      if (!this.destroyedHere) this.endedByDaemon = true;
      this.closed = true;
      Conn.open.delete(this);
      this.wake();
    });
    this.socket.on('error', () => undefined);
  }

  private wake(): void {
    for (const w of this.wakers) w();
  }

  ready(): Promise<boolean> {
    return new Promise((resolve) => {
      this.socket.once('connect', () => resolve(true));
      this.socket.once('close', () => resolve(false));
    });
  }

  /** Writes and waits until the bytes left this process (or the connection failed). */
  write(b: Buffer): Promise<void> {
    if (this.closed || this.socket.destroyed) return Promise.resolve();
    return new Promise((resolve) => this.socket.write(b, () => resolve()));
  }

  /** Waits until `done` holds; throws, naming `what`, if that takes longer than HANG_MS. */
  async until(done: () => boolean, what: () => string): Promise<void> {
    const deadline = Date.now() + HANG_MS;
    while (!done()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`hung: ${what()}`);
      await new Promise<void>((resolve) => {
        const finish = (): void => {
          clearTimeout(timer);
          this.wakers.delete(finish);
          resolve();
        };
        const timer = setTimeout(finish, Math.min(left, 1000));
        this.wakers.add(finish);
      });
    }
  }

  destroy(): void {
    this.destroyedHere = !this.closed;
    this.socket.destroy();
  }
}

/** Matches replies to what each message must get (order free); returns what did not match. */
function unmatched(replies: Reply[], expected: Expected[], probeId: string, daemonPid: number): string[] {
  const problems: string[] = [];
  const byId = new Map<string, Expected[]>();
  for (const e of expected) byId.set(e.id, [...(byId.get(e.id) ?? []), e]);
  let probes = 0;
  for (const r of replies) {
    const bad = malformed(r);
    if (bad) {
      problems.push(`malformed reply (${bad}): ${JSON.stringify(r).slice(0, 200)}`);
      continue;
    }
    const key = JSON.stringify(r.id);
    if (key === JSON.stringify(probeId)) {
      const res = r.result as { ok?: unknown; pid?: unknown } | undefined;
      if (res?.ok !== true || res.pid !== daemonPid) problems.push(`the health probe got ${JSON.stringify(r).slice(0, 200)}`);
      probes++;
      continue;
    }
    const list = byId.get(key) ?? [];
    const code = r.error?.code;
    // A message whose reply is known exactly takes a reply before one whose reply may be anything.
    let at = list.findIndex((e) => e.codes !== undefined && code !== undefined && e.codes.includes(code as number));
    if (at < 0) at = list.findIndex((e) => e.codes === undefined && code !== INTERNAL_ERROR);
    if (at < 0) {
      problems.push(`unexpected reply ${JSON.stringify(r).slice(0, 300)} (expected for this id: ${JSON.stringify(list)})`);
      continue;
    }
    list.splice(at, 1);
    if (list.length === 0) byId.delete(key);
  }
  if (probes !== 1) problems.push(`${probes} replies to the health probe`);
  for (const [id, list] of byId)
    for (const e of list) problems.push(`no reply for id ${id.slice(0, 100)} (expected ${JSON.stringify(e.codes ?? 'any')})`);
  return problems;
}

describe('RPC fuzzing of the daemon', function () {
  this.timeout(15 * 60_000);

  const seed = process.env.SHADOWFS_FUZZ_SEED ? Number(process.env.SHADOWFS_FUZZ_SEED) : crypto.randomInt(1, 2 ** 31);
  let keeper: ShadowClient | undefined;
  let guard: FolderGuard | undefined;
  let sampler: NodeJS.Timeout | undefined;

  after(async () => {
    // Cleans up however the test ended: sockets, the shadow, the daemon.
    clearInterval(sampler);
    for (const c of [...Conn.open]) c.destroy();
    try {
      const c = keeper && !keeper.isClosed ? keeper : await ShadowClient.connect({ autostart: false });
      for (const s of (await c.request('list')).shadows) await c.request('unmount', { shadow: s.name, lazy: true });
      c.close();
    } catch {
      // no daemon
    }
    keeper?.close();
    guard?.stop();
    stopTestDaemon();
    for (const m of mountedPaths())
      if (m.startsWith(daemonPaths().dir) || (m.startsWith(`${testRootPrefix}fuzzmnt-`) && ownsTestPath(m))) spawnSync('umount', ['-l', m]);
  });

  it('stays alive, bounded and correct through 100,000+ malformed and random messages', async () => {
    assert.ok(
      Number.isSafeInteger(seed) && seed > 0,
      `SHADOWFS_FUZZ_SEED must be a positive integer, got ${process.env.SHADOWFS_FUZZ_SEED}`,
    );
    console.log(`      seed ${seed} (replay: SHADOWFS_FUZZ_SEED=${seed})`);
    const started = Date.now();
    const master = new Rng(seed);

    // ---- the shadow under test, a layer with known content, active
    const lower = makeProject();
    guard = new FolderGuard(lower);
    const at = path.join(tempDir('fuzzmnt'), 'm');
    // A daemon of this test's own, started by this mount, that can collect garbage on request.
    stopTestDaemon();
    const gcEnv = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --expose-gc`.trim(), SHADOWFS_TEST_GC: KEEPER_NAME };
    const mounted = cliJson<{ name: string; mountPoint: string }>(['mount', lower, '--at', at, '--name', SHADOW], gcEnv);
    assert.strictEqual(mounted.mountPoint, at);
    keeper = await ShadowClient.connect({ autostart: false, clientName: KEEPER_NAME });
    const k = keeper;
    await k.request('layer.write', { shadow: SHADOW, agent: AGENT, path: FILE, data: Buffer.from(KNOWN).toString('base64') });
    await k.request('activate', { shadow: SHADOW, agent: AGENT });
    assert.strictEqual(fs.readFileSync(path.join(at, FILE), 'utf8'), KNOWN);
    const pid = (await k.request('status')).pid;
    assert.strictEqual(k.daemonPid, pid);
    const shape = async (): Promise<unknown> => ({
      shadows: (await k.request('list')).shadows.map((s) => ({ ...s, idleSeconds: 0 })),
      layers: await k.request('layer.list', { shadow: SHADOW }),
      changes: await k.request('layer.changes', { shadow: SHADOW, agent: AGENT }),
      mounts: [...mountedPaths()].filter((m) => m.startsWith(daemonPaths().dir) || m === at).sort(),
    });
    const before = await shape();
    const logFile = daemonPaths().log;
    const logStart = fs.statSync(logFile).size;
    const socket = daemonPaths().socket;
    const target: Target = { shadow: SHADOW, mountPoint: at, lower, agent: AGENT, file: FILE };

    // ---- memory
    assert.match(fs.readFileSync(`/proc/${pid}/environ`, 'utf8'), /NODE_OPTIONS=[^\0]*--expose-gc/, 'the daemon can collect on request');
    const live = async (): Promise<number> => {
      const m = (await k.request('status')).memory;
      return m.heapUsed + m.external;
    };
    const liveStart = await live();
    const rssStart = rssOf(pid);
    let rssPeak = rssStart;
    let roundPeak = rssStart;
    const sample = (): void => {
      try {
        const now = rssOf(pid);
        rssPeak = Math.max(rssPeak, now);
        roundPeak = Math.max(roundPeak, now);
      } catch {
        // gone: the checks below say so
      }
    };
    sampler = setInterval(sample, 50);

    // ---- the well-behaved client: reads the known file, lists, asks for health, all the time
    const keeperFailures: string[] = [];
    let served = 0;
    let cycles = 0;
    let stopKeeper = false;
    const keeperLoop = (async () => {
      while (!stopKeeper) {
        try {
          const r = await k.request('layer.read', { shadow: SHADOW, agent: AGENT, path: FILE });
          if (Buffer.from(r.data, 'base64').toString() !== KNOWN) keeperFailures.push(`layer.read returned ${r.data}`);
          served++;
          const l = await k.request('list');
          if (l.shadows.length !== 1 || l.shadows[0].name !== SHADOW || l.shadows[0].active !== AGENT || !l.shadows[0].mounted)
            keeperFailures.push(`list returned ${JSON.stringify(l)}`);
          served++;
          const h = await k.request('health');
          if (h.pid !== pid) keeperFailures.push(`health returned ${JSON.stringify(h)}`);
          served++;
          cycles++;
        } catch (err) {
          keeperFailures.push(`the well-behaved client's request failed: ${(err as Error).message}`);
          return;
        }
      }
    })();
    /** Resolves once the keeper has completed a whole cycle that began after this call. */
    const keeperCycle = async (): Promise<void> => {
      const target = cycles + 2;
      const deadline = Date.now() + HANG_MS;
      while (cycles < target && keeperFailures.length === 0) {
        if (Date.now() > deadline) throw new Error('hung: the well-behaved client was not served');
        await sleep(5);
      }
    };

    // ---- bookkeeping
    const counts = new Map<string, number>();
    const count = (c: Category | string, n = 1): void => void counts.set(c, (counts.get(c) ?? 0) + n);
    const failures: string[] = [];
    const fail = (what: string): void => {
      if (failures.length < 50) failures.push(what);
    };
    let internalErrors = 0;
    let connections = 0;
    let maxOpen = 0;
    const rounds: Array<{ name: string; served: number; ms: number; start: number; peak: number }> = [];
    const noteReplies = (c: Conn): void => {
      for (const r of c.replies) if (r?.error?.code === INTERNAL_ERROR) internalErrors++;
      if (c.problem) fail(c.problem);
    };
    const openConn = async (): Promise<Conn | undefined> => {
      const c = new Conn(socket);
      connections++;
      maxOpen = Math.max(maxOpen, Conn.open.size);
      if (!(await c.ready())) {
        fail('the daemon refused a connection');
        return undefined;
      }
      return c;
    };

    /** Writes `bytes` in a few pieces of random sizes (so frames and headers straddle writes). */
    const writeSplit = async (c: Conn, bytes: Buffer, rng: Rng): Promise<void> => {
      let at = 0;
      while (at < bytes.length) {
        const n = rng.chance(0.5) ? bytes.length - at : rng.between(1, Math.max(1, bytes.length - at));
        await c.write(bytes.subarray(at, at + n));
        at += n;
      }
    };

    /** Sends frames then a health probe; every framed message must get its reply, the probe too. */
    const healthy = async (c: Conn, frames: Framed[], rng: Rng, label: string): Promise<void> => {
      c.replies.length = 0;
      const expected: Expected[] = [];
      for (const f of frames) {
        const e = expectFor(f.body);
        if (e) expected.push(e);
      }
      const probeId = `probe-${label}`;
      await writeSplit(
        c,
        Buffer.concat([...frames.map((f) => f.bytes), frame(JSON.stringify({ jsonrpc: '2.0', id: probeId, method: 'health' }))]),
        rng,
      );
      const want = expected.length + 1;
      await c.until(
        () => c.replies.length >= want || c.closed,
        () =>
          `${label}: ${c.replies.length} of ${want} replies; missing: ${unmatched(c.replies, [...expected], probeId, pid)
            .slice(0, 5)
            .join('; ')}`,
      );
      if (c.closed && c.replies.length < want)
        fail(`${label}: the daemon closed a healthy connection after ${c.replies.length} of ${want} replies`);
      await turn(); // a reply too many would show here
      for (const p of unmatched(c.replies, expected, probeId, pid)) fail(`${label}: ${p}`);
    };

    /** Sends frames then broken framing: the daemon must answer that once and close the connection. */
    const broken = async (c: Conn, frames: Framed[], piece: Buffer, label: string): Promise<void> => {
      await c.write(Buffer.concat([...frames.map((f) => f.bytes), piece]));
      count('broken framing');
      await c.until(
        () => c.closed,
        () => `${label}: the daemon left a connection with broken framing open (${JSON.stringify(piece.toString('latin1', 0, 80))})`,
      );
      if (!c.endedByDaemon) fail(`${label}: not closed by the daemon`);
      const last = c.replies.find(
        (r) => r.id === null && typeof r.error?.message === 'string' && /bad message framing|message too large/.test(r.error.message),
      );
      if (!last || last.error?.code !== INVALID_REQUEST)
        fail(
          `${label}: no framing error before the close (${JSON.stringify(piece.toString('latin1', 0, 80))}); got ${JSON.stringify(c.replies).slice(0, 300)}`,
        );
      for (const r of c.replies) {
        const bad = malformed(r);
        if (bad) fail(`${label}: malformed reply (${bad})`);
      }
    };

    const round = async (name: string, work: () => Promise<void>): Promise<void> => {
      const t0 = Date.now();
      const servedBefore = served;
      const start = (roundPeak = rssOf(pid));
      await Promise.all([work(), keeperCycle()]);
      assert.deepStrictEqual(keeperFailures, [], `the well-behaved client, in round ${name}`);
      assert.ok(served > servedBefore, `the well-behaved client was served during round ${name}`);
      sample();
      rounds.push({ name, served: served - servedBefore, ms: Date.now() - t0, start, peak: roundPeak });
    };

    // ---- rounds

    /** 200 connections at once, each a burst of mixed messages, then a probe, a break or a hang-up. */
    const crowd = async (r: number): Promise<void> => {
      const rng = master.fork();
      const plans = Array.from({ length: CROWD }, (_, i) => {
        const crng = rng.fork();
        const label = `crowd${r}.${i}`;
        const gen = new Gen(crng, target, label);
        const n = crng.between(60, 160);
        const recent: unknown[] = [];
        const frames: Framed[] = [];
        for (let j = 0; j < n; j++) {
          const f = gen.any(recent);
          frames.push(f);
          count(f.category);
          const id = (expectFor(f.body) ?? { id: 'null' }).id;
          if (id !== 'null' && recent.length < 20) recent.push(JSON.parse(id));
        }
        const end = crng.weighted<'healthy' | 'broken' | 'half' | 'abrupt'>([
          [70, 'healthy'],
          [12, 'broken'],
          [10, 'half'],
          [8, 'abrupt'],
        ]);
        return { crng, label, frames, end };
      });
      await Promise.all(
        plans.map(async ({ crng, label, frames, end }) => {
          const c = await openConn();
          if (!c) return;
          try {
            if (end === 'healthy') await healthy(c, frames, crng, label);
            else if (end === 'broken') await broken(c, frames, brokenFraming(crng), label);
            else if (end === 'half') {
              const last = frames[frames.length - 1].bytes;
              await c.write(Buffer.concat([...frames.map((f) => f.bytes), halfMessage(crng, last)]));
              count('half messages');
              if (crng.chance(0.5)) await sleep(crng.int(20));
            } else {
              // Requests in flight, then gone without waiting for anything.
              c.socket.write(Buffer.concat(frames.map((f) => f.bytes)));
            }
          } catch (err) {
            fail(`${label}: ${(err as Error).message}`);
          } finally {
            noteReplies(c);
            c.destroy();
          }
        }),
      );
    };

    /** Cases the random rounds found (and might miss on another seed), each sent as it was found. */
    const regressions = async (): Promise<void> => {
      const rng = master.fork();
      // A header byte >= 0x80: 0x8D 0x8A is "\r\n" to vscode-jsonrpc, which clears the high bit,
      // so guard and reader disagreed on the Content-Length.
      for (const piece of [
        Buffer.concat([Buffer.from('Content-Length: 2\r\nX-A: '), Buffer.from([0x8d, 0x8a]), Buffer.from('Content-Length: 50\r\n\r\n{}')]),
        Buffer.concat([Buffer.from('X-A: '), Buffer.from([0xe9]), Buffer.from('\r\nContent-Length: 2\r\n\r\n{}')]),
      ]) {
        const c = await openConn();
        if (!c) continue;
        try {
          await broken(c, [], piece, 'high-bit header');
        } catch (err) {
          fail(`high-bit header: ${(err as Error).message}`);
        } finally {
          noteReplies(c);
          c.destroy();
        }
      }
      // Requests with the same id (1 and "1" too), pipelined: each gets its reply.
      const gen = new Gen(rng.fork(), target, 'same-ids');
      const same = Array.from({ length: 100 }, (_, i) =>
        gen.framed('odd ids', gen.request(i % 3 ? 'health' : 'version', undefined, i % 2 ? 1 : '1')),
      );
      for (const f of same) count(f.category);
      const c = await openConn();
      if (c) {
        try {
          await healthy(c, same, rng, 'same-ids');
        } catch (err) {
          fail(`same-ids: ${(err as Error).message}`);
        } finally {
          noteReplies(c);
          c.destroy();
        }
      }
      // Broken framing while replies are being written (the client left them unread a moment):
      // the framing error must arrive whole, after whole replies.
      for (let i = 0; i < 5; i++) {
        const w = await openConn();
        if (!w) continue;
        const label = `mid-reply${i}`;
        try {
          w.socket.pause();
          const requests = Array.from({ length: 3000 }, (_, j) => gen.framed('flood', gen.request('version', undefined, j)));
          count('flood', requests.length);
          await w.write(Buffer.concat(requests.map((f) => f.bytes)));
          await sleep(300);
          w.socket.resume();
          await broken(w, [], Buffer.from('GET / HTTP/1.1\r\n\r\n'), label);
        } catch (err) {
          fail(`${label}: ${(err as Error).message}`);
        } finally {
          noteReplies(w);
          w.destroy();
        }
      }
    };

    /** Wrong types for every parameter of every method, on one connection. */
    const sweep = async (): Promise<void> => {
      const rng = master.fork();
      const frames = new Gen(rng.fork(), target, 'sweep').sweep();
      for (const f of frames) count(f.category);
      const c = await openConn();
      if (!c) return;
      try {
        await healthy(c, frames, rng, 'sweep');
      } catch (err) {
        fail(`sweep: ${(err as Error).message}`);
      } finally {
        noteReplies(c);
        c.destroy();
      }
    };

    /** Connections that pipeline thousands of requests in one write: the daemon must not read ahead without bound. */
    const flood = async (): Promise<void> => {
      const rng = master.fork();
      await Promise.all([
        ...[0, 1].map(async (i) => {
          const c = await openConn();
          if (!c) return;
          const label = `flood${i}`;
          const gen = new Gen(rng.fork(), target, label);
          const frames: Framed[] = [];
          for (let j = 0; j < FLOOD; j++) {
            const method = rng.pick(['health', 'version', 'list', 'layer.read', 'layer.list', 'stats', 'no.such'] as const);
            const params =
              method === 'layer.read'
                ? { shadow: SHADOW, agent: AGENT, path: FILE }
                : method === 'layer.list' || method === 'stats'
                  ? { shadow: SHADOW }
                  : undefined;
            const msg = rng.chance(0.1) ? { jsonrpc: '2.0', method, params } : gen.request(method, params, j);
            frames.push({ ...gen.framed('flood', msg), category: 'flood' });
          }
          count('flood', frames.length);
          try {
            await healthy(c, frames, rng.fork(), label);
          } catch (err) {
            fail(`${label}: ${(err as Error).message}`);
          } finally {
            noteReplies(c);
            c.destroy();
          }
        }),
        // Notifications with a 2.5 KB parameter, 400 MB of them in all, as fast as the daemon takes them.
        ...[0, 1].map(async (i) => {
          const c = await openConn();
          if (!c) return;
          const label = `bulk${i}`;
          const one = frame(JSON.stringify({ jsonrpc: '2.0', method: 'fuzz/bulk', params: { pad: 'b'.repeat(2500) } }));
          const block = Buffer.concat(Array.from({ length: 1000 }, () => one));
          try {
            for (let j = 0; j < BULK / 1000; j++) await c.write(block);
            count('flood', BULK);
            await healthy(c, [], rng.fork(), label);
          } catch (err) {
            fail(`${label}: ${(err as Error).message}`);
          } finally {
            noteReplies(c);
            c.destroy();
          }
        }),
      ]);
    };

    /** One connection at a time: the biggest messages allowed, one byte too many, very deep nesting. */
    const heavy = async (): Promise<void> => {
      const rng = master.fork();
      const gen = new Gen(rng.fork(), target, 'heavy');
      // Exactly at the limit: 16 MiB of body, answered.
      const head = toJson({ jsonrpc: '2.0', id: 'at-limit', method: 'layer.read', params: { shadow: SHADOW, agent: AGENT, path: '' } });
      const pad = 16 * MIB - Buffer.byteLength(head);
      const atLimit = Buffer.from(head.replace('"path":""', `"path":"${'p'.repeat(pad)}"`), 'utf8');
      assert.strictEqual(atLimit.length, 16 * MIB);
      const frames: Framed[] = [{ category: 'near the size limit', body: atLimit, bytes: frame(atLimit) }];
      // Long strings everywhere (up to 4 MiB), deep nesting (100,000 and 1,000,000 levels).
      /** About n bytes of JSON string content: '\u0000' takes 6 bytes escaped, 'é' 2, '🙂' 4. */
      const long = (n: number): string => {
        const [ch, size] = rng.pick([
          ['x', 1],
          ['é', 2],
          ['\u0000', 6],
          ['🙂', 4],
        ] as const);
        return ch.repeat(Math.floor(n / size));
      };
      for (const n of [MIB, 2 * MIB, 4 * MIB]) {
        frames.push(gen.framed('long strings', gen.request('layer.read', { shadow: SHADOW, agent: AGENT, path: long(n) })));
        frames.push(gen.framed('long strings', gen.request('layer.read', { shadow: long(n), agent: AGENT, path: FILE })));
        frames.push(gen.framed('long strings', gen.request(long(n), {})));
        frames.push(gen.framed('long strings', gen.request('health', undefined, long(n))));
        frames.push(gen.framed('long strings', { jsonrpc: '2.0', id: 1, method: 'hello', params: { client: long(n) } }));
      }
      for (const depth of [100_000, 1_000_000]) {
        frames.push(gen.framed('deep nesting', deepArray(depth)));
        frames.push(gen.framed('deep nesting', deepObject(depth)));
        frames.push(gen.framed('deep nesting', gen.request('health', undefined, deepArray(depth))));
        frames.push(gen.framed('deep nesting', gen.request('layer.read', { shadow: deepObject(depth), agent: AGENT, path: FILE })));
        frames.push(gen.framed('deep nesting', gen.request('$/cancelRequest', { id: deepArray(depth) })));
        frames.push(gen.framed('deep nesting', { jsonrpc: '2.0', method: 'list', params: { deep: deepArray(depth) } }));
      }
      for (const f of frames) count(f.category);
      const c = await openConn();
      if (c) {
        try {
          // One at a time, each answered before the next: a client with one huge message in flight.
          for (const [i, f] of frames.entries()) await healthy(c, [f], rng, `heavy.${i}`);
        } catch (err) {
          fail(`heavy: ${(err as Error).message}`);
        } finally {
          noteReplies(c);
          c.destroy();
        }
      }
      // One byte over the limit, declared: answered and closed without reading the body.
      const over = await openConn();
      if (over) {
        await broken(over, [], Buffer.from(`Content-Length: ${16 * MIB + 1}\r\n\r\n`), 'over-limit');
        count('near the size limit');
        if (!/message too large/.test(String(over.replies.find((r) => r.id === null)?.error?.message)))
          fail(`over-limit: ${JSON.stringify(over.replies)}`);
        noteReplies(over);
        over.destroy();
      }
    };

    /** Frames written a few bytes at a time, one event-loop turn apart. */
    const dribble = async (): Promise<void> => {
      const rng = master.fork();
      await Promise.all(
        [0, 1, 2, 3].map(async (i) => {
          const c = await openConn();
          if (!c) return;
          const label = `dribble${i}`;
          const gen = new Gen(rng.fork(), target, label);
          const frames: Framed[] = [];
          while (frames.length < 60) {
            const f = gen.any([]);
            if (f.bytes.length <= 2000) frames.push({ ...f, category: 'dribbled' });
          }
          count('dribbled', frames.length);
          const bytes = Buffer.concat(frames.map((f) => f.bytes));
          const expected = frames.map((f) => expectFor(f.body)).filter((e): e is Expected => e !== undefined);
          try {
            for (let at = 0; at < bytes.length;) {
              const n = rng.between(1, 16);
              await c.write(bytes.subarray(at, at + n));
              at += n;
              await turn();
            }
            const probe = `probe-${label}`;
            await c.write(frame(JSON.stringify({ jsonrpc: '2.0', id: probe, method: 'health' })));
            await c.until(
              () => c.replies.length >= expected.length + 1 || c.closed,
              () => `${label}: ${c.replies.length} of ${expected.length + 1} replies`,
            );
            for (const p of unmatched(c.replies, expected, probe, pid)) fail(`${label}: ${p}`);
            noteReplies(c);
          } catch (err) {
            fail(`${label}: ${(err as Error).message}`);
          } finally {
            c.destroy();
          }
        }),
      );
    };

    /** Hundreds of connections at once that hang up at once, mid-header, mid-body, or break the framing. */
    const churn = async (): Promise<void> => {
      const rng = master.fork();
      // Bodies left half sent, 4 of a declared 16 MiB each: nothing of them may stay behind.
      for (let i = 0; i < 40; i++) {
        const c = await openConn();
        if (!c) continue;
        await c.write(Buffer.concat([Buffer.from(`Content-Length: ${16 * MIB}\r\n\r\n`), Buffer.alloc(4 * MIB, 0x20)]));
        count('half messages');
        c.destroy();
      }
      for (let wave = 0; wave < 2; wave++) {
        const all = await Promise.all(Array.from({ length: 250 }, () => openConn()));
        await Promise.all(
          all.map(async (c, i) => {
            if (!c) return;
            const crng = rng.fork();
            const what = crng.int(4);
            try {
              if (what === 0) c.destroy();
              else if (what === 1) {
                await c.write(halfMessage(crng, frame(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'list' }))));
                count('half messages');
                c.destroy();
              } else if (what === 2) await broken(c, [], brokenFraming(crng), `churn${wave}.${i}`);
              else {
                // Idle while the others come and go, then a probe: still served.
                await sleep(crng.int(50));
                await healthy(c, [], crng, `churn${wave}.${i}`);
              }
            } catch (err) {
              fail(`churn${wave}.${i}: ${(err as Error).message}`);
            } finally {
              noteReplies(c);
              c.destroy();
            }
          }),
        );
      }
    };

    try {
      await round('regressions', regressions);
      await round('sweep', sweep);
      for (let r = 0; r < CROWD_ROUNDS; r++) {
        await round(`crowd ${r + 1}`, () => crowd(r));
        if (r === 0) await round('flood', flood);
        if (r === 1) await round('heavy', heavy);
        if (r === 2) await round('dribble', dribble);
      }
      await round('churn', churn);
    } finally {
      stopKeeper = true;
      await keeperLoop;
    }
    const fuzzMs = Date.now() - started;

    // ---- after: the same daemon, memory back down, the shadow as it was
    assert.deepStrictEqual(
      failures,
      [],
      `${failures.length} problems (at most 50 kept), seed ${seed} (SHADOWFS_FUZZ_SEED=${seed} replays it)`,
    );
    assert.deepStrictEqual(keeperFailures, []);
    assert.strictEqual(internalErrors, 0, 'replies with an internal error');
    process.kill(pid, 0);
    assert.strictEqual((await k.request('status')).pid, pid, 'the same daemon');
    const liveEnd = await live();
    const rssEnd = rssOf(pid);
    clearInterval(sampler);
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    const table = [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([c, n]) => `${c} ${n}`);
    console.log(
      `      ${total} messages (${total - (counts.get('flood') ?? 0)} besides the floods) over ${connections} connections (at most ${maxOpen} open at once): ${table.join(', ')}`,
    );
    console.log(`      the well-behaved client was served ${served} requests: ${rounds.map((r) => `${r.name} ${r.served}`).join(', ')}`);
    console.log(
      `      daemon live memory (after a collection): start ${mib(liveStart)}, end ${mib(liveEnd)}; RSS: start ${mib(rssStart)}, peak ${mib(rssPeak)}, end ${mib(rssEnd)}; each round from start to peak: ${rounds.map((r) => `${r.name} ${mib(r.start)}-${mib(r.peak)}`).join(', ')}`,
    );
    console.log(
      `      fuzzing took ${(fuzzMs / 1000).toFixed(1)} s (${rounds.map((r) => `${r.name} ${(r.ms / 1000).toFixed(1)} s`).join(', ')})`,
    );
    const fuzzed = total - (counts.get('flood') ?? 0);
    assert.ok(fuzzed >= 100_000, `only ${fuzzed} malformed or random messages (besides the floods)`);
    assert.ok(rssPeak < rssStart + PEAK_BOUND, `the daemon's RSS peaked at ${mib(rssPeak)} (start ${mib(rssStart)})`);
    assert.ok(liveEnd < liveStart + LIVE_BOUND, `the daemon still holds ${mib(liveEnd)} (${mib(liveStart)} before the fuzzing)`);
    for (const r of rounds) {
      const bound = r.name === 'heavy' ? HEAVY_RISE_BOUND : ROUND_RISE_BOUND;
      assert.ok(r.peak - r.start < bound, `round ${r.name} took the daemon's RSS from ${mib(r.start)} to ${mib(r.peak)}`);
    }

    let known: string;
    try {
      known = fs.readFileSync(path.join(at, FILE), 'utf8');
    } catch (err) {
      // Seen once, on a machine loaded by two other test runs: say all there is to know.
      const tryIt = (f: () => unknown): string => {
        try {
          return JSON.stringify(f());
        } catch (e) {
          return (e as Error).message;
        }
      };
      const log = fs.readFileSync(logFile, 'utf8').split('\n').slice(-40).join('\n');
      throw new Error(
        `the known file, read through the mount: ${(err as Error).message}\n` +
          `  ls ${at}: ${tryIt(() => fs.readdirSync(at))}\n  ls notes: ${tryIt(() => fs.readdirSync(path.join(at, 'notes')))}\n` +
          `  again: ${tryIt(() => fs.readFileSync(path.join(at, FILE), 'utf8'))}\n` +
          `  list: ${JSON.stringify((await k.request('list')).shadows)}\n` +
          `  layer.read: ${Buffer.from((await k.request('layer.read', { shadow: SHADOW, agent: AGENT, path: FILE })).data, 'base64').toString()}\n` +
          `  the daemon's log, last lines:\n${log}`,
      );
    }
    assert.strictEqual(known, KNOWN, 'the known file, read through the mount');
    assert.ok(mountedPaths().has(at), 'the shadow is still mounted');
    assert.deepStrictEqual(await shape(), before, 'shadows, layers, changes and mounts as they were');
    // Nothing the daemon counts as its own error (internal errors, crashes of a handler) was logged.
    const log = fs.readFileSync(logFile, 'utf8');
    const newLog = log.length >= logStart ? log.slice(logStart) : log;
    const errors = newLog.split('\n').filter((l) => /"level":"error"/.test(l));
    assert.deepStrictEqual(errors.slice(0, 5), [], "errors in the daemon's log");

    await k.request('unmount', { shadow: SHADOW });
    assert.ok(!mountedPaths().has(at));
    await guard.check();

    // And it still stops when asked (nothing the fuzzing left keeps it alive).
    k.close();
    process.kill(pid, 'SIGTERM');
    const alive = (): boolean => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    for (const deadline = Date.now() + HANG_MS; alive(); await sleep(50))
      assert.ok(Date.now() < deadline, `hung: the daemon (pid ${pid}) did not exit after SIGTERM`);
  });
});
