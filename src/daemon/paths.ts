// Where the daemon keeps its socket, state, pid and log: one private directory per user (mode
// 0700, under XDG_RUNTIME_DIR or a per-uid directory in the temp dir). Only the owning user can
// reach the socket, because only they can enter the directory.
import * as path from 'path';
import { ShadowError } from '../errors';
import { runtimeDir } from '../platform';

export interface DaemonPaths {
  dir: string;
  socket: string;
  state: string;
  pid: string;
  log: string;
}

/** Longest Unix socket path Linux accepts (sun_path is 108 bytes with the terminating NUL). */
const MAX_SOCKET_PATH = 107;

export function daemonPaths(): DaemonPaths {
  const dir = runtimeDir();
  const socket = process.platform === 'win32' ? `\\\\.\\pipe\\shadowfs-${process.env.USERNAME ?? 'user'}` : path.join(dir, 'daemon.sock');
  if (process.platform !== 'win32' && Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
    throw new ShadowError(
      'INVALID_PATH',
      `the daemon socket path ${socket} is longer than ${MAX_SOCKET_PATH} bytes; set XDG_RUNTIME_DIR to a shorter directory`,
    );
  }
  return { dir, socket, state: path.join(dir, 'state.json'), pid: path.join(dir, 'daemon.pid'), log: path.join(dir, 'daemon.log') };
}
