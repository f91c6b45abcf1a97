// A whole run on Windows (src/run/runner.ts through the Job Object launcher): the command resolved
// as Windows users write it (win32-command.ts), started at Low integrity (win32-integrity.ts)
// with TEMP and TMP in its own directory under LocalLow, refused when the token cannot be lowered
// unless the caller accepts an unprotected run. Runs only on Windows; on Linux under wine with
//   scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json
//
// WINE DOES NOT ENFORCE INTEGRITY LEVELS. Under wine 8.0 every token reads High and the set is a
// stub, so lowerIntegrity always throws INTEGRITY_NOT_LOWERED: every run here is either refused or
// run with unprotected: true and reported protected: false. That a Low run cannot write the
// user's folder (the protection itself) has never run here; on a real Windows the refusal test
// is skipped and the protected test expects protected: true.
//
// No shadow is mounted here (the daemon's own run method through a WinFsp mount is not reachable
// under wine without WinFsp): the run gets a stand-in Shadow whose layer is a plain directory, so
// what is exercised is the run path from runInShadow to the command and back.
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../../src/common/errors';
import { localLowDir } from '../../src/platform/win32-integrity';
import { runInShadow, type RunOptions } from '../../src/run/runner';
import type { RunAsJob, Shadow } from '../../src/shadow';

type Ffi = typeof import('ffi-rs');

let loaded: Ffi | undefined;
function ffi(): Ffi {
  if (!loaded) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded = require('ffi-rs') as Ffi;
    loaded.open({ library: 'test-run-ntdll', path: 'ntdll.dll' });
    loaded.open({ library: 'test-run-advapi32', path: 'advapi32.dll' });
  }
  return loaded;
}

/** Whether this is wine (its ntdll exports wine_get_version). */
function underWine(): boolean {
  const f = ffi();
  try {
    f.load({ library: 'test-run-ntdll', funcName: 'wine_get_version', retType: f.DataType.String, paramsType: [], paramsValue: [] });
    return true;
  } catch {
    return false;
  }
}

// OWNER, GROUP, DACL and LABEL_SECURITY_INFORMATION: all of a file's descriptor this user may read
// without SeSecurityPrivilege (the rest of the SACL needs it).
const SECURITY_INFORMATION = 0x1 | 0x2 | 0x4 | 0x10;

/** The self-relative security descriptor of `file` as GetFileSecurityW answers it. */
function securityDescriptor(file: string): Buffer {
  const f = ffi();
  const T = f.DataType;
  const needed = Buffer.alloc(4);
  const get = (buf: Buffer): number =>
    f.load({
      library: 'test-run-advapi32',
      funcName: 'GetFileSecurityW',
      retType: T.I32,
      paramsType: [T.WString, T.U32, T.U8Array, T.U32, T.U8Array],
      paramsValue: [file, SECURITY_INFORMATION, buf, buf.length, needed],
    }) as number;
  get(Buffer.alloc(1));
  const size = needed.readUInt32LE(0);
  assert.ok(size > 0, `GetFileSecurityW(${file}) tells no size`);
  const sd = Buffer.alloc(size);
  assert.ok(get(sd), `GetFileSecurityW(${file}) failed`);
  return sd;
}

/** Every file and directory below `dir` (and `dir`) with its security descriptor, as hex. */
function descriptorsOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (p: string): void => {
    out[path.relative(dir, p) || '.'] = securityDescriptor(p).toString('hex');
    if (fs.lstatSync(p).isDirectory()) for (const n of fs.readdirSync(p)) walk(path.join(p, n));
  };
  walk(dir);
  return out;
}

/** A Shadow stand-in: the folder `lower`, and a plain directory `layer` standing for the agent's layer. */
function standIn(lower: string, layer: string): Shadow {
  return {
    lower,
    mountPoint: layer,
    mounted: true,
    // Where the run goes is the shadow's (Shadow.runAs); the runner only spawns there.
    runAs: <T>(_agent: string, job: RunAsJob<T>) => job({ dir: layer, queuedMs: 0 }),
  } as unknown as Shadow;
}

describe('run on Windows: commands as Windows users write them, at Low integrity (wine does not enforce integrity levels)', function () {
  this.timeout(120_000);
  let wine = false;
  let base = '';
  let folder = '';
  let layer = '';
  let bin = '';
  let shadow: Shadow;
  let env: Record<string, string>;
  let n = 0;

  const runId = (): string => `wine-run-${process.pid}-${n++}`;
  const run = (opts: Partial<RunOptions> & { argv: string[] }) => runInShadow(shadow, { agent: 'agent', env, runId: runId(), ...opts });

  before(function () {
    if (process.platform !== 'win32') this.skip();
    wine = underWine();
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-run-win-'));
    folder = path.join(base, 'A');
    layer = path.join(base, 'layer');
    bin = path.join(base, 'bin');
    for (const d of [folder, layer, bin]) fs.mkdirSync(d);
    fs.writeFileSync(path.join(folder, 'package.json'), '{"name": "a"}\n');
    fs.mkdirSync(path.join(folder, 'src'));
    fs.writeFileSync(path.join(folder, 'src', 'index.js'), 'module.exports = 1;\n');
    shadow = standIn(folder, layer);
    fs.writeFileSync(path.join(bin, 'echo-args.js'), 'process.stdout.write(JSON.stringify(process.argv.slice(2)));\n');
    fs.writeFileSync(
      path.join(bin, 'report.js'),
      "const fs = require('fs'); const p = require('path');" +
        "fs.writeFileSync(p.join(process.env.TEMP, 'made-by-the-command'), 'x');" +
        'process.stdout.write(JSON.stringify({ TEMP: process.env.TEMP, TMP: process.env.TMP, cache: process.env.npm_config_cache, cwd: process.cwd() }));',
    );
    // npm's shim shape (cmd-shim): node.exe beside the shim if there is one, else `node` from PATH,
    // %* handed on; as in command-win32.test.ts (wine's cmd does not run npm's own last line).
    const shim = [
      '@ECHO off',
      'SETLOCAL',
      'SET dp0=%~dp0',
      'IF EXIST "%dp0%\\node.exe" (',
      '  SET "_prog=%dp0%\\node.exe"',
      ') ELSE (',
      '  SET "_prog=node"',
      ')',
      'endLocal & "%_prog%"  "%dp0%\\echo-args.js" %*',
    ];
    fs.writeFileSync(path.join(bin, 'npmish.cmd'), shim.join('\r\n') + '\r\n');
    const systemPath = (process.env.PATH ?? '').split(';').filter((d) => d !== '');
    env = { Path: [bin, path.dirname(process.execPath), ...systemPath].join(';') };
  });

  after(() => {
    if (base) fs.rmSync(base, { recursive: true, force: true });
  });

  it('under wine, refuses a run without unprotected (NAMESPACE_UNAVAILABLE, saying how to opt out) and starts nothing', async function () {
    if (!wine) this.skip(); // on Windows the token reads Low and the run goes ahead
    const marker = path.join(layer, 'ran');
    await assert.rejects(
      runInShadow(shadow, {
        agent: 'agent',
        env,
        argv: [process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`],
      }),
      (err: unknown) => {
        assert.ok(err instanceof ShadowError, String(err));
        assert.strictEqual(err.code, 'NAMESPACE_UNAVAILABLE');
        assert.match(err.message, /cannot start this run at Low integrity, which keeps it from writing /);
        assert.match(err.message, /still reports high/);
        assert.match(
          err.message,
          /the command did not run\. To run without that protection, pass --unprotected \(API and RPC: unprotected: true\)\./,
        );
        return true;
      },
    );
    await new Promise((r) => setTimeout(r, 1000));
    assert.ok(!fs.existsSync(marker), 'the command ran although the run was refused');
  });

  it('with unprotected: true, runs and says protected: false and why (wine: the token still reads High)', async () => {
    const r = await run({ argv: [process.execPath, '-e', 'process.stdout.write("hello")'], unprotected: true });
    assert.strictEqual(r.exitCode, 0, r.stderr);
    assert.strictEqual(r.stdout, 'hello');
    if (wine) {
      assert.strictEqual(r.protected, false);
      assert.match(
        r.unprotectedReason ?? '',
        /^the command's token could not be lowered to Low integrity \(SetTokenInformation\(TokenIntegrityLevel, S-1-16-4096\) succeeded for process \d+, but its token still reports high.*\); --unprotected ran it anyway$/,
      );
    } else {
      assert.strictEqual(r.protected, true, 'on Windows the token reads back Low');
      assert.strictEqual(r.unprotectedReason, undefined);
    }
  });

  it("gives the command TEMP, TMP and npm's cache in its own LocalLow directory, gone after the run", async () => {
    const id = runId();
    const r = await runInShadow(shadow, { agent: 'agent', env, runId: id, unprotected: true, argv: ['node', path.join(bin, 'report.js')] });
    assert.strictEqual(r.exitCode, 0, r.stderr);
    const seen = JSON.parse(r.stdout) as { TEMP: string; TMP: string; cache: string; cwd: string };
    const dir = path.join(localLowDir(), 'shadowfs', 'runs', id);
    assert.deepStrictEqual(seen, { TEMP: dir, TMP: dir, cache: path.join(dir, 'npm-cache'), cwd: layer });
    assert.ok(!fs.existsSync(dir), `${dir} is still there after the run`);
  });

  it('runs a shell line through cmd.exe: && and quotes', async () => {
    const r = await run({ argv: ['echo first&& echo "second one"'], shell: true, unprotected: true });
    assert.strictEqual(r.exitCode, 0, r.stderr);
    assert.deepStrictEqual(r.stdout.split(/\r?\n/).filter(Boolean), ['first', '"second one"']);
    const failed = await run({ argv: ['exit /b 3', '&&', 'echo never'], shell: true, unprotected: true });
    assert.strictEqual(failed.exitCode, 3);
    assert.strictEqual(failed.stdout, '');
  });

  it('runs a bare npm-style .cmd shim from PATH with arguments holding spaces, quotes, ^ & | < > and an injection attempt', async () => {
    const args = [
      'install',
      'a b',
      'say "hi"',
      'x^y',
      'a&b',
      'c|d',
      'p<q>r',
      '(x)',
      'wow!',
      'trail\\',
      '',
      '"&echo INJECTED> canary.txt&"',
    ];
    const r = await run({ argv: ['npmish', ...args], unprotected: true });
    assert.strictEqual(r.exitCode, 0, r.stderr);
    assert.deepStrictEqual(JSON.parse(r.stdout), args);
    assert.deepStrictEqual(
      fs.readdirSync(layer).filter((f) => f.startsWith('canary')),
      [],
    );
  });

  it('does not look in the current directory first: a planted npmish.cmd in the layer is not run', async () => {
    fs.writeFileSync(path.join(layer, 'npmish.cmd'), '@echo planted\r\n');
    try {
      const r = await run({ argv: ['npmish', 'ok'], unprotected: true });
      assert.deepStrictEqual(JSON.parse(r.stdout), ['ok']);
    } finally {
      fs.rmSync(path.join(layer, 'npmish.cmd'));
    }
  });

  it('refuses a command that is not there with NOT_FOUND, saying what was searched', async () => {
    await assert.rejects(run({ argv: ['no-such-tool-xyz', 'a'], unprotected: true }), (err: unknown) => {
      assert.ok(err instanceof ShadowError, String(err));
      assert.strictEqual(err.code, 'NOT_FOUND');
      assert.match(err.message, /cannot run "no-such-tool-xyz": no such program or batch file \(searched PATH: /);
      return true;
    });
  });

  it('judges the policy on what the user asked, knowing what it resolved to', async () => {
    const policy = { allow: ['npmish', 'node'], deny: [['npmish', 'publish']] };
    const ok = await run({ argv: ['NPMISH.cmd', 'x'], unprotected: true, policy });
    assert.deepStrictEqual(JSON.parse(ok.stdout), ['x']);
    await assert.rejects(run({ argv: ['npmish', 'publish'], unprotected: true, policy }), /POLICY_DENIED|denies "npmish publish"/);
    await assert.rejects(run({ argv: ['echo hi'], shell: true, unprotected: true, policy }), /does not allow "cmd\.exe"/);
  });

  it("changes no security descriptor of the folder's files (owner, group, DACL, label), byte for byte", async () => {
    const before = descriptorsOf(folder);
    const r = await run({ argv: ['node', '-e', 'process.stdout.write("x")'], cwd: '', unprotected: true });
    assert.strictEqual(r.exitCode, 0, r.stderr);
    await run({ argv: ['npmish', 'x'], unprotected: true });
    assert.deepStrictEqual(descriptorsOf(folder), before);
  });

  it('has no call in the run path that writes a security descriptor, an ACL, an owner or a label', () => {
    const src = path.join(__dirname, '..', '..', '..', 'src');
    const files = [
      ...fs.readdirSync(path.join(src, 'run')).map((f) => path.join(src, 'run', f)),
      ...['win32-job.ts', 'win32-job-limits.ts', 'win32-launcher.ts', 'win32-processes.ts', 'win32-command.ts', 'win32-integrity.ts'].map(
        (f) => path.join(src, 'platform', f),
      ),
    ];
    for (const f of files) {
      const text = fs.readFileSync(f, 'utf8');
      assert.doesNotMatch(
        text,
        /\b(Set(Named|File|Kernel|User|Private)?Security(Info|Object|Descriptor\w*)?|SetEntriesInAcl\w*|AddMandatoryAce|icacls|takeown|cacls)\b/,
        f,
      );
    }
  });
});
