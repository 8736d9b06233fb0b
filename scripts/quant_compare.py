#!/usr/bin/python3
"""fxwasm against onnxruntime-node on quantized models, in quantization steps.

    /usr/bin/python3 scripts/quant_compare.py [MODEL.onnx ...] [--cli build/native/fxwasm-cli]
                                              [--seeds 0,1,2] [--steps 1]

Default models: models/zoo/quantized/{resnet18,transformer_encoder}_{qdq,qop}.onnx
(models/quantize.py).
Per model and seed, scripts/ort_run.mjs runs onnxruntime-node on its seeded random inputs and
saves them with its outputs; fxwasm-cli --run takes the same inputs. Each output is compared
elementwise; the difference is printed in units of the output's quantization step (the scale of
the QuantizeLinear that reads the output, or of the QuantizeLinear / QLinear op that makes it)
and must stay within --steps, else the exit status is 1. An output that is not quantized (a
float op after the last QuantizeLinear, such as the transformer's LayerNorm) is reported, for
information, in steps of a uint8 code of its range as onnxruntime computed it.
--intermediate reports the largest difference over every 8-bit tensor and the first tensor
beyond --steps (a float op upstream rounding one element the other way propagates).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {"float32": np.float32, "uint8": np.uint8, "int8": np.int8, "int64": np.int64,
          "int32": np.int32, "float64": np.float64, "bool": np.bool_}


def output_step(model, name):
    """The quantization step of graph output `name`, or None."""
    inits = {i.name: i for i in model.graph.initializer}
    for n in model.graph.node:
        scale = None
        if n.op_type == "QuantizeLinear" and n.input[0] == name:
            scale = n.input[1]
        elif n.op_type == "DequantizeLinear" and n.output[0] == name:
            scale = n.input[1]
        elif n.op_type in ("QLinearConv", "QLinearMatMul") and n.output[0] == name:
            scale = n.input[6]
        if scale and scale in inits:
            return float(numpy_helper.to_array(inits[scale]).max())
    return None


def with_quantized_outputs(model):
    """A copy of `model` whose 8-bit tensors are graph outputs too."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {i.name: i for i in m.graph.initializer}
    names = {o.name for o in m.graph.output}
    for n in m.graph.node:
        zp = {"QuantizeLinear": 2, "QLinearConv": 7, "QLinearMatMul": 7}.get(n.op_type)
        if zp is None or len(n.input) <= zp or n.input[zp] not in inits or n.output[0] in names:
            continue
        elem = inits[n.input[zp]].data_type
        m.graph.output.append(onnx.helper.make_tensor_value_info(n.output[0], elem, None))
        names.add(n.output[0])
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build/native/fxwasm-cli"))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=float, default=1.0)
    ap.add_argument("--intermediate", action="store_true",
                    help="also compare every 8-bit tensor (QuantizeLinear / QLinear outputs, made "
                         "graph outputs of a copy of the model): the differences there are integer "
                         "steps")
    args = ap.parse_args()
    models = args.models or [os.path.join(ROOT, "models/zoo/quantized", f"{m}_{f}.onnx")
                             for m in ("resnet18", "transformer_encoder") for f in ("qdq", "qop")]
    ok = True
    for path in models:
        model = onnx.load(path)
        if args.intermediate:
            model = with_quantized_outputs(model)
        for seed in args.seeds.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                ort_dir = os.path.join(tmp, "ort")
                run_path = path
                if args.intermediate:
                    run_path = os.path.join(tmp, "model.onnx")
                    onnx.save(model, run_path)
                spec = os.path.splitext(path)[0] + ".json"
                subprocess.run(["node", os.path.join(ROOT, "scripts/ort_run.mjs"), run_path, "--seed",
                                seed, "--save", ort_dir] +
                               (["--spec", spec] if os.path.exists(spec) else []),
                               check=True, stdout=subprocess.DEVNULL)
                with open(os.path.join(ort_dir, "io.json")) as f:
                    io = json.load(f)
                pbs = []
                for k, t in enumerate(io["inputs"]):
                    a = np.fromfile(os.path.join(ort_dir, t["file"]),
                                    DTYPES[t["dtype"]]).reshape(t["shape"])
                    pb = os.path.join(tmp, f"input_{k}.pb")
                    with open(pb, "wb") as f:
                        f.write(numpy_helper.from_array(a, t["name"]).SerializeToString())
                    pbs.append(pb)
                fx_dir = os.path.join(tmp, "fx")
                os.makedirs(fx_dir)
                subprocess.run([args.cli, run_path, "--print", "none", "--run", "--inputs", *pbs,
                                "--save-outputs", fx_dir], check=True, stdout=subprocess.DEVNULL)
                worst, first_bad = 0, ""
                for k, t in enumerate(io["outputs"]):
                    want = np.fromfile(os.path.join(ort_dir, t["file"]),
                                       DTYPES[t["dtype"]]).reshape(t["shape"])
                    pb = onnx.TensorProto()
                    with open(os.path.join(fx_dir, f"output_{k}.pb"), "rb") as f:
                        pb.ParseFromString(f.read())
                    got = numpy_helper.to_array(pb)
                    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
                    step = output_step(model, t["name"])
                    if t["dtype"] in ("uint8", "int8"):
                        step = 1.0
                    quantized = step is not None
                    if not quantized:  # for information: the step of a uint8 code of its range
                        step = (max(0.0, float(want.max())) - min(0.0, float(want.min()))) / 255
                    steps = diff.max() / step if step else float("nan")
                    within = steps <= args.steps
                    # Intermediate 8-bit tensors inherit differences from float ops upstream:
                    # reported (--intermediate), not checked.
                    if quantized and not args.intermediate:
                        ok = ok and within
                    if args.intermediate and t["dtype"] in ("uint8", "int8"):
                        worst = max(worst, diff.max())
                        if diff.max() > args.steps and not first_bad:
                            first_bad = f"{t['name']} ({diff.max():.0f} steps, " \
                                        f"{(diff > args.steps).sum()} of {diff.size} elements)"
                        continue
                    print(f"{os.path.basename(path):28s} seed {seed} {t['name']:12s} "
                          f"max |fx - ort| {diff.max():.6f} = {steps:.2f} steps "
                          f"(step {step}); {(diff > 0).mean() * 100:.1f} % differ "
                          f"{('ok' if within else 'FAIL') if quantized else '(not quantized)'}")
                if args.intermediate:
                    print(f"{os.path.basename(path):28s} seed {seed} every 8-bit tensor: max "
                          f"|fx - ort| {worst:.0f} steps" +
                          (f"; first beyond {args.steps:g}: {first_bad}" if first_bad else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
