// Public API of the shadowfs package.
export { mount, Shadow, Layer, View } from './shadow';
export type { JobOptions, SchedulerStats, AgentQueueStats } from './scheduler';
export type { MountOptions, Change, IoMode, GoneEvent, LayerEvent, RunAsJob, RunAsOptions } from './shadow';
export type { ChangeBase } from './native';
export { ShadowError, ErrorCodes } from './errors';
export type { ErrorCode } from './errors';
export { normalizeRelPath } from './paths';
export { ShadowClient } from './client';
export type { ClientOptions } from './client';
export * as protocol from './protocol';
export { runInShadow } from './run/runner';
export type { RunOptions, RunResult } from './run/runner';
export type { RunPolicy } from './run/policy';
