// Which commands a run may start, checked on the argv (never on a shell string). A policy is
// data: `allow` lists program names (argv[0]'s base name) that may run (empty: any), `deny`
// lists argv prefixes that may not, e.g. ["git", "push"] or ["curl"].
//
// On Windows the policy judges what the user asked for, knowing what it resolved to
// (src/platform/win32-command.ts): the program is known by the name asked, its base name, and the
// base name of the file found, each also without its extension and compared without letter case
// (`npm`, `NPM.cmd` and C:\nodejs\npm.cmd are one program, as Windows runs them). A shell line
// cannot be judged word by word: its program is the shell (cmd.exe), as `sh` is on Linux.
import * as path from 'path';
import { ShadowError } from '../common/errors';

export interface RunPolicy {
  allow?: string[];
  deny?: string[][];
}

/** What a Windows command resolved to (a WindowsSpawn's file and kind). */
export interface ResolvedCommand {
  /** The file that runs: the program, the batch file's cmd.exe, or the shell. */
  file: string;
  /** 'shell': a cmd.exe line; 'batch': a .cmd/.bat file run by cmd.exe; 'program': an .exe/.com. */
  kind: 'shell' | 'program' | 'batch';
}

/** Extensions Windows runs a program or batch file by: `npm` names npm.cmd, `git` git.exe. */
const RUNNABLE = /\.(exe|com|cmd|bat)$/i;

/**
 * Throws POLICY_DENIED when `policy` does not let `argv` run. `resolved` (Windows): what argv
 * resolved to; then names compare without letter case and without a runnable extension.
 */
export function checkPolicy(policy: RunPolicy | undefined, argv: string[], resolved?: ResolvedCommand): void {
  if (!policy) return;
  const judged = resolved?.kind === 'shell' ? [resolved.file, ...argv] : argv;
  const base = (p: string): string => (resolved ? path.win32.basename(p) : path.basename(p));
  const program = base(judged[0] ?? '');
  const names = new Set([judged[0] ?? '', program]);
  if (resolved) {
    names.add(base(resolved.file));
    for (const n of [...names]) names.add(n.replace(RUNNABLE, ''));
  }
  const fold = (s: string): string => (resolved ? s.toLowerCase() : s);
  const known = new Set([...names].map(fold));
  const isProgram = (name: string): boolean => known.has(fold(name));
  if (policy.allow && policy.allow.length > 0 && !policy.allow.some(isProgram)) {
    const what = resolved && resolved.file !== judged[0] ? `"${program}" (${resolved.file})` : `"${program}"`;
    throw new ShadowError('POLICY_DENIED', `the run policy does not allow ${what} (allowed: ${policy.allow.join(', ')})`);
  }
  for (const prefix of policy.deny ?? []) {
    if (prefix.length === 0) continue;
    const [first, ...rest] = prefix;
    if (isProgram(first) && rest.every((word, i) => judged[i + 1] === word)) {
      throw new ShadowError('POLICY_DENIED', `the run policy denies "${prefix.join(' ')}"`);
    }
  }
}

export function parsePolicy(text: string, source: string): RunPolicy {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ShadowError('INVALID_POLICY', `the run policy ${source} is not valid JSON: ${(err as Error).message}`);
  }
  const shape = `the run policy ${source} must look like {"allow": ["node", ...], "deny": [["git", "push"], ...]}`;
  // The shape is checked before any field is read: `null` or an array must not get further.
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ShadowError('INVALID_POLICY', shape);
  const p = raw as RunPolicy;
  const okAllow = p.allow === undefined || (Array.isArray(p.allow) && p.allow.every((x) => typeof x === 'string'));
  const okDeny =
    p.deny === undefined || (Array.isArray(p.deny) && p.deny.every((d) => Array.isArray(d) && d.every((x) => typeof x === 'string')));
  if (!okAllow || !okDeny) throw new ShadowError('INVALID_POLICY', shape);
  return p;
}
