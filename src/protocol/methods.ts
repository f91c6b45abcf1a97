// Every request and notification of the shadowfs protocol, each one typed constant with a runtime
// schema (zod). The daemon validates parameters with these schemas before anything is touched;
// the client's methods take their types from them; `npm run build` turns them into
// protocol.schema.json (JSON Schema), the source for the docs, the MCP server and the
// PowerShell module. No Node APIs here (this compiles with "types": []).
import * as z from 'zod';
import type { ErrorCode } from './errors';
import { ShellNotifications, ShellRequests } from './shell';

/** Bumped when a change would break an existing client. */
export const PROTOCOL_VERSION = 2;

/** The most bytes one layer.read answer carries (base64 makes a third more); larger files are read in ranges. */
export const LAYER_READ_MAX_BYTES = 16 * 1024 * 1024;
/** grep's deadline for its regular expression: the default and the most a caller may give (ms). */
export const GREP_DEFAULT_TIMEOUT_MS = 10_000;
export const GREP_MAX_TIMEOUT_MS = 120_000;

const NO_NUL = /^[^\u0000]*$/;
const text = (description: string) => z.string().regex(NO_NUL, 'contains a NUL byte').describe(description);
const shadowRef = text('Name of the shadow, or its mount point (or a path inside it).');
const agentId = text('Agent id: names one layer of the shadow (1-255 bytes, no "/").');
const relPath = text('Path relative to the shadow root, "/"-separated; no "..", not absolute.');
const seconds = (description: string) => z.number().positive().describe(description);

/** A request: its parameters (checked before anything is touched), result and documented errors. */
export interface RequestDef<P extends z.ZodType = z.ZodType, R extends z.ZodType = z.ZodType> {
  readonly summary: string;
  readonly params: P;
  readonly result: R;
  /** The shadowfs error codes (error.data.code) this request documents, besides INTERNAL. */
  readonly errors: readonly ErrorCode[];
}

function request<P extends z.ZodType, R extends z.ZodType>(def: RequestDef<P, R>): RequestDef<P, R> {
  return def;
}

export interface NotificationDef<P extends z.ZodType = z.ZodType> {
  readonly summary: string;
  readonly params: P;
}

// ---- shared shapes -------------------------------------------------------------------------

export const NativeStatus = z
  .object({
    available: z.boolean().describe('Whether the native module (which mounts) loaded.'),
    code: z.enum(['NATIVE_UNAVAILABLE', 'WINFSP_MISSING']).optional(),
    message: z.string().optional().describe('Why it is not available, and what to install.'),
  })
  .describe('Whether this daemon can mount.');

export const ShadowInfo = z.object({
  name: z.string(),
  lower: z.string().describe('The folder the shadow shows.'),
  mountPoint: z.string(),
  backend: z.string().describe('The mount backend serving it ("fuse_ll", "fuse_hl").'),
  io: z.enum(['cached', 'open', 'passthrough']).optional().describe('How the backend serves opens (see mount); fuse_hl always "open".'),
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

export const ChangeBase = z
  .object({
    ino: z.number().describe("The folder file's inode number then."),
    size: z.number(),
    mtimeNs: z.string().describe('Modification time then, nanoseconds since the epoch (a decimal string: exact).'),
    ctimeNs: z.string(),
    hash: z.string().nullable().describe('64-bit content hash (hex) of the bytes copied; null when the layer replaced the file unread.'),
  })
  .describe('What the folder file was when the layer took its content.');

export const ChangeInfo = z.object({
  path: z.string(),
  kind: z.enum(['added', 'modified', 'deleted', 'metadata']),
  type: z.enum(['file', 'directory', 'symlink', 'special']),
  base: ChangeBase.optional(),
  excluded: z
    .enum(['repository-metadata', 'ignored'])
    .optional()
    .describe(
      'Set when diffs, patches and apply leave this path out: repository-metadata (a .git directory or file at any depth, always), ignored (git in the folder ignores it; included with includeIgnored). Only layer.changes marks entries.',
    ),
});
export type ChangeInfo = z.infer<typeof ChangeInfo>;

export const LayerStats = z.object({
  memoryBytes: z.number().describe('Bytes the layer holds in memory (contents plus bookkeeping).'),
  paths: z.number().describe('Paths the layer holds (files, directories, deletions).'),
  spilledBytes: z.number().describe('Bytes of contents moved to spill files on disk.'),
});

export const SchedulerStats = z.object({
  running: z.string().nullable(),
  queued: z.number(),
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

/** A file.write / file.edit precondition: the file must still be what the caller saw (file.read gives these). */
const fileExpectation = z
  .strictObject({
    exists: z.boolean().optional().describe('false: create only (the file must not exist); true: it must exist.'),
    size: z.number().int().min(0).optional(),
    mtimeMs: z.number().optional(),
    hash: z
      .string()
      .regex(/^[0-9a-f]{16}$/)
      .optional()
      .describe('The content hash file.read gave.'),
  })
  .describe(
    'Write only if the file is still what you saw; else CONFLICT and nothing is written. Checked and written in one step, with no other change of the file in between.',
  );

export const RunResult = z.object({
  runId: z.string(),
  exitCode: z.number().nullable(),
  signal: z.string().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  durationMs: z.number(),
  queuedMs: z.number(),
  timedOut: z.boolean(),
  cancelled: z.boolean(),
  leftoverProcesses: z.number().describe('Processes still alive when the command ended (background children), killed then.'),
  outputTruncated: z.boolean(),
  protected: z
    .boolean()
    .describe(
      "Whether the run was kept from writing the folder through its absolute path (Linux: a private mount namespace in which the folder's own path shows the shadow; Windows: a Low-integrity token, which the folder's files refuse to write and the shadow lets write).",
    ),
  protections: z
    .array(z.string())
    .describe(
      'What confined the run (Linux): "mount" (a view where the folder\'s path shows the shadow, the system read-only, shadowfs\'s own directories hidden), "user" (a user namespace that locks those mounts and holds no capability outside), "pid" (a PID namespace: nothing outside visible, nothing left behind), "network" (--no-network), "landlock" (writes only beneath the shadow, private temporary directories and the user\'s list; no abstract sockets or signals outside), "landlock-writes" (the same without the socket and signal scoping of older kernels), "seccomp" (no mount, namespace, file-handle, keyring, BPF or terminal-injection calls). Empty where none applied.',
    ),
  unprotectedReason: z.string().optional().describe('Why the run was not protected, when it was not.'),
  limitsHit: z
    .array(z.enum(['memory', 'processes']))
    .optional()
    .describe(
      'Limits the run reached: "memory" (past its memory limit: on Linux the kernel killed a process of it, on Windows an allocation was refused; shadowfs then ended the run), "processes" (a process it tried to start was refused). Absent when none was reached.',
    ),
});
export type RunResult = z.infer<typeof RunResult>;

export const Position = z
  .strictObject({ line: z.number().int().min(0), character: z.number().int().min(0) })
  .describe('Zero-based line and UTF-16 column, as LSP counts.');
export const Range = z.strictObject({ start: Position, end: Position });
export const Diagnostic = z
  .object({
    range: Range,
    severity: z.number().int().min(1).max(4).optional().describe('1 error, 2 warning, 3 information, 4 hint.'),
    code: z.union([z.string(), z.number()]).optional(),
    source: z.string().optional(),
    message: z.string(),
  })
  .describe('A diagnostic in LSP shape.');
export type Diagnostic = z.infer<typeof Diagnostic>;
export const TextEdit = z.object({ path: z.string(), range: Range, newText: z.string() });
export const Location = z.object({ path: z.string().describe('Relative to the shadow root; absolute when outside it.'), range: Range });

export const FileLints = z.object({
  path: z.string(),
  status: z
    .enum(['fresh', 'timeout', 'unsupported', 'error'])
    .describe(
      'fresh: the server answered for exactly this version; timeout: it did not within timeoutMs (never "no problems"); unsupported: no server for this file.',
    ),
  error: z.string().optional(),
  server: z.string().optional().describe('Which language server answered.'),
  version: z.number().int().optional().describe('The document version the answer is for.'),
  introduced: z.array(Diagnostic).describe('Diagnostics the folder itself does not have.'),
  existing: z.array(Diagnostic).describe('Diagnostics the folder has too (its baseline).'),
  baseline: z.enum(['fresh', 'cached', 'timeout', 'error', 'none']).optional().describe("How the folder's own diagnostics were known."),
  quickFixes: z
    .array(
      z.object({ title: z.string(), diagnostic: z.number().int().optional().describe('Index into introduced.'), edits: z.array(TextEdit) }),
    )
    .optional(),
});

const none = z.strictObject({});
const atPosition = z.strictObject({
  shadow: shadowRef,
  agent: agentId,
  path: relPath,
  position: Position,
  timeoutMs: z.number().int().positive().max(600_000).optional(),
});
const answerStatus = z.enum(['fresh', 'timeout', 'unsupported', 'error']);
const locationsAnswer = z.object({ status: answerStatus, error: z.string().optional(), locations: z.array(Location) });
const atPositionErrors: ErrorCode[] = ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'NOT_FOUND', 'NOT_MOUNTED'];
const shadowOnly = z.strictObject({ shadow: shadowRef });
const shadowAgent = z.strictObject({ shadow: shadowRef, agent: agentId });

// ---- getting work out (#14) ------------------------------------------------------------------

export const PatchFileInfo = z.object({
  path: z.string(),
  oldPath: z.string().optional().describe('For renames: where the file was.'),
  status: z.enum(['added', 'modified', 'deleted', 'renamed', 'type-changed']),
  binary: z.boolean(),
  additions: z.number().int(),
  deletions: z.number().int(),
  oldMode: z.number().int().optional(),
  newMode: z.number().int().optional(),
});

export const ExcludedPath = z.object({
  path: z.string(),
  reason: z.enum(['repository-metadata', 'ignored']),
});

const includeIgnored = z
  .boolean()
  .optional()
  .describe("Include the files git ignores in the folder's repository (default false: left out). .git is always left out.");

export const DiffResult = z.object({
  text: z.string().describe('The diff or patch text.'),
  files: z.array(PatchFileInfo),
  skipped: z.array(z.string()).describe('Paths left out (devices, fifos, sockets).'),
  excluded: z.array(ExcludedPath).describe('Changed paths left out: .git at any depth, and files git ignores unless includeIgnored.'),
});

export const Resolution = z
  .union([z.enum(['agent', 'folder', 'merged']), z.strictObject({ content: z.string() })])
  .describe(
    '"agent": write the agent\'s version anyway; "folder": keep the folder\'s and drop the agent\'s change; "merged": write the three-way merge (only when it merged cleanly); {content}: write this.',
  );

export const ApplyResult = z.object({
  dryRun: z.boolean(),
  applied: z.array(z.object({ path: z.string(), action: z.enum(['write', 'create', 'delete', 'mode', 'keep-folder', 'same']) })),
  conflicts: z.array(
    z.object({
      path: z.string(),
      reason: z.string(),
      folder: z.string().nullable().describe("The folder's version now (null: absent or binary)."),
      agent: z.string().nullable().describe("The agent's version (null: deleted or binary)."),
      binary: z.boolean(),
      merged: z.string().nullable().describe('Three-way merge with conflict markers, when the base the agent started from is known.'),
      mergeConflicts: z.number().int().describe('Conflicting regions in merged (0: clean).'),
      mergeBase: z
        .enum(['recorded', 'git-head'])
        .optional()
        .describe(
          "The merge's common version: the one the agent started from, or git's HEAD version (a guess, when the layer did not record it).",
        ),
    }),
  ),
  kept: z.array(z.string()).describe('Written to the folder, but still held by the layer (under a directory the layer replaced).'),
  excluded: z.array(ExcludedPath).describe('Changed paths not applied: .git at any depth, and files git ignores unless includeIgnored.'),
  branch: z
    .object({
      name: z.string(),
      commit: z.string().describe("The commit the branch points to: the agent's HEAD."),
      previous: z.string().nullable().describe('What the branch pointed to before (with force), or null: it is new.'),
    })
    .optional()
    .describe("With branch: the branch made in the folder's repository from the agent's commits (no files are written then)."),
  skipped: z.array(z.string()),
  typeChanges: z
    .array(
      z.object({
        path: z.string(),
        from: z.enum(['file', 'directory', 'symlink']),
        to: z.enum(['file', 'directory', 'symlink']),
        applied: z.boolean(),
      }),
    )
    .optional()
    .describe('Entries whose type the change makes different; applied only with allowTypeChanges (else a conflict).'),
  links: z
    .array(z.object({ path: z.string(), target: z.string() }))
    .optional()
    .describe('Every symbolic link the change writes, with its target (one out of the folder needs allowTypeChanges).'),
});

export const CheckpointInfo = z.object({
  name: z.string(),
  createdAt: z.string(),
  auto: z.boolean().describe('Made by autosave.'),
  files: z.number().int(),
  bytes: z.number(),
});

const checkpointName = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,64}$/, 'a checkpoint name is 1 to 64 letters, digits, ".", "_" or "-"')
  .describe('Checkpoint name.');
const pathList = z.array(relPath).optional().describe('Only these paths (files or directories); default: all.');
const toolsFlags = {
  includeIgnored: z.boolean().optional().describe('Also look at what .gitignore ignores (and .git).'),
};

const mountErrors: ErrorCode[] = [
  'INVALID_ARGUMENT',
  'INVALID_PATH',
  'LOWER_NOT_FOUND',
  'LOWER_NOT_DIRECTORY',
  'MOUNTPOINT_NOT_DIRECTORY',
  'MOUNTPOINT_NOT_EMPTY',
  'MOUNTPOINT_IN_USE',
  'MOUNTPOINT_INSIDE_LOWER',
  'LOWER_INSIDE_MOUNTPOINT',
  'UNKNOWN_BACKEND',
  'FUSE_UNAVAILABLE',
  'ALLOW_OTHER_DENIED',
  'MOUNT_FAILED',
  'NOT_SUPPORTED',
  'NATIVE_UNAVAILABLE',
  'WINFSP_MISSING',
  'TIMEOUT',
];
const pathErrors: ErrorCode[] = ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'PATH_THROUGH_SYMLINK', 'NOT_MOUNTED'];

// ---- requests ------------------------------------------------------------------------------

export const Requests = {
  hello: request({
    summary:
      "Introduces a client. Required as the first request on Windows, where the client proves with the secret in the per-user state directory that it runs as the daemon's user, and the daemon proves the same back; optional elsewhere.",
    params: z.strictObject({
      client: text('Name and version of the client, for the log.').max(200).optional(),
      nonce: z
        .string()
        .regex(/^[0-9a-f]{32,128}$/)
        .optional()
        .describe('Random hex chosen by the client.'),
      proof: z
        .string()
        .regex(/^[0-9a-f]{64}$/)
        .optional()
        .describe('HMAC-SHA256(secret, "shadowfs-client:" + nonce), hex.'),
    }),
    result: z.object({
      version: z.string(),
      protocol: z.number().int(),
      pid: z.number().int(),
      proof: z.string().optional().describe('HMAC-SHA256(secret, "shadowfs-server:" + nonce), hex: the daemon knows the secret too.'),
    }),
    errors: ['PEER_REFUSED'],
  }),
  'session.restrict': request({
    summary:
      "Restricts this connection, for as long as it lasts and irrevocably, to one agent's layer on one shadow: what an untrusted agent's front end (shadowfs mcp) does before it serves anything. From then on the daemon answers only the methods of ScopedMethods, on that shadow and agent, and refuses the rest with SCOPE_DENIED (mount, unmount, views, other agents' layers, runs with weaker protection, and apply unless allowApply). Calling it again may only keep or narrow the scope.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      allowApply: z
        .boolean()
        .optional()
        .describe(
          "Let the connection apply the agent's layer to the folder (layer.apply); default false. Set it only on the user's word (shadowfs mcp --allow-apply).",
        ),
    }),
    result: z.object({
      shadow: z.string().describe('The name of the shadow the connection is restricted to.'),
      agent: z.string(),
      allowApply: z.boolean(),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'SCOPE_DENIED'],
  }),
  version: request({
    summary: "The daemon's version, protocol version, platform, and the mount backends it has.",
    params: none,
    result: z.object({
      version: z.string(),
      protocol: z.number().int(),
      platform: z.string(),
      backends: z.array(z.string()).describe('Empty when the native module is not available.'),
      native: NativeStatus,
    }),
    errors: [],
  }),
  health: request({
    summary: 'A cheap liveness check.',
    params: none,
    result: z.object({
      ok: z.literal(true),
      pid: z.number().int(),
      uptimeSeconds: z.number(),
      shadows: z.number().int(),
      native: z.boolean(),
    }),
    errors: [],
  }),
  status: request({
    summary: 'The daemon, its endpoint and log, every shadow, and what it cleaned after a crashed predecessor.',
    params: none,
    result: z.object({
      pid: z.number().int(),
      socket: z.string().describe('The Unix socket or named pipe the daemon listens on.'),
      logFile: z.string(),
      uptimeSeconds: z.number(),
      shadows: z.array(ShadowInfo),
      recovered: z.array(z.string()).describe('Stale mounts of a crashed daemon this one cleaned when it started.'),
      recovering: z
        .array(z.string())
        .describe(
          'Shadows a crashed predecessor served that this daemon is still cleaning up or mounting again; requests other than hello, version, health, status and run.cancel wait until it is done.',
        ),
      clients: z
        .array(
          z.object({
            client: z.string().optional().describe('The name it gave in hello.'),
            scope: z
              .object({ shadow: z.string(), agent: z.string(), allowApply: z.boolean() })
              .optional()
              .describe('What it restricted itself to (session.restrict); absent: a full client of the user.'),
          }),
        )
        .describe('The connections the daemon serves now, this one included.'),
      native: NativeStatus,
      memory: z
        .object({
          rss: z.number().int().describe('Resident memory of the daemon process.'),
          heapUsed: z.number().int().describe("Bytes of JavaScript objects in V8's heap (live ones and garbage not yet collected)."),
          heapTotal: z.number().int().describe("V8's heap as taken from the system."),
          external: z.number().int().describe('Memory of C++ objects bound to JavaScript ones, buffers included.'),
          arrayBuffers: z.number().int().describe('Of external: ArrayBuffers and Buffers.'),
        })
        .describe(
          "The daemon's memory in bytes (Node's process.memoryUsage()); layer contents held by the native module are not in heapUsed.",
        ),
    }),
    errors: [],
  }),
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
  'layer.create': request({
    summary: 'Creates an empty layer for an agent (an existing one is kept as it is).',
    params: shadowAgent,
    result: z.object({ agent: z.string() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'NOT_MOUNTED'],
  }),
  'layer.drop': request({
    summary: "Drops an agent's layer and everything it holds.",
    params: shadowAgent,
    result: z.object({ agent: z.string() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'LAYER_BUSY', 'NOT_MOUNTED'],
  }),
  'layer.clone': request({
    summary: "Makes `to` a copy of `agent`'s layer.",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, to: agentId }),
    result: z.object({ agent: z.string(), to: z.string() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'LAYER_EXISTS', 'NOT_MOUNTED'],
  }),
  'layer.list': request({
    summary: 'The agents that have a layer, and the active one.',
    params: shadowOnly,
    result: z.object({ agents: z.array(z.string()), active: z.string().nullable() }),
    errors: ['UNKNOWN_SHADOW', 'NOT_MOUNTED'],
  }),
  'layer.write': request({
    summary: "Writes a file into an agent's layer (creating the layer and missing parent directories).",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath,
      data: z.base64().describe('The file content, base64.'),
      mode: z.number().int().min(0).max(0o7777).optional().describe("Permission bits (default 0644, or the existing file's)."),
    }),
    result: z.object({ path: z.string(), bytes: z.number().int() }),
    errors: [...pathErrors, 'IS_DIRECTORY', 'NOT_A_DIRECTORY', 'INVALID_ARGUMENT'],
  }),
  'layer.remove': request({
    summary: "Removes a path in an agent's layer (the folder keeps it).",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, path: relPath }),
    result: z.object({ path: z.string() }),
    errors: [...pathErrors, 'NOT_FOUND', 'NOT_A_DIRECTORY'],
  }),
  'layer.revert': request({
    summary:
      "Drops an agent's own entry at a path (and everything under it), so the folder shows through there again; refused (CONFLICT) under a directory the layer deleted, replaced or moved.",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, path: relPath }),
    result: z.object({ path: z.string() }),
    errors: [...pathErrors, 'UNKNOWN_AGENT', 'CONFLICT'],
  }),
  'layer.read': request({
    summary: `Reads a file as an agent sees it (its layer over the folder): whole, or a range of it (offset, length) for files of any size. One answer carries at most ${LAYER_READ_MAX_BYTES} bytes: a whole read of a larger file is FILE_TOO_LARGE (read it in ranges; every answer says the file's size).`,
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath,
      offset: z
        .number()
        .int()
        .min(0)
        .max(Number.MAX_SAFE_INTEGER)
        .optional()
        .describe('Where to start reading, in bytes (default 0). Given with or without length, the read is a range.'),
      length: z
        .number()
        .int()
        .min(0)
        .max(LAYER_READ_MAX_BYTES)
        .optional()
        .describe(`How many bytes to read at most (default and cap: ${LAYER_READ_MAX_BYTES}); fewer come back at the end of the file.`),
    }),
    result: z.object({
      path: z.string(),
      data: z.string().describe('The content (of the range, for a ranged read), base64.'),
      size: z.number().int().optional().describe("The file's whole size in bytes."),
      offset: z.number().int().optional().describe('Where the bytes in data start.'),
    }),
    errors: [...pathErrors, 'UNKNOWN_AGENT', 'NOT_FOUND', 'IS_DIRECTORY', 'NOT_A_DIRECTORY', 'FILE_TOO_LARGE'],
  }),
  'layer.reset': request({
    summary: "Empties an agent's layer.",
    params: shadowAgent,
    result: z.object({ agent: z.string() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'NOT_MOUNTED'],
  }),
  'layer.changes': request({
    summary: "What an agent's layer changed relative to the folder.",
    params: shadowAgent,
    result: z.object({ changes: z.array(ChangeInfo) }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'NOT_MOUNTED'],
  }),
  'layer.diff': request({
    summary: "A unified diff of an agent's layer against the folder (renames detected; binary files named, not shown).",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, paths: pathList, includeIgnored }),
    result: DiffResult,
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'INVALID_PATH', 'NOT_MOUNTED'],
  }),
  'layer.patch': request({
    summary:
      "A git-format patch of an agent's layer (binary hunks included) that git apply in a clean checkout of the folder reproduces byte for byte.",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, paths: pathList, includeIgnored }),
    result: DiffResult,
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'INVALID_PATH', 'NOT_MOUNTED'],
  }),
  'layer.apply': request({
    summary:
      "Writes an agent's changes into the folder (the one request that writes it): each file atomically; a file the folder changed since the agent's copy is a conflict, written only as resolutions say; applied paths leave the layer.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      paths: pathList,
      dryRun: z.boolean().optional().describe('Report what would be written; write nothing.'),
      resolutions: z.record(z.string(), Resolution).optional().describe('How to resolve conflicts, by path.'),
      allowTypeChanges: z
        .boolean()
        .optional()
        .describe(
          'Confirm type changes (a directory replaced by a file or link, a file or link by a directory, a file by a link) and links that point out of the folder; without it they (and what lies under them) are refused as conflicts, the rest applied.',
        ),
      includeIgnored,
      branch: z
        .string()
        .min(1)
        .max(255)
        .optional()
        .describe(
          "Instead of writing files: bring the agent's commits (its HEAD) into the folder's repository as this new branch, by git fetch; only new objects and that ref are written (HEAD, index, work tree and other refs untouched). BRANCH_EXISTS if it exists, unless force.",
        ),
      force: z.boolean().optional().describe('With branch: replace an existing branch of that name (never the one checked out).'),
    }),
    result: ApplyResult,
    errors: [
      'UNKNOWN_SHADOW',
      'INVALID_AGENT',
      'UNKNOWN_AGENT',
      'INVALID_PATH',
      'NOT_MOUNTED',
      'BRANCH_EXISTS',
      'NOT_SUPPORTED',
      'INVALID_ARGUMENT',
    ],
  }),
  'layer.checkpoint': request({
    summary: "Saves an agent's layer as a named checkpoint in the per-user state directory (contents stored once).",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, name: checkpointName.optional().describe('Default: a timestamp.') }),
    result: CheckpointInfo,
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'INVALID_ARGUMENT', 'NOT_MOUNTED'],
  }),
  'layer.restore': request({
    summary: "Makes an agent's layer what a checkpoint holds (its current changes are dropped).",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, name: checkpointName.optional().describe('Default: the newest.') }),
    result: z.object({ name: z.string(), paths: z.number().int() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_CHECKPOINT', 'NOT_MOUNTED'],
  }),
  'layer.checkpoints': request({
    summary: "An agent's checkpoints for this shadow's folder, oldest first.",
    params: shadowAgent,
    result: z.object({ checkpoints: z.array(CheckpointInfo) }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT'],
  }),
  'file.read': request({
    summary: "Reads a text file (or a line range) as the agent's layer shows it, without switching the shared mount.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath,
      startLine: z.number().int().min(1).optional().describe('First line, 1-based.'),
      endLine: z.number().int().min(1).optional().describe('Last line, inclusive.'),
    }),
    result: z.object({
      path: z.string(),
      content: z.string(),
      totalLines: z.number().int(),
      startLine: z.number().int(),
      endLine: z.number().int(),
      binary: z.boolean(),
      size: z.number().int().optional().describe('Bytes of the whole file.'),
      mtimeMs: z.number().optional().describe('Its modification time, as file.write and file.edit take it in expect.'),
      hash: z.string().optional().describe("Content hash of the whole file's bytes, as expect takes it."),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'NOT_FOUND', 'IS_DIRECTORY', 'INVALID_ARGUMENT', 'NOT_MOUNTED'],
  }),
  'file.write': request({
    summary: "Writes a whole text file into the agent's layer (parents made; an existing file keeps its mode).",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath,
      content: z.string(),
      mode: z.number().int().min(0).max(0o7777).optional(),
      expect: fileExpectation.optional(),
    }),
    result: z.object({
      path: z.string(),
      bytes: z.number().int(),
      created: z.boolean(),
      hash: z.string().optional().describe('With expect: the content hash the file has now, for the next expect.'),
      mtimeMs: z.number().optional().describe('With expect: its modification time now.'),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'IS_DIRECTORY', 'CONFLICT', 'NOT_MOUNTED'],
  }),
  'file.edit': request({
    summary:
      "Replaces exact text in a file of the agent's layer: NO_MATCH when it does not occur, AMBIGUOUS_MATCH when it occurs more than once (unless replaceAll).",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath,
      oldText: z.string().min(1),
      newText: z.string(),
      replaceAll: z.boolean().optional(),
      expect: fileExpectation.optional(),
    }),
    result: z.object({ path: z.string(), replacements: z.number().int() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'NOT_FOUND', 'NO_MATCH', 'AMBIGUOUS_MATCH', 'CONFLICT', 'NOT_MOUNTED'],
  }),
  'file.list': request({
    summary: "Lists a directory (or a tree) as the agent's layer shows it; .gitignore'd entries left out unless asked.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath.optional().describe('Default: the root.'),
      recursive: z.boolean().optional(),
      limit: z.number().int().min(1).max(100000).optional(),
      ...toolsFlags,
    }),
    result: z.object({
      entries: z.array(z.object({ path: z.string(), type: z.string(), size: z.number().optional() })),
      truncated: z.boolean(),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'NOT_FOUND', 'NOT_A_DIRECTORY', 'NOT_MOUNTED'],
  }),
  'file.glob': request({
    summary: "Paths matching a glob (picomatch syntax, e.g. src/**/*.ts) as the agent's layer shows the tree.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      pattern: z.string().min(1),
      cwd: relPath.optional(),
      limit: z.number().int().min(1).max(100000).optional(),
      ...toolsFlags,
    }),
    result: z.object({ paths: z.array(z.string()), truncated: z.boolean() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'INVALID_ARGUMENT', 'NOT_MOUNTED'],
  }),
  'file.grep': request({
    summary:
      "Searches file contents (a JavaScript regular expression, or fixed strings) as the agent's layer shows them; binary and .gitignore'd files skipped unless asked.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      pattern: z.string().min(1),
      path: relPath.optional().describe('A file or directory to search; default: everything.'),
      glob: z.string().optional().describe('Only files whose path matches this glob.'),
      ignoreCase: z.boolean().optional(),
      fixedStrings: z.boolean().optional(),
      context: z.number().int().min(0).max(20).optional().describe('Lines of context before and after each match.'),
      maxMatches: z.number().int().min(1).max(10000).optional(),
      timeoutMs: z
        .number()
        .int()
        .min(1)
        .max(GREP_MAX_TIMEOUT_MS)
        .optional()
        .describe(
          `How long the regular expression may run in all, in ms (default ${GREP_DEFAULT_TIMEOUT_MS}, at most ${GREP_MAX_TIMEOUT_MS}); past it the search stops with TIMEOUT. It runs off the daemon's main thread.`,
        ),
      ...toolsFlags,
    }),
    result: z.object({
      matches: z.array(
        z.object({
          path: z.string(),
          line: z.number().int(),
          text: z.string(),
          before: z.array(z.string()).optional(),
          after: z.array(z.string()).optional(),
        }),
      ),
      filesSearched: z.number().int(),
      truncated: z.boolean(),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'INVALID_ARGUMENT', 'NOT_MOUNTED', 'TIMEOUT'],
  }),
  activate: request({
    summary: "Shows an agent's layer on the shared mount (creating it), or the folder read-only for null.",
    params: z.strictObject({ shadow: shadowRef, agent: agentId.nullable() }),
    result: z.object({
      active: z.string().nullable(),
      paths: z.number().describe('Kernel cache entries invalidated.'),
      epoch: z.boolean().describe('Whether one epoch notification invalidated the whole cache.'),
      ms: z.number(),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'NOT_MOUNTED'],
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
    summary: "Memory and path counts of every layer, and the run scheduler's counters.",
    params: shadowOnly,
    result: z.object({ layers: z.record(z.string(), LayerStats), scheduler: SchedulerStats }),
    errors: ['UNKNOWN_SHADOW', 'NOT_MOUNTED'],
  }),
  run: request({
    summary:
      'Runs a command in the shadow as an agent (its layer active on the shared mount while it runs); output streams as run/output notifications to this connection.',
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      argv: z.array(text('argument')).min(1).describe('The command and its arguments.'),
      runId: text('An id for run.cancel and the run/output notifications; default: a random one.').max(128).optional(),
      cwd: text('Working directory relative to the shadow root.').optional(),
      env: z.array(text('NAME=value')).optional().describe('Extra environment entries, NAME=value.'),
      timeout: seconds('Seconds the command may run once it has the shadow.').optional(),
      discardWrites: z.boolean().optional().describe("Empty the agent's layer after the run."),
      shell: z.boolean().optional().describe('Run argv[0] as a shell command line.'),
      originalPath: z
        .boolean()
        .optional()
        .describe("Default true (Linux): the folder's own path shows the shadow; false runs unprotected."),
      atOriginalPath: z.boolean().optional().describe('Older name of originalPath: true, the default now.'),
      unprotected: z
        .boolean()
        .optional()
        .describe(
          'Run without protection where it cannot be made (Linux: the namespace; Windows: the Low-integrity token), instead of NAMESPACE_UNAVAILABLE.',
        ),
      noNetwork: z.boolean().optional().describe('Run in a network namespace with loopback only.'),
      limits: z
        .strictObject({
          memoryBytes: z
            .number()
            .int()
            .min(1 << 20)
            .optional()
            .describe(
              'Memory all its processes may use together, in bytes (at least 1 MiB; Windows: committed memory, the launcher included); past it the run is ended.',
            ),
          processes: z.number().int().min(1).optional().describe('Processes it may have at once (Linux counts threads too).'),
          cpus: z.number().min(0.01).max(1024).optional().describe('CPU time, in CPUs (1.5: one and a half CPUs).'),
        })
        .optional()
        .describe(
          'Resource limits of the run (Linux: cgroup v2 where delegated, else cgroup v1; Windows: its Job Object). A limit this system cannot set refuses the run with NOT_SUPPORTED.',
        ),
    }),
    result: RunResult,
    errors: [
      'UNKNOWN_SHADOW',
      'INVALID_AGENT',
      'INVALID_ARGUMENT',
      'INVALID_PATH',
      'POLICY_DENIED',
      'NAMESPACE_UNAVAILABLE',
      'NOT_SUPPORTED',
      'NOT_FOUND',
      'NOT_MOUNTED',
      'ABORTED',
    ],
  }),
  'run.cancel': request({
    summary: 'Cancels a run (queued or running).',
    params: z.strictObject({ runId: text('The run to cancel.') }),
    result: z.object({ runId: z.string(), cancelled: z.boolean().describe('false when no such run is in progress.') }),
    errors: [],
  }),
  lints: request({
    summary:
      "What the language servers say about an agent's change: edits (optional) are applied to the agent's layer first, then each file is checked on a warm server running in the shadow with that layer active, and split into diagnostics the change introduced and those the folder already has.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      paths: z.array(relPath).optional().describe("Files to check; default: the edited files, else every file the agent's layer changed."),
      edits: z
        .array(
          z.strictObject({
            path: relPath,
            content: z.string().optional().describe('The whole new content.'),
            edits: z
              .array(z.strictObject({ range: Range, newText: z.string() }))
              .optional()
              .describe('Range edits on the content as the agent sees it.'),
          }),
        )
        .optional(),
      timeoutMs: z.number().int().positive().max(600_000).optional().describe('Deadline for the whole answer (default 10000).'),
      quickFixes: z.boolean().optional().describe("Also return the server's code actions for the introduced diagnostics."),
    }),
    result: z.object({ files: z.array(FileLints), ms: z.number() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'INVALID_ARGUMENT', 'NOT_FOUND', 'NOT_MOUNTED', 'TIMEOUT'],
  }),
  'lsp.definition': request({
    summary: "Where the symbol at a position is defined, as the agent's layer shows the code.",
    params: atPosition,
    result: locationsAnswer,
    errors: atPositionErrors,
  }),
  'lsp.references': request({
    summary: "Every reference to the symbol at a position, as the agent's layer shows the code.",
    params: atPosition,
    result: locationsAnswer,
    errors: atPositionErrors,
  }),
  'lsp.hover': request({
    summary: "The hover text at a position, as the agent's layer shows the code.",
    params: atPosition,
    result: z.object({ status: answerStatus, error: z.string().optional(), contents: z.string(), range: Range.optional() }),
    errors: atPositionErrors,
  }),
  ...ShellRequests,
} as const;

/**
 * The allow-list of a restricted connection (session.restrict): each method it may still call, and
 * on what terms. Every method not named here, a method added to the protocol later included, is
 * refused with SCOPE_DENIED. "Its shadow" and "its agent" are those of the restriction; the
 * daemon enforces these terms (src/daemon/scope.ts) before a handler runs.
 */
export const ScopedMethods = {
  hello: 'always',
  version: 'always',
  health: 'always',
  'session.restrict': 'the same shadow and agent again, with allowApply only if it had it: a scope never widens',
  list: 'answers with its shadow only, and of that its agent only',
  'layer.list': 'its shadow; answers with its agent only',
  'layer.create': 'its agent',
  'layer.drop': 'its agent',
  'layer.clone': 'from its agent to its agent only (another layer is neither read nor made)',
  'layer.write': 'its agent',
  'layer.remove': 'its agent',
  'layer.revert': 'its agent',
  'layer.read': 'its agent',
  'layer.reset': 'its agent',
  'layer.changes': 'its agent',
  'layer.diff': 'its agent',
  'layer.patch': 'its agent',
  'layer.apply': 'its agent, and only when the restriction has allowApply',
  'layer.checkpoint': 'its agent',
  'layer.restore': 'its agent',
  'layer.checkpoints': 'its agent',
  'file.read': 'its agent',
  'file.write': 'its agent',
  'file.edit': 'its agent',
  'file.list': 'its agent',
  'file.glob': 'its agent',
  'file.grep': 'its agent',
  activate: 'its agent (not null, not another agent)',
  run: 'its agent, protected: unprotected and originalPath: false are refused, and so is any parameter not known to the restriction',
  'run.cancel': 'runs this connection started',
  lints: 'its agent',
  'lsp.definition': 'its agent',
  'lsp.references': 'its agent',
  'lsp.hover': 'its agent',
} as const satisfies Partial<Record<keyof typeof Requests, string>>;
export type ScopedMethod = keyof typeof ScopedMethods;

export type Requests = typeof Requests;
export type MethodName = keyof Requests;
/** What a client may send as a method's parameters. */
export type ParamsOf<M extends MethodName> = z.input<Requests[M]['params']>;
/** The parameters a handler receives, after validation. */
export type CheckedParamsOf<M extends MethodName> = z.output<Requests[M]['params']>;
export type ResultOf<M extends MethodName> = z.output<Requests[M]['result']>;

export function isMethod(name: unknown): name is MethodName {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(Requests, name);
}

// ---- notifications -------------------------------------------------------------------------

export const Notifications = {
  'shadow/changed': {
    summary:
      'To every client: a shadow was mounted, unmounted, unmounted for being idle, mounted again, or lost (its mount ended without being asked to; its layers are kept and the next request mounts it again).',
    params: z.object({
      shadow: z.string(),
      event: z.enum(['mounted', 'unmounted', 'idle-unmounted', 'remounted', 'lost']),
      reason: z.string().optional().describe('For "lost": why the mount ended (a whole sentence).'),
      view: z
        .string()
        .optional()
        .describe('For "lost": the mount point of the view that ended, when it was a view and not the shared mount.'),
    }),
  },
  'layer/changed': {
    summary:
      'To every client: a layer changed. Events from the daemon\'s own requests come at once; "changed" reports, coalesced, what the layer changed by any means (writes through the mount included), about once a second.',
    params: z.object({
      shadow: z.string(),
      agent: z.string().nullable(),
      event: z.enum(['written', 'removed', 'reverted', 'reset', 'dropped', 'cloned', 'activated', 'changed', 'applied', 'restored']),
      path: z.string().optional(),
      changes: z
        .array(z.object({ path: z.string(), kind: z.enum(['added', 'modified', 'deleted', 'metadata', 'reverted']), type: z.string() }))
        .optional()
        .describe(
          'For "changed": what changed in the layer since the last notification (coalesced), however it was written; "reverted": the layer no longer changes that path. For "applied": the paths written to the folder.',
        ),
      from: z.string().optional().describe('For "cloned": the layer it was copied from.'),
    }),
  },
  'daemon/waiting': {
    summary:
      'To the connection whose request waits, once it has waited a moment: what it waits for (the daemon still recovering what a crashed predecessor left).',
    params: z.object({
      method: z.string().describe('The request that waits.'),
      waitingFor: z.string().describe('What it waits for, in words.'),
    }),
  },
  'run/output': {
    summary: 'To the connection that asked for the run only: a chunk of its output.',
    params: z.object({ runId: z.string(), stream: z.enum(['stdout', 'stderr']), data: z.string().describe('The bytes, base64.') }),
  },
  ...ShellNotifications,
} as const satisfies Record<string, NotificationDef>;

export type Notifications = typeof Notifications;
export type NotificationName = keyof Notifications;
export type NotificationParamsOf<N extends NotificationName> = z.output<Notifications[N]['params']>;

/** Checks a request's parameters; returns them parsed, or a sentence about the first problem. */
export function checkParams<M extends MethodName>(
  method: M,
  params: unknown,
): { ok: true; value: CheckedParamsOf<M> } | { ok: false; problem: string } {
  if (params === undefined || params === null) params = {};
  if (typeof params !== 'object' || Array.isArray(params)) return { ok: false, problem: 'params must be an object (parameters by name)' };
  let r: ReturnType<(typeof Requests)[M]['params']['safeParse']>;
  try {
    r = Requests[method].params.safeParse(params) as typeof r;
  } catch {
    // zod's length checks read `length` of any value that has one, and comparing an object
    // without a primitive form throws (a fuzzed { length: { toString: "x" } } did): that is a
    // malformed parameter too, never an internal error.
    return { ok: false, problem: 'a parameter has a value of the wrong kind (an object where a string, number or list belongs)' };
  }
  if (r.success) return { ok: true, value: r.data as CheckedParamsOf<M> };
  return { ok: false, problem: describeIssue(r.error.issues[0], params as Record<string, unknown>) };
}

function describeIssue(issue: z.core.$ZodIssue | undefined, params: Record<string, unknown>): string {
  if (!issue) return 'invalid parameters';
  if (issue.code === 'unrecognized_keys') return `unknown parameter ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  const where = issue.path.length ? `parameter "${issue.path.map(String).join('.')}"` : 'params';
  if (issue.code === 'invalid_type' && issue.path.length === 1 && params[String(issue.path[0])] === undefined) return `missing ${where}`;
  return `${where}: ${issue.message}`;
}
