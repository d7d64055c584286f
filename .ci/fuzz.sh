#!/usr/bin/env bash
# Runs every fuzz target for a short while (60 s each by default, or $1
# seconds) from its committed seeds, after the harness's own tests:
#   cmap-core/fuzz     commands           the core's inputs
#   cmap-core/fuzz     connection_string  the connection-string and options parser
#   cmap-mongodb/fuzz  reply              a server's reply bytes (header, OP_MSG, BSON)
#   cmap-mongodb/fuzz  scram              SCRAM server-first and server-final messages
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

# fuzz CRATE TARGET MAX_LEN [libFuzzer flags...]
fuzz() {
  local crate=$1 target=$2 max_len=$3
  shift 3
  local corpus
  corpus=$(mktemp -d)
  cp "$crate"/fuzz/seeds/"$target"/* "$corpus"/
  rm -rf "$crate/fuzz/artifacts/$target"
  echo "== $crate $target, ${seconds} s"
  (cd "$crate" && RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" "$corpus" -- \
    -max_total_time="$seconds" -max_len="$max_len" -print_final_stats=1 "$@" 2>&1 \
    | grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|==|thread|SUMMARY|Error)|panicked' || true)
  rm -rf "$corpus"
  # A finding (crash, timeout, out of memory) leaves its input in the
  # artifacts folder: that, not the filtered output above, decides.
  if [ -n "$(ls -A "$crate/fuzz/artifacts/$target" 2>/dev/null)" ]; then
    echo "error: the fuzzer found: $(ls "$crate/fuzz/artifacts/$target")" >&2
    exit 1
  fi
}

fuzz cmap-core commands 8192
fuzz cmap-core connection_string 1024
# No allocation over 64 MB: a reply's largest declared size is 48 MB.
fuzz cmap-mongodb reply 65536 -malloc_limit_mb=64 -rss_limit_mb=1024
fuzz cmap-mongodb scram 1024 -timeout=10
echo "every fuzzer ran ${seconds} s and found nothing"
