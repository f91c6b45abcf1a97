// Tests of src/patch: the patches formatPatch writes are applied by real git (`git apply --index`
// in a fresh clone) and the resulting working tree is compared byte for byte, mode for mode and
// symlink for symlink with the intended state; reverse application must give back the original.
// The human diff is compared with what `git diff` itself prints. No mount or native build needed.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { formatPatch } from '../src/patch';
import type { FileChange, PatchOptions, Side } from '../src/patch';

/** A folder's state: path -> file or symlink. */
type Tree = Map<string, Side>;

/** git without the user's or the system's configuration, so defaults (quotePath, prefixes) hold. */
const GIT_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_AUTHOR_NAME: 'patch test',
  GIT_AUTHOR_EMAIL: 'patch@test.invalid',
  GIT_COMMITTER_NAME: 'patch test',
  GIT_COMMITTER_EMAIL: 'patch@test.invalid',
  GIT_TERMINAL_PROMPT: '0',
  LC_ALL: 'C',
};

interface GitResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

function runGit(cwd: string, args: string[]): GitResult {
  const r = spawnSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw new Error(`git ${args.join(' ')} could not run: ${r.error.message}`);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs git and returns its output; fails with git's stderr when it exits non-zero. */
function git(cwd: string, ...args: string[]): string {
  const r = runGit(cwd, args);
  assert.strictEqual(r.status, 0, `git ${args.join(' ')} failed (exit ${r.status}):\n${r.stderr}`);
  return r.stdout;
}

const file = (text: string | Buffer, mode = 0o100644): Side => ({ kind: 'file', mode, data: Buffer.from(text) });
const exec = (text: string): Side => file(text, 0o100755);
const symlink = (target: string | Buffer): Side => ({ kind: 'symlink', mode: 0o120000, data: Buffer.from(target) });

/** Makes a working tree hold `tree` (directories created as needed). */
function writeTree(root: string, tree: Tree): void {
  for (const [rel, side] of tree) {
    const abs = path.join(root, rel);
    fs.mkdirSync(path.dirname(abs), { recursive: true });
    if (side.kind === 'symlink') fs.symlinkSync(side.data, abs);
    else {
      fs.writeFileSync(abs, side.data);
      fs.chmodSync(abs, side.mode & 0o777);
    }
  }
}

/**
 * Reads a working tree (without .git) back as a Tree. An empty directory is recorded as
 * "<dir>/" so a deletion that leaves one behind shows up as a difference.
 */
function readTree(root: string, dir = ''): Tree {
  const tree: Tree = new Map();
  const names = fs.readdirSync(path.join(root, dir)).filter((n) => !(dir === '' && n === '.git'));
  if (names.length === 0 && dir !== '') tree.set(`${dir}/`, file(''));
  for (const name of names) {
    const rel = dir ? `${dir}/${name}` : name;
    const abs = path.join(root, rel);
    const st = fs.lstatSync(abs);
    if (st.isSymbolicLink()) tree.set(rel, symlink(fs.readlinkSync(abs, { encoding: 'buffer' })));
    else if (st.isDirectory()) for (const [p, s] of readTree(root, rel)) tree.set(p, s);
    else tree.set(rel, file(fs.readFileSync(abs), st.mode & 0o100 ? 0o100755 : 0o100644));
  }
  return tree;
}

function describeSide(side: Side): string {
  const shown = side.data.length > 60 ? `${side.data.subarray(0, 60).toString('hex')}...` : side.data.toString('hex');
  return `${side.kind} 0o${side.mode.toString(8)} ${side.data.length} bytes [${shown}]`;
}

function assertTreeEquals(actual: Tree, expected: Tree, what: string): void {
  const sorted = (t: Tree): string[] => [...t.keys()].sort();
  assert.deepStrictEqual(sorted(actual), sorted(expected), `${what}: the set of paths`);
  for (const [p, want] of expected) {
    const got = actual.get(p) as Side;
    const same = got.kind === want.kind && got.mode === want.mode && got.data.equals(want.data);
    assert.ok(same, `${what}: ${JSON.stringify(p)} is ${describeSide(got)}, expected ${describeSide(want)}`);
  }
}

/** Every path of either tree, with its two sides (unchanged ones included: they must be skipped). */
function changesBetween(before: Tree, after: Tree): FileChange[] {
  const paths = new Set([...before.keys(), ...after.keys()]);
  return [...paths].map((p) => ({ path: p, old: before.get(p) ?? null, new: after.get(p) ?? null }));
}

class Scratch {
  readonly root = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-patch-'));
  private count = 0;

  dir(label: string): string {
    return path.join(this.root, `${label}-${this.count++}`);
  }

  /** A repository whose single commit holds `tree`. */
  repo(tree: Tree): string {
    const dir = this.dir('repo');
    fs.mkdirSync(dir);
    git(dir, '-c', 'init.defaultBranch=main', 'init', '-q');
    writeTree(dir, tree);
    git(dir, 'add', '-A');
    git(dir, 'commit', '-q', '-m', 'before');
    return dir;
  }

  /** A fresh clone of `repo`, the clean checkout a patch is meant for. */
  clone(repo: string): string {
    const dir = this.dir('clone');
    git(this.root, 'clone', '-q', repo, dir);
    return dir;
  }

  patchFile(text: string): string {
    const p = path.join(this.dir('patch'), 'changes.patch');
    fs.mkdirSync(path.dirname(p));
    fs.writeFileSync(p, text);
    return p;
  }

  remove(): void {
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}

/**
 * `git apply <args> <patch>` must succeed with nothing on stderr but git's whitespace warnings
 * (CRLF lines count as trailing whitespace; the lines are still applied exactly as written).
 */
function gitApply(cwd: string, patch: string, ...args: string[]): void {
  const r = runGit(cwd, ['apply', ...args, patch]);
  assert.strictEqual(r.status, 0, `git apply ${args.join(' ')} failed (exit ${r.status}):\n${r.stderr}`);
  const unexpected: string[] = [];
  const lines = r.stderr.split('\n');
  for (let i = 0; i < lines.length; i++) {
    // "<patch>:<line>: trailing whitespace." is followed by the offending line itself.
    if (lines[i].startsWith(`${patch}:`) && /:\d+: [A-Za-z ,]+\.$/.test(lines[i])) i++;
    else if (lines[i] !== '' && !/^warning: (squelched \d+ whitespace errors?|\d+ lines? adds? whitespace errors?\.)$/.test(lines[i])) {
      unexpected.push(lines[i]);
    }
  }
  assert.deepStrictEqual(unexpected, [], `git apply ${args.join(' ')} printed:\n${r.stderr}`);
}

/**
 * The full check: the patch from `before` to `after`, applied with --index in a clean clone,
 * gives exactly `after` (and an index that matches it); reversed there, it gives `before` again.
 */
function checkRoundTrip(scratch: Scratch, before: Tree, after: Tree, opts: PatchOptions, label: string): string {
  const repo = scratch.repo(before);
  const { text } = formatPatch(changesBetween(before, after), opts);
  const patch = scratch.patchFile(text);
  const checkout = scratch.clone(repo);
  gitApply(checkout, patch, '--index');
  assertTreeEquals(readTree(checkout), after, `${label}: after git apply --index`);
  assert.strictEqual(
    git(checkout, 'status', '--porcelain', '--untracked-files=all', '--ignored').includes('??'),
    false,
    'no untracked files',
  );
  assert.strictEqual(runGit(checkout, ['diff', '--quiet']).status, 0, `${label}: the index matches the working tree after apply --index`);
  gitApply(checkout, patch, '--check', '-R');
  gitApply(checkout, patch, '-R', '--index');
  assertTreeEquals(readTree(checkout), before, `${label}: after git apply -R --index`);
  return text;
}

/** Bytes from a seeded PRNG (mulberry32): reproducible "random" content. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomBytes(random: () => number, length: number, withNul = true): Buffer {
  const bytes = Buffer.alloc(length);
  for (let i = 0; i < length; i++) bytes[i] = Math.floor(random() * 256);
  if (withNul && length > 0) bytes[Math.floor(length / 2)] = 0;
  return bytes;
}

const lines = (n: number, word: string): string => Array.from({ length: n }, (_, i) => `${word} line ${i + 1}\n`).join('');

/** The folder before the changes: one of each shape the patch has to handle. */
function fixtureBefore(): Tree {
  const random = prng(7);
  return new Map<string, Side>([
    ['README.md', file(`# Title\n\n${lines(30, 'readme')}`)],
    ['crlf.txt', file('first\r\nsecond\r\nthird\r\nfourth\r\n')],
    ['no-eol.txt', file('one\ntwo\nno newline at the end')],
    ['gains-eol.txt', file('alpha\nbeta')],
    ['empty.txt', file('')],
    ['image.bin', file(randomBytes(random, 3000))],
    ['small.bin', file(Buffer.from([1, 0, 2]))],
    ['run.sh', exec('#!/bin/sh\necho hi\n')],
    ['link', symlink('README.md')],
    ['with space.txt', file('spaced\nname\n')],
    ['quo"te.txt', file(lines(5, 'quoted'))],
    ['ünïcödé.txt', file('grüße\nnaïve\n')],
    ['src/lib/util.ts', file(`export function add(a: number, b: number) {\n  return a + b;\n}\n\n${lines(12, 'util')}`)],
    ['to-delete.txt', file(lines(4, 'doomed'))],
    ['bin-to-delete.bin', file(randomBytes(random, 100))],
    ['to-rename.txt', file(lines(20, 'moving'))],
    ['rename-edit.ts', file(`function keep() {\n${lines(20, 'kept')}}\n`)],
    ['make-exec.sh', file('#!/bin/sh\necho not yet\n')],
    ['was-exec.sh', exec('#!/bin/sh\necho was\n')],
    ['file-to-link.txt', file('becomes a link\n')],
    ['link-to-file', symlink('run.sh')],
    ['docs/only.md', file('the only file in docs\n')],
    ['gone', file('a file that becomes a directory\n')],
    ['link2', symlink('src/lib')],
    ['asset.bin', file(randomBytes(random, 700))],
    ['mode-and-move.txt', file(lines(6, 'plain'))],
    // Text, but not UTF-8: it cannot travel in a JS string, so it goes out as a binary patch.
    ['latin1.txt', file(Buffer.from('caf\xe9\n', 'latin1'))],
  ]);
}

/** The folder after the changes. */
function fixtureAfter(before: Tree): Tree {
  const random = prng(11);
  const after = new Map(before);
  const edit = (p: string, fn: (text: string) => string): void => {
    after.set(p, { ...(before.get(p) as Side), data: Buffer.from(fn((before.get(p) as Side).data.toString('utf8'))) });
  };
  edit('README.md', (t) => t.replace('readme line 10\n', 'readme line ten\n').replace('readme line 27\n', '') + 'appended\n');
  edit('crlf.txt', (t) => t.replace('second\r\n', 'SECOND\r\n') + 'fifth\r\n');
  edit('no-eol.txt', (t) => t + ', still none');
  edit('gains-eol.txt', (t) => t + '\n');
  edit('empty.txt', () => 'not empty any more\n');
  const image = Buffer.from((before.get('image.bin') as Side).data);
  image.fill(0xab, 1000, 1100);
  after.set('image.bin', file(image));
  after.set('small.bin', file(Buffer.from([1, 0, 3, 4])));
  after.set('link', symlink('src/lib/util.ts'));
  edit('with space.txt', (t) => t.replace('name', 'NAME'));
  after.delete('quo"te.txt');
  after.set('quo"te renamed.txt', before.get('quo"te.txt') as Side);
  edit('ünïcödé.txt', (t) => t + 'café\n');
  edit('src/lib/util.ts', (t) => t.replace('util line 8\n', 'util line 8 changed\n'));
  after.delete('to-delete.txt');
  after.delete('bin-to-delete.bin');
  after.delete('to-rename.txt');
  after.set('moved/renamed.txt', before.get('to-rename.txt') as Side);
  after.delete('rename-edit.ts');
  const renamedEdit = (before.get('rename-edit.ts') as Side).data.toString('utf8').replace('kept line 3\n', 'kept line three\n');
  after.set('src/renamed-edit.ts', file(`${renamedEdit}// one more line\n`));
  after.set('make-exec.sh', { ...(before.get('make-exec.sh') as Side), mode: 0o100755 });
  after.set('was-exec.sh', file('#!/bin/sh\necho not any more\n'));
  after.set('file-to-link.txt', symlink('README.md'));
  after.set('link-to-file', file('a file now\n'));
  after.delete('docs/only.md');
  after.delete('gone');
  after.set('gone/inside.txt', file('the path is a directory now\n'));
  after.set('new dir/deep/new.txt', file('new in a new directory\n'));
  after.set('new.bin', file(randomBytes(random, 5000)));
  after.set('new-empty.txt', file(''));
  after.set('ñew "q" ünicode.txt', file('added\n'));
  after.set('tab\tname.txt', file('a tab in the name\n'));
  after.set('latin1.txt', file(Buffer.from('caf\xe9 cr\xe8me\n', 'latin1')));
  after.set('tools/tool.sh', exec('#!/bin/sh\necho new tool\n'));
  after.delete('link2');
  after.set('moved/link2', before.get('link2') as Side);
  after.delete('asset.bin');
  after.set('assets/asset.bin', before.get('asset.bin') as Side);
  after.delete('mode-and-move.txt');
  after.set('moved/mode-and-move.txt', { ...(before.get('mode-and-move.txt') as Side), mode: 0o100755 });
  return after;
}

describe('patch: git-format patches from in-memory contents, checked with real git', function () {
  this.timeout(20_000);
  let scratch: Scratch;

  before(() => {
    const version = spawnSync('git', ['--version'], { encoding: 'utf8' });
    if (version.error || version.status !== 0) {
      throw new Error(`test/patch.test.ts needs git on PATH to check patches with git apply: ${version.error?.message ?? version.stderr}`);
    }
    scratch = new Scratch();
  });

  after(() => scratch?.remove());

  it('a patch with every kind of change applies with git apply --index byte for byte, and reverses', () => {
    const before = fixtureBefore();
    const after = fixtureAfter(before);
    const text = checkRoundTrip(scratch, before, after, { binary: true }, 'binary patch');
    assert.match(text, /^GIT binary patch$/m);
    assert.match(text, /^rename from "quo\\"te.txt"$/m);
    assert.match(
      text,
      /^diff --git "a\/\\303\\274n\\303\\257c\\303\\266d\\303\\251.txt" "b\/\\303\\274n\\303\\257c\\303\\266d\\303\\251.txt"$/m,
    );
  });

  it('reports each changed path once, with its status, in git order', () => {
    const before = fixtureBefore();
    const { files } = formatPatch(changesBetween(before, fixtureAfter(before)), { binary: true });
    const byPath = new Map(files.map((f) => [f.path, f]));
    assert.strictEqual(byPath.size, files.length, 'each path once');
    const paths = files.map((f) => f.path);
    const gitOrder = [...paths].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    assert.deepStrictEqual(paths, gitOrder);
    assert.strictEqual(byPath.get('run.sh'), undefined, 'unchanged files are left out');
    assert.deepStrictEqual(byPath.get('quo"te renamed.txt'), {
      path: 'quo"te renamed.txt',
      oldPath: 'quo"te.txt',
      status: 'renamed',
      oldMode: 0o100644,
      newMode: 0o100644,
      binary: false,
      additions: 0,
      deletions: 0,
    });
    assert.deepStrictEqual(
      { status: byPath.get('src/renamed-edit.ts')?.status, oldPath: byPath.get('src/renamed-edit.ts')?.oldPath },
      { status: 'renamed', oldPath: 'rename-edit.ts' },
    );
    assert.strictEqual(byPath.get('moved/renamed.txt')?.oldPath, 'to-rename.txt');
    assert.strictEqual(byPath.get('moved/link2')?.oldPath, 'link2');
    assert.deepStrictEqual([byPath.get('assets/asset.bin')?.oldPath, byPath.get('assets/asset.bin')?.binary], ['asset.bin', true]);
    assert.deepStrictEqual(
      [byPath.get('moved/mode-and-move.txt')?.oldMode, byPath.get('moved/mode-and-move.txt')?.newMode],
      [0o100644, 0o100755],
    );
    assert.strictEqual(byPath.get('file-to-link.txt')?.status, 'type-changed');
    assert.strictEqual(byPath.get('link-to-file')?.status, 'type-changed');
    assert.strictEqual(byPath.get('to-delete.txt')?.status, 'deleted');
    assert.strictEqual(byPath.get('new-empty.txt')?.status, 'added');
    assert.deepStrictEqual(
      { ...byPath.get('make-exec.sh') },
      { path: 'make-exec.sh', status: 'modified', oldMode: 0o100644, newMode: 0o100755, binary: false, additions: 0, deletions: 0 },
    );
    assert.strictEqual(byPath.get('image.bin')?.binary, true);
    assert.strictEqual(byPath.get('latin1.txt')?.binary, true);
    assert.deepStrictEqual([byPath.get('README.md')?.additions, byPath.get('README.md')?.deletions], [2, 2]);
  });

  it('without rename detection the patch writes deletions and additions, and still applies', () => {
    const before = fixtureBefore();
    const after = fixtureAfter(before);
    const text = checkRoundTrip(scratch, before, after, { binary: true, renames: false, context: 1 }, 'no renames, context 1');
    assert.doesNotMatch(text, /^rename from/m);
    assert.match(text, /^deleted file mode 100644\nindex [0-9a-f]+\.\.0+\n--- "a\/quo\\"te.txt"$/m);
  });

  it('the human diff says "Binary files ... differ" and its text hunks are what git diff prints', () => {
    const before = fixtureBefore();
    const after = fixtureAfter(before);
    const { text } = formatPatch(changesBetween(before, after), { binary: false });
    assert.doesNotMatch(text, /GIT binary patch/);
    assert.match(text, /^Binary files a\/image.bin and b\/image.bin differ$/m);
    assert.match(text, /^Binary files \/dev\/null and b\/new.bin differ$/m);
    assert.match(text, /^Binary files a\/bin-to-delete.bin and \/dev\/null differ$/m);

    // The same change made in a real repository and shown by git itself.
    const repo = scratch.repo(before);
    for (const p of before.keys()) fs.rmSync(path.join(repo, p));
    writeTree(repo, after);
    git(repo, 'add', '-A');
    const fromGit = git(repo, 'diff', '--cached', '-M', '--no-color', '--no-ext-diff');
    const ours = sectionsByHeader(text);
    const theirs = sectionsByHeader(fromGit);
    for (const header of [
      'diff --git a/README.md b/README.md',
      'diff --git a/empty.txt b/empty.txt',
      'diff --git a/to-delete.txt b/to-delete.txt',
      'diff --git a/new dir/deep/new.txt b/new dir/deep/new.txt',
      'diff --git a/tools/tool.sh b/tools/tool.sh',
      'diff --git a/crlf.txt b/crlf.txt',
      'diff --git a/no-eol.txt b/no-eol.txt',
      'diff --git a/with space.txt b/with space.txt',
      'diff --git "a/\\303\\274n\\303\\257c\\303\\266d\\303\\251.txt" "b/\\303\\274n\\303\\257c\\303\\266d\\303\\251.txt"',
      'diff --git a/src/lib/util.ts b/src/lib/util.ts',
      'diff --git a/link b/link',
      'diff --git a/was-exec.sh b/was-exec.sh',
      'diff --git a/make-exec.sh b/make-exec.sh',
      'diff --git a/image.bin b/image.bin',
      'diff --git "a/quo\\"te.txt" "b/quo\\"te renamed.txt"',
    ]) {
      assert.ok(theirs.has(header), `git diff has a section ${header}`);
      assert.strictEqual(withoutIndexLine(ours.get(header)), withoutIndexLine(theirs.get(header)), header);
    }
  });

  it('random line edits to 30 text files apply byte for byte (seeded; the seed is in any failure)', function () {
    const seed = Number(process.env.PATCH_TEST_SEED ?? Date.now() % 1_000_000);
    try {
      for (let round = 0; round < 3; round++) randomRound(scratch, seed + round);
    } catch (err) {
      // mocha prints the stack, which holds the message as it was when the error was made.
      if (err instanceof Error) {
        const note = `seed ${seed} (rerun with PATCH_TEST_SEED=${seed})`;
        err.message = `${note}: ${err.message}`;
        err.stack = `${note}\n${err.stack}`;
      }
      throw err;
    }
  });

  it('a file rewritten beyond the line diff edit limit still gets a patch that applies', () => {
    const before: Tree = new Map([['big.txt', file(lines(1500, 'old'))]]);
    const after: Tree = new Map([['big.txt', file(lines(1500, 'new').replace(/\n$/, ''))]]);
    const text = checkRoundTrip(scratch, before, after, { binary: true }, 'rewrite');
    assert.match(text, /^@@ -1,1500 \+1,1500 @@$/m);
  });

  it('refuses duplicate paths, paths git cannot name and sides with wrong modes', () => {
    const text = file('x\n');
    const refuses = (changes: FileChange[], code: string): void => {
      assert.throws(
        () => formatPatch(changes, { binary: true }),
        (err: Error & { code?: string }) => err.code === code,
      );
    };
    refuses(
      [
        { path: 'a', old: null, new: text },
        { path: 'a', old: text, new: null },
      ],
      'INVALID_ARGUMENT',
    );
    for (const bad of ['/abs', 'a//b', 'a/../b', './a', 'a/', '', 'nul\0byte'])
      refuses([{ path: bad, old: null, new: text }], 'INVALID_PATH');
    refuses([{ path: 'a', old: null, new: file('x', 0o100600) }], 'INVALID_ARGUMENT');
    refuses([{ path: 'a', old: null, new: { kind: 'symlink', mode: 0o100644, data: Buffer.from('t') } }], 'INVALID_ARGUMENT');
    assert.deepStrictEqual(formatPatch([{ path: 'same', old: text, new: file('x\n') }], { binary: true }), { text: '', files: [] });
  });
});

/** Splits a diff into its "diff --git" sections, keyed by that header line. */
function sectionsByHeader(diff: string): Map<string, string> {
  const sections = new Map<string, string>();
  for (const section of diff.split(/^(?=diff --git )/m)) {
    if (section) sections.set(section.slice(0, section.indexOf('\n')), section);
  }
  return sections;
}

/** Blob ids may be abbreviated differently; everything else must match. */
function withoutIndexLine(section: string | undefined): string | undefined {
  return section?.replace(/^index [0-9a-f]+\.\.[0-9a-f]+( \d+)?\n/m, '');
}

/** One randomized case: 30 text files, random line edits, occasional whole-file changes. */
function randomRound(scratch: Scratch, seed: number): void {
  const random = prng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  // Few distinct words, so lines repeat and the diff has ambiguous choices to make.
  const words = ['alpha', 'beta', 'gamma', '{', '}', '', '  return x;', 'if (y) {', 'ünï', 'tab\there'];
  const line = (): string => `${pick(words)}${random() < 0.5 ? '' : ` ${Math.floor(random() * 5)}`}`;
  const eol = (): string => (random() < 0.15 ? '\r\n' : '\n');
  const text = (count: number): string[] => Array.from({ length: count }, () => line() + eol());
  const render = (ls: string[]): string => {
    // Sometimes the last line has no newline.
    const out = ls.join('');
    return random() < 0.2 ? out.replace(/\r?\n$/, '') : out;
  };

  const before: Tree = new Map();
  const after: Tree = new Map();
  for (let i = 0; i < 30; i++) {
    const name = `f${i}${random() < 0.2 ? ' spaced' : ''}.txt`;
    const dir = random() < 0.3 ? `d${i % 3}/` : '';
    const original = text(Math.floor(random() * 40));
    before.set(dir + name, file(render(original), random() < 0.1 ? 0o100755 : 0o100644));
    const roll = random();
    if (roll < 0.05) continue; // deleted
    const edited = [...original];
    for (let e = Math.floor(random() * 8); e > 0; e--) {
      const at = Math.floor(random() * (edited.length + 1));
      const kind = random();
      if (kind < 0.35) edited.splice(at, 0, ...text(1 + Math.floor(random() * 3)));
      else if (kind < 0.7) edited.splice(at, 1 + Math.floor(random() * 3));
      else if (at < edited.length) edited[at] = line() + eol();
    }
    const target = roll < 0.12 ? `moved/${name}` : dir + name;
    after.set(target, file(render(edited), random() < 0.1 ? 0o100755 : 0o100644));
  }
  after.set(`added-${seed}.txt`, file(render(text(10))));
  const context = 1 + Math.floor(random() * 4);
  checkRoundTrip(scratch, before, after, { binary: true, context }, `random round (context ${context})`);
}
