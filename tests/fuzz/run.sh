#!/bin/sh
# run.sh BUILD_DIR [SECONDS]: lets each fuzz target of a CONVTUNE_FUZZ
# build search for SECONDS (default 60), starting from its seed corpus in
# tests/fuzz/corpus.  New inputs go to BUILD_DIR/fuzz-work/TARGET (the seed
# corpus is never written); a finding stops the run, prints the report and
# leaves the input as BUILD_DIR/fuzz-work/crash-* (or leak-*, timeout-*),
# which `BUILD_DIR/fuzz_TARGET FILE` replays.
set -eu
build=$(cd "$1" && pwd)
seconds=${2:-60}
corpus=$(cd "$(dirname "$0")/corpus" && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1}
mkdir -p "$build/fuzz-work"
cd "$build/fuzz-work"
for target in spec suite cache_row merge; do
  mkdir -p "$target"
  echo "== fuzz_$target for ${seconds} s"
  if ! "$build/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
      -print_final_stats=1 "$target" "$corpus/$target" > "$target.log" 2>&1; then
    cat "$target.log"
    echo "fuzz_$target found a problem: see $build/fuzz-work"
    exit 1
  fi
  grep -E '^#[0-9]+.*DONE|number_of_executed_units|new_units_added' "$target.log" || true
done
echo "fuzzing: 4 targets, ${seconds} s each, 0 findings"
