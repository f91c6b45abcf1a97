// The operations of differential fuzzing, as data: generation from a seed, the starting tree,
// applying one operation to a directory (result as text: "OK …" or an errno code), and tree
// snapshots to compare. Pure Node.js, no shadowfs import: worker processes load only this.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';

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

/** The subtree that worker process `w` owns in a run with several processes. */
export const workerDir = (w: number): string => `w${w}`;

/**
 * Builds the same starting tree in `dir` for a given random source; with `workers`, also one
 * subtree per worker process (drawn after the rest, so single-process trees stay as they were).
 */
export function seedTree(dir: string, rand: () => number, workers = 0): void {
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
  for (let w = 0; w < workers; w++) {
    fs.mkdirSync(path.join(dir, workerDir(w)));
    mk(workerDir(w), 1);
  }
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

/**
 * One operation. `w` names the worker process that applies it: operations with a `w` that stand
 * next to each other run at the same time, each worker on its own subtree, so the outcome does
 * not depend on how they interleave. An operation without `w` runs alone, in the coordinator.
 */
export type Op = (
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
  | { k: 'folder'; name: string; data: string | null }
) & { w?: number };

export function describe(op: Op): string {
  const { k, w, ...rest } = op;
  return `${w === undefined ? '' : `[worker ${w}] `}${k} ${JSON.stringify(rest)}`;
}

/**
 * A random operation. With `workers` > 0, nearly all belong to one worker and stay inside its
 * subtree; a few run alone, in one subtree or in the shared top level. No operation joins two
 * subtrees: a rename that carried one name of a hard-linked file into another worker's subtree
 * would let two workers write one file at once, and the outcome would depend on timing. (Renames
 * across directories are covered by single-process runs.)
 */
export function randomOp(rand: () => number, layers: number, folderChanges: boolean, workers = 0): Op {
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)];
  const rpath = (): string => Array.from({ length: 1 + Math.floor(rand() * 3) }, () => pick(NAMES)).join('/');
  const data = crypto
    .createHash('sha256')
    .update(String(rand()))
    .digest('hex')
    .slice(0, Math.floor(rand() * 64));
  const r = rand();
  // With workers, barriers (switches, folder edits) are rarer so that workers get long runs.
  const barrier = workers > 0 ? 0.25 : 1;
  if (layers > 1 && r < 0.04 * barrier) return { k: 'switch', layer: Math.floor(rand() * layers) };
  if (folderChanges && r < 0.08 * barrier) return { k: 'folder', name: pick(['x', 'y', 'z']), data: rand() < 0.2 ? null : data };
  let p = rpath();
  let q = rpath();
  let w: number | undefined;
  if (workers > 0) {
    const alone = rand() < 0.03;
    const sub = Math.floor(rand() * (workers + (alone ? 1 : 0)));
    if (!alone) w = sub;
    const prefix = sub < workers ? `${workerDir(sub)}/` : '';
    p = prefix + p;
    q = prefix + q;
  }
  const op = pickOp(rand, p, q, data, pick);
  return w === undefined ? op : { ...op, w };
}

function pickOp(rand: () => number, p: string, q: string, data: string, pick: <T>(xs: T[]) => T): Op {
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
