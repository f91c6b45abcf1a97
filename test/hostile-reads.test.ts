// Only regular files are ever opened for reading, and never through a link of the folder (issue
// 27, deliverable 5), on real mounts: diff, patch and apply read the user's folder beneath it
// with links refused and FIFOs never opened but with O_NONBLOCK, so a FIFO swapped in for a file
// while they read cannot hang them, and a link in the folder to outside never shows outside
// content as the folder's side of a change.
import * as assert from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { tempDir, withWork } from './helpers/fixtures';

/** A small folder to shadow. */
function makeFolder(): string {
  const dir = tempDir('hostile-reads');
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'the user wrote this\n');
  return dir;
}

/** Gives any reader blocked on `fifo` an end of file (a hung read, should there be one, ends). */
function unblock(fifo: string): void {
  try {
    fs.closeSync(fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
  } catch {
    // no reader waits
  }
}

describe('hostile reads: FIFOs and links in the folder and the layer', function () {
  // A hang fails the test here, it never passes it.
  this.timeout(60_000);

  it('a FIFO swapped in and out for a changed file of the folder never hangs diff, patch or apply (a FIFO in the layer is skipped)', async () => {
    const lower = makeFolder();
    fs.writeFileSync(path.join(lower, 'target.txt'), 'folder version\n');
    const swap = path.join(lower, '.swap');
    fs.mkdirSync(swap);
    fs.writeFileSync(path.join(swap, 'reg'), 'folder version\n');
    assert.strictEqual(spawnSync('mkfifo', [path.join(swap, 'fifo')]).status, 0);
    fs.writeFileSync(path.join(lower, '.gitignore'), '.swap/\n');
    await withWork(
      lower,
      async (w, shadow, mp) => {
        const layer = await shadow.createLayer('agent');
        await layer.write('target.txt', 'agent version\n');
        await shadow.activate('agent');
        assert.strictEqual(spawnSync('mkfifo', [path.join(mp, 'layer-pipe')]).status, 0, 'mkfifo through the mount');
        // The user's folder: target.txt is a file, then a FIFO, then a file again, as fast as it goes.
        const swapper = spawn(
          process.execPath,
          [
            '-e',
            `const fs = require('fs'); const [d, t] = process.argv.slice(1);
             for (;;) { for (const k of ['fifo', 'reg']) { fs.linkSync(d + '/' + k, d + '/n'); fs.renameSync(d + '/n', t); } }`,
            swap,
            path.join(lower, 'target.txt'),
          ],
          { stdio: 'ignore' },
        );
        try {
          let sawFile = 0;
          for (let i = 0; i < 150; i++) {
            const d = await w.diff('agent');
            if (d.files.some((f) => f.path === 'target.txt')) sawFile++;
            assert.ok(!d.files.some((f) => f.path === 'layer-pipe'), 'a FIFO in the layer has no content to diff');
            await w.patch('agent');
          }
          assert.ok(sawFile > 0, 'the file was diffed while it was a file');
          const r = await w.apply('agent', { dryRun: true });
          assert.ok(r.dryRun);
        } finally {
          swapper.kill('SIGKILL');
          unblock(path.join(swap, 'fifo'));
          unblock(path.join(lower, 'target.txt'));
        }
        // The folder settles as a FIFO: apply refuses to write over it, and reports it.
        fs.rmSync(path.join(lower, 'target.txt'));
        fs.linkSync(path.join(swap, 'fifo'), path.join(lower, 'target.txt'));
        try {
          const r = await w.apply('agent', { paths: ['target.txt'] });
          assert.deepStrictEqual(r.applied, [], JSON.stringify(r));
          assert.ok(fs.lstatSync(path.join(lower, 'target.txt')).isFIFO(), 'the FIFO is still there');
        } finally {
          unblock(path.join(lower, 'target.txt'));
        }
      },
      false, // the test itself plays the user editing the folder
    );
  });

  it('a link in the folder to outside never yields outside content in diff or patch, and apply never writes through it', async () => {
    const lower = makeFolder();
    const outside = tempDir('hostile-outside');
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'outside secret\n');
    fs.symlinkSync(outside, path.join(lower, 'ext'));
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(lower, 'ext-file'));
    const before = fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8');
    await withWork(lower, async (w, shadow) => {
      const layer = await shadow.createLayer('agent');
      // The agent replaces the link by a directory holding a file of the same name.
      await layer.remove('ext');
      await layer.write('ext/secret.txt', 'agent text\n');
      await layer.write('notes.txt', 'the agent wrote this\n');
      const d = await w.diff('agent');
      const p = await w.patch('agent');
      for (const text of [d.text, p.text]) {
        assert.ok(!text.includes('outside secret'), `outside content shown as the folder's:\n${text}`);
        assert.match(text, /\+agent text/);
      }
      const sec = d.files.find((f) => f.path === 'ext/secret.txt');
      assert.strictEqual(sec?.status, 'added', JSON.stringify(d.files));
      // The link to a file is a link (its target), never the file's content.
      await layer.remove('ext-file');
      await layer.write('ext-file', 'replaced\n');
      const d2 = await w.diff('agent');
      assert.ok(!d2.text.includes('outside secret'), d2.text);
      const r = await w.apply('agent', { dryRun: true });
      assert.ok(r.dryRun);
    });
    assert.strictEqual(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8'), before, 'nothing outside changed');
    assert.deepStrictEqual(fs.readdirSync(outside), ['secret.txt']);
  });
});
