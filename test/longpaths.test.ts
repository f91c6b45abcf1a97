// Full-length paths: every path that works in the folder works in the shadow. The folder holds
// a tree 60 directories deep (6,059 bytes of relative path): objects whose path relative to the
// root is just under PATH_MAX (4,096), reached in one call from the root, and objects deeper
// than PATH_MAX, reached from a working directory inside the tree. Their absolute paths are
// all longer than PATH_MAX, so the shadow must reach the folder through directory descriptors.
// Node's fs cannot address such paths; test/native/deepprobe makes the calls (chdir step by
// step, then one relative call), in the plain folder and in the shadow, and the answers must
// match. The folder guard is a deepprobe fingerprint (ctime of every object included), as the
// inotify-based FolderGuard cannot reach that deep either.
import * as assert from 'assert';
import { execFileSync, spawnSync } from 'child_process';
import * as path from 'path';
import { tempDir, withShadow } from './helpers/fixtures';
import { deepProbeBinary } from './helpers/probe';

const DEPTH = 60;
// Directory names of 100 bytes: each level adds 101 bytes to a path.
const dirName = (i: number): string => `d${String(i).padStart(2, '0')}`.padEnd(100, 'x');
const chain = (from: number, to: number): string => Array.from({ length: to - from }, (_, k) => dirName(from + k)).join('/');

// Level 40 is 4,039 bytes from the root; a 50-byte name there makes 4,090 bytes.
const NEAR = chain(0, 40);
const nearName = (stem: string): string => `${NEAR}/${stem.padEnd(50, 'y')}`;
// From a working directory 30 levels down, the rest of the tree is 3,029 bytes more; objects at
// the bottom are 6,100 bytes from the root.
const CWD = chain(0, 30);
const BELOW = chain(30, DEPTH);
const deepName = (stem: string): string => `${BELOW}/${stem.padEnd(40, 'z')}`;

interface Spot {
  cwd: string; // working directory relative to the root ("" = the root)
  rel: string; // path of the call relative to cwd
}
const near = (stem: string): Spot => ({ cwd: '', rel: nearName(stem) });
const deep = (stem: string): Spot => ({ cwd: CWD, rel: deepName(stem) });
const full = (s: Spot): string => (s.cwd ? `${s.cwd}/${s.rel}` : s.rel);

/** Runs deepprobe with `root` + spot.cwd as working directory (entered step by step). */
function dp(root: string, op: string, spot: Spot, ...rest: string[]): string {
  const cds = ['--cd', root];
  for (const part of spot.cwd ? spot.cwd.split('/') : []) cds.push('--cd', part);
  const r = spawnSync(deepProbeBinary(), [...cds, op, spot.rel, ...rest], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status === 2 || r.error) throw new Error(`deepprobe ${op} failed: ${r.stderr}${r.error ?? ''}`);
  return op === 'read' ? r.stdout : r.stdout.replace(/\n$/, '');
}

/** dp that must succeed (an error answer would make two equal answers meaningless). */
function ok(root: string, op: string, spot: Spot, ...rest: string[]): string {
  const out = dp(root, op, spot, ...rest);
  assert.ok(!out.startsWith('errno '), `${op} ${full(spot).length}-byte path in ${root}: ${out}`);
  return out;
}

const fingerprint = (root: string): string => ok(root, 'fingerprint', { cwd: '', rel: '.' });

/** The deep folder; returns its root. */
function makeDeepFolder(): string {
  const root = tempDir('deep');
  const at = (rel: string): Spot => ({ cwd: '', rel });
  ok(root, 'mkdirs', at(chain(0, DEPTH)));
  for (const s of [near, deep]) {
    ok(root, 'write', s('file'), 'content of a deep file\n');
    ok(root, 'write', s('copyup'), 'folder version\n');
    ok(root, 'write', s('gone'), 'to be unlinked in the shadow\n');
    ok(root, 'write', s('moved'), 'to be renamed in the shadow\n');
    ok(root, 'symlink', { cwd: s('link').cwd, rel: 'file-target' }, s('link').rel);
    ok(root, 'setxattr', s('file'), 'user.origin', 'folder');
    ok(root, 'setxattr', s('file'), 'user.second', '2');
  }
  ok(root, 'write', { cwd: '', rel: 'top.txt' }, 'top\n');
  return root;
}

describe('full-length paths (deeper than PATH_MAX in the folder)', function () {
  let lower: string;
  beforeEach(() => {
    lower = makeDeepFolder();
  });
  afterEach(() => {
    // fs.rmSync cannot reach that deep either; rm walks by descriptors.
    execFileSync('rm', ['-rf', lower]);
  });

  it('the test tree really is out of reach of absolute paths', () => {
    const abs = path.join(lower, nearName('file'));
    assert.ok(nearName('file').length >= 4090 && nearName('file').length < 4096, `${nearName('file').length}`);
    assert.ok(Buffer.byteLength(abs) > 4096);
    assert.ok(full(deep('file')).length > 6000);
    // The same call with the absolute path fails: what the shadow must not do.
    assert.match(dp('/', 'stat', { cwd: '', rel: abs }), /^errno ENAMETOOLONG/);
  });

  it('stat, read, readdir, readlink and xattrs of deep objects match the folder', async () => {
    const before = fingerprint(lower);
    await withShadow(
      lower,
      (_s, mp) => {
        for (const s of [near, deep]) {
          const dir: Spot = { cwd: s('x').cwd, rel: path.dirname(s('x').rel) };
          const calls: Array<[string, Spot, ...string[]]> = [
            ['stat', s('file')],
            ['stat', s('link')],
            ['stat', dir],
            ['read', s('file')],
            ['readdir', dir],
            ['readlink', s('link')],
            ['getxattr', s('file'), 'user.origin'],
            ['listxattr', s('file')],
            ['listxattr', dir],
          ];
          for (const [op, spot, ...rest] of calls) {
            const want = ok(lower, op, spot, ...rest);
            assert.strictEqual(ok(mp, op, spot, ...rest), want, `${op} of a ${full(spot).length}-byte path`);
          }
          assert.strictEqual(ok(mp, 'getxattr', s('file'), 'user.second'), '2');
          assert.strictEqual(dp(mp, 'getxattr', s('file'), 'user.none'), dp(lower, 'getxattr', s('file'), 'user.none'));
          assert.strictEqual(dp(mp, 'stat', s('none')), 'errno ENOENT');
        }
      },
      { guard: false },
    );
    assert.strictEqual(fingerprint(lower), before, 'the folder was written');
  });

  it('create, copy-up, rename, unlink and mkdir at full length land in the layer, never in the folder', async () => {
    const before = fingerprint(lower);
    await withShadow(
      lower,
      async (shadow, mp) => {
        for (const s of [near, deep]) {
          const folderIno = ok(lower, 'stat', s('copyup')).split(' ')[4];
          // Copy-up of a folder file keeps its inode number.
          ok(mp, 'append', s('copyup'), 'appended in the shadow\n');
          assert.strictEqual(ok(mp, 'read', s('copyup')), 'folder version\nappended in the shadow\n');
          assert.strictEqual(ok(mp, 'stat', s('copyup')).split(' ')[4], folderIno);
          // A new file, then a rename of a folder file and an unlink (a whiteout).
          ok(mp, 'write', s('created'), 'new in the layer\n');
          assert.strictEqual(ok(mp, 'read', s('created')), 'new in the layer\n');
          ok(mp, 'rename', s('moved'), s('renamed').rel);
          assert.strictEqual(ok(mp, 'read', s('renamed')), 'to be renamed in the shadow\n');
          assert.strictEqual(dp(mp, 'stat', s('moved')), 'errno ENOENT');
          ok(mp, 'unlink', s('gone'));
          assert.strictEqual(dp(mp, 'stat', s('gone')), 'errno ENOENT');
          const newDir: Spot = { cwd: s('x').cwd, rel: `${path.dirname(s('x').rel)}/newdir` };
          ok(mp, 'mkdir', newDir);
          ok(mp, 'write', { cwd: newDir.cwd, rel: `${newDir.rel}/inner` }, 'inner\n');
          assert.strictEqual(ok(mp, 'readdir', newDir), 'inner');
          // xattrs set in the shadow stay in the layer too.
          ok(mp, 'setxattr', s('file'), 'user.layer', 'shadow');
          assert.strictEqual(ok(mp, 'listxattr', s('file')), 'user.layer\nuser.origin\nuser.second');
          const listing = ok(mp, 'readdir', { cwd: s('x').cwd, rel: path.dirname(s('x').rel) }).split('\n');
          assert.ok(listing.includes('newdir'));
          for (const stem of ['copyup', 'created', 'renamed', 'file', 'link'])
            assert.ok(listing.includes(path.basename(s(stem).rel)), `${stem} missing from ${listing.join(',')}`);
          for (const stem of ['gone', 'moved']) assert.ok(!listing.includes(path.basename(s(stem).rel)), `${stem} still listed`);
          // The folder still has its own versions.
          assert.strictEqual(ok(lower, 'read', s('copyup')), 'folder version\n');
          assert.strictEqual(dp(lower, 'stat', s('created')), 'errno ENOENT');
        }
        const changed = new Set((await shadow.changes()).map((c) => `${c.kind} ${c.path}`));
        for (const s of [near, deep]) {
          assert.ok(changed.has(`added ${full(s('created'))}`), [...changed].join('\n'));
          assert.ok(changed.has(`modified ${full(s('copyup'))}`), [...changed].join('\n'));
          assert.ok(changed.has(`deleted ${full(s('gone'))}`), [...changed].join('\n'));
        }
        assert.strictEqual((await shadow.layer('default').readFile(full(deep('created')))).toString(), 'new in the layer\n');
      },
      { guard: false },
    );
    assert.strictEqual(fingerprint(lower), before, 'the folder was written');
  });
});
