// FUSE over io_uring (fuse_ll, native/fuse_ll/uring_loop.cc, docs/fuse-transport-plan.md section 3)
// on this machine's kernel. With root's switch on (/sys/module/fuse/parameters/enable_uring = Y)
// a fuse_ll mount takes its requests from io_uring ring entries instead of /dev/fuse: real
// workloads run through it and give the right results, the ring's request counter shows it
// carried them, and the ring's threads are gone after unmount. Every way of not getting the ring
// (the mount option off, the switch off, io_uring disabled system-wide, the kernel refusing the
// entries) leaves a mount that works on /dev/fuse and says so.
//
// Needs root (the switch and kernel.io_uring_disabled are written, and restored in `after`, even
// when a test fails) and a kernel built with CONFIG_FUSE_IO_URING (6.14+): without them the
// tests fail, saying which is missing. fuse_ll is mounted explicitly, in every pass.
import * as assert from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { addon } from '../src/shadow/native';
import type { Shadow } from '../src/shadow';
import { tempDir, withShadow } from './helpers/fixtures';

const ENABLE = '/sys/module/fuse/parameters/enable_uring';
const DISABLED = '/proc/sys/kernel/io_uring_disabled';
const MiB = 1024 * 1024;

function sh(script: string): string {
  const r = spawnSync('sh', ['-c', script], { encoding: 'utf8', maxBuffer: 64 * MiB });
  assert.strictEqual(r.status, 0, `${script}: ${r.stderr}`);
  return r.stdout;
}

/** A folder of `n` files f<i>.txt holding "file <i>\n", in sub/. */
function manyFiles(label: string, n: number): string {
  const lower = tempDir(label);
  fs.mkdirSync(path.join(lower, 'sub'));
  for (let i = 0; i < n; i++) fs.writeFileSync(path.join(lower, 'sub', `f${i}.txt`), `file ${i}\n`);
  return lower;
}

/** The ring entry threads of this process (uring_loop.cc names them sfs-ring-<queue>). */
function ringThreads(): number {
  let n = 0;
  for (const t of fs.readdirSync('/proc/self/task')) {
    try {
      if (fs.readFileSync(`/proc/self/task/${t}/comm`, 'utf8').startsWith('sfs-ring-')) n++;
    } catch {
      // the thread ended while we looked
    }
  }
  return n;
}

function setEnable(on: boolean): void {
  fs.writeFileSync(ENABLE, on ? 'Y' : 'N');
  assert.strictEqual(fs.readFileSync(ENABLE, 'utf8').trim(), on ? 'Y' : 'N');
}

/** Ring threads of other mounts in this process when a test began (see beforeEach). */
let baseline = 0;

/** A mount (of manyFiles) that did not get the ring: it reads and writes through /dev/fuse alone. */
function servedByDevFuse(shadow: Shadow, mp: string): void {
  assert.strictEqual(shadow.kernelTransport().ioUring, false);
  assert.strictEqual(sh(`cat '${mp}/sub/f7.txt'`), 'file 7\n');
  fs.writeFileSync(path.join(mp, 'sub', 'new.txt'), 'new\n');
  assert.strictEqual(sh(`cat '${mp}/sub/new.txt'`), 'new\n');
  assert.strictEqual(shadow.requestCounts().ring, 0);
  // Others' threads may still end meanwhile; none of this mount's may be there.
  assert.ok(ringThreads() <= baseline, `no ring threads of its own (${ringThreads()} against ${baseline} before)`);
}

describe('FUSE over io_uring (fuse_ll)', function () {
  let savedEnable: string | undefined;
  let savedDisabled: string | undefined;

  before(function () {
    assert.strictEqual(
      process.getuid?.(),
      0,
      'these tests turn FUSE over io_uring on system-wide (/sys/module/fuse/parameters/enable_uring), which needs root',
    );
    assert.ok(
      fs.existsSync(ENABLE),
      `${ENABLE} is missing: this kernel (${fs.readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()}) has no FUSE over io_uring (needs Linux 6.14+ built with CONFIG_FUSE_IO_URING=y)`,
    );
    assert.ok(addon().backends.includes('fuse_ll'), `this build has no fuse_ll backend (${addon().backends.join(', ')})`);
    savedEnable = fs.readFileSync(ENABLE, 'utf8').trim();
    savedDisabled = fs.readFileSync(DISABLED, 'utf8').trim();
  });

  // An unmount returns once its loop is done or, on a busy machine, a moment before: the ring
  // threads of the previous test's mount may still be ending. And other test files in this
  // process may keep a mount of their own on the ring (one lazily unmounted while another mount
  // namespace holds a copy is served until that copy goes). Each test counts this process's ring
  // threads against `baseline`: what is left once the count has stopped falling for a second.
  beforeEach(async function () {
    let last = ringThreads();
    for (let steady = 0, i = 0; steady < 20 && i < 600; i++) {
      await new Promise((r) => setTimeout(r, 50));
      const now = ringThreads();
      steady = now < last ? 0 : steady + 1;
      last = now;
    }
    baseline = last;
  });

  after(function () {
    // Back to what the machine had, whatever happened above.
    if (savedEnable !== undefined) fs.writeFileSync(ENABLE, savedEnable);
    if (savedDisabled !== undefined) fs.writeFileSync(DISABLED, savedDisabled);
    delete process.env.SHADOWFS_URING_FAULT;
  });

  it('with enable_uring on, cat, ls, writes, renames, removals, a 5 MiB file and a layer switch go through the ring and come out right', async () => {
    setEnable(true);
    const n = 300;
    const lower = manyFiles('uring', n);
    const threadsBefore = baseline;
    await withShadow(
      lower,
      async (shadow, mp) => {
        assert.strictEqual(
          shadow.kernelTransport().ioUring,
          true,
          `the kernel took the ring entries: ${JSON.stringify(shadow.kernelTransport())}`,
        );
        assert.ok(ringThreads() > threadsBefore, 'the ring entries have their threads');
        const ring0 = shadow.requestCounts().ring;
        const sub = path.join(mp, 'sub');

        // Reading and listing what the folder has.
        const expected = Array.from({ length: n }, (_, i) => `file ${i}\n`).join('');
        assert.strictEqual(sh(`cd '${sub}' && for i in $(seq 0 ${n - 1}); do cat f$i.txt; done`), expected);
        assert.deepStrictEqual(sh(`ls '${sub}'`), sh(`ls '${path.join(lower, 'sub')}'`));

        // Creating, renaming and removing many files, by shell tools.
        sh(`mkdir '${mp}/made' && cd '${mp}/made' && for i in $(seq 0 199); do echo "new $i" > n$i; done`);
        sh(`cd '${mp}/made' && for i in $(seq 0 199); do mv n$i r$i; done && for i in $(seq 0 2 199); do rm r$i; done`);
        const left = Array.from({ length: 100 }, (_, i) => `r${2 * i + 1}`).sort();
        assert.deepStrictEqual(fs.readdirSync(path.join(mp, 'made')).sort(), left);
        for (const name of left) assert.strictEqual(fs.readFileSync(path.join(mp, 'made', name), 'utf8'), `new ${name.slice(1)}\n`);
        sh(`cd '${sub}' && for i in $(seq 0 9); do echo changed >> f$i.txt; done && rm f10.txt f11.txt && mv f12.txt moved.txt`);
        assert.strictEqual(fs.readFileSync(path.join(sub, 'f3.txt'), 'utf8'), 'file 3\nchanged\n');
        assert.ok(!fs.existsSync(path.join(sub, 'f10.txt')));
        assert.strictEqual(fs.readFileSync(path.join(sub, 'moved.txt'), 'utf8'), 'file 12\n');
        assert.strictEqual(fs.readFileSync(path.join(lower, 'sub', 'f3.txt'), 'utf8'), 'file 3\n', 'the folder is not written');

        // 5 MiB (more than one 1 MiB request each way), byte for byte, through the mount and the API.
        const big = crypto.randomBytes(5 * MiB);
        const reference = path.join(tempDir('uring-ref'), 'big.bin');
        fs.writeFileSync(reference, big);
        sh(`cp '${reference}' '${mp}/copied.bin'`);
        fs.writeFileSync(path.join(mp, 'big.bin'), big);
        sh(`cmp '${reference}' '${mp}/big.bin' && cmp '${reference}' '${mp}/copied.bin'`);
        assert.ok(Buffer.compare(fs.readFileSync(path.join(mp, 'big.bin')), big) === 0, 'read back through the mount');
        assert.ok(Buffer.compare(await shadow.layer('default').readFile('big.bin'), big) === 0, 'read back through the API');
        assert.strictEqual(sh(`stat -c %s '${path.join(mp, 'big.bin')}'`).trim(), String(5 * MiB));

        // A layer switch: the other layer sees the folder, then its own change, then back.
        await shadow.createLayer('other');
        await shadow.activate('other');
        assert.strictEqual(fs.readFileSync(path.join(sub, 'f3.txt'), 'utf8'), 'file 3\n');
        assert.ok(!fs.existsSync(path.join(mp, 'big.bin')));
        await shadow.layer('other').write('sub/f3.txt', 'from the other layer\n');
        assert.strictEqual(sh(`cat '${sub}/f3.txt'`), 'from the other layer\n');
        await shadow.activate('default');
        assert.strictEqual(sh(`cat '${sub}/f3.txt'`), 'file 3\nchanged\n');
        assert.ok(fs.existsSync(path.join(mp, 'big.bin')));

        const counts = shadow.requestCounts();
        const served = counts.ring - ring0;
        // At least one request per file read above (cold LOOKUPs), per file made, moved and removed.
        assert.ok(served > n + 200 * 3, `the ring carried the workload's requests: ${served} (${JSON.stringify(counts)})`);
        assert.strictEqual(shadow.kernelTransport().ioUring, true);
      },
      { backend: 'fuse_ll' },
    );
    // They end with the mount's loop, which the unmount may not have waited for on a busy machine.
    for (let i = 0; i < 600 && ringThreads() > threadsBefore; i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(ringThreads() <= threadsBefore, 'the ring threads ended with the mount');
  });

  it('with enable_uring on, a request that holds its ring entry (a copy-up held by the test hook) holds up only that entry: lookups from the same CPU go on', async function () {
    setEnable(true);
    const lower = tempDir('uring-long');
    fs.writeFileSync(path.join(lower, 'big.bin'), 'folder\n');
    const control = tempDir('uring-control');
    // The core's test hook (content.cc): the copy-up that the first WRITE to big.bin makes says
    // so (hold.held) and keeps going until `hold` is gone, holding its ring entry all along. It
    // stands for a long copy-up without depending on how long one takes on this machine.
    const hold = path.join(control, 'hold');
    fs.writeFileSync(hold, '');
    process.env.SHADOWFS_TEST_HOLD_COPYUP = hold;
    const children: ReturnType<typeof spawn>[] = [];
    const exited = (child: ReturnType<typeof spawn>): Promise<{ code: number | null; out: string; err: string }> =>
      new Promise((resolve, reject) => {
        let out = '';
        let err = '';
        child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
        child.on('error', reject);
        child.on('exit', (code) => resolve({ code, out, err }));
      });
    try {
      await withShadow(
        lower,
        async (shadow, mp) => {
          assert.strictEqual(shadow.kernelTransport().ioUring, true);
          const ring0 = shadow.requestCounts().ring;
          try {
            // Writer and prober both on CPU 0, so both are served by queue 0's entries.
            const writer = spawn('taskset', ['-c', '0', 'sh', '-c', `printf x >> '${path.join(mp, 'big.bin')}'`]);
            children.push(writer);
            const writerDone = exited(writer);
            const deadline = Date.now() + 60_000;
            while (!fs.existsSync(`${hold}.held`)) {
              assert.ok(Date.now() < deadline, 'the copy-up never began');
              await new Promise((r) => setTimeout(r, 10));
            }
            // 200 lookups of new names (each a LOOKUP the kernel cannot answer from its cache).
            const prober = spawn('taskset', [
              '-c',
              '0',
              process.execPath,
              '-e',
              `const fs = require('fs'); let n = 0;
             for (let i = 0; i < 200; i++) { try { fs.statSync(${JSON.stringify(mp)} + '/nope-' + i); } catch { n++; } }
             console.log(n);`,
            ]);
            children.push(prober);
            // With the held entry holding up its queue, the prober would never finish: after a
            // minute this says so instead of waiting for mocha's timeout.
            const probed = await Promise.race([exited(prober), new Promise<'stuck'>((r) => setTimeout(() => r('stuck'), 60_000).unref())]);
            if (probed === 'stuck') assert.fail('lookups from the same CPU waited behind the held copy-up');
            assert.strictEqual(probed.code, 0, probed.err);
            assert.strictEqual(probed.out.trim(), '200', 'every lookup answered ENOENT');
            assert.strictEqual(writer.exitCode, null, 'the copy-up was still held while the lookups ran');
            assert.ok(shadow.requestCounts().ring - ring0 >= 200, 'the lookups came through the ring');
            fs.unlinkSync(hold);
            const w = await writerDone;
            assert.strictEqual(w.code, 0, w.err);
            assert.strictEqual(fs.readFileSync(path.join(mp, 'big.bin'), 'utf8'), 'folder\nx');
            assert.strictEqual(fs.readFileSync(path.join(lower, 'big.bin'), 'utf8'), 'folder\n');
          } finally {
            // Whatever failed: let a held copy-up go before the unmount, which would wait for it.
            fs.rmSync(hold, { force: true });
          }
        },
        { backend: 'fuse_ll' },
      );
    } finally {
      fs.rmSync(hold, { force: true });
      for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
      delete process.env.SHADOWFS_TEST_HOLD_COPYUP;
    }
  });

  it('ioUring: false, or SHADOWFS_IO_URING=0, keeps a mount on /dev/fuse while enable_uring is on', async () => {
    setEnable(true);
    const lower = manyFiles('uring-off', 20);
    const check = async (options: { ioUring?: boolean }): Promise<void> => {
      await withShadow(
        lower,
        async (shadow, mp) => {
          servedByDevFuse(shadow, mp);
        },
        { backend: 'fuse_ll', ...options },
      );
    };
    await check({ ioUring: false });
    process.env.SHADOWFS_IO_URING = '0';
    try {
      await check({});
    } finally {
      delete process.env.SHADOWFS_IO_URING;
    }
  });

  it('with enable_uring off (the default), the mount works on /dev/fuse', async () => {
    setEnable(false);
    const lower = manyFiles('uring-n', 20);
    await withShadow(
      lower,
      async (shadow, mp) => {
        assert.strictEqual(shadow.kernelTransport().ioUring, false);
        assert.strictEqual(sh(`cat '${mp}/sub/f7.txt'`), 'file 7\n');
        sh(`echo made > '${mp}/sub/made.txt' && mv '${mp}/sub/made.txt' '${mp}/sub/moved.txt'`);
        assert.strictEqual(fs.readFileSync(path.join(mp, 'sub', 'moved.txt'), 'utf8'), 'made\n');
        assert.strictEqual(shadow.requestCounts().ring, 0);
      },
      { backend: 'fuse_ll' },
    );
  });

  it('with io_uring disabled system-wide (kernel.io_uring_disabled = 2), the rings cannot be set up and the mount works on /dev/fuse', async () => {
    setEnable(true);
    fs.writeFileSync(DISABLED, '2');
    try {
      const lower = manyFiles('uring-disabled', 20);
      await withShadow(
        lower,
        async (shadow, mp) => {
          servedByDevFuse(shadow, mp);
        },
        { backend: 'fuse_ll' },
      );
    } finally {
      fs.writeFileSync(DISABLED, savedDisabled ?? '0');
    }
  });

  for (const fault of ['refuse-all', 'refuse-queue0']) {
    it(`when the kernel refuses ring entries (${fault === 'refuse-all' ? 'every one' : "queue 0's, after the others registered"}), the mount goes on through /dev/fuse`, async () => {
      setEnable(true);
      // uring_loop.cc's test hook: payload buffers smaller than the kernel accepts (-EINVAL).
      process.env.SHADOWFS_URING_FAULT = fault;
      try {
        const lower = manyFiles('uring-refused', 50);
        await withShadow(
          lower,
          async (shadow, mp) => {
            assert.strictEqual(shadow.kernelTransport().ioUring, false);
            assert.ok(ringThreads() <= baseline, 'the threads of the entries the kernel took were stopped');
            const expected = Array.from({ length: 50 }, (_, i) => `file ${i}\n`).join('');
            assert.strictEqual(sh(`cd '${mp}/sub' && for i in $(seq 0 49); do cat f$i.txt; done`), expected);
            const data = crypto.randomBytes(3 * MiB);
            fs.writeFileSync(path.join(mp, 'data.bin'), data);
            assert.ok(Buffer.compare(fs.readFileSync(path.join(mp, 'data.bin')), data) === 0);
            assert.strictEqual(shadow.requestCounts().ring, 0);
          },
          { backend: 'fuse_ll' },
        );
      } finally {
        delete process.env.SHADOWFS_URING_FAULT;
      }
    });
  }
});
