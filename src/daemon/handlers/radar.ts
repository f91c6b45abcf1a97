// Handler of the conflict radar's request: the overlaps the daemon keeps per shadow
// (src/work/radar.ts, owned by each shadow's WorkService; its changes go out as radar/changed
// from the manager).
import type { ShadowManager } from '../manager';
import { wireOverlap } from '../radar-wire';
import type { Handlers } from './context';

export function radarHandlers(m: ShadowManager) {
  return {
    radar: async (p) => {
      const r = await m.radar(p.shadow, p.agent);
      return { shadow: r.shadow, overlaps: r.overlaps.map(wireOverlap) };
    },
  } satisfies Partial<Handlers>;
}
