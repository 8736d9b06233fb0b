# Shared steps of bench/run_onnx_import.sh and bench/run_onnx_exec.sh (sourced; they define
# log(), OUT, MODELS and TORCH_PY first).

# Snapshot of the npm package (wasm/*.mjs + dist/fx.{mjs,wasm}, and the threaded modules
# dist/fx-threads{,-relaxed}.{mjs,wasm,worker.js} when built) that the JS sides load (FXWASM_PKG):
# other builds may rewrite dist/ while a benchmark runs.
snapshot_package() {
  PKG="$OUT/pkg"
  export FXWASM_PKG="$PKG"
  local try
  for try in 1 2 3 4; do
    rm -rf "$PKG" && mkdir -p "$PKG/wasm" "$PKG/dist"
    cp wasm/*.mjs "$PKG/wasm/" && cp dist/fx.mjs dist/fx.wasm "$PKG/dist/"
    if [ -f dist/fx-threads.wasm ]; then
      cp dist/fx-threads.mjs dist/fx-threads.wasm dist/fx-threads.worker.js "$PKG/dist/" || continue
    fi
    if [ -f dist/fx-threads-relaxed.wasm ]; then
      cp dist/fx-threads-relaxed.mjs dist/fx-threads-relaxed.wasm dist/fx-threads-relaxed.worker.js \
        "$PKG/dist/" || continue
    fi
    node bench/onnx_exec.mjs init fxwasm >/dev/null 2>&1 && return 0
    [ "$try" = 4 ] && { log "dist/fx.{mjs,wasm} do not load (a build in progress?)"; exit 1; }
    log "dist/ does not load (a build in progress?); retrying in 30 s"
    sleep 30
  done
}

# Exports the models of $MODELS that models/zoo/ lacks (models/generate.py; resnet50 ~20 s) and
# sets the array `models`.
ensure_models() {
  IFS=, read -r -a models <<<"$MODELS"
  local m missing=()
  for m in "${models[@]}"; do [ -f "models/zoo/$m.onnx" ] || missing+=("$m"); done
  if [ ${#missing[@]} -gt 0 ]; then
    log "exporting ${missing[*]} (models/generate.py)"
    "$TORCH_PY" models/generate.py --only "$(IFS=,; echo "${missing[*]}")" >&2
  fi
}
