// Errors that reach users: every one carries a machine-readable `code` and a sentence that
// says what to do. The codes live in the protocol (src/protocol/errors.ts); this module says
// what the native module's errno-style errors mean, in one place: NATIVE_ERRNOS for what an
// errno means whatever the operation, and a table per operation (src/shadow/errnos.ts) for the
// few that mean something of their own there. fromNative is the one function that reads them.

import { type ErrorCode, ShadowError } from '../protocol/errors';
export { ErrorCodes, ShadowError, isErrorCode } from '../protocol/errors';
export type { ErrorCode } from '../protocol/errors';

/** What one errno means: the code users get, and the sentence given what was being done and the native module's own message. */
export interface ErrnoMeaning {
  code: ErrorCode;
  say: (what: string, native: string | undefined, err: unknown) => string;
}

/**
 * An operation's errno meanings, by errno name ("EBUSY"), over NATIVE_ERRNOS; "*" for every
 * errno the table does not name (NATIVE_ERRNOS then means nothing for the operation).
 */
export type ErrnoTable = Readonly<Record<string, ErrnoMeaning>>;

/** What each errno the native module reports means for any operation on a shadow. */
export const NATIVE_ERRNOS: ErrnoTable = {
  ENOENT: { code: 'NOT_FOUND', say: (what) => `${what}: no such file or directory in the shadow` },
  EISDIR: { code: 'IS_DIRECTORY', say: (what) => `${what}: is a directory` },
  ENOTDIR: { code: 'NOT_A_DIRECTORY', say: (what) => `${what}: a component of the path is not a directory` },
  ELOOP: { code: 'PATH_THROUGH_SYMLINK', say: (what) => `${what}: the path goes through a symbolic link; name the real path instead` },
  // The native message says how big the file is and what the limit is.
  EFBIG: { code: 'FILE_TOO_LARGE', say: (what, native) => `${what}: ${native ?? 'the file is too large to read whole'}` },
  ENOTCONN: { code: 'NOT_MOUNTED', say: (what) => `${what}: the shadow is not mounted any more` },
  EBUSY: { code: 'MOUNT_BUSY', say: (what) => `${what}: busy` },
  // Said in no one interface's words: CLI users, RPC and MCP clients and the library all read it.
  ENXIO: {
    code: 'UNKNOWN_AGENT',
    say: (what) =>
      `${what}: that agent has no layer yet (check the agent name); its layer is made when it first writes, edits or runs something`,
  },
  EXDEV: {
    code: 'CONFLICT',
    say: (what) =>
      `${what}: it lies under a directory the layer deleted, replaced or moved; only that whole directory can go back to the folder`,
  },
  EACCES: {
    code: 'PATH_MASKED',
    say: (what) =>
      `${what}: the path is masked for this agent (shadowfs mask), or holds masked paths: it cannot be made or deleted; the user decides what agents see`,
  },
  EPERM: {
    code: 'PATH_PROTECTED',
    say: (what) =>
      `${what}: git's control files (.git itself, a repository's config, hooks, commondir, objects/info/alternates, bare repositories' included; the last of HEAD, objects and refs, which would make a directory a repository; links and special files beneath a .git or a bare repository) and the folder's hooks directory are read-only in a shadow: git run in the mount would obey or follow them`,
  },
  EROFS: { code: 'NO_ACTIVE_LAYER', say: (what) => `${what}: no layer is active, the shadow shows the folder read-only` },
};

// The addon marks the EINVALs that are about the path itself; the others (e.g. writing over a
// fifo or a device, which holds no file content) are about the request.
const EINVAL_PATH: ErrnoMeaning = {
  code: 'INVALID_PATH',
  say: (what) => `${what}: invalid path; give a path relative to the shadow root`,
};
const EINVAL_REQUEST: ErrnoMeaning = {
  code: 'INVALID_ARGUMENT',
  say: (what) => `${what}: the request does not fit what is there (not a regular file, or an invalid argument)`,
};

/**
 * The ShadowError for an errno-style error of the native module met while doing `what`: the
 * operation's own meaning of its errno (`table`), else the shared one, else INTERNAL.
 */
export function fromNative(err: unknown, what: string, table: ErrnoTable = {}): ShadowError {
  const e = err as { code?: string; errno?: number; message?: string; invalidPath?: unknown };
  const errno = typeof e.errno === 'number' ? e.errno : undefined;
  const name = typeof e.code === 'string' ? e.code : '';
  const own = Object.prototype.hasOwnProperty.call(table, name) ? table[name] : undefined;
  const shared = Object.prototype.hasOwnProperty.call(NATIVE_ERRNOS, name) ? NATIVE_ERRNOS[name] : undefined;
  const einval = name === 'EINVAL' ? (e.invalidPath === true ? EINVAL_PATH : EINVAL_REQUEST) : undefined;
  const meaning = own ?? table['*'] ?? shared ?? einval;
  if (meaning) return new ShadowError(meaning.code, meaning.say(what, e.message, err), { errno, cause: err });
  // The native message already names the operation ("cannot copy layer a to b: ..."), so it is
  // not prefixed with `what` again.
  return new ShadowError(
    'INTERNAL',
    `${e.message ?? `${what}: ${String(err)}`}; this is unexpected: please report it with the daemon log ("shadowfs status" shows where it is)`,
    { errno, cause: err },
  );
}
