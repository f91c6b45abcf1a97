// Renders the ShadowFS PowerShell module from the cmdlet table: ShadowFS.psm1 (one advanced
// function per cmdlet plus a few private helpers that run shadowfs) and ShadowFS.psd1 (the
// manifest). The output is ASCII only: Windows PowerShell 5.1 reads a file without a byte order
// mark in the ANSI code page, which agrees with UTF-8 on ASCII and on nothing else.
//
// The code is written in the form tree-sitter-powershell parses without error (the tests parse
// it): a newline after every param block, after every clause of a block, never a bare-word list
// as a command argument.
import { protocolDocument } from '../../src/protocol';
import { ErrorCodes } from '../../src/protocol/errors';
import { ExitCode } from '../../src/cli/output';
import { findCliCommand } from './cli-spec';
import { CMDLETS, type CmdletSpec, type OutputShape, type ParamSpec } from './cmdlets';
import { argvOrder, switchArg } from './invocation';

/** The module's identity in the PowerShell Gallery and in Import-Module: never change it. */
export const MODULE_GUID = 'be982e79-6c69-43ab-83b4-a69b63eaa25d';

/** PowerShell's ErrorCategory names (System.Management.Automation.ErrorCategory). */
export const ERROR_CATEGORIES = [
  'NotSpecified',
  'OpenError',
  'CloseError',
  'DeviceError',
  'DeadlockDetected',
  'InvalidArgument',
  'InvalidData',
  'InvalidOperation',
  'InvalidResult',
  'InvalidType',
  'MetadataError',
  'NotImplemented',
  'NotInstalled',
  'ObjectNotFound',
  'OperationStopped',
  'OperationTimeout',
  'SyntaxError',
  'ParserError',
  'PermissionDenied',
  'ResourceBusy',
  'ResourceExists',
  'ResourceUnavailable',
  'ReadError',
  'WriteError',
  'FromStdErr',
  'SecurityError',
  'ProtocolError',
  'ConnectionError',
  'AuthenticationError',
  'LimitsExceeded',
  'QuotaExceeded',
  'NotEnabled',
] as const;
export type ErrorCategory = (typeof ERROR_CATEGORIES)[number];

/**
 * The ErrorRecord category for each shadowfs error code, plus the module's own ids: USAGE (the
 * CLI refused the command line), CLI_FAILED (it failed without a JSON error), SHADOWFS_NOT_FOUND.
 */
export const ERROR_CATEGORY: Record<keyof typeof ErrorCodes | 'USAGE' | 'CLI_FAILED' | 'SHADOWFS_NOT_FOUND', ErrorCategory> = {
  INVALID_PATH: 'InvalidArgument',
  INVALID_ARGUMENT: 'InvalidArgument',
  PATH_THROUGH_SYMLINK: 'InvalidArgument',
  NOT_FOUND: 'ObjectNotFound',
  IS_DIRECTORY: 'InvalidArgument',
  NOT_A_DIRECTORY: 'InvalidArgument',
  FOLDER_NOT_FOUND: 'ObjectNotFound',
  FOLDER_NOT_DIRECTORY: 'InvalidArgument',
  MOUNTPOINT_NOT_DIRECTORY: 'InvalidArgument',
  MOUNTPOINT_NOT_EMPTY: 'ResourceExists',
  MOUNTPOINT_IN_USE: 'ResourceBusy',
  MOUNTPOINT_INSIDE_FOLDER: 'InvalidArgument',
  FOLDER_INSIDE_MOUNTPOINT: 'InvalidArgument',
  // Former names, never sent now (FormerErrorCodes): the same categories as their new names.
  LOWER_NOT_FOUND: 'ObjectNotFound',
  LOWER_NOT_DIRECTORY: 'InvalidArgument',
  MOUNTPOINT_INSIDE_LOWER: 'InvalidArgument',
  LOWER_INSIDE_MOUNTPOINT: 'InvalidArgument',
  UNKNOWN_BACKEND: 'ObjectNotFound',
  FUSE_UNAVAILABLE: 'ResourceUnavailable',
  ALLOW_OTHER_DENIED: 'PermissionDenied',
  MOUNT_FAILED: 'DeviceError',
  MOUNT_BUSY: 'ResourceBusy',
  NOT_MOUNTED: 'InvalidOperation',
  UNKNOWN_AGENT: 'ObjectNotFound',
  UNKNOWN_SHADOW: 'ObjectNotFound',
  DAEMON_UNAVAILABLE: 'ConnectionError',
  DAEMON_RUNNING: 'ResourceExists',
  PEER_REFUSED: 'SecurityError',
  SCOPE_DENIED: 'PermissionDenied',
  PATH_MASKED: 'PermissionDenied',
  PATH_PROTECTED: 'PermissionDenied',
  STATE_CORRUPT: 'InvalidData',
  PROTOCOL: 'ProtocolError',
  INVALID_AGENT: 'InvalidArgument',
  NO_ACTIVE_LAYER: 'InvalidOperation',
  LAYER_BUSY: 'ResourceBusy',
  LAYER_EXISTS: 'ResourceExists',
  TIMEOUT: 'OperationTimeout',
  FILE_TOO_LARGE: 'LimitsExceeded',
  POLICY_DENIED: 'PermissionDenied',
  INVALID_POLICY: 'InvalidData',
  NAMESPACE_UNAVAILABLE: 'NotEnabled',
  ABORTED: 'OperationStopped',
  NOT_SUPPORTED: 'NotImplemented',
  NATIVE_UNAVAILABLE: 'NotInstalled',
  WINFSP_MISSING: 'NotInstalled',
  CONFLICT: 'InvalidOperation',
  BRANCH_EXISTS: 'ResourceExists',
  NO_MATCH: 'ObjectNotFound',
  AMBIGUOUS_MATCH: 'InvalidArgument',
  UNKNOWN_CHECKPOINT: 'ObjectNotFound',
  INTERNAL: 'NotSpecified',
  USAGE: 'InvalidArgument',
  CLI_FAILED: 'NotSpecified',
  SHADOWFS_NOT_FOUND: 'ObjectNotFound',
};

/** What a non-zero exit status means when the CLI still printed a result (src/cli/output.ts). */
export const EXIT_MEANINGS: Record<number, string> = {
  [ExitCode.NOT_RUNNING]: 'the daemon is not running',
  [ExitCode.INTRODUCED_ERRORS]: 'the change introduced errors',
  [ExitCode.NOT_FRESH]: 'a file got no fresh answer (timeout or server error)',
  [ExitCode.CONFLICTS]: 'conflicts remain; nothing was written for them',
};

// ---- text ----------------------------------------------------------------------------------

const ASCII_FOR: Record<string, string> = {
  '\u2014': '-',
  '\u2013': '-',
  '\u2018': "'",
  '\u2019': "'",
  '\u201c': '"',
  '\u201d': '"',
  '\u2026': '...',
  '\u2192': '->',
  '\u00a0': ' ',
};

/** The text with common typography made ASCII; anything else outside ASCII is an error. */
export function ascii(text: string): string {
  const out = text.replace(/[^\x20-\x7e\n]/g, (ch) => {
    const r = ASCII_FOR[ch];
    if (r === undefined) throw new Error(`no ASCII form for ${JSON.stringify(ch)} (U+${ch.codePointAt(0)?.toString(16)}) in: ${text}`);
    return r;
  });
  return out;
}

/** A PowerShell single-quoted string: nothing in it is expanded; a quote is written twice. */
export function psQuote(s: string): string {
  return `'${ascii(s).replace(/'/g, "''")}'`;
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  for (const para of ascii(text).split('\n')) {
    let line = '';
    for (const word of para.split(/\s+/).filter(Boolean)) {
      if (line && line.length + 1 + word.length > width) {
        lines.push(line);
        line = word;
      } else line = line ? `${line} ${word}` : word;
    }
    lines.push(line);
  }
  return lines;
}

/** Comment-help text may not close the comment block. */
function helpText(text: string): string {
  return text.replace(/#>/g, '# >').replace(/<#/g, '< #');
}

function sentence(text: string): string {
  const t = text.trim();
  if (!t) return t;
  const s = t[0]?.toUpperCase() + t.slice(1);
  return /[.!?]$/.test(s) ? s : `${s}.`;
}

// ---- help text from the CLI and the protocol ------------------------------------------------

const lowerFirst = (s: string): string => (s[0]?.toLowerCase() ?? '') + s.slice(1);

let doc: ReturnType<typeof protocolDocument> | undefined;
function protocolParams(c: CmdletSpec): Record<string, { description?: string }> {
  doc ??= protocolDocument();
  const m = c.method ? doc.methods[c.method] : undefined;
  return ((m?.params as { properties?: Record<string, { description?: string }> } | undefined)?.properties ?? {}) as Record<
    string,
    { description?: string }
  >;
}

/** The CLI's description of where a parameter goes, if it has one. */
function cliDescribe(c: CmdletSpec, p: ParamSpec): string | undefined {
  const cmd = findCliCommand(c.command);
  if (!cmd) return undefined;
  if ('option' in p.cli) {
    const name = p.cli.option;
    return cmd.options.find((o) => o.name === name)?.describe;
  }
  const name = 'positional' in p.cli ? p.cli.positional : 'afterDoubleDash' in p.cli ? p.cli.afterDoubleDash : undefined;
  return cmd.positionals.find((x) => x.name === name)?.describe;
}

/** A parameter's help: the table's, else the protocol's description, else the CLI's. */
export function parameterHelp(c: CmdletSpec, p: ParamSpec): string {
  if (p.help) return p.help;
  const fromProtocol = protocolParams(c)[p.protocolParam ?? lowerFirst(p.name)]?.description;
  if (fromProtocol) return fromProtocol;
  const fromCli = cliDescribe(c, p);
  if (fromCli) return sentence(fromCli);
  throw new Error(`${c.name} -${p.name}: no help text (give one in the table)`);
}

export function synopsis(c: CmdletSpec): string {
  const s = c.synopsis ?? findCliCommand(c.command)?.describe;
  if (!s) throw new Error(`${c.name}: no synopsis`);
  return sentence(s);
}

// ---- the module ----------------------------------------------------------------------------

const I1 = '    ';
const I2 = I1 + I1;
const I3 = I2 + I1;
const I4 = I3 + I1;
const I5 = I4 + I1;

const PS_TYPE: Record<ParamSpec['type'], string> = {
  string: '[string]',
  'string[]': '[string[]]',
  int: '[int]',
  double: '[double]',
  switch: '[switch]',
};

function commentHelp(c: CmdletSpec): string[] {
  const out: string[] = [`${I1}<#`, `${I1}.SYNOPSIS`];
  const para = (text: string): void => void out.push(...wrap(helpText(text), 96).map((l) => (l ? `${I1}${l}` : '')));
  para(synopsis(c));
  out.push('', `${I1}.DESCRIPTION`);
  para(c.description);
  const summary = c.method ? protocolDocument().methods[c.method]?.summary : undefined;
  if (summary) {
    out.push('');
    para(`Daemon request: ${c.method}. ${summary}`);
  }
  for (const p of c.params) {
    out.push('', `${I1}.PARAMETER ${p.name}`);
    para(parameterHelp(c, p));
  }
  for (const e of c.examples) {
    out.push('', `${I1}.EXAMPLE`, `${I1}${helpText(ascii(e.code))}`, '');
    para(e.remarks);
  }
  const types = outputTypes(c);
  if (types.length) {
    out.push('', `${I1}.OUTPUTS`);
    for (const t of types) out.push(`${I1}${t}`);
  }
  out.push('', `${I1}.NOTES`);
  para(
    `Runs shadowfs ${c.command.join(' ')} --json (the shadowfs command is $env:SHADOWFS_EXE, else shadowfs.cmd or shadowfs on PATH). ` +
      'Errors carry the shadowfs error code as their FullyQualifiedErrorId.',
  );
  out.push(`${I1}#>`);
  return out;
}

function shapes(c: CmdletSpec): OutputShape[] {
  return 'whenBound' in c.output ? [c.output.then, c.output.otherwise] : [c.output];
}

/** The type names the cmdlet emits ('System.String' for plain values). */
export function outputTypes(c: CmdletSpec): string[] {
  const t = shapes(c).flatMap((s) => {
    switch (s.kind) {
      case 'object':
        return [s.type];
      case 'items':
        return [s.type ?? 'System.String'];
      case 'value':
        return ['System.String'];
      case 'layers':
        return ['ShadowFS.Layer'];
      case 'none':
        return [];
    }
  });
  return [...new Set(t)];
}

function paramBlock(c: CmdletSpec): string[] {
  if (!c.params.length) return [`${I1}param()`];
  const out: string[] = [`${I1}param(`];
  c.params.forEach((p, i) => {
    const attrs: string[] = [];
    if (p.mandatory) attrs.push('Mandatory = $true');
    if (p.position !== undefined) attrs.push(`Position = ${p.position}`);
    if (p.pipeline === 'value') attrs.push('ValueFromPipeline = $true');
    if (p.pipeline) attrs.push('ValueFromPipelineByPropertyName = $true');
    if (p.set) attrs.push(`ParameterSetName = ${psQuote(p.set)}`);
    out.push(`${I2}[Parameter(${attrs.join(', ')})]`);
    if (p.aliases?.length) out.push(`${I2}[Alias(${p.aliases.map(psQuote).join(', ')})]`);
    if (p.allowEmpty) out.push(`${I2}[AllowEmptyString()]`);
    out.push(`${I2}${PS_TYPE[p.type]}`, `${I2}$${p.name}${i < c.params.length - 1 ? ',' : ''}`);
    if (i < c.params.length - 1) out.push('');
  });
  out.push(`${I1})`);
  return out;
}

/** Mirrors buildArgv (invocation.ts). */
function argvCode(c: CmdletSpec): string[] {
  const out: string[] = [`${I3}$sfsArgv = @(${[...c.command, '--json'].map(psQuote).join(', ')})`];
  const trailing = c.params.some((p) => 'afterDoubleDash' in p.cli);
  if (trailing) out.push(`${I3}$sfsTrailing = @()`);
  for (const p of argvOrder(c)) {
    if (p.type === 'switch') {
      out.push(`${I3}if ($${p.name}) {`, `${I4}$sfsArgv += ${psQuote(switchArg(p))}`, `${I3}}`);
      continue;
    }
    const value =
      p.pass === 'fullPath'
        ? '$PSCmdlet.GetUnresolvedProviderPathFromPSPath([string]$sfsValue)'
        : p.pass === 'tempFile'
          ? '$sfsFile'
          : '[string]$sfsValue';
    const body: string[] = [];
    if (p.pass === 'tempFile') body.push(`${I5}$sfsFile = New-ShadowFSTempFile -Text $sfsValue`, `${I5}$sfsTemporary += $sfsFile`);
    if ('option' in p.cli) body.push(`${I5}$sfsArgv += ${psQuote(`--${p.cli.option}`)}`);
    body.push('afterDoubleDash' in p.cli ? `${I5}$sfsTrailing += ${value}` : `${I5}$sfsArgv += ${value}`);
    out.push(
      `${I3}if ($PSBoundParameters.ContainsKey(${psQuote(p.name)})) {`,
      `${I4}foreach ($sfsValue in @($${p.name})) {`,
      ...body,
      `${I4}}`,
      `${I3}}`,
    );
  }
  if (trailing) out.push(`${I3}if ($sfsTrailing.Count -gt 0) {`, `${I4}$sfsArgv += '--'`, `${I4}$sfsArgv += $sfsTrailing`, `${I3}}`);
  return out;
}

function extraTable(add: string[] | undefined): string {
  return `@{ ${(add ?? []).map((n) => `${n} = $${n}`).join('; ')} }`.replace('@{  }', '@{}');
}

/** Mirrors shape (invocation.ts). */
function shapeCode(s: OutputShape, indent: string): string[] {
  switch (s.kind) {
    case 'none':
      return [];
    case 'object':
      return [`${indent}Add-ShadowFSMember -Object $sfsResult -TypeName ${psQuote(s.type)} -Property ${extraTable(s.add)}`];
    case 'value':
      return [`${indent}$sfsResult.${s.property}`];
    case 'items':
      return [
        `${indent}foreach ($sfsItem in @($sfsResult.${s.property})) {`,
        s.type
          ? `${indent}${I1}Add-ShadowFSMember -Object $sfsItem -TypeName ${psQuote(s.type)} -Property ${extraTable(s.add)}`
          : `${indent}${I1}$sfsItem`,
        `${indent}}`,
      ];
    case 'layers':
      return [
        `${indent}foreach ($sfsFolder in @($sfsResult.shadows)) {`,
        `${indent}${I1}if ($PSBoundParameters.ContainsKey('Shadow') -and $sfsFolder.name -cne $Shadow -and $sfsFolder.mountPoint -ne $Shadow) {`,
        `${indent}${I2}continue`,
        `${indent}${I1}}`,
        `${indent}${I1}$sfsFound = $true`,
        `${indent}${I1}foreach ($sfsAgent in @($sfsFolder.agents)) {`,
        `${indent}${I2}[pscustomobject]@{`,
        `${indent}${I3}PSTypeName = 'ShadowFS.Layer'`,
        `${indent}${I3}Shadow = $sfsFolder.name`,
        `${indent}${I3}Agent = $sfsAgent`,
        `${indent}${I3}Active = ($sfsAgent -ceq $sfsFolder.active)`,
        `${indent}${I3}MountPoint = $sfsFolder.mountPoint`,
        `${indent}${I2}}`,
        `${indent}${I1}}`,
        `${indent}}`,
      ];
  }
}

/** The call and what is emitted, inside the ShouldProcess check when there is one. */
function callCode(c: CmdletSpec): string[] {
  const cli = `Invoke-ShadowFSCli -Caller $PSCmdlet -Arguments $sfsArgv${c.exitStatusIsResult ? ' -ExitStatusIsResult' : ''}`;
  const inner: string[] = [];
  const o = c.output;
  if (!('whenBound' in o) && o.kind === 'none') inner.push(`$null = ${cli}`);
  else {
    if (!('whenBound' in o) && o.kind === 'layers') inner.push('$sfsFound = $false');
    inner.push(`$sfsResults = @(${cli})`, 'foreach ($sfsResult in $sfsResults) {');
    if ('whenBound' in o) {
      const p = c.params.find((x) => x.name === o.whenBound);
      const test = p?.type === 'switch' ? `$${o.whenBound}` : `$PSBoundParameters.ContainsKey(${psQuote(o.whenBound)})`;
      inner.push(`${I1}if (${test}) {`, ...shapeCode(o.then, I2), `${I1}}`, `${I1}else {`, ...shapeCode(o.otherwise, I2), `${I1}}`);
    } else inner.push(...shapeCode(o, I1));
    inner.push('}');
    if (!('whenBound' in o) && o.kind === 'layers')
      inner.push(
        "if ($PSBoundParameters.ContainsKey('Shadow') -and -not $sfsFound -and $sfsResults.Count -gt 0) {",
        `${I1}Write-ShadowFSError -Caller $PSCmdlet -Code 'UNKNOWN_SHADOW' -Message ("no shadow has the name or mount point '{0}'" -f $Shadow) -Target $Shadow`,
        '}',
      );
  }
  if (!c.changes) return inner.map((l) => `${I3}${l}`);
  const check = `$PSCmdlet.ShouldProcess("${ascii(c.changes.target)}", "${ascii(c.changes.action)}")`;
  return [`${I3}if (${c.noChangeWith ? `$${c.noChangeWith} -or ` : ''}${check}) {`, ...inner.map((l) => `${I4}${l}`), `${I3}}`];
}

function cmdletFunction(c: CmdletSpec): string[] {
  const binding: string[] = [];
  if (c.changes) binding.push('SupportsShouldProcess = $true', `ConfirmImpact = ${psQuote(c.changes.impact)}`);
  if (c.defaultSet) binding.push(`DefaultParameterSetName = ${psQuote(c.defaultSet)}`);
  const types = outputTypes(c);
  return [
    `function ${c.name} {`,
    ...commentHelp(c),
    `${I1}[CmdletBinding(${binding.join(', ')})]`,
    ...(types.length ? [`${I1}[OutputType(${types.map(psQuote).join(', ')})]`] : []),
    ...paramBlock(c),
    '',
    `${I1}process {`,
    `${I2}$sfsTemporary = @()`,
    `${I2}try {`,
    ...argvCode(c),
    ...callCode(c),
    `${I2}}`,
    `${I2}finally {`,
    `${I3}foreach ($sfsFile in $sfsTemporary) {`,
    `${I4}[System.IO.File]::Delete($sfsFile)`,
    `${I3}}`,
    `${I2}}`,
    `${I1}}`,
    '}',
  ];
}

/** The private helpers every cmdlet calls: finding and running shadowfs, errors, objects. */
const HELPERS = String.raw`
# The shadowfs command: $env:SHADOWFS_EXE, else shadowfs.cmd (npm's shim on Windows) or shadowfs
# on PATH.
function Get-ShadowFSExecutable {
    [CmdletBinding()]
    param(
        [Parameter(Mandatory = $true)]
        [System.Management.Automation.PSCmdlet]
        $Caller
    )

    if ($env:SHADOWFS_EXE) {
        return $env:SHADOWFS_EXE
    }
    foreach ($name in @('shadowfs.cmd', 'shadowfs')) {
        $found = Get-Command -Name $name -CommandType Application -ErrorAction SilentlyContinue | Select-Object -First 1
        if ($null -ne $found) {
            return $found.Path
        }
    }
    $message = 'shadowfs was not found: install it (npm install -g shadowfs) so that it is on PATH, or set $env:SHADOWFS_EXE to the shadowfs command.'
    Write-ShadowFSError -Caller $Caller -Code 'SHADOWFS_NOT_FOUND' -Message $message -Terminating
}

# Writes an ErrorRecord for the calling cmdlet: its id is the shadowfs error code (PowerShell
# shows it as "CODE,Verb-Noun"), its category mapped from the code, its message the CLI's.
function Write-ShadowFSError {
    [CmdletBinding()]
    param(
        [Parameter(Mandatory = $true)]
        [System.Management.Automation.PSCmdlet]
        $Caller,

        [Parameter(Mandatory = $true)]
        [string]
        $Code,

        [Parameter()]
        [string]
        $Message,

        [Parameter()]
        [object]
        $Target,

        [Parameter()]
        [switch]
        $Terminating
    )

    $category = 'NotSpecified'
    if ($script:ShadowFSErrorCategory.ContainsKey($Code)) {
        $category = $script:ShadowFSErrorCategory[$Code]
    }
    $exception = [System.Exception]::new($Message)
    $record = [System.Management.Automation.ErrorRecord]::new($exception, $Code, [System.Management.Automation.ErrorCategory]$category, $Target)
    if ($Terminating) {
        $Caller.ThrowTerminatingError($record)
    }
    $Caller.WriteError($record)
}

# Text for the CLI goes through a file: no quoting or code page stands between it and shadowfs.
function New-ShadowFSTempFile {
    [CmdletBinding()]
    param(
        [Parameter(Mandatory = $true)]
        [AllowEmptyString()]
        [string]
        $Text
    )

    $file = [System.IO.Path]::GetTempFileName()
    [System.IO.File]::WriteAllText($file, $Text, [System.Text.UTF8Encoding]::new($false))
    $file
}

# Puts the ShadowFS type name first on an object from the CLI and adds the given properties it
# lacks (Shadow, Agent: what the next cmdlet in a pipeline binds).
function Add-ShadowFSMember {
    [CmdletBinding()]
    param(
        [Parameter(Mandatory = $true)]
        [object]
        $Object,

        [Parameter(Mandatory = $true)]
        [string]
        $TypeName,

        [Parameter()]
        [hashtable]
        $Property = @{}
    )

    $Object.PSObject.TypeNames.Insert(0, $TypeName)
    foreach ($key in $Property.Keys) {
        if ($null -eq $Object.PSObject.Properties[$key]) {
            Add-Member -InputObject $Object -MemberType NoteProperty -Name $key -Value $Property[$key]
        }
    }
    $Object
}

# Runs shadowfs with the arguments (which include --json) and returns the JSON results it printed
# on standard output, one object per line. A JSON error becomes an ErrorRecord of the calling
# cmdlet; so does a failure without one (USAGE for a refused command line, else CLI_FAILED, with
# what shadowfs wrote on standard error). Standard error of a command that gave a result, and a
# non-zero exit status that comes with a result (lints, apply), become warnings.
function Invoke-ShadowFSCli {
    [CmdletBinding()]
    param(
        [Parameter(Mandatory = $true)]
        [System.Management.Automation.PSCmdlet]
        $Caller,

        [Parameter(Mandatory = $true)]
        [string[]]
        $Arguments,

        [Parameter()]
        [switch]
        $ExitStatusIsResult
    )

    $exe = Get-ShadowFSExecutable -Caller $Caller
    Write-Verbose -Message ('{0} {1}' -f $exe, ($Arguments -join ' '))
    # Standard error of a native command must not stop this function (Windows PowerShell with
    # ErrorActionPreference Stop; PowerShell 7.4's PSNativeCommandUseErrorActionPreference). The
    # caller's preference is back in force for the errors written below.
    $savedPreference = $ErrorActionPreference
    $ErrorActionPreference = 'Continue'
    $PSNativeCommandUseErrorActionPreference = $false
    # shadowfs writes UTF-8; PowerShell decodes a native command's output with this encoding.
    $savedEncoding = $null
    try {
        $savedEncoding = [Console]::OutputEncoding
        [Console]::OutputEncoding = [System.Text.UTF8Encoding]::new($false)
    }
    catch {
        $savedEncoding = $null
    }
    try {
        $lines = @(& $exe @Arguments 2>&1)
        $status = $LASTEXITCODE
    }
    finally {
        $ErrorActionPreference = $savedPreference
        if ($null -ne $savedEncoding) {
            [Console]::OutputEncoding = $savedEncoding
        }
    }

    $errorLines = @()
    $results = @()
    $parsed = 0
    foreach ($line in $lines) {
        if ($line -is [System.Management.Automation.ErrorRecord]) {
            $errorLines += $line.ToString()
            continue
        }
        $text = [string]$line
        if (-not $text.StartsWith('{')) {
            continue
        }
        $parsed += 1
        $object = ConvertFrom-Json -InputObject $text
        $problem = $object.PSObject.Properties['error']
        if ($status -ne 0 -and $null -ne $problem -and $null -ne $problem.Value.code) {
            Write-ShadowFSError -Caller $Caller -Code ([string]$problem.Value.code) -Message ([string]$problem.Value.message)
        }
        else {
            $results += $object
        }
    }
    if ($parsed -eq 0 -and $status -ne 0) {
        $code = 'CLI_FAILED'
        if ($status -eq 2) {
            $code = 'USAGE'
        }
        $message = $errorLines -join [Environment]::NewLine
        if (-not $message) {
            $message = 'shadowfs exited with status {0}' -f $status
        }
        Write-ShadowFSError -Caller $Caller -Code $code -Message $message
        return
    }
    foreach ($text in $errorLines) {
        Write-Warning -Message $text
    }
    if ($status -ne 0 -and $results.Count -gt 0 -and -not $ExitStatusIsResult) {
        $meaning = 'see its result'
        if ($script:ShadowFSExitStatus.ContainsKey($status)) {
            $meaning = $script:ShadowFSExitStatus[$status]
        }
        Write-Warning -Message ('shadowfs exited with status {0}: {1}' -f $status, $meaning)
    }
    $results
}
`;

export function renderModule(cmdlets: CmdletSpec[] = CMDLETS): string {
  const lines: string[] = [
    '# ShadowFS: PowerShell cmdlets for shadowfs, shadow folders for AI agents.',
    '# Generated by tools/powershell/generate.ts from the shadowfs CLI and protocol definitions; do',
    '# not edit: change tools/powershell/cmdlets.ts and run npm run build:powershell. ASCII only, so',
    '# Windows PowerShell 5.1 reads it the same without a byte order mark.',
    '',
    '# The ErrorRecord category for each shadowfs error code.',
    '$script:ShadowFSErrorCategory = @{',
    ...Object.entries(ERROR_CATEGORY).map(([code, cat]) => `${I1}${psQuote(code)} = ${psQuote(cat)}`),
    '}',
    '',
    '# What a non-zero exit status that comes with a result means.',
    '$script:ShadowFSExitStatus = @{',
    ...Object.entries(EXIT_MEANINGS).map(([status, meaning]) => `${I1}${status} = ${psQuote(meaning)}`),
    '}',
    ...HELPERS.split('\n'),
  ];
  for (const c of cmdlets) lines.push(...cmdletFunction(c), '');
  const aliases = formerNames(cmdlets);
  if (aliases.length) {
    lines.push('# Former names of renamed cmdlets, kept as aliases for one release.');
    for (const [former, name] of aliases) lines.push(`Set-Alias -Name ${psQuote(former)} -Value ${psQuote(name)}`);
    lines.push('');
  }
  lines.push(
    'Export-ModuleMember -Function @(',
    ...cmdlets.map((c, i) => `${I1}${psQuote(c.name)}${i < cmdlets.length - 1 ? ',' : ''}`),
    aliases.length ? ') -Alias @(' : ')',
    ...(aliases.length ? [...aliases.map(([former], i) => `${I1}${psQuote(former)}${i < aliases.length - 1 ? ',' : ''}`), ')'] : []),
  );
  return `${lines.join('\n')}\n`;
}

/** Each former cmdlet name with the cmdlet it is an alias of, in table order. */
export function formerNames(cmdlets: CmdletSpec[] = CMDLETS): [former: string, name: string][] {
  return cmdlets.flatMap((c) => (c.formerNames ?? []).map((f): [string, string] => [f, c.name]));
}

/** ModuleVersion takes 2 to 4 numbers; a semver pre-release goes to PSData.Prerelease. */
export function moduleVersion(version: string): { version: string; prerelease?: string } {
  const m = /^(\d+\.\d+\.\d+)(?:-([0-9A-Za-z.-]+))?(?:\+.*)?$/.exec(version);
  if (!m?.[1]) throw new Error(`package.json version ${JSON.stringify(version)} is not semver`);
  const pre = m[2]?.replace(/[^0-9A-Za-z]/g, '');
  return pre ? { version: m[1], prerelease: pre } : { version: m[1] };
}

export function renderManifest(version: string, description: string, cmdlets: CmdletSpec[] = CMDLETS): string {
  const v = moduleVersion(version);
  const list = (names: string[]): string[] =>
    names.length ? ['@(', ...names.map((n, i) => `${I2}${psQuote(n)}${i < names.length - 1 ? ',' : ''}`), `${I1})`] : ['@()'];
  const fns = list(cmdlets.map((c) => c.name));
  const aliases = list(formerNames(cmdlets).map(([former]) => former));
  const lines = [
    '# Module manifest of ShadowFS. Generated by tools/powershell/generate.ts; do not edit.',
    '@{',
    `${I1}RootModule = 'ShadowFS.psm1'`,
    `${I1}ModuleVersion = ${psQuote(v.version)}`,
    `${I1}GUID = ${psQuote(MODULE_GUID)}`,
    `${I1}Author = 'shadowfs contributors'`,
    `${I1}CompanyName = 'shadowfs contributors'`,
    `${I1}Copyright = '(c) shadowfs contributors. MIT License.'`,
    `${I1}Description = ${psQuote(description)}`,
    `${I1}PowerShellVersion = '5.1'`,
    `${I1}CompatiblePSEditions = @('Desktop', 'Core')`,
    `${I1}FunctionsToExport = ${fns[0]}`,
    ...fns.slice(1),
    `${I1}CmdletsToExport = @()`,
    `${I1}AliasesToExport = ${aliases[0]}`,
    ...aliases.slice(1),
    `${I1}VariablesToExport = @()`,
    `${I1}PrivateData = @{`,
    `${I2}PSData = @{`,
    `${I3}Tags = @('shadowfs', 'shadow-folder', 'agents', 'FUSE', 'WinFsp')`,
    `${I3}LicenseUri = 'https://opensource.org/licenses/MIT'`,
    ...(v.prerelease ? [`${I3}Prerelease = ${psQuote(v.prerelease)}`] : []),
    `${I2}}`,
    `${I1}}`,
    '}',
  ];
  return `${lines.join('\n')}\n`;
}
