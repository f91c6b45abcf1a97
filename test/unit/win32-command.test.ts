// Unit tests of src/platform/win32-command.ts that need no Windows: the command lines it builds,
// the PATH x PATHEXT search (over a made-up file list) and what it refuses. The same module runs
// against a real cmd.exe and real batch files in test/windows/command-win32.test.ts (wine).
import * as assert from 'assert';
import { ShadowError } from '../../src/common/errors';
import {
  comSpec,
  findWindowsCommand,
  pathDirectories,
  pathExtensions,
  quoteBatchArgument,
  resolveWindowsCommand,
  windowsEnvValue,
} from '../../src/platform/win32-command';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ShadowError, `expected a ShadowError, got ${String(err)}`);
    return err.code;
  }
  return 'OK';
}

function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as Error).message;
  }
  return '';
}

/** A file system holding exactly `files` (compared without regard to letter case, as NTFS does). */
function filesAt(...files: string[]): (p: string) => boolean {
  const set = new Set(files.map((f) => f.toLowerCase()));
  return (p) => set.has(p.toLowerCase());
}

const ENV = { ComSpec: 'C:\\Windows\\system32\\cmd.exe', Path: 'C:\\bin;C:\\tools', PATHEXT: '.COM;.EXE;.BAT;.CMD' };

describe('unit: Windows command lines (win32-command)', () => {
  it('quotes batch-file arguments as cmd.exe and the C runtime both read them back', () => {
    const table: Array<[string, string]> = [
      ['plain-word_1.txt', 'plain-word_1.txt'],
      ['C:\\dir\\file', 'C:\\dir\\file'],
      ['', '""'],
      ['a b', '"a b"'],
      ['say "hi"', '"say ""hi"""'],
      ['a\\"b', '"a\\\\""b"'],
      ['trail\\', '"trail\\\\"'],
      ['a&b', '"a&b"'],
      ['x^y|z<w>(v)', '"x^y|z<w>(v)"'],
      ['wow!', '"wow!"'],
      ['a,b;c=d', '"a,b;c=d"'],
      ['%PATH%', '"%%cd:~,%PATH%%cd:~,%"'],
      ['100%', '"100%%cd:~,%"'],
      ['tab\tx', '"tab\tx"'],
      ['模型', '模型'],
      ['"&calc&"', '"""&calc&"""'],
    ];
    for (const [arg, quoted] of table) assert.strictEqual(quoteBatchArgument(arg), quoted, JSON.stringify(arg));
  });

  it('never leaves a cmd.exe metacharacter outside quotes: every " is doubled, so quotes pair up', () => {
    for (const arg of ['a"&calc', '"', '""&x', '\\"&x', 'q\\\\"|y', '" & echo pwned> f & "']) {
      const q = quoteBatchArgument(arg);
      // Walking cmd's quote toggles: each character of the argument's own text must be inside.
      let inside = false;
      for (let i = 0; i < q.length; i++) {
        if (q[i] === '"') inside = !inside;
        else assert.ok(inside, `${JSON.stringify(arg)} -> ${q}: ${JSON.stringify(q[i])} at ${i} is outside quotes`);
      }
      assert.strictEqual(inside, false, `${q} leaves a quote open`);
    }
  });

  it('refuses CR, LF and NUL in a batch-file argument with INVALID_ARGUMENT', () => {
    for (const bad of ['a\nb', 'a\rb', 'a\0b'])
      assert.strictEqual(
        codeOf(() => quoteBatchArgument(bad)),
        'INVALID_ARGUMENT',
        JSON.stringify(bad),
      );
    const isFile = filesAt('C:\\bin\\npm.cmd');
    assert.strictEqual(
      codeOf(() => resolveWindowsCommand(['npm', 'ok', 'line\nbreak'], { cwd: 'C:\\w', env: ENV, isFile })),
      'INVALID_ARGUMENT',
    );
  });

  it('runs shell lines through %ComSpec% /d /s /c "<line>" verbatim, words joined with spaces', () => {
    const r = resolveWindowsCommand(['echo a && echo "b c"'], { shell: true, cwd: 'C:\\w', env: ENV });
    assert.deepStrictEqual(r, {
      file: 'C:\\Windows\\system32\\cmd.exe',
      args: ['/d', '/s', '/c', '"echo a && echo "b c""'],
      windowsVerbatimArguments: true,
      kind: 'shell',
    });
    assert.deepStrictEqual(resolveWindowsCommand(['echo', '%OS%'], { shell: true, cwd: 'C:\\w', env: ENV }).args[3], '"echo %OS%"');
    assert.strictEqual(
      codeOf(() => resolveWindowsCommand(['echo a\r\necho b'], { shell: true, cwd: 'C:\\w', env: ENV })),
      'INVALID_ARGUMENT',
    );
  });

  it('finds ComSpec in any letter case; a relative one or none falls back to the system cmd.exe', () => {
    assert.strictEqual(comSpec({ COMSPEC: 'D:\\x\\cmd.exe' }), 'D:\\x\\cmd.exe');
    assert.strictEqual(comSpec({ comspec: 'cmd.exe', SystemRoot: 'D:\\Win' }), 'D:\\Win\\System32\\cmd.exe');
    assert.strictEqual(comSpec({}), 'C:\\Windows\\System32\\cmd.exe');
  });

  it("reads a variable as the child will see it: among Path and PATH, the one Node's spawn keeps (first sorted)", () => {
    assert.strictEqual(windowsEnvValue({ Path: 'a', PATH: 'b' }, 'path'), 'b');
    assert.strictEqual(windowsEnvValue({ path: 'a', Path: 'b' }, 'PATH'), 'b');
    assert.strictEqual(windowsEnvValue({ pAtH: 'x' }, 'PATH'), 'x');
    assert.strictEqual(windowsEnvValue({ Path: undefined, PATH: 'y' }, 'PATH'), 'y');
    assert.strictEqual(windowsEnvValue({}, 'PATH'), undefined);
  });

  it('reads PATHEXT (default .COM;.EXE;.BAT;.CMD) and keeps only full PATH directories', () => {
    assert.deepStrictEqual(pathExtensions({}), ['.COM', '.EXE', '.BAT', '.CMD']);
    assert.deepStrictEqual(pathExtensions({ PathExt: '.cmd;;exe; .Bat ' }), ['.CMD', '.EXE', '.BAT']);
    assert.deepStrictEqual(pathDirectories({ PATH: 'C:\\a;;.;bin;"C:\\Program Files\\x";\\\\srv\\share\\b;\\rooted' }), [
      'C:\\a',
      'C:\\Program Files\\x',
      '\\\\srv\\share\\b',
    ]);
  });

  it('searches each PATH directory for each PATHEXT extension in order; a name with an extension is tried as is first', () => {
    const isFile = filesAt('C:\\bin\\tool.cmd', 'C:\\tools\\tool.exe', 'C:\\tools\\tool.bat', 'C:\\tools\\a.b.exe');
    assert.strictEqual(findWindowsCommand('tool', { cwd: 'C:\\w', env: ENV, isFile }), 'C:\\bin\\tool.CMD');
    assert.strictEqual(findWindowsCommand('TOOL.exe', { cwd: 'C:\\w', env: ENV, isFile }), 'C:\\tools\\TOOL.exe');
    assert.strictEqual(findWindowsCommand('a.b', { cwd: 'C:\\w', env: ENV, isFile }), 'C:\\tools\\a.b.EXE');
    const order = filesAt('C:\\tools\\tool.exe', 'C:\\tools\\tool.bat');
    assert.strictEqual(findWindowsCommand('tool', { cwd: 'C:\\w', env: ENV, isFile: order }), 'C:\\tools\\tool.EXE');
    const batFirst = { ...ENV, PATHEXT: '.BAT;.EXE' };
    assert.strictEqual(findWindowsCommand('tool', { cwd: 'C:\\w', env: batFirst, isFile: order }), 'C:\\tools\\tool.BAT');
  });

  it('never searches the current directory for a bare name, and says what it searched', () => {
    const isFile = filesAt('C:\\w\\git.cmd', 'C:\\w\\git.exe');
    const message = messageOf(() => findWindowsCommand('git', { cwd: 'C:\\w', env: ENV, isFile }));
    assert.match(message, /searched PATH: C:\\bin; C:\\tools/);
    assert.match(message, /\.COM;\.EXE;\.BAT;\.CMD/);
    assert.match(message, /current directory is not searched: name a command there as \.\\git/);
    assert.strictEqual(
      codeOf(() => findWindowsCommand('git', { cwd: 'C:\\w', env: ENV, isFile })),
      'NOT_FOUND',
    );
    // A relative PATH entry would reach the current directory too.
    assert.strictEqual(
      codeOf(() => findWindowsCommand('git', { cwd: 'C:\\w', env: { PATH: '.;C:\\bin' }, isFile })),
      'NOT_FOUND',
    );
    // Named with a path, it is found from cwd.
    assert.strictEqual(findWindowsCommand('.\\git', { cwd: 'C:\\w', env: ENV, isFile }), 'C:\\w\\git.EXE');
    assert.strictEqual(findWindowsCommand('./git.cmd', { cwd: 'C:\\w', env: ENV, isFile }), 'C:\\w\\git.cmd');
    assert.strictEqual(findWindowsCommand('C:\\w\\git', { cwd: 'D:\\elsewhere', env: ENV, isFile }), 'C:\\w\\git.EXE');
  });

  it('refuses names Windows would read otherwise: trailing dot or space, a stream, a drive-relative path', () => {
    const isFile = filesAt('C:\\bin\\x.cmd');
    for (const bad of ['x.cmd.', 'x.cmd ', 'x.cmd::$DATA', 'C:x.cmd', 'a*b', 'bin\\', '']) {
      assert.strictEqual(
        codeOf(() => findWindowsCommand(bad, { cwd: 'C:\\w', env: ENV, isFile })),
        'INVALID_ARGUMENT',
        JSON.stringify(bad),
      );
    }
  });

  it('runs .exe/.com directly (Node quotes), .cmd/.bat through cmd.exe (quoted here), refuses anything else', () => {
    const isFile = filesAt('C:\\bin\\node.exe', 'C:\\bin\\npm.cmd', 'C:\\bin\\build.ps1');
    assert.deepStrictEqual(resolveWindowsCommand(['node', '-e', 'x "y"'], { cwd: 'C:\\w', env: ENV, isFile }), {
      file: 'C:\\bin\\node.EXE',
      args: ['-e', 'x "y"'],
      windowsVerbatimArguments: false,
      kind: 'program',
    });
    assert.deepStrictEqual(resolveWindowsCommand(['npm', 'run', 'a&b', '', '%X%'], { cwd: 'C:\\w', env: ENV, isFile }), {
      file: 'C:\\Windows\\system32\\cmd.exe',
      args: ['/d', '/e:on', '/v:off', '/s', '/c', '""C:\\bin\\npm.CMD" run "a&b" "" "%%cd:~,%X%%cd:~,%""'],
      windowsVerbatimArguments: true,
      kind: 'batch',
    });
    const env = { ...ENV, PATHEXT: '.PS1;.EXE' };
    assert.strictEqual(
      codeOf(() => resolveWindowsCommand(['build'], { cwd: 'C:\\w', env, isFile })),
      'NOT_SUPPORTED',
    );
  });

  it('escapes % in the batch file path too, and refuses a line longer than cmd.exe reads', () => {
    const isFile = filesAt('C:\\a%OS%b\\x.cmd');
    const r = resolveWindowsCommand(['C:\\a%OS%b\\x.cmd'], { cwd: 'C:\\w', env: ENV, isFile });
    assert.strictEqual(r.args[5], '""C:\\a%%cd:~,%OS%%cd:~,%b\\x.cmd""');
    const npm = filesAt('C:\\bin\\npm.cmd');
    assert.strictEqual(
      codeOf(() => resolveWindowsCommand(['npm', 'x'.repeat(8200)], { cwd: 'C:\\w', env: ENV, isFile: npm })),
      'INVALID_ARGUMENT',
    );
    assert.strictEqual(
      codeOf(() => resolveWindowsCommand([], { cwd: 'C:\\w', env: ENV })),
      'INVALID_ARGUMENT',
    );
  });
});
