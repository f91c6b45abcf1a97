// What the lints service has told each warm language server, and the telling: the documents a
// server holds open, the files it was last told differ from the folder, the folder's own edits it
// has not heard of, and the agent's text it holds as an overlay in a batch. Before a question a
// server is brought to what the mount shows now (syncWorld: the active layer) or, in a batch, to
// the folder plus one agent's documents (syncOverlay); a server that fell too far behind the
// folder is restarted instead.
import * as fs from 'fs';
import * as path from 'path';
import type { LanguageServerSession } from '../lsp/session';
import type { ServerPool } from '../lsp/pool';
import { serverFor, type ServerSpec } from '../lsp/servers';
import type { Shadow } from '../shadow';
import { ShadowError } from '../common/errors';
import { kindBeneath, readRegularText } from './documents';

/** More folder edits than this between two questions (a checkout, an install): restart the server rather than re-open each. */
const MAX_FOLDER_SYNC = 200;

/** The agent's own text of every file its layer changes, when all of them are documents one server holds (see LintsService.overlayOf). */
export type Overlay = Map<string, { text: string; languageId: string }>;

/**
 * Per server: the documents it has open, the paths it was last told differ from the folder, the
 * folder's own edits it has not been told of, and whether it must start over (too many of those,
 * or some not known).
 */
interface ServerState {
  spec: ServerSpec;
  root: string;
  open: Map<string, string>;
  dirty: Set<string>;
  folder: Set<string>;
  stale: boolean;
  /** Documents holding an agent's text rather than what the mount shows (a batch's overlay). */
  overlaid: Set<string>;
  /** The batch whose first question synced this server with the folder (the mount showed it since). */
  batch: number;
}

export class ServerSync {
  private readonly seen = new Map<LanguageServerSession, ServerState>();

  constructor(
    private readonly shadow: Shadow,
    /** The servers' specs (the service's, loaded on first use). */
    private readonly specs: () => ServerSpec[],
    /** Takes what changed in the folder since the last question (LintsService.absorbFolderChanges). */
    private readonly absorbFolderChanges: () => void,
  ) {}

  /** Every server has these folder edits to hear of; overflow (changes lost) or too many: it starts over. */
  folderChanged(paths: readonly string[], overflow: boolean): void {
    for (const state of this.seen.values()) {
      if (overflow) state.stale = true;
      for (const p of paths) state.folder.add(p);
      if (state.folder.size > MAX_FOLDER_SYNC) state.stale = true;
    }
  }

  /** Forgets the servers rooted at `root` (a view closed). */
  forgetRoot(root: string): void {
    for (const s of [...this.seen.keys()]) if (this.seen.get(s)!.root === root) this.seen.delete(s);
  }

  clear(): void {
    this.seen.clear();
  }

  /** `spec`'s warm server of `pool` (rooted at `root`), restarted first when it fell too far behind the folder. */
  async session(spec: ServerSpec, pool: ServerPool, root: string): Promise<LanguageServerSession> {
    this.absorbFolderChanges();
    let s = await pool.get(spec);
    const old = this.seen.get(s);
    if (old?.stale) {
      // It may hold any number of folder files as they were: a fresh server reads them anew.
      this.seen.delete(s);
      await pool.restart(spec);
      s = await pool.get(spec);
    }
    for (const [other, st] of this.seen) if (other !== s && st.spec.id === spec.id && other.exited) this.seen.delete(other);
    if (!this.seen.has(s))
      this.seen.set(s, {
        spec,
        root,
        open: new Map(),
        dirty: new Set(),
        folder: new Set(),
        stale: false,
        overlaid: new Set(),
        batch: -1,
      });
    return s;
  }

  /**
   * Tells a server which files may differ from what it read before: every path any layer of the
   * shadow changes (whichever was active when the server last read them), those it was told of
   * last time, and those edited in the folder since; the ones it handles are (re)opened with the
   * content the mount shows now.
   */
  async syncWorld(session: LanguageServerSession): Promise<void> {
    const state = this.seen.get(session)!;
    const root = state.root;
    // What the folder's own edits changed, and what any layer changes.
    const paths = new Set<string>([...state.dirty, ...state.folder]);
    state.folder.clear();
    for (const agent of await this.shadow.agents()) {
      for (const c of await this.shadow
        .layer(agent)
        .changes()
        .catch(() => []))
        paths.add(c.path);
    }
    // Documents the server has open hold what we last sent, whatever happened since (a layer
    // reset, an edit you made in the folder): every one is brought to what the mount shows now
    // (a no-op for those whose text is unchanged).
    for (const rel of state.open.keys()) paths.add(rel);
    if (paths.size === 0) return;
    const changes: Array<{ relPath: string; type: 'created' | 'changed' | 'deleted' }> = [];
    // Whether a name is there, never where a link there points (a link the agent made may lead
    // anywhere on the host: kindBeneath).
    const kinds = new Map<string, 'file' | 'other' | 'missing'>();
    for (const rel of paths) kinds.set(rel, kindBeneath(root, rel));
    for (const rel of paths) {
      const here = kinds.get(rel) !== 'missing';
      const inFolder = inTheFolder(this.shadow.folder, rel);
      changes.push({ relPath: rel, type: !here ? 'deleted' : inFolder ? 'changed' : 'created' });
    }
    session.filesChanged(changes);
    // Watch events alone do not make every server re-read a file (tsserver, for one, trusts its
    // own watchers, which a layer switch does not wake): each changed file this server handles is
    // opened as a document with the content the mount shows now, so what it sees is exactly the
    // active layer. Files that are gone now are closed.
    const specs = this.specs();
    for (const rel of paths) {
      const m = serverFor(specs, rel);
      if (!m || m.spec.id !== state.spec.id) continue;
      // Only a regular file reached without a link is handed over; the server reads anything else
      // itself, as its confined view shows it (a link to your home leads to an empty one there).
      // A file that cannot be handed over (too large, swapped for a link or a FIFO since it was
      // looked at) is left to the server's own reading, as one that is not a file: any agent's
      // layer is in `paths`, and one agent's file must not fail every agent's checks (review).
      let handed = false;
      if (kinds.get(rel) === 'file') {
        try {
          await this.syncDocument(session, rel, m.languageId);
          handed = true;
        } catch (err) {
          if (!(err instanceof ShadowError)) throw err;
        }
      }
      if (!handed && state.open.has(rel)) {
        session.close(rel);
        state.open.delete(rel);
      }
    }
    state.dirty = paths;
    // Every open document now holds what the mount shows.
    state.overlaid.clear();
    state.batch = -1;
  }

  /**
   * Inside batch number `batch` (the mount shows the folder): brings the server to the folder
   * once per batch (and again after edits in the folder), then gives it the agent's own text of
   * every file its layer changes and the folder's text of those the previous question had
   * overlaid. Every open document is marked so the next sync of a target is a new version:
   * diagnostics for it were computed after these changes.
   */
  async syncOverlay(session: LanguageServerSession, overlay: Overlay, batch: number): Promise<void> {
    const state = this.seen.get(session)!;
    if (state.batch !== batch || state.folder.size > 0) {
      await this.syncWorld(session);
      state.batch = batch;
    }
    for (const rel of state.overlaid) {
      if (overlay.has(rel)) continue;
      const languageId = state.open.get(rel);
      if (languageId !== undefined) await this.syncDocument(session, rel, languageId);
    }
    // Before the agent's own documents, so each of them is a new version too and the targets
    // among them are not sent twice.
    session.recheckAll();
    for (const [rel, d] of overlay) {
      state.open.set(rel, d.languageId);
      session.sync(rel, d.languageId, d.text);
    }
    state.overlaid = new Set(overlay.keys());
  }

  /** Hands the server the text the mount shows now of `rel`; the document's new version. */
  async syncDocument(session: LanguageServerSession, rel: string, languageId: string): Promise<number> {
    const state = this.seen.get(session)!;
    const text = await readRegularText(state.root, rel);
    state.open.set(rel, languageId);
    return session.sync(rel, languageId, text);
  }
}

/**
 * Whether the folder has a name at `rel` (its own link counts, never followed). Any error is
 * "no": the paths come from agents' layers, and one whose directory is a file in the folder, or
 * too long for the system, must not make every agent's checks fail (review: ENOTDIR did).
 */
function inTheFolder(folder: string, rel: string): boolean {
  try {
    return fs.lstatSync(path.join(folder, rel), { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}
