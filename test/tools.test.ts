// Real tools inside a shadow give the same answers as in the folder itself.
import * as assert from 'assert';
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { makeProject, withShadow } from './helpers/fixtures';

function sh(cmd: string, cwd: string): { status: number | null; out: string } {
  const r = spawnSync('sh', ['-c', cmd], { cwd, encoding: 'utf8', env: { ...process.env, GIT_OPTIONAL_LOCKS: '1' } });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('real tools inside a shadow', function () {
  it('git status and git diff match the folder; an edit in the shadow shows only there', async () => {
    const lower = makeProject();
    const git = (...args: string[]): string =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', '-c', 'init.defaultBranch=main', ...args], {
        cwd: lower,
        encoding: 'utf8',
      });
    git('init', '-q');
    git('add', '.');
    git('commit', '-qm', 'initial');
    fs.appendFileSync(path.join(lower, 'README.md'), 'a local edit\n');
    fs.writeFileSync(path.join(lower, 'untracked.txt'), 'new\n');
    git('status', '--porcelain'); // settles the index's stat cache before the folder is watched
    const statusA = sh('git status --porcelain=v1 && git diff', lower).out;
    assert.match(statusA, /README\.md/);
    await withShadow(lower, (_s, mp) => {
      assert.strictEqual(sh('git status --porcelain=v1 && git diff', mp).out, statusA);
      fs.writeFileSync(path.join(mp, 'src/math.js'), '// rewritten in the shadow\n');
      const inShadow = sh('git status --porcelain=v1', mp).out;
      assert.match(inShadow, / M src\/math\.js/);
      assert.strictEqual(sh('git log --oneline | wc -l', mp).out.trim(), '1');
    });
    assert.doesNotMatch(sh('git status --porcelain=v1', lower).out, /src\/math\.js/);
  });

  it('node runs the example test suite: passes in the shadow, fails after a breaking edit made there', async () => {
    const lower = makeProject();
    const inA = spawnSync(process.execPath, ['--test'], { cwd: lower, encoding: 'utf8' });
    assert.strictEqual(inA.status, 0, inA.stdout + inA.stderr);
    await withShadow(lower, (_s, mp) => {
      const ok = spawnSync(process.execPath, ['--test'], { cwd: mp, encoding: 'utf8' });
      assert.strictEqual(ok.status, 0, ok.stdout + ok.stderr);
      assert.match(ok.stdout, /# pass 2/);
      const f = path.join(mp, 'src/math.js');
      fs.writeFileSync(f, fs.readFileSync(f, 'utf8').replace('a + b', 'a * b'));
      const broken = spawnSync(process.execPath, ['--test'], { cwd: mp, encoding: 'utf8' });
      assert.strictEqual(broken.status, 1);
      assert.match(broken.stdout, /# fail 2/);
    });
    assert.strictEqual(spawnSync(process.execPath, ['--test'], { cwd: lower }).status, 0);
  });

  it('tar of the whole tree is byte-identical (sha256) in the folder and in the shadow', async () => {
    const lower = makeProject();
    fs.linkSync(path.join(lower, 'README.md'), path.join(lower, 'README.hardlink'));
    const tarSum = (dir: string): string => sh('tar -c --sort=name --numeric-owner -f - . | sha256sum', dir).out.trim();
    const want = tarSum(lower);
    await withShadow(lower, (_s, mp) => {
      assert.strictEqual(tarSum(mp), want);
    });
  });
});
