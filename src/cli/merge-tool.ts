// The user's merge tool for apply's conflicts (`shadowfs apply --merge-tool [NAME]`), found the
// way git finds it: NAME, else `git config merge.tool` in the folder; its command from
// `mergetool.NAME.cmd` (run by sh with BASE, LOCAL, REMOTE and MERGED in its environment, as git
// runs it), else a few well-known tools by git's names. The four files are temporary files
// outside the folder (LOCAL: yours, REMOTE: the agent's, BASE: the version the merge starts from,
// MERGED: the three-way merge with its markers, which the tool edits). What the tool leaves in
// MERGED, exit status 0 and no markers left, is what apply writes; anything else leaves the
// conflict as it was.
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { platform } from '../platform';

export interface MergeTool {
  name: string;
  /** A shell command line (from git's configuration), or the program and arguments of a known tool. */
  run: { shell: string } | { argv: (files: MergeFiles) => string[] };
}

export interface MergeFiles {
  BASE: string;
  LOCAL: string;
  REMOTE: string;
  MERGED: string;
}

/** Tools git knows by name, as their command lines (git's mergetools/ scripts run them alike). */
const KNOWN: Record<string, (f: MergeFiles) => string[]> = {
  vscode: (f) => ['code', '--wait', '--merge', f.REMOTE, f.LOCAL, f.BASE, f.MERGED],
  meld: (f) => ['meld', f.LOCAL, f.BASE, f.REMOTE, '--output', f.MERGED],
  kdiff3: (f) => ['kdiff3', '--auto', f.BASE, f.LOCAL, f.REMOTE, '-o', f.MERGED],
  vimdiff: (f) => ['vim', '-f', '-d', f.MERGED, f.LOCAL, f.BASE, f.REMOTE],
  nvimdiff: (f) => ['nvim', '-d', f.MERGED, f.LOCAL, f.BASE, f.REMOTE],
};

function gitConfig(folder: string, key: string): string | undefined {
  try {
    const v = execFileSync('git', ['-C', folder, 'config', '--get', key], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return v || undefined;
  } catch {
    return undefined; // not set (git exits 1), or no git
  }
}

/** The merge tool `asked` names (empty: the one git's configuration names), or INVALID_ARGUMENT saying how to set one. */
export function findMergeTool(folder: string, asked: string): MergeTool {
  const name = asked || gitConfig(folder, 'merge.tool');
  if (!name)
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `no merge tool is configured: name one (--merge-tool meld), or set git's: git config --global merge.tool NAME (known: ${Object.keys(KNOWN).join(', ')}; any other with mergetool.NAME.cmd)`,
    );
  const cmd = gitConfig(folder, `mergetool.${name}.cmd`);
  if (cmd) return { name, run: { shell: cmd } };
  const known = KNOWN[name];
  if (known) return { name, run: { argv: known } };
  throw new ShadowError(
    'INVALID_ARGUMENT',
    `merge tool ${name} has no command: set it with git config --global mergetool.${name}.cmd '<command using $BASE $LOCAL $REMOTE $MERGED>' (known by name: ${Object.keys(KNOWN).join(', ')})`,
  );
}

export interface ToolConflict {
  path: string;
  folder: string | null;
  agent: string | null;
  base?: string | null;
  merged: string | null;
}

/** Runs the tool on one conflict, on the user's terminal: the content it resolved to, or why not. */
export function resolveWithTool(tool: MergeTool, folder: string, c: ToolConflict): { content: string } | { refused: string } {
  if (c.folder === null || c.agent === null) return { refused: 'a merge tool needs both versions as text (one side is absent or binary)' };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-merge-'));
  try {
    const ext = path.extname(c.path);
    const stem = path.basename(c.path, ext);
    const file = (side: string, text: string): string => {
      const p = path.join(dir, `${stem}_${side}${ext}`);
      fs.writeFileSync(p, text);
      return p;
    };
    const files: MergeFiles = {
      BASE: file('BASE', c.base ?? ''),
      LOCAL: file('LOCAL', c.folder),
      REMOTE: file('REMOTE', c.agent),
      MERGED: file('MERGED', c.merged ?? c.folder),
    };
    const env = { ...process.env, ...files };
    const r =
      'shell' in tool.run
        ? spawnSync(platform.name === 'win32' ? 'sh.exe' : '/bin/sh', ['-c', tool.run.shell], { cwd: folder, env, stdio: 'inherit' })
        : spawnSync(tool.run.argv(files)[0], tool.run.argv(files).slice(1), { cwd: folder, env, stdio: 'inherit' });
    if (r.error) return { refused: `the merge tool ${tool.name} did not start: ${r.error.message}` };
    if (r.status !== 0) return { refused: `the merge tool ${tool.name} exited with ${r.status ?? r.signal}` };
    const out = fs.readFileSync(files.MERGED, 'utf8');
    if (/^<<<<<<< /m.test(out) && /^>>>>>>> /m.test(out)) return { refused: 'the merged file still holds conflict markers' };
    return { content: out };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
