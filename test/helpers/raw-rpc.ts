// A raw connection to the daemon for tests that send arbitrary bytes: it writes whatever it is
// given and reads the daemon's framed replies back (requests' answers queued, notifications
// dropped). Test-only: the product speaks through vscode-jsonrpc.
import * as net from 'net';

export function encodeMessage(msg: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(msg), 'utf8');
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'ascii'), body]);
}

/** Splits the daemon's byte stream into JSON messages (the daemon frames correctly). */
export class ReplyDecoder {
  private buf = Buffer.alloc(0);

  push(chunk: Buffer): unknown[] {
    this.buf = Buffer.concat([this.buf, chunk]);
    const out: unknown[] = [];
    for (;;) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end < 0) return out;
      const m = /Content-Length: (\d+)/i.exec(this.buf.subarray(0, end).toString('latin1'));
      if (!m) throw new Error(`the daemon sent a header without Content-Length: ${this.buf.subarray(0, end).toString('latin1')}`);
      const len = Number(m[1]);
      if (this.buf.length < end + 4 + len) return out;
      out.push(JSON.parse(this.buf.subarray(end + 4, end + 4 + len).toString('utf8')));
      this.buf = this.buf.subarray(end + 4 + len);
    }
  }
}

export interface Reply {
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: { code: string } };
}

export class Raw {
  readonly socket: net.Socket;
  private readonly decoder = new ReplyDecoder();
  private readonly queue: unknown[] = [];
  private waiting: ((v: unknown) => void) | undefined;
  closed = false;

  constructor(socketPath: string) {
    this.socket = net.connect(socketPath);
    this.socket.on('data', (d: Buffer) => {
      for (const value of this.decoder.push(d)) {
        if ((value as { method?: string }).method) continue; // notifications
        if (this.waiting) {
          const w = this.waiting;
          this.waiting = undefined;
          w(value);
        } else this.queue.push(value);
      }
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.waiting?.(undefined);
    });
    this.socket.on('error', () => undefined);
  }

  ready(): Promise<void> {
    return new Promise((r) => this.socket.once('connect', () => r()));
  }

  next(): Promise<Reply | undefined> {
    if (this.queue.length) return Promise.resolve(this.queue.shift() as Reply);
    if (this.closed) return Promise.resolve(undefined);
    return new Promise((r) => (this.waiting = r as (v: unknown) => void));
  }

  request(id: number, method: string, params?: unknown): void {
    this.socket.write(encodeMessage({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) }));
  }
}
