// Choosing the mount backend. The whole integration suite runs once per backend (npm test sets
// SHADOWFS_BACKEND for each pass); these tests check the choice itself.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { mount, ShadowError } from '../src';
import { addon } from '../src/shadow/native';
import { mountedPaths } from '../src/platform';
import { pickBackend } from '../src/shadow';
import { FolderGuard, makeProject, openUnder, tempDir, withShadow } from './helpers/fixtures';

function fstypeOf(mp: string): string | undefined {
  for (const line of fs.readFileSync('/proc/self/mounts', 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f[1] === mp) return f[2];
  }
  return undefined;
}

describe('mount backends', function () {
  it('this Linux build has the Linux backend first and the portable one', () => {
    assert.deepStrictEqual(addon().backends, ['fuse_ll', 'fuse_hl']);
  });

  for (const backend of ['fuse_ll', 'fuse_hl']) {
    it(`${backend} mounts when asked for by name, whatever $SHADOWFS_BACKEND says`, async () => {
      const lower = makeProject();
      await withShadow(
        lower,
        async (shadow, mp) => {
          assert.strictEqual(shadow.backend, backend);
          assert.strictEqual(fstypeOf(mp), 'fuse.shadowfs');
          fs.writeFileSync(path.join(mp, 'new.txt'), backend);
          assert.strictEqual(fs.readFileSync(path.join(mp, 'new.txt'), 'utf8'), backend);
          assert.deepStrictEqual(
            (await shadow.changes()).map((c) => [c.path, c.kind]),
            [['new.txt', 'added']],
          );
          assert.ok(!fs.existsSync(path.join(lower, 'new.txt')));
        },
        { backend },
      );
    });
  }

  for (const backend of ['fuse_ll', 'fuse_hl']) {
    it(`${backend}: unmounted, a shadow holds nothing of the folder open; suspended, it keeps its layers`, async () => {
      // The overlay holds a descriptor of the folder. It used to stay open until the GC took the
      // unmounted shadow, so the folder's own file system (a bind mount, a disk) stayed busy.
      const lower = makeProject();
      const held = (): string[] => openUnder(lower);
      assert.deepStrictEqual(held(), []);
      const shadow = await mount(lower, { backend, mountPoint: path.join(tempDir('mnt'), 'm') });
      try {
        assert.ok(held().length > 0, 'a mounted shadow reads the folder through a descriptor');
        fs.writeFileSync(path.join(shadow.mountPoint, 'new.txt'), 'kept\n');
        await shadow.suspend();
        assert.ok(held().length > 0, 'suspended, the layers (and the folder) stay');
        await shadow.resume();
        assert.strictEqual(fs.readFileSync(path.join(shadow.mountPoint, 'new.txt'), 'utf8'), 'kept\n');
        await shadow.unmount();
        assert.deepStrictEqual(held(), [], 'unmounted, nothing of the folder is open');
      } finally {
        if (shadow.mounted) await shadow.unmount({ lazy: true });
      }
    });
  }

  it('$SHADOWFS_BACKEND picks the backend when the caller does not; "default" is the first built', () => {
    const saved = process.env.SHADOWFS_BACKEND;
    try {
      process.env.SHADOWFS_BACKEND = 'fuse_hl';
      assert.strictEqual(pickBackend(undefined, ['fuse_ll', 'fuse_hl']), 'fuse_hl');
      assert.strictEqual(pickBackend('fuse_ll', ['fuse_ll', 'fuse_hl']), 'fuse_ll');
      process.env.SHADOWFS_BACKEND = '';
      assert.strictEqual(pickBackend(undefined, ['fuse_ll', 'fuse_hl']), 'fuse_ll');
      delete process.env.SHADOWFS_BACKEND;
      assert.strictEqual(pickBackend(undefined, ['fuse_ll', 'fuse_hl']), 'fuse_ll');
      assert.strictEqual(pickBackend('default', ['fuse_hl']), 'fuse_hl');
    } finally {
      if (saved === undefined) delete process.env.SHADOWFS_BACKEND;
      else process.env.SHADOWFS_BACKEND = saved;
    }
  });

  it('an unknown backend gets UNKNOWN_BACKEND, names the ones built, and creates nothing', async () => {
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    const mp = path.join(tempDir('mnt'), 'm');
    const before = mountedPaths().size;
    const saved = process.env.SHADOWFS_BACKEND;
    try {
      await assert.rejects(mount(lower, { mountPoint: mp, backend: 'winfsp' }), (err: unknown) => {
        assert.ok(err instanceof ShadowError);
        assert.strictEqual(err.code, 'UNKNOWN_BACKEND');
        assert.match(err.message, /"winfsp".*fuse_ll, fuse_hl/);
        return true;
      });
      process.env.SHADOWFS_BACKEND = 'nope';
      await assert.rejects(mount(lower, { mountPoint: mp }), (err: unknown) => {
        assert.ok(err instanceof ShadowError);
        assert.strictEqual(err.code, 'UNKNOWN_BACKEND');
        assert.match(err.message, /SHADOWFS_BACKEND/);
        return true;
      });
    } finally {
      if (saved === undefined) delete process.env.SHADOWFS_BACKEND;
      else process.env.SHADOWFS_BACKEND = saved;
    }
    assert.ok(!fs.existsSync(mp), 'a refused mount must not create its mount point');
    assert.strictEqual(mountedPaths().size, before);
    await guard.check();
  });
});
