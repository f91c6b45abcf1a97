// Read-only questions to the user's repository, for what the daemon's answers do not say: which
// commits a branch brought, what a branch pointed to, which branch is checked out. Nothing here
// writes the repository (no optional locks, so not even git's index refresh); the daemon makes
// the branch itself.
import { execFile } from 'child_process';

/** git's output in `cwd` (trailing newline removed), or undefined when git fails or is missing. */
export function gitRead(cwd: string, args: string[]): Promise<string | undefined> {
  const env: NodeJS.ProcessEnv = {};
  // Variables such as GIT_DIR or GIT_INDEX_FILE from the editor's environment would point git elsewhere.
  for (const [k, v] of Object.entries(process.env)) if (!/^GIT_/i.test(k)) env[k] = v;
  env.GIT_TERMINAL_PROMPT = '0';
  return new Promise((resolve) => {
    execFile('git', ['--no-optional-locks', ...args], { cwd, env, maxBuffer: 4 << 20 }, (err, stdout) =>
      resolve(err ? undefined : stdout.replace(/\n$/, '')),
    );
  });
}

export interface CommitLine {
  commit: string;
  subject: string;
}

/**
 * The commits reachable from `tip` but not from the folder's HEAD (all of them when HEAD has no
 * commit yet), newest first, at most `max`; undefined when git cannot tell.
 */
export async function commitsNotOnHead(folder: string, tip: string, max = 200): Promise<CommitLine[] | undefined> {
  const fmt = ['log', '--no-decorate', '--no-color', `--max-count=${max}`, '--format=%H%x09%s'];
  const head = await gitRead(folder, ['rev-parse', '-q', '--verify', 'HEAD^{commit}']);
  const out = await gitRead(folder, [...fmt, ...(head ? [tip, `^${head}`] : [tip]), '--']);
  if (out === undefined) return undefined;
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => ({ commit: l.slice(0, l.indexOf('\t')), subject: l.slice(l.indexOf('\t') + 1) }));
}

/** The branch checked out in `folder` (undefined: detached, or not known). */
export function checkedOutBranch(folder: string): Promise<string | undefined> {
  return gitRead(folder, ['symbolic-ref', '-q', '--short', 'HEAD']).then((b) => b || undefined);
}

/** "abc1234 subject" of the commit a branch points to, or undefined. */
export function describeBranchTip(folder: string, branch: string): Promise<string | undefined> {
  return gitRead(folder, ['log', '-1', '--no-decorate', '--no-color', '--format=%h %s', `refs/heads/${branch}`, '--']).then(
    (s) => s || undefined,
  );
}
