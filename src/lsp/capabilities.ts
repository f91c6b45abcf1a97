// What shadowfs is to a language server: the client capabilities it announces in initialize, and
// its answers to the server's own requests (settings from the server's spec, the workspace
// folder, and polite refusals of what shadowfs does not do: applying edits, showing messages).
import * as path from 'path';
import { pathToFileURL } from 'url';
import type { MessageConnection } from 'vscode-jsonrpc/node';
import type { ClientCapabilities } from 'vscode-languageserver-protocol';
import type { ServerSpec } from './servers';

export function clientCapabilities(): ClientCapabilities {
  return {
    general: { positionEncodings: ['utf-16'] },
    workspace: {
      configuration: true,
      workspaceFolders: true,
      didChangeWatchedFiles: { dynamicRegistration: true, relativePatternSupport: true },
      applyEdit: false,
      workspaceEdit: { documentChanges: true },
    },
    window: { workDoneProgress: true },
    textDocument: {
      synchronization: { dynamicRegistration: false, didSave: false, willSave: false },
      publishDiagnostics: {
        versionSupport: true,
        relatedInformation: true,
        tagSupport: { valueSet: [1, 2] },
        codeDescriptionSupport: true,
      },
      diagnostic: { dynamicRegistration: false, relatedDocumentSupport: false },
      hover: { contentFormat: ['markdown', 'plaintext'] },
      definition: { linkSupport: true },
      references: {},
      codeAction: {
        dataSupport: true,
        isPreferredSupport: true,
        resolveSupport: { properties: ['edit'] },
        codeActionLiteralSupport: {
          codeActionKind: {
            valueSet: [
              '',
              'quickfix',
              'refactor',
              'refactor.extract',
              'refactor.inline',
              'refactor.rewrite',
              'source',
              'source.organizeImports',
              'source.fixAll',
            ],
          },
        },
      },
    },
  };
}

/** The value at a dotted section path of a settings object, or null. */
function lookupSetting(settings: unknown, section: string | undefined): unknown {
  if (section === undefined || section === '') return settings ?? null;
  let cur: unknown = settings;
  for (const part of section.split('.')) {
    if (typeof cur !== 'object' || cur === null || !(part in cur)) return null;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur ?? null;
}

/** Answers the requests a server sends its client, for `spec` with workspace root `root`. */
export function answerServerRequests(conn: MessageConnection, spec: ServerSpec, root: string): void {
  conn.onRequest('workspace/configuration', (p: { items: Array<{ section?: string }> }) =>
    p.items.map((item) => lookupSetting(spec.settings, item.section)),
  );
  conn.onRequest('workspace/workspaceFolders', () => [{ uri: pathToFileURL(root).href, name: path.basename(root) }]);
  conn.onRequest('client/registerCapability', () => null);
  conn.onRequest('client/unregisterCapability', () => null);
  conn.onRequest('window/workDoneProgress/create', () => null);
  conn.onRequest('workspace/applyEdit', () => ({ applied: false, failureReason: 'shadowfs applies no edits on its own' }));
  conn.onRequest('window/showMessageRequest', () => null);
  conn.onRequest('workspace/diagnostic/refresh', () => null);
}
