// FolderChanges: what changed in the user's folder since a reader last asked, from the shared
// mount's own watcher (fuse_ll) or a watcher of its own (other backends), on a real mount.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { FolderChanges } from '../src/shadow/folder-changes';
import { eventually, makeProject, withShadow } from './helpers/fixtures';

describe('folder changes: edits made in the folder itself, as a reader polls them', function () {
  this.timeout(60_000);

  it('reports each edited, created and removed path, from the right source, and nothing before it started', async () => {
    const lower = makeProject('changes-lower');
    fs.writeFileSync(path.join(lower, 'early.txt'), 'made before the reader\n');
    await withShadow(
      lower,
      async (shadow, mp) => {
        // Programs in the shadow look at the folder's files (as a language server would).
        assert.ok(fs.readdirSync(mp).length > 0);
        const feed = new FolderChanges(shadow);
        try {
          assert.strictEqual(feed.source, shadow.backend === 'fuse_ll' ? 'mount' : 'fs.watch', `backend ${shadow.backend}`);
          assert.deepStrictEqual(feed.take(), { paths: [], overflow: false }, 'nothing happened since it started');
          fs.writeFileSync(path.join(lower, 'package.json'), '{ "name": "edited" }\n');
          fs.writeFileSync(path.join(lower, 'new.txt'), 'new\n');
          fs.rmSync(path.join(lower, 'early.txt'));
          const seen = new Set<string>();
          await eventually(
            () => {
              const d = feed.take();
              assert.strictEqual(d.overflow, false);
              assert.strictEqual(new Set(d.paths).size, d.paths.length, `each path once per answer: ${d.paths.join(', ')}`);
              for (const p of d.paths) seen.add(p);
              return ['package.json', 'new.txt', 'early.txt'].every((p) => seen.has(p));
            },
            20_000,
            `the three changes (seen so far: ${[...seen].join(', ')})`,
          );
        } finally {
          feed.dispose();
        }
      },
      { guard: false }, // the test edits the folder itself, as you would
    );
  });
});
