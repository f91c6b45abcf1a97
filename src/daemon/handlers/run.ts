// Handlers for runs (run, run.cancel), and the daemon's table of runs in progress: which
// connection asked for each (a restricted connection may cancel its own only), how to cancel one,
// and which shadow it runs in (an unmount ends the runs in its shadow first; an idle unmount waits).
import type { Logger } from 'winston';
import { ShadowError } from '../../common/errors';
import type { RunPolicy } from '../../run/policy';
import { runInShadow } from '../../run/runner';
import type { Shadow } from '../../shadow';
import type { ShadowManager } from '../manager';
import { type Client, envOf, type Handlers } from './context';

/** A run in progress, as status lists it. */
export interface RunActivity {
  runId: string;
  shadow: string;
  agent: string;
  argv: string[];
  state: 'queued' | 'running';
  /** While queued: the agent whose job holds the shared mount. */
  waitingFor?: string;
  /** How long it has been queued, or running since it got the mount. */
  sinceMs: number;
}

/** How long an unmount waits for the runs in its shadow to end once cancelled. */
const CANCEL_RUNS_MS = 5000;
/** How often a queued run's connection hears that it still waits. */
const QUEUED_EVERY_MS = 2000;

export class Runs {
  /** Runs in progress by id: how to cancel one, the shadow it runs in, and its end. */
  private readonly going = new Map<
    string,
    {
      controller: AbortController;
      shadow: Shadow;
      ended: Promise<unknown>;
      about: Omit<RunActivity, 'runId' | 'state' | 'sinceMs'> & { since: number };
    }
  >();
  /** Runs cancelled (run.cancel) before they started. */
  private readonly cancelledEarly = new Set<string>();
  /** Which connection asked for each run in progress, from the moment its request arrived. */
  private readonly owners = new Map<string, Client>();

  constructor(private readonly log: Logger) {}

  /**
   * Takes a run's id for the connection that asked, before anything waits; false when a run with
   * that id is in progress.
   */
  claim(runId: string, client: Client): boolean {
    if (this.owners.has(runId)) return false;
    this.owners.set(runId, client);
    return true;
  }

  /** The request for this run has been answered. */
  release(runId: string): void {
    this.owners.delete(runId);
    this.cancelledEarly.delete(runId);
  }

  /** Whether this connection asked for the run with this id. */
  ownedBy(runId: string, client: Client): boolean {
    return this.owners.get(runId) === client;
  }

  /** The runs in progress, for status: whose, what, and whether each still waits for the shared mount. */
  list(): RunActivity[] {
    const now = Date.now();
    return [...this.going.entries()].map(([runId, r]) => {
      const { since, waitingFor, ...about } = r.about;
      return {
        runId,
        ...about,
        state: waitingFor === undefined ? ('running' as const) : ('queued' as const),
        ...(waitingFor === undefined ? {} : { waitingFor }),
        sinceMs: now - since,
      };
    });
  }

  /** Whether runs are going on in `shadow` (an idle unmount waits for them). */
  busy(shadow: Shadow): boolean {
    return [...this.going.values()].some((r) => r.shadow === shadow);
  }

  /**
   * Cancels the runs in `shadow` and waits until they have ended, for at most a few seconds: a
   * process stuck on a hung file system cannot be ended, and the unmount goes on without it (its
   * copy of the shadow is then served until it goes).
   */
  async cancelIn(shadow: Shadow): Promise<void> {
    const mine = [...this.going.entries()].filter(([, r]) => r.shadow === shadow);
    for (const [, r] of mine) r.controller.abort();
    let timer: NodeJS.Timeout | undefined;
    const late = await Promise.race([
      Promise.all(mine.map(([, r]) => r.ended)).then(() => false),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(true), CANCEL_RUNS_MS))),
    ]);
    clearTimeout(timer);
    if (late)
      this.log.warn('runs did not end within the time given; unmounting anyway', {
        runs: mine.filter(([id]) => this.going.has(id)).map(([id]) => id),
      });
  }

  handlers(m: ShadowManager, policy: RunPolicy | undefined) {
    return {
      run: async (p, ctx) => {
        const entry = m.get(p.shadow);
        const s = await m.use(entry);
        const env = envOf(p.env);
        const runId = p.runId ?? Math.random().toString(16).slice(2, 14);
        if (this.going.has(runId)) throw new ShadowError('INVALID_ARGUMENT', `a run with id ${runId} is in progress; pick another runId`);
        const controller = new AbortController();
        ctx.signal.addEventListener('abort', () => controller.abort(), { once: true });
        // Cancelled before it started (run.cancel while the request waited): it never starts.
        if (ctx.signal.aborted || this.cancelledEarly.delete(runId)) controller.abort();
        let ended!: () => void;
        const about: Omit<RunActivity, 'runId' | 'state' | 'sinceMs'> & { since: number } = {
          shadow: entry.name,
          agent: p.agent,
          argv: p.argv,
          since: Date.now(),
        };
        this.going.set(runId, { controller, shadow: s, ended: new Promise<void>((r) => (ended = r)), about });
        // While the run waits for the shared mount, its connection hears whom it waits for: when it
        // is queued, when the job ahead changes, and every few seconds (MCP progress is made of these).
        const asked = Date.now();
        let waitingFor: string | undefined;
        let ticker: NodeJS.Timeout | undefined;
        const tell = (): void => {
          if (waitingFor !== undefined) ctx.notify('run/queued', { runId, waitingFor, queuedMs: Date.now() - asked });
        };
        try {
          return await runInShadow(s, {
            agent: p.agent,
            argv: p.argv,
            runId,
            cwd: p.cwd,
            env,
            timeoutMs: p.timeout === undefined ? undefined : Math.ceil(p.timeout * 1000),
            discardWrites: p.discardWrites === true,
            shell: p.shell === true,
            originalPath: p.originalPath,
            atOriginalPath: p.atOriginalPath === true,
            unprotected: p.unprotected === true,
            noNetwork: p.noNetwork === true,
            ...(p.limits ? { limits: p.limits } : {}),
            policy,
            signal: controller.signal,
            onWait: (agent) => {
              waitingFor = agent;
              about.waitingFor = agent;
              tell();
              ticker ??= setInterval(tell, QUEUED_EVERY_MS);
            },
            onStart: () => {
              clearInterval(ticker);
              delete about.waitingFor;
              about.since = Date.now();
            },
            onOutput: (stream, chunk) => ctx.notify('run/output', { runId, stream, data: chunk.toString('base64') }),
          });
        } finally {
          clearInterval(ticker);
          this.going.delete(runId);
          ended();
        }
      },
      'run.cancel': async (p) => {
        const c = this.going.get(p.runId)?.controller;
        c?.abort();
        // Asked for, not started yet (waiting for recovery): it is cancelled as it starts.
        if (!c && this.owners.has(p.runId)) {
          this.cancelledEarly.add(p.runId);
          return { runId: p.runId, cancelled: true };
        }
        return { runId: p.runId, cancelled: c !== undefined };
      },
    } satisfies Partial<Handlers>;
  }
}
