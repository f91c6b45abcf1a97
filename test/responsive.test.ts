// The JS thread never waits for native work: while the addon writes and reads hundreds of
// megabytes, or switches layers while another process copies a big file of the folder up, a
// timer on the JS thread keeps firing. Nothing here asserts how fast anything is: each test
// measures how long the native work took and asserts that the event loop was never blocked
// for more than a small part of it (a synchronous addon blocks it for all of it).
import * as assert from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { makeProject, tempDir, withShadow } from './helpers/fixtures';

/** Ticks every 5 ms on the JS thread; stop() returns the longest gap between two ticks (ms). */
function tickMonitor(): { stop(): number } {
  let last = process.hrtime.bigint();
  let maxGap = 0;
  const timer = setInterval(() => {
    const now = process.hrtime.bigint();
    maxGap = Math.max(maxGap, Number(now - last) / 1e6);
    last = now;
  }, 5);
  return {
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
        const duration = Date.now() - started;
        const maxGap = monitor.stop();
        assert.deepStrictEqual(lengths, Array(count).fill(chunk.length));
        console.log(`      (${count} writes and reads of 32 MiB took ${duration} ms; longest event-loop gap ${maxGap.toFixed(1)} ms)`);
        assert.ok(
          maxGap < duration / 4,
          `the event loop stood still for ${maxGap.toFixed(1)} ms of the ${duration} ms the native work took`,
        );
      },
      { spillThreshold: 16 * MiB, spillDir },
    );
  });

  it('activate() while another process copies a big file of the folder up keeps the event loop turning', async () => {
    const lower = makeProject();
    const big = path.join(lower, 'big.bin');
    const fd = fs.openSync(big, 'w');
    const block = Buffer.alloc(16 * MiB, 'f');
    for (let i = 0; i < 48; i++) fs.writeSync(fd, block);
    fs.closeSync(fd);
    await withShadow(lower, async (shadow, mp) => {
      await shadow.layer('other').write('other.txt', 'other');
      // The child's first write-open of big.bin copies 768 MiB up; it reports how long that took.
      const script =
        "const fs=require('fs');process.stdout.write('open\\n');const t=Date.now();" +
        "const fd=fs.openSync(process.argv[1],'a');const ms=Date.now()-t;fs.writeSync(fd,'tail');fs.closeSync(fd);" +
        "process.stdout.write('done '+ms+'\\n');";
      const child = spawn(process.execPath, ['-e', script, path.join(mp, 'big.bin')], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
      try {
        while (!out.includes('open') && child.exitCode === null) await new Promise((r) => setTimeout(r, 1));
        const monitor = tickMonitor();
        const started = Date.now();
        let switches = 0;
        while (!out.includes('done') && child.exitCode === null) {
          await shadow.activate(switches++ % 2 ? 'default' : 'other');
        }
        const duration = Date.now() - started;
        const maxGap = monitor.stop();
        assert.strictEqual(await exited, 0);
        const copyMs = Number(/done (\d+)/.exec(out)?.[1]);
        console.log(
          `      (copy-up took ${copyMs} ms; ${switches} switches meanwhile; longest event-loop gap ${maxGap.toFixed(1)} ms of ${duration} ms)`,
        );
        assert.ok(
          maxGap < Math.max(copyMs, duration) / 4,
          `the event loop stood still for ${maxGap.toFixed(1)} ms while the copy-up took ${copyMs} ms`,
        );
        // The append landed, whole, in the layer that was active when the child opened the file.
        const holders: string[] = [];
        for (const agent of ['default', 'other'])
          if ((await shadow.layer(agent).changes()).some((c) => c.path === 'big.bin' && c.kind === 'modified')) holders.push(agent);
        assert.strictEqual(holders.length, 1, `big.bin was copied up into ${holders.join(', ') || 'no layer'}`);
        await shadow.activate(holders[0]);
        assert.strictEqual(fs.statSync(path.join(mp, 'big.bin')).size, 48 * 16 * MiB + 4);
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
      }
    });
  });
});
