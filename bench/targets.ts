// The bench's row names and the targets for them (issue 18's, tightened by issue 33), with the verdict logic the report's
// targets table uses. No side effects on import: the unit tests (test/unit/bench-targets.test.ts)
// import it without running the benchmark.

/** The trees the workloads run on (bench/bench.ts builds them). */
export type Tree = 'generated' | 'ts' | 'repo50k' | 'big';

/**
 * Every workload row of bench/bench.ts by a stable key. Rows on the `generated` tree keep their
 * historical names; rows added for issue 18 name their tree. Only the create+write row's name
 * depends on the run (its file count).
 */
export function workloadNames(smallFiles: number) {
  return {
    statWarm: 'stat every file (warm)',
    statCold: 'stat every file (cold caches)',
    readWarm: 'read every file (warm)',
    readBigCold: 'read a 256 MiB file (cold caches)',
    gitStatus: 'git status (warm)',
    gitStatusRepo50k: 'git status, repo50k (warm)',
    grepGenerated: 'grep -r, generated tree (warm)',
    grepRepo50k: 'grep -r, repo50k (warm)',
    grepTs: 'grep -r, TypeScript project (warm)',
    tsc: 'tsc --noEmit (warm)',
    tests: 'test suite: mocha unit tests (warm)',
    readBackAgent: 'read back agent-written files (cold caches)',
    buildInShadow: 'build in the shadow: tsc emits the project (warm)',
    installInShadow: 'npm install in the shadow: 2 packages from the cache',
    writeBig: 'write a 128 MiB file in the shadow',
    createWrite: `create+write ${smallFiles} small files`,
    rmTree: 'rm -rf node_modules tree',
  } as const;
}

export type WorkloadKey = keyof ReturnType<typeof workloadNames>;

/** The contender the targets are for, and the one it must match or beat on every row (issue 33). */
export const TARGET_CONTENDER = 'shadowfs (fuse_ll)';
export const RIVAL = 'overlayfs (kernel, upper on tmpfs)';

export interface Target {
  workload: string;
  /** Highest acceptable median ratio to native in the same run. */
  maxRatio: number;
}

/**
 * The targets (ratios to native): issue 18's warm git status and stat ≤ 1.3×, read every file
 * ≤ 1.2× and grep ≤ 1.5×; issue 33's cold stat ≤ 1.5×, small-file create+write ≤ 1.5× and
 * reading back agent-written files ≤ 1.1×. Besides these, every row has to be at or below
 * kernel overlayfs (issue 33; issue 18 asked to beat fuse-overlayfs).
 */
export function targets(smallFiles: number): Target[] {
  const w = workloadNames(smallFiles);
  return [
    { workload: w.statWarm, maxRatio: 1.3 },
    { workload: w.statCold, maxRatio: 1.5 },
    { workload: w.readWarm, maxRatio: 1.2 },
    { workload: w.gitStatus, maxRatio: 1.3 },
    { workload: w.gitStatusRepo50k, maxRatio: 1.3 },
    { workload: w.grepGenerated, maxRatio: 1.5 },
    { workload: w.grepRepo50k, maxRatio: 1.5 },
    { workload: w.grepTs, maxRatio: 1.5 },
    { workload: w.createWrite, maxRatio: 1.5 },
    { workload: w.readBackAgent, maxRatio: 1.1 },
  ];
}

/** One contender's result on one row: its median (ms) and ratio to native (NaN without one). */
export interface Measured {
  median: number;
  ratio: number;
}

/**
 * The verdict on one row: "met"; "MISSED: " with the reasons (over target, slower than kernel
 * overlayfs); or "not measured: " with what is missing. A row with a known miss says MISSED
 * even when another part could not be checked (that part is added in parentheses).
 */
export function verdict(maxRatio: number | undefined, shadowfs: Measured | undefined, rival: Measured | undefined): string {
  if (!shadowfs || !Number.isFinite(shadowfs.median)) return `not measured: no ${TARGET_CONTENDER} result`;
  const missed: string[] = [];
  const unknown: string[] = [];
  if (maxRatio !== undefined) {
    if (!Number.isFinite(shadowfs.ratio)) unknown.push('no native result to take the ratio against');
    else if (shadowfs.ratio > maxRatio) missed.push('over target');
  }
  if (!rival || !Number.isFinite(rival.median)) unknown.push(`no ${RIVAL} result`);
  else if (!(shadowfs.median <= rival.median)) missed.push(`slower than ${RIVAL}`);
  if (missed.length) return `MISSED: ${missed.join(', ')}${unknown.length ? ` (${unknown.join('; ')})` : ''}`;
  if (unknown.length) return `not measured: ${unknown.join('; ')}`;
  return 'met';
}

/** A row of the bench's results table, as bench/bench.ts builds it. */
export interface ResultRow {
  workload: string;
  medians: Record<string, number>;
  ratios: Record<string, number>;
}

export interface TargetRow {
  workload: string;
  maxRatio?: number;
  shadowfs?: Measured;
  rival?: Measured;
  verdict: string;
}

const measuredOf = (row: ResultRow, contender: string): Measured | undefined =>
  row.medians[contender] === undefined ? undefined : { median: row.medians[contender], ratio: row.ratios[contender] ?? NaN };

/**
 * The targets table: every result row, in order, with its target when it has one. A target whose
 * row did not run (e.g. left out by --only) is not listed.
 */
export function targetRows(table: ResultRow[], list: Target[]): TargetRow[] {
  const byName = new Map(list.map((t) => [t.workload, t.maxRatio]));
  return table.map((row) => {
    const maxRatio = byName.get(row.workload);
    const shadowfs = measuredOf(row, TARGET_CONTENDER);
    const rival = measuredOf(row, RIVAL);
    return { workload: row.workload, maxRatio, shadowfs, rival, verdict: verdict(maxRatio, shadowfs, rival) };
  });
}

const cell = (m: Measured | undefined): string =>
  !m ? 'n/a' : Number.isFinite(m.ratio) ? `${m.ratio.toFixed(2)}×` : `${m.median.toFixed(m.median < 10 ? 1 : 0)} ms`;

/**
 * The Markdown of the targets table. `why` gives a note for a missed row (the bench passes the
 * FUSE request counts of the row), shown after the verdict.
 */
export function targetsMarkdown(rows: TargetRow[], why: (workload: string) => string = () => ''): string[] {
  return [
    `## Targets (issues 18 and 33)`,
    '',
    `Ratios to native in this run (medians; a row without a native baseline shows the median). Target: the highest ratio issues 18 and 33 accept for ${TARGET_CONTENDER}; every row also has to be at or below ${RIVAL}. For a missed row, the FUSE requests of one ${TARGET_CONTENDER} run follow the verdict.`,
    '',
    `| workload | ${TARGET_CONTENDER} | target | ${RIVAL} | verdict |`,
    '| --- | ---: | ---: | ---: | --- |',
    ...rows.map((r) => {
      const note = r.verdict.startsWith('MISSED') ? why(r.workload) : '';
      return `| ${r.workload} | ${cell(r.shadowfs)} | ${r.maxRatio === undefined ? '—' : `≤ ${r.maxRatio}×`} | ${cell(r.rival)} | ${r.verdict}${note ? `; ${note}` : ''} |`;
    }),
  ];
}
