#!/usr/bin/env node
// Writes dist/protocol.schema.json from the compiled protocol module (part of `npm run build`).
// With --readme it also rewrites the README's protocol section (`npm run docs`); the unit tests
// fail while that section differs from what the schema renders.
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const protocol = require(path.join(root, 'dist', 'src', 'protocol'));
const doc = protocol.protocolDocument();
const out = path.join(root, 'dist', 'protocol.schema.json');
fs.writeFileSync(out, `${JSON.stringify(doc, null, 2)}\n`);

if (process.argv.includes('--readme')) {
  const readmePath = path.join(root, 'README.md');
  const readme = fs.readFileSync(readmePath, 'utf8');
  const re = /(<!-- protocol:begin[^>]*-->\n)[\s\S]*?(\n<!-- protocol:end -->)/;
  if (!re.test(readme)) {
    process.stderr.write('README.md has no <!-- protocol:begin --> ... <!-- protocol:end --> markers\n');
    process.exit(1);
  }
  const next = readme.replace(re, (_m, a, b) => `${a}${protocol.protocolMarkdown(doc)}${b}`);
  if (next !== readme) {
    fs.writeFileSync(readmePath, next);
    process.stdout.write('README.md: protocol section updated\n');
  }
}
