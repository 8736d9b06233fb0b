#!/usr/bin/python3
"""The Python side of bench/run_onnx_import.sh: onnx.load (Debian python3-onnx 1.12).

    /usr/bin/python3 bench/onnx_import_py.py MODEL.onnx [...] [--runs 5] [--min-ms 20]

Two figures per model, one JSON line: `onnx.load(path)` (file read from the page cache + parse)
and `onnx.load_from_string(bytes)` (parse only, like the fxwasm and onnxruntime figures, which
get the bytes in memory). first_ms is the first parse in the process; median/min are over --runs
repetitions of >= --min-ms each.
"""
import argparse
import json
import os
import sys
import time

import onnx


def time_it(fn, runs, min_s):
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    inner = max(1, int(min_s / max(first, 1e-7) + 0.999))
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        ts.append((time.perf_counter() - t) / inner)
    ts.sort()
    return first, ts[len(ts) // 2], ts[0], inner


def main():
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--min-ms", type=float, default=20)
    a = p.parse_args()
    for path in a.models:
        name = os.path.basename(path)[: -len(".onnx")]
        with open(path, "rb") as f:
            data = f.read()
        for what, fn in (("onnx.load_from_string", lambda: onnx.load_from_string(data)),
                         ("onnx.load", lambda: onnx.load(path))):
            first, med, mn, inner = time_it(fn, a.runs, a.min_ms / 1e3)
            print(json.dumps({"impl": what, "model": name, "file_bytes": len(data),
                              "first_ms": first * 1e3, "median_ms": med * 1e3, "min_ms": mn * 1e3,
                              "runs": a.runs, "inner": inner, "onnx": onnx.__version__}),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
