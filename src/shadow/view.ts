// View: a mount point of its own on which one agent's layer is always active, for an agent that
// must run at the same time as others (the shared mount time-slices them).
import * as fs from 'fs';
import { ERRNOS } from './errnos';
import type { Shadow } from './shadow';

/** A mount point on which one agent's layer is always active. */
export class View {
  /** @internal use shadow.openView() */
  constructor(
    private readonly shadow: Shadow,
    private readonly id: number,
    readonly agentId: string,
    readonly mountPoint: string,
    private readonly createdMountPoint: boolean,
  ) {}

  private closed = false;

  get open(): boolean {
    return !this.closed && this.shadow.mounted;
  }

  /** @internal whether closing removes the mount point (it was made for this view) */
  get ownsMountPoint(): boolean {
    return this.createdMountPoint;
  }

  /** @internal */
  get viewId(): number {
    return this.id;
  }

  /** @internal its mount ended on its own (Shadow.onGone): it is closed, and the backend is let go. */
  markGone(): void {
    this.closed = true;
  }

  async close(options: { lazy?: boolean } = {}): Promise<void> {
    if (this.closed) return;
    if (this.shadow.mounted) {
      await this.shadow.call(
        `close the view at ${this.mountPoint}`,
        (n) => n.closeView(this.id, options.lazy === true),
        ERRNOS.onMount(this.mountPoint),
      );
    }
    this.closed = true;
    this.shadow.views.delete(this);
    if (this.createdMountPoint) {
      try {
        fs.rmdirSync(this.mountPoint);
      } catch {
        // still in use after a lazy unmount: leave it
      }
    }
  }
}
