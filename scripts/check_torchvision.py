#!/usr/bin/python3
"""Models fxwasm was not tuned on: torchvision architectures outside models/zoo, at other opsets,
batch sizes and odd input sizes, run by every fxwasm path and compared with onnxruntime-node.

    /usr/bin/python3 scripts/check_torchvision.py [--out DIR] [--only NAME,...] [--reuse]
                                                  [--cli build/native/fxwasm-cli] [--list]

Per case (CASES below): the model is built from torch.manual_seed(SEED) (BatchNorm statistics
and affine terms drawn too, so folded biases are not zero; zero-initialised heads get random
weights) and exported with torch.onnx; scripts/ort_run.mjs runs onnxruntime-node (one thread) on
seeded random inputs and saves them with its outputs; then

- native:  fxwasm-cli --run at 1 and at 2 threads (the two results must be bit-identical: the
           kernels' thread splits keep every element's reduction order),
- wasm:    the npm package's single-thread module and its threaded one at 2 threads
           (scripts/run_cases_wasm.mjs),
- torch:   fxwasm-cli --to-torch, the generated package loaded and run by this PyTorch,

each compared with onnxruntime's outputs: max |ours - ort| / max |ort| must stay below --tol
(1e-4). Exit status 1 if any case fails or differs. Needs build/native (scripts/build.sh native)
and dist/ (scripts/build.sh wasm); takes about 6 minutes on 2 cores, most of it exporting.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper
from torch import nn
from torchvision import models as M

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 7
INPUT_SEED = 3


def small_convnext() -> nn.Module:
    """ConvNeXt blocks (7x7 depthwise, channels-last LayerNorm, GELU, layer scale), 3 stages."""
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    return ConvNeXt([CNBlockConfig(48, 96, 2), CNBlockConfig(96, 192, 2),
                     CNBlockConfig(192, None, 2)], num_classes=17)


def small_vit(image: int) -> nn.Module:
    """A 3-layer ViT, d 128, 4 heads, patches of 16."""
    return M.VisionTransformer(image_size=image, patch_size=16, num_layers=3, num_heads=4,
                               hidden_dim=128, mlp_dim=256, num_classes=11)


@dataclasses.dataclass
class Case:
    name: str
    build: Callable[[], nn.Module]
    shape: Tuple[int, ...]
    opset: int = 14


CASES: List[Case] = [
    Case("googlenet", lambda: M.googlenet(weights=None, aux_logits=False, init_weights=True),
         (1, 3, 224, 224)),
    Case("inception_v3", lambda: M.inception_v3(weights=None, aux_logits=False, init_weights=True),
         (1, 3, 299, 299)),
    Case("densenet121", lambda: M.densenet121(weights=None), (1, 3, 160, 160)),
    Case("resnet34_odd", lambda: M.resnet34(weights=None), (1, 3, 97, 131)),
    Case("resnext50_32x4d", lambda: M.resnext50_32x4d(weights=None), (1, 3, 128, 128)),
    Case("regnet_x_400mf", lambda: M.regnet_x_400mf(weights=None), (1, 3, 200, 200)),
    Case("regnet_y_400mf", lambda: M.regnet_y_400mf(weights=None), (1, 3, 224, 224)),
    Case("squeezenet1_0", lambda: M.squeezenet1_0(weights=None), (1, 3, 227, 227)),
    Case("mnasnet0_5_b2", lambda: M.mnasnet0_5(weights=None), (2, 3, 192, 192)),
    Case("mobilenet_v3_large", lambda: M.mobilenet_v3_large(weights=None), (1, 3, 224, 224)),
    Case("mobilenet_v3_small_b3", lambda: M.mobilenet_v3_small(weights=None), (3, 3, 129, 97)),
    Case("shufflenet_v2_x0_5_b2", lambda: M.shufflenet_v2_x0_5(weights=None), (2, 3, 100, 150)),
    Case("efficientnet_b1", lambda: M.efficientnet_b1(weights=None), (1, 3, 240, 240)),
    Case("convnext_small", small_convnext, (1, 3, 96, 64)),
    Case("vit_small_b2", lambda: small_vit(64), (2, 3, 64, 64)),
    # Other opsets: LayerNormalization as one op (17), Resize and Pad as opset 11 has them, and
    # opset 9's Flatten/Gemm head.
    Case("convnext_small_op17", small_convnext, (1, 3, 64, 96), opset=17),
    Case("vit_small_op17", lambda: small_vit(48), (1, 3, 48, 48), opset=17),
    Case("swin_t_op17", lambda: M.swin_t(weights=None), (1, 3, 96, 96), opset=17),
    Case("efficientnet_b0_op17_b2", lambda: M.efficientnet_b0(weights=None), (2, 3, 96, 96),
         opset=17),
    Case("lraspp_mobilenet_v3_op17", lambda: M.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None), (1, 3, 96, 96), opset=17),
    Case("fcn_resnet50_op11", lambda: M.segmentation.fcn_resnet50(
        weights=None, weights_backbone=None, aux_loss=False), (1, 3, 64, 64), opset=11),
    Case("mobilenet_v3_small_op11", lambda: M.mobilenet_v3_small(weights=None), (1, 3, 96, 96),
         opset=11),
    Case("squeezenet1_1_op11", lambda: M.squeezenet1_1(weights=None), (1, 3, 99, 99), opset=11),
    Case("resnet18_op9", lambda: M.resnet18(weights=None), (1, 3, 64, 64), opset=9),
]


def export(case: Case, path: str) -> int:
    """Exports `case` to `path`; returns its node count."""
    torch.manual_seed(SEED)
    model = case.build().eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
            if isinstance(m, nn.Linear) and not m.weight.any():  # torchvision's zero heads
                m.weight.normal_(0, 0.02)
    x = torch.randn(*case.shape)
    buf = io.BytesIO()
    with warnings.catch_warnings():  # the tracer's notes on torchvision's shape asserts
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buf, opset_version=case.opset, input_names=["input"],
                          output_names=["output"])
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto)
    onnx.save(proto, path)
    return len(proto.graph.node)


def read_raw(folder: str, t: dict) -> np.ndarray:
    dtype = np.bool_ if t["dtype"] == "bool" else np.dtype(t["dtype"])
    return np.fromfile(os.path.join(folder, t["file"]), dtype=dtype).reshape(t["shape"])


def difference(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| / max |ref| (0 when equal; inf on a shape mismatch or a NaN)."""
    if got.shape != ref.shape:
        return float("inf")
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    if np.isnan(diff).any():
        return float("inf")
    worst = float(diff.max()) if diff.size else 0.0
    return 0.0 if worst == 0 else worst / max(float(np.abs(ref).max()), 1e-30)


def run(cmd: List[str], log: str) -> bool:
    with open(log, "w") as f:
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT).returncode == 0


def last_line(log: str) -> str:
    with open(log) as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    return lines[-1][:160] if lines else "(no output)"


def check_native(cli: str, folder: str, io_spec: dict, threads: int) -> Tuple[str, Optional[bytes]]:
    out = os.path.join(folder, f"native_{threads}")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    inputs = [os.path.join(folder, f"input_{i}.pb") for i in range(len(io_spec["inputs"]))]
    log = os.path.join(folder, f"native_{threads}.log")
    if not run([cli, os.path.join(folder, "model.onnx"), "--print", "none", "--run", "--inputs",
                *inputs, "--save-outputs", out, "--threads", str(threads)], log):
        return "FAILED: " + last_line(log), None
    worst, raw = 0.0, b""
    for i, t in enumerate(io_spec["outputs"]):
        with open(os.path.join(out, f"output_{i}.pb"), "rb") as f:
            data = f.read()
        raw += data
        proto = onnx.TensorProto()
        proto.ParseFromString(data)
        worst = max(worst, difference(numpy_helper.to_array(proto), read_raw(folder, t)))
    return f"{worst:.1e}", raw


def check_torch(cli: str, folder: str, io_spec: dict) -> str:
    pkg = os.path.join(folder, "torch")
    shutil.rmtree(pkg, ignore_errors=True)
    log = os.path.join(folder, "torch.log")
    if not run([cli, os.path.join(folder, "model.onnx"), "--print", "none", "--to-torch", pkg],
               log):
        return "FAILED: " + last_line(log)
    import importlib.util
    name = "fxwasm_check_" + os.path.basename(folder)
    spec = importlib.util.spec_from_file_location(name, os.path.join(pkg, "__init__.py"),
                                                  submodule_search_locations=[pkg])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        net = module.FxModule()
        net.load_state_dict(torch.load(os.path.join(pkg, "state_dict.pt")))
        net.eval()
        xs = [torch.from_numpy(read_raw(folder, t)) for t in io_spec["inputs"]]
        with torch.no_grad():
            out = net(*xs)
    except Exception as e:  # the generated code must run: report what it raised
        return f"FAILED: {type(e).__name__}: {str(e)[:120]}"
    outs = out if isinstance(out, (tuple, list)) else [out]
    worst = max(difference(o.numpy(), read_raw(folder, t))
                for t, o in zip(io_spec["outputs"], outs))
    return f"{worst:.1e}"


def passed(cell: str, tol: float) -> bool:
    try:
        return float(cell) < tol
    except ValueError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "build/torchvision-check"))
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--reuse", action="store_true",
                    help="keep models and references already in --out")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build/native/fxwasm-cli"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    args = ap.parse_args()
    cases = CASES
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0
    if args.only:
        names = args.only.split(",")
        unknown = sorted(set(names) - {c.name for c in CASES})
        if unknown:
            ap.error("unknown case(s) " + ", ".join(unknown))
        cases = [c for c in CASES if c.name in names]
    for need in (args.cli, os.path.join(ROOT, "dist/fx.wasm"),
                 os.path.join(ROOT, "dist/fx-threads.wasm")):
        if not os.path.exists(need):
            print(f"missing {need}: run scripts/build.sh native and scripts/build.sh wasm")
            return 1
    os.makedirs(args.out, exist_ok=True)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, onnx "
          f"{onnx.__version__}; {len(cases)} cases in {args.out}", flush=True)

    rows: Dict[str, dict] = {}
    for case in cases:
        folder = os.path.join(args.out, case.name)
        model = os.path.join(folder, "model.onnx")
        row = rows.setdefault(case.name, {"opset": case.opset,
                                          "input": "x".join(map(str, case.shape))})
        t0 = time.perf_counter()
        if not (args.reuse and os.path.exists(os.path.join(folder, "io.json"))):
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(folder)
            try:
                export(case, model)
            except Exception as e:
                row["error"] = f"export: {type(e).__name__}: {str(e)[:120]}"
                continue
            log = os.path.join(folder, "ort.log")
            if not run(["node", "scripts/ort_run.mjs", model, "--save", folder, "--seed",
                        str(INPUT_SEED)], log):
                row["error"] = "onnxruntime: " + last_line(log)
                continue
        row["nodes"] = len(onnx.load(model, load_external_data=False).graph.node)
        with open(os.path.join(folder, "io.json")) as f:
            io_spec = json.load(f)
        for i, t in enumerate(io_spec["inputs"]):
            with open(os.path.join(folder, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(read_raw(folder, t), t["name"]).SerializeToString())
        row["native 1"], one = check_native(args.cli, folder, io_spec, 1)
        row["native 2"], two = check_native(args.cli, folder, io_spec, 2)
        row["1 = 2"] = "yes" if one is not None and one == two else "NO"
        row["torch"] = check_torch(args.cli, folder, io_spec)
        print(f"  {case.name}: {time.perf_counter() - t0:.0f} s", flush=True)

    runnable = [os.path.join(args.out, n) for n, r in rows.items() if "error" not in r]
    for threads in (1, 2):
        proc = subprocess.run(["node", "scripts/run_cases_wasm.mjs", "--threads", str(threads),
                               *runnable], cwd=ROOT, capture_output=True, text=True)
        got = {}
        for ln in proc.stdout.splitlines():
            if ln.startswith("{"):
                r = json.loads(ln)
                got[r["case"]] = f"{r['diff']:.1e}" if "diff" in r else "FAILED: " + r["error"]
        for n in rows:
            if "error" not in rows[n]:
                rows[n][f"wasm {threads}"] = got.get(
                    n, "FAILED: " + (proc.stderr.strip().splitlines() or ["no result"])[-1][:120])

    cols = ["native 1", "native 2", "1 = 2", "wasm 1", "wasm 2", "torch"]
    print(f"\n| case | opset | input | nodes | {' | '.join(cols)} |")
    print("|---|---|---|---|" + "---|" * len(cols))
    failures = []
    for n, r in rows.items():
        if "error" in r:
            failures.append(f"{n}: {r['error']}")
            print(f"| {n} | {r['opset']} | {r['input']} | | {r['error']} |")
            continue
        print(f"| {n} | {r['opset']} | {r['input']} | {r['nodes']} | "
              + " | ".join(r[c] if not r[c].startswith("FAILED") else "FAILED" for c in cols)
              + " |")
        for c in cols:
            ok = r[c] == "yes" if c == "1 = 2" else passed(r[c], args.tol)
            if not ok:
                failures.append(f"{n} {c}: {r[c]}")
    print()
    for f in failures:
        print("FAIL", f)
    print(f"{len(rows) - len({f.split()[0].rstrip(':') for f in failures})} of {len(rows)} cases "
          f"pass every path (max |ours - onnxruntime| / max |onnxruntime| < {args.tol:g})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
