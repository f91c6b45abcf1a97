// Builds (once) and runs the small C++ programs of the tests: test/native/fsprobe, for system
// calls Node.js does not expose, test/native/deepprobe, for paths longer than Node.js can reach,
// and test/conformance/posix, the POSIX conformance checks.
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { repoRoot } from './fixtures';

/** Compiles `test/<rel>.cc` to build/test/<name> unless the binary is newer than its source. */
function compiled(rel: string): string {
  const source = path.join(repoRoot, 'test', `${rel}.cc`);
  const binary = path.join(repoRoot, 'build', 'test', path.basename(rel));
  const stale = !fs.existsSync(binary) || fs.statSync(binary).mtimeMs < fs.statSync(source).mtimeMs;
  if (stale) {
    fs.mkdirSync(path.dirname(binary), { recursive: true });
    // Built beside it and renamed into place: another test run may be starting the binary, or
    // building it too.
    const fresh = `${binary}.${process.pid}.tmp`;
    execFileSync('g++', ['-O1', '-std=c++17', '-Wall', '-o', fresh, source], { stdio: 'inherit' });
    fs.renameSync(fresh, binary);
  }
  return binary;
}

export const probeBinary = (): string => compiled('native/fsprobe');
export const conformanceBinary = (): string => compiled('conformance/posix');
export const deepProbeBinary = (): string => compiled('native/deepprobe');

/** Runs fsprobe; returns its trimmed stdout (e.g. "ok", "errno EEXIST", file content). */
export function probe(...args: string[]): string {
  const r = spawnSync(probeBinary(), args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status === 2 || r.error) throw new Error(`fsprobe ${args.join(' ')} failed: ${r.stderr}${r.error ?? ''}`);
  return r.stdout.trim();
}
