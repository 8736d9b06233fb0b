#!/usr/bin/env bash
# Big graphs (issue 16): chains of N nodes (bench/big_graph.py), N from SIZES (default 50000
# 100000 200000). Per size: the native CLI (load, print the code, run; time and peak RSS from
# /usr/bin/time), the npm package in node (bench/big_graph.mjs fxwasm: load, code, run, export,
# wasm heap) and onnxruntime-node (session creation + run), one process each, one thread.
#   bench/run_big_graph.sh
#   SIZES="10000 20000" bench/run_big_graph.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/bench
mkdir -p "$out"
cli=build/native/fxwasm-cli
[[ -x $cli && -f dist/fx.wasm ]] || bash scripts/build.sh
: >"$out/big_graph.jsonl"
for n in ${SIZES:-50000 100000 200000}; do
  m="$out/chain_$n.onnx"
  [[ -f $m ]] || /usr/bin/python3 bench/big_graph.py "$n" "$m"
  /usr/bin/time -f '%e %M' -o "$out/time.txt" "$cli" "$m" --print code --run >/dev/null
  read -r secs kb <"$out/time.txt"
  echo "{\"side\":\"native\",\"model\":\"chain_$n.onnx\",\"nodes\":$n,\"total_ms\":$(awk "BEGIN{print $secs*1000}"),\"rss_mb\":$((kb / 1024))}" |
    tee -a "$out/big_graph.jsonl"
  node bench/big_graph.mjs fxwasm "$m" | tee -a "$out/big_graph.jsonl"
  node bench/big_graph.mjs ortnode "$m" | tee -a "$out/big_graph.jsonl"
done
