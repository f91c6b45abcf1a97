// The shadow API, one import for its users: mount(folder) gives a Shadow whose mount point shows
// the folder live and whose writes land in in-memory layers, one per agent. The parts live in
// this folder: checks (input), mount-point and mount (mounting), layer, view, shadow (layers, the
// scheduler, views, lifecycle), mask (masked paths per agent), run-as (where an agent's job runs), errnos (what errors mean),
// budget (the process's memory budget for layer contents).
export { mount, pickBackend } from './mount';
export type { IoMode, MountOptions, WindowsVolume } from './mount';
export { Shadow } from './shadow';
export type { Change, GoneEvent, LayerEvent, LayerStats } from './shadow';
export { Layer } from './layer';
export { View } from './view';
export { MAX_RANGE_BYTES } from './checks';
export { DEFAULT_MASK } from './mask';
export { memoryBudgetStats, parseSize, setMemoryBudget } from './budget';
export type { MemoryBudgetStats } from './native';
export type { MaskInfo, MaskState } from './mask';
export type { AuditEntry, AuditOp, AuditQuery, AuditRecord, AuditResult } from './audit';
export type { RunAsJob, RunAsOptions } from './run-as';
