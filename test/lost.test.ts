// A mount that ends without shadowfs asking (someone runs `umount` on it, or aborts its kernel
// connection) is reported as lost: the shadow reads as not mounted with the reason, its layers are
// kept, and resume() (the daemon: the next request) mounts it again. Before, the loop's end went
// unnoticed on Linux: the shadow said "mounted" over an empty directory, and writes an agent made
// there landed in the daemon's runtime directory instead of a layer, unseen by diff and apply.
// (Windows reports a stopped WinFsp dispatcher the same way; see winfsp-lifecycle-win32.test.ts.)
import * as assert from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import type { GoneEvent } from '../src/shadow';
import { mountedPaths } from '../src/platform';
import { eventually, makeProject, repoRoot, tempDir, withShadow } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

/** Unmounts `mp` from outside, as a user or an agent with the right to would (root here). */
function umountFromOutside(mp: string): void {
  const r = spawnSync('umount', [mp], { encoding: 'utf8' });
  assert.strictEqual(r.status, 0, `umount ${mp}: ${r.stderr}`);
}

describe('a mount that ends on its own', function () {
  this.timeout(60_000);

  it('is reported with its reason; the layers are kept and resume() mounts it again', async () => {
    const lower = makeProject('lost');
    await withShadow(lower, async (shadow, mp) => {
      const events: GoneEvent[] = [];
      shadow.onGone((e) => events.push(e));
      // Written through the mount, into the layer of the agent whose turn it is.
      fs.writeFileSync(path.join(mp, 'agent.txt'), 'kept\n');
      const agent = shadow.active;
      assert.ok(agent, 'an agent has the shared mount');
      assert.strictEqual(shadow.lost, undefined);
      umountFromOutside(mp);
      await eventually(() => events.length > 0, 20_000, 'the report of the lost mount');
      assert.strictEqual(events.length, 1);
      assert.strictEqual(events[0].view, undefined);
      assert.match(events[0].reason, /ended without shadowfs unmounting it/);
      assert.strictEqual(shadow.mounted, false);
      assert.match(shadow.lost ?? '', new RegExp(`FUSE mount at ${mp.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
      assert.ok(!mountedPaths().has(mp), 'the mount is gone from the table');
      // Like a suspended shadow, it refuses work until it is mounted again (the daemon does that
      // at the next request); its layers live on in memory.
      await assert.rejects(shadow.layer(agent).readFile('agent.txt'), (e: { code?: string }) => e.code === 'NOT_MOUNTED');
      await shadow.resume();
      assert.strictEqual((await shadow.layer(agent).readFile('agent.txt')).toString(), 'kept\n');
      assert.strictEqual(shadow.lost, undefined);
      assert.strictEqual(shadow.mounted, true);
      assert.strictEqual(fs.readFileSync(path.join(mp, 'agent.txt'), 'utf8'), 'kept\n');
      assert.strictEqual(events.length, 1, 'one report');
    });
  });

  it('an unmount shadowfs asked for, plain or lazy, is not reported', async () => {
    const lower = makeProject('lost-asked');
    const events: GoneEvent[] = [];
    await withShadow(lower, async (shadow) => {
      shadow.onGone((e) => events.push(e));
      await shadow.suspend();
      await shadow.resume();
      await shadow.suspend({ lazy: true });
      await shadow.resume();
    });
    // A report is made on the loop's thread when the loop ends, which a plain unmount waits for
    // (joinLoopSoon); it would reach JavaScript within a turn or two of the event loop.
    await new Promise((r) => setTimeout(r, 300));
    assert.deepStrictEqual(events, []);
  });

  it('a view unmounted from outside is closed and reported with its mount point', async () => {
    const lower = makeProject('lost-view');
    await withShadow(lower, async (shadow) => {
      const events: GoneEvent[] = [];
      shadow.onGone((e) => events.push(e));
      await shadow.layer('b').write('b.txt', 'b\n');
      const view = await shadow.openView('b', { mountPoint: tempDir('view') });
      umountFromOutside(view.mountPoint);
      await eventually(() => events.length > 0, 20_000, 'the report of the lost view');
      assert.strictEqual(events[0].view, view.mountPoint);
      assert.strictEqual(view.open, false);
      // The shared mount is untouched, and the agent's layer with it.
      assert.strictEqual(shadow.mounted, true);
      assert.strictEqual(shadow.lost, undefined);
      assert.strictEqual((await shadow.layer('b').readFile('b.txt')).toString(), 'b\n');
      // The agent can have a view again.
      const again = await shadow.openView('b', { mountPoint: tempDir('view') });
      assert.strictEqual(fs.readFileSync(path.join(again.mountPoint, 'b.txt'), 'utf8'), 'b\n');
      await again.close();
    });
  });

  it('the daemon notifies shadow/changed "lost", lists the reason, and mounts it again at the next request', async () => {
    stopTestDaemon();
    const daemon = spawn(process.execPath, [path.join(repoRoot, 'bin', 'shadowfs.js'), 'serve', '--foreground', '--no-console'], {
      stdio: 'ignore',
    });
    let client: ShadowClient | undefined;
    try {
      for (let i = 0; i < 1200 && !client; i++)
        client = await ShadowClient.connect({ autostart: false }).catch(
          () => new Promise<undefined>((r) => setTimeout(() => r(undefined), 50)),
        );
      assert.ok(client, 'the daemon started');
      const c = client;
      const events: { event: string; reason?: string }[] = [];
      c.onNotification((method, params) => {
        const p = params as { shadow?: string; event: string; reason?: string };
        if (method === 'shadow/changed' && p.shadow === 'gone') events.push(p);
      });
      const info = await c.request('mount', { folder: makeProject('lost-daemon'), name: 'gone' });
      await c.request('layer.write', { shadow: 'gone', agent: 'default', path: 'kept.txt', data: Buffer.from('kept').toString('base64') });
      umountFromOutside(info.mountPoint);
      await eventually(() => events.some((e) => e.event === 'lost'), 20_000, 'the lost notification');
      assert.match(events.find((e) => e.event === 'lost')?.reason ?? '', /ended without shadowfs unmounting it/);
      const listed = (await c.request('list')).shadows.find((s) => s.name === 'gone');
      assert.strictEqual(listed?.mounted, false);
      assert.match(listed?.lost ?? '', /ended without shadowfs unmounting it/);
      // The next request mounts it again, layers intact.
      const r = await c.request('layer.read', { shadow: 'gone', agent: 'default', path: 'kept.txt' });
      assert.strictEqual(Buffer.from(r.data, 'base64').toString(), 'kept');
      await eventually(() => mountedPaths().has(info.mountPoint), 20_000, 'the shadow mounted again');
      assert.strictEqual(fs.readFileSync(path.join(info.mountPoint, 'kept.txt'), 'utf8'), 'kept');
      await c.request('unmount', { shadow: 'gone' });
    } finally {
      client?.close();
      const gone = new Promise((r) => daemon.once('exit', r));
      daemon.kill('SIGTERM');
      await gone;
    }
  });
});
