// Where this user's daemon is: its private state directory (socket or pipe endpoint, state, pid,
// log) and, on Windows, the endpoint file through which a client finds the daemon's named pipe
// and the secret both use to prove they run as this user. Shared by the daemon and the client;
// loads neither the native module nor winston.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from './errors';
import { runtimeDir } from './platform';

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
  const dir = runtimeDir();
  const socket = process.platform === 'win32' ? '' : path.join(dir, 'daemon.sock');
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

/** What a Windows daemon publishes in its endpoint file. */
export interface Endpoint {
  /** \\.\pipe\shadowfs-<random>: unpredictable, so nobody can take the name first. */
  pipe: string;
  pid: number;
  /** 32 random bytes, hex: readable only by this user (and administrators). */
  secret: string;
}

export function newPipeName(): string {
  return `\\\\.\\pipe\\shadowfs-${crypto.randomBytes(16).toString('hex')}`;
}

export function newSecret(): string {
  return crypto.randomBytes(32).toString('hex');
}

export function writeEndpoint(file: string, e: Endpoint): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(e), { mode: 0o600 });
  fs.renameSync(tmp, file);
}

export function readEndpoint(file: string): Endpoint | undefined {
  try {
    const e = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Endpoint>;
    if (
      typeof e.pipe === 'string' &&
      /^\\\\\.\\pipe\\shadowfs-[0-9a-f]{32}$/.test(e.pipe) &&
      typeof e.secret === 'string' &&
      Number.isInteger(e.pid)
    )
      return e as Endpoint;
  } catch {
    // none, or half written: treated as no daemon
  }
  return undefined;
}

/** The proofs of the hello handshake: HMAC-SHA256 of the nonce under the shared secret. */
export function proofOf(secret: string, role: 'client' | 'server', nonce: string): string {
  return crypto.createHmac('sha256', Buffer.from(secret, 'hex')).update(`shadowfs-${role}:${nonce}`).digest('hex');
}

export function proofMatches(expected: string, got: string | undefined): boolean {
  if (typeof got !== 'string' || got.length !== expected.length) return false;
  return crypto.timingSafeEqual(Buffer.from(expected), Buffer.from(got));
}
