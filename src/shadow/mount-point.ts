// Where a shadow (or a view of it) is mounted: the mount point made ready by the platform
// module, and on Windows the form of the WinFsp volume, decided before anything is touched.
import * as crypto from 'crypto';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { platform } from '../platform';

export type WindowsVolume = 'network' | 'disk';

/**
 * The network volume prefix for a winfsp mount named `name` ("\shadowfs\<name>-<random>", as WinFsp's VolumeParams.Prefix
 * takes it: one leading backslash): unique per mount, so that no two volumes of this machine claim one UNC name.
 */
export function networkPrefix(name: string): string {
  const clean = name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 48) || 'shadow';
  return `\\shadowfs\\${clean}-${crypto.randomBytes(3).toString('hex')}`;
}

/**
 * The volume form of a winfsp mount at the mount point asked for (see MountOptions.volume; none asked: a drive letter);
 * undefined for other backends and OSes. Decided before the mount point is prepared, so that a refusal touches nothing.
 */
export function volumeFor(
  backend: string,
  mountPoint: string | undefined,
  requested: WindowsVolume | undefined,
): WindowsVolume | undefined {
  if (backend !== 'winfsp') return undefined; // the winfsp backend exists on Windows only
  if (requested !== undefined && requested !== 'network' && requested !== 'disk')
    throw new ShadowError('INVALID_ARGUMENT', `volume must be "network" or "disk", got ${JSON.stringify(requested)}`);
  const drive = mountPoint === undefined || /^[A-Za-z]:\\?$/.test(mountPoint);
  const form = requested ?? (drive ? 'network' : 'disk');
  if (form === 'network' && !drive)
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `a network volume goes on a drive letter (WinFsp cannot put one on a directory such as ${String(mountPoint)}); give a free drive letter, or volume "disk" (realpath then fails in the shadow)`,
    );
  return form;
}

/** Returns the real mount point path and whether we created it (then we remove it on unmount). */
export function prepareMountPoint(requested: string | undefined, folder: string, name?: string): { mountPoint: string; created: boolean } {
  return platform.prepareMountPoint(requested, folder, name ?? (path.basename(folder) || 'root'));
}
