// The agent file tools: read, write, edit, list, glob and grep over the tree as ONE agent's
// layer shows it, through the Layer API only. Many agents share one mount whose active layer
// changes under them, so these never look at the mount (nor at the folder on disk): agent A's
// tools see A's added, changed and deleted files while another agent's layer is active.
// Pure functions of a Layer; the daemon and MCP wiring live elsewhere. Every path argument is
// checked with normalizeRelPath, every answer is bounded, and walks come back in path order.
//
// text.ts reads, writes and edits (each write one native job, with `expect` preconditions);
// search.ts lists and globs; grep.ts searches contents; args.ts and probe.ts hold what they share.
export type { FileExpectation } from '../../shadow/native';
export {
  DEFAULT_MAX_BYTES,
  editText,
  MAX_FILE_BYTES,
  readLayerRange,
  readText,
  writeText,
  type LayerReadResult,
  type ReadTextOptions,
  type ReadTextResult,
} from './text';
export { glob, list, type ListEntry } from './search';
export { clipLine, DEFAULT_GREP_TIMEOUT_MS, grep, GREP_MAX_FILE_BYTES, MAX_LINE_CHARS, type GrepMatch, type GrepOptions } from './grep';
