// Notes to the agent from the daemon's conflict radar, carried on its MCP tool results: when a
// path this agent changed is changed by another agent too, or under it in the user's folder (the
// copy it took is no longer what the folder has), the next tool result says so, once per new
// overlap. The notes come from radar/changed notifications, which the daemon sends this server's
// restricted connection for overlaps that name its agent only; the overlaps already there when
// the server starts are asked for once, with the first tool call.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ShadowClient } from '../client';
import type { Overlap } from '../protocol/methods';

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
  private asked = false;

  constructor(
    private readonly client: ShadowClient,
    private readonly shadow: string,
    private readonly agent: string,
  ) {
    client.on('radar/changed', (n) => {
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

  /** The notes not told yet (each overlap once); never fails the tool call. */
  async take(): Promise<string[]> {
    if (!this.asked) {
      this.asked = true;
      try {
        for (const o of (await this.client.request('radar', { shadow: this.shadow, agent: this.agent })).overlaps) this.heard(o);
      } catch {
        // the notes are a courtesy: a tool result never fails for them
      }
    }
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
