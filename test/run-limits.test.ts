// Resource limits of a run (#29, deliverable 4): memory, processes and CPU, set on the run's
// cgroups (cgroup v2 where the controller is handed down, else the cgroup v1 hierarchy that holds
// it, as on this CI's hybrid layout). A run past its memory limit is killed and reported as such;
// the daemon and the shadow live on. Run cgroups a dead daemon left behind are swept.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../src';
import { parseSize } from '../src/cli/commands/run';
import { sweepRunCgroups } from '../src/platform/linux-processes';
import { runInShadow } from '../src/run/runner';
import { makeProject, repoRoot, withShadow } from './helpers/fixtures';

/** Which controllers this machine lets a run limit, v2 or v1 (the tests need all three). */
function limitable(): string[] {
  const text = fs.readFileSync('/proc/self/mounts', 'utf8');
  return ['memory', 'pids', 'cpu'].filter((c) =>
    text.split('\n').some((l) => {
      const [, , type, opts = ''] = l.split(' ');
      return (type === 'cgroup' && opts.split(',').includes(c)) || type === 'cgroup2';
    }),
  );
}

describe('resource limits of a run', function () {
  this.timeout(120_000);

  before(function () {
    if (process.getuid?.() !== 0)
      throw new Error('these tests need root: cgroups are made for the run (run the suite as root, as CI does)');
    const have = limitable();
    if (have.length < 3)
      throw new Error(`these tests need the memory, pids and cpu cgroup controllers; this machine has ${have.join(', ')}`);
  });

  it('a run past its memory limit is killed and reported as such; the shadow goes on', async () => {
    const lower = makeProject('limits-mem');
    await withShadow(lower, async (shadow) => {
      const hog = `const a = []; for (;;) { a.push(Buffer.alloc(8 << 20, 1)); }`;
      const r = await runInShadow(shadow, {
        agent: 'a',
        argv: [process.execPath, '-e', hog],
        limits: { memoryBytes: 96 << 20 },
        timeoutMs: 60_000,
      });
      assert.deepStrictEqual(r.limitsHit, ['memory'], JSON.stringify(r));
      assert.strictEqual(r.exitCode, null);
      assert.strictEqual(r.signal, 'SIGKILL');
      assert.strictEqual(r.timedOut, false);
      // The same shadow runs the next command, without a limit, as usual.
      const next = await runInShadow(shadow, { agent: 'a', argv: ['sh', '-c', 'echo fine > after.txt'] });
      assert.strictEqual(next.exitCode, 0, next.stderr);
      assert.strictEqual(next.limitsHit, undefined);
      assert.strictEqual((await shadow.layer('a').readFile('after.txt')).toString(), 'fine\n');
    });
  });

  it('escape: a limited run cannot raise its own limits or leave its cgroups (cgroup v1 or v2); the memory limit still holds after it tried', async () => {
    const lower = makeProject('limits-escape');
    await withShadow(lower, async (shadow) => {
      // Every cgroup file the run could reach for its own limits, by each hierarchy it is in:
      // raise the limit, move itself to the hierarchy's root, make a sibling cgroup.
      const tries = [
        'for line in $(cat /proc/self/cgroup); do',
        '  ctl=$(echo "$line" | cut -d: -f2); p=$(echo "$line" | cut -d: -f3);',
        '  for root in /sys/fs/cgroup/$ctl /sys/fs/cgroup/unified /sys/fs/cgroup; do',
        '    for f in memory.limit_in_bytes memory.memsw.limit_in_bytes memory.max pids.max; do',
        '      [ -e "$root$p/$f" ] && { echo 9223372036854771712 > "$root$p/$f" 2>/dev/null && echo "RAISED $root$p/$f" || echo "refused $f"; };',
        '    done;',
        '    [ -e "$root/cgroup.procs" ] && { echo $$ > "$root/cgroup.procs" 2>/dev/null && echo "MOVED $root" || echo "refused move"; };',
        '    mkdir "$root/escape-$$" 2>/dev/null && echo "MADE $root/escape-$$";',
        '  done;',
        'done;',
      ].join(' ');
      const hog = `const a = []; for (;;) a.push(Buffer.alloc(8 << 20, 1));`;
      const r = await runInShadow(shadow, {
        agent: 'a',
        argv: ['sh', '-c', `${tries} exec ${process.execPath} -e '${hog}'`],
        limits: { memoryBytes: 96 << 20, processes: 64 },
        timeoutMs: 60_000,
      });
      assert.ok(r.protected, 'the run was confined');
      assert.doesNotMatch(r.stdout, /RAISED|MOVED|MADE/, r.stdout);
      // It did reach its own memory limit's file, and was refused (the view's /sys is read-only).
      assert.match(r.stdout, /refused (memory\.limit_in_bytes|memory\.max)/, r.stdout);
      assert.deepStrictEqual(r.limitsHit, ['memory'], `the memory limit held: ${JSON.stringify(r)}`);
    });
  });

  it('a run under its limits is not reported; the process limit refuses forks past it', async () => {
    const lower = makeProject('limits-pids');
    await withShadow(lower, async (shadow) => {
      const calm = await runInShadow(shadow, {
        agent: 'a',
        argv: [process.execPath, '-e', 'Buffer.alloc(4 << 20, 1); console.log("ok")'],
        limits: { memoryBytes: 256 << 20, processes: 64, cpus: 1 },
      });
      assert.strictEqual(calm.exitCode, 0, calm.stderr);
      assert.strictEqual(calm.limitsHit, undefined);
      // 40 sleepers in a run allowed 16 processes: the shell's forks fail past the limit.
      const r = await runInShadow(shadow, {
        agent: 'a',
        argv: ['sh', '-c', 'n=0; for i in $(seq 1 40); do sleep 5 & n=$((n+1)); done 2>/dev/null; echo started'],
        limits: { processes: 16 },
        timeoutMs: 60_000,
      });
      assert.ok(r.limitsHit?.includes('processes'), JSON.stringify(r));
    });
  });

  it('the CPU limit holds a busy run to its share (measured by the kernel, not the clock)', async () => {
    const lower = makeProject('limits-cpu');
    await withShadow(lower, async (shadow) => {
      // Two busy workers for a while under a quarter CPU: the kernel's own accounting says how
      // much CPU the run got for its wall time (a ratio, so a slow machine changes nothing).
      const busy = `const {Worker}=require('worker_threads');
        const src='const end=Date.now()+1500; while(Date.now()<end);';
        const t0=process.hrtime.bigint(); const c0=process.cpuUsage();
        let n=2; for (let i=0;i<2;i++) new Worker(src,{eval:true}).on('exit',()=>{ if(--n===0){
          const wall=Number(process.hrtime.bigint()-t0)/1e3; const u=process.cpuUsage(c0);
          console.log(JSON.stringify({ratio:(u.user+u.system)/wall})); } });`;
      const r = await runInShadow(shadow, { agent: 'a', argv: [process.execPath, '-e', busy], limits: { cpus: 0.25 }, timeoutMs: 60_000 });
      assert.strictEqual(r.exitCode, 0, r.stderr);
      const { ratio } = JSON.parse(r.stdout.trim()) as { ratio: number };
      // Unlimited, two busy threads on two cores get close to 2; a quarter CPU holds it near 0.25.
      assert.ok(ratio < 0.6, `the run got ${ratio.toFixed(2)} CPUs under a limit of 0.25`);
    });
  });

  it('a limit of a kind this system cannot set refuses the run, having started nothing', async () => {
    const lower = makeProject('limits-refused');
    await withShadow(lower, async (shadow) => {
      const marker = path.join(lower, '..', `never-${process.pid}`);
      const saved = process.env.SHADOWFS_NO_CGROUP;
      // Without cgroups (the /proc marker fallback) no limit can be set.
      process.env.SHADOWFS_NO_CGROUP = '1';
      try {
        await assert.rejects(
          runInShadow(shadow, {
            agent: 'a',
            argv: ['sh', '-c', `touch ${marker}`],
            limits: { memoryBytes: 64 << 20 },
            originalPath: false,
          }),
          (e: unknown) => e instanceof ShadowError && e.code === 'NOT_SUPPORTED' && /memory/.test(e.message),
        );
      } finally {
        if (saved === undefined) delete process.env.SHADOWFS_NO_CGROUP;
        else process.env.SHADOWFS_NO_CGROUP = saved;
      }
      assert.ok(!fs.existsSync(marker), 'the command was not started');
    });
  });

  it('run cgroups of a daemon that died are swept; live ones are kept', () => {
    const root = fs
      .readFileSync('/proc/self/mounts', 'utf8')
      .split('\n')
      .map((l) => l.split(' '))
      .find(([, , type]) => type === 'cgroup2')?.[1];
    if (!root) throw new Error('this test needs a cgroup v2 hierarchy');
    // A pid that is surely dead: a process that has exited.
    const dead = spawnSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' }).stdout.trim();
    const stale = path.join(root, `shadowfs-run-${dead}-stale${Date.now().toString(16)}`);
    const live = path.join(root, `shadowfs-run-${process.pid}-live${Date.now().toString(16)}`);
    fs.mkdirSync(stale);
    fs.mkdirSync(live);
    try {
      sweepRunCgroups(root);
      assert.ok(!fs.existsSync(stale), "the dead daemon's cgroup was removed");
      assert.ok(fs.existsSync(live), "a live daemon's cgroup was kept");
    } finally {
      for (const d of [stale, live]) if (fs.existsSync(d)) fs.rmdirSync(d);
    }
  });

  it('shadowfs run --memory through the daemon: killed past it, exit 137, said on stderr', () => {
    const cli = path.join(repoRoot, 'bin', 'shadowfs.js');
    const lower = makeProject('limits-cli');
    const name = `limits-cli-${process.pid}`;
    const sh = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 120_000 });
    const m = sh('mount', lower, '--name', name, '--json');
    assert.strictEqual(m.status, 0, m.stderr);
    try {
      const hog = 'const a = []; for (;;) a.push(Buffer.alloc(8 << 20, 1));';
      const r = sh('run', name, '--agent', 'a', '--memory', '80M', '--timeout', '60', '--', process.execPath, '-e', hog);
      assert.strictEqual(r.status, 137, r.stderr);
      assert.match(r.stderr, /went past its memory limit \(--memory 80M\)/);
      const j = sh('run', name, '--agent', 'a', '--memory', '80M', '--json', '--', 'true');
      assert.strictEqual(j.status, 0, j.stderr);
      assert.strictEqual((JSON.parse(j.stdout) as { limitsHit?: string[] }).limitsHit, undefined);
    } finally {
      sh('unmount', name);
    }
  });

  it('--memory takes sizes as people write them', () => {
    assert.strictEqual(parseSize('512M'), 512 << 20);
    assert.strictEqual(parseSize('2g'), 2 * 1024 ** 3);
    assert.strictEqual(parseSize('1.5G'), 1.5 * 1024 ** 3);
    assert.strictEqual(parseSize('65536'), 65536);
    assert.strictEqual(parseSize('64MiB'), 64 << 20);
    assert.throws(
      () => parseSize('lots'),
      (e: unknown) => e instanceof ShadowError && e.code === 'INVALID_ARGUMENT',
    );
  });
});
