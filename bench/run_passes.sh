#!/usr/bin/env bash
# Pass benchmark (issue 6): CSE, DCE, replace_pattern and split_module on the relu(x + 1) chains,
# fxwasm natively (bench/passes.cpp, target bench_passes) vs torch.fx 1.13
# (bench/passes_torchfx.py under /usr/bin/python3) in the same run, with ratios; and every ONNX
# pass (fx::exec::pass_names() + shape_prop) on the largest zoo model, natively.
#
#   bench/run_passes.sh
#   SIZES=10000 RUNS=3 TORCH_CAP=30 bench/run_passes.sh
#   MODEL=models/zoo/resnet18.onnx bench/run_passes.sh
#
# Outputs: build/bench/passes_{native,torchfx}.jsonl. A torch.fx op still running after
# TORCH_CAP seconds (default 60) is interrupted: its time is a lower bound (">").
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build/bench
SIZES=${SIZES:-10000,50000}
RUNS=${RUNS:-5}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
TORCH_CAP=${TORCH_CAP:-60}
MODEL=${MODEL:-$(ls -S models/zoo/*.onnx 2>/dev/null | head -1)}
mkdir -p "$OUT"
log() { echo "[run_passes] $*" >&2; }

log "building bench_passes (build/native)"
[ -f build/native/build.ninja ] || cmake -S . -B build/native -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native --target bench_passes >"$OUT/build_passes.log" 2>&1 ||
  { cat "$OUT/build_passes.log" >&2; exit 1; }

# As in run_ir.sh: keep freed memory in the process (page faults dominate otherwise), for both.
export MALLOC_TRIM_THRESHOLD_=4000000000 MALLOC_MMAP_THRESHOLD_=4000000000
t0=$SECONDS
log "native run (chains $SIZES${MODEL:+; ONNX passes on $MODEL})"
build/native/bench_passes --sizes "$SIZES" --runs "$RUNS" ${MODEL:+--model "$MODEL"} \
  >"$OUT/passes_native.jsonl"
log "torch.fx run ($TORCH_PY, torch $("$TORCH_PY" -c 'import torch; print(torch.__version__)'), cap ${TORCH_CAP} s per op)"
"$TORCH_PY" bench/passes_torchfx.py --sizes "$SIZES" --runs "$RUNS" --cap "$TORCH_CAP" \
  >"$OUT/passes_torchfx.jsonl"
log "runs took $((SECONDS - t0)) s"

python3 - "$OUT/passes_native.jsonl" "$OUT/passes_torchfx.jsonl" <<'PY'
import json, sys
native = [json.loads(l) for l in open(sys.argv[1])]
torch = {(r["N"], r["op"]): r for r in map(json.loads, open(sys.argv[2]))}

def fmt(s):
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"

print("\nPasses on the relu(x + 1) chains: median seconds per run, fresh graph each run")
print(f"| {'op':<16} | {'N':>6} | {'fxwasm native':>13} | {'torch.fx 1.13':>24} | {'torch.fx / native':>17} |")
print(f"|{'-' * 18}|{'-' * 8}|{'-' * 15}|{'-' * 26}|{'-' * 19}|")
for r in native:
    if "N" not in r:
        continue
    t = torch.get((r["N"], r["op"]))
    if t is None:
        tt, ratio = "-", "-"
    elif t["status"] not in ("ok", "timeout"):
        tt, ratio = t["status"].split(":")[0] + f" ({fmt(t['seconds'])})", "-"
    else:
        lb = ">" if t["lower_bound"] else ""
        tt, ratio = lb + fmt(t["seconds"]), f"{lb}{t['seconds'] / r['seconds']:.0f}x"
    print(f"| {r['op']:<16} | {r['N']:>6} | {fmt(r['seconds']):>13} | {tt:>24} | {ratio:>17} |")

rows = [r for r in native if "model" in r]
if rows:
    print(f"\nONNX passes on {rows[0]['model']} (natively; median of {rows[0]['runs']} runs on a fresh copy)")
    print(f"| {'pass':<16} | {'seconds':>10} | {'modified':>8} | {'nodes':>13} |")
    print(f"|{'-' * 18}|{'-' * 12}|{'-' * 10}|{'-' * 15}|")
    for r in rows:
        nodes = f"{r['nodes_before']} -> {r['nodes_after']}" if r["op"] != "import" else str(r["nodes_after"])
        print(f"| {r['op']:<16} | {fmt(r['seconds']):>10} | {str(r['modified']).lower():>8} | {nodes:>13} |")
PY
