// What `shadowfs doctor` checks on Windows beyond the native module: which WinFsp DLL is used and
// whether its version is one the backend was written for, whether this machine applies the Low
// integrity level runs are started at (a tiny child's token is lowered and read back), and
// advice about real-time antivirus scanning of the mounts and about Dev Drive (ReFS) folders.
// Nothing here changes the machine: no exclusion is added, no filter attached or detached.
//
// Win32 calls go through ffi-rs, required only when a call is made (importing this module never
// fails, on any platform); every failure becomes the check's detail, never a throw.
import { spawn } from 'child_process';
import * as path from 'path';
import { INTEGRITY_RID, isIntegrityNotLowered, lowerIntegrity } from './win32-integrity';

type Ffi = typeof import('ffi-rs');

const KERNEL32 = 'shadowfs-doctor-kernel32';
const VERSION = 'shadowfs-doctor-version';

/** One line of doctor: ok or not, required (FAIL) or advice (warn), and what it found. */
export interface DoctorCheck {
  name: string;
  required: boolean;
  ok: boolean;
  detail: string;
  /** The same facts as values, for --json readers that should not parse `detail`. */
  facts?: Record<string, string | number | boolean | null>;
}

/** What the native module reported about WinFsp (src/shadow/native.ts WinFspStatus), or what the registry says. */
export interface WinFspSeen {
  /** The module's own look (registry InstallDir, then the DLL by full path); null when the module does not load. */
  module: {
    available: boolean;
    installDir: string;
    dll: string;
    error: string;
    version: string;
    resolved: string[];
    missing: string[];
  } | null;
  /** The registry's InstallDir when its bin\winfsp-x64.dll exists (win32-mounts.ts winfspInstallDir). */
  installDir: string | undefined;
}

/**
 * The oldest WinFsp the "winfsp" backend works with, and why. The backend was written against
 * WinFsp's headers of v2.2 Beta2 (native/winfsp/winfsp_api.h, commit e7c7ccc5); what it asks of
 * WinFsp is older: FSP_FILE_SYSTEM_INTERFACE::DispatcherStopped, how it notices a dispatcher that
 * stopped without an unmount, first shipped in v2.0 (WinFsp commit 9670caa3, 2022), and
 * SupportsPosixUnlinkRename in v1.10; the other entry points and flags are from v1.0 to v1.4.
 * WinFsp's DLL file version is <major>.<minor>.<build date>.0 (2.0.23075.0 for WinFsp 2023).
 */
export const WINFSP_MINIMUM = { major: 2, minor: 0, why: 'DispatcherStopped, first in WinFsp 2.0; written against 2.2 Beta2' } as const;

/** Whether `version` ("2.0.23075.0") is at least WINFSP_MINIMUM; undefined when it is no version. */
export function winfspNewEnough(version: string): boolean | undefined {
  const m = /^(\d+)\.(\d+)(?:\.\d+){0,2}$/.exec(version.trim());
  if (!m) return undefined;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  return major > WINFSP_MINIMUM.major || (major === WINFSP_MINIMUM.major && minor >= WINFSP_MINIMUM.minor);
}

let ffiLoaded: Ffi | undefined;

function ffi(): Ffi {
  if (ffiLoaded) return ffiLoaded;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const f = require('ffi-rs') as Ffi;
  f.open({ library: KERNEL32, path: 'kernel32.dll' });
  f.open({ library: VERSION, path: 'version.dll' });
  ffiLoaded = f;
  return f;
}

function call(library: string, funcName: string, ret: 'i32' | 'i64' | 'void', params: [number, unknown][]): number {
  const f = ffi();
  const T = f.DataType;
  return f.load({
    library,
    funcName,
    retType: ret === 'i64' ? T.I64 : ret === 'void' ? T.Void : T.I32,
    paramsType: params.map((p) => p[0] as never),
    paramsValue: params.map((p) => p[1]),
  }) as number;
}

/**
 * The file version in `file`'s version resource (VS_FIXEDFILEINFO, "2.0.23075.0"), "" when it has
 * none, through GetFileVersionInfoSizeW / GetFileVersionInfoW / VerQueryValueW of version.dll. Used
 * when the native module (which reads the same resource itself) does not load. Throws when ffi-rs
 * does not load.
 */
export function fileVersion(file: string): string {
  const T = ffi().DataType;
  const size = call(VERSION, 'GetFileVersionInfoSizeW', 'i32', [
    [T.WString, file],
    [T.U8Array, Buffer.alloc(4)],
  ]);
  if (size <= 0) return '';
  // VerQueryValueW answers a pointer into the block it is given, so the block lives in native
  // memory that stays put (a Buffer handed to ffi-rs may be a copy).
  const block = call(KERNEL32, 'LocalAlloc', 'i64', [
    [T.U32, 0x0040],
    [T.I64, size],
  ]);
  if (!block) return '';
  try {
    if (
      !call(VERSION, 'GetFileVersionInfoW', 'i32', [
        [T.WString, file],
        [T.U32, 0],
        [T.U32, size],
        [T.I64, block],
      ])
    )
      return '';
    const ptrOut = Buffer.alloc(8);
    const lenOut = Buffer.alloc(4);
    if (
      !call(VERSION, 'VerQueryValueW', 'i32', [
        [T.I64, block],
        [T.WString, '\\'],
        [T.U8Array, ptrOut],
        [T.U8Array, lenOut],
      ])
    )
      return '';
    const info = Number(ptrOut.readBigUInt64LE(0));
    // VS_FIXEDFILEINFO: dwSignature 0xFEEF04BD, dwStrucVersion, dwFileVersionMS, dwFileVersionLS, ... (52 bytes).
    if (!info || lenOut.readUInt32LE(0) < 52 || info < block || info + 52 > block + size) return '';
    const fixed = Buffer.alloc(52);
    call(KERNEL32, 'RtlMoveMemory', 'void', [
      [T.U8Array, fixed],
      [T.I64, info],
      [T.I64, 52],
    ]);
    if (fixed.readUInt32LE(0) !== 0xfeef04bd) return '';
    const ms = fixed.readUInt32LE(8);
    const ls = fixed.readUInt32LE(12);
    return `${ms >>> 16}.${ms & 0xffff}.${ls >>> 16}.${ls & 0xffff}`;
  } finally {
    call(KERNEL32, 'LocalFree', 'i64', [[T.I64, block]]);
  }
}

/** The name of the file system holding `folder` ("NTFS", "ReFS"), through GetVolumePathNameW and GetVolumeInformationW. */
export function fileSystemOf(folder: string): { root: string; fileSystem: string } {
  const T = ffi().DataType;
  const root = Buffer.alloc(2 * 1024);
  if (
    !call(KERNEL32, 'GetVolumePathNameW', 'i32', [
      [T.WString, path.resolve(folder)],
      [T.U8Array, root],
      [T.U32, 1024],
    ])
  )
    throw new Error(`GetVolumePathNameW failed for ${folder}`);
  const rootPath = wide(root);
  const name = Buffer.alloc(2 * 261);
  if (
    !call(KERNEL32, 'GetVolumeInformationW', 'i32', [
      [T.WString, rootPath],
      [T.I64, 0],
      [T.U32, 0],
      [T.I64, 0],
      [T.I64, 0],
      [T.I64, 0],
      [T.U8Array, name],
      [T.U32, 261],
    ])
  )
    throw new Error(`GetVolumeInformationW failed for ${rootPath}`);
  return { root: rootPath, fileSystem: wide(name) };
}

/** A NUL-terminated UTF-16 string at the start of `buf`. */
function wide(buf: Buffer): string {
  const text = buf.toString('utf16le');
  const end = text.indexOf('\0');
  return end < 0 ? text : text.slice(0, end);
}

/** The winfsp and winfsp-version checks. */
export function winfspChecks(seen: WinFspSeen): DoctorCheck[] {
  const w = seen.module;
  const dll = w?.dll || (seen.installDir ? path.join(seen.installDir, 'bin', 'winfsp-x64.dll') : '');
  let version = w?.version ?? '';
  let versionFrom = 'read by the native module';
  if (!w && seen.installDir) {
    try {
      version = fileVersion(dll);
      versionFrom = 'read with version.dll';
    } catch (err) {
      version = '';
      versionFrom = `not read: ${(err as Error).message}`;
    }
  }
  const installed = w ? w.available : seen.installDir !== undefined;
  const winfsp: DoctorCheck = {
    name: 'winfsp',
    required: true,
    ok: installed,
    detail: w
      ? w.available
        ? `installed; ${w.dll}${w.version ? ` (version ${w.version})` : ' (no version resource)'} loaded; entry points found: ${w.resolved.length}${w.missing.length ? ` (${w.error || `missing ${w.missing.join(', ')}`})` : ''}`
        : w.error
      : seen.installDir
        ? `installed in ${seen.installDir} (the native module does not load, so the DLL was not loaded)`
        : 'WinFsp is not installed: install WinFsp 2.x from https://winfsp.dev/rel/ (or "winget install WinFsp.WinFsp")',
    facts: { installed, installDir: w?.installDir || seen.installDir || null, dll: dll || null, loaded: w?.available ?? false },
  };
  if (!installed && !dll) return [winfsp];
  const enough = version ? winfspNewEnough(version) : undefined;
  const minimum = `${WINFSP_MINIMUM.major}.${WINFSP_MINIMUM.minor}`;
  const versionCheck: DoctorCheck = {
    name: 'winfsp-version',
    // A version that says it is too old is a failure; no version resource at all is advice.
    required: enough === false,
    ok: enough === true,
    detail: version
      ? enough === true
        ? `${version} (${dll}); shadowfs needs ${minimum} or later (${WINFSP_MINIMUM.why})`
        : enough === false
          ? `${version} (${dll}) is older than ${minimum}, which shadowfs needs (${WINFSP_MINIMUM.why}); install a current WinFsp from https://winfsp.dev/rel/`
          : `"${version}" (${dll}) is no version shadowfs can compare; it needs ${minimum} or later`
      : `none: ${dll || 'the DLL'} has no version resource (${versionFrom}), so whether it is ${minimum} or later is not known`,
    facts: { version: version || null, dll: dll || null, minimum, newEnough: enough ?? null },
  };
  return [winfsp, versionCheck];
}

/**
 * Whether runs can be protected here: a tiny child of this process is started, its token lowered
 * to Low integrity as the run path lowers its launcher's (win32-processes.ts), and the level read
 * back; then the child is ended. Yes only when the token reads Low.
 */
export async function runsProtectedCheck(): Promise<DoctorCheck> {
  const label = 'the shadow labels its files Low with NO_WRITE_UP, so a Low run writes there and not in the folder';
  let child: ReturnType<typeof spawn> | undefined;
  try {
    child = spawn(process.execPath, ['-e', 'process.stdin.resume()'], { stdio: ['pipe', 'ignore', 'ignore'], windowsHide: true });
    const pid = await new Promise<number>((resolve, reject) => {
      child!.once('spawn', () => resolve(child!.pid!));
      child!.once('error', reject);
    });
    const level = lowerIntegrity(pid);
    const low = level.rid <= INTEGRITY_RID.low;
    return {
      name: 'runs-protected',
      required: false,
      ok: low,
      detail: low
        ? `yes: a child's token was lowered to ${level.name} integrity and read back ${level.name}; ${label}`
        : `no: the token still reads ${level.name} after lowering; runs are refused unless --unprotected`,
      facts: { protected: low, identity: 'low-integrity', tokenReads: level.name },
    };
  } catch (err) {
    const level = isIntegrityNotLowered(err) ? err.level : undefined;
    const reads = level ? level.name : null;
    const why = level
      ? `the token still reads ${capital(level.name)} (S-1-16-${level.rid}) after SetTokenInformation accepted Low: this system does not apply integrity levels`
      : (err as Error).message;
    return {
      name: 'runs-protected',
      required: false,
      ok: false,
      detail: `no: ${why}; runs are refused unless --unprotected (then they can write the folder)`,
      facts: { protected: false, identity: 'low-integrity', tokenReads: reads, why },
    };
  } finally {
    child?.kill();
  }
}

function capital(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/**
 * Advice about antivirus real-time scanning: every file a build reads in a shadow is scanned
 * there, on top of the scan of the folder. Never changes any setting.
 */
export function antivirusCheck(mountPoints: string[]): DoctorCheck {
  const where = mountPoints.length ? mountPoints : ['the drive letter each shadow mounts on (Z: downwards by default)'];
  const example = mountPoints.length
    ? mountPoints.map((m) => `Add-MpPreference -ExclusionPath '${m}'`).join('; ')
    : "Add-MpPreference -ExclusionPath 'Z:\\'";
  return {
    name: 'antivirus',
    required: false,
    ok: true,
    detail:
      `advice: real-time scanning (Microsoft Defender or another antivirus) scans every file a build reads in a shadow, although the folder it shows is scanned already; ` +
      `if builds in a shadow are slow, exclude its mount point (${where.join(', ')}), e.g. in an administrator PowerShell: ${example}. doctor changes no setting`,
    facts: { advice: true, mountPoints: mountPoints.join(';') || null },
  };
}

/** Advice for a folder on ReFS (a Dev Drive is ReFS): what decides which filters attach, and file IDs. */
export function devDriveAdvice(folder: string, fileSystem: string): DoctorCheck {
  const refs = fileSystem.toLowerCase() === 'refs';
  return {
    name: 'dev-drive',
    required: false,
    ok: true,
    detail: refs
      ? `advice: ${folder} is on ReFS, as a Dev Drive is: its filter policy ("fsutil devdrv query", as administrator) decides which minifilters (antivirus included) attach to it, ` +
        `and the shadow's own drive is not a Dev Drive, so it is scanned as usual (see antivirus); ReFS file IDs are 128-bit, which shadowfs maps to its own 64-bit inode numbers`
      : `${folder} is on ${fileSystem || 'a file system that gives no name'}, not ReFS: no Dev Drive advice`,
    facts: { advice: true, folder, fileSystem: fileSystem || null, refs },
  };
}

/** The dev-drive check for each folder (that of each shadow, else the current directory). */
export function devDriveChecks(folders: string[]): DoctorCheck[] {
  return [...new Set(folders)].map((folder) => {
    try {
      return devDriveAdvice(folder, fileSystemOf(folder).fileSystem);
    } catch (err) {
      return {
        name: 'dev-drive',
        required: false,
        ok: true,
        detail: `the file system of ${folder} is not known (${(err as Error).message}): no Dev Drive advice`,
        facts: { advice: true, folder, fileSystem: null, refs: false },
      };
    }
  });
}

/** Every Windows check of doctor but the native module and the daemon, in the order printed. */
export async function win32DoctorChecks(input: WinFspSeen & { mountPoints: string[]; folders: string[] }): Promise<DoctorCheck[]> {
  return [...winfspChecks(input), await runsProtectedCheck(), antivirusCheck(input.mountPoints), ...devDriveChecks(input.folders)];
}
