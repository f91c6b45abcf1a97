// The generated ShadowFS PowerShell module. No PowerShell runs on this machine (there is no pwsh,
// and wine's powershell.exe is a stub that exits 0), so the module is tested for what can be
// tested here: its syntax (tree-sitter-powershell), its structure (exports, ShouldProcess,
// help, variables), its mapping onto the CLI (checked against the CLI's yargs definitions and
// its --help), and the exact command lines it builds, run against a real daemon and mount.
import * as assert from 'assert';
import { spawnSync, execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import Parser from 'tree-sitter';
import yargs, { type CommandModule } from 'yargs';
import { ErrorCodes } from '../src/protocol/errors';
import { protocolDocument } from '../src/protocol';
import { cliCommands, findCliCommand, leafCommands, type CliCommand } from '../tools/powershell/cli-spec';
import { CMDLETS, UNMAPPED_COMMANDS, UNMAPPED_OPTIONS, findCmdlet, type CmdletSpec } from '../tools/powershell/cmdlets';
import { generateModule } from '../tools/powershell/generate';
import {
  argvOrder,
  bindFromPipeline,
  buildArgv,
  interpretCli,
  switchArg,
  type Bound,
  type CallOutcome,
} from '../tools/powershell/invocation';
import {
  ERROR_CATEGORIES,
  ERROR_CATEGORY,
  EXIT_MEANINGS,
  formerNames,
  moduleVersion,
  parameterHelp,
  renderModule,
  synopsis,
} from '../tools/powershell/render';
import { APPROVED_VERBS, READ_ONLY_VERBS, VERBS_SINCE_PS6, isApprovedVerb } from '../tools/powershell/verbs';
import { FolderGuard, makeProject, repoRoot, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

type Node = Parser.SyntaxNode;
const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');

let parser: Parser;
async function loadParser(): Promise<Parser> {
  // The grammar package is ESM only (with top-level await): import() it from this CommonJS file.
  // (A variable specifier: TypeScript's node16 resolution cannot follow the package's extensionless "main".)
  const specifier = 'tree-sitter-powershell';
  const grammar = ((await import(specifier)) as { default: Parser.Language }).default;
  const p = new Parser();
  p.setLanguage(grammar);
  return p;
}

/**
 * Every syntax problem tree-sitter finds, as "line:column what". ERROR and MISSING nodes are
 * reported; so is a node that has an error below it but no child that does, which is how a
 * MISSING node of a hidden rule (a statement terminator) shows: `children` skips it.
 */
function syntaxProblems(source: string): string[] {
  const tree = parser.parse(source);
  const problems: string[] = [];
  const at = (n: Node): string => `${n.startPosition.row + 1}:${n.startPosition.column + 1}`;
  const lineOf = (n: Node): string => (source.split('\n')[n.startPosition.row] ?? '').trim();
  const walk = (n: Node): void => {
    if (n.isError) problems.push(`${at(n)} syntax error: ${lineOf(n)}`);
    else if (n.isMissing) problems.push(`${at(n)} missing ${n.type}: ${lineOf(n)}`);
    else if (n.hasError && !n.children.some((c) => c.hasError || c.isError || c.isMissing))
      problems.push(`${at(n)} missing something (hidden) in ${n.type}: ${lineOf(n)}`);
    for (const c of n.children) walk(c);
  };
  walk(tree.rootNode);
  if (tree.rootNode.hasError && problems.length === 0) problems.push('the tree has an error the walk did not locate');
  return problems;
}

function parse(source: string): Node {
  const problems = syntaxProblems(source);
  assert.deepStrictEqual(problems, [], 'the PowerShell does not parse cleanly');
  return parser.parse(source).rootNode;
}

const unquote = (s: string): string => s.replace(/^'(.*)'$/s, '$1').replace(/''/g, "'");

// ---- the CLI as its own --help shows it ------------------------------------------------------

interface HelpArg {
  name: string;
  array: boolean;
  required: boolean;
  type?: string;
}
interface HelpSpec {
  positionals: HelpArg[];
  options: HelpArg[];
}

/** Reads yargs' help text: positionals from the usage line and the Positionals section, options from Options. */
function parseHelp(text: string): HelpSpec {
  const lines = text.split('\n');
  const usage = lines[0] ?? '';
  const positionals: HelpArg[] = [...usage.matchAll(/([<[])([\w-]+)(\.\.)?[\]>]/g)].map((m) => ({
    name: m[2] ?? '',
    array: m[3] === '..',
    required: m[1] === '<',
  }));
  const options: HelpArg[] = [];
  let section = '';
  let current: { arg: HelpArg; text: string; kind: string } | undefined;
  const flush = (): void => {
    if (!current) return;
    const types = [...current.text.matchAll(/\[(string|number|boolean|array|required)\]/g)].map((m) => m[1]);
    const a = current.arg;
    a.type = types.find((t) => t !== 'required' && t !== 'array') ?? (types.includes('array') ? 'array' : undefined);
    if (types.includes('array')) a.array = true;
    if (types.includes('required')) a.required = true;
    if (current.kind === 'option') options.push(a);
    else {
      const p = positionals.find((x) => x.name === a.name);
      if (p) p.type = a.type ?? p.type;
    }
    current = undefined;
  };
  for (const line of lines.slice(1)) {
    if (/^\S.*:$/.test(line)) {
      flush();
      section = line;
      continue;
    }
    const opt = section === 'Options:' ? /^\s{2,6}(?:-\w, )?--([\w-]+)\b(.*)$/.exec(line) : null;
    const pos = section === 'Positionals:' ? /^ {2}([\w-]+)\b(.*)$/.exec(line) : null;
    if (opt?.[1]) {
      flush();
      current = { arg: { name: opt[1], array: false, required: false }, text: opt[2] ?? '', kind: 'option' };
    } else if (pos?.[1]) {
      flush();
      current = { arg: { name: pos[1], array: false, required: false }, text: pos[2] ?? '', kind: 'positional' };
    } else if (current) current.text += ` ${line}`;
  }
  flush();
  return { positionals, options };
}

const noop = (): void => undefined;

/** A yargs instance with the CLI's own command modules for `path`, whose handlers only record what they were given. */
function parserFor(cmdPath: string[], seen: { argv?: Record<string, unknown> }): ReturnType<typeof yargs> {
  const record = (argv: unknown): void => void (seen.argv = argv as Record<string, unknown>);
  const leaf = findCliCommand(cmdPath);
  assert.ok(leaf, `no CLI command ${cmdPath.join(' ')}`);
  let mod: CommandModule = { ...leaf.module, handler: record };
  for (let i = cmdPath.length - 1; i > 0; i--) {
    const group = findCliCommand(cmdPath.slice(0, i));
    assert.ok(group);
    const inner = mod;
    mod = {
      command: group.module.command,
      describe: group.module.describe,
      builder: (y) => y.command(inner).demandCommand(1),
      handler: noop,
    };
  }
  return yargs().scriptName('shadowfs').command(mod).help().exitProcess(false).parserConfiguration({ 'populate--': true }).strict();
}

async function helpOf(cmdPath: string[]): Promise<string> {
  const y = parserFor(cmdPath, {});
  return new Promise((resolve, reject) => {
    void y.parse([...cmdPath, '--help'], {}, (err, _argv, output) => (err ? reject(err) : resolve(output)));
  });
}

/** What the CLI's own parser makes of a command line (nothing runs). */
async function parseWithCli(cmdPath: string[], argv: string[]): Promise<Record<string, unknown>> {
  const seen: { argv?: Record<string, unknown> } = {};
  const y = parserFor(cmdPath, seen);
  await new Promise<void>((resolve, reject) => {
    void y.parse(argv, {}, (err) => (err ? reject(err) : resolve()));
  });
  assert.ok(seen.argv, `the CLI did not run ${argv.join(' ')}`);
  return seen.argv;
}

const keyOf = (c: CliCommand): string => c.path.join(' ');

describe('PowerShell module (ShadowFS, generated)', function () {
  let outDir: string;
  let psm1: string;
  let psd1: string;
  let moduleTree: Node;
  let manifestTree: Node;

  before(async () => {
    parser = await loadParser();
    outDir = tempDir('ps');
    const m = generateModule(outDir);
    psm1 = fs.readFileSync(m.module, 'utf8');
    psd1 = fs.readFileSync(m.manifest, 'utf8');
  });

  describe('syntax (tree-sitter-powershell)', () => {
    it('the syntax check flags broken PowerShell and locates it', () => {
      const unclosed = syntaxProblems('function Get-X {\n    param([string]$A)\n    Write-Output $A\n');
      assert.ok(unclosed.length > 0, 'an unclosed brace is not flagged');
      assert.ok(syntaxProblems("$x = @('a', 'b'\n").length > 0, 'an unclosed array is not flagged');
      assert.ok(syntaxProblems('if ($x) {\n    1\n}\nelse\n').length > 0, 'an else without a block is not flagged');
      // A MISSING node of a hidden rule has no ERROR node and is not among `children`: the
      // walk finds it through hasError (a one-line switch without ";" between its clauses).
      const missing = syntaxProblems("switch ($x) { 'a' { 1 } 'b' { 2 } }\n");
      assert.match(missing.join('\n'), /^1:\d+ missing something \(hidden\) in switch_clause/);
      assert.deepStrictEqual(syntaxProblems("switch ($x) {\n    'a' { 1 }\n    'b' { 2 }\n}\n"), []);
    });

    it('why a one-line function with a param block is flagged, and the form the generator writes', () => {
      // PowerShell accepts this, but the grammar wants a statement terminator (newline or ";")
      // after param(...): it is flagged at the param block. The generator always ends a param
      // block with a newline (render.ts), which parses.
      const oneLine = syntaxProblems('function Get-X { param([string]$A) Write-Output $A }');
      assert.match(oneLine.join('\n'), /^1:18 syntax error/);
      assert.deepStrictEqual(syntaxProblems('function Get-X { param([string]$A); Write-Output $A }'), []);
      assert.deepStrictEqual(syntaxProblems('function Get-X {\n    param([string]$A)\n    Write-Output $A\n}\n'), []);
      // The other known false positive: a bare-word list as a command argument (quoted lists parse).
      assert.ok(syntaxProblems('Export-ModuleMember -Function A, B\n').length > 0);
      assert.deepStrictEqual(syntaxProblems("Export-ModuleMember -Function @('A', 'B')\n"), []);
    });

    it('ShadowFS.psm1 and ShadowFS.psd1 parse without an error, and are ASCII', () => {
      for (const [name, text] of [
        ['ShadowFS.psm1', psm1],
        ['ShadowFS.psd1', psd1],
      ] as const) {
        assert.deepStrictEqual(syntaxProblems(text), [], `${name} does not parse cleanly`);
        const bad = [...text].findIndex((ch) => ch.charCodeAt(0) > 0x7e || (ch.charCodeAt(0) < 0x20 && ch !== '\n'));
        assert.strictEqual(bad, -1, `${name} has a non-ASCII or control character at ${bad}`);
        assert.ok(!text.startsWith('\ufeff'), `${name} has a byte order mark`);
      }
      moduleTree = parse(psm1);
      manifestTree = parse(psd1);
    });

    it('every example in the help parses, and uses only cmdlets and parameters the module has', () => {
      for (const c of CMDLETS) {
        assert.ok(c.examples.length > 0, `${c.name} has no example`);
        for (const e of c.examples) {
          const root = parse(`${e.code}\n`);
          for (const cmd of root.descendantsOfType('command')) {
            const name = cmd.childForFieldName('command_name')?.text ?? '';
            const target = CMDLETS.find((x) => x.name === name);
            if (!target) continue;
            for (const p of cmd.descendantsOfType('command_parameter')) {
              const used = p.text.replace(/^-/, '').replace(/:.*$/, '');
              const common = ['WhatIf', 'Confirm', 'Verbose', 'ErrorAction'];
              assert.ok(
                common.includes(used) || target.params.some((x) => x.name === used),
                `${c.name} example "${e.code}": ${name} has no parameter -${used}`,
              );
            }
          }
        }
      }
    });
  });

  describe('names', () => {
    it('every cmdlet has an approved verb (Windows PowerShell 5.1 list) and a Shadow noun', () => {
      const count = Object.values(APPROVED_VERBS).flat().length;
      assert.strictEqual(count, 98, 'the approved-verb list of Windows PowerShell 5.1 has 98 verbs');
      for (const v of VERBS_SINCE_PS6) assert.ok(!isApprovedVerb(v));
      for (const c of CMDLETS) {
        const [verb, noun, ...rest] = c.name.split('-');
        assert.strictEqual(rest.length, 0, c.name);
        assert.ok(verb && isApprovedVerb(verb), `${c.name}: ${verb} is not an approved verb`);
        assert.match(noun ?? '', /^Shadow[A-Z][A-Za-z]*$/, `${c.name}: the noun starts with Shadow`);
      }
      assert.strictEqual(new Set(CMDLETS.map((c) => c.name)).size, CMDLETS.length, 'a cmdlet name is used twice');
    });

    it('help speaks PowerShell: no CLI option syntax (--x) in synopses, descriptions or parameter help', () => {
      for (const c of CMDLETS) {
        const texts = [synopsis(c), c.description, ...c.params.map((p) => parameterHelp(c, p)), ...c.examples.map((e) => e.remarks)];
        for (const t of texts) assert.doesNotMatch(t, /(^|[\s(])--[a-z]/, `${c.name}: ${t}`);
      }
    });

    it('parameter names are PascalCase, unique, and not PowerShell common parameters', () => {
      const common = ['Verbose', 'Debug', 'ErrorAction', 'WarningAction', 'InformationAction', 'ErrorVariable', 'WarningVariable'].concat([
        'InformationVariable',
        'OutVariable',
        'OutBuffer',
        'PipelineVariable',
        'WhatIf',
        'Confirm',
        'ProgressAction',
      ]);
      for (const c of CMDLETS) {
        const names = c.params.flatMap((p) => [p.name, ...(p.aliases ?? [])].map((n) => n.toLowerCase()));
        assert.strictEqual(new Set(names).size, names.length, `${c.name}: a parameter name or alias is used twice`);
        for (const p of c.params) {
          assert.match(p.name, /^[A-Z][A-Za-z]+$/, `${c.name} -${p.name}`);
          assert.ok(!common.some((x) => x.toLowerCase() === p.name.toLowerCase()), `${c.name} -${p.name} is a common parameter`);
        }
      }
    });
  });

  describe('mapping onto the CLI', () => {
    let help: Map<string, HelpSpec>;

    before(async () => {
      // The top-level command list from the real CLI (src/cli/main.ts registers them), the rest
      // from yargs' help for the CLI's own command modules, in this process.
      const top = execFileSync(process.execPath, [cliPath, '--help'], { encoding: 'utf8' });
      const topNames = [...top.matchAll(/^ {2}shadowfs ([\w-]+)/gm)].map((m) => m[1]);
      assert.deepStrictEqual(
        topNames,
        cliCommands().map((c) => c.path[0]),
        'tools/powershell/cli-spec.ts lists other top-level commands than the CLI has',
      );
      help = new Map();
      for (const c of cliCommands().filter((x) => x.subcommands.length)) {
        const text = await helpOf(c.path);
        const subs = [...text.matchAll(new RegExp(`^ {2}shadowfs ${c.path.join(' ')} ([\\w-]+)`, 'gm'))].map((m) => m[1]);
        assert.deepStrictEqual(
          subs,
          c.subcommands.map((s) => s.path[c.path.length]),
          `${keyOf(c)}: subcommands differ from --help`,
        );
      }
      for (const c of leafCommands()) help.set(keyOf(c), parseHelp(await helpOf(c.path)));
    });

    it("the recorded CLI definitions agree with the CLI's own --help", () => {
      for (const c of leafCommands()) {
        const h = help.get(keyOf(c));
        assert.ok(h);
        assert.deepStrictEqual(
          h.positionals.map((p) => [p.name, p.array, p.required]),
          c.positionals.map((p) => [p.name, p.array, p.required]),
          `${keyOf(c)}: positionals`,
        );
        const visible = c.options.filter((o) => !o.hidden);
        assert.deepStrictEqual(
          h.options
            .map((o) => o.name)
            .filter((n) => n !== 'help' && n !== 'version')
            .sort(),
          visible.map((o) => o.name).sort(),
          `${keyOf(c)}: options`,
        );
        for (const o of visible) {
          const ho: HelpArg | undefined = h.options.find((x) => x.name === o.name);
          const expected = o.array ? 'array' : o.type;
          assert.strictEqual(ho?.type ?? 'string', expected, `${keyOf(c)} --${o.name}: type`);
          assert.strictEqual(ho?.required, o.required, `${keyOf(c)} --${o.name}: required`);
        }
      }
    });

    it('every cmdlet runs a real CLI command with --json, and every parameter reaches a real positional or option of a fitting type', () => {
      for (const c of CMDLETS) {
        const cli = findCliCommand(c.command);
        assert.ok(cli && cli.subcommands.length === 0, `${c.name}: "shadowfs ${c.command.join(' ')}" is not a CLI command`);
        const h = help.get(keyOf(cli));
        assert.ok(
          h?.options.some((o) => o.name === 'json' && o.type === 'boolean'),
          `${c.name}: shadowfs ${keyOf(cli)} has no --json`,
        );
        for (const p of c.params) {
          const where = `${c.name} -${p.name}`;
          if ('module' in p.cli) continue;
          if ('option' in p.cli) {
            const name = p.cli.option;
            const o = h?.options.find((x) => x.name === name);
            assert.ok(o, `${where}: shadowfs ${keyOf(cli)} has no --${name}`);
            if (p.type === 'switch') assert.strictEqual(o.type, 'boolean', `${where}: --${name} is not a boolean`);
            else if (p.type === 'string[]') assert.strictEqual(o.type, 'array', `${where}: --${name} takes one value`);
            else if (p.type === 'int' || p.type === 'double') assert.strictEqual(o.type, 'number', `${where}: --${name} is not a number`);
            else assert.strictEqual(o.type, 'string', `${where}: --${name} is not a string`);
            if (p.cli.negated) assert.strictEqual(p.type, 'switch', `${where}: only a switch can be negated`);
          } else {
            const name = 'positional' in p.cli ? p.cli.positional : p.cli.afterDoubleDash;
            const x = h?.positionals.find((y) => y.name === name);
            assert.ok(x, `${where}: shadowfs ${keyOf(cli)} has no positional ${name}`);
            assert.strictEqual(x.array, p.type === 'string[]', `${where}: positional ${name} array-ness`);
            if (x.required && !p.set) assert.ok(p.mandatory, `${where}: the CLI requires ${name}, the cmdlet does not`);
            if ('afterDoubleDash' in p.cli) assert.ok(x.array, `${where}: only an array positional goes after --`);
          }
        }
        // What the CLI requires, the cmdlet requires (or gets in every parameter set).
        for (const o of h?.options.filter((x) => x.required) ?? [])
          assert.ok(
            c.params.some((p) => 'option' in p.cli && p.cli.option === o.name && p.mandatory),
            `${c.name}: --${o.name} is required`,
          );
      }
    });

    it('every CLI command has a cmdlet, and every option a parameter, except the listed ones', () => {
      const mapped = new Set(CMDLETS.map((c) => c.command.join(' ')));
      const missing = leafCommands()
        .map(keyOf)
        .filter((k) => !mapped.has(k) && !UNMAPPED_COMMANDS[k]);
      assert.deepStrictEqual(missing, [], 'CLI commands without a cmdlet (add one, or list them in UNMAPPED_COMMANDS with a reason)');
      for (const k of Object.keys(UNMAPPED_COMMANDS)) assert.ok(!mapped.has(k) && findCliCommand(k.split(' ')), `UNMAPPED_COMMANDS: ${k}`);
      for (const cmd of new Set(CMDLETS.map((c) => c.command.join(' ')))) {
        const cli = findCliCommand(cmd.split(' '));
        assert.ok(cli);
        const used = new Set(
          CMDLETS.filter((c) => c.command.join(' ') === cmd).flatMap((c) =>
            c.params.flatMap((p) => ('option' in p.cli ? [p.cli.option] : [])),
          ),
        );
        for (const o of cli.options) {
          if (o.name === 'json' || (o.hidden && UNMAPPED_OPTIONS[`${cmd} --${o.name}`])) continue;
          assert.ok(used.has(o.name) || UNMAPPED_OPTIONS[`${cmd} --${o.name}`], `shadowfs ${cmd} --${o.name} has no parameter`);
        }
      }
      for (const k of Object.keys(UNMAPPED_OPTIONS)) {
        const [cmd, opt] = k.split(' --');
        assert.ok(
          findCliCommand((cmd ?? '').split(' '))?.options.some((o) => o.name === opt),
          `UNMAPPED_OPTIONS: ${k} is not an option`,
        );
      }
    });

    it("the command lines the module builds are what the CLI's own parser takes, value for value", async () => {
      const io = { fullPath: (p: string) => path.resolve('/base', p), tempFile: (t: string) => `/tmp/text-${t.length}` };
      const sample = (c: CmdletSpec, p: CmdletSpec['params'][number]): Bound[string] => {
        if (p.type === 'switch') return true;
        if (p.type === 'int') return 7;
        if (p.type === 'double') return 1.5;
        if (p.type === 'string[]') return [`${p.name.toLowerCase()}-1`, `${p.name.toLowerCase()}-2`];
        if (c.name === 'Set-ShadowLayerItem' && p.name === 'Mode') return '755';
        if (c.name === 'Mount-ShadowFolder' && p.name === 'Io') return 'passthrough';
        return `${p.name.toLowerCase()}-value`;
      };
      for (const c of CMDLETS) {
        const sets = [...new Set(c.params.map((p) => p.set).filter((s): s is string => !!s))];
        for (const set of sets.length ? sets : [undefined]) {
          const params = c.params.filter((p) => (!p.set || p.set === set) && !('module' in p.cli));
          const bound: Bound = Object.fromEntries(params.map((p) => [p.name, sample(c, p)]));
          const argv = buildArgv(c, bound, io);
          assert.deepStrictEqual(argv.slice(0, c.command.length + 1), [...c.command, '--json']);
          const parsed = await parseWithCli(c.command, argv);
          assert.strictEqual(parsed.json, true, `${c.name}: --json`);
          for (const p of params) {
            const v = bound[p.name];
            const passed = Array.isArray(v)
              ? v
              : p.pass === 'fullPath'
                ? io.fullPath(String(v))
                : p.pass === 'tempFile'
                  ? io.tempFile(String(v))
                  : v;
            const where = `${c.name}${set ? ` (${set})` : ''} -${p.name}: ${argv.join(' ')}`;
            if ('option' in p.cli) {
              const want = p.type === 'switch' ? !p.cli.negated : passed;
              assert.deepStrictEqual(parsed[p.cli.option], want, where);
            } else if ('positional' in p.cli) {
              assert.deepStrictEqual(parsed[p.cli.positional], passed, where);
            } else if ('afterDoubleDash' in p.cli) {
              const all = [
                ...((parsed[p.cli.afterDoubleDash] as string[] | undefined) ?? []),
                ...((parsed['--'] as string[] | undefined) ?? []),
              ];
              assert.deepStrictEqual(all.map(String), passed, where);
            }
          }
        }
      }
    });

    it('parameters bind from the pipeline by the property names the objects before them carry', () => {
      // What each cmdlet emits (fields from the protocol's result schemas, plus what the module
      // adds) is enough for the next one to bind its mandatory parameters.
      const folder = { name: 'p', lower: '/x', mountPoint: '/m', agents: ['a'], active: null };
      const layer = { Shadow: 'p', Agent: 'a', Active: false, MountPoint: '/m' };
      const change = { path: 'src/a.js', kind: 'modified', type: 'file', Shadow: 'p', Agent: 'a' };
      const checkpoint = { name: 'c1', createdAt: '', auto: false, files: 1, bytes: 1, Shadow: 'p', Agent: 'a' };
      const view = { view: 3, agent: 'a', mountPoint: '/v', Shadow: 'p' };
      const item = { path: 'src/a.js', type: 'file', Shadow: 'p', Agent: 'a' };
      const chains: [object, string, Bound][] = [
        [folder, 'Get-ShadowLayer', { Shadow: 'p' }],
        [folder, 'Dismount-ShadowFolder', { Shadow: 'p' }],
        [layer, 'Get-ShadowChange', { Shadow: 'p', Agent: 'a' }],
        [layer, 'Compare-ShadowLayer', { Shadow: 'p', Agent: 'a' }],
        [layer, 'Reset-ShadowLayer', { Shadow: 'p', Agent: 'a' }],
        [change, 'Undo-ShadowLayerItem', { Shadow: 'p', Agent: 'a', Path: 'src/a.js' }],
        [checkpoint, 'Restore-ShadowLayer', { Shadow: 'p', Agent: 'a', Name: 'c1' }],
        [view, 'Close-ShadowView', { Shadow: 'p', View: 3 }],
        [item, 'Get-ShadowContent', { Shadow: 'p', Agent: 'a', Path: 'src/a.js' }],
        [{ FullName: '/home/me/proj', Name: 'proj' }, 'Mount-ShadowFolder', { Path: '/home/me/proj' }],
      ];
      for (const [input, name, want] of chains)
        assert.deepStrictEqual(bindFromPipeline(findCmdlet(name), input as Record<string, unknown>), want, `... | ${name}`);
    });

    it('what the module reads from each result is in the protocol result schema', () => {
      const doc = protocolDocument();
      for (const c of CMDLETS) {
        if (!c.method) continue;
        const result = doc.methods[c.method]?.result as { properties?: Record<string, { type?: string }> } | undefined;
        assert.ok(result, `${c.name}: no protocol method ${c.method}`);
        const shapes = 'whenBound' in c.output ? [c.output.then, c.output.otherwise] : [c.output];
        for (const s of shapes) {
          if (s.kind === 'items' || s.kind === 'value')
            assert.strictEqual(result.properties?.[s.property]?.type, s.kind === 'items' ? 'array' : 'string', `${c.name}: ${s.property}`);
          if (s.kind === 'layers') {
            const shadows = result.properties?.shadows as { items?: { properties?: Record<string, unknown> } } | undefined;
            for (const f of ['name', 'mountPoint', 'agents', 'active']) assert.ok(shadows?.items?.properties?.[f], `list: shadows[].${f}`);
          }
          for (const a of ('add' in s ? s.add : undefined) ?? [])
            assert.ok(c.params.find((p) => p.name === a)?.mandatory, `${c.name}: adds ${a}, which is not always bound`);
        }
      }
    });

    it('each shadowfs error code has an ErrorRecord category; each exit status a meaning', () => {
      for (const code of Object.keys(ErrorCodes)) assert.ok(code in ERROR_CATEGORY, `${code} has no category`);
      for (const cat of Object.values(ERROR_CATEGORY)) assert.ok((ERROR_CATEGORIES as readonly string[]).includes(cat), cat);
      assert.deepStrictEqual(Object.keys(EXIT_MEANINGS).map(Number), [3, 4, 5, 6]);
    });
  });

  describe('structure of the generated module', () => {
    const functions = (): Node[] => moduleTree.descendantsOfType('function_statement');
    const nameOf = (f: Node): string => f.descendantsOfType('function_name')[0]?.text ?? '';
    const stringsIn = (n: Node): string[] => n.descendantsOfType('string_literal').map((s) => unquote(s.text));

    it('the manifest exports exactly the functions the module defines as cmdlets, and their former names as aliases', () => {
      const entries = new Map<string, Node>();
      for (const e of manifestTree.descendantsOfType('hash_entry')) {
        const key = e.descendantsOfType('key_expression')[0]?.text;
        if (key && !entries.has(key)) entries.set(key, e);
      }
      const value = (k: string): Node => {
        const e = entries.get(k);
        assert.ok(e, `the manifest has no ${k}`);
        return e;
      };
      const defined = functions().map(nameOf);
      const helpers = defined.filter((n) => /^[A-Za-z]+-ShadowFS[A-Z]/.test(n));
      const publicFns = defined.filter((n) => !helpers.includes(n));
      assert.deepStrictEqual(stringsIn(value('FunctionsToExport')), publicFns);
      assert.deepStrictEqual(
        publicFns,
        CMDLETS.map((c) => c.name),
      );
      for (const k of ['CmdletsToExport', 'VariablesToExport']) {
        assert.strictEqual(value(k).text.replace(/\s/g, ''), `${k}=@()`, `${k} must be an empty array`);
      }
      // Aliases: only the former names of renamed cmdlets.
      const former = formerNames().map(([f]) => f);
      assert.deepStrictEqual(stringsIn(value('AliasesToExport')), former);
      assert.deepStrictEqual(stringsIn(value('RootModule')), ['ShadowFS.psm1']);
      assert.deepStrictEqual(stringsIn(value('PowerShellVersion')), ['5.1']);
      const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
      assert.deepStrictEqual(stringsIn(value('ModuleVersion')), [moduleVersion(pkg.version).version]);
      assert.match(stringsIn(value('GUID'))[0] ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      assert.ok(!/\*/.test(psd1), 'no wildcard in the manifest');
      // The module's own Export-ModuleMember says the same.
      const exportCmd = moduleTree
        .descendantsOfType('command')
        .find((c) => c.childForFieldName('command_name')?.text === 'Export-ModuleMember');
      assert.ok(exportCmd);
      assert.deepStrictEqual(stringsIn(exportCmd), [...publicFns, ...former]);
      assert.match(exportCmd.text, /-Alias @\(/);
      assert.deepStrictEqual(moduleVersion('1.2.3-beta.1'), { version: '1.2.3', prerelease: 'beta1' });
    });

    it("a renamed cmdlet's former name is an alias of it, set in the module, and names no other cmdlet", () => {
      // The renames of issue #30; scripts written against the old names keep working for a release.
      assert.deepStrictEqual(formerNames(), [
        ['Set-ShadowOverride', 'Set-ShadowLayerItem'],
        ['Remove-ShadowOverride', 'Undo-ShadowLayerItem'],
        ['Get-ShadowDiagnostic', 'Get-ShadowLint'],
      ]);
      const set = moduleTree
        .descendantsOfType('command')
        .filter((c) => c.childForFieldName('command_name')?.text === 'Set-Alias')
        .map((c) => c.descendantsOfType('string_literal').map((x) => unquote(x.text)));
      assert.deepStrictEqual(set, formerNames());
      const defined = functions().map(nameOf);
      for (const [former, name] of formerNames()) {
        assert.ok(defined.includes(name), `${former} is an alias of ${name}, which the module does not define`);
        assert.ok(!defined.includes(former), `${former} is both an alias and a function`);
      }
    });

    it('every cmdlet is an advanced function; those that change something support ShouldProcess and call it', () => {
      for (const f of functions()) {
        const name = nameOf(f);
        const c = CMDLETS.find((x) => x.name === name);
        const binding = f.descendantsOfType('attribute').find((a) => /^\[?CmdletBinding\b/.test(a.text));
        assert.ok(binding, `${name} has no [CmdletBinding()]`);
        if (!c) continue;
        const verb = name.split('-')[0] ?? '';
        const supports = /SupportsShouldProcess\s*=\s*\$true/.test(binding.text);
        assert.strictEqual(supports, !READ_ONLY_VERBS.includes(verb), `${name}: SupportsShouldProcess`);
        assert.strictEqual(supports, !!c.changes, `${name}: the table and the code disagree`);
        if (supports) {
          assert.match(f.text, /\$PSCmdlet\.ShouldProcess\(/, `${name} never calls ShouldProcess`);
          assert.match(binding.text, new RegExp(`ConfirmImpact = '${c.changes?.impact}'`));
          // Every $(...) in its ShouldProcess text names one of its parameters.
          for (const m of `${c.changes?.target} ${c.changes?.action}`.matchAll(/\$\((\w+)/g))
            assert.ok(
              c.params.some((p) => p.name === m[1]),
              `${name}: ShouldProcess names $${m[1]}`,
            );
        }
        // One call to shadowfs, through the shared helper.
        assert.strictEqual(f.text.match(/Invoke-ShadowFSCli /g)?.length, 1, `${name} calls Invoke-ShadowFSCli once`);
      }
      assert.match(functions().find((f) => nameOf(f) === 'Merge-ShadowLayer')?.text ?? '', /ConfirmImpact = 'High'/);
      for (const c of CMDLETS) if (c.name !== 'Merge-ShadowLayer') assert.notStrictEqual(c.changes?.impact, 'High', c.name);
    });

    it('every cmdlet has comment help: synopsis, description, each parameter, an example', () => {
      for (const f of functions()) {
        const name = nameOf(f);
        if (!CMDLETS.some((c) => c.name === name)) continue;
        const help = f.children.find((n) => n.type === 'comment' && n.text.startsWith('<#'))?.text ?? '';
        assert.ok(help, `${name} has no comment help`);
        const params = f
          .descendantsOfType('script_parameter')
          .map((p) => p.descendantsOfType('variable').at(-1)?.text.replace(/^\$/, '') ?? '');
        assert.ok(params.length > 0 || ['Get-ShadowFolder', 'Get-ShadowStatus', 'Test-ShadowEnvironment'].includes(name), name);
        for (const section of ['SYNOPSIS', 'DESCRIPTION', 'EXAMPLE'])
          assert.match(help, new RegExp(`^\\s*\\.${section}\\n\\s*\\S`, 'm'), `${name}: .${section}`);
        for (const p of params) assert.match(help, new RegExp(`^\\s*\\.PARAMETER ${p}\\n\\s*\\S`, 'm'), `${name}: .PARAMETER ${p}`);
        const documented = [...help.matchAll(/^\s*\.PARAMETER (\w+)/gm)].map((m) => m[1]);
        assert.deepStrictEqual(documented, params, `${name}: .PARAMETER sections differ from the parameters`);
      }
    });

    it('no variable a function assigns is one of its parameters (PowerShell names ignore case)', () => {
      const automatic = [
        'args',
        'input',
        'this',
        '_',
        'psitem',
        'error',
        'host',
        'home',
        'pwd',
        'matches',
        'true',
        'false',
        'null',
        'myinvocation',
      ];
      for (const f of functions()) {
        const name = nameOf(f);
        const params = f
          .descendantsOfType('script_parameter')
          .map((p) => p.descendantsOfType('variable').at(-1)?.text.slice(1).toLowerCase() ?? '');
        const assigned = [
          ...f.descendantsOfType('left_assignment_expression').map((a) => a.descendantsOfType('variable')[0]),
          ...f.descendantsOfType('foreach_statement').map((s) => s.children.find((n) => n.type === 'variable')),
        ]
          .filter((v): v is Node => !!v)
          .map((v) => v.text.slice(1).toLowerCase())
          .filter((v) => v !== 'null'); // $null = ...: output discarded
        assert.ok(assigned.length > 0 || !CMDLETS.some((c) => c.name === name), `${name}: no assignment found (the walk is wrong)`);
        for (const v of assigned) {
          assert.ok(!params.includes(v), `${name} assigns $${v}, one of its parameters`);
          assert.ok(!automatic.includes(v), `${name} assigns the automatic variable $${v}`);
        }
      }
    });

    it('each parameter is passed as the table says (one rule per kind of binding)', () => {
      for (const c of CMDLETS) {
        const body = psm1.slice(psm1.indexOf(`function ${c.name} {`));
        const fn = body.slice(0, body.indexOf('\n}\n'));
        assert.ok(fn.includes(`$sfsArgv = @(${[...c.command, '--json'].map((w) => `'${w}'`).join(', ')})`), c.name);
        let last = fn.indexOf('$sfsArgv = @(');
        for (const p of argvOrder(c)) {
          const marker =
            p.type === 'switch'
              ? `if ($${p.name}) {`
              : `if ($PSBoundParameters.ContainsKey('${p.name}')) {\n                foreach ($sfsValue in @($${p.name}))`;
          const at = fn.indexOf(marker);
          assert.ok(at > last, `${c.name} -${p.name}: not passed, or not in the order the CLI takes it`);
          last = at;
          const block = fn.slice(at, fn.indexOf('\n            }', at));
          if ('option' in p.cli)
            assert.ok(block.includes(`'${p.type === 'switch' ? switchArg(p) : `--${p.cli.option}`}'`), `${c.name} -${p.name}`);
          if (p.pass === 'tempFile') assert.ok(block.includes('New-ShadowFSTempFile -Text $sfsValue'), `${c.name} -${p.name}`);
          if (p.pass === 'fullPath') assert.ok(block.includes('GetUnresolvedProviderPathFromPSPath'), `${c.name} -${p.name}`);
          if ('afterDoubleDash' in p.cli) assert.ok(block.includes('$sfsTrailing += [string]$sfsValue'), `${c.name} -${p.name}`);
        }
      }
      assert.strictEqual(renderModule(), psm1, 'the generator is deterministic');
    });

    it('each param block declares what the table says (type, Mandatory, Position, pipeline, set, aliases)', () => {
      for (const f of functions()) {
        const c = CMDLETS.find((x) => x.name === nameOf(f));
        if (!c) continue;
        const declared = f.descendantsOfType('script_parameter');
        assert.deepStrictEqual(
          declared.map((p) => p.descendantsOfType('variable').at(-1)?.text),
          c.params.map((p) => `$${p.name}`),
          c.name,
        );
        declared.forEach((node, i) => {
          const p = c.params[i];
          assert.ok(p);
          const t = node.text;
          const where = `${c.name} -${p.name}`;
          const attr = /\[Parameter\(([^)]*)\)\]/.exec(t)?.[1] ?? '';
          assert.strictEqual(/Mandatory = \$true/.test(attr), !!p.mandatory, `${where}: Mandatory`);
          assert.strictEqual(/Position = (\d+)/.exec(attr)?.[1], p.position?.toString(), `${where}: Position`);
          assert.strictEqual(
            /ValueFromPipelineByPropertyName = \$true/.test(attr),
            !!p.pipeline,
            `${where}: ValueFromPipelineByPropertyName`,
          );
          assert.strictEqual(/ValueFromPipeline = \$true/.test(attr), p.pipeline === 'value', `${where}: ValueFromPipeline`);
          assert.strictEqual(/ParameterSetName = '(\w+)'/.exec(attr)?.[1], p.set, `${where}: ParameterSetName`);
          assert.deepStrictEqual(/\[Alias\(([^)]*)\)\]/.exec(t)?.[1]?.split(', ').map(unquote) ?? [], p.aliases ?? [], `${where}: Alias`);
          const type = { string: '[string]', 'string[]': '[string[]]', int: '[int]', double: '[double]', switch: '[switch]' }[p.type];
          assert.ok(t.includes(`\n        ${type}\n`), `${where}: ${type}`);
        });
      }
    });

    it('each cmdlet emits what the table says, and passes -ExitStatusIsResult when it says so', () => {
      for (const c of CMDLETS) {
        const body = psm1.slice(psm1.indexOf(`function ${c.name} {`));
        const fn = body.slice(0, body.indexOf('\n}\n'));
        assert.strictEqual(fn.includes('-ExitStatusIsResult'), !!c.exitStatusIsResult, c.name);
        for (const s of 'whenBound' in c.output ? [c.output.then, c.output.otherwise] : [c.output]) {
          const extra = `@{${(('add' in s && s.add) || []).map((a) => ` ${a} = $${a}`).join(';')}${'add' in s && s.add?.length ? ' ' : ''}}`;
          const want =
            s.kind === 'object'
              ? `Add-ShadowFSMember -Object $sfsResult -TypeName '${s.type}' -Property ${extra}`
              : s.kind === 'items'
                ? `foreach ($sfsItem in @($sfsResult.${s.property})) { ${s.type ? `Add-ShadowFSMember -Object $sfsItem -TypeName '${s.type}' -Property ${extra}` : '$sfsItem'}`
                : s.kind === 'value'
                  ? `$sfsResult.${s.property}\n`
                  : s.kind === 'layers'
                    ? "PSTypeName = 'ShadowFS.Layer'"
                    : '$null = Invoke-ShadowFSCli';
          const flat = (x: string): string => x.replace(/\s+/g, ' ');
          assert.ok(flat(fn).includes(flat(want)), `${c.name} does not contain: ${want}`);
        }
      }
    });

    it('CLI output is read into objects, ErrorRecords and warnings as the module does', () => {
      const cat = ERROR_CATEGORY as Record<string, string>;
      const c = findCmdlet('Get-ShadowChange');
      const ok = interpretCli(
        c,
        { stdout: '{"changes":[{"path":"a","kind":"added","type":"file"}]}\n', stderr: '', status: 0 },
        { Shadow: 's', Agent: 'a' },
        cat,
        EXIT_MEANINGS,
      );
      assert.deepStrictEqual(ok.emitted, [
        { typeName: 'ShadowFS.Change', value: { path: 'a', kind: 'added', type: 'file', Shadow: 's', Agent: 'a' } },
      ]);
      const err = interpretCli(
        c,
        { stdout: '{"error":{"code":"UNKNOWN_AGENT","message":"no layer"}}\n', stderr: '', status: 1 },
        {},
        cat,
        EXIT_MEANINGS,
      );
      assert.deepStrictEqual(err.errors, [
        { id: 'UNKNOWN_AGENT', fullyQualifiedErrorId: 'UNKNOWN_AGENT,Get-ShadowChange', category: 'ObjectNotFound', message: 'no layer' },
      ]);
      const usage = interpretCli(c, { stdout: '', stderr: 'shadowfs: Unknown argument: x\n', status: 2 }, {}, cat, EXIT_MEANINGS);
      assert.deepStrictEqual(
        usage.errors.map((e) => [e.fullyQualifiedErrorId, e.category, e.message]),
        [['USAGE,Get-ShadowChange', 'InvalidArgument', 'shadowfs: Unknown argument: x']],
      );
      const apply = interpretCli(
        findCmdlet('Merge-ShadowLayer'),
        { stdout: '{"dryRun":false,"applied":[],"conflicts":[{"path":"a"}],"kept":[],"skipped":[]}\n', stderr: '', status: 6 },
        { Shadow: 's', Agent: 'a' },
        cat,
        EXIT_MEANINGS,
      );
      assert.deepStrictEqual(
        [apply.emitted.length, apply.errors, apply.warnings],
        [1, [], ['shadowfs exited with status 6: conflicts remain; nothing was written for them']],
      );
      const run = interpretCli(
        findCmdlet('Invoke-ShadowCommand'),
        { stdout: '{"exitCode":3}\n', stderr: 'shadowfs: warning: unprotected\n', status: 3 },
        { Shadow: 's', Agent: 'a' },
        cat,
        EXIT_MEANINGS,
      );
      assert.deepStrictEqual([run.emitted.length, run.errors, run.warnings], [1, [], ['shadowfs: warning: unprotected']]);
      const layers = interpretCli(
        findCmdlet('Get-ShadowLayer'),
        { stdout: '{"shadows":[]}\n', stderr: '', status: 0 },
        { Shadow: 'nope' },
        cat,
        EXIT_MEANINGS,
      );
      assert.deepStrictEqual(
        layers.errors.map((e) => e.fullyQualifiedErrorId),
        ['UNKNOWN_SHADOW,Get-ShadowLayer'],
      );
    });
  });

  describe('the command lines, run against a real daemon and mount', function () {
    let lower: string;
    let guard: FolderGuard;
    let scratch: string;
    const cat = ERROR_CATEGORY as Record<string, string>;

    before(() => {
      lower = makeProject('ps-lower');
      guard = new FolderGuard(lower);
      scratch = tempDir('ps-scratch');
    });
    after(async () => {
      spawnSync(process.execPath, [cliPath, 'unmount', 'psproj', '--lazy'], { encoding: 'utf8' });
      stopTestDaemon();
      await guard.check();
    });

    let temps = 0;
    const io = {
      fullPath: (p: string) => path.resolve(scratch, p),
      tempFile: (text: string) => {
        const f = path.join(scratch, `text-${temps++}`);
        fs.writeFileSync(f, text, 'utf8');
        return f;
      },
    };
    /** Runs a cmdlet the way the module does: its argv, shadowfs, then the module's reading of the output. */
    function call(name: string, bound: Bound): CallOutcome & { argv: string[] } {
      const c = findCmdlet(name);
      const argv = buildArgv(c, bound, io);
      const r = spawnSync(process.execPath, [cliPath, ...argv], { encoding: 'utf8', timeout: 60_000, cwd: scratch });
      return { argv, ...interpretCli(c, { stdout: r.stdout, stderr: r.stderr, status: r.status ?? -1 }, bound, cat, EXIT_MEANINGS) };
    }
    const values = (o: CallOutcome): Record<string, unknown>[] => o.emitted.map((e) => e.value as Record<string, unknown>);
    const clean = (o: CallOutcome & { argv: string[] }): CallOutcome & { argv: string[] } => {
      assert.deepStrictEqual(o.errors, [], `shadowfs ${o.argv.join(' ')}`);
      return o;
    };

    it('Mount-ShadowFolder | Set-ShadowLayerItem | Get-ShadowFolder | Get-ShadowLayer | Get-ShadowChange | Undo-ShadowLayerItem | Export-ShadowPatch | Dismount-ShadowFolder', () => {
      const mounted = clean(call('Mount-ShadowFolder', { Path: lower, Name: 'psproj' }));
      assert.strictEqual(mounted.emitted[0]?.typeName, 'ShadowFS.Folder');
      assert.strictEqual(values(mounted)[0]?.name, 'psproj');

      // Content as a string (through a UTF-8 file) and as a file of this machine.
      const text = 'export const greeting = "h\u00e9llo";\n';
      const wrote = clean(call('Set-ShadowLayerItem', { Shadow: 'psproj', Agent: 'alice', Path: 'src/greeting.js', Value: text }));
      assert.deepStrictEqual(values(wrote)[0], {
        path: 'src/greeting.js',
        bytes: Buffer.byteLength(text),
        Shadow: 'psproj',
        Agent: 'alice',
      });
      fs.writeFileSync(path.join(scratch, 'tool.sh'), '#!/bin/sh\necho tool\n');
      clean(call('Set-ShadowLayerItem', { Shadow: 'psproj', Agent: 'alice', Path: 'tool.sh', SourcePath: 'tool.sh', Mode: '755' }));
      clean(call('Set-ShadowLayerItem', { Shadow: 'psproj', Agent: 'alice', Path: 'README.md', Value: '' }));
      const read = clean(call('Get-ShadowContent', { Shadow: 'psproj', Agent: 'alice', Path: 'src/greeting.js' }));
      assert.strictEqual(values(read)[0]?.content, text);

      // Get-ShadowFolder | Get-ShadowLayer | Get-ShadowChange, binding as PowerShell would.
      const folders = clean(call('Get-ShadowFolder', {}));
      const folder = values(folders).find((f) => f.name === 'psproj');
      assert.ok(folder);
      const layers = clean(call('Get-ShadowLayer', bindFromPipeline(findCmdlet('Get-ShadowLayer'), folder)));
      // A new shadow has the agent "default" active from the start; alice's layer came with her first write.
      assert.deepStrictEqual(layers.emitted.map((e) => [e.typeName, ...Object.values(e.value as object)]).sort(), [
        ['ShadowFS.Layer', 'psproj', 'alice', false, folder.mountPoint],
        ['ShadowFS.Layer', 'psproj', 'default', true, folder.mountPoint],
      ]);
      const layer = values(layers).find((l) => l.Agent === 'alice');
      assert.ok(layer);
      const changes = clean(call('Get-ShadowChange', bindFromPipeline(findCmdlet('Get-ShadowChange'), layer)));
      const byPath = new Map(values(changes).map((ch) => [ch.path, ch]));
      assert.deepStrictEqual([...byPath.keys()].sort(), ['README.md', 'src/greeting.js', 'tool.sh']);
      assert.ok(changes.emitted.every((e) => e.typeName === 'ShadowFS.Change'));
      assert.deepStrictEqual([byPath.get('src/greeting.js')?.kind, byPath.get('README.md')?.kind], ['added', 'modified']);

      // ... | Where-Object path -eq README.md | Undo-ShadowLayerItem
      const readme = byPath.get('README.md');
      assert.ok(readme);
      const reverted = clean(call('Undo-ShadowLayerItem', bindFromPipeline(findCmdlet('Undo-ShadowLayerItem'), readme)));
      assert.deepStrictEqual(reverted.emitted, []);
      const after = clean(call('Get-ShadowChange', { Shadow: 'psproj', Agent: 'alice' }));
      assert.deepStrictEqual(
        values(after)
          .map((ch) => ch.path)
          .sort(),
        ['src/greeting.js', 'tool.sh'],
      );

      // Export-ShadowPatch: text to the pipeline, or a file and an object.
      const patch = clean(call('Export-ShadowPatch', { Shadow: 'psproj', Agent: 'alice' }));
      assert.strictEqual(patch.emitted.length, 1);
      assert.match(String(patch.emitted[0]?.value), /^diff --git a\/src\/greeting\.js b\/src\/greeting\.js\nnew file mode 100644\n/m);
      assert.match(String(patch.emitted[0]?.value), /new file mode 100755/);
      const saved = clean(call('Export-ShadowPatch', { Shadow: 'psproj', Agent: 'alice', Path: ['src'], OutFile: 'alice.patch' }));
      assert.strictEqual(saved.emitted[0]?.typeName, 'ShadowFS.Patch');
      assert.match(fs.readFileSync(path.join(scratch, 'alice.patch'), 'utf8'), /^diff --git a\/src\/greeting\.js/);
      assert.doesNotMatch(fs.readFileSync(path.join(scratch, 'alice.patch'), 'utf8'), /tool\.sh/);

      // Invoke-ShadowCommand, with a negated switch (-NoNetwork: --no-network).
      const ran = clean(
        call('Invoke-ShadowCommand', { Shadow: 'psproj', Agent: 'alice', Command: ['cat', 'src/greeting.js'], NoNetwork: true }),
      );
      assert.ok(ran.argv.includes('--no-network'));
      assert.deepStrictEqual(
        ran.emitted.map((e) => [e.typeName, (e.value as { exitCode: number }).exitCode, (e.value as { stdout: string }).stdout]),
        [['ShadowFS.RunResult', 0, text]],
      );

      // A shadowfs error becomes an ErrorRecord with the code as its id.
      const unknown = call('Get-ShadowChange', { Shadow: 'nope', Agent: 'alice' });
      assert.deepStrictEqual(
        unknown.errors.map((e) => [e.fullyQualifiedErrorId, e.category]),
        [['UNKNOWN_SHADOW,Get-ShadowChange', 'ObjectNotFound']],
      );
      assert.match(unknown.errors[0]?.message ?? '', /nope/);
      const noLayer = call('Get-ShadowLayer', { Shadow: 'nope' });
      assert.deepStrictEqual(
        noLayer.errors.map((e) => e.fullyQualifiedErrorId),
        ['UNKNOWN_SHADOW,Get-ShadowLayer'],
      );

      // Get-ShadowFolder | Dismount-ShadowFolder
      const gone = clean(call('Dismount-ShadowFolder', bindFromPipeline(findCmdlet('Dismount-ShadowFolder'), folder)));
      assert.deepStrictEqual(gone.emitted, []);
      assert.ok(!values(clean(call('Get-ShadowFolder', {}))).some((f) => f.name === 'psproj'));
    });
  });
});
