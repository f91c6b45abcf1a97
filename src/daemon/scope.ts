// What a restricted connection may do. A front end that serves an untrusted agent (shadowfs mcp)
// restricts its connection to one agent's layer on one shadow with session.restrict; from then on
// every request is checked here, in the daemon's dispatch, before its handler runs. The rules are
// an allow-list keyed by the protocol's own ScopedMethods (the compiler keeps the two the same): a
// method without a rule, one added to the protocol later included, is refused.
import type { CheckedParamsOf, MethodName, NotificationName, NotificationParamsOf, ResultOf, ScopedMethod } from '../protocol/methods';

export interface Scope {
  /** The shadow's name when the connection restricted itself. */
  readonly name: string;
  /**
   * The shadow itself: one unmounted and mounted again under the same name (perhaps of another
   * folder) is another shadow, out of scope.
   */
  readonly shadow: object;
  /** The folder that shadow shows. */
  readonly folder: string;
  readonly agent: string;
  /** May apply the agent's layer to the folder: only narrowed, never widened. */
  allowApply: boolean;
}

export interface ScopeContext {
  /** The shadow a request's `shadow` parameter names (a name, mount point, or path inside it), if any. */
  resolve(ref: string): object | undefined;
  /** Whether this connection started the run with this id. */
  ownsRun(runId: string): boolean;
  /** The agent of the open view `view` of the shadow `ref` names, if there is one. */
  viewAgent(ref: string, view: number): string | undefined;
  /** How many open views `agent` has on the shadow `ref` names. */
  viewsOf(ref: string, agent: string): number;
  /** What the user pinned the shared mount of the shadow `ref` names to (Shadow.pin): undefined if nothing. */
  pinned(ref: string): string | null | undefined;
}

type Rule<M extends ScopedMethod> = (p: CheckedParamsOf<M>, scope: Scope, ctx: ScopeContext) => string | undefined;

const always = (): undefined => undefined;

/** The open views of one agent on one shadow past which a restricted connection may open no more. */
export const MAX_AGENT_VIEWS = 4;
const VIEW_CAP = `its agent has ${MAX_AGENT_VIEWS} views of this shadow open already: use one, or close one (view.close) first`;

/** The refusal of a view past MAX_AGENT_VIEWS, for the view.open handler, which counts views still being opened too. */
export function viewCapRefusal(scope: Scope): string {
  return `${describe(scope)}: view.open refused, ${VIEW_CAP}`;
}

function shadowOnly(p: { shadow: string }, s: Scope, ctx: ScopeContext): string | undefined {
  return ctx.resolve(p.shadow) === s.shadow ? undefined : `shadow ${JSON.stringify(p.shadow)} is not its shadow`;
}

function own(p: { shadow: string; agent: string | null }, s: Scope, ctx: ScopeContext): string | undefined {
  const other = shadowOnly(p, s, ctx);
  if (other) return other;
  if (p.agent !== s.agent)
    return p.agent === null ? 'it may not take its layer off the shared mount' : `${JSON.stringify(p.agent)} is another agent`;
  return undefined;
}

/** The run parameters a restricted connection may pass; one added to the protocol later is refused until it is judged here. */
const RUN_PARAMS: ReadonlySet<string> = new Set<keyof CheckedParamsOf<'run'>>([
  'shadow',
  'agent',
  'argv',
  'runId',
  'cwd',
  'env',
  'timeout',
  'discardWrites',
  'shell',
  'originalPath',
  'atOriginalPath',
  'unprotected',
  'noNetwork',
  'limits', // limits only take away
]);

const RULES: { [M in ScopedMethod]: Rule<M> } = {
  hello: always,
  version: always,
  health: always,
  'session.restrict': (p, s, ctx) => {
    const other = own(p, s, ctx);
    if (other) return `a restriction only narrows: ${other}`;
    if (p.allowApply === true && !s.allowApply) return 'a restriction only narrows: it may not allow apply now';
    return undefined;
  },
  list: always, // its answer is narrowed (narrowResult)
  'layer.list': shadowOnly, // and its answer narrowed
  'layer.create': own,
  // Dropping a layer drops its audit trail with it: the record of what the agent did would be
  // gone with nothing left to say so. That is the user's to do; layer.reset drops the changes and
  // keeps the record.
  'layer.drop': (p, s, ctx) =>
    own(p, s, ctx) ??
    "dropping its layer would drop its audit trail too: that is the user's to do (layer.reset drops its changes and keeps the record)",
  'layer.clone': (p, s, ctx) => own(p, s, ctx) ?? (p.to === s.agent ? undefined : `${JSON.stringify(p.to)} is another agent`),
  'layer.write': own,
  'layer.remove': own,
  'layer.revert': own,
  'layer.read': own,
  'layer.reset': own,
  'layer.changes': own,
  'layer.diff': own,
  'layer.patch': own,
  'layer.apply': (p, s, ctx) =>
    own(p, s, ctx) ??
    (s.allowApply ? undefined : "applying to the user's folder was not allowed when it was restricted (shadowfs mcp --allow-apply)") ??
    // Type changes and links out of the folder need the user's own confirmation, not the agent's.
    ((p as { allowTypeChanges?: boolean }).allowTypeChanges === true
      ? 'type changes and links that leave the folder are confirmed by the user (shadowfs apply --allow-type-changes), not through a restricted connection'
      : undefined),
  'layer.hunks': own,
  // Its own rejections it reads (and marks told); recording one is the user's word, never the agent's.
  'layer.rejections': own,
  'layer.checkpoint': own,
  'layer.restore': own,
  'layer.checkpoints': own,
  'file.read': own,
  'file.write': own,
  'file.edit': own,
  'file.list': own,
  'file.glob': own,
  'file.grep': own,
  // While the user has pinned what the shared mount shows (Shadow.pin), an agent may not
  // change it: its runs take turns there (and the mount goes back), or it opens a view.
  activate: (p, s, ctx) => {
    const other = own(p, s, ctx);
    if (other) return other;
    const pinned = ctx.pinned(p.shadow);
    return pinned === undefined || pinned === p.agent
      ? undefined
      : 'the user chose what the shared mount shows (shadowfs activate): its runs take turns there, or it may open a view of its own';
  },
  // A view of its own: where it is mounted is the daemon's choice, never the agent's; and a few at
  // most (each is a mount with its own threads, and one more --hide in every later run).
  'view.open': (p, s, ctx) =>
    own(p, s, ctx) ??
    (p.mountPoint === undefined ? undefined : 'it may not choose where a view is mounted') ??
    (ctx.viewsOf(p.shadow, s.agent) < MAX_AGENT_VIEWS ? undefined : VIEW_CAP),
  'view.close': (p, s, ctx) =>
    shadowOnly(p, s, ctx) ?? (ctx.viewAgent(p.shadow, p.view) === s.agent ? undefined : `view ${p.view} is not a view of its agent`),
  run: (p, s, ctx) => {
    const other = own(p, s, ctx);
    if (other) return other;
    const unknown = Object.keys(p).find((k) => !RUN_PARAMS.has(k));
    if (unknown !== undefined) return `run parameter ${JSON.stringify(unknown)} is not allowed to it`;
    if (p.unprotected === true) return 'it may not run unprotected';
    if (p.originalPath === false) return "it may not run without the shadow at the folder's own path (originalPath: false)";
    return undefined;
  },
  'run.cancel': (p, _s, ctx) => (ctx.ownsRun(p.runId) ? undefined : `run ${JSON.stringify(p.runId)} is not one it started`),
  lints: own,
  'lsp.definition': own,
  'lsp.references': own,
  'lsp.hover': own,
  radar: (p, s, ctx) =>
    shadowOnly(p, s, ctx) ?? (p.agent === undefined || p.agent === s.agent ? undefined : `${JSON.stringify(p.agent)} is another agent`),
  // What its own processes did: nothing it did not know, and it can neither change nor clear it.
  'layer.audit': own,
};

function describe(s: Scope): string {
  return `this connection is restricted to agent ${JSON.stringify(s.agent)} on shadow ${JSON.stringify(s.name)}`;
}

/** Why a restricted connection may not make this request, or undefined when it may. */
export function scopeRefusal(method: MethodName, params: unknown, scope: Scope, ctx: ScopeContext): string | undefined {
  if (!Object.prototype.hasOwnProperty.call(RULES, method)) return `${describe(scope)}, and ${method} is not open to it`;
  const why = (RULES[method as ScopedMethod] as Rule<ScopedMethod>)(params as never, scope, ctx);
  return why === undefined ? undefined : `${describe(scope)}: ${method} refused, ${why}`;
}

/** The answer a restricted connection gets: of list, layer.list and radar, only its own shadow and agent. */
export function narrowResult<M extends MethodName>(method: M, result: ResultOf<M>, scope: Scope, ctx: ScopeContext): ResultOf<M> {
  if (method === 'list') {
    const r = result as ResultOf<'list'>;
    const shadows = r.shadows
      .filter((x) => ctx.resolve(x.name) === scope.shadow)
      .map((x) => ({ ...x, agents: x.agents.filter((a) => a === scope.agent), views: x.views.filter((v) => v.agent === scope.agent) }));
    return { ...r, shadows } as ResultOf<M>;
  }
  if (method === 'layer.list') {
    const r = result as ResultOf<'layer.list'>;
    return { ...r, agents: r.agents.filter((a) => a === scope.agent) } as ResultOf<M>;
  }
  if (method === 'radar') {
    const r = result as ResultOf<'radar'>;
    return { ...r, overlaps: r.overlaps.filter((o) => o.agents.includes(scope.agent)) } as ResultOf<M>;
  }
  return result;
}

/**
 * What a restricted connection hears of this notification: only of its own shadow and agent
 * (radar/changed keeps the overlaps that name its agent); undefined when nothing.
 */
export function heard<N extends NotificationName>(
  method: N,
  params: NotificationParamsOf<N>,
  scope: Scope,
  resolve: ScopeContext['resolve'],
): NotificationParamsOf<N> | undefined {
  const p = params as { shadow?: string; agent?: string | null };
  if (typeof p.shadow !== 'string') return undefined;
  const mine = p.shadow === scope.name || resolve(p.shadow) === scope.shadow;
  if (!mine) return undefined;
  if (method === 'layer/changed') return p.agent === scope.agent ? params : undefined;
  if (method === 'radar/changed') {
    const r = params as NotificationParamsOf<'radar/changed'>;
    const names = (o: { agents: string[] }): boolean => o.agents.includes(scope.agent);
    const narrowed = { ...r, added: r.added.filter(names), cleared: r.cleared.filter(names) };
    return narrowed.added.length || narrowed.cleared.length ? (narrowed as NotificationParamsOf<N>) : undefined;
  }
  return params;
}
