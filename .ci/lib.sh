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

# put_file SRC DEST OWNER MODE: makes DEST a copy of SRC owned by OWNER
# (user:group) with MODE, whatever the umask and whatever stood at DEST
# before (another owner, another mode, another content). Returns 0 when it
# changed something, 1 when DEST already was so: callers restart a server
# only then.
put_file() {
  local src="$1" dest="$2" owner="$3" mode="$4"
  if cmp -s "$src" "$dest" && [ "$(stat -c '%U:%G %a' "$dest")" = "$owner $mode" ]; then
    return 1
  fi
  install -o "${owner%%:*}" -g "${owner#*:}" -m "$mode" "$src" "$dest" || die "could not write $dest"
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
