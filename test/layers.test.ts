// Agent layers on one shadow: atomic switches with no stale read (both invalidation paths),
// what open handles see, the round-robin scheduler, own views, and layer bookkeeping.
import * as assert from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Shadow, ShadowError } from '../src';
import { errCode, makeProject, tempDir, withShadow } from './helpers/fixtures';
import { probe } from './helpers/probe';

/** FUSE_NOTIFY_INC_EPOCH arrived in Linux 6.16 (FUSE protocol 7.44). */
function kernelHasEpoch(): boolean {
  const [major, minor] = os.release().split('.').map(Number);
  return major > 6 || (major === 6 && minor >= 16);
}

const isCode = (code: string) => (e: unknown) => e instanceof ShadowError && e.code === code;

/** Gives layer X and layer Y different versions of the same paths. */
async function twoLayers(shadow: Shadow): Promise<void> {
  const x = shadow.layer('x');
  const y = shadow.layer('y');
  await x.write('README.md', 'layer x\n');
  await y.write('README.md', 'layer y, which is longer\n');
  await x.write('only-in-x.txt', 'x');
  await y.remove('src/math.js');
  await x.write('shape', 'a file in x');
  await y.write('shape/inner.txt', 'a directory in y');
  await y.remove('deep');
}

describe('agent layers', function () {
  for (const useEpoch of [true, false]) {
    it(`switching layers never shows the previous layer, even with 60 s kernel caches (${useEpoch ? 'epoch' : 'per-entry'} invalidation)`, async () => {
      const lower = makeProject();
      await withShadow(
        lower,
        async (shadow, mp) => {
          await twoLayers(shadow);
          const p = (r: string): string => path.join(mp, r);
          const r1 = await shadow.activate('x');
          // fuse_hl lets the kernel cache nothing, so it has nothing to invalidate.
          assert.strictEqual(r1.epoch, useEpoch && kernelHasEpoch() && shadow.backend === 'fuse_ll');
          // Fill every kind of kernel cache with x's view.
          assert.strictEqual(fs.readFileSync(p('README.md'), 'utf8'), 'layer x\n');
          assert.strictEqual(probe('mmap-read', p('README.md')), 'layer x');
          assert.strictEqual(fs.statSync(p('README.md')).size, 8);
          assert.ok(fs.existsSync(p('only-in-x.txt')));
          assert.ok(fs.statSync(p('shape')).isFile());
          assert.ok(fs.readdirSync(p('src')).includes('math.js'));
          assert.strictEqual(fs.readFileSync(p('deep/a/top.txt'), 'utf8'), 'top\n');
          assert.strictEqual(
            errCode(() => fs.statSync(p('shape/inner.txt'))),
            'ENOTDIR',
          );

          await shadow.activate('y');
          assert.strictEqual(fs.readFileSync(p('README.md'), 'utf8'), 'layer y, which is longer\n');
          assert.strictEqual(probe('mmap-read', p('README.md')), 'layer y, which is longer');
          assert.strictEqual(fs.statSync(p('README.md')).size, 25);
          assert.strictEqual(
            errCode(() => fs.statSync(p('only-in-x.txt'))),
            'ENOENT',
          );
          assert.ok(fs.statSync(p('shape')).isDirectory());
          assert.strictEqual(fs.readFileSync(p('shape/inner.txt'), 'utf8'), 'a directory in y');
          assert.deepStrictEqual(fs.readdirSync(p('src')), []);
          assert.strictEqual(
            errCode(() => fs.statSync(p('deep/a/top.txt'))),
            'ENOENT',
          );

          await shadow.activate(null); // the folder exactly, read-only
          assert.strictEqual(fs.readFileSync(p('README.md'), 'utf8'), fs.readFileSync(path.join(lower, 'README.md'), 'utf8'));
          assert.ok(!fs.existsSync(p('shape')));
          assert.strictEqual(
            errCode(() => fs.writeFileSync(p('new.txt'), 'x')),
            'EROFS',
          );
          await assert.rejects(shadow.write('a', 'b'), isCode('NO_ACTIVE_LAYER'));

          await shadow.activate('x');
          assert.strictEqual(fs.readFileSync(p('README.md'), 'utf8'), 'layer x\n');
          assert.ok(fs.statSync(p('shape')).isFile());
          assert.ok(fs.readdirSync(p('src')).includes('math.js'));
        },
        { cacheTimeout: 60, useEpoch },
      );
    });
  }

  it('after each of 2,000 switches only the new layer shows, and readers in other processes never see a mix (fuse_ll)', async () => {
    const lower = makeProject();
    const agents = ['a', 'b', 'c'];
    const files = Array.from({ length: 8 }, (_, i) => `hot/f${i}.txt`);
    // Each layer's content is one letter repeated, with a length of its own: a mix shows.
    const content = (agent: string, i: number): string => agent.repeat(1000 + agents.indexOf(agent) * 777 + i);
    await withShadow(
      lower,
      async (shadow, mp) => {
        for (const a of agents) for (let i = 0; i < files.length; i++) await shadow.layer(a).write(files[i], content(a, i));
        await shadow.activate('a');
        const reader = `
          const fs = require('fs'); const path = require('path');
          const mp = ${JSON.stringify(mp)}; const files = ${JSON.stringify(files)};
          let reads = 0; const deadline = Date.now() + 60000;
          while (!fs.existsSync(path.join(mp, 'hot/stop')) && Date.now() < deadline) {
            if (reads === files.length) console.log('READY');
            for (let i = 0; i < files.length; i++) {
              const s = fs.readFileSync(path.join(mp, files[i]), 'utf8');
              const c = s[0];
              const want = ${JSON.stringify(agents)}.indexOf(c);
              if (want < 0 || s.length !== 1000 + want * 777 + i || s !== c.repeat(s.length)) {
                console.log('MIXED ' + files[i] + ' ' + s.length + ' ' + JSON.stringify(s.slice(0, 20)));
                process.exit(1);
              }
              reads++;
            }
          }
          console.log('OK ' + reads);`;
        // fuse_hl names objects by path, so a program whose open and fstat fall on both sides of
        // a switch can see one layer's size with the other's bytes (docs/how-it-works.md, "native/fuse_hl"):
        // it gets no concurrent readers, only the check after every switch below.
        const readerCount = shadow.backend === 'fuse_ll' ? 3 : 0;
        const readers = Array.from({ length: readerCount }, () =>
          spawn(process.execPath, ['-e', reader], { stdio: ['ignore', 'pipe', 'inherit'] }),
        );
        let ready = 0;
        let signalReady: () => void = () => undefined;
        const allReady = new Promise<void>((resolve) => (signalReady = resolve));
        const outputs = readers.map(
          (r) =>
            new Promise<string>((resolve) => {
              let out = '';
              r.stdout.on('data', (d: Buffer) => {
                out += d.toString();
                if (d.toString().includes('READY') && ++ready === readers.length) signalReady();
              });
              r.on('exit', () => resolve(out.replace('READY\n', '').trim()));
            }),
        );
        // Switch only once every reader is reading, so each one races the switches.
        await Promise.race([allReady, Promise.all(outputs)]);
        const times: number[] = [];
        try {
          for (let n = 0; n < 2000; n++) {
            const agent = agents[n % agents.length];
            times.push((await shadow.activate(agent)).ms);
            // Right after activate returns, this process sees the new layer and only it.
            const i = n % files.length;
            assert.strictEqual(fs.readFileSync(path.join(mp, files[i]), 'utf8'), content(agent, i), `switch #${n} to ${agent}`);
          }
          for (const a of agents) await shadow.layer(a).write('hot/stop', '');
        } finally {
          for (const a of agents) await shadow.layer(a).write('hot/stop', '');
        }
        const results = await Promise.all(outputs);
        for (const r of results) assert.match(r, /^OK [1-9]\d*$/, r);
        times.sort((a, b) => a - b);
        process.stdout.write(
          `      (activate: median ${times[1000].toFixed(3)} ms, p99 ${times[1980].toFixed(3)} ms with 3 readers running; ${results.join(', ')})\n`,
        );
      },
      { cacheTimeout: 60 },
    );
  });

  it('an open file keeps the object it opened: writes after a switch land in its own layer', async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow, mp) => {
      await twoLayers(shadow);
      await shadow.activate('x');
      const fd = fs.openSync(path.join(mp, 'README.md'), 'r+');
      try {
        await shadow.activate('y');
        fs.writeSync(fd, 'X', 0);
        const buf = Buffer.alloc(8);
        fs.readSync(fd, buf, 0, 8, 0);
        assert.strictEqual(buf.toString(), 'Xayer x\n');
      } finally {
        fs.closeSync(fd);
      }
      assert.strictEqual((await shadow.layer('x').readFile('README.md')).toString(), 'Xayer x\n');
      assert.strictEqual(fs.readFileSync(path.join(mp, 'README.md'), 'utf8'), 'layer y, which is longer\n');
    });
  });

  it('layers are independent: readFile, changes, reset and drop per agent', async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow) => {
      await twoLayers(shadow);
      assert.deepStrictEqual((await shadow.agents()).sort(), ['default', 'x', 'y']);
      assert.strictEqual((await shadow.layer('y').readFile('README.md')).toString(), 'layer y, which is longer\n');
      assert.strictEqual(
        (await shadow.layer('x').readFile('src/math.js')).toString(),
        fs.readFileSync(path.join(lower, 'src/math.js'), 'utf8'),
      );
      await assert.rejects(shadow.layer('y').readFile('src/math.js'), isCode('NOT_FOUND'));
      await assert.rejects(shadow.layer('x').readFile('link-to-math'), isCode('PATH_THROUGH_SYMLINK'));
      assert.deepStrictEqual(
        (await shadow.layer('x').changes()).map((c) => `${c.kind} ${c.path}`),
        ['modified README.md', 'added only-in-x.txt', 'added shape'],
      );
      assert.ok((await shadow.stats()).layers.y.paths >= 4);
      await shadow.activate('x');
      await assert.rejects(shadow.dropLayer('x'), isCode('LAYER_BUSY'));
      await shadow.dropLayer('y');
      await assert.rejects(shadow.activate('y'), isCode('UNKNOWN_AGENT'));
      await shadow.layer('x').reset();
      assert.deepStrictEqual(await shadow.layer('x').changes(), []);
      for (const bad of ['', 'a/b', 'x\0', 'n'.repeat(129)]) assert.throws(() => shadow.layer(bad), isCode('INVALID_AGENT'));
    });
  });

  it('withLayer: one job at a time, agents served round robin, each job sees its own layer', async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow) => {
      for (const a of ['flood', 'calm']) await shadow.layer(a).write('who.txt', a);
      const order: string[] = [];
      let running = 0;
      let maxRunning = 0;
      const job = (agent: string) => async (dir: string) => {
        running++;
        maxRunning = Math.max(maxRunning, running);
        assert.strictEqual(shadow.active, agent);
        assert.strictEqual(fs.readFileSync(path.join(dir, 'who.txt'), 'utf8'), agent);
        await new Promise((r) => setTimeout(r, 5));
        order.push(agent);
        running--;
      };
      const floods = Array.from({ length: 10 }, () => shadow.withLayer('flood', job('flood')));
      const calms = Array.from({ length: 2 }, () => shadow.withLayer('calm', job('calm')));
      assert.ok((await shadow.stats()).scheduler.queued >= 10);
      await Promise.all([...floods, ...calms]);
      assert.strictEqual(maxRunning, 1);
      assert.strictEqual(order.length, 12);
      assert.ok(order.slice(0, 5).filter((a) => a === 'calm').length === 2, `calm waited behind the flood: ${order.join(',')}`);
      const st = (await shadow.stats()).scheduler.agents;
      assert.strictEqual(st.flood.runs, 10);
      assert.strictEqual(st.calm.runs, 2);
      assert.strictEqual(st.calm.queued, 0);
    });
  });

  it('withLayer: a job that times out or is aborted releases the shadow; a queued job can be cancelled', async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow) => {
      let sawAbort = false;
      const stuck = shadow.withLayer(
        'slow',
        (_dir, signal) =>
          new Promise<void>((resolve) => {
            const stop = (): void => {
              sawAbort = true;
              resolve();
            };
            // The timeout counts from the call: on a busy machine it may be over before the job starts.
            if (signal.aborted) stop();
            else signal.addEventListener('abort', stop);
          }),
        { timeout: 100 },
      );
      const stuckCheck = assert.rejects(stuck, isCode('TIMEOUT'));
      const controller = new AbortController();
      const cancelled = assert.rejects(
        shadow.withLayer('other', async () => 'must not run', { signal: controller.signal }),
        isCode('ABORTED'),
      );
      const next = shadow.withLayer('fast', async (dir) => fs.existsSync(path.join(dir, 'README.md')));
      controller.abort();
      await stuckCheck;
      await cancelled;
      assert.strictEqual(await next, true);
      assert.ok(sawAbort, 'the timed-out job is told to stop');
      const running = new AbortController();
      const long = shadow.withLayer('slow', () => new Promise<void>(() => undefined), { signal: running.signal });
      setTimeout(() => running.abort(), 50);
      await assert.rejects(long, isCode('ABORTED'));
      assert.strictEqual(await shadow.withLayer('fast', async () => 42), 42);
      assert.strictEqual((await shadow.stats()).scheduler.agents.slow.timeouts, 1);
    });
  });

  it('an own view shows its agent layer while the shared mount switches between others', async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow, mp) => {
      for (const a of ['a', 'b', 'solo']) await shadow.layer(a).write('who.txt', a);
      const view = await shadow.openView('solo', { mountPoint: path.join(tempDir('view'), 'v') });
      try {
        assert.notStrictEqual(view.mountPoint, mp);
        const seen = new Set<string>();
        for (let n = 0; n < 200; n++) {
          const agent = n % 2 ? 'a' : 'b';
          await shadow.withLayer(agent, async (dir) => {
            assert.strictEqual(fs.readFileSync(path.join(dir, 'who.txt'), 'utf8'), agent);
            seen.add(fs.readFileSync(path.join(view.mountPoint, 'who.txt'), 'utf8'));
          });
        }
        assert.deepStrictEqual([...seen], ['solo']);
        // Writes through the view land in its layer; API writes to the layer show in the view at once.
        fs.writeFileSync(path.join(view.mountPoint, 'from-view.txt'), 'v');
        assert.strictEqual((await shadow.layer('solo').readFile('from-view.txt')).toString(), 'v');
        await shadow.layer('solo').write('who.txt', 'solo again');
        assert.strictEqual(fs.readFileSync(path.join(view.mountPoint, 'who.txt'), 'utf8'), 'solo again');
        await assert.rejects(shadow.dropLayer('solo'), isCode('LAYER_BUSY'));
        const r = spawnSync('git', ['--version'], { cwd: view.mountPoint });
        assert.strictEqual(r.status, 0);
      } finally {
        await view.close();
      }
      assert.ok(!view.open);
      await shadow.dropLayer('solo');
    });
  });
});

describe('spilling big files out of memory', function () {
  it('files past the threshold move to unlinked temporary files and keep working', async () => {
    const lower = makeProject();
    const big = Buffer.alloc(3 * 1024 * 1024, 'A');
    fs.writeFileSync(path.join(lower, 'big-in-folder.bin'), big);
    const spillDir = tempDir('spill');
    await withShadow(
      lower,
      async (shadow, mp) => {
        const p = (r: string): string => path.join(mp, r);
        const layer = shadow.layer('default');
        assert.strictEqual((await layer.stats()).spilledBytes, 0);
        // Written through the mount, chunk by chunk, past the threshold.
        const fd = fs.openSync(p('out.bin'), 'w');
        const chunk = Buffer.alloc(256 * 1024);
        for (let i = 0; i < 20; i++) fs.writeSync(fd, chunk.fill(i), 0, chunk.length, i * chunk.length);
        fs.closeSync(fd);
        const written = fs.readFileSync(p('out.bin'));
        assert.strictEqual(written.length, 20 * chunk.length);
        for (let i = 0; i < 20; i++) assert.strictEqual(written[i * chunk.length + 7], i);
        // A big file of the folder, copied up by an append.
        fs.appendFileSync(p('big-in-folder.bin'), 'tail');
        const grown = fs.readFileSync(p('big-in-folder.bin'));
        assert.strictEqual(grown.length, big.length + 4);
        assert.ok(grown.subarray(0, big.length).equals(big));
        assert.strictEqual(probe('mmap-read', p('big-in-folder.bin')).slice(-4), 'tail');
        // Through the API, and read back through the API.
        await layer.write('api.bin', Buffer.alloc(2 * 1024 * 1024, 'z'));
        assert.strictEqual((await layer.readFile('api.bin')).length, 2 * 1024 * 1024);
        fs.truncateSync(p('out.bin'), 100);
        assert.strictEqual(fs.statSync(p('out.bin')).size, 100);
        const st = await layer.stats();
        assert.ok(st.spilledBytes >= big.length + 2 * 1024 * 1024, `spilled ${st.spilledBytes}`);
        assert.ok(st.memoryBytes < 1024 * 1024, `memory ${st.memoryBytes}`);
        assert.deepStrictEqual(fs.readdirSync(spillDir), [], 'spill files have no names');
      },
      { spillThreshold: 1024 * 1024, spillDir },
    );
  });

  it('refuses a spill directory inside the folder', async () => {
    const lower = makeProject();
    await assert.rejects(
      withShadow(lower, () => undefined, { spillDir: path.join(lower, 'src') }),
      (e: unknown) => e instanceof ShadowError && e.code === 'INVALID_ARGUMENT',
    );
  });
});
