// Errors that reach users: every one carries a machine-readable `code` and a sentence that
// says what to do. The codes live in the protocol (src/protocol/errors.ts); this module adds
// the mapping of the native module's errno-style errors onto them.

import { ShadowError } from './protocol/errors';
export { ErrorCodes, ShadowError, isErrorCode } from './protocol/errors';
export type { ErrorCode } from './protocol/errors';

/** Maps an errno-style error from the native module to a ShadowError about `path`. */
export function fromNative(err: unknown, what: string): ShadowError {
  const e = err as { code?: string; errno?: number; message?: string };
  const errno = typeof e.errno === 'number' ? e.errno : undefined;
  const opts = { errno, cause: err };
  switch (e.code) {
    case 'ENOENT':
      return new ShadowError('NOT_FOUND', `${what}: no such file or directory in the shadow`, opts);
    case 'EISDIR':
      return new ShadowError('IS_DIRECTORY', `${what}: is a directory`, opts);
    case 'ENOTDIR':
      return new ShadowError('NOT_A_DIRECTORY', `${what}: a component of the path is not a directory`, opts);
    case 'ELOOP':
      return new ShadowError('PATH_THROUGH_SYMLINK', `${what}: the path goes through a symbolic link; name the real path instead`, opts);
    case 'EINVAL':
      // The addon marks the EINVALs that are about the path itself; the others (e.g. writing
      // over a fifo or a device, which holds no file content) are about the request.
      if ((err as { invalidPath?: unknown }).invalidPath === true)
        return new ShadowError('INVALID_PATH', `${what}: invalid path; give a path relative to the shadow root`, opts);
      return new ShadowError(
        'INVALID_ARGUMENT',
        `${what}: the request does not fit what is there (not a regular file, or an invalid argument)`,
        opts,
      );
    case 'EFBIG':
      // The native message says how big the file is and what the limit is.
      return new ShadowError('FILE_TOO_LARGE', `${what}: ${e.message ?? 'the file is too large to read whole'}`, opts);
    case 'ENOTCONN':
      return new ShadowError('NOT_MOUNTED', `${what}: the shadow is not mounted any more`, opts);
    case 'EBUSY':
      return new ShadowError('MOUNT_BUSY', `${what}: busy`, opts);
    case 'ENXIO':
      return new ShadowError('UNKNOWN_AGENT', `${what}: no layer exists for that agent; create it with shadow.layer(agentId)`, opts);
    case 'EXDEV':
      return new ShadowError(
        'CONFLICT',
        `${what}: it lies under a directory the layer deleted, replaced or moved; only that whole directory can go back to the folder`,
        opts,
      );
    case 'EROFS':
      return new ShadowError('NO_ACTIVE_LAYER', `${what}: no layer is active, the shadow shows the folder read-only`, opts);
    default:
      // The native message already names the operation ("cannot copy layer a to b: ..."), so it
      // is not prefixed with `what` again.
      return new ShadowError(
        'INTERNAL',
        `${e.message ?? `${what}: ${String(err)}`}; this is unexpected: please report it with the daemon log ("shadowfs status" shows where it is)`,
        opts,
      );
  }
}
