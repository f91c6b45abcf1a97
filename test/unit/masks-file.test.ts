// The masks kept beside a folder's autosaves (CheckpointStore.saveMasks / loadMasks), on a real
// state directory of the test's own: written and read back, removed when empty, and a damaged
// file refused with advice that does not unmask (removed, the layers would come back unmasked).
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { CheckpointStore } from '../../src/work/checkpoints';

describe('unit: masks kept beside the autosaves', () => {
  let dir = '';
  const before = process.env.SHADOWFS_STATE_DIR;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-masks-'));
    process.env.SHADOWFS_STATE_DIR = dir;
  });
  afterEach(() => {
    if (before === undefined) delete process.env.SHADOWFS_STATE_DIR;
    else process.env.SHADOWFS_STATE_DIR = before;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads back what it kept, copies included; none removes the file', () => {
    const store = new CheckpointStore('/home/me/proj');
    assert.strictEqual(store.loadMasks(), undefined);
    const masks = { default: ['*.pem'], agents: { a: ['.env'] }, copied: { a2: 'a' } };
    store.saveMasks(masks);
    assert.deepStrictEqual(store.loadMasks(), masks);
    store.saveMasks({});
    assert.strictEqual(store.loadMasks(), undefined);
    assert.deepStrictEqual(fs.readdirSync(store.root), []);
  });

  it('refuses a damaged file, saying to mend it or set the masks again, never just to remove it', () => {
    const store = new CheckpointStore('/home/me/proj');
    store.saveMasks({ agents: { a: ['.env'] } });
    const file = path.join(store.root, 'masks.json');
    for (const bad of ['{"agents":{"a":"notalist"}}', 'not json', '{"agents":{"a/b":[".env"]}}', '{"other":1}']) {
      fs.writeFileSync(file, bad);
      assert.throws(
        () => store.loadMasks(),
        (err: { code?: string; message: string }) => {
          assert.strictEqual(err.code, 'STATE_CORRUPT', bad);
          assert.match(err.message, /holds the masks of this folder's agents/);
          assert.match(err.message, /set the masks again \(shadowfs mask\) before any agent works/);
          assert.doesNotMatch(err.message, /save a new checkpoint/);
          return true;
        },
        bad,
      );
    }
    // A link in its place is not followed.
    fs.rmSync(file);
    fs.writeFileSync(path.join(dir, 'elsewhere.json'), '{"agents":{}}');
    fs.symlinkSync(path.join(dir, 'elsewhere.json'), file);
    assert.throws(() => store.loadMasks(), /is not a plain file of its size.*set the masks again/);
  });
});
