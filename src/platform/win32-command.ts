// What Node's child_process.spawn must be given on Windows to run a command the way a Windows
// user writes it, without a shell unless one is asked for:
//   - shell: the line runs in cmd.exe (`%ComSpec% /d /s /c "<line>"`), as Node's own `shell: true`;
//   - a bare name is found on PATH with PATHEXT, never in the current directory first;
//   - a .cmd/.bat file runs through cmd.exe with every argument quoted against cmd's own parsing
//     (Node refuses to spawn one without a shell since CVE-2024-27980, "BatBadBut");
//   - an .exe/.com runs directly, and Node quotes its arguments by the C runtime's rules.
// Only path.win32 and fs are used and the environment is a parameter, so the module loads (and is
// unit-tested) on Linux too; the round trips through a real cmd.exe run under wine
// (test/windows/command-win32.test.ts).

import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../common/errors';

const win = path.win32;

/** What spawn(file, args, { windowsVerbatimArguments }) is to be given. */
export interface WindowsSpawn {
  file: string;
  args: string[];
  /** True when `args` are already one finished cmd.exe command line, to be passed as they are. */
  windowsVerbatimArguments: boolean;
  /** How it runs: the user's line in cmd.exe, a program started directly, or a batch file in cmd.exe. */
  kind: 'shell' | 'program' | 'batch';
}

export interface WindowsCommandOptions {
  /** Run `argv` (one line, or words joined with spaces) as a cmd.exe command line. */
  shell?: boolean;
  /** The directory the command will run in: a command named by a relative path is found from it. */
  cwd: string;
  /** The command's environment (PATH, PATHEXT and ComSpec are read from it, in any letter case). */
  env: NodeJS.ProcessEnv;
  /** Whether a path names a regular file; fs.statSync by default (tests replace it). */
  isFile?: (file: string) => boolean;
}

/** The extensions Windows tries when PATHEXT is not set. */
export const DEFAULT_PATHEXT = ['.COM', '.EXE', '.BAT', '.CMD'];
const FALLBACK_COMSPEC = 'C:\\Windows\\System32\\cmd.exe';
/** cmd.exe reads at most this many characters of a command line (8191, as cmd itself reports). */
export const CMD_LINE_MAX = 8191;

/**
 * Turns what a user asks to run into what spawn must be given on Windows. Throws ShadowError:
 * NOT_FOUND when a command cannot be found (the message names the directories and extensions
 * searched), INVALID_ARGUMENT for what cannot be passed safely (see quoteBatchArgument), and
 * NOT_SUPPORTED for a file that is neither a program nor a batch file.
 */
export function resolveWindowsCommand(argv: readonly string[], opts: WindowsCommandOptions): WindowsSpawn {
  if (argv.length === 0 || argv.some((a) => typeof a !== 'string')) {
    throw new ShadowError('INVALID_ARGUMENT', 'argv must be a non-empty list of strings (the command and its arguments)');
  }
  if (argv.some((a) => a.includes('\0'))) throw new ShadowError('INVALID_ARGUMENT', 'an argument contains a NUL byte');
  if (opts.shell) return windowsShellCommand(argv.join(' '), opts.env);
  const found = findWindowsCommand(argv[0], opts);
  const ext = win.extname(found).toLowerCase();
  if (ext === '.exe' || ext === '.com') {
    return { file: found, args: argv.slice(1), windowsVerbatimArguments: false, kind: 'program' };
  }
  if (ext === '.cmd' || ext === '.bat') return windowsBatchCommand(found, argv.slice(1), opts.env);
  throw new ShadowError(
    'NOT_SUPPORTED',
    `${JSON.stringify(argv[0])} is ${found}, which is neither a program (.exe, .com) nor a batch file (.cmd, .bat): ` +
      'Windows opens such a file through its file association, which only a shell does; run it with shell: true or name its interpreter',
  );
}

/** `%ComSpec% /d /s /c "<line>"` with the line as it is: the user wrote it for cmd.exe. */
export function windowsShellCommand(line: string, env: NodeJS.ProcessEnv): WindowsSpawn {
  // cmd.exe ends a command at a line break: what follows would be dropped without a word.
  if (/[\r\n]/.test(line))
    throw new ShadowError('INVALID_ARGUMENT', 'a cmd.exe command line cannot hold a line break; join the commands with &&');
  // /d: no AutoRun commands from the registry; /s /c: cmd drops exactly the outer quotes added
  // here and runs what is between them (Node's own `shell: true` does the same).
  const args = ['/d', '/s', '/c', `"${line}"`];
  checkLength(args, 'the command line');
  return { file: comSpec(env), args, windowsVerbatimArguments: true, kind: 'shell' };
}

/**
 * A batch file through cmd.exe: `%ComSpec% /d /e:on /v:off /s /c ""<script>" <arg> ..."`.
 * /e:on keeps the command extensions the `%` escape needs (they are on unless the registry turned
 * them off); /v:off keeps `!` plain text (delayed expansion would expand `!NAME!`). `script` is an
 * absolute path already found (findWindowsCommand); it is not looked at beyond its quotes.
 */
export function windowsBatchCommand(script: string, args: readonly string[], env: NodeJS.ProcessEnv): WindowsSpawn {
  if (script.includes('"')) throw new ShadowError('INVALID_ARGUMENT', `a batch file's path cannot hold a double quote: ${script}`);
  const words = [`"${escapePercent(script)}"`, ...args.map(quoteBatchArgument)];
  const line = ['/d', '/e:on', '/v:off', '/s', '/c', `"${words.join(' ')}"`];
  checkLength(line, `the command line for ${script}`);
  return { file: comSpec(env), args: line, windowsVerbatimArguments: true, kind: 'batch' };
}

function checkLength(args: readonly string[], what: string): void {
  const length = args.join(' ').length;
  if (length > CMD_LINE_MAX) {
    throw new ShadowError('INVALID_ARGUMENT', `${what} is ${length} characters long; cmd.exe reads at most ${CMD_LINE_MAX}`);
  }
}

/** ASCII characters cmd.exe and the C runtime both read as plain text outside quotes. */
const PLAIN = /^[A-Za-z0-9#$*+\-./:?@\\_]$/;

/**
 * One argument of a batch file, written so that cmd.exe reads it as text and the batch file sees
 * it in %1..%9 and %* such that a program it hands %* on to (npm's shims hand it to node.exe)
 * parses back the original string by the C runtime's rules. The same scheme as Rust's std since
 * BatBadBut (CVE-2024-24576), reasoned out here:
 *
 * - Anything but ASCII letters, digits and `#$*+-./:?@\_` (and non-ASCII letters) puts the
 *   argument in double quotes, as does an empty argument or one ending in `\`. Inside quotes cmd
 *   reads `& | < > ( ) ^ , ; =` and spaces as text, also when the batch file's line re-reads %*.
 * - cmd has no escape for `"` inside quotes: every `"` toggles its quote state. So an embedded `"`
 *   is written `""` (two toggles with nothing between them: no character is ever outside the
 *   quotes), which the C runtime reads inside quotes as one literal `"`. The C runtime's `\"`
 *   would close cmd's quotes and expose the rest: that is the BatBadBut injection.
 * - Backslashes are literal to the C runtime unless a `"` follows them; a run before an embedded
 *   `"` or before the closing quote is doubled.
 * - `%` is expanded by cmd before it looks at quotes at all. Each `%` is written `%%cd:~,%`: the
 *   `%cd:~,%` part is an empty substring of the always-defined dynamic variable CD (command
 *   extensions, hence /e:on), so it expands to nothing and leaves the first `%` alone, with no
 *   text after it that could form a variable name. (Microsoft's cmd expands a line once, so the
 *   `%` a batch file gets in %1 or %* stays text; wine's cmd expands that text again, which no
 *   escape here can prevent: see test/windows/command-win32.test.ts.)
 * - `!` is text under /v:off.
 * - Refused outright (INVALID_ARGUMENT): CR and LF, since cmd ends the command at a line break
 *   (and removes CRs) so no quoting carries them; and NUL, which no command line can hold.
 *
 * What the batch file itself does with its arguments (`set x=%1`, `echo %~1`, calls through
 * another shell) is its own business; an argument that reaches a program parses back whole.
 */
export function quoteBatchArgument(arg: string): string {
  if (/[\r\n\0]/.test(arg)) {
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `an argument for a batch file holds a line break or NUL (${JSON.stringify(arg)}): cmd.exe ends a command at a line break, so it cannot be passed safely`,
    );
  }
  let quote = arg === '' || arg.endsWith('\\');
  for (const ch of arg) {
    const code = ch.codePointAt(0) ?? 0;
    if (code < 0x80 ? !PLAIN.test(ch) : /\p{Cc}/u.test(ch)) quote = true;
  }
  let out = quote ? '"' : '';
  let backslashes = 0;
  for (const ch of arg) {
    if (ch === '\\') {
      backslashes += 1;
      out += ch;
      continue;
    }
    if (ch === '"') out += '\\'.repeat(backslashes) + '""';
    else if (ch === '%') out += '%%cd:~,%';
    else out += ch;
    backslashes = 0;
  }
  if (quote) out += '\\'.repeat(backslashes) + '"';
  return out;
}

/** `%` as `%%cd:~,%` (see quoteBatchArgument), for text cmd.exe reads inside quotes. */
function escapePercent(text: string): string {
  return text.replace(/%/g, '%%cd:~,%');
}

/**
 * The value of `name` in a Windows environment held in a plain object, whose keys may differ from
 * `name` in letter case (`Path`). When several keys match, the one Node's spawn passes on wins:
 * it sorts the keys and keeps the first of each case-insensitive name.
 */
export function windowsEnvValue(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const upper = name.toUpperCase();
  const keys = Object.keys(env)
    .filter((k) => k.toUpperCase() === upper && env[k] !== undefined)
    .sort();
  return keys.length === 0 ? undefined : env[keys[0]];
}

/** The command interpreter: ComSpec when it is an absolute path, else the system's cmd.exe. */
export function comSpec(env: NodeJS.ProcessEnv): string {
  const value = windowsEnvValue(env, 'ComSpec');
  if (value && isFullPath(value) && !value.includes('"')) return value;
  const root = windowsEnvValue(env, 'SystemRoot');
  return root && isFullPath(root) ? win.join(root, 'System32', 'cmd.exe') : FALLBACK_COMSPEC;
}

/** PATHEXT's extensions in order (upper case, with their dot), or the default when it has none. */
export function pathExtensions(env: NodeJS.ProcessEnv): string[] {
  const exts = (windowsEnvValue(env, 'PATHEXT') ?? '')
    .split(';')
    .map((e) => e.trim())
    .filter((e) => e !== '')
    .map((e) => (e.startsWith('.') ? e : `.${e}`).toUpperCase());
  return exts.length === 0 ? [...DEFAULT_PATHEXT] : exts;
}

/**
 * PATH's directories in order. Empty entries and relative ones (`.`, `bin`) are left out: they
 * would name the current directory or one below it, which a bare name must not reach (see
 * findWindowsCommand). Quotes around an entry (`"C:\Program Files\x"`) are dropped, as cmd does.
 */
export function pathDirectories(env: NodeJS.ProcessEnv): string[] {
  return (windowsEnvValue(env, 'PATH') ?? '')
    .split(';')
    .map((d) => (d.length >= 2 && d.startsWith('"') && d.endsWith('"') ? d.slice(1, -1) : d))
    .filter((d) => d !== '' && isFullPath(d));
}

/**
 * The file a command name stands for, as an absolute path.
 *
 * A bare name (no `\`, `/` or drive) is looked for in each PATH directory in turn, as the name
 * itself when it has an extension and then with each PATHEXT extension appended. The current
 * directory is NOT searched first, although cmd.exe and CreateProcess (and so Node's spawn) do:
 * a folder an agent works in is what it writes, and a `git.cmd` dropped there would otherwise run
 * in place of the real git (the classic search-path hijack). A command in the current directory is
 * run by naming it, `.\build.cmd`.
 *
 * A name with a path is taken from `cwd` when relative, with the same extension rules.
 */
export function findWindowsCommand(name: string, opts: WindowsCommandOptions): string {
  const isFile = opts.isFile ?? defaultIsFile;
  checkName(name);
  const exts = pathExtensions(opts.env);
  const bare = !/[\\/]/.test(name) && !/^[A-Za-z]:/.test(name);
  const dirs = bare ? pathDirectories(opts.env) : [];
  const candidates = (base: string): string[] => [...(win.extname(base) !== '' ? [base] : []), ...exts.map((e) => base + e)];
  if (!bare) {
    if (/^[A-Za-z]:(?![\\/])/.test(name)) {
      throw new ShadowError('INVALID_ARGUMENT', `${JSON.stringify(name)} is relative to a drive's current directory; give a full path`);
    }
    if (!isFullPath(opts.cwd) && !win.isAbsolute(name)) {
      throw new ShadowError('INVALID_ARGUMENT', `the working directory ${JSON.stringify(opts.cwd)} is not a full path`);
    }
    const full = win.resolve(opts.cwd, name);
    const hit = candidates(full).find(isFile);
    if (hit) return hit;
    throw new ShadowError('NOT_FOUND', `cannot run ${JSON.stringify(name)}: none of ${candidates(full).join(', ')} is a file`);
  }
  for (const dir of dirs) {
    const hit = candidates(win.join(dir, name)).find(isFile);
    if (hit) return hit;
  }
  const where = dirs.length === 0 ? 'PATH names no directory' : `searched PATH: ${dirs.join('; ')}`;
  throw new ShadowError(
    'NOT_FOUND',
    `cannot run ${JSON.stringify(name)}: no such program or batch file (${where}; ` +
      `extensions ${win.extname(name) !== '' ? 'none, then ' : ''}${exts.join(';')}). ` +
      `The current directory is not searched: name a command there as .\\${name}. ` +
      'A cmd.exe built-in (dir, echo, copy, del, ...) needs shell: true.',
  );
}

/**
 * Names whose meaning Windows changes on the way: a last component ending in `.` or space (Win32
 * drops them, so `x.cmd.` is x.cmd, and an extension check on the name would miss the batch
 * file), a `:` past the drive (an NTFS stream: `x.cmd::$DATA`), and characters no file name holds.
 */
function checkName(name: string): void {
  const last = name.split(/[\\/]/).pop() ?? '';
  const rest = name.replace(/^[A-Za-z]:/, '');
  if (name === '' || last === '' || /[. ]$/.test(last) || rest.includes(':') || /[<>"|?*\p{Cc}]/u.test(rest)) {
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `${JSON.stringify(name)} is not a command Windows runs as written (empty, a directory, a trailing dot or space, a stream ':' or a character file names cannot hold)`,
    );
  }
}

/** `C:\...` or `\\server\share\...`: not relative to any current directory or drive. */
function isFullPath(p: string): boolean {
  return /^[A-Za-z]:[\\/]/.test(p) || /^[\\/]{2}[^\\/]/.test(p);
}

function defaultIsFile(file: string): boolean {
  try {
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}
