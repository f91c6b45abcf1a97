// libc, reached through ffi-rs for the few calls Node does not make for us (getsockopt for a
// socket's peer, fcntl for a descriptor's close-on-exec flag). ffi-rs is required on first use
// only: importing this module never fails, on any platform.

type Ffi = typeof import('ffi-rs');

/** The name ffi-rs knows the running program's libc by. */
export const LIBC = 'shadowfs-libc';

let ffi: Ffi | undefined;

/** ffi-rs with libc opened; `what` says, in an error, what needed it. */
export function libc(what: string): Ffi {
  if (ffi) return ffi;
  let mod: Ffi;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = require('ffi-rs') as Ffi;
  } catch (err) {
    throw new Error(`cannot ${what}: ffi-rs does not load (${(err as Error).message})`, { cause: err });
  }
  // An empty path opens the running program, which has libc's symbols.
  mod.open({ library: LIBC, path: '' });
  ffi = mod;
  return mod;
}

/** What a libc call that sets errno answered. */
export interface LibcResult {
  value: number;
  errnoCode: number;
  errnoMessage: string;
}

/** errno's message without the " (os error N)" ffi-rs adds. */
export const errnoText = (r: LibcResult): string => r.errnoMessage.replace(/ \(os error \d+\)$/, '');
