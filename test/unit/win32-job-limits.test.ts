// Unit tests of the parts of a run's Job Object limits (src/platform/win32-job-limits.ts) that need no
// Windows: the x64 bytes of JOBOBJECT_EXTENDED_LIMIT_INFORMATION and
// JOBOBJECT_CPU_RATE_CONTROL_INFORMATION as SetInformationJobObject gets them, the CpuRate for a
// number of CPUs, and which completion-port messages mean a limit was reached. The Win32 calls
// themselves run under wine (test/windows/job-limits-win32.test.ts).
import * as assert from 'assert';
import { ShadowError } from '../../src/common/errors';
import {
  CPU_RATE_CONTROL_INFORMATION_SIZE,
  cpuRate,
  cpuRateControlInformation,
  EXTENDED_LIMIT_INFORMATION_SIZE,
  extendedLimitInformation,
  JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
  JOB_OBJECT_LIMIT_JOB_MEMORY,
  JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
  limitOfMessage,
  parseCpuRateControlInformation,
  parseExtendedLimitInformation,
} from '../../src/platform/win32-job-limits';
import { LAUNCHER_PROCESSES } from '../../src/platform/win32-launcher';

const invalid = (e: unknown): boolean => e instanceof ShadowError && e.code === 'INVALID_ARGUMENT';

describe('unit: Job Object limits of a Windows run (pure parts)', () => {
  it('without limits, the extended block is 144 zero bytes but for KILL_ON_JOB_CLOSE in LimitFlags (offset 16)', () => {
    const info = extendedLimitInformation();
    assert.strictEqual(info.length, 144);
    assert.strictEqual(EXTENDED_LIMIT_INFORMATION_SIZE, 144);
    const expected = Buffer.alloc(144);
    expected.writeUInt32LE(0x2000, 16);
    assert.deepStrictEqual(info, expected);
  });

  it('memory: JOB_MEMORY (0x200) in LimitFlags and JobMemoryLimit at offset 120, nothing else written', () => {
    const info = extendedLimitInformation({ memoryBytes: 256 * 2 ** 20 + 0.7 });
    const expected = Buffer.alloc(144);
    expected.writeUInt32LE(0x2000 | 0x200, 16);
    expected.writeBigUInt64LE(268435456n, 120);
    assert.deepStrictEqual(info, expected);
    // Above 4 GiB: the SIZE_T holds it whole.
    const big = parseExtendedLimitInformation(extendedLimitInformation({ memoryBytes: 6 * 2 ** 30 }));
    assert.strictEqual(big.jobMemoryLimit, 6442450944n);
  });

  it('processes: ACTIVE_PROCESS (0x8) and ActiveProcessLimit at offset 40, one more than asked for the launcher', () => {
    assert.strictEqual(LAUNCHER_PROCESSES, 1);
    const info = extendedLimitInformation({ processes: 16 });
    const expected = Buffer.alloc(144);
    expected.writeUInt32LE(0x2000 | 0x8, 16);
    expected.writeUInt32LE(17, 40);
    assert.deepStrictEqual(info, expected);
  });

  it('both together, read back by the parser; cpus leaves the extended block alone', () => {
    const l = parseExtendedLimitInformation(extendedLimitInformation({ memoryBytes: 1 << 20, processes: 1, cpus: 2 }));
    assert.deepStrictEqual(l, {
      limitFlags: JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_JOB_MEMORY | JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
      activeProcessLimit: 2,
      jobMemoryLimit: 1048576n,
      peakJobMemoryUsed: 0n,
    });
    assert.deepStrictEqual(extendedLimitInformation({ cpus: 2 }), extendedLimitInformation());
  });

  it('refuses values no limit can be made of, with INVALID_ARGUMENT', () => {
    for (const bad of [0, -1, NaN, Infinity, 0.5])
      assert.throws(() => extendedLimitInformation({ memoryBytes: bad }), invalid, `memory ${bad}`);
    for (const bad of [0, -3, NaN, 2 ** 32]) assert.throws(() => extendedLimitInformation({ processes: bad }), invalid, `processes ${bad}`);
    for (const bad of [0, -1, NaN, Infinity]) assert.throws(() => cpuRate(bad, 8), invalid, `cpus ${bad}`);
    assert.throws(() => cpuRate(1, 0), /not a processor count/);
  });

  it('CpuRate is cpus / logical processors per 10,000, rounded, within [1, 10000]', () => {
    assert.strictEqual(cpuRate(1, 8), 1250);
    assert.strictEqual(cpuRate(1.5, 4), 3750);
    assert.strictEqual(cpuRate(0.25, 2), 1250);
    assert.strictEqual(cpuRate(1, 3), 3333);
    assert.strictEqual(cpuRate(2, 3), 6667);
    assert.strictEqual(cpuRate(4, 4), 10000);
    // More CPUs than the machine has: all of it (no limit), not a refused 20000.
    assert.strictEqual(cpuRate(16, 4), 10000);
    // A sliver of a big machine: never 0, which Windows refuses.
    assert.strictEqual(cpuRate(0.01, 256), 1);
  });

  it('the CPU block: 8 bytes, ControlFlags ENABLE | HARD_CAP (0x5), CpuRate at offset 4', () => {
    assert.strictEqual(CPU_RATE_CONTROL_INFORMATION_SIZE, 8);
    assert.strictEqual(cpuRateControlInformation(3750).toString('hex'), '05000000' + 'a60e0000');
    assert.deepStrictEqual(parseCpuRateControlInformation(cpuRateControlInformation(1)), { controlFlags: 5, cpuRate: 1 });
    for (const bad of [0, 10001, 1.5]) assert.throws(() => cpuRateControlInformation(bad), /not a CpuRate/);
  });

  it('JOB_OBJECT_MSG_JOB_MEMORY_LIMIT (10) means memory, ACTIVE_PROCESS_LIMIT (3) processes, no other message a limit', () => {
    assert.strictEqual(limitOfMessage(10), 'memory');
    assert.strictEqual(limitOfMessage(3), 'processes');
    // END_OF_JOB_TIME, END_OF_PROCESS_TIME, ACTIVE_PROCESS_ZERO, NEW_PROCESS, EXIT_PROCESS,
    // ABNORMAL_EXIT_PROCESS, PROCESS_MEMORY_LIMIT (no per-process limit is set), NOTIFICATION_LIMIT.
    for (const other of [1, 2, 4, 6, 7, 8, 9, 11]) assert.strictEqual(limitOfMessage(other), undefined, `message ${other}`);
  });
});
