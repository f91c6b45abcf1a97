// Apply stays inside the user's folder and never destroys what it did not create, on real mounts:
// no write or removal through a symbolic link of the folder (one the folder had, one the agent
// wrote, one planted while apply runs), type changes and links out of the folder only when
// confirmed, and a directory the agent replaced is never removed while it holds the user's work.
import * as assert from 'assert';
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import type { Shadow } from '../src/shadow';
import type { ApplyOptions, ApplyResult } from '../src/work/apply';
import { Beneath } from '../src/work/beneath';
import { WorkService } from '../src/work/service';
import { FolderGuard, tempDir, withShadow } from './helpers/fixtures';

/** The user's folder, with one file. */
function makeFolder(label: string): string {
  const dir = tempDir(label);
  fs.writeFileSync(path.join(dir, 'README.md'), '# project\n');
  return dir;
}

/** A directory outside the folder, with content that must survive, watched for the whole test. */
function makeOutside(): { dir: string; guard: FolderGuard } {
  const dir = tempDir('outside');
  fs.mkdirSync(path.join(dir, 'sub'));
  fs.mkdirSync(path.join(dir, 'keep'));
  fs.writeFileSync(path.join(dir, 'keep', 'file.txt'), 'outside\n');
  return { dir, guard: new FolderGuard(dir) };
}

/** Runs `fn` with a mounted shadow of `lower` and the active layer "agent" (apply writes `lower`: no guard on it). */
async function withAgent(lower: string, fn: (w: WorkService, shadow: Shadow, mp: string) => Promise<void>): Promise<void> {
  await withShadow(
    lower,
    async (shadow, mp) => {
      const w = new WorkService(shadow);
      try {
        await shadow.createLayer('agent');
        await shadow.activate('agent');
        await fn(w, shadow, mp);
      } finally {
        await w.dispose();
      }
    },
    { guard: false },
  );
}

function apply(w: WorkService, opts: ApplyOptions = {}): Promise<ApplyResult> {
  return w.apply('agent', opts);
}

/** Every entry under `dir` ("d/" for directories, "f content" for small text files, "l -> target" for links), sorted. */
function listTree(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.name === '.git') continue;
    if (e.isSymbolicLink()) out.push(`${p} -> ${fs.readlinkSync(path.join(dir, p))}`);
    else if (e.isDirectory()) out.push(`${p}/`, ...listTree(dir, p));
    else if (p === 'README.md') out.push(p);
    else out.push(`${p} ${fs.readFileSync(path.join(dir, p), 'utf8').trimEnd()}`);
  }
  return out.sort();
}

function conflictPaths(r: ApplyResult): string[] {
  return r.conflicts.map((c) => c.path).sort();
}

describe('apply integrity: confined to the folder, destroys nothing it did not create', function () {
  this.timeout(60_000);

  it('a folder symlink to a directory outside, replaced by a directory tree: nothing is made outside; the type change needs confirmation', async () => {
    const lower = makeFolder('ai-ext');
    const outside = makeOutside();
    try {
      fs.symlinkSync(outside.dir, path.join(lower, 'ext'));
      // Apply tells a link that was there before the agent started from one made since by its
      // times, and takes anything within its slack for the kernel's coarse clock (100 ms) as made
      // since (a conflict). This link is older than that: the agent starts well after it.
      await new Promise((r) => setTimeout(r, 250));
      await withAgent(lower, async (w, _shadow, mp) => {
        fs.unlinkSync(path.join(mp, 'ext'));
        fs.mkdirSync(path.join(mp, 'ext', 'made-by-agent', 'deeper'), { recursive: true });
        fs.writeFileSync(path.join(mp, 'ext', 'made-by-agent', 'deeper', 'f.txt'), 'agent\n');
        fs.writeFileSync(path.join(mp, 'other.txt'), 'not a type change\n');
        const r = await apply(w);
        assert.ok(conflictPaths(r).includes('ext'), JSON.stringify(r));
        assert.match(r.conflicts.find((c) => c.path === 'ext')!.reason, /type change: ext symlink -> directory/);
        assert.ok(
          r.applied.some((a) => a.path === 'other.txt'),
          'the rest is applied',
        );
        assert.strictEqual(fs.readlinkSync(path.join(lower, 'ext')), outside.dir, 'the link is left as it was');
        assert.deepStrictEqual(r.typeChanges, [{ path: 'ext', from: 'symlink', to: 'directory', applied: false }]);
        // Confirmed: the link itself goes (never followed) and the tree is made in the folder.
        const r2 = await apply(w, { allowTypeChanges: true });
        assert.deepStrictEqual(r2.conflicts, [], JSON.stringify(r2.conflicts));
        assert.deepStrictEqual(r2.typeChanges, [{ path: 'ext', from: 'symlink', to: 'directory', applied: true }]);
        assert.ok(fs.lstatSync(path.join(lower, 'ext')).isDirectory());
        assert.strictEqual(fs.readFileSync(path.join(lower, 'ext', 'made-by-agent', 'deeper', 'f.txt'), 'utf8'), 'agent\n');
      });
      assert.ok(!fs.existsSync(path.join(outside.dir, 'made-by-agent')), 'nothing was made outside the folder');
      await outside.guard.check();
    } finally {
      outside.guard.stop();
    }
  });

  it('names Windows takes for .git are never applied, and links into .git wait for confirmation', async () => {
    const lower = makeFolder('ai-dotgit');
    fs.mkdirSync(path.join(lower, '.git', 'hooks'), { recursive: true });
    fs.writeFileSync(path.join(lower, '.git', 'config'), '[core]\n\tbare = false\n');
    const repo = new FolderGuard(path.join(lower, '.git'));
    try {
      await withAgent(lower, async (w, shadow, mp) => {
        // Each would be the user's .git when written on Windows: trailing dots and spaces go, a
        // directory opens through its stream, GIT~1 is its 8.3 short name.
        const aliases = ['GIT~1', '.git.', '.Git . ', '.git::$INDEX_ALLOCATION', 'sub/git~2'];
        for (const a of aliases) {
          fs.mkdirSync(path.join(mp, a, 'hooks'), { recursive: true });
          fs.writeFileSync(path.join(mp, a, 'hooks', 'post-checkout'), '#!/bin/sh\necho escaped\n', { mode: 0o755 });
        }
        fs.symlinkSync('.git/hooks/pre-commit', path.join(mp, 'hook'));
        fs.symlinkSync('../GIT~1/config', path.join(mp, 'sub', 'cfg'));
        fs.writeFileSync(path.join(mp, 'ok.txt'), 'work\n');
        fs.writeFileSync(path.join(mp, 'sub', 'note.txt'), 'note\n');
        const r = await w.apply('agent');
        assert.deepStrictEqual(r.applied.map((a) => a.path).sort(), ['ok.txt', 'sub/note.txt'], JSON.stringify(r.applied));
        for (const a of aliases)
          assert.ok(
            r.excluded.some((e) => e.path === `${a}/hooks/post-checkout` && e.reason === 'repository-metadata'),
            `${a} left out as repository metadata: ${JSON.stringify(r.excluded)}`,
          );
        assert.deepStrictEqual(r.conflicts.map((c) => c.path).sort(), ['hook', 'sub/cfg'], JSON.stringify(r.conflicts));
        for (const c of r.conflicts) assert.match(c.reason, /points into a repository's \.git; confirm/);
        assert.deepStrictEqual(fs.readdirSync(lower).sort(), ['.git', 'README.md', 'ok.txt', 'sub']);
        assert.deepStrictEqual(fs.readdirSync(path.join(lower, 'sub')), ['note.txt']);
        // What was not applied is still the agent's, beside what was (now the folder's).
        assert.strictEqual(fs.readlinkSync(path.join(mp, 'sub', 'cfg')), '../GIT~1/config', 'the held link is still the agent’s');
        assert.ok(fs.existsSync(path.join(mp, 'sub', 'git~2', 'hooks', 'post-checkout')), 'the excluded files are still the agent’s');
        assert.strictEqual(fs.readFileSync(path.join(mp, 'sub', 'note.txt'), 'utf8'), 'note\n');
        assert.deepStrictEqual(
          (await shadow.layer('agent').changes())
            .map((x) => x.path)
            .filter((p) => p.startsWith('sub/'))
            .sort(),
          ['sub/cfg', 'sub/git~2', 'sub/git~2/hooks', 'sub/git~2/hooks/post-checkout'],
        );
        // Confirmed, the links are the user's choice; the aliases never leave the layer.
        const r2 = await w.apply('agent', { allowTypeChanges: true });
        assert.deepStrictEqual(r2.conflicts, [], JSON.stringify(r2));
        assert.strictEqual(fs.readlinkSync(path.join(lower, 'hook')), '.git/hooks/pre-commit');
        assert.deepStrictEqual(fs.readdirSync(path.join(lower, 'sub')).sort(), ['cfg', 'note.txt'], JSON.stringify(r2));
      });
      await repo.check();
    } finally {
      repo.stop();
    }
  });

  it('two layers that each hold part of a bare repository never assemble it in the folder, in either order', async () => {
    // Each part passes the write guard, which sees one layer and the folder as it was at the
    // write; applied one after the other they would make a directory git takes for a repository
    // (its config's pager ran on the user's git log there).
    const git = (dir: string, ...args: string[]): { status: number | null; stdout: string } =>
      spawnSync('git', ['-C', dir, ...args], { encoding: 'utf8', env: { ...process.env, GIT_CEILING_DIRECTORIES: path.dirname(dir) } });
    for (const order of [
      ['parts', 'refs'],
      ['refs', 'parts'],
    ]) {
      const lower = makeFolder(`bare-${order[0]}`);
      await withAgent(lower, async (w, shadow) => {
        const layers: Record<string, Record<string, string>> = {
          parts: {
            'tools/cache/HEAD': 'ref: refs/heads/main\n',
            'tools/cache/objects/ab/cdef': 'not really an object\n',
            'tools/cache/config': '[core]\n\tpager = touch pwned; cat\n',
            'tools/cache/hooks/post-checkout': '#!/bin/sh\ntouch pwned\n',
          },
          refs: { 'tools/cache/refs/heads/main': '0123456789012345678901234567890123456789\n', 'tools/cache/notes.txt': 'ok\n' },
        };
        for (const [agent, files] of Object.entries(layers)) {
          await shadow.createLayer(agent);
          for (const [p, data] of Object.entries(files)) await shadow.layer(agent).write(p, data);
        }
        const first = await w.apply(order[0]);
        const second = await w.apply(order[1]);
        const excluded = [...(first.excluded ?? []), ...(second.excluded ?? [])].map((e) => `${e.path} ${e.reason}`).sort();
        const cache = path.join(lower, 'tools', 'cache');
        const names = fs.readdirSync(cache).sort();
        assert.ok(!['HEAD', 'objects', 'refs'].every((n) => names.includes(n)), `the folder's tools/cache holds ${names.join(', ')}`);
        assert.notStrictEqual(git(cache, 'rev-parse', '--git-dir').status, 0, 'git finds no repository there');
        assert.ok(!names.includes('config') || !['HEAD', 'objects', 'refs'].every((n) => names.includes(n)));
        assert.ok(excluded.length > 0 && excluded.every((e) => e.endsWith(' repository-metadata')), excluded.join('\n'));
        assert.ok(fs.existsSync(path.join(cache, 'notes.txt')), 'the rest is applied');
      });
    }
  });

  it('directories the agent made leave the layer once all they hold is applied, renamed ones and those applied in two goes included', async () => {
    const lower = makeFolder('ai-made');
    fs.mkdirSync(path.join(lower, '.git'));
    await withAgent(lower, async (w, shadow, mp) => {
      const layerPaths = async (): Promise<string[]> => (await shadow.layer('agent').changes()).map((x) => x.path).sort();
      // Made, then renamed: the layer's directory hides what the folder has below it.
      fs.mkdirSync(path.join(mp, 'x', 'inner'), { recursive: true });
      fs.writeFileSync(path.join(mp, 'x', 'inner', 'a.txt'), 'a\n');
      fs.renameSync(path.join(mp, 'x'), path.join(mp, 'y'));
      // Made with a link that waits for confirmation, applied in two goes.
      fs.mkdirSync(path.join(mp, 'a', 'b', 'c'), { recursive: true });
      fs.symlinkSync('../../../.git/config', path.join(mp, 'a', 'b', 'c', 'link'));
      fs.writeFileSync(path.join(mp, 'a', 'b', 'f.txt'), 'f\n');
      const r = await w.apply('agent');
      assert.deepStrictEqual(
        r.applied.map((x) => x.path),
        ['a/b/f.txt', 'y/inner/a.txt'],
      );
      assert.deepStrictEqual(r.kept, []);
      assert.deepStrictEqual(await layerPaths(), ['a', 'a/b', 'a/b/c', 'a/b/c/link'], 'only the held link and what holds it stay');
      const r2 = await w.apply('agent', { allowTypeChanges: true });
      assert.deepStrictEqual(
        r2.applied.map((x) => x.path),
        ['a/b/c/link'],
      );
      assert.deepStrictEqual(await layerPaths(), [], 'nothing of the agent’s is left once all is applied');
      // The user's changes there show in the agent's view, and a removal stays removed.
      fs.writeFileSync(path.join(lower, 'y', 'inner', 'a.txt'), 'user\n');
      fs.writeFileSync(path.join(lower, 'y', 'inner', 'b.txt'), 'b\n');
      fs.rmSync(path.join(lower, 'a'), { recursive: true });
      assert.deepStrictEqual(fs.readdirSync(path.join(mp, 'y', 'inner')).sort(), ['a.txt', 'b.txt']);
      assert.strictEqual(fs.readFileSync(path.join(mp, 'y', 'inner', 'a.txt'), 'utf8'), 'user\n');
      assert.ok(!fs.existsSync(path.join(mp, 'a')));
      const r3 = await w.apply('agent');
      assert.deepStrictEqual([r3.applied, r3.conflicts], [[], []]);
      assert.ok(!fs.existsSync(path.join(lower, 'a')), 'a later apply does not make the removed directory again');
    });
  });

  it("renames and moves the agent made of the folder's own files and directories are applied whole: shown, written under the new names, nothing lost", async () => {
    // The layer reads what the agent moved from where it was in the folder, so apply must see
    // what a moved directory holds and take every byte before it removes or replaces anything.
    const lower = makeFolder('ai-moves');
    fs.mkdirSync(path.join(lower, 'lib', 'deep'), { recursive: true });
    fs.writeFileSync(path.join(lower, 'lib', 'util.js'), 'export const important = 42;\n');
    fs.writeFileSync(path.join(lower, 'lib', 'deep', 'NOTES.md'), 'notes the user wrote\n');
    fs.mkdirSync(path.join(lower, 'old'));
    fs.writeFileSync(path.join(lower, 'old', 'gone.txt'), 'replaced by the move\n');
    fs.writeFileSync(path.join(lower, 'old', 'same.txt'), 'old same\n');
    // Three large files (over the 16 MiB apply streams): one renamed, two swapped.
    const big = (seed: number): Buffer => {
      const b = Buffer.alloc(17 << 20);
      for (let i = 0; i < b.length; i += 4096) b.writeUInt32LE((i * 2654435761 + seed) >>> 0, i);
      return b;
    };
    const [b1, b2, b3] = [big(1), big(2), big(3)];
    fs.writeFileSync(path.join(lower, 'big.bin'), b1);
    fs.writeFileSync(path.join(lower, 'a.bin'), b2);
    fs.writeFileSync(path.join(lower, 'b.bin'), b3);
    fs.writeFileSync(path.join(lower, 'notes.txt'), 'the only copy of my notes\n');
    const long = `${'n'.repeat(240)}.txt`;
    await withAgent(lower, async (w, shadow, mp) => {
      fs.renameSync(path.join(mp, 'lib'), path.join(mp, 'lib2'));
      fs.rmSync(path.join(mp, 'old'), { recursive: true });
      fs.mkdirSync(path.join(mp, 'old'));
      fs.writeFileSync(path.join(mp, 'old', 'same.txt'), 'new same\n');
      fs.renameSync(path.join(mp, 'lib2', 'deep'), path.join(mp, 'old', 'deep'));
      fs.renameSync(path.join(mp, 'big.bin'), path.join(mp, 'big-renamed.bin'));
      fs.renameSync(path.join(mp, 'a.bin'), path.join(mp, 't.bin'));
      fs.renameSync(path.join(mp, 'b.bin'), path.join(mp, 'a.bin'));
      fs.renameSync(path.join(mp, 't.bin'), path.join(mp, 'b.bin'));
      fs.renameSync(path.join(mp, 'notes.txt'), path.join(mp, long));
      // What the user reviews names every file under the moved directories.
      const diff = (await w.diff('agent')).text;
      for (const p of ['lib2/util.js', 'old/deep/NOTES.md', 'old/gone.txt', 'big-renamed.bin', long])
        assert.ok(diff.includes(p), `the diff names ${p}:\n${diff.slice(0, 2000)}`);
      // A checkpoint keeps every file the layer shows changed, those under moved directories too.
      assert.strictEqual((await w.checkpoint('agent', 'moved')).files, 7);
      const r = await apply(w);
      assert.deepStrictEqual(r.conflicts, []);
      assert.deepStrictEqual(
        r.applied.map((x) => `${x.action} ${x.path}`),
        [
          'write a.bin',
          'write b.bin',
          'create big-renamed.bin',
          'delete big.bin',
          'create lib2/util.js',
          'delete lib/deep/NOTES.md',
          'delete lib/util.js',
          `create ${long}`,
          'delete notes.txt',
          'create old/deep/NOTES.md',
          'delete old/gone.txt',
          'write old/same.txt',
        ].sort((a, b) => Buffer.compare(Buffer.from(a.split(' ')[1]), Buffer.from(b.split(' ')[1]))),
      );
      assert.deepStrictEqual(await shadow.layer('agent').changes(), [], 'all of it left the layer');
      assert.deepStrictEqual(fs.readdirSync(path.join(mp, 'old')).sort(), ['deep', 'same.txt']);
      assert.strictEqual(fs.readFileSync(path.join(mp, 'old', 'deep', 'NOTES.md'), 'utf8'), 'notes the user wrote\n');
    });
    const read = (rel: string): string => fs.readFileSync(path.join(lower, rel), 'utf8');
    assert.strictEqual(read('lib2/util.js'), 'export const important = 42;\n');
    assert.strictEqual(read('old/deep/NOTES.md'), 'notes the user wrote\n');
    assert.strictEqual(read('old/same.txt'), 'new same\n');
    assert.strictEqual(read(long), 'the only copy of my notes\n');
    assert.ok(fs.readFileSync(path.join(lower, 'big-renamed.bin')).equals(b1));
    assert.ok(fs.readFileSync(path.join(lower, 'a.bin')).equals(b3), 'swapped: a.bin has what b.bin had');
    assert.ok(fs.readFileSync(path.join(lower, 'b.bin')).equals(b2), 'swapped: b.bin has what a.bin had');
    for (const gone of ['lib', 'big.bin', 'notes.txt', 'old/gone.txt']) assert.ok(!fs.existsSync(path.join(lower, gone)), gone);
  });

  it('a file the agent moved that cannot be applied keeps its original in the folder, so the moved copy the layer reads from there is not lost', async () => {
    const lower = makeFolder('ai-move-refused');
    fs.mkdirSync(path.join(lower, 'lib'));
    fs.writeFileSync(path.join(lower, 'lib', 'util.js'), 'util\n');
    await withAgent(lower, async (w, shadow, mp) => {
      fs.renameSync(path.join(mp, 'lib'), path.join(mp, 'src'));
      // The user makes src/util.js in the folder meanwhile: the agent's moved file is a conflict there.
      // Later than the agent's start by more than a tick of the kernel's coarse clock, which file
      // times come from (within one tick a new file cannot be told from one made before; see
      // COARSE_CLOCK_SLACK_MS in apply.ts).
      await new Promise((r) => setTimeout(r, 50));
      fs.mkdirSync(path.join(lower, 'src'));
      fs.writeFileSync(path.join(lower, 'src', 'util.js'), "the user's own\n");
      const r = await apply(w);
      assert.deepStrictEqual(conflictPaths(r), ['lib', 'lib/util.js', 'src/util.js']);
      assert.match(r.conflicts.find((x) => x.path === 'lib/util.js')!.reason, /the agent moved lib to src, which is not applied/);
      assert.strictEqual(fs.readFileSync(path.join(lower, 'lib', 'util.js'), 'utf8'), 'util\n', 'the original stays');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'src', 'util.js'), 'utf8'), 'util\n', "and the agent's moved copy still reads it");
      assert.strictEqual((await shadow.layer('agent').readFile('src/util.js')).toString(), 'util\n');
    });
  });

  it('two files the agent swapped, the second write refused half way: the layer keeps what the first one replaced', async () => {
    const lower = makeFolder('ai-swap-fail');
    fs.writeFileSync(path.join(lower, 'a.txt'), 'was a\n');
    fs.writeFileSync(path.join(lower, 'b.txt'), 'was b\n');
    await withAgent(lower, async (w, shadow, mp) => {
      fs.renameSync(path.join(mp, 'a.txt'), path.join(mp, 't.txt'));
      fs.renameSync(path.join(mp, 'b.txt'), path.join(mp, 'a.txt'));
      fs.renameSync(path.join(mp, 't.txt'), path.join(mp, 'b.txt'));
      // The folder's b.txt turns into a directory right before apply writes it.
      const r = await apply(w, {
        beforeStep: (rel) => {
          if (rel === 'b.txt') {
            fs.unlinkSync(path.join(lower, 'b.txt'));
            fs.mkdirSync(path.join(lower, 'b.txt'));
          }
        },
      });
      assert.deepStrictEqual(
        r.applied.map((x) => `${x.action} ${x.path}`),
        ['write a.txt'],
      );
      assert.deepStrictEqual(conflictPaths(r), ['b.txt']);
      assert.strictEqual(fs.readFileSync(path.join(lower, 'a.txt'), 'utf8'), 'was b\n');
      // The folder's a.txt held the only copy of "was a": the agent's b.txt keeps it.
      assert.strictEqual((await shadow.layer('agent').readFile('b.txt')).toString(), 'was a\n');
      fs.rmdirSync(path.join(lower, 'b.txt'));
    });
  });

  it('what the agent writes, removes or makes while apply runs stays in the layer: apply hands back only what it read', async () => {
    const lower = makeFolder('ai-during');
    for (const n of ['a', 'b', 'c', 'd', 'e']) fs.writeFileSync(path.join(lower, `${n}.txt`), `${n} in the folder\n`);
    await withAgent(lower, async (w, shadow, mp) => {
      for (const n of ['a', 'b', 'c']) fs.writeFileSync(path.join(mp, `${n}.txt`), `${n} 1\n`);
      fs.rmSync(path.join(mp, 'd.txt'));
      fs.writeFileSync(path.join(mp, 'e.txt'), 'e 1\n');
      // Right before the last step, the agent writes a.txt again (same size), appends to b.txt,
      // makes d.txt again after deleting it and removes e.txt: all after apply read them.
      const r = await apply(w, {
        beforeStep: (rel) => {
          if (rel !== 'e.txt') return;
          fs.writeFileSync(path.join(mp, 'a.txt'), 'a 2\n');
          fs.appendFileSync(path.join(mp, 'b.txt'), 'b 2\n');
          fs.writeFileSync(path.join(mp, 'd.txt'), 'd again\n');
          fs.rmSync(path.join(mp, 'e.txt'));
        },
      });
      assert.deepStrictEqual(
        r.applied.map((x) => `${x.action} ${x.path}`),
        ['write a.txt', 'write b.txt', 'write c.txt', 'delete d.txt', 'write e.txt'],
      );
      // The folder has what apply read; the layer keeps every later change, reported as kept.
      assert.deepStrictEqual(
        ['a', 'b', 'c', 'e'].map((n) => fs.readFileSync(path.join(lower, `${n}.txt`), 'utf8')),
        ['a 1\n', 'b 1\n', 'c 1\n', 'e 1\n'],
      );
      assert.ok(!fs.existsSync(path.join(lower, 'd.txt')));
      assert.deepStrictEqual(r.kept.sort(), ['a.txt', 'b.txt', 'd.txt', 'e.txt']);
      assert.deepStrictEqual(
        ['a', 'b', 'd'].map((n) => fs.readFileSync(path.join(mp, `${n}.txt`), 'utf8')),
        ['a 2\n', 'b 1\nb 2\n', 'd again\n'],
      );
      assert.ok(!fs.existsSync(path.join(mp, 'e.txt')), 'the removal made during apply');
      const left = (await shadow.layer('agent').changes()).map((x) => `${x.kind} ${x.path}`).sort();
      assert.deepStrictEqual(left, ['added d.txt', 'deleted e.txt', 'modified a.txt', 'modified b.txt']);
    });
  });

  it("a rename applied only in part, or to a name git ignores, leaves the old name in the folder and the agent's moved copy whole", async () => {
    const lower = makeFolder('ai-move-part');
    execFileSync('git', ['init', '-q', lower]);
    fs.writeFileSync(path.join(lower, '.gitignore'), '*.log\n');
    fs.mkdirSync(path.join(lower, 'lib', 'sub'), { recursive: true });
    fs.writeFileSync(path.join(lower, 'lib', 'f'), 'precious\n');
    fs.writeFileSync(path.join(lower, 'lib', 'sub', 'g'), 'g\n');
    fs.writeFileSync(path.join(lower, 'notes.txt'), 'my notes\n');
    await withAgent(lower, async (w, shadow, mp) => {
      fs.renameSync(path.join(mp, 'lib'), path.join(mp, 'lib2'));
      fs.renameSync(path.join(mp, 'notes.txt'), path.join(mp, 'notes.log'));
      const origins = (await shadow.layer('agent').changes()).filter((x) => x.origin).map((x) => `${x.path}<-${x.origin}`);
      assert.deepStrictEqual(origins.sort(), ['lib2<-lib', 'notes.log<-notes.txt']);
      // Only the old names: nothing may go while the layer reads the new ones from them.
      const r1 = await apply(w, { paths: ['lib', 'notes.txt'] });
      assert.deepStrictEqual(r1.applied, []);
      assert.deepStrictEqual(conflictPaths(r1), ['lib', 'lib/f', 'lib/sub', 'lib/sub/g', 'notes.txt']);
      // Part of the moved directory: written, and the rest of it stays the agent's.
      const r2 = await apply(w, { paths: ['lib2/sub'] });
      assert.deepStrictEqual(
        r2.applied.map((x) => `${x.action} ${x.path}`),
        ['create lib2/sub/g'],
      );
      assert.strictEqual(fs.readFileSync(path.join(mp, 'lib2', 'f'), 'utf8'), 'precious\n');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'notes.log'), 'utf8'), 'my notes\n');
      // Everything: notes.log is ignored, so notes.txt stays; lib goes once lib2 is written.
      const r3 = await apply(w);
      assert.deepStrictEqual(
        r3.applied.map((x) => `${x.action} ${x.path}`),
        ['delete lib/f', 'delete lib/sub/g', 'create lib2/f'],
      );
      assert.deepStrictEqual(conflictPaths(r3), ['notes.txt']);
      assert.strictEqual(fs.readFileSync(path.join(mp, 'notes.log'), 'utf8'), 'my notes\n');
    });
    assert.strictEqual(fs.readFileSync(path.join(lower, 'lib2', 'f'), 'utf8'), 'precious\n');
    assert.strictEqual(fs.readFileSync(path.join(lower, 'notes.txt'), 'utf8'), 'my notes\n');
    assert.ok(!fs.existsSync(path.join(lower, 'lib')));
  });

  it('a moved tree applied in parts, its old name refused alone, then all: every byte kept, and the layer ends as the folder is', async () => {
    const lower = makeFolder('ai-move-parts');
    fs.mkdirSync(path.join(lower, 'a', 'b'), { recursive: true });
    fs.writeFileSync(path.join(lower, 'a', 'b', 'f'), 'f\n');
    fs.writeFileSync(path.join(lower, 'a', 'g'), 'precious\n');
    await withAgent(lower, async (w, shadow, mp) => {
      fs.renameSync(path.join(mp, 'a', 'b'), path.join(mp, 'b2'));
      fs.renameSync(path.join(mp, 'a'), path.join(mp, 'b2', 'a'));
      const r1 = await apply(w, { paths: ['b2/a'] });
      assert.deepStrictEqual(
        r1.applied.map((x) => `${x.action} ${x.path}`),
        ['create b2/a/g'],
      );
      // The old names alone: the folder keeps them while the moved copies are only the agent's.
      const r2 = await apply(w, { paths: ['a'] });
      assert.deepStrictEqual(r2.applied, []);
      assert.deepStrictEqual(conflictPaths(r2), ['a', 'a/b', 'a/b/f', 'a/g']);
      assert.match(r2.conflicts[0].reason, /apply both halves of the move together/);
      const r3 = await apply(w);
      assert.deepStrictEqual(r3.conflicts, []);
      assert.deepStrictEqual(listTree(lower), ['README.md', 'b2/', 'b2/a/', 'b2/a/g precious', 'b2/f f']);
      assert.deepStrictEqual(listTree(mp), listTree(lower), "the agent's view is the folder's");
      assert.deepStrictEqual(await shadow.layer('agent').changes(), [], 'nothing is left in the layer');
      // And it follows the folder again.
      fs.writeFileSync(path.join(lower, 'b2', 'user'), 'u\n');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'b2', 'user'), 'utf8'), 'u\n');
    });
  });

  it('a directory renamed and a link left at its old name: the old name alone waits, whole it is applied; the agent keeps its link throughout', async () => {
    const lower = makeFolder('ai-move-link');
    fs.mkdirSync(path.join(lower, 'd'));
    fs.writeFileSync(path.join(lower, 'd', 'f'), 'f\n');
    await withAgent(lower, async (w, shadow, mp) => {
      fs.renameSync(path.join(mp, 'd'), path.join(mp, 'd2'));
      fs.symlinkSync('d2', path.join(mp, 'd'));
      const dry = await apply(w, { paths: ['d'], allowTypeChanges: true, dryRun: true });
      const r1 = await apply(w, { paths: ['d'], allowTypeChanges: true });
      assert.deepStrictEqual([r1.applied, conflictPaths(r1)], [[], ['d', 'd/f']]);
      assert.deepStrictEqual([dry.applied, conflictPaths(dry)], [[], ['d', 'd/f']], 'the dry run says the same');
      assert.deepStrictEqual(listTree(lower), ['README.md', 'd/', 'd/f f']);
      assert.deepStrictEqual(listTree(mp), ['README.md', 'd -> d2', 'd2/', 'd2/f f']);
      const r2 = await apply(w, { allowTypeChanges: true });
      assert.deepStrictEqual(r2.conflicts, []);
      assert.deepStrictEqual(listTree(lower), ['README.md', 'd -> d2', 'd2/', 'd2/f f']);
      assert.deepStrictEqual(listTree(mp), listTree(lower));
      assert.deepStrictEqual(await shadow.layer('agent').changes(), []);
    });
  });

  it("another agent's apply of what one agent moved, and a new file applied into the old directory: the moved copy stays as the agent left it", async () => {
    const lower = makeFolder('ai-move-others');
    fs.mkdirSync(path.join(lower, 'lib'));
    fs.writeFileSync(path.join(lower, 'lib', 'f'), 'f\n');
    fs.writeFileSync(path.join(lower, 'lib', 'g'), 'g\n');
    await withAgent(lower, async (w, shadow, mp) => {
      fs.renameSync(path.join(mp, 'lib'), path.join(mp, 'lib2'));
      fs.mkdirSync(path.join(mp, 'lib'));
      fs.writeFileSync(path.join(mp, 'lib', 'new'), 'n\n');
      // Only the new file in the old directory: the moved one does not take it in.
      const r1 = await apply(w, { paths: ['lib/new'] });
      assert.deepStrictEqual(
        r1.applied.map((x) => `${x.action} ${x.path}`),
        ['create lib/new'],
      );
      assert.deepStrictEqual(
        listTree(mp).filter((p) => p.startsWith('lib2')),
        ['lib2/', 'lib2/f f', 'lib2/g g'],
      );
      // Another agent edits one file of the old directory and deletes the other, and applies.
      await shadow.createLayer('other');
      await shadow.layer('other').write('lib/f', 'other\n');
      await shadow.layer('other').remove('lib/g');
      const r2 = await w.apply('other');
      assert.deepStrictEqual(r2.conflicts, []);
      assert.deepStrictEqual(listTree(lower), ['README.md', 'lib/', 'lib/f other', 'lib/new n']);
      assert.deepStrictEqual(listTree(mp), ['README.md', 'lib/', 'lib/new n', 'lib2/', 'lib2/f f', 'lib2/g g']);
      const r3 = await apply(w);
      assert.deepStrictEqual(conflictPaths(r3), ['lib/f'], "the deletion of the other's edit is a conflict");
      assert.deepStrictEqual(listTree(lower), ['README.md', 'lib/', 'lib/f other', 'lib/new n', 'lib2/', 'lib2/f f', 'lib2/g g']);
    });
  });

  it("a shadow of a folder inside the applied one: its agent's moved directory keeps what apply removes from where it came from", async () => {
    const lower = makeFolder('ai-move-nested');
    fs.mkdirSync(path.join(lower, 'pkg', 'lib'), { recursive: true });
    fs.writeFileSync(path.join(lower, 'pkg', 'lib', 'f'), 'f\n');
    await withShadow(
      path.join(lower, 'pkg'),
      async (inner, innerMp) => {
        await inner.createLayer('x');
        await inner.activate('x');
        fs.renameSync(path.join(innerMp, 'lib'), path.join(innerMp, 'lib2'));
        await withShadow(
          lower,
          async (outer) => {
            const w = new WorkService(outer, { neighbours: () => [outer, inner] });
            try {
              await outer.createLayer('agent');
              await outer.layer('agent').remove('pkg/lib');
              const r = await w.apply('agent');
              assert.deepStrictEqual(
                r.applied.map((x) => `${x.action} ${x.path}`),
                ['delete pkg/lib/f'],
              );
            } finally {
              await w.dispose();
            }
          },
          { guard: false },
        );
        assert.deepStrictEqual(listTree(lower), ['README.md', 'pkg/']);
        assert.deepStrictEqual(listTree(innerMp), ['lib2/', 'lib2/f f']);
      },
      { guard: false },
    );
  });

  it('a directory you move into the folder where the agent removed or made one: its files, old as they are, are conflicts, never deleted or overwritten', async () => {
    // mv keeps the times of everything a directory holds: only the directory itself shows the
    // move. Without a base (the agent never read them) the files' own times said "older than
    // the agent", so apply deleted or overwrote them.
    const lower = makeFolder('ai-moved-in');
    fs.mkdirSync(path.join(lower, 'config'));
    fs.writeFileSync(path.join(lower, 'config', 'app.json'), '{}\n');
    const elsewhere = tempDir('ai-moved-in-from');
    fs.mkdirSync(path.join(elsewhere, 'backup'));
    fs.writeFileSync(path.join(elsewhere, 'backup', 'important.txt'), 'yours\n');
    fs.mkdirSync(path.join(elsewhere, 'out'));
    fs.writeFileSync(path.join(elsewhere, 'out', 'report.txt'), 'your only copy\n');
    await new Promise((r) => setTimeout(r, 30)); // older than the agent, by more than a clock tick
    await withAgent(lower, async (w, _shadow, mp) => {
      fs.rmSync(path.join(mp, 'config'), { recursive: true });
      fs.mkdirSync(path.join(mp, 'out'));
      fs.writeFileSync(path.join(mp, 'out', 'report.txt'), "the agent's\n");
      await new Promise((r) => setTimeout(r, 30));
      fs.renameSync(path.join(elsewhere, 'backup'), path.join(lower, 'config', 'backup'));
      fs.renameSync(path.join(elsewhere, 'out'), path.join(lower, 'out'));
      const r = await apply(w);
      assert.deepStrictEqual(conflictPaths(r), [
        'config',
        'config/app.json',
        'config/backup',
        'config/backup/important.txt',
        'out/report.txt',
      ]);
      assert.match(r.conflicts.find((c) => c.path === 'out/report.txt')!.reason, /a directory above out\/report.txt changed in the folder/);
      assert.deepStrictEqual(listTree(lower), [
        'README.md',
        'config/',
        'config/app.json {}',
        'config/backup/',
        'config/backup/important.txt yours',
        'out/',
        'out/report.txt your only copy',
      ]);
    });
  });

  it("applied in parts: what the first apply changed in a directory the agent removed is not taken for the user's change by the next", async () => {
    const lower = makeFolder('ai-in-parts');
    fs.mkdirSync(path.join(lower, 'old'));
    for (const n of ['a.txt', 'b.txt']) fs.writeFileSync(path.join(lower, 'old', n), `${n}\n`);
    await new Promise((r) => setTimeout(r, 30));
    await withAgent(lower, async (w, _shadow, mp) => {
      fs.rmSync(path.join(mp, 'old'), { recursive: true });
      await new Promise((r) => setTimeout(r, 30));
      const r1 = await apply(w, { paths: ['old/a.txt'] });
      assert.deepStrictEqual(
        r1.applied.map((x) => x.path),
        ['old/a.txt'],
      );
      const r2 = await apply(w);
      assert.deepStrictEqual(conflictPaths(r2), []);
      assert.deepStrictEqual(listTree(lower), ['README.md']);
    });
  });

  it('the same folder by another name (a bind mount): shadows of it and of a directory in it keep what apply removes', async () => {
    // Apply tells the other shadows what it is about to change in their terms; folders are told
    // apart by identity, so a bind mount of the folder is the folder (by name it was unrelated,
    // and the agents' moved directories read ENOENT once apply removed their origins).
    const lower = makeFolder('ai-bind');
    fs.mkdirSync(path.join(lower, 'lib'));
    fs.writeFileSync(path.join(lower, 'lib', 'a'), 'a\n');
    fs.mkdirSync(path.join(lower, 'pkg', 'src'), { recursive: true });
    fs.writeFileSync(path.join(lower, 'pkg', 'src', 'p'), 'p\n');
    const bound = tempDir('ai-bind-other-name');
    execFileSync('mount', ['--bind', lower, bound]);
    try {
      await withShadow(
        bound,
        async (same, sameMp) => {
          await withShadow(
            path.join(bound, 'pkg'),
            async (inner, innerMp) => {
              assert.notStrictEqual(same.folder, lower, 'the bind mount is a folder of another name');
              await same.createLayer('x');
              await same.activate('x');
              fs.renameSync(path.join(sameMp, 'lib'), path.join(sameMp, 'lib2'));
              await inner.createLayer('y');
              await inner.activate('y');
              fs.renameSync(path.join(innerMp, 'src'), path.join(innerMp, 'src2'));
              await withShadow(
                lower,
                async (outer) => {
                  const w = new WorkService(outer, { neighbours: () => [outer, same, inner] });
                  try {
                    await outer.createLayer('agent');
                    await outer.layer('agent').remove('lib');
                    await outer.layer('agent').remove('pkg/src');
                    const r = await w.apply('agent');
                    assert.deepStrictEqual(
                      r.applied.map((x) => `${x.action} ${x.path}`),
                      ['delete lib/a', 'delete pkg/src/p'],
                    );
                  } finally {
                    await w.dispose();
                  }
                },
                { guard: false },
              );
              assert.deepStrictEqual(listTree(lower), ['README.md', 'pkg/']);
              assert.deepStrictEqual(listTree(sameMp), ['README.md', 'lib2/', 'lib2/a a', 'pkg/']);
              assert.deepStrictEqual(listTree(innerMp), ['src2/', 'src2/p p']);
            },
            { guard: false },
          );
        },
        { guard: false },
      );
    } finally {
      execFileSync('umount', [bound]);
    }
  });

  it('a file the agent moved and then edited: no conflict, its old name waits for it, and an edit of the original is a conflict', async () => {
    const lower = makeFolder('ai-move-edit');
    fs.writeFileSync(path.join(lower, 'a.txt'), 'one\n');
    fs.writeFileSync(path.join(lower, 'c.txt'), 'three\n');
    await withAgent(lower, async (w, _shadow, mp) => {
      fs.renameSync(path.join(mp, 'a.txt'), path.join(mp, 'b.txt'));
      fs.appendFileSync(path.join(mp, 'b.txt'), 'two\n');
      fs.renameSync(path.join(mp, 'c.txt'), path.join(mp, 'd.txt'));
      fs.appendFileSync(path.join(mp, 'd.txt'), 'four\n');
      const r1 = await apply(w, { paths: ['a.txt'] });
      assert.deepStrictEqual([r1.applied, conflictPaths(r1)], [[], ['a.txt']]);
      assert.match(r1.conflicts[0].reason, /the agent moved a.txt to b.txt/);
      // The user edits c.txt: its moved copy was taken from the version before.
      await new Promise((r) => setTimeout(r, 50));
      fs.appendFileSync(path.join(lower, 'c.txt'), "user's\n");
      const r2 = await apply(w);
      assert.deepStrictEqual(
        r2.applied.map((x) => `${x.action} ${x.path}`),
        ['delete a.txt', 'create b.txt'],
      );
      assert.deepStrictEqual(conflictPaths(r2), ['c.txt', 'd.txt']);
      assert.deepStrictEqual(listTree(lower), ['README.md', 'b.txt one\ntwo', "c.txt three\nuser's"]);
    });
  });

  it('a directory you removed while the agent edited a file in it is not made again just to hold the conflict', async () => {
    const lower = makeFolder('ai-dir-gone');
    fs.mkdirSync(path.join(lower, 'pkg'));
    fs.writeFileSync(path.join(lower, 'pkg', 'f'), 'f\n');
    await withAgent(lower, async (w, _shadow, mp) => {
      fs.appendFileSync(path.join(mp, 'pkg', 'f'), 'agent\n');
      fs.mkdirSync(path.join(mp, 'empty', 'inner'), { recursive: true });
      fs.rmSync(path.join(lower, 'pkg'), { recursive: true });
      const r = await apply(w);
      assert.deepStrictEqual(conflictPaths(r), ['pkg/f']);
      assert.deepStrictEqual(listTree(lower), ['README.md', 'empty/', 'empty/inner/'], 'the empty directories the agent made are made');
    });
  });

  it('your version kept (--keep) of a file the agent deleted with its directory stays kept: the next apply does not ask again', async () => {
    const lower = makeFolder('ai-keep-under-deleted');
    fs.mkdirSync(path.join(lower, 'lib'));
    fs.writeFileSync(path.join(lower, 'lib', 'f'), 'f\n');
    fs.writeFileSync(path.join(lower, 'lib', 'g'), 'g\n');
    await withAgent(lower, async (w, _shadow, mp) => {
      fs.renameSync(path.join(mp, 'lib'), path.join(mp, 'lib2'));
      await new Promise((r) => setTimeout(r, 50));
      fs.appendFileSync(path.join(lower, 'lib', 'f'), "user's\n");
      const r1 = await apply(w);
      assert.deepStrictEqual(conflictPaths(r1), ['lib', 'lib/f']);
      const r2 = await apply(w, { resolutions: { 'lib/f': 'folder' } });
      assert.deepStrictEqual(
        r2.applied.map((x) => `${x.action} ${x.path}`),
        ['keep-folder lib/f'],
      );
      assert.deepStrictEqual(listTree(mp), ['README.md', 'lib/', "lib/f f\nuser's", 'lib2/', "lib2/f f\nuser's", 'lib2/g g']);
      const r3 = await apply(w);
      assert.deepStrictEqual([r3.applied, r3.conflicts], [[], []], 'nothing left to apply or to ask');
      assert.deepStrictEqual(listTree(lower), listTree(mp));
    });
  });

  it('another agent moving what apply removes while it runs keeps the moved file and directory whole', async () => {
    const lower = makeFolder('ai-move-during');
    fs.writeFileSync(path.join(lower, 'victim'), 'precious\n');
    fs.mkdirSync(path.join(lower, 'dir'));
    fs.writeFileSync(path.join(lower, 'dir', 'f'), 'precious too\n');
    await withAgent(lower, async (w, shadow, mp) => {
      fs.rmSync(path.join(mp, 'victim'));
      fs.rmSync(path.join(mp, 'dir'), { recursive: true });
      fs.writeFileSync(path.join(mp, 'new.txt'), 'new\n');
      await shadow.createLayer('b');
      const view = await shadow.openView('b');
      try {
        let moved = false;
        const r = await apply(w, {
          beforeStep: (_rel, step) => {
            // After apply's copies were taken, right before its first removal.
            if (moved || step !== 'unlink') return;
            moved = true;
            fs.renameSync(path.join(view.mountPoint, 'victim'), path.join(view.mountPoint, 'g'));
            fs.renameSync(path.join(view.mountPoint, 'dir'), path.join(view.mountPoint, 'dir2'));
          },
        });
        assert.ok(moved);
        assert.deepStrictEqual(r.conflicts, []);
        assert.deepStrictEqual(listTree(lower), ['README.md', 'new.txt new']);
        assert.deepStrictEqual(listTree(view.mountPoint), ['README.md', 'dir2/', 'dir2/f precious too', 'g precious', 'new.txt new']);
      } finally {
        await view.close();
      }
    });
  });

  it('a file edited in a directory the agent moved, and in a rotation of directories: applied without a conflict, the folder as the agent saw it', async () => {
    const lower = makeFolder('ai-move-dir-edit');
    for (const d of ['a', 'b', 'c']) {
      fs.mkdirSync(path.join(lower, d));
      fs.writeFileSync(path.join(lower, d, 'f'), `${d} f\n`);
      fs.writeFileSync(path.join(lower, d, `${d}only`), `${d}\n`);
    }
    fs.mkdirSync(path.join(lower, 'lib'));
    fs.writeFileSync(path.join(lower, 'lib', 'f'), 'f\n');
    await new Promise((r) => setTimeout(r, 50));
    await withAgent(lower, async (w, _shadow, mp) => {
      fs.renameSync(path.join(mp, 'lib'), path.join(mp, 'A'));
      fs.appendFileSync(path.join(mp, 'A', 'f'), 'edit\n');
      fs.renameSync(path.join(mp, 'a'), path.join(mp, 't'));
      fs.renameSync(path.join(mp, 'c'), path.join(mp, 'a'));
      fs.renameSync(path.join(mp, 'b'), path.join(mp, 'c'));
      fs.renameSync(path.join(mp, 't'), path.join(mp, 'b'));
      fs.appendFileSync(path.join(mp, 'b', 'f'), 'edited in b (was a)\n');
      const seen = listTree(mp);
      const r = await apply(w);
      assert.deepStrictEqual(r.conflicts, []);
      assert.deepStrictEqual(listTree(lower), seen);
      assert.deepStrictEqual(listTree(mp), seen);
    });
  });

  it('a directory the agent replaced by a link to a directory outside: nothing outside is removed; the link and its target are shown and confirmed', async () => {
    const lower = makeFolder('ai-w');
    const outside = makeOutside();
    try {
      fs.mkdirSync(path.join(lower, 'w', 'sub'), { recursive: true });
      fs.writeFileSync(path.join(lower, 'w', 'sub', 'x.txt'), 'mine\n');
      fs.mkdirSync(path.join(lower, 'w', 'keep'));
      await withAgent(lower, async (w, _shadow, mp) => {
        fs.rmSync(path.join(mp, 'w'), { recursive: true });
        fs.symlinkSync(outside.dir, path.join(mp, 'w'));
        const r = await apply(w);
        assert.deepStrictEqual(conflictPaths(r), ['w'], JSON.stringify(r));
        assert.match(r.conflicts[0].reason, /type change: w directory -> symlink/);
        assert.deepStrictEqual(r.links, [{ path: 'w', target: outside.dir }]);
        assert.strictEqual(fs.readFileSync(path.join(lower, 'w', 'sub', 'x.txt'), 'utf8'), 'mine\n', 'nothing was removed unconfirmed');
        const r2 = await apply(w, { allowTypeChanges: true });
        assert.deepStrictEqual(r2.conflicts, [], JSON.stringify(r2));
        assert.deepStrictEqual(r2.typeChanges, [{ path: 'w', from: 'directory', to: 'symlink', applied: true }]);
        assert.strictEqual(fs.readlinkSync(path.join(lower, 'w')), outside.dir);
      });
      assert.ok(fs.statSync(path.join(outside.dir, 'sub')).isDirectory(), 'the directory outside is still there');
      assert.ok(fs.statSync(path.join(outside.dir, 'keep')).isDirectory(), 'the directory outside is still there');
      await outside.guard.check();
    } finally {
      outside.guard.stop();
    }
  });

  it("a directory the agent replaced by a file is not removed while it holds the user's edit: the removal and the file are refused", async () => {
    const lower = makeFolder('ai-cfg');
    fs.mkdirSync(path.join(lower, 'cfg'));
    fs.writeFileSync(path.join(lower, 'cfg', 'a.txt'), 'a\n');
    fs.writeFileSync(path.join(lower, 'cfg', 'b.txt'), 'b\n');
    await withAgent(lower, async (w, _shadow, mp) => {
      fs.rmSync(path.join(mp, 'cfg'), { recursive: true });
      fs.writeFileSync(path.join(mp, 'cfg'), 'now a file\n');
      // The user edits a file in the directory after the agent started.
      await new Promise((r) => setTimeout(r, 20)); // mtime granularity: the edit is later than the layer's start
      fs.writeFileSync(path.join(lower, 'cfg', 'a.txt'), 'the user edit\n');
      for (const allowTypeChanges of [false, true]) {
        const r = await apply(w, { allowTypeChanges });
        assert.ok(conflictPaths(r).includes('cfg/a.txt'), JSON.stringify(r));
        assert.ok(conflictPaths(r).includes('cfg'), `the file replacing the directory is refused: ${JSON.stringify(r)}`);
        assert.ok(fs.lstatSync(path.join(lower, 'cfg')).isDirectory(), 'cfg is still a directory');
        assert.strictEqual(fs.readFileSync(path.join(lower, 'cfg', 'a.txt'), 'utf8'), 'the user edit\n', "the user's edit survived");
      }
    });
  });

  it('a symbolic link planted in the folder between the check and the write is never written through', async () => {
    const lower = makeFolder('ai-race');
    const outside = makeOutside();
    try {
      fs.mkdirSync(path.join(lower, 'd'));
      fs.writeFileSync(path.join(lower, 'd', 'f.txt'), 'folder\n');
      await withAgent(lower, async (w, _shadow, mp) => {
        fs.writeFileSync(path.join(mp, 'd', 'f.txt'), 'agent\n');
        fs.writeFileSync(path.join(mp, 'd', 'new.txt'), 'agent\n');
        let planted = false;
        const r = await apply(w, {
          // Called after apply's checks, right before it touches the folder: the deterministic race.
          beforeStep: () => {
            if (planted) return;
            planted = true;
            fs.renameSync(path.join(lower, 'd'), path.join(lower, 'd-moved'));
            fs.symlinkSync(path.join(outside.dir, 'keep'), path.join(lower, 'd'));
          },
        });
        assert.ok(planted, 'apply called the hook');
        assert.deepStrictEqual(conflictPaths(r), ['d/f.txt', 'd/new.txt'], JSON.stringify(r));
        for (const c of r.conflicts) assert.match(c.reason, /symbolic link/);
      });
      assert.deepStrictEqual(fs.readdirSync(path.join(outside.dir, 'keep')), ['file.txt']);
      assert.strictEqual(fs.readFileSync(path.join(outside.dir, 'keep', 'file.txt'), 'utf8'), 'outside\n');
      await outside.guard.check();
    } finally {
      outside.guard.stop();
    }
  });

  it('each step of beneath.ts refuses a path through a link and acts on a final link itself, never on what it points to', () => {
    const lower = makeFolder('ai-beneath');
    const outside = makeOutside();
    const root = Beneath.open(lower);
    try {
      fs.symlinkSync(outside.dir, path.join(lower, 'ext'));
      fs.symlinkSync(path.join(outside.dir, 'keep', 'file.txt'), path.join(lower, 'flink'));
      const through = { code: 'PATH_THROUGH_SYMLINK' };
      assert.throws(() => root.mkdir('ext/made'), through);
      assert.throws(() => root.write('ext/keep/file.txt', { data: Buffer.from('x'), mode: 0o644 }), through);
      assert.throws(() => root.write('ext/new', { link: '/etc' }), through);
      assert.throws(() => root.unlink('ext/keep/file.txt'), through);
      assert.throws(() => root.rmdir('ext/sub'), through);
      assert.throws(() => root.chmod('ext/keep/file.txt', 0o600), through);
      assert.throws(() => root.chmod('flink', 0o600), { code: 'PATH_THROUGH_SYMLINK' });
      assert.throws(() => root.lstat('ext/keep'), through);
      assert.throws(() => root.mkdir('../escape'), { code: 'INVALID_PATH' });
      assert.throws(() => root.rmdir('ext'), { code: 'ENOTDIR' }, 'rmdir of a link does not follow it');
      // A final link is replaced (write) or removed (unlink) itself.
      root.write('flink', { data: Buffer.from('mine\n'), mode: 0o644 });
      assert.ok(fs.lstatSync(path.join(lower, 'flink')).isFile());
      assert.ok(root.unlink('ext'));
      assert.strictEqual(root.lstat('ext'), null);
      root.mkdir('ext/made/deeper');
      assert.ok(fs.lstatSync(path.join(lower, 'ext', 'made', 'deeper')).isDirectory());
    } finally {
      root.close();
      outside.guard.stop();
    }
    assert.strictEqual(fs.readFileSync(path.join(outside.dir, 'keep', 'file.txt'), 'utf8'), 'outside\n');
    assert.deepStrictEqual(fs.readdirSync(outside.dir).sort(), ['keep', 'sub']);
  });
});
