// Handlers for the agent file tools (file.read, write, edit, list, glob, grep): text in an
// agent's layer, as MCP and the CLI's file commands use it. The work is work/files.ts'.
import * as files from '../../work/files';
import type { ShadowManager } from '../manager';
import { type Changes, type Handlers, shadowOf } from './context';

export function fileHandlers(m: ShadowManager) {
  return {
    'file.read': async (p) => files.readText((await shadowOf(m, p)).layer(p.agent), p.path, { startLine: p.startLine, endLine: p.endLine }),
    'file.write': async (p) =>
      files.writeText(await (await shadowOf(m, p)).createLayer(p.agent), p.path, p.content, {
        ...(p.mode === undefined ? {} : { mode: p.mode }),
        ...(p.expect === undefined ? {} : { expect: p.expect }),
      }),
    'file.edit': async (p) =>
      files.editText(await (await shadowOf(m, p)).createLayer(p.agent), p.path, p.oldText, p.newText, {
        replaceAll: p.replaceAll === true,
        ...(p.expect === undefined ? {} : { expect: p.expect }),
      }),
    'file.list': async (p) =>
      files.list((await shadowOf(m, p)).layer(p.agent), p.path ?? '', {
        recursive: p.recursive,
        includeIgnored: p.includeIgnored,
        limit: p.limit,
      }),
    'file.glob': async (p) =>
      files.glob((await shadowOf(m, p)).layer(p.agent), p.pattern, { cwd: p.cwd, includeIgnored: p.includeIgnored, limit: p.limit }),
    'file.grep': async (p) =>
      files.grep((await shadowOf(m, p)).layer(p.agent), p.pattern, {
        path: p.path,
        glob: p.glob,
        ignoreCase: p.ignoreCase,
        fixedStrings: p.fixedStrings,
        context: p.context,
        includeIgnored: p.includeIgnored,
        maxMatches: p.maxMatches,
        timeoutMs: p.timeoutMs,
      }),
  } satisfies Partial<Handlers>;
}

export const fileChanges = {
  'file.write': (p, r) => ({ agent: p.agent, event: 'written', path: r.path }),
  'file.edit': (p, r) => ({ agent: p.agent, event: 'written', path: r.path }),
} satisfies Changes;
