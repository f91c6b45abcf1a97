// Checkpoint contents (blobs) no checkpoint references any more leave the disk, on real mounts:
// a checkpoint saved over (large files by chunks, small ones whole, the folder's base contents,
// the audit trail), removed, an autosave replaced or forgotten when its layer is dropped or its
// shadow unmounted through the daemon; what is still referenced (by another checkpoint, a save
// under way, a restored layer's bases) stays and restores byte for byte. The user's folder is
// never written.
import * as assert from 'assert';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { CheckpointStore } from '../src/work/checkpoints';
import { manifestBlobs } from '../src/work/checkpoint-manifest';
import { Provenance } from '../src/work/provenance';
import { FolderGuard, makeProject, withWork } from './helpers/fixtures';

const sha = (data: Buffer | string): string => crypto.createHash('sha256').update(data).digest('hex');

/** The names in the store's blobs directory. */
function onDisk(store: CheckpointStore): Set<string> {
  const dir = path.join(store.root, 'blobs');
  return new Set(fs.existsSync(dir) ? fs.readdirSync(dir) : []);
}

/** Every blob the store's checkpoints reference (each manifest read with all its checks). */
function referenced(store: CheckpointStore): Set<string> {
  const out = new Set<string>();
  for (const a of store.agents()) for (const c of store.list(a)) for (const h of manifestBlobs(store.read(a, c.name))) out.add(h);
  return out;
}

/** What is on disk is exactly what the checkpoints reference, and every referenced blob is there. */
function onlyReferenced(store: CheckpointStore, what: string): void {
  assert.deepStrictEqual([...onDisk(store)].sort(), [...referenced(store)].sort(), what);
}

describe('checkpoint blobs: what no checkpoint references any more is removed', function () {
  this.timeout(180_000);

  it('saving over a checkpoint removes the contents only the old one had; what is still referenced stays and restores byte for byte', async () => {
    const lower = makeProject('blobs-over');
    await withWork(lower, async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      // 9 MiB of random data: stored by chunks (4 MiB each); a small file whole; an edit of a
      // folder file, whose base content the checkpoint keeps (baseBlob).
      const first = crypto.randomBytes(9 << 20);
      fs.writeFileSync(path.join(mp, 'big.bin'), first);
      fs.writeFileSync(path.join(mp, 'small.txt'), 'small and unchanged\n');
      const math = fs.readFileSync(path.join(lower, 'src', 'math.js'));
      fs.appendFileSync(path.join(mp, 'src', 'math.js'), '// the agent\n');
      await w.checkpoint('agent', 'one');
      const before = manifestBlobs(w.store.read('agent', 'one'));
      assert.ok(before.has(sha(math)), 'the base content is a blob of the checkpoint');
      assert.ok(before.has(sha('small and unchanged\n')));
      // The agent rewrites the big file and checkpoints under the same name.
      const second = crypto.randomBytes(9 << 20);
      fs.writeFileSync(path.join(mp, 'big.bin'), second);
      await w.checkpoint('agent', 'one');
      const after = manifestBlobs(w.store.read('agent', 'one'));
      const gone = [...before].filter((h) => !after.has(h));
      assert.ok(gone.length >= 3, `the old big file's chunks are no longer referenced (${gone.length})`);
      for (const h of gone) assert.ok(!onDisk(w.store).has(h), `${h} (only the old checkpoint had it) is removed`);
      onlyReferenced(w.store, 'the blobs directory holds what the checkpoint references, nothing else');
      assert.ok(onDisk(w.store).has(sha(math)) && onDisk(w.store).has(sha('small and unchanged\n')));
      // Back to it after more work: byte for byte.
      fs.writeFileSync(path.join(mp, 'big.bin'), 'scribbled');
      fs.rmSync(path.join(mp, 'small.txt'));
      await w.restore('agent', 'one');
      assert.ok(fs.readFileSync(path.join(mp, 'big.bin')).equals(second), 'big.bin restored byte for byte');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'small.txt'), 'utf8'), 'small and unchanged\n');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'src', 'math.js'), 'utf8'), `${math.toString('utf8')}// the agent\n`);
    });
  });

  it('removing a checkpoint removes its contents; a blob two checkpoints share stays until the last one goes', async () => {
    const lower = makeProject('blobs-remove');
    await withWork(lower, async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      const shared = crypto.randomBytes(1 << 20);
      const onlyA = crypto.randomBytes(1 << 20);
      const onlyB = crypto.randomBytes(1 << 20);
      fs.writeFileSync(path.join(mp, 'shared.bin'), shared);
      fs.writeFileSync(path.join(mp, 'only-a.bin'), onlyA);
      await w.checkpoint('agent', 'a');
      // The agent deletes a file; its content stays only as long as a checkpoint has it.
      fs.rmSync(path.join(mp, 'only-a.bin'));
      fs.writeFileSync(path.join(mp, 'only-b.bin'), onlyB);
      await w.checkpoint('agent', 'b');
      for (const d of [shared, onlyA, onlyB]) assert.ok(onDisk(w.store).has(sha(d)));
      w.store.remove('agent', 'a');
      assert.ok(!onDisk(w.store).has(sha(onlyA)), "the deleted file's content left with the last checkpoint that had it");
      assert.ok(onDisk(w.store).has(sha(shared)), 'the shared blob stays: "b" references it');
      onlyReferenced(w.store, 'after removing "a"');
      fs.rmSync(path.join(mp, 'shared.bin'));
      await w.restore('agent', 'b');
      assert.ok(fs.readFileSync(path.join(mp, 'shared.bin')).equals(shared), 'the shared file restores byte for byte');
      assert.ok(fs.readFileSync(path.join(mp, 'only-b.bin')).equals(onlyB));
      w.store.remove('agent', 'b');
      assert.deepStrictEqual([...onDisk(w.store)], [], 'no checkpoint left: no blob left');
    });
  });

  it('an autosave replacing the last one, and one forgotten as its layer is dropped, leave no content behind', async () => {
    const lower = makeProject('blobs-auto');
    await withWork(lower, async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      const first = crypto.randomBytes(2 << 20);
      fs.writeFileSync(path.join(mp, 'data.bin'), first);
      assert.ok((await w.autosave()).includes('agent'));
      assert.ok(onDisk(w.store).has(sha(first)));
      const second = crypto.randomBytes(2 << 20);
      fs.writeFileSync(path.join(mp, 'data.bin'), second);
      assert.ok((await w.autosave()).includes('agent'));
      assert.ok(!onDisk(w.store).has(sha(first)), 'the replaced autosave took its content with it');
      assert.ok(onDisk(w.store).has(sha(second)));
      onlyReferenced(w.store, 'after the second autosave');
      await shadow.activate('default');
      await shadow.dropLayer('agent');
      await w.forgetAutosave('agent');
      assert.ok(!onDisk(w.store).has(sha(second)), "a dropped layer's autosave content is removed");
      onlyReferenced(w.store, 'after layer drop');
    });
  });

  it('a save racing a collection loses nothing: the collection runs after the save put its blobs and before its manifest', async () => {
    const lower = makeProject('blobs-race');
    await withWork(lower, async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      const kept = crypto.randomBytes(1 << 20); // in "one", and unchanged in "two": already on disk when "two" is saved
      const old = crypto.randomBytes(1 << 20);
      fs.writeFileSync(path.join(mp, 'kept.bin'), kept);
      fs.writeFileSync(path.join(mp, 'changed.bin'), old);
      await w.checkpoint('agent', 'one');
      const fresh = crypto.randomBytes(1 << 20);
      fs.writeFileSync(path.join(mp, 'changed.bin'), fresh);
      // save() asks when the layer started only as it writes the manifest, after every blob is
      // put: removing "one" there (which collects) is a collection in the middle of the save,
      // at the worst point, every time.
      const store = w.store;
      let collectedMeanwhile: Set<string> | undefined;
      class Racing extends Provenance {
        override layerSince(agent: string): number | undefined {
          if (!collectedMeanwhile) {
            store.remove('agent', 'one');
            collectedMeanwhile = onDisk(store);
          }
          return super.layerSince(agent);
        }
      }
      const racing = new Racing(shadow);
      try {
        await store.save(shadow, racing, 'agent', 'two');
      } finally {
        racing.dispose();
      }
      assert.ok(collectedMeanwhile, 'the collection ran during the save');
      assert.ok(!collectedMeanwhile.has(sha(old)), 'it did collect: the content only "one" had is gone');
      assert.ok(collectedMeanwhile.has(sha(kept)) && collectedMeanwhile.has(sha(fresh)), 'what the save had put stayed');
      onlyReferenced(store, 'after the save');
      fs.rmSync(path.join(mp, 'kept.bin'));
      fs.rmSync(path.join(mp, 'changed.bin'));
      await w.restore('agent', 'two');
      assert.ok(fs.readFileSync(path.join(mp, 'kept.bin')).equals(kept));
      assert.ok(fs.readFileSync(path.join(mp, 'changed.bin')).equals(fresh));
    });
  });

  it("a restored layer's base contents stay while the layer lives, though the checkpoint that had them goes", async () => {
    const lower = makeProject('blobs-bases');
    await withWork(lower, async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      const math = fs.readFileSync(path.join(lower, 'src', 'math.js'));
      fs.appendFileSync(path.join(mp, 'src', 'math.js'), '// the agent\n');
      await w.checkpoint('agent', 'one');
      await w.restore('agent', 'one');
      w.store.remove('agent', 'one');
      assert.ok(w.store.baseContent(sha(math))?.equals(math), 'apply still has the content the agent started from');
      await shadow.activate('default');
      await shadow.dropLayer('agent');
      w.store.collect();
      assert.deepStrictEqual([...onDisk(w.store)], [], 'once the layer is dropped, it goes');
    });
  });

  it('through the daemon: layer drop and unmount remove the autosaves and their contents; another checkpoint keeps its own', async () => {
    const lower = makeProject('blobs-daemon');
    const guard = new FolderGuard(lower);
    const store = new CheckpointStore(fs.realpathSync(lower));
    const A = crypto.randomBytes(1 << 20);
    const K = crypto.randomBytes(1 << 20);
    const B = crypto.randomBytes(1 << 20);
    const c = await ShadowClient.connect({ clientName: 'checkpoint blobs test' });
    try {
      await c.request('mount', { folder: lower, name: 'blobs' });
      const write = (agent: string, p: string, data: Buffer) =>
        c.request('layer.write', { shadow: 'blobs', agent, path: p, data: data.toString('base64') });
      await write('a', 'a.bin', A);
      await c.request('layer.checkpoint', { shadow: 'blobs', agent: 'a', name: 'autosave' });
      await write('b', 'keep.bin', K);
      await c.request('layer.checkpoint', { shadow: 'blobs', agent: 'b', name: 'keep' });
      await write('b', 'b.bin', B);
      await c.request('layer.checkpoint', { shadow: 'blobs', agent: 'b', name: 'autosave' });
      for (const d of [A, K, B]) assert.ok(onDisk(store).has(sha(d)));
      await c.request('layer.drop', { shadow: 'blobs', agent: 'a' });
      assert.ok(!onDisk(store).has(sha(A)), "the dropped layer's autosave content is removed");
      assert.ok(onDisk(store).has(sha(K)) && onDisk(store).has(sha(B)));
      await c.request('unmount', { shadow: 'blobs' });
      assert.ok(!onDisk(store).has(sha(B)), 'unmounting removed the autosave and its content');
      assert.ok(onDisk(store).has(sha(K)), 'the checkpoint "keep" keeps its content');
      onlyReferenced(store, 'after unmount');
      assert.deepStrictEqual(
        store.list('b').map((x) => x.name),
        ['keep'],
      );
      store.remove('b', 'keep');
      assert.deepStrictEqual([...onDisk(store)], []);
      await guard.check();
    } finally {
      guard.stop();
      c.close();
    }
  });
});
