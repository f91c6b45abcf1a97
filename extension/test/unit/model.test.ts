import * as assert from 'assert';
import type { ChangeInfo, ShadowInfo } from 'shadowfs/client';
import { baseName, countChanges, describeCounts, kindLetter, parentOf, ShadowsModel, visibleChanges } from '../../src/model';
import { uniqueAgentName } from '../../src/names';

const change = (path: string, kind: ChangeInfo['kind'], type: ChangeInfo['type'] = 'file'): ChangeInfo => ({ path, kind, type });
const shadow = (name: string, agents: string[], active: string | null, mounted = true): ShadowInfo => ({
  name,
  lower: `/home/u/${name}`,
  mountPoint: `/run/user/1/shadowfs/${name}`,
  backend: 'fuse_ll',
  mounted,
  active,
  agents,
  views: [],
  idleSeconds: 0,
});

describe('extension: the Shadows view model', () => {
  it('shows files, symlinks and deleted directories, sorted; not the directories holding changed files', () => {
    const v = visibleChanges([
      change('src/b.ts', 'modified'),
      change('src', 'modified', 'directory'),
      change('new', 'added', 'directory'),
      change('new/x.md', 'added'),
      change('gone', 'deleted', 'directory'),
      change('link', 'added', 'symlink'),
      change('a.txt', 'deleted'),
    ]);
    assert.deepStrictEqual(
      v.map((c) => c.path),
      ['a.txt', 'gone', 'link', 'new/x.md', 'src/b.ts'],
    );
  });

  it('counts and describes changes by kind', () => {
    const cs = [
      change('a', 'added'),
      change('b', 'added'),
      change('c', 'modified'),
      change('d', 'metadata'),
      change('dir', 'added', 'directory'),
    ];
    assert.deepStrictEqual(countChanges(cs), { added: 2, modified: 1, deleted: 0, metadata: 1 });
    assert.strictEqual(describeCounts(cs), '2 added, 1 modified, 1 metadata');
    assert.strictEqual(describeCounts([]), 'no changes');
    assert.strictEqual(describeCounts(undefined), '');
    assert.deepStrictEqual(
      ['added', 'modified', 'deleted', 'metadata'].map((k) => kindLetter(k as ChangeInfo['kind'])),
      ['A', 'M', 'D', 'P'],
    );
  });

  it('splits paths for labels', () => {
    assert.strictEqual(parentOf('a/b/c.ts'), 'a/b');
    assert.strictEqual(parentOf('c.ts'), '');
    assert.strictEqual(baseName('a/b/c.ts'), 'c.ts');
    assert.strictEqual(baseName('c.ts'), 'c.ts');
  });

  it('builds shadows → layers (active marked) → files, and forgets layers that are gone', () => {
    const m = new ShadowsModel();
    m.setShadows([shadow('web', ['bob', 'alice'], 'bob'), shadow('api', [], null)]);
    assert.deepStrictEqual(
      m.roots().map((r) => r.info.name),
      ['api', 'web'],
    );
    m.setChanges('web', 'alice', [change('x.ts', 'modified')]);
    const layers = m.layers('web');
    assert.deepStrictEqual(
      layers.map((l) => [l.agent, l.active, l.changes?.length]),
      [
        ['alice', false, 1],
        ['bob', true, undefined],
      ],
    );
    const files = m.files('web', 'alice');
    assert.strictEqual(files.length, 1);
    assert.strictEqual(files[0].lower, '/home/u/web');
    assert.strictEqual(m.changeAt('web', 'alice', 'x.ts')?.kind, 'modified');
    assert.deepStrictEqual(m.files('web', 'bob'), [], 'changes not loaded yet: no files');

    m.setError('web', 'bob', 'boom');
    assert.strictEqual(m.layers('web')[1].error, 'boom');

    m.setShadows([shadow('web', ['bob'], null)]);
    assert.strictEqual(m.changeAt('web', 'alice', 'x.ts'), undefined, 'a dropped layer forgets its changes');
    assert.strictEqual(m.layers('web')[0].active, false);
    assert.deepStrictEqual(m.layers('nosuch'), []);
    assert.strictEqual(m.shadowOfFolder('/home/u/web/', (a, b) => a.replace(/\/$/, '') === b.replace(/\/$/, ''))?.name, 'web');
  });

  it('names a new agent uniquely', () => {
    assert.strictEqual(uniqueAgentName('vscode', []), 'vscode');
    assert.strictEqual(uniqueAgentName('vscode', ['vscode', 'vscode-2']), 'vscode-3');
  });
});
