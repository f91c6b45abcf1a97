// Small naming helpers, free of the VS Code API.

/** `base`, or `base-2`, `base-3`, … : the first name not in use. */
export function uniqueAgentName(base: string, taken: readonly string[]): string {
  const used = new Set(taken);
  if (!used.has(base)) return base;
  for (let i = 2; ; i++) if (!used.has(`${base}-${i}`)) return `${base}-${i}`;
}

/** Why a string cannot be an agent id (the daemon's rule: 1-255 bytes, no "/" or NUL), or undefined. */
export function agentIdProblem(id: string): string | undefined {
  if (id.length === 0) return 'name the agent';
  if (Buffer.byteLength(id) > 255) return 'at most 255 bytes';
  if (/[/\u0000]/.test(id)) return 'no "/" (or NUL) in an agent id';
  return undefined;
}
