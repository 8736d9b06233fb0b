#!/usr/bin/python3
"""The eager-PyTorch side of bench/run_onnx_exec.sh: 'torch 1.13 eager (LibTorch via Python)'.

LibTorch cannot load ONNX, so this builds the same architecture with the same seed as
models/generate.py (its ZOO specs: torch.manual_seed(0) right before the model is built), in eval
mode, and times model(*inputs) under torch.no_grad() with torch.set_num_threads(1). The operators
run in LibTorch's C++ kernels; the Python interpreter adds a per-module dispatch cost. The ONNX
files fold BatchNorm into Conv, eager runs BatchNorm: the function is the same (outputs agree to
float rounding), the work differs slightly.

    /usr/bin/python3 bench/onnx_exec_torch.py resnet18 [mobilenet_v2 ...] [--runs 10] [--min-ms 20]

Inputs: the mulberry32 stream of scripts/ort_run.mjs (seed 0, floats uniform in [-1, 1)) over
the shapes of the spec, so the output checksums match the other sides'. One JSON line per model
(median and min in ms per run over --runs repetitions of >= --min-ms, after >= 0.5 s warm-up).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_generate():
    spec = importlib.util.spec_from_file_location(
        "zoo_generate", os.path.join(HERE, "..", "models", "generate.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up while generate.py loads
    spec.loader.exec_module(mod)
    return mod


def mulberry32(seed: int):
    a = seed & 0xFFFFFFFF

    def imul(x: int, y: int) -> int:
        return (x * y) & 0xFFFFFFFF

    def nxt() -> float:
        nonlocal a
        a = (a + 0x6D2B79F5) & 0xFFFFFFFF
        t = a
        t = imul(t ^ (t >> 15), t | 1)
        t ^= (t + imul(t ^ (t >> 7), t | 61)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296.0

    return nxt


def random_inputs(shapes):
    rand = mulberry32(0)
    out = []
    for shape in shapes:
        n = int(np.prod(shape))
        data = np.fromiter((2.0 * rand() - 1.0 for _ in range(n)), dtype=np.float64, count=n)
        out.append(torch.from_numpy(data.astype(np.float32).reshape(shape)))
    return out


def time_it(fn, runs: int, min_s: float):
    w0 = time.perf_counter()
    w = 0
    while w < 2 or time.perf_counter() - w0 < 0.5:
        fn()
        w += 1
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(min_s / once + 0.999))
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        ts.append((time.perf_counter() - t) / inner)
    ts.sort()
    return ts[len(ts) // 2], ts[0], inner


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="+")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--min-ms", type=float, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = load_generate()
    for name in args.models:
        spec = next(s for s in gen.ZOO if s.name == name)
        torch.manual_seed(gen.SEED)
        model = spec.build()
        model.eval()
        inputs = random_inputs(list(spec.inputs.values()))
        with torch.no_grad():
            out = model(*inputs)
            first = out[0] if isinstance(out, (tuple, list)) else out
            med, mn, inner = time_it(lambda: model(*inputs), args.runs, args.min_ms / 1e3)
        print(json.dumps({
            "impl": "torch-eager", "model": name, "median_ms": med * 1e3, "min_ms": mn * 1e3,
            "runs": args.runs, "inner": inner, "out_sum": float(first.double().sum()),
            "out_abs_sum": float(first.double().abs().sum()), "torch": torch.__version__,
            "threads": torch.get_num_threads()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
