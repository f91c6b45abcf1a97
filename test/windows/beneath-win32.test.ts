// The Windows half of apply's confinement (src/platform/win32-beneath.ts) on real temporary folders:
// every operation works beneath the folder's handle, a link at any component is refused with
// nothing written, read or removed through it, names Windows would alias are refused, and a
// folder beside the user's folder (what a link would reach) hashes the same before and after
// every test. Runs only on Windows; on Linux under wine with
//   scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json
//
// What wine (8.0, Debian 12's) models and what it does not:
// - It runs the real NT calls this module makes (NtCreateFile relative to a handle,
//   NtQueryInformationFile, NtSetInformationFile rename/delete, NtQueryDirectoryFile) against
//   its own implementation on a Linux file system, and models 8.3 short names (it makes them up
//   for long names and resolves them on open), so the alias checks really run.
// - It has no reparse points: it cannot make a junction or a Windows symbolic link (mklink /J
//   fails, CreateSymbolicLinkW reports success and makes nothing, FSCTL_SET_REPARSE_POINT is not
//   supported), and it shows a Unix symbolic link as the object it points to, with no
//   FILE_ATTRIBUTE_REPARSE_POINT. So under wine the links these tests plant are Unix links
//   (made with `start /unix /bin/ln`), caught by the module's name check, not by its reparse-tag
//   check; the tag check and OBJ_DONT_REPARSE run only where real reparse points exist. On
//   Windows the same tests plant junctions (no privilege needed).
// - It ignores the *Ex information classes here (FileRenameInformationEx,
//   FileDispositionInformationEx, FileNormalizedNameInformation), so the fallbacks to the plain
//   classes are what runs under wine.
import * as assert from 'assert';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { BeneathWin32, windowsNameProblem } from '../../src/platform/win32-beneath';
import { plantLink, removePlanted } from './links';

type Ffi = typeof import('ffi-rs');

let ffiLoaded: Ffi | undefined;
function ffi(): Ffi {
  if (!ffiLoaded) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    ffiLoaded = require('ffi-rs') as Ffi;
    ffiLoaded.open({ library: 'test-beneath-kernel32', path: 'kernel32.dll' });
    ffiLoaded.open({ library: 'test-beneath-ntdll', path: 'ntdll.dll' });
  }
  return ffiLoaded;
}

/** Whether this is wine (its ntdll exports wine_get_version). */
function underWine(): boolean {
  const f = ffi();
  try {
    f.load({ library: 'test-beneath-ntdll', funcName: 'wine_get_version', retType: f.DataType.String, paramsType: [], paramsValue: [] });
    return true;
  } catch {
    return false;
  }
}

/** The 8.3 short name Windows (or wine) gives the entry at `p`, as GetShortPathNameW reports it. */
function shortName(p: string): string {
  const f = ffi();
  const out = Buffer.alloc(2 * 1024);
  const n = f.load({
    library: 'test-beneath-kernel32',
    funcName: 'GetShortPathNameW',
    retType: f.DataType.U32,
    paramsType: [f.DataType.WString, f.DataType.U8Array, f.DataType.U32],
    paramsValue: [p, out, 1024],
  }) as number;
  assert.ok(n > 0 && n < 1024, `GetShortPathNameW failed for ${p}`);
  return path.win32.basename(out.subarray(0, n * 2).toString('utf16le'));
}

/** Every name, type, mode and content under `dir` (never following links), as one hash. */
function treeHash(dir: string): string {
  const h = crypto.createHash('sha256');
  const visit = (d: string, rel: string): void => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      const st = fs.lstatSync(p);
      h.update(`${rel}/${name}\0${st.mode}\0${st.size}\0`);
      if (st.isDirectory()) visit(p, `${rel}/${name}`);
      else if (st.isFile()) h.update(fs.readFileSync(p));
    }
  };
  visit(dir, '');
  return h.digest('hex');
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
}

async function codeOfAsync(fn: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await fn();
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
}

async function* spans(...s: Array<Buffer | number>): AsyncGenerator<Buffer | number> {
  for (const x of s) yield x;
}

describe('work: apply confined beneath the folder on Windows (beneath-win32)', function () {
  let wine = false;
  let base: string;
  let A: string;
  let outside: string;
  let hashBefore: string;
  let root: BeneathWin32 | undefined;

  before(function () {
    assert.strictEqual(
      process.platform,
      'win32',
      'these tests call the NT API: run them on Windows, or on Linux under wine (scripts/wine-node.sh, see the top of this file)',
    );
    wine = underWine();
  });

  beforeEach(function () {
    base = fs.mkdtempSync(path.join(wine ? 'Z:\\tmp' : os.tmpdir(), 'shadowfs-beneath-'));
    A = path.join(base, 'A');
    outside = path.join(base, 'outside');
    fs.mkdirSync(A);
    fs.mkdirSync(path.join(outside, 'sub'), { recursive: true });
    fs.mkdirSync(path.join(outside, 'empty'));
    fs.writeFileSync(path.join(outside, 'f'), 'the outside file\n');
    fs.writeFileSync(path.join(outside, 'sub', 'g'), 'deeper\n');
    hashBefore = treeHash(outside);
    root = BeneathWin32.open(A);
  });

  afterEach(function () {
    root?.close();
    root = undefined;
    const hashAfter = treeHash(outside);
    removePlanted(base, wine);
    // The folder beside A, which every link planted here points into, is exactly as it was.
    assert.strictEqual(hashAfter, hashBefore, 'the folder outside A changed');
  });

  describe('each operation, beneath the handle', () => {
    it('mkdir makes missing ancestors, accepts a directory already there, and refuses a file there (EEXIST)', () => {
      root!.mkdir('a/b/c');
      assert.ok(fs.statSync(path.join(A, 'a', 'b', 'c')).isDirectory());
      root!.mkdir('a/b/c');
      fs.writeFileSync(path.join(A, 'a', 'file'), 'x');
      assert.strictEqual(
        codeOf(() => root!.mkdir('a/file')),
        'EEXIST',
      );
      assert.strictEqual(
        codeOf(() => root!.mkdir('a/file/under')),
        'NOT_A_DIRECTORY',
      );
    });

    it('write makes a new file, replaces one, and leaves no temporary file behind', () => {
      root!.write('d/e/new.txt', { data: Buffer.from('one'), mode: 0o644 });
      assert.strictEqual(fs.readFileSync(path.join(A, 'd', 'e', 'new.txt'), 'utf8'), 'one');
      root!.write('d/e/new.txt', { data: Buffer.from('two, longer'), mode: 0o644 });
      assert.strictEqual(fs.readFileSync(path.join(A, 'd', 'e', 'new.txt'), 'utf8'), 'two, longer');
      assert.deepStrictEqual(fs.readdirSync(path.join(A, 'd', 'e')), ['new.txt']);
      fs.mkdirSync(path.join(A, 'adir'));
      assert.ok(
        codeOf(() => root!.write('adir', { data: Buffer.from('x'), mode: 0o644 })),
        'writing over a directory must fail',
      );
      assert.ok(fs.statSync(path.join(A, 'adir')).isDirectory());
      assert.deepStrictEqual(fs.readdirSync(A).sort(), ['adir', 'd']);
    });

    it('write of a read-only mode sets the read-only attribute, and a later write replaces such a file', () => {
      root!.write('ro.txt', { data: Buffer.from('locked'), mode: 0o444 });
      assert.strictEqual(fs.statSync(path.join(A, 'ro.txt')).mode & 0o200, 0, 'the file is not read-only');
      root!.write('ro.txt', { data: Buffer.from('replaced'), mode: 0o644 });
      assert.strictEqual(fs.readFileSync(path.join(A, 'ro.txt'), 'utf8'), 'replaced');
      assert.notStrictEqual(fs.statSync(path.join(A, 'ro.txt')).mode & 0o200, 0);
    });

    it('writeFrom writes data and holes at their offsets', async () => {
      await root!.writeFrom('big/file.bin', spans(Buffer.from('head'), 5000, Buffer.alloc(100), Buffer.from('tail'), 7), 0o644);
      const got = fs.readFileSync(path.join(A, 'big', 'file.bin'));
      const want = Buffer.concat([Buffer.from('head'), Buffer.alloc(5100), Buffer.from('tail'), Buffer.alloc(7)]);
      assert.ok(got.equals(want), 'the content differs');
      assert.deepStrictEqual(fs.readdirSync(path.join(A, 'big')), ['file.bin']);
    });

    it('writeFrom removes its temporary file when the spans fail', async () => {
      async function* failing(): AsyncGenerator<Buffer> {
        yield Buffer.from('part');
        throw Object.assign(new Error('the layer went away'), { code: 'GONE' });
      }
      assert.strictEqual(await codeOfAsync(() => root!.writeFrom('w/x.bin', failing(), 0o644)), 'GONE');
      assert.deepStrictEqual(fs.readdirSync(path.join(A, 'w')), []);
    });

    it('readFile, openFile and lstat read beneath the handle', () => {
      fs.mkdirSync(path.join(A, 'r'));
      fs.writeFileSync(path.join(A, 'r', 'f.txt'), 'content');
      assert.strictEqual(root!.readFile('r/f.txt').data.toString(), 'content');
      const { fd, stat } = root!.openFile('r/f.txt');
      try {
        assert.strictEqual(stat.size, 7);
        assert.strictEqual(fs.readFileSync(fd, 'utf8'), 'content');
      } finally {
        fs.closeSync(fd);
      }
      assert.ok(root!.lstat('r/f.txt')!.isFile());
      assert.ok(root!.lstat('r')!.isDirectory());
      assert.strictEqual(root!.lstat('r/missing'), null);
      assert.strictEqual(root!.lstat('missing/deeper'), null);
      assert.strictEqual(root!.lstat('r/f.txt/under'), null);
      assert.strictEqual(
        codeOf(() => root!.openFile('r')),
        'INVALID_ARGUMENT',
      );
      assert.strictEqual(
        codeOf(() => root!.readFile('r/missing')),
        'ENOENT',
      );
      assert.strictEqual(
        codeOf(() => root!.readlink('r/f.txt')),
        'EINVAL',
      );
      // Same object as a path-based stat sees (apply compares identities that way).
      assert.strictEqual(root!.lstat('r/f.txt')!.ino, fs.statSync(path.join(A, 'r', 'f.txt')).ino);
    });

    it('readdir lists names with their types, for the folder and beneath it', () => {
      fs.mkdirSync(path.join(A, 'l', 'sub'), { recursive: true });
      fs.writeFileSync(path.join(A, 'l', 'f'), '');
      fs.writeFileSync(path.join(A, 'top'), '');
      const l = root!.readdir('l').map((e) => `${e.name}:${e.isDirectory() ? 'd' : e.isFile() ? 'f' : e.isSymbolicLink() ? 'l' : '?'}`);
      assert.deepStrictEqual(l.sort(), ['f:f', 'sub:d']);
      assert.deepStrictEqual(
        root!
          .readdir('')
          .map((e) => e.name)
          .sort(),
        ['l', 'top'],
      );
      assert.strictEqual(
        codeOf(() => root!.readdir('top')),
        'NOT_A_DIRECTORY',
      );
    });

    it('chmod sets and clears the read-only attribute', () => {
      fs.writeFileSync(path.join(A, 'm.txt'), 'x');
      root!.chmod('m.txt', 0o444);
      assert.strictEqual(fs.statSync(path.join(A, 'm.txt')).mode & 0o200, 0);
      root!.chmod('m.txt', 0o644);
      assert.notStrictEqual(fs.statSync(path.join(A, 'm.txt')).mode & 0o200, 0);
      assert.strictEqual(
        codeOf(() => root!.chmod('none.txt', 0o644)),
        'ENOENT',
      );
    });

    it('unlink removes a file (read-only too), says false for nothing, and refuses a directory (EISDIR)', () => {
      fs.mkdirSync(path.join(A, 'u'));
      fs.writeFileSync(path.join(A, 'u', 'f'), 'x');
      fs.writeFileSync(path.join(A, 'u', 'ro'), 'x');
      fs.chmodSync(path.join(A, 'u', 'ro'), 0o444);
      assert.strictEqual(root!.unlink('u/f'), true);
      assert.strictEqual(root!.unlink('u/ro'), true);
      assert.deepStrictEqual(fs.readdirSync(path.join(A, 'u')), []);
      assert.strictEqual(root!.unlink('u/f'), false);
      assert.strictEqual(root!.unlink('nothing/f'), false);
      assert.strictEqual(
        codeOf(() => root!.unlink('u')),
        'EISDIR',
      );
      assert.ok(fs.statSync(path.join(A, 'u')).isDirectory());
    });

    it('rmdir removes an empty directory only (ENOTEMPTY, ENOTDIR, ENOENT otherwise)', () => {
      fs.mkdirSync(path.join(A, 'full', 'empty'), { recursive: true });
      fs.writeFileSync(path.join(A, 'full', 'f'), 'x');
      assert.strictEqual(
        codeOf(() => root!.rmdir('full')),
        'ENOTEMPTY',
      );
      assert.strictEqual(
        codeOf(() => root!.rmdir('full/f')),
        'ENOTDIR',
      );
      assert.strictEqual(
        codeOf(() => root!.rmdir('full/none')),
        'ENOENT',
      );
      root!.rmdir('full/empty');
      assert.deepStrictEqual(fs.readdirSync(path.join(A, 'full')), ['f']);
      assert.strictEqual(fs.readFileSync(path.join(A, 'full', 'f'), 'utf8'), 'x');
    });

    it('paths far beyond MAX_PATH work (each step is one name relative to a handle)', async () => {
      const parts = Array.from({ length: 12 }, (_, i) => `${'d'.repeat(40)}${i}`);
      const rel = [...parts, 'leaf.txt'].join('/');
      assert.ok(path.join(A, ...rel.split('/')).length > 500);
      root!.write(rel, { data: Buffer.from('far down'), mode: 0o644 });
      assert.strictEqual(root!.readFile(rel).data.toString(), 'far down');
      await root!.writeFrom(rel, spans(Buffer.from('again')), 0o644);
      assert.strictEqual(root!.readFile(rel).data.toString(), 'again');
      assert.ok(root!.lstat(rel)!.isFile());
      assert.deepStrictEqual(
        root!.readdir(parts.join('/')).map((e) => e.name),
        ['leaf.txt'],
      );
      assert.strictEqual(root!.unlink(rel), true);
      for (let i = parts.length; i > 0; i--) root!.rmdir(parts.slice(0, i).join('/'));
      assert.deepStrictEqual(fs.readdirSync(A), []);
    });
  });

  describe('names Windows would alias or cannot hold', () => {
    const refused = [
      '..',
      'a/../b',
      './x',
      'a//b',
      'x:stream',
      'f.txt::$DATA',
      'CON',
      'nul',
      'NUL.txt',
      'com1',
      'LPT9.log',
      'CON .txt',
      'COM\u00b9',
      'conin$',
      'dot.',
      'space ',
      'a\\b',
      'q?',
      'st*r',
      'p|ipe',
      'lt<',
      'ctl\u0001',
    ];

    for (const rel of refused) {
      it(`refuses ${JSON.stringify(rel)} with INVALID_PATH and makes nothing`, async () => {
        assert.strictEqual(
          codeOf(() => root!.write(rel, { data: Buffer.from('x'), mode: 0o644 })),
          'INVALID_PATH',
        );
        assert.strictEqual(
          codeOf(() => root!.mkdir(rel)),
          'INVALID_PATH',
        );
        assert.strictEqual(await codeOfAsync(() => root!.writeFrom(rel, spans(Buffer.from('x')), 0o644)), 'INVALID_PATH');
        assert.strictEqual(
          codeOf(() => root!.unlink(rel)),
          'INVALID_PATH',
        );
        assert.strictEqual(
          codeOf(() => root!.lstat(rel)),
          'INVALID_PATH',
        );
        assert.deepStrictEqual(fs.readdirSync(A), []);
      });
    }

    it('accepts ordinary names that only look odd', () => {
      for (const n of ['.hidden', 'CONFIG', 'con-fig.txt', 'nul_', 'COM10', 'a b', 'a.b.c', '\u00e9t\u00e9'])
        assert.strictEqual(windowsNameProblem(n), null, n);
      root!.write('CONFIG/COM10/.hidden', { data: Buffer.from('ok'), mode: 0o644 });
      assert.strictEqual(fs.readFileSync(path.join(A, 'CONFIG', 'COM10', '.hidden'), 'utf8'), 'ok');
    });

    it("refuses an 8.3 short name that is another entry's alias (INVALID_PATH) and leaves that entry alone", async () => {
      fs.mkdirSync(path.join(A, 'averylongdirectoryname'));
      fs.writeFileSync(path.join(A, 'averylongfilename.txt'), 'the real one');
      fs.writeFileSync(path.join(A, 'averylongdirectoryname', 'inside'), 'kept');
      const fileAlias = shortName(path.join(A, 'averylongfilename.txt'));
      const dirAlias = shortName(path.join(A, 'averylongdirectoryname'));
      assert.notStrictEqual(fileAlias.toLowerCase(), 'averylongfilename.txt', 'no short name was made: nothing to test');
      assert.strictEqual(windowsNameProblem(fileAlias), null);
      const snapshot = treeHash(A);
      assert.strictEqual(
        codeOf(() => root!.write(fileAlias, { data: Buffer.from('x'), mode: 0o644 })),
        'INVALID_PATH',
      );
      assert.strictEqual(await codeOfAsync(() => root!.writeFrom(fileAlias, spans(Buffer.from('x')), 0o644)), 'INVALID_PATH');
      assert.strictEqual(
        codeOf(() => root!.unlink(fileAlias)),
        'INVALID_PATH',
      );
      assert.strictEqual(
        codeOf(() => root!.chmod(fileAlias, 0o444)),
        'INVALID_PATH',
      );
      assert.strictEqual(
        codeOf(() => root!.readFile(fileAlias)),
        'INVALID_PATH',
      );
      assert.strictEqual(
        codeOf(() => root!.lstat(fileAlias)),
        'INVALID_PATH',
      );
      assert.strictEqual(
        codeOf(() => root!.write(`${dirAlias}/new`, { data: Buffer.from('x'), mode: 0o644 })),
        'INVALID_PATH',
      );
      assert.strictEqual(
        codeOf(() => root!.rmdir(dirAlias)),
        'INVALID_PATH',
      );
      assert.strictEqual(
        codeOf(() => root!.readdir(dirAlias)),
        'INVALID_PATH',
      );
      assert.strictEqual(treeHash(A), snapshot, 'the folder changed');
    });
  });

  describe('links at any component are refused, nothing goes through them', () => {
    it('a link to a directory outside, as an ancestor: every operation is refused (PATH_THROUGH_SYMLINK)', async function () {
      fs.mkdirSync(path.join(A, 'in'));
      const kinds = [plantLink(path.join(A, 'ext'), outside, wine), plantLink(path.join(A, 'in', 'ext2'), outside, wine)];
      this.test!.title += ` [${[...new Set(kinds)].join(', ')}]`;
      for (const via of ['ext', 'in/ext2']) {
        const through = (p: string): string => `${via}/${p}`;
        const expect = 'PATH_THROUGH_SYMLINK';
        assert.strictEqual(
          codeOf(() => root!.write(through('made.txt'), { data: Buffer.from('x'), mode: 0o644 })),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.write(through('f'), { data: Buffer.from('x'), mode: 0o644 })),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.write(through('new/deeper/f'), { data: Buffer.from('x'), mode: 0o644 })),
          expect,
        );
        assert.strictEqual(await codeOfAsync(() => root!.writeFrom(through('big'), spans(Buffer.from('x')), 0o644)), expect);
        assert.strictEqual(
          codeOf(() => root!.mkdir(through('made'))),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.chmod(through('f'), 0o444)),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.unlink(through('f'))),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.unlink(through('sub/g'))),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.rmdir(through('empty'))),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.readFile(through('f'))),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.openFile(through('f'))),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.readdir(through('sub'))),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.lstat(through('f'))),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.readdir(via)),
          expect,
        );
        assert.strictEqual(
          codeOf(() => root!.rmdir(via)),
          wine ? expect : 'ENOTDIR',
        );
      }
    });

    it('a link at the last component: read, chmod and rmdir refuse it; unlink and write act on the link alone or refuse', async function () {
      const kinds = [plantLink(path.join(A, 'dlink'), path.join(outside, 'empty'), wine)];
      let fileLink = true;
      try {
        kinds.push(plantLink(path.join(A, 'flink'), path.join(outside, 'f'), wine));
      } catch (err) {
        fileLink = false; // a file symbolic link needs a privilege on Windows
        kinds.push(`no file link (${(err as Error).message})`);
      }
      this.test!.title += ` [${kinds.join(', ')}]`;
      assert.ok(
        codeOf(() => root!.rmdir('dlink')),
        'rmdir of a link must fail',
      );
      assert.strictEqual(
        codeOf(() => root!.chmod('dlink', 0o444)),
        'PATH_THROUGH_SYMLINK',
      );
      assert.strictEqual(
        codeOf(() => root!.readdir('dlink')),
        'PATH_THROUGH_SYMLINK',
      );
      assert.strictEqual(
        codeOf(() => root!.write('dlink/inner', { data: Buffer.from('x'), mode: 0o644 })),
        'PATH_THROUGH_SYMLINK',
      );
      if (fileLink) {
        assert.strictEqual(
          codeOf(() => root!.readFile('flink')),
          'PATH_THROUGH_SYMLINK',
        );
        assert.strictEqual(
          codeOf(() => root!.openFile('flink')),
          'PATH_THROUGH_SYMLINK',
        );
        assert.strictEqual(
          codeOf(() => root!.chmod('flink', 0o444)),
          'PATH_THROUGH_SYMLINK',
        );
        // Replacing the link: Windows renames over the link itself; under wine the module cannot
        // tell a Unix link's own entry from its target's and refuses. Either way nothing outside moves.
        const wrote = codeOf(() => root!.write('flink', { data: Buffer.from('mine'), mode: 0o644 }));
        if (wrote === undefined) assert.strictEqual(fs.readFileSync(path.join(A, 'flink'), 'utf8'), 'mine');
        else assert.strictEqual(wrote, 'PATH_THROUGH_SYMLINK');
        assert.strictEqual(fs.readFileSync(path.join(outside, 'f'), 'utf8'), 'the outside file\n');
      }
      // Removing the link: the link itself goes (Windows), or it is refused (wine: removing it
      // through wine would remove what it points to). Never the target.
      const removed = codeOf(() => root!.unlink('dlink'));
      if (removed !== undefined) assert.strictEqual(removed, wine ? 'PATH_THROUGH_SYMLINK' : 'EISDIR');
      assert.ok(fs.statSync(path.join(outside, 'empty')).isDirectory());
      if (!wine) {
        const st = root!.lstat('dlink');
        assert.ok(st === null || st.isSymbolicLink(), 'a link shows as a link');
      }
    });

    it('making a symbolic link: made beneath the handle, or refused with nothing left behind', function () {
      fs.writeFileSync(path.join(A, 'target.txt'), 'kept');
      fs.writeFileSync(path.join(A, 'old'), 'replaced only on success');
      const err = codeOf(() => root!.write('old', { link: 'target.txt' }));
      this.test!.title += err ? ` [refused here: ${err}]` : ' [made]';
      if (err) {
        assert.strictEqual(fs.readFileSync(path.join(A, 'old'), 'utf8'), 'replaced only on success');
      } else {
        assert.ok(root!.lstat('old')!.isSymbolicLink());
        assert.strictEqual(root!.readlink('old'), 'target.txt');
      }
      assert.deepStrictEqual(fs.readdirSync(A).sort(), ['old', 'target.txt']);
      assert.strictEqual(fs.readFileSync(path.join(A, 'target.txt'), 'utf8'), 'kept');
    });
  });
});
