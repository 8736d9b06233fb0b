#!/usr/bin/python3
"""Runs the PyTorch packages fxwasm made from ONNX's backend node tests (lowerToTorch + toFolder,
by tests/torch_codegen/backend_lowering.mjs) in Debian's torch 1.13 and compares them with the
suite's expected outputs. Prints one line per case, "<case> ok" or "<case> FAIL <reason>".

    /usr/bin/python3 tests/torch_codegen/check_backend.py ROOT

ROOT/<case>/pkg/ is the package (module.py, __init__.py, state_dict.pt, class Net) and
ROOT/<case>/data.txt the case's folder in the suite (test_data_set_N/{input,output}_K.pb).
Comparison as ONNX's backend runner: same count, dtype and shape; floating point within rtol 1e-3
and atol 1e-7 (NaN equals NaN); everything else exactly.
"""
import importlib
import os
import sys
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch

warnings.filterwarnings("ignore")


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return onnx.numpy_helper.to_array(t)


def tensors(folder, kind):
    out = []
    while os.path.exists(os.path.join(folder, f"{kind}_{len(out)}.pb")):
        out.append(read_pb(os.path.join(folder, f"{kind}_{len(out)}.pb")))
    return out


def check_case(root, case):
    folder = os.path.join(root, case)
    data = open(os.path.join(folder, "data.txt")).read().strip()
    sys.path.insert(0, folder)
    try:
        importlib.invalidate_caches()
        net = importlib.import_module("pkg").Net().eval()
    finally:
        sys.path.pop(0)
        # Every case's package is called pkg: forget this one before the next case imports.
        for name in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
            del sys.modules[name]
    for ds in sorted(d for d in os.listdir(data) if d.startswith("test_data_set_")):
        inputs = [torch.from_numpy(np.array(a)) for a in tensors(os.path.join(data, ds), "input")]
        expected = tensors(os.path.join(data, ds), "output")
        with torch.no_grad():
            got = net(*inputs)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        if len(got) != len(expected):
            return f"{len(got)} outputs, expected {len(expected)}"
        for i, (a, b) in enumerate(zip(got, expected)):
            a = a.numpy() if isinstance(a, torch.Tensor) else np.array(a)
            if a.dtype != b.dtype:
                return f"output {i}: dtype {a.dtype}, expected {b.dtype}"
            if a.shape != b.shape:
                return f"output {i}: shape {a.shape}, expected {b.shape}"
            if a.dtype.kind in "fc":
                try:
                    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-7)
                except AssertionError as e:
                    return f"output {i}: " + " ".join(str(e).split())[:240]
            elif not np.array_equal(a, b):
                return f"output {i}: values differ"
    return ""


def main():
    root = sys.argv[1]
    for case in sorted(os.listdir(root)):
        if not os.path.isdir(os.path.join(root, case)):
            continue
        try:
            why = check_case(root, case)
        except Exception as e:  # the package's own error is the case's result
            why = f"{type(e).__name__}: " + " ".join(str(e).split())[:240]
        print(f"{case} ok" if not why else f"{case} FAIL {why}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
