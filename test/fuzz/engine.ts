// Differential fuzzing of a shadow against plain copies of the folder, one per layer: random
// file-system operations on the active layer, layer switches, and changes made directly in the
// folder (in a subtree the layers never touch, mirrored into every copy). Every errno and, at
// checkpoints, every tree must match. A failure is shrunk to a minimal list of operations.
// Operations are data, so a failing sequence can be replayed and printed.
// With several worker processes, operations tagged with a worker run at the same time, each
// worker on its own subtree; switches and folder edits are barriers between such rounds.
import { ChildProcess, fork } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { mount } from '../../src';
import { apply, describe, diffTrees, Entry, LIVE, Op, randomOp, rng, seedTree, snapshot } from './ops';
import type { Batch, BatchResult } from './worker';

export * from './ops';

/** What a replay needs besides the operations; the same for a run and its shrinking. */
export interface RunConfig {
  layers: number;
  /** Worker processes (0: every operation runs in this process). Decides the starting tree too. */
  workers?: number;
  /** Compare whole trees every this many operations. */
  checkEvery?: number;
  /** Kernel cache timeout of the shadow (seconds). */
  cacheTimeout?: number;
}

export interface FuzzConfig extends RunConfig {
  seed: number;
  ops: number;
  folderChanges: boolean;
}

export interface Failure {
  index: number;
  message: string;
}

/** Worker processes of one run; a batch goes to one worker and resolves with its results. */
class Workers {
  private readonly procs: ChildProcess[];
  private readonly pending = new Map<number, { resolve: (r: BatchResult) => void; reject: (e: Error) => void }>();
  private nextId = 0;

  constructor(n: number) {
    this.procs = Array.from({ length: n }, (_, w) => {
      const child = fork(path.join(__dirname, 'worker.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      child.on('message', (m: BatchResult) => {
        this.pending.get(m.id)?.resolve(m);
        this.pending.delete(m.id);
      });
      child.on('exit', (code, signal) => {
        for (const p of this.pending.values()) p.reject(new Error(`fuzz worker ${w} exited (code ${code}, signal ${signal})`));
        this.pending.clear();
      });
      return child;
    });
  }

  run(w: number, ops: Op[], ref: string, shadow: string): Promise<BatchResult> {
    const child = this.procs[w];
    if (!child) throw new Error(`operation for worker ${w}, but this run has ${this.procs.length} workers`);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      child.send({ id, ops, ref, shadow } satisfies Batch);
    });
  }

  close(): void {
    for (const p of this.procs) p.kill();
  }
}

/** Runs `ops` on a fresh folder, shadow and copies; returns the first mismatch, if any. */
export async function runOps(seed: number, ops: Op[], cfg: RunConfig): Promise<Failure | null> {
  const { layers, workers = 0, checkEvery = 100, cacheTimeout } = cfg;
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-test-fuzz-'));
  const pool = workers > 0 ? new Workers(workers) : null;
  try {
    const lower = path.join(base, 'lower');
    fs.mkdirSync(lower);
    seedTree(lower, rng(seed), workers);
    const refs = Array.from({ length: layers }, (_, i) => {
      const r = path.join(base, `ref${i}`);
      fs.cpSync(lower, r, { recursive: true, verbatimSymlinks: true });
      return r;
    });
    const shadow = await mount(lower, { mountPoint: path.join(base, 'mnt'), layer: 'l0', cacheTimeout });
    try {
      for (let i = 1; i < layers; i++) await shadow.createLayer(`l${i}`);
      let cur = 0;
      const check = (i: number): Failure | null => {
        let mine: Entry[];
        try {
          mine = snapshot(shadow.mountPoint);
        } catch (err) {
          return { index: i, message: `walking the shadow (layer l${cur}) after operation #${i} failed: ${(err as Error).message}` };
        }
        const d = diffTrees(snapshot(refs[cur]), mine);
        return d.length ? { index: i, message: `trees of layer l${cur} differ after operation #${i}:\n  ${d.join('\n  ')}` } : null;
      };
      const mismatch = (i: number, want: string, got: string): Failure | null =>
        want === got
          ? null
          : { index: i, message: `operation #${i} ${describe(ops[i])} in layer l${cur}: plain copy gave ${want}, shadow gave ${got}` };
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i];
        if (op.w !== undefined && pool) {
          // A round: the following worker operations, every worker's share at the same time.
          let end = i;
          const byWorker = new Map<number, number[]>();
          for (; end < ops.length && ops[end].w !== undefined; end++) {
            const w = ops[end].w as number;
            byWorker.set(w, [...(byWorker.get(w) ?? []), end]);
          }
          const results = new Map<number, [string, string]>();
          await Promise.all(
            [...byWorker].map(async ([w, idx]) => {
              const r = await pool.run(
                w,
                idx.map((k) => ops[k]),
                refs[cur],
                shadow.mountPoint,
              );
              idx.forEach((k, n) => results.set(k, r.results[n]));
            }),
          );
          for (let k = i; k < end; k++) {
            const [want, got] = results.get(k) as [string, string];
            const f = mismatch(k, want, got);
            if (f) return f;
          }
          const crossed = Math.floor(end / checkEvery) > Math.floor(i / checkEvery);
          i = end - 1;
          if (crossed) {
            const f = check(i);
            if (f) return f;
          }
          continue;
        }
        if (op.k === 'switch') {
          cur = op.layer;
          await shadow.activate(`l${cur}`);
          const f = check(i);
          if (f) return f;
          continue;
        }
        if (op.k === 'folder') {
          // The developer edits the folder: every layer's copy gets the same edit.
          for (const root of [lower, ...refs]) {
            const f = path.join(root, LIVE, op.name);
            if (op.data === null) fs.rmSync(f, { force: true });
            else fs.writeFileSync(f, op.data);
          }
          // A lookup reaches the folder at once; the kernel's cached listing of the directory
          // goes when the watcher reports the edit, a moment later. Both must show it.
          const want = op.data === null ? 'ENOENT' : `OK ${crypto.createHash('sha1').update(op.data).digest('hex')}`;
          const shown = (): string => {
            const read = apply({ k: 'read', p: `${LIVE}/${op.name}` }, shadow.mountPoint);
            let listed: boolean;
            try {
              listed = fs.readdirSync(path.join(shadow.mountPoint, LIVE)).includes(op.name);
            } catch (err) {
              return `${read}, listing failed: ${(err as Error).message}`;
            }
            return listed === (op.data !== null) ? read : `${read}, ${listed ? 'still listed' : 'not listed'}`;
          };
          const deadline = Date.now() + 20_000; // generous: a shared machine may be busy; it returns as soon as the edit shows
          let got = '';
          while (Date.now() < deadline && (got = shown()) !== want) {
            await new Promise((r) => setTimeout(r, 10));
          }
          if (got !== want) return { index: i, message: `operation #${i} ${describe(op)}: the shadow still showed ${got} after 20 s` };
          continue;
        }
        const f = mismatch(i, apply(op, refs[cur]), apply(op, shadow.mountPoint));
        if (f) return f;
        if (i % checkEvery === checkEvery - 1) {
          const c = check(i);
          if (c) return c;
        }
      }
      return check(ops.length - 1);
    } finally {
      await shadow.unmount({ lazy: true });
    }
  } finally {
    pool?.close();
    fs.rmSync(base, { recursive: true, force: true });
  }
}

export function generate(cfg: FuzzConfig): Op[] {
  const rand = rng(cfg.seed ^ 0x5eed);
  return Array.from({ length: cfg.ops }, () => randomOp(rand, cfg.layers, cfg.folderChanges, cfg.workers ?? 0));
}

/** Shrinks a failing sequence (delta debugging): the result still fails, and is much shorter. */
export async function shrink(seed: number, ops: Op[], cfg: RunConfig, budgetMs = 120_000): Promise<Op[]> {
  const deadline = Date.now() + budgetMs;
  let cur = ops;
  let chunk = Math.max(1, Math.floor(cur.length / 2));
  while (chunk >= 1 && Date.now() < deadline) {
    let removed = false;
    for (let start = 0; start < cur.length && Date.now() < deadline; start += chunk) {
      const candidate = [...cur.slice(0, start), ...cur.slice(start + chunk)];
      if (candidate.length && (await runOps(seed, candidate, { ...cfg, checkEvery: 1 }))) {
        cur = candidate;
        removed = true;
        start -= chunk;
      }
    }
    if (!removed) chunk = Math.floor(chunk / 2);
  }
  return cur;
}

/**
 * One fuzz run: generate, replay, and on failure shrink and describe a minimal reproducer.
 * `onFailure` hears of the failure before the shrinking starts, so that the seed is known even
 * when whoever waits gives up during the shrink.
 */
export async function fuzz(
  cfg: FuzzConfig,
  shrinkMs = 120_000,
  onFailure?: (failure: Failure) => void,
): Promise<{ ok: true } | { ok: false; failure: Failure; reproducer: Op[] }> {
  const ops = generate(cfg);
  const failure = await runOps(cfg.seed, ops, cfg);
  if (!failure) return { ok: true };
  onFailure?.(failure);
  const reproducer = await shrink(cfg.seed, ops.slice(0, failure.index + 1), cfg, shrinkMs);
  return { ok: false, failure, reproducer };
}
