#!/usr/bin/env bash
# The main job: install what is missing, build natively, and run the CLI on the bundled sample
# model (models/sample.onnx): prints print(graph), print_tabular() and the generated code, as
# torch.fx does, then runs the model once on seeded random inputs.
# Usage: scripts/main.sh [fxwasm-cli arguments]   (default: models/sample.onnx --run)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
bash scripts/build.sh native
cli=build/native/fxwasm-cli
if [ ! -x "$cli" ]; then
  echo "[main] $cli was not built (tools/fxwasm_cli.cpp missing?)" >&2
  exit 1
fi
if [ "$#" -eq 0 ]; then set -- models/sample.onnx --run; fi
echo "[main] $cli $*"
exec "$cli" "$@"
