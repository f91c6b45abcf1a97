// Which language servers the lints service runs, and for which files.
//
// The built-in servers (TypeScript/JavaScript through typescript-language-server, Python
// through pyright) come from shadowfs's own dependencies and run under the Node that runs
// shadowfs, so a folder needs nothing installed. A folder may add servers of its own in
// `.shadowfs/lsp.json`.

import * as fs from 'fs';
import { platform } from '../platform';
import * as path from 'path';

export interface LanguageMapping {
  /** The LSP language id sent in didOpen, e.g. 'typescript'. */
  languageId: string;
  /** File name endings, with their dot: '.ts', '.d.ts'. Compared case-insensitively. */
  extensions: string[];
}

/**
 * How fresh diagnostics are obtained (see session.ts):
 * - 'auto': pull diagnostics (textDocument/diagnostic) when the server offers them, else
 *   publishDiagnostics that carry the document version.
 * - 'tsserver': typescript-language-server only: ask tsserver itself, through the
 *   `typescript.tsserverRequest` command, for the syntactic/semantic/suggestion diagnostics of
 *   the file; tsserver answers in order after the edits it was sent, so the answer is for the
 *   latest version. (typescript-language-server publishes without versions and not at all when
 *   an edit leaves a clean file clean, so its publishes cannot prove freshness.)
 */
export type DiagnosticsMode = 'auto' | 'tsserver';

export interface ServerSpec {
  id: string;
  /** The executable; the built-ins use process.execPath (Node) with the script in args. */
  command: string;
  args: string[];
  languages: LanguageMapping[];
  initializationOptions?: unknown;
  /** Answers to workspace/configuration: looked up by the requested section's dotted path. */
  settings?: unknown;
  diagnosticsMode?: DiagnosticsMode;
}

/** The package folder of one of our own dependencies. */
function packageDir(name: string): string {
  return path.dirname(require.resolve(`${name}/package.json`));
}

/**
 * The tsserver the TypeScript server should use: the folder's own TypeScript when it has one, by
 * its real path (pnpm links node_modules/typescript into node_modules/.pnpm; a confined server
 * sees the folder's node_modules only, at its real path).
 */
export function tsserverPath(root: string): string {
  const own = path.join(root, 'node_modules', 'typescript', 'lib', 'tsserver.js');
  if (fs.existsSync(own)) return fs.realpathSync(own);
  return path.join(packageDir('typescript'), 'lib', 'tsserver.js');
}

export function builtinServers(root: string): ServerSpec[] {
  const tsls = path.join(packageDir('typescript-language-server'), 'lib', 'cli.mjs');
  const pyright = path.join(packageDir('pyright'), 'langserver.index.js');
  return [
    {
      id: 'typescript',
      command: process.execPath,
      args: [tsls, '--stdio'],
      languages: [
        { languageId: 'typescript', extensions: ['.ts', '.mts', '.cts'] },
        { languageId: 'typescriptreact', extensions: ['.tsx'] },
        { languageId: 'javascript', extensions: ['.js', '.mjs', '.cjs'] },
        { languageId: 'javascriptreact', extensions: ['.jsx'] },
      ],
      // typescript-language-server 5.3 reads `tsserver.path` (a tsserver.js file or a folder
      // inside a typescript package) and prefers it to both the workspace's and its bundled one.
      // No automatic type acquisition: it downloads @types packages into a cache the user's own
      // editor shares (~/.cache/typescript), and an agent's question must not write anything of
      // the user's.
      initializationOptions: { tsserver: { path: tsserverPath(root) }, disableAutomaticTypingAcquisition: true },
      diagnosticsMode: 'tsserver',
    },
    {
      id: 'pyright',
      command: process.execPath,
      args: [pyright, '--stdio'],
      languages: [{ languageId: 'python', extensions: ['.py', '.pyi'] }],
    },
  ];
}

/** The server for a file (by its name's ending; the longest matching ending wins). */
export function serverFor(specs: ServerSpec[], relPath: string): { spec: ServerSpec; languageId: string } | undefined {
  const name = path.basename(relPath).toLowerCase();
  let best: { spec: ServerSpec; languageId: string; len: number } | undefined;
  for (const spec of specs) {
    for (const lang of spec.languages) {
      for (const ext of lang.extensions) {
        const e = ext.toLowerCase();
        if (name.endsWith(e) && name.length > e.length && (!best || e.length > best.len)) {
          best = { spec, languageId: lang.languageId, len: e.length };
        }
      }
    }
  }
  return best && { spec: best.spec, languageId: best.languageId };
}

export class LspConfigError extends Error {
  constructor(file: string, what: string) {
    super(`${file}: ${what}`);
    this.name = 'LspConfigError';
  }
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((s) => typeof s === 'string');
}

/**
 * Extra servers from `<root>/.shadowfs/lsp.json`: `{ "servers": [ { id, command, args,
 * languages: [{ languageId, extensions }], initializationOptions?, settings? } ] }`. No file:
 * no extra servers. A malformed file throws LspConfigError naming the field at fault.
 */
export function loadServerConfig(root: string): ServerSpec[] {
  return loadServerConfigFile(path.join(root, '.shadowfs', 'lsp.json'), root);
}

/**
 * The daemon-wide server config (same shape): $SHADOWFS_LSP_CONFIG, else
 * $XDG_CONFIG_HOME/shadowfs/lsp.json (~/.config/shadowfs/lsp.json; %APPDATA%\shadowfs\lsp.json on
 * Windows). Relative commands ("./x") are resolved against its directory.
 */
export function userServerConfigFile(): string {
  if (process.env.SHADOWFS_LSP_CONFIG) return path.resolve(process.env.SHADOWFS_LSP_CONFIG);
  return path.join(platform.configDir(), 'shadowfs', 'lsp.json');
}

/** Servers from one config file; no file: none. `baseDir` resolves commands starting with ".". */
export function loadServerConfigFile(file: string, baseDir: string): ServerSpec[] {
  const root = baseDir;
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new LspConfigError(file, `cannot be read: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new LspConfigError(file, `is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || !Array.isArray((doc as { servers?: unknown }).servers)) {
    throw new LspConfigError(file, 'expected an object { "servers": [ ... ] }');
  }
  const seen = new Set<string>();
  return ((doc as { servers: unknown[] }).servers as unknown[]).map((raw, i) => {
    const at = `servers[${i}]`;
    if (typeof raw !== 'object' || raw === null) throw new LspConfigError(file, `${at} must be an object`);
    const s = raw as Record<string, unknown>;
    if (typeof s.id !== 'string' || s.id === '') throw new LspConfigError(file, `${at}.id must be a non-empty string`);
    if (seen.has(s.id)) throw new LspConfigError(file, `${at}.id "${s.id}" is used twice`);
    seen.add(s.id);
    if (typeof s.command !== 'string' || s.command === '') throw new LspConfigError(file, `${at}.command must be a non-empty string`);
    const args = s.args ?? [];
    if (!isStringArray(args)) throw new LspConfigError(file, `${at}.args must be an array of strings`);
    if (!Array.isArray(s.languages) || s.languages.length === 0) {
      throw new LspConfigError(file, `${at}.languages must be a non-empty array of { languageId, extensions }`);
    }
    const languages = (s.languages as unknown[]).map((l, j): LanguageMapping => {
      const lat = `${at}.languages[${j}]`;
      const o = (typeof l === 'object' && l !== null ? l : {}) as Record<string, unknown>;
      if (typeof o.languageId !== 'string' || o.languageId === '')
        throw new LspConfigError(file, `${lat}.languageId must be a non-empty string`);
      if (!isStringArray(o.extensions) || o.extensions.length === 0 || o.extensions.some((e) => !e.startsWith('.') || e.length < 2)) {
        throw new LspConfigError(file, `${lat}.extensions must be a non-empty array of endings like ".rs"`);
      }
      return { languageId: o.languageId, extensions: o.extensions };
    });
    // A relative command is taken relative to the folder (e.g. "./node_modules/.bin/x").
    const command = s.command.startsWith('.') ? path.resolve(root, s.command) : s.command;
    const spec: ServerSpec = { id: s.id, command, args, languages };
    if (s.initializationOptions !== undefined) spec.initializationOptions = s.initializationOptions;
    if (s.settings !== undefined) spec.settings = s.settings;
    return spec;
  });
}
