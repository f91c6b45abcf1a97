// The client's check that the process serving the daemon's endpoint runs as this user, made
// before the first byte is sent. Linux: the socket file must be ours, and the kernel's record
// of the listening process (SO_PEERCRED on the connected socket) must name our uid. Windows:
// the pipe server's process (GetNamedPipeServerProcessId) must run as our user's SID; the hello
// proof (client/index.ts) then shows it knows the secret of our endpoint file.
import * as fs from 'fs';
import type * as net from 'net';
import { ShadowError } from '../protocol/errors';
import { peerCredentials } from '../platform/linux-peercred';
import { currentUserSid, pipeServerProcessId, processUserSid } from '../platform/win32-identity';

/**
 * Throws PEER_REFUSED when the process serving `where` is not this user's. `daemonPid`
 * (Windows) is the pid the endpoint file names.
 */
export function verifyServer(socket: net.Socket, where: string, daemonPid?: number): void {
  if (process.platform === 'win32') {
    verifyPipeServer(where, daemonPid);
    return;
  }
  if (process.platform === 'linux') {
    const me = process.getuid?.();
    let owner: number | undefined;
    try {
      owner = fs.lstatSync(where).uid;
    } catch {
      // an abstract or vanished socket: the peer check below decides
    }
    if (owner !== undefined && owner !== me) {
      throw new ShadowError(
        'PEER_REFUSED',
        `the daemon socket ${where} belongs to uid ${owner}, not to you (uid ${me}); refusing to use it`,
      );
    }
    let uid: number;
    try {
      uid = peerCredentials(socket).uid;
    } catch {
      return; // ffi-rs unavailable: the socket's owner and its private directory already vouch
    }
    if (uid !== me)
      throw new ShadowError('PEER_REFUSED', `the process serving ${where} runs as uid ${uid}, not as you (uid ${me}); refusing to use it`);
  }
}

/**
 * Windows: Node gives no handle of its own pipe connection, so the check opens the pipe once
 * more itself (ffi-rs): GetNamedPipeServerProcessId names the serving process, which must be
 * the one the endpoint file names and must run as this user's SID. Without ffi-rs the hello
 * proof alone vouches for the daemon.
 */
function verifyPipeServer(pipe: string, daemonPid: number | undefined): void {
  let pid: number;
  let mine: string;
  try {
    mine = currentUserSid();
    pid = pipeServerProcessId(pipe);
  } catch (err) {
    if (/ffi-rs/.test((err as Error).message)) return;
    throw new ShadowError('PEER_REFUSED', `cannot tell which process serves ${pipe}: ${(err as Error).message}`, { cause: err });
  }
  if (daemonPid !== undefined && pid !== daemonPid) {
    throw new ShadowError(
      'PEER_REFUSED',
      `${pipe} is served by process ${pid}, not by the daemon (pid ${daemonPid}) that published it; refusing to use it`,
    );
  }
  let theirs: string;
  try {
    theirs = processUserSid(pid);
  } catch (err) {
    throw new ShadowError('PEER_REFUSED', `cannot tell which user runs process ${pid}, which serves ${pipe}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (theirs !== mine)
    throw new ShadowError(
      'PEER_REFUSED',
      `${pipe} is served by a process of another user (${theirs}; you are ${mine}); refusing to use it`,
    );
}
