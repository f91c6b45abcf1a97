// The JS thread never waits for native work: while the addon writes and reads hundreds of
// megabytes, or switches layers while another process copies a big file of the folder up, a
// timer on the JS thread keeps firing. Nothing here asserts how fast anything is: the first test
// asserts that a timer on the JS thread ran while the native work was under way (a synchronous
// addon does all of it before the first tick); the second holds a copy-up (a test hook) and
// switches layers 50 times while it is held.
import * as assert from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { makeProject, tempDir, withShadow } from './helpers/fixtures';

/**
 * Ticks every 5 ms on the JS thread; ticks() says how many have run, stop() returns the longest
 * gap between two ticks (ms).
 */
function tickMonitor(): { ticks(): number; stop(): number } {
  let last = process.hrtime.bigint();
  let maxGap = 0;
  let ticks = 0;
  const timer = setInterval(() => {
    const now = process.hrtime.bigint();
    maxGap = Math.max(maxGap, Number(now - last) / 1e6);
    last = now;
    ticks++;
  }, 5);
  return {
    ticks: () => ticks,
    stop() {
      clearInterval(timer);
      const now = process.hrtime.bigint();
      return Math.max(maxGap, Number(now - last) / 1e6);
    },
  };
}

const MiB = 1024 * 1024;

describe('the JS thread never waits for native work', function () {
  it('writing and reading back big layer files keeps the event loop turning', async () => {
    const lower = makeProject();
    const spillDir = tempDir('spill');
    await withShadow(
      lower,
      async (shadow) => {
        const layer = shadow.layer('big');
        const chunk = Buffer.alloc(32 * MiB, 'b');
        // Calibrate: how many 32 MiB writes make about two seconds of native work here.
        const t0 = Date.now();
        await layer.write('calibrate.bin', chunk);
        const one = Math.max(1, Date.now() - t0);
        const count = Math.min(32, Math.max(4, Math.ceil(2000 / one)));
        // One batch, issued at once: a synchronous addon would run all of it before the first tick.
        const monitor = tickMonitor();
        const started = Date.now();
        const lengths = await Promise.all(
          Array.from({ length: count }, async (_, i) => {
            await layer.write(`f${i}.bin`, chunk);
            return (await layer.readFile(`f${i}.bin`)).length;
          }),
        );
        // Read at once: ticks that ran while the work was still outstanding. A synchronous addon
        // would do all of it in the microtasks before the first timer could fire: none.
        const during = monitor.ticks();
        const duration = Date.now() - started;
        const maxGap = monitor.stop();
        assert.deepStrictEqual(lengths, Array(count).fill(chunk.length));
        console.log(
          `      (${count} writes and reads of 32 MiB took ${duration} ms; the timer ran ${during} times meanwhile, longest gap ${maxGap.toFixed(1)} ms)`,
        );
        assert.ok(during >= 3, `the event loop turned only ${during} times while the native work (${duration} ms) was under way`);
      },
      { spillThreshold: 16 * MiB, spillDir },
    );
  });

  it('activate() while another process copies a file of the folder up keeps the event loop turning', async () => {
    const lower = makeProject();
    const size = 4 * MiB;
    fs.writeFileSync(path.join(lower, 'big.bin'), Buffer.alloc(size, 'f'));
    const control = tempDir('hold');
    // The core's test hook (content.cc): the copy-up says so (hold.held) and goes on until `hold`
    // is gone, holding the file's content lock as a long copy-up does. A process of its own lets
    // it go after 60 s if the test cannot (a JS thread blocked on that lock could not), and says
    // so (valve); the switches below must all be done before that.
    const hold = path.join(control, 'hold');
    const valve = path.join(control, 'valve');
    fs.writeFileSync(hold, '');
    process.env.SHADOWFS_TEST_HOLD_COPYUP = hold;
    const valveProc = spawn('sh', ['-c', `sleep 60; touch '${valve}'; rm -f '${hold}'`], { stdio: 'ignore' });
    try {
      await withShadow(lower, async (shadow, mp) => {
        await shadow.layer('other').write('other.txt', 'other');
        // The child's first write to big.bin copies it up (on every backend: a write-open alone copies nothing).
        const script = "const fs=require('fs');const fd=fs.openSync(process.argv[1],'a');fs.writeSync(fd,'tail');fs.closeSync(fd);";
        const child = spawn(process.execPath, ['-e', script, path.join(mp, 'big.bin')], { stdio: ['ignore', 'ignore', 'pipe'] });
        let err = '';
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
        try {
          while (!fs.existsSync(`${hold}.held`)) {
            assert.strictEqual(child.exitCode, null, `the child ended before its copy-up began: ${err}`);
            await new Promise((r) => setTimeout(r, 5));
          }
          const monitor = tickMonitor();
          const started = Date.now();
          const switches = 50;
          for (let i = 0; i < switches; i++) await shadow.activate(i % 2 ? 'default' : 'other');
          const duration = Date.now() - started;
          const maxGap = monitor.stop();
          console.log(
            `      (${switches} switches while the copy-up was held took ${duration} ms; longest event-loop gap ${maxGap.toFixed(1)} ms)`,
          );
          assert.ok(!fs.existsSync(valve), 'the switches waited for the copy-up (they ended only once the valve let it go)');
          assert.ok(fs.existsSync(hold) && child.exitCode === null, 'the copy-up was still held while the switches ran');
          fs.rmSync(hold);
          assert.strictEqual(await exited, 0, err);
        } finally {
          // Whatever failed: let a held copy-up go before the unmount, which would wait for it.
          fs.rmSync(hold, { force: true });
          if (child.exitCode === null) child.kill('SIGKILL');
        }
        // The append landed, whole, in the layer that was active when the child wrote.
        const holders: string[] = [];
        for (const agent of ['default', 'other'])
          if ((await shadow.layer(agent).changes()).some((c) => c.path === 'big.bin' && c.kind === 'modified')) holders.push(agent);
        assert.strictEqual(holders.length, 1, `big.bin was copied up into ${holders.join(', ') || 'no layer'}`);
        await shadow.activate(holders[0]);
        assert.strictEqual(fs.statSync(path.join(mp, 'big.bin')).size, size + 4);
      });
    } finally {
      fs.rmSync(hold, { force: true });
      valveProc.kill('SIGKILL');
      delete process.env.SHADOWFS_TEST_HOLD_COPYUP;
    }
  });
});
