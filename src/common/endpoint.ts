// Where this user's daemon is: its private state directory (socket or pipe endpoint, state, pid,
// log), and the proofs of the hello handshake by which, on Windows, each end shows it knows the
// secret of the endpoint file (platform/win32-endpoint.ts). Shared by the daemon and the client;
// loads neither the native module nor winston.
import * as crypto from 'crypto';
import * as path from 'path';
import { ShadowError } from './errors';
import { platform } from '../platform';

export interface DaemonPaths {
  /** The private per-user directory (mode 0700 on Linux; %LOCALAPPDATA%\shadowfs on Windows). */
  dir: string;
  /** Linux: the Unix socket. Windows: empty; the pipe's random name is in the endpoint file. */
  socket: string;
  /** Windows: JSON {pipe, pid, secret} written by the daemon once it listens. */
  endpoint: string;
  state: string;
  /** The daemon's pid; created exclusively, so it is also the single-instance lock. */
  pid: string;
  log: string;
}

/** Longest Unix socket path Linux accepts (sun_path is 108 bytes with the terminating NUL). */
const MAX_SOCKET_PATH = 107;

export function daemonPaths(): DaemonPaths {
  const dir = platform.runtimeDir();
  const socket = platform.endpoint.kind === 'socket' ? path.join(dir, 'daemon.sock') : '';
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
    throw new ShadowError(
      'INVALID_PATH',
      `the daemon socket path ${socket} is longer than ${MAX_SOCKET_PATH} bytes; set XDG_RUNTIME_DIR to a shorter directory`,
    );
  }
  return {
    dir,
    socket,
    endpoint: path.join(dir, 'daemon.endpoint'),
    state: path.join(dir, 'state.json'),
    pid: path.join(dir, 'daemon.pid'),
    log: path.join(dir, 'daemon.log'),
  };
}

/** The proofs of the hello handshake: HMAC-SHA256 of the nonce under the shared secret. */
export function proofOf(secret: string, role: 'client' | 'server', nonce: string): string {
  return crypto.createHmac('sha256', Buffer.from(secret, 'hex')).update(`shadowfs-${role}:${nonce}`).digest('hex');
}

export function proofMatches(expected: string, got: string | undefined): boolean {
  if (typeof got !== 'string' || got.length !== expected.length) return false;
  return crypto.timingSafeEqual(Buffer.from(expected), Buffer.from(got));
}
