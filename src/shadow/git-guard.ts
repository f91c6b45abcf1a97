// The paths of a folder that no layer may write besides git's control files (which the native
// core refuses by name, native/core/write_guard.h): the folder's own hooks directory when its
// git configuration puts it inside the folder (core.hooksPath, as husky sets it: `.husky/_`).
// A hook there would run as the developer the next time they use git in the mount.
import { execFileSync } from 'child_process';
import * as path from 'path';
import { isInside } from '../platform';

// git's hook names (githooks(5)), for a hooks directory that is the folder's root itself, where
// refusing everything would refuse every write.
const HOOK_NAMES = [
  'applypatch-msg',
  'pre-applypatch',
  'post-applypatch',
  'pre-commit',
  'pre-merge-commit',
  'prepare-commit-msg',
  'commit-msg',
  'post-commit',
  'pre-rebase',
  'post-checkout',
  'post-merge',
  'pre-push',
  'pre-receive',
  'update',
  'proc-receive',
  'post-receive',
  'post-update',
  'reference-transaction',
  'push-to-checkout',
  'pre-auto-gc',
  'post-rewrite',
  'sendemail-validate',
  'fsmonitor-watchman',
  'p4-changelist',
  'p4-prepare-changelist',
  'p4-post-changelist',
  'p4-pre-submit',
  'post-index-change',
];

/** A path as an anchored glob of the mask syntax (native/core/mask.h): "/" + the path, its glob characters escaped. */
function anchored(rel: string): string {
  return (
    '/' +
    rel
      .split(path.sep)
      .join('/')
      .replace(/[\\*?[\]]/g, (c) => '\\' + c)
  );
}

function git(folder: string, args: string[]): string | undefined {
  try {
    // Reads only: `git config --get` and `rev-parse` run no hook and no fsmonitor.
    return execFileSync('git', ['-C', folder, ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000,
      windowsHide: true,
    }).trim();
  } catch {
    return undefined; // no git, not a repository, or no such setting
  }
}

/**
 * Anchored globs for the folder's hooks directory when core.hooksPath (as git resolves it for the folder: its own, the
 * user's and the system's configuration) lies inside the folder; none when it is unset or elsewhere, or git is missing.
 */
export function folderHooksGlobs(folder: string): string[] {
  const hooksPath = git(folder, ['config', '--type=path', '--get', 'core.hooksPath']);
  if (!hooksPath) return [];
  // A relative hooksPath is relative to the work tree's top (where git runs hooks from).
  const top = git(folder, ['rev-parse', '--show-toplevel']) ?? folder;
  const dir = path.resolve(top, hooksPath);
  if (!isInside(dir, folder)) return [];
  const rel = path.relative(folder, dir);
  return rel === '' ? HOOK_NAMES.map((h) => '/' + h) : [anchored(rel)];
}
