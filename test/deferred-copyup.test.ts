// Copy-up at the first change, not at a write-open (issue #28, deliverable 5; finding 11): a file
// of the folder opened for writing is copied into the layer by its first write, truncate,
// fallocate or mmap store, never by the open alone. Runs on this pass's backend; the fuse_ll
// pass (the default one) runs fuse_ll in each I/O mode, since each serves opens differently
// ("cached": no OPEN at all, "open": one per open, "passthrough": read-only opens handed to the
// kernel, write-opens served like "open").
//
// Whether a copy-up read the folder's file is seen through the core's test hook
// SHADOWFS_TEST_HOLD_COPYUP=<file>: every copy-up that reads creates <file>.held first (and waits
// only while <file> exists, which here it never does).
import * as assert from 'assert';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import type { IoMode, MountOptions } from '../src/shadow';
import { tempDir, withShadow } from './helpers/fixtures';
import { probe } from './helpers/probe';

const MiB = 1 << 20;
const sha = (file: string): string => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/** A sparse file of `size` bytes with "head" at 0, "tail" at its end and "mid!" in the middle. */
function sparse(file: string, size: number): void {
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, 'head', 0);
    fs.writeSync(fd, 'mid!', size / 2);
    fs.writeSync(fd, 'tail', size - 4);
  } finally {
    fs.closeSync(fd);
  }
}

function folder(): string {
  const lower = tempDir('defer');
  sparse(path.join(lower, 'huge.bin'), 256 * MiB);
  sparse(path.join(lower, 'big.bin'), 64 * MiB);
  fs.writeFileSync(path.join(lower, 'small.txt'), 'small file\n');
  fs.writeFileSync(path.join(lower, 'log.txt'), 'line 1\n');
  fs.writeFileSync(path.join(lower, 'trunc.txt'), 'to be truncated\n');
  fs.writeFileSync(path.join(lower, 'map.txt'), 'mapped file, before\n');
  return lower;
}

function readAt(fd: number, off: number, len: number): string {
  const buf = Buffer.alloc(len);
  const n = fs.readSync(fd, buf, 0, len, off);
  return buf.subarray(0, n).toString();
}

type Case = { label: string; options: MountOptions; readerSeesCopy: boolean };

// fuse_hl's pass runs its own backend only; every other pass runs fuse_ll in each mode.
const cases: Case[] =
  process.env.SHADOWFS_BACKEND === 'fuse_hl'
    ? [{ label: 'fuse_hl', options: { backend: 'fuse_hl' }, readerSeesCopy: true }]
    : (['cached', 'open', 'passthrough'] as IoMode[]).map((io) => ({
        label: `fuse_ll, io: ${io}`,
        options: { backend: 'fuse_ll', io },
        // A read-only open through passthrough reads the folder's file in the kernel: it keeps
        // reading that file after another handle's copy-up (test/passthrough.test.ts).
        readerSeesCopy: io !== 'passthrough',
      }));

describe('copy-up at the first change, not at a write-open (#28, finding 11)', function () {
  const hold = path.join(tempDir('hold'), 'copyup');
  const held = `${hold}.held`;
  const copiedUp = (): boolean => fs.existsSync(held);
  let saved: string | undefined;
  before(() => {
    saved = process.env.SHADOWFS_TEST_HOLD_COPYUP;
    process.env.SHADOWFS_TEST_HOLD_COPYUP = hold; // never created: copy-ups only leave the mark
  });
  after(() => {
    if (saved === undefined) delete process.env.SHADOWFS_TEST_HOLD_COPYUP;
    else process.env.SHADOWFS_TEST_HOLD_COPYUP = saved;
  });
  beforeEach(() => fs.rmSync(held, { force: true }));

  for (const c of cases) {
    describe(c.label, function () {
      it('a 256 MiB file opened O_RDWR, read and closed unwritten: nothing copied, the layer holds nothing', async () => {
        const lower = folder();
        const before = sha(path.join(lower, 'huge.bin'));
        await withShadow(
          lower,
          async (shadow, mp) => {
            const f = path.join(mp, 'huge.bin');
            const fd = fs.openSync(f, 'r+');
            try {
              // Reads before any write are the folder's bytes.
              assert.strictEqual(readAt(fd, 0, 4), 'head');
              assert.strictEqual(readAt(fd, 128 * MiB, 4), 'mid!');
              assert.strictEqual(readAt(fd, 256 * MiB - 4, 4), 'tail');
              assert.strictEqual(fs.fstatSync(fd).size, 256 * MiB);
            } finally {
              fs.closeSync(fd);
            }
            // Node's own write-open flags too: O_WRONLY, O_RDWR|O_CREAT of an existing file.
            fs.closeSync(fs.openSync(path.join(mp, 'small.txt'), fs.constants.O_WRONLY));
            fs.closeSync(fs.openSync(path.join(mp, 'small.txt'), fs.constants.O_RDWR | fs.constants.O_CREAT));
            assert.strictEqual(copiedUp(), false, 'a write-open read the folder file into the layer');
            const layer = shadow.layer('default');
            assert.deepStrictEqual(await layer.changes(), []);
            const st = await layer.stats();
            assert.strictEqual(st.paths, 0, `the layer holds paths: ${JSON.stringify(st)}`);
            assert.strictEqual(st.spilledBytes, 0);
            assert.ok(st.memoryBytes < MiB, `the layer holds ${st.memoryBytes} bytes`);
          },
          c.options,
        );
        assert.strictEqual(sha(path.join(lower, 'huge.bin')), before);
      });

      it('the first write copies up (contents right, folder unchanged); a read-only handle opened before sees it', async () => {
        const lower = folder();
        const a = path.join(lower, 'big.bin');
        const before = sha(a);
        const expected = fs.readFileSync(a);
        expected.write('WRITTEN', 3 * MiB);
        await withShadow(
          lower,
          async (shadow, mp) => {
            const f = path.join(mp, 'big.bin');
            const ro = fs.openSync(f, 'r');
            const rw = fs.openSync(f, 'r+');
            try {
              assert.strictEqual(readAt(ro, 3 * MiB, 7), '\0'.repeat(7));
              assert.strictEqual(copiedUp(), false);
              fs.writeSync(rw, 'WRITTEN', 3 * MiB);
              assert.strictEqual(copiedUp(), true, 'the first write copied the file up');
              assert.strictEqual(readAt(rw, 3 * MiB, 7), 'WRITTEN');
              assert.strictEqual(readAt(rw, 0, 4), 'head');
              assert.strictEqual(readAt(ro, 3 * MiB, 7), c.readerSeesCopy ? 'WRITTEN' : '\0'.repeat(7));
            } finally {
              fs.closeSync(ro);
              fs.closeSync(rw);
            }
            assert.strictEqual(sha(f), crypto.createHash('sha256').update(expected).digest('hex'));
            assert.strictEqual(fs.statSync(f).ino, fs.statSync(a).ino, 'the inode number stays across copy-up');
            const layer = shadow.layer('default');
            assert.deepStrictEqual(
              (await layer.changes()).map((x) => [x.path, x.kind]),
              [['big.bin', 'modified']],
            );
            assert.strictEqual((await layer.readRange('big.bin', 3 * MiB, 7)).data.toString(), 'WRITTEN');
          },
          c.options,
        );
        assert.strictEqual(sha(a), before, 'the folder file changed');
      });

      it('ftruncate through a write handle, O_TRUNC at open, O_APPEND and a shared writable mapping all land in the layer', async () => {
        const lower = folder();
        const sums = ['small.txt', 'log.txt', 'trunc.txt', 'map.txt'].map((n) => sha(path.join(lower, n)));
        await withShadow(
          lower,
          async (shadow, mp) => {
            const layer = shadow.layer('default');
            // ftruncate on an O_RDWR descriptor: a change, copied up then cut.
            const fd = fs.openSync(path.join(mp, 'small.txt'), 'r+');
            try {
              assert.strictEqual(copiedUp(), false);
              fs.ftruncateSync(fd, 5);
              assert.strictEqual(readAt(fd, 0, 64), 'small');
            } finally {
              fs.closeSync(fd);
            }
            assert.strictEqual(fs.readFileSync(path.join(mp, 'small.txt'), 'utf8'), 'small');
            // O_TRUNC at open empties the file even if nothing is written.
            fs.closeSync(fs.openSync(path.join(mp, 'trunc.txt'), 'w'));
            assert.strictEqual(fs.readFileSync(path.join(mp, 'trunc.txt'), 'utf8'), '');
            // O_APPEND: every write lands at the end, the first one copying the file up.
            const ap = fs.openSync(path.join(mp, 'log.txt'), 'a');
            try {
              fs.writeSync(ap, 'line 2\n');
              fs.writeSync(ap, 'line 3\n');
            } finally {
              fs.closeSync(ap);
            }
            assert.strictEqual(fs.readFileSync(path.join(mp, 'log.txt'), 'utf8'), 'line 1\nline 2\nline 3\n');
            // A store through a shared writable mapping of a file opened O_RDWR.
            assert.strictEqual(probe('mmap-write', path.join(mp, 'map.txt'), '13', 'AFTER!'), 'ok');
            assert.strictEqual(fs.readFileSync(path.join(mp, 'map.txt'), 'utf8'), 'mapped file, AFTER!\n');
            assert.strictEqual((await layer.readFile('map.txt')).toString(), 'mapped file, AFTER!\n');
            assert.strictEqual((await layer.readFile('log.txt')).toString(), 'line 1\nline 2\nline 3\n');
            assert.strictEqual((await layer.readFile('small.txt')).toString(), 'small');
            assert.strictEqual((await layer.readFile('trunc.txt')).toString(), '');
            assert.deepStrictEqual((await layer.changes()).map((x) => x.path).sort(), ['log.txt', 'map.txt', 'small.txt', 'trunc.txt']);
          },
          c.options,
        );
        assert.deepStrictEqual(
          ['small.txt', 'log.txt', 'trunc.txt', 'map.txt'].map((n) => sha(path.join(lower, n))),
          sums,
          'a folder file changed',
        );
      });

      it('a write through a handle whose file was renamed or deleted in the shadow since the open follows the file', async () => {
        const lower = folder();
        await withShadow(
          lower,
          async (shadow, mp) => {
            const moved = fs.openSync(path.join(mp, 'log.txt'), 'r+');
            const gone = fs.openSync(path.join(mp, 'small.txt'), 'r+');
            try {
              fs.renameSync(path.join(mp, 'log.txt'), path.join(mp, 'renamed.txt'));
              fs.unlinkSync(path.join(mp, 'small.txt'));
              fs.writeSync(moved, 'LINE', 0);
              fs.writeSync(gone, 'SMALL', 0);
              assert.strictEqual(readAt(gone, 0, 64), 'SMALL file\n');
            } finally {
              fs.closeSync(moved);
              fs.closeSync(gone);
            }
            assert.strictEqual(fs.readFileSync(path.join(mp, 'renamed.txt'), 'utf8'), 'LINE 1\n');
            assert.ok(!fs.existsSync(path.join(mp, 'small.txt')));
            assert.ok(!fs.existsSync(path.join(mp, 'log.txt')));
            assert.strictEqual((await shadow.layer('default').readFile('renamed.txt')).toString(), 'LINE 1\n');
          },
          c.options,
        );
        assert.strictEqual(fs.readFileSync(path.join(lower, 'log.txt'), 'utf8'), 'line 1\n');
        assert.strictEqual(fs.readFileSync(path.join(lower, 'small.txt'), 'utf8'), 'small file\n');
      });
    });
  }
});
