// processAlive (src/common/pid.ts) on real processes: a live one, one gone, and a zombie — ended
// but not reaped by its parent, which still answers signal 0 (review: a daemon killed a moment
// ago, a zombie while its parent was slow to reap, held its lock against the next daemon).
import * as assert from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import { processAlive } from '../../src/common/pid';
import { eventually } from '../helpers/fixtures';

describe('unit: processAlive', () => {
  it('is true for a live process, false for a gone one and for a zombie (Linux)', async function () {
    if (process.platform !== 'linux') this.skip();
    assert.strictEqual(processAlive(process.pid), true);
    assert.strictEqual(processAlive(0), false);
    assert.strictEqual(processAlive(-1), false);
    // `sleep 0.1` becomes a child of the `sleep 30` the shell execs into, which never reaps it.
    const parent = spawn('sh', ['-c', 'sleep 0.1 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const zombie = await new Promise<number>((resolve) =>
        parent.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim()))),
      );
      assert.ok(zombie > 0);
      await eventually(() => /\) Z /.test(fs.readFileSync(`/proc/${zombie}/stat`, 'latin1')), 10_000, 'the child to end unreaped');
      process.kill(zombie, 0); // signal 0 still reaches it
      assert.strictEqual(processAlive(zombie), false, 'a zombie is not alive');
      assert.strictEqual(processAlive(parent.pid!), true);
    } finally {
      parent.kill('SIGKILL');
    }
    await new Promise((r) => parent.once('exit', r));
    await eventually(() => !processAlive(parent.pid!), 10_000, 'the reaped parent to be gone');
  });
});
