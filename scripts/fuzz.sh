#!/usr/bin/env bash
# Bounded libFuzzer runs of tests/fuzz's targets (ASan + UBSan, Debian's clang-14), issue 16.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 30)
#   builds build/sanitize (FXWASM_SANITIZE + FXWASM_FUZZ, no LibTorch; the same folder gives the
#   sanitizer build of fx_tests), seeds fuzz_import/fuzz_run with the models of models/ and
#   tests/onnx_ops/ and the malformed table, runs each target for SECONDS (one per core at a
#   time), and fails if one crashed. A crash leaves its input in build/sanitize/fuzz-artifacts/:
#   fix the bug, copy the input to tests/fuzz/regressions/ and add its name to LIST
#   (malformed_test replays them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-30}"
build=build/sanitize
if [ ! -f "$build/build.ninja" ]; then
  # -O1 with line tables: what ASan recommends (usable stack traces), and it builds in about
  # half the time of -O2 -g, which matters in the test command's budget.
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only -DNDEBUG" \
    -DFXWASM_SANITIZE=ON -DFXWASM_FUZZ=ON -DFXWASM_WITH_TORCH=OFF >/dev/null
fi
cmake --build "$build" -j2 --target fuzz_import fuzz_run fuzz_graph fuzz_matcher >/dev/null
seeds="$build/fuzz-seeds"
rm -rf "$seeds" && mkdir -p "$seeds" "$build/fuzz-artifacts"
# Small models only (libFuzzer's -max_len): the zoo's large ones would only slow it down.
find models tests/onnx_ops tests/malformed tests/fuzz/regressions -name '*.onnx' -size -64k \
  -exec cp -t "$seeds" {} + 2>/dev/null || true
# FXWASM_FUZZ_RUNS=N (the test command): N executions per target from seed 1 and a fresh corpus,
# so that a CI run is reproducible; otherwise SECONDS of open-ended fuzzing.
limit=(-max_total_time="$secs")
[ -n "${FXWASM_FUZZ_RUNS:-}" ] && limit=(-seed=1 -runs="$FXWASM_FUZZ_RUNS")
# One target per core at a time (they are independent; 2 cores run the four in ~60 % of the time).
# shellcheck disable=SC2317  # (called through jobs_spawn)
run_target() {  # target -> exit status; its summary line in $build/fuzz-$t.summary
  local t="$1" corpus="$build/fuzz-corpus/$1" log="$build/fuzz-$1.log" dirs
  [ -n "${FXWASM_FUZZ_RUNS:-}" ] && rm -rf "$corpus"
  mkdir -p "$corpus"
  dirs=("$corpus")
  case "$t" in fuzz_import | fuzz_run) dirs+=("$seeds") ;; esac
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$build/$t" "${limit[@]}" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$build/fuzz-artifacts/$t-" "${dirs[@]}" >"$log" 2>&1; then
    echo "$t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -1), no crash" >"$build/fuzz-$t.summary"
  else
    { echo "$t: CRASH (see $log; input in $build/fuzz-artifacts/)"
      grep -m3 -E 'ERROR|SUMMARY|runtime error' "$log" || true; } >"$build/fuzz-$t.summary"
    return 1
  fi
}
rm -f "$build"/fuzz-*.summary
# shellcheck source=scripts/jobs.sh
source scripts/jobs.sh
targets=(fuzz_run fuzz_import fuzz_graph fuzz_matcher)  # the longest first
for t in "${targets[@]}"; do jobs_spawn run_target "$t"; done
status=0
jobs_wait || status=1
for t in "${targets[@]}"; do cat "$build/fuzz-$t.summary"; done
exit "$status"
