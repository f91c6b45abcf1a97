// What every MCP tool module shares: the tool's shape, the context a call gets, and how a call
// becomes a request of this agent on its shadow (paths made relative to the project root).
import * as z from 'zod';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { ShadowError } from '../../common/errors';
import { Requests, type MethodName, type ParamsOf, type ResultOf } from '../../protocol/methods';
import type { DaemonLink } from '../link';
import type { OwnView } from '../own-view';
import { toRootRelative } from '../paths';
import { BackgroundRuns } from '../runs';
import { type ToolOutput } from '../shape';

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export interface ToolContext {
  shadow: string;
  agent: string;
  link: DaemonLink;
  runs: BackgroundRuns;
  /** The agent's view of its own, opened when it asks (use_own_view). */
  ownView: OwnView;
  /** Starts progress notifications for a queued run (when the client asked for progress); returns how to stop. */
  progressWhileQueued: (runId: string, extra: Extra) => (() => void) | undefined;
}

export interface ToolDef {
  name: string;
  title: string;
  description: string;
  inputSchema: z.ZodObject;
  readOnly?: boolean;
  destructive?: boolean;
  call: (ctx: ToolContext, args: Record<string, unknown>, extra: Extra) => Promise<ToolOutput>;
}

/** How long the lints that come with an edit's result may take (ms). */
export const EDIT_LINTS_TIMEOUT_MS = 3000;

/** The protocol's parameter schema of `method` without shadow, agent and `hide`. */
export function protocolSchema(method: MethodName, hide: string[] = []): z.ZodObject {
  const omit: Record<string, true> = { shadow: true, agent: true };
  for (const h of hide) omit[h] = true;
  return (Requests[method].params as unknown as z.ZodObject).omit(omit);
}

/** A request of this agent on its shadow, with `params` besides. */
export async function ask<M extends MethodName>(
  ctx: ToolContext,
  method: M,
  params: Record<string, unknown>,
  extra?: Extra,
): Promise<ResultOf<M>> {
  return ctx.link.request(method, { ...params, shadow: ctx.shadow, agent: ctx.agent } as ParamsOf<M>, extra?.signal);
}

/** A path argument as the daemon takes it: absolute paths inside the project made relative. */
export async function rel(ctx: ToolContext, p: unknown): Promise<string> {
  if (typeof p !== 'string') throw new ShadowError('INVALID_PATH', 'path must be a string');
  return toRootRelative(p, await ctx.link.roots());
}

export async function relOpt(ctx: ToolContext, p: unknown): Promise<string | undefined> {
  if (p === undefined) return undefined;
  const r = await rel(ctx, p);
  return r === '.' ? undefined : r;
}
