#!/usr/bin/python3
"""Writes a chain of N ONNX nodes (Add of a constant, then Relu, alternating) on a [1, 16]
float32 tensor: the big-graph model of bench/run_big_graph.sh.

    /usr/bin/python3 bench/big_graph.py N OUT.onnx
"""
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


def chain(n):
    nodes = []
    one = numpy_helper.from_array(np.ones((1, 16), dtype=np.float32), "one")
    prev = "x"
    for i in range(n):
        out = f"v{i}"
        if i % 2 == 0:
            nodes.append(helper.make_node("Add", [prev, "one"], [out], name=f"add_{i}"))
        else:
            nodes.append(helper.make_node("Relu", [prev], [out], name=f"relu_{i}"))
        prev = out
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], [one])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


if __name__ == "__main__":
    save(chain(int(sys.argv[1])), sys.argv[2])
