// The error codes of shadowfs and how they travel over JSON-RPC. Every error that reaches a user
// carries a machine-readable `code` and a sentence that says what to do; over the wire the
// JSON-RPC `error.code` is one of RpcErrorCodes and the shadowfs code is in `error.data.code`.
// No Node APIs: this module is part of the protocol every front end loads.

export const ErrorCodes = {
  INVALID_PATH: 'The path is absolute, contains "..", a NUL byte, or an over-long name.',
  INVALID_ARGUMENT: 'An argument other than a path is not valid (a data type, mode, timeout, size, directory, name or option).',
  PATH_THROUGH_SYMLINK: 'The path goes through (or ends at) a symbolic link; use the real path.',
  NOT_FOUND: 'Nothing exists at that path in the shadow.',
  IS_DIRECTORY: 'The path is a directory where a file was expected.',
  NOT_A_DIRECTORY: 'A component of the path is not a directory.',
  FOLDER_NOT_FOUND: 'The folder to shadow does not exist.',
  FOLDER_NOT_DIRECTORY: 'The folder to shadow is not a directory.',
  MOUNTPOINT_NOT_DIRECTORY: 'The mount point exists and is not a directory.',
  MOUNTPOINT_NOT_EMPTY: 'The mount point is not an empty directory.',
  MOUNTPOINT_IN_USE: 'Something is already mounted at the mount point.',
  MOUNTPOINT_INSIDE_FOLDER: 'The mount point lies inside the folder to shadow.',
  FOLDER_INSIDE_MOUNTPOINT: 'The folder to shadow lies inside (or is) the mount point.',
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
  PEER_REFUSED:
    "The other end of the connection runs as another user (or could not prove it is this user), or inside a run's user or PID namespace, so it was refused: connect from the user's own session, outside any run.",
  PROTOCOL: 'The daemon and this client could not understand each other.',
  INVALID_AGENT: 'The agent id is empty, too long, or contains a "/" or a NUL byte.',
  NO_ACTIVE_LAYER: 'No layer is active on the shadow, so it shows the folder read-only.',
  LAYER_BUSY: 'The layer is active or has a view open, so it cannot be dropped.',
  LAYER_EXISTS: 'A layer with that agent id exists already.',
  TIMEOUT: 'The job did not finish in the time it was given.',
  FILE_TOO_LARGE:
    'The file is larger than this operation reads or stores whole (16 MiB for one answer of layer.read: read it in ranges with offset and length; a checkpoint has its own, configurable cap on stored data): read it in parts, leave it out, or make it smaller.',
  POLICY_DENIED: 'The run policy does not allow this command.',
  INVALID_POLICY: 'The run policy file is not valid JSON of the documented shape.',
  NAMESPACE_UNAVAILABLE:
    "This system cannot make the run's protection: the mount or network namespace (Linux), or the Low-integrity token (Windows); --unprotected runs it without.",
  ABORTED: 'The job was cancelled.',
  NOT_SUPPORTED: 'This operation is not available in this version or on this platform.',
  NATIVE_UNAVAILABLE: 'The native module (which mounts shadows) cannot be loaded: it is not built for this system, or the build is broken.',
  WINFSP_MISSING: 'WinFsp, which shadowfs mounts through on Windows, is not installed.',
  CONFLICT:
    "The folder's file changed since the agent's copy was taken (or the layer's change cannot be given back on its own); nothing was written for it: say how to resolve it.",
  BRANCH_EXISTS:
    "The folder's repository has a branch of that name already (or it is the branch checked out there); nothing was written: choose another name, or replace it with force.",
  NO_MATCH: 'The text to replace does not occur in the file.',
  AMBIGUOUS_MATCH: 'The text to replace occurs more than once; give more context, or ask to replace every occurrence.',
  UNKNOWN_CHECKPOINT: 'No checkpoint of that name exists for the agent.',
  SCOPE_DENIED:
    'The connection restricted itself to one agent on one shadow (session.restrict), and this request reaches beyond that (another agent or shadow, mounts, views, apply, weaker run protection): ask the user to do it, outside the restricted session.',
  PATH_MASKED: 'The path is masked for this agent (shadowfs mask): it does not exist for the agent, and the agent cannot create it.',
  PATH_PROTECTED:
    "The path is one of git's control files (.git itself, a repository's config, hooks, commondir or objects/info/alternates, bare repositories' included; the last of HEAD, objects and refs, which would make a directory a repository; a link or special file beneath a .git or a bare repository) or the folder's hooks directory, which no layer may write: git run in the mount outside a sandbox would obey or follow them. The shadow was mounted with protectGit (the default). Also a symbolic link whose target would lead the user's programs out of the shadow (to a directory above the folder or \"/\", through /proc or another FUSE file system, to a file with other hard links on the folder's file system, or \"..\" after a name), whatever protectGit says.",
  STATE_CORRUPT:
    'A checkpoint or saved state of the daemon is damaged or was tampered with (a path that leaves its folder, a blob that is not what its id says, a manifest of another agent); it was refused and nothing was changed.',
  // Former names (protocol version 2 and before), kept in the table so a client that names one
  // still knows it; never sent now: the error comes with the new name (FormerErrorCodes).
  LOWER_NOT_FOUND: 'Former name of FOLDER_NOT_FOUND; no longer sent.',
  LOWER_NOT_DIRECTORY: 'Former name of FOLDER_NOT_DIRECTORY; no longer sent.',
  MOUNTPOINT_INSIDE_LOWER: 'Former name of MOUNTPOINT_INSIDE_FOLDER; no longer sent.',
  LOWER_INSIDE_MOUNTPOINT: 'Former name of FOLDER_INSIDE_MOUNTPOINT; no longer sent.',
  INTERNAL: 'An unexpected internal error.',
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

/**
 * Codes renamed by issue #30 ("folder", not the overlay's "lower"), each with its new name. The
 * new name is what is sent; a client that matched the former one should match the new one (or
 * both, to talk to an older daemon too). The former names leave the table in protocol version 3.
 */
export const FormerErrorCodes = {
  LOWER_NOT_FOUND: 'FOLDER_NOT_FOUND',
  LOWER_NOT_DIRECTORY: 'FOLDER_NOT_DIRECTORY',
  MOUNTPOINT_INSIDE_LOWER: 'MOUNTPOINT_INSIDE_FOLDER',
  LOWER_INSIDE_MOUNTPOINT: 'FOLDER_INSIDE_MOUNTPOINT',
} as const satisfies Partial<Record<ErrorCode, ErrorCode>>;

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.prototype.hasOwnProperty.call(ErrorCodes, code);
}

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

/** JSON-RPC error codes. Application errors carry the ShadowError code in `error.data.code`. */
export const RpcErrorCodes = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** A path was absolute, had "..", a NUL byte, or went through a symlink. */
  InvalidPath: -32010,
  /** No shadow with that name or mount point. */
  UnknownShadow: -32011,
  /** No layer for that agent. */
  UnknownAgent: -32012,
  /** The mount, layer or view is in use. */
  Busy: -32013,
  /** A job or the daemon itself ran out of time. */
  Timeout: -32014,
  /** Not available in this version, on this platform, or without the native module. */
  NotSupported: -32015,
  /** An argument other than a path was not valid (a mode, a timeout, an environment entry, ...). */
  InvalidArgument: -32016,
  /** The connection was refused: its other end runs as another user, or inside a run's namespaces. */
  PeerRefused: -32017,
  /** The connection is restricted to one agent's layer (session.restrict) and the request reaches beyond it. */
  ScopeDenied: -32018,
  /** Any other shadowfs error; see error.data.code. */
  Failed: -32000,
} as const;

/** Which JSON-RPC error code a ShadowError code travels as. */
export function rpcCodeFor(code: ErrorCode): number {
  switch (code) {
    case 'INVALID_PATH':
    case 'PATH_THROUGH_SYMLINK':
    case 'INVALID_AGENT':
      return RpcErrorCodes.InvalidPath;
    case 'INVALID_ARGUMENT':
      return RpcErrorCodes.InvalidArgument;
    case 'UNKNOWN_SHADOW':
      return RpcErrorCodes.UnknownShadow;
    case 'UNKNOWN_AGENT':
      return RpcErrorCodes.UnknownAgent;
    case 'MOUNT_BUSY':
    case 'LAYER_BUSY':
      return RpcErrorCodes.Busy;
    case 'TIMEOUT':
      return RpcErrorCodes.Timeout;
    case 'NOT_SUPPORTED':
    case 'NAMESPACE_UNAVAILABLE':
    case 'NATIVE_UNAVAILABLE':
    case 'WINFSP_MISSING':
      return RpcErrorCodes.NotSupported;
    case 'PEER_REFUSED':
      return RpcErrorCodes.PeerRefused;
    case 'SCOPE_DENIED':
      return RpcErrorCodes.ScopeDenied;
    case 'INTERNAL':
      return RpcErrorCodes.InternalError;
    default:
      return RpcErrorCodes.Failed;
  }
}

/** The shape of `error.data` in every error the daemon sends. */
export interface RpcErrorData {
  code: ErrorCode;
  errno?: number;
}
