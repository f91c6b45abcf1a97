// Git for getting work out: which of a layer's paths the folder's repository ignores, and an
// agent's commits brought into the folder's repository as one new branch by git's own object
// transfer (`git fetch` run in the folder, from a mount that shows the agent's layer).
//
// The agent's repository is hostile: its .git/config, hooks and refs are whatever the agent wrote.
// Git runs only in the folder's repository (the user's own configuration), with a clean
// environment, hooks off and no automatic maintenance; the agent's side is read by the
// `git-upload-pack` that fetch starts for a local path. What of the agent's configuration that
// upload-pack could act on was checked (git 2.39 source and by test/git-integrity.test.ts):
// - `uploadpack.packObjectsHook` is honoured only from protected (system, global, command line)
//   configuration, never from the repository's own.
// - The `-c` settings given to fetch do not reach upload-pack (git drops GIT_CONFIG_PARAMETERS and
//   GIT_DIR for a local transport's child), and upload-pack is started by the name fetch's own
//   (the folder's) configuration gives, never by the remote's.
// - upload-pack and pack-objects read no index (so no `core.fsmonitor`), run no hooks, no filters,
//   pager, editor, credential helper or ssh command (`core.sshCommand` is for the fetching side
//   and only for ssh URLs); `core.alternateRefsCommand` runs on the fetching side for the
//   folder's own alternates only.
// - What arrives is checked (`transfer.fsckObjects`) before the folder's repository keeps it.
// - A `.git` that is not a directory (a "gitdir:" file could point anywhere) is refused.
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import type { Shadow } from '../shadow';

export interface GitResult {
  code: number;
  stdout: Buffer;
  stderr: string;
}

/** The caller's environment without any GIT_* variable (GIT_DIR, GIT_INDEX_FILE, GIT_CONFIG_*…). */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^GIT_/i.test(k)) env[k] = v;
  env.GIT_TERMINAL_PROMPT = '0';
  return env;
}

/** Settings every git run here gets: no hooks, no fsmonitor, no background maintenance. */
const SAFE = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'gc.auto=0', '-c', 'maintenance.auto=false'];

/** Runs git in `cwd` off the event loop; never throws for a non-zero exit (see `code`). */
export function runGit(cwd: string, args: string[], input?: Buffer): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', [...SAFE, ...args], { cwd, env: cleanEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.stdin.on('error', () => undefined); // git may exit before reading everything (not a repository)
    child.on('error', (e) => reject(new ShadowError('NOT_SUPPORTED', `git could not be started (is it on PATH?): ${e.message}`)));
    child.on('close', (code) => resolve({ code: code ?? -1, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString('utf8') }));
    child.stdin.end(input ?? Buffer.alloc(0));
  });
}

/**
 * Which of `paths` (relative to `folder`; a trailing "/" marks a directory) git ignores in the
 * folder's repository, by `git check-ignore` (tracked files are never ignored). Empty when the
 * folder is not in a git repository. The folder's ignore rules decide, not the layer's.
 */
export async function ignoredPaths(folder: string, paths: string[]): Promise<Set<string>> {
  const out = new Set<string>();
  if (!paths.length) return out;
  const check = async (list: string[]): Promise<boolean> => {
    const r = await runGit(folder, ['check-ignore', '--stdin', '-z'], Buffer.from(list.map((p) => `${p}\0`).join('')));
    // 0: some ignored; 1: none; anything else: git refused the list (128).
    if (r.code !== 0 && r.code !== 1) return false;
    for (const p of r.stdout.toString('utf8').split('\0')) if (p) out.add(p);
    return true;
  };
  if (await check(paths)) return out;
  // Not a repository: nothing is ignored. Else git refused one of the paths (one beyond a
  // symbolic link, one inside a submodule) and with it the whole list, which must not make
  // every other ignored file count as not ignored: the list is halved until the paths git
  // refuses stand alone (those count as not ignored).
  const repo = await runGit(folder, ['rev-parse', '--is-inside-work-tree']);
  if (repo.code !== 0) return out;
  const halve = async (list: string[]): Promise<void> => {
    if ((await check(list)) || list.length < 2) return;
    const mid = list.length >> 1;
    await halve(list.slice(0, mid));
    await halve(list.slice(mid));
  };
  const mid = paths.length >> 1;
  await halve(paths.slice(0, mid));
  await halve(paths.slice(mid));
  return out;
}

export interface BranchResult {
  name: string;
  /** The commit the branch points to now (the agent's HEAD). */
  commit: string;
  /** What the branch pointed to before (only with force), or null when it is new. */
  previous: string | null;
}

/** The folder must be the top of a git repository whose .git is a directory. */
async function checkFolderRepo(folder: string): Promise<void> {
  const top = await runGit(folder, ['rev-parse', '--show-toplevel']);
  const topDir = top.code === 0 ? top.stdout.toString('utf8').trim() : '';
  if (!topDir || fs.realpathSync(topDir) !== fs.realpathSync(folder))
    throw new ShadowError(
      'NOT_SUPPORTED',
      `${folder} is not the top folder of a git repository, so the agent's commits cannot come back as a branch; apply the files without --branch`,
    );
}

async function refOf(folder: string, ref: string): Promise<string | null> {
  const r = await runGit(folder, ['rev-parse', '-q', '--verify', `${ref}^{commit}`]);
  return r.code === 0 ? r.stdout.toString('utf8').trim() : null;
}

/**
 * Brings the commits of `agent`'s HEAD into the folder's repository as branch `name`: only new
 * objects and that one ref are written (no FETCH_HEAD, no reflog, no tags, no maintenance); the
 * folder's HEAD, index, work tree and other refs stay as they are. An existing branch is
 * BRANCH_EXISTS unless `force`; the branch checked out in the folder is never moved.
 */
export async function fetchAgentBranch(
  shadow: Shadow,
  agent: string,
  name: string,
  opts: { force?: boolean; dryRun?: boolean } = {},
): Promise<BranchResult> {
  const folder = shadow.folder;
  const fmt = await runGit(folder, ['check-ref-format', '--branch', name]);
  if (fmt.code !== 0 || name.startsWith('-'))
    throw new ShadowError('INVALID_ARGUMENT', `${JSON.stringify(name)} is not a valid branch name (see "git check-ref-format --branch")`);
  await checkFolderRepo(folder);
  const ref = `refs/heads/${name}`;
  const previous = await refOf(folder, ref);
  if (previous !== null) {
    const head = await runGit(folder, ['symbolic-ref', '-q', 'HEAD']);
    if (head.code === 0 && head.stdout.toString('utf8').trim() === ref)
      throw new ShadowError(
        'BRANCH_EXISTS',
        `branch ${name} is checked out in ${folder}; shadowfs never moves it (even with --force): choose another name`,
      );
    if (!opts.force)
      throw new ShadowError('BRANCH_EXISTS', `branch ${name} exists already in ${folder}: choose another name, or replace it with --force`);
  }
  const job = async (dir: string): Promise<BranchResult> => {
    const dotGit = fs.lstatSync(path.join(dir, '.git'), { throwIfNoEntry: false });
    if (!dotGit?.isDirectory())
      throw new ShadowError(
        'NOT_SUPPORTED',
        `agent ${agent} has no git repository of its own at the top of the shadow (.git is not a directory there)`,
      );
    if (opts.dryRun) {
      const r = await runGit(folder, ['-c', 'protocol.file.allow=always', 'ls-remote', '--', dir, 'HEAD']);
      const commit = r.code === 0 ? r.stdout.toString('utf8').split(/\s/)[0] : '';
      if (!commit) throw new ShadowError('NOT_FOUND', `agent ${agent}'s repository has no commit at HEAD: ${r.stderr.trim()}`);
      return { name, commit, previous };
    }
    const r = await runGit(folder, [
      '-c',
      'protocol.file.allow=always',
      '-c',
      'core.logAllRefUpdates=false',
      '-c',
      'transfer.fsckObjects=true',
      '-c',
      'fetch.writeCommitGraph=false',
      '-c',
      'fetch.recurseSubmodules=false',
      'fetch',
      '--quiet',
      '--no-tags',
      '--no-write-fetch-head',
      '--no-auto-maintenance',
      '--no-recurse-submodules',
      '--',
      dir,
      `${opts.force ? '+' : ''}HEAD:${ref}`,
    ]);
    if (r.code !== 0)
      throw new ShadowError(
        /rejected|already exists|checked out/.test(r.stderr) ? 'BRANCH_EXISTS' : 'INTERNAL',
        `git fetch of agent ${agent}'s commits into branch ${name} failed: ${r.stderr.trim()}`,
      );
    const commit = await refOf(folder, ref);
    if (!commit) throw new ShadowError('INTERNAL', `git fetch reported success, but ${ref} does not exist in ${folder}`);
    return { name, commit, previous };
  };
  // A view of the agent's layer shows it at once; otherwise the shared mount, while its layer is active.
  const view = shadow.viewOf(agent);
  if (view) return job(view.mountPoint);
  return shadow.withLayer(agent, (dir) => job(dir));
}
