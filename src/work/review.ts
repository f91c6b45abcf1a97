// Per-hunk review of a layer: its changes as units with stable ids (src/patch/review), which of
// them apply would report as conflicts, and the rejections the user made, kept per folder and
// agent in the state directory (`reviews/<folder key>/<agent>.json`, beside the checkpoints'
// directory) until the agent has been told (and after: they stay listed, marked delivered).
import * as crypto from 'crypto';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { stateDir } from '../platform';
import type { ReviewUnit } from '../patch/review';
import { checkRealDir, makeRealDirs, readPlain, writeAtomic } from './checkpoint-files';
import { checkAgentDir } from './checkpoint-manifest';

export interface Rejection {
  /** The rejected unit's id when it was rejected. */
  id: string;
  path: string;
  /** The agent's lines the unit covers ("12-15"), or "" for a whole-file unit. */
  lines: string;
  /** The unit's text, cut to EXCERPT_LINES lines. */
  excerpt: string;
  reason: string;
  /** When it was rejected (ISO 8601). */
  at: string;
  /** Whether the agent has been told (through its MCP tool results, or a take). */
  delivered: boolean;
  /** Whether the unit was taken out of the agent's layer when it was rejected. */
  reverted: boolean;
}

const EXCERPT_LINES = 12;
/** The most rejections kept per agent: the oldest go first. */
const MAX_KEPT = 500;

export function excerptOf(text: string): string {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines.length <= EXCERPT_LINES
    ? lines.join('\n')
    : [...lines.slice(0, EXCERPT_LINES), `... (${lines.length - EXCERPT_LINES} more lines)`].join('\n');
}

export function linesOf(u: ReviewUnit): string {
  if (u.unit !== 'hunk') return '';
  return u.newLines === 0 ? `${u.newStart}` : `${u.newStart}-${u.newStart + u.newLines - 1}`;
}

export class RejectionStore {
  private readonly chain: string[];

  constructor(folder: string) {
    const key = crypto.createHash('sha256').update(folder).digest('hex').slice(0, 24);
    const reviews = path.join(stateDir(), 'reviews');
    this.chain = [reviews, path.join(reviews, key)];
  }

  private file(agent: string): string {
    return path.join(this.chain[1], `${checkAgentDir(agent)}.json`);
  }

  list(agent: string): Rejection[] {
    for (const d of this.chain) checkRealDir(d);
    const data = readPlain(this.file(agent), 16 << 20);
    if (!data) return [];
    try {
      const v = JSON.parse(data.toString('utf8')) as { rejections?: Rejection[] };
      if (!Array.isArray(v.rejections)) throw new Error('no rejections list');
      return v.rejections;
    } catch (err) {
      throw new ShadowError('STATE_CORRUPT', `${this.file(agent)} is not a list of rejections: ${(err as Error).message}`);
    }
  }

  private save(agent: string, all: Rejection[]): void {
    makeRealDirs(this.chain);
    writeAtomic(this.file(agent), JSON.stringify({ rejections: all.slice(-MAX_KEPT) }, null, 1));
  }

  add(agent: string, items: Rejection[]): void {
    this.save(agent, [...this.list(agent), ...items]);
  }

  /** The rejections the agent has not been told of, marked told now. */
  take(agent: string): Rejection[] {
    const all = this.list(agent);
    const fresh = all.filter((r) => !r.delivered);
    if (fresh.length)
      this.save(
        agent,
        all.map((r) => ({ ...r, delivered: true })),
      );
    return fresh;
  }
}
