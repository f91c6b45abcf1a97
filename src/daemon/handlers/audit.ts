// Handler of the audit trail's request (layer.audit): the layer's record as the native module
// keeps it (src/shadow/audit.ts), queried and put on the wire.
import type { AuditEntry as WireEntry } from '../../protocol/audit';
import { type AuditEntry, parseSince } from '../../shadow/audit';
import type { ShadowManager } from '../manager';
import { type Handlers, shadowOf } from './context';

/** One entry as the protocol has it: ISO time, and only the fields its op uses. */
export function wireAuditEntry(e: AuditEntry): WireEntry {
  const w: WireEntry = { seq: e.seq, time: new Date(e.timeMs).toISOString(), op: e.op, path: e.path, pid: e.pid, comm: e.comm };
  if (e.to !== '') w.to = e.to;
  if (e.op === 'open' || e.op === 'create' || e.op === 'exec') w.write = e.write;
  if (e.op === 'open' || e.op === 'create' || e.op === 'write') w.bytes = e.bytes;
  return w;
}

export function auditHandlers(m: ShadowManager) {
  return {
    'layer.audit': async (p) => {
      const s = await shadowOf(m, p);
      const r = await s.layer(p.agent).audit({
        ...(p.since === undefined ? {} : { sinceMs: parseSince(p.since) }),
        ...(p.path === undefined ? {} : { path: p.path }),
        ...(p.ops === undefined ? {} : { ops: p.ops }),
        ...(p.limit === undefined ? {} : { limit: p.limit }),
      });
      return {
        agent: r.agent,
        entries: r.entries.map(wireAuditEntry),
        matched: r.matched,
        kept: r.kept,
        dropped: r.dropped,
        maxEntries: r.limits.maxEntries,
        maxBytes: r.limits.maxBytes,
      };
    },
  } satisfies Partial<Handlers>;
}
