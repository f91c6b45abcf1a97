// The protocol's requests for getting work out of a layer (#14): what it changed (changes, diff,
// patch), applying it to the folder, and checkpoints. Served by src/daemon/handlers/layer.ts; the
// work is src/work/'s.
import * as z from 'zod';
import { agentId, relPath, request, shadowAgent, shadowRef } from './shared';

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
  origin: z
    .string()
    .optional()
    .describe(
      'Where in the folder the layer still reads this entry from: a file or directory the agent moved or renamed (a directory with everything under it), until the agent writes it. Apply removes or replaces that folder path only together with this entry.',
    ),
  excluded: z
    .enum(['repository-metadata', 'ignored'])
    .optional()
    .describe(
      'Set when diffs, patches and apply leave this path out: repository-metadata (a .git directory or file at any depth, always), ignored (git in the folder ignores it; included with includeIgnored). Only layer.changes marks entries.',
    ),
});
export type ChangeInfo = z.infer<typeof ChangeInfo>;

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
  skipped: z
    .array(z.string())
    .describe(
      'Paths left out (devices, fifos, sockets, and on Linux and macOS names holding a backslash, which is a separator on Windows).',
    ),
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
      base: z
        .string()
        .nullable()
        .optional()
        .describe("With includeBase: the text of the merge's common version (null: none known, or binary)."),
      regions: z
        .array(
          z.object({
            startLine: z.number().int().describe('First line of merged the excerpt shows (1-based).'),
            endLine: z.number().int(),
            text: z.string().describe('The conflicting region with its markers and 3 lines of context around it.'),
          }),
        )
        .optional()
        .describe('Each conflicting region of merged with a few lines around it: what to read instead of the whole files.'),
    }),
  ),
  marked: z
    .array(z.string())
    .optional()
    .describe("With markConflicts: the paths written into the agent's layer with conflict markers, for the user to resolve there."),
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

const hunkId = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[0-9a-f]{16}(-[0-9]+)?$/, 'a hunk id is 16 hex digits, perhaps with -N')
  .describe('A review unit id (from layer.hunks).');

export const ReviewHunk = z.object({
  id: z.string().describe('Stable id: the same while this unit and what surrounds it in the folder stay the same.'),
  path: z.string(),
  unit: z
    .enum(['hunk', 'mode', 'file'])
    .describe(
      "hunk: part of a text file's change (3 lines of context); mode: a text file's mode change; file: a whole path's change (added, deleted, binary, symlink, type change).",
    ),
  status: z.enum(['added', 'modified', 'deleted', 'type-changed']),
  binary: z.boolean(),
  oldStart: z.number().int().describe("For hunks: first line in the folder's file, as in the @@ header (0 otherwise)."),
  oldLines: z.number().int(),
  newStart: z.number().int().describe("For hunks: first line in the agent's file, as in the @@ header."),
  newLines: z.number().int(),
  additions: z.number().int(),
  deletions: z.number().int(),
  oldMode: z.number().int().optional(),
  newMode: z.number().int().optional(),
  text: z
    .string()
    .describe(
      'The unit as a person reads it: the hunk with its @@ header, a mode line, or the whole file (text) or a sentence (binary, link).',
    ),
  conflict: z
    .string()
    .optional()
    .describe(
      "Set when apply would report this unit's path as a conflict (the folder changed since the agent's copy): applying it needs a resolution.",
    ),
});

export const RejectionInfo = z.object({
  id: z.string(),
  path: z.string(),
  lines: z.string().describe('The agent\'s lines the unit covered ("12-15"); "" for a whole-file unit.'),
  excerpt: z.string().describe("The unit's text, cut to 12 lines."),
  reason: z.string(),
  at: z.string().describe('When it was rejected (ISO 8601).'),
  delivered: z.boolean().describe('Whether the agent has been told (on an MCP tool result, or by a take).'),
  reverted: z.boolean().describe("Whether the unit was taken out of the agent's layer when rejected."),
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

export const WorkRequests = {
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
      markConflicts: z
        .boolean()
        .optional()
        .describe(
          "Write each conflicting text file whose merge has conflicting regions into the agent's layer with conflict markers (over the folder's file as it is now), to be resolved there; the folder is not written. Apply refuses a file that still holds the markers (as a conflict).",
        ),
      edited: z
        .record(hunkId, z.string().max(16 << 20))
        .optional()
        .describe(
          'Hunks the user edited before applying them (as git add -p\'s "e"), by id: the hunk\'s text as edited (its " " and "-" lines unchanged; "#" lines ignored). Applied as edited, chosen or not in hunks; the layer keeps the agent\'s version. A hunk whose old side was changed is INVALID_ARGUMENT.',
        ),
      includeBase: z
        .boolean()
        .optional()
        .describe("Each conflict carries the merge's common version too (base), for the user's merge tool (default: left out)."),
      hunks: z
        .array(hunkId)
        .optional()
        .describe(
          "Apply only these review units (from layer.hunks), plus the whole of paths when given. A file of which some hunks are chosen gets the folder's text with those in; the layer keeps the rest as its change. An id not among the layer's units now is CONFLICT. Conflicts are as for whole files (resolution \"agent\" writes the chosen hunks onto the folder's current text).",
        ),
    }),
    result: ApplyResult,
    errors: [
      'CONFLICT',
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
  'layer.hunks': request({
    summary:
      "An agent's changes as review units with stable ids: hunks of text files, whole files otherwise; each marked when apply would report its path as a conflict.",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, paths: pathList, includeIgnored }),
    result: z.object({
      hunks: z.array(ReviewHunk),
      skipped: z.array(z.string()),
      excluded: z.array(ExcludedPath),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'INVALID_PATH', 'NOT_MOUNTED'],
  }),
  'layer.reject': request({
    summary:
      "Records the user's rejection of review units, with a reason each, for the agent to be told (on its next MCP tool result, and by layer.rejections); with revert, also takes them out of the agent's layer.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      rejections: z
        .array(z.strictObject({ id: hunkId, reason: z.string().max(4000).describe('Why: told to the agent.') }))
        .min(1)
        .max(1000),
      revert: z.boolean().optional().describe("Take the rejected units out of the agent's layer too (default: the layer keeps them)."),
    }),
    result: z.object({
      rejected: z.array(RejectionInfo),
      reverted: z.array(z.string()).describe('Paths whose layer version changed.'),
      notReverted: z
        .array(z.object({ path: z.string(), code: z.string(), message: z.string() }))
        .optional()
        .describe(
          'With revert: paths the layer could not give back (under a directory it moved or deleted, CONFLICT; beside git control files it wrote, PATH_PROTECTED), with the error; their rejections are recorded, unreverted. The others were reverted.',
        ),
    }),
    errors: ['CONFLICT', 'UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'NOT_MOUNTED', 'STATE_CORRUPT'],
  }),
  'layer.rejections': request({
    summary:
      'The rejections recorded for an agent on this folder, oldest first (kept in the state directory); with take, only those the agent was not told of, marked told now.',
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      take: z.boolean().optional().describe('Only the ones not yet told, and mark them told (what the MCP server does for its agent).'),
    }),
    result: z.object({ rejections: z.array(RejectionInfo) }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'STATE_CORRUPT'],
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
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_CHECKPOINT', 'NOT_MOUNTED', 'PATH_PROTECTED'],
  }),
  'layer.checkpoints': request({
    summary: "An agent's checkpoints for this shadow's folder, oldest first.",
    params: shadowAgent,
    result: z.object({ checkpoints: z.array(CheckpointInfo) }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT'],
  }),
} as const;
