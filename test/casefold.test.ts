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
import { errCode, makeProject, tempDir, withShadow, withWork } from './helpers/fixtures';

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

  it('a rename that changes only case diffs and applies as a rename, and the layer is empty after', async () => {
    // The layer finds `foo.txt` when it holds `Foo.txt`: read by the old spelling, a case-only
    // rename looked like the same file on both sides, so apply created the new name and left the
    // old one (and wrote edits under a renamed directory to both spellings).
    const lower = tempDir('case-rename');
    fs.writeFileSync(path.join(lower, 'Foo.txt'), 'foo\n');
    fs.mkdirSync(path.join(lower, 'Dir', 'sub'), { recursive: true });
    fs.writeFileSync(path.join(lower, 'Dir', 'a.txt'), 'a\n');
    fs.writeFileSync(path.join(lower, 'Dir', 'sub', 'b.txt'), 'b\n');
    const tree = (dir: string, rel = ''): string[] =>
      fs
        .readdirSync(path.join(dir, rel), { withFileTypes: true })
        .flatMap((e) => {
          const p = rel ? `${rel}/${e.name}` : e.name;
          return e.isDirectory() ? [`${p}/`, ...tree(dir, p)] : [`${p} ${fs.readFileSync(path.join(dir, p), 'utf8').trim()}`];
        })
        .sort();
    await withWork(
      lower,
      async (w, shadow, mp) => {
        await shadow.createLayer('agent');
        await shadow.activate('agent');
        fs.renameSync(path.join(mp, 'Foo.txt'), path.join(mp, 'foo.txt'));
        fs.renameSync(path.join(mp, 'Dir'), path.join(mp, 'dir'));
        fs.appendFileSync(path.join(mp, 'dir', 'a.txt'), 'edit\n');
        fs.writeFileSync(path.join(mp, 'dir', 'new.txt'), 'new\n');
        const view = tree(mp);
        assert.deepStrictEqual(view, ['dir/', 'dir/a.txt a\nedit', 'dir/new.txt new', 'dir/sub/', 'dir/sub/b.txt b', 'foo.txt foo']);
        const d = await w.diff('agent');
        assert.deepStrictEqual(
          d.files.map((f) => `${f.status} ${f.oldPath ?? ''}>${f.path}`),
          // a.txt changed too much to count as renamed (half its lines are new)
          [
            'deleted >Dir/a.txt',
            'added >dir/a.txt',
            'added >dir/new.txt',
            'renamed Dir/sub/b.txt>dir/sub/b.txt',
            'renamed Foo.txt>foo.txt',
          ],
        );
        const r = await w.apply('agent');
        assert.deepStrictEqual(r.conflicts, []);
        assert.deepStrictEqual(r.kept, []);
        assert.deepStrictEqual(tree(lower), view, 'the folder is what the agent saw, each name once');
        assert.deepStrictEqual(tree(mp), view, 'the shadow reads every file after apply');
        assert.deepStrictEqual(await shadow.layer('agent').changes(), []);
      },
      false,
      { backend: 'fuse_hl', caseInsensitive: true },
    );
  });

  it('is refused on fuse_ll, whose kernel cache keeps names by exact spelling', async function () {
    if (!addon().backends.includes('fuse_ll')) this.skip();
    const lower = makeProject('case-lower');
    await assert.rejects(mount(lower, { backend: 'fuse_ll', caseInsensitive: true, mountPoint: path.join(tempDir('mnt'), 'm') }), {
      code: 'INVALID_ARGUMENT',
    });
  });
});
