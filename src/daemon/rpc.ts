// One client connection of the daemon, on vscode-jsonrpc. vscode-jsonrpc frames, decodes,
// dispatches, cancels ($/cancelRequest) and answers unknown methods; around it this module adds
// what a daemon facing arbitrary local programs needs and vscode-jsonrpc leaves out:
//  - a guard in front of its reader that checks each header as it arrives (size caps, a numeric
//    Content-Length) so a client cannot make the daemon buffer without bound; broken framing is
//    answered once and ends that connection only;
//  - answers for messages vscode-jsonrpc would only log (bodies that are not JSON, objects that
//    are not JSON-RPC 2.0, batches);
//  - backpressure: reading pauses while many requests of the connection are in flight, and a
//    client that does not read its replies is disconnected before they pile up.
import * as net from 'net';
import { PassThrough } from 'stream';
import {
  createMessageConnection,
  Disposable,
  Emitter,
  type DataCallback,
  type Message,
  type MessageConnection,
  type MessageReader,
  type PartialMessageInfo,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-jsonrpc/node';
import { RpcErrorCodes } from '../protocol/errors';

export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
const MAX_HEADER_BYTES = 8 * 1024;
/** Requests of one connection being served at once; past this, reading pauses. */
const MAX_IN_FLIGHT = 256;
/**
 * Messages, and their bytes, read but not yet handed to vscode-jsonrpc's dispatcher, which takes
 * one per turn of the event loop however fast they arrive: without a bound a client that writes
 * faster grows the daemon without limit. Past either, reading pauses.
 */
const MAX_WAITING = 256;
const MAX_WAITING_BYTES = MAX_MESSAGE_BYTES;
/** Bytes of replies a client may leave unread before it is disconnected. */
const MAX_UNREAD_REPLY_BYTES = 64 * 1024 * 1024;

type Violation = { reason: 'framing' | 'too-large'; detail: string };

/**
 * Follows the framing of the byte stream (header, then Content-Length bytes of body) without
 * decoding anything, and reports the first violation.
 */
export class FrameGuard {
  private header = '';
  private bodyLeft = 0;
  private bodyLength = 0;
  /** Body sizes of the complete frames not yet handed on (see taken()), oldest first. */
  private readonly waiting: number[] = [];
  waitingBytes = 0;

  constructor(private readonly maxBytes = MAX_MESSAGE_BYTES) {}

  check(chunk: Buffer): Violation | undefined {
    let i = 0;
    while (i < chunk.length) {
      if (this.bodyLeft > 0) {
        const n = Math.min(this.bodyLeft, chunk.length - i);
        this.bodyLeft -= n;
        i += n;
        if (this.bodyLeft === 0) this.complete();
        continue;
      }
      // In a header: collect it up to the blank line (latin1 keeps one char per byte). The
      // blank line may straddle chunks, so the scan starts with the last 3 chars carried over.
      const carried = this.header.slice(-3);
      const window = carried + chunk.toString('latin1', i, Math.min(chunk.length, i + MAX_HEADER_BYTES + 4));
      const at = window.indexOf('\r\n\r\n');
      if (at < 0) {
        this.header += window.slice(carried.length);
        if (this.header.length > MAX_HEADER_BYTES) return { reason: 'framing', detail: 'header too long or missing' };
        return undefined;
      }
      const text = this.header.slice(0, this.header.length - carried.length) + window.slice(0, at);
      if (text.length > MAX_HEADER_BYTES) return { reason: 'framing', detail: 'header too long' };
      i += at + 4 - carried.length;
      const v = this.endHeader(text);
      if (v) return v;
    }
    return undefined;
  }

  private endHeader(text: string): Violation | undefined {
    this.header = '';
    let length = -1;
    for (const line of text.split('\r\n')) {
      // Printable ASCII only: vscode-jsonrpc decodes headers as 'ascii', which clears the high
      // bit, so bytes 0x8D 0x8A would end a line there that is one line here, and the two would
      // disagree on the Content-Length (the guard then checks bodies as headers and lets through
      // a header with any length, which vscode-jsonrpc buffers for).
      const m = /^([A-Za-z0-9-]+):[ \t]*([\t\x20-\x7e]*)$/.exec(line);
      if (!m) return { reason: 'framing', detail: `bad header line ${JSON.stringify(line.slice(0, 80))}` };
      if (m[1].toLowerCase() === 'content-length') {
        if (!/^\d{1,12}$/.test(m[2].trim()))
          return { reason: 'framing', detail: `bad Content-Length ${JSON.stringify(m[2].slice(0, 40))}` };
        length = Number(m[2].trim());
      }
    }
    if (length < 0) return { reason: 'framing', detail: 'no Content-Length header' };
    if (length > this.maxBytes)
      return { reason: 'too-large', detail: `message of ${length} bytes is over the ${this.maxBytes}-byte limit` };
    this.bodyLeft = this.bodyLength = length;
    if (length === 0) this.complete();
    return undefined;
  }

  private complete(): void {
    this.waiting.push(this.bodyLength);
    this.waitingBytes += this.bodyLength;
  }

  /** The oldest waiting frame was handed on (or answered as not JSON-RPC). */
  taken(): void {
    this.waitingBytes -= this.waiting.shift() ?? 0;
  }

  get waitingFrames(): number {
    return this.waiting.length;
  }
}

/** Why a decoded message is not one the daemon can take, or undefined when it is. */
function envelopeProblem(m: unknown): string | undefined {
  if (Array.isArray(m)) return 'batches are not supported: send one request per message';
  if (typeof m !== 'object' || m === null) return 'expected a JSON-RPC 2.0 request object';
  const o = m as Record<string, unknown>;
  if (o.jsonrpc !== '2.0') return 'expected "jsonrpc":"2.0"';
  if (typeof o.method !== 'string') return 'expected a "method" string';
  if (o.id !== undefined && typeof o.id !== 'string' && !(typeof o.id === 'number' && Number.isSafeInteger(o.id)))
    return '"id" must be a string or an integer';
  if (o.params !== undefined && (typeof o.params !== 'object' || o.params === null)) return '"params" must be an object';
  if (o.method === '$/cancelRequest') {
    const p = o.params as Record<string, unknown> | undefined;
    if (!p || (typeof p.id !== 'number' && typeof p.id !== 'string')) return '$/cancelRequest needs params.id';
  }
  return undefined;
}

/**
 * Passes only well-formed JSON-RPC requests and notifications on, one per turn of the event loop
 * (the pace of vscode-jsonrpc's dispatcher: faster would only queue them there, uncounted);
 * answers the rest.
 */
class CheckedReader implements MessageReader {
  private readonly errors = new Emitter<Error>();
  private readonly closes = new Emitter<void>();
  private readonly partials = new Emitter<PartialMessageInfo>();
  private readonly ready: Message[] = [];
  private pump: NodeJS.Immediate | undefined;

  constructor(
    private readonly inner: MessageReader,
    private readonly reject: (id: string | number | null, code: number, message: string) => void,
    /** Hears of every message handed on or answered. */
    private readonly taken: () => void,
  ) {
    inner.onError(() => {
      this.taken();
      this.reject(null, RpcErrorCodes.ParseError, 'the message body is not valid JSON');
    });
    inner.onClose(() => this.closes.fire());
    inner.onPartialMessage((p) => this.partials.fire(p));
  }

  readonly onError = this.errorsEvent();
  readonly onClose = this.closes.event;
  readonly onPartialMessage = this.partials.event;

  private errorsEvent() {
    return this.errors.event;
  }

  listen(callback: DataCallback): Disposable {
    const next = (): void => {
      this.pump = undefined;
      const msg = this.ready.shift();
      if (msg === undefined) return;
      this.taken();
      try {
        this.pass(msg, callback);
      } finally {
        // After the dispatcher's own turn, which pass() just scheduled: it then finds its queue
        // empty again (where a second request with the same id would replace the first).
        if (this.ready.length > 0) this.pump = setImmediate(next);
      }
    };
    return this.inner.listen((msg: Message) => {
      this.ready.push(msg);
      this.pump ??= setImmediate(next);
    });
  }

  private pass(msg: Message, callback: DataCallback): void {
    const problem = envelopeProblem(msg);
    if (problem === undefined) return callback(msg);
    const id = (msg as { id?: unknown })?.id;
    // A response from the client (the daemon asks nothing) is dropped without an answer.
    const o = msg as Record<string, unknown>;
    if (typeof o === 'object' && o !== null && !Array.isArray(o) && o.method === undefined && ('result' in o || 'error' in o)) return;
    this.reject(typeof id === 'string' || typeof id === 'number' ? id : null, RpcErrorCodes.InvalidRequest, problem);
  }

  dispose(): void {
    clearImmediate(this.pump);
    this.ready.length = 0;
    this.inner.dispose();
    this.errors.dispose();
    this.closes.dispose();
    this.partials.dispose();
  }
}

export interface RpcConnection {
  connection: MessageConnection;
  socket: net.Socket;
  /** Count a request in and out, for backpressure. */
  begin(): void;
  end(): void;
}

/**
 * Wraps an accepted socket into a vscode-jsonrpc connection (not yet listening). `onViolation`
 * hears about framing errors, after which the connection is answered once and closed.
 */
export function openConnection(
  socket: net.Socket,
  options: { maxMessageBytes?: number; onViolation?: (v: Violation) => void; logger?: { error(m: string): void } },
): RpcConnection {
  const guard = new FrameGuard(options.maxMessageBytes ?? MAX_MESSAGE_BYTES);
  const checked = new PassThrough({ highWaterMark: 1024 * 1024 });
  const writer = new StreamMessageWriter(socket);
  const send = (msg: object): void => {
    if (!socket.destroyed && socket.writable) void writer.write(msg as Message).catch(() => undefined);
  };
  let broken = false;
  let inFlight = 0;
  /** Reading pauses while the connection has too much in flight or waiting to be handed on. */
  const throttle = (): void => {
    const full = inFlight >= MAX_IN_FLIGHT || guard.waitingFrames >= MAX_WAITING || guard.waitingBytes >= MAX_WAITING_BYTES;
    if (full) socket.pause();
    else if (socket.isPaused()) socket.resume();
  };
  socket.on('data', (chunk: Buffer) => {
    if (broken) return;
    const v = guard.check(chunk);
    if (v) {
      broken = true;
      options.onViolation?.(v);
      // Answered through the writer, after the reply it may be writing (it writes a header and
      // then a body: bytes written to the socket directly could land between the two), then this
      // connection ends.
      const answer = {
        jsonrpc: '2.0',
        id: null,
        error: {
          code: RpcErrorCodes.InvalidRequest,
          message: `${v.reason === 'too-large' ? 'message too large' : 'bad message framing'}: ${v.detail}`,
        },
      };
      checked.end();
      void writer
        .write(answer as Message)
        .catch(() => undefined)
        .finally(() => socket.end());
      setTimeout(() => socket.destroy(), 2000).unref();
      return;
    }
    checked.write(chunk);
    throttle();
    if (socket.writableLength > MAX_UNREAD_REPLY_BYTES) {
      broken = true;
      options.onViolation?.({ reason: 'too-large', detail: 'the client leaves its replies unread' });
      socket.destroy();
    }
  });
  socket.on('end', () => checked.end());
  socket.on('close', () => checked.destroy());
  const inner = new StreamMessageReader(checked);
  // Off: vscode-jsonrpc's partial-message timer re-arms itself every 10 s for as long as a message
  // stays incomplete, even after the connection closed, and keeps the reader (with the partial
  // message, up to 16 MiB) and the event loop alive: the daemon leaked every message a client left
  // half sent, and could not exit. Nothing here listens for partial messages.
  inner.partialMessageTimeout = 0;
  const reader = new CheckedReader(
    inner,
    (id, code, message) => send({ jsonrpc: '2.0', id, error: { code, message } }),
    () => {
      guard.taken();
      throttle();
    },
  );
  const quiet = { error: (m: string) => options.logger?.error(m), warn: () => undefined, info: () => undefined, log: () => undefined };
  const connection = createMessageConnection(reader, writer, quiet);
  return {
    connection,
    socket,
    begin() {
      inFlight++;
      throttle();
    },
    end() {
      inFlight--;
      throttle();
    },
  };
}
