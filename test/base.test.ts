// Every file a layer takes from the folder records its base: what the folder's file was when
// the layer copied it (inode, size, mtime and ctime in ns, and a hash of the bytes copied), or
// when the layer replaced it whole. changes() reports it; the changes-out service will compare it
// with the folder's file to find conflicts.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { editText } from '../src/work/files';
import { addon } from '../src/shadow/native';
import { makeProject, withShadow, withWork } from './helpers/fixtures';

describe('the base of a copied file', () => {
  it('changes() reports the folder file each copy-up started from; a replaced file has no hash', async () => {
    const lower = makeProject();
    // This test edits the folder itself (as the developer would), so the folder guard is off.
    await withShadow(
      lower,
      async (shadow, mp) => {
        const rel = 'src/math.js';
        const before = fs.statSync(path.join(lower, rel), { bigint: true });
        await shadow.activate('default');
        fs.appendFileSync(path.join(mp, rel), '// agent a\n'); // copy-up into layer "default"
        const a = (await shadow.layer('default').changes()).find((c) => c.path === rel);
        assert.ok(a?.base, 'a copied file has a base');
        assert.deepStrictEqual(
          { ino: a.base.ino, size: a.base.size, mtimeNs: a.base.mtimeNs, ctimeNs: a.base.ctimeNs },
          { ino: Number(before.ino), size: Number(before.size), mtimeNs: String(before.mtimeNs), ctimeNs: String(before.ctimeNs) },
        );
        assert.match(a.base.hash ?? '', /^[0-9a-f]{16}$/);

        // The developer edits the file; another agent copies it up now: another base.
        fs.appendFileSync(path.join(lower, rel), '// the developer\n');
        const after = fs.statSync(path.join(lower, rel), { bigint: true });
        await shadow.createLayer('b');
        await shadow.activate('b');
        fs.appendFileSync(path.join(mp, rel), '// agent b\n');
        const b = (await shadow.layer('b').changes()).find((c) => c.path === rel);
        assert.ok(b?.base);
        assert.strictEqual(b.base.size, Number(after.size));
        assert.strictEqual(b.base.mtimeNs, String(after.mtimeNs));
        assert.notStrictEqual(b.base.hash, a.base.hash, 'other bytes, other hash');

        // Same bytes in the folder, same hash: a third agent copies the file again.
        await shadow.createLayer('c');
        await shadow.activate('c');
        fs.appendFileSync(path.join(mp, rel), '// agent c\n');
        const c = (await shadow.layer('c').changes()).find((x) => x.path === rel);
        assert.strictEqual(c?.base?.hash, b.base.hash);

        // Replaced whole through the API: the identity is recorded, nothing was read.
        await shadow.layer('c').write('README.md', 'replaced\n');
        const readme = fs.statSync(path.join(lower, 'README.md'), { bigint: true });
        const r = (await shadow.layer('c').changes()).find((x) => x.path === 'README.md');
        assert.deepStrictEqual(r?.base && { ino: r.base.ino, hash: r.base.hash }, { ino: Number(readme.ino), hash: null });

        // A file made in the layer has no base.
        fs.writeFileSync(path.join(mp, 'new.txt'), 'new\n');
        const n = (await shadow.layer('c').changes()).find((x) => x.path === 'new.txt');
        assert.ok(n && n.base === undefined);
      },
      { guard: false },
    );
  });

  it('a file the file tools edited records the version they read, with its hash: the developer changing it and putting it back is no conflict', async () => {
    const lower = makeProject();
    await withWork(
      lower,
      async (work, shadow) => {
        const rel = 'src/math.js';
        const abs = path.join(lower, rel);
        const original = fs.readFileSync(abs);
        const before = fs.statSync(abs, { bigint: true });
        const layer = await shadow.createLayer('agent');
        // An edit reads the folder's file whole, then writes the layer's copy: what it read is the base.
        const r = await editText(layer, rel, 'module', 'module /* agent */');
        assert.strictEqual(r.replacements, 1);
        const c = (await layer.changes()).find((x) => x.path === rel);
        assert.deepStrictEqual(c?.base && { ino: c.base.ino, size: c.base.size, mtimeNs: c.base.mtimeNs, hash: c.base.hash }, {
          ino: Number(before.ino),
          size: Number(before.size),
          mtimeNs: String(before.mtimeNs),
          hash: addon().contentHash(original),
        });
        // A whole write without reading still records no hash (nothing was read).
        await layer.write('README.md', 'replaced\n');
        assert.strictEqual((await layer.changes()).find((x) => x.path === 'README.md')?.base?.hash, null);
        // The developer rewrites the file with the same bytes: a new mtime, the same content.
        fs.writeFileSync(abs, Buffer.concat([original, Buffer.from('// tmp\n')]));
        fs.writeFileSync(abs, original);
        const dry = await work.apply('agent', { paths: [rel], dryRun: true });
        assert.deepStrictEqual(
          dry.conflicts.map((x) => x.path),
          [],
          'the same bytes as the base: no conflict',
        );
      },
      false,
    );
  });
});
