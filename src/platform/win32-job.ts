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
// Conventions as in src/platform/win32-identity.ts: handles cross the boundary as plain numbers, structures as
// Buffers (ffi-rs passes a Buffer as a pointer to its bytes and keeps what the call wrote), and
// every failure names the Win32 call and its GetLastError value.
import { spawn, type ChildProcessByStdio } from 'child_process';
import type { Readable, Writable } from 'stream';
import { win32Error } from './win32-identity';

type Ffi = typeof import('ffi-rs');
type FieldType = import('ffi-rs').FieldType;

const KERNEL32 = 'shadowfs-job-kernel32';

// Access rights and constants, from the Win32 documentation (winnt.h values).
const PROCESS_TERMINATE = 0x0001;
const PROCESS_SET_QUOTA = 0x0100;
const JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000;
/** JOBOBJECTINFOCLASS values. */
const JOB_OBJECT_BASIC_PROCESS_ID_LIST = 3;
const JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9;
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
const EXTENDED_LIMIT_INFORMATION_SIZE = 144;
const LIMIT_FLAGS_OFFSET = 16;
// JOBOBJECT_BASIC_PROCESS_ID_LIST (8 + 8 * n bytes for n ids):
//    0 DWORD     NumberOfAssignedProcesses   (all processes in the job)
//    4 DWORD     NumberOfProcessIdsInList    (how many ids follow)
//    8 ULONG_PTR ProcessIdList[n]
const PID_LIST_HEADER = 8;
const PID_SIZE = 8;

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
    const info = Buffer.alloc(EXTENDED_LIMIT_INFORMATION_SIZE);
    info.writeUInt32LE(JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, LIMIT_FLAGS_OFFSET);
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

function closeHandle(handle: number): void {
  const { ffi, call } = api();
  call('CloseHandle', ffi.DataType.I32, [[ffi.DataType.I64, handle]]);
}
