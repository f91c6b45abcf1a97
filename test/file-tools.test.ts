// The agent file tools (src/work/files.ts) on real mounts: read, write, edit, list, glob and
// grep must answer as agent A's layer shows the tree while ANOTHER agent's layer is the one the
// shared mount shows, and leave that mount alone. The project has .gitignore files (root and
// nested, with negations), a node_modules, .git, a binary file and symlinks; the folder is
// guarded throughout (withShadow checks it was never written).
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { addon } from '../src/shadow/native';
import type { Layer, Shadow } from '../src/shadow';
import { editText, glob, grep, list, readText, writeText } from '../src/work/files';
import { IgnoreRules } from '../src/work/walk';
import { makeProject, withShadow } from './helpers/fixtures';

function put(dir: string, rel: string, data: string | Buffer): void {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), data);
}

/** makeProject's folder plus everything the ignore rules and the walk have to deal with. */
function makeToolsProject(): string {
  const dir = makeProject('files-lower');
  put(dir, '.gitignore', '# root rules\nnode_modules/\n*.log\n!keep.log\n');
  put(dir, 'debug.log', 'NEEDLE in an ignored log\n');
  put(dir, 'keep.log', 'NEEDLE in a log a negation keeps\n');
  put(dir, 'node_modules/pkg/index.js', 'module.exports = "NEEDLE";\n');
  // Nested rules: relative to sub/, and a negation that beats the root's *.log for one file.
  put(dir, 'sub/.gitignore', 'generated/\n!important.log\n');
  put(dir, 'sub/important.log', 'NEEDLE important\n');
  put(dir, 'sub/other.log', 'NEEDLE other\n');
  put(dir, 'sub/generated/out.js', 'NEEDLE generated\n');
  put(dir, 'sub/code.js', 'NEEDLE sub code\n');
  put(dir, 'generated/top.js', 'NEEDLE top-level generated is not under sub/\n');
  put(dir, '.git/HEAD', 'ref: NEEDLE\n');
  put(dir, 'notes/todo.txt', 'NEEDLE to do\n');
  put(dir, 'bin.dat', Buffer.concat([Buffer.from('NEEDLE'), Buffer.from([0, 1, 2, 0]), Buffer.from('NEEDLE\n')]));
  fs.symlinkSync('src', path.join(dir, 'link-dir')); // a directory symlink: listed, never entered
  return dir;
}

/** Agent A adds, modifies and deletes; agent B changes other things and is the active layer. */
async function twoAgents(shadow: Shadow, lower: string): Promise<Layer> {
  const a = shadow.layer('a');
  await a.write('src/added.js', 'const NEEDLE = 1;\n');
  await a.write('src/math.js', fs.readFileSync(path.join(lower, 'src/math.js'), 'utf8') + '// NEEDLE changed by a\n');
  await a.remove('notes/todo.txt');
  const b = shadow.layer('b');
  await b.write('only-b.txt', 'NEEDLE from b\n');
  await b.remove('README.md');
  await b.remove('keep.log');
  await shadow.activate('b');
  return a;
}

/** Path order: component by component, so a directory's contents come right after it. */
function pathOrder(a: string, b: string): number {
  const x = a.split('/');
  const y = b.split('/');
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
  return x.length - y.length;
}

function assertSorted(paths: string[]): void {
  assert.deepStrictEqual(paths, [...paths].sort(pathOrder), 'answers come in path order');
}

/** A Layer that records the directories read through it (everything else goes to `layer`). */
function spying(layer: Layer, seen: string[]): Layer {
  const spy = Object.create(layer) as Layer;
  spy.readdir = (rel: string) => {
    seen.push(rel);
    return layer.readdir(rel);
  };
  return spy;
}

function assertMountShowsB(mp: string, shadow: Shadow): void {
  assert.strictEqual(shadow.active, 'b', 'the shared mount was never switched');
  assert.ok(fs.existsSync(path.join(mp, 'only-b.txt')), "the mount still shows b's file");
  assert.ok(!fs.existsSync(path.join(mp, 'README.md')) && !fs.existsSync(path.join(mp, 'keep.log')), "and b's deletions");
  assert.ok(!fs.existsSync(path.join(mp, 'src', 'added.js')), "and not a's file");
  assert.ok(fs.existsSync(path.join(mp, 'notes', 'todo.txt')), "nor a's deletion");
}

describe('file tools: one agent layer as it shows the tree, without switching the mount', function () {
  this.timeout(60_000);

  it("grep, glob, list and readText see agent A's layer while B's is active", async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow, mp) => {
      const a = await twoAgents(shadow, lower);

      const g = await grep(a, 'NEEDLE');
      const hits = g.matches.map((m) => m.path);
      assert.deepStrictEqual(hits, ['generated/top.js', 'keep.log', 'src/added.js', 'src/math.js', 'sub/code.js', 'sub/important.log']);
      assert.strictEqual(g.truncated, false);
      const changed = g.matches.find((m) => m.path === 'src/math.js');
      assert.deepStrictEqual([changed?.line, changed?.text], [12, '// NEEDLE changed by a']);

      const js = await glob(a, '**/*.js');
      assert.deepStrictEqual(js.paths, ['generated/top.js', 'src/added.js', 'src/math.js', 'sub/code.js', 'test/math.test.js']);

      assert.deepStrictEqual((await glob(a, '*.js', { cwd: 'src' })).paths, ['src/added.js', 'src/math.js'], 'answers are root-relative');
      assert.deepStrictEqual((await glob(a, 'src/*.js')).paths, ['src/added.js', 'src/math.js']);
      assert.deepStrictEqual((await glob(a, '*.md')).paths, ['README.md'], "b's deletion is not a's");
      assert.deepStrictEqual((await glob(a, 'notes/*')).paths, [], "a's deletion");

      const top = await list(a, '');
      const names = top.entries.map((e) => `${e.path}:${e.type}`);
      for (const want of ['README.md:file', 'keep.log:file', 'link-dir:symlink', 'link-to-math:symlink', 'notes:directory', 'bin.dat:file'])
        assert.ok(names.includes(want), `${want} in ${names.join(' ')}`);
      for (const gone of ['only-b.txt', 'node_modules', '.git', 'debug.log'])
        assert.ok(!top.entries.some((e) => e.path === gone), `${gone} is not listed`);
      assertSorted(top.entries.map((e) => e.path));
      assert.strictEqual(top.entries.find((e) => e.path === 'bin.dat')?.size, 17);
      assert.strictEqual(top.entries.find((e) => e.path === 'notes')?.size, undefined, 'sizes are for files');

      const all = await list(a, '', { recursive: true });
      const paths = all.entries.map((e) => e.path);
      assertSorted(paths);
      assert.ok(paths.includes('src/added.js') && paths.includes('sub/important.log') && paths.includes('deep/a/b/c/leaf.txt'));
      assert.ok(!paths.includes('notes/todo.txt'), "A's deletion");
      assert.ok(!paths.some((p) => p.startsWith('link-dir/')), 'symlinks are not followed');
      assert.strictEqual(all.entries.find((e) => e.path === 'src/added.js')?.size, 'const NEEDLE = 1;\n'.length);

      assert.match((await readText(a, 'src/math.js')).content, /NEEDLE changed by a\n$/);
      assert.strictEqual((await readText(a, 'README.md')).content, fs.readFileSync(path.join(lower, 'README.md'), 'utf8'));
      await assert.rejects(readText(a, 'notes/todo.txt'), { code: 'NOT_FOUND' });
      await assert.rejects(readText(a, 'only-b.txt'), { code: 'NOT_FOUND' });
      await assert.rejects(grep(shadow.layer('nobody'), 'x'), { code: 'UNKNOWN_AGENT' });

      assertMountShowsB(mp, shadow);
    });
  });

  it('leaves out .git and what the .gitignore files say (pruned, never walked into) unless includeIgnored', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow, mp) => {
      const a = await twoAgents(shadow, lower);
      const seen: string[] = [];
      const spy = spying(a, seen);
      await grep(spy, 'NEEDLE');
      await glob(spy, '**');
      await list(spy, '', { recursive: true });
      for (const dir of seen) assert.ok(!/^(node_modules|\.git|sub\/generated|link-dir)(\/|$)/.test(dir), `walked into ${dir}`);
      assert.ok(seen.includes('sub') && seen.includes('deep/a/b/c'), seen.join(' '));

      assert.deepStrictEqual((await glob(a, '**/*.log')).paths, ['keep.log', 'sub/important.log']);
      assert.deepStrictEqual((await glob(a, '**/*.log', { includeIgnored: true })).paths, [
        'debug.log',
        'keep.log',
        'sub/important.log',
        'sub/other.log',
      ]);
      const everything = (await grep(a, 'NEEDLE', { includeIgnored: true })).matches.map((m) => m.path);
      for (const p of ['.git/HEAD', 'debug.log', 'node_modules/pkg/index.js', 'sub/generated/out.js', 'sub/other.log'])
        assert.ok(everything.includes(p), `${p} in ${everything.join(' ')}`);
      assert.ok(!everything.includes('bin.dat'), 'binary files are never searched');
      assertSorted(everything);
      const listed = (await list(a, '', { recursive: true, includeIgnored: true })).entries.map((e) => e.path);
      assert.ok(listed.includes('.git/HEAD') && listed.includes('node_modules/pkg/index.js'));
      // A directory named on purpose is shown even though it is ignored.
      assert.deepStrictEqual(
        (await list(a, 'node_modules', { recursive: true })).entries.map((e) => e.path),
        ['node_modules/pkg', 'node_modules/pkg/index.js'],
      );
      // A literal glob is a path: there and not ignored, or nothing.
      assert.deepStrictEqual((await glob(a, 'keep.log')).paths, ['keep.log']);
      assert.deepStrictEqual((await glob(a, 'debug.log')).paths, []);
      assert.deepStrictEqual((await glob(a, 'debug.log', { includeIgnored: true })).paths, ['debug.log']);
      // Inside a directory named on purpose, nothing is left out.
      assert.deepStrictEqual((await glob(a, 'node_modules/pkg/*.js')).paths, ['node_modules/pkg/index.js']);
      assert.deepStrictEqual((await glob(a, 'node_modules/pkg/index.js')).paths, ['node_modules/pkg/index.js']);
      assert.deepStrictEqual((await glob(a, '*', { cwd: 'sub/generated' })).paths, ['sub/generated/out.js']);
      assert.deepStrictEqual((await glob(a, '*/index.js', { cwd: 'node_modules' })).paths, ['node_modules/pkg/index.js']);
      assert.deepStrictEqual((await glob(a, '**/index.js')).paths, []);
      assert.deepStrictEqual(
        (await grep(a, 'NEEDLE', { path: 'node_modules' })).matches.map((m) => m.path),
        ['node_modules/pkg/index.js'],
      );

      // The rules are the layer's: an agent that changes .gitignore sees its own rules.
      const c = shadow.layer('c');
      await c.write('.gitignore', 'node_modules/\ngenerated/\n');
      await c.write('sub/.gitignore', '');
      assert.deepStrictEqual((await glob(c, '**/*.log')).paths, ['debug.log', 'keep.log', 'sub/important.log', 'sub/other.log']);
      assert.deepStrictEqual((await glob(c, '**/*.js')).paths, ['src/math.js', 'sub/code.js', 'test/math.test.js']);
      assertMountShowsB(mp, shadow);
    });
  });

  it('readText reads whole files and line ranges (clipped), says binary, and refuses too much at once', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow, mp) => {
      const a = await twoAgents(shadow, lower);
      await a.write('lines.txt', 'l1\nl2\r\nl3\nl4');
      const whole = await readText(a, 'lines.txt');
      assert.deepStrictEqual(whole, {
        path: 'lines.txt',
        content: 'l1\nl2\r\nl3\nl4',
        totalLines: 4,
        startLine: 1,
        endLine: 4,
        binary: false,
        // What a stat-then-write names in expect: the whole file's size, mtime and content hash.
        size: 12,
        mtimeMs: (await a.stat('lines.txt')).mtimeMs,
        hash: addon().contentHash(Buffer.from('l1\nl2\r\nl3\nl4')),
      });
      const mid = await readText(a, './lines.txt', { startLine: 2, endLine: 3 });
      assert.deepStrictEqual([mid.content, mid.startLine, mid.endLine, mid.totalLines], ['l2\r\nl3\n', 2, 3, 4]);
      const tail = await readText(a, 'lines.txt', { startLine: 3, endLine: 99 });
      assert.deepStrictEqual([tail.content, tail.startLine, tail.endLine], ['l3\nl4', 3, 4]);
      const past = await readText(a, 'lines.txt', { startLine: 10 });
      assert.deepStrictEqual([past.content, past.startLine, past.endLine], ['', 5, 4]);
      assert.strictEqual((await readText(a, 'lines.txt', { endLine: 1 })).content, 'l1\n');
      await assert.rejects(readText(a, 'lines.txt', { startLine: 3, endLine: 2 }), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(readText(a, 'lines.txt', { startLine: 0 }), { code: 'INVALID_ARGUMENT' });

      const bin = await readText(a, 'bin.dat');
      assert.deepStrictEqual([bin.binary, bin.content], [true, '']);
      await assert.rejects(readText(a, 'src/math.js', { maxBytes: 20 }), (err: Error & { code?: string }) => {
        assert.strictEqual(err.code, 'INVALID_ARGUMENT');
        assert.match(err.message, /line range|startLine/);
        return true;
      });
      assert.strictEqual((await readText(a, 'src/math.js', { startLine: 2, endLine: 2, maxBytes: 30 })).content, 'function add(a, b) {\n');
      await assert.rejects(readText(a, 'src/math.js', { startLine: 1, endLine: 5, maxBytes: 30 }), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(readText(a, 'src'), { code: 'IS_DIRECTORY' });
      await assert.rejects(readText(a, 'link-to-math'), (err: Error & { code?: string }) => {
        assert.strictEqual(err.code, 'PATH_THROUGH_SYMLINK');
        assert.match(err.message, /src\/math\.js/, 'names where the link points');
        return true;
      });
      await assert.rejects(readText(a, 'nothing/here'), { code: 'NOT_FOUND' });
      await assert.rejects(readText(shadow.layer('nobody'), 'README.md'), { code: 'UNKNOWN_AGENT' });
      assertMountShowsB(mp, shadow);
    });
  });

  it('writeText creates parents, keeps an existing mode, and never writes over a directory', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow, mp) => {
      const a = await twoAgents(shadow, lower);
      assert.deepStrictEqual(await writeText(a, 'new/deep/dir/f.txt', 'héllo\n'), { path: 'new/deep/dir/f.txt', bytes: 7, created: true });
      assert.strictEqual((await a.stat('new/deep')).type, 'directory');
      assert.strictEqual((await readText(a, 'new/deep/dir/f.txt')).content, 'héllo\n');
      assert.strictEqual((await a.stat('new/deep/dir/f.txt')).mode, 0o644);

      assert.deepStrictEqual(await writeText(a, 'script.sh', '#!/bin/sh\necho changed\n'), {
        path: 'script.sh',
        bytes: 23,
        created: false,
      });
      assert.strictEqual((await a.stat('script.sh')).mode, 0o755, "the folder file's mode is kept");
      await writeText(a, 'script.sh', '#!/bin/sh\n', { mode: 0o700 });
      assert.strictEqual((await a.stat('script.sh')).mode, 0o700, 'unless a mode is given');
      await writeText(a, 'notes/todo.txt', 'back\n');
      assert.strictEqual((await readText(a, 'notes/todo.txt')).content, 'back\n');

      await assert.rejects(writeText(a, 'src', 'x'), { code: 'IS_DIRECTORY' });
      await assert.rejects(writeText(a, 'script.sh/x', 'x'), { code: 'NOT_A_DIRECTORY' });
      assert.ok(!fs.existsSync(path.join(mp, 'new')), 'the shared mount (b) does not show it');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'script.sh'), 'utf8'), '#!/bin/sh\necho hi\n');
      assertMountShowsB(mp, shadow);
    });
  });

  it('editText replaces exactly one match, or all with replaceAll, and says why otherwise', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow, mp) => {
      const a = await twoAgents(shadow, lower);
      assert.deepStrictEqual(await editText(a, 'script.sh', 'echo hi', 'echo $& bye'), { path: 'script.sh', replacements: 1 });
      assert.strictEqual((await readText(a, 'script.sh')).content, '#!/bin/sh\necho $& bye\n', 'newText is taken literally');
      assert.strictEqual((await a.stat('script.sh')).mode, 0o755, 'the mode is kept');

      const noMatch = (err: Error & { code?: string }): boolean => {
        assert.strictEqual(err.code, 'NO_MATCH');
        assert.match(err.message, /does not occur/);
        assert.doesNotMatch(err.message, /whitespace differs/);
        return true;
      };
      await assert.rejects(editText(a, 'src/math.js', 'not there', 'x'), noMatch);
      await assert.rejects(editText(a, 'src/math.js', 'return a  +  b;\n\n}', 'x'), (err: Error & { code?: string }) => {
        assert.strictEqual(err.code, 'NO_MATCH');
        assert.match(err.message, /whitespace differs/);
        assert.match(err.message, /line 3\b/);
        return true;
      });

      await a.write('multi.txt', 'x = 1\ny = 2\nx = 1\nz\nx = 1\n', { mode: 0o600 });
      await assert.rejects(editText(a, 'multi.txt', 'x = 1', 'x = 2'), (err: Error & { code?: string }) => {
        assert.strictEqual(err.code, 'AMBIGUOUS_MATCH');
        assert.match(err.message, /3 times/);
        assert.match(err.message, /lines 1, 3, 5/);
        return true;
      });
      assert.strictEqual((await readText(a, 'multi.txt')).content, 'x = 1\ny = 2\nx = 1\nz\nx = 1\n', 'nothing written on failure');
      assert.deepStrictEqual(await editText(a, 'multi.txt', 'x = 1', 'x = 2', { replaceAll: true }), {
        path: 'multi.txt',
        replacements: 3,
      });
      assert.strictEqual((await readText(a, 'multi.txt')).content, 'x = 2\ny = 2\nx = 2\nz\nx = 2\n');
      assert.strictEqual((await a.stat('multi.txt')).mode, 0o600);
      // Unique once more context is given.
      assert.strictEqual((await editText(a, 'multi.txt', 'z\nx = 2', 'z\nx = 3')).replacements, 1);

      await assert.rejects(editText(a, 'multi.txt', '', 'x'), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(editText(a, 'bin.dat', 'NEEDLE', 'x'), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(editText(a, 'notes/todo.txt', 'NEEDLE', 'x'), { code: 'NOT_FOUND' });
      await assert.rejects(editText(a, 'src', 'x', 'y'), { code: 'IS_DIRECTORY' });
      assertMountShowsB(mp, shadow);
    });
  });

  it('grep gives context lines, honours its options, trims long lines and names an invalid regex', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow, mp) => {
      const a = await twoAgents(shadow, lower);
      await a.write('ctx.txt', ['MARK one', 'two', 'three', 'four', 'MARK five', 'six', 'seven'].join('\n') + '\n');
      const ctx = await grep(a, '^MARK', { path: 'ctx.txt', context: 2 });
      assert.deepStrictEqual(ctx.matches, [
        { path: 'ctx.txt', line: 1, text: 'MARK one', before: [], after: ['two', 'three'] },
        { path: 'ctx.txt', line: 5, text: 'MARK five', before: ['three', 'four'], after: ['six', 'seven'] },
      ]);
      assert.strictEqual(ctx.filesSearched, 1);
      assert.strictEqual((await grep(a, 'MARK', { path: 'ctx.txt' })).matches[0].before, undefined, 'no context unless asked');

      assert.strictEqual((await grep(a, 'mark five')).matches.length, 0);
      assert.deepStrictEqual(
        (await grep(a, 'mark five', { ignoreCase: true })).matches.map((m) => m.line),
        [5],
      );
      await a.write('fixed.txt', 'a.b\naxb\n');
      assert.deepStrictEqual(
        (await grep(a, 'a.b', { path: 'fixed.txt' })).matches.map((m) => m.line),
        [1, 2],
      );
      assert.deepStrictEqual(
        (await grep(a, 'a.b', { path: 'fixed.txt', fixedStrings: true })).matches.map((m) => m.line),
        [1],
      );
      assert.deepStrictEqual(
        (await grep(a, 'NEEDLE', { glob: '*.js' })).matches.map((m) => m.path),
        ['generated/top.js', 'src/added.js', 'src/math.js', 'sub/code.js'],
      );
      assert.deepStrictEqual(
        (await grep(a, 'NEEDLE', { path: 'sub' })).matches.map((m) => m.path),
        ['sub/code.js', 'sub/important.log'],
      );
      assert.deepStrictEqual(
        (await grep(a, 'NEEDLE', { path: 'sub', glob: '*.log' })).matches.map((m) => m.path),
        ['sub/important.log'],
      );

      await a.write('long.txt', `${'x'.repeat(2000)}NEEDLE${'y'.repeat(2000)}\n`);
      const [long] = (await grep(a, 'NEEDLE', { path: 'long.txt' })).matches;
      assert.ok(long.text.length <= 500 && long.text.includes('NEEDLE'), long.text);

      await assert.rejects(grep(a, '(unclosed'), (err: Error & { code?: string }) => {
        assert.strictEqual(err.code, 'INVALID_ARGUMENT');
        assert.match(err.message, /invalid regular expression.*\(unclosed/i);
        assert.match(err.message, /Unterminated group/);
        return true;
      });
      await assert.rejects(grep(a, ''), { code: 'INVALID_ARGUMENT' });
      // A glob too big for a regular expression (picomatch compiles it only when first used; the
      // RPC fuzzer found this one as an internal error).
      const huge = 'é'.repeat(50_000);
      await assert.rejects(grep(a, 'x', { glob: huge }), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(glob(a, huge), { code: 'INVALID_ARGUMENT' });
      // Likewise a regular expression too big for V8 (compiled on first use too).
      await assert.rejects(grep(a, '\u0000'.repeat(50_000)), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(grep(a, 'x', { context: -1 }), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(grep(a, 'x', { path: 'nothing' }), { code: 'NOT_FOUND' });
      assertMountShowsB(mp, shadow);
    });
  });

  // A glob from a model is matched by our own NFA matcher (src/common/glob-match.ts). picomatch's
  // backtracking regular expressions took about a minute for 8 "*a" against a name of 80 "a"s,
  // and each "*a" more multiplied it by ten, all on the daemon's one thread; the audit trail's
  // path glob likewise, for hours. No timing is asserted: a regression would take hours, so
  // mocha's timeout is the failure.
  it('hostile globs (glob, grep --glob, audit --path) answer promptly', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow, mp) => {
      await shadow.createLayer('a');
      await shadow.activate('a');
      const a = shadow.layer('a');
      const long = 'a'.repeat(200);
      // Through the mount, so the audit trail records it too.
      fs.writeFileSync(path.join(mp, long), 'NEEDLE\n');
      fs.mkdirSync(path.join(mp, 'nest', ...Array.from({ length: 20 }, () => 'a')), { recursive: true });
      const hostile = '*a*a*a*a*a*a*a*a*a*a*b';
      assert.deepStrictEqual(await glob(a, hostile), { paths: [], truncated: false });
      assert.deepStrictEqual(await glob(a, `**/${hostile}`), { paths: [], truncated: false });
      assert.deepStrictEqual((await grep(a, 'NEEDLE', { glob: hostile })).matches, []);
      assert.deepStrictEqual((await a.audit({ path: hostile })).entries, []);
      // Ordinary patterns still match.
      assert.deepStrictEqual((await glob(a, 'a*a')).paths, [long]);
      assert.deepStrictEqual((await glob(a, '{src,sub}/*.{js,md}')).paths, ['src/math.js', 'sub/code.js']);
      assert.deepStrictEqual((await glob(a, 'nest/a/a/[a]')).paths, ['nest/a/a/a']);
      assert.deepStrictEqual(
        (await grep(a, 'NEEDLE', { glob: 'a*a' })).matches.map((m) => m.path),
        [long],
      );
      assert.ok(
        (await a.audit({ path: 'a*a' })).entries.some((e) => e.path === long),
        'the audit trail has the file',
      );
      // Extglobs are refused with the syntax that is supported.
      await assert.rejects(glob(a, '@(a|b)'), (err: Error & { code?: string }) => {
        assert.strictEqual(err.code, 'INVALID_ARGUMENT');
        assert.match(err.message, /extglobs are not supported.*supported: \*/);
        return true;
      });
    });
  });

  it('limits give truncated answers', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow, mp) => {
      const a = await twoAgents(shadow, lower);
      const full = await list(a, '', { recursive: true });
      assert.strictEqual(full.truncated, false);
      const cut = await list(a, '', { recursive: true, limit: 3 });
      assert.deepStrictEqual(
        cut.entries.map((e) => e.path),
        full.entries.slice(0, 3).map((e) => e.path),
      );
      assert.strictEqual(cut.truncated, true);
      const exact = await list(a, '', { recursive: true, limit: full.entries.length });
      assert.deepStrictEqual([exact.entries.length, exact.truncated], [full.entries.length, false]);

      const g = await glob(a, '**', { limit: 2 });
      assert.deepStrictEqual([g.paths.length, g.truncated], [2, true]);
      const six = await grep(a, 'NEEDLE');
      assert.deepStrictEqual([six.matches.length, six.truncated], [6, false]);
      const two = await grep(a, 'NEEDLE', { maxMatches: 2 });
      assert.deepStrictEqual([two.matches.map((m) => m.path), two.truncated], [['generated/top.js', 'keep.log'], true]);
      assert.strictEqual((await grep(a, 'NEEDLE', { maxMatches: 6 })).truncated, false);
      await assert.rejects(list(a, '', { limit: 0 }), { code: 'INVALID_ARGUMENT' });
      await assert.rejects(grep(a, 'x', { maxMatches: 1.5 }), { code: 'INVALID_ARGUMENT' });
      assertMountShowsB(mp, shadow);
    });
  });

  it('walks a tree 3,000 directories deep that an agent made: grep, glob and list find its file (review: the call stack overflowed)', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow) => {
      const a = shadow.layer('deep');
      const deep = `${'d/'.repeat(3000)}x.txt`;
      await writeText(a, deep, 'DEEPNEEDLE\n');
      assert.deepStrictEqual(
        (await grep(a, 'DEEPNEEDLE')).matches.map((m) => m.path),
        [deep],
      );
      assert.deepStrictEqual((await glob(a, '**/x.txt')).paths, [deep]);
      const all = (await list(a, 'd', { recursive: true, limit: 5000 })).entries.map((e) => e.path);
      assert.strictEqual(all.length, 3000);
      assert.strictEqual(all[all.length - 1], deep);
      assertSorted(all);
    });
  });

  it('refuses paths outside the shadow with INVALID_PATH', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow, mp) => {
      const a = await twoAgents(shadow, lower);
      for (const bad of ['../x', '/etc/passwd', 'src/../../x']) {
        await assert.rejects(readText(a, bad), { code: 'INVALID_PATH' }, `readText ${bad}`);
        await assert.rejects(writeText(a, bad, 'x'), { code: 'INVALID_PATH' }, `writeText ${bad}`);
        await assert.rejects(editText(a, bad, 'x', 'y'), { code: 'INVALID_PATH' }, `editText ${bad}`);
        await assert.rejects(list(a, bad), { code: 'INVALID_PATH' }, `list ${bad}`);
        await assert.rejects(grep(a, 'x', { path: bad }), { code: 'INVALID_PATH' }, `grep ${bad}`);
        await assert.rejects(glob(a, '*', { cwd: bad }), { code: 'INVALID_PATH' }, `glob cwd ${bad}`);
      }
      for (const bad of ['../*', '/etc/*', 'src/../../**']) await assert.rejects(glob(a, bad), { code: 'INVALID_PATH' }, `glob ${bad}`);
      await assert.rejects(writeText(a, '', 'x'), { code: 'INVALID_PATH' });
      assertMountShowsB(mp, shadow);
    });
  });
});

describe('file tools: .gitignore rules of nested files, rebased on the root', () => {
  it('applies a nested file only below its directory, and lets the deeper file win as git does', () => {
    const r = IgnoreRules.empty().withFile('', 'a/b/\n*.log\n').withFile('a', '# comment\n!b/\n');
    assert.strictEqual(r.ignores('a/b', true), false, "a/.gitignore's negation beats the root's rule");
    assert.strictEqual(r.ignores('a/b/c.js', false), false);
    assert.strictEqual(r.ignores('a/b/c.log', false), true, "the root's *.log still applies in there");
    const nested = IgnoreRules.empty().withFile('sub', 'generated/\n/anchored\n');
    assert.strictEqual(nested.ignores('generated', true), false, 'a nested rule never reaches outside its directory');
    assert.strictEqual(nested.ignores('sub/generated', true), true);
    assert.strictEqual(nested.ignores('sub/x/generated', true), true, 'a rule without a slash matches at any depth');
    assert.strictEqual(nested.ignores('sub/generated', false), false, 'a rule ending in / is for directories');
    assert.strictEqual(nested.ignores('sub/anchored', false), true);
    assert.strictEqual(nested.ignores('sub/x/anchored', false), false, 'a rule with a leading slash is anchored to its directory');
    // Directory names with glob or gitignore syntax in them are taken literally.
    for (const dir of ['we*ird [1]', '#hash', '!bang']) {
      const w = IgnoreRules.empty().withFile(dir, 'x\n');
      assert.strictEqual(w.ignores(`${dir}/x`, false), true, dir);
      assert.strictEqual(w.ignores(`${dir}/deep/x`, false), true, dir);
      assert.strictEqual(w.ignores('other/x', false), false, dir);
    }
    assert.strictEqual(IgnoreRules.empty().withFile('we*ird', 'x').ignores('weAird/x', false), false);
  });
});

// writeText and editText are one native job each (Overlay::updateFile): the look at the file
// and the write happen under the file's content lock, so concurrent tool calls never
// interleave. Through the three jobs they used to make (stat, read, write, chmod on the
// shadow's serial worker), 40 concurrent edits all read the same content and all but one
// line were lost.
describe('file tools: single native jobs', () => {
  it('concurrent edits of one file, each appending a line, all land exactly once', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow, mp) => {
      const a = await twoAgents(shadow, lower);
      await writeText(a, 'log.txt', 'BEGIN\nEND\n');
      const n = 40;
      const results = await Promise.all(Array.from({ length: n }, (_, i) => editText(a, 'log.txt', 'END\n', `line ${i}\nEND\n`)));
      assert.ok(results.every((r) => r.replacements === 1));
      const lines = (await a.readFile('log.txt')).toString('utf8').split('\n');
      assert.strictEqual(lines[0], 'BEGIN');
      assert.strictEqual(lines[n + 1], 'END');
      for (let i = 0; i < n; i++)
        assert.strictEqual(lines.filter((l) => l === `line ${i}`).length, 1, `line ${i} once in ${lines.join('|')}`);
      assert.strictEqual(lines.length, n + 3); // BEGIN, n lines, END, and '' after the last newline
      // Edits and writes with a mode, interleaved on a file of the folder: each write replaces
      // the whole file with its mode, each edit changes what the write before it left.
      const ops: Array<Promise<unknown>> = [];
      for (let i = 0; i < 10; i++) {
        ops.push(writeText(a, 'script.sh', `#!/bin/sh\n# ${i}\n`, { mode: 0o700 }));
        ops.push(editText(a, 'script.sh', `# ${i}\n`, `# ${i} edited\n`));
      }
      await Promise.all(ops);
      assert.strictEqual((await a.readFile('script.sh')).toString('utf8'), '#!/bin/sh\n# 9 edited\n');
      assert.strictEqual((await a.stat('script.sh')).mode, 0o700);
      assertMountShowsB(mp, shadow);
    });
  });

  it('stat-then-write writes only what the caller saw, and refuses a stale write with CONFLICT', async () => {
    const lower = makeToolsProject();
    await withShadow(lower, async (shadow) => {
      const a = await twoAgents(shadow, lower);
      const seen = await a.readFile('README.md');
      const st = await a.stat('README.md');
      const hash = addon().contentHash(seen);
      // What the caller saw: the folder's file, by hash, size and mtime.
      const first = await writeText(a, 'README.md', 'first\n', { expect: { hash, size: st.size, mtimeMs: st.mtimeMs } });
      assert.strictEqual(first.created, false);
      assert.strictEqual(first.hash, addon().contentHash(Buffer.from('first\n')));
      // A second writer that saw the same old file is refused, and writes nothing.
      await assert.rejects(writeText(a, 'README.md', 'second\n', { expect: { hash } }), (err: Error & { code?: string }) => {
        assert.strictEqual(err.code, 'CONFLICT');
        assert.match(err.message, /content hash is [0-9a-f]{16}, not [0-9a-f]{16}.*nothing was written/);
        return true;
      });
      await assert.rejects(writeText(a, 'README.md', 'second\n', { expect: { size: st.size } }), { code: 'CONFLICT' });
      await assert.rejects(editText(a, 'README.md', 'first', 'third', { expect: { mtimeMs: st.mtimeMs } }), { code: 'CONFLICT' });
      assert.strictEqual((await a.readFile('README.md')).toString('utf8'), 'first\n');
      // The state the first write handed back is what a next write names.
      const next = await writeText(a, 'README.md', 'fourth\n', { expect: { hash: first.hash, mtimeMs: first.mtimeMs } });
      assert.strictEqual((await a.readFile('README.md')).toString('utf8'), 'fourth\n');
      assert.ok(next.hash);
      // Create-only: absent is a precondition too.
      await writeText(a, 'fresh.txt', 'one\n', { expect: { exists: false } });
      await assert.rejects(writeText(a, 'fresh.txt', 'two\n', { expect: { exists: false } }), { code: 'CONFLICT' });
      await assert.rejects(writeText(a, 'gone.txt', 'x', { expect: { exists: true } }), { code: 'CONFLICT' });
      assert.strictEqual((await a.readFile('fresh.txt')).toString('utf8'), 'one\n');
      await assert.rejects(writeText(a, 'fresh.txt', 'x', { expect: { hash: 'nothex' } }), { code: 'INVALID_ARGUMENT' });
      // Of many concurrent create-only writers, exactly one wins.
      const racers = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => writeText(a, 'race.txt', `${i}\n`, { expect: { exists: false } })),
      );
      const won = racers.filter((r) => r.status === 'fulfilled');
      assert.strictEqual(won.length, 1);
      assert.ok(racers.every((r) => r.status === 'fulfilled' || (r.reason as { code?: string }).code === 'CONFLICT'));
    });
  });
});
