// Finds the shadowfs installation the extension works with: the `shadowfs` executable (the
// `shadowfs.path` setting, else the PATH) and the package it belongs to. The extension loads that
// package's client (`shadowfs/client`) instead of carrying a copy, so it always speaks the
// protocol of the daemon it starts, and its identity checks (which need ffi-rs, a native module)
// come with the installation. No VS Code API here: tested on its own.
import * as fs from 'fs';
import * as path from 'path';

export class LocateError extends Error {
  constructor(
    message: string,
    readonly code: 'SHADOWFS_NOT_FOUND' | 'SHADOWFS_NOT_BUILT',
  ) {
    super(message);
  }
}

export interface Installation {
  /** The executable the daemon is started with. */
  executable: string;
  /** The shadowfs package's root (its package.json names "shadowfs"). */
  packageRoot: string;
  /** The package's client module, to be required. */
  clientModule: string;
  version: string;
}

/** Searches a PATH for the shadowfs executable, as the platform names it. */
export function findOnPath(envPath: string | undefined, platform: NodeJS.Platform = process.platform): string | undefined {
  const names = platform === 'win32' ? ['shadowfs.cmd', 'shadowfs.exe', 'shadowfs.bat'] : ['shadowfs'];
  for (const dir of (envPath ?? '').split(platform === 'win32' ? ';' : ':')) {
    if (!dir) continue;
    for (const n of names) {
      const p = path.join(dir, n);
      try {
        if (fs.statSync(p).isFile()) return p;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

/** Whether a directory is the shadowfs package's root. */
function isPackageRoot(dir: string): string | undefined {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
    return pkg.name === 'shadowfs' && typeof pkg.version === 'string' ? pkg.version : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The package an executable belongs to: bin/shadowfs.js (directly or through a symlink, as npm
 * installs it on Linux), or, beside a Windows shim, npm's node_modules\shadowfs or the
 * installer's lib\shadowfs.
 */
export function packageRootOf(executable: string): string | undefined {
  let real = executable;
  try {
    real = fs.realpathSync(executable);
  } catch {
    return undefined;
  }
  const dir = path.dirname(real);
  const candidates = [
    path.dirname(dir),
    path.join(dir, 'node_modules', 'shadowfs'),
    path.join(dir, 'lib', 'shadowfs'),
    path.join(dir, '..', 'lib', 'shadowfs'),
  ];
  return candidates.find((c) => isPackageRoot(c) !== undefined);
}

/** Resolves the setting (empty: the PATH) to an installation, or says what is missing. */
export function locate(setting: string, envPath: string | undefined, platform: NodeJS.Platform = process.platform): Installation {
  const fromSetting = setting.trim();
  const executable = fromSetting || findOnPath(envPath, platform);
  if (!executable) {
    throw new LocateError(
      'shadowfs is not on the PATH; install it (npm install -g shadowfs, or the Windows installer) or set "shadowfs.path" to its executable',
      'SHADOWFS_NOT_FOUND',
    );
  }
  if (!fs.existsSync(executable)) {
    throw new LocateError(`the "shadowfs.path" setting names ${executable}, which does not exist`, 'SHADOWFS_NOT_FOUND');
  }
  const packageRoot = packageRootOf(executable);
  if (!packageRoot) {
    throw new LocateError(
      `${executable} does not belong to a shadowfs installation (no shadowfs package.json found beside it)`,
      'SHADOWFS_NOT_FOUND',
    );
  }
  const clientModule = path.join(packageRoot, 'dist', 'src', 'client', 'index.js');
  if (!fs.existsSync(clientModule)) {
    throw new LocateError(
      `the shadowfs at ${packageRoot} is not built (${clientModule} is missing; run npm run build there)`,
      'SHADOWFS_NOT_BUILT',
    );
  }
  return { executable, packageRoot, clientModule, version: isPackageRoot(packageRoot) ?? '?' };
}

/**
 * How to run the shadowfs executable with arguments, as a process of its own (the daemon, an MCP
 * server, a terminal's program): directly, or through cmd.exe for a Windows shim.
 */
export function cliCommand(
  executable: string,
  args: readonly string[],
  platform: NodeJS.Platform = process.platform,
): { command: string; args: string[] } {
  if (platform === 'win32' && /\.(cmd|bat)$/i.test(executable)) {
    return { command: process.env.ComSpec ?? 'cmd.exe', args: ['/d', '/s', '/c', `"${executable}" ${args.map(winQuote).join(' ')}`] };
  }
  return { command: executable, args: [...args] };
}

/** An argument on cmd.exe's command line: quoted when it has spaces or quotes (shadow and agent names may). */
function winQuote(arg: string): string {
  return /^[A-Za-z0-9._:\\/=-]+$/.test(arg) ? arg : `"${arg.replace(/"/g, '""')}"`;
}

/** How to start the daemon with this executable: a Windows shim needs cmd.exe. */
export function daemonCommand(
  executable: string,
  idleTimeoutSeconds: number,
  platform: NodeJS.Platform = process.platform,
): { command: string; args: string[] } {
  const args = ['serve', '--foreground', '--no-console'];
  if (Number.isFinite(idleTimeoutSeconds) && idleTimeoutSeconds > 0) args.push('--idle-timeout', String(idleTimeoutSeconds));
  return cliCommand(executable, args, platform);
}

/**
 * How VS Code starts shadowfs's MCP server for one agent on one shadow (`shadowfs mcp`). Values
 * go as --name=value: an agent id may begin with "-".
 */
export function mcpCommand(
  executable: string,
  shadow: string,
  agent: string,
  platform: NodeJS.Platform = process.platform,
): { command: string; args: string[] } {
  return cliCommand(executable, ['mcp', `--shadow=${shadow}`, `--agent=${agent}`], platform);
}

/**
 * How an agent terminal runs its session (`shadowfs shell`): joins the agent's running session, or
 * starts one. The shadow by name, or by its mount point when the name would read as an option.
 */
export function shellCommand(
  executable: string,
  shadow: { name: string; mountPoint: string },
  agent: string,
  platform: NodeJS.Platform = process.platform,
): { command: string; args: string[] } {
  return cliCommand(executable, ['shell', shadow.name.startsWith('-') ? shadow.mountPoint : shadow.name, `--agent=${agent}`], platform);
}
