// A layer switch between the kernel's lookup of an object and the operation on it: the probe
// holds a descriptor looked up in layer x, the test switches the shared mount to layer y, then
// the probe operates through the descriptor. fuse_ll resolves one layer per request from the
// node the kernel holds, so every operation acts on the object that was looked up (x's); two
// directories from different layers are two file systems (EXDEV). fuse_hl is path-based (the
// high-level API has no node to resolve from), so it serves the path as the active layer shows
// it: the documented difference between the backends, asserted here for each.
import * as assert from 'assert';
import { ChildProcessWithoutNullStreams, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { makeProject, withShadow } from './helpers/fixtures';
import { probe, probeBinary } from './helpers/probe';

/** fsprobe in "hold" mode: one descriptor, one command per line, one reply per line. */
class Held {
  private readonly lines: string[] = [];
  private waiting: ((line: string) => void) | undefined;
  private buf = '';

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      this.buf += chunk;
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        if (this.waiting) {
          const w = this.waiting;
          this.waiting = undefined;
          w(line);
        } else {
          this.lines.push(line);
        }
      }
    });
  }

  static async open(cwd: string, how: 'path' | 'dir' | 'read', rel: string): Promise<Held> {
    const h = new Held(spawn(probeBinary(), ['hold', how, rel], { cwd }));
    assert.strictEqual(await h.next(), 'ready');
    return h;
  }

  private next(): Promise<string> {
    const line = this.lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('fsprobe hold did not answer within 30 s')), 30_000);
      this.waiting = (l) => {
        clearTimeout(timer);
        resolve(l);
      };
    });
  }

  async run(command: string): Promise<string> {
    this.child.stdin.write(`${command}\n`);
    return this.next();
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const done = new Promise((r) => this.child.once('exit', r));
    this.child.stdin.end('quit\n');
    await done;
  }
}

async function holding<T>(cwd: string, how: 'path' | 'dir' | 'read', rel: string, fn: (h: Held) => Promise<T>): Promise<T> {
  const h = await Held.open(cwd, how, rel);
  try {
    return await fn(h);
  } finally {
    await h.close();
  }
}

describe('a layer switch between lookup and operation', () => {
  it('readlink answers for the symlink that was looked up', async () => {
    await withShadow(makeProject(), async (shadow, mp) => {
      await shadow.createLayer('x');
      await shadow.createLayer('y');
      await shadow.activate('y');
      fs.symlinkSync('target-of-y', path.join(mp, 'ln'));
      await shadow.activate('x');
      fs.symlinkSync('target-of-x', path.join(mp, 'ln'));
      await holding(mp, 'path', 'ln', async (h) => {
        await shadow.activate('y');
        const expected = shadow.backend === 'fuse_ll' ? 'ok target-of-x' : 'ok target-of-y';
        assert.strictEqual(await h.run('readlink'), expected);
      });
    });
  });

  it('xattr calls act on the file that was opened, in its layer', async () => {
    await withShadow(makeProject(), async (shadow, mp) => {
      await shadow.createLayer('x');
      await shadow.createLayer('y');
      const f = path.join(mp, 'tagged.txt');
      for (const id of ['y', 'x']) {
        await shadow.activate(id);
        fs.writeFileSync(f, `${id}\n`);
        assert.strictEqual(probe('setxattr', f, 'user.k', id), 'ok');
      }
      await holding(mp, 'read', 'tagged.txt', async (h) => {
        await shadow.activate('y');
        const own = shadow.backend === 'fuse_ll' ? 'x' : 'y';
        assert.strictEqual(await h.run('getxattr user.k'), `ok ${own}`);
        assert.strictEqual(await h.run('listxattr'), 'ok user.k');
        assert.strictEqual(await h.run('setxattr user.n new'), 'ok');
        assert.strictEqual(await h.run('removexattr user.k'), 'ok');
      });
      const other = shadow.backend === 'fuse_ll' ? 'y' : 'x';
      const own = shadow.backend === 'fuse_ll' ? 'x' : 'y';
      await shadow.activate(other);
      assert.strictEqual(probe('getxattr', f, 'user.k'), other, 'the other layer keeps its attribute');
      assert.strictEqual(probe('getxattr', f, 'user.n'), 'errno ENODATA');
      await shadow.activate(own);
      assert.strictEqual(probe('getxattr', f, 'user.k'), 'errno ENODATA');
      assert.strictEqual(probe('getxattr', f, 'user.n'), 'new');
    });
  });

  it('a folder file opened for writing before a switch and first written after it: the bytes and a truncate go to the layer it was opened in', async () => {
    // fuse_ll's cached I/O has no handle of the open: a WRITE comes by node, and went to the
    // active layer whenever it showed the same folder file, so one agent's open file wrote
    // into another agent's layer (and that agent's apply would have applied it).
    await withShadow(makeProject(), async (shadow, mp) => {
      await shadow.createLayer('x');
      await shadow.createLayer('y');
      await shadow.activate('x');
      const f = path.join(mp, 'README.md');
      const before = fs.readFileSync(f, 'utf8');
      const fd = fs.openSync(f, 'r+');
      try {
        await shadow.activate('y');
        fs.writeSync(fd, 'X', 0);
        fs.ftruncateSync(fd, 5);
      } finally {
        fs.closeSync(fd);
      }
      assert.deepStrictEqual(await shadow.layer('y').changes(), []);
      assert.deepStrictEqual(
        (await shadow.layer('x').changes()).map((c) => `${c.kind} ${c.path}`),
        ['modified README.md'],
      );
      assert.strictEqual((await shadow.layer('x').readFile('README.md')).toString(), `X${before.slice(1, 5)}`);
      // fuse_hl keeps attributes per path: the truncate through x's file must not leave y's
      // readers a short size.
      assert.strictEqual(fs.statSync(f).size, Buffer.byteLength(before), "layer y's size");
      assert.strictEqual(fs.readFileSync(f, 'utf8'), before, 'layer y shows the folder file still');
    });
  });

  it('names made and removed in a directory land in the layer the directory was looked up in', async () => {
    await withShadow(makeProject(), async (shadow, mp) => {
      await shadow.createLayer('x');
      await shadow.createLayer('y');
      await shadow.activate('x');
      const dx = path.join(mp, 'only-in-x');
      fs.mkdirSync(path.join(dx, 'old-dir'), { recursive: true });
      fs.writeFileSync(path.join(dx, 'old-file'), 'old\n');
      await holding(mp, 'dir', 'only-in-x', async (h) => {
        await shadow.activate('y');
        const commands = ['mkdir sub', 'mkfifo pipe', 'symlink somewhere ln', 'create made.txt', 'unlink old-file', 'rmdir old-dir'];
        const expected = shadow.backend === 'fuse_ll' ? 'ok' : 'errno ENOENT';
        for (const c of commands) assert.strictEqual(await h.run(c), expected, c);
        if (shadow.backend === 'fuse_ll') {
          // The new objects are known to the kernel as x's: a lookup through the same directory finds them.
          assert.strictEqual(await h.run('stat sub'), 'ok dir');
          assert.strictEqual(await h.run('stat pipe'), 'ok fifo');
          assert.strictEqual(await h.run('stat ln'), 'ok symlink');
          assert.strictEqual(await h.run('stat made.txt'), 'ok file');
        }
      });
      assert.ok(!fs.existsSync(dx), 'layer y never had the directory');
      await shadow.activate('x');
      const listing = fs.readdirSync(dx).sort();
      if (shadow.backend === 'fuse_ll') {
        assert.deepStrictEqual(listing, ['ln', 'made.txt', 'pipe', 'sub']);
        assert.strictEqual(fs.readlinkSync(path.join(dx, 'ln')), 'somewhere');
        assert.strictEqual(fs.readFileSync(path.join(dx, 'made.txt'), 'utf8'), 'made\n');
        assert.ok(fs.lstatSync(path.join(dx, 'pipe')).isFIFO());
      } else {
        assert.deepStrictEqual(listing, ['old-dir', 'old-file']);
      }
    });
  });

  it('link and rename between objects of two layers are refused as across file systems', async () => {
    await withShadow(makeProject(), async (shadow, mp) => {
      await shadow.createLayer('x');
      await shadow.createLayer('y');
      await shadow.activate('x');
      fs.writeFileSync(path.join(mp, 'only-x.txt'), 'x\n');
      fs.mkdirSync(path.join(mp, 'dir-x'));
      fs.writeFileSync(path.join(mp, 'dir-x', 'inner.txt'), 'inner\n');
      const refused = shadow.backend === 'fuse_ll' ? 'errno EXDEV' : 'errno ENOENT';
      await holding(mp, 'path', 'only-x.txt', async (h) => {
        await shadow.activate('y');
        assert.strictEqual(await h.run('link-to second-name.txt'), refused);
      });
      await shadow.activate('x');
      await holding(mp, 'dir', 'dir-x', async (h) => {
        await shadow.activate('y');
        assert.strictEqual(await h.run('rename-to inner.txt moved.txt'), refused);
      });
      assert.ok(!fs.existsSync(path.join(mp, 'second-name.txt')));
      assert.ok(!fs.existsSync(path.join(mp, 'moved.txt')));
      await shadow.activate('x');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'dir-x', 'inner.txt'), 'utf8'), 'inner\n');
      assert.ok(!fs.existsSync(path.join(mp, 'second-name.txt')));
    });
  });
});
