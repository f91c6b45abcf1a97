// Which commands a run may start, checked on the argv (never on a shell string). A policy is
// data: `allow` lists program names (argv[0]'s base name) that may run (empty: any), `deny`
// lists argv prefixes that may not, e.g. ["git", "push"] or ["curl"].
import * as path from 'path';
import { ShadowError } from '../errors';

export interface RunPolicy {
  allow?: string[];
  deny?: string[][];
}

export function checkPolicy(policy: RunPolicy | undefined, argv: string[]): void {
  if (!policy) return;
  const program = path.basename(argv[0] ?? '');
  if (policy.allow && policy.allow.length > 0 && !policy.allow.includes(program)) {
    throw new ShadowError('POLICY_DENIED', `the run policy does not allow "${program}" (allowed: ${policy.allow.join(', ')})`);
  }
  for (const prefix of policy.deny ?? []) {
    if (prefix.length === 0) continue;
    const [first, ...rest] = prefix;
    if ((argv[0] === first || program === first) && rest.every((word, i) => argv[i + 1] === word)) {
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
