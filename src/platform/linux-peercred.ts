// Who is at the other end of a connected Unix-domain socket (Linux). The kernel records the
// connecting process's pid, uid and gid when it calls connect(), and SO_PEERCRED reads them
// back, so the daemon can turn away other users' clients without trusting anything a client
// says about itself. libc is reached through ffi-rs, which is required only when a check is
// made: importing this module never fails, on any platform.
import type * as net from 'net';
import { errnoText, LIBC, libc, type LibcResult } from './linux-libc';

export interface PeerCredentials {
  pid: number;
  uid: number;
  gid: number;
}

// The values of <asm-generic/socket.h>, which x86, arm and the other common architectures use.
// Alpha, MIPS, PA-RISC, PowerPC and SPARC number these differently; they are refused below.
const SOL_SOCKET = 1;
const SO_PEERCRED = 17;
const GENERIC_SOCKET_ARCHS = new Set(['x64', 'arm64', 'arm', 'ia32', 'riscv64', 's390x', 'loong64']);
/** struct ucred { pid_t pid; uid_t uid; gid_t gid; }: three 32-bit fields. */
const UCRED_SIZE = 12;

function fail(message: string, errno?: number): Error {
  return Object.assign(new Error(message), { syscall: 'getsockopt', ...(errno !== undefined ? { errno } : {}) });
}

/** The file descriptor behind a net.Socket, or -1 when Node has none for it. */
function socketFd(socket: net.Socket): number {
  const handle = (socket as unknown as { _handle?: { fd?: unknown } | null })._handle;
  return handle && typeof handle.fd === 'number' ? handle.fd : -1;
}

/**
 * The process that connected a Unix-domain socket, as the kernel saw it at connect() time
 * (Linux, SO_PEERCRED). Throws when that cannot be determined: another platform, a socket that
 * is closed or not a Unix-domain one, or a peer in a pid namespace this process cannot see.
 */
export function peerCredentials(socket: net.Socket): PeerCredentials {
  if (process.platform !== 'linux') {
    throw fail(`peer credentials of a socket are read with SO_PEERCRED, which only Linux has (this is ${process.platform})`);
  }
  if (!GENERIC_SOCKET_ARCHS.has(process.arch)) {
    throw fail(`peer credentials: the SO_PEERCRED constants of ${process.arch} are not known to shadowfs`);
  }
  const fd = socketFd(socket);
  if (fd < 0) throw fail('peer credentials: the socket has no file descriptor (it is closed, or not connected yet)');
  const lib = libc('check the peer of a socket');
  const cred = Buffer.alloc(UCRED_SIZE);
  const len = Buffer.alloc(4);
  len.writeUInt32LE(UCRED_SIZE);
  // ffi-rs passes a Buffer (U8Array) as a pointer to its bytes and sees what the call wrote there.
  const r = lib.load({
    library: LIBC,
    funcName: 'getsockopt',
    retType: lib.DataType.I32,
    paramsType: [lib.DataType.I32, lib.DataType.I32, lib.DataType.I32, lib.DataType.U8Array, lib.DataType.U8Array],
    paramsValue: [fd, SOL_SOCKET, SO_PEERCRED, cred, len],
    errno: true,
  }) as unknown as LibcResult;
  if (r.value !== 0) {
    const why = errnoText(r);
    throw fail(`getsockopt(fd ${fd}, SOL_SOCKET, SO_PEERCRED) failed: ${why} (errno ${r.errnoCode})`, r.errnoCode);
  }
  if (len.readUInt32LE(0) !== UCRED_SIZE) {
    throw fail(`getsockopt(SO_PEERCRED) returned ${len.readUInt32LE(0)} bytes, not the ${UCRED_SIZE} of a struct ucred`);
  }
  const creds = { pid: cred.readInt32LE(0), uid: cred.readUInt32LE(4), gid: cred.readUInt32LE(8) };
  // The kernel reports pid 0 when nothing recorded a peer (a TCP socket: its uid and gid then read
  // as the overflow ids, which look like nobody) or when the peer's pid namespace is not ours.
  if (creds.pid <= 0) {
    throw fail(
      `getsockopt(fd ${fd}, SO_PEERCRED) names no process (pid ${creds.pid}): the socket is not a connected ` +
        'Unix-domain socket, or its peer runs in a pid namespace this process cannot see',
    );
  }
  return creds;
}
