// Diagnostics a language server computed for one version of a document, proven fresh.
//
// Freshness of diagnostics (the bug every neighbouring tool has is stale or silently empty
// results): `diagnostics(relPath, version)` answers 'fresh' only with diagnostics provably
// computed from that version of the text, and never turns a timeout or a failure into an empty
// list. How the proof is made depends on the server:
// - pull: the server advertises diagnosticProvider, so textDocument/diagnostic is asked after
//   the didChange; LSP requires a server to handle messages in order, so the answer is for the
//   text last sent.
// - tsserver (typescript-language-server): tsserver's own syntactic/semantic/suggestion
//   diagnostics requests go through `workspace/executeCommand typescript.tsserverRequest`; the
//   language server forwards a didChange to tsserver at once as a `change` command, which is a
//   fence in its request queue, so tsserver answers the later request on the changed text.
//   Measured with typescript-language-server 5.3: its publishDiagnostics never carry a version,
//   come once per burst of edits about 300-400 ms after the last one, and do not come at all
//   when an edit leaves a clean file clean; waiting for a publish is therefore unsound both ways.
// - publish: otherwise, only a publishDiagnostics whose `version` equals the version asked for
//   counts (pyright 1.1.414 sends the version on every publish, including clean-to-clean edits,
//   and one publish for the last version of a burst). A publish without a version proves nothing
//   and is answered as an error, not as fresh.
// Whatever the route, if the document moved on to a newer version before the answer came, the
// answer is an error saying so, not diagnostics of another text.
//
// The session (session.ts) keeps the documents and their versions; this file holds the three
// routes and the bookkeeping of published diagnostics and of the callers waiting for them.
import { pathToFileURL } from 'url';
import { CancellationTokenSource } from 'vscode-jsonrpc/node';
import type { MessageConnection } from 'vscode-jsonrpc/node';
import type { Diagnostic, DocumentDiagnosticReport, PublishDiagnosticsParams, Range } from 'vscode-languageserver-protocol';
import type { DiagnosticsAnswer } from './answers';

interface LatestPublish {
  version: number | undefined;
  diagnostics: Diagnostic[];
}

interface PublishWaiter {
  version: number;
  resolve: (a: DiagnosticsAnswer) => void;
}

/** The diagnostics a server last published per document, and the callers waiting for a version's. */
export class PublishedDiagnostics {
  private readonly published = new Map<string, LatestPublish>();
  private readonly waiters = new Map<string, Set<PublishWaiter>>();

  /** The diagnostics published for `version` of document `key`: at once when they were, else when they come. */
  wait(key: string, version: number): Promise<DiagnosticsAnswer> {
    const latest = this.published.get(key);
    if (latest && latest.version === version) return Promise.resolve({ status: 'fresh', diagnostics: latest.diagnostics, version });
    return new Promise((resolve) => {
      let set = this.waiters.get(key);
      if (!set) this.waiters.set(key, (set = new Set()));
      set.add({ version, resolve });
    });
  }

  /** Records what the server published for (open) document `key`, answering the waiters it settles. */
  record(key: string, p: PublishDiagnosticsParams): void {
    this.published.set(key, { version: p.version, diagnostics: p.diagnostics });
    const set = this.waiters.get(key);
    if (!set) return;
    for (const w of [...set]) {
      if (p.version === w.version) w.resolve({ status: 'fresh', diagnostics: p.diagnostics, version: w.version });
      else if (p.version === undefined) {
        w.resolve({
          status: 'error',
          diagnostics: [],
          version: w.version,
          error: 'the server publishes diagnostics without a document version; they cannot be proven fresh',
        });
      } else continue;
      set.delete(w);
    }
  }

  /** Answers every waiter for a version of `key` older than `now`: the document moved on. */
  supersede(key: string, now: number): void {
    const set = this.waiters.get(key);
    if (!set) return;
    for (const w of [...set]) {
      if (w.version < now) {
        w.resolve({
          status: 'error',
          diagnostics: [],
          version: w.version,
          error: `the document moved on to a newer version before diagnostics for ${w.version} came`,
        });
        set.delete(w);
      }
    }
  }

  /** Forgets the waiters for `version` of `key` (their caller gave up). */
  drop(key: string, version: number): void {
    const set = this.waiters.get(key);
    if (!set) return;
    for (const w of [...set]) if (w.version === version) set.delete(w);
  }

  /** Answers every waiter with `error` (the server is gone). */
  failAll(error: string): void {
    for (const set of this.waiters.values())
      for (const w of set) w.resolve({ status: 'error', diagnostics: [], version: w.version, error });
    this.waiters.clear();
  }

  /** Forgets what was published for `key` (the document was closed). */
  forget(key: string): void {
    this.published.delete(key);
  }
}

/** Pull route: textDocument/diagnostic, asked after the didChange of `version`. */
export async function pullDiagnostics(
  conn: MessageConnection,
  uri: string,
  version: number,
  describe: (err: unknown) => Promise<string>,
): Promise<DiagnosticsAnswer> {
  const cts = new CancellationTokenSource();
  try {
    const report = await conn.sendRequest<DocumentDiagnosticReport>('textDocument/diagnostic', { textDocument: { uri } }, cts.token);
    if (report.kind !== 'full')
      return {
        status: 'error',
        diagnostics: [],
        version,
        error: 'the server answered "unchanged" to a request without a previous result',
      };
    return { status: 'fresh', diagnostics: report.items, version };
  } catch (err) {
    return { status: 'error', diagnostics: [], version, error: await describe(err) };
  } finally {
    cts.dispose();
  }
}

/** tsserver route: its own diagnostics requests, fenced by the change command the didChange became. */
export async function tsserverDiagnostics(
  conn: MessageConnection,
  uri: string,
  version: number,
  describe: (err: unknown) => Promise<string>,
): Promise<DiagnosticsAnswer> {
  try {
    const kinds = ['syntacticDiagnosticsSync', 'semanticDiagnosticsSync', 'suggestionDiagnosticsSync'];
    const bodies = await Promise.all(
      kinds.map((k) =>
        conn.sendRequest<unknown>('workspace/executeCommand', {
          command: 'typescript.tsserverRequest',
          arguments: [k, { file: uri }],
        }),
      ),
    );
    const out: Diagnostic[] = [];
    for (const b of bodies) {
      const list = (b as { body?: unknown } | null)?.body ?? b;
      if (!Array.isArray(list)) throw new Error(`unexpected answer from tsserver: ${JSON.stringify(b)?.slice(0, 200)}`);
      for (const d of list as TsDiagnostic[]) out.push(fromTsDiagnostic(d));
    }
    return { status: 'fresh', diagnostics: out, version };
  } catch (err) {
    return { status: 'error', diagnostics: [], version, error: await describe(err) };
  }
}

interface TsLocation {
  line: number;
  offset: number;
}

interface TsDiagnostic {
  start: TsLocation;
  end: TsLocation;
  text: string;
  code?: number;
  category?: string;
  source?: string;
  reportsUnnecessary?: unknown;
  reportsDeprecated?: unknown;
  relatedInformation?: Array<{ message: string; span?: { start: TsLocation; end: TsLocation; file: string } }>;
}

function tsRange(start: TsLocation, end: TsLocation): Range {
  return { start: { line: start.line - 1, character: start.offset - 1 }, end: { line: end.line - 1, character: end.offset - 1 } };
}

/** A tsserver diagnostic (1-based line/offset) as an LSP one, as typescript-language-server maps them. */
function fromTsDiagnostic(d: TsDiagnostic): Diagnostic {
  const severity = d.category === 'error' ? 1 : d.category === 'warning' ? 2 : d.category === 'suggestion' ? 4 : 3;
  const tags: Array<1 | 2> = [];
  if (d.reportsUnnecessary) tags.push(1);
  if (d.reportsDeprecated) tags.push(2);
  const out: Diagnostic = { range: tsRange(d.start, d.end), message: d.text, severity, source: d.source ?? 'typescript' };
  if (d.code !== undefined) out.code = d.code;
  if (tags.length) out.tags = tags;
  const related = [];
  for (const r of d.relatedInformation ?? []) {
    if (r.span)
      related.push({ message: r.message, location: { uri: pathToFileURL(r.span.file).href, range: tsRange(r.span.start, r.span.end) } });
  }
  if (related.length) out.relatedInformation = related;
  return out;
}
