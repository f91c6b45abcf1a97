// Paths as agents give them: relative to the project root, or absolute inside it. Agents see
// absolute paths in `pwd` and stack traces (runs and shell sessions run at the folder's own
// path), so an absolute path under the folder, the shadow's mount point or one of this agent's
// views is taken as relative to the root; any other absolute path is INVALID_PATH naming the root.
import * as path from 'path';
import { ShadowError } from '../common/errors';

export interface Roots {
  /** The folder the shadow shows: the root agents see in runs. */
  folder: string;
  /** Other absolute places showing the same root (the shadow's mount point, this agent's views). */
  others: string[];
}

/** `p` relative to the root when it is absolute inside one of `roots` ("." for a root itself); else unchanged. */
export function toRootRelative(p: string, roots: Roots | undefined): string {
  if (!path.posix.isAbsolute(p) && !path.win32.isAbsolute(p)) return p;
  const candidates = roots ? [roots.folder, ...roots.others] : [];
  const norm = path.resolve(p);
  for (const root of candidates) {
    const r = path.resolve(root);
    if (norm === r) return '.';
    const rel = path.relative(r, norm);
    if (rel && !rel.startsWith('..') && !path.isAbsolute(rel)) return rel.split(path.sep).join('/');
  }
  throw new ShadowError(
    'INVALID_PATH',
    roots
      ? `${p} is outside the project; give a path relative to its root ${roots.folder} (an absolute path under it works too)`
      : `${p} is absolute; give a path relative to the project root`,
  );
}
