#!/usr/bin/env node
// Writes the generated part of the MSI's WiX source from the staged payload (scripts/build-msi.sh):
//
//   node installer/generate-files.js <stage> <outDir>
//
// <stage>/shadowfs is what goes into INSTALLDIR, <stage>/ShadowFS the PowerShell module. The
// files that installer/shadowfs.wxs names itself (node.exe, package.json, bin\, the native module,
// the .vsix) are checked to be there; everything else must be under dist\ or node_modules\ (or it
// is refused, so nothing staged is silently left out of the MSI). Written to <outDir>:
//   files.wxs     the dist\, node_modules\ and ShadowFS\ trees: one component per directory
//                 holding its plain files (keyed by the first), one per PE file (.exe, .dll,
//                 .node: versioned files are their own key path); component groups Dist,
//                 PowerShellModule and NodeModules1..N
//   features.wxi  hidden sub-features NodeModules1..N of at most 1500 components each (Windows
//                 Installer documents at most 1600 components per feature)
//   summary.json  counts, for the build's report
// Identifiers are hashes of the installed path, so they stay the same from one build to the next;
// component GUIDs are wixl's Guid="*" (derived from the component, also stable).
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

const MAX_COMPONENTS_PER_FEATURE = 1500;
// Named in installer/shadowfs.wxs (relative to INSTALLDIR, '/'-separated).
const TEMPLATE_FILES = ['node.exe', 'package.json', 'bin/shadowfs.cmd', 'bin/shadowfs.js', 'prebuilds/win32-x64/shadowfs.node'];
const GENERATED_TREES = ['dist', 'node_modules'];
const PE = /\.(exe|dll|node)$/i;
// Characters the MSI Filename type refuses in long names.
const BAD_NAME = /[\\?|><:/*"\u0000-\u001f]/;

function fail(msg) {
  process.stderr.write(`generate-files: ${msg}\n`);
  process.exit(1);
}

function id(prefix, key) {
  return `${prefix}_${crypto.createHash('sha1').update(key).digest('hex').slice(0, 32)}`;
}

/** An attribute value: XML-escaped, and `$` doubled (wixl's preprocessor expands `$(...)` everywhere). */
function xml(s) {
  return s
    .replace(/\$/g, '$$$$')
    .replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** { files: [names], dirs: [[name, tree]] } sorted by name; symlinks and other specials refused. */
function readTree(dir) {
  const files = [];
  const dirs = [];
  const seen = new Map();
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const full = path.join(dir, e.name);
    if (BAD_NAME.test(e.name)) fail(`${full}: the name has a character an MSI cannot hold`);
    const folded = e.name.toLowerCase();
    if (seen.has(folded)) fail(`${full} and ${seen.get(folded)} differ only in case: Windows cannot hold both`);
    seen.set(folded, full);
    if (e.isDirectory()) dirs.push([e.name, readTree(full)]);
    else if (e.isFile()) files.push(e.name);
    else fail(`${full} is neither a file nor a directory (symbolic links cannot go into the MSI)`);
  }
  return { files, dirs };
}

/**
 * Emits <Directory>/<Component>/<File> for a tree whose install path (for identifiers) is
 * `installRel` and whose staged path is `stageRel` (relative to $(var.Stage)), adding component
 * ids to `components`. Returns the XML lines.
 */
function emitTree(tree, installRel, stageRel, components, indent) {
  const lines = [];
  const pad = ' '.repeat(indent);
  const plain = tree.files.filter((f) => !PE.test(f));
  if (plain.length) {
    const cid = id('c', `${installRel}/`);
    components.push(cid);
    lines.push(`${pad}<Component Id="${cid}" Guid="*" Win64="yes">`);
    plain.forEach((f, i) => {
      lines.push(
        `${pad}  <File Id="${id('f', `${installRel}/${f}`)}" Name="${xml(f)}" Source="$(var.Stage)/${xml(`${stageRel}/${f}`)}"${i === 0 ? ' KeyPath="yes"' : ''} />`,
      );
    });
    lines.push(`${pad}</Component>`);
  }
  for (const f of tree.files.filter((f) => PE.test(f))) {
    const cid = id('c', `${installRel}/${f}`);
    components.push(cid);
    lines.push(`${pad}<Component Id="${cid}" Guid="*" Win64="yes">`);
    lines.push(`${pad}  <File Id="${id('f', `${installRel}/${f}`)}" Name="${xml(f)}" Source="$(var.Stage)/${xml(`${stageRel}/${f}`)}" KeyPath="yes" />`);
    lines.push(`${pad}</Component>`);
  }
  for (const [name, sub] of tree.dirs) {
    const inner = emitTree(sub, `${installRel}/${name}`, `${stageRel}/${name}`, components, indent + 2);
    if (!inner.length) continue; // nothing to install below: no directory either
    lines.push(`${pad}<Directory Id="${id('d', `${installRel}/${name}`)}" Name="${xml(name)}">`);
    lines.push(...inner);
    lines.push(`${pad}</Directory>`);
  }
  return lines;
}

function countFiles(tree) {
  return tree.files.length + tree.dirs.reduce((n, [, t]) => n + countFiles(t), 0);
}

function main() {
  const [stage, outDir] = process.argv.slice(2);
  if (!stage || !outDir) fail('usage: node installer/generate-files.js <stage> <outDir>');
  const app = path.join(stage, 'shadowfs');
  const ps = path.join(stage, 'ShadowFS');

  for (const f of TEMPLATE_FILES) if (!fs.statSync(path.join(app, f), { throwIfNoEntry: false })?.isFile()) fail(`${app}/${f} is missing`);
  const vsix = fs.readdirSync(path.join(app, 'vscode')).filter((f) => f.endsWith('.vsix'));
  if (vsix.length !== 1) fail(`${app}/vscode must hold exactly one .vsix (found: ${vsix.join(', ') || 'none'})`);
  for (const f of ['ShadowFS.psd1', 'ShadowFS.psm1']) if (!fs.existsSync(path.join(ps, f))) fail(`${ps}/${f} is missing`);

  // Everything staged for INSTALLDIR is either named by the template or in a generated tree.
  const known = new Set([...TEMPLATE_FILES, `vscode/${vsix[0]}`]);
  const stray = [];
  const check = (rel) => {
    const full = path.join(app, rel);
    if (fs.lstatSync(full).isDirectory()) {
      if (GENERATED_TREES.includes(rel)) return;
      for (const e of fs.readdirSync(full)) check(rel ? `${rel}/${e}` : e);
    } else if (!known.has(rel)) stray.push(rel);
  };
  check('');
  if (stray.length) fail(`staged but neither in installer/shadowfs.wxs nor under ${GENERATED_TREES.join(' or ')}: ${stray.join(', ')}`);

  const distComponents = [];
  const nodeModulesComponents = [];
  const psComponents = [];
  const distTree = readTree(path.join(app, 'dist'));
  const nmTree = readTree(path.join(app, 'node_modules'));
  const psTree = readTree(ps);
  const wrap = (name, tree, list) => {
    const inner = emitTree(tree, `INSTALLDIR/${name}`, `shadowfs/${name}`, list, 8);
    return [`      <Directory Id="${id('d', `INSTALLDIR/${name}`)}" Name="${name}">`, ...inner, '      </Directory>'];
  };
  const lines = [
    '<?xml version="1.0" encoding="utf-8"?>',
    '<!-- Generated by installer/generate-files.js from the staged payload; do not edit. -->',
    '<Wix xmlns="http://schemas.microsoft.com/wix/2006/wi">',
    '  <Fragment>',
    '    <DirectoryRef Id="INSTALLDIR">',
    ...wrap('dist', distTree, distComponents),
    ...wrap('node_modules', nmTree, nodeModulesComponents),
    '    </DirectoryRef>',
    '    <DirectoryRef Id="PSMODULEDIR">',
    ...emitTree(psTree, 'PSMODULEDIR', 'ShadowFS', psComponents, 6),
    '    </DirectoryRef>',
    '    <ComponentGroup Id="Dist">',
    ...distComponents.map((c) => `      <ComponentRef Id="${c}" />`),
    '    </ComponentGroup>',
    '    <ComponentGroup Id="PowerShellModule">',
    ...psComponents.map((c) => `      <ComponentRef Id="${c}" />`),
    '    </ComponentGroup>',
  ];
  const chunks = [];
  for (let i = 0; i < nodeModulesComponents.length; i += MAX_COMPONENTS_PER_FEATURE) {
    chunks.push(nodeModulesComponents.slice(i, i + MAX_COMPONENTS_PER_FEATURE));
  }
  chunks.forEach((chunk, i) => {
    lines.push(`    <ComponentGroup Id="NodeModules${i + 1}">`, ...chunk.map((c) => `      <ComponentRef Id="${c}" />`), '    </ComponentGroup>');
  });
  lines.push('  </Fragment>', '</Wix>', '');
  const features = [
    '<?xml version="1.0" encoding="utf-8"?>',
    '<!-- Generated by installer/generate-files.js; included by installer/shadowfs.wxs. -->',
    '<Include>',
    ...chunks.map(
      (_, i) =>
        `  <Feature Id="NodeModules${i + 1}" Title="Dependencies ${i + 1} of ${chunks.length}" Level="1" Display="hidden" Absent="disallow" AllowAdvertise="no"><ComponentGroupRef Id="NodeModules${i + 1}" /></Feature>`,
    ),
    '</Include>',
    '',
  ];
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'files.wxs'), lines.join('\n'));
  fs.writeFileSync(path.join(outDir, 'features.wxi'), features.join('\n'));
  const summary = {
    files: {
      dist: countFiles(distTree),
      node_modules: countFiles(nmTree),
      powershell: countFiles(psTree),
    },
    components: { dist: distComponents.length, node_modules: nodeModulesComponents.length, powershell: psComponents.length },
    nodeModulesFeatures: chunks.length,
  };
  fs.writeFileSync(path.join(outDir, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

main();
