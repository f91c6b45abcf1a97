// Differential tests: one seeded random sequence of file-system operations is applied to a
// shadow and to plain copies of the folder (one per layer). Every operation must give the same
// result (value or errno) and the trees must match (names, types, sizes, contents, modes, link
// counts). A failure prints the seed and a shrunk reproducer. Reproduce with
// SHADOWFS_SEED=<seed>; long runs: npm run fuzz -- --ops N --seed S.
import * as assert from 'assert';
import * as crypto from 'crypto';
import { describe as describeOp, fuzz, Op, runOps } from './fuzz/engine';

const seedFromEnv = (): number => (process.env.SHADOWFS_SEED ? Number(process.env.SHADOWFS_SEED) : crypto.randomInt(1, 2 ** 31));

async function expectNoDifference(cfg: Parameters<typeof fuzz>[0]): Promise<void> {
  // The failure and its seed are printed as soon as they are known: a shrink that outlasts the
  // test's timeout must not take the seed with it.
  const r = await fuzz(cfg, 90_000, (f) =>
    process.stdout.write(
      `      differential failure, seed=${cfg.seed} (rerun with SHADOWFS_SEED=${cfg.seed}), shrinking it:\n${f.message}\n`,
    ),
  );
  if (!r.ok) {
    assert.fail(
      `${r.failure.message}\nseed=${cfg.seed} (rerun with SHADOWFS_SEED=${cfg.seed})\nshrunk reproducer (${r.reproducer.length} operations):\n  ${r.reproducer.map(describeOp).join('\n  ')}`,
    );
  }
}

describe('differential: a shadow behaves like a plain copy of the folder', function () {
  // A run plus, on failure, a shrink of up to 90 s.
  this.timeout(300_000);
  // With kernel caching on, stale caches would show up as differences; with it off, every
  // lookup reaches the overlay, which tests its rules without the kernel's help.
  for (const cacheTimeout of [60, 0]) {
    it(`gives the same results and the same tree for a seeded random sequence of 2,500 operations (kernel cache ${cacheTimeout} s)`, async () => {
      await expectNoDifference({
        seed: seedFromEnv(),
        ops: Number(process.env.SHADOWFS_DIFF_OPS ?? 2500),
        layers: 1,
        folderChanges: false,
        cacheTimeout,
      });
    });
  }

  it('with three agent layers switching and the developer editing the folder meanwhile (1,500 operations)', async () => {
    await expectNoDifference({ seed: seedFromEnv(), ops: 1500, layers: 3, folderChanges: true });
  });

  it('with four processes working at once between layer switches and folder edits (3,000 operations)', async () => {
    await expectNoDifference({ seed: seedFromEnv(), ops: 3000, layers: 3, workers: 4, folderChanges: true });
  });

  // Shrunk reproducers of bugs the fuzzer found, kept so they stay fixed.
  const regressions: Array<{ seed: number; layers: number; ops: Op[]; bug: string }> = [
    {
      seed: 1143748537,
      layers: 1,
      bug: "a hard link's first name pointed at a parent node the kernel had forgotten",
      ops: [
        { k: 'mkdir', p: 'a', mode: 0o700 },
        { k: 'link', p: 'g/c', q: 'a/b' },
        { k: 'switch', layer: 0 },
      ],
    },
    {
      seed: 111651989,
      layers: 3,
      bug: 'a file of one layer was merged with a copy in another layer that kept its inode number',
      ops: [
        { k: 'switch', layer: 1 },
        { k: 'rmrf', p: 'b' },
        { k: 'rmrf', p: 'f/c' },
        { k: 'link', p: 'f/g', q: 'f/c' },
        { k: 'rename', p: 'f', q: 'b' },
        { k: 'switch', layer: 0 },
        { k: 'switch', layer: 1 },
      ],
    },
    {
      seed: 777877608,
      layers: 3,
      bug: "a node found again in another layer kept a hard link's name from the old layer",
      ops: [
        { k: 'rename', p: 'a', q: 'g' },
        { k: 'link', p: 'g', q: 'a' },
        { k: 'switch', layer: 1 },
      ],
    },
  ];
  for (const r of regressions) {
    it(`regression: ${r.bug}`, async () => {
      for (let i = 0; i < 5; i++) {
        const f = await runOps(r.seed, r.ops, { layers: r.layers, checkEvery: 1 });
        assert.strictEqual(f, null, f?.message);
      }
    });
  }
});
