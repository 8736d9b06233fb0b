#!/usr/bin/env bash
# The main job: install what is missing, build (native + wasm), print the bundled sample model
# (models/sample.onnx) as torch.fx does — print(graph), print_tabular(), the generated code — run it
# once, then build the browser playground (Vite: dist/playground/, a static site) and serve it
# with the cross-origin isolation headers (http://127.0.0.1:8080/, Ctrl-C stops).
# Usage: scripts/main.sh                        the above (PORT=N to change the port)
#        scripts/main.sh [fxwasm-cli arguments]  only the native CLI, e.g. models/zoo/resnet18.onnx --run
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
bash scripts/build.sh native
cli=build/native/fxwasm-cli
if [ "$#" -gt 0 ]; then
  echo "[main] $cli $*"
  exec "$cli" "$@"
fi
echo "[main] $cli models/sample.onnx --run"
"$cli" models/sample.onnx --run
bash scripts/build.sh wasm >/dev/null
echo "[main] building the playground (dist/playground/)"
npx --no-install vite build --config web/vite.config.mjs
echo "[main] serving the playground (Ctrl-C to stop)"
exec node scripts/serve.mjs --port "${PORT:-8080}"
