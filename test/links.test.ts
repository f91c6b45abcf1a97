// Hard links and ctime: on a real file system an inode's ctime moves whenever one of its names
// goes away (unlink, or a rename over it), and every other name of the inode shows that. The
// same sequence runs in a plain directory and through a shadow, and both must agree.
import * as assert from 'assert';
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { addon } from '../src/shadow/native';
import type { IoMode } from '../src/shadow';
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

/** A folder whose a.txt and b.txt are one file (a hard link). */
function linkedFolder(): string {
  const dir = tempDir('links');
  fs.writeFileSync(path.join(dir, 'a.txt'), 'first\n');
  fs.linkSync(path.join(dir, 'a.txt'), path.join(dir, 'b.txt'));
  return dir;
}

/**
 * In `dir` (a.txt and b.txt linked in the folder): a reader holds a.txt open, b.txt is appended
 * to by a shell, then a.txt gets a new link c.txt, appended to as well. What every name shows.
 */
function writeThroughLinks(dir: string): Record<string, string | number> {
  const p = (n: string): string => path.join(dir, n);
  const read = (n: string): string => fs.readFileSync(p(n), 'utf8');
  const fd = fs.openSync(p('a.txt'), 'r');
  const buf = Buffer.alloc(64);
  const out: Record<string, string | number> = {};
  try {
    out.readerBefore = buf.subarray(0, fs.readSync(fd, buf, 0, 64, 0)).toString();
    execFileSync('sh', ['-c', `printf 'more\\n' >> '${p('b.txt')}'`]);
    out.readerAfter = buf.subarray(0, fs.readSync(fd, buf, 0, 64, 0)).toString();
  } finally {
    fs.closeSync(fd);
  }
  out.a = read('a.txt');
  out.b = read('b.txt');
  out.bLinks = fs.statSync(p('b.txt')).nlink;
  fs.linkSync(p('a.txt'), p('c.txt'));
  execFileSync('sh', ['-c', `printf 'via c\\n' >> '${p('c.txt')}'`]);
  out.aThen = read('a.txt');
  out.c = read('c.txt');
  out.cLinks = fs.statSync(p('c.txt')).nlink;
  out.sameInode = Number(fs.statSync(p('a.txt')).ino === fs.statSync(p('c.txt')).ino);
  return out;
}

describe('hard links and ctime', () => {
  it("the folder's hard links: a write through one name changes that name alone, as kernel overlayfs (index=off) does; links made in the layer share their file; every I/O mode agrees", async () => {
    // The reference: kernel overlayfs over a folder with the same link, its upper dir in a temp dir.
    const ref = tempDir('links-ovl');
    for (const d of ['lower', 'upper', 'work', 'merged']) fs.mkdirSync(path.join(ref, d));
    fs.writeFileSync(path.join(ref, 'lower', 'a.txt'), 'first\n');
    fs.linkSync(path.join(ref, 'lower', 'a.txt'), path.join(ref, 'lower', 'b.txt'));
    const opts = `lowerdir=${ref}/lower,upperdir=${ref}/upper,workdir=${ref}/work,index=off`;
    const m = spawnSync('mount', ['-t', 'overlay', 'overlay', '-o', opts, path.join(ref, 'merged')], { encoding: 'utf8' });
    assert.strictEqual(m.status, 0, `kernel overlayfs (the reference) did not mount: ${m.stderr}`);
    let expected: Record<string, string | number>;
    try {
      expected = writeThroughLinks(path.join(ref, 'merged'));
    } finally {
      spawnSync('umount', [path.join(ref, 'merged')]);
    }
    assert.strictEqual(expected.b, 'first\nmore\n');
    assert.strictEqual(expected.a, 'first\n', 'the reference breaks the link at copy-up');
    // This pass's backend, then fuse_ll in each I/O mode.
    const modes: (IoMode | undefined)[] = [
      undefined,
      ...(addon().backends.includes('fuse_ll') ? (['cached', 'open', 'passthrough'] as const) : []),
    ];
    for (const io of modes) {
      const lower = linkedFolder();
      const backend = io ? 'fuse_ll' : undefined;
      const got = await withShadow(
        lower,
        async (shadow, mp) => {
          const out = writeThroughLinks(mp);
          // The layer holds what the mount showed: b.txt changed, a.txt and c.txt one file.
          assert.strictEqual((await shadow.layer('default').readFile('b.txt')).toString(), 'first\nmore\n');
          assert.strictEqual((await shadow.layer('default').readFile('a.txt')).toString(), 'first\nvia c\n');
          return out;
        },
        { ...(backend ? { backend } : {}), ...(io ? { io } : {}) },
      );
      assert.deepStrictEqual(got, expected, io ? `fuse_ll, io: ${io}` : `backend ${process.env.SHADOWFS_BACKEND ?? 'default'}`);
      assert.strictEqual(fs.readFileSync(path.join(lower, 'a.txt'), 'utf8'), 'first\n');
      assert.strictEqual(
        fs.statSync(path.join(lower, 'b.txt')).ino,
        fs.statSync(path.join(lower, 'a.txt')).ino,
        'still linked in the folder',
      );
    }
  });

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

  // Found by the differential test on fuse_hl: its kernel inodes are one per name, and the other
  // names of a hard-linked symlink were never invalidated (only regular files' were).
  it('a hard link of a symlink (names in two directories): both names show its link count, before and after one goes, as in a plain directory', async () => {
    const run = (dir: string): number[] => {
      const p = (n: string): string => path.join(dir, n);
      fs.mkdirSync(p('d'));
      fs.mkdirSync(p('e'));
      fs.symlinkSync('target', p('d/s'));
      const counts = [fs.lstatSync(p('d/s')).nlink];
      fs.linkSync(p('d/s'), p('e/t')); // link(2) does not follow a symlink: a second name of it
      counts.push(fs.lstatSync(p('d/s')).nlink, fs.lstatSync(p('e/t')).nlink);
      fs.readdirSync(p('d'));
      fs.unlinkSync(p('e/t'));
      counts.push(fs.lstatSync(p('d/s')).nlink);
      return counts;
    };
    const plain = run(tempDir('plain'));
    assert.deepStrictEqual(plain, [1, 2, 2, 1]);
    assert.deepStrictEqual(await withShadow(makeProject(), async (_s, mp) => run(mp)), plain);
  });
});
