// Unit tests of the benchmark's targets table (bench/targets.ts) and request-count deltas
// (bench/requests.ts): pure logic, no mount and no benchmark run.
import * as assert from 'assert';
import { countsDelta, countsLine, addRun, perRun, RequestCounts, requestCountsMarkdown } from '../../bench/requests';
import {
  Measured,
  ResultRow,
  RIVAL,
  TARGET_CONTENDER,
  targetRows,
  targets,
  targetsMarkdown,
  verdict,
  workloadNames,
} from '../../bench/targets';

const at = (median: number, ratio: number): Measured => ({ median, ratio });

describe('unit: bench targets', () => {
  it('names an existing workload in every target, once, in quick and full runs', () => {
    for (const smallFiles of [1_000, 10_000]) {
      const names = new Set<string>(Object.values(workloadNames(smallFiles)));
      const list = targets(smallFiles);
      for (const t of list) assert.ok(names.has(t.workload), `target for unknown workload ${JSON.stringify(t.workload)}`);
      assert.strictEqual(new Set(list.map((t) => t.workload)).size, list.length, 'a workload with two targets');
    }
  });

  it("has issue 18's targets, tightened by issue 33's: cold stat, create+write, agent-written files read back", () => {
    const w = workloadNames(1_000);
    const max = new Map(targets(1_000).map((t) => [t.workload, t.maxRatio]));
    assert.strictEqual(max.get(w.gitStatusRepo50k), 1.3);
    assert.strictEqual(max.get(w.grepRepo50k), 1.5);
    assert.strictEqual(max.get(w.grepTs), 1.5);
    assert.strictEqual(max.get(w.readWarm), 1.2);
    assert.strictEqual(max.get(w.statCold), 1.5);
    assert.strictEqual(max.get(w.createWrite), 1.5);
    assert.strictEqual(max.get(w.readBackAgent), 1.1);
    assert.strictEqual(max.get(w.tsc), undefined);
  });

  it('says "met" within the target and at or below kernel overlayfs (the target and a tie count as met)', () => {
    assert.strictEqual(verdict(1.3, at(13, 1.3), at(20, 2)), 'met');
    assert.strictEqual(verdict(1.3, at(12, 1.2), at(12, 1.2)), 'met', 'a tie with overlayfs is "at"');
    assert.strictEqual(verdict(undefined, at(50, NaN), at(60, NaN)), 'met');
  });

  it('flags a miss for each reason, and both when both', () => {
    assert.strictEqual(verdict(1.3, at(14, 1.4), at(20, 2)), 'MISSED: over target');
    assert.strictEqual(verdict(1.3, at(12, 1.2), at(11, 1.1)), `MISSED: slower than ${RIVAL}`);
    assert.strictEqual(verdict(1.3, at(30, 3), at(20, 2)), `MISSED: over target, slower than ${RIVAL}`);
    assert.strictEqual(verdict(undefined, at(30, 3), at(20, 2)), `MISSED: slower than ${RIVAL}`);
  });

  it('says "not measured" when a contender or the native baseline is missing, instead of failing', () => {
    assert.match(verdict(1.3, undefined, at(20, 2)), /^not measured: no shadowfs \(fuse_ll\) result$/);
    assert.strictEqual(verdict(1.3, at(12, 1.2), undefined), `not measured: no ${RIVAL} result`);
    assert.match(verdict(1.3, at(12, NaN), at(20, NaN)), /^not measured: no native result/);
    // A known miss stays a miss; what could not be checked is said beside it.
    assert.strictEqual(verdict(1.3, at(14, 1.4), undefined), `MISSED: over target (no ${RIVAL} result)`);
  });

  it('builds the table from result rows: targets where they apply, rows without a contender included', () => {
    const w = workloadNames(1_000);
    const table: ResultRow[] = [
      {
        workload: w.grepRepo50k,
        medians: { native: 10, [TARGET_CONTENDER]: 20, [RIVAL]: 30 },
        ratios: { native: 1, [TARGET_CONTENDER]: 2, [RIVAL]: 3 },
      },
      {
        workload: w.tsc,
        medians: { native: 10, [TARGET_CONTENDER]: 11, [RIVAL]: 10.5 },
        ratios: { native: 1, [TARGET_CONTENDER]: 1.1, [RIVAL]: 1.05 },
      },
      { workload: w.statWarm, medians: { native: 10 }, ratios: { native: 1 } },
    ];
    const rows = targetRows(table, targets(1_000));
    assert.deepStrictEqual(
      rows.map((r) => [r.workload, r.maxRatio, r.verdict]),
      [
        [w.grepRepo50k, 1.5, 'MISSED: over target'],
        [w.tsc, undefined, `MISSED: slower than ${RIVAL}`],
        [w.statWarm, 1.3, `not measured: no ${TARGET_CONTENDER} result`],
      ],
    );
    const md = targetsMarkdown(rows, (workload) => (workload === w.grepRepo50k ? 'lookup 5' : ''));
    assert.ok(
      md.some((l) => l.startsWith(`| ${w.grepRepo50k} | 2.00× | ≤ 1.5× | 3.00× | MISSED: over target; lookup 5 |`)),
      md.join('\n'),
    );
    assert.ok(
      md.some((l) => l.startsWith(`| ${w.statWarm} | n/a | ≤ 1.3× | n/a | not measured`)),
      md.join('\n'),
    );
  });
});

describe('unit: bench request counts', () => {
  it('takes deltas over whatever kinds the backend reports, new kinds counted from zero', () => {
    assert.deepStrictEqual(countsDelta({ lookup: 5, getattr: 2 }, { lookup: 9, getattr: 2, statx: 4 }), { lookup: 4, statx: 4 });
    assert.deepStrictEqual(countsDelta({}, {}), {});
  });

  it('sums runs per contender and workload, and reports one run', () => {
    const store: RequestCounts = {};
    addRun(store, 'shadowfs (fuse_ll)', 'grep', { read: 10, open: 3 });
    addRun(store, 'shadowfs (fuse_ll)', 'grep', { read: 12, open: 3, lookup: 1 });
    addRun(store, 'shadowfs (fuse_hl)', 'grep', {});
    const c = store['shadowfs (fuse_ll)'].grep;
    assert.deepStrictEqual(c, { runs: 2, total: { read: 22, open: 6, lookup: 1 } });
    assert.deepStrictEqual(perRun(c), { read: 11, open: 3, lookup: 1 });
    assert.strictEqual(countsLine(perRun(c)), 'read 11, open 3, lookup 1');
    const md = requestCountsMarkdown(store).join('\n');
    assert.match(md, /\| workload \| read \| open \| lookup \|/);
    assert.match(md, /\| grep \| 11 \| 3 \| 1 \|/);
    assert.match(md, /### shadowfs \(fuse_hl\)\n\nNo requests counted/);
  });
});
