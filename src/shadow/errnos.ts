// What the native module's errnos mean for each operation of the shadow API, where that differs
// from what they mean everywhere (NATIVE_ERRNOS in ../errors). Declared once per operation and
// read by fromNative only; nothing else in the shadow re-reads an error to change its code.
import type { ErrnoMeaning, ErrnoTable } from '../common/errors';

/** `subject` (a mount at `mountPoint`) is in use. */
const inUse = (subject: string, mountPoint: string): ErrnoMeaning => ({
  code: 'MOUNT_BUSY',
  say: () =>
    `${subject} is in use (a shell or program has it open; see "fuser -vm ${mountPoint}"); close them, or unmount lazily with { lazy: true } / --lazy`,
});

/** Whatever failed: the mount could not be made (the native message says why). */
const mountFailed: ErrnoMeaning = { code: 'MOUNT_FAILED', say: (what, native, err) => `${what}: ${native ?? String(err)}` };

export const ERRNOS = {
  /** Every operation on a mounted shadow or view at `mountPoint`: busy is the mount in use. */
  onMount: (mountPoint: string): ErrnoTable => ({ EBUSY: inUse(mountPoint, mountPoint) }),
  /** A layer's copy to `to`, which has a layer already. */
  cloneLayer: (to: string): ErrnoTable => ({
    EEXIST: { code: 'LAYER_EXISTS', say: (what) => `cannot ${what}: ${to} has a layer already; drop it first or pick another id` },
  }),
  /** Dropping `agent`'s layer, which is in use. */
  dropLayer: (agent: string): ErrnoTable => ({
    EBUSY: {
      code: 'LAYER_BUSY',
      say: () => `the layer of ${agent} is active or has a view open; activate another layer or close its view first`,
    },
  }),
  /** Unmounting the shared mount (and its views) at `mountPoint`. */
  unmount: (mountPoint: string): ErrnoTable => ({
    EBUSY: inUse(`the shadow at ${mountPoint} (or one of its views)`, mountPoint),
  }),
  /** Unmounting but keeping the layers, which a busy mount refuses. */
  suspend: (mountPoint: string): ErrnoTable => ({
    EBUSY: { code: 'MOUNT_BUSY', say: () => `the shadow at ${mountPoint} is in use; it stays mounted` },
  }),
  /** Handing a path back to the folder only while the layer still holds what was stamped. */
  revertStamped: (agent: string): ErrnoTable => ({
    EAGAIN: {
      code: 'CONFLICT',
      say: (what) => `cannot ${what}: ${agent} changed it in the layer meanwhile; the layer keeps its new version`,
    },
  }),
  /** Making a symbolic link whose target would lead out of the shadow (native/core/link_targets.cc). */
  symlink: (target: string): ErrnoTable => ({
    EPERM: {
      code: 'PATH_PROTECTED',
      say: (what) =>
        `cannot ${what} to ${JSON.stringify(target)}: a link may not lead to a directory above the folder or "/", through /proc or another FUSE file system, to the folder's repository outside it, to a file with other hard links on the folder's file system (it may be one of the folder's files by another name), or say ".." after a name; the user's programs in the mount would follow it out of the shadow (links into the folder itself are kept, made relative)`,
    },
  }),
  /** Mounting, or mounting again after suspend. */
  mount: { '*': mountFailed } as ErrnoTable,
} as const;
