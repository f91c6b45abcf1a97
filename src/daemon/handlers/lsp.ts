// Handlers for the language servers running inside a shadow: lints (fresh diagnostics for an
// agent's edits), definition, references and hover. The work is the lints service's.
import type { ShadowManager } from '../manager';
import type { Handlers } from './context';

export function lspHandlers(m: ShadowManager) {
  return {
    lints: async (p) => (await m.lints(p.shadow)).lints(p),
    'lsp.definition': async (p) => {
      const r = await (await m.lints(p.shadow)).at('definition', p);
      return { status: r.status, ...waited(r), ...(r.error ? { error: r.error } : {}), locations: r.locations };
    },
    'lsp.references': async (p) => {
      const r = await (await m.lints(p.shadow)).at('references', p);
      return { status: r.status, ...waited(r), ...(r.error ? { error: r.error } : {}), locations: r.locations };
    },
    'lsp.hover': async (p) => {
      const r = await (await m.lints(p.shadow)).at('hover', p);
      return {
        status: r.status,
        ...waited(r),
        ...(r.error ? { error: r.error } : {}),
        contents: r.contents,
        ...(r.range ? { range: r.range } : {}),
      };
    },
  } satisfies Partial<Handlers>;
}

/** The waitingFor of a queued answer, when there is one. */
function waited(r: { waitingFor?: string }): { waitingFor?: string } {
  return r.waitingFor === undefined ? {} : { waitingFor: r.waitingFor };
}
