// The resource limits of a run's Job Object as bytes: the x64 layouts of
// JOBOBJECT_EXTENDED_LIMIT_INFORMATION and JOBOBJECT_CPU_RATE_CONTROL_INFORMATION that
// SetInformationJobObject takes and QueryInformationJobObject gives back, the CpuRate for a number
// of CPUs, and which messages of the job's completion port say a limit was reached. Pure: nothing
// here calls Windows (win32-job.ts makes the calls), so it is unit-tested on any platform
// (test/unit/win32-job-limits.test.ts).
import { ShadowError } from '../common/errors';
import type { LimitHit, RunLimits } from './types';
import { LAUNCHER_PROCESSES } from './win32-launcher';

// Limit flags and classes, from the Win32 documentation (winnt.h values).
export const JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000;
export const JOB_OBJECT_LIMIT_ACTIVE_PROCESS = 0x0008;
export const JOB_OBJECT_LIMIT_JOB_MEMORY = 0x0200;
export const JOB_OBJECT_CPU_RATE_CONTROL_ENABLE = 0x1;
export const JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP = 0x4;
/** JOBOBJECTINFOCLASS values. */
export const JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9;
export const JOB_OBJECT_CPU_RATE_CONTROL_INFORMATION = 15;
/** Messages a job posts on its completion port (the lpNumberOfBytesTransferred of each). */
const JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT = 3;
const JOB_OBJECT_MSG_JOB_MEMORY_LIMIT = 10;

// Layouts for x64, derived from the structure definitions in Microsoft's documentation
// (learn.microsoft.com, "JOBOBJECT_BASIC_LIMIT_INFORMATION", "IO_COUNTERS",
// "JOBOBJECT_EXTENDED_LIMIT_INFORMATION") with the x64 rules:
// LARGE_INTEGER, SIZE_T, ULONG_PTR and ULONGLONG are 8 bytes aligned to 8, DWORD 4 aligned to 4,
// and a structure is padded to a multiple of its largest alignment.
//
// JOBOBJECT_BASIC_LIMIT_INFORMATION (64 bytes):
//    0 LARGE_INTEGER PerProcessUserTimeLimit
//    8 LARGE_INTEGER PerJobUserTimeLimit
//   16 DWORD         LimitFlags
//   20 (4 bytes of padding before the next 8-byte field)
//   24 SIZE_T        MinimumWorkingSetSize
//   32 SIZE_T        MaximumWorkingSetSize
//   40 DWORD         ActiveProcessLimit
//   44 (padding)
//   48 ULONG_PTR     Affinity
//   56 DWORD         PriorityClass
//   60 DWORD         SchedulingClass
// IO_COUNTERS (48 bytes): six ULONGLONG counters.
// JOBOBJECT_EXTENDED_LIMIT_INFORMATION (144 bytes):
//    0 JOBOBJECT_BASIC_LIMIT_INFORMATION BasicLimitInformation
//   64 IO_COUNTERS IoInfo
//  112 SIZE_T ProcessMemoryLimit
//  120 SIZE_T JobMemoryLimit
//  128 SIZE_T PeakProcessMemoryUsed
//  136 SIZE_T PeakJobMemoryUsed
export const EXTENDED_LIMIT_INFORMATION_SIZE = 144;
const LIMIT_FLAGS_OFFSET = 16;
const ACTIVE_PROCESS_LIMIT_OFFSET = 40;
const JOB_MEMORY_LIMIT_OFFSET = 120;
const PEAK_JOB_MEMORY_USED_OFFSET = 136;
// JOBOBJECT_CPU_RATE_CONTROL_INFORMATION (8 bytes; learn.microsoft.com,
// "JOBOBJECT_CPU_RATE_CONTROL_INFORMATION"):
//    0 DWORD ControlFlags
//    4 union { DWORD CpuRate; DWORD Weight; struct { WORD MinRate; WORD MaxRate; } }
// CpuRate is the job's share of all the machine's processor cycles, per 10,000; 0 is refused.
export const CPU_RATE_CONTROL_INFORMATION_SIZE = 8;

/**
 * The JOBOBJECT_EXTENDED_LIMIT_INFORMATION block that sets `limits` on a run's job (its memory and
 * process limits; cpus is a class of its own), KILL_ON_JOB_CLOSE always. Throws INVALID_ARGUMENT
 * for a value no limit can be made of.
 */
export function extendedLimitInformation(limits: RunLimits = {}): Buffer {
  const info = Buffer.alloc(EXTENDED_LIMIT_INFORMATION_SIZE);
  let flags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
  if (limits.memoryBytes !== undefined) {
    const bytes = Math.floor(limits.memoryBytes);
    if (!Number.isFinite(limits.memoryBytes) || bytes < 1)
      throw new ShadowError('INVALID_ARGUMENT', `a memory limit of ${limits.memoryBytes} bytes cannot be set`);
    flags |= JOB_OBJECT_LIMIT_JOB_MEMORY;
    info.writeBigUInt64LE(BigInt(bytes), JOB_MEMORY_LIMIT_OFFSET);
  }
  if (limits.processes !== undefined) {
    const n = Math.floor(limits.processes);
    if (!Number.isFinite(limits.processes) || n < 1 || n + LAUNCHER_PROCESSES > 0xffffffff)
      throw new ShadowError('INVALID_ARGUMENT', `a limit of ${limits.processes} processes cannot be set`);
    flags |= JOB_OBJECT_LIMIT_ACTIVE_PROCESS;
    info.writeUInt32LE(n + LAUNCHER_PROCESSES, ACTIVE_PROCESS_LIMIT_OFFSET);
  }
  info.writeUInt32LE(flags, LIMIT_FLAGS_OFFSET);
  return info;
}

/** What a JOBOBJECT_EXTENDED_LIMIT_INFORMATION block says about the limits shadowfs sets. */
export function parseExtendedLimitInformation(info: Buffer): {
  limitFlags: number;
  activeProcessLimit: number;
  jobMemoryLimit: bigint;
  peakJobMemoryUsed: bigint;
} {
  if (info.length < EXTENDED_LIMIT_INFORMATION_SIZE) throw new Error(`extended limit information of ${info.length} bytes`);
  return {
    limitFlags: info.readUInt32LE(LIMIT_FLAGS_OFFSET),
    activeProcessLimit: info.readUInt32LE(ACTIVE_PROCESS_LIMIT_OFFSET),
    jobMemoryLimit: info.readBigUInt64LE(JOB_MEMORY_LIMIT_OFFSET),
    peakJobMemoryUsed: info.readBigUInt64LE(PEAK_JOB_MEMORY_USED_OFFSET),
  };
}

/**
 * CpuRate for `cpus` CPUs' worth of time on a machine of `logicalCpus` logical processors: the
 * share of all cycles per 10,000, rounded, at least 1 (0 is refused by Windows) and at most 10,000
 * (all of them: asking for more CPUs than there are limits nothing).
 */
export function cpuRate(cpus: number, logicalCpus: number): number {
  if (!Number.isFinite(cpus) || cpus <= 0) throw new ShadowError('INVALID_ARGUMENT', `a CPU limit of ${cpus} CPUs cannot be set`);
  if (!Number.isInteger(logicalCpus) || logicalCpus < 1) throw new Error(`cpuRate: ${logicalCpus} is not a processor count`);
  return Math.min(10_000, Math.max(1, Math.round((cpus / logicalCpus) * 10_000)));
}

/** The JOBOBJECT_CPU_RATE_CONTROL_INFORMATION block of a hard cap at `rate` (cpuRate()). */
export function cpuRateControlInformation(rate: number): Buffer {
  if (!Number.isInteger(rate) || rate < 1 || rate > 10_000) throw new Error(`cpuRateControlInformation: ${rate} is not a CpuRate`);
  const info = Buffer.alloc(CPU_RATE_CONTROL_INFORMATION_SIZE);
  info.writeUInt32LE(JOB_OBJECT_CPU_RATE_CONTROL_ENABLE | JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP, 0);
  info.writeUInt32LE(rate, 4);
  return info;
}

/** ControlFlags and CpuRate of a JOBOBJECT_CPU_RATE_CONTROL_INFORMATION block. */
export function parseCpuRateControlInformation(info: Buffer): { controlFlags: number; cpuRate: number } {
  if (info.length < CPU_RATE_CONTROL_INFORMATION_SIZE) throw new Error(`CPU rate control information of ${info.length} bytes`);
  return { controlFlags: info.readUInt32LE(0), cpuRate: info.readUInt32LE(4) };
}

/** The limit a message of a job's completion port says was reached, if it says one. */
export function limitOfMessage(message: number): LimitHit | undefined {
  if (message === JOB_OBJECT_MSG_JOB_MEMORY_LIMIT) return 'memory';
  if (message === JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT) return 'processes';
  return undefined;
}

/** How a limit block reads in a message: "JOB_MEMORY 268435456, ACTIVE_PROCESS 17". */
export function describeLimits(info: Buffer): string {
  const l = parseExtendedLimitInformation(info);
  const parts = ['KILL_ON_JOB_CLOSE'];
  if (l.limitFlags & JOB_OBJECT_LIMIT_JOB_MEMORY) parts.push(`JOB_MEMORY ${l.jobMemoryLimit}`);
  if (l.limitFlags & JOB_OBJECT_LIMIT_ACTIVE_PROCESS) parts.push(`ACTIVE_PROCESS ${l.activeProcessLimit}`);
  return parts.join(', ');
}
