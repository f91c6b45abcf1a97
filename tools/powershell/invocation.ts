// How the generated module turns a cmdlet call into a shadowfs command line, and the CLI's JSON
// back into objects, errors and warnings, written once more in TypeScript from the same table.
// The module's PowerShell cannot run on this machine: the tests run these command lines
// against the real CLI and check the objects have what the next cmdlet in a pipeline binds.
// Keep every rule here in step with render.ts (each says which part of the module it mirrors).
import { findCliCommand } from './cli-spec';
import type { CmdletSpec, OutputShape, ParamSpec } from './cmdlets';

/** How the module passes values that are not plain strings. */
export interface PassIo {
  /** $PSCmdlet.GetUnresolvedProviderPathFromPSPath: absolute against the current location. */
  fullPath(p: string): string;
  /** New-ShadowFSTempFile: writes the text as UTF-8 (no BOM) and returns the file's path. */
  tempFile(text: string): string;
}

/** Bound parameters, as $PSBoundParameters holds them: switches as booleans. */
export type Bound = Record<string, string | number | boolean | string[]>;

/**
 * The parameters in the order their values go on the command line: positionals in the order the
 * CLI takes them, then options in table order, then what goes after `--`. Options follow the
 * positionals because an array option (--take a b) would swallow positionals after it.
 */
export function argvOrder(c: CmdletSpec): ParamSpec[] {
  const cli = findCliCommand(c.command);
  const positionIndex = (p: ParamSpec): number =>
    'positional' in p.cli ? (cli?.positionals.findIndex((x) => 'positional' in p.cli && x.name === p.cli.positional) ?? -1) : -1;
  const positionals = c.params.filter((p) => 'positional' in p.cli).sort((a, b) => positionIndex(a) - positionIndex(b));
  const options = c.params.filter((p) => 'option' in p.cli);
  const trailing = c.params.filter((p) => 'afterDoubleDash' in p.cli);
  return [...positionals, ...options, ...trailing];
}

/** The argument a given switch passes: `--option`, or `--no-option` for a negated one. */
export function switchArg(p: ParamSpec): string {
  if (p.type !== 'switch' || !('option' in p.cli)) throw new Error(`-${p.name} is not a switch option`);
  return p.cli.negated ? `--no-${p.cli.option}` : `--${p.cli.option}`;
}

/** The arguments the module passes to shadowfs for a call with these bound parameters. */
export function buildArgv(c: CmdletSpec, bound: Bound, io: PassIo): string[] {
  const argv = [...c.command, '--json'];
  const trailing: string[] = [];
  for (const p of argvOrder(c)) {
    if (!Object.prototype.hasOwnProperty.call(bound, p.name)) continue;
    const v = bound[p.name];
    if (p.type === 'switch') {
      if (v === true) argv.push(switchArg(p));
      continue;
    }
    const raw = Array.isArray(v) ? v.map(String) : [String(v)];
    const values = raw.map((x) => (p.pass === 'fullPath' ? io.fullPath(x) : p.pass === 'tempFile' ? io.tempFile(x) : x));
    if ('positional' in p.cli) argv.push(...values);
    else if ('option' in p.cli) for (const x of values) argv.push(`--${p.cli.option}`, x);
    else if ('afterDoubleDash' in p.cli) trailing.push(...values);
  }
  if (trailing.length) argv.push('--', ...trailing);
  return argv;
}

/**
 * ValueFromPipelineByPropertyName: which parameters an object piped into the cmdlet binds (its
 * property of the parameter's name or one of its aliases, case-insensitive, as PowerShell does).
 */
export function bindFromPipeline(c: CmdletSpec, input: Record<string, unknown>): Bound {
  const bound: Bound = {};
  const keys = Object.keys(input);
  for (const p of c.params) {
    if (!p.pipeline) continue;
    for (const name of [p.name, ...(p.aliases ?? [])]) {
      const key = keys.find((k) => k.toLowerCase() === name.toLowerCase());
      if (key === undefined || input[key] === undefined || input[key] === null) continue;
      bound[p.name] = input[key] as Bound[string];
      break;
    }
  }
  return bound;
}

/** An object the module emits: its properties and the type name it puts first. */
export interface Emitted {
  typeName?: string;
  value: unknown;
}

export interface ModuleError {
  /** The ErrorRecord's id: the shadowfs code (USAGE, CLI_FAILED when the CLI printed none). */
  id: string;
  /** What PowerShell shows as FullyQualifiedErrorId for an error an advanced function writes. */
  fullyQualifiedErrorId: string;
  category: string;
  message: string;
}

export interface CallOutcome {
  emitted: Emitted[];
  errors: ModuleError[];
  warnings: string[];
}

/** Mirrors Invoke-ShadowFSCli: JSON lines of standard output, then errors and warnings. */
export function interpretCli(
  c: CmdletSpec,
  out: { stdout: string; stderr: string; status: number },
  bound: Bound,
  categories: Record<string, string>,
  exitMeanings: Record<number, string>,
): CallOutcome {
  const errors: ModuleError[] = [];
  const warnings: string[] = [];
  const results: Record<string, unknown>[] = [];
  const error = (id: string, message: string): void =>
    void errors.push({ id, fullyQualifiedErrorId: `${id},${c.name}`, category: categories[id] ?? 'NotSpecified', message });
  const stderrLines = out.stderr.split(/\r?\n/).filter((l) => l.length > 0);
  let parsed = 0;
  for (const line of out.stdout.split(/\r?\n/)) {
    if (!line.startsWith('{')) continue;
    parsed++;
    const obj = JSON.parse(line) as Record<string, unknown>;
    const problem = obj.error as { code?: unknown; message?: unknown } | undefined;
    if (out.status !== 0 && problem && typeof problem === 'object' && problem.code !== undefined)
      error(String(problem.code), String(problem.message));
    else results.push(obj);
  }
  if (parsed === 0 && out.status !== 0) {
    error(out.status === 2 ? 'USAGE' : 'CLI_FAILED', stderrLines.join('\n') || `shadowfs exited with status ${out.status}`);
  } else {
    warnings.push(...stderrLines);
    if (out.status !== 0 && results.length && !c.exitStatusIsResult)
      warnings.push(`shadowfs exited with status ${out.status}: ${exitMeanings[out.status] ?? 'see its result'}`);
  }
  const emitted = results.flatMap((r) => shape(c, r, bound));
  // Get-ShadowLayer -Shadow X when the list has no such shadow.
  if (shapeFor(c, bound).kind === 'layers' && bound.Shadow !== undefined && results.length > 0) {
    const want = String(bound.Shadow);
    const shadows = results.flatMap((r) => r.shadows as { name: string; mountPoint: string }[]);
    if (!shadows.some((f) => f.name === want || f.mountPoint.toLowerCase() === want.toLowerCase()))
      error('UNKNOWN_SHADOW', `no shadow has the name or mount point '${want}'`);
  }
  return { emitted, errors, warnings };
}

/** The output shape in force for these bound parameters. */
export function shapeFor(c: CmdletSpec, bound: Bound): OutputShape {
  const o = c.output;
  if ('whenBound' in o)
    return Object.prototype.hasOwnProperty.call(bound, o.whenBound) && bound[o.whenBound] !== false ? o.then : o.otherwise;
  return o;
}

function withAdded(value: unknown, add: string[] | undefined, bound: Bound): unknown {
  if (!add || typeof value !== 'object' || value === null) return value;
  const v = value as Record<string, unknown>;
  for (const name of add) {
    if (Object.keys(v).some((k) => k.toLowerCase() === name.toLowerCase())) continue;
    if (Object.prototype.hasOwnProperty.call(bound, name)) v[name] = bound[name];
  }
  return v;
}

/** Mirrors the output part of each generated function. */
export function shape(c: CmdletSpec, result: Record<string, unknown>, bound: Bound): Emitted[] {
  const s = shapeFor(c, bound);
  switch (s.kind) {
    case 'none':
      return [];
    case 'object':
      return [{ typeName: s.type, value: withAdded(result, s.add, bound) }];
    case 'value':
      return [{ value: result[s.property] }];
    case 'items': {
      const items = result[s.property];
      if (!Array.isArray(items)) throw new Error(`${c.name}: the result has no array ${s.property}`);
      return items.map((i) => (s.type ? { typeName: s.type, value: withAdded(i, s.add, bound) } : { value: i }));
    }
    case 'layers': {
      const shadows = result.shadows as { name: string; mountPoint: string; agents: string[]; active: string | null }[];
      const want = bound.Shadow;
      return shadows
        .filter((f) => want === undefined || f.name === want || f.mountPoint.toLowerCase() === String(want).toLowerCase())
        .flatMap((f) =>
          f.agents.map((a) => ({
            typeName: 'ShadowFS.Layer',
            value: { Shadow: f.name, Agent: a, Active: a === f.active, MountPoint: f.mountPoint },
          })),
        );
    }
  }
}
