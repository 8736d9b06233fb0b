#!/usr/bin/env bash
# LibTorch layer benchmark: Interpreter overhead vs eager (ResNet-18, encoder block; one thread,
# median) and ResNet-18 tracing time vs torch.fx 1.13 tracing the Python twin, in the same run.
# Usage: bench/run_torch.sh [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build/native  # scripts/build.sh configures it with the LibTorch layer when LibTorch is installed
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFXWASM_WITH_TORCH=ON >/dev/null
cmake --build "$BUILD" --target fx_torch_bench
ours=$("$BUILD/fx_torch_bench" "$@")
theirs=$(/usr/bin/python3 bench/torch_trace_torchfx.py "$@")
echo "$ours"
echo "$theirs"
a=$(awk '/^resnet18_trace_ms/ {print $2}' <<<"$ours")
b=$(awk '/^torchfx_resnet18_trace_ms/ {print $2}' <<<"$theirs")
awk -v a="$a" -v b="$b" 'BEGIN { printf "trace_speedup_vs_torchfx %.2fx\n", b / a }'
