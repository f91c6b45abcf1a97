// The ShadowFS PowerShell module as data: each cmdlet names the CLI command it runs (always with
// --json), how each of its parameters reaches that command's positionals and options, and what
// it makes of the JSON the command prints. render.ts turns this table into ShadowFS.psm1 and
// ShadowFS.psd1; invocation.ts reads it the way the module does, so the tests can run the
// exact command lines against the real CLI.
import type { MethodName } from '../../src/protocol/methods';

/** PowerShell parameter types the module uses. */
export type PsType = 'string' | 'string[]' | 'int' | 'double' | 'switch';

/** Where a parameter's value goes on the command line. */
export type CliBinding =
  /** The value (each value, for string[]) at the CLI's positional of that name. */
  | { positional: string }
  /** `--option value` (string[]: the option once per value); a switch: `--option` when given, `--no-option` when negated. */
  | { option: string; negated?: boolean }
  /** The values after `--` (the CLI's positional of that name, e.g. run's command). */
  | { afterDoubleDash: string }
  /** Not passed to the CLI: the module itself uses it (the reason says how). */
  | { module: string };

export interface ParamSpec {
  /** PowerShell name, PascalCase. */
  name: string;
  type: PsType;
  cli: CliBinding;
  mandatory?: boolean;
  position?: number;
  /** 'property': ValueFromPipelineByPropertyName; 'value': ValueFromPipeline too. */
  pipeline?: 'property' | 'value';
  aliases?: string[];
  /** Parameter set (absent: every set). */
  set?: string;
  /**
   * 'fullPath': a path of this machine, made absolute against PowerShell's current location
   * before it is passed (the CLI would take it relative to the process's own directory).
   * 'tempFile': the text is written to a UTF-8 temporary file whose path is passed (no quoting
   * or code page trouble on the way to the CLI); the file is deleted afterwards.
   */
  pass?: 'fullPath' | 'tempFile';
  /** [AllowEmptyString()]: an empty string is a value (a mandatory parameter refuses it otherwise). */
  allowEmpty?: boolean;
  /** Help text; default: the protocol's description of the parameter of the same name, else the CLI's. */
  help?: string;
  /** The protocol parameter whose description is the help text, when its name differs. */
  protocolParam?: string;
}

/** What the cmdlet emits for each JSON result the CLI prints. */
export type OutputShape =
  /** The result itself. */
  | { kind: 'object'; type: string; add?: string[] }
  /** Each element of an array property of the result; without a type, the elements as they are (strings). */
  | { kind: 'items'; property: string; type?: string; add?: string[] }
  /** One property of the result as it is (a string). */
  | { kind: 'value'; property: string }
  /** `list`'s shadows as one ShadowFS.Layer per agent (optionally of one shadow only). */
  | { kind: 'layers' }
  /** Nothing: the command's result only repeats what was asked. */
  | { kind: 'none' };
/** `add`: parameters whose values are added to each object (when it has no such property), so it can be piped on. */
export type OutputSpec = OutputShape | { whenBound: string; then: OutputShape; otherwise: OutputShape };

export interface CmdletSpec {
  /** Verb-Noun, with an approved verb. */
  name: string;
  /**
   * Names this cmdlet had before (issue #30's renames), still exported as aliases of it for one
   * release so scripts keep working; docs/windows.md lists them.
   */
  formerNames?: string[];
  /** The CLI command's words. */
  command: string[];
  /** The protocol request the command makes (its summary is part of the description). */
  method?: MethodName;
  /** Default: the CLI command's description. */
  synopsis?: string;
  description: string;
  /** For cmdlets that change something: ShouldProcess's action and target, and ConfirmImpact. */
  changes?: { impact: 'Low' | 'Medium' | 'High'; action: string; target: string };
  /** A switch with which the command changes nothing (a dry run): no ShouldProcess then. */
  noChangeWith?: string;
  defaultSet?: string;
  params: ParamSpec[];
  output: OutputSpec;
  /** The CLI's exit status is part of the result (the run command's own status, "not running"). */
  exitStatusIsResult?: boolean;
  examples: { code: string; remarks: string }[];
}

// ---- parameters several cmdlets share -------------------------------------------------------

const shadowPos = (extra: Partial<ParamSpec> = {}): ParamSpec => ({
  name: 'Shadow',
  type: 'string',
  cli: { positional: 'shadow' },
  mandatory: true,
  position: 0,
  pipeline: 'property',
  ...extra,
});
const agentPos = (extra: Partial<ParamSpec> = {}): ParamSpec => ({
  name: 'Agent',
  type: 'string',
  cli: { positional: 'agent' },
  mandatory: true,
  position: 1,
  pipeline: 'property',
  ...extra,
});
const agentOpt = (extra: Partial<ParamSpec> = {}): ParamSpec => ({ ...agentPos(extra), cli: { option: 'agent' } });
const layerPath = (extra: Partial<ParamSpec> = {}): ParamSpec => ({
  name: 'Path',
  type: 'string',
  cli: { positional: 'path' },
  mandatory: true,
  position: 2,
  pipeline: 'property',
  ...extra,
});
const pathList: ParamSpec = {
  name: 'Path',
  type: 'string[]',
  cli: { positional: 'paths' },
  position: 2,
  protocolParam: 'paths',
  help: 'Only these files or directories (relative to the shadow root, "/"-separated); default: everything the layer changed.',
};
const includeIgnored: ParamSpec = { name: 'IncludeIgnored', type: 'switch', cli: { option: 'include-ignored' } };
const limit: ParamSpec = {
  name: 'Limit',
  type: 'int',
  cli: { option: 'limit' },
  help: 'At most this many entries; the result says when there were more.',
};
const agentAdd = ['Shadow', 'Agent'];

// ---- the cmdlets ---------------------------------------------------------------------------

export const CMDLETS: CmdletSpec[] = [
  {
    name: 'Mount-ShadowFolder',
    command: ['mount'],
    method: 'mount',
    synopsis: 'Mounts a shadow of a folder: reads pass through live, writes stay in memory',
    description:
      'The daemon (started when it is not running) mounts a shadow of the folder: reads show the folder live, writes go to in-memory layers, one per agent, and never reach the folder. The folder is never written.',
    changes: { impact: 'Low', action: 'Mount a shadow', target: 'folder $($Path)' },
    params: [
      {
        name: 'Path',
        type: 'string',
        cli: { positional: 'folder' },
        mandatory: true,
        position: 0,
        pipeline: 'value',
        aliases: ['FullName', 'Folder'],
        pass: 'fullPath',
        help: 'The folder to shadow (never written). A Get-Item result can be piped in.',
      },
      { name: 'MountPoint', type: 'string', cli: { option: 'at' }, pass: 'fullPath' },
      { name: 'Name', type: 'string', cli: { option: 'name' } },
      { name: 'CacheTimeout', type: 'double', cli: { option: 'cache-timeout' } },
      { name: 'Backend', type: 'string', cli: { option: 'backend' } },
      { name: 'Io', type: 'string', cli: { option: 'io' } },
      { name: 'AllowOther', type: 'switch', cli: { option: 'allow-other' } },
      { name: 'WritableGit', type: 'switch', cli: { option: 'writable-git' } },
    ],
    output: { kind: 'object', type: 'ShadowFS.Folder' },
    examples: [
      { code: 'Mount-ShadowFolder -Path C:\\src\\myproject -Name myproject', remarks: 'Mounts a shadow of the folder, named myproject.' },
      {
        code: 'Get-Item .\\myproject | Mount-ShadowFolder | Get-ShadowLayer',
        remarks: 'Mounts the folder and lists its (still empty) layers.',
      },
    ],
  },
  {
    name: 'Dismount-ShadowFolder',
    command: ['unmount'],
    method: 'unmount',
    description: "Unmounts a shadow and drops its layers (every agent's changes go with them; the folder is untouched).",
    changes: { impact: 'Medium', action: 'Unmount and drop its layers', target: 'shadow $($Shadow)' },
    params: [shadowPos({ aliases: ['Name'] }), { name: 'Lazy', type: 'switch', cli: { option: 'lazy' } }],
    output: { kind: 'none' },
    examples: [
      { code: 'Dismount-ShadowFolder -Shadow myproject', remarks: 'Unmounts the shadow named myproject.' },
      { code: 'Get-ShadowFolder | Dismount-ShadowFolder -Lazy', remarks: 'Unmounts every shadow, even those programs still use.' },
    ],
  },
  {
    name: 'Get-ShadowFolder',
    command: ['list'],
    method: 'list',
    description: 'One object per shadow the daemon serves: its Name, the folder, the mount point, the active layer and the agents.',
    params: [],
    output: { kind: 'items', property: 'shadows', type: 'ShadowFS.Folder' },
    examples: [{ code: 'Get-ShadowFolder', remarks: 'Lists the shadows.' }],
  },
  {
    name: 'Get-ShadowStatus',
    command: ['status'],
    method: 'status',
    description:
      'Whether the daemon runs (running), its pid, endpoint and log file, its shadows, and the stale mounts it cleaned. It is not started for this.',
    params: [],
    output: { kind: 'object', type: 'ShadowFS.Status' },
    exitStatusIsResult: true,
    examples: [{ code: '(Get-ShadowStatus).running', remarks: 'True when the daemon runs.' }],
  },
  {
    name: 'Stop-ShadowDaemon',
    command: ['stop'],
    method: 'shutdown',
    description:
      'Stops the daemon and waits until it has gone: shell sessions are hung up, every layer is saved and every shadow unmounted (mounting a folder again brings its layers back). Nothing to stop is no error. Use it before upgrading or uninstalling shadowfs.',
    changes: { impact: 'Medium', action: 'Stop the daemon (layers saved, shadows unmounted)', target: 'the shadowfs daemon' },
    params: [{ name: 'Timeout', type: 'int', cli: { option: 'timeout' }, help: 'Seconds to wait for the daemon to be gone (default 60).' }],
    output: { kind: 'object', type: 'ShadowFS.DaemonStop' },
    examples: [{ code: 'Stop-ShadowDaemon', remarks: 'Stops the daemon; the next shadowfs command starts a new one.' }],
  },
  {
    name: 'Get-ShadowMemoryUsage',
    command: ['stats'],
    method: 'stats',
    description:
      "What each agent's layer of a shadow holds in the daemon's memory and spilled to disk (layers), and the daemon's memory budget for layer contents, shared by every shadow (budget).",
    params: [shadowPos()],
    output: { kind: 'object', type: 'ShadowFS.MemoryUsage' },
    examples: [{ code: '(Get-ShadowMemoryUsage myproject).budget', remarks: 'The budget, and how much of it layer contents use now.' }],
  },
  {
    name: 'Get-ShadowLayer',
    command: ['list'],
    method: 'list',
    synopsis: "The agents' layers of a shadow (or of every shadow), and which one the shared mount shows",
    description:
      'One ShadowFS.Layer object (Shadow, Agent, Active, MountPoint) per layer, from the shadow list. Pipe them to Get-ShadowChange, Compare-ShadowLayer, Checkpoint-ShadowLayer and the other layer cmdlets.',
    params: [
      shadowPos({
        mandatory: false,
        aliases: ['Name'],
        cli: { module: 'list has no filter: the module keeps the shadow whose name or mount point this is' },
        help: 'Name or mount point of the shadow; default: every shadow. Get-ShadowFolder results can be piped in.',
      }),
    ],
    output: { kind: 'layers' },
    examples: [
      { code: 'Get-ShadowLayer -Shadow myproject', remarks: "Lists myproject's layers." },
      { code: 'Get-ShadowFolder | Get-ShadowLayer | Get-ShadowChange', remarks: 'Lists what every layer of every shadow changed.' },
    ],
  },
  {
    name: 'Set-ShadowLayerItem',
    formerNames: ['Set-ShadowOverride'],
    command: ['layer', 'write'],
    method: 'layer.write',
    synopsis: "Writes a file into an agent's layer (content from -Value or -SourcePath); the folder keeps its own",
    description:
      "Puts a file into an agent's layer: the agent (and the shared mount while its layer is active) sees this content at the path; the folder keeps its own. Give the content as a string (-Value, written as UTF-8) or as a file of this machine (-SourcePath, any bytes).",
    changes: { impact: 'Low', action: 'Write into the layer of $($Agent)', target: '$($Path) in shadow $($Shadow)' },
    defaultSet: 'Value',
    params: [
      shadowPos(),
      agentPos(),
      layerPath(),
      {
        name: 'Value',
        type: 'string',
        cli: { option: 'file' },
        pass: 'tempFile',
        allowEmpty: true,
        mandatory: true,
        set: 'Value',
        help: 'The new content, as text (written as UTF-8 without a byte order mark).',
      },
      {
        name: 'SourcePath',
        type: 'string',
        cli: { option: 'file' },
        pass: 'fullPath',
        mandatory: true,
        set: 'File',
        help: 'A file of this machine whose bytes are the new content.',
      },
      {
        name: 'Mode',
        type: 'string',
        cli: { option: 'mode' },
        help: "Permission bits in octal, e.g. 755 (default 644, or the existing file's).",
      },
    ],
    output: { kind: 'object', type: 'ShadowFS.WrittenFile', add: agentAdd },
    examples: [
      {
        code: 'Set-ShadowLayerItem -Shadow myproject -Agent alice -Path src/config.json -Value \'{ "debug": true }\'',
        remarks: "Gives alice's layer its own src/config.json.",
      },
      {
        code: 'Set-ShadowLayerItem myproject alice tools/run.sh -SourcePath .\\run.sh -Mode 755',
        remarks: 'Copies a local file into the layer as an executable.',
      },
    ],
  },
  {
    name: 'Undo-ShadowLayerItem',
    formerNames: ['Remove-ShadowOverride'],
    command: ['layer', 'revert'],
    method: 'layer.revert',
    description:
      "Reverts one path of an agent's layer, and everything under it: whatever the layer wrote, created or deleted there is dropped and the folder's own version shows through again; the rest of the layer stays. CONFLICT under a directory the layer deleted, replaced or moved (only that whole directory can be given back).",
    changes: { impact: 'Medium', action: 'Drop the change of $($Agent)', target: '$($Path) in shadow $($Shadow)' },
    params: [shadowPos(), agentPos(), layerPath()],
    output: { kind: 'none' },
    examples: [
      {
        code: 'Undo-ShadowLayerItem -Shadow myproject -Agent alice -Path src/config.json',
        remarks: "Gives back the folder's src/config.json to alice.",
      },
      {
        code: "Get-ShadowChange myproject alice | Where-Object path -like 'dist/*' | Undo-ShadowLayerItem",
        remarks: 'Drops every change alice made under dist/.',
      },
    ],
  },
  {
    name: 'Remove-ShadowItem',
    command: ['layer', 'rm'],
    method: 'layer.remove',
    description: "Deletes a file or a directory tree as an agent's layer shows it; the folder keeps it.",
    changes: { impact: 'Medium', action: 'Delete in the layer of $($Agent)', target: '$($Path) in shadow $($Shadow)' },
    params: [shadowPos(), agentPos(), layerPath()],
    output: { kind: 'none' },
    examples: [{ code: 'Remove-ShadowItem -Shadow myproject -Agent alice -Path build', remarks: "Deletes build/ in alice's layer only." }],
  },
  {
    name: 'Reset-ShadowLayer',
    command: ['layer', 'reset'],
    method: 'layer.reset',
    description: "Drops every change of an agent's layer: it shows the folder exactly again. The layer itself stays.",
    changes: { impact: 'Medium', action: 'Drop every change', target: 'layer $($Agent) of shadow $($Shadow)' },
    params: [shadowPos(), agentPos()],
    output: { kind: 'none' },
    examples: [
      { code: 'Reset-ShadowLayer -Shadow myproject -Agent alice', remarks: "Empties alice's layer." },
      { code: 'Get-ShadowLayer myproject | Reset-ShadowLayer -WhatIf', remarks: 'Shows which layers would be emptied.' },
    ],
  },
  {
    name: 'Remove-ShadowLayer',
    command: ['layer', 'drop'],
    method: 'layer.drop',
    description: "Drops an agent's layer and everything it holds (LAYER_BUSY while it is active or has a view open).",
    changes: { impact: 'Medium', action: 'Drop the layer and its changes', target: 'layer $($Agent) of shadow $($Shadow)' },
    params: [shadowPos(), agentPos()],
    output: { kind: 'none' },
    examples: [{ code: 'Remove-ShadowLayer -Shadow myproject -Agent alice', remarks: "Drops alice's layer." }],
  },
  {
    name: 'Copy-ShadowLayer',
    command: ['layer', 'clone'],
    method: 'layer.clone',
    description: "Makes a new agent's layer a copy of another's (LAYER_EXISTS when the new agent has a layer already).",
    changes: { impact: 'Low', action: 'Copy to layer $($Destination)', target: 'layer $($Agent) of shadow $($Shadow)' },
    params: [
      shadowPos(),
      agentPos(),
      {
        name: 'Destination',
        type: 'string',
        cli: { positional: 'to' },
        mandatory: true,
        position: 2,
        aliases: ['To'],
        protocolParam: 'to',
        help: 'The new agent id.',
      },
    ],
    output: { kind: 'none' },
    examples: [
      { code: 'Copy-ShadowLayer -Shadow myproject -Agent alice -Destination alice-try2', remarks: "Starts alice-try2 from alice's work." },
    ],
  },
  {
    name: 'Switch-ShadowLayer',
    command: ['activate'],
    method: 'activate',
    synopsis: "Shows an agent's layer on the shared mount (-None: the folder exactly, read-only)",
    description: "Makes the shared mount show an agent's layer (created when missing), or with -None the folder exactly, read-only.",
    changes: { impact: 'Low', action: 'Show on the shared mount', target: 'shadow $($Shadow)' },
    defaultSet: 'Agent',
    params: [
      shadowPos(),
      agentPos({ set: 'Agent', help: 'The agent whose layer the shared mount shows from now on.' }),
      {
        name: 'None',
        type: 'switch',
        cli: { option: 'none' },
        mandatory: true,
        set: 'None',
        help: 'Show no layer: the folder exactly, read-only.',
      },
    ],
    output: { kind: 'object', type: 'ShadowFS.Activation', add: ['Shadow'] },
    examples: [
      { code: 'Switch-ShadowLayer -Shadow myproject -Agent alice', remarks: "The mount point shows alice's layer." },
      { code: 'Switch-ShadowLayer -Shadow myproject -None', remarks: 'The mount point shows the folder, read-only.' },
    ],
  },
  {
    name: 'Open-ShadowView',
    command: ['view', 'open'],
    method: 'view.open',
    description: "Mounts a second, private view of the shadow that always shows one agent's layer, whatever the shared mount shows.",
    changes: { impact: 'Low', action: 'Mount a view of the layer of $($Agent)', target: 'shadow $($Shadow)' },
    params: [shadowPos(), agentPos(), { name: 'MountPoint', type: 'string', cli: { option: 'at' }, pass: 'fullPath' }],
    output: { kind: 'object', type: 'ShadowFS.View', add: ['Shadow'] },
    examples: [
      {
        code: '$view = Open-ShadowView -Shadow myproject -Agent alice',
        remarks: "Mounts a view of alice's layer; $view.mountPoint is where.",
      },
    ],
  },
  {
    name: 'Close-ShadowView',
    command: ['view', 'close'],
    method: 'view.close',
    description: 'Unmounts a view opened with Open-ShadowView.',
    changes: { impact: 'Low', action: 'Unmount view $($View)', target: 'shadow $($Shadow)' },
    params: [
      shadowPos(),
      {
        name: 'View',
        type: 'int',
        cli: { positional: 'view' },
        mandatory: true,
        position: 1,
        pipeline: 'property',
        aliases: ['Id'],
        help: 'The view id Open-ShadowView returned (its view property).',
      },
      {
        name: 'Lazy',
        type: 'switch',
        cli: { option: 'lazy' },
        help: 'Detach now even if programs still use the view; it goes when they are done.',
      },
    ],
    output: { kind: 'none' },
    examples: [{ code: 'Open-ShadowView myproject alice | Close-ShadowView', remarks: 'Opens a view and closes it again.' }],
  },
  {
    name: 'Invoke-ShadowCommand',
    command: ['run'],
    method: 'run',
    synopsis: "Runs a command inside a shadow with an agent's layer",
    description:
      "Runs a command inside the shadow with the agent's layer (taking turns with other agents on the shared mount, or in the agent's view if it has one); what it writes stays in the layer. Returns its exit code, output and timings once it ends.",
    changes: { impact: 'Low', action: 'Run $($Command -join " ") as $($Agent)', target: 'shadow $($Shadow)' },
    params: [
      shadowPos(),
      agentOpt(),
      {
        name: 'Command',
        type: 'string[]',
        cli: { afterDoubleDash: 'command' },
        mandatory: true,
        position: 2,
        protocolParam: 'argv',
        help: 'The program and its arguments, one element each (no shell unless -Shell).',
      },
      { name: 'WorkingDirectory', type: 'string', cli: { option: 'cwd' } },
      { name: 'Environment', type: 'string[]', cli: { option: 'env' }, protocolParam: 'env' },
      {
        name: 'TimeoutSec',
        type: 'string',
        cli: { option: 'timeout' },
        help: 'Seconds the command may run once it has the shadow (default 600); 0 or none: no limit.',
      },
      { name: 'DiscardWrites', type: 'switch', cli: { option: 'discard-writes' } },
      { name: 'Shell', type: 'switch', cli: { option: 'shell' }, help: 'Run the first element of -Command as a shell command line.' },
      {
        name: 'NoOriginalPath',
        type: 'switch',
        cli: { option: 'original-path', negated: true },
        help: "Linux: do not show the shadow at the folder's own path; the command then runs unprotected (it could write the folder through its absolute path).",
      },
      { name: 'Unprotected', type: 'switch', cli: { option: 'unprotected' } },
      { name: 'NoNetwork', type: 'switch', cli: { option: 'network', negated: true } },
      {
        name: 'Memory',
        type: 'string',
        cli: { option: 'memory' },
        protocolParam: 'limits',
        help: 'Memory limit of the whole run, e.g. 512M or 2G; past it the run is killed.',
      },
      { name: 'MaxProcesses', type: 'int', cli: { option: 'max-processes' }, protocolParam: 'limits' },
      { name: 'Cpus', type: 'double', cli: { option: 'cpus' }, protocolParam: 'limits' },
    ],
    output: { kind: 'object', type: 'ShadowFS.RunResult', add: agentAdd },
    exitStatusIsResult: true,
    examples: [
      {
        code: 'Invoke-ShadowCommand -Shadow myproject -Agent alice -Command "npm", "test"',
        remarks: "Runs npm test on alice's version of the project.",
      },
      {
        code: "(Invoke-ShadowCommand myproject alice -Command 'node', '-e', 'console.log(1)' -TimeoutSec 60).stdout",
        remarks: 'Prints what the command wrote to its standard output.',
      },
    ],
  },
  {
    name: 'Get-ShadowLint',
    formerNames: ['Get-ShadowDiagnostic'],
    command: ['lints'],
    method: 'lints',
    description:
      "What the language servers (TypeScript/JavaScript, Python, and configured ones) say about an agent's change, one object per file: status (fresh, timeout, unsupported, error), the diagnostics the change introduced, and those the folder has too.",
    params: [
      shadowPos(),
      agentOpt(),
      {
        ...pathList,
        help: "Files to check (relative to the shadow root); default: every file the agent's layer changed.",
      },
      { name: 'TimeoutMilliseconds', type: 'int', cli: { option: 'timeout' }, protocolParam: 'timeoutMs' },
      { name: 'QuickFix', type: 'switch', cli: { option: 'quick-fixes' }, protocolParam: 'quickFixes' },
    ],
    output: { kind: 'items', property: 'files', type: 'ShadowFS.FileDiagnostics', add: agentAdd },
    examples: [
      { code: 'Get-ShadowLint -Shadow myproject -Agent alice', remarks: "Checks every file alice's layer changed." },
      {
        code: 'Get-ShadowLint myproject alice src/app.ts | ForEach-Object introduced',
        remarks: 'The problems alice introduced in src/app.ts.',
      },
    ],
  },
  {
    name: 'Compare-ShadowLayer',
    command: ['diff'],
    method: 'layer.diff',
    description:
      "A unified diff of an agent's layer against the folder as it is now (renames detected, binary files named). With -Stat, one object per changed file instead.",
    params: [
      shadowPos(),
      agentOpt(),
      pathList,
      includeIgnored,
      {
        name: 'Stat',
        type: 'switch',
        cli: { option: 'stat' },
        help: 'Emit one object per changed file (path, status, additions, deletions) instead of the diff text.',
      },
    ],
    output: {
      whenBound: 'Stat',
      then: { kind: 'items', property: 'files', type: 'ShadowFS.FileDiff', add: agentAdd },
      otherwise: { kind: 'value', property: 'text' },
    },
    examples: [
      { code: 'Compare-ShadowLayer -Shadow myproject -Agent alice', remarks: 'Prints the diff.' },
      { code: 'Get-ShadowLayer myproject | Compare-ShadowLayer -Stat', remarks: 'Lists the files every layer changed, with line counts.' },
    ],
  },
  {
    name: 'Export-ShadowPatch',
    command: ['patch'],
    method: 'layer.patch',
    description:
      "A git-format patch of an agent's layer (binary files included) that git apply in a clean checkout of the folder reproduces byte for byte: to the pipeline as text, or to a file with -OutFile.",
    changes: { impact: 'Low', action: 'Export the changes of $($Agent)', target: 'shadow $($Shadow)' },
    params: [
      shadowPos(),
      agentOpt(),
      pathList,
      includeIgnored,
      {
        name: 'OutFile',
        type: 'string',
        cli: { option: 'output' },
        pass: 'fullPath',
        help: 'Write the patch to this file; the cmdlet then emits a ShadowFS.Patch object (files, skipped) instead of the text.',
      },
    ],
    output: {
      whenBound: 'OutFile',
      then: { kind: 'object', type: 'ShadowFS.Patch', add: agentAdd },
      otherwise: { kind: 'value', property: 'text' },
    },
    examples: [
      {
        code: 'Export-ShadowPatch -Shadow myproject -Agent alice -OutFile alice.patch',
        remarks: "Saves alice's work as a patch for git apply.",
      },
      { code: 'Export-ShadowPatch myproject alice | git apply --check', remarks: 'Checks that the patch applies.' },
    ],
  },
  {
    name: 'Merge-ShadowLayer',
    command: ['apply'],
    method: 'layer.apply',
    description:
      "WRITES THE AGENT'S CHANGES INTO YOUR FOLDER - the one cmdlet that writes the folder. Each file is written beside and renamed over; applied paths leave the layer. A file you changed since the agent took its copy is a conflict: nothing is written for it until you resolve it with -Take, -Keep or -Merged (the result's conflicts carry the three-way merge). -DryRun writes nothing and asks no confirmation.",
    changes: { impact: 'High', action: "Write the agent's changes into the folder", target: 'shadow $($Shadow), agent $($Agent)' },
    noChangeWith: 'DryRun',
    params: [
      shadowPos(),
      agentOpt(),
      { ...pathList, help: 'Only these files or directories (relative to the shadow root); default: every change of the layer.' },
      { name: 'DryRun', type: 'switch', cli: { option: 'dry-run' } },
      { name: 'AllowTypeChanges', type: 'switch', cli: { option: 'allow-type-changes' } },
      { name: 'Take', type: 'string[]', cli: { option: 'take' } },
      { name: 'Keep', type: 'string[]', cli: { option: 'keep' } },
      { name: 'Merged', type: 'string[]', cli: { option: 'merged' } },
      includeIgnored,
      { name: 'Branch', type: 'string', cli: { option: 'branch' } },
      { name: 'Force', type: 'switch', cli: { option: 'force' } },
      {
        name: 'MarkConflicts',
        type: 'switch',
        cli: { option: 'mark-conflicts' },
        help: "Write each conflicting file with conflict markers into the agent's layer, to resolve there; your folder is not written.",
      },
      {
        name: 'Hunk',
        type: 'string[]',
        cli: { option: 'hunk' },
        help: "Apply only these hunks (ids that layer.hunks lists), plus the paths named; the layer keeps the rest of each file's change.",
      },
      {
        name: 'MergeTool',
        type: 'string',
        cli: { option: 'merge-tool' },
        help: "Open each conflicting text file in this merge tool (git's name, as meld or vscode, or one set with git config mergetool.NAME.cmd) and write what you resolve there.",
      },
    ],
    output: { kind: 'object', type: 'ShadowFS.ApplyResult', add: agentAdd },
    examples: [
      { code: 'Merge-ShadowLayer -Shadow myproject -Agent alice -DryRun', remarks: 'Shows what would be written, writes nothing.' },
      {
        code: 'Merge-ShadowLayer myproject alice -Take src/a.js -Confirm:$false',
        remarks: "Applies alice's changes, taking hers for the conflicting src/a.js.",
      },
    ],
  },
  {
    name: 'Checkpoint-ShadowLayer',
    command: ['checkpoint'],
    method: 'layer.checkpoint',
    description: "Saves an agent's layer as a named checkpoint in your state directory, where it outlives crashes and reboots.",
    changes: { impact: 'Low', action: 'Save a checkpoint', target: 'layer $($Agent) of shadow $($Shadow)' },
    params: [shadowPos(), agentOpt(), { name: 'Name', type: 'string', cli: { option: 'name' }, position: 2 }],
    output: { kind: 'object', type: 'ShadowFS.Checkpoint', add: agentAdd },
    examples: [{ code: 'Checkpoint-ShadowLayer -Shadow myproject -Agent alice -Name before-refactor', remarks: "Saves alice's layer." }],
  },
  {
    name: 'Restore-ShadowLayer',
    command: ['restore'],
    method: 'layer.restore',
    description: "Makes an agent's layer what a checkpoint holds; the layer's current changes are dropped.",
    changes: { impact: 'Medium', action: 'Replace the layer with a checkpoint', target: 'layer $($Agent) of shadow $($Shadow)' },
    params: [shadowPos(), agentOpt(), { name: 'Name', type: 'string', cli: { option: 'name' }, position: 2, pipeline: 'property' }],
    output: { kind: 'object', type: 'ShadowFS.RestoreResult', add: agentAdd },
    examples: [
      {
        code: 'Restore-ShadowLayer -Shadow myproject -Agent alice -Name before-refactor',
        remarks: "Brings alice's layer back to the checkpoint.",
      },
      {
        code: 'Get-ShadowCheckpoint myproject alice | Where-Object auto | Select-Object -Last 1 | Restore-ShadowLayer',
        remarks: 'Restores the newest autosave.',
      },
    ],
  },
  {
    name: 'Get-ShadowCheckpoint',
    command: ['checkpoints'],
    method: 'layer.checkpoints',
    description: "An agent's checkpoints for the shadow's folder, oldest first (autosaves included).",
    params: [shadowPos(), agentOpt()],
    output: { kind: 'items', property: 'checkpoints', type: 'ShadowFS.Checkpoint', add: agentAdd },
    examples: [{ code: 'Get-ShadowCheckpoint -Shadow myproject -Agent alice', remarks: "Lists alice's checkpoints." }],
  },
  {
    name: 'Get-ShadowAudit',
    command: ['audit'],
    method: 'layer.audit',
    description:
      "What an agent's programs did through the shadow (its layer's audit trail), oldest first: opens, executions, creations, writes with their byte counts, deletions, renames, with the process that did each.",
    params: [
      shadowPos(),
      agentOpt(),
      {
        name: 'Since',
        type: 'string',
        cli: { option: 'since' },
        help: 'Only entries since this time: ISO 8601, or a duration back from now (90s, 15m, 2h, 1d).',
      },
      { name: 'Path', type: 'string', cli: { option: 'path' } },
      { name: 'Op', type: 'string[]', cli: { option: 'op' }, protocolParam: 'ops' },
      { name: 'Limit', type: 'int', cli: { option: 'limit' } },
    ],
    output: { kind: 'items', property: 'entries', type: 'ShadowFS.AuditEntry', add: agentAdd },
    examples: [
      {
        code: "Get-ShadowAudit myproject -Agent alice -Since 15m -Op @('rename', 'unlink')",
        remarks: 'What alice renamed and deleted in the last quarter of an hour.',
      },
    ],
  },
  {
    name: 'Get-ShadowChange',
    command: ['layer', 'changes'],
    method: 'layer.changes',
    description:
      "What an agent's layer changed relative to the folder: one object per path (path, kind: added, modified, deleted or metadata; type; base: what the folder's file was when the layer copied it).",
    params: [shadowPos(), agentPos()],
    output: { kind: 'items', property: 'changes', type: 'ShadowFS.Change', add: agentAdd },
    examples: [
      { code: 'Get-ShadowChange -Shadow myproject -Agent alice', remarks: "Lists alice's changes." },
      { code: 'Get-ShadowLayer myproject | Get-ShadowChange | Group-Object Agent', remarks: 'Changes per agent.' },
    ],
  },
  {
    name: 'Get-ShadowContent',
    command: ['file', 'read'],
    method: 'file.read',
    synopsis: "A text file (or some of its lines) as an agent's layer shows it",
    description:
      "A text file (or some of its lines) as an agent's layer shows it, without switching the shared mount: an object with content, totalLines, startLine, endLine and binary.",
    params: [
      shadowPos(),
      agentOpt(),
      layerPath(),
      { name: 'Lines', type: 'string', cli: { option: 'lines' }, help: 'START:END (1-based, inclusive), START:, :END or START.' },
    ],
    output: { kind: 'object', type: 'ShadowFS.FileContent', add: agentAdd },
    examples: [
      { code: '(Get-ShadowContent -Shadow myproject -Agent alice -Path src/app.ts).content', remarks: "alice's version of src/app.ts." },
      {
        code: 'Get-ShadowChildItem myproject alice src | Get-ShadowContent -Lines 1:5',
        remarks: "The first lines of each file in alice's src/.",
      },
    ],
  },
  {
    name: 'Edit-ShadowContent',
    command: ['file', 'edit'],
    method: 'file.edit',
    synopsis: "Replaces exact text in a file of an agent's layer (an error when it occurs 0 or several times, unless -All)",
    description:
      "Replaces exact text in a file of an agent's layer: NO_MATCH when the text does not occur, AMBIGUOUS_MATCH when it occurs more than once (unless -All).",
    changes: { impact: 'Low', action: 'Edit in the layer of $($Agent)', target: '$($Path) in shadow $($Shadow)' },
    params: [
      shadowPos(),
      agentOpt(),
      layerPath(),
      {
        name: 'OldText',
        type: 'string',
        cli: { option: 'old-file' },
        pass: 'tempFile',
        mandatory: true,
        help: 'The exact text to replace.',
      },
      {
        name: 'NewText',
        type: 'string',
        cli: { option: 'new-file' },
        pass: 'tempFile',
        allowEmpty: true,
        mandatory: true,
        help: 'What to put instead.',
      },
      { name: 'All', type: 'switch', cli: { option: 'all' } },
    ],
    output: { kind: 'object', type: 'ShadowFS.EditResult', add: agentAdd },
    examples: [
      {
        code: "Edit-ShadowContent -Shadow myproject -Agent alice -Path src/app.ts -OldText 'debug = false' -NewText 'debug = true'",
        remarks: "Turns debugging on in alice's src/app.ts.",
      },
    ],
  },
  {
    name: 'Get-ShadowChildItem',
    command: ['file', 'ls'],
    method: 'file.list',
    description:
      "The entries of a directory as an agent's layer shows it (path, type, size), .gitignore'd ones left out unless -IncludeIgnored.",
    params: [
      shadowPos(),
      agentOpt(),
      layerPath({ mandatory: false, help: 'The directory, relative to the shadow root; default: the root.' }),
      { name: 'Recurse', type: 'switch', cli: { option: 'recursive' }, help: 'List the whole tree below the directory.' },
      limit,
      includeIgnored,
    ],
    output: { kind: 'items', property: 'entries', type: 'ShadowFS.Item', add: agentAdd },
    examples: [
      { code: 'Get-ShadowChildItem -Shadow myproject -Agent alice -Path src -Recurse', remarks: 'Everything under src/ as alice sees it.' },
    ],
  },
  {
    name: 'Find-ShadowItem',
    command: ['file', 'glob'],
    method: 'file.glob',
    description: "The paths (strings) matching a glob such as 'src/**/*.ts' as an agent's layer shows the tree.",
    params: [
      shadowPos(),
      agentOpt(),
      {
        name: 'Pattern',
        type: 'string',
        cli: { positional: 'pattern' },
        mandatory: true,
        position: 2,
        help: "A glob (* ? ** [abc] {a,b}), e.g. 'src/**/*.ts'.",
      },
      {
        name: 'Directory',
        type: 'string',
        cli: { option: 'cwd' },
        protocolParam: 'cwd',
        help: 'Match relative to this directory of the shadow.',
      },
      limit,
      includeIgnored,
    ],
    output: { kind: 'items', property: 'paths' },
    examples: [{ code: "Find-ShadowItem -Shadow myproject -Agent alice -Pattern 'src/**/*.test.ts'", remarks: "alice's test files." }],
  },
  {
    name: 'Search-ShadowContent',
    command: ['file', 'grep'],
    method: 'file.grep',
    description:
      "Searches file contents as an agent's layer shows them (a JavaScript regular expression, or fixed text with -SimpleMatch): one object per matching line (path, line, text, before, after).",
    params: [
      shadowPos(),
      agentOpt(),
      {
        name: 'Pattern',
        type: 'string',
        cli: { positional: 'pattern' },
        mandatory: true,
        position: 2,
        help: 'A JavaScript regular expression (fixed text with -SimpleMatch).',
      },
      {
        name: 'Path',
        type: 'string',
        cli: { positional: 'path' },
        position: 3,
        help: 'A file or directory to search, relative to the shadow root; default: everything.',
      },
      { name: 'Include', type: 'string', cli: { option: 'glob' }, protocolParam: 'glob' },
      { name: 'IgnoreCase', type: 'switch', cli: { option: 'ignore-case' }, help: 'Match letters whatever their case.' },
      {
        name: 'SimpleMatch',
        type: 'switch',
        cli: { option: 'fixed-strings' },
        help: 'Take the pattern as fixed text, not a regular expression.',
      },
      { name: 'Context', type: 'int', cli: { option: 'context' }, protocolParam: 'context' },
      {
        name: 'MaxMatches',
        type: 'int',
        cli: { option: 'max-matches' },
        help: 'Stop after this many matches; the result says when there were more.',
      },
      includeIgnored,
    ],
    output: { kind: 'items', property: 'matches', type: 'ShadowFS.Match', add: agentAdd },
    examples: [
      {
        code: "Search-ShadowContent -Shadow myproject -Agent alice -Pattern 'TODO' -Include '*.ts' -Context 1",
        remarks: "TODOs in alice's TypeScript files.",
      },
    ],
  },
  {
    name: 'Test-ShadowEnvironment',
    command: ['doctor'],
    description:
      'Checks what shadowfs needs on this machine (the FUSE device or WinFsp, fusermount3, the kernel, the native module, the daemon): an object with healthy and one check per item (name, ok, required, detail).',
    params: [],
    output: { kind: 'object', type: 'ShadowFS.EnvironmentCheck' },
    exitStatusIsResult: true,
    examples: [{ code: '(Test-ShadowEnvironment).checks | Where-Object { -not $_.ok }', remarks: 'What is missing.' }],
  },
];

/**
 * CLI commands no cmdlet runs, and why. The tests check that every other command has one.
 */
export const UNMAPPED_COMMANDS: Record<string, string> = {
  serve: 'runs the daemon itself, which every other command starts when it is not running',
  mcp: "an MCP server on standard input/output for an agent's client; it prints no --json result a pipeline could use",
  demo: 'a demonstration on its own example project, for people',
  shell:
    'an interactive terminal session: it owns the console it runs in and prints no --json result a pipeline could use (and sessions are Linux-only so far)',
  radar:
    'new with the conflict radar (#32); a Get-ShadowOverlap cmdlet is still to be written (its --watch prints until Ctrl-C, which a pipeline cannot use)',
  review:
    'asks at a terminal, hunk by hunk; its --list --json (layer.hunks) and --rejections (layer.rejections) have no cmdlet yet: Merge-ShadowLayer -Hunk applies the ids it lists',
  'layer cat': 'raw bytes (base64 in --json); Get-ShadowContent reads text, and Set-ShadowLayerItem/Export-ShadowPatch carry binary files',
  'file write': 'Set-ShadowLayerItem (layer write) writes the same, and any bytes, with a mode',
  mask: 'masked paths (#32) are newer than the module: a Get-/Set-ShadowMask pair is still to be written; run shadowfs mask meanwhile',
};

/**
 * Options of mapped commands that no parameter passes, and why ("command --option"). --json is
 * always passed by the module; --help and --version are yargs' own.
 */
export const UNMAPPED_OPTIONS: Record<string, string> = {
  'mount --foreground': 'mounts in the calling process until Ctrl-C; the module mounts through the daemon',
  'apply --show-merge': "changes the human output only; the JSON result's conflicts carry the merge",
  'run --at-original-path': 'hidden: the old name of what is the default now',
  'file edit --old': '-OldText goes through --old-file (a temporary file): no command-line quoting between it and shadowfs',
  'file edit --new': '-NewText goes through --new-file, for the same reason',
  'lints --edit': "writes the agent's layer, which a Get- cmdlet must not; write with Set-ShadowLayerItem first",
};

export function findCmdlet(name: string): CmdletSpec {
  const c = CMDLETS.find((x) => x.name === name);
  if (!c) throw new Error(`no cmdlet ${name}`);
  return c;
}
