import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { branchNameProblem } from '../../src/branchName';

describe('extension: branch names are checked as git checks them', () => {
  let outside: string;
  before(() => {
    // Outside any repository, so that git expands nothing (@{-1}, @) from one.
    outside = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-ext-branch-'));
  });
  after(() => fs.rmSync(outside, { recursive: true, force: true }));

  /** What `git check-ref-format --branch` says of `name`. */
  const gitTakes = (name: string): boolean =>
    spawnSync('git', ['check-ref-format', '--branch', name], {
      cwd: outside,
      env: { ...process.env, GIT_CEILING_DIRECTORIES: path.dirname(outside) },
      stdio: 'ignore',
    }).status === 0;

  it('takes ordinary names and refuses the rest with the reason', () => {
    for (const ok of ['agent-work', 'claude/fix-1', 'feature/a.b', 'é/ü', 'a@b', 'x{y}', 'foo/HEAD', 'v1.2']) {
      assert.strictEqual(branchNameProblem(ok), undefined, ok);
    }
    const refused: Array<[string, RegExp]> = [
      ['', /give the branch a name/],
      ['-x', /cannot begin with "-"/],
      ['HEAD', /checked-out commit/],
      ['@', /checked-out commit/],
      ['@{-1}', /"@\{"/],
      ['a b', /a space is not allowed/],
      ['a\tb', /control characters/],
      ['a~1', /"~" is not allowed/],
      ['a^', /"\^" is not allowed/],
      ['a:b', /":" is not allowed/],
      ['a?', /"\?" is not allowed/],
      ['a*', /"\*" is not allowed/],
      ['a[1]', /"\[" is not allowed/],
      ['a\\b', /"\\" is not allowed/],
      ['/a', /begin or end with "\/"/],
      ['a/', /begin or end with "\/"/],
      ['a//b', /"\/\/" is not allowed/],
      ['a..b', /"\.\." is not allowed/],
      ['a.', /cannot end with "\."/],
      ['.a', /"\.a": .*cannot begin with "\."/],
      ['a/.b', /"\.b": .*cannot begin with "\."/],
      ['a.lock', /"a\.lock": .*\.lock/],
      ['a.lock/b', /"a\.lock": .*\.lock/],
      ['x'.repeat(256), /at most 255 characters/],
    ];
    for (const [name, why] of refused) {
      const problem = branchNameProblem(name);
      assert.ok(problem, `${JSON.stringify(name)} is refused`);
      assert.match(problem, why, JSON.stringify(name));
    }
  });

  it('agrees with git check-ref-format --branch (every listed name, and names made of the characters that matter)', () => {
    const listed = ['agent-work', 'a/b', '-', 'HEAD', '@{-1}', 'a@{u}', 'a..b', 'a.lock', '.lock', 'a.lo', 'x.', 'a/.', 'é/x', 'a}', '~'];
    // A fixed pseudo-random sequence (the same names every run).
    let seed = 27;
    const next = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const alphabet = ['a', 'b', '.', '/', '@', '{', '}', '-', ' ', 'lock', '.lock', '~', '\\', ':', 'é', '*', 'HEAD'];
    const made = Array.from({ length: 250 }, () => Array.from({ length: 1 + next(6) }, () => alphabet[next(alphabet.length)]).join(''));
    const disagree = [...listed, ...made]
      // "@" alone: git takes it (and would expand it in a repository); we refuse it on purpose.
      .filter((name) => name !== '@')
      .filter((name) => (branchNameProblem(name) === undefined) !== gitTakes(name));
    assert.deepStrictEqual(disagree, [], 'names on which the check and git disagree');
  });
});
