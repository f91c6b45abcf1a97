// PowerShell's approved verbs (what `Get-Verb` lists), by group. Import-Module warns about a
// command whose verb is not among them, so every cmdlet of the generated module must use one.
// Build and Deploy joined the list in PowerShell 6; the module targets Windows PowerShell 5.1
// as well, so those two are kept apart and not allowed for it.

export const APPROVED_VERBS = {
  Common: [
    'Add',
    'Clear',
    'Close',
    'Copy',
    'Enter',
    'Exit',
    'Find',
    'Format',
    'Get',
    'Hide',
    'Join',
    'Lock',
    'Move',
    'New',
    'Open',
    'Optimize',
    'Pop',
    'Push',
    'Redo',
    'Remove',
    'Rename',
    'Reset',
    'Resize',
    'Search',
    'Select',
    'Set',
    'Show',
    'Skip',
    'Split',
    'Step',
    'Switch',
    'Undo',
    'Unlock',
    'Watch',
  ],
  Communications: ['Connect', 'Disconnect', 'Read', 'Receive', 'Send', 'Write'],
  Data: [
    'Backup',
    'Checkpoint',
    'Compare',
    'Compress',
    'Convert',
    'ConvertFrom',
    'ConvertTo',
    'Dismount',
    'Edit',
    'Expand',
    'Export',
    'Group',
    'Import',
    'Initialize',
    'Limit',
    'Merge',
    'Mount',
    'Out',
    'Publish',
    'Restore',
    'Save',
    'Sync',
    'Unpublish',
    'Update',
  ],
  Diagnostic: ['Debug', 'Measure', 'Ping', 'Repair', 'Resolve', 'Test', 'Trace'],
  Lifecycle: [
    'Approve',
    'Assert',
    'Complete',
    'Confirm',
    'Deny',
    'Disable',
    'Enable',
    'Install',
    'Invoke',
    'Register',
    'Request',
    'Restart',
    'Resume',
    'Start',
    'Stop',
    'Submit',
    'Suspend',
    'Uninstall',
    'Unregister',
    'Wait',
  ],
  Security: ['Block', 'Grant', 'Protect', 'Revoke', 'Unblock', 'Unprotect'],
  Other: ['Use'],
} as const;

/** Approved in PowerShell 6 and later only (Lifecycle group); Windows PowerShell 5.1 warns about them. */
export const VERBS_SINCE_PS6 = ['Build', 'Deploy'] as const;

const all = new Set<string>(Object.values(APPROVED_VERBS).flat());

/** Whether `verb` is approved in Windows PowerShell 5.1 (and so in every later version). */
export function isApprovedVerb(verb: string): boolean {
  return all.has(verb);
}

/**
 * Verbs of commands that only look: their cmdlets take no -WhatIf/-Confirm. Every other verb
 * the module uses changes something (a layer, a mount, a file, the user's folder) and so goes
 * through ShouldProcess.
 */
export const READ_ONLY_VERBS: readonly string[] = [
  'Get',
  'Find',
  'Search',
  'Compare',
  'Test',
  'Measure',
  'Read',
  'Resolve',
  'Show',
  'Watch',
];
