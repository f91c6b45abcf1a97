// Every file-system operation of DESIGN.md "Semantics that must hold" §3, through a real mount
// of a real folder. Each test checks the shadow's answer and (via withShadow's guard) that the
// folder itself was not written.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { errCode, makeProject, tempDir, withShadow } from './helpers/fixtures';
import { probe } from './helpers/probe';

describe('file-system operations through a shadow', function () {
  let lower: string;
  beforeEach(() => {
    lower = makeProject();
  });

  it('reads pass through: same tree, contents, modes, symlinks and inode numbers', async () => {
    await withShadow(lower, (_s, mp) => {
      assert.deepStrictEqual(fs.readdirSync(mp).sort(), fs.readdirSync(lower).sort());
      assert.strictEqual(fs.readFileSync(path.join(mp, 'src/math.js'), 'utf8'), fs.readFileSync(path.join(lower, 'src/math.js'), 'utf8'));
      assert.strictEqual(fs.readlinkSync(path.join(mp, 'link-to-math')), 'src/math.js');
      assert.strictEqual(fs.statSync(path.join(mp, 'script.sh')).mode & 0o777, 0o755);
      assert.strictEqual(fs.statSync(path.join(mp, 'src/math.js')).ino, fs.statSync(path.join(lower, 'src/math.js')).ino);
      assert.ok(fs.statSync(path.join(mp, 'deep/a/b')).isDirectory());
      assert.strictEqual(fs.readFileSync(path.join(mp, 'link-to-math'), 'utf8'), fs.readFileSync(path.join(lower, 'src/math.js'), 'utf8'));
    });
  });

  it('write, append, write at an offset and truncate land in the layer; inode stays stable across copy-up', async () => {
    await withShadow(lower, (_s, mp) => {
      const f = path.join(mp, 'README.md');
      const ino = fs.statSync(f).ino;
      fs.appendFileSync(f, 'appended\n');
      assert.ok(fs.readFileSync(f, 'utf8').endsWith('appended\n'));
      assert.strictEqual(fs.statSync(f).ino, ino, 'inode number changed on copy-up');
      const fd = fs.openSync(f, 'r+');
      fs.writeSync(fd, 'XY', 2);
      fs.closeSync(fd);
      assert.strictEqual(fs.readFileSync(f, 'utf8').slice(0, 4), '# XY');
      fs.truncateSync(f, 3);
      assert.strictEqual(fs.readFileSync(f, 'utf8'), '# X');
      fs.truncateSync(f, 6);
      assert.deepStrictEqual([...fs.readFileSync(f)], [0x23, 0x20, 0x58, 0, 0, 0]);
      const g = path.join(mp, 'src/new.js');
      fs.writeFileSync(g, 'module.exports = 1;\n', { mode: 0o640 });
      assert.strictEqual(fs.statSync(g).mode & 0o777, 0o640 & ~process.umask());
      assert.strictEqual(fs.readFileSync(g, 'utf8'), 'module.exports = 1;\n');
      // A handle opened read-only before another handle copies the file up sees the new bytes.
      const h = path.join(mp, 'deep/a/top.txt');
      const ro = fs.openSync(h, 'r');
      fs.writeFileSync(h, 'TOP\n');
      const buf = Buffer.alloc(4);
      fs.readSync(ro, buf, 0, 4, 0);
      fs.closeSync(ro);
      assert.strictEqual(buf.toString(), 'TOP\n');
      // Writing the same content through O_TRUNC of a big file works too.
      const big = Buffer.alloc(3 * 1024 * 1024 + 17, 7);
      fs.writeFileSync(path.join(mp, 'big.bin'), big);
      assert.ok(fs.readFileSync(path.join(mp, 'big.bin')).equals(big));
    });
    assert.ok(!fs.readFileSync(path.join(lower, 'README.md'), 'utf8').includes('appended'));
  });

  it('cp -a and cp -p keep the modes they copy, as on a file system without ACLs (the shadow refuses POSIX ACLs)', async () => {
    await withShadow(lower, (_s, mp) => {
      fs.mkdirSync(path.join(mp, 'd'));
      fs.writeFileSync(path.join(mp, 'd', 'f'), 'x\n');
      fs.chmodSync(path.join(mp, 'd', 'f'), 0o755);
      const r = spawnSync('sh', ['-c', 'cp -a d d2 && cp -p README.md R2.md && cp -a script.sh s2.sh'], { cwd: mp, encoding: 'utf8' });
      assert.strictEqual(r.status, 0, r.stderr);
      const mode = (rel: string): string => (fs.statSync(path.join(mp, rel)).mode & 0o7777).toString(8);
      assert.deepStrictEqual(['d2', 'd2/f', 'R2.md', 's2.sh'].map(mode), ['d', 'd/f', 'README.md', 'script.sh'].map(mode));
    });
  });

  it('unlink hides a file of the folder; readdir after deletes shows the rest', async () => {
    await withShadow(lower, (_s, mp) => {
      fs.unlinkSync(path.join(mp, 'src/math.js'));
      assert.strictEqual(
        errCode(() => fs.statSync(path.join(mp, 'src/math.js'))),
        'ENOENT',
      );
      assert.deepStrictEqual(fs.readdirSync(path.join(mp, 'src')), []);
      fs.unlinkSync(path.join(mp, 'link-to-math'));
      assert.ok(!fs.readdirSync(mp).includes('link-to-math'));
      assert.strictEqual(
        errCode(() => fs.unlinkSync(path.join(mp, 'src'))),
        'EISDIR',
      );
      assert.strictEqual(
        errCode(() => fs.unlinkSync(path.join(mp, 'nope'))),
        'ENOENT',
      );
      // Recreating a deleted name gives a new, empty file.
      fs.writeFileSync(path.join(mp, 'src/math.js'), '');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'src/math.js'), 'utf8'), '');
    });
  });

  it('rmdir of a directory whose children exist only in the folder: ENOTEMPTY, then works once they are gone', async () => {
    await withShadow(lower, (_s, mp) => {
      const d = path.join(mp, 'deep/a/b/c');
      assert.strictEqual(
        errCode(() => fs.rmdirSync(d)),
        'ENOTEMPTY',
      );
      fs.unlinkSync(path.join(d, 'leaf.txt'));
      fs.rmdirSync(d);
      assert.strictEqual(
        errCode(() => fs.statSync(d)),
        'ENOENT',
      );
      assert.deepStrictEqual(fs.readdirSync(path.join(mp, 'deep/a/b')), []);
      assert.strictEqual(
        errCode(() => fs.rmdirSync(path.join(mp, 'README.md'))),
        'ENOTDIR',
      );
      fs.rmSync(path.join(mp, 'deep'), { recursive: true });
      assert.ok(!fs.readdirSync(mp).includes('deep'));
      // mkdir where a folder directory was deleted: new and empty (no child of the old one shows).
      fs.mkdirSync(path.join(mp, 'deep'));
      assert.deepStrictEqual(fs.readdirSync(path.join(mp, 'deep')), []);
      assert.strictEqual(
        errCode(() => fs.mkdirSync(path.join(mp, 'src'))),
        'EEXIST',
      );
      fs.rmdirSync(path.join(mp, 'empty'));
      assert.strictEqual(
        errCode(() => fs.rmdirSync(path.join(mp, 'empty'))),
        'ENOENT',
      );
    });
  });

  it('rename: files, over an existing file, directories that exist only in the folder, and back', async () => {
    await withShadow(lower, (_s, mp) => {
      const p = (r: string): string => path.join(mp, r);
      const mathIno = fs.statSync(p('src/math.js')).ino;
      fs.renameSync(p('src/math.js'), p('src/calc.js'));
      assert.strictEqual(fs.statSync(p('src/calc.js')).ino, mathIno);
      assert.strictEqual(
        errCode(() => fs.statSync(p('src/math.js'))),
        'ENOENT',
      );
      assert.ok(fs.readFileSync(p('src/calc.js'), 'utf8').includes('function add'));
      // over an existing file
      fs.renameSync(p('src/calc.js'), p('README.md'));
      assert.ok(fs.readFileSync(p('README.md'), 'utf8').includes('function add'));
      assert.deepStrictEqual(fs.readdirSync(p('src')), []);
      // a directory tree that exists only in the folder
      fs.renameSync(p('deep'), p('moved'));
      assert.strictEqual(fs.readFileSync(p('moved/a/b/c/leaf.txt'), 'utf8'), 'leaf\n');
      assert.strictEqual(
        errCode(() => fs.statSync(p('deep'))),
        'ENOENT',
      );
      fs.writeFileSync(p('moved/a/b/c/leaf.txt'), 'changed leaf\n');
      fs.mkdirSync(p('moved/a/new'));
      fs.renameSync(p('moved/a'), p('src/a'));
      assert.strictEqual(fs.readFileSync(p('src/a/b/c/leaf.txt'), 'utf8'), 'changed leaf\n');
      assert.deepStrictEqual(fs.readdirSync(p('src/a')).sort(), ['b', 'new', 'top.txt']);
      // and back to where it came from
      fs.renameSync(p('moved'), p('deep'));
      fs.renameSync(p('src/a'), p('deep/a'));
      assert.strictEqual(fs.readFileSync(p('deep/a/top.txt'), 'utf8'), 'top\n');
      // directory over an empty directory; over a non-empty one fails
      fs.mkdirSync(p('target'));
      fs.renameSync(p('empty'), p('target'));
      assert.strictEqual(
        errCode(() => fs.renameSync(p('target'), p('deep'))),
        'ENOTEMPTY',
      );
      assert.strictEqual(
        errCode(() => fs.renameSync(p('target'), p('package.json'))),
        'ENOTDIR',
      );
      assert.strictEqual(
        errCode(() => fs.renameSync(p('package.json'), p('deep'))),
        'EISDIR',
      );
      assert.strictEqual(
        errCode(() => fs.renameSync(p('deep'), p('deep/a/inside'))),
        'EINVAL',
      );
      assert.strictEqual(
        errCode(() => fs.renameSync(p('missing'), p('x'))),
        'ENOENT',
      );
    });
  });

  it('renameat2 RENAME_NOREPLACE and RENAME_EXCHANGE', async () => {
    await withShadow(lower, (_s, mp) => {
      const p = (r: string): string => path.join(mp, r);
      assert.strictEqual(probe('rename2', p('README.md'), p('package.json'), 'noreplace'), 'errno EEXIST');
      assert.strictEqual(probe('rename2', p('README.md'), p('README2.md'), 'noreplace'), 'ok');
      const readme = fs.readFileSync(p('README2.md'), 'utf8');
      const pkg = fs.readFileSync(p('package.json'), 'utf8');
      assert.strictEqual(probe('rename2', p('README2.md'), p('package.json'), 'exchange'), 'ok');
      assert.strictEqual(fs.readFileSync(p('README2.md'), 'utf8'), pkg);
      assert.strictEqual(fs.readFileSync(p('package.json'), 'utf8'), readme);
      assert.strictEqual(probe('rename2', p('src'), p('deep'), 'exchange'), 'ok');
      assert.deepStrictEqual(fs.readdirSync(p('src')), ['a']);
      assert.deepStrictEqual(fs.readdirSync(p('deep')), ['math.js']);
      assert.strictEqual(probe('rename2', p('src'), p('nothing'), 'exchange'), 'errno ENOENT');
    });
  });

  it('symlink, readlink and hard links (one inode, two names)', async () => {
    await withShadow(lower, (_s, mp) => {
      const p = (r: string): string => path.join(mp, r);
      fs.symlinkSync('../README.md', p('src/readme-link'));
      assert.strictEqual(fs.readlinkSync(p('src/readme-link')), '../README.md');
      assert.ok(fs.lstatSync(p('src/readme-link')).isSymbolicLink());
      assert.strictEqual(fs.readFileSync(p('src/readme-link'), 'utf8'), fs.readFileSync(p('README.md'), 'utf8'));
      assert.strictEqual(
        errCode(() => fs.symlinkSync('x', p('README.md'))),
        'EEXIST',
      );
      fs.linkSync(p('src/math.js'), p('math-hardlink.js'));
      const a = fs.statSync(p('src/math.js'));
      const b = fs.statSync(p('math-hardlink.js'));
      assert.strictEqual(a.ino, b.ino);
      assert.strictEqual(b.nlink, 2);
      fs.appendFileSync(p('math-hardlink.js'), '// via the second name\n');
      assert.ok(fs.readFileSync(p('src/math.js'), 'utf8').endsWith('// via the second name\n'));
      fs.unlinkSync(p('src/math.js'));
      assert.strictEqual(fs.statSync(p('math-hardlink.js')).nlink, 1);
      assert.strictEqual(
        errCode(() => fs.linkSync(p('src'), p('srclink'))),
        'EPERM',
      );
    });
  });

  it('chmod, chown and utimens change only the shadow (metadata copy-up)', async () => {
    await withShadow(lower, (_s, mp) => {
      const f = path.join(mp, 'src/math.js');
      fs.chmodSync(f, 0o600);
      assert.strictEqual(fs.statSync(f).mode & 0o7777, 0o600);
      fs.chownSync(f, 1234, 5678);
      assert.strictEqual(fs.statSync(f).uid, 1234);
      assert.strictEqual(fs.statSync(f).gid, 5678);
      const t = new Date('2001-02-03T04:05:06Z');
      fs.utimesSync(f, t, t);
      assert.strictEqual(fs.statSync(f).mtime.getTime(), t.getTime());
      assert.ok(fs.readFileSync(f, 'utf8').includes('function add'), 'content survives a metadata-only copy-up');
      fs.chmodSync(path.join(mp, 'src'), 0o700);
      assert.strictEqual(fs.statSync(path.join(mp, 'src')).mode & 0o777, 0o700);
      assert.deepStrictEqual(fs.readdirSync(path.join(mp, 'src')), ['math.js']);
      fs.lutimesSync(path.join(mp, 'link-to-math'), t, t);
      assert.strictEqual(fs.lstatSync(path.join(mp, 'link-to-math')).mtime.getTime(), t.getTime());
    });
  });

  it('statfs, xattrs, locks and mmap', async () => {
    await withShadow(lower, (_s, mp) => {
      const st = fs.statfsSync(mp);
      assert.ok(st.blocks > 0 && st.bsize > 0);
      const f = path.join(mp, 'README.md');
      assert.strictEqual(probe('setxattr', f, 'user.agent', 'alice'), 'ok');
      assert.strictEqual(probe('getxattr', f, 'user.agent'), 'alice');
      assert.strictEqual(probe('listxattr', f), 'user.agent');
      assert.strictEqual(probe('removexattr', f, 'user.agent'), 'ok');
      assert.strictEqual(probe('getxattr', f, 'user.agent'), 'errno ENODATA');
      assert.strictEqual(probe('flock', f), 'ok');
      assert.strictEqual(probe('mmap-read', path.join(mp, 'src/math.js')), fs.readFileSync(path.join(lower, 'src/math.js'), 'utf8').trim());
      assert.strictEqual(probe('mmap-write', f, '2', 'MMAP'), 'ok');
      assert.strictEqual(fs.readFileSync(f, 'utf8').slice(0, 6), '# MMAP');
    });
  });

  it('errors match a real file system: ENAMETOOLONG, EEXIST, ENOENT, ENOTDIR', async () => {
    await withShadow(lower, (_s, mp) => {
      const long = 'n'.repeat(256);
      assert.strictEqual(
        errCode(() => fs.writeFileSync(path.join(mp, long), '')),
        'ENAMETOOLONG',
      );
      assert.strictEqual(
        errCode(() => fs.mkdirSync(path.join(mp, long))),
        'ENAMETOOLONG',
      );
      assert.strictEqual(
        errCode(() => fs.statSync(path.join(mp, long))),
        'ENAMETOOLONG',
      );
      fs.writeFileSync(path.join(mp, 'n'.repeat(255)), 'max');
      assert.strictEqual(
        errCode(() => fs.writeFileSync(path.join(mp, 'README.md'), '', { flag: 'wx' })),
        'EEXIST',
      );
      assert.strictEqual(
        errCode(() => fs.readFileSync(path.join(mp, 'nope'))),
        'ENOENT',
      );
      assert.strictEqual(
        errCode(() => fs.readFileSync(path.join(mp, 'README.md/x'))),
        'ENOTDIR',
      );
      assert.strictEqual(
        errCode(() => fs.mkdirSync(path.join(mp, 'no/such/parent'))),
        'ENOENT',
      );
    });
  });

  it('an unlinked file stays readable and writable through an open handle', async () => {
    await withShadow(lower, (s, mp) => {
      const f = path.join(mp, 'README.md');
      const fd = fs.openSync(f, 'r+');
      fs.unlinkSync(f);
      fs.writeSync(fd, 'still here', 0);
      const buf = Buffer.alloc(10);
      fs.readSync(fd, buf, 0, 10, 0);
      assert.strictEqual(buf.toString(), 'still here');
      if (s.backend === 'fuse_hl') {
        // Known difference (see docs/how-it-works.md, fuse_hl): fstat of a file with no name left has no path
        // to go by in the high-level API (Node has no name for ESTALE). ftruncate carries the
        // handle, so it still works.
        assert.throws(
          () => fs.fstatSync(fd),
          (err: NodeJS.ErrnoException) => err.errno === -os.constants.errno.ESTALE,
        );
        fs.ftruncateSync(fd, 5);
        assert.strictEqual(fs.readSync(fd, buf, 0, 10, 0), 5);
      } else {
        assert.strictEqual(fs.fstatSync(fd).size > 0, true);
        fs.ftruncateSync(fd, 5);
        assert.strictEqual(fs.fstatSync(fd).size, 5);
      }
      fs.closeSync(fd);
      assert.strictEqual(
        errCode(() => fs.statSync(f)),
        'ENOENT',
      );
    });
  });
});

describe('a big folder', function () {
  it('is served without holding a file descriptor per file (25,000 files, fd limit 20,000 here)', async () => {
    const lower = tempDir('big');
    for (let d = 0; d < 50; d++) {
      const dir = path.join(lower, `pkg${d}`, 'lib');
      fs.mkdirSync(dir, { recursive: true });
      for (let f = 0; f < 500; f++) fs.writeFileSync(path.join(dir, `m${f}.js`), `// ${d}/${f}\n`);
    }
    const fdsBefore = fs.readdirSync('/proc/self/fd').length;
    await withShadow(lower, (_s, mp) => {
      const r = spawnSync('sh', ['-c', 'find . -type f | wc -l && cat pkg49/lib/m499.js && find . -type f -exec cat {} + | wc -l'], {
        cwd: mp,
        encoding: 'utf8',
      });
      assert.strictEqual(r.stdout, '25000\n// 49/499\n25000\n', r.stderr);
      assert.ok(fs.readdirSync('/proc/self/fd').length < fdsBefore + 50, 'file descriptors grew with the number of files');
    });
  });
});

describe('the TypeScript API on a mounted shadow', function () {
  let lower: string;
  beforeEach(() => {
    lower = makeProject();
  });

  it('write/remove/reset/changes are seen at once, even with long kernel cache timeouts', async () => {
    await withShadow(
      lower,
      async (shadow, mp) => {
        const f = path.join(mp, 'src/math.js');
        const original = fs.readFileSync(f, 'utf8'); // now cached by the kernel for 60 s
        assert.strictEqual(
          errCode(() => fs.statSync(path.join(mp, 'src/new.js'))),
          'ENOENT',
        ); // negative entry cached
        await shadow.write('src/math.js', 'module.exports = {};\n');
        await shadow.write('src/new.js', 'new\n');
        await shadow.write('fresh/dir/file.txt', 'nested\n');
        assert.strictEqual(fs.readFileSync(f, 'utf8'), 'module.exports = {};\n');
        assert.strictEqual(fs.readFileSync(path.join(mp, 'src/new.js'), 'utf8'), 'new\n');
        assert.strictEqual(fs.readFileSync(path.join(mp, 'fresh/dir/file.txt'), 'utf8'), 'nested\n');
        await shadow.remove('README.md');
        await shadow.remove('deep');
        assert.strictEqual(
          errCode(() => fs.statSync(path.join(mp, 'README.md'))),
          'ENOENT',
        );
        assert.strictEqual(
          errCode(() => fs.statSync(path.join(mp, 'deep/a/top.txt'))),
          'ENOENT',
        );
        fs.chmodSync(path.join(mp, 'script.sh'), 0o700);
        const changes = await shadow.changes();
        assert.deepStrictEqual(
          changes.map((c) => `${c.kind} ${c.path}`),
          [
            'deleted README.md',
            'deleted deep',
            'added fresh',
            'added fresh/dir',
            'added fresh/dir/file.txt',
            'metadata script.sh',
            'modified src/math.js',
            'added src/new.js',
          ],
        );
        assert.ok((await shadow.stats()).layers.default.memoryBytes > 0);
        await shadow.reset();
        assert.deepStrictEqual(await shadow.changes(), []);
        assert.strictEqual(fs.readFileSync(f, 'utf8'), original);
        assert.strictEqual(
          errCode(() => fs.statSync(path.join(mp, 'src/new.js'))),
          'ENOENT',
        );
        assert.strictEqual(fs.readFileSync(path.join(mp, 'deep/a/top.txt'), 'utf8'), 'top\n');
        assert.strictEqual(fs.statSync(path.join(mp, 'script.sh')).mode & 0o777, 0o755);
      },
      { cacheTimeout: 60 },
    );
  });

  it('refuses bad paths with INVALID_PATH and paths through symlinks with PATH_THROUGH_SYMLINK', async () => {
    await withShadow(lower, async (shadow) => {
      for (const bad of ['../x', 'a/../../x', '/etc/passwd', 'a\0b', '', '.', 'x/' + 'y'.repeat(256)]) {
        await assert.rejects(shadow.write(bad, 'x'), (e: { code?: string }) => e.code === 'INVALID_PATH', `write(${JSON.stringify(bad)})`);
        await assert.rejects(shadow.remove(bad), (e: { code?: string }) => e.code === 'INVALID_PATH', `remove(${JSON.stringify(bad)})`);
      }
      fs.symlinkSync('/usr', path.join(shadow.mountPoint, 'escape'));
      await assert.rejects(shadow.write('escape/evil.txt', 'x'), (e: { code?: string }) => e.code === 'PATH_THROUGH_SYMLINK');
      await assert.rejects(shadow.write('link-to-math/x', 'x'), (e: { code?: string }) => e.code === 'PATH_THROUGH_SYMLINK');
      await assert.rejects(shadow.write('link-to-math', 'x'), (e: { code?: string }) => e.code === 'PATH_THROUGH_SYMLINK');
      await assert.rejects(shadow.write('src', 'x'), (e: { code?: string }) => e.code === 'IS_DIRECTORY');
      await assert.rejects(shadow.remove('does/not/exist'), (e: { code?: string }) => e.code === 'NOT_FOUND');
      await assert.rejects(shadow.write('README.md/x', 'x'), (e: { code?: string }) => e.code === 'NOT_A_DIRECTORY');
      assert.ok(!fs.existsSync('/tmp/evil.txt'));
    });
  });

  it('reports NOT_MOUNTED after unmount', async () => {
    const shadow = await withShadow(lower, (s) => s);
    assert.strictEqual(shadow.mounted, false);
    await assert.rejects(shadow.write('a', 'b'), (e: { code?: string }) => e.code === 'NOT_MOUNTED');
    await assert.rejects(shadow.changes(), (e: { code?: string }) => e.code === 'NOT_MOUNTED');
  });
});
