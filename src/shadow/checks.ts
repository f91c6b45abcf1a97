// Input checks of the shadow API: every argument is checked here, in TypeScript, before the
// native module sees it (a wrong type reaching C++ is a hard-to-diagnose crash, not an error).
import * as fs from 'fs';
import { ShadowError } from '../common/errors';

/** The longest agent id, in UTF-8 bytes. */
export const AGENT_MAX = 128;

/** The most bytes one Layer.readRange returns (the native module's cap). */
export const MAX_RANGE_BYTES = 64 * 1024 * 1024;

/** The real path of the folder to shadow; FOLDER_NOT_FOUND or FOLDER_NOT_DIRECTORY otherwise. */
export function checkFolder(folder: string): string {
  if (typeof folder !== 'string' || folder === '') throw new ShadowError('FOLDER_NOT_FOUND', 'no folder given to shadow');
  let real: string;
  try {
    real = fs.realpathSync(folder);
  } catch (err) {
    throw new ShadowError('FOLDER_NOT_FOUND', `the folder ${folder} does not exist`, {
      errno: (err as NodeJS.ErrnoException).errno,
      cause: err,
    });
  }
  if (!fs.statSync(real).isDirectory()) throw new ShadowError('FOLDER_NOT_DIRECTORY', `${folder} is not a directory; shadow a folder`);
  return real;
}

export function checkAgent(agentId: unknown): string {
  if (typeof agentId !== 'string' || agentId === '' || Buffer.byteLength(agentId) > AGENT_MAX || /[/\0]/.test(agentId)) {
    throw new ShadowError(
      'INVALID_AGENT',
      `agent id must be a non-empty string of at most ${AGENT_MAX} bytes without "/" or NUL, got ${JSON.stringify(agentId)}`,
    );
  }
  return agentId;
}

/** The bytes of `data`, a Uint8Array's read in place (not copied). */
export function toBuffer(data: string | Uint8Array): Buffer {
  if (typeof data === 'string') return Buffer.from(data);
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  throw new ShadowError('INVALID_ARGUMENT', 'data must be a string or a Uint8Array');
}

export function checkByteCount(what: string, n: number, max: number): void {
  if (!Number.isSafeInteger(n) || n < 0 || n > max)
    throw new ShadowError('INVALID_ARGUMENT', `${what} must be a whole number of bytes from 0 to ${max}, got ${n}`);
}

export function checkMode(mode: number): number {
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777)
    throw new ShadowError('INVALID_ARGUMENT', `mode must be an integer permission mask such as 0o644, got ${mode}`);
  return mode;
}

export function checkSymlinkTarget(target: unknown): string {
  if (typeof target !== 'string' || target === '' || target.includes('\0'))
    throw new ShadowError('INVALID_ARGUMENT', 'a symlink target must be a non-empty string without NUL');
  return target;
}
