#!/usr/bin/python3
"""Runs the PyTorch packages fxwasm made from ONNX models (lowerToTorch + toFolder) in real
PyTorch and checks them against onnxruntime. Run by tests/js/torch_codegen.test.mjs with Debian's
/usr/bin/python3 (torch 1.13).

    /usr/bin/python3 tests/torch_codegen/check_lowered.py ROOT

ROOT holds one folder per model:

    ROOT/<model>/pkg_<model>/   the package (module.py, __init__.py, state_dict.pt), class Net
    ROOT/<model>/graph.txt      print(graph) of the lowered module, as fxwasm printed it
    ROOT/<model>/case*/io.json  inputs and onnxruntime's outputs (scripts/ort_run.mjs --save)

For each model: the package imports and builds (`Net().eval()` loads state_dict.pt strictly); on
every case its outputs equal onnxruntime's within |a - b| <= 1e-4 + 1e-3 * |b| (shapes and
integer outputs exactly); `torch.fx.symbolic_trace` of it prints the graph fxwasm printed; and
`torch.onnx.export` of it runs. Prints one line per model and exits 1 if any check failed.
"""
import importlib
import io
import json
import os
import sys
import traceback
import warnings

import numpy as np
import torch
import torch.fx

warnings.filterwarnings("ignore")
DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32,
          "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}


def load(folder, spec):
    arr = np.fromfile(os.path.join(folder, spec["file"]), dtype=DTYPES[spec["dtype"]])
    return arr.reshape(spec["shape"])


def check_model(root, model):
    problems = []
    folder = os.path.join(root, model)
    sys.path.insert(0, folder)
    try:
        pkg = importlib.import_module("pkg_" + model)
    finally:
        sys.path.pop(0)
    net = pkg.Net().eval()
    # Every weight is a trainable parameter of a real layer, or a buffer of one.
    for name, p in net.named_parameters():
        if not isinstance(p, torch.nn.Parameter):
            problems.append(f"{name} is not an nn.Parameter")
    cases = sorted(c for c in os.listdir(folder) if c.startswith("case"))
    example = None
    for case in cases:
        d = os.path.join(folder, case)
        io_spec = json.load(open(os.path.join(d, "io.json")))
        inputs = [torch.from_numpy(load(d, s).copy()) for s in io_spec["inputs"]]
        expected = [load(d, s) for s in io_spec["outputs"]]
        if example is None:
            example = tuple(inputs)
        with torch.no_grad():
            got = net(*inputs)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        if len(got) != len(expected):
            problems.append(f"{case}: {len(got)} outputs, onnxruntime gives {len(expected)}")
            continue
        for i, (a, b) in enumerate(zip(got, expected)):
            a = a.numpy()
            shape = " x ".join(str(s) for s in io_spec["inputs"][0]["shape"])
            if a.shape != b.shape:
                problems.append(f"{case} ({shape}) output {i}: shape {a.shape}, onnxruntime {b.shape}")
            elif a.dtype.kind == "f":
                err = np.abs(a.astype(np.float64) - b) - (1e-4 + 1e-3 * np.abs(b))
                if err.size and err.max() > 0:
                    problems.append(f"{case} ({shape}) output {i}: max |diff| "
                                    f"{np.abs(a - b).max():.3g} over tolerance")
            elif not np.array_equal(a, b):
                problems.append(f"{case} ({shape}) output {i}: differs")
    # A package with control flow (If/Loop/Scan) has its own tracer, which keeps those leaves.
    traced = getattr(pkg, "symbolic_trace", torch.fx.symbolic_trace)(net)
    want = open(os.path.join(folder, "graph.txt")).read().strip()
    if str(traced.graph).strip() != want:
        problems.append("symbolic_trace gives another graph:\n" + str(traced.graph))
    try:
        torch.onnx.export(net, example, io.BytesIO(), opset_version=14)
    except Exception as e:  # the exporter's own error, reported as a failed check
        problems.append(f"torch.onnx.export failed: {type(e).__name__}: {e}")
    return problems, len(cases)


def main():
    root = sys.argv[1]
    failed = 0
    for model in sorted(os.listdir(root)):
        if not os.path.isdir(os.path.join(root, model)):
            continue
        try:
            problems, cases = check_model(root, model)
        except Exception:
            problems, cases = [traceback.format_exc()], 0
        if problems:
            failed += 1
            print(f"FAIL {model}:\n  " + "\n  ".join(problems))
        else:
            print(f"ok   {model}: {cases} case(s) equal onnxruntime, re-traced, exported")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
