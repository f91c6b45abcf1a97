// The shadow API, one import for its users: mount(folder) gives a Shadow whose mount point shows
// the folder live and whose writes land in in-memory layers, one per agent. The parts live in
// ./shadow/: checks (input), mount-point and mount (mounting), layer, view, shadow (layers, the
// scheduler, views, lifecycle), run-as (where an agent's job runs), errnos (what errors mean).
export { mount, pickBackend } from './shadow/mount';
export type { IoMode, MountOptions, WindowsVolume } from './shadow/mount';
export { Shadow } from './shadow/shadow';
export type { Change, GoneEvent, LayerEvent, LayerStats } from './shadow/shadow';
export { Layer } from './shadow/layer';
export { View } from './shadow/view';
export { MAX_RANGE_BYTES } from './shadow/checks';
export type { RunAsJob, RunAsOptions } from './shadow/run-as';
