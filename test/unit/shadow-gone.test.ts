// A mount that ends without being asked to (#28 deliverable 3): what the addon reports (the
// native object's onGone) reaches Shadow (lost, suspended, listeners, views closed) and the
// daemon (info().lost, "shadow/changed" with event "lost" and the reason, resumed by the next
// request). The native object is a stand-in here: what makes a real backend report it is the
// winfsp backend's DispatcherStopped (native/winfsp/winfsp_native.cc), which the WinFsp double
// cannot trigger (its dispatcher stops only when asked), and the Linux backends do not report yet.
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { createLogger, transports } from 'winston';
import type { NativeShadow } from '../../src/shadow/native';
import type * as shadowModule from '../../src/shadow';
import { Shadow, View } from '../../src/shadow';
// Where mount() is defined: src/shadow re-exports it (a getter), so the stand-in replaces it here.
import * as mountModule from '../../src/shadow/mount';
import { ShadowManager } from '../../src/daemon/manager';

/** A native shadow that is mounted until told otherwise, and records what it is asked. */
function standIn(): NativeShadow & { isMounted: boolean; calls: string[] } {
  const n = {
    isMounted: true,
    calls: [] as string[],
    get mounted() {
      return n.isMounted;
    },
    active: null,
    layers: async () => [],
    transport: () => ({}),
    activity: () => 0,
    remount: async (mp: string) => {
      n.calls.push(`remount ${mp}`);
      n.isMounted = true;
    },
    closeView: async (id: number, lazy: boolean) => {
      n.calls.push(`closeView ${id} ${lazy}`);
    },
    unmount: async () => {
      n.isMounted = false;
    },
  };
  return n as unknown as NativeShadow & { isMounted: boolean; calls: string[] };
}

describe('a mount that ends on its own (the backend reports it gone)', () => {
  it('leaves the shadow suspended with the reason, tells listeners, and resume() mounts it again', async () => {
    const n = standIn();
    const s = new Shadow(n, '/folder', '/mnt', false, 'fuse_ll');
    const seen: shadowModule.GoneEvent[] = [];
    s.onGone((e) => seen.push(e));
    assert.strictEqual(typeof n.onGone, 'function', 'the Shadow listens on the native object');
    n.isMounted = false;
    n.onGone?.('the WinFsp volume at X: stopped serving', null);
    assert.deepStrictEqual(seen, [{ reason: 'the WinFsp volume at X: stopped serving' }]);
    assert.strictEqual(s.lost, 'the WinFsp volume at X: stopped serving');
    assert.strictEqual(s.suspended, true);
    await s.resume();
    assert.deepStrictEqual(n.calls, ['remount /mnt']);
    assert.strictEqual(s.lost, undefined);
    assert.strictEqual(s.mounted, true);
  });

  it('closes a view that went, and lets its backend go', async () => {
    const n = standIn();
    const s = new Shadow(n, '/folder', '/mnt', false, 'fuse_ll');
    const v = new View(s, 7, 'agent', '/view', false);
    s.views.add(v);
    const seen: shadowModule.GoneEvent[] = [];
    s.onGone((e) => seen.push(e));
    n.onGone?.('gone', 7);
    await new Promise((r) => setImmediate(r));
    assert.deepStrictEqual(seen, [{ reason: 'gone', view: '/view' }]);
    assert.strictEqual(s.views.size, 0);
    assert.strictEqual(v.open, false);
    assert.deepStrictEqual(n.calls, ['closeView 7 true']);
    assert.strictEqual(s.lost, undefined, 'the shared mount is still there');
  });

  it('the daemon says so ("shadow/changed" lost, with the reason), lists it as lost, and mounts it again at the next use', async () => {
    const state = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-gone-'));
    const oldState = process.env.SHADOWFS_STATE_DIR;
    process.env.SHADOWFS_STATE_DIR = state;
    const n = standIn();
    const s = new Shadow(n, state, '/mnt', false, 'fuse_ll');
    const realMount = mountModule.mount;
    (mountModule as { mount: typeof mountModule.mount }).mount = async () => s;
    const notes: string[] = [];
    const m = new ShadowManager({
      statePath: path.join(state, 'state.json'),
      idleMs: 60_000,
      log: createLogger({ transports: [new transports.Console({ silent: true })] }),
      notify: (method, params) => notes.push(`${method} ${JSON.stringify(params)}`),
    });
    try {
      await m.mount({ folder: state, name: 'p', restore: false });
      n.isMounted = false;
      n.onGone?.('the kernel connection ended', null);
      await new Promise((r) => setTimeout(r, 20));
      assert.ok(notes.includes('shadow/changed {"shadow":"p","event":"lost","reason":"the kernel connection ended"}'), notes.join('\n'));
      const [info] = await m.list();
      assert.strictEqual(info.mounted, false);
      assert.strictEqual(info.lost, 'the kernel connection ended');
      await m.work('p');
      assert.ok(notes.includes('shadow/changed {"shadow":"p","event":"remounted"}'), notes.join('\n'));
      const [after] = await m.list();
      assert.strictEqual(after.mounted, true);
      assert.strictEqual(after.lost, undefined);
    } finally {
      (mountModule as { mount: typeof mountModule.mount }).mount = realMount;
      if (oldState === undefined) delete process.env.SHADOWFS_STATE_DIR;
      else process.env.SHADOWFS_STATE_DIR = oldState;
      await m.shutdown().catch(() => undefined);
      fs.rmSync(state, { recursive: true, force: true });
    }
  });
});
