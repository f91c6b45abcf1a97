// Small naming helpers, free of the VS Code API.

/** `base`, or `base-2`, `base-3`, … : the first name not in use. */
export function uniqueAgentName(base: string, taken: readonly string[]): string {
  const used = new Set(taken);
  if (!used.has(base)) return base;
  for (let i = 2; ; i++) if (!used.has(`${base}-${i}`)) return `${base}-${i}`;
}
