// Differential test: one seeded random sequence of file-system operations is applied to a
// shadow of A and to a plain copy of A. Every operation must give the same result (value or
// errno) in both, and the trees must match (names, types, sizes, contents, modes, link counts).
// Reproduce a failure with SHADOWFS_SEED=<seed printed in the failure>.
import * as assert from 'assert';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { tempDir, withShadow } from './helpers/fixtures';

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NAMES = ['a', 'b', 'c', 'f', 'g'];

/** Builds the same starting tree in `dir` for a given seed. */
function seedTree(dir: string, rand: () => number): void {
  const mk = (rel: string, depth: number): void => {
    for (const n of NAMES) {
      const p = path.join(dir, rel, n);
      const r = rand();
      if (depth < 3 && r < 0.3) {
        fs.mkdirSync(p);
        mk(path.join(rel, n), depth + 1);
      } else if (r < 0.7) {
        fs.writeFileSync(p, crypto.randomBytes(Math.floor(rand() * 200)));
      } else if (r < 0.75) {
        fs.symlinkSync(NAMES[Math.floor(rand() * NAMES.length)], p);
      }
    }
  };
  mk('', 0);
}

interface Entry {
  path: string;
  desc: string;
}

function snapshot(root: string): Entry[] {
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

function code(fn: () => unknown): string {
  try {
    const v = fn();
    return v === undefined ? 'OK' : `OK ${typeof v === 'string' ? v : JSON.stringify(v)}`;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? String(err);
  }
}

type Op = { text: string; run: (root: string) => unknown };

function randomOp(rand: () => number): Op {
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)];
  const rpath = (): string => {
    const depth = 1 + Math.floor(rand() * 3);
    return Array.from({ length: depth }, () => pick(NAMES)).join('/');
  };
  const p = rpath();
  const q = rpath();
  const bytes = crypto
    .createHash('sha256')
    .update(String(rand()))
    .digest()
    .subarray(0, Math.floor(rand() * 32));
  const off = Math.floor(rand() * 300);
  const len = Math.floor(rand() * 300);
  const mode = pick([0o600, 0o644, 0o755, 0o700, 0o444]);
  const when = new Date(1_000_000_000_000 + Math.floor(rand() * 1e9));
  // Every random choice is made here, never inside run(), which runs once per tree.
  const flag = pick(['w', 'wx', 'a']);
  const target = pick(NAMES);
  const ops: Array<[number, Op]> = [
    [10, { text: `create ${p} (${flag})`, run: (r) => fs.writeFileSync(path.join(r, p), bytes, { flag }) }],
    [
      12,
      {
        text: `write ${p} @${off} (${bytes.length} bytes)`,
        run: (r) => {
          const fd = fs.openSync(path.join(r, p), 'r+');
          try {
            fs.writeSync(fd, bytes, 0, bytes.length, off);
          } finally {
            fs.closeSync(fd);
          }
        },
      },
    ],
    [5, { text: `truncate ${p} ${len}`, run: (r) => fs.truncateSync(path.join(r, p), len) }],
    [10, { text: `rename ${p} ${q}`, run: (r) => fs.renameSync(path.join(r, p), path.join(r, q)) }],
    [8, { text: `unlink ${p}`, run: (r) => fs.unlinkSync(path.join(r, p)) }],
    [8, { text: `mkdir ${p}`, run: (r) => fs.mkdirSync(path.join(r, p), { mode }) }],
    [6, { text: `rmdir ${p}`, run: (r) => fs.rmdirSync(path.join(r, p)) }],
    [3, { text: `symlink ${target} ${p}`, run: (r) => fs.symlinkSync(target, path.join(r, p)) }],
    [4, { text: `link ${p} ${q}`, run: (r) => fs.linkSync(path.join(r, p), path.join(r, q)) }],
    [5, { text: `chmod ${p} ${mode.toString(8)}`, run: (r) => fs.chmodSync(path.join(r, p), mode) }],
    [3, { text: `utimes ${p}`, run: (r) => fs.utimesSync(path.join(r, p), when, when) }],
    [
      8,
      {
        text: `read ${p}`,
        run: (r) =>
          crypto
            .createHash('sha1')
            .update(fs.readFileSync(path.join(r, p)))
            .digest('hex'),
      },
    ],
    [6, { text: `readdir ${p}`, run: (r) => fs.readdirSync(path.join(r, p)).sort().join(',') }],
    [
      6,
      {
        text: `lstat ${p}`,
        run: (r) => {
          const st = fs.lstatSync(path.join(r, p));
          return `${st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : 'f'} ${(st.mode & 0o7777).toString(8)} ${st.isDirectory() ? '' : st.size}`;
        },
      },
    ],
    [2, { text: `rm -rf ${p}`, run: (r) => fs.rmSync(path.join(r, p), { recursive: true, force: true }) }],
  ];
  const total = ops.reduce((s, [w]) => s + w, 0);
  let x = rand() * total;
  for (const [w, op] of ops) {
    if ((x -= w) < 0) return op;
  }
  return ops[0][1];
}

describe('differential: a shadow behaves like a plain copy of the folder', function () {
  // With kernel caching on, stale caches would show up as differences; with it off, every
  // lookup reaches the overlay, which tests its rules without the kernel's help.
  for (const cacheTimeout of [1, 0]) {
    it(`gives the same results and the same tree for a seeded random sequence of 2,500 operations (kernel cache ${cacheTimeout} s)`, async () => {
      const seed = process.env.SHADOWFS_SEED ? Number(process.env.SHADOWFS_SEED) : crypto.randomInt(1, 2 ** 31);
      const count = Number(process.env.SHADOWFS_DIFF_OPS ?? 2500);
      const base = tempDir('diff-base');
      seedTree(base, rng(seed));
      const lower = tempDir('diff-lower');
      const ref = tempDir('diff-ref');
      fs.cpSync(base, lower, { recursive: true, verbatimSymlinks: true });
      fs.cpSync(base, ref, { recursive: true, verbatimSymlinks: true });
      const rand = rng(seed ^ 0x5eed);
      const history: string[] = [];
      const fail = (msg: string): never => {
        assert.fail(`${msg}\nseed=${seed} (rerun with SHADOWFS_SEED=${seed})\nlast operations:\n  ${history.slice(-15).join('\n  ')}`);
      };
      await withShadow(
        lower,
        (_s, mp) => {
          for (let i = 0; i < count; i++) {
            const op = randomOp(rand);
            const want = code(() => op.run(ref));
            const got = code(() => op.run(mp));
            history.push(`#${i} ${op.text} -> ${want}`);
            if (want !== got) fail(`operation #${i} "${op.text}": plain copy gave ${want}, shadow gave ${got}`);
            if (i % 250 === 249 || i === count - 1) {
              const a = snapshot(ref);
              const b = snapshot(mp);
              if (JSON.stringify(a) !== JSON.stringify(b)) {
                const diff = [
                  ...a.filter((e) => !b.some((f) => f.path === e.path && f.desc === e.desc)).map((e) => `copy:   ${e.path} ${e.desc}`),
                  ...b.filter((e) => !a.some((f) => f.path === e.path && f.desc === e.desc)).map((e) => `shadow: ${e.path} ${e.desc}`),
                ];
                fail(`trees differ after operation #${i}:\n  ${diff.join('\n  ')}`);
              }
            }
          }
        },
        { cacheTimeout },
      );
    });
  }
});
