// One layer's tree through the API, without switching the shared mount: stat, readdir,
// readlink, symlink, mkdir, chmod, and revert (the folder shows through again), on a layer that
// is not active while another one is. The folder is guarded throughout.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { makeProject, withShadow } from './helpers/fixtures';

describe('layer tree: one layer as it shows the tree, through the API', function () {
  this.timeout(60_000);

  it('stat, readdir and readlink answer as the layer shows the tree while another layer is active', async () => {
    const lower = makeProject('tree-lower');
    fs.symlinkSync('package.json', path.join(lower, 'link'));
    await withShadow(lower, async (shadow, mp) => {
      const a = shadow.layer('a');
      await a.write('new/file.txt', 'hello', { mode: 0o755 });
      await a.remove('package.json');
      await a.symlink('new/file.txt', 'link2');
      await a.mkdir('made', { mode: 0o700 });
      await shadow.layer('b').write('only-b.txt', 'b');
      await shadow.activate('b');
      const names = (await a.readdir('')).map((e) => `${e.name}:${e.type}`).sort();
      assert.ok(names.includes('new:directory') && names.includes('link2:symlink') && names.includes('made:directory'), names.join(' '));
      assert.ok(!names.some((n) => n.startsWith('package.json:')), 'the deleted file is gone from the layer');
      assert.ok(!names.some((n) => n.startsWith('only-b.txt:')), "b's file is not in a");
      assert.ok(names.includes('link:symlink'), 'the folder shows through');
      const st = await a.stat('new/file.txt');
      assert.deepStrictEqual([st.type, st.mode, st.size], ['file', 0o755, 5]);
      assert.strictEqual((await a.stat('made')).mode, 0o700);
      assert.strictEqual(await a.readlink('link2'), 'new/file.txt');
      assert.strictEqual(await a.readlink('link'), 'package.json');
      await assert.rejects(a.stat('package.json'), { code: 'NOT_FOUND' });
      await assert.rejects(a.stat('../x'), { code: 'INVALID_PATH' });
      await assert.rejects(shadow.layer('nobody').stat('package.json'), { code: 'UNKNOWN_AGENT' });
      // The shared mount still shows b, untouched by all of the above.
      assert.ok(fs.existsSync(path.join(mp, 'only-b.txt')) && fs.existsSync(path.join(mp, 'package.json')));
      assert.ok(!fs.existsSync(path.join(mp, 'new')));
    });
  });

  it('chmod changes a folder file in the layer only; revert gives paths back to the folder', async () => {
    const lower = makeProject('tree-lower');
    await withShadow(lower, async (shadow, mp) => {
      const a = shadow.layer('a');
      await a.chmod('package.json', 0o600);
      assert.strictEqual((await a.stat('package.json')).mode, 0o600);
      assert.notStrictEqual(fs.statSync(path.join(lower, 'package.json')).mode & 0o777, 0o600, 'the folder keeps its mode');
      await a.write('src/math.js', '// the agent\n');
      await a.write('src/extra.js', '1');
      await shadow.activate('a');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'src', 'math.js'), 'utf8'), '// the agent\n');
      await a.revert('src/math.js');
      assert.strictEqual(
        fs.readFileSync(path.join(mp, 'src', 'math.js'), 'utf8'),
        fs.readFileSync(path.join(lower, 'src', 'math.js'), 'utf8'),
        'the mount shows the folder again at once',
      );
      assert.deepStrictEqual(
        (await a.changes()).map((c) => c.path),
        ['package.json', 'src/extra.js'],
      );
      await a.revert('src');
      await a.revert('does/not/exist'); // nothing there: nothing to do
      assert.deepStrictEqual(
        (await a.changes()).map((c) => c.path),
        ['package.json'],
      );
      assert.ok(!fs.existsSync(path.join(mp, 'src', 'extra.js')));
      // Under a directory the layer replaced, only the whole directory can go back.
      await a.remove('src');
      await a.write('src/math.js', 'new');
      await assert.rejects(a.revert('src/math.js'), { code: 'CONFLICT' });
      await a.revert('src');
      assert.ok(fs.existsSync(path.join(mp, 'src', 'math.js')));
    });
  });
});
