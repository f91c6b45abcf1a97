// The native module built for Windows (npm run build:win, MinGW) on a Windows node.exe under
// wine: it loads without WinFsp and says WINFSP_MISSING with what to install; it loads in a host
// that is not called node.exe (the delay-load hook, as VS Code's Code.exe needs); and it finds
// WinFsp through the registry and resolves its FUSE3 entry points by name. For that last part
// the test double of WinFsp's FUSE3 layer (test/native/win32/winfsp_standin.cc, written from
// WinFsp's sources; it exports the fsp_fuse3_* names only) is put where the registry points.
// WinFsp's driver cannot run under wine, so nothing here mounts.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { addon, nativeModule, nativeStatus } from '../../src/shadow/native';

const repoRoot = path.join(__dirname, '..', '..', '..');
const moduleFile = path.join(repoRoot, 'build-win', 'Release', 'shadowfs.node');
const standin = (kind: 'full' | 'partial') => path.join(repoRoot, 'build-win', 'standin', kind);
const KEY = 'HKLM\\SOFTWARE\\WOW6432Node\\WinFsp';

function reg(...args: string[]): void {
  const r = spawnSync('reg', args, { encoding: 'utf8', windowsHide: true });
  assert.strictEqual(r.status, 0, `reg ${args.join(' ')}: ${r.stdout}${r.stderr}`);
}

/** Runs `script` in a fresh node (same executable unless `exe`), returning its JSON output. */
function inNode<T>(script: string, exe = process.execPath): T {
  const r = spawnSync(exe, ['-e', script], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, SHADOWFS_NATIVE_MODULE: moduleFile },
  });
  assert.strictEqual(r.status, 0, `${exe} -e ...: status ${r.status}\n${r.stdout}\n${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

describe('the native module built for Windows, on node.exe under wine (loads; WinFsp found or missing; no mount)', function () {
  this.timeout(120_000);
  before(function () {
    if (process.platform !== 'win32') throw new Error('these tests run on a Windows node.exe: npm run test:windows');
    assert.ok(fs.existsSync(moduleFile), `${moduleFile} is missing: build it with npm run build:win`);
  });

  it('loads without WinFsp: the FUSE3 backend built in, the same content hash as on Linux, and WINFSP_MISSING saying what to install', () => {
    const m = nativeModule();
    assert.deepStrictEqual(m.backends, ['winfsp', 'fuse_hl']);
    // The base hash a layer records must be the same on every platform.
    assert.strictEqual(m.contentHash(Buffer.from('abc')), 'e07e2f388280f41c');
    const w = m.winfsp();
    assert.ok(w && !w.available);
    assert.match(w.error, /WinFsp is not installed.*winfsp\.dev/);
    assert.throws(() => addon(), { code: 'WINFSP_MISSING' });
    const st = nativeStatus();
    assert.strictEqual(st.code, 'WINFSP_MISSING');
    assert.match(st.message ?? '', /winget install WinFsp\.WinFsp/);
  });

  it('loads in a host that is not called node.exe (the delay-load hook finds Node-API in the running program)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-host-'));
    const host = path.join(dir, 'Code.exe');
    fs.copyFileSync(process.execPath, host);
    try {
      const out = inNode<{ backends: string[]; hash: string; exe: string }>(
        `const m = require(${JSON.stringify(moduleFile)}); console.log(JSON.stringify({ backends: m.backends, hash: m.contentHash(Buffer.from('abc')), exe: require('path').basename(process.execPath) }))`,
        host,
      );
      assert.deepStrictEqual(out, { backends: ['winfsp', 'fuse_hl'], hash: 'e07e2f388280f41c', exe: 'Code.exe' });
    } finally {
      try {
        fs.rmSync(dir, { recursive: true, force: true });
      } catch {
        // wine may still hold the copied program for a moment: the temporary folder can stay
      }
    }
  });

  it('finds WinFsp through the registry and resolves its FUSE3 entry points; a DLL lacking one is reported (the FUSE3 double: a loader test)', () => {
    const probe = `const m = require(${JSON.stringify(moduleFile)}); console.log(JSON.stringify(m.winfsp()))`;
    try {
      reg('add', KEY, '/v', 'InstallDir', '/t', 'REG_SZ', '/d', `${standin('full')}\\`, '/f');
      const full = inNode<{ available: boolean; dll: string; version: string; resolved: string[]; missing: string[] }>(probe);
      assert.strictEqual(full.available, true, JSON.stringify(full));
      assert.strictEqual(full.version, '2.0.99.7', "the version from the DLL's version resource");
      assert.strictEqual(path.normalize(full.dll).toLowerCase(), path.join(standin('full'), 'bin', 'winfsp-x64.dll').toLowerCase());
      // The double exports the FUSE3 names only: what it lacks is WinFsp's native API, nothing else.
      assert.ok(full.missing.length > 0 && full.missing.every((n) => n.startsWith('Fsp')), JSON.stringify(full.missing));
      assert.ok(full.resolved.includes('fsp_fuse3_new') && full.resolved.includes('fsp_fuse3_loop_mt_31'));
      // doctor reports it so, with the DLL's version, and the module with its backend.
      const doc = spawnSync(process.execPath, [path.join(repoRoot, 'bin', 'shadowfs.js'), 'doctor', '--json'], {
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, SHADOWFS_NATIVE_MODULE: moduleFile },
      });
      const checks = (JSON.parse(doc.stdout) as { checks: Array<{ name: string; ok: boolean; detail: string }> }).checks;
      const w = checks.find((c) => c.name === 'winfsp');
      assert.strictEqual(w?.ok, true, doc.stdout);
      assert.match(w?.detail ?? '', /winfsp-x64\.dll \(version 2\.0\.99\.7\) loaded/);
      assert.deepStrictEqual(
        checks.find((c) => c.name === 'native-module'),
        { name: 'native-module', required: true, ok: true, detail: 'backends: winfsp, fuse_hl' },
      );
      reg('add', KEY, '/v', 'InstallDir', '/t', 'REG_SZ', '/d', `${standin('partial')}\\`, '/f');
      const partial = inNode<{ available: boolean; error: string; missing: string[] }>(probe);
      assert.strictEqual(partial.available, false);
      assert.ok(partial.missing.includes('fsp_fuse3_get_context'), JSON.stringify(partial.missing));
      assert.match(partial.error, /lacks the entry points shadowfs needs/);
      // A key pointing at a folder with no DLL: never a bare-name load from elsewhere.
      reg('add', KEY, '/v', 'InstallDir', '/t', 'REG_SZ', '/d', `${os.tmpdir()}\\`, '/f');
      const none = inNode<{ available: boolean; error: string }>(probe);
      assert.strictEqual(none.available, false);
      assert.match(none.error, /cannot load .*winfsp-x64\.dll/);
    } finally {
      spawnSync('reg', ['delete', KEY, '/f'], { windowsHide: true });
    }
  });
});
