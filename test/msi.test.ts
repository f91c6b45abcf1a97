// The Windows installer (npm run build:msi), built here with wixl, then really installed, run,
// upgraded and removed by wine's msiexec in wine prefixes of its own. Runs from Linux (it drives
// wine); not part of the mocha passes of npm test (.mocharc.json ignores it):
//
//   npx mocha --config test/msi.mocharc.json        (after npx tsc -p tsconfig.json)
//
// The before hook builds two MSIs with scripts/build-msi.sh: this version's, and the same payload
// as the next patch version for the major upgrade. It needs what that script needs (wixl and
// msitools, MinGW for the native module: apt-get when missing; the npm registry for node.exe and
// the Windows dependencies) and the PowerShell module's generator (dist/tools/powershell/generate.js)
// or SHADOWFS_MSI_PS_MODULE_DIR. scripts/wine-node.sh makes the template prefix (wine from
// apt-get when missing, Windows 10, the bcryptprimitives.dll stand-in wine 8 lacks) in
// build-msi/wine. The tests install into copies of it (and kill each copy's wineserver after):
// one copy goes through a product's life (install and use, upgrade, removal; steps that go on
// from each other), another, without WinFsp, sees the install refused.
//
// Tables: `msidump` of the MSI, normalised (ProductCode and the build's summary fields dropped,
// the version replaced by <version>, generated identifiers replaced by the paths they stand
// for), against test/fixtures/msi/. The dist\ and node_modules\ trees (thousands of rows whose
// identifiers, sizes and counts change with every source file and dependency) are checked file
// by file against the checkout's dist/ and the staged node_modules instead, and golden only as a
// file count per top-level package (node_modules.txt: it changes when dependencies do).
// SHADOWFS_UPDATE_GOLDEN=1 rewrites the goldens.
//
// What wine cannot show: WinFsp itself (only its registry value is faked, so the module reports
// that the DLL is missing); the launch condition's message (wine 8's msiexec shows it in a
// message box only when there is a UI, and never writes it to the log: the test checks the
// message in the MSI and that the install stopped at LaunchConditions); Windows' own msiexec.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.join(__dirname, '..', '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
const VERSION = pkg.version;
const NEXT_VERSION = VERSION.replace(/\d+$/, (p) => String(Number(p) + 1));
const goldenDir = path.join(root, 'test', 'fixtures', 'msi');
const updateGolden = process.env.SHADOWFS_UPDATE_GOLDEN === '1';
const wineDir = path.join(root, 'build-msi', 'wine');
const templatePrefix = path.join(wineDir, 'prefix');
const stage = path.join(root, 'build-msi', 'stage');

const WINFSP_KEY = 'HKLM\\SOFTWARE\\WOW6432Node\\WinFsp';
const ENV_KEY = 'HKLM\\System\\CurrentControlSet\\Control\\Session Manager\\Environment';
const UNINSTALL_KEY = 'HKLM\\Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall';
const OWN_KEY = 'HKLM\\SOFTWARE\\shadowfs';
const INSTALL_DIR = 'C:\\Program Files\\shadowfs';
const BIN_DIR = `${INSTALL_DIR}\\bin`;
const SHIM = `${BIN_DIR}\\shadowfs.cmd`;
const MSI_FAILED = [1603, 1603 % 256]; // wine's exit status is the code modulo 256

let tmpRoot = '';
let msiFile = '';
let nextMsiFile = '';
let dump = '';

// ---------------------------------------------------------------------------------------------
// Processes

/** A Linux program, with a hang guard (not a timing assertion). */
function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = 900_000) {
  const r = spawnSync(cmd, args, { cwd: root, env, encoding: 'utf8', maxBuffer: 64 << 20, timeout: timeoutMs });
  if (r.error) throw new Error(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  return r;
}

function mustRun(cmd: string, args: string[], env?: NodeJS.ProcessEnv): string {
  const r = run(cmd, args, env);
  assert.strictEqual(r.status, 0, `${cmd} ${args.join(' ')} exited with ${r.status}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** The Windows name of a Linux path (wine maps / to drive Z:). */
function winPath(p: string): string {
  return `Z:${p.replace(/\//g, '\\')}`;
}

/** One wine prefix for one test: a copy of the template, its wineserver killed on dispose. */
class Prefix {
  readonly dir: string;
  readonly prefix: string;
  constructor(name: string) {
    this.dir = fs.mkdtempSync(path.join(tmpRoot, `${name}-`));
    this.prefix = path.join(this.dir, 'prefix');
    mustRun('cp', ['-a', templatePrefix, this.prefix]);
  }

  env(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!/^(SHADOWFS_|NODE_PATH$|NODE_OPTIONS$)/.test(k)) env[k] = v;
    return { ...env, WINEPREFIX: this.prefix, WINEDEBUG: '-all' };
  }

  /** A Windows program; its stdio are files (node.exe under wine fails on Linux pipes). */
  wine(args: string[], timeoutMs = 600_000): { status: number | null; stdout: string; stderr: string } {
    const io = fs.mkdtempSync(path.join(this.dir, 'io-'));
    const out = fs.openSync(path.join(io, 'out'), 'w');
    const err = fs.openSync(path.join(io, 'err'), 'w');
    try {
      // Without address-space randomization, as scripts/wine-node.sh runs wine (the reason is there:
      // about one process start in a thousand failed under wine 8).
      const r = spawnSync('setarch', [os.machine(), '-R', 'wine', ...args], {
        env: this.env(),
        stdio: ['ignore', out, err],
        timeout: timeoutMs,
      });
      if (r.error) throw new Error(`wine ${args.join(' ')}: ${r.error.message}`);
      return {
        status: r.status,
        stdout: fs.readFileSync(path.join(io, 'out'), 'utf8'),
        stderr: fs.readFileSync(path.join(io, 'err'), 'utf8'),
      };
    } finally {
      fs.closeSync(out);
      fs.closeSync(err);
      fs.rmSync(io, { recursive: true, force: true });
    }
  }

  /** msiexec /i or /x with a verbose log; returns the exit status and the log. */
  msiexec(op: '/i' | '/x', msi: string, logName: string): { status: number | null; log: string } {
    const log = path.join(this.dir, logName);
    const r = this.wine(['msiexec', op, winPath(msi), '/qn', '/l*v', winPath(log)]);
    return { status: r.status, log: fs.existsSync(log) ? fs.readFileSync(log, 'latin1') : '' };
  }

  regAdd(key: string, name: string, value: string): void {
    const r = this.wine(['reg', 'add', key, '/v', name, '/t', 'REG_SZ', '/d', value, '/f']);
    assert.strictEqual(r.status, 0, `reg add ${key}: ${r.stdout}${r.stderr}`);
  }

  /** Values (by lower-case name) of a key and (with `recurse`) its subkeys, as wine's reg.exe prints them; null: no key. */
  regQuery(key: string, recurse = false): Map<string, Map<string, string>> | null {
    const r = this.wine(['reg', 'query', key, ...(recurse ? ['/s'] : [])]);
    if (r.status !== 0) return null;
    const keys = new Map<string, Map<string, string>>();
    let current: Map<string, string> | undefined;
    for (const line of r.stdout.replace(/\r/g, '').split('\n')) {
      if (/^HKEY_/.test(line)) keys.set(line.trim(), (current = new Map()));
      const m = /^ {4}(.*?) {4}(REG_\w+) {4}(.*)$/.exec(line) ?? /^ {4}(.*?) {4}(REG_\w+)$/.exec(line);
      if (m && current) current.set(m[1].toLowerCase(), m[3] ?? ''); // value names ignore case
    }
    return keys;
  }

  regValue(key: string, name: string): string | undefined {
    const k = this.regQuery(key);
    return k ? [...k.values()][0]?.get(name.toLowerCase()) : undefined;
  }

  /** The Uninstall entries (Programs and Features) whose DisplayName is shadowfs. */
  arpEntries(): Map<string, string>[] {
    const all = this.regQuery(UNINSTALL_KEY, true) ?? new Map<string, Map<string, string>>();
    return [...all.values()].filter((v) => v.get('displayname') === 'shadowfs');
  }

  driveC(...parts: string[]): string {
    return path.join(this.prefix, 'drive_c', ...parts);
  }

  dispose(): void {
    spawnSync('wineserver', ['-k'], { env: this.env(), stdio: 'ignore', timeout: 60_000 });
    spawnSync('wineserver', ['-w'], { env: this.env(), stdio: 'ignore', timeout: 60_000 });
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

const live: Prefix[] = [];
function prefix(name: string): Prefix {
  const p = new Prefix(name);
  live.push(p);
  return p;
}

// ---------------------------------------------------------------------------------------------
// Tables

interface Table {
  columns: string[];
  rows: string[][];
}

function readTable(name: string): Table {
  const file = path.join(dump, `${name}.idt`);
  if (!fs.existsSync(file)) return { columns: [], rows: [] };
  const lines = fs.readFileSync(file, 'utf8').replace(/\r/g, '').split('\n');
  return {
    columns: lines[0].split('\t'),
    rows: lines
      .slice(3)
      .filter((l) => l !== '')
      .map((l) => l.split('\t')),
  };
}

const GENERATED = /^([cdf])_[0-9a-f]{32}$/;
const STANDARD_FOLDERS = new Set(['ProgramFiles64Folder']);

/** What the normaliser and the file checks need: each directory's path, component and file. */
class Model {
  readonly dirPath = new Map<string, string>();
  readonly compDir = new Map<string, string>();
  readonly compKey = new Map<string, string>();
  readonly filePath = new Map<string, string>();
  readonly fileComp = new Map<string, string>();
  readonly fileSize = new Map<string, number>();
  readonly regLabel = new Map<string, string>();

  constructor() {
    const dirs = new Map(readTable('Directory').rows.map((r) => [r[0], { parent: r[1], name: longName(r[2]) }]));
    const resolve = (id: string): string => {
      const known = this.dirPath.get(id);
      if (known !== undefined) return known;
      const d = dirs.get(id);
      if (!d) throw new Error(`Directory ${id} is not in the Directory table`);
      const p = id === 'TARGETDIR' ? '' : STANDARD_FOLDERS.has(id) ? `[${id}]` : joinWin(resolve(d.parent), d.name === '.' ? '' : d.name);
      this.dirPath.set(id, p);
      return p;
    };
    for (const id of dirs.keys()) resolve(id);
    for (const r of readTable('Component').rows) {
      this.compDir.set(r[0], this.dirPath.get(r[2]) ?? '?');
      this.compKey.set(r[0], r[5]);
    }
    for (const r of readTable('File').rows) {
      this.fileComp.set(r[0], r[1]);
      this.filePath.set(r[0], joinWin(this.compDir.get(r[1]) ?? '?', longName(r[2])));
      this.fileSize.set(r[0], Number(r[3]));
    }
    for (const r of readTable('Registry').rows) this.regLabel.set(r[0], `reg:${r[2]}\\${r[3]}`);
  }

  /** A readable, build-independent name for an identifier of any of these tables. */
  label(id: string): string {
    const m = GENERATED.exec(id);
    if (m?.[1] === 'd') return `dir:${this.dirPath.get(id)}`;
    if (m?.[1] === 'f') return `file:${this.filePath.get(id)}`;
    if (m?.[1] === 'c') return `cmp:${this.filePath.get(this.compKey.get(id) ?? '') ?? id}`;
    return this.regLabel.get(id) ?? id;
  }

  /** Paths under INSTALLDIR\dist or INSTALLDIR\node_modules (checked file by file, not golden). */
  isBulk(p: string | undefined): boolean {
    return /^\[ProgramFiles64Folder\]shadowfs\\(dist|node_modules)(\\|$)/.test(p ?? '');
  }

  /** INSTALLDIR-relative, '/'-separated paths of the files under one of its subtrees, with sizes. */
  filesUnder(sub: string): Map<string, number> {
    const prefix = `[ProgramFiles64Folder]shadowfs\\${sub}\\`;
    const out = new Map<string, number>();
    for (const [id, p] of this.filePath)
      if (p.startsWith(prefix)) out.set(p.slice(prefix.length - sub.length - 1).replace(/\\/g, '/'), this.fileSize.get(id) ?? -1);
    return out;
  }
}

function longName(defaultDir: string): string {
  const target = defaultDir.split(':')[0];
  const parts = target.split('|');
  return parts[parts.length - 1];
}

function joinWin(a: string, b: string): string {
  if (!b) return a;
  return !a || a.endsWith(']') ? `${a}${b}` : `${a}\\${b}`;
}

function versionless(s: string): string {
  return s.split(VERSION).join('<version>');
}

function render(columns: string[], rows: string[][]): string {
  return [columns.join('\t'), ...rows.map((r) => r.join('\t'))].join('\n') + '\n';
}

/** Every golden file's expected content, computed from the dump. */
function goldens(m: Model): Map<string, string> {
  const g = new Map<string, string>();
  const sorted = (rows: string[][]) => rows.sort((a, b) => (a.join('\t') < b.join('\t') ? -1 : 1));
  const simple = (name: string, map: (r: string[]) => string[] = (r) => r) => {
    const t = readTable(name);
    g.set(`${name}.txt`, versionless(render(t.columns, sorted(t.rows.map(map)))));
  };

  g.set(
    'tables.txt',
    fs
      .readdirSync(dump)
      .map((f) => f.replace(/\.idt$/, ''))
      .sort()
      .join('\n') + '\n',
  );
  const summary = readTable('_SummaryInformation');
  // 9: package code, 12 and 13: creation and save times (new at every build).
  g.set(
    '_SummaryInformation.txt',
    versionless(
      render(
        summary.columns,
        summary.rows.filter((r) => !['9', '12', '13'].includes(r[0])),
      ),
    ),
  );
  const prop = readTable('Property');
  g.set('Property.txt', versionless(render(prop.columns, sorted(prop.rows.filter((r) => r[0] !== 'ProductCode')))));

  const dir = readTable('Directory');
  g.set(
    'Directory.txt',
    render(
      ['Directory (generated: its path)', ...dir.columns.slice(1)],
      sorted(dir.rows.filter((r) => !m.isBulk(m.dirPath.get(r[0]))).map((r) => [m.label(r[0]), m.label(r[1]), r[2]])),
    ),
  );
  const comp = readTable('Component');
  g.set(
    'Component.txt',
    render(
      ['Component (generated: its key file)', 'ComponentId (generated: {*})', ...comp.columns.slice(2)],
      sorted(
        comp.rows
          .filter((r) => !m.isBulk(m.compDir.get(r[0])))
          .map((r) => [m.label(r[0]), GENERATED.test(r[0]) ? '{*}' : r[1], m.label(r[2]), r[3], r[4], m.label(r[5])]),
      ),
    ),
  );
  const file = readTable('File');
  g.set(
    'File.txt',
    render(
      ['File (generated: its path)', 'Component_', 'FileName', 'Attributes'],
      sorted(file.rows.filter((r) => !m.isBulk(m.compDir.get(r[1]))).map((r) => [m.label(r[0]), m.label(r[1]), r[2], r[6]])),
    ),
  );
  const fc = readTable('FeatureComponents');
  g.set(
    'FeatureComponents.txt',
    render(fc.columns, sorted(fc.rows.filter((r) => !m.isBulk(m.compDir.get(r[1]))).map((r) => [r[0], m.label(r[1])]))),
  );
  simple('Feature');
  simple('LaunchCondition');
  simple('AppSearch');
  simple('RegLocator');
  simple('Signature');
  simple('Environment');
  simple('Upgrade');
  simple('Registry', (r) => [m.label(r[0]), r[1], r[2], r[3], r[4], m.label(r[5])]);
  simple('Shortcut');
  simple('CustomAction');
  simple('CreateFolder');
  simple('RemoveFile');
  simple('ServiceInstall');
  const seq = readTable('InstallExecuteSequence');
  g.set(
    'InstallExecuteSequence.txt',
    render(
      seq.columns,
      seq.rows.sort((a, b) => Number(a[2]) - Number(b[2])),
    ),
  );

  // node_modules: how many files each top-level package brings (changes with the dependencies).
  const perPackage = new Map<string, number>();
  for (const p of m.filesUnder('node_modules').keys()) {
    const parts = p.split('/');
    const name = parts[1].startsWith('@') ? `${parts[1]}/${parts[2]}` : parts[1];
    perPackage.set(name, (perPackage.get(name) ?? 0) + 1);
  }
  g.set(
    'node_modules.txt',
    render(
      ['package', 'files'],
      [...perPackage].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([k, v]) => [k, String(v)]),
    ),
  );
  return g;
}

/** Files under a Linux directory, relative and '/'-separated, with sizes. */
function listFiles(dir: string, rel = ''): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) for (const [k, v] of listFiles(dir, r)) out.set(k, v);
    else out.set(r, fs.statSync(path.join(dir, r)).size);
  }
  return out;
}

function sameFiles(actual: Map<string, number>, expected: Map<string, number>, what: string): void {
  const missing = [...expected.keys()].filter((k) => !actual.has(k));
  const extra = [...actual.keys()].filter((k) => !expected.has(k));
  const resized = [...expected].filter(([k, v]) => actual.has(k) && actual.get(k) !== v).map(([k]) => k);
  assert.deepStrictEqual(
    { missing: missing.slice(0, 20), extra: extra.slice(0, 20), resized: resized.slice(0, 20) },
    { missing: [], extra: [], resized: [] },
    what,
  );
}

// ---------------------------------------------------------------------------------------------

describe('the Windows installer (MSI built with wixl; installed, run, upgraded and removed under wine)', function () {
  this.timeout(900_000);
  let model: Model;

  before(function () {
    this.timeout(3_600_000);
    tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-msi-'));
    const buildEnv: NodeJS.ProcessEnv = { ...process.env };
    delete buildEnv.SHADOWFS_MSI_VERSION;
    delete buildEnv.SHADOWFS_MSI_OUT;
    // The next version first, so build-msi/stage is this version's when the checks read it.
    let t = Date.now();
    nextMsiFile = path.join(tmpRoot, `shadowfs-${NEXT_VERSION}-x64.msi`);
    mustRun('bash', ['scripts/build-msi.sh'], { ...buildEnv, SHADOWFS_MSI_VERSION: NEXT_VERSION, SHADOWFS_MSI_OUT: nextMsiFile });
    console.log(`      (MSI ${NEXT_VERSION} built in ${((Date.now() - t) / 1000).toFixed(1)} s)`);
    t = Date.now();
    msiFile = mustRun('bash', ['scripts/build-msi.sh'], buildEnv).trim().split('\n').pop() ?? '';
    assert.strictEqual(msiFile, path.join(root, 'build-msi', `shadowfs-${VERSION}-x64.msi`));
    console.log(
      `      (MSI ${VERSION} built in ${((Date.now() - t) / 1000).toFixed(1)} s, ${(fs.statSync(msiFile).size / 1048576).toFixed(1)} MiB)`,
    );

    dump = path.join(tmpRoot, 'dump');
    fs.mkdirSync(dump);
    mustRun('msidump', ['-t', '-d', dump, msiFile]);
    model = new Model();

    // The template prefix: wine-node.sh's setup (idempotent), in a directory of this test's.
    t = Date.now();
    const env = { ...process.env, SHADOWFS_WINE_DIR: wineDir };
    mustRun('bash', ['scripts/wine-node.sh', '-e', '0'], env);
    // Its wineserver must have written the registry out before the prefix is copied.
    mustRun('wineserver', ['-w'], { ...env, WINEPREFIX: templatePrefix });
    console.log(`      (template wine prefix ready in ${((Date.now() - t) / 1000).toFixed(1)} s)`);
  });

  afterEach(function () {
    while (live.length) live.pop()?.dispose();
  });

  after(function () {
    while (live.length) live.pop()?.dispose();
    if (tmpRoot) fs.rmSync(tmpRoot, { recursive: true, force: true });
  });

  describe('tables (golden: test/fixtures/msi, SHADOWFS_UPDATE_GOLDEN=1 rewrites)', function () {
    it('every normalised table matches its golden', function () {
      const expected = goldens(model);
      const mismatched: string[] = [];
      if (updateGolden) {
        fs.rmSync(goldenDir, { recursive: true, force: true });
        fs.mkdirSync(goldenDir, { recursive: true });
      }
      for (const [name, text] of expected) {
        const file = path.join(goldenDir, name);
        if (updateGolden) fs.writeFileSync(file, text);
        else if (!fs.existsSync(file) || fs.readFileSync(file, 'utf8') !== text) {
          mismatched.push(name);
          fs.writeFileSync(path.join(tmpRoot, name), text);
        }
      }
      const stale = fs.existsSync(goldenDir) ? fs.readdirSync(goldenDir).filter((f) => !expected.has(f)) : [];
      assert.deepStrictEqual(
        { mismatched, stale },
        { mismatched: [], stale: [] },
        `tables differ from test/fixtures/msi (${mismatched
          .map((n) => `diff test/fixtures/msi/${n} <(built)`)
          .join('; ')}); rerun with SHADOWFS_UPDATE_GOLDEN=1 if the change is meant`,
      );
    });

    it("dist\\ holds exactly the checkout's compiled dist/src and protocol schema; node_modules\\ exactly the staged production dependencies", function () {
      const dist = listFiles(path.join(root, 'dist', 'src'));
      const expected = new Map([...dist].map(([k, v]) => [`dist/src/${k}`, v]));
      expected.set('dist/protocol.schema.json', fs.statSync(path.join(root, 'dist', 'protocol.schema.json')).size);
      sameFiles(model.filesUnder('dist'), expected, 'dist\\ in the MSI');
      const staged = listFiles(path.join(stage, 'shadowfs', 'node_modules'));
      const nm = new Map([...staged].map(([k, v]) => [`node_modules/${k}`, v]));
      sameFiles(model.filesUnder('node_modules'), nm, 'node_modules\\ in the MSI');
      const files = [...nm.keys()];
      assert.ok(
        files.some((f) => /^node_modules\/@yuuang\/ffi-rs-win32-x64-msvc\/.*\.node$/.test(f)),
        "ffi-rs's Windows x64 binary is there",
      );
      assert.ok(!files.some((f) => /ffi-rs-linux|ffi-rs-darwin/.test(f)), "no other system's ffi-rs binary");
      assert.ok(!files.some((f) => /(^|\/)\.bin\//.test(f)), 'no .bin links');
      // No package that only the development tools need (the lock file marks those "dev").
      const lock = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as {
        packages: Record<string, { dev?: boolean }>;
      };
      const devOnly = files.map((f) => /^(node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(f)?.[1] ?? '').filter((d) => lock.packages[d]?.dev);
      assert.deepStrictEqual([...new Set(devOnly)], [], 'packages only the development tools need');
    });

    it('components: each 64-bit, in exactly one feature, unique GUIDs; no feature above the documented 1600 components', function () {
      const m = (id: string) => model.label(id);
      const comps = readTable('Component').rows;
      assert.deepStrictEqual(
        comps.filter((r) => (Number(r[3]) & 256) === 0).map((r) => m(r[0])),
        [],
        'components without msidbComponentAttributes64bit',
      );
      assert.strictEqual(new Set(comps.map((r) => r[1])).size, comps.length, 'component GUIDs are unique');
      const fc = readTable('FeatureComponents').rows;
      const perComp = new Map<string, number>();
      const perFeature = new Map<string, number>();
      for (const [f, c] of fc) {
        perComp.set(c, (perComp.get(c) ?? 0) + 1);
        perFeature.set(f, (perFeature.get(f) ?? 0) + 1);
      }
      assert.deepStrictEqual(
        comps.filter((r) => perComp.get(r[0]) !== 1).map((r) => m(r[0])),
        [],
        'components not in exactly one feature',
      );
      for (const [f, n] of perFeature) assert.ok(n <= 1500, `feature ${f} has ${n} components`);
    });

    it('the launch condition says that WinFsp is required, where to get it, and that installation stops', function () {
      const rows = readTable('LaunchCondition').rows;
      const winfsp = rows.find((r) => /WINFSPINSTALLDIR/.test(r[0]));
      assert.ok(winfsp, 'a launch condition on WINFSPINSTALLDIR');
      assert.strictEqual(winfsp[0], 'Installed OR WINFSPINSTALLDIR');
      assert.match(winfsp[1], /requires WinFsp/);
      assert.match(winfsp[1], /https:\/\/winfsp\.dev\/rel\//);
      assert.match(winfsp[1], /installation stops/i);
      // The search reads the 64-bit view (type 2 raw + 16 64-bit) of the key the native module reads.
      assert.deepStrictEqual(readTable('RegLocator').rows, [
        ['WinFspInstallDir', '2', 'SOFTWARE\\WOW6432Node\\WinFsp', 'InstallDir', '18'],
      ]);
    });
  });

  // One prefix through the product's life, as a user's machine has it: installed and used, then
  // upgraded in place, then removed. Each step goes on from the state the one before left (a step
  // whose predecessor failed fails at once, naming it): an install, a use and a removal of their
  // own for each step would cost a minute of wine apiece.
  describe('under wine: one installation through its life', function () {
    let life: Prefix | undefined;
    let pathBefore = '';
    let installLog = '';
    const done = new Set<string>();
    /** The prefix, once the step named has passed. */
    const goesOnFrom = (step: string): Prefix => {
      assert.ok(life && done.has(step), `this step goes on from "${step}", which did not pass (see it above)`);
      return life;
    };
    after(function () {
      life?.dispose();
    });

    it('installs: files in place, bin\\ on the system PATH, the installed shadowfs runs, loads its native module, starts its daemon', function () {
      const p = (life = new Prefix('life'));
      p.regAdd(WINFSP_KEY, 'InstallDir', 'C:\\Program Files (x86)\\WinFsp\\');
      pathBefore = p.regValue(ENV_KEY, 'Path') ?? '';
      assert.ok(pathBefore && !/shadowfs/i.test(pathBefore), pathBefore);

      const t = Date.now();
      const inst = p.msiexec('/i', msiFile, 'install.log');
      assert.strictEqual(inst.status, 0, `msiexec /i exited with ${inst.status}; log in ${p.dir}\n${inst.log.slice(-3000)}`);
      console.log(`      (installed in ${((Date.now() - t) / 1000).toFixed(1)} s)`);
      installLog = inst.log;

      const app = p.driveC('Program Files', 'shadowfs');
      const ps = p.driveC('Program Files', 'WindowsPowerShell', 'Modules', 'ShadowFS');
      for (const f of [
        'node.exe',
        'package.json',
        'bin/shadowfs.cmd',
        'bin/shadowfs.js',
        'prebuilds/win32-x64/shadowfs.node',
        'dist/src/cli/main.js',
        'dist/protocol.schema.json',
        `vscode/shadowfs-vscode-${extensionVersion()}.vsix`,
      ]) {
        assert.ok(fs.statSync(path.join(app, f), { throwIfNoEntry: false })?.isFile(), `${f} is installed`);
      }
      sameFiles(listFiles(app), listFiles(path.join(stage, 'shadowfs')), 'INSTALLDIR holds exactly the staged payload');
      sameFiles(listFiles(ps), listFiles(path.join(stage, 'ShadowFS')), 'the PowerShell module is installed whole');
      for (const f of ['ShadowFS.psd1', 'ShadowFS.psm1']) {
        assert.ok(fs.readFileSync(path.join(ps, f)).equals(fs.readFileSync(path.join(stage, 'ShadowFS', f))), `${f} as built`);
      }

      const pathAfter = p.regValue(ENV_KEY, 'Path') ?? '';
      assert.strictEqual(pathAfter, `${pathBefore};${BIN_DIR}`, 'the system PATH ends with the bin folder');
      assert.strictEqual(p.regValue(OWN_KEY, 'InstallDir'), `${INSTALL_DIR}\\`);
      assert.strictEqual(p.regValue(OWN_KEY, 'Version'), VERSION);
      const arp = p.arpEntries();
      assert.strictEqual(arp.length, 1, 'one Programs and Features entry');
      assert.strictEqual(arp[0].get('displayversion'), VERSION);

      // The installed command, by its full path and through the PATH (a new cmd.exe reads it).
      const byPath = p.wine(['cmd', '/c', SHIM, '--version']);
      assert.strictEqual(byPath.status, 0, byPath.stdout + byPath.stderr);
      assert.strictEqual(byPath.stdout.trim(), VERSION);
      const onPath = p.wine(['cmd', '/c', 'shadowfs', '--version']);
      assert.strictEqual(onPath.status, 0, onPath.stdout + onPath.stderr);
      assert.strictEqual(onPath.stdout.trim(), VERSION);

      // doctor: the module loads from the installation; WinFsp's DLL is absent (only its
      // registry value was faked), which it reports with where to get WinFsp.
      const doctor = p.wine(['cmd', '/c', SHIM, 'doctor', '--json']);
      assert.strictEqual(doctor.status, 1, `doctor is unhealthy without WinFsp: ${doctor.stdout}${doctor.stderr}`);
      const checks = (JSON.parse(doctor.stdout) as { checks: { name: string; ok: boolean; detail: string }[] }).checks;
      assert.deepStrictEqual(
        checks.find((c) => c.name === 'native-module'),
        { name: 'native-module', required: true, ok: true, detail: 'backends: winfsp, fuse_hl' },
      );
      const winfsp = checks.find((c) => c.name === 'winfsp');
      assert.strictEqual(winfsp?.ok, false);
      assert.match(winfsp.detail, /C:\\Program Files \(x86\)\\WinFsp\\bin\\winfsp-x64\.dll.*https:\/\/winfsp\.dev\/rel\//);

      // Which files the installed node.exe loaded: the native module and ffi-rs's Windows binary
      // from the installation, and the module's own report (WINFSP_MISSING).
      const script = path.join(p.dir, 'where.js');
      fs.writeFileSync(
        script,
        `const dir = ${JSON.stringify(INSTALL_DIR)};
const native = require(dir + '\\\\dist\\\\src\\\\shadow\\\\native.js');
const status = native.nativeStatus();
require(require.resolve('ffi-rs', { paths: [dir] }));
console.log(JSON.stringify({ execPath: process.execPath, status, loaded: Object.keys(require.cache).filter((f) => f.endsWith('.node')).sort() }));
`,
      );
      const where = p.wine([`${INSTALL_DIR}\\node.exe`, winPath(script)]);
      assert.strictEqual(where.status, 0, where.stdout + where.stderr);
      const w = JSON.parse(where.stdout) as {
        execPath: string;
        status: { available: boolean; code?: string; message?: string };
        loaded: string[];
      };
      assert.strictEqual(w.execPath, `${INSTALL_DIR}\\node.exe`);
      // The installed module and ffi-rs's, from the installation only (sorted by path, as the script lists them).
      assert.deepStrictEqual(w.loaded, [
        `${INSTALL_DIR}\\node_modules\\@yuuang\\ffi-rs-win32-x64-msvc\\ffi-rs.win32-x64-msvc.node`,
        `${INSTALL_DIR}\\prebuilds\\win32-x64\\shadowfs.node`,
      ]);
      assert.strictEqual(w.status.available, false);
      assert.strictEqual(w.status.code, 'WINFSP_MISSING');
      assert.match(w.status.message ?? '', /winfsp-x64\.dll.*winfsp\.dev\/rel/);

      // The installed CLI starts the installed daemon (a named pipe) and talks to it; a mount
      // needs WinFsp and says so. The daemon is stopped before the uninstall (no command does that).
      const cli = (...args: string[]) => {
        const r = p.wine(['cmd', '/c', SHIM, ...args, '--json']);
        return { status: r.status, json: JSON.parse(r.stdout || r.stderr || 'null') as Record<string, unknown>, text: r.stdout + r.stderr };
      };
      const list = cli('list');
      assert.strictEqual(list.status, 0, list.text);
      assert.deepStrictEqual(list.json, { shadows: [] });
      const status = cli('status');
      assert.strictEqual(status.status, 0, status.text);
      assert.strictEqual(status.json.running, true, status.text);
      assert.match(String(status.json.socket), /^\\\\\.\\pipe\\shadowfs-[0-9a-f]{32}$/);
      assert.strictEqual((status.json.native as { code?: string }).code, 'WINFSP_MISSING', status.text);
      const folder = path.join(p.dir, 'project');
      fs.mkdirSync(folder);
      fs.writeFileSync(path.join(folder, 'a.txt'), 'a\n');
      const mount = cli('mount', winPath(folder));
      assert.notStrictEqual(mount.status, 0, mount.text);
      assert.strictEqual((mount.json.error as { code?: string }).code, 'WINFSP_MISSING', mount.text);
      const kill = p.wine(['taskkill', '/f', '/pid', String(status.json.pid)]);
      assert.strictEqual(kill.status, 0, kill.stdout + kill.stderr);
      assert.strictEqual(cli('status').json.running, false);
      done.add('installs');
    });

    // What runs under wine here: msiexec /i, then the installed node.exe with a script that takes
    // node-pty from the installation (resolved as the installed dist\src\shell\session.js
    // resolves it) and starts node.exe, and through it cmd.exe, on a ConPTY pseudo console:
    // wine's own (useConptyDll off, as shadowfs starts sessions). No WinFsp mount runs (WinFsp
    // cannot run under wine), and no shadowfs session either: test/windows/shell-win32.test.ts
    // runs those (without a mount) on the same binding. An MSI without node-pty fails it.
    it("ships node-pty's ConPTY binding: the installed node.exe starts a program on a pseudo console with it, types into it, gets its exit status", function () {
      const p = goesOnFrom('installs');

      // The program on the pseudo console: wine starts a pseudo console's first process without
      // standard handles (see docs/shell-sessions.md), so, as shadowfs's session launcher does, a
      // node.exe opens CONIN$/CONOUT$ and starts cmd.exe on them; it exits with cmd.exe's status.
      const child = path.join(p.dir, 'on-console.js');
      fs.writeFileSync(
        child,
        `const fs = require('fs');
let stdio = 'inherit';
if (!require('tty').isatty(0)) {
  const i = fs.openSync('\\\\\\\\.\\\\CONIN$', 'r+');
  const o = fs.openSync('\\\\\\\\.\\\\CONOUT$', 'r+');
  stdio = [i, o, o];
}
require('child_process').spawn('cmd.exe', ['/d', '/k'], { stdio }).on('exit', (code) => process.exit(code));
`,
      );
      const script = path.join(p.dir, 'pty.js');
      fs.writeFileSync(
        script,
        `const dir = ${JSON.stringify(INSTALL_DIR)};
const done = (r) => { console.log(JSON.stringify({ ...r, loaded: Object.keys(require.cache).filter((f) => f.endsWith('.node')).sort() })); process.exit(0); };
setTimeout(() => done({ error: 'no exit within 120 s (hang guard)', output }), 120000);
let output = '';
try {
  const pty = require(require.resolve('node-pty', { paths: [dir + '\\\\dist\\\\src\\\\shell'] }));
  const list = require(dir + '\\\\node_modules\\\\node-pty\\\\prebuilds\\\\win32-x64\\\\conpty_console_list.node');
  const term = pty.spawn(process.execPath, [${JSON.stringify(winPath(child))}], { cols: 80, rows: 24, cwd: dir, env: process.env, useConpty: true, useConptyDll: false });
  let typed = false;
  term.onData((d) => {
    output += d;
    if (!typed && output.includes('>')) { typed = true; term.write('echo pty-%PROCESSOR_ARCHITECTURE%-ok & exit 7\\r'); }
  });
  term.onExit((e) => setTimeout(() => done({ exitCode: e.exitCode, output, consoleList: typeof list.getConsoleProcessList }), 500));
} catch (err) {
  done({ error: String(err && err.stack || err) });
}
`,
      );
      const r = p.wine([`${INSTALL_DIR}\\node.exe`, winPath(script)]);
      assert.strictEqual(r.status, 0, r.stdout + r.stderr);
      const got = JSON.parse(r.stdout) as { error?: string; exitCode?: number; output?: string; consoleList?: string; loaded: string[] };
      assert.strictEqual(got.error, undefined, `node-pty from the installation: ${got.error}`);
      assert.strictEqual(got.exitCode, 7, `cmd.exe's exit status on the pseudo console; output ${JSON.stringify(got.output)}`);
      // The expansion ran in cmd.exe: the typed line echoes %PROCESSOR_ARCHITECTURE% unexpanded.
      assert.match((got.output ?? '').replace(/\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07/g, ''), /pty-AMD64-ok/);
      assert.strictEqual(got.consoleList, 'function', 'conpty_console_list.node loads and has getConsoleProcessList');
      assert.deepStrictEqual(got.loaded, [
        `${INSTALL_DIR}\\node_modules\\node-pty\\prebuilds\\win32-x64\\conpty.node`,
        `${INSTALL_DIR}\\node_modules\\node-pty\\prebuilds\\win32-x64\\conpty_console_list.node`,
      ]);
    });

    it(`upgrades ${VERSION} to ${NEXT_VERSION} in place (one product left), refuses the downgrade`, function () {
      const p = goesOnFrom('installs');
      const oldCode = /ProductCode = (\{[0-9A-F-]+\})/.exec(installLog)?.[1];
      assert.ok(oldCode, 'the first install logs its ProductCode');

      const t = Date.now();
      const up = p.msiexec('/i', nextMsiFile, 'upgrade.log');
      assert.strictEqual(up.status, 0, `msiexec /i ${NEXT_VERSION} exited with ${up.status}; log in ${p.dir}\n${up.log.slice(-3000)}`);
      console.log(`      (upgraded in ${((Date.now() - t) / 1000).toFixed(1)} s)`);
      assert.ok(up.log.includes(`WIX_UPGRADE_DETECTED = ${oldCode}`), 'FindRelatedProducts found the installed version');
      assert.match(up.log, /Action ended [\d:]+: RemoveExistingProducts\. Return value 1\./);
      const arp = p.arpEntries();
      assert.deepStrictEqual(
        arp.map((e) => e.get('displayversion')),
        [NEXT_VERSION],
        'one shadowfs in Programs and Features, the new one',
      );
      assert.strictEqual(p.regValue(OWN_KEY, 'Version'), NEXT_VERSION);
      assert.ok(fs.existsSync(p.driveC('Program Files', 'shadowfs', 'bin', 'shadowfs.cmd')));
      // The old entry's removal leaves an empty element (a stray ';', wine); the new one is there once.
      const entries = (p.regValue(ENV_KEY, 'Path') ?? '').split(';');
      assert.deepStrictEqual(
        entries.filter((e) => /shadowfs/i.test(e)),
        [BIN_DIR],
      );
      const v = p.wine(['cmd', '/c', SHIM, '--version']);
      assert.strictEqual(v.stdout.trim(), VERSION, 'the payload is this checkout (only the MSI version differs)');

      const down = p.msiexec('/i', msiFile, 'downgrade.log');
      assert.ok(MSI_FAILED.includes(down.status ?? -1), `installing ${VERSION} over ${NEXT_VERSION} exited with ${down.status}, not 1603`);
      assert.match(down.log, /WIX_DOWNGRADE_DETECTED = \{/);
      assert.deepStrictEqual(
        p.arpEntries().map((e) => e.get('displayversion')),
        [NEXT_VERSION],
      );

      done.add('upgrades');
    });

    it('uninstalls: all of it gone (files, registry, Programs and Features, the PATH entry)', function () {
      const p = goesOnFrom('upgrades');
      const t = Date.now();
      const un = p.msiexec('/x', nextMsiFile, 'uninstall.log');
      assert.strictEqual(un.status, 0, `msiexec /x exited with ${un.status}; log in ${p.dir}\n${un.log.slice(-3000)}`);
      console.log(`      (uninstalled in ${((Date.now() - t) / 1000).toFixed(1)} s)`);
      // The PATH entry was removed twice: by the upgrade (the old product's) and by the uninstall.
      assertNothingLeft(p, pathBefore, 2);
    });
  });

  describe('under wine, without WinFsp', function () {
    it('refuses to install without WinFsp (exit 1603, stopped at LaunchConditions) and installs nothing', function () {
      const p = prefix('nowinfsp');
      assert.strictEqual(p.regQuery(WINFSP_KEY), null, 'the template prefix has no WinFsp key');
      const pathBefore = p.regValue(ENV_KEY, 'Path') ?? '';
      const inst = p.msiexec('/i', msiFile, 'install.log');
      assert.ok(MSI_FAILED.includes(inst.status ?? -1), `msiexec /i exited with ${inst.status}, not 1603`);
      // Wine writes action results but not the condition's message (see the top of this file).
      assert.match(inst.log, /Property: WINFSPINSTALLDIR, Signature: WinFspInstallDir/);
      assert.match(inst.log, /Action ended [\d:]+: LaunchConditions\. Return value 0\./);
      assert.doesNotMatch(inst.log, /Action start [\d:]+: InstallFiles\./);
      assertNothingLeft(p, pathBefore, 0);
    });
  });
});

function extensionVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(root, 'extension', 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * Nothing of shadowfs in the prefix: no files, no registry key or Uninstall entry, no PATH entry.
 * Each removal of the PATH entry leaves a stray ';' under wine (only that is accepted), and
 * the empty WindowsPowerShell\Modules folders the install created (a fresh prefix has none;
 * Windows has them already).
 */
function assertNothingLeft(p: Prefix, pathBefore: string, removals: number): void {
  assert.ok(!fs.existsSync(p.driveC('Program Files', 'shadowfs')), 'Program Files\\shadowfs is gone');
  const psRoot = p.driveC('Program Files', 'WindowsPowerShell');
  assert.ok(!fs.existsSync(path.join(psRoot, 'Modules', 'ShadowFS')), 'the ShadowFS module folder is gone');
  if (fs.existsSync(psRoot)) assert.deepStrictEqual([...listFiles(psRoot).keys()], [], 'no file left under WindowsPowerShell');
  assert.strictEqual(p.regQuery(OWN_KEY), null, `${OWN_KEY} is gone`);
  assert.deepStrictEqual(p.arpEntries(), [], 'no Programs and Features entry');
  const pathAfter = p.regValue(ENV_KEY, 'Path') ?? '';
  assert.strictEqual(pathAfter, pathBefore + ';'.repeat(removals), 'PATH as before, but for one empty element per removal of the entry');
}
