// How some results are shaped for the model, kept apart from the tool table (server.ts). An apply
// result's conflicts carry, over RPC, the folder's file, the agent's and the three-way merge in
// full; a model reads only the conflicting regions, each with a few lines around it.
import type { ResultOf } from '../protocol/methods';

export function boundedApply(r: unknown): string {
  const x = r as ResultOf<'layer.apply'>;
  const conflicts = x.conflicts.map((c) => ({
    path: c.path,
    reason: c.reason,
    binary: c.binary,
    mergeConflicts: c.mergeConflicts,
    ...(c.mergeBase ? { mergeBase: c.mergeBase } : {}),
    ...(c.regions ? { regions: c.regions } : c.merged !== null && c.mergeConflicts === 0 ? { merge: 'clean: resolve with "merged"' } : {}),
  }));
  return JSON.stringify({ ...x, conflicts }, null, 1);
}
