// The daemon's endpoint on Windows: a named pipe with an unpredictable name, published with the
// daemon's pid and a secret in the endpoint file of the per-user directory (which only this user,
// SYSTEM and administrators can read). Node exposes no server side of a pipe's client, so a client
// proves in its hello that it read the secret (server.ts); the client checks, before it sends a
// byte, that the pipe is served by the process the file names and that it runs as this user's
// SID, and the hello proof then shows the server knows the secret too.
import * as crypto from 'crypto';
import * as fs from 'fs';
import { ShadowError } from '../protocol/errors';
import type { DaemonFiles, DaemonEndpoint } from './types';
import { currentUserSid, pipeServerProcessId, processUserSid } from './win32-identity';
import { processAlive } from '../common/pid';

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

/**
 * Node gives no handle of its own pipe connection, so the check opens the pipe once more itself
 * (ffi-rs): GetNamedPipeServerProcessId names the serving process, which must be the one the
 * endpoint file names and must run as this user's SID. Without ffi-rs the hello proof alone
 * vouches for the daemon.
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

export const pipeEndpoint: DaemonEndpoint = {
  kind: 'pipe',
  newSecret,
  async listen(files: DaemonFiles, secret: string, listen: (where: string) => Promise<void>): Promise<string> {
    // A random name nobody can predict; libuv creates the first instance exclusively, so a name
    // somebody holds already fails with EADDRINUSE: then take another.
    let pipe = '';
    for (let attempt = 0; ; attempt++) {
      pipe = newPipeName();
      try {
        await listen(pipe);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 4) throw err;
      }
    }
    writeEndpoint(files.endpoint, { pipe, pid: process.pid, secret });
    return pipe;
  },
  // An endpoint file whose daemon is dead names a pipe anybody may have created since: it counts
  // as no daemon (a new one is started, and publishes its own), and is never connected to.
  locate(files: DaemonFiles) {
    const e = readEndpoint(files.endpoint);
    return e && processAlive(e.pid) ? { where: e.pipe, secret: e.secret, pid: e.pid } : undefined;
  },
  describe: (files) => `the pipe named in ${files.endpoint}`,
  ownFiles: (files) => (readEndpoint(files.endpoint)?.pid === process.pid ? [files.endpoint] : []),
  refusePeer: () => undefined,
  verifyServer: (_socket, where, daemonPid) => verifyPipeServer(where, daemonPid),
};
