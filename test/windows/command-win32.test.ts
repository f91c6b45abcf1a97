// Commands as Windows users write them (src/platform/win32-command.ts, #29 deliverable 3), run for
// real: npm-style .cmd shims on PATH that hand %* to node.exe, which prints the argv it parsed, so
// each argument's round trip through cmd.exe, the batch file and the C runtime is checked whole.
// Runs only on Windows; on Linux under wine with
//   scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json
//
// Under wine, cmd.exe is wine's own (8.0, Debian 12's), not Microsoft's. Where that matters here:
// - Wine's cmd expands %VAR% again inside what %1..%9 and %* put into a batch file's line (it goes
//   on scanning the substituted text); Microsoft's cmd expands a line once. So a `%` argument
//   reaches the batch file intact (the cmd.exe stage is checked with node.exe in the batch file's
//   place, the same line) but the shim's %* re-expands it under wine: the whole `%` round trip
//   through a shim is checked on Windows only and is pending under wine. The `%%cd:~,%` escape
//   itself is Rust std's, which its own tests run against Microsoft's cmd.
// - Wine's cmd does not run npm's own shim template to its end (`endLocal & goto #_undefined_#
//   2>NUL || title %COMSPEC% & "%_prog%" ...`: the goto to a missing label ends the batch file
//   there); the npm-style shim here keeps npm's SETLOCAL / IF EXIST / endLocal shape without it.
// - Wine's cmd ignores /e:off (the `%cd:~,%` substring works either way), so that /e:on matters
//   on a Windows whose registry turned command extensions off is not exercised here. /v:off, which
//   the module passes, keeps `!` text under both cmds (wine's /v:on does not behave like
//   Microsoft's, so delayed expansion itself is not modelled).
// - The checks that the current directory is not searched include one that Microsoft's and wine's
//   cmd both do search it first for a bare name (what the module guards against).
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../../src/common/errors';
import { resolveWindowsCommand, windowsBatchCommand, type WindowsSpawn } from '../../src/platform/win32-command';

type Ffi = typeof import('ffi-rs');

/** Whether this is wine (its ntdll exports wine_get_version). */
function underWine(): boolean {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const f = require('ffi-rs') as Ffi;
  f.open({ library: 'test-command-ntdll', path: 'ntdll.dll' });
  try {
    f.load({ library: 'test-command-ntdll', funcName: 'wine_get_version', retType: f.DataType.String, paramsType: [], paramsValue: [] });
    return true;
  } catch {
    return false;
  }
}

/** Arguments that cmd.exe or the C runtime would read as something else if passed as they are. */
const HARD_ARGS = [
  'plain',
  'a b',
  '  lead and trail  ',
  'say "hi"',
  '"',
  '""',
  'a\\"b',
  '\\\\"',
  'trail\\',
  'trail\\\\',
  'C:\\Program Files\\x\\',
  '',
  'x^y',
  '^',
  'a&b',
  'a&&b',
  'c|d',
  'p<q',
  'p>q',
  '(x)',
  ')',
  'wow!',
  '!OS!',
  'a,b;c=d',
  'tab\tx',
  '*?',
  'é模型',
  '"&echo INJECTED&"',
];

/** Arguments holding `%`, which cmd.exe expands before it looks at quotes. */
const PERCENT_ARGS = ['%PATH%', '100%', '%OS%%CD%', '%~dp0', '%%', '%cd:~,%', '%1', '%*', 'a%OS%b%'];

describe('Windows commands: PATHEXT, .cmd shims through cmd.exe, shell lines (command-win32)', function () {
  let wine = false;
  let base: string;
  let bin: string;
  let work: string;
  let env: NodeJS.ProcessEnv;
  let echoJs: string;

  /** `process.env` without any PATH key, whatever its letter case, plus `extra`. */
  function envWith(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
    const out: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (k.toUpperCase() !== 'PATH' && k.toUpperCase() !== 'PATHEXT') out[k] = v;
    return { ...out, ...extra };
  }

  function run(
    argv: string[],
    opts: { shell?: boolean; env?: NodeJS.ProcessEnv } = {},
  ): { spawn: WindowsSpawn; status: number | null; stdout: string; stderr: string } {
    const e = opts.env ?? env;
    const spawn = resolveWindowsCommand(argv, { shell: opts.shell, cwd: work, env: e });
    return { spawn, ...exec(spawn, e) };
  }

  function exec(s: WindowsSpawn, e: NodeJS.ProcessEnv = env): { status: number | null; stdout: string; stderr: string } {
    const r = spawnSync(s.file, s.args, {
      cwd: work,
      env: e,
      windowsVerbatimArguments: s.windowsVerbatimArguments,
      encoding: 'utf8',
      windowsHide: true,
    });
    if (r.error) throw r.error;
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  function argvOf(out: { stdout: string; stderr: string }): string[] {
    try {
      return JSON.parse(out.stdout) as string[];
    } catch {
      assert.fail(`not the argv as JSON: stdout ${JSON.stringify(out.stdout)}, stderr ${JSON.stringify(out.stderr)}`);
    }
  }

  function noCanaries(): void {
    for (const dir of [work, bin]) {
      const left = fs.readdirSync(dir).filter((n) => n.startsWith('canary'));
      assert.deepStrictEqual(left, [], `a command injected through an argument ran in ${dir}`);
    }
  }

  before(function () {
    if (process.platform !== 'win32') this.skip();
    wine = underWine();
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-command-'));
    bin = path.join(base, 'bin');
    work = path.join(base, 'work');
    fs.mkdirSync(bin);
    fs.mkdirSync(work);
    echoJs = path.join(bin, 'echo-args.js');
    fs.writeFileSync(echoJs, 'process.stdout.write(JSON.stringify(process.argv.slice(2)) + "\\n");\n');
    const bat = (name: string, lines: string[]): void => fs.writeFileSync(path.join(bin, name), lines.join('\r\n') + '\r\n');
    // The simplest shim: node.exe by its full path, the script beside the shim, %* forwarded.
    bat('echo-args.cmd', [`@"${process.execPath}" "%~dp0echo-args.js" %*`]);
    // npm's shape (cmd-shim): node.exe beside the shim if there is one, else `node` from PATH.
    bat('npmish.cmd', [
      '@ECHO off',
      'SETLOCAL',
      'SET dp0=%~dp0',
      'IF EXIST "%dp0%\\node.exe" (',
      '  SET "_prog=%dp0%\\node.exe"',
      ') ELSE (',
      '  SET "_prog=node"',
      ')',
      'endLocal & "%_prog%"  "%dp0%\\echo-args.js" %*',
    ]);
    bat('prog.bat', ['@echo bat']);
    bat('prog.cmd', ['@echo cmd']);
    bat('tool.cmd', ['@echo tool from PATH']);
    fs.writeFileSync(path.join(work, 'tool.cmd'), '@echo tool from the current directory\r\n');
    const systemPath = (process.env.PATH ?? '').split(';').filter((d) => d !== '');
    env = envWith({ Path: [bin, path.dirname(process.execPath), ...systemPath].join(';') });
  });

  after(() => {
    if (base) fs.rmSync(base, { recursive: true, force: true });
  });

  it('finds a bare name through PATH and PATHEXT and runs the .cmd through cmd.exe', () => {
    const r = run(['echo-args', 'x']);
    assert.strictEqual(r.spawn.kind, 'batch');
    assert.strictEqual(r.spawn.windowsVerbatimArguments, true);
    assert.match(r.spawn.args.join(' '), /echo-args\.CMD/i);
    assert.deepStrictEqual(argvOf(r), ['x']);
  });

  it('hands every hard argument to the program behind a .cmd shim as written (spaces, quotes, ^ & | < > ( ) !, trailing \\, empty)', () => {
    const r = run(['echo-args', ...HARD_ARGS]);
    assert.strictEqual(r.status, 0, r.stderr);
    assert.deepStrictEqual(argvOf(r), HARD_ARGS);
    noCanaries();
  });

  it('hands them through an npm-style shim (SETLOCAL, IF EXIST, node from PATH) too', () => {
    const r = run(['npmish', ...HARD_ARGS]);
    assert.strictEqual(r.status, 0, r.stderr);
    assert.deepStrictEqual(argvOf(r), HARD_ARGS);
  });

  it('runs no command smuggled in an argument (the BatBadBut forms: a quote, a \\", a caret before the &)', () => {
    const attacks = [
      '" & echo pwned> canary1.txt & "',
      'a" & echo pwned> canary2.txt & "b',
      '\\" & echo pwned> canary3.txt & \\"',
      '^" & echo pwned> canary4.txt',
      '"" & echo pwned> canary5.txt & ""',
      '" | echo pwned> canary6.txt',
    ];
    for (const shim of ['echo-args', 'npmish']) {
      const r = run([shim, ...attacks]);
      assert.deepStrictEqual(argvOf(r), attacks, shim);
      noCanaries();
    }
  });

  it("passes % through the cmd.exe stage unexpanded (the batch line, with node.exe in the batch file's place)", () => {
    // Same line shape as for a batch file: `/d /e:on /v:off /s /c ""<file>" <args>"`.
    const s = windowsBatchCommand(process.execPath, [echoJs, ...PERCENT_ARGS], env);
    const r = exec(s);
    assert.strictEqual(r.status, 0, r.stderr);
    assert.deepStrictEqual(argvOf(r), PERCENT_ARGS);
  });

  it('passes % through a .cmd shim unexpanded (Windows only: wine re-expands %* inside the batch file)', function () {
    if (wine) this.skip();
    const r = run(['echo-args', ...PERCENT_ARGS]);
    assert.deepStrictEqual(argvOf(r), PERCENT_ARGS);
  });

  it('runs a program (.exe) directly, Node quoting its arguments, with % left alone (no cmd.exe involved)', () => {
    const r = run(['node', echoJs, ...HARD_ARGS, ...PERCENT_ARGS]);
    assert.strictEqual(r.spawn.kind, 'program');
    assert.strictEqual(r.spawn.windowsVerbatimArguments, false);
    assert.strictEqual(path.win32.basename(r.spawn.file).toLowerCase(), 'node.exe');
    assert.deepStrictEqual(argvOf(r), [...HARD_ARGS, ...PERCENT_ARGS]);
    // A name with its extension is tried as is.
    assert.deepStrictEqual(argvOf(run(['node.exe', echoJs, 'y'])), ['y']);
  });

  it('takes the PATHEXT order: .BAT before .CMD by default, as PATHEXT says otherwise; Path in any letter case', () => {
    assert.strictEqual(run(['prog']).stdout.trim(), 'bat');
    assert.strictEqual(run(['prog'], { env: { ...env, PATHEXT: '.CMD;.BAT' } }).stdout.trim(), 'cmd');
    const lower = envWith({ path: bin, pathext: '.cmd' });
    assert.strictEqual(run(['prog'], { env: lower }).stdout.trim(), 'cmd');
  });

  it('never runs a bare name from the current directory (a planted tool.cmd), only as .\\tool', () => {
    // What the guard is for: cmd.exe itself looks in the current directory first.
    const viaCmd = spawnSync(process.env.ComSpec ?? 'cmd.exe', ['/d', '/s', '/c', '"tool"'], {
      cwd: work,
      env,
      windowsVerbatimArguments: true,
      encoding: 'utf8',
    });
    assert.strictEqual(viaCmd.stdout.trim(), 'tool from the current directory', 'cmd.exe searches the current directory first');
    assert.strictEqual(run(['tool']).stdout.trim(), 'tool from PATH');
    assert.strictEqual(run(['.\\tool']).stdout.trim(), 'tool from the current directory');
    const noBin = envWith({ Path: path.dirname(process.execPath) });
    assert.throws(
      () => run(['tool'], { env: noBin }),
      (err: unknown) => err instanceof ShadowError && err.code === 'NOT_FOUND' && /current directory is not searched/.test(err.message),
    );
  });

  it('runs shell lines in cmd.exe: && chains, quotes, and %VAR% as the user wrote them', () => {
    const r = run([`"${process.execPath}" "${echoJs}" "a b" "c&d" && echo after`], { shell: true });
    assert.strictEqual(r.spawn.kind, 'shell');
    assert.strictEqual(r.status, 0, r.stderr);
    const [json, after] = r.stdout.split(/\r?\n/);
    assert.deepStrictEqual(JSON.parse(json), ['a b', 'c&d']);
    assert.strictEqual(after.trim(), 'after');
    const failed = run(['exit 3', '&&', 'echo', 'not reached'], { shell: true });
    assert.strictEqual(failed.status, 3);
    assert.doesNotMatch(failed.stdout, /not reached/);
    assert.strictEqual(run(['echo', '%OS%'], { shell: true }).stdout.trim(), 'Windows_NT');
  });

  it('refuses an argument with a line break for a batch file (INVALID_ARGUMENT), having run nothing', () => {
    assert.throws(
      () => run(['echo-args', 'one\r\necho pwned> canary7.txt']),
      (err: unknown) => err instanceof ShadowError && err.code === 'INVALID_ARGUMENT',
    );
    noCanaries();
  });
});
