// Errors that reach users: every one carries a machine-readable `code` and a sentence that
// says what to do. The list of codes is part of the public API (README "Error codes").

export const ErrorCodes = {
  INVALID_PATH: 'The path is absolute, contains "..", a NUL byte, or an over-long name.',
  INVALID_ARGUMENT: 'An argument other than a path is not valid (a data type, mode, timeout, size, directory, name or option).',
  PATH_THROUGH_SYMLINK: 'The path goes through (or ends at) a symbolic link; use the real path.',
  NOT_FOUND: 'Nothing exists at that path in the shadow.',
  IS_DIRECTORY: 'The path is a directory where a file was expected.',
  NOT_A_DIRECTORY: 'A component of the path is not a directory.',
  LOWER_NOT_FOUND: 'The folder to shadow does not exist.',
  LOWER_NOT_DIRECTORY: 'The folder to shadow is not a directory.',
  MOUNTPOINT_NOT_DIRECTORY: 'The mount point exists and is not a directory.',
  MOUNTPOINT_NOT_EMPTY: 'The mount point is not an empty directory.',
  MOUNTPOINT_IN_USE: 'Something is already mounted at the mount point.',
  MOUNTPOINT_INSIDE_LOWER: 'The mount point lies inside the folder to shadow.',
  LOWER_INSIDE_MOUNTPOINT: 'The folder to shadow lies inside (or is) the mount point.',
  UNKNOWN_BACKEND: 'This build has no mount backend of that name (see "shadowfs doctor").',
  FUSE_UNAVAILABLE: 'The FUSE device /dev/fuse cannot be opened.',
  ALLOW_OTHER_DENIED: 'FUSE lets a user other than root allow other users in only when /etc/fuse.conf has "user_allow_other".',
  MOUNT_FAILED: 'The kernel refused the mount.',
  MOUNT_BUSY: 'Programs still use the shadow, so it cannot be unmounted.',
  NOT_MOUNTED: 'The shadow is no longer mounted.',
  UNKNOWN_AGENT: 'No layer exists for that agent id.',
  UNKNOWN_SHADOW: 'No shadow has that name or mount point.',
  DAEMON_UNAVAILABLE: 'The shadowfs daemon is not running and could not be started.',
  DAEMON_RUNNING: 'Another shadowfs daemon already serves this user.',
  PROTOCOL: 'The daemon and this client could not understand each other.',
  INVALID_AGENT: 'The agent id is empty, too long, or contains a "/" or a NUL byte.',
  NO_ACTIVE_LAYER: 'No layer is active on the shadow, so it shows the folder read-only.',
  LAYER_BUSY: 'The layer is active or has a view open, so it cannot be dropped.',
  LAYER_EXISTS: 'A layer with that agent id exists already.',
  TIMEOUT: 'The job did not finish in the time it was given.',
  POLICY_DENIED: 'The run policy does not allow this command.',
  INVALID_POLICY: 'The run policy file is not valid JSON of the documented shape.',
  NAMESPACE_UNAVAILABLE: 'This system cannot create the mount or network namespace the run asked for.',
  ABORTED: 'The job was cancelled.',
  NOT_SUPPORTED: 'This operation is not available in this version or on this platform.',
  NATIVE_MODULE_MISSING: 'The native module is not built.',
  INTERNAL: 'An unexpected internal error.',
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

export class ShadowError extends Error {
  readonly code: ErrorCode;
  /** The OS errno behind the error, when there is one. */
  readonly errno?: number;

  constructor(code: ErrorCode, message: string, options?: { errno?: number; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ShadowError';
    this.code = code;
    if (options?.errno !== undefined) this.errno = options.errno;
  }

  toJSON(): { code: ErrorCode; message: string; errno?: number } {
    return { code: this.code, message: this.message, ...(this.errno === undefined ? {} : { errno: this.errno }) };
  }
}

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
    case 'ENOTCONN':
      return new ShadowError('NOT_MOUNTED', `${what}: the shadow is not mounted any more`, opts);
    case 'EBUSY':
      return new ShadowError('MOUNT_BUSY', `${what}: busy`, opts);
    case 'ENXIO':
      return new ShadowError('UNKNOWN_AGENT', `${what}: no layer exists for that agent; create it with shadow.layer(agentId)`, opts);
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
