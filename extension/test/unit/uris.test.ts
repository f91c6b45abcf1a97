import * as assert from 'assert';
import { fromUriParts, toUriParts, type DocRef } from '../../src/uris';

describe('extension: shadowfs: document URIs', () => {
  it('round-trips agent, empty and memory documents, names with any characters included', () => {
    const refs: DocRef[] = [
      { kind: 'agent', shadow: 'web', agent: 'claude', path: 'src/app.ts' },
      { kind: 'agent', shadow: 'my.proj_1', agent: 'a b&c=d?é', path: 'dir with space/ü#1.md' },
      { kind: 'empty', path: 'new.txt' },
      { kind: 'folder', root: '/home/u/my proj&x', path: '.git/index' },
      { kind: 'memory', id: '7', path: 'a/b.c' },
    ];
    for (const ref of refs) {
      const parts = toUriParts(ref);
      assert.strictEqual(parts.path, `/${ref.path}`, 'the path is the file path, so titles and languages follow it');
      assert.deepStrictEqual(fromUriParts(parts.path, parts.query), ref);
    }
  });

  it('refuses what it did not make', () => {
    assert.strictEqual(fromUriParts('/a.ts', 'kind=agent&shadow=web'), undefined, 'no agent');
    assert.strictEqual(fromUriParts('/a.ts', 'kind=other'), undefined);
    assert.strictEqual(fromUriParts('a.ts', 'kind=empty'), undefined, 'relative');
    assert.strictEqual(fromUriParts('/', 'kind=empty'), undefined, 'no file');
    assert.strictEqual(fromUriParts('/a/../b', 'kind=empty'), undefined, '..');
    assert.strictEqual(fromUriParts('/a//b', 'kind=empty'), undefined, 'empty segment');
    assert.strictEqual(fromUriParts('/a', 'kind=memory'), undefined, 'no id');
    assert.strictEqual(fromUriParts('/a', 'kind=folder'), undefined, 'no root');
  });
});
