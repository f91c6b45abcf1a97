// The lints service of one shadow: what warm language servers, running with the shadow's
// mount point as their root, say about an agent's change. Each question runs as a scheduler job
// with the agent's layer active on the shared mount (so the servers read the agent's files, and
// the folder's node_modules, live), after telling every server which files differ from what it
// saw last; the folder's own diagnostics (the baseline) come from a job with no layer active, and
// are cached until something in the folder changes. A question whose agent's layer changes only
// files one server holds as documents (modified, not added or deleted) needs no layer on the
// mount: such questions are answered in batches, one folder job for many, each agent's text handed
// to the server as documents over the folder's (see overlayOf, inBatch). Edits made in the folder itself (which FUSE
// cannot signal to programs inside the mount) reach the servers through FolderChanges. Answers are fresh or marked otherwise: a server
// that does not answer for the exact document version in time gives `timeout`, never an empty
// list. An agent with a view of its own (Shadow.openView) is checked there instead, on servers
// rooted at the view, without queueing at all: only a folder baseline not cached yet needs the
// shared mount, and it is taken only when the mount is free at once (else the answer says its
// baseline is `queued`).
import * as fs from 'fs';
import * as os from 'os';
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

type LintsParams = CheckedParamsOf<'lints'>;
type LintsResult = ResultOf<'lints'>;
type FileLints = LintsResult['files'][number];
type Position = { line: number; character: number };
type Range = { start: Position; end: Position };
type TextEditOut = { path: string; range: Range; newText: string };

const DEFAULT_TIMEOUT_MS = 10_000;
const MAX_QUICK_FIXES = 20;
/** More folder edits than this between two questions (a checkout, an install): restart the server rather than re-open each. */
const MAX_FOLDER_SYNC = 200;
/** How long one batch of document-only questions may hold the shared mount before other agents' jobs get a turn. */
const BATCH_SLICE_MS = 2_000;
/** Free memory a further warm server for batches needs (tsserver on a large project takes a few hundred MiB). */
const SERVER_MEMORY = 1024 * 1024 * 1024;

/** The agent's own text of every file its layer changes, when all of them are documents one server holds (see overlayOf). */
type Overlay = Map<string, { text: string; languageId: string }>;

/** A document-only question waiting for its turn in a batch on the shared mount. */
interface BatchItem {
  spec: ServerSpec;
  run: (place: Place) => Promise<void>;
  started: () => void;
  onWait: (agent: string) => void;
  resolve: () => void;
  reject: (err: unknown) => void;
  signal: AbortSignal;
  /** When its caller stops waiting: a batch never holds the mount past its callers' latest deadline. */
  deadline: number;
}

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

/** Applies LSP range edits (line/UTF-16 character positions) to a text. */
export function applyEdits(text: string, edits: ReadonlyArray<{ range: Range; newText: string }>): string {
  const lineStarts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) lineStarts.push(i + 1);
  const offset = (p: Position): number => {
    if (p.line >= lineStarts.length) return text.length;
    const start = lineStarts[p.line];
    const end = p.line + 1 < lineStarts.length ? lineStarts[p.line + 1] - 1 : text.length;
    return Math.min(start + p.character, end);
  };
  const resolved = edits.map((e) => ({ from: offset(e.range.start), to: offset(e.range.end), text: e.newText }));
  for (const r of resolved) if (r.to < r.from) throw new ShadowError('INVALID_ARGUMENT', 'an edit range ends before it starts');
  // Apply from the end so earlier offsets stay valid; overlapping edits are refused.
  resolved.sort((a, b) => b.from - a.from || b.to - a.to);
  for (let i = 1; i < resolved.length; i++) {
    if (resolved[i].to > resolved[i - 1].from) throw new ShadowError('INVALID_ARGUMENT', 'edit ranges overlap');
  }
  let out = text;
  for (const r of resolved) out = out.slice(0, r.from) + r.text + out.slice(r.to);
  return out;
}

function toDiagnostic(d: LspDiagnostic): Diagnostic {
  const out: Diagnostic = {
    range: { start: { ...d.range.start }, end: { ...d.range.end } },
    message: typeof d.message === 'string' ? d.message : d.message.value,
  };
  if (d.severity !== undefined) out.severity = d.severity;
  if (d.code !== undefined) out.code = d.code;
  if (d.source !== undefined) out.source = d.source;
  return out;
}

function identity(d: Diagnostic): string {
  return `${d.severity ?? ''}|${String(d.code ?? '')}|${d.source ?? ''}|${d.message}`;
}

/** Splits diagnostics into those the baseline does not have (as many times) and those it has. */
export function splitByBaseline(now: Diagnostic[], baseline: Diagnostic[]): { introduced: Diagnostic[]; existing: Diagnostic[] } {
  const left = new Map<string, number>();
  for (const d of baseline) left.set(identity(d), (left.get(identity(d)) ?? 0) + 1);
  const introduced: Diagnostic[] = [];
  const existing: Diagnostic[] = [];
  for (const d of now) {
    const k = identity(d);
    const n = left.get(k) ?? 0;
    if (n > 0) {
      left.set(k, n - 1);
      existing.push(d);
    } else introduced.push(d);
  }
  return { introduced, existing };
}

/** Documents larger than this are not handed to a language server. */
const MAX_DOCUMENT_BYTES = 64 * 1024 * 1024;

/**
 * The text of `abs` (`rel` in the shadow), only if it is a regular file: opened without blocking
 * and checked on the open descriptor (no race with a swap), so a FIFO, socket or device in a
 * layer is an error here, never a read that holds a libuv thread forever.
 */
async function readRegularText(abs: string, rel: string): Promise<string> {
  let fh: fs.promises.FileHandle;
  try {
    fh = await fs.promises.open(abs, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      throw new ShadowError('NOT_FOUND', `${rel}: no such file in this view of the shadow`);
    throw err;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile())
      throw new ShadowError(
        'INVALID_ARGUMENT',
        `${rel} is not a regular file (a fifo, socket or device, or a link to one): only regular files are read and checked`,
      );
    if (st.size > MAX_DOCUMENT_BYTES)
      throw new ShadowError(
        'FILE_TOO_LARGE',
        `${rel} holds ${st.size} bytes, more than the ${MAX_DOCUMENT_BYTES} a document handed to a language server may hold`,
      );
    return await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
}

export class LintsService {
  private pool: ServerPool | undefined;
  private specs: ServerSpec[] | undefined;
  private readonly baselines = new Map<string, Baseline>();
  /**
   * Per server: the documents it has open, the paths it was last told differ from the folder,
   * the folder's own edits it has not been told of, and whether it must start over (too many of
   * those, or some not known).
   */
  private readonly seen = new Map<
    LanguageServerSession,
    {
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
  >();
  /** Further servers on the shared mount, used only by batches (see options.servers). */
  private extraPools: ServerPool[] = [];
  private readonly batchQueue: BatchItem[] = [];
  private batchJob: Promise<void> | undefined;
  /** The questions the running batch has taken and not answered yet. */
  private readonly inFlight = new Set<BatchItem>();
  /** Ends the running batch's job early: every question it serves was cancelled. */
  private batchAbort: AbortController | undefined;
  /** Counts batch jobs: a server synced in this one needs no world sync before its next question. */
  private batchEpoch = 0;
  /** The servers of agents' own views, each rooted at its view. */
  private readonly viewPools = new Map<View, ServerPool>();
  private feed: FolderChanges | undefined;

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
       * as free memory allows (default 1, or SHADOWFS_LINTS_SERVERS). More is not the default:
       * typescript-language-server has tsserver check every open document again some 300 ms
       * after each edit, which a server answering questions back to back never lets happen but
       * two servers sharing two busy cores did, at twice the CPU per lint (docs/lints.md).
       */
      servers?: number;
    } = {},
  ) {}

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
      ...(platform.namespaces ? { confine: { folder: this.shadow.folder } } : {}),
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
      for (const s of [...this.seen.keys()]) if (this.seen.get(s)!.root === v.mountPoint) this.seen.delete(s);
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
    return [this.pool, ...this.extraPools, ...this.viewPools.values()]
      .flatMap((p) => p?.running() ?? [])
      .map((s) => ({ id: s.spec.id, pid: s.pid }));
  }

  async dispose(): Promise<void> {
    const pools = [this.pool, ...this.extraPools, ...this.viewPools.values()];
    this.pool = undefined;
    this.extraPools = [];
    this.viewPools.clear();
    this.seen.clear();
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
            this.inBatch({
              spec: supported[0].spec,
              run: (where) => answer(where, overlay),
              started: () => (wait.started = true),
              onWait: (a) => (wait.behind = a),
              signal,
              deadline,
            }).then(() => true),
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
      const session = await this.session(m.spec, place);
      await this.syncWorld(session);
      await this.syncDocument(session, rel, m.languageId);
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
    for (const state of this.seen.values()) {
      if (d.overflow) state.stale = true;
      for (const p of paths) state.folder.add(p);
      if (state.folder.size > MAX_FOLDER_SYNC) state.stale = true;
    }
  }

  private async session(spec: ServerSpec, place: Place): Promise<LanguageServerSession> {
    const { pool } = place;
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
        root: place.root,
        open: new Map(),
        dirty: new Set(),
        folder: new Set(),
        stale: false,
        overlaid: new Set(),
        batch: -1,
      });
    return s;
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
        session = await this.session(t.spec, place);
        if (!synced.has(session)) {
          if (overlay) await this.syncOverlay(session, overlay);
          else await this.syncWorld(session);
          synced.add(session);
        }
      } catch (err) {
        out.set(t.rel, { status: 'error', error: `the ${t.spec.id} language server: ${(err as Error).message}`, diagnostics: [] });
        continue;
      }
      let version: number;
      try {
        const mine = overlay?.get(t.rel);
        version = mine ? session.sync(t.rel, mine.languageId, mine.text) : await this.syncDocument(session, t.rel, t.languageId);
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
   * Tells a server which files may differ from what it read before: every path any layer of the
   * shadow changes (whichever was active when the server last read them), those it was told of
   * last time, and those edited in the folder since; the ones it handles are (re)opened with the
   * content the mount shows now.
   */
  private async syncWorld(session: LanguageServerSession): Promise<void> {
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
    for (const rel of paths) {
      const here = fs.existsSync(path.join(root, rel));
      const inFolder = fs.existsSync(path.join(this.shadow.folder, rel));
      changes.push({ relPath: rel, type: !here ? 'deleted' : inFolder ? 'changed' : 'created' });
    }
    session.filesChanged(changes);
    // Watch events alone do not make every server re-read a file (tsserver, for one, trusts its
    // own watchers, which a layer switch does not wake): each changed file this server handles is
    // opened as a document with the content the mount shows now, so what it sees is exactly the
    // active layer. Files that are gone now are closed.
    const { specs } = this.servers();
    for (const rel of paths) {
      const m = serverFor(specs, rel);
      if (!m || m.spec.id !== state.spec.id) continue;
      if (fs.existsSync(path.join(root, rel))) await this.syncDocument(session, rel, m.languageId);
      else if (state.open.has(rel)) {
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
   * Inside a batch (the mount shows the folder): brings the server to the folder once per batch
   * (and again after edits in the folder), then gives it the agent's own text of every file its
   * layer changes and the folder's text of those the previous question had overlaid. Every open
   * document is marked so the next sync of a target is a new version: diagnostics for it were
   * computed after these changes.
   */
  private async syncOverlay(session: LanguageServerSession, overlay: Overlay): Promise<void> {
    const state = this.seen.get(session)!;
    if (state.batch !== this.batchEpoch || state.folder.size > 0) {
      await this.syncWorld(session);
      state.batch = this.batchEpoch;
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

  /**
   * Queues a document-only question for the next batch: one folder job on the shared mount (the
   * mount shows the folder, no layer switch) answers the questions queued, one after another on
   * each warm server, several servers at once, until the queue is empty or its time slice ends.
   */
  private inBatch(item: Omit<BatchItem, 'resolve' | 'reject'>): Promise<void> {
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
    const next = (): BatchItem | undefined => {
      if (signal.aborted || Date.now() >= slice) return undefined;
      const i = this.batchQueue.findIndex((it) => it.deadline <= end);
      return i < 0 ? undefined : this.batchQueue[i];
    };
    const pools = this.sharedPools(this.batchQueue.length);
    await Promise.all(
      pools.map(async (pool) => {
        const place: Place = { root: this.root, pool };
        for (let it = next(); it; it = next()) {
          // A server not started yet starts before it takes a question, so none waits for a cold
          // start another could spare it; a server that never finishes starting holds the batch
          // only until the mount is released.
          await Promise.race([pool.get(it.spec).catch(() => undefined), released]);
          const i = signal.aborted ? -1 : this.batchQueue.indexOf(it);
          if (i < 0) continue;
          this.batchQueue.splice(i, 1);
          this.inFlight.add(it);
          it.started();
          try {
            await Promise.race([it.run(place), released]);
            if (signal.aborted) throw new ShadowError('TIMEOUT', 'the batch ran out of time and released the shared mount');
            it.resolve();
          } catch (err) {
            it.reject(err);
          } finally {
            this.inFlight.delete(it);
          }
        }
      }),
    );
  }

  /**
   * The shared mount's servers a batch of `queued` questions uses: the first, plus as many more
   * as options.servers allows while free memory allows one more server (started on a batch's
   * first use, stopped when idle like the first).
   */
  private sharedPools(queued: number): ServerPool[] {
    const first = this.servers().pool;
    const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
    const most = Math.min(cores, Math.max(1, this.options.servers ?? (Number(process.env.SHADOWFS_LINTS_SERVERS) || 1)));
    while (this.extraPools.length + 1 < Math.min(most, queued) && os.freemem() > SERVER_MEMORY)
      this.extraPools.push(this.newPool(this.root));
    return [first, ...this.extraPools].slice(0, Math.max(1, Math.min(most, queued)));
  }

  private async syncDocument(session: LanguageServerSession, rel: string, languageId: string): Promise<number> {
    const state = this.seen.get(session)!;
    const text = await readRegularText(path.join(state.root, rel), rel);
    state.open.set(rel, languageId);
    return session.sync(rel, languageId, text);
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
