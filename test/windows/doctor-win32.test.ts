// `shadowfs doctor` on Windows (src/platform/win32-doctor.ts), run as the CLI in a Windows
// node.exe under wine: the WinFsp line (which DLL, installed or not), the version line (the DLL's
// version resource, compared with the 2.0 the backend needs), whether runs can be protected (a
// child's token lowered to Low and read back), and the antivirus and Dev Drive advice, in the
// human form and in --json with the same facts.
//
// WHAT RUNS. "WinFsp" here is what the registry's InstallDir points at: nothing, the WinFsp test
// double (build-win/winfsp_double, whose DLL carries no version resource) or the stand-in DLL
// (build-win/standin/full, version resource 2.0.99.7). The native module loads them; WinFsp's
// driver does not exist under wine and nothing here mounts. Wine does not apply integrity levels
// (every token reads High; SetTokenInformation(TokenIntegrityLevel) is a stub that succeeds), so
// under wine the runs-protected line says no and why: whether a Low token is what Windows makes of
// it has never run here. Nothing in these tests ran on a real Windows.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { devDriveAdvice, fileSystemOf, fileVersion, winfspNewEnough } from '../../src/platform/win32-doctor';

const repoRoot = path.join(__dirname, '..', '..', '..');
const bin = path.join(repoRoot, 'bin', 'shadowfs.js');
const moduleFile = path.join(repoRoot, 'build-win', 'Release', 'shadowfs.node');
const doubleDir = path.join(repoRoot, 'build-win', 'winfsp_double');
const standinDir = path.join(repoRoot, 'build-win', 'standin', 'full');
const KEY = 'HKLM\\SOFTWARE\\WOW6432Node\\WinFsp';

interface Check {
  name: string;
  required: boolean;
  ok: boolean;
  detail: string;
  facts?: Record<string, string | number | boolean | null>;
}

function reg(...args: string[]): void {
  const r = spawnSync('reg', args, { encoding: 'utf8', windowsHide: true });
  assert.strictEqual(r.status, 0, `reg ${args.join(' ')}: ${r.stdout}${r.stderr}`);
}

function setInstallDir(dir: string | undefined): void {
  if (dir) reg('add', KEY, '/v', 'InstallDir', '/t', 'REG_SZ', '/d', `${dir}\\`, '/f');
  else spawnSync('reg', ['delete', KEY, '/f'], { windowsHide: true });
}

/** Whether this is wine: its registry has HKCU\Software\Wine, a Windows one does not. */
function underWine(): boolean {
  const r = spawnSync('reg', ['query', 'HKCU\\Software\\Wine'], { windowsHide: true });
  return r.status === 0;
}

describe('doctor on Windows: WinFsp and its version, runs protected or not, antivirus and Dev Drive advice (node.exe under wine)', function () {
  this.timeout(120_000);
  let local = '';
  let env: NodeJS.ProcessEnv = {};

  /** doctor --json and doctor in words, each in a fresh node.exe (the native module caches what it found). */
  function doctor(): { status: number | null; healthy: boolean; checks: Check[]; text: string } {
    const json = spawnSync(process.execPath, [bin, 'doctor', '--json'], { env, encoding: 'utf8', timeout: 60_000 });
    const words = spawnSync(process.execPath, [bin, 'doctor'], { env, encoding: 'utf8', timeout: 60_000 });
    let parsed: { healthy: boolean; checks: Check[] };
    try {
      parsed = JSON.parse(json.stdout) as { healthy: boolean; checks: Check[] };
    } catch {
      throw new assert.AssertionError({ message: `doctor --json: ${json.stdout}${json.stderr}` });
    }
    assert.strictEqual(words.status, json.status, 'the same verdict in words and in JSON');
    return { status: json.status, ...parsed, text: words.stdout };
  }

  function find(checks: Check[], name: string): Check {
    const c = checks.find((x) => x.name === name);
    assert.ok(c, `no ${name} check in ${JSON.stringify(checks, null, 1)}`);
    return c;
  }

  /** The human line of check `c`: its mark, its name and the same detail as --json. */
  function lineOf(text: string, c: Check): string {
    const line = text.split(/\r?\n/).find((l) => l.split(/\s+/)[1] === c.name);
    assert.ok(line, `no line for ${c.name} in:\n${text}`);
    assert.strictEqual(line.slice(0, 4).trim(), c.ok ? 'ok' : c.required ? 'FAIL' : 'warn', line);
    assert.ok(line.endsWith(c.detail), `${line}\n  does not end with the JSON detail\n${c.detail}`);
    return line;
  }

  /** The runs-protected line: no under wine, with the reason; on another Windows, whatever the token read back. */
  function checkRunsProtected(checks: Check[], text: string): void {
    const c = find(checks, 'runs-protected');
    lineOf(text, c);
    assert.strictEqual(c.required, false);
    if (underWine()) {
      assert.strictEqual(c.ok, false, c.detail);
      assert.match(
        c.detail,
        /^no: the token still reads High \(S-1-16-12288\) after SetTokenInformation accepted Low: this system does not apply integrity levels; runs are refused unless --unprotected/,
      );
      assert.deepStrictEqual(
        { protected: c.facts?.protected, identity: c.facts?.identity, tokenReads: c.facts?.tokenReads },
        { protected: false, identity: 'low-integrity', tokenReads: 'high' },
      );
    } else {
      assert.strictEqual(c.facts?.protected, c.ok);
      assert.match(c.detail, c.ok ? /^yes: / : /^no: /);
    }
  }

  function checkAdvice(checks: Check[], text: string): void {
    const av = find(checks, 'antivirus');
    lineOf(text, av);
    assert.strictEqual(av.ok, true);
    assert.match(
      av.detail,
      /^advice: real-time scanning .* exclude its mount point .*Add-MpPreference -ExclusionPath .*doctor changes no setting$/,
    );
    const dd = find(checks, 'dev-drive');
    lineOf(text, dd);
    assert.strictEqual(dd.ok, true);
    // No daemon and so no shadow: the folder asked about is the current directory.
    assert.strictEqual(dd.facts?.folder, process.cwd());
    assert.strictEqual(typeof dd.facts?.fileSystem, 'string', dd.detail);
    assert.strictEqual(dd.facts?.refs, String(dd.facts?.fileSystem).toLowerCase() === 'refs');
  }

  before(function () {
    if (process.platform !== 'win32') throw new Error('these tests run on a Windows node.exe: npm run test:windows');
    for (const f of [moduleFile, path.join(doubleDir, 'bin', 'winfsp-x64.dll'), path.join(standinDir, 'bin', 'winfsp-x64.dll')])
      assert.ok(fs.existsSync(f), `${f} is missing: build it with npm run build:win`);
    local = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-doctor-'));
    // A per-user directory of its own: no daemon of another test is found (the daemon line says not running).
    env = { ...process.env, LOCALAPPDATA: local, SHADOWFS_NATIVE_MODULE: moduleFile };
  });

  after(() => {
    setInstallDir(undefined);
    if (local) fs.rmSync(local, { recursive: true, force: true });
  });

  it('without WinFsp: FAIL with where to get it and no version line; runs protected says no and why; the advice lines', () => {
    setInstallDir(undefined);
    const d = doctor();
    assert.strictEqual(d.status, 1, 'without WinFsp the machine is not healthy');
    assert.strictEqual(d.healthy, false);
    const w = find(d.checks, 'winfsp');
    lineOf(d.text, w);
    assert.deepStrictEqual(
      { ok: w.ok, required: w.required, installed: w.facts?.installed },
      { ok: false, required: true, installed: false },
    );
    assert.match(w.detail, /WinFsp is not installed.*https:\/\/winfsp\.dev\/rel\//);
    assert.ok(!d.checks.some((c) => c.name === 'winfsp-version'), 'no DLL, no version line');
    checkRunsProtected(d.checks, d.text);
    checkAdvice(d.checks, d.text);
    assert.match(find(d.checks, 'daemon').detail, /not running/);
  });

  it("with the WinFsp test double: the DLL it loaded, and 'none' for a version it does not carry (a warning: 2.0 or later cannot be told)", () => {
    setInstallDir(doubleDir);
    const d = doctor();
    const dll = path.join(doubleDir, 'bin', 'winfsp-x64.dll');
    const w = find(d.checks, 'winfsp');
    lineOf(d.text, w);
    assert.strictEqual(w.ok, true, w.detail);
    assert.ok(w.detail.toLowerCase().startsWith(`installed; ${dll.toLowerCase()} (no version resource) loaded`), w.detail);
    assert.strictEqual(String(w.facts?.dll).toLowerCase(), dll.toLowerCase());
    assert.strictEqual(w.facts?.loaded, true);
    const v = find(d.checks, 'winfsp-version');
    lineOf(d.text, v);
    assert.deepStrictEqual({ ok: v.ok, required: v.required }, { ok: false, required: false }, 'a warning, not a failure');
    assert.match(
      v.detail,
      /^none: .*winfsp-x64\.dll has no version resource \(read by the native module\), so whether it is 2\.0 or later is not known$/i,
    );
    assert.deepStrictEqual(
      { version: v.facts?.version, minimum: v.facts?.minimum, newEnough: v.facts?.newEnough },
      { version: null, minimum: '2.0', newEnough: null },
    );
    checkRunsProtected(d.checks, d.text);
    checkAdvice(d.checks, d.text);
    // Nothing required fails: the double serves the native API, the module loads.
    assert.strictEqual(d.healthy, true, JSON.stringify(d.checks, null, 1));
    assert.strictEqual(d.status, 0);
  });

  it('with a DLL that carries a version resource (the stand-in, 2.0.99.7): the version, new enough', () => {
    setInstallDir(standinDir);
    const d = doctor();
    const v = find(d.checks, 'winfsp-version');
    lineOf(d.text, v);
    assert.deepStrictEqual(
      { ok: v.ok, version: v.facts?.version, newEnough: v.facts?.newEnough },
      { ok: true, version: '2.0.99.7', newEnough: true },
    );
    assert.match(v.detail, /^2\.0\.99\.7 \(.*winfsp-x64\.dll\); shadowfs needs 2\.0 or later \(DispatcherStopped, first in WinFsp 2\.0/i);
  });

  it("reads a DLL's version resource itself (version.dll) as the native module does, for when the module does not load", () => {
    assert.strictEqual(fileVersion(path.join(standinDir, 'bin', 'winfsp-x64.dll')), '2.0.99.7');
    assert.strictEqual(fileVersion(path.join(doubleDir, 'bin', 'winfsp-x64.dll')), '');
    assert.strictEqual(fileVersion(path.join(local, 'no-such.dll')), '');
  });

  it('compares WinFsp file versions with 2.0 (WinFsp 2023 is 2.0.23075.0; the 1.x line predates DispatcherStopped)', () => {
    assert.strictEqual(winfspNewEnough('2.0.23075.0'), true);
    assert.strictEqual(winfspNewEnough('2.2.25340.0'), true);
    assert.strictEqual(winfspNewEnough('3.0'), true);
    assert.strictEqual(winfspNewEnough('1.12.22339.0'), false);
    assert.strictEqual(winfspNewEnough(''), undefined);
    assert.strictEqual(winfspNewEnough('beta'), undefined);
  });

  it("Dev Drive: the file system of a folder's volume by name; on ReFS the filter policy and 128-bit file IDs are explained", () => {
    const here = fileSystemOf(process.cwd());
    assert.match(here.root, /^[A-Za-z]:\\$/);
    assert.ok(here.fileSystem.length > 0);
    const refs = devDriveAdvice('D:\\src\\app', 'ReFS');
    assert.strictEqual(refs.ok, true);
    assert.match(refs.detail, /^advice: D:\\src\\app is on ReFS, as a Dev Drive is: .*"fsutil devdrv query".*minifilters.*128-bit/);
    assert.match(devDriveAdvice('C:\\src', 'NTFS').detail, /on NTFS, not ReFS: no Dev Drive advice$/);
  });
});
