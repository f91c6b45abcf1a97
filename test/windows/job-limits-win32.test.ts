// Resource limits of a Windows run (#29 D4) on its Job Object (src/platform/win32-job.ts
// setLimits, set when the run's group is made, before anything is launched into it): memory as
// JOB_OBJECT_LIMIT_JOB_MEMORY, processes as JOB_OBJECT_LIMIT_ACTIVE_PROCESS (one more for the
// launcher), cpus as a JobObjectCpuRateControlInformation hard cap; limitsHit from the job's
// completion port. Runs only on Windows; on Linux under wine with
//   scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json
//
// WINE ENFORCES NONE OF THESE LIMITS. Under wine 8.0 SetInformationJobObject accepts the memory
// and process limits and applies neither (a node process allocated 320 MB in a job limited to
// 64 MB, and started 4 processes in a job limited to 2), QueryInformationJobObject answers zeros
// for every field of JobObjectExtendedLimitInformation (KILL_ON_JOB_CLOSE included, which wine
// does apply), and JobObjectCpuRateControlInformation is refused with ERROR_INVALID_PARAMETER, so a
// run asking for cpus is refused with NOT_SUPPORTED here. What runs here: the calls are accepted,
// the completion port is associated and read, a run with limits starts and reports no limitsHit,
// the CPU refusal starts nothing. What has never run: the read-back of the limits as set, the
// CPU cap, and any limit being hit (the tests that expect those are skipped under wine).
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../../src/common/errors';
import { platform } from '../../src/platform';
import { logicalProcessors } from '../../src/platform/win32-job';
import {
  cpuRate,
  JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
  JOB_OBJECT_LIMIT_JOB_MEMORY,
  JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
} from '../../src/platform/win32-job-limits';
import { type Win32ProcessGroup } from '../../src/platform/win32-processes';
import { runInShadow, type RunOptions } from '../../src/run/runner';
import type { RunAsJob, Shadow } from '../../src/shadow';

type Ffi = typeof import('ffi-rs');

/** Whether this is wine (its ntdll exports wine_get_version). */
function underWine(): boolean {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const f = require('ffi-rs') as Ffi;
  f.open({ library: 'test-limits-ntdll', path: 'ntdll.dll' });
  try {
    f.load({ library: 'test-limits-ntdll', funcName: 'wine_get_version', retType: f.DataType.String, paramsType: [], paramsValue: [] });
    return true;
  } catch {
    return false;
  }
}

/** A Shadow stand-in, as in run-win32.test.ts: the folder `lower`, and a plain directory for the agent's layer. */
function standIn(lower: string, layer: string): Shadow {
  return {
    lower,
    mountPoint: layer,
    mounted: true,
    // Where the run goes is the shadow's (Shadow.runAs); the runner only spawns there.
    runAs: <T>(_agent: string, job: RunAsJob<T>) => job({ dir: layer, queuedMs: 0 }),
  } as unknown as Shadow;
}

const MiB = 2 ** 20;
/** JOB_OBJECT_MSG_NEW_PROCESS: posted on the job's port for each process that joins it. */
const JOB_OBJECT_MSG_NEW_PROCESS = 6;

describe('run limits on the Job Object of a Windows run (wine enforces none of them)', function () {
  this.timeout(120_000);
  let wine = false;
  let base = '';
  let folder = '';
  let layer = '';
  let shadow: Shadow;
  let env: Record<string, string>;
  let n = 0;
  const groups: Win32ProcessGroup[] = [];

  const runId = (): string => `wine-limits-${process.pid}-${n++}`;
  const group = (limits: Parameters<typeof platform.processes.group>[1]): Win32ProcessGroup => {
    const g = platform.processes.group(runId(), limits) as Win32ProcessGroup;
    groups.push(g);
    return g;
  };
  const run = (opts: Partial<RunOptions> & { argv: string[] }) =>
    runInShadow(shadow, { agent: 'agent', env, runId: runId(), unprotected: true, ...opts });

  before(function () {
    if (process.platform !== 'win32') this.skip();
    wine = underWine();
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-limits-win-'));
    folder = path.join(base, 'A');
    layer = path.join(base, 'layer');
    for (const d of [folder, layer]) fs.mkdirSync(d);
    fs.writeFileSync(path.join(folder, 'package.json'), '{"name": "a"}\n');
    shadow = standIn(folder, layer);
    const systemPath = (process.env.PATH ?? '').split(';').filter((d) => d !== '');
    env = { Path: [path.dirname(process.execPath), ...systemPath].join(';') };
  });

  afterEach(async () => {
    for (const g of groups.splice(0)) await g.dispose();
  });

  after(() => {
    if (base) fs.rmSync(base, { recursive: true, force: true });
  });

  it('sets memory and processes on the job (the launcher counted on top) and reads them back as set', function () {
    const g = group({ memoryBytes: 300 * MiB, processes: 7 });
    const { extended } = g.job.readLimits();
    if (wine) {
      // Wine's QueryInformationJobObject(JobObjectExtendedLimitInformation) is a stub that answers
      // zeros, even for the KILL_ON_JOB_CLOSE wine applies: the read-back as set has never run here.
      // (This fails the day wine answers; then the check below should run under wine too.)
      assert.deepStrictEqual(extended, { limitFlags: 0, activeProcessLimit: 0, jobMemoryLimit: 0n, peakJobMemoryUsed: 0n });
      return;
    }
    assert.strictEqual(
      extended.limitFlags,
      JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_JOB_MEMORY | JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
    );
    assert.strictEqual(extended.activeProcessLimit, 8);
    assert.strictEqual(extended.jobMemoryLimit, BigInt(300 * MiB));
  });

  it('sets cpus as a hard cap of cpus / logical processors per 10,000; wine refuses it with NOT_SUPPORTED naming the call', function () {
    const cpus = logicalProcessors();
    assert.ok(cpus >= 1, `GetActiveProcessorCount says ${cpus}`);
    if (wine) {
      assert.throws(
        () => group({ cpus: 1 }),
        (err: unknown) => {
          assert.ok(err instanceof ShadowError, String(err));
          assert.strictEqual(err.code, 'NOT_SUPPORTED');
          assert.match(
            err.message,
            new RegExp(
              `^cannot set the run's limits on its Job Object, so it was not started: ` +
                `SetInformationJobObject\\(JobObjectCpuRateControlInformation, ENABLE \\| HARD_CAP, CpuRate ${cpuRate(1, cpus)}\\) ` +
                `failed for a run: GetLastError 87 \\(ERROR_INVALID_PARAMETER`,
            ),
          );
          return true;
        },
      );
      return;
    }
    const g = group({ cpus: 1 });
    assert.deepStrictEqual(g.job.readLimits(true).cpu, { controlFlags: 0x1 | 0x4, cpuRate: cpuRate(1, cpus) });
  });

  it("reads the job's completion port: the command's processes are seen joining, and no limit is reported", async () => {
    const g = group({ memoryBytes: 512 * MiB, processes: 4 });
    assert.deepStrictEqual(g.limitsHit(), []);
    const child = await g.launch([process.execPath, '-e', 'process.stdout.write("ok")'], { env: process.env });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    assert.strictEqual(code, 0);
    assert.strictEqual(out, 'ok');
    assert.deepStrictEqual(g.limitsHit(), []);
    // The launcher and the command each joined: the port is associated and its messages are read.
    assert.ok(g.job.messagesSeen.has(JOB_OBJECT_MSG_NEW_PROCESS), `messages read: ${[...g.job.messagesSeen].join(', ')}`);
  });

  it('a job without limits has no port to read', () => {
    const g = group(undefined);
    assert.deepStrictEqual(g.limitsHit(), []);
    assert.strictEqual(g.job.messagesSeen.size, 0);
  });

  it('a run with memory and process limits starts, and under them reports no limitsHit', async () => {
    const r = await run({
      argv: [process.execPath, '-e', 'Buffer.alloc(4 << 20, 1); process.stdout.write("fine")'],
      limits: { memoryBytes: 512 * MiB, processes: 4 },
    });
    assert.strictEqual(r.exitCode, 0, r.stderr);
    assert.strictEqual(r.stdout, 'fine');
    assert.strictEqual(r.limitsHit, undefined);
  });

  it('a run with cpus: under wine refused with NOT_SUPPORTED and its command never started; on Windows it runs', async () => {
    const marker = path.join(layer, `cpu-ran-${n}`);
    const argv = [process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`];
    if (!wine) {
      const r = await run({ argv, limits: { cpus: 1 } });
      assert.strictEqual(r.exitCode, 0, r.stderr);
      assert.strictEqual(r.limitsHit, undefined);
      assert.ok(fs.existsSync(marker));
      return;
    }
    await assert.rejects(
      run({ argv, limits: { memoryBytes: 512 * MiB, cpus: 1 } }),
      (err: unknown) =>
        err instanceof ShadowError && err.code === 'NOT_SUPPORTED' && /JobObjectCpuRateControlInformation/.test(err.message),
    );
    await new Promise((r) => setTimeout(r, 1000));
    assert.ok(!fs.existsSync(marker), 'the command ran although its limits could not be set');
  });

  // The hits themselves: Windows refuses the commit or the process and posts the message that
  // limitsHit reads. WINE ENFORCES NEITHER LIMIT, so these have never run; on a real Windows
  // they should.
  it('past its memory limit a run is ended and reported (never run: wine does not enforce JOB_MEMORY)', async function () {
    if (wine) this.skip();
    const hog = 'const a = []; for (;;) a.push(Buffer.alloc(8 << 20, 1));';
    const r = await run({ argv: [process.execPath, '-e', hog], limits: { memoryBytes: 160 * MiB }, timeoutMs: 60_000 });
    assert.deepStrictEqual(r.limitsHit, ['memory'], JSON.stringify(r));
    assert.notStrictEqual(r.exitCode, 0);
    assert.strictEqual(r.timedOut, false);
  });

  it('past its process limit a start is refused and reported (never run: wine does not enforce ACTIVE_PROCESS)', async function () {
    if (wine) this.skip();
    const spawner =
      "const cp = require('child_process'); let refused = 0;" +
      "for (let i = 0; i < 6; i++) { try { const c = cp.spawn(process.execPath, ['-e', 'setTimeout(() => {}, 3000)'], { stdio: 'ignore' });" +
      ' c.on("error", () => refused++); } catch { refused++; } }' +
      'setTimeout(() => { process.stdout.write(String(refused)); process.exit(0); }, 1000);';
    const r = await run({ argv: [process.execPath, '-e', spawner], limits: { processes: 3 }, timeoutMs: 60_000 });
    assert.ok(r.limitsHit?.includes('processes'), JSON.stringify(r));
    // Three processes for the command (itself and two children), six asked for: four refused (more
    // if Windows counts something else of the run's in the job, such as a console host).
    assert.ok(Number(r.stdout) >= 4, `refused: ${r.stdout} ${r.stderr}`);
  });
});
