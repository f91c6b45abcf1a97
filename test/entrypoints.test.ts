// The package's entry points as a front end meets them: `shadowfs/protocol` and
// `shadowfs/client` load in a copy of the package that has no native build and no winston, and
// that client talks to a real daemon; a daemon whose native module cannot load (the same copy)
// still answers version, health and status, and refuses mounts with NATIVE_UNAVAILABLE.
import * as assert from 'assert';
import { spawn, spawnSync, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { FolderGuard, makeProject, repoRoot, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

/** node_modules/shadowfs as npm would install it, minus the native build; `deps` linked beside it. */
function packageCopy(deps: string[]): string {
  const root = tempDir('pkg');
  const pkg = path.join(root, 'node_modules', 'shadowfs');
  fs.mkdirSync(path.join(pkg, 'dist'), { recursive: true });
  fs.copyFileSync(path.join(repoRoot, 'package.json'), path.join(pkg, 'package.json'));
  fs.cpSync(path.join(repoRoot, 'bin'), path.join(pkg, 'bin'), { recursive: true });
  fs.cpSync(path.join(repoRoot, 'dist', 'src'), path.join(pkg, 'dist', 'src'), { recursive: true });
  fs.copyFileSync(path.join(repoRoot, 'dist', 'protocol.schema.json'), path.join(pkg, 'dist', 'protocol.schema.json'));
  assert.ok(!fs.existsSync(path.join(pkg, 'build')), 'the copy has no native build');
  for (const d of deps) {
    const target = path.join(root, 'node_modules', d);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.symlinkSync(path.join(repoRoot, 'node_modules', d), target);
  }
  return root;
}

function node(cwd: string, script: string, env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['-e', script], { cwd, encoding: 'utf8', timeout: 60_000, env: { ...process.env, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const CLIENT_DEPS = ['vscode-jsonrpc', 'zod', 'ffi-rs', '@yuuang'];

describe('package entry points', function () {
  after(() => stopTestDaemon());

  it('shadowfs/protocol and shadowfs/client load without the native module and without winston', () => {
    const root = packageCopy(CLIENT_DEPS);
    const r = node(
      root,
      `
      const protocol = require('shadowfs/protocol');
      const client = require('shadowfs/client');
      const schema = require('shadowfs/protocol.schema.json');
      const loaded = Object.keys(require.cache);
      const bad = loaded.filter((f) => /winston|\\.node$|[\\\\/]native\\.js$|[\\\\/]shadow\\.js$/.test(f));
      console.log(JSON.stringify({
        bad,
        methods: Object.keys(protocol.Requests).length,
        schemaMethods: Object.keys(schema.methods).length,
        client: typeof client.ShadowClient.connect,
        codes: typeof client.ErrorCodes.PEER_REFUSED,
      }));
      `,
    );
    assert.strictEqual(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { bad: string[]; methods: number; schemaMethods: number; client: string; codes: string };
    assert.deepStrictEqual(out.bad, [], 'nothing native, no winston');
    assert.ok(out.methods > 20);
    assert.strictEqual(out.schemaMethods, out.methods);
    assert.strictEqual(out.client, 'function');
    assert.strictEqual(out.codes, 'string');
    // The package's main entry needs what the copy lacks (a deep import is not exported either).
    const deep = node(
      root,
      `try { require('shadowfs/dist/src/shadow/native.js'); console.log('loaded') } catch (e) { console.log(e.code) }`,
    );
    assert.strictEqual(deep.stdout.trim(), 'ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('that client talks to a real daemon: typed requests, notifications, errors with codes', () => {
    // The daemon comes from the repository (it mounts); the client from the copy.
    const up = spawnSync(process.execPath, [path.join(repoRoot, 'bin', 'shadowfs.js'), 'list', '--json'], { encoding: 'utf8' });
    assert.strictEqual(up.status, 0, up.stderr);
    const root = packageCopy(CLIENT_DEPS);
    const lower = makeProject();
    const r = node(
      root,
      `
      (async () => {
        const { ShadowClient } = require('shadowfs/client');
        const c = await ShadowClient.connect({ autostart: false, clientName: 'entrypoint test' });
        const events = [];
        // "changed" (the coalesced change feed, about once a second) may or may not come first
        // on a slow machine: only the request's own event is certain.
        c.on('layer/changed', (p) => { if (p.event !== 'changed') events.push(p.event); });
        const v = await c.request('version');
        const m = await c.request('mount', { folder: ${JSON.stringify(lower)}, name: 'entry' });
        await c.request('layer.write', { shadow: 'entry', agent: 'a', path: 'x.txt', data: Buffer.from('hi').toString('base64') });
        const read = await c.request('layer.read', { shadow: 'entry', agent: 'a', path: 'x.txt' });
        let code;
        try { await c.request('layer.read', { shadow: 'entry', agent: 'a', path: '../etc' }); } catch (e) { code = e.code; }
        await c.request('unmount', { shadow: 'entry' });
        c.close();
        const bad = Object.keys(require.cache).filter((f) => /winston|\\.node$/.test(f) && !/ffi-rs/.test(f));
        console.log(JSON.stringify({ native: v.native.available, mounted: m.mounted, data: Buffer.from(read.data, 'base64').toString(), code, events, bad }));
      })().catch((e) => { console.error(e); process.exit(1); });
      `,
    );
    assert.strictEqual(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.deepStrictEqual(out, { native: true, mounted: true, data: 'hi', code: 'INVALID_PATH', events: ['written'], bad: [] });
  });

  it("the CLI's commands load only what they use: one that asks the daemon loads neither zod, winston, the native module nor the daemon's code", () => {
    // Each CLI call is a new process, and agents and scripts make many: loading the protocol's
    // schemas (zod) and the daemon's code at start-up doubled the time a command took. What a
    // command loaded is listed as the process exits.
    const tracer = path.join(tempDir('cli-loads'), 'trace.js');
    fs.writeFileSync(
      tracer,
      `process.on('exit', () => process.stderr.write('LOADED ' + JSON.stringify(Object.keys(require.cache)) + '\\n'));\n`,
    );
    // (shadow/native.js is the addon's small loader, which doctor uses; ffi-rs checks the daemon's peer.)
    const heavy =
      /[\\/]node_modules[\\/](zod|winston)[\\/]|shadowfs\.node$|[\\/]dist[\\/]src[\\/](daemon|lints|work|run|mcp)[\\/]|[\\/]dist[\\/]src[\\/]shadow[\\/](?!native\.js$)/;
    for (const args of [['list', '--json'], ['status', '--json'], ['layer', 'list', 'nosuch', '--json'], ['--version']]) {
      const r = spawnSync(process.execPath, ['-r', tracer, path.join(repoRoot, 'bin', 'shadowfs.js'), ...args], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      const line = /^LOADED (.*)$/m.exec(r.stderr);
      assert.ok(line, `shadowfs ${args.join(' ')}: no list of loaded modules (exit ${r.status}): ${r.stdout}${r.stderr}`);
      const loaded = JSON.parse(line[1]) as string[];
      assert.ok(
        loaded.some((f) => /[\\/]dist[\\/]src[\\/]cli[\\/]main\.js$/.test(f)),
        'the trace sees the CLI',
      );
      assert.deepStrictEqual(
        loaded.filter((f) => heavy.test(f)),
        [],
        `shadowfs ${args.join(' ')} loaded code it does not use`,
      );
    }
  });

  describe('a daemon whose native module cannot load', () => {
    let daemon: ChildProcess | undefined;
    let runtime = '';
    afterEach(async () => {
      if (daemon && daemon.exitCode === null) {
        daemon.kill('SIGTERM');
        await new Promise((r) => daemon!.once('exit', r));
      }
      daemon = undefined;
    });

    it('starts, answers version, health and status, and refuses mounts with NATIVE_UNAVAILABLE, touching nothing', async () => {
      // The daemon's own dependencies (the MCP SDK, language servers and node-diff3 load only when used).
      const root = packageCopy([...CLIENT_DEPS, 'winston', 'yargs', 'diff', 'ignore']);
      runtime = tempDir('rt-nonative');
      fs.chmodSync(runtime, 0o700);
      const env = { ...process.env, XDG_RUNTIME_DIR: runtime };
      const bin = path.join(root, 'node_modules', 'shadowfs', 'bin', 'shadowfs.js');
      daemon = spawn(process.execPath, [bin, 'serve', '--foreground', '--no-console'], { env, stdio: 'ignore' });
      const lower = makeProject();
      const guard = new FolderGuard(lower);
      const r = node(
        root,
        `
        (async () => {
          const { ShadowClient } = require('shadowfs/client');
          let c;
          for (let i = 0; i < 600 && !c; i++) {
            try { c = await ShadowClient.connect({ autostart: false }); } catch { await new Promise((r) => setTimeout(r, 50)); }
          }
          const version = await c.request('version');
          const health = await c.request('health');
          const status = await c.request('status');
          let err;
          try { await c.request('mount', { folder: ${JSON.stringify(lower)} }); } catch (e) { err = { code: e.code, message: e.message }; }
          c.close();
          console.log(JSON.stringify({ version, health, status, err }));
        })().catch((e) => { console.error(e); process.exit(1); });
        `,
        { XDG_RUNTIME_DIR: runtime },
      );
      assert.strictEqual(r.status, 0, r.stderr);
      const out = JSON.parse(r.stdout) as {
        version: { backends: string[]; native: { available: boolean; code: string; message: string } };
        health: { ok: boolean; native: boolean };
        status: { shadows: unknown[]; native: { code: string } };
        err: { code: string; message: string };
      };
      assert.deepStrictEqual(out.version.backends, []);
      assert.strictEqual(out.version.native.available, false);
      assert.strictEqual(out.version.native.code, 'NATIVE_UNAVAILABLE');
      assert.strictEqual(out.health.ok, true);
      assert.strictEqual(out.health.native, false);
      assert.strictEqual(out.status.native.code, 'NATIVE_UNAVAILABLE');
      assert.strictEqual(out.err.code, 'NATIVE_UNAVAILABLE');
      assert.match(out.err.message, /npm run build/, 'it says what to do');
      // The CLI of that copy says the same, with the code, and exits non-zero.
      const cli = spawnSync(process.execPath, [bin, 'mount', lower, '--json'], { env, encoding: 'utf8' });
      assert.notStrictEqual(cli.status, 0);
      assert.strictEqual(
        (JSON.parse(cli.stdout || cli.stderr) as { error: { code: string } }).error.code,
        'NATIVE_UNAVAILABLE',
        cli.stdout + cli.stderr,
      );
      await guard.check();
    });
  });
});
