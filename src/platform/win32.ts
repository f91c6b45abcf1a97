// The Windows platform: per-user directories under %LOCALAPPDATA%, WinFsp mount points, a named
// pipe with an endpoint file, and Job Objects for process trees. There is no mount table to read
// and no stale mount to detach: WinFsp removes a volume when its process ends.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import type { Platform } from './types';
import { isDriveRoot, prepareWin32MountPoint } from './win32-mounts';
import { win32Processes } from './win32-processes';
import { pipeEndpoint } from './win32-endpoint';

/**
 * %LOCALAPPDATA%\shadowfs, which inherits the profile's access list (this user, SYSTEM and
 * administrators only): the daemon's endpoint file, state and log.
 */
function runtimeDir(): string {
  const local = process.env.LOCALAPPDATA;
  if (!local) throw new ShadowError('INTERNAL', 'LOCALAPPDATA is not set, so there is no per-user directory for the daemon');
  const dir = path.join(local, 'shadowfs');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** $SHADOWFS_STATE_DIR, else %LOCALAPPDATA%\shadowfs\state. */
function stateDir(): string {
  const dir = process.env.SHADOWFS_STATE_DIR || path.join(runtimeDir(), 'state');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

export const win32: Platform = {
  name: 'win32',
  caseInsensitiveNames: true,
  nameSeparators: /[/\\\0]/,
  namespaces: false,
  runtimeDir,
  stateDir,
  configDir: () => process.env.APPDATA ?? path.join(os.homedir(), 'AppData', 'Roaming'),
  mountTable: () => [],
  // WinFsp is checked by the native module when it loads (WINFSP_MISSING).
  checkMountable: () => undefined,
  prepareMountPoint: prepareWin32MountPoint,
  // WinFsp makes a directory mount point itself and refuses one that exists (it removed it at
  // suspend; the backend removes an empty one left there), and a drive letter is no directory at
  // all: nothing is made.
  remakeMountPoint: () => undefined,
  isDriveRoot,
  // Nothing outlives the process that served it (mountTable() lists nothing to detach).
  forceUnmount: async () => false,
  endpoint: pipeEndpoint,
  processes: win32Processes,
};
