// Mocha's spec output plus one closing line "N passed, N failed, N skipped" that CI reads.
// When npm test runs several passes (one per backend, see scripts/mocha-all.sh), each pass adds
// its counts to the file named by $SHADOWFS_TEST_STATS, and the closing line is the running
// total, so the last pass prints the total of all of them.
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

class ShadowReporter extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const s = runner.stats;
      if (!s) return;
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
