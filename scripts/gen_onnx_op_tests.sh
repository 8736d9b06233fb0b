#!/usr/bin/env bash
# Regenerate the single-op ONNX goldens under tests/onnx_ops/ (see scripts/gen_onnx_op_tests.py):
#   1. python (Debian's python3-onnx) writes the models and seeded inputs,
#   2. onnxruntime-node (npm) computes the outputs as raw files,
#   3. python converts them to TensorProto files and writes manifest.json.
# Needs /usr/bin/python3 with onnx and numpy, and node_modules/onnxruntime-node.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -d node_modules/onnxruntime-node ]; then
  echo "gen_onnx_op_tests: node_modules/onnxruntime-node is missing (npm install)" >&2
  exit 1
fi
/usr/bin/python3 scripts/gen_onnx_op_tests.py models
node scripts/gen_onnx_op_outputs.mjs tests/onnx_ops
/usr/bin/python3 scripts/gen_onnx_op_tests.py outputs
