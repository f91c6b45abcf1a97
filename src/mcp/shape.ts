// How tool results are shaped for a model's context: bounded in size everywhere (a run's output,
// a list, a diff, one long line), line numbers 1-based as `cat -n` prints them, structured
// answers as compact JSON, and every cut saying what was left out and how to get the rest.
// One function (toolResult) builds the CallToolResult every tool returns, so that notes to the
// agent can be appended to any result in one place.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** read_file's default number of lines, and how long one shown line may be. */
export const READ_DEFAULT_LINES = 2000;
export const LINE_MAX_CHARS = 2000;
/** How much of each output stream of a run a result shows: its beginning and its end, in bytes. */
export const OUTPUT_HEAD_BYTES = 8 * 1024;
export const OUTPUT_TAIL_BYTES = 8 * 1024;
/** The most a text result (diff, patch, hover, one poll of a background run) shows, in bytes. */
export const TEXT_MAX_BYTES = 48 * 1024;
/** How many entries a list (glob, list_directory, grep matches, changes, locations) shows. */
export const LIST_MAX = 200;

/** What a tool produced before it became a CallToolResult: its text, and notes to append. */
export interface ToolOutput {
  text: string;
  isError?: boolean;
  /** Short notes to the agent, appended after the result (each its own paragraph). */
  notes: string[];
}

export const output = (text: string, ...notes: string[]): ToolOutput => ({ text, notes });

/** The one place a tool's output becomes the MCP result. */
export function toolResult(out: ToolOutput): CallToolResult {
  const content: CallToolResult['content'] = [{ type: 'text', text: out.text }];
  for (const n of out.notes) content.push({ type: 'text', text: n });
  return out.isError ? { isError: true, content } : { content };
}

/** Structured answers: one line of JSON, no pretty printing. */
export const compactJson = (value: unknown): string => JSON.stringify(value);

/** `line` cut to LINE_MAX_CHARS (or `max`), saying how much was cut. */
export function cutLine(line: string, max = LINE_MAX_CHARS): string {
  if (line.length <= max) return line;
  return `${line.slice(0, max)}… [line cut: ${line.length - max} more characters]`;
}

/** Lines numbered as `cat -n` prints them (1-based, a tab after the number), each cut to LINE_MAX_CHARS. */
export function numberLines(lines: string[], first: number): string {
  return lines.map((l, i) => `${String(first + i).padStart(6)}\t${cutLine(l)}`).join('\n');
}

/** Bytes of a string as UTF-8. */
export const bytesOf = (s: string): number => Buffer.byteLength(s, 'utf8');

/**
 * `text` whole when it fits head + tail bytes, else its first `head` and last `tail` bytes with a
 * line between saying how many bytes were left out and `how` to get them.
 */
export function capMiddle(text: string, head: number, tail: number, how: string): { text: string; omitted: number } {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= head + tail) return { text, omitted: 0 };
  const omitted = buf.length - head - tail;
  const start = buf.subarray(0, head).toString('utf8');
  const end = buf.subarray(buf.length - tail).toString('utf8');
  return { text: `${start}\n[… ${omitted} bytes left out of ${buf.length}; ${how} …]\n${end}`, omitted };
}

/** `text` whole when it fits `max` bytes, else its first `max` bytes and a line saying what is left and `how` to see it. */
export function capHead(text: string, max: number, how: string): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= max) return text;
  return `${buf.subarray(0, max).toString('utf8')}\n[… ${buf.length - max} more bytes of ${buf.length} not shown; ${how}]`;
}

/**
 * At most LIST_MAX (or `max`) lines of `items`, then one saying how many more there are (at
 * least, when the daemon's own answer was already cut) and how to narrow.
 */
export function boundedList(items: string[], narrow: string, opts: { max?: number; moreBeyond?: boolean } = {}): string {
  const max = opts.max ?? LIST_MAX;
  const shown = items.slice(0, max);
  const more = items.length - shown.length;
  if (more > 0 || opts.moreBeyond) {
    const count = !opts.moreBeyond ? `${more} more` : more > 0 ? `at least ${more} more` : 'more not listed';
    shown.push(`[… ${count}; ${narrow}]`);
  }
  return shown.join('\n');
}
