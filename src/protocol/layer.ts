// The protocol's requests on an agent's layer as a set of entries: create, drop, clone and list
// layers; write, remove, revert and read paths in one; mask paths for an agent; reset it. Served by
// src/daemon/handlers/layer.ts (as are the layer requests of work.ts).
import * as z from 'zod';
import type { ErrorCode } from './errors';
import { LAYER_READ_MAX_BYTES } from './constants';
import { agentId, relPath, request, shadowAgent, shadowOnly, shadowRef, text } from './shared';

export { LAYER_READ_MAX_BYTES };

const pathErrors: ErrorCode[] = ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'PATH_THROUGH_SYMLINK', 'NOT_MOUNTED'];

export const LayerRequests = {
  'layer.create': request({
    summary: 'Creates an empty layer for an agent (an existing one is kept as it is).',
    params: shadowAgent,
    result: z.object({ agent: z.string() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'NOT_MOUNTED'],
  }),
  'layer.drop': request({
    summary: "Drops an agent's layer and everything it holds.",
    params: shadowAgent,
    result: z.object({ agent: z.string() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'LAYER_BUSY', 'NOT_MOUNTED'],
  }),
  'layer.clone': request({
    summary: "Makes `to` a copy of `agent`'s layer.",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, to: agentId }),
    result: z.object({ agent: z.string(), to: z.string() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'LAYER_EXISTS', 'NOT_MOUNTED'],
  }),
  'layer.list': request({
    summary: 'The agents that have a layer, and the active one.',
    params: shadowOnly,
    result: z.object({ agents: z.array(z.string()), active: z.string().nullable() }),
    errors: ['UNKNOWN_SHADOW', 'NOT_MOUNTED'],
  }),
  'layer.write': request({
    summary: "Writes a file into an agent's layer (creating the layer and missing parent directories).",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath,
      data: z.base64().describe('The file content, base64.'),
      mode: z.number().int().min(0).max(0o7777).optional().describe("Permission bits (default 0644, or the existing file's)."),
    }),
    result: z.object({ path: z.string(), bytes: z.number().int() }),
    errors: [...pathErrors, 'IS_DIRECTORY', 'NOT_A_DIRECTORY', 'INVALID_ARGUMENT', 'PATH_MASKED', 'PATH_PROTECTED'],
  }),
  'layer.remove': request({
    summary: "Removes a path in an agent's layer (the folder keeps it).",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, path: relPath }),
    result: z.object({ path: z.string() }),
    errors: [...pathErrors, 'NOT_FOUND', 'NOT_A_DIRECTORY', 'PATH_MASKED', 'PATH_PROTECTED'],
  }),
  'layer.revert': request({
    summary:
      "Drops an agent's own entry at a path (and everything under it), so the folder shows through there again; refused (CONFLICT) under a directory the layer deleted, replaced or moved, and (PATH_PROTECTED) where it would bring back the HEAD, objects or refs that make a directory a repository beside hooks, config, alternates or links the agent wrote there (revert those first).",
    params: z.strictObject({ shadow: shadowRef, agent: agentId, path: relPath }),
    result: z.object({ path: z.string() }),
    errors: [...pathErrors, 'UNKNOWN_AGENT', 'CONFLICT', 'PATH_PROTECTED'],
  }),
  'layer.read': request({
    summary: `Reads a file as an agent sees it (its layer over the folder): whole, or a range of it (offset, length) for files of any size. One answer carries at most ${LAYER_READ_MAX_BYTES} bytes: a whole read of a larger file is FILE_TOO_LARGE (read it in ranges; every answer says the file's size).`,
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath,
      offset: z
        .number()
        .int()
        .min(0)
        .max(Number.MAX_SAFE_INTEGER)
        .optional()
        .describe('Where to start reading, in bytes (default 0). Given with or without length, the read is a range.'),
      length: z
        .number()
        .int()
        .min(0)
        .max(LAYER_READ_MAX_BYTES)
        .optional()
        .describe(`How many bytes to read at most (default and cap: ${LAYER_READ_MAX_BYTES}); fewer come back at the end of the file.`),
    }),
    result: z.object({
      path: z.string(),
      data: z.string().describe('The content (of the range, for a ranged read), base64.'),
      size: z.number().int().optional().describe("The file's whole size in bytes."),
      offset: z.number().int().optional().describe('Where the bytes in data start.'),
    }),
    errors: [...pathErrors, 'UNKNOWN_AGENT', 'NOT_FOUND', 'IS_DIRECTORY', 'NOT_A_DIRECTORY', 'FILE_TOO_LARGE'],
  }),
  'layer.mask': request({
    summary:
      "Masked paths: reads or sets which paths of the folder do not exist for an agent (agent null: the shadow's default, for agents without a mask of their own). Globs as in .gitignore. Masked paths are absent from the agent's mounts, views, runs, file tools and diffs, and it cannot create them; the developer's folder is untouched. Not open to an agent's restricted connection.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId.nullable().describe("The agent whose mask this is; null: the shadow's default mask."),
      globs: z
        .array(text('A glob: a name at any depth (".env", "*.pem"), or a path from the root when it has a "/" (".aws/**").'))
        .max(256)
        .optional()
        .describe('Sets the mask to these globs (an empty list: a mask that hides nothing).'),
      offered: z.boolean().optional().describe('Sets the mask to the list shadowfs offers (answered in `offered`); not with globs.'),
      clear: z
        .boolean()
        .optional()
        .describe("Removes the agent's own mask (the default applies again), or the default; not with globs or offered."),
    }),
    result: z.object({
      agent: z.string().nullable(),
      globs: z.array(z.string()).describe('The globs in force for the agent (for agent null: the default).'),
      source: z
        .enum(['agent', 'default', 'inherited', 'none'])
        .describe("Where they come from: the agent's own, the shadow's default, the layer it was copied from, or none."),
      offered: z.array(z.string()).describe('The mask shadowfs offers (set with offered: true).'),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_ARGUMENT', 'NOT_MOUNTED'],
  }),
  'layer.reset': request({
    summary: "Empties an agent's layer.",
    params: shadowAgent,
    result: z.object({ agent: z.string() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'UNKNOWN_AGENT', 'NOT_MOUNTED'],
  }),
} as const;
