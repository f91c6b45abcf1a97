// git as the tests of repositories in a shadow use it: the user's own (unconfined, in any
// directory) and the agent's (a confined run in its layer, with an author of its own).
import * as assert from 'assert';
import { execFileSync } from 'child_process';
import { runInShadow } from '../../src/run/runner';
import type { Shadow } from '../../src/shadow';

/** git run by the user in `cwd`; its output, or an exception on failure. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** `script` (sh) run by `agent` in its layer, confined as agents run; asserts it exited 0 confined, returns its stdout. */
export async function agentScript(shadow: Shadow, script: string, agent = 'agent'): Promise<string> {
  const r = await runInShadow(shadow, {
    agent,
    argv: ['sh', '-c', script],
    env: {
      GIT_AUTHOR_NAME: 'agent',
      GIT_AUTHOR_EMAIL: 'a@example.invalid',
      GIT_COMMITTER_NAME: 'agent',
      GIT_COMMITTER_EMAIL: 'a@example.invalid',
    },
  });
  assert.strictEqual(r.exitCode, 0, `${script}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`);
  assert.ok(r.protected, 'the run was confined');
  return r.stdout;
}
