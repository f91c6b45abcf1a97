// The project the review tests work on: a repository with a 60-line text file, a binary file and
// a script, and the agent's version of the text file (three hunks).
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { tempDir } from './fixtures';

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

export const LINES = Array.from({ length: 60 }, (_, i) => `line ${i + 1}\n`);

/** A repository with a 60-line text file, a binary file and an executable script, committed. */
export function makeReviewRepo(label = 'review-repo'): string {
  const dir = tempDir(label);
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'config', 'user.email', 'test@example.invalid');
  git(dir, 'config', 'user.name', 'test');
  fs.writeFileSync(path.join(dir, 'notes.txt'), LINES.join(''));
  fs.writeFileSync(path.join(dir, 'image.bin'), Buffer.from([0, 1, 2, 3]));
  fs.writeFileSync(path.join(dir, 'run.sh'), '#!/bin/sh\necho one\n', { mode: 0o644 });
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'base');
  return dir;
}

/** notes.txt with lines 5 and 40 changed and a line added after 50: three hunks. */
export function agentNotes(): string {
  const l = [...LINES];
  l[4] = 'line 5, by the agent\n';
  l[39] = 'line 40, by the agent\n';
  l.splice(50, 0, 'a line the agent added\n');
  return l.join('');
}
