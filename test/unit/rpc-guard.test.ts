// Unit tests of the guard in front of vscode-jsonrpc's reader: it follows the framing of a byte
// stream however it is split, and names the first violation (no Content-Length, a bad or huge
// one, a header that never ends).
import * as assert from 'assert';
import { FrameGuard } from '../../src/daemon/rpc';

function frame(o: unknown): Buffer {
  const b = Buffer.from(JSON.stringify(o));
  return Buffer.concat([Buffer.from(`Content-Length: ${b.length}\r\n\r\n`), b]);
}

describe('unit: RPC frame guard', () => {
  it('accepts well-framed messages split at every byte boundary', () => {
    const all = Buffer.concat([
      frame({ a: 1 }),
      frame({ b: 'x'.repeat(100) }),
      Buffer.from('Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: 2\r\n\r\n{}'),
      frame({ c: '\r\n\r\n' }),
    ]);
    for (let split = 1; split < all.length; split++) {
      const g = new FrameGuard();
      for (let i = 0; i < all.length; i += split)
        assert.strictEqual(g.check(all.subarray(i, i + split)), undefined, `split ${split} at ${i}`);
    }
  });

  it('names what is wrong', () => {
    const cases: Array<[string | Buffer, RegExp]> = [
      ['GET / HTTP/1.1\r\nHost: x\r\n\r\n', /bad header line/],
      ['Content-Type: x\r\n\r\n', /no Content-Length/],
      ['Content-Length: -5\r\n\r\n', /bad Content-Length/],
      ['Content-Length: 1e3\r\n\r\n', /bad Content-Length/],
      ['Content-Length: 99999999999\r\n\r\n', /over the 16777216-byte limit/],
      [Buffer.alloc(9000, 65), /header too long/],
    ];
    for (const [input, re] of cases) {
      const v = new FrameGuard().check(Buffer.isBuffer(input) ? input : Buffer.from(input));
      assert.ok(v, String(input));
      assert.match(v.detail, re);
    }
    assert.strictEqual(new FrameGuard(10).check(frame({ long: 'message' }))?.reason, 'too-large');
  });
});
