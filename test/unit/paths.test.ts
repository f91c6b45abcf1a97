// Unit tests of API path checks: what a caller may name inside a shadow, and the error otherwise.
// No mount needed (these also form the TypeScript project's test suite in the benchmark).
import * as assert from 'assert';
import { normalizeRelPath } from '../../src/common/paths';
import { ShadowError } from '../../src/common/errors';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ShadowError, `expected a ShadowError, got ${String(err)}`);
    return err.code;
  }
  return 'OK';
}

describe('unit: API paths', () => {
  it('normalises empty and "." components away', () => {
    assert.strictEqual(normalizeRelPath('a/./b//c/'), 'a/b/c');
    assert.strictEqual(normalizeRelPath('./x'), 'x');
    assert.strictEqual(normalizeRelPath('.hidden/..name'), '.hidden/..name');
  });

  it('refuses absolute paths, drive letters, "..", NUL bytes and non-strings with INVALID_PATH', () => {
    for (const bad of ['/etc/passwd', '\\share', 'C:/x', 'c:x', 'a/../b', '..', 'a/b/..', 'a\0b']) {
      assert.strictEqual(
        codeOf(() => normalizeRelPath(bad)),
        'INVALID_PATH',
        JSON.stringify(bad),
      );
    }
    assert.strictEqual(
      codeOf(() => normalizeRelPath(42)),
      'INVALID_PATH',
    );
  });

  it('counts name length in bytes, not characters: 255 bytes pass, 256 do not', () => {
    assert.strictEqual(normalizeRelPath(`d/${'x'.repeat(255)}`), `d/${'x'.repeat(255)}`);
    assert.strictEqual(
      codeOf(() => normalizeRelPath('x'.repeat(256))),
      'INVALID_PATH',
    );
    // 128 two-byte characters are 256 bytes.
    assert.strictEqual(
      codeOf(() => normalizeRelPath('é'.repeat(128))),
      'INVALID_PATH',
    );
    assert.strictEqual(normalizeRelPath('é'.repeat(127)), 'é'.repeat(127));
  });

  it('names the root only when the caller allows it', () => {
    assert.strictEqual(
      codeOf(() => normalizeRelPath('./')),
      'INVALID_PATH',
    );
    assert.strictEqual(normalizeRelPath('./', { allowRoot: true }), '');
    assert.strictEqual(normalizeRelPath('', { allowRoot: true }), '');
  });

  it('keeps a backslash inside a name as a character (it is not a separator on POSIX)', () => {
    assert.strictEqual(normalizeRelPath('a\\b/c'), 'a\\b/c');
  });
});
