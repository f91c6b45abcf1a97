// Repository metadata never leaves a layer as files, and an agent's commits come back as a branch:
// real mounts, real git run inside the shadow (status, add, commit, branch, checkout -b, stash,
// rebase, amend). diff, patch and apply leave .git (at any depth) and ignored files out, and say
// so; every patch applies with git apply; apply and apply --branch leave the user's HEAD, index,
// refs and (for a branch) work tree exactly as they were; the agent's hostile git configuration
// runs nothing when its commits are fetched.
import * as assert from 'assert';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../src/common/errors';
import { runInShadow } from '../src/run/runner';
import type { Shadow } from '../src/shadow';
import { agentScript, git } from './helpers/agent-git';
import { tempDir, withWork } from './helpers/fixtures';

function makeRepo(): string {
  const dir = tempDir('git-integrity');
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'config', 'user.email', 'test@example.invalid');
  git(dir, 'config', 'user.name', 'test');
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(path.join(dir, 'README.md'), '# project\n');
  fs.writeFileSync(path.join(dir, 'src', 'app.js'), 'module.exports = 1;\n');
  fs.writeFileSync(path.join(dir, '.gitignore'), 'node_modules/\n*.log\nbuild/\n');
  fs.writeFileSync(path.join(dir, 'tracked.log'), 'tracked although it matches *.log\n');
  git(dir, 'add', '-A');
  git(dir, 'add', '-f', 'tracked.log');
  git(dir, 'commit', '-q', '-m', 'base');
  git(dir, 'branch', 'user-topic');
  // The user's own ignored file, which the agent deletes.
  fs.writeFileSync(path.join(dir, 'debug.log'), 'the user keeps this\n');
  return dir;
}

/** What the agent does in its shadow: every everyday git command, ending on a rebased feature branch. */
const AGENT_GIT = [
  'set -e',
  'echo "agent line" >> README.md',
  'git status --short > /dev/null',
  'git add README.md',
  'git commit -q -m "agent: readme"',
  'git branch side',
  'git checkout -q -b feature',
  'echo feature > feature.txt',
  'git add feature.txt',
  'git commit -q -m "agent: feature"',
  'echo wip >> src/app.js',
  'git stash -q',
  'git stash pop -q',
  'git commit -q -am "agent: wip"',
  'git commit -q --amend -m "agent: wip, amended"',
  'git checkout -q side',
  'echo side > side.txt',
  'git add side.txt',
  'git commit -q -m "agent: side"',
  'git checkout -q feature',
  'git rebase -q side',
  'echo loose > loose.txt',
].join('\n');

async function agentGit(shadow: Shadow, script: string, agent = 'agent'): Promise<void> {
  await agentScript(shadow, script, agent);
}

/** git inside the shadow, as the agent sees its repository. */
async function agentOut(shadow: Shadow, ...args: string[]): Promise<string> {
  const r = await runInShadow(shadow, { agent: 'agent', argv: ['git', ...args] });
  assert.strictEqual(r.exitCode, 0, r.stderr);
  return r.stdout;
}

const sha = (b: Buffer | string): string => crypto.createHash('sha256').update(b).digest('hex');

/** Every file under `dir` (relative path → type and content hash), `skip` left out. */
function tree(dir: string, skip: (rel: string) => boolean = () => false): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(path.join(dir, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      if (skip(r)) continue;
      const st = fs.lstatSync(path.join(dir, r));
      if (st.isDirectory()) walk(r);
      else if (st.isSymbolicLink()) out.set(r, `link:${fs.readlinkSync(path.join(dir, r))}`);
      else out.set(r, `file:${st.mode & 0o111 ? 'x' : '-'}:${sha(fs.readFileSync(path.join(dir, r)))}`);
    }
  };
  walk('');
  return out;
}

const workTree = (dir: string): Map<string, string> => tree(dir, (r) => r === '.git');

/** The user's repository state that nothing may change: HEAD, index, refs, and every file of .git but new objects. */
function repoState(dir: string): { head: string; index: string; refs: string; files: Map<string, string> } {
  return {
    head: sha(fs.readFileSync(path.join(dir, '.git', 'HEAD'))),
    index: sha(fs.readFileSync(path.join(dir, '.git', 'index'))),
    refs: git(dir, 'show-ref'),
    files: tree(path.join(dir, '.git')),
  };
}

function isCode(code: string): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof ShadowError, String(err));
    assert.strictEqual(err.code, code, err.message);
    return true;
  };
}

describe('git integrity: .git never leaves a layer as files; agent commits come back as a branch', function () {
  this.timeout(120_000);

  it('after status, add, commit, branch, checkout -b, stash, rebase and amend in the shadow, diff and patch leave .git out and git apply takes the patch', async () => {
    const repo = makeRepo();
    const clone = tempDir('git-integrity-clone');
    git(clone, 'clone', '-q', '--no-hardlinks', repo, '.');
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await agentGit(shadow, AGENT_GIT);
        for (const out of [await w.patch('agent'), await w.diff('agent')]) {
          assert.deepStrictEqual(
            out.files.filter((f) => f.path.split('/').includes('.git') || f.oldPath?.split('/').includes('.git')),
            [],
            'no .git path in a diff or patch',
          );
          assert.ok(
            !/(^|\/)\.git\//m.test(
              out.text
                .split('\n')
                .filter((l) => l.startsWith('diff --git'))
                .join('\n'),
            ),
          );
          assert.ok(out.excluded.some((e) => e.path === '.git/index' && e.reason === 'repository-metadata'));
        }
        const patch = await w.patch('agent');
        assert.deepStrictEqual(patch.files.map((f) => f.path).sort(), ['README.md', 'feature.txt', 'loose.txt', 'side.txt', 'src/app.js']);
        const file = path.join(tempDir('git-integrity-patch'), 'agent.patch');
        fs.writeFileSync(file, patch.text);
        git(clone, 'apply', '--index', file);
        await shadow.activate('agent');
        const agentTree = workTree(mp);
        agentTree.delete('debug.log'); // the user's ignored file, which a clone does not have
        assert.deepStrictEqual(workTree(clone), agentTree, "the patch reproduces the agent's work tree");
        const changes = await w.changes('agent');
        assert.ok(
          changes.some((c) => c.path.startsWith('.git/') && c.excluded === 'repository-metadata'),
          `the layer's .git changes are listed, marked: ${JSON.stringify(changes.map((c) => [c.path, c.excluded]))}`,
        );
        assert.ok(!changes.some((c) => !c.path.startsWith('.git') && c.excluded === 'repository-metadata'));
      },
      true,
    );
  });

  it("apply writes the agent's files but none of its repository: the user's HEAD, index, refs and .git stay exactly as they were", async () => {
    const repo = makeRepo();
    const before = repoState(repo);
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await agentGit(shadow, AGENT_GIT);
        // A nested repository's .git (a submodule-like checkout) and a worktree's .git file are left out too.
        await agentGit(
          shadow,
          'git init -q vendor/lib && echo lib > vendor/lib/lib.js && printf "gitdir: /elsewhere\\n" > wt.git && mkdir -p other && printf "gitdir: /elsewhere\\n" > other/.git',
        );
        await shadow.activate('agent');
        const expected = workTree(mp);
        await shadow.activate(null);
        const r = await w.apply('agent');
        assert.deepStrictEqual(r.conflicts, [], JSON.stringify(r.conflicts));
        assert.deepStrictEqual(
          r.applied.filter((a) => a.path.split('/').includes('.git')),
          [],
          'nothing under .git is applied',
        );
        assert.ok(r.excluded.some((e) => e.path === 'other/.git' && e.reason === 'repository-metadata'));
        assert.ok(r.excluded.some((e) => e.path.startsWith('vendor/lib/.git/')));
        const after = repoState(repo);
        assert.strictEqual(after.head, before.head, '.git/HEAD');
        assert.strictEqual(after.index, before.index, '.git/index');
        assert.strictEqual(after.refs, before.refs, 'refs');
        assert.deepStrictEqual(after.files, before.files, 'every file of .git');
        assert.ok(!fs.existsSync(path.join(repo, 'vendor', 'lib', '.git')));
        assert.ok(!fs.existsSync(path.join(repo, 'other', '.git')));
        // The work tree is the agent's, its repositories' .git left out.
        assert.deepStrictEqual(workTree(repo), new Map([...expected].filter(([p]) => !p.split('/').includes('.git'))));
      },
      false, // apply writes the folder: that is what this test checks
      // A layer holding a nested repository and .git files is what apply must leave out; the
      // shadow's write guard (test/git-guard.test.ts) would refuse to make them at all.
      { protectGit: false },
    );
  });

  it('one changed path git refuses to check (beyond a link of the folder) leaves the other ignored files out still', async () => {
    // git check-ignore gives up on the whole list for one such path (exit 128); that made
    // nothing count as ignored, so the user's ignored file was applied over.
    const repo = makeRepo();
    fs.mkdirSync(path.join(repo, 'real'));
    fs.writeFileSync(path.join(repo, 'real', 'r.txt'), 'r\n');
    fs.symlinkSync('real', path.join(repo, 'lnk'));
    git(repo, 'add', 'real', 'lnk');
    git(repo, 'commit', '-q', '-m', 'link');
    await withWork(
      repo,
      async (w, shadow) => {
        await agentGit(
          shadow,
          'echo junk > debug.log && echo l > run.log && rm lnk && mkdir lnk && echo x > lnk/x && echo e >> src/app.js',
        );
        const diff = await w.diff('agent');
        assert.deepStrictEqual(diff.excluded.map((e) => `${e.reason} ${e.path}`).sort(), ['ignored debug.log', 'ignored run.log']);
        const r = await w.apply('agent', { allowTypeChanges: true });
        assert.ok(!r.applied.some((a) => a.path === 'debug.log' || a.path === 'run.log'), JSON.stringify(r.applied));
        assert.strictEqual(fs.readFileSync(path.join(repo, 'debug.log'), 'utf8'), 'the user keeps this\n');
        assert.ok(!fs.existsSync(path.join(repo, 'run.log')));
      },
      false,
    );
  });

  it('files git ignores are left out of diff, patch and apply unless asked for, and listed marked', async () => {
    const repo = makeRepo();
    await withWork(
      repo,
      async (w, shadow) => {
        await agentGit(
          shadow,
          'mkdir -p node_modules/.cache build && echo c > node_modules/.cache/x && echo b > build/out.js && echo l > run.log && rm debug.log && echo t >> tracked.log && echo e >> src/app.js',
        );
        const diff = await w.diff('agent');
        assert.deepStrictEqual(diff.files.map((f) => f.path).sort(), ['src/app.js', 'tracked.log']);
        assert.deepStrictEqual(diff.excluded.map((e) => `${e.reason} ${e.path}`).sort(), [
          'ignored build/out.js',
          'ignored debug.log',
          'ignored node_modules/.cache/x',
          'ignored run.log',
        ]);
        const changes = await w.changes('agent');
        const mark = new Map(changes.map((c) => [c.path, c.excluded]));
        assert.strictEqual(mark.get('node_modules'), 'ignored');
        assert.strictEqual(mark.get('run.log'), 'ignored');
        assert.strictEqual(mark.get('debug.log'), 'ignored');
        assert.strictEqual(mark.get('tracked.log'), undefined, 'a tracked file is never ignored');
        assert.strictEqual(mark.get('src/app.js'), undefined);
        const all = await w.patch('agent', undefined, { includeIgnored: true });
        assert.deepStrictEqual(all.files.map((f) => f.path).sort(), [
          'build/out.js',
          'debug.log',
          'node_modules/.cache/x',
          'run.log',
          'src/app.js',
          'tracked.log',
        ]);
        assert.deepStrictEqual(all.excluded, []);
        const dry = await w.apply('agent', { dryRun: true });
        assert.deepStrictEqual(dry.applied.map((a) => a.path).sort(), ['src/app.js', 'tracked.log']);
        const r = await w.apply('agent');
        assert.deepStrictEqual(r.applied.map((a) => a.path).sort(), ['src/app.js', 'tracked.log']);
        assert.strictEqual(fs.readFileSync(path.join(repo, 'debug.log'), 'utf8'), 'the user keeps this\n');
        assert.ok(!fs.existsSync(path.join(repo, 'node_modules')), 'no ignored directory is made in the folder');
        assert.ok(!fs.existsSync(path.join(repo, 'build')));
        const rest = await w.apply('agent', { includeIgnored: true });
        assert.deepStrictEqual(r.excluded.length, 4);
        assert.ok(rest.applied.some((a) => a.path === 'run.log'));
        assert.ok(!fs.existsSync(path.join(repo, 'debug.log')));
      },
      false,
    );
  });

  it("apply --branch brings the agent's commits in as a new branch and writes nothing else; an existing branch is refused unless forced", async () => {
    const repo = makeRepo();
    const before = repoState(repo);
    const worktree = workTree(repo);
    const objectsBefore = tree(path.join(repo, '.git', 'objects'));
    await withWork(
      repo,
      async (w, shadow) => {
        await agentGit(shadow, AGENT_GIT);
        const agentHead = (await agentOut(shadow, 'rev-parse', 'HEAD')).trim();
        const agentLog = await agentOut(shadow, 'log', '--format=%H %s', 'HEAD');
        const dry = await w.apply('agent', { branch: 'agent-work', dryRun: true });
        assert.deepStrictEqual(dry.branch, { name: 'agent-work', commit: agentHead, previous: null });
        assert.deepStrictEqual(repoState(repo), before, 'a dry run writes nothing');
        const r = await w.apply('agent', { branch: 'agent-work' });
        assert.deepStrictEqual(r.branch, { name: 'agent-work', commit: agentHead, previous: null });
        assert.deepStrictEqual(r.applied, []);
        assert.strictEqual(git(repo, 'rev-parse', 'refs/heads/agent-work').trim(), agentHead);
        assert.strictEqual(git(repo, 'log', '--format=%H %s', 'agent-work'), agentLog, "the agent's history, commit for commit");
        git(repo, 'fsck', '--no-progress', '--connectivity-only');
        const after = repoState(repo);
        assert.strictEqual(after.head, before.head, '.git/HEAD');
        assert.strictEqual(after.index, before.index, '.git/index');
        assert.strictEqual(
          after.refs,
          (before.refs + `${agentHead} refs/heads/agent-work\n`)
            .split('\n')
            .filter(Boolean)
            .sort((a, b) => (a.split(' ')[1] < b.split(' ')[1] ? -1 : 1))
            .join('\n') + '\n',
          'only the new ref',
        );
        const changed = [...after.files]
          .filter(([p, h]) => before.files.get(p) !== h)
          .map(([p]) => p)
          .filter((p) => !p.startsWith('objects/'));
        assert.deepStrictEqual(changed, ['refs/heads/agent-work'], 'besides new objects, only the new ref is written');
        assert.deepStrictEqual(
          [...before.files.keys()].filter((p) => !after.files.has(p)),
          [],
          'nothing of .git is removed',
        );
        const objectsAfter = tree(path.join(repo, '.git', 'objects'));
        for (const [p, h] of objectsBefore) assert.strictEqual(objectsAfter.get(p), h, `object file ${p} unchanged`);
        assert.deepStrictEqual(workTree(repo), worktree, 'the work tree is untouched');
        // Again: refused, nothing changed; forced: replaced.
        const state = repoState(repo);
        await assert.rejects(w.apply('agent', { branch: 'agent-work' }), isCode('BRANCH_EXISTS'));
        await assert.rejects(w.apply('agent', { branch: 'user-topic' }), isCode('BRANCH_EXISTS'));
        assert.deepStrictEqual(repoState(repo), state);
        const base = git(repo, 'rev-parse', 'user-topic').trim();
        const forced = await w.apply('agent', { branch: 'user-topic', force: true });
        assert.deepStrictEqual(forced.branch, { name: 'user-topic', commit: agentHead, previous: base });
        // The branch checked out in the folder is never moved, even when forced.
        await assert.rejects(w.apply('agent', { branch: 'main', force: true }), isCode('BRANCH_EXISTS'));
        assert.strictEqual(repoState(repo).head, before.head);
        await assert.rejects(w.apply('agent', { branch: '-bad..name' }), isCode('INVALID_ARGUMENT'));
      },
      false, // the folder's .git gets new objects and a ref
    );
  });

  it("the agent's hostile git configuration and hooks run nothing when its commits are fetched", async () => {
    const repo = makeRepo();
    const marks = tempDir('git-integrity-marks');
    await withWork(
      repo,
      async (w, shadow) => {
        const touch = (name: string): string => `touch ${path.join(marks, name)}`;
        const hooks = [
          'pre-upload-pack',
          'post-upload-pack',
          'reference-transaction',
          'post-checkout',
          'pre-receive',
          'update',
          'post-update',
        ];
        await agentGit(
          shadow,
          [
            'set -e',
            'echo change >> README.md',
            'git commit -q -am "agent: change"',
            `git config core.fsmonitor "${touch('fsmonitor')}; false"`,
            `git config uploadpack.packObjectsHook "${touch('packObjectsHook')}; git"`,
            `git config core.alternateRefsCommand "${touch('alternateRefsCommand')}; true"`,
            `git config core.sshCommand "${touch('sshCommand')}; false"`,
            `git config core.pager "${touch('pager')}; cat"`,
            `git config filter.evil.smudge "${touch('smudge')}; cat"`,
            `git config filter.evil.clean "${touch('clean')}; cat"`,
            `git config include.path /dev/null`,
            'git config core.hooksPath .git/hooks',
            'echo "* filter=evil" > .gitattributes',
            ...hooks.map((h) => `printf '#!/bin/sh\\n${touch(`hook-${h}`)}\\n' > .git/hooks/${h} && chmod +x .git/hooks/${h}`),
          ].join('\n'),
        );
        // Sanity: the agent's settings are in effect inside its own repository.
        assert.match(await agentOut(shadow, 'config', 'uploadpack.packObjectsHook'), /packObjectsHook/);
        const r = await w.apply('agent', { branch: 'from-agent' });
        assert.ok(r.branch);
        assert.deepStrictEqual(fs.readdirSync(marks), [], 'no program of the agent ran');
        assert.match(git(repo, 'log', '-1', '--format=%s', 'from-agent'), /agent: change/);
      },
      false,
      // What a layer could hold were the write guard off (it refuses these writes by default,
      // test/git-guard.test.ts): apply --branch must still run none of it.
      { protectGit: false },
    );
  });
});
