// Mounts on Windows: where WinFsp is installed, and mount points by WinFsp's rules.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { checkNesting } from './common';

const DRIVE_ROOT = /^[A-Za-z]:\\?$/;

/** A drive letter mount point ("X:" or "X:\\"). */
export function isDriveRoot(p: string): boolean {
  return DRIVE_ROOT.test(p);
}

/**
 * Where WinFsp is installed, as its installer records it (HKLM\SOFTWARE\WOW6432Node\WinFsp, value
 * InstallDir), when its DLL is there; undefined when it is not installed.
 */
export function winfspInstallDir(): string | undefined {
  if (process.platform !== 'win32') return undefined;
  let out = '';
  try {
    out = execFileSync('reg', ['query', 'HKLM\\SOFTWARE\\WOW6432Node\\WinFsp', '/v', 'InstallDir'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      windowsHide: true,
    });
  } catch {
    return undefined; // no such key: not installed
  }
  const m = /InstallDir\s+REG_[A-Z_]+\s+(.+)/.exec(out);
  if (!m) return undefined;
  const dir = m[1].trim();
  return fs.existsSync(path.join(dir, 'bin', 'winfsp-x64.dll')) ? dir : undefined;
}

/**
 * Windows mount points, by WinFsp's rules (its mount.c; research note §4.1): a drive letter ("X:" or "X:\\", given back as "X:\\"), which must be free
 * (WinFsp defines it for the mounting logon session and removes it with the volume), or a directory that does not
 * exist yet and whose parent does (WinFsp creates it as a junction to the volume, refuses one that exists, and removes
 * it at unmount; an existing empty one is removed here first, a non-empty one refused). Nothing is created here but
 * the parent; `created` says WinFsp will create (and remove) the directory. Without a request: the highest free drive
 * letter, Z: down to D: as WinFsp itself picks one, since only a drive letter can hold the network volume on which
 * realpath works (see MountOptions.volume in shadow.ts). The same rules hold at every resume after an idle suspend:
 * the directory is WinFsp's to make again, the drive letter must still be free.
 */
export function prepareWin32MountPoint(
  requested: string | undefined,
  folder: string,
  name: string,
): { mountPoint: string; created: boolean } {
  if (requested === undefined) {
    const letter = 'ZYXWVUTSRQPONMLKJIHGFED'.split('').find((l) => !fs.existsSync(`${l}:\\`));
    if (!letter)
      throw new ShadowError(
        'MOUNTPOINT_IN_USE',
        `every drive letter from D: to Z: is in use, so ${name} has nowhere to mount by default; unmount a shadow, or give a directory that does not exist yet as the mount point (realpath does not work there)`,
      );
    return { mountPoint: `${letter}:\\`, created: false };
  }
  if (isDriveRoot(requested)) {
    // Given back as the drive's root ("X:\\"): "X:" alone is the current directory on drive X, so
    // path.join("X:", "src") would name "X:src", relative to it.
    const letter = requested.slice(0, 2).toUpperCase();
    if (fs.existsSync(`${letter}\\`))
      throw new ShadowError('MOUNTPOINT_IN_USE', `the drive ${letter} is in use; pick a free drive letter or a new directory`);
    return { mountPoint: `${letter}\\`, created: false };
  }
  const probe = path.resolve(requested);
  checkNesting(folder, probe, probe);
  const st = fs.lstatSync(probe, { throwIfNoEntry: false });
  if (st) {
    if (!st.isDirectory()) throw new ShadowError('MOUNTPOINT_NOT_DIRECTORY', `the mount point ${probe} exists and is not a directory`);
    if (fs.readdirSync(probe).length > 0)
      throw new ShadowError(
        'MOUNTPOINT_NOT_EMPTY',
        `the mount point ${probe} is not empty; give a new directory (WinFsp creates it) or a drive letter`,
      );
    fs.rmdirSync(probe); // WinFsp mounts only where nothing is
  }
  fs.mkdirSync(path.dirname(probe), { recursive: true });
  return { mountPoint: probe, created: true };
}
