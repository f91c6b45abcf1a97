// The daemon, its client and the CLI on Windows' own runtime: a real named pipe with an
// unpredictable name published in the per-user directory, the hello proofs in both directions,
// the client's check of the pipe server's process, malformed input, a second daemon, and what a
// machine without WinFsp gets (WINFSP_MISSING, nothing touched). Runs only on Windows; on Linux
// under wine with `npm run test:windows` (a Windows node.exe; WinFsp's driver cannot run there,
// so nothing here mounts).
import * as assert from 'assert';
import { type ChildProcess, spawn, spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { ShadowClient } from '../../src/client';
import { daemonPaths, proofOf } from '../../src/common/endpoint';
import { type Endpoint, readEndpoint, writeEndpoint } from '../../src/platform';
import { RpcErrorCodes, ShadowError } from '../../src/protocol';
import { encodeMessage, Raw } from '../helpers/raw-rpc';

const repoRoot = path.join(__dirname, '..', '..', '..');
const bin = path.join(repoRoot, 'bin', 'shadowfs.js');

/** The daemon's hello deadline in these tests; wine is slow, so not much shorter than a second. */
const HELLO_DEADLINE_TEST_MS = 2000;

/**
 * A pipe server of the given name in a process of its own: it says on stdout when a client
 * connects ("connected") and how many bytes arrive ("data N"), and answers nothing.
 */
async function impostor(pipe: string): Promise<{ child: ChildProcess; heard: () => string[] }> {
  const code = `const net=require('net');net.createServer((s)=>{console.log('connected');s.on('data',(d)=>console.log('data '+d.length));s.on('error',()=>{});}).listen(process.argv[1],()=>console.log('listening'));`;
  const child = spawn(process.execPath, ['-e', code, pipe], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const lines = (): string[] => out.split(/\r?\n/).filter(Boolean);
  await eventually(() => lines().includes('listening') || undefined, 30_000, 'the impostor to listen');
  return { child, heard: () => lines().filter((l) => l !== 'listening') };
}

/** A pid no process has: that of a process that ran and ended. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

async function eventually<T>(fn: () => T | undefined | Promise<T | undefined>, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function rejection(p: Promise<unknown>): Promise<ShadowError> {
  try {
    await p;
  } catch (err) {
    return err as ShadowError;
  }
  throw new assert.AssertionError({ message: 'expected a rejection' });
}

/** Hashes every file under dir (path + content): the folder a refused mount must not touch. */
function fingerprint(dir: string): string {
  const h = crypto.createHash('sha256');
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(d, e.name);
      h.update(p);
      if (e.isDirectory()) walk(p);
      else h.update(fs.readFileSync(p));
    }
  };
  walk(dir);
  return h.digest('hex');
}

function cli(args: string[], env: NodeJS.ProcessEnv): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [bin, ...args], { env, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('daemon on Windows: named pipe, proofs both ways, no WinFsp', function () {
  this.timeout(60_000);
  let local = '';
  let env: NodeJS.ProcessEnv = {};
  let daemon: ChildProcess | undefined;
  let endpoint: Endpoint;
  const clients: ShadowClient[] = [];
  const servers: net.Server[] = [];
  const raws: Raw[] = [];

  before(async () => {
    assert.strictEqual(process.platform, 'win32', 'these tests need Windows (on Linux: npm run test:windows, which runs them under wine)');
    local = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-win-'));
    process.env.LOCALAPPDATA = local;
    // A short hello deadline (the default is HELLO_DEADLINE_MS, 5 s), so the silent client's test is quick.
    env = { ...process.env, LOCALAPPDATA: local, SHADOWFS_HELLO_DEADLINE_MS: String(HELLO_DEADLINE_TEST_MS) };
    daemon = spawn(process.execPath, [bin, 'serve', '--foreground', '--no-console'], { env, stdio: 'ignore' });
    endpoint = await eventually(() => readEndpoint(daemonPaths().endpoint), 30_000, 'the daemon to publish its endpoint');
  });

  after(async () => {
    for (const c of clients) c.close();
    for (const r of raws) r.socket.destroy();
    for (const s of servers) s.close();
    if (daemon && daemon.exitCode === null) {
      const exited = new Promise((r) => daemon!.once('exit', r));
      daemon.kill();
      await exited;
    }
    if (local) fs.rmSync(local, { recursive: true, force: true });
  });

  async function connect(): Promise<ShadowClient> {
    const c = await ShadowClient.connect({ autostart: false, clientName: 'windows test' });
    clients.push(c);
    return c;
  }

  async function raw(): Promise<Raw> {
    const r = new Raw(endpoint.pipe);
    raws.push(r);
    await r.ready();
    return r;
  }

  it('publishes an unpredictable pipe name, its pid and a secret in the per-user directory', () => {
    assert.match(endpoint.pipe, /^\\\\\.\\pipe\\shadowfs-[0-9a-f]{32}$/);
    assert.strictEqual(endpoint.pid, daemon!.pid);
    assert.match(endpoint.secret, /^[0-9a-f]{64}$/);
    assert.strictEqual(path.dirname(daemonPaths().endpoint), path.join(local, 'shadowfs'));
  });

  it('a client checks the daemon, proves itself, and gets version, health and status', async () => {
    const c = await connect();
    assert.strictEqual(c.daemonPid, endpoint.pid);
    const v = await c.request('version');
    assert.strictEqual(v.platform, 'win32');
    assert.deepStrictEqual(v.backends, []);
    assert.strictEqual(v.native.available, false);
    assert.strictEqual(v.native.code, 'WINFSP_MISSING');
    const h = await c.request('health');
    assert.strictEqual(h.ok, true);
    assert.strictEqual(h.native, false);
    const s = await c.request('status');
    assert.strictEqual(s.socket, endpoint.pipe);
    assert.deepStrictEqual(s.shadows, []);
  });

  it('refuses to mount without WinFsp (WINFSP_MISSING, saying what to install) and touches nothing', async () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-win-folder-'));
    try {
      fs.writeFileSync(path.join(folder, 'a.txt'), 'hello');
      const before = fingerprint(folder);
      const c = await connect();
      const err = await rejection(c.request('mount', { folder }));
      assert.strictEqual(err.code, 'WINFSP_MISSING');
      assert.match(err.message, /winfsp\.dev/);
      assert.strictEqual(fingerprint(folder), before);
      assert.deepStrictEqual((await c.request('list')).shadows, []);
      // The CLI says the same, with the code, and fails.
      const r = cli(['mount', folder, '--json'], env);
      assert.notStrictEqual(r.status, 0);
      assert.strictEqual((JSON.parse(r.out) as { error: { code: string } }).error.code, 'WINFSP_MISSING', r.out);
      assert.strictEqual(fingerprint(folder), before);
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it('answers nothing but hello before a connection proves itself, and closes one whose proof is wrong', async () => {
    const r = await raw();
    r.request(1, 'status');
    const refused = await r.next();
    assert.strictEqual(refused?.error?.code, RpcErrorCodes.PeerRefused);
    assert.strictEqual(refused?.error?.data?.code, 'PEER_REFUSED');
    r.request(2, 'hello', { nonce: 'ab'.repeat(16), proof: '00'.repeat(32) });
    const bad = await r.next();
    assert.strictEqual(bad?.error?.data?.code, 'PEER_REFUSED');
    await eventually(() => r.closed, 10_000, 'the daemon to close the connection');
    // The right proof opens the door.
    const ok = await raw();
    const nonce = crypto.randomBytes(16).toString('hex');
    ok.request(1, 'hello', { nonce, proof: proofOf(endpoint.secret, 'client', nonce) });
    const hello = await ok.next();
    assert.strictEqual((hello?.result as { proof: string }).proof, proofOf(endpoint.secret, 'server', nonce));
    ok.request(2, 'health');
    assert.strictEqual(((await ok.next())?.result as { ok: boolean }).ok, true);
  });

  it('answers malformed input with errors and stays up for everyone else', async () => {
    const r = await raw();
    const nonce = crypto.randomBytes(16).toString('hex');
    r.request(1, 'hello', { nonce, proof: proofOf(endpoint.secret, 'client', nonce) });
    await r.next();
    r.socket.write(Buffer.from('Content-Length: 9\r\n\r\n{not json'));
    assert.strictEqual((await r.next())?.error?.code, RpcErrorCodes.ParseError);
    r.socket.write(encodeMessage([1, 2]));
    assert.strictEqual((await r.next())?.error?.code, RpcErrorCodes.InvalidRequest);
    r.request(3, 'no.such.method');
    assert.strictEqual((await r.next())?.error?.code, RpcErrorCodes.MethodNotFound);
    r.request(4, 'mount', { folder: 7 });
    const inv = await r.next();
    assert.strictEqual(inv?.error?.code, RpcErrorCodes.InvalidParams);
    assert.strictEqual(inv?.error?.data?.code, 'INVALID_ARGUMENT');
    const garbage = await raw();
    garbage.socket.write(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    assert.match((await garbage.next())?.error?.message ?? '', /framing/);
    await eventually(() => garbage.closed, 10_000, 'the garbage connection to close');
    r.request(5, 'health');
    assert.strictEqual((await r.next())?.id, 5);
    assert.strictEqual((await (await connect()).request('health')).ok, true);
  });

  it('the client refuses a pipe whose server cannot prove it knows the secret', async () => {
    // An impostor in this process on a pipe of the right shape, published with a secret it lacks.
    const pipe = `\\\\.\\pipe\\shadowfs-${crypto.randomBytes(16).toString('hex')}`;
    const impostor = net.createServer((s) => {
      s.on('data', (d: Buffer) => {
        const m = /\{.*\}$/s.exec(d.toString());
        const id = m ? (JSON.parse(m[0]) as { id: number }).id : 0;
        s.write(encodeMessage({ jsonrpc: '2.0', id, result: { version: '9', protocol: 2, pid: process.pid } }));
      });
    });
    servers.push(impostor);
    await new Promise<void>((r) => impostor.listen(pipe, () => r()));
    const other = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-win-other-'));
    const saved = process.env.LOCALAPPDATA;
    try {
      process.env.LOCALAPPDATA = other;
      writeEndpoint(daemonPaths().endpoint, { pipe, pid: process.pid, secret: crypto.randomBytes(32).toString('hex') });
      const err = await rejection(ShadowClient.connect({ autostart: false }));
      assert.strictEqual(err.code, 'PEER_REFUSED', err.message);
      assert.match(err.message, /could not prove/);
      // Published as the daemon's pipe but served by another process: refused before hello.
      writeEndpoint(daemonPaths().endpoint, { ...endpoint, pid: process.pid });
      const wrongPid = await rejection(ShadowClient.connect({ autostart: false }));
      assert.strictEqual(wrongPid.code, 'PEER_REFUSED', wrongPid.message);
      assert.match(wrongPid.message, new RegExp(`served by process ${endpoint.pid}, not by the daemon`));
    } finally {
      process.env.LOCALAPPDATA = saved;
      fs.rmSync(other, { recursive: true, force: true });
    }
  });

  it('closes a connection that says nothing (no hello) once the hello deadline passes; one that said hello stays', async () => {
    const silent = await raw();
    const started = Date.now();
    const proven = await raw();
    const nonce = crypto.randomBytes(16).toString('hex');
    proven.request(1, 'hello', { nonce, proof: proofOf(endpoint.secret, 'client', nonce) });
    assert.ok((await proven.next())?.result, 'hello answered');
    await eventually(() => silent.closed, HELLO_DEADLINE_TEST_MS + 10_000, 'the daemon to close the silent connection');
    assert.ok(Date.now() - started >= HELLO_DEADLINE_TEST_MS - 200, `closed after ${Date.now() - started} ms, before the deadline`);
    await new Promise((r) => setTimeout(r, 500));
    assert.strictEqual(proven.closed, false, 'a connection that proved itself is kept');
    proven.request(2, 'health');
    assert.strictEqual(((await proven.next())?.result as { ok: boolean }).ok, true);
  });

  it('refuses an impostor: a pipe of the published name served by another process than the endpoint names (PEER_REFUSED, nothing sent)', async () => {
    const pipe = `\\\\.\\pipe\\shadowfs-${crypto.randomBytes(16).toString('hex')}`;
    const fake = await impostor(pipe);
    const other = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-win-impostor-'));
    const saved = process.env.LOCALAPPDATA;
    try {
      process.env.LOCALAPPDATA = other;
      // The endpoint names a live process (this one) with the right secret shape; the pipe is the impostor's.
      writeEndpoint(daemonPaths().endpoint, { pipe, pid: process.pid, secret: crypto.randomBytes(32).toString('hex') });
      const err = await rejection(ShadowClient.connect({ autostart: false }));
      assert.strictEqual(err.code, 'PEER_REFUSED', err.message);
      assert.match(err.message, new RegExp(`served by process ${fake.child.pid}, not by the daemon \\(pid ${process.pid}\\)`));
      await new Promise((r) => setTimeout(r, 300));
      const heard = fake.heard();
      assert.ok(heard.includes('connected'), `the client did connect to check the server: ${heard.join(', ')}`);
      assert.deepStrictEqual(
        heard.filter((l) => l.startsWith('data')),
        [],
        'the client sent the impostor nothing',
      );
    } finally {
      process.env.LOCALAPPDATA = saved;
      fake.child.kill();
      fs.rmSync(other, { recursive: true, force: true });
    }
  });

  it('never connects through a stale endpoint (its pid is dead): no daemon there, and the pipe it names is not opened', async () => {
    const pipe = `\\\\.\\pipe\\shadowfs-${crypto.randomBytes(16).toString('hex')}`;
    const fake = await impostor(pipe);
    const other = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-win-stale-'));
    const saved = process.env.LOCALAPPDATA;
    try {
      process.env.LOCALAPPDATA = other;
      const dead = deadPid();
      assert.ok(dead > 0);
      writeEndpoint(daemonPaths().endpoint, { pipe, pid: dead, secret: crypto.randomBytes(32).toString('hex') });
      const err = await rejection(ShadowClient.connect({ autostart: false }));
      assert.strictEqual(err.code, 'DAEMON_UNAVAILABLE', err.message);
      await new Promise((r) => setTimeout(r, 300));
      assert.deepStrictEqual(fake.heard(), [], 'the pipe of a dead daemon is never opened');
    } finally {
      process.env.LOCALAPPDATA = saved;
      fake.child.kill();
      fs.rmSync(other, { recursive: true, force: true });
    }
  });

  it('a second daemon for the same user refuses to start (DAEMON_RUNNING); doctor and status reach the first', () => {
    const second = cli(['serve', '--foreground', '--no-console', '--json'], env);
    assert.notStrictEqual(second.status, 0, second.out);
    assert.match(second.out, /DAEMON_RUNNING/);
    assert.strictEqual(readEndpoint(daemonPaths().endpoint)?.pid, endpoint.pid, 'the first daemon still owns the endpoint');
    const doctor = cli(['doctor', '--json'], env);
    assert.notStrictEqual(doctor.status, 0, 'without WinFsp the machine is not healthy');
    const checks = (JSON.parse(doctor.out) as { checks: Array<{ name: string; ok: boolean; detail: string }> }).checks;
    const winfsp = checks.find((c) => c.name === 'winfsp');
    assert.strictEqual(winfsp?.ok, false, doctor.out);
    assert.match(winfsp?.detail ?? '', /winfsp\.dev/);
    assert.match(checks.find((c) => c.name === 'antivirus')?.detail ?? '', /exclude/);
    assert.match(checks.find((c) => c.name === 'daemon')?.detail ?? '', new RegExp(`running \\(pid ${endpoint.pid}\\)`));
    const st = cli(['status', '--json'], env);
    assert.strictEqual(st.status, 0, st.out);
    assert.strictEqual((JSON.parse(st.out) as { pid: number }).pid, endpoint.pid);
  });
});
