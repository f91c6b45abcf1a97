// What every handler module of the daemon shares: the connection a request came on, the shape of
// a handler and of the handler table, and how a handler says what it changed in a layer.
// Handlers live in this folder by area (admin, shadows, layer, file, run, lsp, shell, radar), each returning its
// part of the table; index.ts puts the parts together. Accepting, authenticating and dispatching
// requests stays in ../server.ts.
import { ShadowError } from '../../common/errors';
import type { CheckedParamsOf, MethodName, NotificationName, NotificationParamsOf, ResultOf } from '../../protocol/methods';
import type { Shadow } from '../../shadow';
import type { ShadowManager } from '../manager';
import type { RpcConnection } from '../rpc';
import type { Scope } from '../scope';

/** One connection to the daemon. */
export interface Client {
  rpc: RpcConnection;
  /** Windows: set by a hello whose proof matched; Linux: the kernel vouched for the peer. */
  trusted: boolean;
  closed: AbortController;
  /** The name it gave in hello, for status and the log. */
  name?: string;
  /** Set by session.restrict, never unset: what the connection may still reach (see scope.ts). */
  scope?: Scope;
}

/** What a handler knows about the connection that asked. */
export interface CallContext {
  /** Tells the connection that asked only (daemon/waiting, run/output). */
  notify<N extends NotificationName>(method: N, params: NotificationParamsOf<N>): void;
  /** Aborted when the client cancels the request or the connection closes before it is answered. */
  signal: AbortSignal;
  client: Client;
}

export type Handler<M extends MethodName> = (params: CheckedParamsOf<M>, ctx: CallContext) => Promise<ResultOf<M>>;

/** Every method of the protocol, served. */
export type Handlers = { [M in MethodName]: Handler<M> };

/** Methods whose parameters name a shadow: the ones that can change a layer. */
export type ShadowMethod = { [M in MethodName]: CheckedParamsOf<M> extends { shadow: string } ? M : never }[MethodName];

/** A layer/changed notification less its shadow, which is always the one the request named. */
export type LayerChange = Omit<NotificationParamsOf<'layer/changed'>, 'shadow'>;

/**
 * What a method changed in a layer, from its parameters and its result, or undefined when it
 * changed nothing (an apply that was a dry run). The dispatcher tells every client once the
 * method has succeeded (see changeOf in index.ts), so no handler broadcasts by itself.
 */
export type Changes = { [M in ShadowMethod]?: (params: CheckedParamsOf<M>, result: ResultOf<M>) => LayerChange | undefined };

/** The shadow a request names, marked used and mounted again if it was idle-unmounted. */
export async function shadowOf(m: ShadowManager, p: { shadow: string }): Promise<Shadow> {
  return m.use(m.get(p.shadow));
}

/** A request's environment entries (NAME=value) as variables; INVALID_ARGUMENT names a malformed one. */
export function envOf(entries: readonly string[] | undefined): Record<string, string> {
  const env: Record<string, string> = {};
  for (const kv of entries ?? []) {
    const i = kv.indexOf('=');
    if (i <= 0) throw new ShadowError('INVALID_ARGUMENT', `environment entries look like NAME=value, got ${JSON.stringify(kv)}`);
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return env;
}
