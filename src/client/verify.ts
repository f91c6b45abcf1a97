// The client's check that the process serving the daemon's endpoint runs as this user, made
// before the first byte is sent. Linux: the socket file must be ours, and the kernel's record
// of the listening process (SO_PEERCRED on the connected socket) must name our uid. Windows:
// the pipe server's process (GetNamedPipeServerProcessId) must run as our user's SID; the hello
// proof (client/index.ts) then shows it knows the secret of our endpoint file.
import * as fs from 'fs';
import type * as net from 'net';
import { ShadowError } from '../protocol/errors';
import { peerCredentials } from '../ipc/posix';

export function verifyServer(socket: net.Socket, where: string): void {
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
