// Every notification the daemon sends, each one typed constant with a runtime schema.
import * as z from 'zod';
import type { NotificationDef } from './shared';
import { RadarNotifications } from './radar';
import { ShellNotifications } from './shell';

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
  'run/queued': {
    summary:
      'To the connection that asked for the run only, while it waits for the shared mount: whose job holds it and how long the run has waited. Sent when it is queued, when the job ahead changes, and every few seconds.',
    params: z.object({ runId: z.string(), waitingFor: z.string(), queuedMs: z.number() }),
  },
  'run/output': {
    summary: 'To the connection that asked for the run only: a chunk of its output.',
    params: z.object({ runId: z.string(), stream: z.enum(['stdout', 'stderr']), data: z.string().describe('The bytes, base64.') }),
  },
  ...ShellNotifications,
  ...RadarNotifications,
} as const satisfies Record<string, NotificationDef>;

export type Notifications = typeof Notifications;
export type NotificationName = keyof Notifications;
export type NotificationParamsOf<N extends NotificationName> = z.output<Notifications[N]['params']>;
