# Helpers shared by the service scripts (.ci/postgres.sh, .ci/redis.sh,
# .ci/ferretdb.sh). Sourced, not run.

# Prints a step of a service script, prefixed with the script's name.
say() { printf '[%s] %s\n' "$(basename "$0" .sh)" "$*"; }

# Fails the script with a message naming what is missing.
die() {
  printf '[%s] error: %s\n' "$(basename "$0" .sh)" "$*" >&2
  exit 1
}

# Installs Debian packages that are missing, running `apt-get update`
# at most once per boot of the machine (a stamp in /tmp says it ran).
apt_install() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "apt-get is not available to install ${missing[*]}"
  local stamp=/tmp/cmap-apt-updated
  if [ ! -e "$stamp" ]; then
    say "apt-get update"
    apt-get update -q >/dev/null || die "apt-get update failed"
    touch "$stamp"
  fi
  say "installing ${missing[*]} from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

# Waits up to $1 seconds for the command that follows to succeed.
wait_for() {
  local seconds="$1"
  shift
  local _
  for _ in $(seq 1 $((seconds * 5))); do
    "$@" && return 0
    sleep 0.2
  done
  "$@"
}
