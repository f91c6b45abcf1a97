// State is input, not truth (issue #26, deliverable 5): whoever can write the daemon's runtime
// and state directories (an agent's process of this user) may forge the state file and the
// checkpoints, then kill -9 the daemon. One case per forged input: the recovering daemon must
// not remove anything in the user's folder, unmount a mount it did not make, or mount a folder
// at a place of the forger's choosing; a forged checkpoint must be refused whole, with a code,
// without reading anything outside the checkpoint directory or changing the layer.
import * as assert from 'assert';
import { execFileSync, spawn, spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { daemonPaths } from '../src/common/endpoint';
import { mountedPaths } from '../src/platform';
import { mount, type Shadow } from '../src/shadow';
import { WorkService } from '../src/work/service';
import { eventually, FolderGuard, makeProject, repoRoot, tempDir, withShadow } from './helpers/fixtures';
import { stopDaemonAndShadows, stopTestDaemon } from './helpers/hooks';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cliPath, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface Listed {
  name: string;
  folder: string;
  mountPoint: string;
}

/** The daemon's own mounts directory (where it makes mount points), created if missing. */
function mountsDir(): string {
  const dir = path.join(daemonPaths().dir, 'mounts');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/**
 * Plays the attacker: with no daemon running, writes `shadows` as the state file a crashed
 * daemon left, then starts a daemon (as the next command does) and returns what it serves and
 * the log lines it wrote while starting.
 */
async function recoverFrom(shadows: unknown[]): Promise<{ listed: Listed[]; log: string[] }> {
  stopTestDaemon();
  const paths = daemonPaths();
  fs.writeFileSync(paths.state, JSON.stringify({ pid: 999_999_999, shadows }), { mode: 0o600 });
  const logStart = fs.existsSync(paths.log) ? fs.statSync(paths.log).size : 0;
  const r = cli(['list', '--json']);
  assert.strictEqual(r.status, 0, `shadowfs list failed: ${r.stdout}${r.stderr}`);
  const listed = (JSON.parse(r.stdout) as { shadows: Listed[] }).shadows;
  const lines = (): string[] => {
    // logStart counts bytes: slicing the decoded text instead would start mid-line after any
    // earlier line with a character of more than one byte (the fuzz test logs such headers).
    const text = fs.readFileSync(paths.log).subarray(logStart).toString('utf8');
    return text.split('\n').filter((l) => l.trim() !== '');
  };
  // The daemon recovers after it listens (list waited for it) and logs that it is done last; the
  // file transport writes it soon after, in order.
  await eventually(
    () => lines().some((l) => l.includes('recovered what the previous daemon left')),
    30_000,
    'the daemon to log its recovery',
  );
  return { listed, log: lines() };
}

/** The messages of the log lines that name `what` (a shadow's name or a path). */
function linesAbout(log: string[], what: string): string[] {
  return log.filter((l) => l.includes(JSON.stringify(what).slice(1, -1))).map((l) => (JSON.parse(l) as { message: string }).message);
}

function sha256(data: Buffer | string): string {
  return crypto.createHash('sha256').update(data).digest('hex');
}

/** Asserts `p` is refused as a damaged checkpoint: a ShadowError with a code and a sentence saying so. */
async function refused(p: Promise<unknown>, what: string): Promise<void> {
  await assert.rejects(
    p,
    (err: { code?: string; message?: string }) => {
      assert.strictEqual(err.code, 'STATE_CORRUPT', `${what}: ${err.message}`);
      assert.match(err.message ?? '', /damaged or was tampered with/, what);
      return true;
    },
    what,
  );
}

/** The layer of `agent` as a comparable list: its changes, and the content of each changed file. */
async function layerSnapshot(shadow: Shadow, agent: string): Promise<string> {
  const layer = shadow.layer(agent);
  const out: string[] = [];
  for (const c of await layer.changes()) {
    const st = c.kind === 'deleted' ? null : await layer.stat(c.path);
    out.push(`${c.path} ${c.kind} ${st?.type === 'file' ? (await layer.readFile(c.path)).toString('base64') : ''}`);
  }
  return out.join('\n');
}

describe('state is input, not truth: forged state and checkpoints', function () {
  afterEach(() => stopDaemonAndShadows());
  after(() => stopTestDaemon());

  it('a state file naming mount points inside the folder (directly, or through a link in the mounts directory) removes nothing there', async () => {
    const lower = makeProject(); // has an empty directory "empty", which an rmdir would take
    const other = makeProject('other');
    const guard = new FolderGuard(lower);
    const mounts = mountsDir();
    const link = path.join(mounts, `evil-${crypto.randomBytes(4).toString('hex')}`);
    fs.symlinkSync(lower, link);
    try {
      const { listed, log } = await recoverFrom([
        // Its own folder's directory as the mount point "it made".
        { name: 'inside', folder: lower, mountPoint: path.join(lower, 'empty'), createdMountPoint: true, views: [] },
        // Another shadow's: the folder's directory, and one reached through a link planted in the mounts directory.
        {
          name: 'beside',
          folder: other,
          mountPoint: path.join(lower, 'empty'),
          createdMountPoint: true,
          views: [
            { mountPoint: path.join(link, 'empty'), createdMountPoint: true },
            { mountPoint: path.join(lower, 'deep', 'a', 'b', 'c'), createdMountPoint: true },
          ],
        },
      ]);
      assert.ok(fs.statSync(path.join(lower, 'empty')).isDirectory(), 'the empty directory in the folder is still there');
      assert.ok(fs.lstatSync(link).isSymbolicLink(), 'the planted link is left as it is');
      for (const mp of [path.join(lower, 'empty'), path.join(link, 'empty')])
        assert.ok(
          linesAbout(log, mp).some((m) => /left alone|left a mount directory/.test(m)),
          `the daemon says why it left ${mp}: ${log.join('\n')}`,
        );
      // The folders exist, so they are shadowed again, each in a fresh mount point of the daemon's own.
      assert.deepStrictEqual(listed.map((s) => s.name).sort(), ['beside', 'inside']);
      for (const s of listed) assert.strictEqual(path.dirname(s.mountPoint), mounts, JSON.stringify(s));
      await stopDaemonAndShadows();
      await guard.check();
    } finally {
      guard.stop();
      fs.rmSync(link, { force: true });
    }
  });

  it('a state file naming unrelated real mounts (a tmpfs, a live shadow of another process, a shadow of another folder) leaves them mounted', async () => {
    const lower = makeProject();
    const other = makeProject('other');
    const guard = new FolderGuard(lower);
    const tmpfs = path.join(tempDir('dmnt'), 'tmpfs');
    fs.mkdirSync(tmpfs);
    let tmpfsMounted = false;
    let live: Shadow | undefined;
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'shadowfs-test-tmpfs', tmpfs]);
      tmpfsMounted = true;
      fs.writeFileSync(path.join(tmpfs, 'canary'), 'still here\n');
      // A shadow this test process serves: a shadowfs mount of this user, but no crashed daemon's.
      live = await mount(other, { mountPoint: path.join(tempDir('dmnt'), 'live') });
      const { log } = await recoverFrom([
        {
          name: 'tmpfs',
          folder: lower,
          mountPoint: tmpfs,
          createdMountPoint: true,
          views: [{ mountPoint: tmpfs, createdMountPoint: false }],
        },
        // Its true folder: only the live server tells it from a crashed daemon's.
        { name: 'live', folder: live.folder, mountPoint: live.mountPoint, createdMountPoint: false },
        // Another folder than the mount there shows.
        {
          name: 'liar',
          folder: lower,
          mountPoint: '/tmp',
          createdMountPoint: false,
          views: [{ mountPoint: live.mountPoint, createdMountPoint: true }],
        },
      ]);
      assert.ok(mountedPaths().has(tmpfs), 'the tmpfs is still mounted');
      assert.strictEqual(fs.readFileSync(path.join(tmpfs, 'canary'), 'utf8'), 'still here\n');
      assert.ok(mountedPaths().has(live.mountPoint), 'the live shadow is still mounted');
      assert.ok(fs.readdirSync(live.mountPoint).includes('README.md'), 'and still serves');
      assert.ok(fs.existsSync(tmpfs), 'the tmpfs mount point is not removed');
      assert.ok(
        linesAbout(log, tmpfs).some((m) => /not a shadowfs mount/.test(m)),
        log.join('\n'),
      );
      assert.ok(
        linesAbout(log, live.mountPoint).some((m) => /live process/.test(m)),
        log.join('\n'),
      );
      assert.ok(
        linesAbout(log, live.mountPoint).some((m) => /not the folder recorded/.test(m)),
        log.join('\n'),
      );
      await stopDaemonAndShadows();
      await guard.check();
    } finally {
      guard.stop();
      if (live?.mounted) await live.unmount({ lazy: true });
      if (tmpfsMounted) spawnSync('umount', ['-l', tmpfs]);
    }
  });

  it('a state file asking to mount "/", a folder that does not exist, or at a place of its choosing is refused, and its good entry still comes back', async () => {
    const lower = makeProject();
    const good = makeProject('good');
    const guard = new FolderGuard(lower);
    const target = path.join(tempDir('dmnt'), 'target'); // an empty directory: a normal mount there would succeed
    fs.mkdirSync(target);
    const mounts = mountsDir();
    const missing = path.join(tempDir('gone'), 'no-such-folder');
    try {
      const { listed, log } = await recoverFrom([
        { name: 'root', folder: '/', mountPoint: path.join(mounts, 'root-1'), createdMountPoint: true },
        { name: 'gone', folder: missing, mountPoint: path.join(mounts, 'gone-1'), createdMountPoint: true },
        { name: 'elsewhere', folder: lower, mountPoint: target, createdMountPoint: false },
        { name: 'relative', folder: 'some/folder', mountPoint: path.join(mounts, 'relative-1'), createdMountPoint: true },
        { name: '../dots', folder: good, mountPoint: path.join(mounts, 'dots-1'), createdMountPoint: true },
        { name: 'nul', folder: `${good}\0x`, mountPoint: path.join(mounts, 'nul-1'), createdMountPoint: true },
        { name: 'good', folder: good, mountPoint: path.join(mounts, 'good-1'), createdMountPoint: true, active: null, io: 'open' },
      ]);
      assert.ok(!mountedPaths().has(target), 'nothing is mounted at the place the state file chose');
      assert.ok(![...mountedPaths()].some((m) => m.startsWith(`${missing}`)), 'nothing mounted for the missing folder');
      const names = listed.map((s) => s.name).sort();
      assert.deepStrictEqual(names, ['elsewhere', 'good'], 'only existing folders come back; "/" and the missing one do not');
      const byName = new Map(listed.map((s) => [s.name, s]));
      assert.strictEqual(path.dirname(byName.get('elsewhere')!.mountPoint), mounts, 'in a mount point of the daemon');
      assert.strictEqual(byName.get('good')!.folder, good);
      assert.ok(fs.readdirSync(byName.get('good')!.mountPoint).includes('README.md'), 'the good shadow serves its folder');
      assert.ok(
        linesAbout(log, 'root').some((m) => /refused to mount again.*root of the file system/.test(m)),
        log.join('\n'),
      );
      assert.ok(
        linesAbout(log, 'gone').some((m) => /refused to mount again.*does not exist/.test(m)),
        log.join('\n'),
      );
      assert.ok(
        log.some((l) => /shadow #3 is not valid.*folder/.test(l)),
        `the relative folder is refused by shape: ${log.join('\n')}`,
      );
      assert.ok(
        log.some((l) => /shadow #4 is not valid.*name/.test(l)),
        log.join('\n'),
      );
      assert.ok(
        log.some((l) => /shadow #5 is not valid.*folder/.test(l)),
        log.join('\n'),
      );
      await stopDaemonAndShadows();
      await guard.check();
    } finally {
      guard.stop();
    }
  });

  it('a checkpoint whose manifest has "../", absolute or NUL paths, or blob ids such as ../../etc/passwd, is refused whole and the layer is kept', async () => {
    const lower = makeProject();
    const secretDir = tempDir('secret');
    const secret = path.join(secretDir, 'secret.txt');
    fs.writeFileSync(secret, 'outside the checkpoint directory\n');
    await withShadow(lower, async (shadow) => {
      const w = new WorkService(shadow);
      await shadow.layer('alice').write('src/kept.js', 'module.exports = "kept";\n');
      await w.checkpoint('alice', 'good');
      const root = w.store.root;
      const good = JSON.parse(fs.readFileSync(path.join(root, 'alice', 'good.json'), 'utf8')) as {
        entries: Array<Record<string, unknown>>;
      };
      const file = good.entries.find((e) => e.type === 'file')!;
      const before = await layerSnapshot(shadow, 'alice');
      // From the blobs directory up to the secret: what a blob id would need to read it.
      const toSecret = path.relative(path.join(root, 'blobs'), secret);
      const forged: Array<[string, Array<Record<string, unknown>>]> = [
        ['dotdot', [{ ...file, path: '../escape.txt' }]],
        ['deepdots', [{ ...file, path: 'src/../../escape.txt' }]],
        ['absolute', [{ ...file, path: '/etc/escape.txt' }]],
        ['nul', [{ ...file, path: 'src/a\0b' }]],
        ['passwd', [{ ...file, path: 'passwd.txt', blob: '../../etc/passwd' }]],
        ['secret', [{ ...file, path: 'secret.txt', blob: toSecret }]],
        ['shortblob', [{ ...file, path: 'short.txt', blob: 'abc' }]],
        [
          'basepath',
          [{ ...file, path: 'base.txt', baseBlob: toSecret, base: { ino: 1, size: 1, mtimeNs: '1', ctimeNs: '1', hash: null } }],
        ],
        ['badbase', [{ ...file, path: 'base.txt', base: { ino: 'x', size: -1, mtimeNs: '1; rm -rf /', ctimeNs: '1', hash: 'zz' } }]],
        ['mode', [{ ...file, path: 'mode.txt', mode: 0o170777 }]],
        ['linknul', [{ path: 'link', type: 'symlink', target: 'a\0b' }]],
        // A good entry first: nothing of it may land before the bad one is found.
        [
          'late',
          [
            { path: 'a-first.txt', type: 'file', mode: 0o644, blob: file.blob },
            { ...file, path: 'z/../../late.txt' },
          ],
        ],
      ];
      for (const [name, entries] of forged) {
        fs.writeFileSync(path.join(root, 'alice', `${name}.json`), JSON.stringify({ ...good, name, entries }));
        await refused(w.restore('alice', name), name);
        assert.strictEqual(await layerSnapshot(shadow, 'alice'), before, `${name}: the layer is as it was`);
      }
      // A manifest that claims to be another agent's or another folder's.
      fs.writeFileSync(path.join(root, 'alice', 'stolen.json'), JSON.stringify({ ...good, name: 'stolen', agent: 'bob' }));
      await refused(w.restore('alice', 'stolen'), 'another agent');
      fs.writeFileSync(path.join(root, 'alice', 'moved.json'), JSON.stringify({ ...good, name: 'moved', folder: secretDir }));
      await refused(w.restore('alice', 'moved'), 'another folder');
      fs.writeFileSync(path.join(root, 'alice', 'notjson.json'), '{"version": 1, "entries": [');
      await refused(w.restore('alice', 'notjson'), 'not JSON');
      assert.strictEqual(await layerSnapshot(shadow, 'alice'), before);
      // The list leaves the damaged ones out (and says nothing about the secret's size).
      assert.deepStrictEqual(
        w.checkpoints('alice').map((c) => c.name),
        ['good'],
      );
      assert.strictEqual(w.store.baseContent(toSecret), null, 'a base blob id is checked too');
      assert.strictEqual(w.store.baseContent('../../etc/passwd'), null);
      // Agent ids that would leave the folder's checkpoint directory.
      await assert.rejects(w.restore('..', 'good'), { code: 'INVALID_AGENT' });
      await assert.rejects(w.checkpoint('..', 'escape'), { code: 'INVALID_AGENT' });
      assert.ok(!fs.existsSync(path.join(path.dirname(root), 'escape.json')));
      // The good checkpoint still restores.
      await shadow.layer('alice').write('src/later.js', 'later\n');
      await w.restore('alice', 'good');
      assert.strictEqual(await layerSnapshot(shadow, 'alice'), before);
      assert.strictEqual(fs.readFileSync(secret, 'utf8'), 'outside the checkpoint directory\n');
    });
  });

  it('a blob, manifest or agent directory that is a link to something outside is refused, and saving never writes through one', async () => {
    const lower = makeProject();
    const outside = tempDir('outside');
    const secret = path.join(outside, 'secret.txt');
    const secretText = 'the content of a file outside\n';
    fs.writeFileSync(secret, secretText);
    await withShadow(lower, async (shadow) => {
      const w = new WorkService(shadow);
      await shadow.layer('alice').write('src/kept.js', 'module.exports = "kept";\n');
      await w.checkpoint('alice', 'good');
      const root = w.store.root;
      const good = JSON.parse(fs.readFileSync(path.join(root, 'alice', 'good.json'), 'utf8')) as Record<string, unknown>;
      const before = await layerSnapshot(shadow, 'alice');

      // A blob that is a link to the secret, under the secret's very hash (so its content checks out).
      const hash = sha256(secretText);
      fs.symlinkSync(secret, path.join(root, 'blobs', hash));
      fs.writeFileSync(
        path.join(root, 'alice', 'linked-blob.json'),
        JSON.stringify({ ...good, name: 'linked-blob', entries: [{ path: 'stolen.txt', type: 'file', mode: 0o644, blob: hash }] }),
      );
      await refused(w.restore('alice', 'linked-blob'), 'a blob that is a link');
      assert.strictEqual(await layerSnapshot(shadow, 'alice'), before, 'the layer is as it was');
      await assert.rejects(shadow.layer('alice').readFile('stolen.txt'), { code: 'NOT_FOUND' });

      // A blob that is a fifo (a read would block) or a directory.
      const fifoHash = sha256('fifo');
      execFileSync('mkfifo', [path.join(root, 'blobs', fifoHash)]);
      const dirHash = sha256('dir');
      fs.mkdirSync(path.join(root, 'blobs', dirHash));
      for (const [name, blob] of [
        ['fifo-blob', fifoHash],
        ['dir-blob', dirHash],
      ]) {
        fs.writeFileSync(
          path.join(root, 'alice', `${name}.json`),
          JSON.stringify({ ...good, name, entries: [{ path: 'x.txt', type: 'file', mode: 0o644, blob }] }),
        );
        await refused(w.restore('alice', name), name);
      }
      // A blob whose content is not what its name says.
      const liar = sha256('what the agent wrote\n');
      fs.writeFileSync(path.join(root, 'blobs', liar), 'something else\n');
      fs.writeFileSync(
        path.join(root, 'alice', 'liar.json'),
        JSON.stringify({ ...good, name: 'liar', entries: [{ path: 'liar.txt', type: 'file', mode: 0o644, blob: liar }] }),
      );
      await refused(w.restore('alice', 'liar'), 'a blob with other content');

      // A manifest that is a link to one outside.
      fs.writeFileSync(path.join(outside, 'm.json'), JSON.stringify({ ...good, name: 'linked-manifest' }));
      fs.symlinkSync(path.join(outside, 'm.json'), path.join(root, 'alice', 'linked-manifest.json'));
      await refused(w.restore('alice', 'linked-manifest'), 'a manifest that is a link');
      assert.strictEqual(await layerSnapshot(shadow, 'alice'), before);

      // An agent directory that is a link to a directory outside: nothing is read from it, nothing written into it.
      fs.mkdirSync(path.join(outside, 'mallory'));
      fs.writeFileSync(path.join(outside, 'mallory', 'good.json'), JSON.stringify({ ...good, agent: 'mallory' }));
      fs.symlinkSync(path.join(outside, 'mallory'), path.join(root, 'mallory'));
      await shadow.layer('mallory').write('m.txt', 'mallory\n');
      await refused(w.restore('mallory', 'good'), 'an agent directory that is a link');
      await refused(w.checkpoint('mallory', 'planted'), 'saving into an agent directory that is a link');
      assert.deepStrictEqual(fs.readdirSync(path.join(outside, 'mallory')), ['good.json'], 'nothing was written through the link');
      assert.ok(!w.store.agents().includes('mallory'), 'a linked directory is no agent');

      // A link planted where a new blob goes is replaced by the blob, never written through.
      const next = 'new content of the agent\n';
      fs.symlinkSync(secret, path.join(root, 'blobs', sha256(next)));
      await shadow.layer('alice').write('src/next.js', next);
      await w.checkpoint('alice', 'next');
      assert.strictEqual(fs.readFileSync(secret, 'utf8'), secretText, 'the file the link pointed at is unchanged');
      assert.ok(fs.lstatSync(path.join(root, 'blobs', sha256(next))).isFile(), 'the blob is a plain file now');
      await w.restore('alice', 'next');
      assert.strictEqual((await shadow.layer('alice').readFile('src/next.js')).toString(), next);
      assert.deepStrictEqual(fs.readdirSync(outside).sort(), ['m.json', 'mallory', 'secret.txt']);
    });
  });

  it('the daemon started after a crash restores no forged autosave, and the folder stays untouched', async () => {
    // An autosave with a "../" path for a folder the state file names: the mount comes back, the layer does not.
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    const outside = tempDir('outside');
    try {
      // The checkpoint directory of the folder, as the daemon computes it (its real path's hash).
      const key = crypto.createHash('sha256').update(fs.realpathSync(lower)).digest('hex').slice(0, 24);
      const root = path.join(process.env.SHADOWFS_STATE_DIR!, 'checkpoints', key);
      fs.mkdirSync(path.join(root, 'blobs'), { recursive: true });
      fs.mkdirSync(path.join(root, 'eve'), { recursive: true });
      const data = 'planted\n';
      fs.writeFileSync(path.join(root, 'blobs', sha256(data)), data);
      const target = path.relative(lower, path.join(outside, 'planted.txt'));
      fs.writeFileSync(
        path.join(root, 'eve', 'autosave.json'),
        JSON.stringify({
          version: 1,
          name: 'autosave',
          agent: 'eve',
          folder: fs.realpathSync(lower),
          createdAt: new Date().toISOString(),
          auto: true,
          entries: [{ path: target, type: 'file', mode: 0o644, blob: sha256(data) }],
        }),
      );
      const mounts = mountsDir();
      const { listed } = await recoverFrom([
        { name: 'planted', folder: fs.realpathSync(lower), mountPoint: path.join(mounts, 'p-1'), createdMountPoint: true },
      ]);
      assert.deepStrictEqual(
        listed.map((s) => s.name),
        ['planted'],
      );
      const agents = (JSON.parse(cli(['list', '--json']).stdout) as { shadows: Array<{ agents: string[] }> }).shadows[0].agents;
      assert.ok(!agents.includes('eve'), `the forged autosave did not come back: ${JSON.stringify(agents)}`);
      assert.deepStrictEqual(fs.readdirSync(outside), [], 'nothing was written outside');
      await stopDaemonAndShadows();
      await guard.check();
    } finally {
      guard.stop();
    }
  });
});

// #27, deliverable 6: the daemon answers within a moment of starting, whatever state other mounts
// are in. Recovery checks each recorded mount with a time limit (a hung server answers nothing);
// it runs after the daemon listens, and the requests that wait for it are told why.
describe('recovery never holds the daemon up', function () {
  this.timeout(120_000);
  afterEach(() => stopDaemonAndShadows());
  after(() => stopTestDaemon());

  it('while a recorded mount hangs, status answers with what is being recovered and a waiting request hears why', async () => {
    const lower = fs.realpathSync(makeProject());
    const guard = new FolderGuard(lower);
    const mp = path.join(tempDir('dmnt'), 'hung');
    fs.mkdirSync(mp);
    // A shadow of the folder served by another process, which is then stopped: every access to
    // it waits (no kernel caching, so even a stat of its root reaches the stopped server).
    const server = spawn(
      process.execPath,
      [
        '-e',
        `require(${JSON.stringify(path.join(repoRoot, 'dist', 'src', 'shadow', 'index.js'))}).mount(process.argv[1], { mountPoint: process.argv[2], cacheTimeout: 0 })` +
          ".then(() => process.stdout.write('up\\n'), (e) => { console.error(e); process.exit(1); }); setInterval(() => {}, 1e6);",
        lower,
        mp,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    server.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const probeBefore = process.env.SHADOWFS_STALE_PROBE_MS;
    let client: ShadowClient | undefined;
    let agentClient: ShadowClient | undefined;
    try {
      await eventually(() => out.includes('up') || server.exitCode !== null, 30_000, 'the other process to mount');
      assert.ok(out.includes('up'), 'the other process mounted its shadow');
      process.kill(server.pid!, 'SIGSTOP');
      stopTestDaemon();
      fs.writeFileSync(
        daemonPaths().state,
        JSON.stringify({
          pid: 999_999_999,
          shadows: [{ name: 'hung', folder: lower, mountPoint: mp, createdMountPoint: false, views: [] }],
        }),
        { mode: 0o600 },
      );
      // The check of the hung mount may take a minute: long past anything below, so the order of
      // events is fixed by the stopped server, not by how fast this machine is.
      process.env.SHADOWFS_STALE_PROBE_MS = '60000';
      const waits: string[] = [];
      client = await ShadowClient.connect({ onWait: (w) => waits.push(w) });
      const st = await client.request('status');
      assert.deepStrictEqual(st.recovering, ['hung'], 'status answers while the recorded mount is being checked');
      assert.strictEqual((await client.request('health')).ok, true);
      const heard: Array<{ method: string; waitingFor: string }> = [];
      client.on('daemon/waiting', (p) => heard.push(p));
      const listing = client.request('list');
      await eventually(() => heard.length > 0, 30_000, 'the waiting list request to hear why');
      assert.strictEqual(heard[0].method, 'list');
      assert.match(heard[0].waitingFor, /recovering what a crashed daemon left \(the shadows hung\)/);
      // An agent's front end restricting its connection meanwhile is not told the shadows' names
      // nor where the log is (review: it heard every shadow being recovered).
      agentClient = await ShadowClient.connect({});
      const agentHeard: string[] = [];
      agentClient.on('daemon/waiting', (p) => agentHeard.push(p.waitingFor));
      const restricting = agentClient.request('session.restrict', { shadow: 'hung', agent: 'a' });
      await eventually(() => agentHeard.length > 0, 30_000, 'the restricting request to hear why it waits');
      assert.strictEqual(agentHeard[0], 'the daemon is still recovering what a crashed daemon left');
      // The server goes on: the check sees a live mount, which is left alone, and the shadow is
      // mounted again in a mount point of the daemon's own.
      process.kill(server.pid!, 'SIGCONT');
      const listed = (await listing).shadows;
      assert.deepStrictEqual(
        listed.map((s) => s.name),
        ['hung'],
      );
      assert.notStrictEqual(listed[0].mountPoint, mp);
      assert.ok(mountedPaths().has(mp), "the other process's mount is left alone");
      assert.deepStrictEqual((await client.request('status')).recovering, []);
      assert.strictEqual((await restricting).shadow, 'hung');
      await stopDaemonAndShadows();
      await guard.check();
    } finally {
      client?.close();
      agentClient?.close();
      if (probeBefore === undefined) delete process.env.SHADOWFS_STALE_PROBE_MS;
      else process.env.SHADOWFS_STALE_PROBE_MS = probeBefore;
      guard.stop();
      if (server.exitCode === null && server.signalCode === null) {
        process.kill(server.pid!, 'SIGCONT');
        server.kill('SIGKILL');
        await new Promise((r) => server.once('exit', r));
      }
      if (mountedPaths().has(mp)) spawnSync('umount', ['-l', mp]);
    }
  });
});
