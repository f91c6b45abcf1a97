// Every request and notification of the shadowfs protocol, each one typed constant with a runtime
// schema (zod). The daemon validates parameters with these schemas before anything is touched;
// the client's methods take their types from them; `npm run build` turns them into
// protocol.schema.json (JSON Schema), the source for the docs, the MCP server and the
// PowerShell module. No Node APIs here (this compiles with "types": []).
// The requests are declared by area, one module each, as the daemon's handlers are
// (src/daemon/handlers/): admin, shadows, layer, work, file, run, lsp, shell, radar, audit; the notifications
// in notifications.ts. This module puts them together and checks parameters.
import * as z from 'zod';
import { AdminRequests } from './admin';
import { AuditRequests } from './audit';
import { FileRequests } from './file';
import { LayerRequests } from './layer';
import { LspRequests } from './lsp';
import { RadarRequests } from './radar';
import { RunRequests } from './run';
import { ShadowRequests, ShadowViewRequests } from './shadows';
import { ShellRequests } from './shell';
import { WorkRequests } from './work';

export type { NotificationDef, RequestDef } from './shared';
export { NativeStatus, ShadowInfo, LayerStats, SchedulerStats } from './shadows';
export { LAYER_READ_MAX_BYTES } from './layer';
export { ChangeBase, ChangeInfo, PatchFileInfo, ExcludedPath, DiffResult, Resolution, ApplyResult, CheckpointInfo } from './work';
export { GREP_DEFAULT_TIMEOUT_MS, GREP_MAX_TIMEOUT_MS } from './file';
export { RunResult } from './run';
export { Overlap } from './radar';
export { AuditEntry } from './audit';
export { Position, Range, Diagnostic, TextEdit, Location, FileLints } from './lsp';
export { Notifications, type NotificationName, type NotificationParamsOf } from './notifications';

/** Bumped when a change would break an existing client. */
export const PROTOCOL_VERSION = 2;

/**
 * Every request. The order is the protocol's documented order (docs/protocol.md and
 * protocol.schema.json list methods in it), which is why the shadow requests come in two parts.
 */
export const Requests = {
  ...AdminRequests,
  ...ShadowRequests,
  ...LayerRequests,
  ...WorkRequests,
  ...FileRequests,
  ...ShadowViewRequests,
  ...RunRequests,
  ...LspRequests,
  ...ShellRequests,
  ...RadarRequests,
  ...AuditRequests,
} as const;

/**
 * The allow-list of a restricted connection (session.restrict): each method it may still call, and
 * on what terms. Every method not named here, a method added to the protocol later included, is
 * refused with SCOPE_DENIED. "Its shadow" and "its agent" are those of the restriction; the
 * daemon enforces these terms (src/daemon/scope.ts) before a handler runs.
 */
export const ScopedMethods = {
  hello: 'always',
  version: 'always',
  health: 'always',
  'session.restrict': 'the same shadow and agent again, with allowApply only if it had it: a scope never widens',
  list: 'answers with its shadow only, and of that its agent only',
  'layer.list': 'its shadow; answers with its agent only',
  'layer.create': 'its agent',
  'layer.drop': 'never: dropping a layer drops its audit trail with it (layer.reset drops the changes and keeps the record)',
  'layer.clone': 'from its agent to its agent only (another layer is neither read nor made)',
  'layer.write': 'its agent',
  'layer.remove': 'its agent',
  'layer.revert': 'its agent',
  'layer.read': 'its agent',
  'layer.reset': 'its agent',
  'layer.changes': 'its agent',
  'layer.diff': 'its agent',
  'layer.patch': 'its agent',
  'layer.apply': 'its agent, and only when the restriction has allowApply',
  'layer.hunks': 'its agent',
  'layer.rejections':
    "its agent (reads its own rejections; take marks them told). layer.reject is not open to it: rejecting is the user's word",
  'layer.checkpoint': 'its agent',
  'layer.restore': 'its agent',
  'layer.checkpoints': 'its agent',
  'file.read': 'its agent',
  'file.write': 'its agent',
  'file.edit': 'its agent',
  'file.list': 'its agent',
  'file.glob': 'its agent',
  'file.grep': 'its agent',
  activate: 'its agent (not null, not another agent), and not while the user has pinned another layer or the folder',
  'view.open':
    'its agent, at the mount point the daemon picks (mountPoint is refused): a view of its own, so its runs and lints never queue; not while the agent has 4 views of the shadow open',
  'view.close': "its agent's views only",
  run: 'its agent, protected: unprotected and originalPath: false are refused, and so is any parameter not known to the restriction',
  'run.cancel': 'runs this connection started',
  lints: 'its agent',
  'lsp.definition': 'its agent',
  'lsp.references': 'its agent',
  'lsp.hover': 'its agent',
  radar: 'its shadow, its agent (or none given); answers with the overlaps that name its agent only',
  'layer.audit': "its agent: its own audit trail, read-only (another agent's is refused; restoring a checkpoint takes nothing out of it)",
} as const satisfies Partial<Record<keyof typeof Requests, string>>;
export type ScopedMethod = keyof typeof ScopedMethods;

export type Requests = typeof Requests;
export type MethodName = keyof Requests;
/** What a client may send as a method's parameters. */
export type ParamsOf<M extends MethodName> = z.input<Requests[M]['params']>;
/** The parameters a handler receives, after validation. */
export type CheckedParamsOf<M extends MethodName> = z.output<Requests[M]['params']>;
export type ResultOf<M extends MethodName> = z.output<Requests[M]['result']>;

export function isMethod(name: unknown): name is MethodName {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(Requests, name);
}

/** Checks a request's parameters; returns them parsed, or a sentence about the first problem. */
export function checkParams<M extends MethodName>(
  method: M,
  params: unknown,
): { ok: true; value: CheckedParamsOf<M> } | { ok: false; problem: string } {
  if (params === undefined || params === null) params = {};
  if (typeof params !== 'object' || Array.isArray(params)) return { ok: false, problem: 'params must be an object (parameters by name)' };
  let r: ReturnType<(typeof Requests)[M]['params']['safeParse']>;
  try {
    r = Requests[method].params.safeParse(params) as typeof r;
  } catch {
    // zod's length checks read `length` of any value that has one, and comparing an object
    // without a primitive form throws (a fuzzed { length: { toString: "x" } } did): that is a
    // malformed parameter too, never an internal error.
    return { ok: false, problem: 'a parameter has a value of the wrong kind (an object where a string, number or list belongs)' };
  }
  if (r.success) return { ok: true, value: r.data as CheckedParamsOf<M> };
  return { ok: false, problem: describeIssue(r.error.issues[0], params as Record<string, unknown>) };
}

function describeIssue(issue: z.core.$ZodIssue | undefined, params: Record<string, unknown>): string {
  if (!issue) return 'invalid parameters';
  if (issue.code === 'unrecognized_keys') return `unknown parameter ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  const where = issue.path.length ? `parameter "${issue.path.map(String).join('.')}"` : 'params';
  if (issue.code === 'invalid_type' && issue.path.length === 1 && params[String(issue.path[0])] === undefined) return `missing ${where}`;
  return `${where}: ${issue.message}`;
}
