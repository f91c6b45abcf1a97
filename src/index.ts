// Public API of the shadowfs package.
export { mount, Shadow, Layer, View, DEFAULT_MASK, memoryBudgetStats, setMemoryBudget } from './shadow';
export type { JobOptions, SchedulerStats, AgentQueueStats } from './shadow/scheduler';
export type {
  MountOptions,
  Change,
  IoMode,
  GoneEvent,
  LayerEvent,
  RunAsJob,
  RunAsOptions,
  MaskInfo,
  MaskState,
  AuditEntry,
  AuditOp,
  AuditQuery,
  AuditRecord,
  AuditResult,
  MemoryBudgetStats,
} from './shadow';
export type { ChangeBase } from './shadow/native';
export { ShadowError, ErrorCodes } from './common/errors';
export type { ErrorCode } from './common/errors';
export { normalizeRelPath } from './common/paths';
export { ShadowClient } from './client';
export type { ClientOptions } from './client';
export * as protocol from './protocol';
export { runInShadow } from './run/runner';
export type { RunOptions, RunResult } from './run/runner';
export type { RunPolicy } from './run/policy';
