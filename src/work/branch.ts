// Git for getting work out: which of a layer's paths the folder's repository ignores. Git runs
// only in the folder's repository (the user's own configuration), with a clean environment, hooks
// off and no automatic maintenance.
import { spawn } from 'child_process';
import { ShadowError } from '../errors';

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
  const r = await runGit(folder, ['check-ignore', '--stdin', '-z'], Buffer.from(paths.map((p) => `${p}\0`).join('')));
  // 0: some ignored; 1: none; 128: not a repository (nothing is ignored then).
  if (r.code !== 0) return out;
  for (const p of r.stdout.toString('utf8').split('\0')) if (p) out.add(p);
  return out;
}
