// peerCredentials() on real Unix-domain sockets: a client in this process, and one in a child
// that runs as another user (nobody), which is the case the daemon's check exists for.
import * as assert from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { PeerCredentials, peerCredentials } from '../src/platform/linux-peercred';

const NOBODY = 65534;
const NOGROUP = 65534;

/** Sockets the current test opened; afterEach destroys them (a reset on one is no test failure). */
const sockets: net.Socket[] = [];
function track(socket: net.Socket): net.Socket {
  socket.on('error', () => undefined);
  sockets.push(socket);
  return socket;
}

/** Reads the credentials of the server's first client, then ends that connection. */
function credentialsOfFirstClient(server: net.Server): Promise<PeerCredentials> {
  return new Promise((resolve, reject) => {
    server.once('connection', (conn) => {
      track(conn);
      try {
        resolve(peerCredentials(conn));
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      } finally {
        conn.end('checked\n');
      }
    });
  });
}

function listen(server: net.Server, sock: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(sock, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

describe('ipc: peer credentials of a Unix-domain socket (Linux)', () => {
  let dir = '';
  let server: net.Server | undefined;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-test-ipc-'));
  });

  afterEach(async () => {
    for (const c of sockets.splice(0)) c.destroy();
    const s = server;
    server = undefined;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('names this process when it connects to itself', async () => {
    server = net.createServer();
    const sock = path.join(dir, 'daemon.sock');
    await listen(server, sock);
    const seen = credentialsOfFirstClient(server);
    track(net.connect(sock));
    const creds = await seen;
    assert.deepStrictEqual(creds, { pid: process.pid, uid: process.getuid!(), gid: process.getgid!() });
  });

  it('names another user when a process of that user connects', async function () {
    assert.strictEqual(process.getuid!(), 0, 'this test runs a client as nobody, which needs root');
    this.timeout(30_000);
    // nobody must be able to reach the socket: search (x) on the directory, write on the socket.
    fs.chmodSync(dir, 0o711);
    server = net.createServer();
    const sock = path.join(dir, 'daemon.sock');
    await listen(server, sock);
    fs.chmodSync(sock, 0o666);
    const seen = credentialsOfFirstClient(server);
    const script =
      "const c = require('net').connect(process.argv[1]);" +
      "c.on('connect', () => console.log('pid ' + process.pid));" +
      "c.on('error', (e) => { console.error(e.message); process.exit(2); });" +
      'c.resume();' +
      "c.on('end', () => process.exit(0));";
    const child = spawn(process.execPath, ['-e', script, sock], { uid: NOBODY, gid: NOGROUP, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      // Whichever comes first: the server's answer, or the child giving up (it cannot run or connect).
      const creds = await Promise.race([
        seen,
        exited.then((code) => {
          throw new Error(`the client running as nobody exited (${code}) before the server saw it: ${out.trim()}`);
        }),
      ]);
      assert.strictEqual(await exited, 0, `the client running as nobody failed: ${out.trim()}`);
      assert.strictEqual(creds.uid, NOBODY);
      assert.strictEqual(creds.gid, NOGROUP);
      assert.strictEqual(creds.pid, child.pid);
      assert.match(out, new RegExp(`^pid ${child.pid}$`, 'm'));
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    }
  });

  it('refuses a socket that is not connected, and one that is not a Unix-domain socket', async () => {
    const unconnected = new net.Socket();
    assert.throws(() => peerCredentials(unconnected), /no file descriptor/);

    server = net.createServer();
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    const accepted = new Promise<net.Socket>((resolve) => server!.once('connection', resolve));
    track(net.connect(port, '127.0.0.1'));
    const tcp = track(await accepted);
    assert.throws(() => peerCredentials(tcp), /not a connected Unix-domain socket/);
  });
});
