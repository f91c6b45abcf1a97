// Builds (once) and runs test/native/fsprobe, for system calls Node.js does not expose.
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { repoRoot } from './fixtures';

const source = path.join(repoRoot, 'test', 'native', 'fsprobe.cc');
const binary = path.join(repoRoot, 'build', 'test', 'fsprobe');

export function probeBinary(): string {
  const stale = !fs.existsSync(binary) || fs.statSync(binary).mtimeMs < fs.statSync(source).mtimeMs;
  if (stale) {
    fs.mkdirSync(path.dirname(binary), { recursive: true });
    execFileSync('g++', ['-O1', '-std=c++17', '-o', binary, source], { stdio: 'inherit' });
  }
  return binary;
}

/** Runs fsprobe; returns its trimmed stdout (e.g. "ok", "errno EEXIST", file content). */
export function probe(...args: string[]): string {
  const r = spawnSync(probeBinary(), args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status === 2 || r.error) throw new Error(`fsprobe ${args.join(' ')} failed: ${r.stderr}${r.error ?? ''}`);
  return r.stdout.trim();
}
