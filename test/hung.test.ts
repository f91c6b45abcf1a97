// #27, deliverable 6, against a server that really hangs: test/native/hung_fuse.c mounts a FUSE
// file system that answers INIT and then never answers anything. A process touching it sleeps
// uninterruptibly (SIGKILL does not end it) until the server dies. The daemon must never wait on
// such a mount without a deadline: not while it recovers (its probes are such processes), not on
// a mount request for a folder under it, and a request cancelled while it waited must not run.
import * as assert from 'assert';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { daemonPaths } from '../src/common/endpoint';
import { mountedPaths } from '../src/platform';
import { eventually, FolderGuard, makeProject, repoRoot, tempDir } from './helpers/fixtures';
import { running, stopDaemonAndShadows, stopTestDaemon } from './helpers/hooks';

/** Builds hung_fuse once per run. */
let built: string | undefined;
function hungFuse(): string {
  if (built) return built;
  const out = path.join(tempDir('hung-bin'), 'hung_fuse');
  try {
    execFileSync('cc', ['-O1', '-Wall', '-o', out, path.join(repoRoot, 'test', 'native', 'hung_fuse.c')], { stdio: 'pipe' });
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    throw new Error(`these tests need a C compiler (cc) to build test/native/hung_fuse.c: ${e.stderr?.toString() || e.message}`);
  }
  return (built = out);
}

/** A hung mount at `mp` that looks like a shadow of `lower` in the mount table. */
async function hungMount(lower: string, mp: string): Promise<ChildProcess> {
  const server = spawn(hungFuse(), [`shadowfs:${lower}`, 'shadowfs', mp], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  server.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  server.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  await eventually(() => out.includes('up') || server.exitCode !== null, 30_000, 'the hung server to mount');
  assert.ok(out.includes('up'), `hung_fuse did not mount: ${err}`);
  return server;
}

/** Kills the hung server (pending requests then fail with ENOTCONN) and removes its mount. */
async function endHung(server: ChildProcess | undefined, mp: string): Promise<void> {
  if (server && server.exitCode === null && server.signalCode === null) {
    const gone = new Promise((r) => server.once('exit', r));
    server.kill('SIGKILL');
    await gone;
  }
  if (mountedPaths().has(mp)) spawnSync('umount', ['-l', mp]);
}

function writeState(shadows: unknown[]): void {
  fs.writeFileSync(daemonPaths().state, JSON.stringify({ pid: 999_999_999, shadows }), { mode: 0o600 });
}

describe('a mount whose server hangs never holds the daemon', function () {
  this.timeout(120_000);
  const probeBefore = process.env.SHADOWFS_STALE_PROBE_MS;
  before(function () {
    if (process.getuid?.() !== 0) throw new Error('these tests mount a raw FUSE file system with mount(2): run them as root (CI does)');
  });
  afterEach(async () => {
    if (probeBefore === undefined) delete process.env.SHADOWFS_STALE_PROBE_MS;
    else process.env.SHADOWFS_STALE_PROBE_MS = probeBefore;
    await stopDaemonAndShadows();
  });
  after(() => stopTestDaemon());

  it('recovery gives up on a recorded mount that never answers, and a mount request under it fails with TIMEOUT', async () => {
    const lower = fs.realpathSync(makeProject());
    const guard = new FolderGuard(lower);
    const mp = tempDir('hungmp');
    let server: ChildProcess | undefined;
    let client: ShadowClient | undefined;
    try {
      server = await hungMount(lower, mp);
      stopTestDaemon();
      writeState([{ name: 'hung', folder: lower, mountPoint: mp, createdMountPoint: false, views: [] }]);
      process.env.SHADOWFS_STALE_PROBE_MS = '1000';
      client = await ShadowClient.connect();
      // Before #27 the probe's process could not be killed, so recovery, and every request but
      // status, waited for ever (this test's timeout).
      const listed = (await client.request('list')).shadows;
      assert.deepStrictEqual(
        listed.map((s) => s.name),
        ['hung'],
      );
      assert.notStrictEqual(listed[0].mountPoint, mp, 'the unanswering mount was left alone; the shadow came back elsewhere');
      assert.ok(mountedPaths().has(mp));
      // A folder under the hung mount is never touched on the daemon's own thread.
      await assert.rejects(client.request('mount', { folder: path.join(mp, 'sub') }), (err: { code?: string; message: string }) => {
        assert.strictEqual(err.code, 'TIMEOUT', err.message);
        assert.match(err.message, /does not answer/);
        return true;
      });
      assert.strictEqual((await client.request('health')).ok, true, 'the daemon still answers');
      await guard.check();
    } finally {
      client?.close();
      guard.stop();
      await endHung(server, mp);
    }
  });

  it('a run asked for while the daemon recovers and cancelled before it starts never runs', async () => {
    const stuckLower = fs.realpathSync(makeProject('stuck'));
    const lower = fs.realpathSync(makeProject());
    const guard = new FolderGuard(lower);
    const mp = tempDir('hungmp');
    let server: ChildProcess | undefined;
    let client: ShadowClient | undefined;
    try {
      server = await hungMount(stuckLower, mp);
      stopTestDaemon();
      writeState([
        { name: 'stuck', folder: stuckLower, mountPoint: mp, createdMountPoint: false, views: [] },
        { name: 'work', folder: lower, mountPoint: path.join(tempDir('gone'), 'm'), createdMountPoint: false, views: [] },
      ]);
      // Recovery waits on the hung mount until its server dies (below), whatever this machine's speed.
      process.env.SHADOWFS_STALE_PROBE_MS = '600000';
      client = await ShadowClient.connect();
      assert.deepStrictEqual((await client.request('status')).recovering.sort(), ['stuck', 'work']);
      const heard: string[] = [];
      client.on('daemon/waiting', (p) => heard.push(p.method));
      // One cancelled by its client, one through run.cancel: both wait for recovery first.
      const controller = new AbortController();
      const byClient = client.request(
        'run',
        { shadow: 'work', agent: 'a', argv: ['sh', '-c', 'echo ran > by-client.txt'] },
        { signal: controller.signal },
      );
      const byCancel = client.request('run', {
        shadow: 'work',
        agent: 'a',
        runId: 'early',
        argv: ['sh', '-c', 'echo ran > by-cancel.txt'],
      });
      await eventually(() => heard.filter((m) => m === 'run').length === 2, 30_000, 'both runs to hear that they wait');
      controller.abort();
      await assert.rejects(byClient, (err: { code?: string }) => err.code === 'ABORTED');
      assert.deepStrictEqual(await client.request('run.cancel', { runId: 'early' }), { runId: 'early', cancelled: true });
      // The hung server dies: the probe ends, recovery goes on and mounts "work" again.
      await endHung(server, mp);
      await assert.rejects(byCancel, (err: { code?: string }) => err.code === 'ABORTED');
      const listed = (await client.request('list')).shadows;
      assert.ok(
        listed.some((s) => s.name === 'work'),
        JSON.stringify(listed),
      );
      const changes = await client.request('layer.changes', { shadow: 'work', agent: 'a' }).catch(() => ({ changes: [] }));
      assert.deepStrictEqual(changes.changes, [], 'neither run wrote anything');
      await guard.check();
    } finally {
      client?.close();
      guard.stop();
      await endHung(server, mp);
    }
  });

  it('a request that waited for recovery while the daemon was told to stop is not done', async () => {
    const stuckLower = fs.realpathSync(makeProject('stuck'));
    const late = fs.realpathSync(makeProject('late'));
    const mp = tempDir('hungmp');
    let server: ChildProcess | undefined;
    let client: ShadowClient | undefined;
    try {
      server = await hungMount(stuckLower, mp);
      stopTestDaemon();
      writeState([{ name: 'stuck', folder: stuckLower, mountPoint: mp, createdMountPoint: false, views: [] }]);
      process.env.SHADOWFS_STALE_PROBE_MS = '600000';
      client = await ShadowClient.connect();
      const { pid, logFile } = await client.request('status');
      const heard: string[] = [];
      client.on('daemon/waiting', (p) => heard.push(p.method));
      const mounting = client.request('mount', { folder: late, name: 'late' });
      await eventually(() => heard.includes('mount'), 30_000, 'the mount request to hear that it waits');
      process.kill(pid, 'SIGTERM');
      // The stop waits for recovery, which waits for the hung server: end it.
      await endHung(server, mp);
      await assert.rejects(mounting, (err: { code?: string }) => err.code === 'ABORTED' || err.code === 'DAEMON_UNAVAILABLE');
      await eventually(() => !running(pid), 30_000, 'the daemon to stop');
      const mountedLate = fs
        .readFileSync(logFile, 'utf8')
        .split('\n')
        .filter((l) => l.includes('"message":"mounted"') && l.includes(JSON.stringify(late).slice(1, -1)));
      assert.deepStrictEqual(mountedLate, [], 'the waiting mount was not done (before, it mounted and the shutdown unmounted it)');
      assert.ok(![...mountedPaths()].some((m) => m.includes('late')), 'nothing of it is mounted');
    } finally {
      client?.close();
      await endHung(server, mp);
    }
  });
});
