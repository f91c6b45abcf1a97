// The radar's overlaps as the protocol carries them (times as ISO 8601 strings).
import type { NotificationParamsOf, Overlap as WireOverlap } from '../protocol/methods';
import type { Overlap, RadarDelta } from '../work/radar';

export function wireOverlap(o: Overlap): WireOverlap {
  const iso = (ms: number): string => new Date(ms).toISOString();
  return {
    id: o.id,
    kind: o.kind,
    path: o.path,
    agents: o.agents,
    since: iso(o.since),
    ...(o.changedAt ? { changedAt: Object.fromEntries(Object.entries(o.changedAt).map(([a, ms]) => [a, iso(ms)])) } : {}),
    ...(o.base !== undefined ? { base: o.base } : {}),
    ...(o.folder !== undefined ? { folder: o.folder } : {}),
  };
}

export function radarDelta(d: RadarDelta): Omit<NotificationParamsOf<'radar/changed'>, 'shadow'> {
  return { added: d.added.map(wireOverlap), cleared: d.cleared.map(wireOverlap) };
}
