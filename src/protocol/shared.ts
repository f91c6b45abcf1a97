// What every area of the protocol shares: how a request and a notification are declared, and the
// parameter shapes most methods take (a shadow, an agent, a path). No Node APIs here (the protocol
// compiles with "types": []).
import * as z from 'zod';
import type { ErrorCode } from './errors';

const NO_NUL = /^[^\u0000]*$/;
export const text = (description: string) => z.string().regex(NO_NUL, 'contains a NUL byte').describe(description);
export const shadowRef = text(
  'Name of the shadow; or its mount point, or its folder when one shadow shows it (absolute paths, or a path inside either).',
);
export const agentId = text('Agent id: names one layer of the shadow (1-255 bytes, no "/").');
export const relPath = text('Path relative to the shadow root, "/"-separated; no "..", not absolute.');
export const seconds = (description: string) => z.number().positive().describe(description);

/** A request: its parameters (checked before anything is touched), result and documented errors. */
export interface RequestDef<P extends z.ZodType = z.ZodType, R extends z.ZodType = z.ZodType> {
  readonly summary: string;
  readonly params: P;
  readonly result: R;
  /** The shadowfs error codes (error.data.code) this request documents, besides INTERNAL. */
  readonly errors: readonly ErrorCode[];
}

export function request<P extends z.ZodType, R extends z.ZodType>(def: RequestDef<P, R>): RequestDef<P, R> {
  return def;
}

export interface NotificationDef<P extends z.ZodType = z.ZodType> {
  readonly summary: string;
  readonly params: P;
}

export const none = z.strictObject({});
export const shadowOnly = z.strictObject({ shadow: shadowRef });
export const shadowAgent = z.strictObject({ shadow: shadowRef, agent: agentId });
