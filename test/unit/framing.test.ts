// Unit tests of the RPC framing (Content-Length headers, as vscode-jsonrpc and LSP use): whole
// messages however the bytes are cut, and clear errors for malformed or oversized input.
import * as assert from 'assert';
import { Decoded, encodeMessage, MessageDecoder } from '../../src/protocol/framing';

const values = (ds: Decoded[]): unknown[] => ds.map((d) => (d.kind === 'message' ? d.value : `error ${d.reason}`));

describe('unit: RPC framing', () => {
  it('decodes what it encodes, byte by byte and several messages per chunk', () => {
    const msgs = [{ jsonrpc: '2.0', id: 1, method: 'mount', params: { folder: '/tmp/ä ö' } }, { id: 2, text: '日本語 ✓' }, []];
    const bytes = Buffer.concat(msgs.map(encodeMessage));
    const one = new MessageDecoder();
    const out: Decoded[] = [];
    for (let i = 0; i < bytes.length; i++) out.push(...one.push(bytes.subarray(i, i + 1)));
    assert.deepStrictEqual(values(out), msgs);
    assert.deepStrictEqual(values(new MessageDecoder().push(bytes)), msgs);
  });

  it('measures Content-Length in bytes of UTF-8, not characters', () => {
    const enc = encodeMessage({ s: 'é' });
    assert.match(enc.toString('ascii', 0, 30), /^Content-Length: 10\r\n\r\n/);
  });

  it('reports a body that is not JSON and goes on with the next message', () => {
    const bad = Buffer.from('Content-Length: 5\r\n\r\n{oops');
    const dec = new MessageDecoder();
    const out = dec.push(Buffer.concat([bad, encodeMessage({ ok: true })]));
    assert.deepStrictEqual(values(out), ['error json', { ok: true }]);
    assert.strictEqual(dec.failed, false);
  });

  it('refuses oversized messages before reading their body, and then stops decoding', () => {
    const dec = new MessageDecoder(100);
    const out = dec.push(Buffer.from('Content-Length: 101\r\n\r\n'));
    assert.deepStrictEqual(values(out), ['error too-large']);
    assert.strictEqual(dec.failed, true);
    assert.deepStrictEqual(dec.push(encodeMessage({ later: 1 })), []);
  });

  it('treats broken headers as framing errors: no length, a bad length, garbage, a header that never ends', () => {
    for (const raw of ['X-Other: 1\r\n\r\n{}', 'Content-Length: -3\r\n\r\n', 'Content-Length: 1e3\r\n\r\n', 'garbage\r\n\r\n']) {
      assert.deepStrictEqual(values(new MessageDecoder().push(Buffer.from(raw))), ['error framing'], JSON.stringify(raw));
    }
    const endless = new MessageDecoder();
    assert.deepStrictEqual(values(endless.push(Buffer.alloc(9000, 'a'))), ['error framing']);
  });

  it('accepts other headers and any case of Content-Length', () => {
    const raw = Buffer.from('content-length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}');
    assert.deepStrictEqual(values(new MessageDecoder().push(raw)), [{}]);
  });
});
