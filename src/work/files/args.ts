// The argument checks the file tools share. These functions are called with what a model sent
// (over MCP or RPC), so nothing is assumed: each names the argument and what it must be.
import { ShadowError } from '../../common/errors';

export function intOpt(name: string, value: unknown, def: number, min: number, max: number): number {
  if (value === undefined || value === null) return def;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
    throw new ShadowError('INVALID_ARGUMENT', `${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  return value;
}

export function boolOpt(name: string, value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw new ShadowError('INVALID_ARGUMENT', `${name} must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

export function stringArg(name: string, value: unknown, { nonEmpty = false } = {}): string {
  if (typeof value !== 'string') throw new ShadowError('INVALID_ARGUMENT', `${name} must be a string, got ${typeof value}`);
  if (nonEmpty && value === '') throw new ShadowError('INVALID_ARGUMENT', `${name} must not be empty`);
  return value;
}

/** Checks a glob pattern: relative, never climbing out with "..". Returns it without a leading "./". */
export function checkPattern(pattern: unknown): string {
  let pat = stringArg('pattern', pattern, { nonEmpty: true });
  while (pat.startsWith('./')) pat = pat.slice(2);
  const body = pat.startsWith('!') ? pat.slice(1) : pat;
  if (body.startsWith('/') || /^[A-Za-z]:/.test(body))
    throw new ShadowError('INVALID_PATH', `the pattern must be relative to the shadow root (or cwd), got ${JSON.stringify(pattern)}`);
  if (body.split('/').includes('..'))
    throw new ShadowError('INVALID_PATH', `the pattern must not contain "..": ${JSON.stringify(pattern)}`);
  if (pat === '' || body.includes('\0')) throw new ShadowError('INVALID_ARGUMENT', `not a usable pattern: ${JSON.stringify(pattern)}`);
  return pat;
}

export function relativeTo(dir: string, p: string): string {
  return dir === '' ? p : p.slice(dir.length + 1);
}
