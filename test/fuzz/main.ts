// npm run fuzz -- [--ops N] [--seed S] [--runs R] [--layers L]: long differential fuzzing runs
// on demand. Each run prints its seed; a failure prints a shrunk reproducer and exits 1.
import * as crypto from 'crypto';
import { describe, fuzz } from './engine';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

async function main(): Promise<void> {
  const ops = arg('ops', 20_000);
  const runs = arg('runs', 1);
  const layers = arg('layers', 3);
  const fixed = process.argv.includes('--seed') ? arg('seed', 1) : undefined;
  for (let r = 0; r < runs; r++) {
    const seed = fixed ?? crypto.randomInt(1, 2 ** 31);
    const t0 = Date.now();
    const res = await fuzz({ seed, ops, layers, folderChanges: true });
    if (!res.ok) {
      process.stdout.write(
        `FAIL seed=${seed}: ${res.failure.message}\nshrunk reproducer (${res.reproducer.length} operations):\n  ${res.reproducer.map(describe).join('\n  ')}\n`,
      );
      process.exit(1);
    }
    process.stdout.write(`ok seed=${seed} ops=${ops} layers=${layers} (${((Date.now() - t0) / 1000).toFixed(1)} s)\n`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
