// npm run fuzz -- [--ops N] [--seed S] [--runs R] [--layers L] [--procs P]: long differential
// fuzzing runs on demand. P worker processes (default 4; 1 runs every operation from one process,
// which also covers renames across directories) work on the shadow at the same time. Each run
// prints its seed; a failure prints a shrunk reproducer and the command that replays it, and
// exits 1.
import * as crypto from 'crypto';
import { describe, fuzz } from './engine';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 0) {
    console.error(`fuzz: --${name} takes a whole number (got ${process.argv[i + 1]})`);
    process.exit(2);
  }
  return v;
}

async function main(): Promise<void> {
  const ops = arg('ops', 20_000);
  const runs = arg('runs', 1);
  const layers = Math.max(1, arg('layers', 3));
  const procs = Math.max(1, arg('procs', 4));
  const workers = procs > 1 ? procs : 0;
  const fixed = process.argv.includes('--seed') ? arg('seed', 1) : undefined;
  for (let r = 0; r < runs; r++) {
    const seed = fixed ?? crypto.randomInt(1, 2 ** 31);
    const t0 = Date.now();
    const res = await fuzz({ seed, ops, layers, workers, folderChanges: true });
    if (!res.ok) {
      process.stdout.write(
        `FAIL seed=${seed}: ${res.failure.message}\n` +
          `shrunk reproducer (${res.reproducer.length} operations):\n  ${res.reproducer.map(describe).join('\n  ')}\n` +
          `replay: npm run fuzz -- --seed ${seed} --ops ${ops} --layers ${layers} --procs ${procs}\n`,
      );
      process.exit(1);
    }
    const secs = (Date.now() - t0) / 1000;
    process.stdout.write(`ok seed=${seed} ops=${ops} layers=${layers} procs=${procs} (${secs.toFixed(1)} s)\n`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
