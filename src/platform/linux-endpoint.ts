// The daemon's endpoint on Linux: a Unix socket (mode 0600) in the private runtime directory.
// The kernel names the process at either end (SO_PEERCRED), so the daemon refuses other users and
// runs at accept (linux-peer.ts) and the client checks the server before it sends a byte; no
// secret is needed.
import * as fs from 'fs';
import type * as net from 'net';
import { ShadowError } from '../protocol/errors';
import { checkPeer } from './linux-peer';
import { peerCredentials } from './linux-peercred';
import type { DaemonFiles, DaemonEndpoint } from './types';

/**
 * The socket file must be ours, and the kernel's record of the listening process (SO_PEERCRED on
 * the connected socket) must name our uid.
 */
function verifyServer(socket: net.Socket, where: string): void {
  if (process.platform !== 'linux') return;
  const me = process.getuid?.();
  let owner: number | undefined;
  try {
    owner = fs.lstatSync(where).uid;
  } catch {
    // an abstract or vanished socket: the peer check below decides
  }
  if (owner !== undefined && owner !== me) {
    throw new ShadowError('PEER_REFUSED', `the daemon socket ${where} belongs to uid ${owner}, not to you (uid ${me}); refusing to use it`);
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

export const socketEndpoint: DaemonEndpoint = {
  kind: 'socket',
  newSecret: () => '',
  async listen(files: DaemonFiles, _secret: string, listen: (where: string) => Promise<void>): Promise<string> {
    try {
      fs.unlinkSync(files.socket); // stale socket of a daemon that is gone (the caller holds the lock)
    } catch {
      // none
    }
    await listen(files.socket);
    fs.chmodSync(files.socket, 0o600);
    return files.socket;
  },
  locate: (files) => ({ where: files.socket }),
  describe: (files) => files.socket,
  ownFiles: (files) => [files.socket],
  refusePeer: checkPeer,
  verifyServer,
};
