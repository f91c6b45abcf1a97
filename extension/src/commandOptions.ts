// The options a command of the extension takes as its last argument when it is scripted (the
// extension's tests, keybindings), and how a scripted call is told from an interactive one.
import type * as vscode from 'vscode';

/** Options a command takes as its last argument when scripted (tests, keybindings). */
export interface CommandOptions {
  /** false: no confirmation dialog. */
  confirm?: boolean;
  /** apply: how to resolve conflicts, by path, without asking. */
  resolutions?: Record<string, 'agent' | 'folder' | 'merged' | { content: string }>;
  /** run: the command line, without asking. */
  commandLine?: string;
  /** checkpoint: the name, without asking. restore: the checkpoint. */
  name?: string;
  /** newAgentTerminal: the agent, without asking (a new one is made if the shadow has none of that name). */
  agent?: string;
  /** run: cancels the run too (besides the notification's Cancel button). */
  cancellation?: vscode.CancellationToken;
  /** applyBranch: the branch's name, without asking. */
  branch?: string;
  /** applyBranch: when the branch exists, true replaces it and false refuses, without asking. */
  force?: boolean;
  /**
   * applyLayer, applyFile, showPatch: also the files git ignores in the folder (without it they are
   * left out; applyLayer asks when the layer has some). .git is left out whatever this says.
   */
  includeIgnored?: boolean;
}

/** A scripted call (it passed { confirm: false }): it gets its errors thrown back, not only shown. */
export function isScripted(arg: unknown): boolean {
  return typeof arg === 'object' && arg !== null && !Array.isArray(arg) && (arg as CommandOptions).confirm === false;
}
