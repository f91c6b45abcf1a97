// Differential fuzzing of a shadow against plain copies of the folder, one per layer: random
// file-system operations on the active layer, layer switches, and changes made directly in the
// folder (in a subtree the layers never touch, mirrored into every copy). Every errno and, at
// checkpoints, every tree must match. A failure is shrunk to a minimal list of operations.
// Operations are data, so a failing sequence can be replayed and printed.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { mount } from '../../src';

export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const NAMES = ['a', 'b', 'c', 'f', 'g'];
/** Only folder-side changes happen under this name; layer operations never use it. */
export const LIVE = 'live';

/** Builds the same starting tree in `dir` for a given random source. */
export function seedTree(dir: string, rand: () => number): void {
  const mk = (rel: string, depth: number): void => {
    for (const n of NAMES) {
      const p = path.join(dir, rel, n);
      const r = rand();
      if (depth < 3 && r < 0.3) {
        fs.mkdirSync(p);
        mk(path.join(rel, n), depth + 1);
      } else if (r < 0.7) {
        fs.writeFileSync(p, Buffer.from(Array.from({ length: Math.floor(rand() * 200) }, () => Math.floor(rand() * 256))));
      } else if (r < 0.75) {
        fs.symlinkSync(NAMES[Math.floor(rand() * NAMES.length)], p);
      }
    }
  };
  mk('', 0);
  fs.mkdirSync(path.join(dir, LIVE));
}

export interface Entry {
  path: string;
  desc: string;
}

/** Names, types, modes, sizes, link counts and contents of a tree, in path order. */
export function snapshot(root: string): Entry[] {
  const out: Entry[] = [];
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(path.join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const abs = path.join(root, r);
      const st = fs.lstatSync(abs);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isDirectory()) {
        out.push({ path: r, desc: `dir ${mode}` });
        walk(r);
      } else if (st.isSymbolicLink()) {
        out.push({ path: r, desc: `link -> ${fs.readlinkSync(abs)} nlink=${st.nlink}` });
      } else {
        const hash = crypto.createHash('sha1').update(fs.readFileSync(abs)).digest('hex').slice(0, 12);
        out.push({ path: r, desc: `file ${mode} size=${st.size} nlink=${st.nlink} ${hash}` });
      }
    }
  };
  walk('');
  return out;
}

export function diffTrees(a: Entry[], b: Entry[]): string[] {
  const key = (e: Entry): string => `${e.path} ${e.desc}`;
  const sa = new Set(a.map(key));
  const sb = new Set(b.map(key));
  return [
    ...a.filter((e) => !sb.has(key(e))).map((e) => `copy:   ${key(e)}`),
    ...b.filter((e) => !sa.has(key(e))).map((e) => `shadow: ${key(e)}`),
  ];
}

export type Op =
  | { k: 'create'; p: string; flag: string; data: string }
  | { k: 'write'; p: string; off: number; data: string }
  | { k: 'truncate'; p: string; len: number }
  | { k: 'rename'; p: string; q: string }
  | { k: 'unlink'; p: string }
  | { k: 'mkdir'; p: string; mode: number }
  | { k: 'rmdir'; p: string }
  | { k: 'symlink'; p: string; target: string }
  | { k: 'link'; p: string; q: string }
  | { k: 'chmod'; p: string; mode: number }
  | { k: 'utimes'; p: string; t: number }
  | { k: 'read'; p: string }
  | { k: 'readdir'; p: string }
  | { k: 'lstat'; p: string }
  | { k: 'rmrf'; p: string }
  | { k: 'switch'; layer: number }
  | { k: 'folder'; name: string; data: string | null };

export function describe(op: Op): string {
  const { k, ...rest } = op;
  return `${k} ${JSON.stringify(rest)}`;
}

export function randomOp(rand: () => number, layers: number, folderChanges: boolean): Op {
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)];
  const rpath = (): string => Array.from({ length: 1 + Math.floor(rand() * 3) }, () => pick(NAMES)).join('/');
  const data = crypto
    .createHash('sha256')
    .update(String(rand()))
    .digest('hex')
    .slice(0, Math.floor(rand() * 64));
  const r = rand();
  if (layers > 1 && r < 0.04) return { k: 'switch', layer: Math.floor(rand() * layers) };
  if (folderChanges && r < 0.08) return { k: 'folder', name: pick(['x', 'y', 'z']), data: rand() < 0.2 ? null : data };
  const p = rpath();
  const q = rpath();
  const table: Array<[number, () => Op]> = [
    [10, () => ({ k: 'create', p, flag: pick(['w', 'wx', 'a']), data })],
    [12, () => ({ k: 'write', p, off: Math.floor(rand() * 300), data })],
    [5, () => ({ k: 'truncate', p, len: Math.floor(rand() * 300) })],
    [10, () => ({ k: 'rename', p, q })],
    [8, () => ({ k: 'unlink', p })],
    [8, () => ({ k: 'mkdir', p, mode: pick([0o755, 0o700]) })],
    [6, () => ({ k: 'rmdir', p })],
    [3, () => ({ k: 'symlink', p, target: pick(NAMES) })],
    [4, () => ({ k: 'link', p, q })],
    [5, () => ({ k: 'chmod', p, mode: pick([0o600, 0o644, 0o755, 0o700, 0o444]) })],
    [3, () => ({ k: 'utimes', p, t: 1_000_000_000 + Math.floor(rand() * 1e6) })],
    [8, () => ({ k: 'read', p })],
    [6, () => ({ k: 'readdir', p })],
    [6, () => ({ k: 'lstat', p })],
    [2, () => ({ k: 'rmrf', p })],
  ];
  let x = rand() * table.reduce((s, [w]) => s + w, 0);
  for (const [w, make] of table) if ((x -= w) < 0) return make();
  return table[0][1]();
}

/** Applies a file-system operation under `root`; returns its result as text ("OK …" or an errno code). */
export function apply(op: Op, root: string): string {
  const p = 'p' in op ? path.join(root, op.p) : '';
  const q = 'q' in op ? path.join(root, op.q) : '';
  try {
    switch (op.k) {
      case 'create':
        fs.writeFileSync(p, op.data, { flag: op.flag });
        return 'OK';
      case 'write': {
        const fd = fs.openSync(p, 'r+');
        try {
          fs.writeSync(fd, Buffer.from(op.data), 0, op.data.length, op.off);
        } finally {
          fs.closeSync(fd);
        }
        return 'OK';
      }
      case 'truncate':
        fs.truncateSync(p, op.len);
        return 'OK';
      case 'rename':
        fs.renameSync(p, q);
        return 'OK';
      case 'unlink':
        fs.unlinkSync(p);
        return 'OK';
      case 'mkdir':
        fs.mkdirSync(p, { mode: op.mode });
        return 'OK';
      case 'rmdir':
        fs.rmdirSync(p);
        return 'OK';
      case 'symlink':
        fs.symlinkSync(op.target, p);
        return 'OK';
      case 'link':
        fs.linkSync(p, q);
        return 'OK';
      case 'chmod':
        fs.chmodSync(p, op.mode);
        return 'OK';
      case 'utimes':
        fs.utimesSync(p, op.t, op.t);
        return 'OK';
      case 'read':
        return `OK ${crypto.createHash('sha1').update(fs.readFileSync(p)).digest('hex')}`;
      case 'readdir':
        return `OK ${fs.readdirSync(p).sort().join(',')}`;
      case 'lstat': {
        const st = fs.lstatSync(p);
        return `OK ${st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : 'f'} ${(st.mode & 0o7777).toString(8)} ${st.isDirectory() ? '' : st.size}`;
      }
      case 'rmrf':
        fs.rmSync(p, { recursive: true, force: true });
        return 'OK';
      default:
        return 'OK';
    }
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? String(err);
  }
}

export interface FuzzConfig {
  seed: number;
  ops: number;
  layers: number;
  folderChanges: boolean;
  /** Compare whole trees every this many operations. */
  checkEvery?: number;
  /** Kernel cache timeout of the shadow (seconds). */
  cacheTimeout?: number;
}

export interface Failure {
  index: number;
  message: string;
}

/** Runs `ops` on a fresh folder, shadow and copies; returns the first mismatch, if any. */
export async function runOps(seed: number, ops: Op[], layers: number, checkEvery = 100, cacheTimeout?: number): Promise<Failure | null> {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-test-fuzz-'));
  try {
    const lower = path.join(base, 'lower');
    fs.mkdirSync(lower);
    seedTree(lower, rng(seed));
    const refs = Array.from({ length: layers }, (_, i) => {
      const r = path.join(base, `ref${i}`);
      fs.cpSync(lower, r, { recursive: true, verbatimSymlinks: true });
      return r;
    });
    const shadow = await mount(lower, { mountPoint: path.join(base, 'mnt'), layer: 'l0', cacheTimeout });
    try {
      for (let i = 1; i < layers; i++) shadow.layer(`l${i}`);
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
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i];
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
          const want = op.data === null ? 'ENOENT' : `OK ${crypto.createHash('sha1').update(op.data).digest('hex')}`;
          const deadline = Date.now() + 2000;
          let got = '';
          while (Date.now() < deadline && (got = apply({ k: 'read', p: `${LIVE}/${op.name}` }, shadow.mountPoint)) !== want) {
            await new Promise((r) => setTimeout(r, 10));
          }
          if (got !== want) return { index: i, message: `operation #${i} ${describe(op)}: the shadow still showed ${got} after 2 s` };
          continue;
        }
        const want = apply(op, refs[cur]);
        const got = apply(op, shadow.mountPoint);
        if (want !== got)
          return { index: i, message: `operation #${i} ${describe(op)} in layer l${cur}: plain copy gave ${want}, shadow gave ${got}` };
        if (i % checkEvery === checkEvery - 1) {
          const f = check(i);
          if (f) return f;
        }
      }
      return check(ops.length - 1);
    } finally {
      await shadow.unmount({ lazy: true });
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
}

export function generate(cfg: FuzzConfig): Op[] {
  const rand = rng(cfg.seed ^ 0x5eed);
  return Array.from({ length: cfg.ops }, () => randomOp(rand, cfg.layers, cfg.folderChanges));
}

/** Shrinks a failing sequence (delta debugging): the result still fails, and is much shorter. */
export async function shrink(seed: number, ops: Op[], layers: number, cacheTimeout?: number, budgetMs = 120_000): Promise<Op[]> {
  const deadline = Date.now() + budgetMs;
  let cur = ops;
  let chunk = Math.max(1, Math.floor(cur.length / 2));
  while (chunk >= 1 && Date.now() < deadline) {
    let removed = false;
    for (let start = 0; start < cur.length && Date.now() < deadline; start += chunk) {
      const candidate = [...cur.slice(0, start), ...cur.slice(start + chunk)];
      if (candidate.length && (await runOps(seed, candidate, layers, 1, cacheTimeout))) {
        cur = candidate;
        removed = true;
        start -= chunk;
      }
    }
    if (!removed) chunk = Math.floor(chunk / 2);
  }
  return cur;
}

/** One fuzz run: generate, replay, and on failure shrink and describe a minimal reproducer. */
export async function fuzz(cfg: FuzzConfig): Promise<{ ok: true } | { ok: false; failure: Failure; reproducer: Op[] }> {
  const ops = generate(cfg);
  const failure = await runOps(cfg.seed, ops, cfg.layers, cfg.checkEvery ?? 100, cfg.cacheTimeout);
  if (!failure) return { ok: true };
  const reproducer = await shrink(cfg.seed, ops.slice(0, failure.index + 1), cfg.layers, cfg.cacheTimeout);
  return { ok: false, failure, reproducer };
}
