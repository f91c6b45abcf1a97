// Mocha's spec output plus one closing line "N passed, N failed, N skipped" that CI reads.
import Mocha from 'mocha';

class ShadowReporter extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const s = runner.stats;
      if (!s) return;
      process.stdout.write(`\n${s.passes} passed, ${s.failures} failed, ${s.pending} skipped\n`);
    });
  }
}

export = ShadowReporter;
