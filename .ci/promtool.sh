#!/usr/bin/env bash
# Makes sure `promtool` runs (the alert rules' checks and unit tests,
# monitoring/prometheus/): installs Debian's `prometheus` package, which
# ships it, if it is missing. Only the tool is wanted: a Prometheus server
# the package's scripts started is stopped, and nothing of this project's
# is written.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

if command -v promtool >/dev/null; then
  say "already installed: $(promtool --version 2>&1 | head -n 1)"
  exit 0
fi
apt_install prometheus
command -v promtool >/dev/null || die "promtool is missing after installing prometheus"
# The package may start its server (port 9090) where an init system runs;
# the tests need none.
if pgrep -x prometheus >/dev/null; then
  if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
    systemctl stop prometheus && systemctl disable --quiet prometheus
  else
    service prometheus stop >/dev/null 2>&1 || true
  fi
  say "stopped the Prometheus server the package started (only promtool is needed)"
fi
say "installed: $(promtool --version 2>&1 | head -n 1)"
