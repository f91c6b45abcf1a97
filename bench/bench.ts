// `npm run bench [-- --quick]`: shadowfs against the native folder and the alternatives, side by
// side in one run, interleaved and repeated; medians and ratios to native go to bench/results/
// as JSON, a Markdown table and an SVG chart, with issue 18's targets table (bench/targets.ts)
// and each shadowfs contender's FUSE requests per workload (bench/requests.ts). Needs root
// (mounts, drop_caches). Trees: `generated` (node_modules-like, git ignores that part), `ts`
// (this repository at HEAD, npm ci, built) and `repo50k` (every file tracked by git).
// `npm run bench -- [--quick] --only responsiveness` runs only the event-loop section
// (bench/responsiveness.ts) and writes bench/results/<time>-responsiveness.{json,md};
// `--only lints` likewise for the lints section.
// `npm run bench -- [--quick] --only=TEXT [--only=TEXT2 ...]` runs only the rows whose name
// contains one of the texts (case-insensitive; e.g. `--only=grep --only=repo50k`), builds only
// the trees they need, skips the shadowfs-only sections and writes bench/results/<time>-rows.{json,md}
// (latest.* left as they are). Ctrl-C once stops after the current row and writes what was
// measured (<time>-stopped.{json,md}); twice quits. Running DAMON reclaim is paused for the run (`--keep-reclaim`
// leaves it running; see pauseReclaim).
import { spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { mount, Shadow, ShadowClient } from '../src';
import { addon } from '../src/shadow/native';
import { lintsBench, lintsMarkdown } from './lints';
import { addRun, countsDelta, countsLine, Counts, perRun, RequestCounts, requestCountsMarkdown } from './requests';
import { responsiveness, responsivenessMarkdown, ResponsivenessRow, TARGET_MAX_DELAY_MS } from './responsiveness';
import { ResultRow, targetRows, targets, targetsMarkdown, TARGET_CONTENDER, Tree, workloadNames } from './targets';

const quick = process.argv.includes('--quick');
// Quick mode stays under 3 minutes on a 2-core machine: a smaller tree, fewer repetitions, and
// tsc over src/ only (tsc's fixed cost, loading its libraries, is in both).
const FILES = quick ? 5_000 : 50_000;
const REPS = quick ? 2 : 5;
// A row (or a contender's ready copy) whose runs take longer than SLOW_MS gets SLOW_REPS runs
// rather than REPS: at 20 s or more a run, the spread between runs is a small part of it, and
// five runs of eleven contenders made each tsc row half an hour.
const SLOW_MS = 15_000;
const SLOW_REPS = Math.min(REPS, 3);
const SMALL_FILES = quick ? 1_000 : 10_000;
// The folder's file another process appends to while the event loop is watched (MiB).
const RESP_MIB = quick ? 256 : 1024;
// One-line edits per lints measurement.
const LINT_EDITS = quick ? 10 : 30;
/** Agents in the lints fleet row (`--fleet=N`; issue 33 measures 100). */
const LINT_FLEET = Number(process.argv.find((x) => x.startsWith('--fleet='))?.slice(8) ?? (quick ? 10 : 20));
// Every --only value (`--only X` or `--only=X`, repeatable): one section name alone, or texts
// that pick rows by name.
const onlyValues = process.argv.flatMap((a, i) =>
  a === '--only' ? [process.argv[i + 1] ?? ''] : a.startsWith('--only=') ? [a.slice(7)] : [],
);
const SECTIONS = ['responsiveness', 'lints'];
const only = onlyValues.find((v) => SECTIONS.includes(v));
if ((only !== undefined && onlyValues.length > 1) || onlyValues.some((v) => v.trim() === '')) {
  console.error(
    `bench: --only takes one section ("responsiveness" or "lints") alone, or texts that pick rows by name; got ${JSON.stringify(onlyValues)}`,
  );
  process.exit(2);
}
/** The row filter (`--only=TEXT`), or undefined for a full run. */
const rowFilter = only === undefined && onlyValues.length ? onlyValues.map((v) => v.toLowerCase()) : undefined;
const selected = (row: string): boolean => !rowFilter || rowFilter.some((f) => row.toLowerCase().includes(f));
const W = workloadNames(SMALL_FILES);
const repo = path.join(__dirname, '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-bench-'));
// However the run ends (done, failed, or stopped by a signal the run handles), the work
// directory goes, unless something is still mounted under it.
process.on('exit', () => {
  const mounted = fs
    .readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[1]?.startsWith(work));
  if (!mounted) fs.rmSync(work, { recursive: true, force: true });
});

// DAMON's kernel threads (kdamonds) set up through sysfs. Some machines run one with a `pageout`
// scheme (proactive reclaim): every page left alone for about 30 s is paged out, file cache
// included. In a full run the other contenders take longer than that between two runs of one,
// so the "warm" rows were partly cold, for FUSE more than for native (its directory listings
// and file pages are page cache; native's dentries and inodes are slab, which that scheme does
// not touch). The run pauses every running kdamond and starts it again when it ends, however it
// ends; `--keep-reclaim` measures with them running. The results say which.
const DAMON = '/sys/kernel/mm/damon/admin/kdamonds';
const keepReclaim = process.argv.includes('--keep-reclaim');

/** Pauses the running kdamonds (their settings stay in sysfs); returns what it paused, and how to resume. */
function pauseReclaim(): { paused: string[]; resume: () => void } {
  const running = (fs.existsSync(DAMON) ? fs.readdirSync(DAMON) : [])
    .filter((k) => /^\d+$/.test(k))
    .filter((k) => fs.readFileSync(path.join(DAMON, k, 'state'), 'utf8').trim() === 'on');
  const paused: string[] = [];
  let resumed = false;
  const resume = (): void => {
    if (resumed) return;
    resumed = true;
    for (const k of paused) {
      try {
        fs.writeFileSync(path.join(DAMON, k, 'state'), 'on');
      } catch (e) {
        console.error(
          `bench: could not start DAMON's kdamond ${k} again (${(e as Error).message}): write "on" to ${path.join(DAMON, k, 'state')}`,
        );
      }
    }
  };
  // Also on a failure or a signal: the machine gets its reclaim back whatever happens.
  process.on('exit', resume);
  // SIGINT is the run's own (stopAsked, below): it stops between rows; resume then runs on exit.
  for (const signal of ['SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      resume();
      process.exit(128 + (os.constants.signals[signal] ?? 0));
    });
  }
  for (const k of running) {
    fs.writeFileSync(path.join(DAMON, k, 'state'), 'off');
    paused.push(k);
  }
  return { paused, resume };
}

/**
 * Ctrl-C (SIGINT) once: the run finishes the row it is in (a row whose command the same Ctrl-C
 * stopped is counted as not measured), skips the rest and writes what it measured to
 * bench/results/<time>-stopped.{json,md}, latest.* untouched: two hours of rows are not lost
 * to one late interruption. Twice: it quits at once and writes nothing.
 */
let stopAsked = false;
process.on('SIGINT', () => {
  if (stopAsked) process.exit(130);
  stopAsked = true;
  console.error('\nbench: stopping after this row and writing what was measured (Ctrl-C again quits now, writing nothing)');
});
/** Lets a pending SIGINT reach its handler: the rows run synchronously, between awaits it can. */
const stopRequested = async (): Promise<boolean> => {
  await new Promise((resolve) => setImmediate(resolve));
  return stopAsked;
};
/** Seconds since `t0` (a process.hrtime.bigint()), for the progress lines. */
const secondsSince = (t0: bigint): string => `${Math.round(Number(process.hrtime.bigint() - t0) / 1e9)} s`;

/** What the results say of reclaim during the run. */
function reclaimNote(paused: string[] | undefined): string {
  if (keepReclaim) return 'DAMON reclaim left running (--keep-reclaim).';
  if (!paused?.length) return 'No DAMON kdamond was running.';
  return `DAMON kdamond${paused.length > 1 ? 's' : ''} ${paused.join(', ')} (proactive reclaim) paused for the run, started again after it; \`--keep-reclaim\` measures with ${paused.length > 1 ? 'them' : 'it'} running.`;
}

/**
 * Runs a bash command; returns its time and output. A non-zero exit throws, unless its status is
 * in `okStatus` (grep exits 1 when nothing matched).
 */
function sh(cmd: string, cwd?: string, opts: { okStatus?: number[] } = {}): { ms: number; out: string } {
  const t0 = process.hrtime.bigint();
  const r = spawnSync('bash', ['-c', cmd], { cwd, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const ok = r.status === 0 || (r.status !== null && (opts.okStatus ?? []).includes(r.status));
  if (!ok) throw new Error(`${cmd} (in ${cwd}) failed (${r.status ?? r.signal ?? r.error}): ${r.stderr.slice(0, 500)}`);
  return { ms, out: r.stdout };
}

// gc.auto=0: a commit of the generated tree's 50,000 files used to start git's background gc,
// which pruned loose objects while the next contender's `cp -r` copied them (cp failed).
const GIT = 'git -c user.name=bench -c user.email=bench@example.com -c gc.auto=0';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** A small source-like module, 90 to 720 bytes. */
const moduleBody = (n: number): string =>
  `// generated module ${n}\nexport function f${n}(x: number): number {\n  return x * ${n} + ${n % 7};\n}\n`.repeat(1 + (n % 8));

/** A source-like tree with a node_modules-like deep tree, committed to git. */
function generateTree(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  const srcFiles = Math.floor(FILES * 0.3);
  for (let i = 0; i < srcFiles; i++) {
    const d = path.join(dir, 'src', `mod${i % 40}`, `sub${i % 7}`);
    fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(d, `file${i}.ts`), moduleBody(i));
  }
  for (let i = 0; i < FILES - srcFiles; i++) {
    const pkg = `pkg${i % 300}`;
    const d = path.join(dir, 'node_modules', pkg, 'lib', `part${i % 5}`, `deep${i % 3}`);
    fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(d, `m${i}.js`), `module.exports = ${i};\n`.repeat(1 + (i % 20)));
    if (i < 300) fs.writeFileSync(path.join(dir, 'node_modules', pkg, 'package.json'), `{"name":"${pkg}","version":"1.0.${i}"}\n`);
  }
  fs.writeFileSync(path.join(dir, '.gitignore'), 'node_modules/\n');
  sh(`${GIT} init -q && ${GIT} add -A && ${GIT} commit -qm init`, dir);
}

/** big: one 256 MiB file of varied bytes, alone in its tree (the big-file row). */
function generateBig(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  const chunk = Buffer.alloc(1 << 20);
  const fd = fs.openSync(path.join(dir, 'big.bin'), 'w');
  for (let i = 0; i < 256; i++) {
    for (let j = 0; j < chunk.length; j += 4) chunk.writeUInt32LE((i * 7919 + j * 2654435761) >>> 0, j);
    fs.writeSync(fd, chunk);
  }
  fs.closeSync(fd);
}

/** The word the grep rows look for: in one repo50k file of 50, in no generated file. */
const NEEDLE = 'needle';

/**
 * repo50k: a source repository of FILES files, every one tracked by git (the generated tree's git
 * ignores its node_modules part): packages of source and test folders, 20 files a folder, one
 * file in 50 mentioning NEEDLE. Committed once and packed as a real repository is (else grep -r
 * reads as many loose objects in .git as there are files; no delta search, to stay cheap); the
 * index is then refreshed a second later so that no entry is racily clean (git would read such
 * files again on every status).
 */
function generateRepo(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  for (let i = 0; i < FILES; i++) {
    const folder = Math.floor(i / 20);
    const d = path.join(dir, 'packages', `pkg${folder % 40}`, folder % 5 === 0 ? 'test' : 'src', `m${folder}`);
    if (i % 20 === 0) fs.mkdirSync(d, { recursive: true });
    const text = moduleBody(i) + (i % 50 === 7 ? `// TODO(${NEEDLE}): revisit f${i}\n` : '');
    fs.writeFileSync(path.join(d, i % 10 === 9 ? `notes${i}.md` : `file${i}.ts`), text);
  }
  fs.writeFileSync(path.join(dir, 'README.md'), `# repo50k\n\n${FILES} generated files, all tracked.\n`);
  sh(
    `${GIT} init -q && ${GIT} add -A && ${GIT} commit -qm init && git -c pack.window=0 repack -adq && sleep 1 && git update-index -q --refresh`,
    dir,
  );
}

const NPM_CI = 'npm ci --prefer-offline --no-audit --no-fund --loglevel=error';
const TSC = 'node node_modules/typescript/bin/tsc -p tsconfig.json';
/** The build `npm run build:ts` does: tsc, then the protocol schema (the unit tests read it). */
const TSC_BUILD = `${TSC} && node scripts/protocol-schema.js`;
/** The two packages the install row installs, at the versions the project's lockfile pins (so its install cached them). */
const INSTALL_VERSIONS = (() => {
  const lock = JSON.parse(fs.readFileSync(path.join(repo, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string }>;
  };
  const v = (name: string): string => {
    const version = lock.packages[`node_modules/${name}`]?.version;
    if (!version) throw new Error(`package-lock.json pins no ${name}: the install row needs it`);
    return version;
  };
  return { typescript: v('typescript'), zod: v('zod') };
})();
const TSC_CHECK = `node node_modules/typescript/bin/tsc -p ${quick ? 'tsconfig.quick.json' : 'tsconfig.json'} --noEmit`;

/**
 * A real TypeScript project: this repository at HEAD as a git repository of its own, its
 * dependencies installed from the npm registry by `npm ci` from its lockfile, and built once, as
 * a developer's working folder is. Its test suite is its unit tests (mocha, no mounts).
 */
function tsProject(dir: string): number {
  fs.mkdirSync(dir, { recursive: true });
  try {
    sh(`git -C '${repo}' rev-parse --verify -q HEAD > /dev/null`);
  } catch {
    throw new Error(`the benchmark builds its TypeScript project from this repository's HEAD; ${repo} is not a git checkout`);
  }
  sh(`git -C '${repo}' archive HEAD | tar -x -C '${dir}'`);
  fs.writeFileSync(path.join(dir, 'tsconfig.quick.json'), JSON.stringify({ extends: './tsconfig.json', include: ['src/**/*.ts'] }));
  sh(`${GIT} init -q && ${GIT} add -A && ${GIT} commit -qm snapshot`, dir);
  sh(NPM_CI, dir);
  // The install row runs npm --offline: npm ci cached the tarballs but not the registry's
  // package documents that resolving typescript@X and zod@Y needs (a fresh machine's cache has
  // none: the row failed there with ENOTCACHED after an hour and a half of the run).
  sh(`npm cache add typescript@${INSTALL_VERSIONS.typescript} zod@${INSTALL_VERSIONS.zod} --loglevel=error`, dir);
  sh(TSC_BUILD, dir);
  return Number(sh('find . -path ./.git -prune -o -type f -print | wc -l', dir).out.trim());
}

/** A ready copy: its path, how to tear it down, and for shadowfs its FUSE request counts. */
interface Env {
  dir: string;
  teardown: () => Promise<void>;
  requestCounts?: () => Counts;
}

interface Contender {
  name: string;
  /** The trees it applies to (default: all). */
  trees?: Tree[];
  /** Makes a ready, runnable copy of `lower`. */
  setup(lower: string, tag: string): Promise<Env>;
}

/** The shadow's request counter, if this build's Shadow has one (it may be fuse_ll's alone). */
function requestCounter(s: Shadow): (() => Counts) | undefined {
  const f = (s as { requestCounts?: () => Counts }).requestCounts;
  return typeof f === 'function' ? () => f.call(s) : undefined;
}

const URING_SWITCH = '/sys/module/fuse/parameters/enable_uring';

/** Runs `f` (a mount) with FUSE over io_uring enabled system-wide, then restores the switch. */
async function withUringEnabled<T>(f: () => Promise<T>): Promise<T> {
  if (!fs.existsSync(URING_SWITCH)) return f(); // no FUSE over io_uring here: the setup warns
  const was = fs.readFileSync(URING_SWITCH, 'utf8').trim();
  fs.writeFileSync(URING_SWITCH, 'Y');
  try {
    return await f();
  } finally {
    fs.writeFileSync(URING_SWITCH, was);
  }
}

const contenders: Contender[] = [
  { name: 'native', setup: async (lower) => ({ dir: lower, teardown: async () => undefined }) },
  // Every backend this build has: fuse_ll (Linux) and fuse_hl (the portable one Windows uses),
  // each in its default I/O mode; fuse_ll once more with an OPEN round trip per opened file (its
  // mode before #18), so that one run shows what skipping them gains.
  ...addon().backends.flatMap((backend): Contender[] => [
    {
      name: `shadowfs (${backend})`,
      setup: async (lower, tag) => {
        const s: Shadow = await mount(lower, { mountPoint: path.join(work, `sfs-${backend}-${tag}`), backend, io: 'cached' });
        return { dir: s.mountPoint, teardown: () => s.unmount({ lazy: true }), requestCounts: requestCounter(s) };
      },
    },
    ...(backend === 'fuse_ll'
      ? [
          {
            name: `shadowfs (${backend}, io: open)`,
            setup: async (lower: string, tag: string) => {
              const s: Shadow = await mount(lower, { mountPoint: path.join(work, `sfs-${backend}-open-${tag}`), backend, io: 'open' });
              return { dir: s.mountPoint, teardown: () => s.unmount({ lazy: true }), requestCounts: requestCounter(s) };
            },
          },
          {
            // The default mode with requests carried by FUSE over io_uring: the kernel offers it
            // only while enable_uring is Y (read at the mount's INIT), so it is set for this
            // mount alone and put back at once.
            name: `shadowfs (${backend}, io_uring)`,
            setup: async (lower: string, tag: string) => {
              const s: Shadow = await withUringEnabled(() =>
                mount(lower, { mountPoint: path.join(work, `sfs-${backend}-ring-${tag}`), backend, io: 'cached', ioUring: true }),
              );
              if (!s.kernelTransport().ioUring)
                console.error(
                  `  warning: io_uring is off on this mount (${JSON.stringify(s.kernelTransport())}); its column measures /dev/fuse`,
                );
              return { dir: s.mountPoint, teardown: () => s.unmount({ lazy: true }), requestCounts: requestCounter(s) };
            },
          },
          {
            // Read-only opens of the folder's files handed to the kernel as the folder's own
            // file (FUSE passthrough; root and Linux 6.9+), every open a round trip.
            name: `shadowfs (${backend}, io: passthrough)`,
            setup: async (lower: string, tag: string) => {
              const s: Shadow = await mount(lower, { mountPoint: path.join(work, `sfs-${backend}-pt-${tag}`), backend, io: 'passthrough' });
              if (!s.kernelTransport().passthrough)
                console.error(
                  `  warning: passthrough is off on this mount (${JSON.stringify(s.kernelTransport())}); its column measures io: open`,
                );
              return { dir: s.mountPoint, teardown: () => s.unmount({ lazy: true }), requestCounts: requestCounter(s) };
            },
          },
        ]
      : []),
  ]),
  {
    name: 'overlayfs (kernel, upper on tmpfs)',
    setup: async (lower, tag) => {
      const base = path.join(work, `ovl-${tag}`);
      fs.mkdirSync(path.join(base, 't'), { recursive: true });
      fs.mkdirSync(path.join(base, 'm'));
      sh(
        `mount -t tmpfs tmpfs ${base}/t && mkdir ${base}/t/u ${base}/t/w && mount -t overlay overlay -o lowerdir=${lower},upperdir=${base}/t/u,workdir=${base}/t/w ${base}/m`,
      );
      return { dir: `${base}/m`, teardown: async () => void sh(`umount -l ${base}/m; umount -l ${base}/t; rm -rf ${base}`) };
    },
  },
  {
    name: 'fuse-overlayfs',
    setup: async (lower, tag) => {
      const base = path.join(work, `fovl-${tag}`);
      for (const d of ['u', 'w', 'm']) fs.mkdirSync(path.join(base, d), { recursive: true });
      sh(`fuse-overlayfs -o lowerdir=${lower},upperdir=${base}/u,workdir=${base}/w ${base}/m`);
      return { dir: `${base}/m`, teardown: async () => void sh(`fusermount3 -uz ${base}/m; rm -rf ${base}`) };
    },
  },
  {
    name: 'cp -r',
    setup: async (lower, tag) => {
      const d = path.join(work, `cp-${tag}`);
      sh(`cp -r ${lower} ${d}`);
      return { dir: d, teardown: async () => void sh(`rm -rf ${d}`) };
    },
  },
  {
    name: 'cp -al (hard links)',
    setup: async (lower, tag) => {
      const d = path.join(work, `cpal-${tag}`);
      sh(`cp -al ${lower} ${d}`);
      return { dir: d, teardown: async () => void sh(`rm -rf ${d}`) };
    },
  },
  {
    // What many agent setups do today: a second checkout, dependencies installed again. Only the
    // TypeScript project has what it needs (a lockfile); its build output is not in git, so the
    // worktree needs a build too before its tests can run (measured separately).
    name: 'git worktree + npm ci',
    trees: ['ts'],
    setup: async (lower, tag) => {
      const d = path.join(work, `wt-${tag}`);
      sh(`git worktree add -q --detach '${d}' HEAD`, lower);
      sh(NPM_CI, d);
      return { dir: d, teardown: async () => void sh(`git worktree remove --force '${d}' && git worktree prune`, lower) };
    },
  },
];
const appliesTo = (c: Contender, tree: Tree): boolean => !c.trees || c.trees.includes(tree);

const dropCaches = (): void => void sh('sync; echo 3 > /proc/sys/vm/drop_caches');

interface Workload {
  name: string;
  tree: Tree;
  /** Runs once; returns milliseconds. `fresh` gives a throwaway copy for destructive work. */
  run(dir: string): number;
  /**
   * Runs before the measured ones, per contender: true is one. The cheap file-walking rows take
   * two: on FUSE the first walk after a file's pages were read from the server sends a GETATTR
   * per file and directory (the kernel marks atime stale after each read that reaches the
   * server, and a stat then asks again), so one warm-up leaves the first measured run half cold
   * (measured on fuse_ll: 6,339 GETATTRs for 5,000 files in the second walk, none in the third).
   * Every contender gets the same warm-ups.
   */
  warmup?: boolean | number;
  cold?: boolean;
  /** Needs the project's build output (a copy without it builds first, timed as a note). */
  needsBuild?: boolean;
}

const statAll = (d: string): number => sh("find . -printf '%s\\n' > /dev/null", d).ms;
const gitStatus = (d: string): number => sh('git status --porcelain > /dev/null', d).ms;
// -I skips binary files; -c prints a count per file. Nothing found is exit 1, not a failure.
const grep = (d: string): number => sh(`grep -rI -c ${NEEDLE} . > /dev/null`, d, { okStatus: [0, 1] }).ms;

// The row order is the report's. The grep rows come before create+write, which adds files to
// the native folder (the lower of every other contender).
const workloads: Workload[] = [
  { name: W.statWarm, tree: 'generated', warmup: 2, run: statAll },
  { name: W.statCold, tree: 'generated', cold: true, run: statAll },
  {
    name: W.readWarm,
    tree: 'generated',
    warmup: 2,
    run: (d) => sh('find . -type f -print0 | xargs -0 cat > /dev/null', d).ms,
  },
  // One big file of the folder read once after the caches were dropped: what passthrough is for.
  { name: W.readBigCold, tree: 'big', cold: true, run: (d) => sh('cat big.bin > /dev/null', d).ms },
  { name: W.gitStatus, tree: 'generated', warmup: 2, run: gitStatus },
  { name: W.gitStatusRepo50k, tree: 'repo50k', warmup: 2, run: gitStatus },
  { name: W.grepGenerated, tree: 'generated', warmup: 2, run: grep },
  { name: W.grepRepo50k, tree: 'repo50k', warmup: 2, run: grep },
  { name: W.grepTs, tree: 'ts', warmup: 2, run: grep },
  {
    name: W.tsc,
    tree: 'ts',
    warmup: true,
    run: (d) => sh(TSC_CHECK, d).ms,
  },
  {
    name: W.tests,
    tree: 'ts',
    warmup: true,
    needsBuild: true,
    run: (d) => sh("node node_modules/mocha/bin/mocha.js --no-config --reporter dot 'dist/test/unit/*.test.js'", d).ms,
  },
  // An agent building and installing in its shadow: everything it writes lands in the layer.
  // Each run writes a new output folder beside the project (its name is the run's), removed
  // untimed afterwards, so every run writes as much and the native folder, the other
  // contenders' lower, stays as it was.
  {
    name: W.buildInShadow,
    tree: 'ts',
    warmup: true,
    run: (d) => {
      const out = path.join(d, `.bench-build-${crypto.randomBytes(4).toString('hex')}`);
      const ms = sh(`${TSC_CHECK.replace(' --noEmit', '')} --outDir '${out}'`, d).ms;
      fs.rmSync(out, { recursive: true, force: true });
      return ms;
    },
  },
  {
    name: W.installInShadow,
    tree: 'ts',
    warmup: true,
    run: (d) => {
      const out = path.join(d, `.bench-install-${crypto.randomBytes(4).toString('hex')}`);
      fs.mkdirSync(out);
      fs.writeFileSync(path.join(out, 'package.json'), '{"name":"bench-install","version":"1.0.0","private":true}\n');
      // From the npm cache the project's own install filled (typescript and zod are in its
      // lockfile): no network, the same bytes every run.
      const ms = sh(
        `npm install --offline --no-audit --no-fund --ignore-scripts --no-package-lock --loglevel=error typescript@${INSTALL_VERSIONS.typescript} zod@${INSTALL_VERSIONS.zod}`,
        out,
      ).ms;
      fs.rmSync(out, { recursive: true, force: true });
      return ms;
    },
  },
  // An agent writing one big output file (an archive, a bundle, a database): in a shadow it is
  // the layer's, past the spill threshold, so it goes to a spill file (through the daemon, or
  // written by the kernel itself under passthrough). Removed untimed after each run.
  {
    name: W.writeBig,
    tree: 'generated',
    warmup: 1,
    run: (d) => {
      const out = path.join(d, `.bench-write-${crypto.randomBytes(4).toString('hex')}.bin`);
      const ms = sh(`dd if=/dev/zero of='${out}' bs=1M count=128 status=none`, d).ms;
      fs.rmSync(out, { force: true });
      return ms;
    },
  },
  // What an agent wrote (a build's output): in a shadow these are the layer's files. Written
  // once per contender (untimed; a name of its own, as the native folder is the others' lower),
  // then read back after the caches were dropped (warm, the kernel's page cache serves them in
  // every mode): one file past the default spill threshold (64 MiB) and 500 small ones.
  {
    name: W.readBackAgent,
    tree: 'generated',
    warmup: true,
    cold: true,
    run: (d) => {
      const out = path.join(d, `.agent-out-${crypto.createHash('sha1').update(d).digest('hex').slice(0, 8)}`);
      if (!fs.existsSync(out)) {
        sh(
          `mkdir -p '${out}/s' && head -c ${96 << 20} /dev/urandom > '${out}/big.bin' && ` +
            `node -e "const fs=require('fs');for(let i=0;i<500;i++)fs.writeFileSync('${out}/s/f'+i+'.js','x'.repeat(4000))"`,
        );
      }
      return sh(`cat '${out}/big.bin' '${out}'/s/* > /dev/null`, d).ms;
    },
  },
  {
    name: W.createWrite,
    tree: 'generated',
    run: (d) => {
      const out = path.join(d, `out-${Date.now()}-${Math.random().toString(16).slice(2)}`);
      return sh(
        `node -e "const fs=require('fs');fs.mkdirSync('${out}');for(let i=0;i<${SMALL_FILES};i++)fs.writeFileSync('${out}/f'+i+'.txt','x'.repeat(200))"`,
      ).ms;
    },
  },
];

// bench/targets.ts names the rows (for the targets table and its unit test): each must run here.
for (const name of Object.values(W)) {
  if (name !== W.rmTree && !workloads.some((w) => w.name === name)) throw new Error(`bench/targets.ts names a row bench.ts lacks: ${name}`);
}

const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Linux ${os.release()}`;
const outDir = path.join(repo, 'bench', 'results');
const stampOf = (d: Date): string => d.toISOString().replace(/[:.]/g, '-');
/** How a stopped run names the shadowfs-only sections it did not reach. */
const UNREACHED_SECTIONS = 'the shadowfs-only sections (layer switch, responsiveness, lints, daemon memory)';

/**
 * One section alone (`--only NAME`): measures it, writes bench/results/<time>-NAME.{json,md}
 * (latest.* left as they are) and prints the Markdown.
 */
async function onlySection(name: string, describe: string, measure: () => Promise<{ data: object; markdown: string[] }>): Promise<void> {
  const started = new Date();
  const mode = quick ? 'quick' : 'full';
  console.error(`shadowfs bench, ${name} only (${mode})${describe}`);
  const { data, markdown } = await measure();
  const json = { started: started.toISOString(), mode, machine, ...data };
  const md = [
    `# shadowfs benchmark, ${name} only, ${started.toISOString().slice(0, 10)} (${mode})`,
    '',
    `Machine: ${machine}.`,
    '',
    ...markdown,
  ].join('\n');
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, `${stampOf(started)}-${name}.json`), JSON.stringify(json, null, 2));
  fs.writeFileSync(path.join(outDir, `${stampOf(started)}-${name}.md`), md);
  process.stdout.write(md);
  fs.rmSync(work, { recursive: true, force: true });
}

const onlyResponsiveness = (): Promise<void> =>
  onlySection('responsiveness', `: ${RESP_MIB} MiB file`, async () => {
    const rows = await responsiveness(addon().backends, RESP_MIB, (l) => console.error(l));
    return {
      data: { responsiveness: { fileMiB: RESP_MIB, targetMaxDelayMs: TARGET_MAX_DELAY_MS, rows } },
      markdown: responsivenessMarkdown(rows, RESP_MIB, quick),
    };
  });

const onlyLints = (): Promise<void> =>
  onlySection('lints', '', async () => {
    const b = await lintsBench(repo, LINT_EDITS, (l) => console.error(l), LINT_FLEET);
    return { data: { lints: b }, markdown: lintsMarkdown(b, quick) };
  });

const ALL_TREES: Tree[] = ['generated', 'ts', 'repo50k', 'big'];
const READY_TS = 'ready copy of the TypeScript project';

async function main(): Promise<void> {
  if (only === 'responsiveness') return onlyResponsiveness();
  if (only === 'lints') return onlyLints();
  if (process.getuid?.() !== 0) throw new Error('the benchmark mounts overlayfs and drops caches: run it as root');
  const reclaim = keepReclaim ? undefined : pauseReclaim();
  const started = new Date();
  const readyGenerated = `ready copy of ${FILES} files`;
  // What runs: every row, or those --only=TEXT picks; and only the trees they need.
  const readyTrees = (
    [
      ['generated', readyGenerated],
      ['ts', READY_TS],
    ] as const
  )
    .filter(([, n]) => selected(n))
    .map(([t]) => t);
  const chosen = workloads.filter((w) => selected(w.name));
  const rmRow = selected(W.rmTree);
  const needed = new Set<Tree>([...readyTrees, ...chosen.map((w) => w.tree), ...(rmRow ? ['generated' as const] : [])]);
  if (!needed.size) {
    const rows = [readyGenerated, READY_TS, ...workloads.map((w) => w.name), W.rmTree];
    throw new Error(`--only ${JSON.stringify(onlyValues)} picks no row; the rows are:\n  ${rows.join('\n  ')}`);
  }
  const trees: Record<Tree, string> = {
    generated: path.join(work, 'generated'),
    ts: path.join(work, 'ts'),
    repo50k: path.join(work, 'repo50k'),
    big: path.join(work, 'big'),
  };
  const used = ALL_TREES.filter((t) => needed.has(t));
  console.error(
    `shadowfs bench (${quick ? 'quick' : 'full'}): ${FILES} generated files, ${REPS} repetitions, trees ${used.join(', ')}${rowFilter ? `, ${chosen.length + readyTrees.length + (rmRow ? 1 : 0)} rows matching ${JSON.stringify(onlyValues)}` : ''}, work dir ${work}`,
  );
  const setupStart = process.hrtime.bigint();
  if (needed.has('generated')) generateTree(trees.generated);
  if (needed.has('repo50k')) generateRepo(trees.repo50k);
  if (needed.has('big')) generateBig(trees.big);
  const tsFiles = needed.has('ts') ? tsProject(trees.ts) : 0;
  console.error(`  trees ready (${secondsSince(setupStart)})`);
  const results: Record<string, Record<string, number[]>> = {};
  const record = (w: string, c: string, ms: number): void => void ((results[w] ??= {})[c] ??= []).push(ms);
  // The shadowfs contenders' FUSE requests, per workload (measured runs only).
  const requests: RequestCounts = {};
  /** Runs `fn` on `env`, adding the FUSE requests it caused (if the env counts them). */
  const counted = <T>(env: Env, contender: string, workload: string, fn: () => T): T => {
    const before = env.requestCounts?.();
    const out = fn();
    const after = env.requestCounts?.();
    if (before && after) addRun(requests, contender, workload, countsDelta(before, after));
    return out;
  };
  // shadowfs's own measurements, and notes on the other contenders.
  const extra: Record<string, number> = {};
  const notes: Record<string, number> = {};
  const failed: Record<string, string> = {};
  /** Rows not measured because the run was stopped (SIGINT), in report order. */
  const skipped: string[] = [];
  const treeNames: Record<'generated' | 'ts', string> = {
    generated: readyGenerated,
    ts: `${READY_TS} (${tsFiles} files)`,
  };

  // Time until a ready, runnable copy exists (and tear down), interleaved, after one unmeasured
  // round (the first mount of a process pays for loading code and warming the folder's metadata:
  // measured 10 ms against 1-5 ms for later ones; it fell on whichever contender came first).
  // Not for the git worktree, whose npm ci takes most of a minute and is not warmed by a
  // second run any more than the npm cache already is.
  const readyStart = process.hrtime.bigint();
  for (const tree of readyTrees) {
    for (const c of contenders.filter((x) => appliesTo(x, tree) && !x.trees)) {
      const env = await c.setup(trees[tree], `warm`);
      await env.teardown();
    }
  }
  for (let r = 0; r < REPS && readyTrees.length; r++) {
    for (const tree of readyTrees) {
      for (const c of contenders.filter((x) => appliesTo(x, tree))) {
        const so = results[treeNames[tree]]?.[c.name] ?? [];
        if (r >= SLOW_REPS && median(so) > SLOW_MS) continue;
        const t0 = process.hrtime.bigint();
        const env = await c.setup(trees[tree], `ready${r}`);
        record(treeNames[tree], c.name, Number(process.hrtime.bigint() - t0) / 1e6);
        await env.teardown();
      }
    }
  }
  if (readyTrees.length) console.error(`  ready copies: done (${secondsSince(readyStart)})`);
  // Workloads on one long-lived copy per contender and tree.
  const envs: Record<Tree, Record<string, Env>> = { generated: {}, ts: {}, repo50k: {}, big: {} };
  try {
    for (const tree of ALL_TREES.filter((t) => chosen.some((w) => w.tree === t))) {
      for (const c of contenders.filter((x) => appliesTo(x, tree))) envs[tree][c.name] = await c.setup(trees[tree], `${tree}`);
    }
    // A copy without the build output (a fresh worktree) builds before its tests can run.
    if (chosen.some((w) => w.needsBuild)) {
      for (const [name, env] of Object.entries(envs.ts)) {
        if (!fs.existsSync(path.join(env.dir, 'dist')))
          notes[`${name}: build needed before the tests can run (ms)`] = sh(TSC_BUILD, env.dir).ms;
      }
    }
    for (const w of chosen) {
      if (await stopRequested()) {
        skipped.push(w.name);
        continue;
      }
      const here = contenders.filter((c) => envs[w.tree][c.name]);
      const warmups = w.warmup === true ? 1 : w.warmup || 0;
      const rowStart = process.hrtime.bigint();
      try {
        for (const c of here) for (let i = 0; i < warmups; i++) w.run(envs[w.tree][c.name].dir);
        for (let r = 0; r < REPS; r++) {
          if (r >= SLOW_REPS && median(here.map((c) => median(results[w.name]?.[c.name] ?? [0]))) > SLOW_MS) break;
          for (const c of here) {
            if (w.cold) dropCaches();
            const env = envs[w.tree][c.name];
            record(
              w.name,
              c.name,
              counted(env, c.name, w.name, () => w.run(env.dir)),
            );
          }
        }
        console.error(`  ${w.name}: done (${secondsSince(rowStart)})`);
      } catch (e) {
        // One row that cannot run does not cost the whole run: it is left out, and said so.
        delete results[w.name];
        if (await stopRequested()) {
          skipped.push(w.name); // its command most likely died of the same Ctrl-C
          continue;
        }
        failed[w.name] = String((e as Error).message ?? e).split('\n')[0];
        console.error(`  ${w.name}: FAILED, left out: ${failed[w.name]}`);
      }
    }
    // rm -rf of a node_modules-like tree: destructive, on fresh copies.
    if (rmRow && (await stopRequested())) skipped.push(W.rmTree);
    for (let r = 0; r < REPS && rmRow && !stopAsked; r++) {
      for (const c of contenders.filter((x) => appliesTo(x, 'generated'))) {
        const env = await c.setup(trees.generated, `rm${r}`);
        record(
          W.rmTree,
          c.name,
          counted(env, c.name, W.rmTree, () => sh('rm -rf node_modules', env.dir).ms),
        );
        await env.teardown();
      }
    }
  } finally {
    for (const tree of ALL_TREES) for (const env of Object.values(envs[tree])) await env.teardown();
  }

  if (rowFilter || stopAsked) {
    reclaim?.resume();
    if (!rowFilter) skipped.push(UNREACHED_SECTIONS);
    return report(started, { results, requests, notes, failed, skipped, tsFiles, reclaim: reclaimNote(reclaim?.paused) });
  }
  // shadowfs only: layer switch latency (each backend) and memory per layer.
  for (const backend of addon().backends) {
    const shadow = await mount(trees.generated, { mountPoint: path.join(work, `switch-${backend}`), backend });
    try {
      for (const n of [1, 100, 10_000]) {
        const a = await Promise.resolve(shadow.layer(`a${n}`));
        const b = await Promise.resolve(shadow.layer(`b${n}`));
        for (let i = 0; i < n; i++) {
          await a.write(`changed/f${i}.txt`, `a${i}`);
          await b.write(`changed/f${i}.txt`, `b${i}`);
        }
        fs.readdirSync(path.join(shadow.mountPoint, 'src'));
        const times: number[] = [];
        for (let r = 0; r < 20; r++) times.push((await shadow.activate(r % 2 ? `a${n}` : `b${n}`)).ms);
        extra[`layer switch (${backend}), ${n} changed paths (ms)`] = median(times);
        if (n === 10_000) {
          // Promise.resolve: right whether stats() answers at once or with a Promise.
          const st = await Promise.resolve(a.stats());
          extra['layer memory, 10,000 small files (bytes per path)'] = Math.round(st.memoryBytes / st.paths);
        }
      }
    } finally {
      await shadow.unmount({ lazy: true });
    }
  }
  extra['process RSS after the switch runs (MiB)'] = Math.round(process.memoryUsage().rss / 1048576);

  // A stop asked for during a section ends the run after it: what was measured is written.
  const sections: Pick<Measurements, 'resp' | 'lints'> = {};
  const finish = (): void => {
    reclaim?.resume();
    report(started, { results, requests, notes, failed, skipped, tsFiles, extra, ...sections, reclaim: reclaimNote(reclaim?.paused) });
  };
  const stopHere = async (rest: string): Promise<boolean> => {
    if (!(await stopRequested())) return false;
    skipped.push(rest);
    finish();
    return true;
  };
  if (await stopHere('responsiveness, lints, daemon memory')) return;
  // shadowfs only: the event loop while another process copies a big file up and layers switch.
  sections.resp = await responsiveness(addon().backends, RESP_MIB, (l) => console.error(l));
  if (await stopHere('lints, daemon memory')) return;
  // shadowfs only: lints for a one-line change, against the same server on the folder directly.
  sections.lints = await lintsBench(repo, LINT_EDITS, (l) => console.error(l), LINT_FLEET);
  if (await stopHere('daemon memory')) return;

  // The daemon's memory: idle, then with 100 agent layers of 100 small files each.
  {
    const runtime = path.join(work, 'rt');
    fs.mkdirSync(runtime, { mode: 0o700 });
    process.env.XDG_RUNTIME_DIR = runtime;
    const client = await ShadowClient.connect();
    try {
      const st = await client.request('status');
      const rss = (): number => {
        const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${st.pid}/status`, 'utf8'));
        return m ? Number(m[1]) / 1024 : NaN;
      };
      extra['daemon RSS, idle (MiB)'] = Math.round(rss());
      await client.request('mount', { folder: trees.generated, name: 'bench' });
      for (let l = 0; l < 100; l++) {
        for (let f = 0; f < 100; f++) {
          await client.request('layer.write', {
            shadow: 'bench',
            agent: `agent${l}`,
            path: `work/f${f}.txt`,
            data: Buffer.from(`layer ${l} file ${f}`).toString('base64'),
          });
        }
      }
      extra['daemon RSS, 100 layers x 100 small files (MiB)'] = Math.round(rss());
      await client.request('unmount', { shadow: 'bench' });
    } finally {
      client.close();
      const pid = Number(fs.readFileSync(path.join(runtime, 'shadowfs', 'daemon.pid'), 'utf8'));
      process.kill(pid, 'SIGTERM');
    }
  }

  finish();
}

/** What a run measured; the shadowfs-only sections are absent from a row-filtered run. */
interface Measurements {
  results: Record<string, Record<string, number[]>>;
  requests: RequestCounts;
  notes: Record<string, number>;
  /** Rows that failed and were left out, with the first line of their error. */
  failed: Record<string, string>;
  /** What a stop (SIGINT) left unmeasured; non-empty only in a stopped run. */
  skipped: string[];
  tsFiles: number;
  /** Whether DAMON reclaim ran during the measurements (reclaimNote). */
  reclaim: string;
  extra?: Record<string, number>;
  resp?: ResponsivenessRow[];
  lints?: Awaited<ReturnType<typeof lintsBench>>;
}

/**
 * Writes the results: bench/results/<time>.{json,md} and latest.{md,json,svg} for a full run,
 * <time>-rows.{json,md} alone for a row-filtered one; prints the Markdown.
 */
/** The rows and ready copies measured fewer than REPS times (SLOW_MS), said in the report's text. */
function fewer(results: Measurements['results']): string {
  const short: string[] = [];
  for (const [w, byC] of Object.entries(results)) {
    const cs = Object.entries(byC).filter(([, xs]) => xs.length > 0 && xs.length < REPS);
    if (cs.length === Object.keys(byC).length) short.push(w);
    else for (const [c] of cs) short.push(`${w}: ${c}`);
  }
  return short.length ? `: ${short.join('; ')}` : ': none in this run';
}

function report(started: Date, m: Measurements): void {
  const table: ResultRow[] = [];
  for (const [w, byC] of Object.entries(m.results)) {
    const medians: Record<string, number> = {};
    for (const [c, xs] of Object.entries(byC)) medians[c] = median(xs);
    // A "ready copy" of the folder is the folder itself for native: no ratio there.
    const base = w.startsWith('ready') ? NaN : medians.native;
    const ratios: Record<string, number> = {};
    for (const [c, x] of Object.entries(medians)) ratios[c] = base > 0 ? x / base : NaN;
    table.push({ workload: w, medians, ratios });
  }
  const verdicts = targetRows(table, targets(SMALL_FILES));
  /** A missed row's FUSE requests, one run of the target contender. */
  const why = (workload: string): string => {
    const c = m.requests[TARGET_CONTENDER]?.[workload];
    return c ? `${TARGET_CONTENDER} per run: ${countsLine(perRun(c))}` : '';
  };
  fs.mkdirSync(outDir, { recursive: true });
  const stopped = m.skipped.length > 0;
  const stamp = stampOf(started) + (rowFilter ? '-rows' : stopped ? '-stopped' : '');
  const minutes = Math.round((Date.now() - started.getTime()) / 60_000);
  const json = {
    started: started.toISOString(),
    minutes,
    ...(stopped ? { stoppedBeforeMeasuring: m.skipped } : {}),
    mode: quick ? 'quick' : 'full',
    ...(rowFilter ? { only: onlyValues } : {}),
    files: FILES,
    reps: REPS,
    machine,
    reclaim: m.reclaim,
    results: table,
    raw: m.results,
    targets: verdicts,
    requestCounts: m.requests,
    ...(m.extra ? { shadowfs: m.extra } : {}),
    ...(m.resp ? { responsiveness: { fileMiB: RESP_MIB, targetMaxDelayMs: TARGET_MAX_DELAY_MS, rows: m.resp } } : {}),
    ...(m.lints ? { lints: m.lints } : {}),
    notes: m.notes,
    failed: m.failed,
  };
  fs.writeFileSync(path.join(outDir, `${stamp}.json`), JSON.stringify(json, null, 2));
  const names = contenders.map((c) => c.name);
  const md = [
    `# shadowfs benchmark, ${started.toISOString().slice(0, 10)} (${json.mode}${rowFilter ? `, only rows matching ${onlyValues.map((v) => JSON.stringify(v)).join(' or ')}` : ''}${stopped ? ', stopped before the end' : ''})`,
    '',
    `The run took ${minutes} min.${stopped ? ` It was stopped (Ctrl-C) before these were measured: ${m.skipped.join('; ')}.` : ''}`,
    '',
    `Machine: ${machine}. ${m.reclaim} Generated tree: ${FILES} files (30% source-like, 70% node_modules-like, in git, which ignores the node_modules part). repo50k: ${FILES} source-like files in 20-file folders, every one tracked by git (50,000 in a full run), its objects packed, one in 50 containing the word the grep rows look for (\`grep -rI -c ${NEEDLE} .\`; the generated tree has none). TypeScript project: shadowfs's own repository at HEAD as a git repository${m.tsFiles ? ` (${m.tsFiles} files)` : ''}, dependencies installed with \`npm ci\` from its lockfile (npm cache warm), built with tsc; \`tsc --noEmit\` checks ${quick ? 'its src/ (quick mode)' : 'the whole project'}; its test suite is its mocha unit tests. Medians of ${REPS} interleaved runs (${SLOW_REPS} for a row or ready copy whose runs take over ${SLOW_MS / 1000} s${fewer(m.results)}), after two warm-up runs per contender for the warm file-walking rows (stat, read, git status, grep; one for tsc and the test suite); ratio to native in parentheses (lower is better).`,
    '',
    `| workload | ${names.join(' | ')} |`,
    `| --- | ${names.map(() => '---:').join(' | ')} |`,
    ...table.map(
      (r) =>
        `| ${r.workload} | ${names
          .map((n) =>
            r.medians[n] === undefined
              ? 'n/a'
              : `${r.medians[n].toFixed(r.medians[n] < 10 ? 1 : 0)} ms${Number.isFinite(r.ratios[n]) ? ` (${r.ratios[n].toFixed(2)}×)` : ''}`,
          )
          .join(' | ')} |`,
    ),
    '',
    ...Object.entries(m.extra ?? {}).map(([k, v]) => `- shadowfs ${k}: ${v.toFixed(3).replace(/\.?0+$/, '')}`),
    ...Object.entries(m.notes).map(([k, v]) => `- ${k}: ${v.toFixed(0)}`),
    ...Object.entries(m.failed).map(([k, v]) => `- FAILED, left out of this run: ${k} (${v})`),
    '',
    ...targetsMarkdown(verdicts, why),
    '',
    ...requestCountsMarkdown(m.requests),
    ...(m.resp ? ['', ...responsivenessMarkdown(m.resp, RESP_MIB, quick)] : []),
    ...(m.lints ? ['', ...lintsMarkdown(m.lints, quick)] : []),
    '',
  ].join('\n');
  fs.writeFileSync(path.join(outDir, `${stamp}.md`), md);
  if (!rowFilter && !stopped) {
    fs.writeFileSync(path.join(outDir, 'latest.md'), md);
    fs.writeFileSync(
      path.join(outDir, 'latest.svg'),
      chart(
        table,
        names.filter((n) => n !== 'native'),
      ),
    );
    fs.writeFileSync(path.join(outDir, 'latest.json'), JSON.stringify(json, null, 2));
  }
  process.stdout.write(md);
  fs.rmSync(work, { recursive: true, force: true });
}

/** A bar chart of ratios to native, one group per workload, log scale. */
function chart(table: Array<{ workload: string; ratios: Record<string, number> }>, names: string[]): string {
  const colors = ['#2b7bb9', '#7fb3d9', '#e07b39', '#5aa05a', '#b94a48', '#8e6bb8', '#8c8c8c'];
  const rowH = 16 * names.length + 14;
  const width = 900;
  const left = 300;
  const scale = (r: number): number => Math.max(2, ((Math.log10(Math.max(r, 0.01)) + 2) / 5) * (width - left - 20));
  let y = 40;
  const parts: string[] = [];
  for (const row of table) {
    if (!names.some((n) => Number.isFinite(row.ratios[n]))) continue;
    parts.push(`<text x="8" y="${y + 12}" font-size="12">${row.workload.replace(/&/g, '&amp;')}</text>`);
    names.forEach((n, i) => {
      const r = row.ratios[n];
      if (!Number.isFinite(r)) return;
      parts.push(`<rect x="${left}" y="${y + i * 16}" width="${scale(r).toFixed(1)}" height="13" fill="${colors[i % colors.length]}"/>`);
      parts.push(`<text x="${left + scale(r) + 4}" y="${y + i * 16 + 11}" font-size="10">${r.toFixed(2)}×</text>`);
    });
    y += rowH;
  }
  const one = left + scale(1);
  let lx = 8;
  const legend = names
    .map((n, i) => {
      const item = `<rect x="${lx}" y="8" width="10" height="10" fill="${colors[i % colors.length]}"/><text x="${lx + 14}" y="17" font-size="11">${n}</text>`;
      lx += 24 + n.length * 6.5;
      return item;
    })
    .join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y + 20}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${legend}<line x1="${one}" y1="30" x2="${one}" y2="${y}" stroke="#999" stroke-dasharray="4"/><text x="${one + 3}" y="${y + 14}" font-size="10">1× = native (log scale)</text>${parts.join('')}</svg>\n`;
}

main().catch((err) => {
  console.error(err);
  for (const line of fs.readFileSync('/proc/self/mounts', 'utf8').split('\n')) {
    const mp = line.split(' ')[1];
    if (mp?.startsWith(work)) spawnSync('umount', ['-l', mp]);
  }
  process.exit(1);
});
