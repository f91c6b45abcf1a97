// The shadowfs RPC protocol as data: every method with its parameter shape, the notifications,
// and the documented error codes. Server, client, CLI (and later the VS Code extension) import
// this one module. JSON-RPC 2.0 over the framing in framing.ts.

export const PROTOCOL_VERSION = 1;

/** JSON-RPC error codes. Application errors carry the ShadowError code in `error.data.code`. */
export const RpcErrorCodes = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** A path was absolute, had "..", a NUL byte, or went through a symlink. */
  InvalidPath: -32010,
  /** No shadow with that name or mount point. */
  UnknownShadow: -32011,
  /** No layer for that agent. */
  UnknownAgent: -32012,
  /** The mount, layer or view is in use. */
  Busy: -32013,
  /** A job or the daemon itself ran out of time. */
  Timeout: -32014,
  /** Not available in this version or on this platform. */
  NotSupported: -32015,
  /** An argument other than a path was not valid (a mode, a timeout, an environment entry, ...). */
  InvalidArgument: -32016,
  /** Any other shadowfs error; see error.data.code. */
  Failed: -32000,
} as const;

/** Which RPC error code a ShadowError code travels as. */
export function rpcCodeFor(code: string): number {
  switch (code) {
    case 'INVALID_PATH':
    case 'PATH_THROUGH_SYMLINK':
    case 'INVALID_AGENT':
      return RpcErrorCodes.InvalidPath;
    case 'INVALID_ARGUMENT':
      return RpcErrorCodes.InvalidArgument;
    case 'UNKNOWN_SHADOW':
      return RpcErrorCodes.UnknownShadow;
    case 'UNKNOWN_AGENT':
      return RpcErrorCodes.UnknownAgent;
    case 'MOUNT_BUSY':
    case 'LAYER_BUSY':
      return RpcErrorCodes.Busy;
    case 'TIMEOUT':
      return RpcErrorCodes.Timeout;
    case 'NOT_SUPPORTED':
    case 'NAMESPACE_UNAVAILABLE':
      return RpcErrorCodes.NotSupported;
    case 'INTERNAL':
      return RpcErrorCodes.InternalError;
    default:
      return RpcErrorCodes.Failed;
  }
}

/** Field kinds a parameter object may have; a trailing "?" makes it optional. */
type FieldKind = 'string' | 'number' | 'boolean' | 'string|null' | 'string[]' | 'string?' | 'number?' | 'boolean?' | 'string[]?';
export type ParamSpec = Record<string, FieldKind>;

export interface ShadowInfo {
  name: string;
  lower: string;
  mountPoint: string;
  /** The mount backend serving it ("fuse_ll", "fuse_hl"). */
  backend: string;
  /** false while unmounted for being idle; the next request mounts it again, layers intact. */
  mounted: boolean;
  active: string | null;
  agents: string[];
  views: Array<{ id: number; agent: string; mountPoint: string }>;
  idleSeconds: number;
}

/** What a run reports when its command has ended. */
export interface RunResult {
  runId: string;
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  durationMs: number;
  queuedMs: number;
  timedOut: boolean;
  cancelled: boolean;
  /** Processes still alive when the command ended (background children), killed then. */
  leftoverProcesses: number;
  outputTruncated: boolean;
  /**
   * Whether the run was kept from writing the folder through its absolute path (Linux: a private
   * mount namespace in which the folder's own path shows the shadow). false after
   * `originalPath: false` or, where no namespace could be made, `unprotected: true`.
   */
  protected: boolean;
  /** Why the run was not protected, when it was not. */
  unprotectedReason?: string;
}

export interface ChangeInfo {
  path: string;
  kind: 'added' | 'modified' | 'deleted' | 'metadata';
  type: 'file' | 'directory' | 'symlink' | 'special';
}

/** Every request: its parameters (checked before anything is touched) and its result type. */
export const Methods = {
  version: { params: {} as ParamSpec },
  health: { params: {} as ParamSpec },
  status: { params: {} as ParamSpec },
  mount: {
    params: {
      folder: 'string',
      mountPoint: 'string?',
      name: 'string?',
      cacheTimeout: 'number?',
      backend: 'string?',
      /** Let other users use the shadow (FUSE allow_other); ALLOW_OTHER_DENIED for a non-root daemon without user_allow_other in /etc/fuse.conf. */
      allowOther: 'boolean?',
    } as ParamSpec,
  },
  unmount: { params: { shadow: 'string', lazy: 'boolean?' } as ParamSpec },
  list: { params: {} as ParamSpec },
  'layer.create': { params: { shadow: 'string', agent: 'string' } as ParamSpec },
  'layer.drop': { params: { shadow: 'string', agent: 'string' } as ParamSpec },
  /** Makes `to` a copy of `agent`'s layer; LAYER_EXISTS when `to` has one. */
  'layer.clone': { params: { shadow: 'string', agent: 'string', to: 'string' } as ParamSpec },
  'layer.list': { params: { shadow: 'string' } as ParamSpec },
  'layer.write': { params: { shadow: 'string', agent: 'string', path: 'string', data: 'string', mode: 'number?' } as ParamSpec },
  'layer.remove': { params: { shadow: 'string', agent: 'string', path: 'string' } as ParamSpec },
  'layer.read': { params: { shadow: 'string', agent: 'string', path: 'string' } as ParamSpec },
  'layer.reset': { params: { shadow: 'string', agent: 'string' } as ParamSpec },
  'layer.changes': { params: { shadow: 'string', agent: 'string' } as ParamSpec },
  activate: { params: { shadow: 'string', agent: 'string|null' } as ParamSpec },
  'view.open': { params: { shadow: 'string', agent: 'string', mountPoint: 'string?' } as ParamSpec },
  'view.close': { params: { shadow: 'string', view: 'number', lazy: 'boolean?' } as ParamSpec },
  stats: { params: { shadow: 'string' } as ParamSpec },
  /** Runs a command in the shadow as an agent; output arrives as run/output notifications on this connection. */
  run: {
    params: {
      shadow: 'string',
      agent: 'string',
      argv: 'string[]',
      runId: 'string?',
      cwd: 'string?',
      env: 'string[]?',
      timeout: 'number?',
      discardWrites: 'boolean?',
      shell: 'boolean?',
      /** Default true (Linux): the folder's own path shows the shadow; false runs unprotected. */
      originalPath: 'boolean?',
      /** Older name of originalPath: true, the default now. */
      atOriginalPath: 'boolean?',
      /** Run without protection where the namespace cannot be made, instead of NAMESPACE_UNAVAILABLE. */
      unprotected: 'boolean?',
      noNetwork: 'boolean?',
    } as ParamSpec,
  },
  'run.cancel': { params: { runId: 'string' } as ParamSpec },
} as const;

export type MethodName = keyof typeof Methods;

export interface Results {
  version: { version: string; protocol: number; platform: string; backends: string[] };
  health: { ok: true; pid: number; uptimeSeconds: number; shadows: number };
  status: { pid: number; socket: string; logFile: string; uptimeSeconds: number; shadows: ShadowInfo[]; recovered: string[] };
  mount: ShadowInfo;
  unmount: { name: string };
  list: { shadows: ShadowInfo[] };
  'layer.create': { agent: string };
  'layer.drop': { agent: string };
  'layer.clone': { agent: string; to: string };
  'layer.list': { agents: string[]; active: string | null };
  'layer.write': { path: string; bytes: number };
  'layer.remove': { path: string };
  /** data is base64 */
  'layer.read': { path: string; data: string };
  'layer.reset': { agent: string };
  'layer.changes': { changes: ChangeInfo[] };
  activate: { active: string | null; paths: number; epoch: boolean; ms: number };
  'view.open': { view: number; agent: string; mountPoint: string };
  'view.close': { view: number };
  stats: {
    layers: Record<string, { memoryBytes: number; paths: number; spilledBytes: number }>;
    scheduler: unknown;
  };
  run: RunResult;
  'run.cancel': { runId: string; cancelled: boolean };
}

/** Notifications the daemon sends to every client. */
export const Notifications = {
  /** params: { shadow, event: 'mounted' | 'unmounted' | 'idle-unmounted' | 'remounted' } */
  shadowChanged: 'shadow/changed',
  /** params: { shadow, agent, event: 'written' | 'removed' | 'reset' | 'dropped' | 'cloned' | 'activated' } */
  layerChanged: 'layer/changed',
  /** To the connection that asked for the run only. params: { runId, stream: 'stdout' | 'stderr', data (base64) } */
  runOutput: 'run/output',
} as const;

/** Checks `params` against a method's spec; returns a sentence about the first problem, or null. */
export function checkParams(method: MethodName, params: unknown): string | null {
  const spec = Methods[method].params;
  if (params === undefined) params = {};
  if (typeof params !== 'object' || params === null || Array.isArray(params)) return 'params must be an object';
  const obj = params as Record<string, unknown>;
  for (const key of Object.keys(obj)) if (!(key in spec)) return `unknown parameter "${key}"`;
  for (const [key, kind] of Object.entries(spec)) {
    const v = obj[key];
    const optional = kind.endsWith('?');
    if (v === undefined) {
      if (optional) continue;
      return `missing parameter "${key}"`;
    }
    const base = kind.replace('?', '');
    if (base === 'string[]') {
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) return `parameter "${key}" must be a list of strings`;
      if (v.some((x: string) => x.includes('\0'))) return `parameter "${key}" contains a NUL byte`;
      continue;
    }
    if (base === 'string|null') {
      if (v !== null && typeof v !== 'string') return `parameter "${key}" must be a string or null`;
    } else if (typeof v !== base || (base === 'number' && !Number.isFinite(v))) {
      return `parameter "${key}" must be a ${base}`;
    }
    if (typeof v === 'string' && v.includes('\0')) return `parameter "${key}" contains a NUL byte`;
  }
  return null;
}

export function isMethod(name: unknown): name is MethodName {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(Methods, name);
}
