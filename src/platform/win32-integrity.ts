// Integrity levels of the processes of a run on Windows, read and lowered with Win32 calls through
// ffi-rs, and the per-run temporary directory a Low-integrity run needs. A run whose token is at
// Low integrity cannot write the user's files (they carry no label, which Windows reads as
// Medium, and mandatory integrity control refuses a write up whatever the ACL grants), while the
// shadow, whose security descriptors carry a Low label, stays writable; no ACL, owner or label of
// any of the user's files is touched. ffi-rs is required only when a call is made: importing this
// module never fails, on any platform, and the pure parts (SID bytes, structure layout, names,
// paths) are usable everywhere.
//
// How a run gets there (see the notes on lowerIntegrity): the daemon lowers the primary token of
// the launcher (src/platform/win32-job.ts) after AssignProcessToJobObject and before it lets it
// go, so the command is created from a Low token and everything it starts inherits it.
//
// Conventions as in win32-identity.ts and win32-job.ts: handles and native addresses cross the
// boundary as plain numbers, structures as Buffers (ffi-rs passes a Buffer as a pointer to its
// bytes and keeps what the call wrote), a structure that holds a pointer into itself lives in
// LocalAlloc memory (a Buffer's address is not known here) and is copied in and out with
// RtlMoveMemory, and every failure names the Win32 call and its GetLastError value.
import * as fs from 'fs';
import * as path from 'path';
import {
  ADVAPI32,
  type Api,
  closeHandle,
  KERNEL32,
  localFree,
  OLE32,
  pointerIn,
  readMemory,
  SHELL32,
  win32Api,
  writeMemory,
} from './win32-ffi';
import { win32Error } from './win32-identity';

// Access rights and constants, from the Win32 documentation (winnt.h values).
const PROCESS_QUERY_LIMITED_INFORMATION = 0x1000;
const TOKEN_QUERY = 0x0008;
const TOKEN_ADJUST_DEFAULT = 0x0080;
/** TOKEN_INFORMATION_CLASS TokenIntegrityLevel. */
const TOKEN_INTEGRITY_LEVEL_CLASS = 25;
/** SID_AND_ATTRIBUTES.Attributes of an integrity SID in a token (winnt.h SE_GROUP_INTEGRITY). */
export const SE_GROUP_INTEGRITY = 0x00000020;
/** SECURITY_MANDATORY_LABEL_AUTHORITY: the identifier authority {0,0,0,0,0,16} of S-1-16-x. */
const MANDATORY_LABEL_AUTHORITY = 16;
const LPTR = 0x0040; // LocalAlloc: fixed, zero-initialised
const ERROR_INSUFFICIENT_BUFFER = 122;
/** SHGetKnownFolderPath: create the folder when it does not exist yet. */
const KF_FLAG_CREATE = 0x00008000;
/** FOLDERID_LocalAppDataLow, {A520A1A4-1780-4FF6-BD18-167343C5AF16} (KnownFolders.h). */
const FOLDERID_LOCAL_APP_DATA_LOW = guid('A520A1A4-1780-4FF6-BD18-167343C5AF16');

/** The relative identifiers of the named integrity levels, S-1-16-<rid> (winnt.h SECURITY_MANDATORY_*_RID). */
export const INTEGRITY_RID = {
  untrusted: 0x0000,
  low: 0x1000,
  medium: 0x2000,
  mediumPlus: 0x2100,
  high: 0x3000,
  system: 0x4000,
  protectedProcess: 0x5000,
} as const;

const RID_NAMES: Record<number, string> = {
  [INTEGRITY_RID.untrusted]: 'untrusted',
  [INTEGRITY_RID.low]: 'low',
  [INTEGRITY_RID.medium]: 'medium',
  [INTEGRITY_RID.mediumPlus]: 'medium-plus',
  [INTEGRITY_RID.high]: 'high',
  [INTEGRITY_RID.system]: 'system',
  [INTEGRITY_RID.protectedProcess]: 'protected-process',
};

/** An integrity level: the last sub-authority of its SID and its name. */
export interface IntegrityLevel {
  rid: number;
  /** The level's name, or its SID (S-1-16-<rid>) for a level between the named ones. */
  name: 'untrusted' | 'low' | 'medium' | 'high' | 'system' | string;
}

/** The name of the integrity level `rid` ('low', 'medium', ...), or its SID when it has none. */
export function integrityName(rid: number): string {
  return RID_NAMES[rid] ?? `S-1-16-${rid}`;
}

// A SID (winnt.h SID; MS-DTYP 2.4.2.2), 8 + 4 * SubAuthorityCount bytes, no padding:
//    0 BYTE  Revision                 (1)
//    1 BYTE  SubAuthorityCount        (1 for an integrity SID)
//    2 BYTE  IdentifierAuthority[6]   (big-endian 48-bit value: 16 for S-1-16-x)
//    8 DWORD SubAuthority[n]          (little-endian: the level's RID)
const SID_HEADER = 8;
const INTEGRITY_SID_SIZE = SID_HEADER + 4;

/** The bytes of the integrity SID S-1-16-<rid> (12 bytes). */
export function integritySid(rid: number): Buffer {
  if (!Number.isInteger(rid) || rid < 0 || rid > 0xffffffff) throw new Error(`integritySid: ${rid} is not a RID`);
  const sid = Buffer.alloc(INTEGRITY_SID_SIZE);
  sid.writeUInt8(1, 0);
  sid.writeUInt8(1, 1);
  sid.writeUInt8(MANDATORY_LABEL_AUTHORITY, 7);
  sid.writeUInt32LE(rid, SID_HEADER);
  return sid;
}

/** The RID of the integrity SID in `sid` (S-1-16-<rid>); throws when `sid` is not one. */
export function integrityRid(sid: Buffer): number {
  if (sid.length < SID_HEADER) throw new Error(`integrityRid: ${sid.length} bytes hold no SID`);
  const count = sid.readUInt8(1);
  const authority = sid.readUIntBE(2, 6);
  if (sid.readUInt8(0) !== 1 || authority !== MANDATORY_LABEL_AUTHORITY || count !== 1 || sid.length < INTEGRITY_SID_SIZE)
    throw new Error(
      `integrityRid: not an integrity SID (revision ${sid.readUInt8(0)}, authority ${authority}, ${count} sub-authorities, ${sid.length} bytes)`,
    );
  return sid.readUInt32LE(SID_HEADER);
}

// TOKEN_MANDATORY_LABEL on x64 (learn.microsoft.com "TOKEN_MANDATORY_LABEL", "SID_AND_ATTRIBUTES";
// x64 rules: a pointer is 8 bytes aligned to 8, a DWORD 4 aligned to 4, a structure padded to a
// multiple of its largest alignment), 16 bytes:
//    0 SID_AND_ATTRIBUTES Label
//        0 PSID  Sid
//        8 DWORD Attributes   (SE_GROUP_INTEGRITY)
//       12 (4 bytes of padding)
// SetTokenInformation(TokenIntegrityLevel) takes the structure followed by the SID it points to,
// one block of sizeof(TOKEN_MANDATORY_LABEL) + GetLengthSid(sid) bytes (the length Microsoft's
// low-integrity sample passes); GetTokenInformation hands back the same shape.
export const TOKEN_MANDATORY_LABEL_SIZE = 16;
const LABEL_SID_OFFSET = 0;
const LABEL_ATTRIBUTES_OFFSET = 8;

/**
 * The TOKEN_MANDATORY_LABEL for the integrity level `rid` followed by its SID, as it must lie at
 * the native address `address` (its Sid pointer is `address` + 16): 28 bytes.
 */
export function mandatoryLabel(rid: number, address: bigint): Buffer {
  const block = Buffer.alloc(TOKEN_MANDATORY_LABEL_SIZE + INTEGRITY_SID_SIZE);
  block.writeBigUInt64LE(address + BigInt(TOKEN_MANDATORY_LABEL_SIZE), LABEL_SID_OFFSET);
  block.writeUInt32LE(SE_GROUP_INTEGRITY, LABEL_ATTRIBUTES_OFFSET);
  integritySid(rid).copy(block, TOKEN_MANDATORY_LABEL_SIZE);
  return block;
}

/**
 * Reads a TOKEN_MANDATORY_LABEL answer `bytes` that lay at the native address `address`: the RID of
 * its SID, which must lie inside the answer, and the label's attributes.
 */
export function parseMandatoryLabel(bytes: Buffer, address: bigint): { rid: number; attributes: number } {
  if (bytes.length < TOKEN_MANDATORY_LABEL_SIZE + INTEGRITY_SID_SIZE)
    throw new Error(`TOKEN_MANDATORY_LABEL: ${bytes.length} bytes are less than the label with its SID`);
  const sidAt = bytes.readBigUInt64LE(LABEL_SID_OFFSET) - address;
  if (sidAt < BigInt(TOKEN_MANDATORY_LABEL_SIZE) || sidAt + BigInt(INTEGRITY_SID_SIZE) > BigInt(bytes.length))
    throw new Error(`TOKEN_MANDATORY_LABEL: the label's SID pointer is not inside the ${bytes.length} bytes answered`);
  return { rid: integrityRid(bytes.subarray(Number(sidAt))), attributes: bytes.readUInt32LE(LABEL_ATTRIBUTES_OFFSET) };
}

/** The 16 bytes of a GUID written as in the registry (Data1-3 little-endian, Data4 as bytes). */
function guid(text: string): Buffer {
  const hex = text.replace(/-/g, '');
  const out = Buffer.alloc(16);
  out.writeUInt32LE(parseInt(hex.slice(0, 8), 16), 0);
  out.writeUInt16LE(parseInt(hex.slice(8, 12), 16), 4);
  out.writeUInt16LE(parseInt(hex.slice(12, 16), 16), 6);
  Buffer.from(hex.slice(16), 'hex').copy(out, 8);
  return out;
}

function win32(fn: string): Api {
  return win32Api(`call ${fn}`);
}

/** LocalAlloc'd, zeroed native memory of `size` bytes; free it with localFree. */
function localAlloc(a: Api, size: number, what: string): number {
  const T = a.ffi.DataType;
  const block = a.call(KERNEL32, 'LocalAlloc', T.I64, [
    [T.U32, LPTR],
    [T.I64, size],
  ]);
  if (!block.value) throw win32Error('LocalAlloc', `(${size} bytes) ${what}`, block.errnoCode, block.errnoMessage);
  return block.value;
}

function checkPid(fn: string, pid: number): void {
  if (!Number.isInteger(pid) || pid <= 0 || pid > 0xffffffff) throw new Error(`${fn}: ${pid} is not a process id`);
}

/** Runs `use` with a handle on the token of process `pid` (this process when undefined) opened for `access`. */
function withProcessToken<T>(
  a: Api,
  pid: number | undefined,
  access: number,
  accessName: string,
  use: (token: number, what: string) => T,
): T {
  const D = a.ffi.DataType;
  const what = pid === undefined ? 'for this process' : `for process ${pid}`;
  let proc: number;
  let ownsProc = false;
  if (pid === undefined) {
    // A pseudo-handle (-1) that needs no closing.
    proc = a.call(KERNEL32, 'GetCurrentProcess', D.I64, []).value;
  } else {
    const opened = a.call(KERNEL32, 'OpenProcess', D.I64, [
      [D.U32, PROCESS_QUERY_LIMITED_INFORMATION],
      [D.I32, 0],
      [D.U32, pid],
    ]);
    if (!opened.value) throw win32Error('OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION)', what, opened.errnoCode, opened.errnoMessage);
    proc = opened.value;
    ownsProc = true;
  }
  try {
    const tokenOut = Buffer.alloc(8);
    const got = a.call(ADVAPI32, 'OpenProcessToken', D.I32, [
      [D.I64, proc],
      [D.U32, access],
      [D.U8Array, tokenOut],
    ]);
    if (!got.value) throw win32Error(`OpenProcessToken(${accessName})`, what, got.errnoCode, got.errnoMessage);
    const token = pointerIn(tokenOut);
    try {
      return use(token, what);
    } finally {
      closeHandle(a, token);
    }
  } finally {
    if (ownsProc) closeHandle(a, proc);
  }
}

/** The integrity level of the token `token` (opened with TOKEN_QUERY). */
function tokenIntegrity(a: Api, token: number, what: string): IntegrityLevel {
  const T = a.ffi.DataType;
  const call = 'GetTokenInformation(TokenIntegrityLevel)';
  const size = Buffer.alloc(4);
  const probe = a.call(ADVAPI32, 'GetTokenInformation', T.I32, [
    [T.I64, token],
    [T.I32, TOKEN_INTEGRITY_LEVEL_CLASS],
    [T.I64, 0],
    [T.U32, 0],
    [T.U8Array, size],
  ]);
  if (!probe.value && probe.errnoCode !== ERROR_INSUFFICIENT_BUFFER) throw win32Error(call, what, probe.errnoCode, probe.errnoMessage);
  const needed = size.readUInt32LE(0);
  if (needed < TOKEN_MANDATORY_LABEL_SIZE + INTEGRITY_SID_SIZE)
    throw new Error(`${call} ${what} asked for ${needed} bytes, less than a TOKEN_MANDATORY_LABEL with its SID`);
  // The Sid pointer of the answer points into the answer, so it lives in native memory that stays put.
  const block = localAlloc(a, needed, `for TOKEN_MANDATORY_LABEL ${what}`);
  try {
    const got = a.call(ADVAPI32, 'GetTokenInformation', T.I32, [
      [T.I64, token],
      [T.I32, TOKEN_INTEGRITY_LEVEL_CLASS],
      [T.I64, block],
      [T.U32, needed],
      [T.U8Array, size],
    ]);
    if (!got.value) throw win32Error(call, what, got.errnoCode, got.errnoMessage);
    try {
      return levelOf(parseMandatoryLabel(readMemory(a, block, needed), BigInt(block)).rid);
    } catch (err) {
      throw new Error(`${call} ${what}: ${(err as Error).message}`, { cause: err });
    }
  } finally {
    localFree(a, block);
  }
}

function levelOf(rid: number): IntegrityLevel {
  return { rid, name: integrityName(rid) };
}

/**
 * lowerIntegrity's error when SetTokenInformation succeeded but the token still reports a level
 * above Low: the system does not apply integrity levels (wine accepts the call and changes
 * nothing), so a run started from that token is not confined.
 */
export interface IntegrityNotLoweredError extends Error {
  code: 'INTEGRITY_NOT_LOWERED';
  pid: number;
  /** The level the token reports after the call. */
  level: IntegrityLevel;
}

/** Whether `err` is lowerIntegrity's IntegrityNotLoweredError. */
export function isIntegrityNotLowered(err: unknown): err is IntegrityNotLoweredError {
  return err instanceof Error && (err as Partial<IntegrityNotLoweredError>).code === 'INTEGRITY_NOT_LOWERED';
}

/** The integrity level of process `pid`, or of this process when `pid` is undefined. */
export function integrityLevel(pid?: number): IntegrityLevel {
  const a = win32('integrityLevel');
  if (pid !== undefined) checkPid('integrityLevel', pid);
  return withProcessToken(a, pid, TOKEN_QUERY, 'TOKEN_QUERY', (token, what) => tokenIntegrity(a, token, what));
}

/**
 * Lowers the primary token of process `pid` to Low integrity (S-1-16-4096): every process it
 * creates from then on is created from a copy of that token, so at Low too. The level is read back
 * with GetTokenInformation and returned; when the token still reports a level above Low although
 * the call succeeded, it throws an IntegrityNotLoweredError (code INTEGRITY_NOT_LOWERED), so that
 * nobody reports a run as protected that is not. A token already at Low or below is left as it is.
 *
 * What it needs (Microsoft's documentation, learn.microsoft.com): OpenProcessToken needs a process
 * handle with PROCESS_QUERY_LIMITED_INFORMATION ("OpenProcessToken function"), and the access asked
 * of the token is checked against the token's DACL ("Access Rights for Access-Token Objects"),
 * which for a process this user started grants the user full access; setting TokenIntegrityLevel
 * takes TOKEN_ADJUST_DEFAULT, the right Microsoft's low-integrity sample ("Designing Applications
 * to Run at a Low Integrity Level") and Chromium's sandbox (SetProcessIntegrityLevel, on its own
 * running process) open the token with. This only ever lowers: a level is never raised here. The
 * caller and `pid` must be the same user, and the caller at `pid`'s level or above (a process
 * object carries the level its token had when it was created, with NO_READ_UP and NO_WRITE_UP).
 *
 * Call it while the process has not yet started anything that must be confined (the launcher
 * before it is let go): processes it started before keep their own tokens, and handles it opened
 * before keep the access they were granted.
 */
export function lowerIntegrity(pid: number): IntegrityLevel {
  const a = win32('lowerIntegrity');
  checkPid('lowerIntegrity', pid);
  const T = a.ffi.DataType;
  return withProcessToken(a, pid, TOKEN_ADJUST_DEFAULT | TOKEN_QUERY, 'TOKEN_ADJUST_DEFAULT | TOKEN_QUERY', (token, what) => {
    const before = tokenIntegrity(a, token, what);
    if (before.rid <= INTEGRITY_RID.low) return before;
    const size = TOKEN_MANDATORY_LABEL_SIZE + INTEGRITY_SID_SIZE;
    const block = localAlloc(a, size, `for TOKEN_MANDATORY_LABEL ${what}`);
    try {
      writeMemory(a, block, mandatoryLabel(INTEGRITY_RID.low, BigInt(block)));
      const set = a.call(ADVAPI32, 'SetTokenInformation', T.I32, [
        [T.I64, token],
        [T.I32, TOKEN_INTEGRITY_LEVEL_CLASS],
        [T.I64, block],
        [T.U32, size],
      ]);
      if (!set.value) throw win32Error('SetTokenInformation(TokenIntegrityLevel, S-1-16-4096)', what, set.errnoCode, set.errnoMessage);
    } finally {
      localFree(a, block);
    }
    const after = tokenIntegrity(a, token, what);
    if (after.rid <= INTEGRITY_RID.low) return after;
    const err = new Error(
      `SetTokenInformation(TokenIntegrityLevel, S-1-16-4096) succeeded ${what}, but its token still reports ` +
        `${after.name} (S-1-16-${after.rid}): this system does not apply integrity levels, and what the process starts is not confined`,
    ) as IntegrityNotLoweredError;
    err.code = 'INTEGRITY_NOT_LOWERED';
    err.pid = pid;
    err.level = after;
    throw err;
  });
}

/**
 * The user's LocalLow folder (FOLDERID_LocalAppDataLow, normally %USERPROFILE%\AppData\LocalLow),
 * asked of the shell so a relocated profile is followed. Windows labels it Low with an inheritable
 * label, so what is made below it is writable at Low integrity.
 */
export function localLowDir(): string {
  const a = win32('localLowDir');
  const T = a.ffi.DataType;
  const out = Buffer.alloc(8);
  // SHGetKnownFolderPath returns an HRESULT, not a GetLastError value: it is reported as that.
  const hr = a.call(SHELL32, 'SHGetKnownFolderPath', T.I32, [
    [T.U8Array, FOLDERID_LOCAL_APP_DATA_LOW],
    [T.U32, KF_FLAG_CREATE],
    [T.I64, 0],
    [T.U8Array, out],
  ]);
  const str = pointerIn(out);
  try {
    if (hr.value !== 0)
      throw win32Error(
        'SHGetKnownFolderPath(FOLDERID_LocalAppDataLow)',
        `(HRESULT 0x${(hr.value >>> 0).toString(16)})`,
        hr.errnoCode,
        hr.errnoMessage,
      );
    const chars = a.call(KERNEL32, 'lstrlenW', T.I32, [[T.I64, str]]).value;
    return readMemory(a, str, chars * 2).toString('utf16le');
  } finally {
    // Freed whether or not the call succeeded, as the documentation asks (CoTaskMemFree(NULL) is allowed).
    a.call(OLE32, 'CoTaskMemFree', T.Void, [[T.I64, str]]);
  }
}

const RUN_ID = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$/;

/** The per-run temporary directory of run `runId` below `localLow`: <localLow>\shadowfs\runs\<runId>. */
export function lowRunTempPath(runId: string, localLow: string): string {
  return path.join(localLow, ...lowRunTempRel(runId).split('/'));
}

/** The same directory relative to `localLow`, '/'-separated (as Beneath takes it). */
function lowRunTempRel(runId: string): string {
  if (!RUN_ID.test(runId)) throw new Error(`lowRunTemp: ${JSON.stringify(runId)} is not a run id (letters, digits, . _ -, at most 64)`);
  return `shadowfs/runs/${runId}`;
}

/**
 * The operations the run directory is made and removed with: src/work/beneath.ts's, which open
 * every component relative to its parent's handle and never follow a link, however the tree
 * changes meanwhile (BeneathWin32 on Windows; the unit tests on Linux pass Beneath).
 */
export interface BeneathOps {
  lstat(rel: string): fs.Stats | null;
  readdir(rel: string): fs.Dirent[];
  mkdir(rel: string): void;
  unlink(rel: string): boolean;
  rmdir(rel: string): void;
  /** Directory `rel` opened as a folder of its own (links refused on the way and there). */
  sub(rel: string): BeneathOps;
  close(): void;
}

/** BeneathWin32.open, loaded when a run's directory is first made or removed (not by every CLI command). */
function openBeneathWin32(root: string): BeneathOps {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { BeneathWin32 } = require('./win32-beneath') as typeof import('./win32-beneath');
  return BeneathWin32.open(root);
}

/**
 * Makes the empty per-run temporary directory of run `runId` under LocalLow and returns its path.
 * A Low-integrity command cannot write the user's %TEMP% (Medium); this directory inherits
 * LocalLow's Low label, so it can. Made by the daemon before the run; a directory left by an
 * earlier run of the same id is emptied first. Remove it with removeLowRunTemp after the run.
 */
export function lowRunTemp(runId: string, localLow: string = localLowDir(), open: (root: string) => BeneathOps = openBeneathWin32): string {
  const rel = lowRunTempRel(runId);
  const b = open(localLow);
  try {
    // Ours above the run's directory: a link or file a run left in their place is removed itself.
    for (const own of ['shadowfs', 'shadowfs/runs']) {
      const st = b.lstat(own);
      if (st && (st.isSymbolicLink() || !st.isDirectory())) b.unlink(own);
    }
    removeBeneath(b, rel);
    // No security descriptor: the directory inherits LocalLow's DACL and Low label.
    b.mkdir(rel);
  } finally {
    b.close();
  }
  return lowRunTempPath(runId, localLow);
}

/** The environment a Low-integrity run needs on top of its own: TEMP and TMP in `tempDir`. */
export function lowRunEnv(tempDir: string): { TEMP: string; TMP: string } {
  return { TEMP: tempDir, TMP: tempDir };
}

/**
 * Removes the per-run temporary directory of run `runId`; nothing when it is gone. Call it once
 * no process of the run is left (the job is empty): the tree was written by the command.
 */
export function removeLowRunTemp(
  runId: string,
  localLow: string = localLowDir(),
  open: (root: string) => BeneathOps = openBeneathWin32,
): void {
  const b = open(localLow);
  try {
    removeBeneath(b, lowRunTempRel(runId));
  } finally {
    b.close();
  }
}

/** How deep a run's directory is removed; below that it is left (and logged by the caller's error). */
const MAX_REMOVE_DEPTH = 256;

/**
 * Removes `rel` and what is below it without ever following a link. Every run can write under
 * LocalLow\shadowfs, so while the daemon (at Medium) removes one run's directory another run can
 * swap any directory in it, or above it, for a junction to the user's files. So every step is
 * taken from an open directory one name at a time, refusing links (Beneath): each directory is
 * opened once from its parent's handle (sub), and one found to be a link by then is removed as
 * the link it is. A link above `rel` stops the removal with PATH_THROUGH_SYMLINK: nothing is
 * deleted through it. Each entry costs a few calls, however deep (review: walking down from the
 * top for every entry took seconds for a tree 800 levels deep).
 */
function removeBeneath(b: BeneathOps, rel: string): void {
  const parts = rel.split('/');
  const name = parts.pop()!;
  let parent: BeneathOps;
  try {
    parent = b.sub(parts.join('/'));
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return; // nothing was made yet
    throw err;
  }
  try {
    removeIn(parent, name, 0);
  } finally {
    parent.close();
  }
}

/** Removes `name` in the open directory `dir` and what is below it (see removeBeneath). */
function removeIn(dir: BeneathOps, name: string, depth: number): void {
  const st = dir.lstat(name);
  if (!st) return;
  if (st.isSymbolicLink() || !st.isDirectory()) {
    dir.unlink(name);
    return;
  }
  if (depth >= MAX_REMOVE_DEPTH) throw new Error(`a run's directory is deeper than ${MAX_REMOVE_DEPTH} levels at ${name}: left as it is`);
  let sub: BeneathOps;
  try {
    sub = dir.sub(name);
  } catch (err) {
    if (!swappedForLink(err)) throw err;
    dir.unlink(name); // a link now
    return;
  }
  try {
    for (const e of sub.readdir('')) removeIn(sub, e.name, depth + 1);
  } finally {
    sub.close();
  }
  try {
    dir.rmdir(name);
  } catch (err) {
    if (!swappedForLink(err)) throw err;
    dir.unlink(name);
  }
}

/** Whether an operation on a directory met a link (or file) in its place. */
function swappedForLink(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'PATH_THROUGH_SYMLINK' || code === 'NOT_A_DIRECTORY' || code === 'ENOTDIR';
}
