#!/usr/bin/env bash
# Runs the cmap-core fuzz target for a short while (60 s by default, or
# $1 seconds) from the committed seeds, after the harness's own tests.
# Installs cargo-fuzz if it is missing. cargo-fuzz needs nightly flags
# (-Zsanitizer): RUSTC_BOOTSTRAP=1 lets this stable toolchain take them.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"

(cd cmap-core/fuzz && cargo test --release --quiet)

if ! command -v cargo-fuzz >/dev/null; then
  echo "installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet
fi

corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp cmap-core/fuzz/seeds/commands/* "$corpus"/
cd cmap-core
rm -rf fuzz/artifacts/commands
RUSTC_BOOTSTRAP=1 cargo fuzz run commands "$corpus" -- \
  -max_total_time="$seconds" -max_len=8192 -print_final_stats=1 2>&1 \
  | grep -E '^(#[0-9]+ +DONE|stat::|==|thread|SUMMARY|Error)|panicked' || true
# A finding (crash, timeout, out of memory) leaves its input in the
# artifacts folder: that, not the filtered output above, decides.
if [ -n "$(ls -A fuzz/artifacts/commands 2>/dev/null)" ]; then
  echo "error: the fuzzer found: $(ls fuzz/artifacts/commands)" >&2
  exit 1
fi
echo "the fuzzer ran ${seconds} s and found nothing"
