// Case-insensitive, case-preserving names (MountOptions.caseInsensitive, the Windows behaviour)
// through a real mount. Always on fuse_hl, forced here so the test runs the same in both passes
// of the suite (SHADOWFS_BACKEND=fuse_ll and fuse_hl): fuse_hl has the kernel cache nothing, so
// every lookup reaches the core, which matches names ignoring case. fuse_ll is not used because
// the Linux kernel's dentry cache is case-sensitive: it would cache `README.MD` and `README.md`
// as two names and could not be told to forget both; fuse_ll refuses the option.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { addon } from '../src/shadow/native';
import { mount } from '../src';
import { errCode, makeProject, tempDir, withShadow } from './helpers/fixtures';

describe('case-insensitive names (fuse_hl)', function () {
  this.timeout(60_000);

  it('finds the folder entries in any case and writes land on them, spelt as the folder spells them', async () => {
    const lower = makeProject('case-lower');
    await withShadow(
      lower,
      async (shadow, mp) => {
        assert.strictEqual(shadow.backend, 'fuse_hl');
        const readme = fs.readFileSync(path.join(lower, 'README.md'), 'utf8');
        assert.strictEqual(fs.readFileSync(path.join(mp, 'README.MD'), 'utf8'), readme);
        assert.strictEqual(fs.statSync(path.join(mp, 'readme.md')).ino, fs.statSync(path.join(mp, 'README.md')).ino);
        // A write to another case of the folder's src/math.js changes that file, in the layer.
        fs.writeFileSync(path.join(mp, 'Src', 'Math.js'), '// the agent\n');
        assert.strictEqual(fs.readFileSync(path.join(mp, 'src', 'math.js'), 'utf8'), '// the agent\n');
        assert.deepStrictEqual(fs.readdirSync(path.join(mp, 'SRC')), ['math.js']);
        const changes = await shadow.layer('default').changes();
        assert.deepStrictEqual(
          changes.map((c) => `${c.kind} ${c.path}`),
          ['modified src/math.js'],
        );
        // The API takes any case too.
        assert.strictEqual((await shadow.layer('default').readFile('SRC/MATH.JS')).toString(), '// the agent\n');
        // A new name keeps the case it was created with; a directory of another case already exists.
        fs.writeFileSync(path.join(mp, 'Notes', 'New.txt'), 'new\n');
        assert.strictEqual(fs.readFileSync(path.join(mp, 'NOTES', 'NEW.TXT'), 'utf8'), 'new\n');
        assert.deepStrictEqual(fs.readdirSync(path.join(mp, 'notes')).sort(), ['New.txt', 'todo.txt']);
        assert.strictEqual(
          errCode(() => fs.mkdirSync(path.join(mp, 'SRC'))),
          'EEXIST',
        );
        // A rename to another case changes the spelling.
        fs.renameSync(path.join(mp, 'notes', 'todo.txt'), path.join(mp, 'notes', 'TODO.txt'));
        assert.deepStrictEqual(fs.readdirSync(path.join(mp, 'notes')).sort(), ['New.txt', 'TODO.txt']);
        assert.ok(fs.readdirSync(mp).includes('README.md') && !fs.readdirSync(mp).includes('README.MD'));
      },
      { backend: 'fuse_hl', caseInsensitive: true },
    );
    assert.ok(!fs.existsSync(path.join(lower, 'notes', 'New.txt')), 'the folder is never written');
  });

  it('is refused on fuse_ll, whose kernel cache keeps names by exact spelling', async function () {
    if (!addon().backends.includes('fuse_ll')) this.skip();
    const lower = makeProject('case-lower');
    await assert.rejects(mount(lower, { backend: 'fuse_ll', caseInsensitive: true, mountPoint: path.join(tempDir('mnt'), 'm') }), {
      code: 'INVALID_ARGUMENT',
    });
  });
});
