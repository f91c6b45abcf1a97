#!/usr/bin/env node
// Writes dist/protocol.schema.json from the compiled protocol module (part of `npm run build`).
// With --readme (the flag `npm run docs` passes; the name is older than the file) it also rewrites
// the generated section of docs/protocol.md; the unit tests fail while that section differs from
// what the schema renders.
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const protocol = require(path.join(root, 'dist', 'src', 'protocol'));
const doc = protocol.protocolDocument();
const out = path.join(root, 'dist', 'protocol.schema.json');
fs.writeFileSync(out, `${JSON.stringify(doc, null, 2)}\n`);

if (process.argv.includes('--readme')) {
  const target = path.join('docs', 'protocol.md');
  const targetPath = path.join(root, target);
  const text = fs.readFileSync(targetPath, 'utf8');
  const re = /(<!-- protocol:begin[^>]*-->\n)[\s\S]*?(\n<!-- protocol:end -->)/;
  if (!re.test(text)) {
    process.stderr.write(`${target} has no <!-- protocol:begin --> ... <!-- protocol:end --> markers\n`);
    process.exit(1);
  }
  const next = text.replace(re, (_m, a, b) => `${a}${protocol.protocolMarkdown(doc)}${b}`);
  if (next !== text) {
    fs.writeFileSync(targetPath, next);
    process.stdout.write(`${target}: protocol section updated\n`);
  }
}
