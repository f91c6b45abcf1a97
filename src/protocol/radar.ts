// The conflict radar's request and notification (`radar`, `radar/changed`): where agents' work on
// a shadow collides, known as it happens. An overlap is either a path two or more layers change
// to different contents ("layers"), or a path a layer holds a copy of whose base in the folder
// moved since the layer took it ("folder"). Served by src/daemon/handlers/radar.ts from the
// radar the daemon keeps per shadow (src/work/radar.ts); docs/conflict-radar.md says what it
// notices, how fast, and what it cannot see. methods.ts adds these to the protocol's tables.
import * as z from 'zod';
import type { NotificationDef } from './shared';
import { agentId, request, shadowRef } from './shared';

export const Overlap = z.object({
  id: z.string().describe('Stable while the overlap lasts: "layers:<path>" or "folder:<agent>:<path>".'),
  kind: z
    .enum(['layers', 'folder'])
    .describe(
      '"layers": two or more layers change the path, to different contents; "folder": the folder\'s file moved since a layer copied it.',
    ),
  path: z.string().describe('Relative to the folder, "/"-separated.'),
  agents: z.array(z.string()).describe('"layers": the agents whose layers change it; "folder": the agent whose copy it is.'),
  since: z.string().describe('When the daemon noticed it (ISO 8601).'),
  changedAt: z
    .record(z.string(), z.string())
    .optional()
    .describe('"layers": per agent, when the daemon first saw its layer change the path (ISO 8601).'),
  base: z
    .object({ size: z.number().int(), mtimeNs: z.string(), hash: z.string().nullable() })
    .nullable()
    .optional()
    .describe(
      '"folder": the folder file the layer copied (size, modification time in ns, content hash); null when the layer recorded none (it made the path, or replaced the file unread).',
    ),
  folder: z
    .object({ size: z.number().int(), mtimeNs: z.string() })
    .nullable()
    .optional()
    .describe('"folder": what the folder has at the path now; null when nothing.'),
});
export type Overlap = z.infer<typeof Overlap>;

export const RadarRequests = {
  radar: request({
    summary:
      "The overlaps of a shadow now: paths two layers change to different contents, and paths a layer copied whose folder file changed since (the developer's edit under an agent's copy). Writes through the mount are looked at once more before it answers.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId.optional().describe('Only the overlaps that name this agent.'),
    }),
    result: z.object({ shadow: z.string().describe('Name of the shadow.'), overlaps: z.array(Overlap) }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'NOT_MOUNTED', 'SCOPE_DENIED'],
  }),
} as const;

export const RadarNotifications = {
  'radar/changed': {
    summary:
      "To every client (a restricted one: only overlaps that name its agent): the overlaps of a shadow changed, as the daemon noticed it (a developer's edit within milliseconds, writes through the mount within about a second).",
    params: z.object({
      shadow: z.string(),
      added: z.array(Overlap).describe('Overlaps new or changed (replace by id).'),
      cleared: z.array(Overlap).describe('Overlaps gone: the path given back, the layer reset or dropped, or the folder back at the base.'),
    }),
  },
} as const satisfies Record<string, NotificationDef>;
