// How CLI commands report results and errors: human lines, or one JSON object per line with
// --json. Exit codes: 0 success, 1 failure (the message carries an error code), 2 bad usage,
// 3 the daemon is not running (status only), 4 lints: the change introduced errors, 5 lints: a
// file got no fresh answer (timeout or server error), 6 apply: conflicts (nothing written for them).
import { ShadowError } from '../common/errors';

export const ExitCode = { OK: 0, FAILURE: 1, USAGE: 2, NOT_RUNNING: 3, INTRODUCED_ERRORS: 4, NOT_FRESH: 5, CONFLICTS: 6 } as const;

export interface OutputOptions {
  json?: boolean;
}

/**
 * Characters a terminal acts on or that reorder or hide what it shows: C0 and C1 controls, DEL,
 * bidirectional marks and overrides (U+061C included), line and paragraph separators, and in
 * names the zero-width ones (a name that looks like another).
 */
const TERMINAL_CONTROLS = /[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060\u2066-\u2069\ufeff]/g;
const NAMED: Record<string, string> = { '\n': '\\n', '\t': '\\t', '\r': '\\r', '\x1b': '\\e' };

/**
 * A name an agent chose (a path in its layer, a process name) as a human line shows it: its
 * control characters as visible escapes (\e, \n, \x07, \u202e), so that printing it cannot
 * clear the screen, move the cursor, make up a line or reverse text, and the user sees what
 * would be applied. git quotes such names in its output too (core.quotePath).
 */
export function shownName(name: string): string {
  return name.replace(TERMINAL_CONTROLS, (c) => {
    const code = c.charCodeAt(0);
    return NAMED[c] ?? (code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16)}`);
  });
}

/** Text that may quote such names (an error message, a conflict's reason): the same, keeping its own line breaks. */
export function shownText(text: string): string {
  return text.split('\n').map(shownName).join('\n');
}

/**
 * The characters of file text that a terminal acts on, less the ones text is made of: a tab, a
 * line feed, and a carriage return that ends a line (CRLF files). A carriage return inside a
 * line, an escape sequence, a bidirectional override (Trojan Source) would let an agent's file
 * show the user one line while it holds another.
 */
const CONTENT_CONTROLS = /\r(?!\n|$)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * An agent's file text (a diff, a hunk) as a terminal shows it to the user: its control
 * characters as visible escapes (\e[2K, \r, \u202e), everything else as it is. Only for
 * reading: a patch meant for `git apply` is written byte for byte where it goes to a file or a pipe.
 */
export function shownContent(text: string): string {
  return text.replace(CONTENT_CONTROLS, (c) => shownName(c));
}

export function emit(opts: OutputOptions, event: Record<string, unknown>, human: string): void {
  process.stdout.write(opts.json ? `${JSON.stringify(event)}\n` : `${human}\n`);
}

export function reportError(opts: OutputOptions, err: unknown): void {
  const e = err instanceof ShadowError ? err : new ShadowError('INTERNAL', (err as Error)?.message ?? String(err), { cause: err });
  if (opts.json) {
    process.stdout.write(`${JSON.stringify({ error: e.toJSON() })}\n`);
  } else {
    process.stderr.write(`shadowfs: error ${e.code}: ${shownText(e.message)}\n`);
  }
  process.exitCode = ExitCode.FAILURE;
}
