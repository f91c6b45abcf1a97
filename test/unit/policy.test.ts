// Unit tests of the run policy: which argv a run may start, and how a bad policy file is reported.
import * as assert from 'assert';
import { ShadowError } from '../../src/common/errors';
import { checkPolicy, parsePolicy } from '../../src/run/policy';

const denied = (fn: () => void): string => {
  try {
    fn();
    return 'allowed';
  } catch (err) {
    assert.ok(err instanceof ShadowError);
    return `${err.code}: ${err.message}`;
  }
};

describe('unit: run policy', () => {
  const policy = parsePolicy('{"allow": ["node", "npm", "git"], "deny": [["git", "push"], ["npm", "publish"]]}', 'test');

  it('allows listed programs by base name, whatever their directory', () => {
    assert.strictEqual(
      denied(() => checkPolicy(policy, ['node', '--test'])),
      'allowed',
    );
    assert.strictEqual(
      denied(() => checkPolicy(policy, ['/usr/bin/git', 'status'])),
      'allowed',
    );
    assert.strictEqual(
      denied(() => checkPolicy(undefined, ['anything'])),
      'allowed',
    );
  });

  it('refuses unlisted programs and denied argv prefixes with POLICY_DENIED', () => {
    assert.match(
      denied(() => checkPolicy(policy, ['curl', 'x'])),
      /^POLICY_DENIED: .*"curl"/,
    );
    assert.match(
      denied(() => checkPolicy(policy, ['git', 'push', '--force'])),
      /^POLICY_DENIED: .*"git push"/,
    );
    assert.match(
      denied(() => checkPolicy(policy, ['/usr/bin/git', 'push'])),
      /^POLICY_DENIED/,
    );
    // A prefix matches whole words in order, not substrings.
    assert.strictEqual(
      denied(() => checkPolicy(policy, ['git', 'pushy'])),
      'allowed',
    );
    assert.strictEqual(
      denied(() => checkPolicy(policy, ['git', 'log', 'push'])),
      'allowed',
    );
  });

  it('reports a policy file that is not JSON, or not of the documented shape, with INVALID_POLICY', () => {
    for (const text of ['{', '[]', 'null', '{"allow": "node"}', '{"deny": ["git"]}', '{"deny": [[1]]}']) {
      assert.match(
        denied(() => parsePolicy(text, 'p.json')),
        /^INVALID_POLICY: the run policy p\.json/,
        text,
      );
    }
  });
});
