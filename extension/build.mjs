// Builds the extension: esbuild bundles the extension (dist/extension.js), its in-editor test
// suite (dist/test/suite.js, run inside a real VS Code by test/vscode in the repository) and its
// unit tests (dist/test/unit.js, run by mocha in Node). With --vsix it also packages the .vsix
// with @vscode/vsce. The shadowfs client is not bundled: the extension loads the installed
// package's (see src/locate.ts). Usage: node build.mjs [--vsix]
import { build } from 'esbuild';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { fileURLToPath } from 'url';

const here = path.dirname(fileURLToPath(import.meta.url));
const common = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node18',
  sourcemap: 'linked',
  logLevel: 'warning',
  // vscode is the editor's; mocha comes from the repository when the tests run.
  external: ['vscode', 'mocha'],
  absWorkingDir: here,
};
await build({ ...common, entryPoints: ['src/extension.ts'], outfile: 'dist/extension.js' });
await build({ ...common, entryPoints: ['test/suite/index.ts'], outfile: 'dist/test/suite.js' });
await build({ ...common, entryPoints: ['test/unit/index.ts'], outfile: 'dist/test/unit.js' });

if (process.argv.includes('--vsix')) {
  const pkg = JSON.parse(fs.readFileSync(path.join(here, 'package.json'), 'utf8'));
  fs.copyFileSync(path.join(here, '..', 'LICENSE'), path.join(here, 'LICENSE'));
  const out = path.join(here, 'dist', `${pkg.name}-${pkg.version}.vsix`);
  const vsce = path.join(here, '..', 'node_modules', '@vscode', 'vsce', 'vsce');
  execFileSync(process.execPath, [vsce, 'package', '--no-dependencies', '--allow-missing-repository', '--no-update-package-json', '-o', out], {
    cwd: here,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  process.stdout.write(`${out}\n`);
}
