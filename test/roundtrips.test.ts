// Round trips to the FUSE server, counted by the fuse_ll backend itself (Shadow.requestCounts):
// what a workload costs in requests, and that the answers that spare requests are right. These
// tests mount fuse_ll explicitly (the counts are that backend's), in every pass.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { tempDir, withShadow } from './helpers/fixtures';

const N = 300;

function lsLong(dir: string): string {
  const r = spawnSync('ls', ['-ln', '--time-style=+%s.%N', dir], { encoding: 'utf8' });
  assert.strictEqual(r.status, 0, r.stderr);
  return r.stdout;
}

function delta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(after)) out[k] = (after[k] ?? 0) - (before[k] ?? 0);
  return out;
}

describe('round trips (fuse_ll)', function () {
  it('READDIRPLUS: "ls -l" of a directory of 300 entries costs a few listings, not a LOOKUP per name, and shows what the folder has', async () => {
    const lower = tempDir('rdp');
    const many = path.join(lower, 'many');
    fs.mkdirSync(path.join(many, 'sub'), { recursive: true });
    for (let i = 0; i < N; i++) fs.writeFileSync(path.join(many, `f${i}.txt`), 'x'.repeat(i), { mode: i % 3 === 0 ? 0o755 : 0o644 });
    fs.symlinkSync('f1.txt', path.join(many, 'link'));
    await withShadow(
      lower,
      async (shadow, mp) => {
        const before = shadow.requestCounts();
        assert.ok('readdirplus' in before, `fuse_ll counts its requests: ${JSON.stringify(before)}`);
        const listed = lsLong(path.join(mp, 'many'));
        const d = delta(before, shadow.requestCounts());
        assert.ok(d.readdirplus >= 1, `the listing came with attributes (READDIRPLUS): ${JSON.stringify(d)}`);
        assert.ok(d.lookup < 10, `no LOOKUP per name after a READDIRPLUS listing (${N + 2} entries): ${JSON.stringify(d)}`);
        assert.strictEqual(listed, lsLong(many), 'names, types, modes, sizes, owners, times and link counts as the folder has them');

        // An agent's change to a listed file shows at once (the entries READDIRPLUS gave the
        // kernel are invalidated like any other).
        await shadow.layer('agent').write('many/f7.txt', 'changed by the agent, longer than seven bytes');
        await shadow.activate('agent');
        const after = lsLong(path.join(mp, 'many'));
        assert.match(after, /^-rw-r--r-- +1 +\d+ +\d+ +45 +[\d.]+ f7\.txt$/m);
        await shadow.activate(null);
        assert.strictEqual(lsLong(path.join(mp, 'many')), listed);
      },
      { backend: 'fuse_ll' },
    );
  });
});
