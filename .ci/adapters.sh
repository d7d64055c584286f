#!/usr/bin/env bash
# Replays the official CMAP tests in real time against every runtime
# adapter spec-runner supports (`spec-runner --help` lists them): the
# CMAP-format suite and the logging files (unified format), 10 runs in a
# row per adapter, to catch flaky behaviour. Fails on the first run with
# any failure; prints each run's final line.
#
# A run may skip tests: spec-runner reports `SKIP <test>: <reason>` for a
# logging test whose client sets a pool option the CMAP spec deprecated
# and says MUST NOT be implemented (`waitQueueSize`, `waitQueueMultiple`;
# see DEPRECATED_POOL_OPTIONS in spec-runner/src/logging_suite.rs), and its
# summary then reads `N passed, 0 failed, N skipped`. Skips are counted and
# printed, never required by name.
#
# Environment: CMAP_SPEC_TESTS (the cmap-format folder) and
# CMAP_SPEC_LOGGING_TESTS (the logging folder), as exported by .ci/run;
# default ../shared/spec-tests/{cmap-format,logging}. RUNS overrides 10.
set -euo pipefail
cd "$(dirname "$0")/.."

CMAP_DIR="${CMAP_SPEC_TESTS:-../shared/spec-tests/cmap-format}"
LOGGING_DIR="${CMAP_SPEC_LOGGING_TESTS:-../shared/spec-tests/logging}"
RUNS="${RUNS:-10}"
# Generous: one run takes about 5 s.
RUN_TIMEOUT=120
SLOW_RUN=10

for dir in "$CMAP_DIR" "$LOGGING_DIR"; do
  if [ ! -d "$dir" ]; then
    echo "error: spec tests not found at $dir" >&2
    exit 1
  fi
done

cargo build --release -q -p spec-runner
RUNNER="${CARGO_TARGET_DIR:-target}/release/spec-runner"

# "adapters: tokio, async-std, ..." from --help.
ADAPTERS=$("$RUNNER" --help | sed -n 's/^adapters: //p' | tr -d ',')
if [ -z "$ADAPTERS" ]; then
  echo "error: spec-runner lists no adapters" >&2
  exit 1
fi

# Checks one run's output: its exit status is 0, no test failed, and the
# summary (the last line) says so; the skipped tests are listed.
check_run() {
  local out="$1" status="$2" summary
  summary=$(tail -n 1 "$out")
  if grep -q '^FAIL ' "$out"; then
    grep '^FAIL ' "$out" | sed 's/^/unexpected failure: /' >&2
    return 1
  fi
  if ! printf '%s\n' "$summary" | grep -qE '^[0-9]+ passed, 0 failed(, [0-9]+ skipped)?$'; then
    echo "unexpected summary: $summary" >&2
    return 1
  fi
  if [ "$status" -ne 0 ]; then
    echo "spec-runner exited with status $status" >&2
    return 1
  fi
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
total_start=$SECONDS
for adapter in $ADAPTERS; do
  adapter_start=$SECONDS
  for run in $(seq 1 "$RUNS"); do
    start=$SECONDS
    status=0
    timeout "$RUN_TIMEOUT" "$RUNNER" --adapter "$adapter" "$CMAP_DIR" "$LOGGING_DIR" >"$out" 2>&1 || status=$?
    if ! check_run "$out" "$status"; then
      echo "--- $adapter run $run output:" >&2
      cat "$out" >&2
      exit 1
    fi
    took=$((SECONDS - start))
    printf '%-10s run %2d/%d: %s (%ds)\n' "$adapter" "$run" "$RUNS" "$(tail -n 1 "$out")" "$took"
    if [ "$run" -eq 1 ]; then
      # The skipped tests and why, once per adapter.
      grep '^SKIP ' "$out" | sed 's/^/  /' || true
    fi
    if [ "$took" -gt "$SLOW_RUN" ]; then
      # A run passes in about 5 s; one that took much longer probably sat
      # out one of the runner's limits (a lost wake-up, a stuck thread).
      echo "warning: $adapter run $run took ${took}s (more than ${SLOW_RUN}s)" >&2
    fi
  done
  printf '%-10s %d runs in %ds\n' "$adapter" "$RUNS" $((SECONDS - adapter_start))
done
echo "all adapters: $((SECONDS - total_start))s"
