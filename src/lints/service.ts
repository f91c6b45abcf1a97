// The lints service of one shadow: what warm language servers, running with the shadow's
// mount point as their root, say about an agent's change. Each question runs as a scheduler job
// with the agent's layer active on the shared mount (so the servers read the agent's files, and
// the folder's node_modules, live), after telling every server which files differ from what it
// saw last (ServerSync, sync.ts); the folder's own diagnostics (the baseline) come from a job with
// no layer active, and are cached until something in the folder changes. A question whose agent's
// layer changes only files one server holds as documents (modified, not added or deleted) needs no
// layer on the mount: such questions are answered in batches, one folder job for many, each
// agent's text handed to the server as documents over the folder's (see overlayOf here; the
// batches themselves are Batches, batches.ts). Edits made in the folder itself (which FUSE cannot
// signal to programs inside the mount) reach the servers through FolderChanges. Answers are fresh
// or marked otherwise: a server that does not answer for the exact document version in time gives
// `timeout`, never an empty list. An agent with a view of its own (Shadow.openView) is checked
// there instead, on servers rooted at the view, without queueing at all: only a folder baseline
// not cached yet needs the shared mount, and it is taken only when the mount is free at once (else
// the answer says its baseline is `queued`). Texts and diagnostics without a server: documents.ts.
import * as fs from 'fs';
import * as path from 'path';
import type { Diagnostic as LspDiagnostic } from 'vscode-languageserver-protocol';
import { ShadowError } from '../common/errors';
import type { LanguageServerSession } from '../lsp/session';
import { ServerPool } from '../lsp/pool';
import {
  builtinServers,
  loadServerConfig,
  loadServerConfigFile,
  LspConfigError,
  serverFor,
  type ServerSpec,
  userServerConfigFile,
} from '../lsp/servers';
import { FolderChanges } from '../shadow/folder-changes';
import { normalizeRelPath } from '../common/paths';
import { platform } from '../platform';
import type { CheckedParamsOf, Diagnostic, ResultOf } from '../protocol/methods';
import type { Shadow, View } from '../shadow';
import { Batches } from './batches';
import { applyEdits, MAX_DOCUMENT_BYTES, type Position, type Range, splitByBaseline, toDiagnostic } from './documents';
import { type Overlay, ServerSync } from './sync';

type LintsParams = CheckedParamsOf<'lints'>;
type LintsResult = ResultOf<'lints'>;
type FileLints = LintsResult['files'][number];
type TextEditOut = { path: string; range: Range; newText: string };

const DEFAULT_TIMEOUT_MS = 10_000;
const MAX_QUICK_FIXES = 20;

/** What one file's server said (inside a job). */
interface Checked {
  status: 'fresh' | 'timeout' | 'error';
  error?: string;
  version?: number;
  diagnostics: Diagnostic[];
  session?: LanguageServerSession;
}

/**
 * Where a question is answered: the shared mount (root its mount point, its jobs queued) or an
 * agent's own view (root the view's mount point, which always shows that agent's layer).
 */
interface Place {
  root: string;
  pool: ServerPool;
  view?: View;
}

/** Whether a question's jobs got the shared mount, and the agent whose job they last waited behind. */
interface Waited {
  started: boolean;
  behind?: string;
}

interface Baseline {
  key: string;
  status: 'fresh' | 'timeout' | 'error' | 'queued';
  diagnostics: Diagnostic[];
}

export class LintsService {
  private pool: ServerPool | undefined;
  private specs: ServerSpec[] | undefined;
  private readonly baselines = new Map<string, Baseline>();
  /** The servers of agents' own views, each rooted at its view. */
  private readonly viewPools = new Map<View, ServerPool>();
  private feed: FolderChanges | undefined;
  /** What each server was told (its documents, the folder's edits it has not heard of). */
  /** What each server was told (its documents, the folder's edits it has not heard of). */
  private readonly sync: ServerSync;
  /** The batches of document-only questions on the shared mount. */
  private readonly batches: Batches;

  constructor(
    private readonly shadow: Shadow,
    private readonly options: {
      idleMs?: number;
      log?: (line: string) => void;
      /**
       * Answer document-only questions in batches on the folder (default: yes, unless the
       * environment sets SHADOWFS_LINTS_ONE_AT_A_TIME=1, the old way, kept for the bench).
       */
      batch?: boolean;
      /**
       * Most warm servers per language a batch uses on the shared mount, at most one per core and
       * as free memory allows (default 2, or SHADOWFS_LINTS_SERVERS; see Batches). A further
       * server starts only for a batch with more than one question queued.
       */
      servers?: number;
    } = {},
  ) {
    this.sync = new ServerSync(
      shadow,
      () => this.servers().specs,
      () => this.absorbFolderChanges(),
    );
    this.batches = new Batches(shadow, {
      firstPool: () => this.servers().pool,
      newPool: () => this.newPool(this.root),
      servers: () => this.options.servers,
    });
  }

  private get batching(): boolean {
    return this.options.batch ?? process.env.SHADOWFS_LINTS_ONE_AT_A_TIME !== '1';
  }

  private get root(): string {
    return this.shadow.mountPoint;
  }

  private newPool(root: string): ServerPool {
    return new ServerPool(root, {
      idleMs: this.options.idleMs,
      log: this.options.log,
      // Confined like a run: servers see the shadow, never write it, and cannot write the folder.
      // Of the folder itself they see its node_modules only, read-only (the folder's own
      // TypeScript, which tsserverPath picks, and servers installed there): the whole folder at
      // its real path, where nothing is masked, let a file importing a masked one by that path
      // quote it back in diagnostics and hovers (review).
      ...(platform.namespaces ? { confine: { readable: [path.join(this.shadow.folder, 'node_modules')] } } : {}),
    });
  }

  /**
   * Where `agent`'s questions are answered: its open view when it has one (servers of their own,
   * started there on first use), else the shared mount. The servers of views closed since are stopped.
   */
  private placeOf(agent: string): Place {
    void this.releaseClosedViews();
    const view = this.shadow.viewOf(agent);
    if (!view) return { root: this.root, pool: this.servers().pool };
    let pool = this.viewPools.get(view);
    if (!pool) {
      this.servers(); // the specs and the folder's change feed
      pool = this.newPool(view.mountPoint);
      this.viewPools.set(view, pool);
    }
    return { root: view.mountPoint, pool, view };
  }

  /** Stops the servers of views closed since (waits until they are gone). */
  async releaseClosedViews(): Promise<void> {
    const gone: ServerPool[] = [];
    for (const [v, pool] of this.viewPools) {
      if (v.open) continue;
      this.viewPools.delete(v);
      this.sync.forgetRoot(v.mountPoint);
      gone.push(pool);
    }
    await Promise.all(gone.map((p) => p.dispose()));
  }

  private servers(): { pool: ServerPool; specs: ServerSpec[] } {
    if (!this.pool) this.pool = this.newPool(this.root);
    if (!this.feed) this.feed = new FolderChanges(this.shadow);
    if (!this.specs) {
      // The folder's own config first, then the daemon-wide one, then the built-in servers.
      try {
        const user = userServerConfigFile();
        this.specs = [
          ...loadServerConfig(this.shadow.folder),
          ...loadServerConfigFile(user, path.dirname(user)),
          // Programs from the folder itself (its own TypeScript) or from shadowfs: never from a layer.
          ...builtinServers(this.shadow.folder),
        ];
      } catch (err) {
        if (err instanceof LspConfigError) throw new ShadowError('INVALID_ARGUMENT', err.message);
        throw err;
      }
    }
    return { pool: this.pool, specs: this.specs };
  }

  /** The language servers running for this shadow. */
  runningServers(): Array<{ id: string; pid: number }> {
    return [this.pool, ...this.batches.pools(), ...this.viewPools.values()]
      .flatMap((p) => p?.running() ?? [])
      .map((s) => ({ id: s.spec.id, pid: s.pid }));
  }

  async dispose(): Promise<void> {
    const pools = [this.pool, ...this.batches.takePools(), ...this.viewPools.values()];
    this.pool = undefined;
    this.viewPools.clear();
    this.sync.clear();
    this.feed?.dispose();
    this.feed = undefined;
    await Promise.all(pools.map(async (p) => p?.dispose()));
  }

  async lints(p: LintsParams): Promise<LintsResult> {
    const started = Date.now();
    const deadline = started + (p.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const layer = this.shadow.layer(p.agent);
    const edited: string[] = [];
    for (const e of p.edits ?? []) {
      const rel = normalizeRelPath(e.path);
      if ((e.content === undefined) === (e.edits === undefined)) {
        throw new ShadowError('INVALID_ARGUMENT', `the edit of ${rel} gives neither or both of "content" and "edits": give one`);
      }
      const next = e.content ?? applyEdits((await layer.readFile(rel)).toString('utf8'), e.edits ?? []);
      await layer.write(rel, next);
      edited.push(rel);
    }
    let targets = p.paths?.map((x) => normalizeRelPath(x)) ?? edited;
    if (targets.length === 0) {
      targets = (await layer.changes()).filter((c) => c.type === 'file' && c.kind !== 'deleted').map((c) => c.path);
    }
    targets = [...new Set(targets)];
    // A file named outright must be there (an edited file is, and a changed one may be a deletion;
    // one the agent's mask hides is not: then not even the folder's pass reads it);
    // an agent without a layer yet sees the folder (its check would make the layer anyway).
    if (p.paths?.length) await this.shadow.createLayer(p.agent);
    for (const rel of p.paths?.length ? targets : []) {
      await layer.stat(rel).catch((err: unknown) => {
        if (err instanceof ShadowError && err.code === 'NOT_FOUND')
          throw new ShadowError('NOT_FOUND', `${rel}: no such file in agent ${p.agent}'s shadow`);
        throw err;
      });
    }
    const { specs } = this.servers();
    const place = this.placeOf(p.agent);
    this.absorbFolderChanges();
    const files = new Map<string, FileLints>();
    // Whether a check ever got the shared mount, and whose job it waited behind if not.
    const wait: Waited = { started: false };
    const supported: Array<{ rel: string; spec: ServerSpec; languageId: string }> = [];
    for (const rel of targets) {
      const m = serverFor(specs, rel);
      if (!m) files.set(rel, { path: rel, status: 'unsupported', introduced: [], existing: [] });
      else supported.push({ rel, spec: m.spec, languageId: m.languageId });
    }
    // The folder's own diagnostics first (cached until its file changes), then the agent's.
    const baselines = new Map<string, Baseline & { cached: boolean }>();
    const missing = supported.filter((t) => {
      const b = this.baselines.get(t.rel);
      if (b && b.key === this.folderKey(t.rel) && b.status === 'fresh') {
        baselines.set(t.rel, { ...b, cached: true });
        return false;
      }
      return true;
    });
    if (missing.length) {
      // From a view, the folder's check (on the shared mount) is not waited for: taken only if
      // the mount is free now, else given up at once (its baseline says `queued`).
      const giveUp = new AbortController();
      let gaveUp = false;
      const shared: Place = { root: this.root, pool: this.servers().pool };
      const got = await this.queued(deadline, (signal) =>
        this.shadow.withFolder(
          () => {
            wait.started = true;
            return this.check(missing, deadline, shared);
          },
          {
            signal: place.view ? AbortSignal.any([signal, giveUp.signal]) : signal,
            timeout: remaining(deadline),
            onWait: (a) => {
              wait.behind = a;
              if (place.view) {
                gaveUp = true;
                giveUp.abort();
              }
            },
          },
        ),
      );
      for (const t of missing) {
        const r = got?.get(t.rel);
        const b: Baseline = {
          key: this.folderKey(t.rel),
          status: gaveUp ? 'queued' : r?.status === 'fresh' ? 'fresh' : r?.status === 'error' ? 'error' : 'timeout',
          diagnostics: r?.diagnostics ?? [],
        };
        if (b.status === 'fresh') this.baselines.set(t.rel, b);
        baselines.set(t.rel, { ...b, cached: false });
      }
    }
    // From here the agent's own job decides (unless the folder's check used up the time).
    if (remaining(deadline) > 0) wait.started = false;
    const answer = async (where: Place = place, overlay?: Overlay): Promise<void> => {
      wait.started = true;
      const checked = await this.check(supported, deadline, where, overlay);
      for (const t of supported) {
        const r = checked.get(t.rel)!;
        const base = baselines.get(t.rel);
        const split =
          base && base.status === 'fresh' ? splitByBaseline(r.diagnostics, base.diagnostics) : { introduced: r.diagnostics, existing: [] };
        const out: FileLints = {
          path: t.rel,
          status: r.status,
          server: t.spec.id,
          ...(r.version === undefined ? {} : { version: r.version }),
          ...(r.error === undefined ? {} : { error: r.error }),
          introduced: r.status === 'fresh' ? split.introduced : [],
          existing: r.status === 'fresh' ? split.existing : [],
          baseline: base === undefined ? 'none' : base.cached ? 'cached' : base.status,
        };
        if (p.quickFixes && r.status === 'fresh' && r.session && out.introduced.length) {
          out.quickFixes = await this.quickFixes(r.session, t.rel, out.introduced, deadline);
        }
        files.set(t.rel, out);
      }
    };
    // In its own view the agent's check runs at once; on the shared mount it is a job in the queue:
    // one of a batch on the folder when every file its layer changes is a document the server
    // holds, else a job of its own with its layer active.
    const overlay = !place.view && this.batching && supported.length ? await this.overlayOf(p.agent, supported) : undefined;
    const now = place.view
      ? await this.queued(deadline, async () => answer().then(() => true))
      : overlay
        ? await this.queued(deadline, (signal) =>
            this.batches
              .ask({
                spec: supported[0].spec,
                run: (pool) => answer({ root: this.root, pool }, overlay),
                started: () => (wait.started = true),
                onWait: (a) => (wait.behind = a),
                signal,
                deadline,
              })
              .then(() => true),
          )
        : await this.queued(deadline, (signal) =>
            this.shadow.withLayer(p.agent, () => answer(), { signal, timeout: remaining(deadline), onWait: (a) => (wait.behind = a) }),
          );
    if (now === undefined) {
      // Never got the mount: `queued` (and behind whom), not a server's timeout.
      const late: Pick<FileLints, 'status' | 'waitingFor'> =
        wait.started || wait.behind === undefined || place.view ? { status: 'timeout' } : { status: 'queued', waitingFor: wait.behind };
      for (const t of supported)
        if (!files.has(t.rel)) files.set(t.rel, { path: t.rel, ...late, server: t.spec.id, introduced: [], existing: [] });
    }
    return { files: targets.map((rel) => files.get(rel)!), ms: Date.now() - started };
  }

  /** definition / references / hover at a position, as the agent's layer shows the file. */
  async at(
    kind: 'definition' | 'references' | 'hover',
    p: { agent: string; path: string; position: Position; timeoutMs?: number },
  ): Promise<{
    status: 'fresh' | 'timeout' | 'queued' | 'unsupported' | 'error';
    /** For `queued`: whose job held the shared mount while this question waited. */
    waitingFor?: string;
    error?: string;
    locations: Array<{ path: string; range: Range }>;
    contents: string;
    range?: Range;
  }> {
    const deadline = Date.now() + (p.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const rel = normalizeRelPath(p.path);
    const { specs } = this.servers();
    const m = serverFor(specs, rel);
    if (!m) return { status: 'unsupported', locations: [], contents: '' };
    const place = this.placeOf(p.agent);
    const wait: Waited = { started: false };
    const answer = async () => {
      wait.started = true;
      const session = await this.sync.session(m.spec, place.pool, place.root);
      await this.sync.syncWorld(session);
      await this.sync.syncDocument(session, rel, m.languageId);
      const ms = remaining(deadline);
      if (kind === 'hover') return { h: await session.hover(rel, p.position, ms) };
      return {
        locs: kind === 'definition' ? await session.definition(rel, p.position, ms) : await session.references(rel, p.position, ms),
      };
    };
    // In its own view at once; on the shared mount, a job in the queue.
    const r = place.view
      ? await this.queued(deadline, answer)
      : await this.queued(deadline, (signal) =>
          this.shadow.withLayer(p.agent, answer, { signal, timeout: remaining(deadline), onWait: (a) => (wait.behind = a) }),
        );
    if (r === undefined) {
      // Never got the mount: `queued` (and behind whom), as lints say it, not a server's timeout.
      if (!wait.started && wait.behind !== undefined) return { status: 'queued', waitingFor: wait.behind, locations: [], contents: '' };
      return { status: 'timeout', locations: [], contents: '' };
    }
    if (r.h) {
      const h = r.h;
      return {
        status: h.status,
        ...(h.error ? { error: h.error } : {}),
        locations: [],
        contents: h.value?.text ?? '',
        ...(h.value?.range ? { range: h.value.range } : {}),
      };
    }
    const l = r.locs!;
    return {
      status: l.status,
      ...(l.error ? { error: l.error } : {}),
      locations: (l.value ?? []).map((x) => ({ path: x.relPath, range: x.range })),
      contents: '',
    };
  }

  /** Runs a scheduler job unless the deadline passes first; undefined when it did (or it timed out queued). */
  private async queued<T>(deadline: number, job: (signal: AbortSignal) => Promise<T>): Promise<T | undefined> {
    if (remaining(deadline) <= 0) return undefined;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), remaining(deadline));
    try {
      return await job(ac.signal);
    } catch (err) {
      if (err instanceof ShadowError && (err.code === 'TIMEOUT' || err.code === 'ABORTED')) return undefined;
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Hands what changed in the folder since the last question to every server's state, and drops
   * the cached baselines: an edit anywhere (a type in another file, a config) can change a
   * file's own diagnostics. Git's own files are ignored. Synchronous, so callers never race.
   */
  private absorbFolderChanges(): void {
    const d = this.feed?.take();
    if (!d) return;
    const paths = d.paths.filter((p) => p !== '.git' && !p.startsWith('.git/'));
    if (!d.overflow && paths.length === 0) return;
    this.baselines.clear();
    this.sync.folderChanged(paths, d.overflow);
  }

  /** Checks files on their servers with whatever `place` shows now (on the shared mount: run inside a job). */
  private async check(
    targets: Array<{ rel: string; spec: ServerSpec; languageId: string }>,
    deadline: number,
    place: Place,
    overlay?: Overlay,
  ): Promise<Map<string, Checked>> {
    const out = new Map<string, Checked>();
    const waits: Array<Promise<void>> = [];
    const synced = new Set<LanguageServerSession>();
    for (const t of targets) {
      let session: LanguageServerSession;
      try {
        session = await this.sync.session(t.spec, place.pool, place.root);
        if (!synced.has(session)) {
          if (overlay) await this.sync.syncOverlay(session, overlay, this.batches.epoch);
          else await this.sync.syncWorld(session);
          synced.add(session);
        }
      } catch (err) {
        out.set(t.rel, { status: 'error', error: `the ${t.spec.id} language server: ${(err as Error).message}`, diagnostics: [] });
        continue;
      }
      let version: number;
      try {
        const mine = overlay?.get(t.rel);
        version = mine ? session.sync(t.rel, mine.languageId, mine.text) : await this.sync.syncDocument(session, t.rel, t.languageId);
      } catch (err) {
        out.set(t.rel, { status: 'error', error: (err as Error).message, diagnostics: [] });
        continue;
      }
      waits.push(
        session.diagnostics(t.rel, version, remaining(deadline)).then(
          (r) =>
            void out.set(t.rel, {
              status: r.status,
              ...(r.error ? { error: r.error } : {}),
              version,
              diagnostics: r.diagnostics.map(toDiagnostic),
              session,
            }),
          (err: unknown) => void out.set(t.rel, { status: 'error', error: (err as Error).message, version, diagnostics: [] }),
        ),
      );
    }
    await Promise.all(waits);
    return out;
  }

  /**
   * The agent's text of every file its layer changes, when the server can be given all of them
   * as documents while the mount shows the folder: every change is a modified regular file that
   * the targets' one server handles (no file added, deleted, renamed or of another kind, which
   * the server would find on disk; no masked paths), each small enough to hand over. Otherwise
   * undefined: the question needs the agent's layer on the mount.
   */
  private async overlayOf(agent: string, targets: Array<{ rel: string; spec: ServerSpec }>): Promise<Overlay | undefined> {
    const spec = targets[0].spec;
    if (targets.some((t) => t.spec.id !== spec.id)) return undefined;
    if (this.shadow.maskOf(agent).globs.length) return undefined;
    const { specs } = this.servers();
    const layer = this.shadow.layer(agent);
    const changes = await layer.changes();
    if (changes.length === 0) return undefined;
    const out: Overlay = new Map();
    for (const c of changes) {
      if (c.type !== 'file' || c.kind !== 'modified') return undefined;
      const m = serverFor(specs, c.path);
      if (!m || m.spec.id !== spec.id) return undefined;
      const st = await layer.stat(c.path);
      if (st.size > MAX_DOCUMENT_BYTES) return undefined;
      out.set(c.path, { text: (await layer.readFile(c.path)).toString('utf8'), languageId: m.languageId });
    }
    return out;
  }

  private async quickFixes(
    session: LanguageServerSession,
    rel: string,
    introduced: Diagnostic[],
    deadline: number,
  ): Promise<NonNullable<FileLints['quickFixes']>> {
    const out: NonNullable<FileLints['quickFixes']> = [];
    for (const [i, d] of introduced.slice(0, MAX_QUICK_FIXES).entries()) {
      const r = await session.codeActions(rel, d.range, [d as LspDiagnostic], remaining(deadline));
      if (r.status !== 'fresh') continue;
      for (const a of r.value ?? []) {
        // Only edits: a command would have to run in the server.
        const edits: TextEditOut[] = a.edits.flatMap((f) => f.edits.map((e) => ({ path: f.relPath, range: e.range, newText: e.newText })));
        if (edits.length) out.push({ title: a.title, diagnostic: i, edits });
      }
    }
    return out;
  }

  /** What identifies the folder's version of a file for the baseline cache. */
  private folderKey(rel: string): string {
    try {
      const st = fs.statSync(path.join(this.shadow.folder, rel), { bigint: true });
      return `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    } catch {
      return 'absent';
    }
  }
}

function remaining(deadline: number): number {
  return Math.max(0, deadline - Date.now());
}
