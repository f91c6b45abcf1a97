// Integrity levels of a run on Windows (src/platform/win32-integrity.ts): reading a process's
// level, lowering a spawned process's token to Low, the launch order the run path is to use
// (launcher in the job, lowered, then let go), and the per-run TEMP under LocalLow. Runs only on
// Windows; on Linux under wine with
//   scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json
//
// What wine shows and what it does not (wine 8.0): every token reports High integrity
// (S-1-16-12288), and SetTokenInformation(TokenIntegrityLevel) is a stub that returns success and
// changes nothing ("fixme:ntdll:NtSetInformationToken TokenIntegrityLevel stub!"). So under wine
// these tests show that the calls are made as Windows documents them and succeed (the process and
// its token open with the rights asked, the set call is accepted), that the SID we hand Windows
// is S-1-16-4096 by Windows' own conversion, and that lowerIntegrity refuses to report a level it
// has not read back: it throws INTEGRITY_NOT_LOWERED. They do not show a token at Low, and wine
// enforces no integrity level at all: that a Low run cannot write the user's files has never run.
// On a real Windows the same tests expect Low where wine answers High.
import * as assert from 'assert';
import { type ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import {
  INTEGRITY_RID,
  integrityLevel,
  integritySid,
  isIntegrityNotLowered,
  localLowDir,
  lowerIntegrity,
  lowRunEnv,
  lowRunTemp,
  removeLowRunTemp,
} from '../../src/platform/win32-integrity';
import { Win32Job } from '../../src/platform/win32-job';
import { launcherCommand } from '../../src/platform/win32-launcher';
import { plantLink, removePlanted } from './links';

type Ffi = typeof import('ffi-rs');

let loaded: Ffi | undefined;

function ffi(): Ffi {
  if (!loaded) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded = require('ffi-rs') as Ffi;
    loaded.open({ library: 'test-il-kernel32', path: 'kernel32.dll' });
    loaded.open({ library: 'test-il-advapi32', path: 'advapi32.dll' });
  }
  return loaded;
}

function call(library: 'kernel32' | 'advapi32', funcName: string, params: [number, unknown][], ret: 'i64' | 'i32' = 'i32'): number {
  const f = ffi();
  return f.load({
    library: `test-il-${library}`,
    funcName,
    retType: ret === 'i64' ? f.DataType.I64 : f.DataType.I32,
    paramsType: params.map((p) => p[0]),
    paramsValue: params.map((p) => p[1]),
  }) as number;
}

/** Whether this is wine: its ntdll exports wine_get_version, Windows' does not. */
function underWine(): boolean {
  const T = ffi().DataType;
  const ntdll = call('kernel32', 'GetModuleHandleW', [[T.WString, 'ntdll.dll']], 'i64');
  return (
    call(
      'kernel32',
      'GetProcAddress',
      [
        [T.I64, ntdll],
        [T.String, 'wine_get_version'],
      ],
      'i64',
    ) !== 0
  );
}

function readNative(address: number, length: number): Buffer {
  const T = ffi().DataType;
  const out = Buffer.alloc(length);
  ffi().load({
    library: 'test-il-kernel32',
    funcName: 'RtlMoveMemory',
    retType: T.Void,
    paramsType: [T.U8Array, T.I64, T.I64],
    paramsValue: [out, address, length],
  });
  return out;
}

/** Windows' own string form of the SID whose bytes are `sid` (ConvertSidToStringSidW). */
function sidString(sid: Buffer): string {
  const T = ffi().DataType;
  const out = Buffer.alloc(8);
  assert.ok(
    call('advapi32', 'ConvertSidToStringSidW', [
      [T.U8Array, sid],
      [T.U8Array, out],
    ]),
    'ConvertSidToStringSidW failed',
  );
  const str = Number(out.readBigUInt64LE(0));
  const chars = call('kernel32', 'lstrlenW', [[T.I64, str]]);
  const text = readNative(str, chars * 2).toString('utf16le');
  call('kernel32', 'LocalFree', [[T.I64, str]], 'i64');
  return text;
}

/** The bytes of the SID Windows makes of `text` (ConvertStringSidToSidW, GetLengthSid). */
function sidBytes(text: string): Buffer {
  const T = ffi().DataType;
  const out = Buffer.alloc(8);
  assert.ok(
    call('advapi32', 'ConvertStringSidToSidW', [
      [T.WString, text],
      [T.U8Array, out],
    ]),
    `ConvertStringSidToSidW(${text}) failed`,
  );
  const sid = Number(out.readBigUInt64LE(0));
  const length = call('advapi32', 'GetLengthSid', [[T.I64, sid]]);
  const bytes = readNative(sid, length);
  call('kernel32', 'LocalFree', [[T.I64, sid]], 'i64');
  return bytes;
}

/** `node -e` source that waits for one line on stdin, then starts `next` (a node -e source) and stays. */
function waitThenStart(next: string, pidFile: string): string {
  return [
    "process.stdin.once('data', () => {",
    `  const c = require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(next)}], { stdio: 'ignore' });`,
    `  require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(c.pid));`,
    '});',
    'setInterval(() => undefined, 1000);',
  ].join('\n');
}

async function waitFor(file: string, what: string): Promise<string> {
  const deadline = Date.now() + 60_000;
  while (!fs.existsSync(file)) {
    if (Date.now() > deadline) assert.fail(`${what}: ${file} never appeared`);
    await new Promise((r) => setTimeout(r, 50));
  }
  // Written in one call, but read only once it is complete.
  await new Promise((r) => setTimeout(r, 50));
  return fs.readFileSync(file, 'utf8');
}

describe('run: integrity levels (Windows)', function () {
  this.timeout(120_000);
  let wine = false;
  const children: ChildProcess[] = [];
  const jobs: Win32Job[] = [];
  const runIds: string[] = [];

  before(() => {
    assert.strictEqual(
      process.platform,
      'win32',
      'these tests read and set token integrity levels with the Win32 API: run them on Windows, or on Linux under wine (scripts/wine-node.sh, see the top of this file)',
    );
    wine = underWine();
  });

  afterEach(() => {
    for (const j of jobs.splice(0)) j.close();
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill();
    for (const id of runIds.splice(0)) removeLowRunTemp(id);
  });

  function runId(): string {
    const id = `test-${process.pid}-${runIds.length}-${Date.now()}`;
    runIds.push(id);
    return id;
  }

  it('builds the SID Windows knows as S-1-16-4096', () => {
    assert.strictEqual(sidString(integritySid(INTEGRITY_RID.low)), 'S-1-16-4096');
    assert.strictEqual(sidString(integritySid(INTEGRITY_RID.medium)), 'S-1-16-8192');
    assert.deepStrictEqual(integritySid(INTEGRITY_RID.low), sidBytes('S-1-16-4096'));
    const T = ffi().DataType;
    assert.ok(call('advapi32', 'IsValidSid', [[T.U8Array, integritySid(INTEGRITY_RID.low)]]), 'IsValidSid');
  });

  it("reads this process's level and a child's, which inherits it", async () => {
    const self = integrityLevel();
    if (wine) assert.deepStrictEqual(self, { rid: 0x3000, name: 'high' }, 'wine 8 reports every token High (S-1-16-12288)');
    else assert.ok(self.name === 'medium' || self.name === 'high', `a test runner at ${self.name}`);
    const child = spawn(process.execPath, ['-e', 'setInterval(() => undefined, 1000)'], { stdio: 'ignore' });
    children.push(child);
    assert.ok(child.pid);
    assert.deepStrictEqual(integrityLevel(child.pid), self);
    assert.deepStrictEqual(integrityLevel(process.pid), self, 'by pid as without');
  });

  it("lowers a child's token: the calls succeed; the level read back decides", () => {
    const child = spawn(process.execPath, ['-e', 'setInterval(() => undefined, 1000)'], { stdio: 'ignore' });
    children.push(child);
    const pid = child.pid!;
    let lowered;
    try {
      lowered = lowerIntegrity(pid);
    } catch (err) {
      // Only this error is acceptable, and only under wine: a failed Win32 call names itself
      // (err.syscall) and fails the test.
      if (!wine || !isIntegrityNotLowered(err)) throw err;
      assert.strictEqual(err.pid, pid);
      assert.deepStrictEqual(err.level, { rid: 0x3000, name: 'high' });
      assert.match(
        err.message,
        /SetTokenInformation\(TokenIntegrityLevel, S-1-16-4096\) succeeded for process \d+, but its token still reports high/,
      );
      assert.deepStrictEqual(integrityLevel(pid), { rid: 0x3000, name: 'high' }, 'wine ignored the set: the token is as it was');
      return;
    }
    assert.ok(!wine, 'wine 8 does not apply TokenIntegrityLevel; if a newer wine does, this test must say so');
    assert.deepStrictEqual(lowered, { rid: 0x1000, name: 'low' });
    assert.deepStrictEqual(integrityLevel(pid), { rid: 0x1000, name: 'low' });
    // Lowering again leaves a Low token as it is.
    assert.deepStrictEqual(lowerIntegrity(pid), { rid: 0x1000, name: 'low' });
  });

  it('names the Win32 call and GetLastError when a process cannot be opened', () => {
    // No process has this id: ids are multiples of 4 taken from the bottom of a table far smaller
    // than 2^31 (and the low two bits of an id are ignored, so an odd id could name a process).
    const pid = 0x7ffffffc;
    for (const fn of [() => lowerIntegrity(pid), () => integrityLevel(pid)])
      assert.throws(fn, (err: Error & { syscall?: string; errno?: number }) => {
        assert.strictEqual(err.syscall, 'OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION)', err.message);
        assert.strictEqual(err.errno, 87, err.message);
        assert.match(
          err.message,
          /^OpenProcess\(PROCESS_QUERY_LIMITED_INFORMATION\) failed for process 2147483644: GetLastError 87 \(ERROR_INVALID_PARAMETER/,
        );
        return true;
      });
    assert.throws(() => lowerIntegrity(0), /0 is not a process id/);
  });

  it('lowers a process before it starts anything, and what it starts then has its level', async () => {
    const dir = lowRunTemp(runId());
    const pidFile = path.join(dir, 'grandchild');
    const child = spawn(process.execPath, ['-e', waitThenStart('setInterval(() => undefined, 1000)', pidFile)], {
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    children.push(child);
    let expected = { rid: 0x1000, name: 'low' };
    try {
      lowerIntegrity(child.pid!);
    } catch (err) {
      if (!wine || !isIntegrityNotLowered(err)) throw err;
      expected = { rid: 0x3000, name: 'high' };
    }
    child.stdin!.write('go\n');
    const grandchild = Number(await waitFor(pidFile, 'the child did not start its own child'));
    try {
      assert.deepStrictEqual(integrityLevel(grandchild), expected, wine ? 'under wine: High, as every token' : 'born at Low');
    } finally {
      process.kill(grandchild);
    }
  });

  it('in launch order: launcher in the job, lowered, let go; the command runs with TEMP in its LocalLow directory', async () => {
    const id = runId();
    const temp = lowRunTemp(id);
    const job = new Win32Job();
    jobs.push(job);
    // The command writes a file in its TEMP and reports its TEMP and TMP.
    const command = [
      process.execPath,
      '-e',
      "const fs = require('fs'); const p = require('path');" +
        "fs.writeFileSync(p.join(process.env.TEMP, 'made-by-the-command'), 'x');" +
        'process.stdout.write(JSON.stringify([process.env.TEMP, process.env.TMP]));',
    ];
    const cmd = launcherCommand(command, { ...process.env, ...lowRunEnv(temp) });
    const launcher = spawn(cmd.file, cmd.args, { env: cmd.env, detached: true, windowsHide: true, stdio: ['pipe', 'pipe', 'pipe'] });
    children.push(launcher);
    let out = '';
    let errOut = '';
    launcher.stdout.on('data', (d: Buffer) => (out += d.toString()));
    launcher.stderr.on('data', (d: Buffer) => (errOut += d.toString()));
    const exit = new Promise<number | null>((resolve) => launcher.once('close', (code) => resolve(code)));
    job.assign(launcher.pid!);
    let protectedRun = true;
    try {
      assert.deepStrictEqual(lowerIntegrity(launcher.pid!), { rid: 0x1000, name: 'low' });
    } catch (err) {
      if (!wine || !isIntegrityNotLowered(err)) throw err;
      protectedRun = false;
    }
    assert.strictEqual(protectedRun, !wine, 'protected exactly when the token reads Low: on Windows, not under wine');
    launcher.stdin.end('go\n');
    assert.strictEqual(await exit, 0, errOut);
    assert.deepStrictEqual(JSON.parse(out), [temp, temp]);
    assert.ok(fs.existsSync(path.join(temp, 'made-by-the-command')));
  });

  it('makes the run TEMP under LocalLow and removes it with what the command left', () => {
    const localLow = localLowDir();
    assert.match(localLow, /\\AppData\\LocalLow$/i);
    assert.ok(fs.statSync(localLow).isDirectory());
    const id = runId();
    const dir = lowRunTemp(id);
    assert.strictEqual(dir, path.join(localLow, 'shadowfs', 'runs', id));
    assert.deepStrictEqual(fs.readdirSync(dir), []);
    fs.mkdirSync(path.join(dir, 'npm-1234'));
    fs.writeFileSync(path.join(dir, 'npm-1234', 'log'), 'x');
    removeLowRunTemp(id);
    assert.ok(!fs.existsSync(dir));
    assert.ok(fs.existsSync(path.join(localLow, 'shadowfs', 'runs')), 'only the run directory goes');
  });

  // Review: another run (every run can write LocalLow\shadowfs) leaves a junction to the user's
  // files in a run's directory, or in place of the runs directory; the daemon, at Medium, removes
  // the run's directory. Made beneath a LocalLow of the test's own, on wine's Z: drive, where the
  // planted link can be a Unix one (see ./links.ts): on Windows a junction is removed as the link
  // it is; wine shows a Unix link as its target, so there the removal stops at it
  // (PATH_THROUGH_SYMLINK). Either way nothing it names is touched.
  it('removes a run directory without deleting anything through a link a run planted in it or above it', () => {
    const base = fs.mkdtempSync(path.join(wine ? 'Z:\\tmp' : os.tmpdir(), 'shadowfs-lowlow-'));
    try {
      const users = path.join(base, 'users-files');
      fs.mkdirSync(path.join(users, 'docs'), { recursive: true });
      fs.writeFileSync(path.join(users, 'docs', 'thesis.txt'), 'precious');
      const localLow = path.join(base, 'LocalLow');
      fs.mkdirSync(localLow);
      const id = runId();
      const dir = lowRunTemp(id, localLow);
      fs.mkdirSync(path.join(dir, 'npm'));
      fs.writeFileSync(path.join(dir, 'npm', 'log'), 'x');
      const kind = plantLink(path.join(dir, 'npm', 'docs'), path.join(users, 'docs'), wine);
      if (wine) {
        assert.throws(
          () => removeLowRunTemp(id, localLow),
          (err: { code?: string }) => err.code === 'PATH_THROUGH_SYMLINK',
          kind,
        );
      } else {
        removeLowRunTemp(id, localLow);
        assert.ok(!fs.existsSync(dir), `the run directory, and ${kind} in it, are gone`);
      }
      assert.strictEqual(fs.readFileSync(path.join(users, 'docs', 'thesis.txt'), 'utf8'), 'precious');
      // The runs directory itself swapped for a link: the removal stops; the next run's directory
      // replaces the link with a directory of its own.
      removePlanted(path.join(localLow, 'shadowfs', 'runs'), wine);
      plantLink(path.join(localLow, 'shadowfs', 'runs'), users, wine);
      assert.throws(
        () => removeLowRunTemp(id, localLow),
        (err: { code?: string }) => err.code === 'PATH_THROUGH_SYMLINK',
      );
      if (!wine) {
        // (Under wine the link reads as a directory, and only the link check of each step sees it.)
        const again = lowRunTemp(id, localLow);
        assert.deepStrictEqual(fs.readdirSync(again), []);
      }
      assert.strictEqual(fs.readFileSync(path.join(users, 'docs', 'thesis.txt'), 'utf8'), 'precious');
      assert.deepStrictEqual(fs.readdirSync(users), ['docs']);
    } finally {
      removePlanted(base, wine);
    }
  });
});
