// The winfsp backend's mount lifecycle through the WinFsp test double, under wine (#28
// deliverable 3): suspend and resume of a directory mount by WinFsp's rules (WinFsp removes the
// mount directory with the volume and makes it again; nothing else may make it), and the volume
// forms: what the double can check of a network volume (WinFsp.Net with the \shadowfs\<name>
// prefix; refused on a directory, as WinFsp's mount.c refuses it). No scenario runs here: the
// double only plays WinFsp's DLL for Create, StartDispatcher, SetMountPoint and Delete.
//
// WHAT IT CANNOT SHOW. The double makes a plain directory, not a junction to a volume, and
// defines no drive letter (see test/native/winfsp_double/double_driver.cc), so a drive-letter
// mount never answers the backend's probe here, and GetFinalPathNameByHandleW on a network
// volume (the reason for that form) is not observed: no Windows, no WinFsp driver, no MUP ran.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const repoRoot = path.join(__dirname, '..', '..', '..');
const moduleFile = path.join(repoRoot, 'build-win', 'Release', 'shadowfs.node');
const doubleDir = path.join(repoRoot, 'build-win', 'winfsp_double');
const KEY = 'HKLM\\SOFTWARE\\WOW6432Node\\WinFsp';

interface Result {
  error?: string;
  steps: Record<string, unknown>;
}

async function child(): Promise<void> {
  const base = process.env.SHADOWFS_WFL_BASE as string;
  const a = path.join(base, 'A');
  const mp = path.join(base, 'mnt');
  const steps: Record<string, unknown> = {};
  const out: Result = { steps };
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { mount } = require('../../src/shadow') as typeof import('../../src/shadow');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { addon } = require('../../src/shadow/native') as typeof import('../../src/shadow/native');
  const failure = async (p: Promise<unknown>): Promise<{ code?: string; message: string } | undefined> => {
    try {
      await p;
      return undefined;
    } catch (err) {
      return { code: (err as { code?: string }).code, message: (err as Error).message };
    }
  };
  try {
    // A directory: a disk volume (the only form WinFsp puts there).
    const s = await mount(a, { backend: 'winfsp', mountPoint: mp, layer: 'agent', caseInsensitive: true });
    steps.volume = s.volume;
    steps.networkTransport = s.kernelTransport()['network-volume'];
    steps.dirWhileMounted = fs.existsSync(mp);
    await s.layer('agent').write('kept.txt', 'kept');
    await s.suspend();
    steps.suspended = s.suspended;
    steps.dirWhileSuspended = fs.existsSync(mp);
    await s.resume();
    steps.resumed = s.mounted;
    steps.dirAfterResume = fs.existsSync(mp);
    steps.layerKept = (await s.layer('agent').readFile('kept.txt')).toString();
    // Suspended again; something leaves an empty directory there: WinFsp would refuse it, the
    // backend removes it first. A directory with content is refused with the reason.
    await s.suspend();
    fs.mkdirSync(mp);
    steps.resumeOverEmpty = (await failure(s.resume())) ?? 'ok';
    await s.suspend();
    fs.mkdirSync(mp);
    fs.writeFileSync(path.join(mp, 'someone.txt'), 'x');
    steps.resumeOverFull = await failure(s.resume());
    steps.fullKept = fs.existsSync(path.join(mp, 'someone.txt'));
    fs.rmSync(mp, { recursive: true, force: true });
    steps.resumeAfterCleared = (await failure(s.resume())) ?? 'ok';
    await s.unmount();
    steps.dirAfterUnmount = fs.existsSync(mp);

    // The network form asked for on a directory: refused before anything is touched.
    const asked = path.join(base, 'net-dir');
    steps.networkOnDirectory = await failure(mount(a, { backend: 'winfsp', mountPoint: asked, volume: 'network' }));
    // The same through the addon directly: the double (as WinFsp's mount.c) refuses a network
    // volume on a directory; the message names the volume the double made from the params.
    const lib = addon();
    const raw = new lib.Shadow('winfsp', a, asked, { caseInsensitive: true, volumePrefix: '\\shadowfs\\lifecycle' });
    steps.nativeNetworkOnDirectory = await failure(raw.mount());
    steps.netDirMade = fs.existsSync(asked);
    const bad = new lib.Shadow('winfsp', a, 'Q:', { caseInsensitive: true, volumePrefix: 'shadowfs' });
    steps.badPrefix = await failure(bad.mount());
    // The default: a free drive letter, a network volume. The double records the letter only,
    // so the probe cannot reach the volume: the mount fails after 5 s, naming the volume the
    // double created (WinFsp.Net, with the prefix appended to the volume name).
    steps.networkDefault = await failure(mount(a, { backend: 'winfsp' }));
  } catch (err) {
    out.error = err instanceof Error ? (err.stack ?? err.message) : String(err);
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

if (process.env.SHADOWFS_WFL_CHILD === '1') {
  child().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stdout.write(`${JSON.stringify({ error: String(err), steps: {} })}\n`);
      process.exit(1);
    },
  );
} else if (typeof describe === 'function') {
  describe('winfsp mount lifecycle through the WinFsp test double, under wine (a model of WinFsp, no driver, no Windows)', function () {
    this.timeout(120_000);
    let base = '';
    let r: Result = { steps: {} };
    let output = '';

    before(function () {
      if (process.platform !== 'win32') throw new Error('these tests run on a Windows node.exe: npm run test:windows');
      assert.ok(fs.existsSync(moduleFile), `${moduleFile} is missing: npm run build:win`);
      assert.ok(fs.existsSync(path.join(doubleDir, 'bin', 'winfsp-x64.dll')), 'the double is missing: npm run build:win');
      base = fs.mkdtempSync(path.join(os.tmpdir(), 'wfl-'));
      fs.mkdirSync(path.join(base, 'A'));
      fs.writeFileSync(path.join(base, 'A', 'hello.txt'), 'hello');
      const reg = spawnSync('reg', ['add', KEY, '/v', 'InstallDir', '/t', 'REG_SZ', '/d', `${doubleDir}\\`, '/f'], { windowsHide: true });
      assert.strictEqual(reg.status, 0);
      const c = spawnSync(process.execPath, [__filename], {
        encoding: 'utf8',
        timeout: 100_000,
        env: { ...process.env, SHADOWFS_WFL_CHILD: '1', SHADOWFS_WFL_BASE: base, SHADOWFS_NATIVE_MODULE: moduleFile },
      });
      output = `status ${c.status}\n${c.stdout}\n${c.stderr}`;
      try {
        r = JSON.parse((c.stdout ?? '').trim().split('\n').pop() ?? '') as Result;
      } catch {
        r = { error: `no result from the child: ${output}`, steps: {} };
      }
    });

    after(() => {
      spawnSync('reg', ['delete', KEY, '/f'], { windowsHide: true });
      if (base) fs.rmSync(base, { recursive: true, force: true });
    });

    it('ran', () => assert.strictEqual(r.error, undefined, `${r.error}\n${output}`));

    it('mounts a directory as a disk volume; suspend lets WinFsp remove the directory, resume lets it make it again, layers kept', () => {
      const s = r.steps;
      assert.strictEqual(s.volume, 'disk', output);
      assert.strictEqual(s.networkTransport, false);
      assert.strictEqual(s.dirWhileMounted, true);
      assert.strictEqual(s.suspended, true);
      assert.strictEqual(s.dirWhileSuspended, false, 'nothing makes the mount directory while suspended');
      assert.strictEqual(s.resumed, true);
      assert.strictEqual(s.dirAfterResume, true);
      assert.strictEqual(s.layerKept, 'kept');
      assert.strictEqual(s.dirAfterUnmount, false);
    });

    it('resumes over an empty directory left there, refuses one with content (kept) with the reason, resumes once it is gone', () => {
      const s = r.steps;
      assert.strictEqual(s.resumeOverEmpty, 'ok', JSON.stringify(s.resumeOverEmpty));
      const full = s.resumeOverFull as { code?: string; message: string } | undefined;
      assert.strictEqual(full?.code, 'MOUNT_FAILED', JSON.stringify(full));
      assert.match(full.message, /exists and is not an empty directory; WinFsp creates the mount directory itself/);
      assert.strictEqual(s.fullKept, true);
      assert.strictEqual(s.resumeAfterCleared, 'ok', JSON.stringify(s.resumeAfterCleared));
    });

    it('refuses a network volume on a directory: in TypeScript first, and as WinFsp (the double) refuses it, with the reason', () => {
      const s = r.steps;
      const ts = s.networkOnDirectory as { code?: string; message: string } | undefined;
      assert.strictEqual(ts?.code, 'INVALID_ARGUMENT', JSON.stringify(ts));
      assert.match(ts.message, /network volume goes on a drive letter/);
      const native = s.nativeNetworkOnDirectory as { code?: string; message: string } | undefined;
      assert.strictEqual(native?.code, 'EINVAL', JSON.stringify(native));
      assert.match(native.message, /cannot mount the network volume \\Device\\Volume\{[^}]+\}\\shadowfs\\lifecycle on the directory/);
      assert.strictEqual(s.netDirMade, false);
      const bad = s.badPrefix as { code?: string; message: string } | undefined;
      assert.strictEqual(bad?.code, 'EINVAL', JSON.stringify(bad));
      assert.match(bad.message, /not of the form/);
    });

    it('by default creates a network volume named \\shadowfs\\<folder>-<random> on a free drive letter (the probe cannot reach it in the double)', () => {
      const f = r.steps.networkDefault as { code?: string; message: string } | undefined;
      assert.strictEqual(f?.code, 'MOUNT_FAILED', JSON.stringify(f));
      assert.match(f.message, /the WinFsp volume \\Device\\Volume\{[^}]+\}\\shadowfs\\A-[0-9a-f]{6} at [D-Z]:\\ did not answer/);
    });
  });
}
