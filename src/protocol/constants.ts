// The protocol's constants, in a module without its schemas (zod): the CLI reads them at start-up,
// and loading zod and the schemas would double the time a command takes to start.

/** The most bytes one layer.read answer carries (base64 makes a third more); larger files are read in ranges. */
export const LAYER_READ_MAX_BYTES = 16 * 1024 * 1024;

/** What an audit entry's op may be (protocol/audit.ts describes each). */
export const AUDIT_OP_NAMES = [
  'open',
  'exec',
  'create',
  'write',
  'truncate',
  'mkdir',
  'mknod',
  'symlink',
  'link',
  'unlink',
  'rmdir',
  'rename',
] as const;
