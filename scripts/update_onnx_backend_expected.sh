#!/usr/bin/env bash
# Rewrites tests/onnx_backend/expected.txt from a fresh run: fxwasm's native outcome per case (the
# build's fx_onnx_backend) beside onnxruntime-node's (scripts/ort_backend.mjs, which needs the wasm
# build for decoding test data). Review the diff before committing it: a pass that became a fail
# is a regression, not a list update.
#   scripts/update_onnx_backend_expected.sh [BUILD_DIR]   (default build/native)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/native}"
suite=build/onnx-backend
/usr/bin/python3 scripts/gen_onnx_backend_suite.py >/dev/null 2>&1
ort=$(mktemp)
trap 'rm -f "$ort"' EXIT
node scripts/ort_backend.mjs "$suite/node,$suite/simple" --write "$ort" 2>/dev/null
"$build/fx_onnx_backend" "$suite/node,$suite/simple" --ort "$ort" --write tests/onnx_backend/expected.txt
