// Unit tests of streamed binary literals (src/work/content.ts): what git apply makes of one whose
// pieces switch between data and zeros (deflated with different zlib strategies), and a literal
// past its cap that fails cleanly even while a switch of strategy is under way. No mount needed.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { gitBinaryPatchOf, literalHunkOf } from '../../src/patch/binary';
import { streamedLiteral } from '../../src/work/content';

async function* each(pieces: Buffer[]): AsyncIterable<Buffer> {
  for (const p of pieces) yield p;
}

describe('streamed binary literals', () => {
  it('pieces of data and of zeros make a literal git apply turns back into the same bytes, with the blob id git gives them', async () => {
    const pieces = [
      crypto.randomBytes(1 << 20),
      Buffer.alloc(8 << 20),
      Buffer.from('abc'.repeat(100_000)),
      Buffer.alloc(4 << 20),
      crypto.randomBytes(100),
      Buffer.alloc(70_000),
    ];
    const data = Buffer.concat(pieces);
    const lit = await streamedLiteral(each(pieces), data.length, 'f.bin');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-literal-'));
    try {
      const blob = spawnSync('git', ['hash-object', '--stdin'], { input: data, encoding: 'utf8' });
      assert.strictEqual(lit.id, blob.stdout.trim());
      const patch =
        'diff --git a/f.bin b/f.bin\nnew file mode 100644\n' +
        `index 0000000000000000000000000000000000000000..${lit.id}\n` +
        gitBinaryPatchOf(lit.hunk, literalHunkOf(Buffer.alloc(0)));
      const r = spawnSync('git', ['apply', '-'], { cwd: dir, input: patch, encoding: 'utf8' });
      assert.strictEqual(r.status, 0, r.stderr);
      assert.ok(fs.readFileSync(path.join(dir, 'f.bin')).equals(data), 'git apply made the same bytes');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('past its cap it fails with FILE_TOO_LARGE, also when the cap is passed while the strategy changes', async () => {
    // 1,040,000: a MiB of random bytes deflates to about 1,032,000 bytes by the time zlib has
    // taken it in, and to about 1,049,000 once flushed, so this cap is passed by the flush that a
    // change of strategy makes (the zeros after it); 16 KiB is passed at once.
    for (const cap of [16 * 1024, 1_040_000]) {
      const pieces = [crypto.randomBytes(1 << 20), Buffer.alloc(1 << 20), crypto.randomBytes(1 << 20), Buffer.alloc(1 << 20)];
      await assert.rejects(streamedLiteral(each(pieces), 4 << 20, 'big.bin', cap), { code: 'FILE_TOO_LARGE' }, `cap ${cap}`);
    }
  });
});
