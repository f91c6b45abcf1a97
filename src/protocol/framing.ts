// Message framing of the RPC channel: the header format vscode-jsonrpc and LSP use
// ("Content-Length: N\r\n\r\n" then N bytes of UTF-8 JSON). The decoder enforces a size cap and
// reports malformed input instead of throwing, so one bad client cannot take the daemon down.
// No Node APIs beyond Buffer: usable by any transport.

export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
const MAX_HEADER_BYTES = 8 * 1024;

export function encodeMessage(msg: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(msg), 'utf8');
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'ascii'), body]);
}

export type Decoded = { kind: 'message'; value: unknown } | { kind: 'error'; reason: 'framing' | 'too-large' | 'json'; detail: string };

/** Incremental decoder: push() bytes as they arrive, get whole messages (or errors) back. */
export class MessageDecoder {
  private buf: Buffer = Buffer.alloc(0);
  private need = -1; // body length once the header is read
  private broken = false;

  constructor(private readonly maxBytes = MAX_MESSAGE_BYTES) {}

  /** After a framing error the stream cannot be resynchronised; the connection must be closed. */
  get failed(): boolean {
    return this.broken;
  }

  push(chunk: Buffer): Decoded[] {
    if (this.broken) return [];
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: Decoded[] = [];
    for (;;) {
      if (this.need < 0) {
        const end = this.buf.indexOf('\r\n\r\n');
        if (end < 0) {
          if (this.buf.length > MAX_HEADER_BYTES) return this.fail(out, 'framing', 'header too long or missing');
          return out;
        }
        const header = this.buf.subarray(0, end).toString('ascii');
        let length = -1;
        for (const line of header.split('\r\n')) {
          const m = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
          if (!m) return this.fail(out, 'framing', `bad header line ${JSON.stringify(line.slice(0, 80))}`);
          if (m[1].toLowerCase() === 'content-length') {
            if (!/^\d{1,12}$/.test(m[2])) return this.fail(out, 'framing', `bad Content-Length ${JSON.stringify(m[2].slice(0, 40))}`);
            length = Number(m[2]);
          }
        }
        if (length < 0) return this.fail(out, 'framing', 'no Content-Length header');
        if (length > this.maxBytes)
          return this.fail(out, 'too-large', `message of ${length} bytes is over the ${this.maxBytes}-byte limit`);
        this.need = length;
        this.buf = this.buf.subarray(end + 4);
      }
      if (this.buf.length < this.need) return out;
      const body = this.buf.subarray(0, this.need).toString('utf8');
      this.buf = this.buf.subarray(this.need);
      this.need = -1;
      try {
        out.push({ kind: 'message', value: JSON.parse(body) as unknown });
      } catch (err) {
        out.push({ kind: 'error', reason: 'json', detail: (err as Error).message });
      }
    }
  }

  private fail(out: Decoded[], reason: 'framing' | 'too-large', detail: string): Decoded[] {
    this.broken = true;
    this.buf = Buffer.alloc(0);
    out.push({ kind: 'error', reason, detail });
    return out;
  }
}
