#!/usr/bin/env bash
# npm run test:vscode (and the last pass of npm test): the VS Code extension's tests. Makes the
# toolchain ready (scripts/vscode/setup.sh: code-server, the Node 24 it needs, Chromium), builds
# shadowfs (scripts/bootstrap.sh) and the extension with its .vsix (extension/build.mjs), then runs
# the extension's unit tests and the tests in a real VS Code (test/vscode). Screenshots and the
# workbench's logs go to test-output/vscode/.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/bootstrap.sh
bash scripts/vscode/setup.sh
echo "vscode: building the extension and its .vsix" >&2
node extension/build.mjs --vsix >/dev/null
exec node_modules/.bin/mocha --config test/vscode/.mocharc.json "$@"
