// The process tree of a run on Windows: a Job Object, made and driven with Win32 calls through
// ffi-rs. Every process the command starts is born into the job (children inherit it, and the job
// allows no breakaway), so killing the job kills the whole tree, detached processes included; and
// the job is made with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, so the tree also dies when its last
// handle closes, which happens when the daemon dies. ffi-rs is required only when a job is made:
// importing this module never fails, on any platform.
//
// Node cannot create a process suspended, so a command must not start before it is in the job:
// it is started through a launcher (`process.execPath -e LAUNCHER`) that waits for one line on
// its stdin, written once AssignProcessToJobObject has put the launcher in the job; only then
// does the launcher spawn the command, which is born inside the job.
//
// Resource limits (setLimits, before the launcher is let go) go on the same job: committed memory
// of all its processes together (JOB_OBJECT_LIMIT_JOB_MEMORY), processes at once
// (JOB_OBJECT_LIMIT_ACTIVE_PROCESS, one more than asked: the launcher is in the job too) and a hard
// cap on CPU time (JobObjectCpuRateControlInformation). Windows refuses what would pass a limit (an
// allocation, a new process) rather than killing anything, and says so on the job's I/O completion
// port (JOB_OBJECT_MSG_JOB_MEMORY_LIMIT, JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT): limitsHit() reads
// those messages, and the run ends itself past its memory limit as on Linux.
//
// Conventions as in src/platform/win32-identity.ts: handles cross the boundary as plain numbers, structures as
// Buffers (ffi-rs passes a Buffer as a pointer to its bytes and keeps what the call wrote), and
// every failure names the Win32 call and its GetLastError value.
import { spawn, type ChildProcessByStdio } from 'child_process';
import type { Readable, Writable } from 'stream';
import { ShadowError } from '../common/errors';
import type { LimitHit, RunLimits } from './types';
import { win32Error } from './win32-identity';

type Ffi = typeof import('ffi-rs');
type FieldType = import('ffi-rs').FieldType;

const KERNEL32 = 'shadowfs-job-kernel32';

// Access rights and constants, from the Win32 documentation (winnt.h values).
const PROCESS_TERMINATE = 0x0001;
const PROCESS_SET_QUOTA = 0x0100;
export const JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000;
export const JOB_OBJECT_LIMIT_ACTIVE_PROCESS = 0x0008;
export const JOB_OBJECT_LIMIT_JOB_MEMORY = 0x0200;
export const JOB_OBJECT_CPU_RATE_CONTROL_ENABLE = 0x1;
export const JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP = 0x4;
/** JOBOBJECTINFOCLASS values. */
const JOB_OBJECT_BASIC_PROCESS_ID_LIST = 3;
const JOB_OBJECT_ASSOCIATE_COMPLETION_PORT_INFORMATION = 7;
export const JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9;
export const JOB_OBJECT_CPU_RATE_CONTROL_INFORMATION = 15;
/** Messages a job posts on its completion port (the lpNumberOfBytesTransferred of each). */
const JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT = 3;
const JOB_OBJECT_MSG_JOB_MEMORY_LIMIT = 10;
/** GetActiveProcessorCount: every processor group, not only the caller's. */
const ALL_PROCESSOR_GROUPS = 0xffff;
const INVALID_HANDLE_VALUE = -1;
const ERROR_MORE_DATA = 234;

// Layouts for x64, derived from the structure definitions in Microsoft's documentation
// (learn.microsoft.com, "JOBOBJECT_BASIC_LIMIT_INFORMATION", "IO_COUNTERS",
// "JOBOBJECT_EXTENDED_LIMIT_INFORMATION", "JOBOBJECT_BASIC_PROCESS_ID_LIST") with the x64 rules:
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
// JOBOBJECT_ASSOCIATE_COMPLETION_PORT (16 bytes; "JOBOBJECT_ASSOCIATE_COMPLETION_PORT"):
//    0 PVOID  CompletionKey
//    8 HANDLE CompletionPort
const ASSOCIATE_COMPLETION_PORT_SIZE = 16;
// JOBOBJECT_BASIC_PROCESS_ID_LIST (8 + 8 * n bytes for n ids):
//    0 DWORD     NumberOfAssignedProcesses   (all processes in the job)
//    4 DWORD     NumberOfProcessIdsInList    (how many ids follow)
//    8 ULONG_PTR ProcessIdList[n]
const PID_LIST_HEADER = 8;
const PID_SIZE = 8;

/**
 * Processes of a run's job that are not the command's: the launcher (a node process that stays
 * until the command exits). ActiveProcessLimit is the run's `processes` plus this.
 */
export const LAUNCHER_PROCESSES = 1;

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

/** The line that lets a launcher start its command. */
const GO = 'go\n';
/** Exit code of a launcher that was never let go (its stdin ended or said something else). */
export const LAUNCHER_NOT_STARTED = 125;
/** Exit code of a launcher whose command could not be started (as a shell says for a missing command). */
export const LAUNCHER_CANNOT_START = 127;
/**
 * The launcher's own node must not see the run's NODE_OPTIONS (a --require or --inspect meant for
 * the command would act on the launcher); it is handed over under this name and restored for the
 * command.
 */
const NODE_OPTIONS_CARRIER = 'SHADOWFS_LAUNCHER_NODE_OPTIONS';
/**
 * Set ("1") in the launcher's environment when the command's arguments are one finished command
 * line (a cmd.exe line from win32-command.ts) that the launcher's spawn must pass as it is, with
 * windowsVerbatimArguments; never passed on to the command.
 */
const VERBATIM_FLAG = 'SHADOWFS_LAUNCHER_VERBATIM';

/**
 * The launcher, run as `node -e LAUNCHER -- command args...`. It reads its stdin up to the first
 * newline; that line must be "go", else (or at the end of stdin) it exits with 125 and starts
 * nothing. Then it spawns the command with its own stdout and stderr (stdin: nothing; the
 * launcher's stdin is the daemon's channel), with windowsVerbatimArguments when the daemon said so
 * in SHADOWFS_LAUNCHER_VERBATIM (so Node does not quote a finished cmd.exe line again), passes on
 * SIGINT, SIGTERM, SIGBREAK and SIGHUP, and exits with the command's exit code (127 with a message
 * when the command cannot start).
 */
export const LAUNCHER = `'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const argv = process.argv.slice(1);
const say = (m) => { try { fs.writeSync(2, 'shadowfs: ' + m + '\\n'); } catch {} };
let line = '';
let decided = false;
const notStarted = (why) => {
  if (decided) return;
  decided = true;
  say('the command did not start: ' + why);
  process.exit(${LAUNCHER_NOT_STARTED});
};
const start = () => {
  decided = true;
  process.stdin.removeAllListeners('data');
  process.stdin.destroy();
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.toUpperCase() === 'NODE_OPTIONS') delete env[k];
  if (env.${NODE_OPTIONS_CARRIER} !== undefined) env.NODE_OPTIONS = env.${NODE_OPTIONS_CARRIER};
  delete env.${NODE_OPTIONS_CARRIER};
  const verbatim = env.${VERBATIM_FLAG} === '1';
  delete env.${VERBATIM_FLAG};
  let child;
  try {
    child = spawn(argv[0], argv.slice(1), {
      stdio: ['ignore', 'inherit', 'inherit'],
      env,
      windowsHide: true,
      windowsVerbatimArguments: verbatim,
    });
  } catch (err) {
    say('cannot start ' + argv[0] + ': ' + err.message);
    process.exit(${LAUNCHER_CANNOT_START});
  }
  child.once('error', (err) => {
    say('cannot start ' + argv[0] + ': ' + err.message);
    process.exit(${LAUNCHER_CANNOT_START});
  });
  child.once('exit', (code) => process.exit(code === null ? 1 : code));
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGBREAK', 'SIGHUP']) {
    process.on(sig, () => {
      try { child.kill(sig); } catch {}
    });
  }
};
if (argv.length === 0) notStarted('no command was given');
process.stdin.on('data', (chunk) => {
  line += chunk.toString('latin1');
  const nl = line.indexOf('\\n');
  if (nl < 0) return;
  if (line.slice(0, nl).replace(/\\r$/, '') === 'go') start();
  else notStarted('the daemon did not let it go');
});
process.stdin.on('end', () => notStarted('the daemon closed its channel before letting it go'));
process.stdin.on('error', (err) => notStarted('its channel to the daemon failed: ' + err.message));
`;

/** Options of launch(); stdin of the command is always nothing, stdout and stderr are pipes. */
export interface LaunchOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /**
   * argv[1..] is one finished command line (win32-command.ts's cmd.exe lines): the launcher
   * spawns the command with windowsVerbatimArguments, so Node adds no quotes of its own.
   */
  windowsVerbatimArguments?: boolean;
  /**
   * Called with the launcher's pid once it is in the job and before it is let go (the run lowers
   * its token here). When it throws, the launcher is never let go: it is killed having started
   * nothing, and launch() throws what it threw.
   */
  beforeGo?: (pid: number) => void;
}

/** The launcher's command line and environment for `argv` (argv[0] is the program). */
export function launcherCommand(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  opts: { windowsVerbatimArguments?: boolean } = {},
): { file: string; args: string[]; env: NodeJS.ProcessEnv } {
  if (argv.length === 0) throw new Error('launcherCommand: no command given');
  const out: NodeJS.ProcessEnv = {};
  let nodeOptions: string | undefined;
  for (const [k, v] of Object.entries(env)) {
    const name = k.toUpperCase();
    if (name === 'NODE_OPTIONS') nodeOptions = v;
    // The launcher's own variables are the daemon's to set, never the run's environment's.
    else if (name !== NODE_OPTIONS_CARRIER && name !== VERBATIM_FLAG) out[k] = v;
  }
  if (nodeOptions !== undefined) out[NODE_OPTIONS_CARRIER] = nodeOptions;
  if (opts.windowsVerbatimArguments) out[VERBATIM_FLAG] = '1';
  // `--` ends node's own options, so a command that starts with "-" is not taken for one.
  return { file: process.execPath, args: ['-e', LAUNCHER, '--', ...argv], env: out };
}

interface CallResult {
  value: number;
  errnoCode: number;
  errnoMessage: string;
}

type Call = (fn: string, ret: FieldType, params: [FieldType, unknown][]) => CallResult;

let kernel32: { ffi: Ffi; call: Call } | undefined;

function api(): { ffi: Ffi; call: Call } {
  if (process.platform !== 'win32') throw new Error(`Job Objects exist only on Windows (this is ${process.platform})`);
  if (kernel32) return kernel32;
  let ffi: Ffi;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    ffi = require('ffi-rs') as Ffi;
  } catch (err) {
    throw new Error(`cannot make a Job Object for the run: ffi-rs does not load (${(err as Error).message})`, { cause: err });
  }
  ffi.open({ library: KERNEL32, path: 'kernel32.dll' });
  kernel32 = {
    ffi,
    call: (fn, ret, params) =>
      ffi.load({
        library: KERNEL32,
        funcName: fn,
        retType: ret,
        paramsType: params.map((p) => p[0]),
        paramsValue: params.map((p) => p[1]),
        errno: true,
      }) as unknown as CallResult,
  };
  return kernel32;
}

/** A Job Object whose processes all die with it: on killAll(), and when its handle closes. */
export class Win32Job {
  private handle: number;
  /** The completion port the job posts its messages on (0: none; made by setLimits). */
  private port = 0;
  /** The limits the job's messages said were reached, kept once seen. */
  private readonly hits = new Set<LimitHit>();
  /** Every kind of message (JOB_OBJECT_MSG_*) limitsHit() has read off the port: for tests and diagnosis. */
  readonly messagesSeen = new Set<number>();

  constructor() {
    const { ffi, call } = api();
    const T = ffi.DataType;
    // No security attributes: the handle is not inheritable, so no process of the run holds the
    // job open; no name: nobody else can open it.
    const made = call('CreateJobObjectW', T.I64, [
      [T.I64, 0],
      [T.I64, 0],
    ]);
    if (!made.value) throw win32Error('CreateJobObjectW', 'for a run', made.errnoCode, made.errnoMessage);
    this.handle = made.value;
    const info = extendedLimitInformation();
    const set = call('SetInformationJobObject', T.I32, [
      [T.I64, this.handle],
      [T.I32, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION],
      [T.U8Array, info],
      [T.U32, info.length],
    ]);
    if (!set.value) {
      const err = win32Error(
        'SetInformationJobObject(JobObjectExtendedLimitInformation, KILL_ON_JOB_CLOSE)',
        'for a run',
        set.errnoCode,
        set.errnoMessage,
      );
      this.close();
      throw err;
    }
  }

  /**
   * Sets `limits` on the job; call it before anything is in the job (the run's command must never
   * run without them). Memory and processes go in one SetInformationJobObject call with
   * KILL_ON_JOB_CLOSE (JobObjectExtendedLimitInformation replaces all basic limits at once); cpus
   * as a hard cap (JobObjectCpuRateControlInformation, Windows 8 and later). With a memory or
   * process limit, a completion port is made and associated with the job so that limitsHit() can
   * read what Windows refused. Throws (naming the Win32 call and its error) when any of it fails;
   * the job is then left as it was made or partly limited, and the caller should close it.
   */
  setLimits(limits: RunLimits): void {
    const job = this.open('setLimits');
    const { ffi, call } = api();
    const T = ffi.DataType;
    const info = extendedLimitInformation(limits);
    const rate = limits.cpus === undefined ? undefined : cpuRate(limits.cpus, logicalProcessors());
    const said = describeLimits(info);
    if (limits.memoryBytes !== undefined || limits.processes !== undefined) {
      const set = call('SetInformationJobObject', T.I32, [
        [T.I64, job],
        [T.I32, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION],
        [T.U8Array, info],
        [T.U32, info.length],
      ]);
      if (!set.value)
        throw win32Error(
          `SetInformationJobObject(JobObjectExtendedLimitInformation, ${said})`,
          'for a run',
          set.errnoCode,
          set.errnoMessage,
        );
      this.associatePort();
    }
    if (rate !== undefined) {
      const cpu = cpuRateControlInformation(rate);
      const set = call('SetInformationJobObject', T.I32, [
        [T.I64, job],
        [T.I32, JOB_OBJECT_CPU_RATE_CONTROL_INFORMATION],
        [T.U8Array, cpu],
        [T.U32, cpu.length],
      ]);
      if (!set.value)
        throw win32Error(
          `SetInformationJobObject(JobObjectCpuRateControlInformation, ENABLE | HARD_CAP, CpuRate ${rate})`,
          'for a run',
          set.errnoCode,
          set.errnoMessage,
        );
    }
  }

  /** A completion port of this process's own, associated with the job; its messages are read by limitsHit(). */
  private associatePort(): void {
    if (this.port !== 0) return;
    const job = this.open('associatePort');
    const { ffi, call } = api();
    const T = ffi.DataType;
    // A new port (no file handle), one thread may run at once: only limitsHit() reads it.
    const made = call('CreateIoCompletionPort', T.I64, [
      [T.I64, INVALID_HANDLE_VALUE],
      [T.I64, 0],
      [T.I64, 0],
      [T.U32, 1],
    ]);
    if (!made.value) throw win32Error('CreateIoCompletionPort', "for a run's job", made.errnoCode, made.errnoMessage);
    this.port = made.value;
    const assoc = Buffer.alloc(ASSOCIATE_COMPLETION_PORT_SIZE);
    // The key is not looked at: the port serves this one job.
    assoc.writeBigUInt64LE(1n, 0);
    assoc.writeBigInt64LE(BigInt(this.port), 8);
    const set = call('SetInformationJobObject', T.I32, [
      [T.I64, job],
      [T.I32, JOB_OBJECT_ASSOCIATE_COMPLETION_PORT_INFORMATION],
      [T.U8Array, assoc],
      [T.U32, assoc.length],
    ]);
    if (!set.value)
      throw win32Error(
        'SetInformationJobObject(JobObjectAssociateCompletionPortInformation)',
        'for a run',
        set.errnoCode,
        set.errnoMessage,
      );
  }

  /**
   * The limits the job has reached so far: the job's messages are read off its completion port
   * without waiting (every message, so the port does not fill with the job's process-start and
   * exit messages) and a limit's message is kept once seen. Windows posts
   * JOB_OBJECT_MSG_JOB_MEMORY_LIMIT when it refuses a commit past JobMemoryLimit and
   * JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT when it refuses a process past ActiveProcessLimit. Empty
   * without a port (no memory or process limit); never throws (a port that cannot be read says
   * what it said before).
   */
  limitsHit(): LimitHit[] {
    if (this.port !== 0) {
      const { ffi, call } = api();
      const T = ffi.DataType;
      const message = Buffer.alloc(4);
      const key = Buffer.alloc(8);
      const overlapped = Buffer.alloc(8);
      // Bounded: a job cannot post faster than this reads, but a loop must end.
      for (let i = 0; i < 10_000; i++) {
        const got = call('GetQueuedCompletionStatus', T.I32, [
          [T.I64, this.port],
          [T.U8Array, message],
          [T.U8Array, key],
          [T.U8Array, overlapped],
          [T.U32, 0],
        ]);
        // FALSE with WAIT_TIMEOUT: nothing more is queued (and a port that cannot be read has nothing to say).
        if (!got.value) break;
        this.messagesSeen.add(message.readUInt32LE(0));
        const hit = limitOfMessage(message.readUInt32LE(0));
        if (hit) this.hits.add(hit);
      }
    }
    return [...this.hits];
  }

  /**
   * The job's limits as QueryInformationJobObject reads them: the extended limit block and, when
   * `cpu`, the CPU rate block (queried only then: a job without one may be refused the query).
   */
  readLimits(cpu = false): {
    extended: ReturnType<typeof parseExtendedLimitInformation>;
    cpu?: ReturnType<typeof parseCpuRateControlInformation>;
  } {
    const job = this.open('readLimits');
    const { ffi, call } = api();
    const T = ffi.DataType;
    const query = (cls: number, name: string, size: number): Buffer => {
      const buf = Buffer.alloc(size);
      const got = call('QueryInformationJobObject', T.I32, [
        [T.I64, job],
        [T.I32, cls],
        [T.U8Array, buf],
        [T.U32, buf.length],
        [T.I64, 0],
      ]);
      if (!got.value) throw win32Error(`QueryInformationJobObject(${name})`, 'for a run', got.errnoCode, got.errnoMessage);
      return buf;
    };
    const extended = parseExtendedLimitInformation(
      query(JOB_OBJECT_EXTENDED_LIMIT_INFORMATION, 'JobObjectExtendedLimitInformation', EXTENDED_LIMIT_INFORMATION_SIZE),
    );
    if (!cpu) return { extended };
    return {
      extended,
      cpu: parseCpuRateControlInformation(
        query(JOB_OBJECT_CPU_RATE_CONTROL_INFORMATION, 'JobObjectCpuRateControlInformation', CPU_RATE_CONTROL_INFORMATION_SIZE),
      ),
    };
  }

  get closed(): boolean {
    return this.handle === 0;
  }

  private open(what: string): number {
    if (this.handle === 0) throw new Error(`${what}: the Job Object is closed`);
    return this.handle;
  }

  /** Puts the process `pid` (and so every process it starts from now on) in the job. */
  assign(pid: number): void {
    const job = this.open('assign');
    if (!Number.isInteger(pid) || pid <= 0 || pid > 0xffffffff) throw new Error(`assign: ${pid} is not a process id`);
    const { ffi, call } = api();
    const T = ffi.DataType;
    const what = `for process ${pid}`;
    const proc = call('OpenProcess', T.I64, [
      [T.U32, PROCESS_SET_QUOTA | PROCESS_TERMINATE],
      [T.I32, 0],
      [T.U32, pid],
    ]);
    if (!proc.value) throw win32Error('OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE)', what, proc.errnoCode, proc.errnoMessage);
    try {
      const done = call('AssignProcessToJobObject', T.I32, [
        [T.I64, job],
        [T.I64, proc.value],
      ]);
      if (!done.value) throw win32Error('AssignProcessToJobObject', what, done.errnoCode, done.errnoMessage);
    } finally {
      closeHandle(proc.value);
    }
  }

  /** The ids of the processes in the job now. */
  alive(): number[] {
    const job = this.open('alive');
    const { ffi, call } = api();
    const T = ffi.DataType;
    let room = 64;
    for (let attempt = 0; ; attempt++) {
      const buf = Buffer.alloc(PID_LIST_HEADER + PID_SIZE * room);
      const got = call('QueryInformationJobObject', T.I32, [
        [T.I64, job],
        [T.I32, JOB_OBJECT_BASIC_PROCESS_ID_LIST],
        [T.U8Array, buf],
        [T.U32, buf.length],
        [T.I64, 0],
      ]);
      if (!got.value && got.errnoCode !== ERROR_MORE_DATA)
        throw win32Error('QueryInformationJobObject(JobObjectBasicProcessIdList)', 'for a run', got.errnoCode, got.errnoMessage);
      const assigned = buf.readUInt32LE(0);
      const listed = buf.readUInt32LE(4);
      if (got.value && listed >= assigned) {
        const pids: number[] = [];
        for (let i = 0; i < listed; i++) pids.push(Number(buf.readBigUInt64LE(PID_LIST_HEADER + PID_SIZE * i)));
        return pids;
      }
      // More processes than room (the job grew between calls, or the list did not fit).
      if (attempt >= 8)
        throw win32Error(
          'QueryInformationJobObject(JobObjectBasicProcessIdList)',
          'for a run (the job keeps growing)',
          ERROR_MORE_DATA,
          '',
        );
      room = Math.max(room * 2, assigned + 16);
    }
  }

  /** Terminates every process in the job now, with exit code `exitCode`; does not wait. */
  terminate(exitCode = 1): void {
    const job = this.open('terminate');
    const { ffi, call } = api();
    const T = ffi.DataType;
    const done = call('TerminateJobObject', T.I32, [
      [T.I64, job],
      [T.U32, exitCode],
    ]);
    if (!done.value) throw win32Error('TerminateJobObject', 'for a run', done.errnoCode, done.errnoMessage);
  }

  /**
   * Kills every process of the job and waits (up to `timeoutMs`) until none is left. Returns how
   * many there were (the most seen at once).
   */
  async killAll(timeoutMs = 5000): Promise<number> {
    let killed = 0;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const pids = this.alive();
      if (pids.length === 0) return killed;
      killed = Math.max(killed, pids.length);
      this.terminate();
      if (Date.now() > deadline) return killed;
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Closes the job's handle; with KILL_ON_JOB_CLOSE, what is still in the job dies. Idempotent. */
  close(): void {
    if (this.handle === 0) return;
    const h = this.handle;
    this.handle = 0;
    closeHandle(h);
    if (this.port !== 0) {
      const port = this.port;
      this.port = 0;
      closeHandle(port);
    }
  }

  /**
   * Starts `argv` inside the job: spawns the launcher, assigns it, calls opts.beforeGo, then lets
   * it start the command. The launcher is the returned child (its pid, exit code, stdout and
   * stderr are the run's). If the launcher cannot be assigned or beforeGo throws, it is told
   * nothing (so it exits with 125 having started nothing), is terminated, and the error is thrown.
   */
  launch(argv: string[], opts: LaunchOptions = {}): ChildProcessByStdio<Writable, Readable, Readable> {
    this.open('launch');
    const cmd = launcherCommand(argv, opts.env, { windowsVerbatimArguments: opts.windowsVerbatimArguments });
    // detached: a process group of its own, so the daemon's console signals do not reach the run
    // (as on Linux); windowsHide: no console window pops up for it.
    const child = spawn(cmd.file, cmd.args, {
      cwd: opts.cwd,
      env: cmd.env,
      detached: true,
      windowsHide: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    // The launcher may be gone before it reads (it failed, or was killed): its exit says so.
    child.stdin.on('error', () => undefined);
    if (child.pid === undefined) return child; // spawn failed: the child emits 'error'
    try {
      this.assign(child.pid);
      opts.beforeGo?.(child.pid);
    } catch (err) {
      child.stdin.end();
      child.kill();
      throw err;
    }
    child.stdin.end(GO);
    return child;
  }
}

/** How a limit block reads in a message: "JOB_MEMORY 268435456, ACTIVE_PROCESS 17". */
function describeLimits(info: Buffer): string {
  const l = parseExtendedLimitInformation(info);
  const parts = ['KILL_ON_JOB_CLOSE'];
  if (l.limitFlags & JOB_OBJECT_LIMIT_JOB_MEMORY) parts.push(`JOB_MEMORY ${l.jobMemoryLimit}`);
  if (l.limitFlags & JOB_OBJECT_LIMIT_ACTIVE_PROCESS) parts.push(`ACTIVE_PROCESS ${l.activeProcessLimit}`);
  return parts.join(', ');
}

/**
 * The machine's logical processors, in every processor group (CpuRate is a share of all of them;
 * os.cpus() may see only this process's group on machines of more than 64).
 */
export function logicalProcessors(): number {
  const { ffi, call } = api();
  const n = call('GetActiveProcessorCount', ffi.DataType.U32, [[ffi.DataType.U32, ALL_PROCESSOR_GROUPS]]);
  if (!n.value) throw win32Error('GetActiveProcessorCount(ALL_PROCESSOR_GROUPS)', 'for a CPU limit', n.errnoCode, n.errnoMessage);
  return n.value;
}

function closeHandle(handle: number): void {
  const { ffi, call } = api();
  call('CloseHandle', ffi.DataType.I32, [[ffi.DataType.I64, handle]]);
}
