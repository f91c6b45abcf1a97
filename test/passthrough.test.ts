// FUSE passthrough on fuse_ll (io: 'passthrough', issue #18): read-only opens of files whose
// content is the folder's are handed to the kernel as the folder's own file, and those of layer
// files as their spill file or a memory file (memfd), so their reads never reach the daemon. Counted by the backend itself (Shadow.requestCounts). These tests
// mount fuse_ll in every pass; they need root (CAP_SYS_ADMIN registers backing files) and a
// kernel with FUSE passthrough (6.9+), and fail saying so when either is missing.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { setMemoryBudget } from '../src/shadow';
import { defaultMemoryBudget } from '../src/shadow/budget';
import { repoRoot, tempDir, withShadow } from './helpers/fixtures';
import { asNobody, chownTree, nobodyDir } from './helpers/unprivileged';

function sh(script: string, cwd: string): string {
  const r = spawnSync('sh', ['-c', script], { cwd, encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.strictEqual(r.status, 0, `${script}: ${r.stderr}`);
  return r.stdout;
}

function delta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(after)) out[k] = (after[k] ?? 0) - (before[k] ?? 0);
  return out;
}

const md5 = (b: Buffer | string): string => crypto.createHash('md5').update(b).digest('hex');

/** A folder with a 6 MiB file of varied bytes and 100 small files. */
function folder(label: string): string {
  const lower = tempDir(label);
  const big = Buffer.alloc(6 << 20);
  for (let i = 0; i < big.length; i += 4) big.writeUInt32LE((i * 2654435761) >>> 0, i);
  fs.writeFileSync(path.join(lower, 'big.bin'), big);
  fs.mkdirSync(path.join(lower, 'src'));
  for (let i = 0; i < 100; i++) fs.writeFileSync(path.join(lower, 'src', `m${i}.js`), `module.exports = ${i};\n`);
  return lower;
}

describe('FUSE passthrough (fuse_ll, io: passthrough)', function () {
  before(function () {
    if (process.geteuid?.() !== 0)
      throw new Error('the passthrough tests need root: registering a backing file with the kernel takes CAP_SYS_ADMIN');
  });

  it("reads of the folder's files reach the kernel's own file (no READ requests), layer files are served by the daemon, and the folder is never written", async () => {
    const lower = folder('pt-read');
    await withShadow(
      lower,
      async (shadow, mp) => {
        const t = shadow.kernelTransport();
        assert.strictEqual(
          t.passthrough,
          true,
          `this kernel should take FUSE passthrough (Linux 6.9+ with CONFIG_FUSE_PASSTHROUGH; uname -r: ${spawnSync('uname', ['-r'], { encoding: 'utf8' }).stdout.trim()}): ${JSON.stringify(t)}`,
        );
        assert.strictEqual(t.noOpen, false, 'passthrough is decided per OPEN, so files keep their OPEN round trip');
        assert.deepStrictEqual(shadow.transport(), t, 'transport(), the deprecated former name, says the same');
        let before = shadow.requestCounts();
        assert.strictEqual(sh('md5sum < big.bin', mp).split(' ')[0], md5(fs.readFileSync(path.join(lower, 'big.bin'))));
        assert.strictEqual(sh('cat src/*.js', mp), sh('cat src/*.js', lower));
        let d = delta(before, shadow.requestCounts());
        assert.strictEqual(d.read, 0, `6 MiB and 100 files read with no READ request: ${JSON.stringify(d)}`);
        assert.ok(d.open >= 101, `one OPEN per opened file: ${JSON.stringify(d)}`);
        // Again (the backing registration is per open; the second round must work the same).
        before = shadow.requestCounts();
        assert.strictEqual(sh('cat src/*.js', mp), sh('cat src/*.js', lower));
        assert.strictEqual(delta(before, shadow.requestCounts()).read, 0);

        // A file the layer holds in memory is moved to a memory file the kernel serves too.
        await shadow.layer('default').write('src/m7.js', 'changed by the agent\n');
        before = shadow.requestCounts();
        assert.strictEqual(sh('cat src/m7.js', mp), 'changed by the agent\n');
        d = delta(before, shadow.requestCounts());
        assert.strictEqual(d.read, 0, `layer content in memory read with no READ request: ${JSON.stringify(d)}`);
        // Written through the mount: the layer has it, the folder does not.
        sh('printf "new\\n" > src/new.js && printf "more\\n" >> src/m8.js', mp);
        assert.strictEqual(sh('cat src/new.js src/m8.js', mp), 'new\nmodule.exports = 8;\nmore\n');
        assert.strictEqual((await shadow.layer('default').readFile('src/m8.js')).toString(), 'module.exports = 8;\nmore\n');
        assert.strictEqual(fs.readFileSync(path.join(lower, 'src', 'm8.js'), 'utf8'), 'module.exports = 8;\n');
        // An edit in the folder shows at once through a passthrough open (it is the folder's file).
        fs.writeFileSync(path.join(lower, 'src', 'm9.js'), 'edited in the folder\n');
        assert.strictEqual(sh('cat src/m9.js', mp), 'edited in the folder\n');
      },
      { backend: 'fuse_ll', io: 'passthrough', guard: false },
    );
  });

  it('a file open for reading through passthrough and then written: the writer gets the layer copy, the reader keeps the folder file, and neither open fails', async () => {
    const lower = folder('pt-clash');
    const hashBefore = md5(fs.readFileSync(path.join(lower, 'src', 'm3.js')));
    await withShadow(
      lower,
      async (shadow, mp) => {
        assert.strictEqual(shadow.kernelTransport().passthrough, true);
        const f = path.join(mp, 'src', 'm3.js');
        // The reader: a descriptor held open by this process (a passthrough open).
        const fd = fs.openSync(f, 'r');
        try {
          const buf = Buffer.alloc(64);
          const n0 = fs.readSync(fd, buf, 0, 64, 0);
          assert.strictEqual(buf.subarray(0, n0).toString(), 'module.exports = 3;\n');
          // The writer: the kernel may not mix a passthrough open and a cached one on one inode,
          // so this open is sent to a new node (its first answer is ESTALE, which the kernel
          // retries after looking the name up again).
          sh(`printf 'appended\\n' >> '${f}'`, mp);
          assert.strictEqual(sh(`cat '${f}'`, mp), 'module.exports = 3;\nappended\n');
          const n1 = fs.readSync(fd, buf, 0, 64, 0);
          assert.strictEqual(buf.subarray(0, n1).toString(), 'module.exports = 3;\n', 'the open reader still reads the folder file');
        } finally {
          fs.closeSync(fd);
        }
        assert.strictEqual((await shadow.layer('default').readFile('src/m3.js')).toString(), 'module.exports = 3;\nappended\n');
      },
      { backend: 'fuse_ll', io: 'passthrough' },
    );
    assert.strictEqual(md5(fs.readFileSync(path.join(lower, 'src', 'm3.js'))), hashBefore, 'the folder file is untouched');
  });

  it('a write-open that cannot be sent to a new node (a reopen through /proc/<pid>/fd) is refused before it truncates anything; one of a layer file shares its file and works', async () => {
    const lower = folder('pt-reopen');
    const hashBefore = md5(fs.readFileSync(path.join(lower, 'src', 'm4.js')));
    await withShadow(
      lower,
      async (shadow, mp) => {
        const f = path.join(mp, 'src', 'm4.js');
        const fd = fs.openSync(f, 'r'); // a passthrough open of the folder's own file
        try {
          assert.strictEqual(fs.readFileSync(fd, 'utf8'), 'module.exports = 4;\n');
          // O_TRUNC through the descriptor's /proc link: the kernel cannot look the name up again,
          // so the ESTALE that sends a write-open to a new node reaches the caller. Nothing may
          // have changed (the open used to truncate first, then fail).
          const r = spawnSync('sh', ['-c', `echo X > /proc/${process.pid}/fd/${fd}`], { encoding: 'utf8' });
          assert.notStrictEqual(r.status, 0, 'the reopen was refused');
          assert.match(r.stderr, /Stale file handle/);
          assert.strictEqual(sh(`cat '${f}'`, mp), 'module.exports = 4;\n');
          assert.deepStrictEqual(await shadow.layer('default').changes(), []);
          // By its name, the same write is sent to a new node and lands.
          sh(`echo X > '${f}'`, mp);
          assert.strictEqual(sh(`cat '${f}'`, mp), 'X\n');
        } finally {
          fs.closeSync(fd);
        }
        assert.strictEqual((await shadow.layer('default').readFile('src/m4.js')).toString(), 'X\n');
        // A layer file read through its memory file: the same reopen shares that file, so it
        // works as on a plain file system, and the reader sees the new content.
        await shadow.layer('default').write('agent.txt', 'agent wrote this\n');
        const g = path.join(mp, 'agent.txt');
        const rd = fs.openSync(g, 'r');
        try {
          assert.strictEqual(fs.readFileSync(rd, 'utf8'), 'agent wrote this\n');
          const r = spawnSync('sh', ['-c', `echo Y > /proc/${process.pid}/fd/${rd}`], { encoding: 'utf8' });
          assert.strictEqual(r.status, 0, r.stderr);
          const buf = Buffer.alloc(64);
          assert.strictEqual(buf.subarray(0, fs.readSync(rd, buf, 0, 64, 0)).toString(), 'Y\n');
        } finally {
          fs.closeSync(rd);
        }
        assert.strictEqual((await shadow.layer('default').readFile('agent.txt')).toString(), 'Y\n');
      },
      { backend: 'fuse_ll', io: 'passthrough' },
    );
    assert.strictEqual(md5(fs.readFileSync(path.join(lower, 'src', 'm4.js'))), hashBefore, 'the folder is untouched');
  });

  it('layer files kept in a spill file are read through the kernel too (no READ requests), and stay right across writes, layer switches and the budget', async () => {
    const lower = folder('pt-layer');
    await withShadow(
      lower,
      async (shadow, mp) => {
        assert.strictEqual(shadow.kernelTransport().passthrough, true);
        // spillThreshold 0: every content an agent writes lives in a spill file.
        sh('cp big.bin out.bin && printf "written by the agent\\n" > note.txt && printf "x\\n" >> src/m1.js', mp);
        const big = fs.readFileSync(path.join(lower, 'big.bin'));
        let before = shadow.requestCounts();
        assert.strictEqual(sh('md5sum < out.bin', mp).split(' ')[0], md5(big));
        assert.strictEqual(sh('cat note.txt src/m1.js', mp), 'written by the agent\nmodule.exports = 1;\nx\n');
        const d = delta(before, shadow.requestCounts());
        assert.strictEqual(d.read, 0, `layer files read with no READ request: ${JSON.stringify(d)}`);
        assert.ok(d.open >= 3, `one OPEN per opened file: ${JSON.stringify(d)}`);
        const stats = (await shadow.stats()).layers.default;
        assert.ok(stats.spilledBytes >= big.length, `the spilled contents are still counted: ${JSON.stringify(stats)}`);

        // A reader holding the layer file open, then a write through another open: the write
        // goes to the same file, and the reader sees it as it would through the daemon.
        const f = path.join(mp, 'note.txt');
        const fd = fs.openSync(f, 'r');
        try {
          const buf = Buffer.alloc(64);
          assert.strictEqual(buf.subarray(0, fs.readSync(fd, buf, 0, 64, 0)).toString(), 'written by the agent\n');
          sh(`printf 'appended\\n' >> '${f}'`, mp);
          assert.strictEqual(sh(`cat '${f}'`, mp), 'written by the agent\nappended\n');
          assert.strictEqual(buf.subarray(0, fs.readSync(fd, buf, 0, 64, 0)).toString(), 'written by the agent\nappended\n');
          // Switch to another layer while the reader is open: it keeps the file it opened, as
          // a daemon-served handle keeps its layer's file; new opens see the new layer.
          await shadow.createLayer('other');
          await shadow.activate('other');
          assert.ok(!fs.existsSync(f), 'the other layer has no note.txt');
          sh('printf "other agent\\n" > note.txt', mp);
          assert.strictEqual(sh('cat note.txt', mp), 'other agent\n');
          assert.strictEqual(buf.subarray(0, fs.readSync(fd, buf, 0, 64, 0)).toString(), 'written by the agent\nappended\n');
          await shadow.activate('default');
          assert.strictEqual(sh('cat note.txt', mp), 'written by the agent\nappended\n');
        } finally {
          fs.closeSync(fd);
        }
        // A whole replacement through the API moves the content to a new file: the next open sees it.
        await shadow.layer('default').write('note.txt', 'replaced\n');
        before = shadow.requestCounts();
        assert.strictEqual(sh('cat note.txt', mp), 'replaced\n');
        assert.strictEqual(delta(before, shadow.requestCounts()).read, 0);
        assert.strictEqual((await shadow.layer('default').readFile('src/m1.js')).toString(), 'module.exports = 1;\nx\n');
        assert.strictEqual(fs.readFileSync(path.join(lower, 'src', 'm1.js'), 'utf8'), 'module.exports = 1;\n');
        assert.ok(!fs.existsSync(path.join(lower, 'out.bin')));
      },
      { backend: 'fuse_ll', io: 'passthrough', spillThreshold: 0 },
    );
  });

  it('small layer contents held in memory are read through a memory file (no READ requests), counted as memory, and stay right across writes, layer switches and the budget', async () => {
    const lower = folder('pt-memfd');
    const hashOf = (): string => sh('find . -type f | sort | xargs md5sum', lower);
    const folderBefore = hashOf();
    try {
      await withShadow(
        lower,
        async (shadow, mp) => {
          assert.strictEqual(shadow.kernelTransport().passthrough, true);
          const layer = shadow.layer('default');
          // Small files written through the API (kept in memory; files a program writes through
          // the mount are the kernel's to write, in disk files: the next test) and a folder
          // file appended to (copied up by the daemon, into memory).
          for (let i = 0; i < 20; i++) await layer.write(`gen/f${i}.js`, `generated ${i}\n`);
          sh('printf "x\\n" >> src/m1.js', mp);
          let before = shadow.requestCounts();
          const expected = Array.from({ length: 20 }, (_, i) => `generated ${i}\n`).join('');
          assert.strictEqual(sh('cat gen/f*.js | sort -t" " -k2 -n', mp), expected);
          assert.strictEqual(sh('cat src/m1.js', mp), 'module.exports = 1;\nx\n');
          const d = delta(before, shadow.requestCounts());
          assert.strictEqual(d.read, 0, `small layer files read with no READ request: ${JSON.stringify(d)}`);
          // Still memory for the budget and the layer's stats (a memory file holds whole pages).
          let st = await shadow.stats();
          assert.strictEqual(st.layers.default.spilledBytes, 0, `nothing on disk: ${JSON.stringify(st.layers.default)}`);
          assert.ok(st.layers.default.memoryBytes >= 21 * 4096, `counted as memory: ${JSON.stringify(st.layers.default)}`);
          assert.ok(st.budget.inMemoryBytes >= 21 * 4096, `the budget counts them: ${JSON.stringify(st.budget)}`);

          // A reader holding one open; an append and a truncate through other opens reach it.
          const f = path.join(mp, 'gen', 'f3.js');
          const fd = fs.openSync(f, 'r');
          try {
            const buf = Buffer.alloc(64);
            const at = (): string => buf.subarray(0, fs.readSync(fd, buf, 0, 64, 0)).toString();
            assert.strictEqual(at(), 'generated 3\n');
            sh(`printf 'appended\\n' >> '${f}'`, mp);
            assert.strictEqual(sh(`cat '${f}'`, mp), 'generated 3\nappended\n');
            assert.strictEqual(at(), 'generated 3\nappended\n');
            assert.strictEqual((await layer.readFile('gen/f3.js')).toString(), 'generated 3\nappended\n');
            assert.strictEqual(fs.statSync(f).size, 21);
            fs.truncateSync(f, 9);
            assert.strictEqual(at(), 'generated');
            assert.strictEqual(sh(`cat '${f}'`, mp), 'generated');
            // Another layer does not see it; the reader keeps its file; back again, the layer's.
            await shadow.createLayer('other');
            await shadow.activate('other');
            assert.ok(!fs.existsSync(f), 'the other layer has no gen/f3.js');
            assert.strictEqual(at(), 'generated');
            await shadow.activate('default');
            assert.strictEqual(sh(`cat '${f}'`, mp), 'generated');
          } finally {
            fs.closeSync(fd);
          }
          // The layer's changes and a replacement through the API (the next open sees it).
          const changed = (await layer.changes()).map((c) => c.path).sort();
          assert.ok(changed.includes('gen/f3.js') && changed.includes('src/m1.js'), JSON.stringify(changed));
          await layer.write('gen/f4.js', 'replaced\n');
          before = shadow.requestCounts();
          assert.strictEqual(sh('cat gen/f4.js', mp), 'replaced\n');
          assert.strictEqual(delta(before, shadow.requestCounts()).read, 0);

          // Past the budget (256 KiB for this shadow) they move to disk: the contents stay right.
          for (let i = 20; i < 60; i++) await layer.write(`gen/f${i}.js`, 'y'.repeat(8000));
          for (let i = 0; i < 200 && (await shadow.stats()).budget.inMemoryBytes > 256 * 1024; i++)
            await new Promise((r) => setTimeout(r, 10));
          const b = (await shadow.stats()).budget;
          assert.ok(b.inMemoryBytes <= 256 * 1024 && b.spilledContents > 0, `within the budget: ${JSON.stringify(b)}`);
          st = await shadow.stats();
          assert.ok(st.layers.default.spilledBytes > 0, `moved to disk: ${JSON.stringify(st.layers.default)}`);
          assert.strictEqual(sh('cat gen/f0.js gen/f3.js gen/f4.js', mp), 'generated 0\ngeneratedreplaced\n');
          assert.strictEqual(sh('cat gen/f59.js', mp), 'y'.repeat(8000));
          assert.strictEqual((await layer.readFile('gen/f19.js')).toString(), 'generated 19\n');
        },
        { backend: 'fuse_ll', io: 'passthrough', memoryBudget: '256K' },
      );
    } finally {
      setMemoryBudget(defaultMemoryBudget());
    }
    assert.strictEqual(hashOf(), folderBefore, 'the folder is never written');
  });

  it('files a program writes through the mount are written by the kernel into memory files (no WRITE requests): sizes, contents, times and the API stay right while they are open, across layer switches, and the folder is never written', async () => {
    const lower = folder('pt-write');
    const hashOf = (): string => sh('find . -type f | sort | xargs md5sum', lower);
    const folderBefore = hashOf();
    await withShadow(
      lower,
      async (shadow, mp) => {
        assert.strictEqual(shadow.kernelTransport().passthrough, true);
        const layer = shadow.layer('default');
        // New files, small and big: one CREATE each, no WRITE.
        let before = shadow.requestCounts();
        sh('mkdir -p out && for i in $(seq 0 19); do printf "line %s\\n" $i > out/f$i.txt; done', mp);
        sh('head -c 8388608 /dev/urandom > out/big.bin', mp);
        let d = delta(before, shadow.requestCounts());
        assert.strictEqual(d.write, 0, `written by the kernel: ${JSON.stringify(d)}`);
        assert.strictEqual(d.create, 21, JSON.stringify(d));
        const big = fs.readFileSync(path.join(mp, 'out', 'big.bin'));
        assert.strictEqual(big.length, 8 << 20);
        assert.strictEqual(fs.statSync(path.join(mp, 'out', 'big.bin')).size, 8 << 20);
        assert.strictEqual(md5(await layer.readFile('out/big.bin')), md5(big), 'the API reads what the kernel wrote');
        assert.strictEqual((await layer.readFile('out/f7.txt')).toString(), 'line 7\n');
        // Appending to a file the layer holds: no WRITE either, and every reader agrees.
        before = shadow.requestCounts();
        sh('printf "more\\n" >> out/f7.txt', mp);
        d = delta(before, shadow.requestCounts());
        assert.strictEqual(d.write, 0, JSON.stringify(d));
        assert.strictEqual(sh('cat out/f7.txt', mp), 'line 7\nmore\n');
        assert.strictEqual((await layer.readFile('out/f7.txt')).toString(), 'line 7\nmore\n');

        // While a write-open is open: its writes show in stat, to the API and to other readers
        // at once, an API write lands in the same file (the open sees it), and times set after
        // a write stay.
        const f = path.join(mp, 'out', 'f3.txt');
        const fd = fs.openSync(f, 'r+');
        try {
          fs.writeSync(fd, Buffer.from('0123456789abcdef'), 0, 16, 100);
          assert.strictEqual(fs.fstatSync(fd).size, 116);
          assert.strictEqual(fs.statSync(f).size, 116);
          const viaApi = await layer.readFile('out/f3.txt');
          assert.strictEqual(viaApi.length, 116);
          assert.strictEqual(viaApi.subarray(100).toString(), '0123456789abcdef');
          assert.ok((await layer.changes()).some((c) => c.path === 'out/f3.txt'));
          await layer.write('out/f3.txt', 'replaced by the API\n');
          const buf = Buffer.alloc(64);
          assert.strictEqual(buf.subarray(0, fs.readSync(fd, buf, 0, 64, 0)).toString(), 'replaced by the API\n');
          fs.writeSync(fd, Buffer.from('R'), 0, 1, 0);
          const t = new Date('2020-01-02T03:04:05Z');
          fs.futimesSync(fd, t, t);
          assert.strictEqual(fs.statSync(f).mtime.getTime(), t.getTime());
          fs.ftruncateSync(fd, 8);
        } finally {
          fs.closeSync(fd);
        }
        assert.strictEqual(sh(`cat '${f}'`, mp), 'Replaced');
        assert.strictEqual((await layer.readFile('out/f3.txt')).toString(), 'Replaced');
        assert.strictEqual(fs.statSync(f).size, 8);

        // Memory files: counted as memory, as what the daemon writes is.
        const st = await shadow.stats();
        assert.ok(st.layers.default.memoryBytes >= 8 << 20, `in memory: ${JSON.stringify(st.layers.default)}`);
        assert.ok(st.budget.inMemoryBytes >= 8 << 20, `the budget counts them: ${JSON.stringify(st.budget)}`);

        // Set-user-ID set while a writer is open, then a second writer: both append, nothing is
        // lost (a plain file system gives the same 15 bytes).
        const s = path.join(mp, 'out', 's.txt');
        fs.writeFileSync(s, '');
        const w1 = fs.openSync(s, 'a');
        try {
          fs.writeSync(w1, 'aaa');
          fs.chmodSync(s, 0o4755);
          const w2 = fs.openSync(s, 'a');
          try {
            for (const [w, t] of [
              [w1, 'bbb'],
              [w2, 'ccc'],
              [w1, 'ddd'],
              [w2, 'eee'],
            ] as const)
              fs.writeSync(w, t);
          } finally {
            fs.closeSync(w2);
          }
        } finally {
          fs.closeSync(w1);
        }
        assert.strictEqual(fs.readFileSync(s, 'utf8'), 'aaabbbcccdddeee');
        assert.strictEqual((await layer.readFile('out/s.txt')).toString(), 'aaabbbcccdddeee');
        // Another layer does not see them; back again, they are the same.
        await shadow.createLayer('other');
        await shadow.activate('other');
        assert.ok(!fs.existsSync(path.join(mp, 'out')), 'the other layer has no out/');
        sh('mkdir -p out && printf "other\\n" > out/f7.txt', mp);
        await shadow.activate('default');
        assert.strictEqual(sh('cat out/f7.txt', mp), 'line 7\nmore\n');
        assert.strictEqual(md5(fs.readFileSync(path.join(mp, 'out', 'big.bin'))), md5(big));
        assert.strictEqual((await shadow.layer('other').readFile('out/f7.txt')).toString(), 'other\n');
      },
      { backend: 'fuse_ll', io: 'passthrough' },
    );
    assert.strictEqual(hashOf(), folderBefore, 'the folder is never written');
  });

  it('a reader keeps seeing what writers write while it is open, also past the spill threshold and under a small memory budget (the file stays in place until the last open is released)', async () => {
    const lower = folder('pt-held');
    await withShadow(
      lower,
      async (shadow, mp) => {
        const f = path.join(mp, 'n.bin');
        fs.writeFileSync(f, 'start');
        const r = fs.openSync(f, 'r');
        const at = (n: number, off = 0): string => {
          const b = Buffer.alloc(n);
          return b.subarray(0, fs.readSync(r, b, 0, n, off)).toString();
        };
        try {
          const w = fs.openSync(f, 'r+');
          fs.writeSync(w, Buffer.alloc(2 << 20, 'W'), 0, 2 << 20, 0); // past the 1 MiB threshold
          fs.closeSync(w);
          assert.strictEqual(at(8), 'WWWWWWWW');
          const w2 = fs.openSync(f, 'r+');
          fs.writeSync(w2, 'NEW!', 0);
          fs.closeSync(w2);
          assert.strictEqual(at(8), 'NEW!WWWW', 'the reader sees the second writer');
          // Appending through the reader's /proc link: its node is shared, not refused.
          const w3 = fs.openSync(`/proc/${process.pid}/fd/${r}`, 'a');
          fs.writeSync(w3, 'TAIL');
          fs.closeSync(w3);
          assert.strictEqual(fs.fstatSync(r).size, (2 << 20) + 4);
          assert.strictEqual(at(4, 2 << 20), 'TAIL');
        } finally {
          fs.closeSync(r);
        }
        const back = await shadow.layer('default').readFile('n.bin');
        assert.strictEqual(back.length, (2 << 20) + 4);
        assert.strictEqual(back.subarray(0, 8).toString(), 'NEW!WWWW');
        // Once nothing holds it, the content past the threshold is on disk.
        const deadline = Date.now() + 10_000; // RELEASE comes after close() returns
        while ((await shadow.stats()).layers.default.spilledBytes < 2 << 20 && Date.now() < deadline)
          await new Promise((res) => setTimeout(res, 20));
        assert.ok((await shadow.stats()).layers.default.spilledBytes >= 2 << 20, JSON.stringify((await shadow.stats()).layers.default));
      },
      { backend: 'fuse_ll', io: 'passthrough', spillThreshold: 1 << 20, memoryBudget: '256K' },
    );
  });

  it('a sparse file the kernel wrote stays sparse when its content moves to disk after the last close', async () => {
    const lower = folder('pt-sparse');
    await withShadow(
      lower,
      async (shadow, mp) => {
        const f = path.join(mp, 'sparse.bin');
        const fd = fs.openSync(f, 'w');
        try {
          fs.ftruncateSync(fd, 1 << 30);
          fs.writeSync(fd, 'head', 0);
          fs.writeSync(fd, 'tail', (1 << 30) - 4);
        } finally {
          fs.closeSync(fd);
        }
        // Past the 64 MiB spill threshold: on disk once released (RELEASE follows close()).
        const layer = shadow.layer('default');
        const deadline = Date.now() + 10_000;
        while ((await shadow.stats()).layers.default.spilledBytes < 1 << 30 && Date.now() < deadline)
          await new Promise((res) => setTimeout(res, 20));
        assert.ok((await shadow.stats()).layers.default.spilledBytes >= 1 << 30, 'moved to disk');
        const ext = await layer.dataExtents('sparse.bin');
        assert.strictEqual(ext.size, 1 << 30);
        assert.ok(
          ext.extents.reduce((t, [, len]) => t + len, 0) < 1 << 20,
          `only the data moved, not a gigabyte of zeros: ${JSON.stringify(ext.extents)}`,
        );
        assert.strictEqual((await layer.readRange('sparse.bin', (1 << 30) - 4, 4)).data.toString(), 'tail');
      },
      { backend: 'fuse_ll', io: 'passthrough' },
    );
  });

  it("shadowfs mount --io passthrough (daemon, RPC) mounts in that mode and says so in the shadow's info", async () => {
    const lower = folder('pt-cli');
    const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');
    const cli = (...args: string[]) => spawnSync(process.execPath, [cliPath, ...args], { encoding: 'utf8', timeout: 60_000 });
    const name = `pt-cli-${process.pid}`;
    const r = cli('mount', lower, '--name', name, '--backend', 'fuse_ll', '--io', 'passthrough', '--json');
    try {
      assert.strictEqual(r.status, 0, r.stderr);
      const info = JSON.parse(r.stdout) as { mountPoint: string; io: string; transport: Record<string, boolean> };
      assert.strictEqual(info.io, 'passthrough');
      assert.strictEqual(info.transport.passthrough, true, JSON.stringify(info.transport));
      assert.strictEqual(sh('cat src/m4.js', info.mountPoint), 'module.exports = 4;\n');
    } finally {
      cli('unmount', name);
    }
  });

  it('without CAP_SYS_ADMIN (a mount by nobody) passthrough is off, said so by kernelTransport(), and reads are served by the daemon', async () => {
    const lower = folder('pt-nobody');
    chownTree(lower);
    fs.chmodSync(lower, 0o755);
    const mp = path.join(nobodyDir('pt-nobody-mnt'), 'm');
    const script = `
      const { mount } = require(${JSON.stringify(path.join(repoRoot, 'dist', 'src'))});
      const { execSync } = require('child_process');
      (async () => {
        const s = await mount(${JSON.stringify(lower)}, { mountPoint: ${JSON.stringify(mp)}, backend: 'fuse_ll', io: 'passthrough' });
        try {
          const before = s.requestCounts().read;
          const text = execSync('cat src/m1.js src/m2.js', { cwd: s.mountPoint, encoding: 'utf8' });
          console.log(JSON.stringify({ transport: s.kernelTransport(), text, reads: s.requestCounts().read - before }));
        } finally {
          await s.unmount();
        }
      })().catch((e) => { console.error(e); process.exit(1); });`;
    const r = await asNobody([process.execPath, '-e', script]);
    assert.strictEqual(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { transport: Record<string, boolean>; text: string; reads: number };
    assert.strictEqual(out.transport.passthrough, false, JSON.stringify(out.transport));
    assert.strictEqual(out.text, 'module.exports = 1;\nmodule.exports = 2;\n');
    assert.ok(out.reads >= 2, `reads came to the daemon: ${out.reads}`);
  });
});
