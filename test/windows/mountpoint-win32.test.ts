// Windows mount-point conventions (src/platform prepareWin32MountPoint), on a Windows
// node.exe under wine: a free drive letter (the default), a directory WinFsp will create (an
// empty one is removed first, a non-empty one refused), nesting refused both ways. Nothing
// mounts here.
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { prepareWin32MountPoint } from '../../src/platform';

describe('Windows mount points (drive letters, directories WinFsp creates), under wine', () => {
  before(function () {
    if (process.platform !== 'win32') throw new Error('these tests run on a Windows node.exe: npm run test:windows');
  });

  it('takes a free drive letter, refuses one in use, and wants a new directory it leaves to WinFsp to create', () => {
    const lower = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-mp-lower-'));
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-mp-'));
    try {
      assert.throws(() => prepareWin32MountPoint('C:', lower, 'x'), { code: 'MOUNTPOINT_IN_USE' });
      const free = 'QRSTUVWXY'.split('').find((l) => !fs.existsSync(`${l}:\\`));
      assert.ok(free, 'a free drive letter');
      assert.deepStrictEqual(prepareWin32MountPoint(`${free!.toLowerCase()}:`, lower, 'x'), {
        mountPoint: `${free}:\\`,
        created: false,
      });
      // The drive's root, so that paths joined to it stay on it ("X:" alone would give "X:src").
      assert.strictEqual(path.join(prepareWin32MountPoint(`${free}:`, lower, 'x').mountPoint, 'src'), `${free}:\\src`);
      const fresh = path.join(base, 'deep', 'mnt');
      assert.deepStrictEqual(prepareWin32MountPoint(fresh, lower, 'x'), { mountPoint: fresh, created: true });
      assert.ok(!fs.existsSync(fresh) && fs.existsSync(path.dirname(fresh)), 'the parent is made, the mount directory is left to WinFsp');
      const empty = path.join(base, 'empty');
      fs.mkdirSync(empty);
      prepareWin32MountPoint(empty, lower, 'x');
      assert.ok(!fs.existsSync(empty), 'an empty directory is removed so that WinFsp can create it');
      const full = path.join(base, 'full');
      fs.mkdirSync(full);
      fs.writeFileSync(path.join(full, 'f'), 'x');
      assert.throws(() => prepareWin32MountPoint(full, lower, 'x'), { code: 'MOUNTPOINT_NOT_EMPTY' });
      assert.throws(() => prepareWin32MountPoint(path.join(lower, 'in'), lower, 'x'), { code: 'MOUNTPOINT_INSIDE_FOLDER' });
      assert.throws(() => prepareWin32MountPoint(path.dirname(lower), lower, 'x'), { code: 'FOLDER_INSIDE_MOUNTPOINT' });
      // No request: the highest free drive letter (a network volume, on which realpath works, goes on a letter only).
      const dflt = prepareWin32MountPoint(undefined, lower, 'proj');
      assert.match(dflt.mountPoint, /^[D-Z]:\\$/);
      assert.strictEqual(dflt.created, false);
      assert.ok(!fs.existsSync(`${dflt.mountPoint}\\`), 'the letter is free');
    } finally {
      fs.rmSync(base, { recursive: true, force: true });
      fs.rmSync(lower, { recursive: true, force: true });
    }
  });
});
