// What a language-server session answers with: every answer carries a status ('fresh', or a
// timeout or error that says why not, never an empty guess), and the deadline that turns a slow
// answer into a timeout.
import type { Command, Diagnostic, Range, TextEdit, WorkspaceEdit } from 'vscode-languageserver-protocol';

export type AnswerStatus = 'fresh' | 'timeout' | 'error';

export interface DiagnosticsAnswer {
  status: AnswerStatus;
  diagnostics: Diagnostic[];
  /** The document version the diagnostics are for (the one asked for). */
  version: number;
  error?: string;
}

export interface Answer<T> {
  status: AnswerStatus;
  value: T;
  error?: string;
}

/** A place in the workspace: relPath is relative to the root (absolute when outside it). */
export interface Place {
  relPath: string;
  uri: string;
  range: Range;
}

export interface FileEdits {
  relPath: string;
  uri: string;
  edits: TextEdit[];
}

export interface CodeActionAnswerItem {
  title: string;
  kind?: string;
  isPreferred?: boolean;
  diagnostics?: Diagnostic[];
  /** The edit as the server gave it. */
  edit?: WorkspaceEdit;
  /** The same edit flattened per file (text edits only; resource operations are left out). */
  edits: FileEdits[];
  /** A command the server wants run instead of (or after) the edit; not run here. */
  command?: Command;
}

/** A timer that settles `done` with 'timeout' after `ms`; clear() it when the answer came first. */
export class Deadline {
  private timer: NodeJS.Timeout | undefined;
  readonly done: Promise<'timeout'>;
  constructor(ms: number) {
    this.done = new Promise((resolve) => {
      this.timer = setTimeout(() => resolve('timeout'), Math.max(0, ms));
    });
  }
  clear(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}
