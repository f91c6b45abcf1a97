// What a native errno means (src/common/errors.ts, src/shadow/errnos.ts), and the layer events the
// shadow emits that the changes service keeps its provenance from (src/work/provenance.ts).
// No mount: the native object is a stand-in that fails or records as told.
import * as assert from 'assert';
import { fromNative, NATIVE_ERRNOS, ShadowError } from '../../src/common/errors';
import type { NativeShadow } from '../../src/shadow/native';
import { type LayerEvent, Shadow } from '../../src/shadow';
import { ERRNOS } from '../../src/shadow/errnos';
import { Provenance } from '../../src/work/provenance';

function nativeError(code: string, errno: number, message = `${code} from the native module`): Error {
  return Object.assign(new Error(message), { code, errno });
}

/** A mounted native shadow whose calls succeed, except those named in `fail`. */
function standIn(fail: Record<string, Error> = {}): NativeShadow {
  const ok = (name: string) => async (): Promise<unknown> => {
    if (fail[name]) throw fail[name];
    return name === 'activate' ? { paths: 0, epoch: false, ms: 0 } : undefined;
  };
  return {
    mounted: true,
    active: null,
    createLayer: ok('createLayer'),
    cloneLayer: ok('cloneLayer'),
    dropLayer: ok('dropLayer'),
    reset: ok('reset'),
    write: ok('write'),
    revert: ok('revert'),
    activate: ok('activate'),
  } as unknown as NativeShadow;
}

describe('unit: errno meanings', () => {
  it('the shared table: code, sentence naming what was done, and the errno', () => {
    const e = fromNative(nativeError('ENOENT', 2), 'read a.txt in the layer of x');
    assert.strictEqual(e.code, 'NOT_FOUND');
    assert.strictEqual(e.message, 'read a.txt in the layer of x: no such file or directory in the shadow');
    assert.strictEqual(e.errno, 2);
    assert.strictEqual(fromNative(Object.assign(nativeError('EINVAL', 22), { invalidPath: true }), 'w').code, 'INVALID_PATH');
    assert.strictEqual(fromNative(nativeError('EINVAL', 22), 'w').code, 'INVALID_ARGUMENT');
    assert.strictEqual(
      fromNative(nativeError('EFBIG', 27, 'a.bin is 5 GiB, past 2 GiB'), 'read a.bin').message,
      'read a.bin: a.bin is 5 GiB, past 2 GiB',
    );
    const odd = fromNative(nativeError('EIO', 5, 'cannot copy layer a to b: I/O error'), 'copy');
    assert.strictEqual(odd.code, 'INTERNAL');
    assert.match(odd.message, /^cannot copy layer a to b: I\/O error; this is unexpected/);
    for (const m of Object.values(NATIVE_ERRNOS)) assert.ok(m.code.length > 0);
  });

  it("an operation's own table wins over the shared one, and '*' takes every errno it does not name", () => {
    const busy = fromNative(nativeError('EBUSY', 16), 'drop the layer of a', ERRNOS.dropLayer('a'));
    assert.strictEqual(busy.code, 'LAYER_BUSY');
    assert.strictEqual(busy.message, 'the layer of a is active or has a view open; activate another layer or close its view first');
    const exists = fromNative(nativeError('EEXIST', 17), 'copy the layer of a to b', ERRNOS.cloneLayer('b'));
    assert.strictEqual(exists.code, 'LAYER_EXISTS');
    assert.strictEqual(exists.message, 'cannot copy the layer of a to b: b has a layer already; drop it first or pick another id');
    assert.strictEqual(exists.errno, 17);
    // ENOENT means NOT_FOUND everywhere, but a mount that fails with it failed to mount.
    const mount = fromNative(nativeError('ENOENT', 2, 'fusermount3 not found'), 'cannot mount a shadow of /a at /m', ERRNOS.mount);
    assert.strictEqual(mount.code, 'MOUNT_FAILED');
    assert.strictEqual(mount.message, 'cannot mount a shadow of /a at /m: fusermount3 not found');
    const unmount = fromNative(nativeError('EBUSY', 16), 'unmount /m', ERRNOS.unmount('/m'));
    assert.strictEqual(
      unmount.message,
      'the shadow at /m (or one of its views) is in use (a shell or program has it open; see "fuser -vm /m"); close them, or unmount lazily with { lazy: true } / --lazy',
    );
  });

  it('through a Shadow: EBUSY of any call is the mount in use; clone and drop say what they mean', async () => {
    const s = new Shadow(
      standIn({ write: nativeError('EBUSY', 16), cloneLayer: nativeError('EEXIST', 17), dropLayer: nativeError('EBUSY', 16) }),
      '/folder',
      '/mnt',
      false,
      'fuse_ll',
    );
    await assert.rejects(
      s.layer('a').write('f', 'x'),
      (e: ShadowError) => e.code === 'MOUNT_BUSY' && e.message.startsWith('/mnt is in use'),
    );
    await assert.rejects(s.cloneLayer('a', 'b'), (e: ShadowError) => e.code === 'LAYER_EXISTS');
    await assert.rejects(s.dropLayer('a'), (e: ShadowError) => e.code === 'LAYER_BUSY');
  });
});

describe('unit: layer events and the provenance kept from them', () => {
  it('the shadow tells what changed a layer, after it is done', async () => {
    const s = new Shadow(standIn({ revert: nativeError('EXDEV', 18) }), '/folder', '/mnt', false, 'fuse_ll');
    const seen: Array<Omit<LayerEvent, 'at'>> = [];
    const stop = s.onLayer(({ at, ...e }) => {
      assert.ok(at >= s.mountedAt);
      seen.push(e);
    });
    await s.layer('a').write('f.txt', 'x');
    await s.cloneLayer('a', 'b');
    await s.layer('b').reset();
    await s.activate('b');
    await assert.rejects(s.layer('b').revert('d/f'), (e: ShadowError) => e.code === 'CONFLICT');
    await s.dropLayer('a');
    stop();
    await s.layer('b').write('g', 'y');
    assert.deepStrictEqual(seen, [
      { kind: 'created', agent: 'a' },
      { kind: 'written', agent: 'a', path: 'f.txt' },
      { kind: 'cloned', agent: 'b', from: 'a' },
      { kind: 'reset', agent: 'b' },
      { kind: 'activated', agent: 'b' },
      { kind: 'dropped', agent: 'a' },
    ]);
  });

  it('keeps when each layer started, and the bases a restore carried, from those events only', async () => {
    const s = new Shadow(standIn(), '/folder', '/mnt', false, 'fuse_ll');
    const p = new Provenance(s);
    assert.strictEqual(p.layerSince('early'), s.mountedAt, 'a layer older than the listener counts from the mount');
    await s.createLayer('a');
    const a = p.layerSince('a')!;
    assert.ok(a >= s.mountedAt);
    const base = { ino: 1, size: 1, mtimeNs: '1', ctimeNs: '1', hash: null };
    p.setLayerSince('a', 1000);
    p.setRestoredBase('a', 'f', base, 'b'.repeat(64));
    await s.createLayer('a'); // known: nothing happens
    assert.strictEqual(p.layerSince('a'), 1000);
    await s.cloneLayer('a', 'c');
    assert.strictEqual(p.layerSince('c'), 1000);
    assert.strictEqual(p.restoredBase('c', 'f'), undefined, 'a copy carries no restored bases');
    assert.deepStrictEqual(p.restoredBase('a', 'f'), { base, blob: 'b'.repeat(64) });
    p.setLayerSince('c', undefined);
    assert.strictEqual(p.layerSince('c'), undefined, 'a checkpoint that did not say: unknown');
    await s.layer('a').reset();
    assert.ok(p.layerSince('a')! >= a);
    assert.strictEqual(p.restoredBases('a').size, 0);
    p.setRestoredBase('c', 'f', base);
    await s.dropLayer('c');
    assert.strictEqual(p.restoredBases('c').size, 0);
    p.dispose();
    await s.layer('a').reset();
    p.setLayerSince('a', 5);
    await s.layer('a').reset();
    assert.strictEqual(p.layerSince('a'), 5, 'no longer listening');
  });
});
