// Background runs of the MCP server: run_command with background: true starts the daemon's run
// and answers at once with its id; the server holds the daemon request open itself, buffers the
// run's run/output notifications (bounded: past BUFFER_MAX_BYTES the oldest output is dropped,
// and counted), and run_output hands out what is new since the last poll, then the exit status
// once the run ended. cancel_run cancels it through the daemon (run.cancel).
import * as crypto from 'crypto';
import { ShadowError } from '../common/errors';
import type { ParamsOf, ResultOf } from '../protocol/methods';
import type { DaemonLink } from './link';
import { TEXT_MAX_BYTES } from './shape';

/** Output kept per run until polled; older output beyond it is dropped and counted. */
export const BUFFER_MAX_BYTES = 1024 * 1024;
/** Runs in the background at once, and finished runs kept for a last poll. */
const MAX_ACTIVE = 8;
const MAX_KEPT = 32;
/** The longest a poll may wait for new output or the end (seconds). */
export const POLL_MAX_WAIT_S = 60;

type Stream = 'stdout' | 'stderr';

interface BackgroundRun {
  id: string;
  label: string;
  chunks: Array<{ stream: Stream; data: Buffer }>;
  buffered: number;
  dropped: number;
  result?: ResultOf<'run'>;
  error?: ShadowError;
  generation: number;
  /** Wakes a waiting poll. */
  wake: () => void;
}

export function newRunId(): string {
  return `mcp-${crypto.randomBytes(6).toString('hex')}`;
}

/** How a finished run ended, in one line. */
export function exitLine(r: ResultOf<'run'>): string {
  const limit =
    r.timeoutMs === undefined ? '' : ` after ${r.timeoutMs / 1000} s; pass a larger timeout (seconds, 0: no limit) to let it run longer`;
  return `exit code ${r.exitCode ?? 'none'}${r.signal ? ` (signal ${r.signal})` : ''}${r.timedOut ? ` (timed out${limit})` : ''}${r.cancelled ? ' (cancelled)' : ''}, ${r.durationMs} ms`;
}

export class BackgroundRuns {
  private readonly runs = new Map<string, BackgroundRun>();

  constructor(private readonly link: DaemonLink) {
    link.on('run/output', (p) => {
      const run = this.runs.get(p.runId);
      if (!run || run.result || run.error) return;
      const data = Buffer.from(p.data, 'base64');
      run.chunks.push({ stream: p.stream, data });
      run.buffered += data.length;
      while (run.buffered > BUFFER_MAX_BYTES && run.chunks.length > 1) {
        const old = run.chunks.shift()!;
        run.buffered -= old.data.length;
        run.dropped += old.data.length;
      }
      run.wake();
    });
  }

  /** Starts `params` as a run in the background; returns its id at once. */
  start(params: ParamsOf<'run'>, label: string): string {
    const active = [...this.runs.values()].filter((r) => !r.result && !r.error).length;
    if (active >= MAX_ACTIVE)
      throw new ShadowError(
        'INVALID_ARGUMENT',
        `${active} background runs are going already; wait for one (run_output) or cancel one (cancel_run) first`,
      );
    this.forgetOld();
    const id = params.runId ?? newRunId();
    const run: BackgroundRun = {
      id,
      label,
      chunks: [],
      buffered: 0,
      dropped: 0,
      generation: this.link.generation,
      wake: () => undefined,
    };
    this.runs.set(id, run);
    this.link.request('run', { ...params, runId: id }).then(
      (r) => {
        run.result = r;
        run.wake();
      },
      (err: unknown) => {
        run.error = err instanceof ShadowError ? err : new ShadowError('INTERNAL', String((err as Error)?.message ?? err));
        run.wake();
      },
    );
    return id;
  }

  /**
   * What is new since the last poll (at most TEXT_MAX_BYTES; the rest waits for the next), and
   * how the run ended once it did and everything was read. Waits up to `waitS` seconds for
   * something new while there is nothing.
   */
  async poll(id: string, waitS: number): Promise<string> {
    const run = this.known(id);
    if (!run.chunks.length && !run.result && !run.error && waitS > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(waitS, POLL_MAX_WAIT_S) * 1000);
        run.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      run.wake = () => undefined;
    }
    const parts: string[] = [];
    if (run.dropped) {
      parts.push(
        `[… ${run.dropped} bytes of older output were dropped: more than ${BUFFER_MAX_BYTES} bytes waited unread; poll more often, or redirect the output to a file and read_file it]`,
      );
      run.dropped = 0;
    }
    let budget = TEXT_MAX_BYTES;
    let stream: Stream | undefined;
    let text = '';
    while (run.chunks.length && budget > 0) {
      const c = run.chunks[0];
      const take = c.data.subarray(0, budget);
      if (take.length < c.data.length) c.data = c.data.subarray(take.length);
      else run.chunks.shift();
      run.buffered -= take.length;
      budget -= take.length;
      if (c.stream !== stream) {
        if (text) parts.push(text);
        text = `--- ${c.stream}\n`;
        stream = c.stream;
      }
      text += take.toString('utf8');
    }
    if (text) parts.push(text);
    if (run.chunks.length) parts.push(`[… ${run.buffered} more bytes wait; call run_output again]`);
    else if (run.result) {
      parts.push(`run ${id} ended: ${exitLine(run.result)}`);
      this.runs.delete(id);
    } else if (run.error) {
      parts.push(`run ${id} ended with ${run.error.code}: ${run.error.message}`);
      this.runs.delete(id);
    } else if (!parts.length)
      parts.push(`run ${id} is still running (no new output); call run_output again, with wait (seconds) to wait for it`);
    else parts.push(`run ${id} is still running; call run_output again for more`);
    return parts.join('\n');
  }

  async cancel(id: string): Promise<string> {
    const run = this.known(id);
    if (run.result || run.error) return `run ${id} had already ended; run_output gives its end`;
    const r = await this.link.request('run.cancel', { runId: id });
    return r.cancelled
      ? `run ${id} cancelled: interrupted, then killed after a grace period; run_output gives its last output and end`
      : `run ${id} was not running any more; run_output gives its end`;
  }

  private known(id: string): BackgroundRun {
    const run = this.runs.get(id);
    if (!run)
      throw new ShadowError(
        'NOT_FOUND',
        `no background run ${JSON.stringify(id)} (ended runs are forgotten once their end was read); the runs known: ${[...this.runs.values()].map((r) => `${r.id} (${r.label})`).join(', ') || 'none'}`,
      );
    if (run.generation !== this.link.generation && !run.result && !run.error) {
      run.error = new ShadowError('DAEMON_UNAVAILABLE', 'the daemon restarted while it ran; its command ended with it: start it again');
    }
    return run;
  }

  private forgetOld(): void {
    const ended = [...this.runs.values()].filter((r) => r.result || r.error);
    while (this.runs.size >= MAX_KEPT && ended.length) this.runs.delete(ended.shift()!.id);
  }
}
