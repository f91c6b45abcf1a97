// Time-slicing: runs jobs of different agents one at a time on one shared mount, switching the
// active layer before each job. Agents are served round robin, so an agent that floods the
// queue cannot starve another; a job that times out or is aborted releases the shadow at once
// (its AbortSignal tells it to stop touching the files). Waiting is visible: a queued job hears
// whose job it waits behind (onWait), and stats list every queued job, whom it waits for and
// since when.
import { ShadowError } from '../common/errors';

export interface JobOptions {
  /** Milliseconds the job may run once it has the shadow (default: no limit). */
  timeout?: number;
  /** Cancels the job, whether it is still queued or already running. */
  signal?: AbortSignal;
  /**
   * While the job waits: called with the agent whose job holds the shadow when this one is
   * queued behind it, and again each time another job starts ahead of it. Never once it runs.
   */
  onWait?: (waitingFor: string) => void;
}

/** A job waiting for the shadow. */
export interface QueuedJob {
  agent: string;
  /** The agent whose job holds the shadow now. */
  waitingFor: string | null;
  waitedMs: number;
}

export interface AgentQueueStats {
  queued: number;
  runs: number;
  timeouts: number;
  aborts: number;
  totalWaitMs: number;
  totalRunMs: number;
  lastWaitMs?: number;
  lastRunMs?: number;
}

export interface SchedulerStats {
  running: string | null;
  /** How long the running job has held the shadow. */
  runningMs?: number;
  queued: number;
  /** Every job waiting, in the order it was queued. */
  waiting: QueuedJob[];
  agents: Record<string, AgentQueueStats>;
}

interface Pending {
  agent: string;
  job: (signal: AbortSignal) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  enqueuedAt: number;
  timeout?: number;
  signal?: AbortSignal;
  onAbort?: () => void;
  onWait?: (waitingFor: string) => void;
}

export class LayerScheduler {
  private readonly queues = new Map<string, Pending[]>();
  /** Agents with queued jobs, in service order; the head is served next. */
  private readonly ring: string[] = [];
  private running: string | null = null;
  private runningSince = 0;
  private readonly stats = new Map<string, AgentQueueStats>();

  constructor(private readonly activate: (agent: string) => Promise<void>) {}

  run<T>(agent: string, job: (signal: AbortSignal) => Promise<T>, options: JobOptions = {}): Promise<T> {
    const { timeout, signal, onWait } = options;
    if (timeout !== undefined && !(typeof timeout === 'number' && timeout > 0)) {
      return Promise.reject(
        new ShadowError('INVALID_ARGUMENT', `timeout must be a positive number of milliseconds, got ${String(timeout)}`),
      );
    }
    if (signal?.aborted) return Promise.reject(new ShadowError('ABORTED', `the job of agent ${agent} was cancelled before it started`));
    return new Promise<T>((resolve, reject) => {
      const st = this.agentStats(agent);
      const pending: Pending = {
        agent,
        job,
        resolve: resolve as (value: unknown) => void,
        reject,
        enqueuedAt: Date.now(),
        timeout,
        signal,
        onWait,
      };
      if (signal) {
        pending.onAbort = () => {
          if (this.dequeue(pending)) {
            st.aborts++;
            reject(new ShadowError('ABORTED', `the job of agent ${agent} was cancelled while it waited for the shadow`));
          }
        };
        signal.addEventListener('abort', pending.onAbort, { once: true });
      }
      const q = this.queues.get(agent) ?? [];
      q.push(pending);
      this.queues.set(agent, q);
      st.queued++;
      // The running agent rejoins the ring when its job ends, behind everyone who waited.
      if (q.length === 1 && agent !== this.running) this.ring.push(agent);
      void this.pump();
      // Still queued: another job holds the shadow (pump starts a job at once when none does).
      if (this.running !== null && this.queues.get(agent)?.includes(pending)) this.tellWaiting(pending, this.running);
    });
  }

  snapshot(): SchedulerStats {
    const agents: Record<string, AgentQueueStats> = {};
    let queued = 0;
    for (const [a, s] of this.stats) {
      agents[a] = { ...s };
      queued += s.queued;
    }
    const now = Date.now();
    const waiting = [...this.queues.values()]
      .flat()
      .sort((a, b) => a.enqueuedAt - b.enqueuedAt)
      .map((p) => ({ agent: p.agent, waitingFor: this.running, waitedMs: now - p.enqueuedAt }));
    return {
      running: this.running,
      ...(this.running === null ? {} : { runningMs: now - this.runningSince }),
      queued,
      waiting,
      agents,
    };
  }

  /** A waiting job's onWait must not break the scheduler. */
  private tellWaiting(p: Pending, running: string): void {
    try {
      p.onWait?.(running);
    } catch {
      // the listener's own problem
    }
  }

  private agentStats(agent: string): AgentQueueStats {
    let s = this.stats.get(agent);
    if (!s) {
      s = { queued: 0, runs: 0, timeouts: 0, aborts: 0, totalWaitMs: 0, totalRunMs: 0 };
      this.stats.set(agent, s);
    }
    return s;
  }

  private dequeue(p: Pending): boolean {
    const q = this.queues.get(p.agent);
    const i = q ? q.indexOf(p) : -1;
    if (!q || i < 0) return false;
    q.splice(i, 1);
    this.agentStats(p.agent).queued--;
    if (q.length === 0) {
      this.queues.delete(p.agent);
      const r = this.ring.indexOf(p.agent);
      if (r >= 0) this.ring.splice(r, 1);
    }
    return true;
  }

  private async pump(): Promise<void> {
    if (this.running !== null || this.ring.length === 0) return;
    // Round robin: the head agent's oldest job runs; the agent leaves the ring while it runs.
    const agent = this.ring.shift()!;
    const p = this.queues.get(agent)![0];
    this.dequeue(p);
    if (p.onAbort) p.signal?.removeEventListener('abort', p.onAbort);
    this.running = agent;
    this.runningSince = Date.now();
    for (const q of this.queues.values()) for (const w of q) this.tellWaiting(w, agent);
    const st = this.agentStats(agent);
    const wait = Date.now() - p.enqueuedAt;
    st.lastWaitMs = wait;
    st.totalWaitMs += wait;
    const started = Date.now();
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let onRunAbort: (() => void) | undefined;
    const stop = new Promise<never>((_, reject) => {
      const limit = p.timeout;
      if (limit !== undefined) {
        timer = setTimeout(() => {
          st.timeouts++;
          // Settle first: the job may resolve as soon as it hears the abort.
          reject(new ShadowError('TIMEOUT', `the job of agent ${agent} ran longer than ${limit} ms; the shadow was released`));
          controller.abort(new ShadowError('TIMEOUT', `the job of agent ${agent} ran longer than ${limit} ms`));
        }, limit);
      }
      if (p.signal) {
        onRunAbort = (): void => {
          st.aborts++;
          reject(new ShadowError('ABORTED', `the job of agent ${agent} was cancelled; the shadow was released`));
          controller.abort(p.signal?.reason);
        };
        if (p.signal.aborted) onRunAbort();
        else p.signal.addEventListener('abort', onRunAbort, { once: true });
      }
    });
    stop.catch(() => undefined);
    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await Promise.race([this.activate(agent).then(() => p.job(controller.signal)), stop]) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    clearTimeout(timer);
    if (onRunAbort) p.signal?.removeEventListener('abort', onRunAbort);
    const ran = Date.now() - started;
    st.runs++;
    st.lastRunMs = ran;
    st.totalRunMs += ran;
    this.running = null;
    if (this.queues.has(agent) && !this.ring.includes(agent)) this.ring.push(agent);
    // Bookkeeping is done before the caller hears back, so stats read then are complete.
    if (outcome.ok) p.resolve(outcome.value);
    else p.reject(outcome.error);
    void this.pump();
  }
}
