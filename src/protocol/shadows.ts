// The protocol's requests about shadows as a whole: mount, unmount and list them; which layer the
// shared mount shows (activate), views of their own for agents, and stats. Served by
// src/daemon/handlers/shadows.ts.
import * as z from 'zod';
import type { ErrorCode } from './errors';
import { agentId, none, request, shadowOnly, shadowRef, text } from './shared';

export const NativeStatus = z
  .object({
    available: z.boolean().describe('Whether the native module (which mounts) loaded.'),
    code: z.enum(['NATIVE_UNAVAILABLE', 'WINFSP_MISSING']).optional(),
    message: z.string().optional().describe('Why it is not available, and what to install.'),
  })
  .describe('Whether this daemon can mount.');

export const ShadowInfo = z.object({
  name: z.string(),
  folder: z.string().describe('The folder the shadow shows (its real path).'),
  lower: z.string().describe('Deprecated: the same as folder, under its former name; removed in protocol version 3.'),
  mountPoint: z.string(),
  backend: z.string().describe('The mount backend serving it ("fuse_ll", "fuse_hl").'),
  io: z.enum(['cached', 'open', 'passthrough']).optional().describe('How the backend serves opens (see mount); fuse_hl always "open".'),
  protectGit: z
    .boolean()
    .optional()
    .describe("Whether layers may not write git's control files (see mount); absent: a daemon that did not refuse them."),
  protectedPaths: z
    .array(z.string())
    .optional()
    .describe(
      "The folder's own paths layers may not write besides them, as anchored globs: its hooks directory when core.hooksPath lies inside it.",
    ),
  transport: z
    .record(z.string(), z.boolean())
    .optional()
    .describe('What the kernel agreed to while mounted (fuse_ll: noOpen, noOpendir, readdirplus, epoch, passthrough, ioUring).'),
  mounted: z
    .boolean()
    .describe(
      'false while unmounted for being idle, or after its mount ended on its own (see lost); the next request mounts it again, layers intact.',
    ),
  lost: z
    .string()
    .optional()
    .describe(
      'Why the mount ended without being asked to (a WinFsp volume or driver that went away, a kernel connection that ended, an unmount from outside), until the next request mounts it again.',
    ),
  volume: z
    .enum(['network', 'disk'])
    .optional()
    .describe('Windows, winfsp backend: the WinFsp volume form (see mount); realpath works on "network" only.'),
  active: z.string().nullable().describe('The agent whose layer the shared mount shows; null: the folder, read-only.'),
  agents: z.array(z.string()),
  views: z.array(z.object({ id: z.number().int(), agent: z.string(), mountPoint: z.string() })),
  idleSeconds: z.number(),
  openHandles: z
    .number()
    .int()
    .optional()
    .describe('Windows, winfsp backend: handles programs hold open in it; it is never idle-unmounted while any is open.'),
  restored: z.array(z.string()).optional().describe('mount only: agents whose layers came back from their autosave checkpoints.'),
});
export type ShadowInfo = z.infer<typeof ShadowInfo>;

export const LayerStats = z.object({
  memoryBytes: z.number().describe('Bytes the layer holds in memory (contents plus bookkeeping).'),
  paths: z.number().describe('Paths the layer holds (files, directories, deletions).'),
  spilledBytes: z.number().describe('Bytes of contents moved to spill files on disk.'),
});

export const MemoryBudget = z.object({
  limitBytes: z.number().describe('The budget for layer contents in memory, shared by every shadow of the daemon; -1: none.'),
  inMemoryBytes: z.number().describe('Bytes of layer contents in memory now, all shadows and layers together.'),
  inMemoryContents: z.number().describe('How many contents that is.'),
  spilledContents: z.number().describe('Contents the budget moved to spill files since the daemon started.'),
  spilledBytes: z.number().describe('Their sizes when they moved.'),
});

export const SchedulerStats = z.object({
  running: z.string().nullable().describe('The agent whose job holds the shared mount now ("(folder)": a job on the folder itself).'),
  runningMs: z.number().optional().describe('How long that job has held it.'),
  queued: z.number(),
  waiting: z
    .array(z.object({ agent: z.string(), waitingFor: z.string().nullable(), waitedMs: z.number() }))
    .describe('Every job waiting for the shared mount, oldest first: whose it is, whose job it waits behind, and for how long.'),
  agents: z.record(
    z.string(),
    z.object({
      queued: z.number(),
      runs: z.number(),
      timeouts: z.number(),
      aborts: z.number(),
      totalWaitMs: z.number(),
      totalRunMs: z.number(),
      lastWaitMs: z.number().optional(),
      lastRunMs: z.number().optional(),
    }),
  ),
});

const mountErrors: ErrorCode[] = [
  'INVALID_ARGUMENT',
  'INVALID_PATH',
  'FOLDER_NOT_FOUND',
  'FOLDER_NOT_DIRECTORY',
  'MOUNTPOINT_NOT_DIRECTORY',
  'MOUNTPOINT_NOT_EMPTY',
  'MOUNTPOINT_IN_USE',
  'MOUNTPOINT_INSIDE_FOLDER',
  'FOLDER_INSIDE_MOUNTPOINT',
  'UNKNOWN_BACKEND',
  'FUSE_UNAVAILABLE',
  'ALLOW_OTHER_DENIED',
  'MOUNT_FAILED',
  'NOT_SUPPORTED',
  'NATIVE_UNAVAILABLE',
  'WINFSP_MISSING',
  'TIMEOUT',
];

export const ShadowRequests = {
  mount: request({
    summary: 'Mounts a shadow of a folder.',
    params: z.strictObject({
      folder: text("The folder to shadow (absolute, or relative to the daemon's working directory)."),
      mountPoint: text('Where to mount; default: a new directory in the per-user runtime directory.').optional(),
      name: text('Name of the shadow (1-64 letters, digits, ".", "_", "-"); default: the folder\'s name.').optional(),
      cacheTimeout: z.number().min(0).describe('Seconds the kernel may cache names and attributes.').optional(),
      backend: text('Mount backend (see version.backends); default: the best one.').optional(),
      io: z
        .enum(['cached', 'open', 'passthrough'])
        .optional()
        .describe(
          'How fuse_ll serves opens: "cached" (no open round trips; the default), "open" (one per open file), "passthrough" (reads of the folder\'s files go straight to them; root, Linux 6.9+).',
        ),
      allowOther: z
        .boolean()
        .optional()
        .describe('Let other users use the shadow (FUSE allow_other); a non-root daemon needs user_allow_other in /etc/fuse.conf.'),
      protectGit: z
        .boolean()
        .optional()
        .describe(
          "Refuse every layer write to git's control files: .git itself at any depth, a repository's config, config.worktree, commondir and hooks, and the folder's own hooks directory (core.hooksPath inside it). git run in the mount outside a sandbox obeys them, so an agent's core.fsmonitor or hook there would run as the user. Default true.",
        ),
      restore: z
        .boolean()
        .optional()
        .describe("Bring back agents' layers from the autosave checkpoints a crash or reboot left for this folder (default true)."),
      volume: z
        .enum(['network', 'disk'])
        .optional()
        .describe(
          'Windows, winfsp backend: "network" (a volume named \\\\shadowfs\\<name> on a drive letter; GetFinalPathNameByHandleW, and so realpath, works without administrator rights) or "disk" (the only form WinFsp puts on a directory; realpath fails there). Default: "network" on a drive letter, "disk" on a directory.',
        ),
    }),
    result: ShadowInfo,
    errors: mountErrors,
  }),
  unmount: request({
    summary: 'Unmounts a shadow and drops its layers.',
    params: z.strictObject({ shadow: shadowRef, lazy: z.boolean().optional().describe('Detach now even if busy; finish when unused.') }),
    result: z.object({ name: z.string() }),
    errors: ['UNKNOWN_SHADOW', 'MOUNT_BUSY'],
  }),
  list: request({ summary: 'Every shadow of this daemon.', params: none, result: z.object({ shadows: z.array(ShadowInfo) }), errors: [] }),
} as const;

export const ShadowViewRequests = {
  activate: request({
    summary:
      "Shows an agent's layer on the shared mount (creating it), or the folder read-only for null. From a connection that is not restricted it is also the user's choice (pinned): jobs that switch the mount for an agent (runs, lints) switch it back once none runs or waits, and while one runs the switch waits for the last to end (active then still names the running job's layer).",
    params: z.strictObject({ shadow: shadowRef, agent: agentId.nullable() }),
    result: z.object({
      active: z.string().nullable(),
      pinned: z
        .string()
        .nullable()
        .optional()
        .describe('What the user chose the shared mount to show between jobs (null: the folder), when chosen.'),
      paths: z.number().describe('Kernel cache entries invalidated.'),
      epoch: z.boolean().describe('Whether one epoch notification invalidated the whole cache.'),
      ms: z.number(),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'NOT_MOUNTED', 'SCOPE_DENIED'],
  }),
  'view.open': request({
    summary: "Mounts a second, private view that always shows one agent's layer.",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, mountPoint: text('Where to mount the view.').optional() }),
    result: z.object({ view: z.number().int(), agent: z.string(), mountPoint: z.string() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'MOUNTPOINT_NOT_EMPTY', 'MOUNTPOINT_IN_USE', 'MOUNT_FAILED'],
  }),
  'view.close': request({
    summary: 'Unmounts a view.',
    params: z.strictObject({ shadow: shadowRef, view: z.number().int().min(0), lazy: z.boolean().optional() }),
    result: z.object({ view: z.number().int() }),
    errors: ['UNKNOWN_SHADOW', 'NOT_FOUND', 'MOUNT_BUSY'],
  }),
  stats: request({
    summary: "Memory, spill and path counts of every layer, the daemon's memory budget, and the run scheduler's counters.",
    params: shadowOnly,
    result: z.object({ layers: z.record(z.string(), LayerStats), budget: MemoryBudget, scheduler: SchedulerStats }),
    errors: ['UNKNOWN_SHADOW', 'NOT_MOUNTED'],
  }),
} as const;
