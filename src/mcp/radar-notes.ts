// Notes to the agent from the daemon's conflict radar, carried on its MCP tool results: when a
// path this agent changed is changed by another agent too, or under it in the user's folder (the
// copy it took is no longer what the folder has), the next tool result says so, once per new
// overlap. The notes come from radar/changed notifications, which the daemon sends this server's
// restricted connection for overlaps that name its agent only, heard through the DaemonLink on
// every connection it makes (after a daemon restart too); the overlaps already there when the
// server starts, or when it connected again, are asked for once, with the next tool call.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Overlap } from '../protocol/methods';
import type { DaemonLink } from './link';

/** A short sentence for the agent about one overlap that names it. */
export function noteFor(o: Overlap, agent: string): string {
  if (o.kind === 'folder') {
    const was = o.base ? `${o.base.size} bytes` : 'no file';
    const now = o.folder ? `${o.folder.size} bytes` : 'removed';
    return `${o.path} changed in the user's folder since you copied it (${was} then, ${now} now): your copy does not have their change, and applying yours would conflict with it.`;
  }
  const others = o.agents.filter((a) => a !== agent);
  return `${others.length === 1 ? `agent ${others[0]}` : `agents ${others.join(', ')}`} also changed ${o.path}, differently: your changes to it will conflict when both are applied.`;
}

export class RadarNotes {
  /** Overlaps told or to tell, by id, with the time each was noticed (a new one at the same id is told again). */
  private readonly current = new Map<string, string>();
  private readonly told = new Set<string>();
  private pending: Overlap[] = [];
  /** The connection (DaemonLink.generation) whose overlaps were asked for; -1: none yet. */
  private askedOn = -1;

  constructor(
    private readonly link: DaemonLink,
    private readonly shadow: string,
    private readonly agent: string,
  ) {
    link.on('radar/changed', (n) => {
      for (const o of n.cleared) {
        this.current.delete(o.id);
        this.pending = this.pending.filter((p) => p.id !== o.id);
      }
      for (const o of n.added) this.heard(o);
    });
  }

  private heard(o: Overlap): void {
    if (!o.agents.includes(this.agent)) return;
    if (this.current.get(o.id) === o.since) return; // the same overlap, changed in detail: told once
    this.current.set(o.id, o.since);
    this.pending = [...this.pending.filter((p) => p.id !== o.id), o];
  }

  /**
   * What a (re)started daemon's radar holds now. After a reconnect, an overlap already told is not
   * told again (its id is stable; the restarted radar noticed it anew, at a later time), and one
   * that went while the daemon was away is forgotten.
   */
  private async resync(): Promise<void> {
    const generation = this.link.generation;
    const again = this.askedOn !== -1;
    this.askedOn = generation;
    let overlaps: Overlap[];
    try {
      overlaps = (await this.link.request('radar', { shadow: this.shadow, agent: this.agent })).overlaps;
    } catch {
      return; // the notes are a courtesy: a tool result never fails for them
    }
    if (again) {
      const now = new Set(overlaps.map((o) => o.id));
      for (const id of [...this.current.keys()]) if (!now.has(id)) this.current.delete(id);
      this.pending = this.pending.filter((p) => now.has(p.id));
    }
    for (const o of overlaps) {
      const known = this.current.get(o.id);
      if (again && known !== undefined && this.told.has(`${o.id}@${known}`)) {
        this.current.set(o.id, o.since);
        this.told.add(`${o.id}@${o.since}`);
      } else this.heard(o);
    }
  }

  /** The notes not told yet (each overlap once); never fails the tool call. */
  async take(): Promise<string[]> {
    if (this.askedOn !== this.link.generation) await this.resync();
    const out: string[] = [];
    for (const o of this.pending.splice(0)) {
      const key = `${o.id}@${o.since}`;
      if (this.told.has(key) || this.current.get(o.id) !== o.since) continue;
      this.told.add(key);
      out.push(noteFor(o, this.agent));
    }
    return out;
  }

  /** `result` with the notes not told yet added as one more text item. */
  async addTo(result: CallToolResult): Promise<CallToolResult> {
    const notes = await this.take();
    if (notes.length === 0) return result;
    return { ...result, content: [...result.content, { type: 'text', text: `[shadowfs radar] ${notes.join('\n')}` }] };
  }
}
