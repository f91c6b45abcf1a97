// The shadow reads the folder live: edits the developer makes in A show up in A' (for paths
// the layer has not changed) within milliseconds: an inotify watch on every directory the
// kernel holds invalidates its caches. The kernel cache timeout (60 s here) is only a fallback.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { errCode, eventually, FolderGuard, makeProject, withShadow } from './helpers/fixtures';

describe('live view of the folder', function () {
  it('edits, creates, deletes and renames in the folder appear in the shadow; the layer wins where it changed the path', async () => {
    const lower = makeProject();
    const bound = 30_000; // below the 60 s cache timeout: only the watcher can make this
    let guard: FolderGuard | undefined;
    await withShadow(
      lower,
      async (shadow, mp) => {
        const inA = (r: string): string => path.join(lower, r);
        const inS = (r: string): string => path.join(mp, r);
        // Warm the kernel caches for everything we are about to change in A.
        fs.readFileSync(inS('README.md'));
        fs.readdirSync(inS('src'));
        fs.readdirSync(mp);
        assert.strictEqual(
          errCode(() => fs.statSync(inS('src/added.js'))),
          'ENOENT',
        );
        fs.readFileSync(inS('deep/a/top.txt'));
        await shadow.write('package.json', '{"name":"from-the-layer"}\n');

        fs.writeFileSync(inA('README.md'), 'edited by the developer, and longer than before\n');
        fs.writeFileSync(inA('src/added.js'), 'added\n');
        fs.unlinkSync(inA('deep/a/top.txt'));
        fs.renameSync(inA('notes'), inA('notes-renamed'));
        fs.writeFileSync(inA('package.json'), '{"name":"developer"}\n');
        guard = new FolderGuard(lower);

        const delays = [
          await eventually(
            () => fs.readFileSync(inS('README.md'), 'utf8') === 'edited by the developer, and longer than before\n',
            bound,
            'the edit',
          ),
          await eventually(
            () => fs.readdirSync(inS('src')).includes('added.js') && fs.existsSync(inS('src/added.js')),
            bound,
            'the new file',
          ),
          await eventually(() => !fs.existsSync(inS('deep/a/top.txt')), bound, 'the deletion'),
          await eventually(
            () => fs.existsSync(inS('notes-renamed/todo.txt')) && !fs.existsSync(inS('notes')) && !fs.readdirSync(mp).includes('notes'),
            bound,
            'the rename',
          ),
        ];
        assert.strictEqual(fs.readFileSync(inS('package.json'), 'utf8'), '{"name":"from-the-layer"}\n');
        process.stdout.write(`      (changes in the folder became visible after ${delays.join(', ')} ms)\n`);
      },
      { guard: false, cacheTimeout: 60 },
    );
    await guard?.check();
  });

  it('an edit in the folder shows in an own view and in a non-default layer too', async () => {
    const lower = makeProject();
    await withShadow(
      lower,
      async (shadow) => {
        await shadow.layer('agent').write('mine.txt', 'agent');
        await shadow.activate('agent');
        const view = await shadow.openView('other', { mountPoint: path.join(path.dirname(shadow.mountPoint), 'view') });
        try {
          for (const mp of [shadow.mountPoint, view.mountPoint]) fs.readFileSync(path.join(mp, 'README.md'));
          fs.writeFileSync(path.join(lower, 'README.md'), 'seen everywhere\n');
          for (const mp of [shadow.mountPoint, view.mountPoint]) {
            await eventually(
              () => fs.readFileSync(path.join(mp, 'README.md'), 'utf8') === 'seen everywhere\n',
              30_000,
              `the edit in ${mp}`,
            );
          }
        } finally {
          await view.close();
        }
      },
      { guard: false, cacheTimeout: 60 },
    );
  });
});
