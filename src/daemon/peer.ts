// Which connections the daemon serves: only those of processes running as its own user.
// Linux: the kernel's record of the connecting process (SO_PEERCRED), checked at accept, before
// a byte is read. Windows: Node does not expose the server side of a named pipe (so the
// client's process id cannot be asked for); there the client must prove in its hello that it
// can read the secret in the per-user endpoint file (see server.ts).
import type * as net from 'net';
import { peerCredentials } from '../ipc/posix';

/** Why the connection is refused, or undefined when it comes from this user. */
export function checkPeer(socket: net.Socket): string | undefined {
  if (process.platform !== 'linux') return undefined;
  let uid: number;
  try {
    uid = peerCredentials(socket).uid;
  } catch (err) {
    return `cannot tell which user connected (${(err as Error).message}), so the connection is refused`;
  }
  const mine = process.getuid?.();
  if (uid !== mine) return `the connecting process runs as uid ${uid}, and this daemon serves only uid ${mine}`;
  return undefined;
}
