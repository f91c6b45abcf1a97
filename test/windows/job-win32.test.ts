// The Job Object of a run on Windows (src/platform/win32-job.ts, and the run's ProcessGroup on win32): a
// command started through the launcher is in the job with everything it starts, detached
// processes included, and dies with it on killAll(), when the job's handle is closed, and when
// the process that holds the job dies. A launcher that is never let go starts nothing. Runs only
// on Windows; on Linux under wine with
//   scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json
// (nothing mounts on Windows yet, so a whole `run` cannot be exercised here; the run's process group can).
import * as assert from 'assert';
import { type ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { platform, type ProcessGroup } from '../../src/platform';
import { Win32Job } from '../../src/platform/win32-job';
import { LAUNCHER_CANNOT_START, LAUNCHER_NOT_STARTED, launcherCommand } from '../../src/platform/win32-launcher';

type Ffi = typeof import('ffi-rs');

const SYNCHRONIZE = 0x00100000;
const PROCESS_QUERY_LIMITED_INFORMATION = 0x1000;
const WAIT_OBJECT_0 = 0;

let loaded: Ffi | undefined;

function kernel32(): Ffi {
  if (!loaded) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded = require('ffi-rs') as Ffi;
    loaded.open({ library: 'test-job-kernel32', path: 'kernel32.dll' });
  }
  return loaded;
}

function k32(funcName: string, params: [number, unknown][], ret: 'handle' | 'u32' = 'u32'): number {
  const ffi = kernel32();
  return ffi.load({
    library: 'test-job-kernel32',
    funcName,
    retType: ret === 'handle' ? ffi.DataType.I64 : ffi.DataType.U32,
    paramsType: params.map((p) => p[0]),
    paramsValue: params.map((p) => p[1]),
  }) as number;
}

/**
 * A handle on process `pid`, held while the test looks at it: a process object with an open
 * handle keeps its id, so `pid` cannot name another process later in the test.
 */
class Watched {
  readonly handle: number;
  constructor(readonly pid: number) {
    const T = kernel32().DataType;
    this.handle = k32(
      'OpenProcess',
      [
        [T.U32, SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION],
        [T.I32, 0],
        [T.U32, pid],
      ],
      'handle',
    );
    assert.ok(this.handle, `cannot open process ${pid}: it is gone already`);
  }

  /** Waits up to `ms` for the process to end; whether it did. */
  ended(ms: number): boolean {
    const T = kernel32().DataType;
    const r = k32('WaitForSingleObject', [
      [T.I64, this.handle],
      [T.U32, ms],
    ]);
    return r === WAIT_OBJECT_0;
  }

  close(): void {
    const T = kernel32().DataType;
    k32('CloseHandle', [[T.I64, this.handle]]);
  }
}

/** Asserts that every watched process has ended (they were killed: that takes moments, not seconds). */
function assertAllEnded(procs: Watched[], what: string): void {
  for (const p of procs) {
    assert.ok(p.ended(20_000), `${what}: process ${p.pid} is still running`);
    assert.throws(
      () => process.kill(p.pid, 0),
      (err: NodeJS.ErrnoException) => err.code === 'ESRCH',
      `process ${p.pid} still answers`,
    );
  }
}

/**
 * `node -e` source of one process of a tree: it starts `next` (when given) with the rest of its
 * arguments, records its pid in the file argv[1], and stays.
 */
function stage(next?: string, detachedNext = false): string {
  return [
    "const fs = require('fs');",
    next
      ? `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(next)}, ...process.argv.slice(2)], ` +
        `{ stdio: 'ignore', detached: ${detachedNext} }).unref();`
      : '',
    "fs.writeFileSync(process.argv[1] + '.part', String(process.pid));",
    "fs.renameSync(process.argv[1] + '.part', process.argv[1]);",
    'setInterval(() => undefined, 1000);',
  ].join('\n');
}

/** The command of a three-level tree: the command, its child (detached if asked), and its grandchild. */
function treeCommand(files: string[], detachedGrandchild = false): string[] {
  return [process.execPath, '-e', stage(stage(stage(), false), detachedGrandchild), ...files];
}

interface Launched {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  exit: Promise<number | null>;
}

function watchLaunch(child: ChildProcess): Launched {
  const l: Launched = {
    child,
    stdout: '',
    stderr: '',
    // 'close', not 'exit': the exit can be reported before the last output has been read.
    exit: new Promise((resolve) => child.once('close', (code) => resolve(code))),
  };
  child.stdout?.on('data', (d: Buffer) => (l.stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (l.stderr += d.toString()));
  return l;
}

describe('run: Job Object of a run (Windows)', function () {
  this.timeout(120_000);
  let dir = '';
  const jobs: Win32Job[] = [];
  const watched: Watched[] = [];
  const others: ChildProcess[] = [];

  before(() => {
    assert.strictEqual(
      process.platform,
      'win32',
      'these tests make Job Objects with the Win32 API: run them on Windows, or on Linux under wine (scripts/wine-node.sh, see the top of this file)',
    );
  });

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-job-'));
  });

  afterEach(() => {
    for (const j of jobs.splice(0)) j.close(); // KILL_ON_JOB_CLOSE: nothing a test started survives
    for (const c of others.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill();
    for (const w of watched.splice(0)) w.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function newJob(): Win32Job {
    const job = new Win32Job();
    jobs.push(job);
    return job;
  }

  function pidFiles(n = 3): string[] {
    return Array.from({ length: n }, (_, i) => path.join(dir, `pid-${i}`));
  }

  /** Waits until every file holds a pid (failing if the launcher ends first), and watches the processes. */
  async function pidsOf(files: string[], launched: Launched): Promise<Watched[]> {
    const deadline = Date.now() + 60_000;
    let ended = false;
    void launched.exit.then(() => (ended = true));
    while (!files.every((f) => fs.existsSync(f))) {
      if (ended) assert.fail(`the launcher exited (${launched.child.exitCode}) before the tree was up: ${launched.stderr}`);
      if (Date.now() > deadline) assert.fail(`the tree did not come up; pids so far: ${files.filter((f) => fs.existsSync(f)).length}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const procs = files.map((f) => new Watched(Number(fs.readFileSync(f, 'utf8'))));
    watched.push(...procs);
    return procs;
  }

  it('lists the launcher and the whole tree of its command; killAll() kills all of them', async () => {
    const job = newJob();
    const files = pidFiles();
    const launched = watchLaunch(job.launch(treeCommand(files)));
    const tree = await pidsOf(files, launched);
    const alive = job.alive();
    for (const p of [launched.child.pid!, ...tree.map((t) => t.pid)])
      assert.ok(alive.includes(p), `${p} is not in the job's list ${alive}`);
    assert.strictEqual(new Set(tree.map((t) => t.pid)).size, 3, 'three distinct processes');
    for (const t of tree) assert.ok(!t.ended(0), `process ${t.pid} has ended before it was killed`);

    const killed = await job.killAll();
    assert.ok(killed >= 4, `killAll() says it killed ${killed}, expected the launcher and three more`);
    assert.deepStrictEqual(job.alive(), []);
    assertAllEnded(tree, 'after killAll()');
    assert.strictEqual(await launched.exit, 1, 'the launcher ends with the exit code TerminateJobObject gave');
    assert.strictEqual(await job.killAll(), 0, 'nothing is left to kill');
  });

  it('keeps a detached grandchild in the job, and kills it too', async () => {
    const job = newJob();
    const files = pidFiles();
    const launched = watchLaunch(job.launch(treeCommand(files, true)));
    const tree = await pidsOf(files, launched);
    const alive = job.alive();
    for (const t of tree) assert.ok(alive.includes(t.pid), `${t.pid} is not in the job's list ${alive}`);
    assert.ok((await job.killAll()) >= 4);
    assertAllEnded(tree, 'after killAll()');
  });

  it('kills the tree when the job handle is closed (KILL_ON_JOB_CLOSE)', async () => {
    const job = newJob();
    const files = pidFiles();
    const launched = watchLaunch(job.launch(treeCommand(files, true)));
    const tree = await pidsOf(files, launched);
    job.close();
    assert.ok(job.closed);
    assert.throws(() => job.alive(), /the Job Object is closed/);
    assertAllEnded(tree, 'after close()');
    await launched.exit;
  });

  it('kills the tree when the process that holds the job dies', async () => {
    // A stand-in for the daemon: it makes the job, starts the tree in it, and is then killed.
    const files = pidFiles();
    const module = path.join(__dirname, '..', '..', 'src', 'platform', 'win32-job.js');
    const holder =
      `const { Win32Job } = require(${JSON.stringify(module)});` +
      'const job = new Win32Job();' +
      `job.launch(${JSON.stringify(treeCommand(files, true))});` +
      'setInterval(() => undefined, 1000);';
    const daemon = spawn(process.execPath, ['-e', holder], { stdio: ['ignore', 'ignore', 'pipe'] });
    others.push(daemon);
    const launched = watchLaunch(daemon);
    const tree = await pidsOf(files, launched);
    daemon.kill();
    await launched.exit;
    assertAllEnded(tree, 'after the holder of the job died');
  });

  it('starts nothing when the launcher is not let go', async () => {
    const job = newJob();
    const marker = path.join(dir, 'started');
    const command = [process.execPath, '-e', "require('fs').writeFileSync(process.argv[1], 'x')", marker];
    for (const said of [undefined, 'stop\n']) {
      const cmd = launcherCommand(command);
      // As Win32Job.launch() starts it: detached, so it has no console (and no conhost.exe joins the job).
      const launcher = spawn(cmd.file, cmd.args, { env: cmd.env, detached: true, windowsHide: true, stdio: ['pipe', 'pipe', 'pipe'] });
      const launched = watchLaunch(launcher);
      job.assign(launcher.pid!);
      assert.deepStrictEqual(job.alive(), [launcher.pid], 'only the launcher is in the job while it waits');
      launcher.stdin.end(said);
      assert.strictEqual(await launched.exit, LAUNCHER_NOT_STARTED, launched.stderr);
      assert.match(launched.stderr, /shadowfs: the command did not start/);
      // Anything the launcher had started would be in the job still.
      assert.deepStrictEqual(job.alive(), []);
      assert.ok(!fs.existsSync(marker), 'the command ran');
    }
  });

  it("passes the command's arguments, output and exit code through, and says when it cannot start", async () => {
    const job = newJob();
    const args = ['a b', 'c"d', '', 'e\\'];
    const ok = watchLaunch(
      job.launch([
        process.execPath,
        '-e',
        'process.stdout.write(JSON.stringify(process.argv.slice(1))); process.stderr.write("err"); process.exit(7)',
        ...args,
      ]),
    );
    assert.strictEqual(await ok.exit, 7);
    assert.deepStrictEqual(JSON.parse(ok.stdout), args);
    assert.strictEqual(ok.stderr, 'err');

    const missing = watchLaunch(job.launch([path.join(dir, 'no-such-program.exe')]));
    assert.strictEqual(await missing.exit, LAUNCHER_CANNOT_START);
    assert.match(missing.stderr, /shadowfs: cannot start .*no-such-program\.exe/);
  });

  it("gives the run's NODE_OPTIONS to the command, not to the launcher", async () => {
    const job = newJob();
    const log = path.join(dir, 'preloaded');
    const preload = path.join(dir, 'preload.js');
    fs.writeFileSync(preload, `require('fs').appendFileSync(${JSON.stringify(log)}, process.pid + '\\n');`);
    const env = { ...process.env, NODE_OPTIONS: `--require ${JSON.stringify(preload)}` };
    const run = watchLaunch(job.launch([process.execPath, '-e', 'process.stdout.write(String(process.pid))'], { env }));
    assert.strictEqual(await run.exit, 0, run.stderr);
    assert.deepStrictEqual(fs.readFileSync(log, 'utf8').split('\n').filter(Boolean), [run.stdout]);
  });

  it("a run's ProcessGroup is a Job Object on Windows: alive() and dispose() cover the whole tree", async () => {
    const tracker = platform.processes.group('job-test') as ProcessGroup & { job: Win32Job };
    assert.ok(tracker.launches && tracker.job, 'the group launches into a job');
    assert.strictEqual(tracker.cgroup, undefined);
    const files = pidFiles();
    const launched = watchLaunch(await tracker.launch(treeCommand(files, true), { cwd: dir }));
    const tree = await pidsOf(files, launched);
    const alive = tracker.alive();
    for (const t of tree) assert.ok(alive.includes(t.pid), `${t.pid} is not in the run's list ${alive}`);
    assert.ok((await tracker.dispose()) >= 4);
    assertAllEnded(tree, 'after dispose()');
    assert.ok(tracker.job.closed, 'dispose() closes the job');
    assert.deepStrictEqual(tracker.alive(), []);
  });
});
