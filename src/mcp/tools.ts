// The MCP server's tools, as data: each one's input schema (the protocol's own parameters where
// they fit, without shadow and agent; shaped as agents call them where they do not: read_file's
// offset and limit, run_command's command line, positions as 1-based line and column) and the
// call that turns it into daemon requests and a bounded text answer (shape.ts). One module per
// area in tools/; this one lists them in the order tools/list shows them.
import { FILE_TOOLS } from './tools/files';
import { LINT_TOOLS } from './tools/lints';
import { RUN_TOOLS } from './tools/run';
import { WORK_TOOLS } from './tools/work';
import type { ToolDef } from './tools/common';

export { EDIT_LINTS_TIMEOUT_MS, type Extra, type ToolContext, type ToolDef } from './tools/common';
export { APPLY, REVIEW } from './tools/work';

export const TOOLS: ToolDef[] = [...FILE_TOOLS, ...RUN_TOOLS, ...LINT_TOOLS, ...WORK_TOOLS];
