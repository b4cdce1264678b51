#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets) for FUZZ_SECONDS each (default 10): coverage-guided,
# with AddressSanitizer, from the seeds (fuzz/seeds) and the corpus of earlier runs
# (target/fuzz-corpus). Any crash, leak, allocation over 128 MB, RSS over 1 GB or input slower
# than 2 s fails the run; the input is left in fuzz/artifacts/TARGET/ to become a regression
# (copy it to fuzz/regressions/TARGET/: the unit tests replay those). Prints each target's
# executions and coverage. probe-tests/run calls it; a longer run: FUZZ_SECONDS=600.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-10}
cargo +nightly fuzz build -O >/dev/null
for target in $(cargo +nightly fuzz list); do
  corpus=../target/fuzz-corpus/$target
  mkdir -p "$corpus"
  log=$(mktemp)
  if ! cargo +nightly fuzz run -O "$target" "$corpus" "seeds/$target" -- \
      -max_total_time="$seconds" -rss_limit_mb=1024 -malloc_limit_mb=128 -timeout=2 \
      -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz: $target failed; the input is in fuzz/artifacts/$target/" >&2
    exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -E '^#[0-9]+.*DONE' "$log" | grep -o 'cov: [0-9]*' | tail -1 || true)
  echo "fuzz: $target: $runs executions in ${seconds}s, ${cov:-cov: ?} edges, corpus $(ls "$corpus" | wc -l) inputs"
  rm -f "$log"
done
