// Identity checks for the Windows side of the daemon's endpoint (a named pipe), made with
// Win32 calls through ffi-rs: which user a process runs as (the string SID of its token's user),
// and which process serves a named pipe, so a client can make sure it talks to a daemon of its
// own user before it sends anything. ffi-rs is required only when a check is made: importing
// this module never fails, on any platform.
//
// Pointers and handles cross the boundary as plain numbers (64-bit values, well below 2^53 in a
// user-mode address space), out-parameters as Buffers (ffi-rs passes a Buffer as a pointer to its
// bytes and keeps what the call wrote), and memory that Windows hands back is read with
// RtlMoveMemory into a Buffer. Every failure names the Win32 call and its GetLastError value.

import { ADVAPI32, type Api, closeHandle, KERNEL32, localFree, pointerIn, readMemory, readWideString, win32Api } from './win32-ffi';

const TOKEN_QUERY = 0x0008;
const PROCESS_QUERY_LIMITED_INFORMATION = 0x1000;
const TOKEN_USER_CLASS = 1; // TOKEN_INFORMATION_CLASS TokenUser
const LPTR = 0x0040; // LocalAlloc: fixed, zero-initialised
const GENERIC_READ_WRITE = 0xc0000000; // GENERIC_READ | GENERIC_WRITE (JS's | would make it negative)
const OPEN_EXISTING = 3;
// The server of a pipe may impersonate its clients; opened with identification level only, it
// can learn who this process is but never act as it.
const SECURITY_SQOS_PRESENT = 0x00100000;
const SECURITY_IDENTIFICATION = 0x00010000;
const INVALID_HANDLE_VALUE = -1;

const ERROR_INSUFFICIENT_BUFFER = 122;
const ERROR_SEM_TIMEOUT = 121;
const ERROR_PIPE_BUSY = 231;

/** Symbolic names of the Win32 errors these calls are expected to meet. */
const ERROR_NAMES: Record<number, string> = {
  2: 'ERROR_FILE_NOT_FOUND',
  3: 'ERROR_PATH_NOT_FOUND',
  5: 'ERROR_ACCESS_DENIED',
  6: 'ERROR_INVALID_HANDLE',
  87: 'ERROR_INVALID_PARAMETER',
  [ERROR_SEM_TIMEOUT]: 'ERROR_SEM_TIMEOUT',
  [ERROR_INSUFFICIENT_BUFFER]: 'ERROR_INSUFFICIENT_BUFFER',
  123: 'ERROR_INVALID_NAME',
  161: 'ERROR_BAD_PATHNAME',
  [ERROR_PIPE_BUSY]: 'ERROR_PIPE_BUSY',
  233: 'ERROR_PIPE_NOT_CONNECTED',
  234: 'ERROR_MORE_DATA',
  1008: 'ERROR_NO_TOKEN',
};

/** An Error for a failed Win32 call: `syscall` is the call, `errno` its GetLastError value. */
export interface Win32Error extends Error {
  syscall: string;
  errno: number;
  code?: string;
}

export function win32Error(call: string, what: string, lastError: number, text?: string): Win32Error {
  const name = ERROR_NAMES[lastError];
  const detail = text ? text.replace(/ \(os error \d+\)$/, '').replace(/\.$/, '') : undefined;
  const why = [name, detail].filter(Boolean).join(': ');
  const err = new Error(`${call} failed ${what}: GetLastError ${lastError}${why ? ` (${why})` : ''}`) as Win32Error;
  err.syscall = call;
  err.errno = lastError;
  if (name) err.code = name;
  return err;
}

function requireWindows(fn: string): void {
  if (process.platform !== 'win32') throw new Error(`${fn} uses the Win32 API, which exists only on Windows (this is ${process.platform})`);
}

function win32(): Api {
  return win32Api('make Win32 identity checks');
}

/** The string SID of the user of the token of `proc` (a process handle with query rights). */
function tokenUserSid(a: Api, proc: number, what: string): string {
  const T = a.ffi.DataType;
  const tokenOut = Buffer.alloc(8);
  const opened = a.call(ADVAPI32, 'OpenProcessToken', T.I32, [
    [T.I64, proc],
    [T.U32, TOKEN_QUERY],
    [T.U8Array, tokenOut],
  ]);
  if (!opened.value) throw win32Error('OpenProcessToken(TOKEN_QUERY)', what, opened.errnoCode, opened.errnoMessage);
  const token = pointerIn(tokenOut);
  try {
    // First ask for the size, which TOKEN_USER needs beyond its own fields for the SID.
    const size = Buffer.alloc(4);
    const probe = a.call(ADVAPI32, 'GetTokenInformation', T.I32, [
      [T.I64, token],
      [T.I32, TOKEN_USER_CLASS],
      [T.I64, 0],
      [T.U32, 0],
      [T.U8Array, size],
    ]);
    if (!probe.value && probe.errnoCode !== ERROR_INSUFFICIENT_BUFFER) {
      throw win32Error('GetTokenInformation(TokenUser)', what, probe.errnoCode, probe.errnoMessage);
    }
    const needed = size.readUInt32LE(0);
    // The SID pointer inside TOKEN_USER points into the same block, so the block lives in native
    // memory that stays put, not in a Buffer.
    const block = a.call(KERNEL32, 'LocalAlloc', T.I64, [
      [T.U32, LPTR],
      [T.I64, needed],
    ]);
    if (!block.value) throw win32Error('LocalAlloc', `(${needed} bytes for TOKEN_USER) ${what}`, block.errnoCode, block.errnoMessage);
    try {
      const got = a.call(ADVAPI32, 'GetTokenInformation', T.I32, [
        [T.I64, token],
        [T.I32, TOKEN_USER_CLASS],
        [T.I64, block.value],
        [T.U32, needed],
        [T.U8Array, size],
      ]);
      if (!got.value) throw win32Error('GetTokenInformation(TokenUser)', what, got.errnoCode, got.errnoMessage);
      // TOKEN_USER { SID_AND_ATTRIBUTES User { PSID Sid; DWORD Attributes; } }: Sid comes first.
      const sid = pointerIn(readMemory(a, block.value, 8));
      const strOut = Buffer.alloc(8);
      const conv = a.call(ADVAPI32, 'ConvertSidToStringSidW', T.I32, [
        [T.I64, sid],
        [T.U8Array, strOut],
      ]);
      if (!conv.value) throw win32Error('ConvertSidToStringSidW', what, conv.errnoCode, conv.errnoMessage);
      const str = pointerIn(strOut);
      try {
        return readWideString(a, str);
      } finally {
        localFree(a, str);
      }
    } finally {
      localFree(a, block.value);
    }
  } finally {
    closeHandle(a, token);
  }
}

/** The string SID (S-1-5-21-...) of the user this process runs as. */
export function currentUserSid(): string {
  requireWindows('currentUserSid');
  const a = win32();
  const T = a.ffi.DataType;
  // A pseudo-handle (-1) that needs no closing.
  const self = a.call(KERNEL32, 'GetCurrentProcess', T.I64, []).value;
  return tokenUserSid(a, self, 'for this process');
}

/** The string SID of the user the process `pid` runs as. */
export function processUserSid(pid: number): string {
  requireWindows('processUserSid');
  if (!Number.isInteger(pid) || pid <= 0 || pid > 0xffffffff) throw new Error(`processUserSid: ${pid} is not a process id`);
  const a = win32();
  const T = a.ffi.DataType;
  const what = `for process ${pid}`;
  const proc = a.call(KERNEL32, 'OpenProcess', T.I64, [
    [T.U32, PROCESS_QUERY_LIMITED_INFORMATION],
    [T.I32, 0],
    [T.U32, pid],
  ]);
  if (!proc.value) throw win32Error('OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION)', what, proc.errnoCode, proc.errnoMessage);
  try {
    return tokenUserSid(a, proc.value, what);
  } finally {
    closeHandle(a, proc.value);
  }
}

const LOCAL_PIPE = /^\\\\\.\\pipe\\[^\\]/i;

/**
 * The id of the process that serves the named pipe `pipePath` (\\.\pipe\NAME). It connects to
 * the pipe as a client (with identification-level impersonation only), asks, and disconnects, so
 * the server sees one connection that closes at once. When every instance of the pipe is busy it
 * waits up to `busyTimeoutMs` for one to come free.
 */
export function pipeServerProcessId(pipePath: string, busyTimeoutMs = 2000): number {
  requireWindows('pipeServerProcessId');
  if (!LOCAL_PIPE.test(pipePath))
    throw new Error(`pipeServerProcessId: ${JSON.stringify(pipePath)} is not a local named pipe (\\\\.\\pipe\\NAME)`);
  const a = win32();
  const T = a.ffi.DataType;
  const what = `for ${pipePath}`;
  const deadline = Date.now() + busyTimeoutMs;
  let pipe: number;
  for (;;) {
    const opened = a.call(KERNEL32, 'CreateFileW', T.I64, [
      [T.WString, pipePath],
      [T.U32, GENERIC_READ_WRITE],
      [T.U32, 0],
      [T.I64, 0],
      [T.U32, OPEN_EXISTING],
      [T.U32, SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION],
      [T.I64, 0],
    ]);
    if (opened.value !== INVALID_HANDLE_VALUE) {
      pipe = opened.value;
      break;
    }
    const left = deadline - Date.now();
    if (opened.errnoCode !== ERROR_PIPE_BUSY || left <= 0) {
      throw win32Error('CreateFileW(GENERIC_READ | GENERIC_WRITE, OPEN_EXISTING)', what, opened.errnoCode, opened.errnoMessage);
    }
    const waited = a.call(KERNEL32, 'WaitNamedPipeW', T.I32, [
      [T.WString, pipePath],
      [T.U32, Math.max(1, left)],
    ]);
    if (!waited.value && waited.errnoCode !== ERROR_SEM_TIMEOUT) {
      throw win32Error('WaitNamedPipeW', what, waited.errnoCode, waited.errnoMessage);
    }
    // On a timeout the next CreateFileW fails with ERROR_PIPE_BUSY again and the deadline has passed.
  }
  try {
    const pidOut = Buffer.alloc(4);
    const got = a.call(KERNEL32, 'GetNamedPipeServerProcessId', T.I32, [
      [T.I64, pipe],
      [T.U8Array, pidOut],
    ]);
    if (!got.value) throw win32Error('GetNamedPipeServerProcessId', what, got.errnoCode, got.errnoMessage);
    return pidOut.readUInt32LE(0);
  } finally {
    closeHandle(a, pipe);
  }
}
