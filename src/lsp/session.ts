// One running language server, spoken to over stdio, with answers that are fresh or say why not:
// the session starts the server (server-process.ts) and speaks to it over one connection, keeps
// the documents it has sent and their versions, answers diagnostics for a version only when they
// are proven computed from it (fresh-diagnostics.ts says how, per server) and makes the other
// requests (definition, references, hover, code actions) under a deadline. What it answers with is
// in answers.ts; what it tells the server about itself, in capabilities.ts.

import * as cp from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { pathToFileURL, fileURLToPath } from 'url';
import { CancellationTokenSource, createMessageConnection, StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node';
import type { MessageConnection } from 'vscode-jsonrpc/node';
import { platform } from '../platform';
import type {
  CodeAction,
  Command,
  Diagnostic,
  Hover,
  InitializeResult,
  Location,
  LocationLink,
  MarkedString,
  MarkupContent,
  Position,
  PublishDiagnosticsParams,
  Range,
  ServerCapabilities,
  WorkspaceEdit,
} from 'vscode-languageserver-protocol';
import type { Answer, AnswerStatus, CodeActionAnswerItem, DiagnosticsAnswer, FileEdits, Place } from './answers';
import { Deadline } from './answers';
import { answerServerRequests, clientCapabilities } from './capabilities';
import { PublishedDiagnostics, pullDiagnostics, tsserverDiagnostics } from './fresh-diagnostics';
import { brokenPipe, startConfined, startDirect } from './server-process';
import type { ServerSpec } from './servers';

export type FileChangeType = 'created' | 'changed' | 'deleted';

export interface SessionOptions {
  /** How long initialize may take before start() fails. Default 60 s. */
  initializeTimeoutMs?: number;
  /** How long dispose() waits for a clean shutdown before killing. Default 2 s. */
  shutdownGraceMs?: number;
  /** Receives the server's stderr and log messages (default: dropped). */
  log?: (line: string) => void;
  /**
   * Linux: start the server confined like a run (src/run/launcher.ts), seeing the shadow (its
   * root) and the `readable` directories (those that exist), read-only at their own paths,
   * writing nothing but its private /tmp. Elsewhere, or when unset, it is started directly.
   */
  confine?: { readable: string[] };
  /** Aborting it ends a start() still waiting for initialize at once (the server is stopped). */
  signal?: AbortSignal;
}

interface OpenDoc {
  uri: string;
  languageId: string;
  version: number;
  text: string;
  /** Set by filesChanged: the next sync re-sends the text under a new version even if unchanged. */
  stale: boolean;
}

const WATCH_TYPES: Record<FileChangeType, number> = { created: 1, changed: 2, deleted: 3 };

function hoverText(contents: MarkupContent | MarkedString | MarkedString[]): string {
  const one = (c: MarkedString | MarkupContent): string => (typeof c === 'string' ? c : c.value);
  return Array.isArray(contents) ? contents.map(one).join('\n\n') : one(contents);
}

export class LanguageServerSession {
  readonly spec: ServerSpec;
  readonly root: string;
  readonly pid: number;
  capabilities: ServerCapabilities = {};
  private readonly proc: cp.ChildProcess;
  private readonly conn: MessageConnection;
  private readonly docs = new Map<string, OpenDoc>();
  private readonly publishes = new PublishedDiagnostics();
  private readonly exitListeners: Array<(info: { code: number | null; signal: string | null }) => void> = [];
  private readonly log: (line: string) => void;
  private exitInfo: { code: number | null; signal: string | null } | undefined;
  private readonly exitPromise: Promise<void>;
  private disposing = false;

  private constructor(spec: ServerSpec, root: string, opts: SessionOptions) {
    this.spec = spec;
    this.root = root;
    this.log = opts.log ?? (() => undefined);
    // Its own process group, so whatever the server starts (tsserver, workers) goes with it.
    this.proc = opts.confine ? startConfined(spec, root, opts.confine.readable, this.log) : startDirect(spec, root);
    this.pid = this.proc.pid ?? -1;
    this.exitPromise = new Promise((resolve) => {
      const onGone = (code: number | null, signal: string | null): void => {
        if (this.exitInfo) return;
        this.exitInfo = { code, signal };
        this.killGroup();
        this.publishes.failAll(`the language server '${spec.id}' exited (code ${code}, signal ${signal})`);
        this.conn.dispose();
        for (const cb of this.exitListeners) cb(this.exitInfo);
        resolve();
      };
      this.proc.on('exit', onGone);
      this.proc.on('error', (err) => {
        this.log(`[${spec.id}] cannot run ${spec.command}: ${err.message}`);
        onGone(null, null);
      });
    });
    this.proc.stderr?.on('data', (d: Buffer) => this.log(`[${spec.id}] ${d.toString().trimEnd()}`));
    const stdout = this.proc.stdout;
    const stdin = this.proc.stdin;
    if (!stdout || !stdin) throw new Error('no stdio pipes to the language server');
    stdin.on('error', () => undefined); // a dead server's pipe: reported through 'exit'
    this.conn = createMessageConnection(new StreamMessageReader(stdout), new StreamMessageWriter(stdin));
    this.conn.onError(([err]) => this.log(`[${spec.id}] connection error: ${err.message}`));
    this.conn.onNotification('textDocument/publishDiagnostics', (p: PublishDiagnosticsParams) => this.onPublish(p));
    this.conn.onNotification('window/logMessage', (p: { message: string }) => this.log(`[${spec.id}] ${p.message}`));
    this.conn.onNotification(() => undefined);
    answerServerRequests(this.conn, spec, root);
    this.conn.listen();
  }

  /** Starts the server with `rootDir` as its workspace root and completes the initialize handshake. */
  static async start(spec: ServerSpec, rootDir: string, opts: SessionOptions = {}): Promise<LanguageServerSession> {
    const root = fs.realpathSync(rootDir);
    const s = new LanguageServerSession(spec, root, opts);
    const rootUri = pathToFileURL(root).href;
    const deadline = new Deadline(opts.initializeTimeoutMs ?? 60_000);
    try {
      const init = s.conn.sendRequest<InitializeResult>('initialize', {
        // A confined server is in a PID namespace of its own where our pid means nothing (it would
        // find no such process and exit): null tells it not to watch its parent.
        processId: opts.confine ? null : process.pid,
        clientInfo: { name: 'shadowfs' },
        rootUri,
        rootPath: root,
        workspaceFolders: [{ uri: rootUri, name: path.basename(root) }],
        capabilities: clientCapabilities(),
        initializationOptions: spec.initializationOptions,
      });
      const aborted = new Promise<'aborted'>((resolve) => {
        if (opts.signal?.aborted) resolve('aborted');
        else opts.signal?.addEventListener('abort', () => resolve('aborted'), { once: true });
      });
      const r = await Promise.race([init, deadline.done, s.exitPromise.then(() => 'exited' as const), aborted]);
      if (r === 'timeout') throw new Error(`the language server '${spec.id}' did not answer initialize in time`);
      if (r === 'aborted') throw new Error(`the language server '${spec.id}' was stopped while it started`);
      if (r === 'exited') throw new Error(`the language server '${spec.id}' exited during initialize (${JSON.stringify(s.exitInfo)})`);
      s.capabilities = r.capabilities;
      await s.conn.sendNotification('initialized', {});
      if (spec.settings !== undefined) await s.conn.sendNotification('workspace/didChangeConfiguration', { settings: spec.settings });
      return s;
    } catch (err) {
      await s.dispose();
      throw err;
    } finally {
      deadline.clear();
    }
  }

  get exited(): boolean {
    return this.exitInfo !== undefined;
  }

  onExit(cb: (info: { code: number | null; signal: string | null }) => void): void {
    if (this.exitInfo) cb(this.exitInfo);
    else this.exitListeners.push(cb);
  }

  private uriOf(relPath: string): string {
    return pathToFileURL(path.resolve(this.root, relPath)).href;
  }

  /** A server's uri back to a path relative to the root (absolute if outside). */
  relPathOf(uri: string): string {
    let abs: string;
    try {
      abs = fileURLToPath(uri);
    } catch {
      return uri;
    }
    const rel = path.relative(this.root, abs);
    return rel.startsWith('..') || path.isAbsolute(rel) ? abs : rel.split(path.sep).join('/');
  }

  /** Canonical key of a document: servers re-encode uris (e.g. %3A), so compare paths. */
  private keyOf(uri: string): string {
    try {
      return path.normalize(fileURLToPath(uri));
    } catch {
      return uri;
    }
  }

  /** The version last sent for relPath, or undefined if it is not open. */
  version(relPath: string): number | undefined {
    return this.docs.get(this.keyOf(this.uriOf(relPath)))?.version;
  }

  /**
   * Sends the text of relPath: didOpen (version 1) the first time, then didChange with the full
   * text and version+1. Unchanged text sends nothing and returns the same version (unless
   * filesChanged marked the document for a re-check). Returns the version now current.
   */
  sync(relPath: string, languageId: string, text: string): number {
    this.assertAlive();
    const uri = this.uriOf(relPath);
    const key = this.keyOf(uri);
    const doc = this.docs.get(key);
    if (!doc) {
      this.docs.set(key, { uri, languageId, version: 1, text, stale: false });
      this.notify('textDocument/didOpen', { textDocument: { uri, languageId, version: 1, text } });
      return 1;
    }
    if (doc.text === text && !doc.stale) return doc.version;
    doc.version += 1;
    doc.text = text;
    doc.stale = false;
    this.notify('textDocument/didChange', { textDocument: { uri, version: doc.version }, contentChanges: [{ text }] });
    this.publishes.supersede(key, doc.version);
    return doc.version;
  }

  close(relPath: string): void {
    const uri = this.uriOf(relPath);
    const key = this.keyOf(uri);
    const doc = this.docs.get(key);
    if (!doc) return;
    this.docs.delete(key);
    this.publishes.forget(key);
    this.publishes.supersede(key, Number.POSITIVE_INFINITY);
    if (!this.exited) this.notify('textDocument/didClose', { textDocument: { uri: doc.uri } });
  }

  /**
   * Tells the server that files changed on disk (workspace/didChangeWatchedFiles). Open
   * documents keep the text last synced: for an open document whose file changed on disk, the
   * caller re-syncs it with the new text. Every open document is also marked so that its next
   * sync — even with unchanged text — sends a new version: a dependency may have changed, and
   * only diagnostics for a version sent after this call can be proven to have seen it.
   */
  filesChanged(changes: Array<{ relPath: string; type: FileChangeType }>): void {
    this.assertAlive();
    if (changes.length === 0) return;
    this.notify('workspace/didChangeWatchedFiles', {
      changes: changes.map((c) => ({ uri: this.uriOf(c.relPath), type: WATCH_TYPES[c.type] })),
    });
    for (const doc of this.docs.values()) doc.stale = true;
  }

  /**
   * Marks every open document so that its next sync sends a new version even if its text is
   * unchanged: another document changed, and only diagnostics for a version sent after that can
   * be proven to have seen it.
   */
  recheckAll(): void {
    for (const doc of this.docs.values()) doc.stale = true;
  }

  /** Fresh diagnostics for `version` of relPath, or a timeout/error that says so (never a guess). */
  async diagnostics(relPath: string, version: number, timeoutMs: number): Promise<DiagnosticsAnswer> {
    const key = this.keyOf(this.uriOf(relPath));
    const fail = (status: AnswerStatus, error: string): DiagnosticsAnswer => ({ status, diagnostics: [], version, error });
    if (this.exitInfo) return fail('error', `the language server '${this.spec.id}' exited`);
    const doc = this.docs.get(key);
    if (!doc) return fail('error', `${relPath} is not open in the language server; sync it first`);
    if (version !== doc.version) return fail('error', `${relPath} is at version ${doc.version}, not ${version}`);
    const deadline = new Deadline(timeoutMs);
    try {
      let answer: Promise<DiagnosticsAnswer>;
      if (this.capabilities.diagnosticProvider) answer = pullDiagnostics(this.conn, doc.uri, version, (err) => this.describe(err));
      else if (this.spec.diagnosticsMode === 'tsserver')
        answer = tsserverDiagnostics(this.conn, doc.uri, version, (err) => this.describe(err));
      else answer = this.publishes.wait(key, version);
      const r = await Promise.race([answer, deadline.done]);
      if (r === 'timeout') {
        this.publishes.drop(key, version);
        return fail('timeout', `no diagnostics for version ${version} within ${timeoutMs} ms`);
      }
      // The document may have moved on while the server worked.
      if (r.status === 'fresh' && this.docs.get(key)?.version !== version) {
        return fail('error', `${relPath} changed to version ${this.docs.get(key)?.version} while diagnostics for ${version} were computed`);
      }
      return r;
    } finally {
      deadline.clear();
    }
  }

  private onPublish(p: PublishDiagnosticsParams): void {
    const key = this.keyOf(p.uri);
    const doc = this.docs.get(key);
    if (!doc) return;
    this.publishes.record(key, p);
  }

  /** A request with a deadline: the result, or a timeout/error; cancelled on timeout. */
  private async request<T, V>(
    method: string,
    params: unknown,
    timeoutMs: number,
    empty: V,
    map: (r: T) => V | Promise<V>,
  ): Promise<Answer<V>> {
    if (this.exitInfo) return { status: 'error', value: empty, error: `the language server '${this.spec.id}' exited` };
    const cts = new CancellationTokenSource();
    const deadline = new Deadline(timeoutMs);
    const exited = this.exitPromise.then(() => 'exited' as const);
    try {
      const r = await Promise.race([this.conn.sendRequest<T>(method, params, cts.token), deadline.done, exited]);
      if (r === 'timeout') {
        cts.cancel();
        return { status: 'timeout', value: empty, error: `${method}: no answer within ${timeoutMs} ms` };
      }
      if (r === 'exited') return { status: 'error', value: empty, error: `the language server '${this.spec.id}' exited` };
      return { status: 'fresh', value: await map(r) };
    } catch (err) {
      return { status: 'error', value: empty, error: await this.describe(err) };
    } finally {
      deadline.clear();
      cts.dispose();
    }
  }

  private toPlaces(r: Location | Location[] | LocationLink[] | null): Place[] {
    if (!r) return [];
    const list = Array.isArray(r) ? r : [r];
    return list.map((l) =>
      'targetUri' in l
        ? { relPath: this.relPathOf(l.targetUri), uri: l.targetUri, range: l.targetSelectionRange ?? l.targetRange }
        : { relPath: this.relPathOf(l.uri), uri: l.uri, range: l.range },
    );
  }

  definition(relPath: string, position: Position, timeoutMs: number): Promise<Answer<Place[]>> {
    return this.request(
      'textDocument/definition',
      { textDocument: { uri: this.uriOf(relPath) }, position },
      timeoutMs,
      [],
      (r: Location | Location[] | LocationLink[] | null) => this.toPlaces(r),
    );
  }

  references(relPath: string, position: Position, timeoutMs: number, includeDeclaration = true): Promise<Answer<Place[]>> {
    return this.request(
      'textDocument/references',
      { textDocument: { uri: this.uriOf(relPath) }, position, context: { includeDeclaration } },
      timeoutMs,
      [],
      (r: Location[] | null) => this.toPlaces(r),
    );
  }

  hover(relPath: string, position: Position, timeoutMs: number): Promise<Answer<{ text: string; range?: Range } | null>> {
    return this.request(
      'textDocument/hover',
      { textDocument: { uri: this.uriOf(relPath) }, position },
      timeoutMs,
      null,
      (r: Hover | null) => (r ? { text: hoverText(r.contents), ...(r.range ? { range: r.range } : {}) } : null),
    );
  }

  /**
   * Code actions for a range, with the diagnostics they should fix (as returned by
   * diagnostics()). Actions without an edit are resolved (codeAction/resolve) when the server
   * can; commands are returned, not run.
   */
  async codeActions(relPath: string, range: Range, diagnostics: Diagnostic[], timeoutMs: number): Promise<Answer<CodeActionAnswerItem[]>> {
    const started = Date.now();
    const canResolve =
      typeof this.capabilities.codeActionProvider === 'object' && this.capabilities.codeActionProvider.resolveProvider === true;
    const r = await this.request(
      'textDocument/codeAction',
      { textDocument: { uri: this.uriOf(relPath) }, range, context: { diagnostics, triggerKind: 1 } },
      timeoutMs,
      [] as Array<CodeAction | Command>,
      (x: Array<CodeAction | Command> | null) => x ?? [],
    );
    if (r.status !== 'fresh') return { ...r, value: [] };
    const items: CodeActionAnswerItem[] = [];
    for (const a of r.value) {
      if (typeof (a as Command).command === 'string') {
        items.push({ title: a.title, edits: [], command: a as Command });
        continue;
      }
      let action = a as CodeAction;
      if (!action.edit && canResolve && action.data !== undefined) {
        const left = timeoutMs - (Date.now() - started);
        const resolved = await this.request('codeAction/resolve', action, left, action, (x: CodeAction) => x);
        if (resolved.status !== 'fresh') return { status: resolved.status, value: [], error: resolved.error };
        action = resolved.value;
      }
      items.push({
        title: action.title,
        ...(action.kind !== undefined ? { kind: action.kind } : {}),
        ...(action.isPreferred !== undefined ? { isPreferred: action.isPreferred } : {}),
        ...(action.diagnostics ? { diagnostics: action.diagnostics } : {}),
        ...(action.edit ? { edit: action.edit } : {}),
        edits: action.edit ? this.flattenEdit(action.edit) : [],
        ...(action.command ? { command: action.command } : {}),
      });
    }
    return { status: 'fresh', value: items };
  }

  private flattenEdit(edit: WorkspaceEdit): FileEdits[] {
    const out: FileEdits[] = [];
    for (const [uri, edits] of Object.entries(edit.changes ?? {})) out.push({ relPath: this.relPathOf(uri), uri, edits });
    for (const dc of edit.documentChanges ?? []) {
      if ('textDocument' in dc) {
        const edits = dc.edits.map((e) => ({ range: e.range, newText: 'newText' in e ? e.newText : e.snippet.value }));
        out.push({ relPath: this.relPathOf(dc.textDocument.uri), uri: dc.textDocument.uri, edits });
      }
    }
    return out;
  }

  /**
   * Why a request failed, in words. A write into a pipe the server no longer reads (EPIPE, a
   * reset, a closed connection) means it went away, and Node reports its exit only after the
   * failed write: that exit, which says how it ended, is waited for (a moment at most, for a server
   * that closed its input and lives on).
   */
  private async describe(err: unknown): Promise<string> {
    if (!this.exitInfo && brokenPipe(err)) await Promise.race([this.exitPromise, new Promise((r) => setTimeout(r, 2000).unref())]);
    if (this.exitInfo) return `the language server '${this.spec.id}' exited (code ${this.exitInfo.code}, signal ${this.exitInfo.signal})`;
    return err instanceof Error ? err.message : String(err);
  }

  /**
   * A notification to the server, fire and forget: a connection that closed (the server died) or
   * a write that fails must not throw into the caller nor leave a rejected promise unhandled,
   * which would end the daemon. The server's exit is reported through onExit.
   */
  private notify(method: string, params: unknown): void {
    try {
      this.conn.sendNotification(method, params).catch(() => undefined);
    } catch {
      // closed: the exit handler reports it
    }
  }

  private assertAlive(): void {
    if (this.exitInfo) throw new Error(`the language server '${this.spec.id}' exited; start a new session`);
  }

  private killGroup(): void {
    platform.processes.killGroup(this.pid);
  }

  /** Shuts the server down (shutdown + exit), kills it and its process group after a grace period. */
  async dispose(graceMs = 2000): Promise<void> {
    // Taken while the tree is intact: a child that made a group of its own would otherwise
    // outlive the server for a while (and keep the root, a mount point, busy).
    const tree = this.pid > 0 ? platform.processes.treeOf(this.pid) : [];
    if (!this.exitInfo && !this.disposing) {
      this.disposing = true;
      const grace = new Deadline(graceMs);
      try {
        await Promise.race([
          this.conn.sendRequest('shutdown').then(() => this.conn.sendNotification('exit')),
          grace.done,
          this.exitPromise,
        ]).catch(() => undefined);
        await Promise.race([this.exitPromise, grace.done]);
      } finally {
        grace.clear();
      }
      if (!this.exitInfo) this.killGroup();
    }
    await this.exitPromise;
    // The server's children (tsserver under typescript-language-server) die with the group's
    // SIGKILL a moment later; until then they hold the root open and it cannot be unmounted.
    this.killGroup();
    for (const p of platform.processes.stillRunning(tree)) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // gone
      }
    }
    for (let i = 0; i < 150 && platform.processes.stillRunning(tree).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
  }
}
