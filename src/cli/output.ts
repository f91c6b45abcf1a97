// How CLI commands report results and errors: human lines, or one JSON object per line with
// --json. Exit codes: 0 success, 1 failure (the message carries an error code), 2 bad usage,
// 3 the daemon is not running (status only), 4 lints: the change introduced errors, 5 lints: a
// file got no fresh answer (timeout or server error), 6 apply: conflicts (nothing written for them).
import { ShadowError } from '../common/errors';

export const ExitCode = { OK: 0, FAILURE: 1, USAGE: 2, NOT_RUNNING: 3, INTRODUCED_ERRORS: 4, NOT_FRESH: 5, CONFLICTS: 6 } as const;

export interface OutputOptions {
  json?: boolean;
}

export function emit(opts: OutputOptions, event: Record<string, unknown>, human: string): void {
  process.stdout.write(opts.json ? `${JSON.stringify(event)}\n` : `${human}\n`);
}

export function reportError(opts: OutputOptions, err: unknown): void {
  const e = err instanceof ShadowError ? err : new ShadowError('INTERNAL', (err as Error)?.message ?? String(err), { cause: err });
  if (opts.json) {
    process.stdout.write(`${JSON.stringify({ error: e.toJSON() })}\n`);
  } else {
    process.stderr.write(`shadowfs: error ${e.code}: ${e.message}\n`);
  }
  process.exitCode = ExitCode.FAILURE;
}
