#!/usr/bin/python3
"""Generates ONNX's own backend node tests (model.onnx + test_data_set_N/{input,output}_K.pb per
case) from Debian's python3-onnx, for tests/onnx_backend (the native runner fx_onnx_backend and the
wasm runner tests/js/onnx_backend.test.mjs).

    /usr/bin/python3 scripts/gen_onnx_backend_suite.py [OUT_DIR]   (default build/onnx-backend)

onnx 1.12's case generators still use numpy's removed aliases (np.float, np.int, np.bool,
np.object, np.complex); numpy 1.24 dropped them, so they are put back before onnx's own
`cmd_tools generate-data` runs. OUT_DIR/.complete records the onnx version of a finished run.
"""
import os
import shutil
import sys

import numpy as np

for alias, builtin in (("float", float), ("int", int), ("bool", bool), ("object", object),
                       ("complex", complex)):
    if alias not in np.__dict__:
        setattr(np, alias, builtin)

import onnx  # noqa: E402  (after the aliases, which onnx's test cases need at import)
from onnx.backend.test import cmd_tools  # noqa: E402


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build", "onnx-backend"))
    stamp = os.path.join(out, ".complete")
    if os.path.exists(stamp) and open(stamp).read().strip() == onnx.__version__:
        print(f"onnx backend suite: up to date in {out} (onnx {onnx.__version__})")
        return 0
    if os.path.exists(out):
        shutil.rmtree(out)
    sys.argv = [sys.argv[0], "generate-data", "-o", out]
    cmd_tools.main()
    cases = sum(os.path.exists(os.path.join(out, kind, c, "model.onnx"))
                for kind in ("node", "simple") if os.path.isdir(os.path.join(out, kind))
                for c in os.listdir(os.path.join(out, kind)))
    with open(stamp, "w") as f:
        f.write(onnx.__version__ + "\n")
    print(f"onnx backend suite: {cases} cases in {out} (onnx {onnx.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
