// How the daemon starts what an agent runs on Linux: always through shadowfs-launch
// (native/launcher/linux_launch.cc), a fixed program beside the native module, by absolute path.
// This module builds its argument list, the command's environment (a short list taken from the
// daemon's, then the caller's variables, which apply only to the final exec inside), what the
// run must not see (shadowfs's runtime, state and configuration directories, every shadowfs
// mount but its own), and reads back what held.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { nativeModuleCandidates } from '../shadow/native';
import { platform, runtimeDir, shadowfsMounts, stateDir } from '../platform';

/** The launcher program: beside the native module (build/Release, or the package's prebuilt folder). */
export function launcherPath(): string {
  return path.join(path.dirname(nativeModuleCandidates()[0]), 'shadowfs-launch');
}

/** What a run's confinement is made of; `protections` in a run's result lists those that held. */
export type Protection = 'mount' | 'user' | 'pid' | 'network' | 'landlock' | 'landlock-writes' | 'seccomp';

/** Variables of the daemon's own environment a command gets (nothing else of it: no tokens, sockets or state paths). */
const PASSED = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TERM',
  'COLORTERM',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
]);

/** The environment of a confined command: a few of the daemon's variables, then the caller's. */
export function commandEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  if (!platform.namespaces) {
    // Windows runs start through their Job Object with the daemon's environment (issue 29 makes
    // that minimal too: Windows needs SystemRoot, PATHEXT, COMSPEC and more than this list).
    // Windows names variables without letter case: an extra `Path` or `temp` replaces the
    // daemon's `PATH` or `TEMP` instead of standing beside it (where spawn would keep whichever
    // sorts first, the daemon's).
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    for (const [k, v] of Object.entries(extra)) {
      for (const old of Object.keys(env)) if (old.toUpperCase() === k.toUpperCase()) delete env[old];
      env[k] = v;
    }
    return env;
  }
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || v.includes('\0')) continue;
    if (PASSED.has(k) || k.startsWith('LC_')) env[k] = v;
  }
  // Only absolute directories: a relative PATH entry would be looked up wherever the command stands.
  env.PATH = (env.PATH ?? '/usr/local/bin:/usr/bin:/bin')
    .split(':')
    .filter((d) => d.startsWith('/'))
    .join(':');
  env.TMPDIR = '/tmp';
  return { ...env, ...extra };
}

/**
 * Directories the user lets runs write besides the shadow (package caches such as ~/.npm are the
 * usual ask): $SHADOWFS_RUN_WRITABLE of the daemon, absolute paths separated by ':'. Default none.
 */
export function userWritable(): string[] {
  const dirs = outermost(realPaths((process.env.SHADOWFS_RUN_WRITABLE ?? '').split(':'), 'SHADOWFS_RUN_WRITABLE'));
  for (const d of dirs) refuseOwn(d, 'SHADOWFS_RUN_WRITABLE');
  return dirs;
}

const within = (a: string, b: string): boolean => a === b || b === '/' || a.startsWith(`${b}/`);

/**
 * shadowfs's own places a run or session must never be given: its runtime directory (sockets,
 * mount points of every shadow and view), its state (checkpoints, the state file) and its
 * configuration (lsp.json names programs the daemon starts), whether they exist yet or not, and
 * every shadowfs mount. A directory inside one of them, or above one, is refused with the reason.
 */
function refuseOwn(dir: string, what: string): void {
  const own: string[] = [];
  for (const f of [runtimeDir, stateDir]) {
    try {
      own.push(f());
    } catch {
      // none on this system
    }
  }
  own.push(path.join(process.env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config'), 'shadowfs'));
  for (const o of [...own, ...shadowfsMounts()]) {
    if (within(dir, o) || within(o, dir))
      throw new ShadowError('INVALID_PATH', `${what} names ${dir}, which ${within(dir, o) ? 'is inside' : 'holds'} shadowfs's own ${o}`);
  }
}

/**
 * The extra directories a shell session is given (--writable, --readable), checked: absolute,
 * existing directories named by their real path, apart from the folder (neither the folder, inside
 * it, nor above it: that would give the program the folder itself), and apart from shadowfs's
 * own places (refuseOwn). The launcher opens each again without following links (openat2), so a
 * name swapped for a link after this check is refused there.
 */
export function checkExtraDirs(dirs: string[], folder: string, what: string): string[] {
  const out: string[] = [];
  for (const d of dirs) {
    if (!path.isAbsolute(d)) throw new ShadowError('INVALID_PATH', `${what} directories are absolute paths, got ${JSON.stringify(d)}`);
    const abs = path.resolve(d);
    let real: string;
    try {
      real = fs.realpathSync(abs);
    } catch {
      throw new ShadowError('NOT_FOUND', `${what} directory ${abs} does not exist`);
    }
    if (real !== abs)
      throw new ShadowError('INVALID_PATH', `${what} directory ${abs} goes through a symbolic link (to ${real}); name the real path`);
    if (!fs.statSync(real).isDirectory()) throw new ShadowError('INVALID_PATH', `${what} names ${real}, which is not a directory`);
    if (within(real, folder) || within(folder, real))
      throw new ShadowError(
        'INVALID_PATH',
        `${what} directory ${real} would give the session the folder itself (${folder}); name one apart from it`,
      );
    refuseOwn(real, `${what} directory`);
    out.push(real);
  }
  return out;
}

/**
 * The absolute entries that exist and are real paths. An entry that goes through a symbolic
 * link is never followed: a run may have planted the link (in a writable directory, or in the
 * shadow) to turn the entry into a host directory of its choosing. For a list the user wrote
 * (`list` names it) that is an error saying which entry; PATH's entries are just left out.
 */
function realPaths(entries: string[], list?: string): string[] {
  const out: string[] = [];
  for (const e of entries) {
    if (!e.startsWith('/')) continue;
    const abs = path.resolve(e);
    let real: string;
    try {
      real = fs.realpathSync(abs);
    } catch {
      continue; // not there: nothing to show
    }
    if (real === abs) out.push(abs);
    else if (list)
      throw new ShadowError(
        'INVALID_ARGUMENT',
        `${list} names ${abs}, which goes through a symbolic link (to ${real}); name the real path`,
      );
  }
  return out;
}

/** Entries with none of the others above them: one inside another would be reached through it. */
function outermost(dirs: string[]): string[] {
  const unique = [...new Set(dirs)];
  return unique.filter((d) => !unique.some((o) => o !== d && (o === '/' || d.startsWith(`${o}/`))));
}

/** Top-level directories the launcher shows read-only in every view (native/launcher/view.cc kSystem). */
const SYSTEM = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc', '/opt', '/nix', '/sys'];

/**
 * What a run reads besides the system, read-only: where the daemon's PATH and Node live outside
 * the system directories (a version manager under the home directory: its top directory, so its
 * shims find the rest), git's configuration, and $SHADOWFS_RUN_READABLE (absolute paths
 * separated by ':'). Nothing else of the home directory is there.
 */
export function readOnlyExtras(): string[] {
  const home = os.homedir();
  const out = new Set<string>();
  const add = (dir: string): void => {
    const d = path.resolve(dir);
    if (d === '/' || SYSTEM.some((s) => d === s || d.startsWith(`${s}/`))) return;
    if (home && home !== '/' && d.startsWith(`${home}/`)) out.add(path.join(home, d.slice(home.length + 1).split('/')[0]));
    else if (d !== home) out.add(path.basename(d) === 'bin' ? path.dirname(d) : d);
  };
  for (const dir of realPaths([...(process.env.PATH ?? '').split(':'), path.dirname(process.execPath)])) add(dir);
  for (const f of realPaths(['.gitconfig', path.join('.config', 'git')].map((f) => path.join(home, f)))) out.add(f);
  for (const d of realPaths((process.env.SHADOWFS_RUN_READABLE ?? '').split(':'), 'SHADOWFS_RUN_READABLE')) out.add(d);
  return [...out];
}

/**
 * Where `program` (a command's first word) is on this machine when a confined command could not
 * see it there: outside the system directories, the read-only extras, the plan's binds and its
 * writable directories. Undefined when it is visible, inside the shadow (relative), or found
 * nowhere (the launcher then says "No such file or directory" itself). A bare name is looked up
 * on `searchPath` as the command's own PATH would be. Both the name found and what its links lead
 * to must be visible: exec follows them.
 */
export function unseenProgram(program: string, plan: Pick<LaunchPlan, 'binds' | 'writable'>, searchPath: string): string | undefined {
  let found: string | undefined;
  if (program.includes('/')) {
    if (!path.isAbsolute(program)) return undefined; // beside the command, in the shadow
    found = program;
  } else {
    for (const dir of searchPath.split(':')) {
      if (!path.isAbsolute(dir)) continue;
      const f = path.join(dir, program);
      try {
        if (fs.statSync(f).isFile()) {
          found = f;
          break;
        }
      } catch {
        // not in this one
      }
    }
  }
  if (!found) return undefined;
  let real: string;
  try {
    real = fs.realpathSync(found);
  } catch {
    return undefined;
  }
  const roots = [...SYSTEM, ...readOnlyExtras(), ...plan.binds.map((b) => b.target), ...(plan.writable ?? [])];
  const seen = (f: string): boolean => roots.some((r) => f === r || f.startsWith(`${r}/`));
  if (seen(path.resolve(found)) && seen(real)) return undefined;
  return real;
}

/** The directories of shadowfs a run must not see, and every shadowfs mount but `keep`. */
export function hiddenFromRuns(keep: string[]): string[] {
  const out = new Set<string>();
  const add = (dir: string | undefined): void => {
    if (dir && path.isAbsolute(dir)) out.add(path.resolve(dir));
  };
  try {
    add(runtimeDir());
  } catch {
    // none to hide
  }
  try {
    add(stateDir());
  } catch {
    // none to hide
  }
  add(path.join(process.env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config'), 'shadowfs'));
  for (const m of shadowfsMounts()) if (!keep.includes(m)) add(m);
  return [...out];
}

/**
 * Without namespaces a run has no private /tmp: a directory of its own instead (the host's /tmp
 * may hold the daemon's runtime directory), the only place besides the shadow Landlock lets it
 * write. The caller removes it when the run ends.
 */
export function privateTempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-run-'));
}

export interface LaunchPlan {
  /** Put the shadow directory `source` at `target` (A's own path, or the shadow's own); read-only ones are not writable. */
  binds: { source: string; target: string; readOnly?: boolean }[];
  /** Absolute directory the command starts in, as the command sees it. */
  cwd: string;
  env: Record<string, string>;
  /** Cgroups the launcher joins before anything runs: the run's, and those holding its limits. */
  cgroups?: string[];
  noNetwork?: boolean;
  /** No namespaces: cgroup, Landlock, seccomp and the environment only (an accepted unprotected run). */
  noNamespaces?: boolean;
  /** Writable besides the binds (no namespaces: the shadow's own directory). */
  writable?: string[];
  /** Hidden from the command (defaults to hiddenFromRuns of the binds' sources). */
  hide?: string[];
}

/** The launcher's argument list for `argv` under `plan`; the status descriptor is fd 3. */
export function launchArgs(plan: LaunchPlan, argv: string[]): string[] {
  const args: string[] = ['--status-fd', '3', '--cwd', plan.cwd];
  for (const cg of plan.cgroups ?? []) args.push('--cgroup', cg);
  if (plan.noNamespaces) args.push('--no-namespaces');
  if (plan.noNetwork) args.push('--net');
  for (const b of plan.binds) args.push(b.readOnly ? '--ro-bind' : '--bind', b.source, b.target);
  // Extras inside a bind's target would cover part of the shadow: the shadow shows those itself.
  const inside = (d: string): boolean => plan.binds.some((b) => d === b.target || d.startsWith(`${b.target}/`));
  const hides = plan.noNamespaces ? [] : (plan.hide ?? hiddenFromRuns(plan.binds.map((b) => b.source)));
  if (!plan.noNamespaces) {
    // The home directory is private and empty (git's configuration comes back read-only in it):
    // caches a tool keeps there (~/.npm, ~/.cache) live as long as the run.
    const home = os.homedir();
    if (home && home !== '/' && !inside(home)) args.push('--tmpfs', home);
    // A hidden directory that holds a bind's target is not covered (the launcher would cover the
    // mount: a language server's root is a shadow or view in the runtime directory). An extra
    // around it would show the rest of it, the daemon's socket and state included: such an extra
    // (from $SHADOWFS_RUN_READABLE or the daemon's PATH) is left out of that command's view.
    const held = hides.filter((h) => plan.binds.some((b) => within(b.target, h)));
    for (const d of readOnlyExtras()) if (!inside(d) && !held.some((h) => within(h, d))) args.push('--ro-bind', d, d);
  }
  // The user's writable list, but nothing of the shadow's own path: that would be A itself.
  for (const w of [...(plan.writable ?? []), ...userWritable().filter((d) => !inside(d))]) args.push('--writable', w);
  for (const h of hides) args.push('--hide', h);
  for (const [k, v] of Object.entries(plan.env)) args.push('--env', `${k}=${v}`);
  return [...args, '--', ...argv];
}

/** What the launcher said on its status descriptor. */
export interface LaunchStatus {
  protections?: Protection[];
  error?: { code: string; message: string };
  leftover?: number;
}

export function parseStatus(text: string): LaunchStatus {
  const out: LaunchStatus = {};
  for (const line of text.split('\n')) {
    const sp = line.indexOf(' ');
    if (sp < 0) continue;
    const word = line.slice(0, sp);
    const rest = line.slice(sp + 1);
    if (word === 'protections' && !out.protections) out.protections = rest.split(',').filter(Boolean) as Protection[];
    else if (word === 'leftover') out.leftover = Number(rest);
    else if (word === 'error' && !out.error) {
      const sp2 = rest.indexOf(' ');
      out.error = { code: rest.slice(0, sp2), message: rest.slice(sp2 + 1) };
    }
  }
  return out;
}

const probes = new Map<string, { protections: Protection[] }>();

/**
 * Whether this system lets the launcher confine a run (with a network namespace when `noNetwork`),
 * and with what; a success is remembered, a failure asked again next time (it may have been a
 * moment of load). On another OS, or without the launcher built, the problem says so.
 */
export function probeConfinement(noNetwork: boolean): { protections: Protection[] } | { problem: string } {
  const key = noNetwork ? 'net' : 'plain';
  const known = probes.get(key);
  if (known) return known;
  let result: { protections: Protection[] } | { problem: string };
  if (!platform.namespaces) result = { problem: `${platform.name} has no Linux namespaces` };
  else if (!fs.existsSync(launcherPath())) result = { problem: `the launcher ${launcherPath()} is not built (npm run build:native)` };
  else {
    const r = spawnSync(
      launcherPath(),
      ['--probe', '--status-fd', '3', ...(noNetwork ? ['--net'] : []), '--env', 'PATH=/usr/bin:/bin', '--cwd', '/'],
      { stdio: ['ignore', 'ignore', 'pipe', 'pipe'], encoding: 'utf8', timeout: 30_000 },
    );
    const st = parseStatus(String((r.output as (string | null)[])[3] ?? ''));
    if (r.status === 0 && st.protections) result = { protections: st.protections };
    else result = { problem: st.error?.message ?? (r.error?.message || String(r.stderr).trim() || `the launcher exited with ${r.status}`) };
  }
  if ('protections' in result) probes.set(key, result);
  return result;
}
