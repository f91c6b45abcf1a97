// The batches of the lints service: document-only questions of many agents (their layers change
// only files one server holds as documents, so the mount may show the folder while each agent's
// text is handed to the server) queued and answered together, one folder job on the shared mount
// for many questions, one after another on each warm server, several servers at once. Every batch
// is bounded like any job on the shared mount: by its callers' latest deadline, by a time slice so
// other agents' jobs get their turn, and at once when every question it serves was cancelled.
// What a question does with its server is the service's (BatchItem.run); this module decides when
// it runs, on which of the shared mount's servers, and that it stops when the mount is released.
import * as os from 'os';
import { ShadowError } from '../common/errors';
import type { ServerPool } from '../lsp/pool';
import type { ServerSpec } from '../lsp/servers';
import type { Shadow } from '../shadow';

/** How long one batch of document-only questions may hold the shared mount before other agents' jobs get a turn. */
const BATCH_SLICE_MS = 2_000;
/**
 * Warm servers per language a batch uses unless told otherwise (at most one per core). Two, as
 * measured (docs/lints.md): each server answers its questions one after another on its own core,
 * so a second one adds about a third more lints a second once both are warm; more than two would
 * take cores the agents' own builds and tests need.
 */
const DEFAULT_SERVERS = 2;
/** Free memory a further warm server for batches needs (tsserver on a large project takes a few hundred MiB). */
const SERVER_MEMORY = 1024 * 1024 * 1024;

/** A document-only question for a batch on the shared mount. */
export interface BatchQuestion {
  spec: ServerSpec;
  /** Answers the question on `pool`, one of the shared mount's pools, while the mount shows the folder. */
  run: (pool: ServerPool) => Promise<void>;
  started: () => void;
  onWait: (agent: string) => void;
  signal: AbortSignal;
  /** When its caller stops waiting: a batch never holds the mount past its callers' latest deadline. */
  deadline: number;
}

/** A question waiting for its turn in a batch, with its caller's promise. */
interface BatchItem extends BatchQuestion {
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** What the batches use of the lints service: its shared mount's first pool and the making of more. */
export interface BatchHost {
  /** The shared mount's first pool (the one every other question on the shared mount uses). */
  firstPool(): ServerPool;
  /** A further pool rooted at the shared mount. */
  newPool(): ServerPool;
  /** Most warm servers per language a batch uses (LintsService's options.servers). */
  servers(): number | undefined;
}

export class Batches {
  /** Further servers on the shared mount, used only by batches (see BatchHost.servers). */
  private extraPools: ServerPool[] = [];
  private readonly batchQueue: BatchItem[] = [];
  private batchJob: Promise<void> | undefined;
  /** The questions the running batch has taken and not answered yet. */
  private readonly inFlight = new Set<BatchItem>();
  /** Ends the running batch's job early: every question it serves was cancelled. */
  private batchAbort: AbortController | undefined;
  /** While a batch runs: starts a further worker (and server) for questions that arrived since. */
  private batchGrow: (() => void) | undefined;
  /** Counts batch jobs: a server synced in this one needs no world sync before its next question. */
  private batchEpoch = 0;

  constructor(
    private readonly shadow: Pick<Shadow, 'withFolder'>,
    private readonly host: BatchHost,
  ) {}

  /** The running (or last) batch's number: the mount has shown the folder throughout it. */
  get epoch(): number {
    return this.batchEpoch;
  }

  /** The further pools batches started (the first is the service's). */
  pools(): readonly ServerPool[] {
    return this.extraPools;
  }

  /** Forgets the further pools and hands them to the caller to stop. */
  takePools(): ServerPool[] {
    const pools = this.extraPools;
    this.extraPools = [];
    return pools;
  }

  /**
   * Queues a document-only question for the next batch: one folder job on the shared mount (the
   * mount shows the folder, no layer switch) answers the questions queued, one after another on
   * each warm server, several servers at once, until the queue is empty or its time slice ends.
   */
  ask(item: BatchQuestion): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const it: BatchItem = { ...item, resolve, reject };
      // Cancelled (its deadline passed): out of the queue, and the caller hears at once even if
      // its check already runs (that ends by itself, bounded by the same deadline).
      const onAbort = (): void => {
        const i = this.batchQueue.indexOf(it);
        if (i >= 0) this.batchQueue.splice(i, 1);
        reject(new ShadowError('ABORTED', 'the question was cancelled while it waited for or ran in a batch'));
        // No one left to answer: the batch releases the mount now, not at its deadline.
        if (this.batchQueue.length === 0 && [...this.inFlight].every((x) => x.signal.aborted)) this.batchAbort?.abort();
      };
      if (item.signal.aborted) return onAbort();
      item.signal.addEventListener('abort', onAbort, { once: true });
      this.batchQueue.push(it);
      this.pumpBatch();
      this.batchGrow?.();
    });
  }

  /**
   * Starts a batch job when none runs and questions wait. Like every job on the shared mount it is
   * bounded: it ends by the latest deadline of the questions queued when it starts (the scheduler
   * releases the mount then, as for a one-at-a-time question), or as soon as every question it
   * serves was cancelled. A question it had taken and not answered by then hears the error;
   * questions still queued wait for the next batch.
   */
  private pumpBatch(): void {
    if (this.batchJob || this.batchQueue.length === 0) return;
    const end = Math.max(...this.batchQueue.map((it) => it.deadline));
    const abort = new AbortController();
    this.batchAbort = abort;
    const job = this.shadow.withFolder((_dir, signal) => this.runBatch(signal, end), {
      timeout: Math.max(1, end - Date.now()),
      signal: abort.signal,
      onWait: (a) => {
        for (const it of this.batchQueue) it.onWait(a);
      },
    });
    this.batchJob = job.then(
      () => undefined,
      (err: unknown) => {
        for (const it of this.inFlight) it.reject(err);
      },
    );
    void this.batchJob.finally(() => {
      this.inFlight.clear();
      this.batchAbort = undefined;
      this.batchJob = undefined;
      this.pumpBatch();
    });
  }

  /**
   * One batch: each warm server takes the next queued question and answers it, until the queue
   * holds none this batch may take (one whose deadline is past `end` waits for the next batch),
   * the time slice is used up, or `signal` says the mount was released (then nothing more is
   * taken: the mount may show another agent's layer by now).
   */
  private async runBatch(signal: AbortSignal, end: number): Promise<void> {
    this.batchEpoch++;
    const slice = Date.now() + BATCH_SLICE_MS;
    const released = new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', () => resolve(), { once: true });
    });
    // Each worker claims the question it takes, so two never start servers for one question.
    const claimed = new Set<BatchItem>();
    const eligible = (it: BatchItem): boolean => it.deadline <= end && !claimed.has(it);
    const next = (): BatchItem | undefined => {
      if (signal.aborted || Date.now() >= slice) return undefined;
      const it = this.batchQueue.find(eligible);
      if (it) claimed.add(it);
      return it;
    };
    const work = async (pool: ServerPool): Promise<void> => {
      for (let it = next(); it; it = next()) {
        // A server not started yet starts before it takes a question, so none waits for a cold
        // start another could spare it; a server that never finishes starting holds the batch
        // only until the mount is released.
        await Promise.race([pool.get(it.spec).catch(() => undefined), released]);
        claimed.delete(it);
        const i = signal.aborted ? -1 : this.batchQueue.indexOf(it);
        if (i < 0) continue;
        this.batchQueue.splice(i, 1);
        grow();
        this.inFlight.add(it);
        it.started();
        try {
          await Promise.race([it.run(pool), released]);
          if (signal.aborted) throw new ShadowError('TIMEOUT', 'the batch ran out of time and released the shared mount');
          it.resolve();
        } catch (err) {
          it.reject(err);
        } finally {
          this.inFlight.delete(it);
        }
      }
    };
    // Questions that arrive while the batch runs (a burst trickles in) may take a further server
    // too, not only those queued when it began.
    const workers: Array<Promise<void>> = [];
    const busy = new Set<ServerPool>();
    const grow = (): void => {
      const waiting = this.batchQueue.filter(eligible).length;
      if (!waiting || signal.aborted) return;
      for (const pool of this.sharedPools(busy.size + waiting)) {
        if (busy.has(pool) || !this.batchQueue.some(eligible)) continue;
        busy.add(pool);
        workers.push(work(pool).finally(() => busy.delete(pool)));
      }
    };
    this.batchGrow = grow;
    try {
      grow();
      for (let awaited = 0; awaited < workers.length;) {
        const upTo = workers.length;
        await Promise.all(workers.slice(awaited, upTo));
        awaited = upTo;
      }
    } finally {
      if (this.batchGrow === grow) this.batchGrow = undefined;
    }
  }

  /**
   * The shared mount's servers a batch of `queued` questions uses: the first, plus as many more
   * as BatchHost.servers allows while free memory allows one more server (started on a batch's
   * first use, stopped when idle like the first).
   */
  private sharedPools(queued: number): ServerPool[] {
    const first = this.host.firstPool();
    const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
    const most = Math.min(cores, Math.max(1, this.host.servers() ?? (Number(process.env.SHADOWFS_LINTS_SERVERS) || DEFAULT_SERVERS)));
    while (this.extraPools.length + 1 < Math.min(most, queued) && os.freemem() > SERVER_MEMORY) this.extraPools.push(this.host.newPool());
    return [first, ...this.extraPools].slice(0, Math.max(1, Math.min(most, queued)));
  }
}
