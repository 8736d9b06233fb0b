"""Chains of 1x1 convolutions, for timing the pointwise products alone against onnxruntime.

    /usr/bin/python3 bench/make_pointwise_chains.py OUT_DIR
    node bench/native_ab.mjs OUT_DIR/pw14.onnx --threads 1,2

Writes OUT_DIR/NAME.onnx and NAME.json (the shapes bench/native_ab.mjs reads) for each chain:
16 convolutions alternating between two channel counts at one spatial size, each with its own
seeded weights (so the weights stream from the caches as a model's do), opset 13. In a chain
onnxruntime keeps its NCHWc layout from the first convolution to the last, as in the
MobileNetV2-like models, so the ratio is that of the products, not of layout conversions.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CHAINS = {
    # name: (channels a, channels b, height = width, pairs a -> b -> a)
    "pw14": (96, 576, 14, 8),  # MobileNetV2's 14x14 expansion and projection
    "pw7": (320, 1280, 7, 4),  # its last 1x1 layer, and back
    "pw28": (32, 192, 28, 8),
}


def chain(name, a, b, hw, pairs, out_dir):
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "input"
    for i in range(2 * pairs):
        c, m = (a, b) if i % 2 == 0 else (b, a)
        w = (rng.standard_normal((m, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
        bias = (rng.standard_normal(m) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(bias, f"b{i}")]
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"y{i}"], kernel_shape=[1, 1]))
        x = f"y{i}"
    shape = [1, a, hw, hw]
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out_dir, name + ".onnx"))
    spec = {"name": name,
            "inputs": [{"name": "input", "shape": shape, "dtype": "float32"}],
            "outputs": [{"name": x, "shape": shape, "dtype": "float32"}]}
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(spec, f, indent=2)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name, (a, b, hw, pairs) in CHAINS.items():
        chain(name, a, b, hw, pairs, out_dir)
        print(os.path.join(out_dir, name + ".onnx"))


if __name__ == "__main__":
    main()
