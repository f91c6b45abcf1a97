#!/usr/bin/env node
// Entry point of the shadowfs CLI; the commands live in dist/src/cli (built from src/cli).
require('../dist/src/cli/main.js').main(process.argv.slice(2));
