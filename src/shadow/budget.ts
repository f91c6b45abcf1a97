// The memory budget for layer contents (issue #32): one per process, shared by every shadow it
// mounts. Past it, the least recently used contents move to spill files (native/core/budget.h).
// Set by the mount option `memoryBudget`, the daemon's --memory-budget or $SHADOWFS_MEMORY_BUDGET;
// default a quarter of the machine's memory (docs/memory-budget.md says why).
import * as os from 'os';
import { ShadowError } from '../common/errors';
import { addon, type MemoryBudgetStats } from './native';

/** The default share of the machine's memory that layer contents may take. */
export const DEFAULT_BUDGET_SHARE = 0.25;

const UNITS: Record<string, number> = { '': 1, K: 2 ** 10, M: 2 ** 20, G: 2 ** 30, T: 2 ** 40 };

/**
 * A size in bytes from a number of bytes or a string: "1048576", "512K", "512M", "2G", "1T" (binary units; a trailing
 * "B" or "iB" is allowed: "512MiB"), or "none"/"off" for no budget (Infinity).
 */
export function parseSize(value: string | number, what: string): number {
  if (typeof value === 'number') {
    if (value === Infinity) return Infinity;
    if (Number.isSafeInteger(value) && value >= 0) return value;
    throw new ShadowError('INVALID_ARGUMENT', `${what} must be a whole number of bytes >= 0, got ${value}`);
  }
  const s = String(value).trim();
  if (/^(none|off|unlimited)$/i.test(s)) return Infinity;
  const m = /^(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?$/i.exec(s);
  if (!m)
    throw new ShadowError('INVALID_ARGUMENT', `${what} must be a size like 1048576, 512M or 2G (or "none"), got ${JSON.stringify(value)}`);
  const bytes = Math.floor(Number(m[1]) * UNITS[m[2].toUpperCase()]);
  if (!Number.isSafeInteger(bytes)) throw new ShadowError('INVALID_ARGUMENT', `${what} is too large: ${JSON.stringify(value)}`);
  return bytes;
}

/** The budget when nothing sets one: $SHADOWFS_MEMORY_BUDGET, else DEFAULT_BUDGET_SHARE of the machine's memory. */
export function defaultMemoryBudget(): number {
  const env = process.env.SHADOWFS_MEMORY_BUDGET;
  if (env !== undefined && env !== '') return parseSize(env, '$SHADOWFS_MEMORY_BUDGET');
  return Math.floor(os.totalmem() * DEFAULT_BUDGET_SHARE);
}

let configured: number | undefined; // what the daemon or a mount asked for
let applied = false;

/**
 * Sets the process's budget (every shadow of the process shares it; the last one set wins). Before any mount it is only
 * recorded (the native module loads at the first mount); contents already over it spill at their next change.
 */
export function setMemoryBudget(size: string | number): number {
  const bytes = parseSize(size, 'memoryBudget');
  configured = bytes;
  applied = false;
  return bytes;
}

/** Hands the budget to the native module (at each mount: cheap). */
export function applyMemoryBudget(): void {
  if (applied) return;
  const bytes = configured ?? defaultMemoryBudget();
  addon().setMemoryBudget(bytes === Infinity ? -1 : bytes);
  applied = true;
}

/** The budget and its use (before the first mount: the budget that mount will apply, nothing in use). */
export function memoryBudgetStats(): MemoryBudgetStats {
  if (applied) return addon().memoryBudget();
  const bytes = configured ?? defaultMemoryBudget();
  return { limitBytes: bytes === Infinity ? -1 : bytes, inMemoryBytes: 0, inMemoryContents: 0, spilledContents: 0, spilledBytes: 0 };
}
