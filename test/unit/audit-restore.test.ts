// restoredAudit (src/shadow/audit.ts): what a layer's audit record becomes when a checkpoint is
// restored over it. A restore takes nothing out of the record, whether the record is the
// checkpoint's own gone on, or one that began again (a new mount, a layer dropped and made again).
import * as assert from 'assert';
import { type AuditEntry, restoredAudit } from '../../src/shadow/audit';

const entry = (seq: number, path: string, timeMs = 1_000 + seq, bytes = 0): AuditEntry => ({
  seq,
  timeMs,
  op: 'create',
  write: true,
  pid: 7,
  comm: 'sh',
  bytes,
  path,
  to: '',
});
const brief = (r: { entries: AuditEntry[] }): string[] => r.entries.map((e) => `${e.seq} ${e.path} ${e.bytes}`);

describe('unit: restoredAudit', () => {
  const saved = { entries: [entry(1, 'a'), entry(2, 'b', 1_002, 5)], dropped: 0, nextSeq: 3 };

  it("the checkpoint's own record gone on: its entries, then those since, seqs and dropped going on", () => {
    // b's open went on writing after the checkpoint (its bytes grew); c and d came after.
    const now = { entries: [entry(1, 'a'), entry(2, 'b', 1_002, 9), entry(3, 'c'), entry(4, 'd')], dropped: 0, nextSeq: 5 };
    const r = restoredAudit(saved, now);
    assert.deepStrictEqual(brief(r), ['1 a 0', '2 b 9', '3 c 0', '4 d 0']);
    assert.deepStrictEqual([r.dropped, r.nextSeq], [0, 5]);
    // Restored again at once: the same record, nothing twice.
    assert.deepStrictEqual(restoredAudit(saved, r), r);
  });

  it('entries the record numbered since and dropped stay counted; nothing is counted twice', () => {
    // 3 and 4 were numbered and dropped (limits); 5 is kept.
    const r = restoredAudit(saved, { entries: [entry(5, 'e')], dropped: 4, nextSeq: 6 });
    assert.deepStrictEqual(brief(r), ['1 a 0', '2 b 5', '5 e 0']);
    assert.deepStrictEqual([r.dropped, r.nextSeq], [2, 6]);
  });

  it('a record that began again after the checkpoint keeps every entry, numbered on after its own', () => {
    // A new mount: the record numbers from 1 again, with other requests.
    const now = { entries: [entry(1, 'x', 9_001), entry(2, 'y', 9_002)], dropped: 1, nextSeq: 4 };
    const r = restoredAudit(saved, now);
    assert.deepStrictEqual(brief(r), ['1 a 0', '2 b 5', '3 x 0', '4 y 0']);
    assert.deepStrictEqual([r.dropped, r.nextSeq], [1, 5]);
    assert.deepStrictEqual(
      r.entries.map((e) => e.timeMs),
      [1_001, 1_002, 9_001, 9_002],
    );
  });

  it('an empty record (a layer made by the restore) becomes the checkpoint’s', () => {
    assert.deepStrictEqual(restoredAudit(saved, { entries: [], dropped: 0, nextSeq: 1 }), saved);
  });
});
