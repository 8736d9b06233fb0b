#!/usr/bin/env bash
# Everything CI checks, in order: setup (idempotent installs), native + wasm builds (the wasm step
# builds the three modules: build/wasm, and in build/wasm-threads the threaded module and its
# Relaxed SIMD twin), the C++ tests
# natively (ctest), ASan + UBSan and fuzzing, the thread pool under TSan, the installed CMake
# package used by tests/package, the C++ tests as wasm under
# node (ctest), the layering check, clang-format, the TypeScript declarations (tsc), the npm
# package as packed (npm pack -> install into an empty folder -> import), the JS tests (Jest), and
# torchvision models outside the zoo on every path against onnxruntime (check_torchvision.py).
# Every step runs even if an earlier test step failed; the exit code is non-zero if any failed.
# Full logs: build/test-logs/.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
logs="$root/build/test-logs"

results=()   # "step|status|detail"
passed=0
failed=0
rc=0
# Node echoes the offending source line of a crash, and Emscripten's glue is one minified line:
# console output is cut at this width (the logs keep everything).
maxcol=400

banner() { printf '\n===== %s =====\n' "$*"; }
record() {  # step status detail
  results+=("$1|$2|$3")
  if [ "$2" != ok ] && [ "$2" != skipped ]; then rc=1; fi
}
elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

# --- setup + build: nothing can be tested without them --------------------------------------------
t=$(date +%s)
banner "setup"
if ! bash scripts/setup.sh; then echo "setup failed" >&2; exit 1; fi
record setup ok "$(elapsed "$t")"
mkdir -p "$logs"

t=$(date +%s)
banner "build native"
native_ok=0
if bash scripts/build.sh native; then record "build native" ok "$(elapsed "$t")"
else record "build native" FAILED "$(elapsed "$t")"; native_ok=1; fi

t=$(date +%s)
banner "build wasm"
wasm_ok=0
if bash scripts/build.sh wasm; then record "build wasm" ok "$(elapsed "$t")"
else record "build wasm" FAILED "$(elapsed "$t")"; wasm_ok=1; fi

# --- C++ tests --------------------------------------------------------------------------------------
# ctest's closing line: "100% tests passed, 0 tests failed out of 57"
count_ctest() {  # log -> adds to passed/failed, sets $counted to "P passed, F failed"
  local line total f
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -1)
  if [ -z "$line" ]; then counted="no ctest summary"; failed=$((failed + 1)); return; fi
  f=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<< "$line")
  total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<< "$line")
  passed=$((passed + total - f)); failed=$((failed + f))
  counted="$((total - f)) passed, $f failed"
}

t=$(date +%s)
banner "C++ tests, native (ctest)"
if [ "$native_ok" -ne 0 ]; then record "ctest native" skipped "build failed"
else
  ctest --test-dir build/native --output-on-failure -j"$(nproc)" 2>&1 | tee "$logs/ctest-native.log"
  st=${PIPESTATUS[0]}
  count_ctest "$logs/ctest-native.log"
  detail="$counted, $(elapsed "$t")"
  if [ "$st" -eq 0 ]; then record "ctest native" ok "$detail"; else record "ctest native" FAILED "$detail"; fi
fi

# Issue 16: the C++ suite again under ASan + UBSan (build/sanitize: clang-14, no LibTorch), then
# each libFuzzer target of tests/fuzz for a bounded, reproducible number of runs (FXWASM_FUZZ_RUNS,
# default 20000, from seed 1).
t=$(date +%s)
banner "C++ tests under ASan + UBSan, and bounded fuzzing (scripts/fuzz.sh)"
(
  set -e
  FXWASM_FUZZ_RUNS="${FXWASM_FUZZ_RUNS:-20000}" bash scripts/fuzz.sh
  cmake --build build/sanitize -j2 --target fx_tests >/dev/null
  # Eight gtest shards, two processes at a time (one per core; the native ctest already runs
  # these tests in parallel processes). The longest test under ASan (~50 s: 1,000 runs from two
  # callers) runs first, alone: inside a shard it made that shard the step's tail.
  slow=Threads.ManyRunsFromTwoCallersWithModulesDestroyedInBetween
  filters=("$slow") shards=("")
  for ((i = 0; i < 8; ++i)); do filters+=("-$slow"); shards+=("$i"); done
  # shellcheck disable=SC2317  # (called through jobs_spawn)
  asan_job() {  # j: fx_tests with filters[j] (and shard shards[j]) -> build/sanitize/fx_tests-job$j.log
    env ${shards[$1]:+GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=${shards[$1]}} ASAN_OPTIONS=detect_leaks=1 \
      UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 build/sanitize/fx_tests --gtest_brief=1 \
      --gtest_filter="${filters[$1]}" >"build/sanitize/fx_tests-job$1.log" 2>&1
  }
  # shellcheck source=scripts/jobs.sh
  source scripts/jobs.sh
  for ((j = 0; j < ${#filters[@]}; ++j)); do jobs_spawn asan_job "$j"; done
  st=0
  jobs_wait || st=1
  for ((j = 0; j < ${#filters[@]}; ++j)); do
    echo "--- fx_tests under ASan + UBSan: --gtest_filter=${filters[j]}${shards[j]:+, shard ${shards[j]} of 8}"
    cat "build/sanitize/fx_tests-job$j.log"
  done
  exit "$st"
) 2>&1 | tee "$logs/sanitize.log" | cut -c1-$maxcol
if [ "${PIPESTATUS[0]}" -eq 0 ]; then record "asan+fuzz" ok "$(elapsed "$t")"
else record "asan+fuzz" FAILED "$(elapsed "$t")"; fi

# The kernels' thread pool under ThreadSanitizer: tests/stress/pool_stress.cpp (fxkernels alone,
# so the build takes under a minute) in build/tsan, clang-14 -fsanitize=thread. A data race in the
# pool's hand-over or in a kernel's per-thread scratch fails it. (setarch -R: clang-14's TSan
# refuses the memory layout of kernels that randomise mmap with more bits.)
t=$(date +%s)
banner "thread pool under ThreadSanitizer (tests/stress/pool_stress.cpp)"
(
  set -e
  if [ ! -f build/tsan/build.ninja ]; then
    CC=clang-14 CXX=clang++-14 cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g -DNDEBUG" -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DFXWASM_WITH_TORCH=OFF >/dev/null
  fi
  cmake --build build/tsan -j2 --target fx_pool_stress >/dev/null
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 setarch "$(uname -m)" -R build/tsan/fx_pool_stress
) 2>&1 | tee "$logs/tsan.log" | cut -c1-$maxcol
if [ "${PIPESTATUS[0]}" -eq 0 ]; then record "tsan" ok "$(elapsed "$t")"
else record "tsan" FAILED "$(elapsed "$t")"; fi

# The installed CMake package, used as another project would: install build/native into a
# scratch prefix, then configure, build and run tests/package against it (find_package(fxwasm)).
t=$(date +%s)
banner "CMake package (cmake --install, find_package(fxwasm) from tests/package)"
if [ "$native_ok" -ne 0 ]; then record "cmake package" skipped "build failed"
else
  (
    set -e
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cmake --list-presets all >/dev/null  # CMakePresets.json still reads
    cmake --install build/native --prefix "$tmp/prefix" >/dev/null
    with_torch=OFF
    grep -q '^FXWASM_WITH_TORCH:BOOL=ON' build/native/CMakeCache.txt && with_torch=ON
    cmake -S tests/package -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$tmp/prefix" -DWITH_TORCH="$with_torch" >/dev/null
    cmake --build "$tmp/build" >/dev/null
    "$tmp/build/consumer"
  ) 2>&1 | tee "$logs/cmake-package.log"
  if [ "${PIPESTATUS[0]}" -eq 0 ]; then record "cmake package" ok "$(elapsed "$t")"
  else record "cmake package" FAILED "$(elapsed "$t")"; fi
fi

# The wasm suite is one CTest test running the whole gtest binary under node; count gtest's cases.
t=$(date +%s)
banner "C++ tests, wasm under node (ctest)"
if [ "$wasm_ok" -ne 0 ]; then record "ctest wasm" skipped "build failed"
else
  ctest --test-dir build/wasm -V 2>&1 | tee "$logs/ctest-wasm.log" | cut -c1-$maxcol
  st=${PIPESTATUS[0]}
  gp=$(grep -Eo '\[  PASSED  \] [0-9]+ tests?' "$logs/ctest-wasm.log" | awk '{s += $4} END {print s + 0}')
  gf=$(grep -Eo '\[  FAILED  \] [0-9]+ tests?, listed below' "$logs/ctest-wasm.log" | awk '{s += $4} END {print s + 0}')
  if [ "$st" -ne 0 ] && [ "$gf" -eq 0 ]; then gf=1; fi  # crashed before gtest's summary
  passed=$((passed + gp)); failed=$((failed + gf))
  detail="$gp passed, $gf failed (gtest cases), $(elapsed "$t")"
  if [ "$st" -eq 0 ]; then record "ctest wasm" ok "$detail"; else record "ctest wasm" FAILED "$detail"; fi
fi

# --- layering and style ----------------------------------------------------------------------------
t=$(date +%s)
banner "layering (scripts/check_layers.py: who may include whom, docs/architecture.md), generated tables current"
if { python3 scripts/check_layers.py && /usr/bin/python3 scripts/gen_onnx_schemas.py --check; } 2>&1 | tee "$logs/layers.log"; then record "layering" ok "$(elapsed "$t")"
else record "layering" FAILED "$(elapsed "$t")"; fi

t=$(date +%s)
banner "C++ formatting (clang-format --check)"
if bash scripts/format.sh --check 2>&1 | tee "$logs/format.log"; then record "clang-format" ok "$(elapsed "$t")"
else record "clang-format" FAILED "run scripts/format.sh, $(elapsed "$t")"; fi

# --- JS/TS ------------------------------------------------------------------------------------------
t=$(date +%s)
banner "TypeScript declarations (tsc)"
if [ -f wasm/index.d.ts ]; then
  if npm run --silent typecheck; then record "tsc" ok "$(elapsed "$t")"
  else record "tsc" FAILED "$(elapsed "$t")"; fi
else record "tsc" skipped "no wasm/index.d.ts"; fi

t=$(date +%s)
banner "npm package (pack, install into an empty folder, import)"
if [ "$wasm_ok" -ne 0 ]; then record "npm pack" skipped "wasm build failed"
elif [ ! -f wasm/index.mjs ]; then record "npm pack" skipped "no wasm/index.mjs"
else
  (
    set -e
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    tgz=$(npm pack --silent --pack-destination "$tmp" | tail -1)
    tar -tzf "$tmp/$tgz" | sort > "$logs/npm-pack-files.txt"
    for f in package/package.json package/dist/fx.mjs package/dist/fx.wasm package/wasm/index.mjs \
             package/dist/fx-threads.mjs package/dist/fx-threads.wasm package/dist/fx-threads.worker.js \
             package/dist/fx-threads-relaxed.mjs package/dist/fx-threads-relaxed.wasm \
             package/dist/fx-threads-relaxed.worker.js; do
      grep -qx "$f" "$logs/npm-pack-files.txt" || { echo "missing from tarball: $f"; exit 1; }
    done
    mkdir "$tmp/consumer" && cd "$tmp/consumer"
    npm init -y >/dev/null
    npm install --no-audit --no-fund --silent "$tmp/$tgz"
    # Importing the package evaluates the facade and the Emscripten glue; init() is the façade's.
    node --input-type=module -e "
      const fx = await import('fxwasm');
      if (typeof fx.init === 'function') await fx.init();
      console.log('imported fxwasm from the packed tarball:', Object.keys(fx).length, 'exports');"
    # The threaded module from the tarball (dist/fx-threads.*): init({threads: 2}) must get it.
    node --input-type=module -e "
      const t = (await (await import('fxwasm')).init({ threads: 2 })).threads();
      if (t.build !== 'threads' || t.threads !== 2) throw new Error('no threaded module: ' + JSON.stringify(t));
      console.log('the packed tarball runs the threaded module:', JSON.stringify(t));"
    # And its Relaxed SIMD twin where the engine has it (Node: behind V8's flag).
    node --experimental-wasm-relaxed-simd --input-type=module -e "
      const t = (await (await import('fxwasm')).init({ threads: 2 })).threads();
      if (t.simd !== 'relaxed' || t.threads !== 2) throw new Error('no relaxed-SIMD module: ' + JSON.stringify(t));
      console.log('and under --experimental-wasm-relaxed-simd its Relaxed SIMD twin:', JSON.stringify(t));"
  ) 2>&1 | tee "$logs/npm-pack.log" | cut -c1-$maxcol
  if [ "${PIPESTATUS[0]}" -eq 0 ]; then record "npm pack" ok "$(elapsed "$t")"
  else record "npm pack" FAILED "$(elapsed "$t")"; fi
fi

t=$(date +%s)
banner "JS tests (Jest)"
if [ "$wasm_ok" -ne 0 ]; then record "jest" skipped "wasm build failed"
else
  # Two runs: the suites without a browser on two Jest workers (Jest's default on 2 cores is
  # one), then those driving Chromium (page timings are asserted: no 200 ms main-thread task)
  # and the bundlers on one worker, alone on the machine as before.
  browser='tests/js/(playground|playground_more|bundlers|threads_wasm)[.]test[.]mjs$'
  npm test --silent -- --maxWorkers=2 --testPathIgnorePatterns "$browser" 2>&1 |
    tee "$logs/jest.log" | cut -c1-$maxcol
  st=${PIPESTATUS[0]}
  npm test --silent -- --maxWorkers=1 "$browser" 2>&1 | tee "$logs/jest-browser.log" | cut -c1-$maxcol
  [ "${PIPESTATUS[0]}" -eq 0 ] || st=1
  # Jest's closing lines: "Tests:       1 failed, 12 passed, 13 total"
  jp=0 jf=0
  for f in "$logs/jest.log" "$logs/jest-browser.log"; do
    line=$(grep -E '^Tests:' "$f" | tail -1)
    n=$(grep -Eo '[0-9]+ passed' <<< "$line" | grep -Eo '[0-9]+'); jp=$((jp + ${n:-0}))
    n=$(grep -Eo '[0-9]+ failed' <<< "$line" | grep -Eo '[0-9]+'); jf=$((jf + ${n:-0}))
  done
  if [ "$st" -ne 0 ] && [ "$jf" -eq 0 ]; then jf=1; fi  # no tests found, or a suite failed to load
  passed=$((passed + jp)); failed=$((failed + jf))
  detail="$jp passed, $jf failed, $(elapsed "$t")"
  if [ "$st" -eq 0 ]; then record "jest" ok "$detail"; else record "jest" FAILED "$detail"; fi
fi

# Models fxwasm was not tuned on (torchvision architectures outside models/zoo, opsets 9-17, odd
# sizes, batches): native at 1 and 2 threads (bit-identical), both wasm modules and the generated
# PyTorch package, each against onnxruntime-node. One counted test per case.
t=$(date +%s)
banner "torchvision models outside the zoo, every path against onnxruntime (scripts/check_torchvision.py)"
if [ "$native_ok" -ne 0 ] || [ "$wasm_ok" -ne 0 ]; then record "torchvision" skipped "build failed"
else
  /usr/bin/python3 scripts/check_torchvision.py 2>&1 | tee "$logs/torchvision.log" | cut -c1-$maxcol
  st=${PIPESTATUS[0]}
  line=$(grep -E '^[0-9]+ of [0-9]+ cases pass' "$logs/torchvision.log" | tail -1)
  if [ -n "$line" ]; then
    tp=$(awk '{print $1}' <<< "$line"); tt=$(awk '{print $3}' <<< "$line")
  else tp=0; tt=1; fi
  passed=$((passed + tp)); failed=$((failed + tt - tp))
  detail="$tp of $tt cases, $(elapsed "$t")"
  if [ "$st" -eq 0 ]; then record "torchvision" ok "$detail"; else record "torchvision" FAILED "$detail"; fi
fi

# --- summary ----------------------------------------------------------------------------------------
banner "summary"
for r in "${results[@]}"; do
  IFS='|' read -r step status detail <<< "$r"
  printf '  %-14s %-8s %s\n' "$step" "$status" "$detail"
done
echo
echo "total: $passed passed, $failed failed"
exit "$rc"
