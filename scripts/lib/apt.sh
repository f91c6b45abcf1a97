# Sourced by the scripts that install missing Debian/Ubuntu packages themselves.
#
# apt_install WHO PACKAGE...: installs the packages with apt-get (through sudo when not root),
# waiting for another apt run's lock instead of failing; progress goes to stderr prefixed by
# WHO. Without apt-get, or without root and sudo, it says what to install and returns 1.
apt_install() {
  local who=$1
  shift
  (($#)) || return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    printf '%s: missing system packages: %s; install them with your package manager (this script knows apt-get only)\n' "$who" "$*" >&2
    return 1
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
      printf '%s: missing system packages: %s; run as root or install them\n' "$who" "$*" >&2
      return 1
    }
    sudo=(sudo)
  fi
  printf '%s: installing %s with apt-get\n' "$who" "$*" >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null
}
