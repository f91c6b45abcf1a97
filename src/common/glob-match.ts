// Glob matching whose cost is bounded whatever the pattern: a glob from a model (over MCP) is
// compiled into a small NFA (a list of nodes, as in Thompson's construction) and a path is
// matched by advancing the set of live nodes one character at a time. Each character costs at
// most one visit per node, so matching is O(nodes × path length) and never backtracks; the
// regular expressions picomatch builds ("[^/]*?a[^/]*?a…") could take exponential time on the
// daemon's one thread. Braces are expanded before compiling, within caps.
import { ShadowError } from './errors';

/** Braces may expand to at most this many alternatives… */
export const MAX_GLOB_EXPANSIONS = 1024;
/**
 * …of at most this many characters in all. It bounds the NFA's size, so the cost per character
 * of a path: a pattern this size against a 4096-character path is some tens of milliseconds.
 */
export const MAX_GLOB_EXPANDED_CHARS = 8192;
/** Longer patterns are refused (none a person writes comes near). */
export const MAX_GLOB_LENGTH = 1024;

const SUPPORTED =
  'supported: * ? ** [abc] [a-z] [!x] {a,b} {1..3} and \\ to escape; extglobs such as @(a|b) and POSIX classes such as [[:alpha:]] are not';

function refuse(glob: string, why: string): never {
  throw new ShadowError(
    'INVALID_ARGUMENT',
    `invalid glob ${JSON.stringify(glob.length > 200 ? `${glob.slice(0, 200)}…` : glob)}: ${why} (${SUPPORTED})`,
  );
}

// ---------------------------------------------------------------------------------------------
// The NFA

/** What one character node accepts. */
type CharTest =
  | { kind: 'lit'; cp: number }
  | { kind: 'notSlash' }
  | { kind: 'any' }
  | { kind: 'class'; negated: boolean; ranges: number[] /* pairs: lo, hi inclusive */ };

type Node =
  | { op: 'char'; test: CharTest } // consumes one character, then goes to the next node
  | { op: 'split'; a: number; b: number } // either way, consuming nothing
  | { op: 'jmp'; to: number }
  | { op: 'match' };

const SLASH = 0x2f;
const NOT_SLASH: CharTest = { kind: 'notSlash' };
const ANY: CharTest = { kind: 'any' };

function accepts(t: CharTest, cp: number): boolean {
  switch (t.kind) {
    case 'lit':
      return cp === t.cp;
    case 'notSlash':
      return cp !== SLASH;
    case 'any':
      return true;
    case 'class': {
      if (cp === SLASH) return false; // a class is one character of a name, as in picomatch
      let inside = false;
      for (let i = 0; i < t.ranges.length; i += 2)
        if (cp >= t.ranges[i] && cp <= t.ranges[i + 1]) {
          inside = true;
          break;
        }
      return inside !== t.negated;
    }
  }
}

/** Emits nodes; the combinators take a body that emits its own nodes. */
class Builder {
  readonly nodes: Node[] = [];
  char(test: CharTest): void {
    this.nodes.push({ op: 'char', test });
  }
  /** body, zero or more times (a body must consume at least one character). */
  star(body: () => void): void {
    const split = { op: 'split' as const, a: this.nodes.length + 1, b: -1 };
    const at = this.nodes.length;
    this.nodes.push(split);
    body();
    this.nodes.push({ op: 'jmp', to: at });
    split.b = this.nodes.length;
  }
  optional(body: () => void): void {
    const split = { op: 'split' as const, a: this.nodes.length + 1, b: -1 };
    this.nodes.push(split);
    body();
    split.b = this.nodes.length;
  }
  /** One of the bodies. */
  alternatives(bodies: (() => void)[]): void {
    const ends: { op: 'jmp'; to: number }[] = [];
    for (let i = 0; i < bodies.length; i++) {
      if (i < bodies.length - 1) {
        const split = { op: 'split' as const, a: this.nodes.length + 1, b: -1 };
        this.nodes.push(split);
        bodies[i]();
        const end = { op: 'jmp' as const, to: -1 };
        this.nodes.push(end);
        ends.push(end);
        split.b = this.nodes.length;
      } else bodies[i]();
    }
    for (const e of ends) e.to = this.nodes.length;
  }
}

/**
 * Node visits made by all matchers so far: the work done, which the tests bound (at most the
 * NFA's size per character of the path, plus one) instead of timing it.
 */
export const globWork = { visits: 0 };

/**
 * The node visits one matcher may make in all (one glob or grep call, one audit query): about a
 * quarter of a second here. Cached transitions cost none, so an ordinary pattern over a tree of
 * 100,000 paths stays far below it; a pattern whose braces keep hundreds of wildcards live at
 * once pays them at every character of every path (a review's 18-character glob took 27 ms a
 * path), and stops here with TIMEOUT instead of holding the daemon's thread for minutes.
 */
export const MAX_GLOB_VISITS = 2_000_000;

/** How many node indices and transitions the DFA cache of one matcher holds before it starts over. */
const MAX_CACHED = 1_000_000;
/** Larger sets are not cached: they are rarely met twice, and their keys cost as much as the step. */
const MAX_CACHED_SET = 256;

/** A set of live nodes met so far (a state of the lazily built DFA), with its transitions as found. */
interface DState {
  nodes: number[];
  accepting: boolean;
  next: Map<number, DState>;
}

/**
 * A function telling whether the NFA accepts the whole of a string: the live set advanced one
 * code point at a time, each node visited at most once per character. Sets met before are
 * cached with their transitions (a DFA built lazily, as RE2 does), so a matcher that sees many
 * paths (a walk, an audit record) mostly costs one map look-up per character; the cache is
 * bounded and starts over when full, which only costs the NFA's price again.
 */
function runner(nodes: readonly Node[], glob: string, budget = MAX_GLOB_VISITS): (s: string) => boolean {
  let left = budget;
  // A node is in the set being built when its mark is the current generation.
  const mark = new Float64Array(nodes.length).fill(-1);
  let gen = 0;
  const stack: number[] = [];
  // Adds node `n` and what it reaches without consuming.
  const add = (list: number[], n: number): void => {
    stack.push(n);
    while (stack.length > 0) {
      const k = stack.pop() as number;
      if (mark[k] === gen) continue;
      mark[k] = gen;
      globWork.visits++;
      if (--left < 0)
        throw new ShadowError(
          'TIMEOUT',
          `glob ${JSON.stringify(glob.length > 200 ? `${glob.slice(0, 200)}…` : glob)} stopped: matching it took more than ${budget} steps (its braces keep many wildcards open at once, and every path pays for them); use fewer alternatives or wildcards, or look in a smaller directory`,
        );
      const node = nodes[k];
      if (node.op === 'split') stack.push(node.b, node.a);
      else if (node.op === 'jmp') stack.push(node.to);
      else list.push(k);
    }
  };
  let states = new Map<string, DState>();
  let cached = 0;
  let start: DState | null = null;
  const intern = (list: number[]): DState => {
    if (list.length > MAX_CACHED_SET) return { nodes: list, accepting: list.some((k) => nodes[k].op === 'match'), next: new Map() };
    list.sort((x, y) => x - y);
    const key = list.join(',');
    let st = states.get(key);
    if (st === undefined) {
      if (cached + list.length > MAX_CACHED) {
        states = new Map();
        cached = 0;
        start = null;
      }
      st = { nodes: list, accepting: list.some((k) => nodes[k].op === 'match'), next: new Map() };
      states.set(key, st);
      cached += list.length + 1;
    }
    return st;
  };
  return (s: string): boolean => {
    if (start === null) {
      gen++;
      const first: number[] = [];
      add(first, 0);
      start = intern(first);
    }
    let st: DState = start;
    for (const ch of s) {
      if (st.nodes.length === 0) return false;
      const cp = ch.codePointAt(0) as number;
      let next = st.next.get(cp);
      if (next === undefined) {
        gen++;
        const list: number[] = [];
        for (const k of st.nodes) {
          const node = nodes[k];
          if (node.op === 'char' && accepts(node.test, cp)) add(list, k + 1);
        }
        next = intern(list);
        st.next.set(cp, next);
        cached++;
      }
      st = next;
    }
    return st.accepting;
  };
}

// ---------------------------------------------------------------------------------------------
// Braces

/** The pattern's alternatives after brace expansion ("a{b,c}" → "ab", "ac"); escapes kept. */
export function expandBraces(glob: string): string[] {
  let total = 0;
  const count = (alts: string[]): string[] => {
    if (alts.length > MAX_GLOB_EXPANSIONS) refuse(glob, `its braces expand to more than ${MAX_GLOB_EXPANSIONS} patterns`);
    return alts;
  };
  const expand = (s: string): string[] => {
    // Find the first top-level "{…}" holding a top-level "," or "..": braces without one are literal.
    for (let i = 0; i < s.length; i++) {
      if (s[i] === '\\') {
        i++;
        continue;
      }
      if (s[i] !== '{') continue;
      let depth = 0;
      let close = -1;
      const commas: number[] = [];
      for (let j = i; j < s.length; j++) {
        if (s[j] === '\\') {
          j++;
          continue;
        }
        if (s[j] === '{') depth++;
        else if (s[j] === '}') {
          depth--;
          if (depth === 0) {
            close = j;
            break;
          }
        } else if (s[j] === ',' && depth === 1) commas.push(j);
      }
      if (close < 0) return [s]; // unclosed: the rest is literal
      const inner = s.slice(i + 1, close);
      let options: string[];
      if (commas.length > 0) {
        options = [];
        let from = i + 1;
        for (const c of [...commas, close]) {
          options.push(...expand(s.slice(from, c)));
          count(options);
          from = c + 1;
        }
      } else {
        const range = braceRange(glob, inner);
        if (range === null) {
          // Literal "{…}": keep it, expand what follows.
          return count(expand(s.slice(close + 1)).map((rest) => s.slice(0, close + 1) + rest));
        }
        options = range;
      }
      const prefix = s.slice(0, i);
      const rests = expand(s.slice(close + 1));
      if (options.length * rests.length > MAX_GLOB_EXPANSIONS) count(new Array<string>(options.length * rests.length));
      const out: string[] = [];
      for (const o of options)
        for (const r of rests) {
          const alt = prefix + o + r;
          out.push(alt);
        }
      return out;
    }
    return [s];
  };
  const alts = [...new Set(count(expand(glob)))];
  for (const a of alts) total += a.length;
  if (total > MAX_GLOB_EXPANDED_CHARS) refuse(glob, `its braces expand to more than ${MAX_GLOB_EXPANDED_CHARS} characters`);
  return alts;
}

/** "{1..3}", "{a..c}": the values, or null when `inner` is not a range (then the braces are literal). */
function braceRange(glob: string, inner: string): string[] | null {
  const num = /^(-?\d+)\.\.(-?\d+)$/.exec(inner);
  if (num) {
    const [lo, hi] = [Number(num[1]), Number(num[2])];
    if (Math.abs(hi - lo) + 1 > MAX_GLOB_EXPANSIONS) refuse(glob, `the range {${inner}} has more than ${MAX_GLOB_EXPANSIONS} values`);
    const step = lo <= hi ? 1 : -1;
    const out: string[] = [];
    for (let v = lo; v !== hi + step; v += step) out.push(String(v));
    return out;
  }
  const chr = /^([A-Za-z])\.\.([A-Za-z])$/.exec(inner);
  if (chr) {
    const [lo, hi] = [chr[1].charCodeAt(0), chr[2].charCodeAt(0)];
    const step = lo <= hi ? 1 : -1;
    const out: string[] = [];
    for (let v = lo; v !== hi + step; v += step) out.push(String.fromCharCode(v));
    return out;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Compiling one alternative

/** A pattern element within one path segment. */
type Token = { t: 'char'; test: CharTest } | { t: 'star' };

const EXTGLOB = /[@!+*?]\(/;

/** The tokens of one segment of an alternative (no "/" in it; braces already expanded). */
function segmentTokens(glob: string, seg: string): Token[] {
  const out: Token[] = [];
  const cps = Array.from(seg);
  for (let i = 0; i < cps.length; i++) {
    const c = cps[i];
    if (c === '\\') {
      // An escaped character is itself; a lone trailing backslash too.
      const lit = i + 1 < cps.length ? cps[++i] : '\\';
      out.push({ t: 'char', test: { kind: 'lit', cp: lit.codePointAt(0) as number } });
    } else if (c === '*') {
      if (out.length === 0 || out[out.length - 1].t !== 'star') out.push({ t: 'star' }); // "**" inside a name is "*"
    } else if (c === '?') out.push({ t: 'char', test: NOT_SLASH });
    else if (c === '[') {
      const cls = parseClass(glob, cps, i);
      if (cls === null)
        out.push({ t: 'char', test: { kind: 'lit', cp: 0x5b } }); // unclosed: a literal "["
      else {
        out.push({ t: 'char', test: cls.test });
        i = cls.end;
      }
    } else out.push({ t: 'char', test: { kind: 'lit', cp: c.codePointAt(0) as number } });
  }
  return out;
}

/** A class at cps[open] ("["): its test and the index of its "]", or null if it is not closed. */
function parseClass(glob: string, cps: string[], open: number): { test: CharTest; end: number } | null {
  let i = open + 1;
  let negated = false;
  if (cps[i] === '!' || cps[i] === '^') {
    negated = true;
    i++;
  }
  const ranges: number[] = [];
  let first = true;
  for (; i < cps.length; i++) {
    let c = cps[i];
    if (c === ']' && !first) return { test: { kind: 'class', negated, ranges }, end: i };
    first = false;
    if (c === '[' && cps[i + 1] === ':') refuse(glob, 'POSIX character classes are not supported');
    if (c === '\\' && i + 1 < cps.length) c = cps[++i];
    const lo = c.codePointAt(0) as number;
    let hi = lo;
    if (cps[i + 1] === '-' && i + 2 < cps.length && cps[i + 2] !== ']') {
      let h = cps[i + 2];
      i += 2;
      if (h === '\\' && i + 1 < cps.length) h = cps[++i];
      hi = h.codePointAt(0) as number;
      if (hi < lo) refuse(glob, `the range ${c}-${h} in a class is backwards`);
    }
    ranges.push(lo, hi);
  }
  return null;
}

/** Splits an alternative at its "/" (an escaped "\/" is a "/" too: a name never holds one). */
function segments(alt: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (let i = 0; i < alt.length; i++) {
    if (alt[i] === '\\' && i + 1 < alt.length) {
      if (alt[i + 1] === '/') {
        out.push(cur);
        cur = '';
      } else cur += alt[i] + alt[i + 1];
      i++;
    } else if (alt[i] === '/') {
      out.push(cur);
      cur = '';
    } else cur += alt[i];
  }
  out.push(cur);
  return out;
}

/** The names of an alternative, with a "**" that follows a "**" dropped (the same paths). */
function globSegments(alt: string): string[] {
  return segments(alt).filter((s, i, all) => !(s === '**' && all[i - 1] === '**'));
}

/** Emits the NFA for one alternative of a full-syntax glob (picomatch's, with dot: true). */
function emitAlternative(b: Builder, glob: string, alt: string): void {
  const segs = globSegments(alt);
  const last = segs.length - 1;
  const plusName = (): void => {
    b.char(NOT_SLASH);
    b.star(() => b.char(NOT_SLASH));
  };
  segs.forEach((seg, i) => {
    if (seg === '**') {
      if (segs.length === 1) {
        // "**" alone: any path.
        plusName();
        b.star(() => {
          b.char({ kind: 'lit', cp: SLASH });
          plusName();
        });
      } else if (i === last) {
        // "a/**": a, and everything below it (the "/" before "**" is emitted here).
        b.star(() => {
          b.char({ kind: 'lit', cp: SLASH });
          plusName();
        });
      } else {
        // "**/x", "a/**/x": zero or more whole names, each with its "/".
        b.star(() => {
          plusName();
          b.char({ kind: 'lit', cp: SLASH });
        });
      }
      return;
    }
    for (const tok of segmentTokens(glob, seg)) {
      if (tok.t === 'star') b.star(() => b.char(NOT_SLASH));
      else b.char(tok.test);
    }
    if (i < last && !(i + 1 === last && segs[last] === '**')) b.char({ kind: 'lit', cp: SLASH });
  });
}

// ---------------------------------------------------------------------------------------------
// The public matchers

export interface GlobMatcher {
  /** Whether the whole relative path ("a/b") matches. */
  (path: string): boolean;
  /** The NFA's number of nodes: a match visits at most this many per character, plus one. */
  readonly size: number;
}

/** What glob() needs to plan its walk. */
export interface GlobPlan {
  /** The path the pattern names when it has no wildcard (escapes resolved), else null. */
  literal: string | null;
  /** Leading directories every alternative names literally ("" for none). */
  base: string;
  /** How many names below `base` a match can be at most (Infinity with "**" or a negation). */
  depth: number;
  negated: boolean;
}

function checkLength(glob: string): void {
  if (typeof glob !== 'string' || glob.length === 0) throw new ShadowError('INVALID_ARGUMENT', 'a glob must be a non-empty string');
  if (glob.length > MAX_GLOB_LENGTH) refuse(glob, `longer than ${MAX_GLOB_LENGTH} characters`);
}

function literalSegment(seg: string): string | null {
  let out = '';
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i];
    if (c === '\\' && i + 1 < seg.length) out += seg[++i];
    else if ('*?['.includes(c)) return null;
    else out += c;
  }
  return out;
}

/**
 * Compiles a glob with picomatch's syntax as the file tools used it ({ dot: true }): `*` and `?`
 * within a name (hidden names included), `**` as a whole name for any number of names,
 * classes, braces and ranges, `\` escapes, a leading `!` to negate. With `basename` a path
 * matches when its last name does (grep's filter for a glob without "/"). Extglobs and POSIX
 * classes are refused (INVALID_ARGUMENT), as are patterns whose braces expand too far.
 */
export function compileGlob(glob: string, opts: { basename?: boolean; budget?: number } = {}): GlobMatcher & { plan: GlobPlan } {
  checkLength(glob);
  let body = glob;
  let negated = false;
  while (body.startsWith('!') && !body.startsWith('!(')) {
    negated = !negated;
    body = body.slice(1);
  }
  if (EXTGLOB.test(body.replace(/\\./gs, ''))) refuse(glob, 'extglobs are not supported (escape the parenthesis with \\ to match it)');
  const alts = expandBraces(body);
  const b = new Builder();
  b.alternatives(alts.map((alt) => () => emitAlternative(b, glob, alt)));
  b.nodes.push({ op: 'match' });
  const run = runner(b.nodes, glob, opts.budget);
  const basename = opts.basename === true;
  const matcher = (path: string): boolean => {
    const subject = basename ? path.slice(path.lastIndexOf('/') + 1) : path;
    return subject !== '' && run(subject) !== negated; // no path is empty (picomatch matched none)
  };
  const size = b.nodes.length;

  // The walk's plan: leading literal directories shared by every alternative, and the depth.
  const split = alts.map(globSegments);
  let literal: string | null = null;
  if (!negated && alts.length === 1 && body === glob) {
    const lits = split[0].map(literalSegment);
    if (lits.every((s) => s !== null)) literal = lits.join('/');
  }
  const baseParts: string[] = [];
  if (!negated)
    for (let i = 0; ; i++) {
      // A directory: never an alternative's last name.
      if (split.some((s) => i >= s.length - 1)) break;
      const lit = literalSegment(split[0][i]);
      if (lit === null || lit === '' || lit === '**' || split.some((s) => literalSegment(s[i]) !== lit)) break;
      baseParts.push(lit);
    }
  const unbounded = negated || split.some((s) => s.includes('**'));
  const depth = unbounded ? Infinity : Math.max(...split.map((s) => s.length)) - baseParts.length;
  return Object.assign(matcher, { size, plan: { literal, base: baseParts.join('/'), depth, negated } });
}

/**
 * The audit trail's path globs (src/shadow/audit.ts), a smaller syntax kept as it was: only `*`
 * (within a name), `?` and `**` are special, everything else is itself. `**` followed by "/"
 * is any number of directories (none included); any other `**` is anything, across "/" (so
 * "src**" reaches below src). A glob with "/" is anchored at the root, one without matches a
 * name at any depth; either way, also everything inside a matching directory.
 */
export function compileAuditGlob(glob: string): GlobMatcher {
  checkLength(glob);
  let g = glob.replace(/^\.\//, '');
  const anchored = g.includes('/');
  g = g.replace(/^\/+/, '').replace(/\/+$/, '');
  const b = new Builder();
  const anyThenSlash = (): void =>
    b.optional(() => {
      b.star(() => b.char(ANY));
      b.char({ kind: 'lit', cp: SLASH });
    });
  if (!anchored) anyThenSlash(); // a name at any depth
  const cps = Array.from(g);
  for (let i = 0; i < cps.length; i++) {
    const c = cps[i];
    if (c === '*' && cps[i + 1] === '*') {
      if (cps[i + 2] === '/') {
        anyThenSlash();
        i += 2;
      } else {
        b.star(() => b.char(ANY));
        i += 1;
      }
    } else if (c === '*') b.star(() => b.char(NOT_SLASH));
    else if (c === '?') b.char(NOT_SLASH);
    else b.char({ kind: 'lit', cp: c.codePointAt(0) as number });
  }
  // What is inside a matching directory.
  b.optional(() => {
    b.char({ kind: 'lit', cp: SLASH });
    b.star(() => b.char(ANY));
  });
  b.nodes.push({ op: 'match' });
  return Object.assign(runner(b.nodes, glob), { size: b.nodes.length });
}
