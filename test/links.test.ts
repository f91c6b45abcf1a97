// Hard links and ctime: on a real file system an inode's ctime moves whenever one of its names
// goes away (unlink, or a rename over it), and every other name of the inode shows that. The
// same sequence runs in a plain directory and through a shadow, and both must agree.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { makeProject, tempDir, withShadow } from './helpers/fixtures';

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs the sequence in `dir`; returns what the other name of the replaced file shows. */
async function renameOverALinkedFile(
  dir: string,
): Promise<{ nlinkBefore: number; nlinkAfter: number; ctimeMoved: boolean; content: string }> {
  const p = (n: string): string => path.join(dir, n);
  fs.writeFileSync(p('victim.txt'), 'victim\n');
  fs.linkSync(p('victim.txt'), p('other-name.txt'));
  fs.writeFileSync(p('incoming.txt'), 'incoming\n');
  const before = fs.statSync(p('other-name.txt'), { bigint: true });
  await pause(20); // ctime has nanoseconds, but the clock that sets it may tick coarsely
  fs.renameSync(p('incoming.txt'), p('victim.txt'));
  const after = fs.statSync(p('other-name.txt'), { bigint: true });
  return {
    nlinkBefore: Number(before.nlink),
    nlinkAfter: Number(after.nlink),
    ctimeMoved: after.ctimeNs > before.ctimeNs,
    content: fs.readFileSync(p('other-name.txt'), 'utf8'),
  };
}

describe('hard links and ctime', () => {
  it('renaming over a file that has another hard link updates that link (nlink and ctime), as in a plain directory', async () => {
    const plain = await renameOverALinkedFile(tempDir('plain'));
    assert.deepStrictEqual(plain, { nlinkBefore: 2, nlinkAfter: 1, ctimeMoved: true, content: 'victim\n' });
    const shadowed = await withShadow(makeProject(), async (_shadow, mp) => renameOverALinkedFile(mp));
    assert.deepStrictEqual(shadowed, plain);
  });

  it('unlinking one name of a linked file updates the other name the same way', async () => {
    const run = async (dir: string): Promise<[number, boolean]> => {
      fs.writeFileSync(path.join(dir, 'a.txt'), 'a\n');
      fs.linkSync(path.join(dir, 'a.txt'), path.join(dir, 'b.txt'));
      const before = fs.statSync(path.join(dir, 'b.txt'), { bigint: true });
      await pause(20);
      fs.unlinkSync(path.join(dir, 'a.txt'));
      const after = fs.statSync(path.join(dir, 'b.txt'), { bigint: true });
      return [Number(after.nlink), after.ctimeNs > before.ctimeNs];
    };
    const plain = await run(tempDir('plain'));
    assert.deepStrictEqual(plain, [1, true]);
    assert.deepStrictEqual(await withShadow(makeProject(), async (_s, mp) => run(mp)), plain);
  });
});
