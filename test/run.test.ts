// The run service: real commands inside a shadow as an agent, through real mounts.
import * as assert from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import { ShadowError } from '../src';
import { runInShadow } from '../src/run/runner';
import { eventually, FolderGuard, makeProject, repoRoot, tempDir, withShadow } from './helpers/fixtures';
import { asNobody, chownTree, nobodyDir, NOBODY, NOGROUP } from './helpers/unprivileged';

const isCode = (code: string) => (e: unknown) => e instanceof ShadowError && e.code === code;

/** Processes whose command line contains `needle` (this test's unique marker). */
function processesWith(needle: string): number[] {
  const out: number[] = [];
  for (const ent of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue;
    try {
      if (fs.readFileSync(`/proc/${ent}/cmdline`, 'latin1').includes(needle)) out.push(Number(ent));
    } catch {
      // gone
    }
  }
  return out;
}

describe('running commands inside a shadow', function () {
  it("an agent's breaking edit fails its run while the folder and another agent still pass", async () => {
    const lower = makeProject();
    assert.strictEqual(spawnSync(process.execPath, ['--test'], { cwd: lower }).status, 0);
    await withShadow(lower, async (shadow) => {
      const math = fs.readFileSync(path.join(lower, 'src/math.js'), 'utf8');
      await shadow.layer('breaker').write('src/math.js', math.replace('a + b', 'a * b'));
      const out: string[] = [];
      const broken = await runInShadow(shadow, {
        agent: 'breaker',
        argv: [process.execPath, '--test'],
        onOutput: (_s, c) => out.push(c.toString()),
      });
      assert.strictEqual(broken.exitCode, 1);
      assert.match(broken.stdout, /# fail 2/);
      assert.ok(out.join('').includes('# fail 2'), 'output is streamed while the command runs');
      const fine = await runInShadow(shadow, { agent: 'other', argv: [process.execPath, '--test'] });
      assert.strictEqual(fine.exitCode, 0, fine.stdout + fine.stderr);
      assert.ok(fine.durationMs > 0 && fine.queuedMs >= 0);
    });
    assert.strictEqual(spawnSync(process.execPath, ['--test'], { cwd: lower }).status, 0);
  });

  it('what the command writes lands in the layer, never in the folder; --discard-writes leaves the layer as it was', async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow) => {
      const r = await runInShadow(shadow, {
        agent: 'builder',
        argv: ['sh', '-c', 'mkdir -p dist && echo built > dist/out.js && rm README.md'],
        cwd: '.',
      });
      assert.strictEqual(r.exitCode, 0, r.stderr);
      assert.deepStrictEqual(
        (await shadow.layer('builder').changes()).map((c) => `${c.kind} ${c.path}`),
        ['deleted README.md', 'added dist', 'added dist/out.js'],
      );
      const before = await shadow.layer('builder').changes();
      const scratch = await runInShadow(shadow, {
        agent: 'builder',
        argv: ['sh', '-c', 'echo tmp > scratch.txt && cat dist/out.js'],
        discardWrites: true,
      });
      assert.strictEqual(scratch.stdout, 'built\n', 'the scratch copy starts from the layer');
      assert.deepStrictEqual(await shadow.layer('builder').changes(), before);
      assert.ok(!(await shadow.agents()).some((a) => a.includes('~run-')), 'the scratch layer is dropped');
      // The shadow shows at the folder's own path, and the command starts there.
      const sub = await runInShadow(shadow, { agent: 'builder', argv: ['pwd'], cwd: 'src' });
      assert.strictEqual(sub.stdout.trim(), path.join(lower, 'src'));
      const outside = await runInShadow(shadow, { agent: 'builder', argv: ['pwd'], cwd: 'src', originalPath: false });
      assert.strictEqual(outside.stdout.trim(), path.join(shadow.mountPoint, 'src'));
      await assert.rejects(runInShadow(shadow, { agent: 'builder', argv: ['pwd'], cwd: '../..' }), isCode('INVALID_PATH'));
      // A cwd through a link the agent made is refused alike wherever the link leads: what this
      // machine has there (a directory, a file, nothing) is not the run's to learn.
      const host = tempDir('run-host');
      fs.mkdirSync(path.join(host, 'dir'));
      fs.writeFileSync(path.join(host, 'file'), 'x');
      const layer = shadow.layer('builder');
      for (const [name, target] of [
        ['to-dir', path.join(host, 'dir')],
        ['to-file', path.join(host, 'file')],
        ['to-nothing', path.join(host, 'nothing')],
        ['to-src', 'src'],
      ])
        await layer.symlink(target, name);
      for (const cwd of ['to-dir', 'to-file', 'to-nothing', 'to-src', 'to-dir/sub'])
        await assert.rejects(runInShadow(shadow, { agent: 'builder', argv: ['pwd'], cwd }), isCode('PATH_THROUGH_SYMLINK'), cwd);
      await assert.rejects(runInShadow(shadow, { agent: 'builder', argv: ['pwd'], cwd: 'nosuch' }), isCode('NOT_FOUND'));
      // On Linux a backslash is part of a name: `a\b`, a link beside a real a/b, is the link
      // (refused), and `sub\..\..` is one name that is not there, never a path above the shadow.
      fs.mkdirSync(path.join(shadow.mountPoint, 'a', 'b'), { recursive: true });
      await layer.symlink(path.join(host, 'dir'), 'a\\b');
      await assert.rejects(runInShadow(shadow, { agent: 'builder', argv: ['pwd'], cwd: 'a\\b' }), isCode('PATH_THROUGH_SYMLINK'));
      assert.strictEqual(
        (await runInShadow(shadow, { agent: 'builder', argv: ['pwd'], cwd: 'a/b' })).stdout.trim(),
        path.join(lower, 'a', 'b'),
      );
      for (const cwd of [`src\\..\\..\\..${host}\\dir`, `src\\..\\..\\..${host}\\file`, `src\\..\\..\\..${host}\\nothing`])
        await assert.rejects(runInShadow(shadow, { agent: 'builder', argv: ['pwd'], cwd }), isCode('NOT_FOUND'), cwd);
      await assert.rejects(runInShadow(shadow, { agent: 'builder', argv: ['pwd'], cwd: 'package.json' }), isCode('NOT_A_DIRECTORY'));
    });
  });

  it('a timeout kills the whole process tree, background children included, and the next run proceeds', async () => {
    const lower = makeProject();
    const marker = `shadowfs-timeout-${process.pid}-${Date.now()}`;
    // A sleeper whose command line carries the marker, so leftovers can be found in /proc.
    const sleeper = `${process.execPath} -e "setTimeout(() => {}, 300000)" ${marker}`;
    await withShadow(lower, async (shadow) => {
      const r = await runInShadow(shadow, {
        agent: 'slow',
        argv: ['sh', '-c', `(setsid ${sleeper} &) ; ${sleeper} & ${sleeper}`],
        timeoutMs: 500,
      });
      assert.strictEqual(r.timedOut, true);
      assert.ok(r.durationMs < 60_000);
      assert.deepStrictEqual(processesWith(marker), [], 'no process of the run is left');
      const escaped = await runInShadow(shadow, { agent: 'slow', argv: ['sh', '-c', `(setsid ${sleeper} &); sleep 0.3; echo started`] });
      assert.strictEqual(escaped.exitCode, 0);
      assert.ok(escaped.leftoverProcesses >= 1);
      assert.deepStrictEqual(processesWith(marker), [], 'a run never leaves processes behind');
      const next = await runInShadow(shadow, { agent: 'other', argv: ['true'] });
      assert.strictEqual(next.exitCode, 0);
      // Cancelled once its command runs (it says so), not after a guess at how long that takes.
      const controller = new AbortController();
      const cancelled = await runInShadow(shadow, {
        agent: 'slow',
        argv: ['sh', '-c', `echo started; ${sleeper}`],
        signal: controller.signal,
        onOutput: (_s, c) => (c.toString().includes('started') ? controller.abort() : undefined),
      });
      assert.strictEqual(cancelled.cancelled, true);
      assert.deepStrictEqual(processesWith(marker), []);
    });
  });

  it('a run dies with the process that started it, even one killed with SIGKILL (no cleanup ran)', async () => {
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    const marker = `shadowfs-orphan-${process.pid}-${Date.now()}`;
    const sleeper = `${process.execPath} -e "setTimeout(() => {}, 300000)" ${marker}`;
    // A program using the library: it mounts, starts a run, says where, and is then killed.
    const script = path.join(tempDir('orphan-owner'), 'owner.js');
    fs.writeFileSync(
      script,
      `const { mount, runInShadow } = require(${JSON.stringify(path.join(repoRoot, 'dist', 'src', 'index.js'))});
(async () => {
  const shadow = await mount(${JSON.stringify(lower)});
  console.log('mounted ' + shadow.mountPoint);
  await runInShadow(shadow, { agent: 'a', argv: ['sh', '-c', ${JSON.stringify(`(setsid ${sleeper} &); ${sleeper} & echo started; ${sleeper}`)}],
    onOutput: (_s, c) => process.stdout.write(c) });
})();
`,
    );
    const owner = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    owner.stdout.on('data', (d: Buffer) => (out += d.toString()));
    let mountPoint: string | undefined;
    try {
      await eventually(() => /started/.test(out), 60_000, "the owner's run to start");
      mountPoint = /mounted (\S+)/.exec(out)?.[1];
      assert.ok(processesWith(marker).length >= 3, "the run's three sleepers are running");
      owner.kill('SIGKILL');
      await eventually(() => processesWith(marker).length === 0, 30_000, "the run's processes to die with their owner");
    } finally {
      if (owner.exitCode === null && owner.signalCode === null) owner.kill('SIGKILL');
      for (const pid of processesWith(marker)) process.kill(pid, 'SIGKILL');
      // The owner served the mount: killed, it leaves a dead mount to take away.
      if (mountPoint) spawnSync('umount', ['-l', mountPoint]);
    }
    await guard.check();
  });

  it('without cgroups, processes are found by the marker in their environment and killed too', async () => {
    const lower = makeProject();
    const marker = `shadowfs-nocg-${process.pid}-${Date.now()}`;
    const sleeper = `${process.execPath} -e "setTimeout(() => {}, 300000)" ${marker}`;
    process.env.SHADOWFS_NO_CGROUP = '1';
    try {
      await withShadow(lower, async (shadow) => {
        const r = await runInShadow(shadow, { agent: 'nocg', argv: ['sh', '-c', `(setsid ${sleeper} &) ; ${sleeper}`], timeoutMs: 500 });
        assert.strictEqual(r.timedOut, true);
        assert.deepStrictEqual(processesWith(marker), [], 'no process of the run is left');
      });
    } finally {
      delete process.env.SHADOWFS_NO_CGROUP;
    }
  });

  it("by default a run cannot write the folder through its absolute path: the write lands in the agent's layer", async () => {
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    await withShadow(
      lower,
      async (shadow) => {
        // The attack of issue 11, as a user would type it.
        const r = await runInShadow(shadow, {
          agent: 'abs',
          argv: ['sh', '-c', `echo x > ${lower}/FILE && realpath . && head -1 ${lower}/src/math.js`],
        });
        assert.strictEqual(r.exitCode, 0, r.stderr);
        assert.strictEqual(r.protected, true);
        assert.strictEqual(r.unprotectedReason, undefined);
        assert.strictEqual(r.stdout.split('\n')[0], lower, 'the command sees the folder path as its cwd');
        assert.strictEqual((await shadow.layer('abs').readFile('FILE')).toString(), 'x\n');
        assert.ok(!fs.existsSync(path.join(lower, 'FILE')));
        // The old opt-in flag is still accepted and means the same.
        const old = await runInShadow(shadow, { agent: 'abs', argv: ['sh', '-c', `echo y > ${lower}/OLD`], atOriginalPath: true });
        assert.deepStrictEqual([old.exitCode, old.protected], [0, true]);
        assert.strictEqual((await shadow.layer('abs').readFile('OLD')).toString(), 'y\n');
        await assert.rejects(
          runInShadow(shadow, { agent: 'abs', argv: ['true'], atOriginalPath: true, originalPath: false }),
          isCode('INVALID_ARGUMENT'),
        );
      },
      { guard: false },
    );
    await guard.check();
  });

  it("originalPath: false runs at the shadow's own path, still confined: the folder's path is read-only or absent there", async () => {
    const lower = makeProject('own-path');
    const guard = new FolderGuard(lower);
    await withShadow(
      lower,
      async (shadow) => {
        const r = await runInShadow(shadow, {
          agent: 'u',
          argv: ['sh', '-c', `pwd; echo x > ${lower}/FILE; echo "write: $?"; echo y > here; cat here`],
          originalPath: false,
        });
        assert.strictEqual(r.exitCode, 0, r.stderr);
        assert.strictEqual(r.protected, true);
        assert.deepStrictEqual(r.stdout.trim().split('\n'), [shadow.mountPoint, 'write: 2', 'y']);
        assert.strictEqual((await shadow.layer('u').readFile('here')).toString(), 'y\n');
        assert.ok(!fs.existsSync(path.join(lower, 'FILE')));
      },
      { guard: false },
    );
    await guard.check();
  });

  it("an unprivileged user's run is protected too (a user namespace), and its command runs as that user", async () => {
    const lower = makeProject('nobody-lower');
    chownTree(lower);
    fs.chmodSync(lower, 0o755);
    const guard = new FolderGuard(lower);
    const mp = path.join(nobodyDir('nobody-mnt'), 'm');
    const script = `
      const { mount, runInShadow } = require(${JSON.stringify(path.join(repoRoot, 'dist', 'src'))});
      (async () => {
        const s = await mount(${JSON.stringify(lower)}, { mountPoint: ${JSON.stringify(mp)} });
        try {
          const r = await runInShadow(s, { agent: 'n', argv: ['sh', '-c', 'echo x > ${lower}/FILE && id -u && id -g && realpath .'] });
          const layer = (await s.layer('n').readFile('FILE')).toString();
          console.log(JSON.stringify({ r, layer }));
        } finally {
          await s.unmount({ lazy: true });
        }
      })().catch((e) => { console.error(e); process.exit(1); });`;
    const ran = await asNobody([process.execPath, '-e', script]);
    assert.strictEqual(ran.status, 0, ran.stderr);
    const { r, layer } = JSON.parse(ran.stdout) as {
      r: { exitCode: number; protected: boolean; stdout: string; stderr: string };
      layer: string;
    };
    assert.strictEqual(r.exitCode, 0, r.stderr);
    assert.strictEqual(r.protected, true);
    assert.deepStrictEqual(r.stdout.trim().split('\n'), [String(NOBODY), String(NOGROUP), lower]);
    assert.strictEqual(layer, 'x\n');
    await guard.check();
  });

  it('where no namespace can be made, shadowfs run refuses with NAMESPACE_UNAVAILABLE and how to enable it; --unprotected runs anyway', async () => {
    // nobody, in a user namespace that may not make user namespaces and where it holds no
    // capability: the kernel refuses every unshare (see test/helpers/unprivileged.ts).
    const lower = makeProject('nons-lower');
    chownTree(lower);
    fs.chmodSync(lower, 0o755);
    const guard = new FolderGuard(lower);
    const mp = path.join(nobodyDir('nons-mnt'), 'm');
    const cli = `${process.execPath} ${path.join(repoRoot, 'bin', 'shadowfs.js')}`;
    const script = [
      'unshare --mount true 2>/dev/null && echo UNSHARE-MOUNT-WORKS; unshare --user --map-root-user true 2>/dev/null && echo UNSHARE-USER-WORKS',
      `${cli} mount ${lower} --name nons --at ${mp} >/dev/null || exit 50`,
      `${cli} run nons --agent a -- sh -c 'echo x > ${lower}/FILE'; echo "refused: $?"`,
      `${cli} run nons --agent a --unprotected --json -- sh -c 'echo y > FILE'; echo "unprotected: $?"`,
      // Without namespaces the daemon's socket can be reached; the daemon still refuses a run.
      `${cli} run nons --agent a --unprotected -- ${cli} list; echo "list from the run: $?"`,
      `${cli} layer cat nons a FILE`,
      `${cli} unmount nons`,
      'kill $(cat "$XDG_RUNTIME_DIR/shadowfs/daemon.pid")',
    ].join('\n');
    const ran = await asNobody(['sh', '-c', script], { denyNamespaces: true });
    assert.strictEqual(ran.status, 0, ran.stdout + ran.stderr);
    assert.ok(!/UNSHARE-(MOUNT|USER)-WORKS/.test(ran.stdout), `the kernel let the test user make namespaces: ${ran.stdout}`);
    assert.match(ran.stdout, /^refused: 1$/m);
    assert.match(ran.stderr, /error NAMESPACE_UNAVAILABLE: cannot create the private mount namespace that keeps this run from writing/);
    assert.match(ran.stderr, /unprivileged user namespaces \(sysctl -w kernel\.unprivileged_userns_clone=1/);
    assert.match(ran.stderr, /pass --unprotected/);
    assert.match(ran.stdout, /^unprotected: 0$/m);
    assert.match(ran.stdout, /^list from the run: [1-9]/m, 'the daemon refused a client from inside the run');
    assert.match(ran.stderr, /belongs to an agent's run/);
    const json = JSON.parse(ran.stdout.split('\n').find((l) => l.startsWith('{')) ?? '{}') as {
      protected?: boolean;
      unprotectedReason?: string;
    };
    assert.strictEqual(json.protected, false);
    assert.match(json.unprotectedReason ?? '', /mount namespace could not be created/);
    assert.match(ran.stderr, /shadowfs: warning: this run was unprotected/);
    assert.match(ran.stdout, /^y$/m, 'the unprotected run wrote its layer');
    assert.ok(!fs.existsSync(path.join(lower, 'FILE')), 'the refused run never ran');
    await guard.check();
  });

  it('--no-network: the command cannot reach a port served outside its namespace', async () => {
    const lower = makeProject();
    const server = net.createServer((s) => {
      s.on('error', () => undefined);
      s.end('hello');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as net.AddressInfo).port;
    const probe = `require('net').connect(${port},'127.0.0.1').on('connect',()=>{console.log('CONNECTED');process.exit(0)}).on('error',e=>{console.log(e.code);process.exit(0)})`;
    try {
      await withShadow(lower, async (shadow) => {
        const open = await runInShadow(shadow, { agent: 'net', argv: [process.execPath, '-e', probe] });
        assert.strictEqual(open.stdout.trim(), 'CONNECTED');
        const closed = await runInShadow(shadow, { agent: 'net', argv: [process.execPath, '-e', probe], noNetwork: true });
        assert.strictEqual(closed.stdout.trim(), 'ECONNREFUSED', closed.stderr);
        const lo = await runInShadow(shadow, { agent: 'net', argv: ['sh', '-c', 'ip -o link | cut -d: -f2 | tr -d " "'], noNetwork: true });
        assert.strictEqual(lo.stdout.trim(), 'lo');
      });
    } finally {
      server.close();
    }
  });

  it("two agents' runs on one shadow execute one at a time, in fair order", async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow) => {
      // Runs write only their shadow and what the user lists as writable: the log is in that list.
      const logDir = tempDir('order');
      const log = path.join(logDir, 'order.log');
      const job = (agent: string) =>
        runInShadow(shadow, { agent, argv: ['sh', '-c', `echo start ${agent} >> ${log}; sleep 0.05; echo end ${agent} >> ${log}`] });
      process.env.SHADOWFS_RUN_WRITABLE = logDir;
      try {
        await Promise.all([job('a'), job('a'), job('a'), job('a'), job('b'), job('b')]);
      } finally {
        delete process.env.SHADOWFS_RUN_WRITABLE;
      }
      const lines = fs.readFileSync(log, 'utf8').trim().split('\n');
      for (let i = 0; i < lines.length; i += 2) {
        assert.strictEqual(lines[i].replace('start', 'end'), lines[i + 1], `runs overlapped: ${lines.join(' | ')}`);
      }
      const order = lines.filter((l) => l.startsWith('start')).map((l) => l.split(' ')[1]);
      assert.ok(order.slice(0, 4).filter((a) => a === 'b').length === 2, `b waited behind a: ${order.join(',')}`);
    });
  });

  it("an agent with its own view runs there, at the same time as the shared mount's jobs", async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow) => {
      const view = await shadow.openView('solo');
      try {
        // The shared mount stays busy until the run is over: a run that waited for it would never
        // start (after a minute the test lets the mount go and says so).
        let release = (): void => undefined;
        let released = false;
        const held = new Promise<void>((r) => (release = r));
        let begun = (): void => undefined;
        const began = new Promise<void>((r) => (begun = r));
        const busy = shadow.withLayer('other', () => {
          begun();
          return held;
        });
        await began;
        const giveUp = setTimeout(() => {
          released = true;
          release();
        }, 60_000);
        try {
          const r = await runInShadow(shadow, { agent: 'solo', argv: ['sh', '-c', 'pwd; echo mine > solo.txt'], originalPath: false });
          assert.ok(!released, 'the run waited for the shared mount');
          assert.strictEqual(r.stdout.trim(), view.mountPoint);
          assert.strictEqual((await shadow.layer('solo').readFile('solo.txt')).toString(), 'mine\n');
        } finally {
          clearTimeout(giveUp);
          release();
          await busy;
        }
      } finally {
        await view.close();
      }
    });
  });

  it('the lists the user controls cannot be bent by links a run plants, and a run makes no set-user-ID file', async () => {
    const lower = makeProject();
    const writable = tempDir('writable');
    const victim = tempDir('victim');
    fs.writeFileSync(path.join(victim, 'f'), 'victim\n');
    await withShadow(lower, async (shadow) => {
      process.env.SHADOWFS_RUN_WRITABLE = writable;
      try {
        // A run plants a link to the root in the directory it may write...
        const plant = await runInShadow(shadow, { agent: 'a', argv: ['ln', '-s', '../../..', path.join(writable, 'up')] });
        assert.strictEqual(plant.exitCode, 0, plant.stderr);
        assert.ok(fs.lstatSync(path.join(writable, 'up')).isSymbolicLink());
        // ...and a list naming a path through it (alone, or inside the directory) is refused, not followed.
        const through = path.join(writable, 'up', victim.slice(1));
        for (const list of [through, `${writable}:${through}`]) {
          process.env.SHADOWFS_RUN_WRITABLE = list;
          await assert.rejects(
            runInShadow(shadow, { agent: 'a', argv: ['sh', '-c', `echo pwned > ${through}/f`] }),
            (e: unknown) => isCode('INVALID_ARGUMENT')(e) && /goes through a symbolic link/.test((e as Error).message),
          );
        }
        process.env.SHADOWFS_RUN_READABLE = through;
        await assert.rejects(runInShadow(shadow, { agent: 'a', argv: ['true'] }), isCode('INVALID_ARGUMENT'));
        delete process.env.SHADOWFS_RUN_READABLE;
        // Through the directory itself, the link leads nowhere of the host.
        process.env.SHADOWFS_RUN_WRITABLE = writable;
        const r = await runInShadow(shadow, { agent: 'a', argv: ['sh', '-c', `echo pwned > ${through}/f; echo "write: $?"`] });
        assert.match(r.stdout, /^write: [12]$/m, r.stdout + r.stderr);
        assert.strictEqual(fs.readFileSync(path.join(victim, 'f'), 'utf8'), 'victim\n');
        // No set-user-ID or set-group-ID bit, by chmod or at creation.
        const suid = await runInShadow(shadow, {
          agent: 'a',
          argv: ['sh', '-c', `touch s ${writable}/s; chmod 4755 s; echo "shadow: $?"; chmod 2755 ${writable}/s; echo "writable: $?"`],
        });
        assert.match(suid.stdout, /^shadow: 1$/m, suid.stdout + suid.stderr);
        assert.match(suid.stdout, /^writable: 1$/m, suid.stdout + suid.stderr);
        assert.strictEqual(fs.statSync(path.join(writable, 's')).mode & 0o6000, 0);
      } finally {
        delete process.env.SHADOWFS_RUN_WRITABLE;
        delete process.env.SHADOWFS_RUN_READABLE;
      }
    });
  });

  it("a running command holds no copy of another shadow's mount or view: they unmount at once, not lazily", async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow) => {
      const other = makeProject('other');
      // The other shadow and a view of it, mounted before the run starts (a mount namespace made
      // then copies every mount there is).
      await withShadow(other, async (second) => {
        const view = await second.openView('v');
        const controller = new AbortController();
        let started!: () => void;
        const running = new Promise<void>((r) => (started = r));
        const run = runInShadow(shadow, {
          agent: 'a',
          argv: ['sh', '-c', 'echo started; exec sleep 300'],
          signal: controller.signal,
          onOutput: (_s, c) => (c.toString().includes('started') ? started() : undefined),
        });
        try {
          await running;
          await view.close(); // not lazy: MOUNT_BUSY if the run's namespace still held a copy
          await second.unmount();
          assert.ok(!second.mounted);
        } finally {
          controller.abort();
          const r = await run;
          assert.strictEqual(r.cancelled, true);
        }
      });
    });
  });

  it('a run policy refuses commands on their argv', async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow) => {
      const policy = { allow: ['node', 'git', 'sh'], deny: [['git', 'push']] };
      await assert.rejects(runInShadow(shadow, { agent: 'p', argv: ['curl', 'example.com'], policy }), isCode('POLICY_DENIED'));
      await assert.rejects(runInShadow(shadow, { agent: 'p', argv: ['git', 'push', 'origin'], policy }), isCode('POLICY_DENIED'));
      const ok = await runInShadow(shadow, { agent: 'p', argv: ['git', '--version'], policy });
      assert.strictEqual(ok.exitCode, 0);
    });
  });

  it('shadowfs run streams output and exits with the command status (124 on timeout); it cannot write the folder by default', async () => {
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, [path.join(repoRoot, 'bin', 'shadowfs.js'), ...args], { encoding: 'utf8', timeout: 60_000 });
    assert.strictEqual(cli('mount', lower, '--name', 'runs').status, 0);
    try {
      const t = cli('run', 'runs', '--agent', 'a', '--', process.execPath, '--test');
      assert.strictEqual(t.status, 0);
      assert.match(t.stdout, /# pass 2/);
      assert.strictEqual(cli('run', 'runs', '--agent', 'a', '--', 'sh', '-c', 'exit 7').status, 7);
      assert.strictEqual(cli('run', 'runs', '--agent', 'a', '--timeout', '0.3', '--', 'sleep', '30').status, 124);
      const j = cli('run', 'runs', '--agent', 'a', '--json', '--env', 'GREETING=hi', '--', 'sh', '-c', 'echo $GREETING; echo err >&2');
      const r = JSON.parse(j.stdout) as { exitCode: number; stdout: string; stderr: string; durationMs: number; queuedMs: number };
      assert.deepStrictEqual([r.exitCode, r.stdout, r.stderr], [0, 'hi\n', 'err\n']);
      assert.ok(typeof r.durationMs === 'number' && typeof r.queuedMs === 'number');
      assert.strictEqual(cli('run', 'runs', '--agent', 'a').status, 1, 'no command given');
      // The attack of issue 11 through the CLI: by default it writes the layer, never the folder.
      const attack = cli('run', 'runs', '--agent', 'a', '--', 'sh', '-c', `echo x > ${lower}/FILE`);
      assert.strictEqual(attack.status, 0, attack.stderr);
      assert.strictEqual(attack.stderr, '', 'a protected run warns of nothing');
      assert.strictEqual(cli('layer', 'cat', 'runs', 'a', 'FILE').stdout, 'x\n');
      assert.strictEqual(cli('run', 'runs', '--agent', 'a', '--at-original-path', '--', 'true').status, 0, 'the old flag is accepted');
      const open = cli('run', 'runs', '--agent', 'a', '--no-original-path', '--json', '--', 'pwd');
      assert.strictEqual(open.status, 0, open.stderr);
      const o = JSON.parse(open.stdout) as { protected: boolean; protections: string[]; stdout: string };
      assert.strictEqual(o.protected, true, '--no-original-path moves the shadow, it does not unconfine');
      assert.ok(
        ['mount', 'user', 'pid', 'seccomp'].every((p) => o.protections.includes(p)),
        o.protections.join(','),
      );
      assert.strictEqual(open.stderr, '');
    } finally {
      cli('unmount', 'runs', '--lazy');
    }
    await guard.check();
  });
});
