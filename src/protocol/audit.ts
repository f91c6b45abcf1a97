// The audit trail's request (`layer.audit`): what programs did through a mount showing an
// agent's layer — opened, executed, created, wrote, truncated, deleted, renamed, linked — as the
// file system served it (native/core/audit.h), bounded per layer and kept with checkpoints.
// Served by src/daemon/handlers/audit.ts; docs/audit-trail.md says what is recorded and what a
// mount never hears of (cached reads). methods.ts adds it to the protocol's tables.
import * as z from 'zod';
import { AUDIT_OP_NAMES } from './constants';
import { agentId, request, shadowRef, text } from './shared';

export { AUDIT_OP_NAMES };

export const AuditEntry = z.object({
  seq: z.number().int().describe("Numbers the layer's entries, oldest first; never reused."),
  time: z.string().describe('When (ISO 8601).'),
  op: z
    .enum(AUDIT_OP_NAMES)
    .describe(
      'open (a file opened; exec: opened to be executed), create, write (bytes written without an open the mount saw), truncate (by name), mkdir, mknod, symlink, link, unlink, rmdir, rename.',
    ),
  path: z.string().describe('Relative to the folder, as the program named it.'),
  to: z.string().optional().describe('rename: the new name; link: the existing name it links to; symlink: the target.'),
  write: z.boolean().optional().describe('open and create: opened for writing.'),
  bytes: z.number().int().optional().describe('open, create and write: bytes written through that open (write: that run of writes).'),
  pid: z.number().int().describe('The process that asked (0: not known).'),
  comm: z.string().describe('Its command name, read once per process id (best effort; empty when unknown).'),
});
export type AuditEntry = z.infer<typeof AuditEntry>;

export const AuditRequests = {
  'layer.audit': request({
    summary:
      "What programs did through a mount showing an agent's layer (its view, its runs, the shared mount while the layer was shown): opens, execs, creations, writes (bytes per open), truncations, deletions, renames, links, from the requests the file system served. Bounded per layer: past the limits the oldest entries go, and dropped says how many. Reads served from the kernel's cache never reach shadowfs and are not in it.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      since: text('Only entries at or after this time (ISO 8601, or milliseconds since the epoch as a decimal string).').optional(),
      path: text(
        'Only entries whose path (or other path, for rename and link) matches this glob: *, ?, ** ; a glob without "/" matches a name at any depth.',
      ).optional(),
      ops: z.array(z.enum(AUDIT_OP_NAMES)).optional().describe('Only these ops.'),
      limit: z.number().int().min(0).optional().describe('Only the newest this many of the entries that match.'),
    }),
    result: z.object({
      agent: z.string(),
      entries: z.array(AuditEntry).describe('Oldest first.'),
      matched: z.number().int().describe('Entries that matched (more than entries when limit left older ones out).'),
      kept: z.number().int().describe("Entries the layer's record holds now."),
      dropped: z
        .number()
        .int()
        .describe(
          'Entries gone from the record since it began: dropped (oldest first) to keep it within its limits, and those a restored checkpoint replaced.',
        ),
      maxEntries: z.number().int(),
      maxBytes: z.number().int(),
    }),
    errors: ['UNKNOWN_SHADOW', 'UNKNOWN_AGENT', 'INVALID_AGENT', 'INVALID_ARGUMENT', 'NOT_MOUNTED', 'SCOPE_DENIED', 'TIMEOUT'],
  }),
} as const;
