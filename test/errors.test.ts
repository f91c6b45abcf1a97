// Bad input gets a documented error code and loses nothing.
import * as assert from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { mount, ShadowError } from '../src';
import { mountedPaths } from '../src/platform';
import { FolderGuard, makeProject, repoRoot, tempDir, withShadow } from './helpers/fixtures';

async function code(p: Promise<unknown>): Promise<string> {
  try {
    const s = await p;
    // Should not have mounted: clean up before failing.
    if (s && typeof (s as { unmount?: unknown }).unmount === 'function')
      await (s as { unmount: (o: object) => Promise<void> }).unmount({ lazy: true });
    return 'OK';
  } catch (err) {
    assert.ok(err instanceof ShadowError, `not a ShadowError: ${String(err)}`);
    assert.ok(err.message.length > 20, 'the message should say what to do');
    return err.code;
  }
}

describe('bad input gets a clear error with a code', function () {
  let lower: string;
  let guard: FolderGuard;
  beforeEach(() => {
    lower = makeProject();
    guard = new FolderGuard(lower);
  });
  afterEach(async () => {
    await guard.check();
  });

  it('the folder: missing, or not a directory', async () => {
    assert.strictEqual(await code(mount(path.join(lower, 'missing'))), 'FOLDER_NOT_FOUND');
    assert.strictEqual(await code(mount(path.join(lower, 'README.md'))), 'FOLDER_NOT_DIRECTORY');
  });

  it('the mount point: not empty, not a directory, inside the folder, containing the folder, already mounted', async () => {
    const full = tempDir('full');
    fs.writeFileSync(path.join(full, 'x'), 'x');
    assert.strictEqual(await code(mount(lower, { mountPoint: full })), 'MOUNTPOINT_NOT_EMPTY');
    assert.strictEqual(await code(mount(lower, { mountPoint: path.join(full, 'x') })), 'MOUNTPOINT_NOT_DIRECTORY');
    assert.strictEqual(await code(mount(lower, { mountPoint: path.join(lower, 'empty') })), 'MOUNTPOINT_INSIDE_FOLDER');
    assert.strictEqual(await code(mount(lower, { mountPoint: path.join(lower, 'not-yet-there') })), 'MOUNTPOINT_INSIDE_FOLDER');
    assert.ok(!fs.existsSync(path.join(lower, 'not-yet-there')), 'a refused mount must not create its mount point');
    assert.strictEqual(await code(mount(lower, { mountPoint: path.dirname(lower) })), 'FOLDER_INSIDE_MOUNTPOINT');
    const outer = tempDir('outer');
    const nested = path.join(outer, 'project');
    fs.cpSync(lower, nested, { recursive: true, verbatimSymlinks: true });
    assert.strictEqual(await code(mount(nested, { mountPoint: outer })), 'FOLDER_INSIDE_MOUNTPOINT');
    await withShadow(lower, async (_s, mp) => {
      assert.strictEqual(await code(mount(lower, { mountPoint: mp })), 'MOUNTPOINT_IN_USE');
    });
  });

  it('no usable /dev/fuse gives FUSE_UNAVAILABLE', async () => {
    const script = `require(${JSON.stringify(path.join(repoRoot, 'dist/src'))}).mount(${JSON.stringify(lower)}).then(()=>console.log('MOUNTED'),e=>console.log(e.code))`;
    // A private mount namespace whose /dev is a fresh tmpfs without a fuse node. (Nothing is
    // changed on the host: chmod on a bind mount would change the host's device node.)
    const inner = `mount -t tmpfs none /dev && mknod -m 666 /dev/null c 1 3 && exec ${process.execPath} -e '${script.replace(/'/g, "'\\''")}'`;
    const r = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c', inner], { encoding: 'utf8' });
    assert.strictEqual(r.stdout.trim(), 'FUSE_UNAVAILABLE', r.stderr);
    fs.accessSync('/dev/fuse', fs.constants.R_OK | fs.constants.W_OK); // the host's device is untouched
  });

  it('codes say what happened: UNKNOWN_AGENT for queries about no layer, LAYER_EXISTS, INVALID_ARGUMENT apart from INVALID_PATH', async () => {
    spawnSync('mkfifo', [path.join(lower, 'a-fifo')]);
    guard.stop();
    guard = new FolderGuard(lower);
    await withShadow(lower, async (shadow) => {
      const ghost = shadow.layer('ghost');
      for (const [what, p] of [
        ['changes', ghost.changes()],
        ['readFile', ghost.readFile('README.md')],
        ['stats', ghost.stats()],
        ['reset', ghost.reset()],
      ] as const) {
        assert.strictEqual(await code(p), 'UNKNOWN_AGENT', what);
      }
      assert.deepStrictEqual(await shadow.agents(), ['default'], 'asking about a layer creates none');
      await assert.rejects(shadow.activate('ghost'), (e: ShadowError) => e.code === 'UNKNOWN_AGENT');
      // The first write creates the layer.
      await ghost.write('a.txt', 'a');
      assert.deepStrictEqual((await shadow.agents()).sort(), ['default', 'ghost']);
      await shadow.cloneLayer('ghost', 'twin');
      assert.strictEqual((await shadow.layer('twin').readFile('a.txt')).toString(), 'a');
      const exists = await shadow.cloneLayer('default', 'twin').catch((e: unknown) => e);
      assert.ok(exists instanceof ShadowError && exists.code === 'LAYER_EXISTS', String(exists));
      assert.strictEqual(exists.message.split('twin').length - 1, 2, `each agent is named once: ${exists.message}`);
      assert.strictEqual(exists.message.split('copy').length - 1, 1, `said once: ${exists.message}`);
      // Paths are INVALID_PATH; everything else is INVALID_ARGUMENT.
      assert.strictEqual(await code(shadow.write('../x', 'x')), 'INVALID_PATH');
      assert.strictEqual(await code(shadow.write('x', 'x', { mode: 0o170000 })), 'INVALID_ARGUMENT');
      assert.strictEqual(await code(shadow.write('x', 42 as unknown as string)), 'INVALID_ARGUMENT');
      assert.strictEqual(await code(shadow.write('a-fifo', 'x')), 'INVALID_ARGUMENT');
      assert.strictEqual(await code(shadow.layer('default').readFile('a-fifo')), 'INVALID_ARGUMENT');
      assert.strictEqual(await code(shadow.withLayer('default', async () => 1, { timeout: -1 })), 'INVALID_ARGUMENT');
    });
    assert.strictEqual(await code(mount(lower, { cacheTimeout: -1 })), 'INVALID_ARGUMENT');
    assert.strictEqual(await code(mount(lower, { spillThreshold: 1.5 })), 'INVALID_ARGUMENT');
    assert.strictEqual(await code(mount(lower, { spillDir: path.join(lower, 'src') })), 'INVALID_ARGUMENT');
  });

  it('unmount of a busy shadow reports MOUNT_BUSY and keeps serving; lazy unmount detaches it', async () => {
    const mp = path.join(tempDir('busy'), 'm');
    const shadow = await mount(lower, { mountPoint: mp });
    const holder = spawn('sleep', ['60'], { cwd: mp, stdio: 'ignore' });
    try {
      await new Promise((r) => setTimeout(r, 100));
      await assert.rejects(shadow.unmount(), (e: ShadowError) => e.code === 'MOUNT_BUSY' && /lazy/.test(e.message));
      assert.ok(shadow.mounted);
      assert.ok(fs.readFileSync(path.join(mp, 'README.md'), 'utf8').length > 0, 'still serves after a refused unmount');
      await shadow.unmount({ lazy: true });
      assert.ok(!mountedPaths().has(mp), 'a lazy unmount removes the mount point from the mount table at once');
    } finally {
      holder.kill('SIGKILL');
      if (shadow.mounted) await shadow.unmount({ lazy: true });
    }
  });
});
