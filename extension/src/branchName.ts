// Is this a name git would take for a new branch? The rules of `git check-ref-format --branch`
// (git-check-ref-format(1), applied to refs/heads/<name>), each refusal with its reason, so that
// the input box can say why as the user types. Checked here, before asking the daemon, which
// checks again with git itself. Free of the VS Code API.

/** The protocol's bound on layer.apply's `branch`. */
export const MAX_BRANCH_NAME = 255;

const FORBIDDEN: Record<string, string> = {
  ' ': 'a space',
  '~': '"~"',
  '^': '"^"',
  ':': '":"',
  '?': '"?"',
  '*': '"*"',
  '[': '"["',
  '\\': '"\\"',
};

/**
 * Why git would refuse `name` as a new branch's name, or undefined when it would take it.
 * Stricter than git in one place: "@" alone (git takes it, but it means HEAD on the command line).
 */
export function branchNameProblem(name: string): string | undefined {
  if (name === '') return 'give the branch a name';
  if (name.length > MAX_BRANCH_NAME) return `a branch name has at most ${MAX_BRANCH_NAME} characters`;
  if (name.startsWith('-')) return 'a branch name cannot begin with "-" (git would read it as an option)';
  if (name === 'HEAD' || name === '@') return `"${name}" means the checked-out commit in git, not a branch`;
  if (name.includes('@{')) return '"@{" is not allowed: git reads it as a reflog or previous-branch reference (as in @{-1})';
  if (/[\x00-\x1f\x7f]/.test(name)) return 'control characters (tabs, line breaks, …) are not allowed';
  for (const ch of name) if (FORBIDDEN[ch]) return `${FORBIDDEN[ch]} is not allowed in a branch name`;
  if (name.startsWith('/') || name.endsWith('/')) return 'a branch name cannot begin or end with "/"';
  if (name.includes('//')) return '"//" is not allowed: each part between slashes needs a name';
  if (name.includes('..')) return '".." is not allowed (git reads it as a range of commits)';
  if (name.endsWith('.')) return 'a branch name cannot end with "."';
  for (const part of name.split('/')) {
    if (part.startsWith('.')) return `"${part}": a part between slashes cannot begin with "."`;
    if (part.endsWith('.lock')) return `"${part}": a part between slashes cannot end with ".lock" (git's lock files are named so)`;
  }
  return undefined;
}
