// Masked paths (issue #32): which paths of the folder do not exist for an agent. The policy is
// kept here, per shadow: a mask of an agent's own, else the shadow's default mask; the native
// core enforces the resulting list of globs on each layer (native/core/mask.h says how globs
// match), at lookup, listing and creation time, so every way an agent reaches its layer (the
// shared mount while it is shown, its views, its runs, the file tools) agrees.
import { ShadowError } from '../common/errors';

/**
 * The mask shadowfs offers (`shadowfs mask S --default`), never imposes: files that usually hold
 * secrets an agent has no need to read. Globs without "/" match a name at any depth.
 */
export const DEFAULT_MASK: readonly string[] = Object.freeze([
  '.env',
  '.env.*',
  '.envrc',
  '*.pem',
  '*.key',
  '*.p12',
  '*.pfx',
  '*.keystore',
  'id_rsa*',
  'id_dsa*',
  'id_ecdsa*',
  'id_ed25519*',
  '.npmrc',
  '.pypirc',
  '.netrc',
  '.git-credentials',
  '.aws',
  '.ssh',
  '.gnupg',
  '.docker/config.json',
  '*.tfvars',
]);

/** The most globs one mask holds, and the longest glob (bytes). */
export const MASK_MAX_GLOBS = 256;
export const MASK_GLOB_MAX_BYTES = 1024;

/** Checks a list of globs (as the protocol and the CLI take them); INVALID_ARGUMENT otherwise. */
export function checkGlobs(globs: unknown): string[] {
  if (!Array.isArray(globs) || globs.length > MASK_MAX_GLOBS)
    throw new ShadowError('INVALID_ARGUMENT', `a mask is a list of at most ${MASK_MAX_GLOBS} globs`);
  const out: string[] = [];
  for (const g of globs) {
    if (typeof g !== 'string' || g === '' || g.includes('\0') || Buffer.byteLength(g) > MASK_GLOB_MAX_BYTES)
      throw new ShadowError(
        'INVALID_ARGUMENT',
        `a glob is a non-empty string of at most ${MASK_GLOB_MAX_BYTES} bytes without NUL, got ${JSON.stringify(g)}`,
      );
    // ".." would name nothing inside the folder: say so rather than mask nothing silently.
    if (g.split('/').some((c) => c === '..'))
      throw new ShadowError('INVALID_ARGUMENT', `a glob names paths inside the folder; ".." is not one: ${JSON.stringify(g)}`);
    if (g.replace(/\/+/g, '') === '')
      throw new ShadowError('INVALID_ARGUMENT', `the glob ${JSON.stringify(g)} names the folder itself, which cannot be masked`);
    if (!out.includes(g)) out.push(g);
  }
  return out;
}

/** A shadow's masks, as saved in the daemon's state file and given back to it. */
export interface MaskState {
  /** The shadow's default mask (for agents without one of their own); absent: none. */
  default?: string[];
  /** Agents' own masks (an empty list is a mask of its own that hides nothing). */
  agents?: Record<string, string[]>;
  /** Layers copied from another (clones, a run's scratch layer), by the layer they came from: they hide what it hides. */
  copied?: Record<string, string>;
}

/** Who decides an agent's mask, and what it is. */
export interface MaskInfo {
  /** The globs in force for the agent (empty: nothing masked). */
  globs: string[];
  /** "agent": its own mask; "default": the shadow's; "inherited": that of the layer it was copied from; "none". */
  source: 'agent' | 'default' | 'inherited' | 'none';
}

export class MaskPolicy {
  private readonly own = new Map<string, string[]>();
  /** Layers copied from another (a run's scratch layer): they hide what their source hides, unless they have their own. */
  private readonly copiedFrom = new Map<string, string>();
  private dflt: string[] = [];

  /** The shadow's default mask (empty: none). */
  get defaultMask(): string[] {
    return [...this.dflt];
  }

  of(agent: string, seen: Set<string> = new Set()): MaskInfo {
    const own = this.own.get(agent);
    if (own) return { globs: [...own], source: 'agent' };
    const from = this.copiedFrom.get(agent);
    if (from !== undefined && !seen.has(from)) {
      seen.add(agent);
      return { globs: this.of(from, seen).globs, source: 'inherited' };
    }
    return this.dflt.length ? { globs: [...this.dflt], source: 'default' } : { globs: [], source: 'none' };
  }

  /** Sets (globs) or clears (null) an agent's own mask, or the default (agent null). */
  set(agent: string | null, globs: string[] | null): void {
    if (agent === null) this.dflt = globs ? [...globs] : [];
    else if (globs === null) this.own.delete(agent);
    else this.own.set(agent, [...globs]);
  }

  copied(from: string, to: string): void {
    if (from !== to) this.copiedFrom.set(to, from);
  }

  dropped(agent: string): void {
    this.copiedFrom.delete(agent);
  }

  state(): MaskState {
    const out: MaskState = {};
    if (this.dflt.length) out.default = [...this.dflt];
    if (this.own.size) out.agents = Object.fromEntries([...this.own].map(([a, g]) => [a, [...g]]));
    // Kept too: a copy saved without it would come back with no mask (review: a clone of a masked
    // agent read the secret after a stop).
    if (this.copiedFrom.size) out.copied = Object.fromEntries(this.copiedFrom);
    return out;
  }

  load(s: MaskState): void {
    this.dflt = s.default ? checkGlobs(s.default) : [];
    this.own.clear();
    for (const [a, g] of Object.entries(s.agents ?? {})) this.own.set(a, checkGlobs(g));
    this.copiedFrom.clear();
    for (const [to, from] of Object.entries(s.copied ?? {})) this.copied(from, to);
  }
}

/**
 * The masks of several shadows of one folder as one (their layers share the folder's autosaves):
 * every glob any of them hides, per agent and as the default; a copy keeps the first source named.
 */
export function unionMasks(states: readonly MaskState[]): MaskState {
  const dflt = new Set<string>();
  const agents = new Map<string, Set<string>>();
  const copied: Record<string, string> = {};
  for (const s of states) {
    for (const g of s.default ?? []) dflt.add(g);
    for (const [a, globs] of Object.entries(s.agents ?? {})) {
      const set = agents.get(a) ?? new Set<string>();
      for (const g of globs) set.add(g);
      agents.set(a, set);
    }
    for (const [to, from] of Object.entries(s.copied ?? {})) copied[to] ??= from;
  }
  const out: MaskState = {};
  if (dflt.size) out.default = [...dflt];
  if (agents.size) out.agents = Object.fromEntries([...agents].map(([a, g]) => [a, [...g]]));
  if (Object.keys(copied).length) out.copied = copied;
  return out;
}
