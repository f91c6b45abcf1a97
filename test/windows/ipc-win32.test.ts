// The Win32 identity checks (src/platform/win32-identity.ts) against real processes and named pipes. These
// tests run only on Windows, and fail anywhere else: on Linux run them under wine with
//   scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json
// (the root .mocharc.json ignores this folder, and its hooks need /dev/fuse).
import * as assert from 'assert';
import { ChildProcess, spawn } from 'child_process';
import * as crypto from 'crypto';
import * as net from 'net';
import { currentUserSid, pipeServerProcessId, processUserSid, Win32Error } from '../../src/platform/win32-identity';

const SID = /^S-1-\d+(-\d+)+$/;

function pipeName(): string {
  return `\\\\.\\pipe\\shadowfs-test-${crypto.randomBytes(8).toString('hex')}`;
}

function thrown(fn: () => unknown): Win32Error {
  try {
    fn();
  } catch (err) {
    return err as Win32Error;
  }
  throw new assert.AssertionError({ message: 'expected an error, and the call returned' });
}

/** Starts `node -e script` and resolves once it has printed `ready` on stdout. */
function startNode(script: string, args: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer): void => {
      out += d.toString();
      if (/^ready$/m.test(out)) resolve(child);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the child node exited (${code}) before it was ready: ${out.trim()}`)));
  });
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill();
  });
}

describe('ipc: Win32 identity checks (Windows)', () => {
  const children: ChildProcess[] = [];
  const servers: net.Server[] = [];

  before(() => {
    assert.strictEqual(
      process.platform,
      'win32',
      'these tests call the Win32 API: run them on Windows, or on Linux under wine (scripts/wine-node.sh, see the top of this file)',
    );
  });

  afterEach(async () => {
    await Promise.all(children.splice(0).map(stop));
    await Promise.all(servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  });

  async function serve(name: string): Promise<net.Server> {
    const server = net.createServer((conn) => {
      conn.on('error', () => undefined);
      conn.end();
    });
    servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(name, resolve);
    });
    return server;
  }

  it('reads the user SID of this process, the same way by pid', () => {
    const mine = currentUserSid();
    assert.match(mine, SID);
    assert.strictEqual(processUserSid(process.pid), mine);
  });

  it("reads the user SID of another process (the same user's)", async () => {
    const child = await startNode("console.log('ready'); setInterval(() => undefined, 1000);", []);
    children.push(child);
    assert.strictEqual(processUserSid(child.pid!), currentUserSid());
  });

  it('names the OpenProcess failure for a process that does not exist', () => {
    // Process ids are multiples of 4 on Windows; one that is not can never name a process.
    const err = thrown(() => processUserSid(0x7ffffffd));
    assert.match(err.message, /^OpenProcess\(PROCESS_QUERY_LIMITED_INFORMATION\) failed for process 2147483645: GetLastError \d+/);
    assert.strictEqual(err.syscall, 'OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION)');
    assert.ok(err.errno > 0);
    assert.throws(() => processUserSid(-1), /not a process id/);
  });

  it('finds this process serving a pipe of its own', async () => {
    const name = pipeName();
    const server = await serve(name);
    const connections = new Promise<void>((resolve) => server.once('connection', () => resolve()));
    assert.strictEqual(pipeServerProcessId(name), process.pid);
    await connections; // the check really connected, as a client does
  });

  it('finds a child process serving a pipe', async () => {
    const name = pipeName();
    const script =
      "require('net').createServer((c) => { c.on('error', () => undefined); c.end(); })" +
      ".listen(process.argv[1], () => console.log('ready'));";
    const child = await startNode(script, [name]);
    children.push(child);
    assert.strictEqual(pipeServerProcessId(name), child.pid);
    assert.notStrictEqual(child.pid, process.pid);
  });

  it('waits for a pipe whose every instance is busy, then says it stayed busy', () => {
    // A pipe of one instance, taken by a first client: the check meets ERROR_PIPE_BUSY.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ffi = require('ffi-rs') as typeof import('ffi-rs');
    const T = ffi.DataType;
    ffi.open({ library: 'test-kernel32', path: 'kernel32.dll' });
    const k32 = (funcName: string, retType: import('ffi-rs').DataType, params: [import('ffi-rs').DataType, unknown][]): number =>
      ffi.load({
        library: 'test-kernel32',
        funcName,
        retType,
        paramsType: params.map((p) => p[0]),
        paramsValue: params.map((p) => p[1]),
      }) as number;
    const name = pipeName();
    const PIPE_ACCESS_DUPLEX = 3;
    const server = k32('CreateNamedPipeW', T.I64, [
      [T.WString, name],
      [T.U32, PIPE_ACCESS_DUPLEX],
      [T.U32, 0],
      [T.U32, 1],
      [T.U32, 4096],
      [T.U32, 4096],
      [T.U32, 0],
      [T.I64, 0],
    ]);
    assert.notStrictEqual(server, -1, 'CreateNamedPipeW failed');
    let first = -1;
    try {
      first = k32('CreateFileW', T.I64, [
        [T.WString, name],
        [T.U32, 0xc0000000],
        [T.U32, 0],
        [T.I64, 0],
        [T.U32, 3],
        [T.U32, 0],
        [T.I64, 0],
      ]);
      assert.notStrictEqual(first, -1, 'the first client could not connect');
      const started = Date.now();
      const err = thrown(() => pipeServerProcessId(name, 300));
      const waited = Date.now() - started;
      assert.strictEqual(err.code, 'ERROR_PIPE_BUSY', err.message);
      assert.match(err.message, /^CreateFileW\(.*\) failed for .*: GetLastError 231 \(ERROR_PIPE_BUSY/);
      assert.ok(waited >= 250, `gave up after ${waited} ms, before the 300 ms it was given`);
    } finally {
      if (first !== -1) k32('CloseHandle', T.I32, [[T.I64, first]]);
      k32('CloseHandle', T.I32, [[T.I64, server]]);
    }
  });

  it('says which call failed, and why, for a pipe nobody serves', () => {
    const name = pipeName();
    const err = thrown(() => pipeServerProcessId(name));
    assert.ok(
      err.message.startsWith(
        `CreateFileW(GENERIC_READ | GENERIC_WRITE, OPEN_EXISTING) failed for ${name}: GetLastError 2 (ERROR_FILE_NOT_FOUND`,
      ),
      err.message,
    );
    assert.strictEqual(err.errno, 2);
    assert.strictEqual(err.code, 'ERROR_FILE_NOT_FOUND');
    assert.throws(() => pipeServerProcessId('C:\\not\\a\\pipe'), /is not a local named pipe/);
  });
});
