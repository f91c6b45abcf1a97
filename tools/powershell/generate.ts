// `node dist/tools/powershell/generate.js <outDir>` (npm run build:powershell): writes the ShadowFS
// PowerShell module, <outDir>/ShadowFS/ShadowFS.psd1 and ShadowFS.psm1, generated from the
// cmdlet table and the CLI's and protocol's own descriptions. Both files are ASCII (see render.ts).
import * as fs from 'fs';
import * as path from 'path';
import { renderManifest, renderModule } from './render';

export interface GeneratedModule {
  dir: string;
  manifest: string;
  module: string;
}

/** Writes the module under outDir/ShadowFS and returns the paths of its two files. */
export function generateModule(outDir: string): GeneratedModule {
  const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as {
    version: string;
    description: string;
  };
  const dir = path.join(outDir, 'ShadowFS');
  fs.mkdirSync(dir, { recursive: true });
  const manifest = path.join(dir, 'ShadowFS.psd1');
  const psm1 = path.join(dir, 'ShadowFS.psm1');
  fs.writeFileSync(manifest, renderManifest(pkg.version, pkg.description), 'ascii');
  fs.writeFileSync(psm1, renderModule(), 'ascii');
  return { dir, manifest, module: psm1 };
}

if (require.main === module) {
  const outDir = process.argv[2];
  if (!outDir) {
    process.stderr.write('usage: node dist/tools/powershell/generate.js <outDir>\n');
    process.exit(2);
  }
  const m = generateModule(path.resolve(outDir));
  process.stdout.write(`wrote ${m.manifest}\nwrote ${m.module}\n`);
}
