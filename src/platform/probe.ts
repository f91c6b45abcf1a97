// OS probes that must work even when the native module cannot load (used by `shadowfs doctor`).
// They call libc through ffi-rs, so they exercise the same open(2) the FUSE backend makes.
import * as fs from 'fs';
import * as os from 'os';
import { platform } from './';

export interface ProbeResult {
  ok: boolean;
  detail: string;
}

const O_RDWR = 2;

/** Opens /dev/fuse read-write the way libfuse does, and closes it again. */
export function probeFuseDevice(): ProbeResult {
  if (platform.name !== 'linux') return { ok: false, detail: `no FUSE device on ${platform.name}` };
  let ffi: typeof import('ffi-rs');
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    ffi = require('ffi-rs') as typeof import('ffi-rs');
  } catch (err) {
    // Fall back to Node's own check rather than report nothing.
    try {
      fs.accessSync('/dev/fuse', fs.constants.R_OK | fs.constants.W_OK);
      return { ok: true, detail: `/dev/fuse is accessible (ffi-rs unavailable: ${(err as Error).message})` };
    } catch (e) {
      return { ok: false, detail: `/dev/fuse: ${(e as Error).message}` };
    }
  }
  ffi.open({ library: 'libc', path: '' });
  try {
    const r = ffi.load({
      library: 'libc',
      funcName: 'open',
      retType: ffi.DataType.I32,
      paramsType: [ffi.DataType.String, ffi.DataType.I32],
      paramsValue: ['/dev/fuse', O_RDWR],
      errno: true,
    }) as unknown as { errnoCode: number; errnoMessage: string; value: number };
    if (r.value < 0)
      return {
        ok: false,
        detail: `open("/dev/fuse", O_RDWR) failed: ${r.errnoMessage.replace(/ \(os error \d+\)$/, '')} (errno ${r.errnoCode})`,
      };
    ffi.load({ library: 'libc', funcName: 'close', retType: ffi.DataType.I32, paramsType: [ffi.DataType.I32], paramsValue: [r.value] });
    return { ok: true, detail: 'open("/dev/fuse", O_RDWR) works' };
  } finally {
    ffi.close('libc');
  }
}

/** FUSE_NOTIFY_INC_EPOCH (one-message cache invalidation on layer switches) needs Linux 6.16+. */
export function probeKernel(): ProbeResult {
  const rel = os.release();
  const [major, minor] = rel.split('.').map(Number);
  const epoch = major > 6 || (major === 6 && minor >= 16);
  return {
    ok: true,
    detail: `kernel ${rel}: ${epoch ? 'epoch invalidation available' : 'per-entry invalidation on layer switches (epoch needs 6.16+)'}`,
  };
}

export function probeInotify(): ProbeResult {
  try {
    const n = Number(fs.readFileSync('/proc/sys/fs/inotify/max_user_watches', 'utf8').trim());
    return {
      ok: true,
      detail: `${n} inotify watches per user (one per directory the kernel caches; past that, edits in the folder show after the cache timeout)`,
    };
  } catch {
    return { ok: true, detail: 'inotify limits unknown' };
  }
}
