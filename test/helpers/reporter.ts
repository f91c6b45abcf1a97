// Mocha's spec output plus one closing line "N passed, N failed, N skipped" that CI reads.
// When npm test runs several passes (one per backend, see scripts/mocha-all.sh), each pass adds
// its counts to the file named by $SHADOWFS_TEST_STATS, and the closing line is the running
// total, so the last pass prints the total of all of them.
// Each failure is also appended, short, to the file named by $SHADOWFS_TEST_FAILURES: the suite
// prints them all again at its very end, because a CI log may keep only its last lines, and a
// failure in the first pass must not be lost behind the passes after it.
import * as fs from 'fs';
import Mocha from 'mocha';

interface Counts {
  passes: number;
  failures: number;
  pending: number;
}

function addToTotal(run: Counts): Counts {
  const file = process.env.SHADOWFS_TEST_STATS;
  if (!file) return run;
  let before: Counts = { passes: 0, failures: 0, pending: 0 };
  try {
    const text = fs.readFileSync(file, 'utf8');
    if (text.trim() !== '') before = JSON.parse(text) as Counts;
  } catch {
    // first pass: no file yet
  }
  const total = { passes: before.passes + run.passes, failures: before.failures + run.failures, pending: before.pending + run.pending };
  fs.writeFileSync(file, JSON.stringify(total));
  return total;
}

/** The failure as a few lines: where, what, and the first frames of the stack. */
function describeFailure(pass: string, title: string, err: unknown): string {
  const e = err as { message?: unknown; stack?: unknown } | undefined;
  const message = String(e?.message ?? err).trim();
  const lines = [`[${pass}] ${title}`];
  const shown = message.split('\n').slice(0, 30);
  for (const l of shown) lines.push(l.trim() === '' ? '' : `    ${l}`);
  if (message.split('\n').length > shown.length) lines.push('    (message cut here; the whole of it is above, in its pass)');
  const frames = typeof e?.stack === 'string' ? e.stack.split('\n').filter((l) => /^\s+at /.test(l)) : [];
  for (const f of frames.slice(0, 4)) lines.push(`    ${f.trim()}`);
  return lines.join('\n') + '\n';
}

class ShadowReporter extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    const pass = process.env.SHADOWFS_TEST_PASS ?? process.env.SHADOWFS_BACKEND ?? 'mocha';
    runner.on(Mocha.Runner.constants.EVENT_TEST_FAIL, (test: Mocha.Runnable, err: unknown) => {
      const file = process.env.SHADOWFS_TEST_FAILURES;
      if (!file) return;
      try {
        fs.appendFileSync(file, describeFailure(pass, test.fullTitle(), err));
      } catch {
        // the recap is a convenience; the failure itself is counted and printed anyway
      }
    });
    // Wall time per test file (its top-level suites, hooks included), for the slowest-files line
    // at the end: what to look at first when a pass grows.
    const started = new Map<Mocha.Suite, number>();
    const byFile = new Map<string, number>();
    runner.on(Mocha.Runner.constants.EVENT_SUITE_BEGIN, (suite: Mocha.Suite) => {
      if (suite.file && suite.parent?.root) started.set(suite, Date.now());
    });
    runner.on(Mocha.Runner.constants.EVENT_SUITE_END, (suite: Mocha.Suite) => {
      const t0 = started.get(suite);
      if (t0 === undefined || !suite.file) return;
      const name = suite.file.split(/[\\/]/).pop() ?? suite.file;
      byFile.set(name, (byFile.get(name) ?? 0) + Date.now() - t0);
    });
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const s = runner.stats;
      if (!s) return;
      const slowest = [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 10);
      if (slowest.length > 1)
        process.stdout.write(`\nslowest files: ${slowest.map(([f, ms]) => `${f} ${Math.round(ms / 1000)} s`).join(', ')}`);
      const run = { passes: s.passes, failures: s.failures, pending: s.pending };
      const total = addToTotal(run);
      const backend = process.env.SHADOWFS_BACKEND;
      if (total !== run)
        process.stdout.write(
          `\nthis pass${backend ? ` (${backend})` : ''}: ${run.passes} passed, ${run.failures} failed, ${run.pending} skipped`,
        );
      process.stdout.write(`\n${total.passes} passed, ${total.failures} failed, ${total.pending} skipped\n`);
    });
  }
}

export = ShadowReporter;
