// The write guard (native/core/write_guard.h): an agent cannot plant anything that git, run by
// the user in the shadow's mount outside any sandbox, would execute. The agent works as agents
// really do, in a confined run (runInShadow) with real git; then the user runs real git in the
// mount point (status, diff, commit) from this process, unconfined, with the agent's layer
// shown. Markers outside the folder show whether any planted command ran; the folder is hashed
// and watched throughout (withShadow's guard). The same plant with the guard off does run,
// which shows these tests can fail.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../src/common/errors';
import * as files from '../src/work/files';
import type { Shadow } from '../src/shadow';
import { agentScript, git } from './helpers/agent-git';
import { tempDir, withShadow, withWork } from './helpers/fixtures';

const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** A repository with a commit, and (with `husky`) core.hooksPath inside the folder, as husky sets it. */
function makeRepo(husky = false): string {
  const dir = tempDir('git-guard');
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'config', 'user.email', 'test@example.invalid');
  git(dir, 'config', 'user.name', 'test');
  fs.writeFileSync(path.join(dir, 'README.md'), '# project\n');
  if (husky) {
    fs.mkdirSync(path.join(dir, '.husky', '_'), { recursive: true });
    fs.writeFileSync(path.join(dir, '.husky', 'pre-commit'), 'npm test\n');
    fs.writeFileSync(path.join(dir, '.husky', '_', 'h'), '#!/bin/sh\n', { mode: 0o755 });
    git(dir, 'config', 'core.hooksPath', '.husky/_');
  }
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'base');
  return dir;
}

/** makeRepo, with a bare repository `fixtures/remote.git` holding its main branch (a test fixture). */
function makeRepoWithFixture(): string {
  const repo = makeRepo();
  const fixture = path.join(repo, 'fixtures', 'remote.git');
  git(repo, 'init', '-q', '--bare', fixture);
  git(repo, 'push', '-q', fixture, 'main');
  return repo;
}

/** sh text: runs `cmd`, prints "<label>: ok" if it succeeded, "<label>: refused" if not. */
const attempt = (label: string, cmd: string): string =>
  `if ( ${cmd} ) >/dev/null 2>&1; then echo ${q(`${label}: ok`)}; else echo ${q(`${label}: refused`)}; fi`;

/** A hook body that leaves a marker named `name` in `marks`. */
const hook = (marks: string, name: string): string => `#!/bin/sh\\ntouch ${path.join(marks, name)}\\n`;

/** Every plant an agent could try, as attempts; `marks` is where a planted command would leave its marker. */
function plants(marks: string): string[] {
  const mark = (n: string): string => `touch ${path.join(marks, n)}`;
  return [
    attempt('fsmonitor', `git config core.fsmonitor "${mark('fsmonitor')}; false"`),
    attempt('pager', `git config core.pager "${mark('pager')}; cat"`),
    attempt('hooksPath', 'git config core.hooksPath planted-hooks'),
    attempt('append to config', `printf '[core]\\n\\tfsmonitor = "${mark('append')}; false"\\n' >> .git/config`),
    attempt('config.worktree', `printf '[core]\\n\\tfsmonitor = "${mark('worktree')}; false"\\n' > .git/config.worktree`),
    attempt('hook', `printf '${hook(marks, 'hook')}' > .git/hooks/post-index-change && chmod +x .git/hooks/post-index-change`),
    attempt('sample hook renamed', 'mv .git/hooks/pre-commit.sample .git/hooks/pre-commit'),
    attempt('hooks directory replaced', 'mkdir planted && mv planted .git/hooks2 && mv .git/hooks .git/hooks-old'),
    attempt('hard link to config', 'ln .git/config cfg'),
    attempt('symlink over config', 'ln -sf ../planted.cfg .git/config'),
    attempt('.git renamed', 'mv .git .git-old'),
    attempt('.git file', 'mkdir -p sub && echo "gitdir: ../planted" > sub/.git'),
    attempt('nested git init', 'mkdir -p nested && git init -q nested'),
    attempt('repository moved into modules', 'mkdir -p m/hooks && mv m .git/modules'),
    attempt('config truncated', 'truncate -s 0 .git/config'),
    attempt('hooks chmod', 'chmod 777 .git/hooks'),
    // Links beneath .git, which the user's git follows when it writes there ($PWD is the
    // folder's real path in a run): a reflog appended to, COMMIT_EDITMSG rewritten, a
    // worktree pruned recursively, into the folder.
    attempt('link as a reflog', 'ln -sf "$PWD/README.md" .git/logs/HEAD'),
    attempt('link as COMMIT_EDITMSG', 'ln -sf "$PWD/README.md" .git/COMMIT_EDITMSG'),
    attempt('link as a worktree', 'mkdir -p .git/worktrees && ln -s "$PWD" .git/worktrees/x'),
    attempt('link moved into logs', 'mkdir -p dl && ln -s "$PWD/README.md" dl/main && mv dl .git/logs/refs/x'),
    attempt('link renamed over a ref', 'ln -s "$PWD/README.md" l && mv -f l .git/ORIG_HEAD'),
    attempt('FIFO as MERGE_MSG', 'mkfifo .git/MERGE_MSG'),
  ];
}

const agentRun = (shadow: Shadow, script: string): Promise<string> => agentScript(shadow, script);

/** The user's everyday git in the mount point, unconfined, with the agent's layer shown. */
function userGit(mp: string): void {
  for (const args of [
    ['status'],
    ['diff'],
    ['log', '-p', '-1'],
    ['commit', '-q', '--allow-empty', '-m', 'user'],
    ['checkout', '-q', '-b', 'user-topic'],
  ]) {
    // Failures are fine (a planted pager that fails, say); running a planted command is not.
    spawnSync('git', args, { cwd: mp, encoding: 'utf8', env: { ...process.env, GIT_PAGER: '', PAGER: '' } });
  }
  // A pager only runs on a terminal, or when asked for.
  spawnSync('git', ['-p', 'log', '-1'], { cwd: mp, encoding: 'utf8' });
}

/** The user's git in the mount with the agent's layer shown (in `dirs` too): no planted command may leave a marker in `marks`. */
async function userGitRunsNothing(shadow: Shadow, mp: string, marks: string, dirs: string[] = []): Promise<void> {
  await shadow.activate('agent');
  userGit(mp);
  for (const d of dirs) spawnSync('git', ['status'], { cwd: path.join(mp, d) });
  assert.deepStrictEqual(fs.readdirSync(marks), [], 'no planted command ran');
  await shadow.activate(null);
}

describe('write guard: git run in the mount obeys nothing an agent wrote', function () {
  this.timeout(120_000);

  it("refuses every plant of a confined agent, and the user's git in the mount runs none of it", async () => {
    const repo = makeRepo();
    const marks = tempDir('git-guard-marks');
    await withShadow(
      repo,
      async (shadow, mp) => {
        const out = await agentRun(
          shadow,
          [
            ...plants(marks),
            // The agent's everyday git still works beside the guard.
            'set -e',
            'echo agent >> README.md',
            'git add README.md',
            'git commit -q -m "agent: readme"',
            'git checkout -q -b feature',
            'echo wip >> README.md',
            'git stash -q',
            'git stash pop -q',
            'git commit -q -am "agent: wip"',
            'echo "everyday git: done"',
          ].join('\n'),
        );
        const lines = out.split('\n').filter((l) => l.includes(': '));
        assert.deepStrictEqual(
          lines.filter((l) => l.endsWith(': ok')),
          [],
          `every plant is refused:\n${out}`,
        );
        assert.strictEqual(lines.filter((l) => l.endsWith(': refused')).length, plants(marks).length, out);
        assert.match(out, /everyday git: done/);
        await shadow.activate('agent');
        assert.match(git(mp, 'log', '--format=%s', '-2'), /agent: wip\nagent: readme/);
        await userGitRunsNothing(shadow, mp, marks);
      },
      { layer: 'agent' },
    );
  });

  it("protects the folder's own hooks directory (core.hooksPath inside the folder, as husky sets it)", async () => {
    const repo = makeRepo(true);
    const marks = tempDir('git-guard-marks');
    await withShadow(
      repo,
      async (shadow, mp) => {
        const out = await agentRun(
          shadow,
          [
            attempt('husky hook', `printf '${hook(marks, 'husky')}' > .husky/_/post-index-change && chmod +x .husky/_/post-index-change`),
            attempt('husky helper', `printf '${hook(marks, 'helper')}' > .husky/_/h`),
            attempt('husky directory replaced', 'mv .husky/_ .husky/old'),
            attempt(
              'husky directory swapped from above',
              `mkdir -p h2/_ && printf '${hook(marks, 'swap')}' > h2/_/post-checkout && chmod +x h2/_/post-checkout && mv .husky .husky.old && mv h2 .husky`,
            ),
            // The project's own files beside it stay the agent's to edit.
            attempt('husky config edited', 'echo "npm run lint" >> .husky/pre-commit'),
          ].join('\n'),
        );
        assert.match(out, /husky hook: refused/);
        assert.match(out, /husky helper: refused/);
        assert.match(out, /husky directory replaced: refused/);
        assert.match(out, /husky directory swapped from above: refused/);
        assert.match(out, /husky config edited: ok/);
        await userGitRunsNothing(shadow, mp, marks);
      },
      { layer: 'agent' },
    );
  });

  it("refuses what the folder's git setup points at inside it, and bare repositories made by hand", async () => {
    // include.path to a tracked file, a hooks directory that is a link, a hook that is a link
    // into the project: each would run as the user were it the agent's to change.
    const repo = makeRepo();
    const marks = tempDir('git-guard-marks');
    fs.mkdirSync(path.join(repo, 'tools', 'hooks'), { recursive: true });
    fs.mkdirSync(path.join(repo, 'scripts'));
    fs.writeFileSync(path.join(repo, 'scripts', 'pre-commit.sh'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    fs.symlinkSync('../../scripts/pre-commit.sh', path.join(repo, 'tools', 'hooks', 'pre-commit'));
    fs.symlinkSync('tools/hooks', path.join(repo, '.githooks'));
    fs.writeFileSync(path.join(repo, '.gitconfig'), '[alias]\n\tst = status\n');
    git(repo, 'config', 'core.hooksPath', '.githooks');
    git(repo, 'config', 'include.path', '../.gitconfig');
    // Includes git does not read at mount: a file not there yet, one for another branch.
    git(repo, 'config', '--add', 'include.path', '../.gitconfig.local');
    git(repo, 'config', 'includeIf.onbranch:release/**.path', '../.gitconfig-release');
    const mark = (n: string): string => `touch ${path.join(marks, n)}`;
    const fsmonitor = (n: string): string => `printf '[core]\\n\\tfsmonitor = "${mark(n)}; false"\\n'`;
    await withShadow(
      repo,
      async (shadow, mp) => {
        assert.deepStrictEqual([...shadow.protectedPaths].sort(), [
          '/.git/config',
          '/.gitconfig',
          '/.gitconfig-release',
          '/.gitconfig.local',
          '/.githooks',
          '/scripts/pre-commit.sh',
          '/tools/hooks',
        ]);
        const out = await agentRun(
          shadow,
          [
            attempt('included config', `${fsmonitor('include')} >> .gitconfig`),
            attempt(
              'hook through the hooks link',
              `printf '${hook(marks, 'hooklink')}' > .githooks/post-commit && chmod +x .githooks/post-commit`,
            ),
            attempt('hooks link target', `printf '${hook(marks, 'hookdir')}' > tools/hooks/post-commit`),
            attempt('linked hook script', `printf '${hook(marks, 'script')}' > scripts/pre-commit.sh`),
            attempt(
              'linked hook script, its directory swapped',
              `mkdir s2 && printf '${hook(marks, 'swap')}' > s2/pre-commit.sh && chmod +x s2/pre-commit.sh && mv scripts scripts.old && mv s2 scripts`,
            ),
            attempt('include not there yet', `${fsmonitor('include-missing')} > .gitconfig.local`),
            attempt('include of another branch', `git checkout -q -b release/1 && ${fsmonitor('include-branch')} > .gitconfig-release`),
            attempt(
              'submodule named logs',
              `mkdir -p .git/modules/tools/logs && ${fsmonitor('submodule')} > .git/modules/tools/logs/config`,
            ),
          ].join('\n'),
        );
        assert.deepStrictEqual(
          out.split('\n').filter((l) => l.endsWith(': ok')),
          [],
          out,
        );
        assert.strictEqual(out.split('\n').filter((l) => l.endsWith(': refused')).length, 8, out);
        await userGitRunsNothing(shadow, mp, marks);
      },
      { layer: 'agent' },
    );
  });

  it('refuses the last name of a bare repository laid out by hand, in a directory or at the root behind a spoiled .git', async () => {
    const repo = makeRepo();
    const marks = tempDir('git-guard-marks');
    // A config git takes as a repository with a work tree, so that `git status` runs its fsmonitor.
    const config = (n: string): string =>
      `printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = .\\n\\tfsmonitor = "touch ${path.join(marks, n)}; false"\\n'`;
    await withShadow(
      repo,
      async (shadow, mp) => {
        const out = await agentRun(
          shadow,
          [
            attempt(
              'bare repository in src',
              `mkdir -p src/objects src/refs/heads && echo 'ref: refs/heads/main' > src/HEAD && ${config('bare-src')} > src/config`,
            ),
            // git takes the root itself for a repository when the real .git's HEAD is spoiled.
            attempt('.git/HEAD spoiled', 'echo spoiled > .git/HEAD'),
            attempt(
              'bare repository at the root',
              `${config('bare-root')} > config && mkdir -p objects refs/heads && echo 'ref: refs/heads/main' > HEAD`,
            ),
          ].join('\n'),
        );
        assert.match(out, /bare repository in src: refused/);
        assert.match(out, /\.git\/HEAD spoiled: ok/); // git's data, the agent's to write
        assert.match(out, /bare repository at the root: refused/);
        await userGitRunsNothing(shadow, mp, marks, ['src']);
      },
      { layer: 'agent' },
    );
  });

  it("refuses a bare repository without config, and the hooks and config of the folder's own; the user's git gc and tag there run nothing", async () => {
    // git 2.39 takes a directory with HEAD, objects/ and refs/ for a bare repository, config or
    // not, and runs its hooks/ on gc, fetch, tag and the rest: found by an adversarial review.
    const repo = makeRepoWithFixture();
    const marks = tempDir('git-guard-marks');
    const hookOf = (n: string): string => `printf '${hook(marks, n)}'`;
    await withShadow(
      repo,
      async (shadow, mp) => {
        const out = await agentRun(
          shadow,
          [
            // Hooks first, while the directory is no repository yet; each order of the three names.
            attempt(
              'bare repository without config',
              `mkdir -p src/hooks && ${hookOf('src')} > src/hooks/reference-transaction && chmod +x src/hooks/reference-transaction && echo 'ref: refs/heads/main' > src/HEAD && mkdir src/objects && mkdir -p src/refs/heads`,
            ),
            attempt(
              'bare repository without config, HEAD last',
              `mkdir -p lib/hooks lib/objects lib/refs && ${hookOf('lib')} > lib/hooks/reference-transaction && chmod +x lib/hooks/reference-transaction && echo 'ref: refs/heads/main' > lib/HEAD`,
            ),
            attempt(
              'bare repository, refs an executable file moved in',
              `mkdir -p app/hooks app/objects && ${hookOf('app')} > app/hooks/reference-transaction && chmod +x app/hooks/reference-transaction && echo 'ref: refs/heads/main' > app/HEAD && touch r && chmod +x r && mv r app/refs`,
            ),
            attempt(
              "hook in the folder's bare fixture",
              `${hookOf('fixture')} > fixtures/remote.git/hooks/reference-transaction && chmod +x fixtures/remote.git/hooks/reference-transaction`,
            ),
            attempt("the fixture's sample hook renamed", 'mv fixtures/remote.git/hooks/pre-push.sample fixtures/remote.git/hooks/pre-push'),
            attempt("the fixture's config", `printf '[core]\\n\\thooksPath = /tmp\\n' >> fixtures/remote.git/config`),
            attempt("alternates naming the folder's objects", 'echo "$PWD/.git/objects" > .git/objects/info/alternates'),
            attempt(
              'alternates moved in with their directory',
              'mkdir -p .git/logs/x/info && echo "$PWD/.git/objects" > .git/logs/x/info/alternates && mv .git/objects/info .git/logs/x/old && mv .git/logs/x/info .git/objects/info',
            ),
            attempt("the fixture's alternates", 'echo "$PWD/.git/objects" > fixtures/remote.git/objects/info/alternates'),
            // Links in the fixture, which the user's git follows as in a .git: a reflog line
            // appended to a folder file, the folder's own objects/info and branches rewritten.
            attempt(
              'link as a fixture reflog',
              'mkdir -p fixtures/remote.git/logs/refs/tags && ln -s "$PWD/README.md" fixtures/remote.git/logs/refs/tags/user-fixtures-remote-git',
            ),
            attempt(
              "link as the fixture's objects/info",
              'rm -rf fixtures/remote.git/objects/info && ln -s "$PWD/.git/objects/info" fixtures/remote.git/objects/info',
            ),
            attempt(
              "link as the fixture's refs/tags",
              'rm -rf fixtures/remote.git/refs/tags && ln -s "$PWD/.git/refs/heads" fixtures/remote.git/refs/tags',
            ),
            // What stays the agent's: its own repository's data, and git pushing to the fixture.
            'set -e',
            'git push -q fixtures/remote.git main:agent',
            'echo "everyday git: done"',
          ].join('\n'),
        );
        assert.deepStrictEqual(
          out.split('\n').filter((l) => l.endsWith(': ok')),
          [],
          out,
        );
        assert.strictEqual(out.split('\n').filter((l) => l.endsWith(': refused')).length, 12, out);
        assert.match(out, /everyday git: done/);
        await shadow.activate('agent');
        for (const d of ['src', 'lib', 'app', 'fixtures/remote.git']) {
          for (const args of [
            ['gc', '-q'],
            ['tag', `user-${d.replace(/\W/g, '-')}`, 'main'],
          ])
            spawnSync('git', args, { cwd: path.join(mp, d), encoding: 'utf8' });
        }
        assert.deepStrictEqual(fs.readdirSync(marks), [], 'no planted hook ran');
        // The user's tag went to the fixture, through the layer: the fixture is a repository.
        assert.match(git(path.join(mp, 'fixtures', 'remote.git'), 'tag'), /user-fixtures-remote-git/);
        await shadow.activate(null);
        await userGitRunsNothing(shadow, mp, marks, ['src', 'lib', 'app']);
      },
      { layer: 'agent' },
    );
  });

  it("reverting a fixture's HEAD beside hooks the agent wrote while it was gone is refused until they go back", async () => {
    // Found by a review: with HEAD deleted the directory is no repository, so hooks and config
    // may be written there; the agent's revert tool (or a rejected hunk) then brought HEAD back.
    const repo = makeRepoWithFixture();
    const marks = tempDir('git-guard-marks');
    await withShadow(
      repo,
      async (shadow, mp) => {
        const out = await agentRun(
          shadow,
          [
            'set -e',
            'rm fixtures/remote.git/HEAD',
            `printf '${hook(marks, 'revert')}' > fixtures/remote.git/hooks/reference-transaction`,
            'chmod +x fixtures/remote.git/hooks/reference-transaction',
            "printf '[core]\\n\\tpager = cat\\n' >> fixtures/remote.git/config",
            'echo planted',
          ].join('\n'),
        );
        assert.match(out, /planted/);
        const layer = shadow.layer('agent');
        await assert.rejects(
          layer.revert('fixtures/remote.git/HEAD'),
          (e: unknown) => e instanceof ShadowError && e.code === 'PATH_PROTECTED',
        );
        await shadow.activate('agent');
        for (const args of [
          ['gc', '-q'],
          ['tag', 'user-tag', 'main'],
        ])
          spawnSync('git', args, { cwd: path.join(mp, 'fixtures', 'remote.git') });
        assert.deepStrictEqual(fs.readdirSync(marks), [], 'no planted hook ran');
        await shadow.activate(null);
        // Once what the agent wrote there goes back, HEAD may too: the folder's fixture again.
        await layer.revert('fixtures/remote.git/hooks');
        await assert.rejects(
          layer.revert('fixtures/remote.git/HEAD'),
          (e: unknown) => e instanceof ShadowError && e.code === 'PATH_PROTECTED',
        );
        await layer.revert('fixtures/remote.git/config');
        await layer.revert('fixtures/remote.git/HEAD');
        await shadow.activate('agent');
        spawnSync('git', ['tag', 'user-tag2', 'main'], { cwd: path.join(mp, 'fixtures', 'remote.git') });
        assert.match(git(path.join(mp, 'fixtures', 'remote.git'), 'tag'), /user-tag2/);
        assert.deepStrictEqual(fs.readdirSync(marks), [], 'no planted hook ran');
        await shadow.activate(null);
      },
      { layer: 'agent' },
    );
  });

  it('a git directory inside the folder that is not called .git is guarded too (gitdir: .repo)', async () => {
    const dir = tempDir('git-guard');
    git(dir, 'init', '-q', '-b', 'main', '--separate-git-dir', path.join(dir, '.repo'));
    fs.writeFileSync(path.join(dir, '.git'), 'gitdir: .repo\n');
    fs.writeFileSync(path.join(dir, 'README.md'), '# project\n');
    const marks = tempDir('git-guard-marks');
    await withShadow(
      dir,
      async (shadow, mp) => {
        const out = await agentRun(
          shadow,
          [
            attempt('config', `git config core.fsmonitor "touch ${path.join(marks, 'fsmonitor')}; false"`),
            attempt('hook', `printf '${hook(marks, 'hook')}' > .repo/hooks/post-index-change && chmod +x .repo/hooks/post-index-change`),
            attempt('link', 'ln -sf "$PWD/README.md" .repo/COMMIT_EDITMSG'),
            attempt('alternates', 'mkdir -p .repo/objects/info && echo "$PWD/.repo/objects" > .repo/objects/info/alternates'),
            'git add README.md && git -c user.name=a -c user.email=a@example.invalid commit -q -m agent && echo "commit: done"',
          ].join('\n'),
        );
        assert.match(out, /config: refused/);
        assert.match(out, /hook: refused/);
        assert.match(out, /link: refused/);
        assert.match(out, /alternates: refused/);
        assert.match(out, /commit: done/);
        assert.ok(shadow.protectedPaths.includes('/.repo/objects/info/alternates'), [...shadow.protectedPaths].join(' '));
        await userGitRunsNothing(shadow, mp, marks);
      },
      { layer: 'agent' },
    );
  });

  it('the API refuses them too, with PATH_PROTECTED', async () => {
    const repo = makeRepo(true);
    await withShadow(repo, async (shadow) => {
      const layer = shadow.layer('agent');
      for (const p of ['.git/hooks/pre-commit', '.git/config', 'nested/.git/config', '.husky/_/pre-push']) {
        await assert.rejects(
          layer.write(p, '#!/bin/sh\n'),
          (e: unknown) => e instanceof ShadowError && e.code === 'PATH_PROTECTED' && /read-only in a shadow/.test(e.message),
          p,
        );
      }
      const isProtected = (e: unknown): boolean => e instanceof ShadowError && e.code === 'PATH_PROTECTED';
      await assert.rejects(layer.remove('.git/config'), isProtected);
      // The agent file tools (file.write, file.edit: what MCP and the daemon serve an agent).
      await assert.rejects(files.writeText(layer, '.git/config', '[core]\n\tfsmonitor = x\n'), isProtected);
      await assert.rejects(files.editText(layer, '.git/config', '[core]', '[core]\n\tfsmonitor = x'), isProtected);
      await layer.write('.husky/pre-commit', 'npm run lint\n');
      assert.deepStrictEqual(
        (await layer.changes()).map((c) => c.path),
        ['.husky/pre-commit'],
      );
    });
  });

  it('a checkpoint holding them is refused where they are protected, before the layer changes', async () => {
    const repo = makeRepo();
    await withWork(
      repo,
      async (w, shadow) => {
        const layer = await shadow.createLayer('agent');
        await layer.write('.git/config', '[core]\n\tfsmonitor = planted\n');
        await layer.write('README.md', 'agent\n');
        await w.checkpoint('agent', 'unguarded');
        // A link beneath .git (and nothing else git would obey).
        await layer.remove('.git/config');
        await layer.remove('.git/COMMIT_EDITMSG');
        await layer.symlink(path.join(repo, 'README.md'), '.git/COMMIT_EDITMSG');
        await w.checkpoint('agent', 'linked');
      },
      true,
      { protectGit: false },
    );
    await withWork(repo, async (w, shadow) => {
      const layer = await shadow.createLayer('agent');
      await layer.write('keep.txt', 'work since\n');
      await assert.rejects(
        w.restore('agent', 'unguarded'),
        (e: unknown) => e instanceof ShadowError && e.code === 'PATH_PROTECTED' && /\.git\/config.*nothing was changed/.test(e.message),
      );
      await assert.rejects(
        w.restore('agent', 'linked'),
        (e: unknown) =>
          e instanceof ShadowError && e.code === 'PATH_PROTECTED' && /\.git\/COMMIT_EDITMSG.*nothing was changed/.test(e.message),
      );
      assert.deepStrictEqual(
        (await layer.changes()).map((c) => c.path),
        ['keep.txt'],
        'the layer is as it was',
      );
    });
  });

  it("with protectGit false, a link an agent puts in .git is followed by the user's git commit in the mount, out of the shadow", async () => {
    const repo = makeRepo();
    // A file of the user's outside the folder (links into the folder itself are made relative,
    // so they stay in the shadow whatever protectGit says: see the link tests below).
    const notes = path.join(tempDir('git-guard-notes'), 'notes.txt');
    fs.writeFileSync(notes, "the user's notes\n");
    await withShadow(
      repo,
      async (shadow, mp) => {
        const out = await agentRun(shadow, attempt('link', `ln -sf ${q(notes)} .git/COMMIT_EDITMSG`));
        assert.match(out, /link: ok/);
        await shadow.activate('agent');
        spawnSync('git', ['commit', '-q', '--allow-empty', '-m', 'user'], { cwd: mp, encoding: 'utf8' });
        await shadow.activate(null);
        assert.strictEqual(
          fs.readFileSync(notes, 'utf8'),
          'user\n',
          "what the guard is for: git wrote the user's file through the agent's link",
        );
      },
      { layer: 'agent', protectGit: false },
    );
  });

  it("with protectGit false, an agent's bare repository without config runs its hook on the user's git gc there", async () => {
    const repo = makeRepo();
    const marks = tempDir('git-guard-marks');
    await withShadow(
      repo,
      async (shadow, mp) => {
        const out = await agentRun(
          shadow,
          attempt(
            'bare',
            `mkdir -p src/hooks src/objects src/refs && printf '${hook(marks, 'gc')}' > src/hooks/reference-transaction && chmod +x src/hooks/reference-transaction && echo 'ref: refs/heads/main' > src/HEAD`,
          ),
        );
        assert.match(out, /bare: ok/);
        await shadow.activate('agent');
        spawnSync('git', ['gc', '-q'], { cwd: path.join(mp, 'src'), encoding: 'utf8' });
        await shadow.activate(null);
        assert.deepStrictEqual(fs.readdirSync(marks), ['gc'], 'what the guard is for: the hook runs as the user');
      },
      { layer: 'agent', protectGit: false },
    );
  });

  it('with protectGit false a layer may write them, and a planted fsmonitor does run in the mount', async () => {
    const repo = makeRepo();
    const marks = tempDir('git-guard-marks');
    await withShadow(
      repo,
      async (shadow, mp) => {
        const out = await agentRun(
          shadow,
          attempt('fsmonitor', `git config core.fsmonitor "touch ${path.join(marks, 'fsmonitor')}; false"`),
        );
        assert.match(out, /fsmonitor: ok/);
        await shadow.activate('agent');
        spawnSync('git', ['status'], { cwd: mp });
        assert.deepStrictEqual(fs.readdirSync(marks), ['fsmonitor'], 'what the guard is for: the plant runs as the user');
        await shadow.activate(null);
      },
      { layer: 'agent', protectGit: false },
    );
  });
});

// native/core/link_targets.cc: a confined agent sees the shadow at the folder's real path, the
// user at the mount point, so a link "to the folder" (by its real path, or climbing above the
// root) looked right to the agent and led the user's programs in the mount into the folder.
// Every link an agent makes now leads to the same place for both, or is refused.
/** The user's `git push fixtures/remote.git` in the mount, the agent's layer shown: it succeeds, and the folder's .git gets no branch. */
async function userPushesToFixture(shadow: Shadow, mp: string, repo: string): Promise<void> {
  await shadow.activate('agent');
  const push = spawnSync('git', ['push', '-q', 'fixtures/remote.git', 'HEAD:refs/heads/user-push'], { cwd: mp, encoding: 'utf8' });
  await shadow.activate(null);
  assert.strictEqual(push.status, 0, push.stderr);
  assert.throws(() => git(repo, 'rev-parse', '--verify', '-q', 'refs/heads/user-push'), "the folder's .git has no such branch");
}

describe("links an agent makes lead the user's programs where they lead the agent", function () {
  this.timeout(120_000);

  it("a fixture swapped for a link to the folder's .git: the user's git push in the mount writes the shadow, never the folder", async () => {
    const repo = makeRepoWithFixture();
    await withShadow(
      repo,
      async (shadow, mp) => {
        // What the review did: looks right to the agent, whose $PWD is the folder's real path.
        const out = await agentRun(
          shadow,
          'mv fixtures/remote.git fixtures/old.git && ln -s "$PWD/.git" fixtures/remote.git && readlink fixtures/remote.git && git -C fixtures/remote.git rev-parse --is-inside-git-dir',
        );
        await userPushesToFixture(shadow, mp, repo);
        await shadow.activate('agent');
        assert.strictEqual(
          git(mp, 'rev-parse', 'refs/heads/user-push'),
          git(mp, 'rev-parse', 'HEAD'),
          "the push landed in the shadow's .git",
        );
        await shadow.activate(null);
        assert.strictEqual(out, '../.git\ntrue\n', 'stored relative, and still the repository to the agent');
        assert.strictEqual(await shadow.layer('agent').readlink('fixtures/remote.git'), '../.git');
      },
      { layer: 'agent' },
    );
  });

  it("a fixture swapped for a gitdir: file naming the folder's .git (or anything outside the shadow) is refused", async () => {
    const repo = makeRepoWithFixture();
    await withShadow(
      repo,
      async (shadow, mp) => {
        const out = await agentRun(
          shadow,
          [
            'mv fixtures/remote.git fixtures/old.git',
            attempt('gitdir to the folder', `printf 'gitdir: %s/.git\\n' "$PWD" > fixtures/remote.git`),
            attempt('gitdir climbing', "printf 'gitdir: ../.git\\n' > fixtures/remote.git"),
            attempt('gitdir in two writes', "printf 'gitd' > fixtures/r2 && printf 'ir: /x' >> fixtures/r2"),
            attempt('gitdir below', "printf 'gitdir: old.git\\n' > fixtures/remote.git"),
          ].join(' && '),
        );
        assert.deepStrictEqual(
          out.trim().split('\n'),
          ['gitdir to the folder: refused', 'gitdir climbing: refused', 'gitdir in two writes: refused', 'gitdir below: ok'],
          out,
        );
        await userPushesToFixture(shadow, mp, repo);
        await assert.rejects(
          shadow.layer('agent').write('fixtures/api.git', `gitdir: ${repo}/.git\n`),
          (e: ShadowError) => e.code === 'PATH_PROTECTED',
        );
      },
      { layer: 'agent' },
    );
  });

  it('links climbing above the root become the place the agent reached; links that could lead out later are refused', async () => {
    const repo = makeRepo();
    const outside = tempDir('git-guard-outside');
    fs.writeFileSync(path.join(outside, 'f'), 'outside\n');
    // A file of the folder that also has a name outside it, as pnpm's store links packages.
    fs.writeFileSync(path.join(outside, 'store.js'), 'module.exports = 1;\n');
    fs.linkSync(path.join(outside, 'store.js'), path.join(repo, 'vendor.js'));
    await withShadow(
      repo,
      async (shadow, mp) => {
        // Climbing exactly as deep as the user's mount point, then down the folder's real path:
        // from the mount that would be the folder itself.
        const climb = '../'.repeat(mp.split('/').length - 1) + repo.slice(1) + '/README.md';
        const toOutside = path.relative(repo, path.join(outside, 'f'));
        const out = await agentRun(
          shadow,
          [
            `ln -s ${q(climb)} tuned`,
            `ln -s ${q(toOutside)} beside`,
            'mkdir -p a/b && ln -s ../../README.md a/b/readme && mv a/b/readme moved-up',
            attempt('parent', 'ln -s .. up'),
            attempt('slash', 'ln -s / slash'),
            attempt('dot-dot after a name', 'ln -s a/../README.md mid'),
            attempt('proc', 'ln -s /proc/self/cwd cwd'),
            attempt("the folder's file by another name", `ln -s ${q(path.join(outside, 'store.js'))} store`),
            'for l in tuned beside moved-up; do echo "$l $(readlink $l) $(cat $l 2>/dev/null | head -c 20)"; done',
          ].join(' && '),
        );
        const lines = out.trim().split('\n');
        assert.deepStrictEqual(
          lines.slice(0, 5),
          [
            'parent: refused',
            'slash: refused',
            'dot-dot after a name: refused',
            'proc: refused',
            "the folder's file by another name: refused",
          ],
          out,
        );
        const linkOf = (name: string): string[] => (lines.find((l) => l.startsWith(`${name} `)) ?? '').split(' ');
        assert.deepStrictEqual(linkOf('tuned').slice(0, 3), ['tuned', 'README.md', '#'], `tuned leads to the shadow's README.md: ${out}`);
        assert.strictEqual(linkOf('beside')[1], path.join(outside, 'f'), out);
        assert.ok(!linkOf('moved-up')[1].startsWith('../'), `moved up, the link was copied as a new one: ${out}`);
        // The user's programs in the mount: appending through every link the agent left.
        await shadow.activate('agent');
        for (const l of ['tuned', 'moved-up']) {
          assert.strictEqual(fs.readlinkSync(path.join(mp, l)), linkOf(l)[1]);
          try {
            fs.appendFileSync(path.join(mp, l), 'user\n');
          } catch {
            // a link to nowhere: nothing written anywhere
          }
        }
        await shadow.activate(null);
        await assert.rejects(
          shadow.layer('agent').symlink('/', 'api-slash'),
          (e: ShadowError) => e.code === 'PATH_PROTECTED' && /above the folder/.test(e.message),
        );
        await assert.rejects(
          shadow.layer('agent').symlink(path.join(outside, 'store.js'), 'api-store'),
          (e: ShadowError) => e.code === 'PATH_PROTECTED',
        );
        await shadow.layer('agent').symlink(path.join(repo, '.git', 'HEAD'), 'a/head');
        assert.strictEqual(await shadow.layer('agent').readlink('a/head'), '../.git/HEAD');
        // A link made in the mount to a path in the mount (`ln -s $PWD/build/x .` there) is the
        // shadow for everyone: kept as written (another FUSE file system would be refused).
        await shadow.activate('agent');
        fs.symlinkSync(path.join(mp, 'README.md'), path.join(mp, 'mine'));
        assert.strictEqual(fs.readlinkSync(path.join(mp, 'mine')), path.join(mp, 'README.md'));
        assert.match(
          fs.readFileSync(path.join(mp, 'mine'), 'utf8'),
          /^# project\nuser\n/,
          "the shadow's README.md, with the append made through 'tuned'",
        );
        await shadow.activate(null);
      },
      { layer: 'agent' },
    );
  });
});
