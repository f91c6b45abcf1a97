// The daemon's handler table, put together from its areas, and the one place that turns what a
// request changed into a layer/changed notification.
import type { Logger } from 'winston';
import type { CheckedParamsOf, MethodName, NotificationParamsOf, ResultOf } from '../../protocol/methods';
import type { RunPolicy } from '../../run/policy';
import type { ShadowManager } from '../manager';
import { adminHandlers, type DaemonFacts } from './admin';
import { auditHandlers } from './audit';
import type { Changes, Handlers, LayerChange } from './context';
import { fileChanges, fileHandlers } from './file';
import { layerChanges, layerHandlers } from './layer';
import { lspHandlers } from './lsp';
import { radarHandlers } from './radar';
import type { Runs } from './run';
import { shadowChanges, shadowHandlers } from './shadows';
import type { Shells } from './shell';

export type { CallContext, Client, Handlers } from './context';
export type { DaemonFacts } from './admin';
export { Runs } from './run';
export { Shells } from './shell';

export interface HandlerDeps {
  manager: ShadowManager;
  runs: Runs;
  shells: Shells;
  daemon: DaemonFacts;
  log: Logger;
  /** Which commands `run` may start. */
  policy: RunPolicy | undefined;
}

/** Every method's handler. The compiler checks that the areas together serve the whole protocol. */
export function handlerTable(d: HandlerDeps): Handlers {
  const areas = [
    adminHandlers(d.manager, d.daemon, d.log),
    shadowHandlers(d.manager, d.runs, d.shells),
    layerHandlers(d.manager, d.log),
    fileHandlers(d.manager),
    d.runs.handlers(d.manager, d.policy),
    lspHandlers(d.manager),
    d.shells.handlers(d.manager),
    radarHandlers(d.manager),
    auditHandlers(d.manager),
  ] as const;
  const seen = new Set<string>();
  for (const method of areas.flatMap((a) => Object.keys(a))) {
    if (seen.has(method)) throw new Error(`two handler areas serve ${method}`);
    seen.add(method);
  }
  const [admin, shadows, layer, file, run, lsp, shell, radar, audit] = areas;
  return { ...admin, ...shadows, ...layer, ...file, ...run, ...lsp, ...shell, ...radar, ...audit };
}

const changes: Changes = { ...shadowChanges, ...layerChanges, ...fileChanges };

/**
 * The layer/changed notification a request that succeeded calls for, or undefined: the daemon
 * tells every client this once, after the handler returned, so handlers never broadcast.
 */
export function changeOf<M extends MethodName>(
  method: M,
  params: CheckedParamsOf<M>,
  result: ResultOf<M>,
): NotificationParamsOf<'layer/changed'> | undefined {
  // Indexed by a method the compiler cannot narrow here; each entry was checked against its own method's types.
  const describe = (changes as Partial<Record<MethodName, (p: unknown, r: unknown) => LayerChange | undefined>>)[method];
  const change = describe?.(params, result);
  return change && { shadow: (params as { shadow: string }).shadow, ...change };
}
