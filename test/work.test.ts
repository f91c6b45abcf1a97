// Getting work out of a layer, on real mounts with real git: a patch that `git apply` reproduces
// byte for byte in a clean checkout (binary files, deletions, renames, modes, symlinks, new
// directories); apply-back that writes only when asked, atomically, and reports the user's own
// edits as conflicts with a three-way merge; checkpoints that restore a layer exactly.
import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { FolderGuard, repoRoot, tempDir, withWork } from './helpers/fixtures';

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** A git repository with text, binary, executable, symlink and nested files, committed. */
function makeRepo(): string {
  const dir = tempDir('work-repo');
  try {
    git(dir, 'init', '-q', '-b', 'main');
  } catch (err) {
    throw new Error(`these tests need git on PATH: ${(err as Error).message}`);
  }
  git(dir, 'config', 'user.email', 'test@example.invalid');
  git(dir, 'config', 'user.name', 'test');
  fs.mkdirSync(path.join(dir, 'src', 'lib'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'old-dir'));
  fs.writeFileSync(path.join(dir, 'README.md'), '# project\n\nline three\nline four\nline five\n');
  fs.writeFileSync(path.join(dir, 'src', 'main.js'), Array.from({ length: 40 }, (_, i) => `const v${i} = ${i};`).join('\n') + '\n');
  fs.writeFileSync(path.join(dir, 'src', 'lib', 'util.js'), 'module.exports = {};\n');
  fs.writeFileSync(path.join(dir, 'moved.txt'), 'this file is renamed by the agent\nand only that\n');
  fs.writeFileSync(path.join(dir, 'image.bin'), Buffer.from([0, 1, 2, 3, 255, 254, 0, 10, 13, 0]));
  fs.writeFileSync(path.join(dir, 'run.sh'), '#!/bin/sh\necho run\n', { mode: 0o755 });
  fs.writeFileSync(path.join(dir, 'tool.sh'), '#!/bin/sh\necho tool\n', { mode: 0o644 });
  fs.writeFileSync(path.join(dir, 'old-dir', 'a.txt'), 'a\n');
  fs.writeFileSync(path.join(dir, 'old-dir', 'b.txt'), 'b\n');
  fs.writeFileSync(path.join(dir, 'no-newline.txt'), 'no newline at the end');
  fs.symlinkSync('README.md', path.join(dir, 'link'));
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'base');
  return dir;
}

/** Every path under `dir` (not .git) with its type, mode and content/target. */
function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(path.join(dir, rel)).sort()) {
      if (!rel && name === '.git') continue;
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(path.join(dir, r));
      if (st.isDirectory()) walk(r);
      else if (st.isSymbolicLink()) out.set(r, `link:${fs.readlinkSync(path.join(dir, r))}`);
      else out.set(r, `file:${st.mode & 0o111 ? 'x' : '-'}:${fs.readFileSync(path.join(dir, r)).toString('base64')}`);
    }
  };
  walk('');
  return out;
}

/** The agent's work, done through the mount as a program would. */
function agentWork(mp: string): void {
  fs.appendFileSync(path.join(mp, 'README.md'), 'added by the agent\n');
  const main = fs.readFileSync(path.join(mp, 'src', 'main.js'), 'utf8').replace('const v20 = 20;', 'const v20 = "twenty";');
  fs.writeFileSync(path.join(mp, 'src', 'main.js'), main);
  fs.renameSync(path.join(mp, 'moved.txt'), path.join(mp, 'src', 'moved.txt'));
  fs.writeFileSync(path.join(mp, 'image.bin'), Buffer.from([0, 9, 9, 9, 0, 1, 2, 3, 255]));
  fs.writeFileSync(path.join(mp, 'new.bin'), Buffer.from([0, 0, 0, 7]));
  fs.chmodSync(path.join(mp, 'run.sh'), 0o644);
  fs.chmodSync(path.join(mp, 'tool.sh'), 0o755);
  fs.rmSync(path.join(mp, 'old-dir'), { recursive: true });
  fs.mkdirSync(path.join(mp, 'new-dir', 'deep'), { recursive: true });
  fs.writeFileSync(path.join(mp, 'new-dir', 'deep', 'file.txt'), 'new\n');
  fs.writeFileSync(path.join(mp, 'empty.txt'), '');
  fs.unlinkSync(path.join(mp, 'link'));
  fs.symlinkSync('src/main.js', path.join(mp, 'link'));
  fs.writeFileSync(path.join(mp, 'no-newline.txt'), 'still no newline, but changed');
}

describe('work: diffs, git patches, apply and checkpoints', function () {
  this.timeout(60_000);

  it("the patch of a layer applies with git apply --index in a clean clone and reproduces the agent's tree byte for byte", async () => {
    const repo = makeRepo();
    await withWork(repo, async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      agentWork(mp);
      const expected = snapshot(mp);
      const patch = await w.patch('agent');
      const byPath = new Map(patch.files.map((f) => [f.path, f]));
      assert.strictEqual(byPath.get('src/moved.txt')?.status, 'renamed', JSON.stringify(patch.files));
      assert.strictEqual(byPath.get('src/moved.txt')?.oldPath, 'moved.txt');
      assert.ok(byPath.get('image.bin')?.binary);
      assert.strictEqual(byPath.get('old-dir/a.txt')?.status, 'deleted');
      const clone = tempDir('work-clone');
      // --no-hardlinks: git freshens (touches) existing objects when it writes them again, which
      // through hard links would touch the folder's own .git.
      git(clone, 'clone', '-q', '--no-hardlinks', repo, '.');
      const file = path.join(tempDir('work-patch'), 'agent.patch');
      fs.writeFileSync(file, patch.text);
      git(clone, 'apply', '--index', file);
      assert.deepStrictEqual(snapshot(clone), expected);
      // The plain diff names binaries and shows the text hunks.
      const diff = await w.diff('agent');
      assert.match(diff.text, /Binary files a\/image\.bin and b\/image\.bin differ/);
      assert.match(diff.text, /-const v20 = 20;\n\+const v20 = "twenty";/);
      // Only some paths.
      const part = await w.patch('agent', ['src']);
      assert.deepStrictEqual(part.files.map((f) => f.path).sort(), ['src/main.js', 'src/moved.txt']);
    });
  });

  it('on a real project (this repository at HEAD), a patch of edits made by real tools applies byte for byte', async () => {
    const repo = tempDir('work-real');
    git(repo, 'clone', '-q', '--no-hardlinks', '--depth', '1', `file://${repoRoot}`, '.');
    await withWork(repo, async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      // sed rewrites every TypeScript file under src/protocol in place, git mv-like moves, a
      // deletion and a new binary file: the kinds of edits an agent's tools make.
      execFileSync(
        'sh',
        [
          '-c',
          "sed -i 's/shadowfs/SHADOWFS/g' src/protocol/*.ts && mv LICENSE LICENCE.txt && rm -r examples && head -c 3000 /dev/urandom > blob.bin && chmod +x bench/*.ts",
        ],
        {
          cwd: mp,
        },
      );
      const expected = snapshot(mp);
      const patch = await w.patch('agent');
      assert.ok(patch.files.length > 10, `${patch.files.length} files`);
      assert.ok(patch.files.some((f) => f.status === 'renamed' && f.oldPath === 'LICENSE'));
      const clone = tempDir('work-real-clone');
      git(clone, 'clone', '-q', '--no-hardlinks', repo, '.');
      const file = path.join(tempDir('work-patch'), 'real.patch');
      fs.writeFileSync(file, patch.text);
      git(clone, 'apply', '--index', file);
      assert.deepStrictEqual(snapshot(clone), expected);
    });
  });

  it('apply writes the folder only when asked (dry run writes nothing), atomically, and applied paths leave the layer', async () => {
    const repo = makeRepo();
    const before = snapshot(repo);
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await shadow.createLayer('agent');
        await shadow.activate('agent');
        agentWork(mp);
        const expected = snapshot(mp);
        const guard = new FolderGuard(repo);
        const dry = await w.apply('agent', { dryRun: true });
        assert.strictEqual(dry.dryRun, true);
        assert.deepStrictEqual(dry.conflicts, []);
        assert.ok(dry.applied.some((a) => a.path === 'README.md' && a.action === 'write'));
        await guard.check(); // a dry run wrote nothing
        guard.stop();
        assert.deepStrictEqual(snapshot(repo), before);
        const r = await w.apply('agent');
        assert.deepStrictEqual(r.conflicts, [], JSON.stringify(r.conflicts));
        assert.deepStrictEqual(snapshot(repo), expected, "the folder now holds the agent's tree");
        assert.deepStrictEqual(r.kept, []);
        assert.deepStrictEqual(await shadow.layer('agent').changes(), [], 'everything applied left the layer');
        const leftovers = execFileSync('find', [repo, '-name', '*.shadowfs-*'], { encoding: 'utf8' });
        assert.strictEqual(leftovers, '', 'no temporary file is left beside the written ones');
        // The mount shows the folder (now the agent's work) through.
        assert.deepStrictEqual(snapshot(mp), expected);
      },
      false, // apply writes the folder: that is what this test checks
    );
  });

  it('a name with a backslash (a plain character on Linux) is skipped, listed, never written, and the rest of the layer is diffed and applied', async () => {
    const repo = makeRepo();
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await shadow.createLayer('agent');
        await shadow.activate('agent');
        fs.writeFileSync(path.join(mp, 'good.txt'), 'good\n');
        fs.writeFileSync(path.join(mp, 'a\\b.txt'), 'odd\n');
        fs.mkdirSync(path.join(mp, 'dir\\x'));
        fs.writeFileSync(path.join(mp, 'dir\\x', 'in.txt'), 'in\n');
        const d = await w.diff('agent');
        assert.match(d.text, /^\+good$/m);
        assert.ok(!d.text.includes('odd') && !d.text.includes('in.txt'), d.text);
        assert.deepStrictEqual([...d.skipped].sort(), ['a\\b.txt', 'dir\\x', 'dir\\x/in.txt'], JSON.stringify(d.skipped));
        assert.match((await w.patch('agent')).text, /b\/good\.txt/);
        const r = await w.apply('agent');
        assert.deepStrictEqual(
          r.applied.map((a) => a.path),
          ['good.txt'],
        );
        assert.ok(r.skipped.includes('a\\b.txt'), JSON.stringify(r.skipped));
        assert.strictEqual(fs.readFileSync(path.join(repo, 'good.txt'), 'utf8'), 'good\n');
        assert.ok(
          !fs.existsSync(path.join(repo, 'a\\b.txt')) && !fs.existsSync(path.join(repo, 'dir\\x')) && !fs.existsSync(path.join(repo, 'a')),
        );
        assert.strictEqual((await shadow.layer('agent').readFile('a\\b.txt')).toString(), 'odd\n', 'it stays in the layer');
        // A directory of the folder with such a name, moved by the agent to a plain name: its
        // removal is skipped, so the moved copy is held too (else both would be in the folder).
        fs.mkdirSync(path.join(repo, 'k\\m'));
        fs.writeFileSync(path.join(repo, 'k\\m', 'h'), 'h\n');
        fs.renameSync(path.join(mp, 'k\\m'), path.join(mp, 'plain'));
        const moved = await w.apply('agent');
        assert.deepStrictEqual(
          moved.conflicts.map((c) => c.path),
          ['plain/h'],
        );
        assert.match(moved.conflicts[0].reason, /moved it from k\\m, a name with a backslash/);
        assert.ok(!fs.existsSync(path.join(repo, 'plain')) && fs.existsSync(path.join(repo, 'k\\m', 'h')));
      },
      false, // apply writes the folder
    );
  });

  it('a file you changed after the agent copied it is a conflict: nothing written, a three-way merge offered, resolved on request', async () => {
    const repo = makeRepo();
    await withWork(
      repo,
      async (w, shadow, mp) => {
        await shadow.createLayer('agent');
        await shadow.activate('agent');
        // The agent edits line 2 of main.js and the README; you then edit line 39 of main.js,
        // and the same README line the agent touched.
        const main = fs.readFileSync(path.join(mp, 'src', 'main.js'), 'utf8');
        fs.writeFileSync(path.join(mp, 'src', 'main.js'), main.replace('const v1 = 1;', 'const v1 = "agent";'));
        fs.writeFileSync(path.join(mp, 'README.md'), '# project by the agent\n\nline three\nline four\nline five\n');
        fs.writeFileSync(path.join(mp, 'fresh.txt'), 'the agent made this\n');
        const folderMain = fs.readFileSync(path.join(repo, 'src', 'main.js'), 'utf8').replace('const v39 = 39;', 'const v39 = "you";');
        fs.writeFileSync(path.join(repo, 'src', 'main.js'), folderMain);
        fs.writeFileSync(path.join(repo, 'README.md'), '# project by you\n\nline three\nline four\nline five\n');
        const userReadme = fs.readFileSync(path.join(repo, 'README.md'));
        const r = await w.apply('agent');
        const byPath = new Map(r.conflicts.map((c) => [c.path, c]));
        assert.deepStrictEqual([...byPath.keys()].sort(), ['README.md', 'src/main.js']);
        const m = byPath.get('src/main.js')!;
        assert.strictEqual(m.mergeConflicts, 0, 'changes far apart merge cleanly');
        assert.match(m.merged!, /const v1 = "agent";/);
        assert.match(m.merged!, /const v39 = "you";/);
        const readme = byPath.get('README.md')!;
        assert.strictEqual(readme.mergeConflicts, 1);
        assert.match(
          readme.merged!,
          /<<<<<<< folder\n# project by you\n\|\|\|\|\|\|\| base\n# project\n=======\n# project by the agent\n>>>>>>> agent/,
        );
        assert.strictEqual(readme.folder, userReadme.toString());
        // Nothing was written for the conflicts; the rest was applied.
        assert.strictEqual(fs.readFileSync(path.join(repo, 'src', 'main.js'), 'utf8'), folderMain);
        assert.ok(fs.readFileSync(path.join(repo, 'README.md')).equals(userReadme));
        assert.strictEqual(fs.readFileSync(path.join(repo, 'fresh.txt'), 'utf8'), 'the agent made this\n');
        assert.deepStrictEqual(
          (await shadow.layer('agent').changes()).map((c) => c.path),
          ['README.md', 'src/main.js'],
        );
        // Resolved: the clean merge for main.js, yours for the README.
        const r2 = await w.apply('agent', { resolutions: { 'src/main.js': 'merged', 'README.md': 'folder' } });
        assert.deepStrictEqual(r2.conflicts, []);
        assert.strictEqual(fs.readFileSync(path.join(repo, 'src', 'main.js'), 'utf8'), m.merged);
        assert.ok(fs.readFileSync(path.join(repo, 'README.md')).equals(userReadme));
        assert.deepStrictEqual(await shadow.layer('agent').changes(), []);
        // A merge that is not clean is refused as a resolution.
        fs.writeFileSync(path.join(mp, 'README.md'), '# again the agent\n');
        fs.writeFileSync(path.join(repo, 'README.md'), '# again you\n');
        const r3 = await w.apply('agent', { resolutions: { 'README.md': 'merged' } });
        assert.strictEqual(r3.conflicts.length, 1);
        assert.strictEqual(fs.readFileSync(path.join(repo, 'README.md'), 'utf8'), '# again you\n');
      },
      false,
    );
  });

  it('apply never writes through a symbolic link of the folder (one made after the agent started is a conflict)', async () => {
    const repo = makeRepo();
    const outside = tempDir('work-outside');
    await withWork(
      repo,
      async (w, shadow) => {
        await shadow.layer('agent').write('made/new.txt', 'agent\n');
        // You make "made" a link to a directory elsewhere before the agent's work is applied.
        fs.symlinkSync(outside, path.join(repo, 'made'));
        const r = await w.apply('agent');
        assert.deepStrictEqual(
          r.conflicts.map((c) => c.path),
          ['made/new.txt'],
        );
        assert.match(r.conflicts[0].reason, /symbolic link/);
        assert.deepStrictEqual(fs.readdirSync(outside), [], 'nothing was written through the link');
      },
      false,
    );
  });

  it('checkpoints restore a layer exactly (files, modes, links, deletions, directories) and share unchanged content', async () => {
    const repo = makeRepo();
    await withWork(repo, async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      agentWork(mp);
      const expected = snapshot(mp);
      const first = await w.checkpoint('agent', 'one');
      assert.ok(first.files > 0);
      const blobs = () => fs.readdirSync(path.join(w.store.root, 'blobs')).length;
      const count = blobs();
      await w.checkpoint('agent', 'two');
      assert.strictEqual(blobs(), count, 'a second checkpoint of the same content stores nothing new');
      // More work, then back to "one".
      fs.writeFileSync(path.join(mp, 'README.md'), 'gone wrong\n');
      fs.rmSync(path.join(mp, 'src'), { recursive: true });
      await w.restore('agent', 'one');
      assert.deepStrictEqual(snapshot(mp), expected);
      assert.deepStrictEqual(
        w.checkpoints('agent').map((c) => c.name),
        ['one', 'two'],
      );
      await assert.rejects(w.restore('agent', 'nope'), { code: 'UNKNOWN_CHECKPOINT' });
      await assert.rejects(w.checkpoint('agent', '../x'), { code: 'INVALID_ARGUMENT' });
    });
  });

  it('a restore refused halfway leaves the layer as it was (the checkpoint is replayed aside first)', async () => {
    const repo = makeRepo();
    await withWork(repo, async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      fs.writeFileSync(path.join(mp, 'a-first.txt'), 'checkpointed\n');
      fs.mkdirSync(path.join(mp, 'secret'));
      fs.writeFileSync(path.join(mp, 'secret', 'key.txt'), 'checkpointed\n');
      await w.checkpoint('agent', 'one');
      // Work after the checkpoint, then a mask the user set since: the checkpoint's secret/ may
      // not be made any more, and its replay is refused after a-first.txt was written.
      fs.writeFileSync(path.join(mp, 'a-first.txt'), 'later\n');
      fs.writeFileSync(path.join(mp, 'later.txt'), 'later work\n');
      const before = snapshot(mp);
      const changes = async (): Promise<string[]> => (await shadow.layer('agent').changes()).map((c) => `${c.kind} ${c.path}`);
      await shadow.setMask('agent', ['secret/**']);
      const was = await changes();
      await assert.rejects(w.restore('agent', 'one'), { code: 'PATH_MASKED' });
      assert.deepStrictEqual(await changes(), was);
      await shadow.setMask('agent', null);
      assert.deepStrictEqual(snapshot(mp), before, 'the mount shows the layer as it was');
      assert.deepStrictEqual((await shadow.agents()).sort(), ['agent', 'default'], 'no scratch layer is left');
      // Without the mask it restores, in one step.
      await w.restore('agent', 'one');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'a-first.txt'), 'utf8'), 'checkpointed\n');
      assert.ok(!fs.existsSync(path.join(mp, 'later.txt')));
      assert.strictEqual(fs.readFileSync(path.join(mp, 'secret', 'key.txt'), 'utf8'), 'checkpointed\n');
    });
  });
});
