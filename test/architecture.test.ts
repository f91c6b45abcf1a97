// The seams of shadowfs's TypeScript, enforced: this test fails when a module imports across one.
// (README and docs link here; the rules below are the reference.)
//
//   1. The protocol (src/protocol/**) is data: it imports its own modules and zod, nothing else.
//      No Node module (fs, net, node:…), not the native module (src/shadow/native.ts), nothing else of
//      src/ (which could bring either in). The VS Code extension and the generators import it
//      as is; tsconfig.protocol.json also compiles it without Node's types.
//   2. Services never reach into the daemon or the CLI: src/work, src/run, src/shell, src/lsp,
//      src/lints, src/patch, src/shadow/**, and src/platform import
//      nothing under src/daemon or src/cli. The daemon calls services; they hear back through
//      what they return and the events they emit.
//   3. Nothing in src/ imports the CLI (src/cli/**) but the CLI's own modules. Its entry is
//      bin/shadowfs.js (which loads dist/src/cli/main.js); build tools (tools/) and tests may read
//      its command definitions.
//   4. The shipped code (src/**) imports nothing from tools/: the PowerShell generator
//      (tools/powershell) is a build tool, compiled by tsconfig.json but not in the package.
//   5. src/'s top level holds only entry points: index.ts (the library) and demo.ts.
//
// Imports are read with the TypeScript compiler's parser (import and export declarations,
// `import type`, `import x = require()`, require() and import() calls, import('…') types), from
// the sources, not from dist: the test is fast and needs no build of what it checks.
import * as assert from 'assert';
import * as fs from 'fs';
import { builtinModules } from 'module';
import * as path from 'path';
import ts from 'typescript';

const ROOT = path.join(__dirname, '..', '..');

export interface ImportRef {
  specifier: string;
  line: number;
}

/** Every module specifier `text` imports, by any syntax the compiler knows. */
export function importsOf(fileName: string, text: string): ImportRef[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: ImportRef[] = [];
  const add = (node: ts.Node | undefined): void => {
    if (node && ts.isStringLiteralLike(node))
      found.push({ specifier: node.text, line: sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1 });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) add(node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) add(node.moduleReference.expression);
    else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require')) add(node.arguments[0]);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal);
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

/** What a specifier names: a file of this repository (path without extension), or a package. */
export type Target = { file: string } | { pkg: string };

export function targetOf(from: string, specifier: string): Target {
  if (!specifier.startsWith('.')) return { pkg: specifier };
  return { file: path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier)).replace(/\.(js|ts|json|node)$/, '') };
}

/** Whether `p` is `dir` itself or lies beneath it. */
const under = (p: string, dir: string): boolean => p === dir || p.startsWith(`${dir}/`);
const inside = (t: Target, dir: string): boolean => 'file' in t && under(t.file, dir);
const NODE_BUILTINS = new Set(builtinModules);
const isNodeBuiltin = (name: string): boolean =>
  name.startsWith('node:') || NODE_BUILTINS.has(name) || NODE_BUILTINS.has(name.split('/')[0]);
const SERVICES = ['src/work', 'src/run', 'src/shell', 'src/lsp', 'src/lints', 'src/patch', 'src/shadow', 'src/platform'];
/** The packages the protocol may use. */
const PROTOCOL_PACKAGES = new Set(['zod']);

interface Rule {
  seam: string;
  /** What `from` (a repository path) reaches across the seam by importing `t`, in a few words; undefined when nothing. */
  crossed(from: string, t: Target): string | undefined;
}

export const RULES: readonly Rule[] = [
  {
    seam: 'the protocol imports nothing of Node or native (rule 1)',
    crossed(from, t) {
      if (!under(from, 'src/protocol')) return undefined;
      if ('file' in t)
        return under(t.file, 'src/protocol')
          ? undefined
          : t.file === 'src/shadow/native'
            ? 'the native module'
            : 'a module outside src/protocol';
      if (isNodeBuiltin(t.pkg)) return 'a Node module';
      if (t.pkg.endsWith('.node')) return 'a native module';
      return PROTOCOL_PACKAGES.has(t.pkg) ? undefined : `a package other than ${[...PROTOCOL_PACKAGES].join(', ')}`;
    },
  },
  {
    seam: 'services never import the daemon or the CLI (rule 2)',
    crossed(from, t) {
      if (!SERVICES.some((s) => under(from.replace(/\.ts$/, ''), s))) return undefined;
      return inside(t, 'src/daemon') ? 'the daemon' : inside(t, 'src/cli') ? 'the CLI' : undefined;
    },
  },
  {
    seam: 'nothing in src/ imports the CLI but the CLI itself (rule 3)',
    crossed: (from, t) => (under(from, 'src') && !under(from, 'src/cli') && inside(t, 'src/cli') ? 'the CLI' : undefined),
  },
  {
    seam: 'the shipped code imports nothing from tools/ (rule 4)',
    crossed: (from, t) => (under(from, 'src') && inside(t, 'tools') ? 'a build tool' : undefined),
  },
];

/** Every import in `files` (repository paths with their text) that crosses a seam, in words. */
export function violations(files: ReadonlyArray<{ path: string; text: string }>): string[] {
  const out: string[] = [];
  for (const f of files) {
    for (const imp of importsOf(f.path, f.text)) {
      const target = targetOf(f.path, imp.specifier);
      for (const rule of RULES) {
        const what = rule.crossed(f.path, target);
        if (what) out.push(`${f.path}:${imp.line} imports ${JSON.stringify(imp.specifier)} (${what}): ${rule.seam}`);
      }
    }
  }
  return out;
}

function sourcesUnder(dir: string): { path: string; text: string }[] {
  const abs = path.join(ROOT, dir);
  if (!fs.existsSync(abs)) return [];
  return (fs.readdirSync(abs, { recursive: true }) as string[])
    .filter((f) => /\.(ts|js|mjs|cjs)$/.test(f) && !f.endsWith('.d.ts'))
    .map((f) => {
      const rel = path.posix.join(dir, f.split(path.sep).join('/'));
      return { path: rel, text: fs.readFileSync(path.join(ROOT, rel), 'utf8') };
    });
}

describe('architecture: imports respect the documented seams', () => {
  it('src/ and tools/ cross none of the seams', () => {
    const files = [...sourcesUnder('src'), ...sourcesUnder('tools')];
    assert.ok(
      files.some((f) => f.path === 'src/protocol/methods.ts'),
      `read the sources from ${ROOT}`,
    );
    assert.ok(files.some((f) => f.path.startsWith('src/daemon/')));
    assert.deepStrictEqual(violations(files), []);
  });

  it("src/'s top level holds only entry points (rule 5)", () => {
    // The library (index.ts) and the demo (demo.ts, behind `shadowfs demo`); everything else
    // lives in the folder of its concern (README's map). A new loose module fails here.
    const loose = fs
      .readdirSync(path.join(ROOT, 'src'), { withFileTypes: true })
      .filter((d) => d.isFile())
      .map((d) => d.name);
    assert.deepStrictEqual(loose.sort(), ['demo.ts', 'index.ts']);
  });

  it('reads imports of every syntax with the compiler', () => {
    const text = [
      "import * as fs from 'fs';",
      "import type { X } from './x';",
      "export * from './all';",
      "export { y } from './y';",
      "import z = require('./z');",
      "const w = require('./w');",
      "const v = await import('./v');",
      "let t: import('./t').T;",
      '// import nothing from a comment',
      'const s = \'import("./string")\';',
    ].join('\n');
    assert.deepStrictEqual(
      importsOf('a.ts', text).map((i) => `${i.line}:${i.specifier}`),
      ['1:fs', '2:./x', '3:./all', '4:./y', '5:./z', '6:./w', '7:./v', '8:./t'],
    );
  });

  describe('catches a planted violation of each seam', () => {
    const planted = (file: string, text: string): string[] => violations([{ path: file, text }]);

    it('the protocol importing Node, the native module, or the rest of src/', () => {
      assert.match(planted('src/protocol/planted.ts', "import * as fs from 'fs';")[0], /imports "fs" \(a Node module\).*rule 1/);
      assert.match(planted('src/protocol/planted.ts', "import { x } from 'node:path';")[0], /rule 1/);
      assert.match(planted('src/protocol/planted.ts', "import { addon } from '../shadow/native';")[0], /the native module.*rule 1/);
      assert.match(
        planted('src/protocol/planted.ts', "import { ShadowError } from '../common/errors';")[0],
        /outside src\/protocol.*rule 1/,
      );
      assert.match(planted('src/protocol/planted.ts', "import { MessageConnection } from 'vscode-jsonrpc/node';")[0], /rule 1/);
      assert.deepStrictEqual(planted('src/protocol/planted.ts', "import * as z from 'zod';\nimport { Requests } from './methods';"), []);
    });

    it('a service importing the daemon or the CLI', () => {
      assert.match(planted('src/work/planted.ts', "import { Daemon } from '../daemon/server';")[0], /the daemon.*rule 2/);
      assert.match(planted('src/shadow/index.ts', "import type { ShadowManager } from '../daemon/manager';")[0], /rule 2/);
      assert.match(planted('src/shadow/layer.ts', "import { x } from '../daemon/handlers';")[0], /rule 2/);
      assert.match(planted('src/platform/linux.ts', "const d = require('../daemon/log');")[0], /rule 2/);
      assert.ok(planted('src/run/planted.ts', "import { main } from '../cli/main';").some((v) => /the CLI.*rule 2/.test(v)));
      assert.deepStrictEqual(planted('src/daemon/planted.ts', "import { runInShadow } from '../run/runner';"), []);
    });

    it('anything in src/ but the CLI importing the CLI', () => {
      assert.match(planted('src/daemon/planted.ts', "import { ExitCode } from '../cli/output';")[0], /rule 3/);
      assert.match(planted('src/index.ts', "export * from './cli/main';")[0], /rule 3/);
      assert.deepStrictEqual(planted('src/cli/commands/planted.ts', "import { ExitCode } from '../output';"), []);
      assert.deepStrictEqual(planted('tools/powershell/planted.ts', "import { runCommand } from '../../src/cli/commands/run';"), []);
    });

    it('shipped code importing a build tool', () => {
      assert.match(planted('src/cli/planted.ts', "import { CMDLETS } from '../../tools/powershell/cmdlets';")[0], /rule 4/);
    });
  });
});
