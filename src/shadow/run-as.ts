// runAs: runs a job as an agent, where that agent's writes belong: in the agent's own view when
// it has one (at once, beside other agents), else queued on the shared mount with the agent's
// layer active (the scheduler, round robin between agents). With discardWrites the job gets a
// scratch copy of the layer, dropped afterwards, so what it writes goes nowhere.
import * as crypto from 'crypto';
import type { Shadow } from './shadow';

export interface RunAsOptions {
  /** Run on a scratch copy of the agent's layer that is dropped afterwards (on the shared mount, even when the agent has a view). */
  discardWrites?: boolean;
  /** Names the scratch layer `<agent>~run-<scratchId>` (default: random). */
  scratchId?: string;
  /**
   * Cancels the job while it is queued (it is taken out of the queue, and runAs rejects).
   * Once the job runs, stopping it is the job's own business: the mount is released when it returns.
   */
  signal?: AbortSignal;
  /** While the job waits for the shared mount: whose job holds it (see JobOptions.onWait). */
  onWait?: (waitingFor: string) => void;
}

/** Where the job runs (a mount point showing the agent's layer) and how long it waited for it. */
export type RunAsJob<T> = (place: { dir: string; queuedMs: number }) => Promise<T>;

export async function runAs<T>(shadow: Shadow, agent: string, job: RunAsJob<T>, opts: RunAsOptions = {}): Promise<T> {
  await shadow.createLayer(agent);
  const view = shadow.viewOf(agent);
  const scratch = opts.discardWrites ? `${agent}~run-${opts.scratchId ?? crypto.randomBytes(6).toString('hex')}` : undefined;
  if (scratch) {
    // Never saved by autosave: what it wrote is discarded, and a crash must not bring it back.
    shadow.markScratch(scratch);
    await shadow.cloneLayer(agent, scratch);
  }
  const queuedAt = Date.now();
  // The caller's cancel reaches the scheduler only while the job waits in the queue.
  const whileQueued = new AbortController();
  let running = false;
  const onAbort = (): void => {
    if (!running) whileQueued.abort();
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  if (opts.signal?.aborted) whileQueued.abort();
  try {
    if (view && !scratch) return await job({ dir: view.mountPoint, queuedMs: Date.now() - queuedAt });
    return await shadow.withLayer(
      agent,
      (dir) => {
        running = true;
        return job({ dir, queuedMs: Date.now() - queuedAt });
      },
      { layer: scratch ?? agent, signal: whileQueued.signal, onWait: opts.onWait },
    );
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    if (scratch && shadow.mounted) {
      if (shadow.active === scratch) await shadow.activate(agent);
      await shadow.dropLayer(scratch);
    }
  }
}
