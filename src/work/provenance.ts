// Provenance of agents' layers, as getting work out needs it: when each layer started (created,
// reset, or the start recorded in the checkpoint it was restored from), and the base records a
// restored layer carries over from its checkpoint. Kept here, by the changes service, from the
// layer events the shadow emits (Shadow.onLayer); the shadow itself keeps none of it.
import type { ChangeBase } from '../shadow/native';
import type { LayerEvent, Shadow } from '../shadow';

/** A base record a checkpoint carried over, with the checkpoint blob of that base's content when it was kept. */
export interface RestoredBase {
  base: ChangeBase;
  blob?: string;
}

export class Provenance {
  /** Per agent: when its layer started; a key with undefined: not known (a checkpoint that did not say). */
  private readonly since = new Map<string, number | undefined>();
  /** Per agent: the base records its layer carried over from the checkpoint it was restored from, by path. */
  private readonly restored = new Map<string, Map<string, RestoredBase>>();
  private readonly unsubscribe: () => void;

  /**
   * Listens to `shadow`'s layer events from now on. A layer that started before (the one mount()
   * makes, say) is taken to have started when the shadow was mounted: no later than it did, so a
   * folder file changed since counts as one the agent may not have seen.
   */
  constructor(private readonly shadow: Shadow) {
    this.unsubscribe = shadow.onLayer((e) => this.heard(e));
  }

  private heard(e: LayerEvent): void {
    switch (e.kind) {
      case 'created':
        if (!this.since.has(e.agent)) this.since.set(e.agent, e.at);
        break;
      case 'cloned':
        this.since.set(e.agent, this.layerSince(e.from));
        break;
      case 'reset':
        this.since.set(e.agent, e.at);
        this.restored.delete(e.agent);
        break;
      case 'dropped':
        this.since.delete(e.agent);
        this.restored.delete(e.agent);
        break;
      default:
        break;
    }
  }

  /**
   * When the agent's layer started, in ms since the epoch; undefined when unknown. Apply uses it
   * where the layer recorded no base: a folder file changed after it is one the agent never saw.
   */
  layerSince(agent: string): number | undefined {
    return this.since.has(agent) ? this.since.get(agent) : this.shadow.mountedAt;
  }

  /** Sets when the agent's layer started (a restore: the start its checkpoint recorded, or unknown). */
  setLayerSince(agent: string, ms: number | undefined): void {
    this.since.set(agent, ms);
  }

  /**
   * The base record carried over from the checkpoint a layer was restored from (the layer's own
   * records then name the folder file at restore time, not the one the agent started from).
   */
  restoredBase(agent: string, rel: string): RestoredBase | undefined {
    return this.restored.get(agent)?.get(rel);
  }

  /** Every base record carried over for the agent, by path. */
  restoredBases(agent: string): ReadonlyMap<string, RestoredBase> {
    return this.restored.get(agent) ?? new Map();
  }

  /** The checkpoint blobs of every agent's carried-over bases (kept from blob collection while this lives: WorkService). */
  *restoredBlobs(): Iterable<string> {
    for (const m of this.restored.values()) for (const r of m.values()) if (r.blob !== undefined) yield r.blob;
  }

  setRestoredBase(agent: string, rel: string, base: ChangeBase, blob?: string): void {
    let m = this.restored.get(agent);
    if (!m) this.restored.set(agent, (m = new Map()));
    m.set(rel, blob === undefined ? { base } : { base, blob });
  }

  clearRestoredBases(agent: string): void {
    this.restored.delete(agent);
  }

  /** Stops listening. */
  dispose(): void {
    this.unsubscribe();
  }
}
