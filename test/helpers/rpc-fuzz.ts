// What the RPC fuzz test (test/rpc-fuzz.test.ts) sends and what it expects back: a seeded PRNG,
// generators of malformed and random messages (random JSON, wrong types for every method's
// parameters, edge numbers, long strings, deep nesting, odd ids, batches, cancels, notifications,
// responses, mutations of real requests, odd but valid headers, broken framing, half messages),
// the oracle that says which reply each well-framed message must get, and the check that no
// generated message could legitimately change the shadow under test.
import { checkParams, isMethod, type MethodName } from '../../src/protocol/methods';

// ---- PRNG ---------------------------------------------------------------------------------------

/** sfc32, seeded through splitmix32: small, fast, and the same sequence on every platform. */
export class Rng {
  private s: [number, number, number, number];

  constructor(seed: number) {
    let x = seed >>> 0;
    const split = (): number => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s = [split(), split(), split(), split()];
    for (let i = 0; i < 12; i++) this.u32();
  }

  u32(): number {
    const s = this.s;
    const t = (((s[0] + s[1]) >>> 0) + s[3]) >>> 0;
    s[3] = (s[3] + 1) >>> 0;
    s[0] = s[1] ^ (s[1] >>> 9);
    s[1] = (s[2] + (s[2] << 3)) >>> 0;
    s[2] = ((s[2] << 21) | (s[2] >>> 11)) >>> 0;
    s[2] = (s[2] + t) >>> 0;
    return t;
  }

  float(): number {
    return this.u32() / 2 ** 32;
  }

  /** 0 <= n < max */
  int(max: number): number {
    return Math.floor(this.float() * max);
  }

  /** lo <= n <= hi */
  between(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }

  weighted<T>(table: ReadonlyArray<readonly [number, T]>): T {
    let total = 0;
    for (const [w] of table) total += w;
    let r = this.float() * total;
    for (const [w, v] of table) {
      r -= w;
      if (r < 0) return v;
    }
    return table[table.length - 1][1];
  }

  /** A (fast) generator of its own, so that adding draws to one stream leaves the others alone. */
  fork(): Rng {
    return new Rng(this.u32());
  }
}

// ---- JSON with tokens JavaScript values cannot express ----------------------------------------

/** JSON text inserted as is: numbers like 9007199254740993 or 1e400, deep nesting, "__proto__" keys. */
export class Tok {
  constructor(readonly text: string) {}
}

export function toJson(v: unknown): string {
  if (v instanceof Tok) return v.text;
  if (Array.isArray(v)) return `[${v.map(toJson).join(',')}]`;
  if (v !== null && typeof v === 'object')
    return `{${Object.entries(v)
      .filter(([, x]) => x !== undefined)
      .map(([k, x]) => `${JSON.stringify(k)}:${toJson(x)}`)
      .join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

/** An object whose keys may be "__proto__" and the like, and may repeat (JSON.parse keeps the last). */
export function rawObject(pairs: ReadonlyArray<readonly [string, unknown]>): Tok {
  return new Tok(`{${pairs.map(([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`).join(',')}}`);
}

/** Sets a key as an own property, "__proto__" included (plain assignment would set the prototype). */
export function setKey(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

export function deepArray(depth: number): Tok {
  return new Tok('['.repeat(depth) + ']'.repeat(depth));
}

export function deepObject(depth: number): Tok {
  return new Tok('{"a":'.repeat(depth) + '1' + '}'.repeat(depth));
}

// ---- Framing ------------------------------------------------------------------------------------

export function frame(body: Buffer | string, header?: (length: number) => string): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const head = header ? header(b.length) : `Content-Length: ${b.length}`;
  return Buffer.concat([Buffer.from(`${head}\r\n\r\n`, 'latin1'), b]);
}

// ---- The shadow under test and what may not touch it -------------------------------------------

/** Methods that change something: never sent (valid or not) naming the real shadow. */
export const MUTATING: ReadonlySet<string> = new Set<MethodName>([
  'mount',
  'unmount',
  'layer.create',
  'layer.drop',
  'layer.clone',
  'layer.write',
  'layer.remove',
  'layer.revert',
  'layer.reset',
  'layer.mask',
  'activate',
  'view.open',
  'view.close',
  'run',
  'run.cancel',
  // Starts a program in a view of the agent (the other shell methods name a session by id, and the
  // fuzzed daemon has none).
  'shell.open',
  // These write the layer (edits) or start language servers on the shadow: real work, not fuzz.
  'lints',
  'lsp.definition',
  'lsp.references',
  'lsp.hover',
  // These write the folder (apply), the layer, or the per-user state directory.
  'layer.apply',
  // Writes the per-user state directory (and, with revert, the layer); take marks rejections told.
  'layer.reject',
  'layer.rejections',
  'layer.checkpoint',
  'layer.restore',
  'file.write',
  'file.edit',
]);

/** Names of shadows that do not exist and cannot resolve to a path inside one ("/" and "." excluded). */
export const NOSUCH = /^nosuch-[A-Za-z0-9_-]*$/;
/** The only folder a fuzzed mount request may name: it does not exist. */
export const NO_FOLDER = /^\/nonexistent-shadowfs-fuzz\/[A-Za-z0-9_-]*$/;

/**
 * Why a message body, decoded exactly as the daemon decodes it, could change the shadow under
 * test, or undefined when it cannot. A mutating method is harmless only when its shadow is a
 * NOSUCH name (a name that resolves neither to the shadow nor, as a relative path, into its
 * mount point) and a mount only names a folder that does not exist, no mount point, and a
 * NOSUCH name. Wrong types are held to the same rule, so nothing depends on the daemon's
 * validation for safety.
 */
export function harm(body: Buffer): string | undefined {
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  const one = (m: unknown): string | undefined => {
    if (m === null || typeof m !== 'object' || Array.isArray(m)) return undefined;
    const o = m as Record<string, unknown>;
    if (o.method === 'shutdown') return 'shutdown';
    if (typeof o.method !== 'string' || !MUTATING.has(o.method)) return undefined;
    const p = o.params;
    if (p === null || typeof p !== 'object' || Array.isArray(p)) return undefined;
    const q = p as Record<string, unknown>;
    if (o.method === 'mount') {
      if (typeof q.folder === 'string' && !NO_FOLDER.test(q.folder)) return `mount of ${q.folder}`;
      if (typeof q.mountPoint === 'string') return 'mount with a mount point';
      if (typeof q.name === 'string' && !NOSUCH.test(q.name)) return `mount named ${q.name}`;
      return undefined;
    }
    if (typeof q.shadow === 'string' && !NOSUCH.test(q.shadow)) return `${o.method} on shadow ${JSON.stringify(q.shadow.slice(0, 80))}`;
    return undefined;
  };
  if (Array.isArray(v)) {
    for (const m of v) {
      const h = one(m);
      if (h) return h;
    }
    return undefined;
  }
  return one(v);
}

/** Makes a request object harmless in place (see harm()): called on every generated request. */
function makeSafe(msg: Record<string, unknown>, rng: Rng): void {
  if (typeof msg.method !== 'string' || !MUTATING.has(msg.method)) return;
  let p = msg.params;
  if (p instanceof Tok) {
    // Raw JSON (repeated or "__proto__" keys): fixed, when it needs to be, as the daemon will read it.
    try {
      p = JSON.parse(p.text);
    } catch {
      return;
    }
    if (p !== null && typeof p === 'object' && !Array.isArray(p) && fixParams(msg.method, p as Record<string, unknown>, rng))
      msg.params = p;
    return;
  }
  if (p !== null && typeof p === 'object' && !Array.isArray(p)) fixParams(msg.method, p as Record<string, unknown>, rng);
}

/** Makes a mutating method's parameters harmless; says whether it changed them. */
function fixParams(method: string, q: Record<string, unknown>, rng: Rng): boolean {
  let changed = false;
  if (method === 'mount') {
    if (typeof q.folder === 'string' && !NO_FOLDER.test(q.folder)) {
      q.folder = `/nonexistent-shadowfs-fuzz/${nosuch(rng).slice(7)}`;
      changed = true;
    }
    if (typeof q.mountPoint === 'string') {
      delete q.mountPoint;
      changed = true;
    }
    if (typeof q.name === 'string' && !NOSUCH.test(q.name)) {
      q.name = nosuch(rng);
      changed = true;
    }
  } else if (typeof q.shadow === 'string' && !NOSUCH.test(q.shadow)) {
    q.shadow = nosuch(rng);
    changed = true;
  }
  return changed;
}

function nosuch(rng: Rng): string {
  return `nosuch-${rng.pick(['a', 'x', 'shadow', 'fuzzed', '0', '_-', ''])}${rng.int(1000)}`;
}

// ---- The oracle ---------------------------------------------------------------------------------

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;

/** The reply a well-framed message must get: its id (as JSON text) and, when known, the error codes it may carry. */
export interface Expected {
  id: string;
  codes?: readonly number[];
}

/**
 * The JSON-RPC 2.0 rules as the daemon documents them: a body that is not JSON gets a parse error
 * (id null); anything but a request object (batches too) gets InvalidRequest, with the message's
 * id when that is a string or number, else null; a response is dropped; a notification gets
 * nothing; a request gets exactly one reply with its id: MethodNotFound for an unknown method,
 * InvalidParams for parameters its schema refuses, else a result or an error.
 */
export function expectFor(body: Buffer): Expected | undefined {
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    return { id: 'null', codes: [PARSE_ERROR] };
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return { id: 'null', codes: [INVALID_REQUEST] };
  const o = v as Record<string, unknown>;
  const idText = (): string => (typeof o.id === 'string' || typeof o.id === 'number' ? JSON.stringify(o.id) : 'null');
  let bad = o.jsonrpc !== '2.0' || typeof o.method !== 'string';
  bad ||= o.id !== undefined && typeof o.id !== 'string' && !(typeof o.id === 'number' && Number.isSafeInteger(o.id));
  bad ||= o.params !== undefined && (typeof o.params !== 'object' || o.params === null);
  if (!bad && o.method === '$/cancelRequest') {
    const p = o.params as Record<string, unknown> | undefined;
    bad = !p || (typeof p.id !== 'number' && typeof p.id !== 'string');
  }
  if (bad) {
    if (o.method === undefined && ('result' in o || 'error' in o)) return undefined; // a response
    return { id: idText(), codes: [INVALID_REQUEST] };
  }
  if (o.id === undefined) return undefined; // a notification
  if (!isMethod(o.method)) return { id: idText(), codes: [METHOD_NOT_FOUND] };
  if (!checkParams(o.method, o.params).ok) return { id: idText(), codes: [INVALID_PARAMS] };
  return { id: idText() };
}

// ---- Generators ---------------------------------------------------------------------------------

export type Category =
  | 'random JSON'
  | 'wrong types'
  | 'edge numbers'
  | 'long strings'
  | 'deep nesting'
  | 'unknown methods'
  | 'odd ids'
  | 'batches'
  | '$/cancelRequest'
  | 'notifications'
  | 'responses'
  | 'mutated requests'
  | 'not JSON'
  | 'odd headers'
  | 'valid requests'
  | 'broken framing'
  | 'half messages'
  | 'flood'
  | 'dribbled'
  | 'near the size limit';

/** One well-framed message and why it was made. */
export interface Framed {
  category: Category;
  bytes: Buffer;
  body: Buffer;
}

/** What the generators know of the shadow under test. */
export interface Target {
  shadow: string;
  mountPoint: string;
  lower: string;
  agent: string;
  file: string;
}

type FieldType = 'string' | 'number' | 'int' | 'boolean' | 'strings' | 'agent-or-null' | 'position' | 'edits' | 'rejections';
type Fields = ReadonlyArray<readonly [string, FieldType, 'required' | 'optional']>;

const shadowAgent: Fields = [
  ['shadow', 'string', 'required'],
  ['agent', 'string', 'required'],
];
const shadowAgentPath: Fields = [...shadowAgent, ['path', 'string', 'required']];

/** Every method's parameters and their types: a method added to the protocol must be added here. */
const FIELDS: Record<MethodName, Fields> = {
  hello: [
    ['client', 'string', 'optional'],
    ['nonce', 'string', 'optional'],
    ['proof', 'string', 'optional'],
  ],
  'session.restrict': [...shadowAgent, ['allowApply', 'boolean', 'optional']],
  version: [],
  health: [],
  shutdown: [],
  status: [],
  list: [],
  mount: [
    ['folder', 'string', 'required'],
    ['mountPoint', 'string', 'optional'],
    ['name', 'string', 'optional'],
    ['cacheTimeout', 'number', 'optional'],
    ['backend', 'string', 'optional'],
    ['io', 'string', 'optional'],
    ['allowOther', 'boolean', 'optional'],
    ['restore', 'boolean', 'optional'],
  ],
  unmount: [
    ['shadow', 'string', 'required'],
    ['lazy', 'boolean', 'optional'],
  ],
  'layer.create': shadowAgent,
  'layer.drop': shadowAgent,
  'layer.clone': [...shadowAgent, ['to', 'string', 'required']],
  'layer.list': [['shadow', 'string', 'required']],
  'layer.write': [...shadowAgentPath, ['data', 'string', 'required'], ['mode', 'int', 'optional']],
  'layer.remove': shadowAgentPath,
  'layer.revert': shadowAgentPath,
  'layer.read': shadowAgentPath,
  'layer.reset': shadowAgent,
  'layer.mask': [
    ['shadow', 'string', 'required'],
    ['agent', 'agent-or-null', 'required'],
    ['globs', 'strings', 'optional'],
    ['offered', 'boolean', 'optional'],
    ['clear', 'boolean', 'optional'],
  ],
  'layer.changes': shadowAgent,
  'layer.diff': [...shadowAgent, ['paths', 'strings', 'optional']],
  'layer.patch': [...shadowAgent, ['paths', 'strings', 'optional']],
  'layer.apply': [...shadowAgent, ['paths', 'strings', 'optional'], ['dryRun', 'boolean', 'optional']],
  'layer.hunks': [...shadowAgent, ['paths', 'strings', 'optional'], ['includeIgnored', 'boolean', 'optional']],
  'layer.reject': [...shadowAgent, ['rejections', 'rejections', 'required'], ['revert', 'boolean', 'optional']],
  'layer.rejections': [...shadowAgent, ['take', 'boolean', 'optional']],
  'layer.checkpoint': [...shadowAgent, ['name', 'string', 'optional']],
  'layer.restore': [...shadowAgent, ['name', 'string', 'optional']],
  'layer.checkpoints': shadowAgent,
  'file.read': [...shadowAgentPath, ['startLine', 'int', 'optional'], ['endLine', 'int', 'optional']],
  'file.write': [...shadowAgentPath, ['content', 'string', 'required'], ['mode', 'int', 'optional']],
  'file.edit': [
    ...shadowAgentPath,
    ['oldText', 'string', 'required'],
    ['newText', 'string', 'required'],
    ['replaceAll', 'boolean', 'optional'],
  ],
  'file.list': [
    ['shadow', 'string', 'required'],
    ['agent', 'string', 'required'],
    ['path', 'string', 'optional'],
    ['recursive', 'boolean', 'optional'],
    ['limit', 'int', 'optional'],
    ['includeIgnored', 'boolean', 'optional'],
  ],
  'file.glob': [
    ...shadowAgent,
    ['pattern', 'string', 'required'],
    ['cwd', 'string', 'optional'],
    ['limit', 'int', 'optional'],
    ['includeIgnored', 'boolean', 'optional'],
  ],
  'file.grep': [
    ...shadowAgent,
    ['pattern', 'string', 'required'],
    ['path', 'string', 'optional'],
    ['glob', 'string', 'optional'],
    ['ignoreCase', 'boolean', 'optional'],
    ['fixedStrings', 'boolean', 'optional'],
    ['context', 'int', 'optional'],
    ['maxMatches', 'int', 'optional'],
    ['includeIgnored', 'boolean', 'optional'],
  ],
  activate: [
    ['shadow', 'string', 'required'],
    ['agent', 'agent-or-null', 'required'],
  ],
  'view.open': [...shadowAgent, ['mountPoint', 'string', 'optional']],
  'view.close': [
    ['shadow', 'string', 'required'],
    ['view', 'int', 'required'],
    ['lazy', 'boolean', 'optional'],
  ],
  stats: [['shadow', 'string', 'required']],
  lints: [
    ...shadowAgent,
    ['paths', 'strings', 'optional'],
    ['edits', 'edits', 'optional'],
    ['timeoutMs', 'int', 'optional'],
    ['quickFixes', 'boolean', 'optional'],
  ],
  'lsp.definition': [...shadowAgentPath, ['position', 'position', 'required'], ['timeoutMs', 'int', 'optional']],
  'lsp.references': [...shadowAgentPath, ['position', 'position', 'required'], ['timeoutMs', 'int', 'optional']],
  'lsp.hover': [...shadowAgentPath, ['position', 'position', 'required'], ['timeoutMs', 'int', 'optional']],
  run: [
    ...shadowAgent,
    ['argv', 'strings', 'required'],
    ['runId', 'string', 'optional'],
    ['cwd', 'string', 'optional'],
    ['env', 'strings', 'optional'],
    ['timeout', 'number', 'optional'],
    ['discardWrites', 'boolean', 'optional'],
    ['shell', 'boolean', 'optional'],
    ['originalPath', 'boolean', 'optional'],
    ['atOriginalPath', 'boolean', 'optional'],
    ['unprotected', 'boolean', 'optional'],
    ['noNetwork', 'boolean', 'optional'],
  ],
  'run.cancel': [['runId', 'string', 'required']],
  'shell.open': [
    ...shadowAgent,
    ['argv', 'strings', 'optional'],
    ['cwd', 'string', 'optional'],
    ['cols', 'int', 'required'],
    ['rows', 'int', 'required'],
    ['term', 'string', 'optional'],
    ['env', 'strings', 'optional'],
    ['noNetwork', 'boolean', 'optional'],
    ['writable', 'strings', 'optional'],
    ['readable', 'strings', 'optional'],
  ],
  'shell.attach': [
    ['sessionId', 'string', 'optional'],
    ['shadow', 'string', 'optional'],
    ['agent', 'string', 'optional'],
  ],
  'shell.detach': [['sessionId', 'string', 'required']],
  'shell.input': [
    ['sessionId', 'string', 'required'],
    ['data', 'string', 'required'],
  ],
  'shell.resize': [
    ['sessionId', 'string', 'required'],
    ['cols', 'int', 'required'],
    ['rows', 'int', 'required'],
  ],
  'shell.close': [['sessionId', 'string', 'required']],
  'shell.list': [['shadow', 'string', 'optional']],
  radar: [
    ['shadow', 'string', 'required'],
    ['agent', 'string', 'optional'],
  ],
  'layer.audit': [
    ...shadowAgent,
    ['since', 'string', 'optional'],
    ['path', 'string', 'optional'],
    ['ops', 'strings', 'optional'],
    ['limit', 'int', 'optional'],
  ],
};

/** What the fuzzer sends: every method but shutdown, which would stop the daemon under test whatever it is given (it takes no parameters to make harmless). */
export const METHODS = (Object.keys(FIELDS) as MethodName[]).filter((m) => m !== 'shutdown');

const EDGE_NUMBERS = [
  '0',
  '-0',
  '1',
  '-1',
  '1.5',
  '-1.5',
  '0.1',
  '4095',
  '4096',
  '511',
  '1e308',
  '-1e308',
  '1.7976931348623157e308',
  '1e309', // parses to Infinity
  '-1e309',
  '1e-320', // subnormal
  '5e-324',
  '9007199254740991', // 2^53 - 1
  '9007199254740992',
  '9007199254740993', // 2^53 + 1: parses to 2^53
  '-9007199254740993',
  '18446744073709551616',
  '2147483648',
  '-2147483649',
  '4294967296',
  '123456789012345678901234567890',
  '1E2',
  '1e+2',
  '-0.0',
  '0e0',
].map((t) => new Tok(t));

const PROTO_NAMES = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'valueOf',
  'hasOwnProperty',
  'isPrototypeOf',
  'propertyIsEnumerable',
  'toLocaleString',
  '__defineGetter__',
  '__defineSetter__',
  '__lookupGetter__',
  'then',
  'call',
  'apply',
  'bind',
  'length',
  'name',
];

const UNKNOWN_METHODS = [
  ...PROTO_NAMES,
  '',
  ' ',
  'Health',
  'HEALTH',
  'health ',
  ' health',
  'health\u0000',
  'layer.read.',
  'layer',
  'layer.',
  '.read',
  'layer/read',
  'rpc.discover',
  'system.listMethods',
  'initialize',
  'Shutdown', // (shutdown itself is a method now: never sent, see METHODS)
  'exit',
  '$/progress',
  '$/logTrace',
  '$/setTrace',
  '$/cancelRequest',
  'shadow/changed',
  'run/output',
  '健康',
  'h\u00e9alth',
  'layer.\u202eread',
];

const PATHS = [
  'notes/known.txt',
  'README.md',
  'src',
  'deep/a/b/c/leaf.txt',
  'link-to-math',
  'empty',
  '',
  '.',
  '..',
  '../x',
  '../../etc/passwd',
  '/etc/passwd',
  'a/../../b',
  'notes/known.txt/',
  'notes//known.txt',
  'notes/./known.txt',
  'notes/known.txt/..',
  'a\u0000b',
  '\\..\\x',
  'C:\\Windows',
  '~',
  '$HOME/x',
  'notes/known.txt\n',
  ' notes/known.txt',
  'é/中/🙂',
  'x'.repeat(300),
  `${'a/'.repeat(2000)}x`,
];

const AGENTS = ['keeper', 'default', '', '.', '..', 'a/b', 'x'.repeat(256), 'nul\u0000', 'é', ' ', 'ghost', '-', '__proto__'];

const STRING_ALPHABETS = [
  'abcdefghijklmnopqrstuvwxyz',
  'ABCXYZ0123456789-_./',
  '"\\/\b\f\n\r\t',
  '\u0000\u0001\u001f\u007f',
  'éüß中文🙂\u2028\u2029\ufeff',
  '\ud800\udc00\udfff\ud83d', // lone surrogates too
];

export class Gen {
  private seq = 0;
  private readonly realRefs: string[];

  constructor(
    private readonly rng: Rng,
    private readonly target: Target,
    private readonly label: string,
  ) {
    this.realRefs = [
      target.shadow,
      target.mountPoint,
      `${target.mountPoint}/`,
      `${target.mountPoint}/notes`,
      `${target.mountPoint}/notes/known.txt`,
      `${target.mountPoint}/../x`,
      target.lower,
      'nosuch-x',
      '',
      '.',
      '/',
    ];
  }

  // ---- values

  string(max = 40): string {
    const rng = this.rng;
    const alphabet = rng.pick(STRING_ALPHABETS);
    const chars = [...alphabet];
    let s = '';
    const n = rng.int(max + 1);
    for (let i = 0; i < n; i++) s += rng.pick(chars);
    return s;
  }

  longString(): string {
    const rng = this.rng;
    const n = rng.pick([1024, 4096, 65_536, 65_537, 100_000]);
    return rng.pick(['x', 'é', '/', '\u0000', '🙂', 'ab']).repeat(Math.ceil(n / 2));
  }

  number(): unknown {
    const rng = this.rng;
    return rng.chance(0.5) ? rng.pick(EDGE_NUMBERS) : rng.pick([rng.int(100), -rng.int(1000), rng.float() * 1e6, rng.u32()]);
  }

  value(depth = 3): unknown {
    const rng = this.rng;
    const kind = depth <= 0 ? rng.int(5) : rng.int(8);
    switch (kind) {
      case 0:
        return null;
      case 1:
        return rng.chance(0.5);
      case 2:
        return this.number();
      case 3:
      case 4:
        return rng.chance(0.03) ? this.longString() : this.string();
      case 5:
      case 6: {
        const n = rng.int(5);
        if (rng.chance(0.2)) return rawObject(Array.from({ length: n }, () => [rng.pick(PROTO_NAMES), this.value(depth - 1)] as const));
        const o: Record<string, unknown> = {};
        for (let i = 0; i < n; i++)
          setKey(
            o,
            rng.chance(0.3) ? rng.pick(['id', 'method', 'params', 'jsonrpc', 'result', 'error']) : this.string(8),
            this.value(depth - 1),
          );
        return o;
      }
      default:
        return Array.from({ length: rng.int(5) }, () => this.value(depth - 1));
    }
  }

  /** A value of another JSON type than `type` (so the method's schema refuses it). */
  wrongValue(type: FieldType): unknown {
    const rng = this.rng;
    const others: unknown[] = [null, [], {}, [this.string()], { a: 1 }, deepArray(rng.between(2, 50))];
    if (type !== 'number' && type !== 'int') others.push(this.number(), rng.u32());
    if (type !== 'boolean') others.push(true, false);
    if (type !== 'string' && type !== 'agent-or-null') others.push('1', 'true', '', this.string());
    if (type === 'strings') others.push([1], [null], [[]], [{}], [true]);
    if (type === 'agent-or-null') return rng.pick(others.filter((v) => v !== null));
    if (type === 'position') return rng.pick([null, 1, 'x', [], { line: -1, character: 0 }, { line: 'a', character: 0 }, { line: 0 }]);
    if (type === 'edits') return rng.pick([null, 'x', [1], [{}], [{ path: 1 }], [{ path: 'a', content: 2 }], {}]);
    if (type === 'rejections') return rng.pick([null, 'x', [], [1], [{}], [{ id: 1, reason: '' }], [{ id: 'not-an-id', reason: 'x' }], {}]);
    return rng.pick(others);
  }

  id(): unknown {
    const rng = this.rng;
    if (rng.chance(0.85)) return rng.chance(0.5) ? ++this.seq : `${this.label}-${++this.seq}`;
    return this.oddId();
  }

  oddId(): unknown {
    const rng = this.rng;
    return rng.pick<() => unknown>([
      () => 0,
      () => -1,
      () => -rng.u32(),
      () => new Tok('-0'),
      () => rng.pick(EDGE_NUMBERS),
      () => '',
      () => rng.pick(PROTO_NAMES),
      () => this.string(),
      () => 'i'.repeat(rng.pick([1000, 10_000, 100_000])),
      () => null,
      () => true,
      () => false,
      () => ({}),
      () => [],
      () => [1],
      () => ({ id: 1 }),
      () => deepArray(rng.between(10, 1000)),
      () => `${this.seq}`, // a string id equal to an earlier number id
    ])();
  }

  private shadowFor(method: string): string {
    return MUTATING.has(method) ? nosuch(this.rng) : this.rng.chance(0.6) ? this.target.shadow : this.rng.pick(this.realRefs);
  }

  private validField(method: MethodName, name: string, type: FieldType): unknown {
    const rng = this.rng;
    if (name === 'shadow') return this.shadowFor(method);
    if (name === 'folder') return `/nonexistent-shadowfs-fuzz/${rng.pick(['a', 'b', 'lower'])}`;
    if (name === 'mountPoint') return `/nonexistent-shadowfs-fuzz/mp`;
    if (name === 'name') return nosuch(rng);
    if (name === 'agent' || name === 'to') return rng.chance(0.5) ? this.target.agent : rng.pick(AGENTS);
    if (name === 'path' || name === 'cwd') return rng.chance(0.4) ? this.target.file : rng.pick(PATHS);
    if (name === 'data') return rng.pick(['', 'aGk=', 'not base64!', '====']);
    if (name === 'client') return rng.pick(['fuzz', '', 'x'.repeat(201)]);
    if (name === 'nonce') return rng.pick(['00'.repeat(16), 'zz']);
    if (name === 'proof') return '0'.repeat(64);
    if (name === 'backend') return rng.pick(['fuse_ll', 'fuse_hl', 'nope', '']);
    if (name === 'runId') return rng.pick(['r1', 'nosuch-run', '']);
    if (name === 'argv') return rng.pick([['true'], ['sh', '-c', 'exit 3'], []]);
    if (name === 'env') return rng.pick([['A=b'], ['NOEQUALS'], []]);
    if (name === 'timeoutMs') return rng.pick([1, 1000]);
    if (name === 'paths') return rng.pick([[], [this.target.file]]);
    switch (type) {
      case 'number':
        return rng.pick([0.5, 1, 30]);
      case 'int':
        return rng.pick([0, 1, 0o644]);
      case 'boolean':
        return rng.chance(0.5);
      case 'agent-or-null':
        return rng.chance(0.3) ? null : this.target.agent;
      case 'position':
        return { line: rng.int(5), character: rng.int(5) };
      case 'edits':
        return rng.pick([[], [{ path: this.target.file, content: 'x' }]]);
      case 'rejections':
        return [{ id: '0123456789abcdef', reason: 'fuzz' }];
      default:
        return this.string(10);
    }
  }

  /** Parameters a real request of `method` could carry (aimed so that it is harmless). */
  params(method: MethodName): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [name, type, need] of FIELDS[method]) {
      if (need === 'optional' && this.rng.chance(0.6)) continue;
      if (method === 'mount' && name === 'mountPoint') continue; // see harm()
      out[name] = this.validField(method, name, type);
    }
    return out;
  }

  request(method: string, params: unknown, id: unknown = this.id()): Record<string, unknown> {
    const msg: Record<string, unknown> = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    return msg;
  }

  // ---- messages

  /** Serializes, checks that it cannot harm the shadow (a test bug if it could), frames. */
  framed(category: Category, msg: unknown, header?: (n: number) => string): Framed {
    if (msg !== null && typeof msg === 'object' && !Array.isArray(msg) && !(msg instanceof Tok))
      makeSafe(msg as Record<string, unknown>, this.rng);
    const body = Buffer.from(toJson(msg), 'utf8');
    const h = harm(body);
    if (h) throw new Error(`the fuzz test generated a message that could harm the shadow (${h}): ${body.toString('utf8', 0, 300)}`);
    return { category, body, bytes: frame(body, header) };
  }

  private rawFramed(category: Category, body: Buffer, header?: (n: number) => string): Framed {
    const h = harm(body);
    if (h) throw new Error(`the fuzz test generated a message that could harm the shadow (${h})`);
    return { category, body, bytes: frame(body, header) };
  }

  randomJson(): Framed {
    return this.framed('random JSON', this.value(4));
  }

  wrongTypes(): Framed {
    const rng = this.rng;
    const method = rng.pick(METHODS);
    const params = this.params(method);
    const fields = FIELDS[method];
    if (fields.length === 0 || rng.chance(0.15))
      setKey(params, rng.chance(0.5) ? this.string(8) || 'extra' : rng.pick(PROTO_NAMES), this.value(1));
    else {
      const n = rng.between(1, Math.min(3, fields.length));
      for (let i = 0; i < n; i++) {
        const [name, type, need] = rng.pick(fields);
        if (need === 'required' && rng.chance(0.2)) delete params[name];
        else params[name] = this.wrongValue(type);
      }
    }
    return this.framed('wrong types', this.request(method, params));
  }

  edgeNumbers(): Framed {
    const rng = this.rng;
    const withNumbers = METHODS.filter((m) => FIELDS[m].some(([, t]) => t === 'number' || t === 'int'));
    const method = rng.pick(withNumbers);
    const params = this.params(method);
    for (const [name, type] of FIELDS[method])
      if ((type === 'number' || type === 'int') && rng.chance(0.8)) params[name] = rng.pick(EDGE_NUMBERS);
    if (rng.chance(0.2)) params.shadow = rng.pick(EDGE_NUMBERS);
    return this.framed('edge numbers', this.request(method, params, rng.chance(0.3) ? rng.pick(EDGE_NUMBERS) : this.id()));
  }

  longStrings(max = 100_000): Framed {
    const rng = this.rng;
    const method = rng.pick(METHODS);
    const params = this.params(method);
    const long = (): string => this.longString().slice(0, max);
    const where = rng.int(4);
    if (where === 0 && FIELDS[method].length > 0) params[rng.pick(FIELDS[method])[0]] = long();
    else if (where === 1) setKey(params, long(), 1);
    const msg = this.request(where === 2 ? long() : method, params, where === 3 ? long() : this.id());
    return this.framed('long strings', msg);
  }

  deepNesting(maxDepth = 100_000): Framed {
    const rng = this.rng;
    const depth = rng.pick([100, 1000, 10_000, maxDepth]);
    const nest = rng.chance(0.5) ? deepArray(depth) : deepObject(depth);
    const which = rng.int(6);
    if (which === 0) return this.framed('deep nesting', nest);
    if (which === 1) return this.framed('deep nesting', this.request('health', undefined, nest));
    if (which === 2) return this.framed('deep nesting', this.request(rng.pick(METHODS), nest));
    if (which === 3)
      return this.framed(
        'deep nesting',
        this.request(rng.pick(['layer.read', 'health', 'list']), { shadow: nest, agent: nest, path: nest }),
      );
    if (which === 4) return this.framed('deep nesting', { jsonrpc: '2.0', id: this.id(), result: nest });
    // unbalanced: not JSON
    return this.rawFramed('deep nesting', Buffer.from('['.repeat(depth) + ']'.repeat(depth - 1)));
  }

  unknownMethod(): Framed {
    const rng = this.rng;
    const method = rng.chance(0.8) ? rng.pick(UNKNOWN_METHODS) : this.string(30);
    const params = rng.pick<unknown>([undefined, {}, [], { shadow: this.target.shadow }, this.value(2)]);
    const msg = this.request(method, params);
    if (rng.chance(0.25)) delete msg.id;
    return this.framed('unknown methods', msg);
  }

  oddIds(): Framed {
    const rng = this.rng;
    const method = rng.chance(0.7) ? rng.pick(['health', 'version', 'list', 'status']) : rng.pick(METHODS);
    return this.framed('odd ids', this.request(method, this.params(method as MethodName), this.oddId()));
  }

  batch(): Framed {
    const rng = this.rng;
    const n = rng.weighted([
      [1, 0],
      [3, 1],
      [3, 2],
      [2, 3],
      [1, 10],
      [0.2, 1000],
    ]);
    const items = Array.from({ length: n }, () => (rng.chance(0.7) ? this.request('health', undefined) : this.value(2)));
    for (const it of items)
      if (it !== null && typeof it === 'object' && !Array.isArray(it) && !(it instanceof Tok)) makeSafe(it as Record<string, unknown>, rng);
    return this.framed('batches', rng.chance(0.1) ? [items] : items);
  }

  cancel(recentIds: unknown[]): Framed {
    const rng = this.rng;
    const params = rng.pick<() => unknown>([
      () => undefined,
      () => null,
      () => [],
      () => ({}),
      () => ({ id: null }),
      () => ({ id: {} }),
      () => ({ id: [1] }),
      () => ({ id: true }),
      () => ({ id: rng.pick(EDGE_NUMBERS) }),
      () => ({ id: this.string() }),
      () => ({ id: recentIds.length ? rng.pick(recentIds) : 1 }),
      () => ({ id: recentIds.length ? rng.pick(recentIds) : 1 }),
      () => 'cancel',
      () => 5,
    ])();
    const msg: Record<string, unknown> = { jsonrpc: '2.0', method: '$/cancelRequest' };
    if (params !== undefined) msg.params = params;
    if (rng.chance(0.2)) msg.id = this.id();
    return this.framed('$/cancelRequest', msg);
  }

  notification(): Framed {
    const rng = this.rng;
    const method = rng.pick<string>([...METHODS, '$/progress', '$/logTrace', '$/setTrace', 'shadow/changed', 'x']);
    const params = rng.pick<unknown>([
      undefined,
      isMethod(method) ? this.params(method) : {},
      [1, 2],
      ['token', { kind: 'begin' }],
      { token: this.value(1), value: this.value(2) },
      { message: this.string(), verbose: this.value(1) },
      { value: rng.pick(['off', 'verbose', 'messages', 5]) },
      this.value(2),
    ]);
    const msg: Record<string, unknown> = { jsonrpc: '2.0', method };
    if (params !== undefined) msg.params = params;
    return this.framed('notifications', msg);
  }

  response(): Framed {
    const rng = this.rng;
    const msg: Record<string, unknown> = rng.chance(0.8) ? { jsonrpc: '2.0' } : rng.pick([{ jsonrpc: '1.0' }, {}, { jsonrpc: 2 }]);
    msg.id = rng.chance(0.7) ? this.id() : this.oddId();
    if (rng.chance(0.6)) msg.result = this.value(2);
    else msg.error = rng.pick<unknown>([{ code: -32000, message: 'x' }, 'string', null, this.value(2), { code: 1e309, message: [] }]);
    if (rng.chance(0.1)) msg.result = msg.error = 1;
    return this.framed('responses', msg);
  }

  /** A real request (on the shadow under test for read-only methods) with one part changed. */
  mutated(): Framed {
    const rng = this.rng;
    const method = rng.pick(METHODS);
    const msg = this.request(method, this.params(method));
    const params = msg.params as Record<string, unknown>;
    const fields = FIELDS[method];
    const mutation = rng.int(14);
    switch (mutation) {
      case 0:
        delete msg.jsonrpc;
        break;
      case 1:
        msg.jsonrpc = rng.pick<unknown>(['1.0', '2', 2, 2.0, null, '2.0 ', ' 2.0', '', ['2.0']]);
        break;
      case 2:
        delete msg.method;
        break;
      case 3:
        msg.method = rng.pick<unknown>([
          method.toUpperCase(),
          `${method}x`,
          method.slice(0, -1),
          42,
          null,
          [method],
          { method },
          rng.pick(PROTO_NAMES),
        ]);
        break;
      case 4:
        msg.id = this.oddId();
        break;
      case 5:
        msg.params = rng.pick<unknown>([null, [], [params], 'params', 1, true, Object.values(params)]);
        break;
      case 6:
        delete msg.params;
        break;
      case 7:
        if (fields.length) delete params[rng.pick(fields)[0]];
        break;
      case 8:
        if (fields.length) params[rng.pick(fields)[0]] = this.value(2);
        break;
      case 9:
        if (fields.length) params[rng.pick(fields)[0]] = rng.pick([...PATHS, ...AGENTS]);
        break;
      case 10:
        setKey(params, rng.pick(['extra', 'Shadow', ' shadow', 'shadow\u0000', ...PROTO_NAMES]), this.value(1));
        break;
      case 11:
        setKey(msg, rng.pick(['extra', 'result', 'error', 'Method', '__proto__']), this.value(1));
        break;
      case 12: {
        // Repeat a key: JSON.parse keeps the last one.
        makeSafe(msg, rng);
        const pairs = Object.entries(msg);
        pairs.push(
          rng.pick<[string, unknown]>([
            ['method', 'health'],
            ['id', this.oddId()],
            ['jsonrpc', '1.0'],
            ['params', {}],
          ]),
        );
        return this.framed('mutated requests', rawObject(pairs));
      }
      default:
        return this.byteMutated(msg);
    }
    return this.framed('mutated requests', msg);
  }

  /** Flips, inserts or deletes a few bytes of a real request's JSON text. */
  private byteMutated(msg: Record<string, unknown>): Framed {
    const rng = this.rng;
    makeSafe(msg, rng);
    const text = Buffer.from(toJson(msg), 'utf8');
    const bytes = [...text];
    for (let n = rng.between(1, 3); n > 0; n--) {
      const at = rng.int(bytes.length + 1);
      const op = rng.int(3);
      if (op === 0 && at < bytes.length) bytes[at] ^= 1 << rng.int(8);
      else if (op === 1) bytes.splice(at, 0, rng.pick([0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x00, 0xff, 0xc3, rng.int(256)]));
      else bytes.splice(at, 1);
    }
    const body = Buffer.from(bytes);
    // A mutation that happened to make it harmful is dropped (the original is sent instead).
    return harm(body) ? this.rawFramed('mutated requests', text) : this.rawFramed('mutated requests', body);
  }

  notJson(): Framed {
    const rng = this.rng;
    const valid = toJson(this.request('health', undefined));
    const body = rng.pick<() => Buffer | string>([
      () => '',
      () => ' ',
      () => '{',
      () => '}',
      () => '[1,2',
      () => 'nul',
      () => 'NaN',
      () => 'Infinity',
      () => '-Infinity',
      () => 'undefined',
      () => "{'jsonrpc':'2.0'}",
      () => '{"a":1,}',
      () => '[1,]',
      () => '0x10',
      () => '01',
      () => '.5',
      () => '+1',
      () => '1e',
      () => '"unterminated',
      () => '"\\x"',
      () => '"\\ud800"',
      () => '{"a" 1}',
      () => `\ufeff${valid}`,
      () => `${valid} x`,
      () => `${valid}${valid}`,
      () => `/*c*/${valid}`,
      () => `${valid}\n\t `, // valid: trailing whitespace
      () => '"\u0000"', // valid JSON? no: raw control characters are not allowed in strings
      () => Buffer.from([0xff, 0xfe, 0xfd]),
      () => Buffer.concat([Buffer.from('"'), Buffer.from([0xff, 0xc3]), Buffer.from('"')]), // decodes to U+FFFD: valid
      () => Buffer.from(Array.from({ length: rng.between(1, 200) }, () => rng.int(256))),
      () => valid.slice(0, rng.int(valid.length)),
    ])();
    return this.rawFramed('not JSON', typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
  }

  /** Framing that is unusual but valid: every message must still be read and answered. */
  oddHeaders(): Framed {
    const rng = this.rng;
    const header = rng.pick<(n: number) => string>([
      (n) => `content-length: ${n}`,
      (n) => `CONTENT-LENGTH:\t${n}`,
      (n) => `Content-Length:${n}`,
      (n) => `Content-Length:    ${n}   `,
      (n) => `Content-Length: ${String(n).padStart(12, '0')}`,
      (n) => `Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: ${n}`,
      (n) => `Content-Length: ${n}\r\nContent-Type: application/json; charset=latin1`,
      (n) => `X-Foo: bar\r\nContent-Length: ${n}\r\nX-Empty:`,
      (n) => `Content-Length: 99999999999\r\nContent-Length: ${n}`, // the last one counts, for both
      (n) => `Content-Length: 3\r\ncontent-length: ${n}`,
      (n) => `Content-Encoding: gzip\r\nContent-Length: ${n}`,
      (n) => `${'X-Pad: '.padEnd(4000, 'p')}\r\nContent-Length: ${n}`,
    ]);
    const inner = rng.chance(0.5) ? this.request(rng.pick(['health', 'version', 'list']), undefined) : this.value(2);
    return this.framed('odd headers', inner, header);
  }

  /**
   * Every method, every parameter: each wrong type and edge number in turn (the others valid), each
   * required parameter missing, an unknown one, and parameters that are not an object.
   */
  sweep(): Framed[] {
    const byType: Record<FieldType, unknown[]> = {
      string: [null, 0, new Tok('-1'), new Tok('1e308'), new Tok('9007199254740993'), true, [], {}, ['x'], deepArray(100)],
      number: [null, '1', '', true, [], {}, ...['-1', '-0', '1.5', '1e308', '1e309', '9007199254740993', '5e-324'].map((t) => new Tok(t))],
      int: [null, '1', true, [], {}, ...['-1', '-0', '1.5', '4096', '1e308', '1e309', '9007199254740993'].map((t) => new Tok(t))],
      boolean: [null, 0, 1, 'true', '', [], {}],
      strings: [null, 'x', [], [1], [null], [[]], [{}], {}, [deepArray(100)]],
      'agent-or-null': [0, true, [], {}, ['keeper']],
      position: [null, 0, 'x', [], {}, { line: -1, character: 0 }, { line: 0, character: new Tok('1.5') }, { line: 0, character: 0, x: 1 }],
      edits: [null, 'x', {}, [1], [null], [{}], [{ path: 0 }], [{ path: 'a', edits: [{}] }]],
      rejections: [null, 'x', {}, [], [1], [{}], [{ id: 0, reason: 'x' }], [{ id: 'zz', reason: 'x' }], [{ id: '0123456789abcdef' }]],
    };
    const out: Framed[] = [];
    for (const method of METHODS) {
      for (const [name, type, need] of FIELDS[method]) {
        for (const wrong of byType[type]) {
          const params = this.params(method);
          params[name] = wrong;
          out.push(this.framed('wrong types', this.request(method, params)));
        }
        if (need === 'required') {
          const params = this.params(method);
          delete params[name];
          out.push(this.framed('wrong types', this.request(method, params)));
        }
      }
      const extra = this.params(method);
      setKey(extra, '__proto__', { shadow: this.target.shadow });
      out.push(this.framed('wrong types', this.request(method, extra)));
      for (const params of [[], [this.params(method)], 'params', 1, true, null])
        out.push(this.framed('wrong types', this.request(method, params)));
    }
    return out;
  }

  /** A request a good client would send (on the shadow under test for read-only methods). */
  valid(): Framed {
    const method = this.rng.pick(METHODS);
    return this.framed('valid requests', this.request(method, this.params(method)));
  }

  /** Any well-framed message, categories mixed. */
  any(recentIds: unknown[]): Framed {
    const rng = this.rng;
    return rng.weighted<() => Framed>([
      [8, () => this.randomJson()],
      [14, () => this.wrongTypes()],
      [6, () => this.edgeNumbers()],
      [0.5, () => this.longStrings(70_000)],
      [0.15, () => this.deepNesting()],
      [8, () => this.unknownMethod()],
      [6, () => this.oddIds()],
      [3, () => this.batch()],
      [5, () => this.cancel(recentIds)],
      [6, () => this.notification()],
      [4, () => this.response()],
      [16, () => this.mutated()],
      [6, () => this.notJson()],
      [4, () => this.oddHeaders()],
      [8, () => this.valid()],
    ])();
  }
}

// ---- Pieces that end a connection ----------------------------------------------------------------

/** Bytes whose framing is broken: the daemon must answer once (id null) and close the connection. */
export function brokenFraming(rng: Rng): Buffer {
  const body = '{"jsonrpc":"2.0","id":1,"method":"health"}';
  const pick = rng.pick<() => Buffer | string>([
    () => 'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n',
    () => `POST /rpc HTTP/1.1\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    () => 'Content-Length: -5\r\n\r\n',
    () => 'Content-Length: -1\r\n\r\n{}',
    () => 'Content-Length: 1e3\r\n\r\n',
    () => 'Content-Length: +5\r\n\r\n',
    () => 'Content-Length: 0x10\r\n\r\n',
    () => 'Content-Length: 5 5\r\n\r\n',
    () => 'Content-Length: 2.0\r\n\r\n{}',
    () => 'Content-Length: NaN\r\n\r\n',
    () => 'Content-Length: Infinity\r\n\r\n',
    () => 'Content-Length: 1234567890123\r\n\r\n',
    () => 'Content-Length: 16777217\r\n\r\n', // one byte over the limit
    () => 'Content-Length: 99999999999\r\n\r\n',
    () => `Content-Length: ${2 ** 31}\r\n\r\n`,
    () => 'Content-Length: \r\n\r\n',
    () => 'Content-Type: application/json\r\n\r\n{}',
    () => `Content-Length : ${body.length}\r\n\r\n${body}`,
    () => `: 5\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    () => '\r\n\r\n',
    () => `\r\n\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    () => `Content-Length: ${body.length}\r\r\n\r\n${body}`, // a stray CR
    () => `Content-Length: ${body.length}\nX: y\r\n\r\n${body}`, // a bare LF
    () => Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\nX: a`), Buffer.from([0]), Buffer.from(`b\r\n\r\n${body}`)]),
    // Bytes >= 0x80 in a header: 0x8D 0x8A is "\r\n" to a decoder that clears the high bit.
    () =>
      Buffer.concat([Buffer.from('Content-Length: 2\r\nX-A: '), Buffer.from([0x8d, 0x8a]), Buffer.from('Content-Length: 50\r\n\r\n{}')]),
    () => Buffer.concat([Buffer.from('X-A: '), Buffer.from([0xe9]), Buffer.from(`\r\nContent-Length: ${body.length}\r\n\r\n${body}`)]),
    () => `X-Pad: ${'a'.repeat(rng.between(8200, 20_000))}`, // a header that never ends
    () => `${'X-A: b\r\n'.repeat(1200)}Content-Length: 2\r\n\r\n{}`, // ends, but over 8 KiB
    () => `Content-Length: 1\r\n\r\n${body}\r\n\r\n`, // shorter than the body: the rest is read as a header
    // Garbage that starts with a byte no header line can start with, then a blank line.
    () =>
      Buffer.concat([
        Buffer.from([0xff]),
        Buffer.from(Array.from({ length: rng.between(1, 500) }, () => rng.int(256))),
        Buffer.from('\r\n\r\n'),
      ]),
    () =>
      Buffer.concat([
        Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]),
        Buffer.alloc(64, 7),
        Buffer.from('\r\n\r\n'),
      ]), // TLS hello
    () => `${body}\r\n\r\n`, // a body without a header
  ]);
  const out = pick();
  return typeof out === 'string' ? Buffer.from(out, 'latin1') : out;
}

/** The start of a message (or just of a header): the client then disconnects. */
export function halfMessage(rng: Rng, complete: Buffer): Buffer {
  return rng.pick<() => Buffer>([
    () => Buffer.from('Content-Len'),
    () => Buffer.from('Content-Length: 100\r\n'),
    () => Buffer.from('Content-Length: 100\r\n\r\n{"jsonrpc"'),
    () => Buffer.from('\r\n'),
    () => Buffer.concat([Buffer.from('Content-Length: 16777216\r\n\r\n'), Buffer.alloc(rng.pick([1, 1000, 65_536]), 0x20)]),
    () => complete.subarray(0, Math.max(1, rng.int(complete.length))),
  ])();
}
