// A real VS Code for the extension's tests: code-server (VS Code for the browser; its extension
// host runs in Node 24 on this machine, so an extension there reaches local sockets like a desktop
// one) driven through Debian's Chromium with playwright-core. The toolchain comes from
// scripts/vscode/setup.sh (under .cache/vscode/); facts and pitfalls: /work/shared/notes/vscode-e2e.md.
//
// Two ways to test:
//   - runExtensionTests(): VS Code loads the extension from its folder and calls the test module's
//     run() inside the extension host (what @vscode/test-electron does on desktop); resolves with
//     the exit code the workbench reports (0: run() resolved).
//   - openWorkbench() + runCommand()/screenshot(): drive the UI from outside.
// Everything a function starts, it stops, also on failure; a CodeServer is stopped by stop().
// What the extension host prints (console.log, a mocha reporter run inside it) lands in
// code-server's log (CodeServer.logPath); its own log is under <userDataDir>/logs/*/exthost*/.
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { execFileSync, spawn, type ChildProcess } from 'child_process';
import { chromium, type Browser, type Page } from 'playwright-core';

/** The checkout this file is in (run from test/vscode/ or, compiled, from dist/test/vscode/). */
function repoRoot(): string {
  for (let dir = __dirname; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'scripts', 'vscode', 'setup.sh'))) return dir;
  }
  throw new Error(`no scripts/vscode/setup.sh above ${__dirname}`);
}

/** Node 24's binary and code-server's entry script (run as `node entry.js ...`). */
export interface Toolchain {
  node: string;
  codeServer: string;
}

let cachedToolchain: Toolchain | undefined;

/**
 * The toolchain: $VSCODE_NODE and $CODE_SERVER when both are set, else what
 * scripts/vscode/setup.sh --print-env names (installing it on first use: about a minute).
 */
export function resolveToolchain(): Toolchain {
  if (cachedToolchain) return cachedToolchain;
  let node = process.env.VSCODE_NODE;
  let codeServer = process.env.CODE_SERVER;
  if (!node || !codeServer) {
    const out = execFileSync('bash', [path.join(repoRoot(), 'scripts', 'vscode', 'setup.sh'), '--print-env'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const vars = new Map(
      out
        .split('\n')
        .filter((l) => l.includes('='))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as const),
    );
    node = vars.get('VSCODE_NODE');
    codeServer = vars.get('CODE_SERVER');
    if (!node || !codeServer) throw new Error(`scripts/vscode/setup.sh --print-env printed no VSCODE_NODE/CODE_SERVER:\n${out}`);
  }
  cachedToolchain = { node, codeServer };
  return cachedToolchain;
}

/** A free TCP port on 127.0.0.1 (free when asked: another process may take it before we do). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * The environment code-server runs in (and so its extension host, whose process.env has these):
 * ours without what would confuse a Node 24 program or a nested VS Code (NODE_OPTIONS, npm's and
 * VS Code's own variables); HOME, XDG_{CONFIG,DATA,CACHE,STATE}_HOME, XDG_RUNTIME_DIR and TMPDIR
 * in `base` (code-server and Chromium write there even with explicit profile folders; VS Code's
 * sockets, left behind when it is killed, go to XDG_RUNTIME_DIR or TMPDIR); then the caller's
 * `extra`. Short names: a Unix socket's path has at most 107 bytes.
 */
function isolatedEnv(base: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || /^(NODE_OPTIONS|NODE_PATH|npm_|VSCODE_|ELECTRON_)/.test(k)) continue;
    env[k] = v;
  }
  const home = path.join(base, 'home');
  const own = {
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
    XDG_RUNTIME_DIR: path.join(base, 'r'),
    TMPDIR: path.join(base, 't'),
  };
  for (const d of Object.values(own)) fs.mkdirSync(d, { recursive: true, mode: 0o700 });
  return { ...env, ...own, ...extra };
}

function tail(file: string, lines = 60): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export interface CodeServerOptions {
  /** The folder the workbench opens when a URL names none. */
  workspace?: string;
  /**
   * Variables added to code-server's environment; its extension host's process.env has them. HOME,
   * XDG_* and TMPDIR are the server's own unless given here (e.g. the XDG_RUNTIME_DIR of a daemon
   * the extension should reach).
   */
  env?: NodeJS.ProcessEnv;
  /**
   * Let VS Code resolve a login shell's environment for the extension host (as it does by default):
   * PATH then comes from the shell's profile. Default false: the extension host gets exactly the
   * environment given to code-server.
   */
  loginShellEnv?: boolean;
  /** User settings, written to <user-data-dir>/User/settings.json. */
  settings?: Record<string, unknown>;
  /** --vscode-option enable-smoke-test-driver: needed by runExtensionTests (default true). */
  smokeTestDriver?: boolean;
  /** Folder for the server's files (user data, extensions, home, log); default a new temp dir. */
  dir?: string;
  /** Default <dir>/extensions; give one to reuse extensions installed by installVsix. */
  extensionsDir?: string;
  /** Keep `dir` after stop() (it is removed when this module made it). */
  keep?: boolean;
  /** Until code-server answers HTTP (default 60 s). */
  startTimeoutMs?: number;
  toolchain?: Toolchain;
}

export interface CodeServer {
  /** http://127.0.0.1:PORT */
  url: string;
  host: string;
  port: number;
  dir: string;
  userDataDir: string;
  extensionsDir: string;
  home: string;
  /** code-server's stdout and stderr. */
  logPath: string;
  smokeTestDriver: boolean;
  toolchain: Toolchain;
  /** The last lines of the log, for a failure message. */
  logTail(lines?: number): string;
  /** vscode-remote://HOST:PORT/<absolute path>: how the workbench names a file on this server. */
  remoteUri(absPath: string): string;
  /** Kills code-server's process group (server, extension hosts, ...) and waits until it is gone. */
  stop(): Promise<void>;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function killGroup(pgid: number, graceMs = 5000): Promise<void> {
  try {
    process.kill(-pgid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (groupAlive(pgid) && Date.now() < deadline) await sleep(50);
  if (groupAlive(pgid)) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      return;
    }
    while (groupAlive(pgid)) await sleep(50);
  }
}

async function answersHttp(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

/** Starts code-server on a free port of 127.0.0.1 in its own process group; resolves once it answers HTTP. */
export async function startCodeServer(opts: CodeServerOptions = {}): Promise<CodeServer> {
  const toolchain = opts.toolchain ?? resolveToolchain();
  const ownDir = !opts.dir;
  const dir = opts.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-vscode-'));
  const userDataDir = path.join(dir, 'user-data');
  const extensionsDir = opts.extensionsDir ?? path.join(dir, 'extensions');
  const home = path.join(dir, 'home'); // isolatedEnv(dir) makes it
  const logPath = path.join(dir, 'code-server.log');
  for (const d of [userDataDir, extensionsDir]) fs.mkdirSync(d, { recursive: true });
  if (opts.settings) {
    fs.mkdirSync(path.join(userDataDir, 'User'), { recursive: true });
    fs.writeFileSync(path.join(userDataDir, 'User', 'settings.json'), JSON.stringify(opts.settings, null, 2));
  }
  const smokeTestDriver = opts.smokeTestDriver ?? true;
  const host = '127.0.0.1';
  const startTimeoutMs = opts.startTimeoutMs ?? 60_000;

  // A port found free may be taken before code-server binds it: then try another.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const url = `http://${host}:${port}`;
    const args = [
      toolchain.codeServer,
      '--auth',
      'none',
      '--bind-addr',
      `${host}:${port}`,
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--reconnection-grace-time',
      '5',
      '--user-data-dir',
      userDataDir,
      '--extensions-dir',
      extensionsDir,
      ...(smokeTestDriver ? ['--vscode-option', 'enable-smoke-test-driver'] : []),
      // Without this VS Code replaces the environment by a login shell's (bash -il): PATH becomes
      // what /etc/profile sets, whatever ours was.
      ...(opts.loginShellEnv ? [] : ['--vscode-option', 'force-disable-user-env']),
      ...(opts.workspace ? [opts.workspace] : []),
    ];
    const logFd = fs.openSync(logPath, 'a');
    let child: ChildProcess;
    try {
      // detached: a new session and process group, which stop() kills as a whole.
      child = spawn(toolchain.node, args, {
        cwd: dir,
        env: isolatedEnv(dir, opts.env),
        detached: true,
        stdio: ['ignore', logFd, logFd],
      });
    } finally {
      fs.closeSync(logFd);
    }
    const pgid = child.pid;
    if (pgid === undefined) {
      await new Promise((r) => child.once('error', r));
      throw new Error(`could not start ${toolchain.node} ${toolchain.codeServer}`);
    }
    child.on('error', () => undefined);
    const server: CodeServer = {
      url,
      host,
      port,
      dir,
      userDataDir,
      extensionsDir,
      home,
      logPath,
      smokeTestDriver,
      toolchain,
      logTail: (lines) => tail(logPath, lines),
      remoteUri: (absPath) => remoteUri(host, port, absPath),
      stop: async () => {
        await killGroup(pgid);
        if (ownDir && !opts.keep) fs.rmSync(dir, { recursive: true, force: true });
      },
    };
    const deadline = Date.now() + startTimeoutMs;
    let up = false;
    while (!exited(child) && Date.now() < deadline) {
      if (await answersHttp(url)) {
        up = true;
        break;
      }
      await sleep(100);
    }
    if (up) return server;
    const log = tail(logPath);
    await killGroup(pgid);
    if (exited(child) && /EADDRINUSE/.test(log) && attempt < 3) continue;
    if (ownDir && !opts.keep) fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(
      exited(child)
        ? `code-server exited (${child.exitCode ?? child.signalCode}) before answering HTTP; its log:\n${log}`
        : `code-server did not answer HTTP at ${url} within ${startTimeoutMs} ms; its log:\n${log}`,
    );
  }
}

function remoteUri(host: string, port: number, absPath: string): string {
  if (!path.isAbsolute(absPath)) throw new Error(`not an absolute path: ${absPath}`);
  const encoded = path.resolve(absPath).split('/').map(encodeURIComponent).join('/');
  return `vscode-remote://${host}:${port}${encoded}`;
}

/** Where installVsix puts an extension: a server's folders, or folders of a server not yet started. */
export interface ExtensionTarget {
  extensionsDir: string;
  userDataDir?: string;
  /** Where the install command's HOME, XDG_* and TMPDIR go (default a temp dir, removed after). */
  dir?: string;
  toolchain?: Toolchain;
}

/**
 * Installs a .vsix with `code-server --install-extension` into the target's extensions folder. Do it
 * before the workbench that should see it is opened (pass the folder to startCodeServer's
 * `extensionsDir`, or give the server itself and open the page after).
 */
export function installVsix(target: ExtensionTarget | CodeServer, vsixPath: string): Promise<void> {
  const toolchain = target.toolchain ?? resolveToolchain();
  const tmpBase = target.dir ? undefined : fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-vsix-'));
  const base = target.dir ?? (tmpBase as string);
  const args = [
    toolchain.codeServer,
    '--extensions-dir',
    target.extensionsDir,
    ...(target.userDataDir ? ['--user-data-dir', target.userDataDir] : []),
    '--install-extension',
    path.resolve(vsixPath),
    // A new build of the same version replaces the installed one.
    '--force',
  ];
  return new Promise<void>((resolve, reject) => {
    const child = spawn(toolchain.node, args, { env: isolatedEnv(base), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (tmpBase) fs.rmSync(tmpBase, { recursive: true, force: true });
      if (code === 0 && !/Failed Installing Extensions/.test(out)) resolve();
      else reject(new Error(`code-server --install-extension ${vsixPath} failed (${code ?? signal}):\n${out}`));
    });
  });
}

/** Chromium's launch arguments on this machine (as root; closed network: no background fetches). */
export const chromiumArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

/** Debian's Chromium through playwright-core, headless, its HOME (and XDG_*, TMPDIR) in a temp dir removed when it closes. The caller closes it. */
export async function openBrowser(opts: { headless?: boolean; executablePath?: string } = {}): Promise<Browser> {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-chromium-'));
  try {
    const browser = await chromium.launch({
      executablePath: opts.executablePath ?? '/usr/bin/chromium',
      headless: opts.headless ?? true,
      args: chromiumArgs,
      env: isolatedEnv(base),
    });
    browser.on('disconnected', () => fs.rmSync(base, { recursive: true, force: true }));
    return browser;
  } catch (err) {
    fs.rmSync(base, { recursive: true, force: true });
    throw err;
  }
}

/** Waits until the workbench is on screen and, with the smoke-test driver, restored (editors, views). */
export async function waitForWorkbench(page: Page, timeoutMs = 60_000): Promise<void> {
  await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: timeoutMs });
  // The driver (window.driver) is set up with the workbench, before its parts are visible.
  await page.evaluate(async (ms) => {
    const driver = (globalThis as unknown as { driver?: { whenWorkbenchRestored?: () => Promise<void> } }).driver;
    if (!driver?.whenWorkbenchRestored) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('workbench not restored in time')), ms)));
    await Promise.race([driver.whenWorkbenchRestored(), late]).finally(() => clearTimeout(timer));
  }, timeoutMs);
}

/** The workbench URL for a folder, with an optional payload (pairs of [key, value]). */
export function workbenchUrl(server: CodeServer, folder?: string, payload?: [string, string][]): string {
  const params = new URLSearchParams();
  if (folder) params.set('folder', path.resolve(folder));
  if (payload) params.set('payload', JSON.stringify(payload));
  const q = params.toString();
  return `${server.url}/${q ? `?${q}` : ''}`;
}

/** Opens the workbench on `folder` (default: the server's workspace) in a new page and waits for it. */
export async function openWorkbench(browser: Browser, server: CodeServer, folder?: string, timeoutMs = 60_000): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  try {
    await page.goto(workbenchUrl(server, folder), { timeout: timeoutMs });
    await waitForWorkbench(page, timeoutMs);
    return page;
  } catch (err) {
    await page.close().catch(() => undefined);
    throw err;
  }
}

/** Runs a command from the palette by its title as the palette shows it (e.g. "Shadowfs: Start"). */
export async function runCommand(page: Page, title: string, timeoutMs = 15_000): Promise<void> {
  const input = page.locator('.quick-input-widget input');
  await page.keyboard.press('F1');
  await input.waitFor({ state: 'visible', timeout: timeoutMs });
  await input.fill(`>${title}`);
  // Enter only once the list has settled on this command, or it would run whatever was first.
  const row = page.locator('.quick-input-list .monaco-list-row').first();
  await row.filter({ hasText: title }).waitFor({ state: 'visible', timeout: timeoutMs });
  await page.keyboard.press('Enter');
  await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: timeoutMs });
}

/** A PNG of the page at `file` (its folder is made). */
export async function screenshot(page: Page, file: string): Promise<string> {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  await page.screenshot({ path: file });
  return file;
}

export interface ExtensionTestsOptions {
  /** A server started with the smoke-test driver; without one, one is started and stopped here. */
  server?: CodeServer;
  /** For the server started here. */
  serverOptions?: CodeServerOptions;
  /** The folder the workbench opens. */
  workspace: string;
  /** The extension's folder (its package.json), loaded from source. */
  extensionDevelopmentPath: string;
  /** The module whose run() the extension host calls (CommonJS or ESM). */
  extensionTestsPath: string;
  /** Variables for this extension host only (the payload's extensionEnvironment). */
  extensionEnv?: Record<string, string>;
  /** Until the workbench reports the exit code (default 120 s). */
  timeoutMs?: number;
  /** On failure or timeout, a screenshot goes here (tests-<time>.png). */
  screenshotDir?: string;
  /** The workbench's log files (extension host, renderer, ...) are written here when it exits. */
  logsDir?: string;
  /** Log lines (workbench console, driver log) are passed here too. */
  onLog?: (line: string) => void;
  browser?: Browser;
}

/**
 * Opens the workbench with the extension in development mode and its tests module, and resolves with
 * the exit code the workbench reports when run() settles: 0 when it resolved, 1 when it rejected.
 * Rejects when no code comes within timeoutMs; the message has the last log lines.
 */
export async function runExtensionTests(opts: ExtensionTestsOptions): Promise<number> {
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const server = opts.server ?? (await startCodeServer({ ...opts.serverOptions, smokeTestDriver: true }));
  let browser: Browser | undefined;
  const logs: string[] = [];
  const log = (line: string) => {
    logs.push(line);
    opts.onLog?.(line);
  };
  try {
    if (!server.smokeTestDriver)
      throw new Error('runExtensionTests needs a server started with smokeTestDriver (the payload is ignored without it)');
    browser = opts.browser ?? (await openBrowser());
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    try {
      let settle: (code: number) => void = () => undefined;
      const exitCode = new Promise<number>((resolve) => (settle = resolve));
      // The workbench passes its log files along with the code.
      await page.exposeFunction('codeAutomationExit', (code: number, files?: { relativePath: string; contents: string }[]) => {
        if (opts.logsDir) {
          for (const f of files ?? []) {
            const dest = path.join(opts.logsDir, f.relativePath);
            fs.mkdirSync(path.dirname(dest), { recursive: true });
            fs.writeFileSync(dest, f.contents);
          }
        }
        settle(code);
      });
      await page.exposeFunction('codeAutomationLog', (level: string, args: unknown) => log(`[workbench ${level}] ${JSON.stringify(args)}`));
      // The workbench's own log comes through codeAutomationLog; the console adds errors from elsewhere.
      page.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warning') log(`[console ${m.type()}] ${m.text()}`);
      });
      page.on('pageerror', (e) => log(`[page error] ${e.message}`));
      const payload: [string, string][] = [
        ['extensionDevelopmentPath', server.remoteUri(path.resolve(opts.extensionDevelopmentPath))],
        ['extensionTestsPath', server.remoteUri(path.resolve(opts.extensionTestsPath))],
      ];
      if (opts.extensionEnv) payload.push(['extensionEnvironment', JSON.stringify(opts.extensionEnv)]);
      await page.goto(workbenchUrl(server, opts.workspace, payload), { timeout: timeoutMs });
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
      const result = await Promise.race([exitCode, timeout]).finally(() => clearTimeout(timer));
      if (result === 'timeout' || result !== 0) {
        if (opts.screenshotDir) {
          const file = path.join(opts.screenshotDir, `tests-${new Date().toISOString().replace(/[:.]/g, '-')}.png`);
          await screenshot(page, file).then(
            (f) => log(`screenshot: ${f}`),
            (e: unknown) => log(`no screenshot: ${String(e)}`),
          );
        }
      }
      if (result === 'timeout') {
        throw new Error(
          `the extension tests reported no exit code within ${timeoutMs} ms (${opts.extensionTestsPath})\n` +
            `-- workbench log (last lines):\n${logs.slice(-40).join('\n')}\n-- code-server log (last lines):\n${server.logTail(40)}`,
        );
      }
      return result;
    } finally {
      await page.close().catch(() => undefined);
    }
  } finally {
    if (!opts.browser) await browser?.close().catch(() => undefined);
    if (!opts.server) await server.stop();
  }
}
