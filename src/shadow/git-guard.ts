// The paths of a folder that no layer may write besides git's control files (which the native
// core refuses by name, native/core/write_guard.h): what the folder's own git configuration makes
// git read or run from inside the folder, found once at mount by asking git:
// - its hooks directory, when core.hooksPath puts it inside the folder (husky's `.husky/_`), and
//   where a symbolic link leads from there or from a hook (`.git/hooks/pre-commit ->
//   ../../scripts/pre-commit.sh`);
// - configuration files it includes from inside the folder (`include.path = ../.gitconfig`);
// - a git directory inside the folder that is not called `.git` (`gitdir: .repo`): its config,
//   config.worktree, commondir, hooks and objects/info/alternates.
// Any of them changed by an agent would run as the developer the next time they use git in the
// mount. Read-only: `git config` and `git rev-parse` run no hook and no fsmonitor.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
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
    return execFileSync('git', ['-C', folder, ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000,
      windowsHide: true,
      maxBuffer: 16 << 20,
    });
  } catch {
    return undefined; // no git, not a repository, or no such setting
  }
}

/** `p` and, when it is a symbolic link or lies under one, where it really is. */
function withRealPath(p: string): string[] {
  try {
    const real = fs.realpathSync(p);
    return real === p ? [p] : [p, real];
  } catch {
    return [p];
  }
}

/** The folder's git directory and common directory, absolute, where they are not called `.git`. */
function otherGitDirs(folder: string): string[] {
  const gitDir = git(folder, ['rev-parse', '--absolute-git-dir'])?.trim();
  const commonRel = git(folder, ['rev-parse', '--git-common-dir'])?.trim();
  const dirs = [gitDir, commonRel === undefined ? undefined : path.resolve(folder, commonRel)];
  return dirs.filter((d): d is string => d !== undefined && d !== '' && path.basename(d) !== '.git');
}

/**
 * The git directories inside the folder not called `.git` (`gitdir: .repo`), relative to it: the core refuses links and
 * special files beneath them as beneath a `.git` (native/core/write_guard.h, refusesSpecial).
 */
export function folderGitDirs(folder: string): string[] {
  const out = new Set<string>();
  for (const d of otherGitDirs(folder)) {
    for (const p of withRealPath(d)) {
      if (!isInside(p, folder)) continue;
      const rel = path.relative(folder, p);
      if (rel !== '') out.add(rel.split(path.sep).join('/'));
    }
  }
  return [...out];
}

/**
 * Anchored globs (mask syntax) for what the folder's git configuration makes git read or run from inside the folder
 * (see the top of this file); none when the folder is no repository, or git is missing.
 */
export function folderGitGlobs(folder: string): string[] {
  const top = git(folder, ['rev-parse', '--show-toplevel'])?.trim();
  if (!top) return [];
  const out = new Set<string>();
  const add = (abs: string, whole = true): void => {
    for (const p of withRealPath(abs)) {
      if (!isInside(p, folder)) continue;
      const rel = path.relative(folder, p);
      if (rel === '') {
        // The folder itself: refusing everything would refuse every write; its hook names only.
        if (whole) for (const h of HOOK_NAMES) out.add('/' + h);
      } else out.add(anchored(rel));
    }
  };
  // The git directories, when one inside the folder is not a `.git` (the core refuses those).
  const gitDir = git(folder, ['rev-parse', '--absolute-git-dir'])?.trim();
  for (const d of otherGitDirs(folder)) {
    for (const name of ['config', 'config.worktree', 'commondir', 'hooks', 'objects/info/alternates']) add(path.join(d, name), false);
  }
  // The hooks directory git uses, and where links lead from it and from the hooks in it.
  const hooksPath = git(folder, ['config', '--type=path', '--get', 'core.hooksPath'])?.trim();
  const hooksDir = hooksPath ? path.resolve(top, hooksPath) : gitDir ? path.join(gitDir, 'hooks') : undefined;
  if (hooksDir) {
    if (hooksPath) add(hooksDir);
    else for (const p of withRealPath(hooksDir).slice(1)) add(p); // a .git/hooks that is a link
    let names: string[] = [];
    try {
      names = fs.readdirSync(hooksDir);
    } catch {
      // no such directory (yet)
    }
    for (const n of names) {
      const p = path.join(hooksDir, n);
      try {
        if (fs.lstatSync(p).isSymbolicLink()) add(fs.realpathSync(p));
      } catch {
        // a dangling link leads nowhere
      }
    }
  }
  // Configuration files git includes from inside the folder: every file it reads now, and every
  // file an include names, whatever its condition (includeIf onbranch:, gitdir:, hasconfig:) and
  // whether or not it exists or holds anything yet. -z: "file:<path>\0<key>\n<value>\0", an
  // origin relative to the top, an include's path relative to the file that names it.
  const entries = (args: string[]): Array<{ origin: string; key: string; value: string }> => {
    const fields = (git(folder, ['config', '--show-origin', '--includes', '-z', ...args]) ?? '').split('\0');
    const list: Array<{ origin: string; key: string; value: string }> = [];
    for (let i = 0; i + 1 < fields.length; i += 2) {
      if (!fields[i].startsWith('file:')) continue;
      const nl = fields[i + 1].indexOf('\n');
      list.push({
        origin: path.resolve(top, fields[i].slice(5)),
        key: nl < 0 ? fields[i + 1] : fields[i + 1].slice(0, nl),
        value: nl < 0 ? '' : fields[i + 1].slice(nl + 1),
      });
    }
    return list;
  };
  for (const e of entries(['--list'])) add(e.origin, false);
  for (const e of entries(['--get-regexp', '^include(if\\..*)?\\.path$'])) {
    if (e.value !== '' && !e.value.startsWith('~')) add(path.resolve(path.dirname(e.origin), e.value), false);
  }
  return [...out];
}
