// The process tree of a run on Windows: a Job Object, made and driven with Win32 calls through
// ffi-rs. Every process the command starts is born into the job (children inherit it, and the job
// allows no breakaway), so killing the job kills the whole tree, detached processes included; and
// the job is made with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, so the tree also dies when its last
// handle closes, which happens when the daemon dies. ffi-rs is required only when a job is made:
// importing this module never fails, on any platform.
//
// Node cannot create a process suspended, so a command must not start before it is in the job:
// it is started through a launcher (`process.execPath -e LAUNCHER`, win32-launcher.ts) that
// waits for one line on its stdin, written once AssignProcessToJobObject has put the launcher in
// the job; only then does the launcher spawn the command, which is born inside the job.
//
// Resource limits (setLimits, before the launcher is let go) go on the same job: committed memory
// of all its processes together (JOB_OBJECT_LIMIT_JOB_MEMORY), processes at once
// (JOB_OBJECT_LIMIT_ACTIVE_PROCESS, one more than asked: the launcher is in the job too) and a hard
// cap on CPU time (JobObjectCpuRateControlInformation). Windows refuses what would pass a limit (an
// allocation, a new process) rather than killing anything, and says so on the job's I/O completion
// port (JOB_OBJECT_MSG_JOB_MEMORY_LIMIT, JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT): limitsHit() reads
// those messages, and the run ends itself past its memory limit as on Linux. The limit blocks'
// bytes are made and read in win32-job-limits.ts.
//
// Conventions as in src/platform/win32-identity.ts: handles cross the boundary as plain numbers, structures as
// Buffers (ffi-rs passes a Buffer as a pointer to its bytes and keeps what the call wrote), and
// every failure names the Win32 call and its GetLastError value. ffi-rs is loaded by win32-ffi.ts.
import { spawn, type ChildProcessByStdio } from 'child_process';
import type { Readable, Writable } from 'stream';
import type { LimitHit, RunLimits } from './types';
import { closeHandle as closeWin32Handle, type CallResult, KERNEL32, win32Api } from './win32-ffi';
import { win32Error } from './win32-identity';
import {
  CPU_RATE_CONTROL_INFORMATION_SIZE,
  cpuRate,
  cpuRateControlInformation,
  describeLimits,
  EXTENDED_LIMIT_INFORMATION_SIZE,
  extendedLimitInformation,
  JOB_OBJECT_CPU_RATE_CONTROL_INFORMATION,
  JOB_OBJECT_EXTENDED_LIMIT_INFORMATION,
  limitOfMessage,
  parseCpuRateControlInformation,
  parseExtendedLimitInformation,
} from './win32-job-limits';
import { GO, launcherCommand, type LaunchOptions } from './win32-launcher';

type Ffi = typeof import('ffi-rs');
type FieldType = import('ffi-rs').FieldType;

// Access rights and constants, from the Win32 documentation (winnt.h values).
const PROCESS_TERMINATE = 0x0001;
const PROCESS_SET_QUOTA = 0x0100;
/** JOBOBJECTINFOCLASS values. */
const JOB_OBJECT_BASIC_PROCESS_ID_LIST = 3;
const JOB_OBJECT_ASSOCIATE_COMPLETION_PORT_INFORMATION = 7;
/** GetActiveProcessorCount: every processor group, not only the caller's. */
const ALL_PROCESSOR_GROUPS = 0xffff;
const INVALID_HANDLE_VALUE = -1;
const ERROR_MORE_DATA = 234;

// Layouts for x64, derived from the structure definitions in Microsoft's documentation
// (learn.microsoft.com) with the x64 rules (see win32-job-limits.ts for the limit blocks).
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

type Call = (fn: string, ret: FieldType, params: [FieldType, unknown][]) => CallResult;

/** The kernel32 calls, through the shared ffi-rs loader (win32-ffi.ts). */
function api(): { ffi: Ffi; call: Call } {
  const a = win32Api('make a Job Object for the run');
  return { ffi: a.ffi, call: (fn, ret, params) => a.call(KERNEL32, fn, ret, params) };
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
  closeWin32Handle(win32Api('make a Job Object for the run'), handle);
}
