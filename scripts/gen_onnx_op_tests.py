#!/usr/bin/python3
"""Single-op ONNX test models with onnxruntime goldens, in ONNX's standard test-data layout.

Driven by `bash scripts/gen_onnx_op_tests.sh`, which runs the two halves around onnxruntime-node:

  /usr/bin/python3 scripts/gen_onnx_op_tests.py models    # 1. models + seeded inputs
  node scripts/gen_onnx_op_outputs.mjs tests/onnx_ops      # 2. onnxruntime runs every case
  /usr/bin/python3 scripts/gen_onnx_op_tests.py outputs   # 3. outputs -> TensorProto, manifest

Layout under tests/onnx_ops/ (everything there is generated; step 1 wipes it first):

  CASE.onnx                               the model, output shapes inferred, checked by
                                          onnx.checker (except opsets > 17, which onnx 1.12
                                          predates: Gelu-20, GroupNormalization-18/21)
  CASE/test_data_set_0/input_N.pb         TensorProto of graph input N (onnx.numpy_helper)
  CASE/test_data_set_0/input_N.bin        the same elements raw: little-endian, row-major, no header
  CASE/test_data_set_0/output_N.pb/.bin   onnxruntime's output N (written by steps 2 and 3)
  CASE/test_data_set_0/io.json            {"inputs": [T], "outputs": [T]}, T = {name, dtype, shape,
                                          file}: what node needs to read the .bin files
  manifest.json                           every case: op, opset, attributes, inputs, outputs, files;
                                          plus the cases onnxruntime refused (none are kept)

Inputs are random from numpy's PCG64 seeded with the CRC-32 of the case name, so adding a case does
not change the others, and rerunning gives identical files.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import zlib
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import onnx
import onnx.checker
import onnx.defs
import onnx.shape_inference
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "onnx_ops")
DATA_SET = "test_data_set_0"
INT64_MIN = np.iinfo(np.int64).min
INT64_MAX = np.iinfo(np.int64).max

DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
               np.dtype(np.int64): "int64", np.dtype(np.int32): "int32",
               np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8", np.dtype(np.bool_): "bool"}
NP_DTYPES = {name: dtype for dtype, name in DTYPE_NAMES.items()}
NP_TO_ONNX = {dtype: onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[dtype] for dtype in DTYPE_NAMES}
# The newest opset this onnx (Debian's 1.12) has schemas for; newer cases skip its checker.
MAX_CHECKED_OPSET = onnx.defs.onnx_opset_version()


# --- input specifications -------------------------------------------------------------------------


@dataclasses.dataclass
class In:
    """How to make one node input: random of a kind, or a literal; a graph input or an initializer."""

    kind: str  # normal | positive | int | bool | literal
    shape: Tuple[int, ...] = ()
    lo: int = 0
    hi: int = 10
    value: Optional[np.ndarray] = None
    const: bool = False  # an initializer inside the model instead of a graph input

    def make(self, rng: np.random.Generator) -> np.ndarray:
        """The tensor's value, drawn from `rng` for the random kinds."""
        if self.kind == "normal":
            return rng.standard_normal(self.shape).astype(np.float32)
        if self.kind == "positive":
            return rng.uniform(0.5, 2.0, self.shape).astype(np.float32)
        if self.kind == "int":
            return rng.integers(self.lo, self.hi, self.shape, dtype=np.int64)
        if self.kind == "bool":
            return rng.random(self.shape) < 0.5
        assert self.value is not None
        return self.value

    def init(self) -> "In":
        """This input as an initializer."""
        return dataclasses.replace(self, const=True)


def F(*shape: int) -> In:
    """float32, standard normal."""
    return In("normal", shape)


def P(*shape: int) -> In:
    """float32, uniform in [0.5, 2): for Log, Sqrt, divisors."""
    return In("positive", shape)


def I(*shape: int, lo: int = 0, hi: int = 10) -> In:
    """int64, uniform in [lo, hi)."""
    return In("int", shape, lo=lo, hi=hi)


def B(*shape: int) -> In:
    """bool, p = 0.5."""
    return In("bool", shape)


def V(value, dtype=None) -> In:
    """A literal graph input."""
    return In("literal", value=np.asarray(value, dtype=dtype))


def C(value, dtype=np.int64) -> In:
    """A literal initializer (int64 unless told): shapes, axes, pads, scales, ..."""
    return In("literal", value=np.asarray(value, dtype=dtype), const=True)


# A node's inputs: (name, In) pairs in order; "" for an omitted optional input.
Inputs = Sequence[Union[Tuple[str, In], str]]


@dataclasses.dataclass
class Case:
    """One test model: a graph of `nodes` over `inputs` producing `outputs`."""

    name: str
    op: str
    opset: int
    nodes: List[onnx.NodeProto]
    inputs: List[Tuple[str, In]]
    outputs: List[str]
    description: str
    output_shapes: Optional[List[list]]  # for outputs whose rank shape inference cannot tell


CASES: List[Case] = []


def graph_case(name: str, op: str, nodes: List[onnx.NodeProto], inputs: Inputs,
               outputs: Sequence[str], opset: int = 13, description: str = "",
               output_shapes: Optional[List[list]] = None) -> None:
    """Register a case built from explicit nodes; `output_shapes` (ints or dim names) declares the
    outputs whose shape onnx's shape inference leaves unknown."""
    assert not any(c.name == name for c in CASES), name
    pairs = [i for i in inputs if i != ""]
    assert not {n for n, _ in pairs} & set(outputs), f"{name}: an output is named like an input"
    CASES.append(Case(name, op, opset, nodes, list(pairs), list(outputs), description,
                      output_shapes))


def op_case(name: str, op: str, inputs: Inputs, outputs: Union[int, Sequence[str]] = 1,
            opset: int = 13, description: str = "", output_shapes: Optional[List[list]] = None,
            **attrs) -> None:
    """Register a case of one `op` node with attributes `attrs`."""
    out_names = [f"y{i}" if outputs > 1 else "y" for i in range(outputs)] \
        if isinstance(outputs, int) else list(outputs)
    in_names = [i if i == "" else i[0] for i in inputs]
    node = helper.make_node(op, in_names, out_names, name=f"{op.lower()}_0", **attrs)
    graph_case(name, op, [node], inputs, out_names, opset, description, output_shapes)


# --- the cases ------------------------------------------------------------------------------------

# Elementwise binary ops with numpy broadcasting.
op_case("add_bcast_trailing", "Add", [("a", F(2, 3, 4)), ("b", F(4))])
op_case("add_bcast_both", "Add", [("a", F(2, 1, 4)), ("b", F(3, 1))])
op_case("add_int64", "Add", [("a", I(2, 3, lo=-50, hi=50)), ("b", I(3, lo=-50, hi=50))])
op_case("sub_scalar", "Sub", [("a", F(2, 3)), ("b", F())])
op_case("sub_bcast_lhs", "Sub", [("a", F(3, 1)), ("b", F(2, 3, 4))])
op_case("mul_bcast_channel", "Mul", [("a", F(2, 3, 4, 5)), ("b", F(3, 1, 1))])
op_case("mul_const", "Mul", [("a", F(2, 5)), ("b", C(0.5, np.float32))])
op_case("div_bcast", "Div", [("a", F(2, 3)), ("b", P(2, 1))])
op_case("div_int64", "Div", [("a", V([7, -7, 9, -9, 1])), ("b", V([2, 2, -4, -4, 3]))],
        description="integer division truncates toward zero")
op_case("pow_bcast", "Pow", [("x", P(2, 3)), ("e", F(3))])
op_case("pow_square", "Pow", [("x", F(2, 3)), ("e", C(2.0, np.float32))])
op_case("mod_fmod", "Mod", [("a", F(2, 3)), ("b", P(3))], fmod=1)
op_case("mod_int64", "Mod", [("a", V([-7, -3, 4, 9, 8])), ("b", V([3, -2, 5, -4, 3]))],
        description="integer Mod (fmod=0): the result takes the divisor's sign")
op_case("min_variadic", "Min", [("a", F(2, 3)), ("b", F(3)), ("c", F(2, 1))])
op_case("max_bcast", "Max", [("a", F(2, 3, 4)), ("b", F(1, 4))])
op_case("sum_variadic", "Sum", [("a", F(2, 3)), ("b", F(3)), ("c", F(2, 3))])

# Unary elementwise ops.
for op, inp in [("Relu", F(3, 4)), ("Sigmoid", F(3, 4)), ("Tanh", F(3, 4)), ("Exp", F(3, 4)),
                ("Log", P(3, 4)), ("Sqrt", P(3, 4)), ("Erf", F(3, 4)), ("Neg", F(3, 4)),
                ("Abs", F(3, 4)), ("Reciprocal", P(3, 4)), ("Sin", F(3, 4)), ("Cos", F(3, 4)),
                ("Floor", F(3, 4)), ("Ceil", F(3, 4)), ("Sign", F(3, 4)), ("Softplus", F(3, 4)),
                ("Identity", F(3, 4))]:
    op_case(op.lower(), op, [("x", inp)])
op_case("not", "Not", [("x", B(3, 4))])
op_case("identity_int64", "Identity", [("x", I(5))])

# Activations with attributes.
op_case("leaky_relu", "LeakyRelu", [("x", F(3, 4))], alpha=0.2)
op_case("elu", "Elu", [("x", F(3, 4))], alpha=0.7)
op_case("selu", "Selu", [("x", F(3, 4))])
op_case("prelu_channel", "PRelu", [("x", F(2, 3, 2, 2)), ("slope", F(3, 1, 1).init())])
op_case("hard_sigmoid", "HardSigmoid", [("x", F(3, 4))], alpha=0.25, beta=0.4)
op_case("hard_swish", "HardSwish", [("x", F(3, 4))], opset=14)
op_case("clip_min_max", "Clip", [("x", F(3, 4)), ("min", C(-0.5, np.float32)),
                                 ("max", C(0.5, np.float32))])
op_case("clip_max_only", "Clip", [("x", F(3, 4)), "", ("max", C(0.25, np.float32))],
        description="min omitted (empty input name)")
op_case("clip_min_runtime", "Clip", [("x", F(3, 4)), ("min", V(0.0, np.float32))],
        description="min as a graph input, max omitted")
op_case("softmax_last", "Softmax", [("x", F(2, 3, 5))], axis=-1)
op_case("softmax_axis1", "Softmax", [("x", F(2, 3, 5))], axis=1)
op_case("softmax_axis0", "Softmax", [("x", F(2, 3, 5))], axis=0)
op_case("softmax_opset11_axis1", "Softmax", [("x", F(2, 3, 5))], opset=11, axis=1,
        description="opset < 13: the input is coerced to 2-D [2, 15] at axis 1")
op_case("log_softmax", "LogSoftmax", [("x", F(2, 3, 5))], axis=-1)

op_case("gelu", "Gelu", [("x", F(3, 8))], opset=20, output_shapes=[[3, 8]],
        description="opset 20, exact (erf) form (not checked by onnx 1.12)")
op_case("gelu_tanh", "Gelu", [("x", F(3, 8))], opset=20, approximate="tanh",
        output_shapes=[[3, 8]], description="opset 20, tanh approximation (not checked by onnx 1.12)")
graph_case("gelu_decomposed", "Erf", [
    helper.make_node("Div", ["x", "sqrt2"], ["t0"]),
    helper.make_node("Erf", ["t0"], ["t1"]),
    helper.make_node("Add", ["t1", "one"], ["t2"]),
    helper.make_node("Mul", ["x", "t2"], ["t3"]),
    helper.make_node("Mul", ["t3", "half"], ["y"]),
], [("x", F(3, 8)), ("sqrt2", C(np.sqrt(2.0), np.float32)), ("one", C(1.0, np.float32)),
    ("half", C(0.5, np.float32))], ["y"],
    description="GELU as torch.onnx exports it at opset 13: x * (1 + erf(x / sqrt(2))) * 0.5")

# Comparison and logic.
op_case("equal_int64", "Equal", [("a", I(3, 4, hi=3)), ("b", I(4, hi=3))])
op_case("equal_float", "Equal", [("a", V([1.0, 2.0, 3.0], np.float32)),
                                 ("b", V([1.0, 2.5, 3.0], np.float32))])
op_case("less_bcast", "Less", [("a", F(2, 3)), ("b", F(3))])
op_case("greater_bcast", "Greater", [("a", F(2, 3)), ("b", F(2, 1))])
op_case("less_or_equal", "LessOrEqual", [("a", I(6, hi=4)), ("b", I(6, hi=4))])
op_case("greater_or_equal", "GreaterOrEqual", [("a", I(6, hi=4)), ("b", I(6, hi=4))])
op_case("and_bcast", "And", [("a", B(2, 3)), ("b", B(3))])
op_case("or_bcast", "Or", [("a", B(2, 3)), ("b", B(2, 1))])
op_case("where_bcast", "Where", [("cond", B(2, 1, 4)), ("a", F(3, 4)), ("b", F())])
op_case("where_int64", "Where", [("cond", B(5)), ("a", I(5)), ("b", C([-1]))])

# Shape and data movement.
op_case("reshape_zero_minus1", "Reshape", [("x", F(2, 3, 4)), ("shape", C([0, -1]))],
        description="0 copies the input dim, -1 is inferred")
op_case("reshape_4d", "Reshape", [("x", F(2, 12)), ("shape", C([2, 3, 2, 2]))])
op_case("reshape_runtime_shape", "Reshape", [("x", F(2, 3, 4)), ("shape", V([4, -1, 2]))],
        output_shapes=[["d0", "d1", "d2"]])
op_case("transpose_perm", "Transpose", [("x", F(2, 3, 4))], perm=[1, 2, 0])
op_case("transpose_default", "Transpose", [("x", F(2, 3, 4))],
        description="no perm: reverse the axes")
op_case("concat_axis1", "Concat", [("a", F(2, 1, 3)), ("b", F(2, 4, 3)), ("c", F(2, 2, 3))], axis=1)
op_case("concat_neg_axis_int64", "Concat", [("a", I(2, 2)), ("b", I(2, 3))], axis=-1)
op_case("split_input", "Split", [("x", F(6, 4)), ("split", C([2, 4]))], outputs=2, axis=0,
        description="opset 13: sizes from the second input")
op_case("split_equal", "Split", [("x", F(2, 9))], outputs=3, axis=1)
op_case("slice_neg_step", "Slice", [("x", F(5, 6)), ("starts", C([-1])), ("ends", C([INT64_MIN])),
                                    ("axes", C([1])), ("steps", C([-2]))],
        description="x[:, ::-2] with ends = INT64_MIN")
op_case("slice_axes_steps", "Slice", [("x", F(4, 6, 5)), ("starts", C([1, 0])),
                                      ("ends", C([INT64_MAX, -1])), ("axes", C([0, -1])),
                                      ("steps", C([2, 1]))])
op_case("slice_defaults", "Slice", [("x", F(4, 5)), ("starts", C([1, 1])), ("ends", C([3, 100]))],
        description="axes and steps omitted; ends clamped")
op_case("gather_axis0", "Gather", [("x", F(5, 3)), ("idx", V([[0, -1], [2, 1]]))], axis=0,
        description="negative index counts from the end")
op_case("gather_axis1_scalar", "Gather", [("x", F(2, 4, 3)), ("idx", C(2))], axis=1)
op_case("gather_elements", "GatherElements", [("x", F(3, 4)), ("idx", I(3, 2, hi=4))], axis=1)
op_case("gather_nd", "GatherND", [("x", F(2, 3, 4)), ("idx", V([[0, 1], [1, 2]]))])
op_case("gather_nd_batch", "GatherND", [("x", F(2, 3, 4)), ("idx", V([[[1]], [[2]]]))],
        batch_dims=1)
op_case("unsqueeze_axes", "Unsqueeze", [("x", F(3, 4)), ("axes", C([0, -1]))],
        description="opset 13: axes from the second input; -1 refers to the output rank")
op_case("squeeze_axes", "Squeeze", [("x", F(1, 3, 1, 4)), ("axes", C([-2]))])
op_case("squeeze_all", "Squeeze", [("x", F(1, 3, 1, 4))], description="axes omitted")
op_case("flatten_axis2", "Flatten", [("x", F(2, 3, 4, 5))], axis=2)
op_case("flatten_axis0", "Flatten", [("x", F(2, 3, 4))], axis=0)
op_case("expand_bcast", "Expand", [("x", F(3, 1)), ("shape", C([2, 1, 4]))])
op_case("tile", "Tile", [("x", F(2, 3)), ("repeats", C([2, 3]))])
op_case("pad_constant", "Pad", [("x", F(1, 2, 3, 3)), ("pads", C([0, 0, 1, 2, 0, 0, 2, 1])),
                                ("value", C(0.5, np.float32))], mode="constant")
op_case("pad_reflect", "Pad", [("x", F(1, 2, 4, 4)), ("pads", C([0, 0, 2, 1, 0, 0, 1, 3]))],
        mode="reflect")
op_case("pad_edge", "Pad", [("x", F(1, 2, 3, 3)), ("pads", C([0, 0, 2, 2, 0, 0, 2, 2]))],
        mode="edge")
op_case("shape", "Shape", [("x", F(2, 3, 4))])
op_case("shape_start_end", "Shape", [("x", F(2, 3, 4, 5))], opset=15, start=1, end=-1)
op_case("size", "Size", [("x", F(2, 3, 4))])
op_case("constant_of_shape", "ConstantOfShape", [("shape", V([2, 3]))],
        value=numpy_helper.from_array(np.array([1.5], np.float32), "value"))
op_case("constant_of_shape_default", "ConstantOfShape", [("shape", V([3]))],
        description="value omitted: float32 zeros")
op_case("range_int64", "Range", [("start", V(0)), ("limit", V(10)), ("delta", V(3))])
op_case("range_float_negative", "Range", [("start", V(1.0, np.float32)),
                                          ("limit", V(-2.0, np.float32)),
                                          ("delta", V(-0.5, np.float32))])
op_case("cast_float_to_int64", "Cast", [("x", V([-2.7, -0.5, 0.0, 0.5, 1.9, 3.5], np.float32))],
        to=TensorProto.INT64, description="truncation toward zero")
op_case("cast_int64_to_float", "Cast", [("x", I(2, 3, lo=-100, hi=100))], to=TensorProto.FLOAT)
op_case("cast_float_to_bool", "Cast", [("x", V([0.0, -0.0, 0.5, -2.0], np.float32))],
        to=TensorProto.BOOL)
op_case("cast_bool_to_float", "Cast", [("x", B(5))], to=TensorProto.FLOAT)
op_case("dropout_inference", "Dropout", [("x", F(3, 4)), ("ratio", C(0.3, np.float32))],
        description="no training_mode: the identity")
graph_case("constant_tensor", "Constant", [
    helper.make_node("Constant", [], ["c"],
                     value=numpy_helper.from_array(np.arange(4, dtype=np.float32), "c")),
    helper.make_node("Add", ["x", "c"], ["y"]),
], [("x", F(2, 4))], ["y"])
graph_case("constant_value_ints", "Constant", [
    helper.make_node("Constant", [], ["s"], value_ints=[4, 2]),
    helper.make_node("Reshape", ["x", "s"], ["y"]),
], [("x", F(2, 4))], ["y"], output_shapes=[[4, 2]])

# Indexing.
op_case("scatter_nd", "ScatterND", [("x", F(4, 3)), ("idx", V([[1], [3]])), ("upd", F(2, 3))])
op_case("scatter_nd_add", "ScatterND", [("x", F(4, 3)), ("idx", V([[1], [1]])), ("upd", F(2, 3))],
        opset=16, reduction="add", description="duplicate indices accumulate")
op_case("scatter_elements", "ScatterElements", [("x", F(3, 4)), ("idx", V([[1, 3], [0, 2], [3, 0]])),
                                                ("upd", F(3, 2))], axis=1)
op_case("cumsum", "CumSum", [("x", F(3, 4)), ("axis", C(1))])
op_case("cumsum_exclusive_reverse", "CumSum", [("x", F(3, 4)), ("axis", C(0))],
        exclusive=1, reverse=1)
op_case("trilu_upper", "Trilu", [("x", F(4, 5))], opset=14)
op_case("trilu_lower_k", "Trilu", [("x", F(2, 4, 4)), ("k", C(-1))], opset=14, upper=0)
op_case("nonzero", "NonZero", [("x", V([[1.0, 0.0, 2.0], [0.0, 0.0, -1.0]], np.float32))])
op_case("topk_largest", "TopK", [("x", F(3, 6)), ("k", C([2]))], outputs=["values", "indices"],
        axis=-1)
op_case("topk_smallest_axis0", "TopK", [("x", F(5, 3)), ("k", C([3]))],
        outputs=["values", "indices"], axis=0, largest=0)
op_case("onehot", "OneHot", [("idx", V([0, 2, -1, 1])), ("depth", C(4)),
                             ("values", C([0.0, 1.0], np.float32))], axis=-1,
        description="negative index counts from the end")

# Reductions.
op_case("reduce_mean_keepdims", "ReduceMean", [("x", F(2, 3, 4))], axes=[-1], keepdims=1)
op_case("reduce_mean_no_keepdims", "ReduceMean", [("x", F(2, 3, 4))], axes=[0, 2], keepdims=0)
op_case("reduce_sum_axes_input", "ReduceSum", [("x", F(2, 3, 4)), ("axes", C([1]))], keepdims=1,
        description="opset 13: axes from the second input")
op_case("reduce_sum_all", "ReduceSum", [("x", F(2, 3, 4))], keepdims=0,
        description="axes omitted: reduce everything")
op_case("reduce_max", "ReduceMax", [("x", F(2, 3, 4))], axes=[1], keepdims=0)
op_case("reduce_min", "ReduceMin", [("x", F(2, 3, 4))], axes=[2], keepdims=1)
op_case("reduce_prod", "ReduceProd", [("x", P(2, 3, 4))], axes=[1], keepdims=1)
op_case("reduce_l2", "ReduceL2", [("x", F(2, 3, 4))], axes=[-1], keepdims=0)
op_case("argmax_keepdims", "ArgMax", [("x", F(3, 5))], axis=1, keepdims=1)
op_case("argmax_select_last", "ArgMax", [("x", V([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], np.float32))],
        axis=1, keepdims=0, select_last_index=1, description="ties: the last index")
op_case("argmin_axis0", "ArgMin", [("x", F(4, 3))], axis=0, keepdims=0)

# Convolution and pooling.
op_case("conv_pads", "Conv", [("x", F(1, 3, 7, 7)), ("w", F(4, 3, 3, 3).init()),
                              ("b", F(4).init())], pads=[1, 1, 1, 1])
op_case("conv_strides_dilations", "Conv", [("x", F(1, 2, 9, 9)), ("w", F(3, 2, 3, 3).init())],
        strides=[2, 2], dilations=[2, 1], pads=[2, 1, 1, 0])
op_case("conv_group", "Conv", [("x", F(1, 4, 6, 6)), ("w", F(6, 2, 3, 3).init()),
                               ("b", F(6).init())], group=2)
op_case("conv_depthwise", "Conv", [("x", F(2, 4, 6, 6)), ("w", F(4, 1, 3, 3).init()),
                                   ("b", F(4).init())], group=4, pads=[1, 1, 1, 1], strides=[2, 2])
op_case("conv_pointwise", "Conv", [("x", F(1, 8, 5, 5)), ("w", F(4, 8, 1, 1).init())])
op_case("conv_auto_pad_same_upper", "Conv", [("x", F(1, 2, 6, 6)), ("w", F(3, 2, 4, 4).init())],
        auto_pad="SAME_UPPER", strides=[2, 2])
op_case("conv_1d", "Conv", [("x", F(2, 3, 10)), ("w", F(4, 3, 3).init()), ("b", F(4).init())],
        pads=[1, 1])
op_case("conv_transpose", "ConvTranspose", [("x", F(1, 4, 4, 4)), ("w", F(4, 3, 3, 3).init()),
                                            ("b", F(3).init())],
        strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])
op_case("conv_transpose_group", "ConvTranspose", [("x", F(1, 4, 3, 3)), ("w", F(4, 2, 2, 2).init())],
        group=2, strides=[2, 2])
op_case("maxpool", "MaxPool", [("x", F(1, 2, 6, 6))], kernel_shape=[2, 2], strides=[2, 2])
op_case("maxpool_pads_ceil", "MaxPool", [("x", F(1, 2, 7, 7))], kernel_shape=[3, 3],
        strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
op_case("maxpool_dilations", "MaxPool", [("x", F(1, 1, 7, 7))], kernel_shape=[2, 2],
        dilations=[2, 2])
op_case("avgpool_count_include_pad", "AveragePool", [("x", F(1, 2, 5, 5))], kernel_shape=[3, 3],
        pads=[1, 1, 1, 1], count_include_pad=1)
op_case("avgpool_exclude_pad", "AveragePool", [("x", F(1, 2, 5, 5))], kernel_shape=[3, 3],
        pads=[1, 1, 1, 1], strides=[2, 2])
op_case("avgpool_ceil", "AveragePool", [("x", F(1, 1, 6, 6))], kernel_shape=[3, 3], strides=[2, 2],
        ceil_mode=1)
op_case("global_average_pool", "GlobalAveragePool", [("x", F(2, 3, 4, 5))])
op_case("global_max_pool", "GlobalMaxPool", [("x", F(2, 3, 4, 5))])

# Normalisation.
op_case("batch_norm", "BatchNormalization", [("x", F(2, 3, 4, 4)), ("scale", F(3).init()),
                                             ("bias", F(3).init()), ("mean", F(3).init()),
                                             ("var", P(3).init())], epsilon=1e-3)
op_case("batch_norm_training", "BatchNormalization",
        [("x", F(4, 3, 2, 2)), ("scale", F(3).init()), ("bias", F(3).init()),
         ("mean", F(3).init()), ("var", P(3).init())], outputs=["y", "running_mean", "running_var"],
        opset=15, training_mode=1, momentum=0.9,
        description="batch statistics; also the updated running mean and variance")
op_case("instance_norm", "InstanceNormalization", [("x", F(2, 3, 4, 4)), ("scale", F(3).init()),
                                                   ("bias", F(3).init())])
op_case("layer_norm", "LayerNormalization", [("x", F(2, 5, 8)), ("scale", F(8).init()),
                                             ("bias", F(8).init())], opset=17, axis=-1)
op_case("layer_norm_axis1", "LayerNormalization", [("x", F(2, 3, 4)), ("scale", F(3, 4).init())],
        opset=17, axis=1, epsilon=1e-3, description="normalise over the last two axes, no bias")
op_case("group_norm_opset18", "GroupNormalization",
        [("x", F(2, 4, 3, 3)), ("scale", F(2).init()), ("bias", F(2).init())], opset=18,
        num_groups=2, output_shapes=[[2, 4, 3, 3]],
        description="opset 18: scale and bias per group (not checked by onnx 1.12)")
op_case("group_norm_opset21", "GroupNormalization",
        [("x", F(2, 6, 2, 2)), ("scale", F(6).init()), ("bias", F(6).init())], opset=21,
        num_groups=3, epsilon=1e-3, output_shapes=[[2, 6, 2, 2]],
        description="opset 21: scale and bias per channel (not checked by onnx 1.12)")
op_case("lrn", "LRN", [("x", F(1, 5, 3, 3))], size=3, alpha=1e-3, beta=0.75, bias=2.0)

# Matrix products.
op_case("gemm", "Gemm", [("a", F(3, 4)), ("b", F(4, 5).init()), ("c", F(5).init())])
op_case("gemm_trans_alpha_beta", "Gemm", [("a", F(4, 3)), ("b", F(5, 4)), ("c", F(3, 1))],
        transA=1, transB=1, alpha=0.5, beta=2.0)
op_case("gemm_no_c", "Gemm", [("a", F(2, 3)), ("b", F(3, 4))])
op_case("matmul_2d", "MatMul", [("a", F(3, 4)), ("b", F(4, 5))])
op_case("matmul_batched", "MatMul", [("a", F(2, 3, 4)), ("b", F(2, 4, 5))])
op_case("matmul_bcast", "MatMul", [("a", F(2, 1, 3, 4)), ("b", F(5, 4, 6))])
op_case("matmul_vector", "MatMul", [("a", F(4)), ("b", F(2, 4, 3))],
        description="1-D lhs: prepended 1, then removed")
op_case("einsum_bmm", "Einsum", [("a", F(2, 3, 4)), ("b", F(2, 4, 5))], equation="bij,bjk->bik")
op_case("einsum_attention", "Einsum", [("q", F(1, 2, 3, 4)), ("k", F(1, 2, 5, 4))],
        equation="bhqd,bhkd->bhqk")
op_case("einsum_transpose", "Einsum", [("x", F(3, 4))], equation="ij->ji")
op_case("einsum_dot", "Einsum", [("a", F(5)), ("b", F(5))], equation="i,i->")

# Resampling and rearrangement.
op_case("resize_nearest_scales", "Resize", [("x", F(1, 2, 3, 3)), "", ("scales", C([1, 1, 2, 2],
                                                                                 np.float32))],
        mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor",
        description="torch's F.interpolate(scale_factor=2, mode='nearest') export")
op_case("resize_nearest_sizes", "Resize", [("x", F(1, 1, 4, 4)), "", "", ("sizes", C([1, 1, 3, 6]))],
        mode="nearest")
op_case("resize_linear_half_pixel", "Resize",
        [("x", F(1, 2, 3, 4)), "", ("scales", C([1, 1, 2, 1.5], np.float32))], mode="linear",
        description="bilinear, align_corners=False")
op_case("resize_linear_align_corners", "Resize",
        [("x", F(1, 1, 3, 3)), "", "", ("sizes", C([1, 1, 5, 4]))], mode="linear",
        coordinate_transformation_mode="align_corners")
op_case("depth_to_space_dcr", "DepthToSpace", [("x", F(1, 8, 2, 3))], blocksize=2)
op_case("depth_to_space_crd", "DepthToSpace", [("x", F(1, 8, 2, 3))], blocksize=2, mode="CRD")
op_case("space_to_depth", "SpaceToDepth", [("x", F(1, 2, 4, 6))], blocksize=2)

# Recurrent.
op_case("lstm", "LSTM", [("x", F(5, 2, 4)), ("w", F(1, 12, 4).init()), ("r", F(1, 12, 3).init()),
                         ("b", F(1, 24).init()), "", ("h0", F(1, 2, 3)), ("c0", F(1, 2, 3))],
        outputs=["y", "y_h", "y_c"], hidden_size=3,
        description="seq 5, batch 2, input 4, hidden 3; initial state given")
op_case("lstm_bidirectional", "LSTM", [("x", F(4, 1, 3)), ("w", F(2, 8, 3).init()),
                                       ("r", F(2, 8, 2).init())],
        outputs=["y", "y_h", "y_c"], hidden_size=2, direction="bidirectional",
        description="no bias, zero initial state")
op_case("lstm_peepholes_seq_lens", "LSTM",
        [("x", F(4, 3, 2)), ("w", F(2, 12, 2).init()), ("r", F(2, 12, 3).init()),
         ("b", F(2, 24).init()), ("seq_lens", V([4, 2, 3], np.int32)), ("h0", F(2, 3, 3)),
         ("c0", F(2, 3, 3)), ("p", F(2, 9).init())],
        outputs=["y", "y_h", "y_c"], hidden_size=3, direction="bidirectional", input_forget=1,
        clip=2.0, description="peepholes, coupled input/forget gates, clip, uneven lengths")
op_case("lstm_reverse_activations", "LSTM",
        [("x", F(3, 2, 2)), ("w", F(1, 8, 2).init()), ("r", F(1, 8, 2).init())],
        outputs=["y", "y_h", "y_c"], hidden_size=2, direction="reverse",
        activations=["HardSigmoid", "LeakyRelu", "Softsign"], activation_alpha=[0.3, 0.2],
        activation_beta=[0.4], description="named activations with alpha/beta")
op_case("gru_seq_lens", "GRU",
        [("x", F(4, 3, 2)), ("w", F(2, 9, 2).init()), ("r", F(2, 9, 3).init()),
         ("b", F(2, 18).init()), ("seq_lens", V([4, 2, 3], np.int32)), ("h0", F(2, 3, 3))],
        outputs=["y", "y_h"], hidden_size=3, direction="bidirectional",
        description="linear_before_reset = 0 (ONNX's default, not torch's), uneven lengths")
op_case("gru_linear_before_reset", "GRU",
        [("x", F(5, 2, 3)), ("w", F(1, 12, 3).init()), ("r", F(1, 12, 4).init()),
         ("b", F(1, 24).init())],
        outputs=["y", "y_h"], hidden_size=4, linear_before_reset=1,
        description="torch.nn.GRU's cell")
op_case("rnn_seq_lens_relu", "RNN",
        [("x", F(4, 3, 2)), ("w", F(2, 3, 2).init()), ("r", F(2, 3, 3).init()),
         ("b", F(2, 6).init()), ("seq_lens", V([1, 4, 2], np.int32))],
        outputs=["y", "y_h"], hidden_size=3, direction="bidirectional",
        activations=["Relu", "Tanh"], description="a different activation per direction")

# Control flow.
def if_node() -> onnx.NodeProto:
    """If over outer-scope x: then x + 1, else x * x."""
    return helper.make_node(
        "If", ["cond"], ["y"],
        then_branch=helper.make_graph(
            [helper.make_node("Add", ["x", "one"], ["then_y"])], "then", [],
            [helper.make_tensor_value_info("then_y", TensorProto.FLOAT, [2, 3])],
            [numpy_helper.from_array(np.array(1.0, np.float32), "one")]),
        else_branch=helper.make_graph(
            [helper.make_node("Mul", ["x", "x"], ["else_y"])], "else", [],
            [helper.make_tensor_value_info("else_y", TensorProto.FLOAT, [2, 3])]))


graph_case("if_then", "If", [if_node()], [("cond", V(True)), ("x", F(2, 3))], ["y"],
           description="branches read the outer-scope x; cond true: x + 1")
graph_case("if_else", "If", [if_node()], [("cond", V(False)), ("x", F(2, 3))], ["y"],
           description="branches read the outer-scope x; cond false: x * x")


# --- writing --------------------------------------------------------------------------------------


def rel(path: str) -> str:
    """`path` relative to tests/onnx_ops/, with forward slashes."""
    return os.path.relpath(path, OUT).replace(os.sep, "/")


def build_model(case: Case, values: Dict[str, np.ndarray]) -> onnx.ModelProto:
    """The ModelProto of `case`, output types and shapes filled in by shape inference, checked by
    onnx.checker; for an opset newer than this onnx knows (MAX_CHECKED_OPSET) the outputs are
    float32 of `output_shapes` and only onnxruntime checks the model."""
    graph_inputs = [helper.make_tensor_value_info(n, NP_TO_ONNX[values[n].dtype], values[n].shape)
                    for n, spec in case.inputs if not spec.const]
    inits = [numpy_helper.from_array(values[n], n) for n, spec in case.inputs if spec.const]
    graph = helper.make_graph(case.nodes, case.name, graph_inputs,
                              [onnx.ValueInfoProto(name=n) for n in case.outputs], inits)
    model = helper.make_model(graph, producer_name="fxwasm-gen_onnx_op_tests",
                              opset_imports=[helper.make_opsetid("", case.opset)])
    if case.opset > MAX_CHECKED_OPSET:
        assert case.output_shapes, f"{case.name}: opset {case.opset} needs output_shapes"
        del model.graph.output[:]
        model.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
                                  for n, shape in zip(case.outputs, case.output_shapes))
        return model
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    del model.graph.output[:]
    for i, out in enumerate(inferred.graph.output):
        t = out.type.tensor_type
        if not t.elem_type:
            raise RuntimeError(f"{case.name}: shape inference gave no type for output {out.name}")
        if not t.HasField("shape"):
            if not case.output_shapes:
                raise RuntimeError(f"{case.name}: output {out.name} needs output_shapes")
            out = helper.make_tensor_value_info(out.name, t.elem_type, case.output_shapes[i])
        model.graph.output.append(out)
    onnx.checker.check_model(model, full_check=True)
    return model


def tensor_entry(name: str, value: np.ndarray, stem: str, data_dir: str) -> dict:
    """Write STEM.pb and STEM.bin for `value`; return its io.json entry."""
    with open(os.path.join(data_dir, stem + ".pb"), "wb") as f:
        f.write(numpy_helper.from_array(value, name).SerializeToString())
    with open(os.path.join(data_dir, stem + ".bin"), "wb") as f:
        f.write(np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes())
    return {"name": name, "dtype": DTYPE_NAMES[value.dtype], "shape": list(value.shape),
            "file": stem + ".bin"}


def attributes(node: onnx.NodeProto) -> dict:
    """A node's attributes as JSON values (tensors as {dtype, shape, values}, graphs by name)."""
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, onnx.TensorProto):
            arr = numpy_helper.to_array(v)
            v = {"dtype": DTYPE_NAMES[arr.dtype], "shape": list(arr.shape),
                 "values": arr.ravel().tolist()}
        elif isinstance(v, onnx.GraphProto):
            v = f"<graph {v.name}>"
        elif isinstance(v, list):
            v = [x.decode() if isinstance(x, bytes) else x for x in v]
        out[a.name] = v
    return out


def to_json(value, indent: int = 0) -> str:
    """JSON with one line per flat object (tensor entries) or flat list, nested ones indented."""
    def flat(v) -> bool:
        return not isinstance(v, (dict, list)) or (
            isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v))
    pad = " " * (indent + 1)
    if isinstance(value, dict) and not all(flat(v) for v in value.values()):
        items = [f"{pad}{json.dumps(k)}: {to_json(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list) and not flat(value):
        items = [pad + to_json(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value)


def write_json(path: str, doc: dict) -> None:
    with open(path, "w") as f:
        f.write(to_json(doc) + "\n")


def read_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def write_models(only: Optional[List[str]]) -> None:
    """Step 1: wipe tests/onnx_ops/, write every model, its inputs, io.json and the manifest."""
    cases = [c for c in CASES if not only or c.name in only]
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    entries = []
    for case in cases:
        rng = np.random.default_rng(zlib.crc32(case.name.encode()))
        values = {n: spec.make(rng) for n, spec in case.inputs}
        model = build_model(case, values)
        with open(os.path.join(OUT, case.name + ".onnx"), "wb") as f:
            f.write(model.SerializeToString())
        data_dir = os.path.join(OUT, case.name, DATA_SET)
        os.makedirs(data_dir)
        runtime = [n for n, spec in case.inputs if not spec.const]
        io_inputs = [tensor_entry(n, values[n], f"input_{i}", data_dir)
                     for i, n in enumerate(runtime)]
        write_json(os.path.join(data_dir, "io.json"), {"inputs": io_inputs, "outputs": []})
        main_node = next(n for n in case.nodes if n.op_type == case.op)
        entries.append({
            "name": case.name,
            "op": case.op,
            "opset": case.opset,
            "description": case.description,
            "attributes": attributes(main_node),
            "nodes": [n.op_type for n in case.nodes],
            "initializers": [n for n, spec in case.inputs if spec.const],
            "model": case.name + ".onnx",
            "data": rel(data_dir),
            "inputs": io_inputs,
            "outputs": [{"name": o} for o in case.outputs],
        })
    write_json(os.path.join(OUT, "manifest.json"), {"cases": entries})
    print(f"step 1: {len(entries)} models and inputs -> {OUT}")


def ort_version() -> str:
    """The installed onnxruntime-node version (read from its package.json)."""
    pkg = os.path.join(ROOT, "node_modules", "onnxruntime-node", "package.json")
    return read_json(pkg)["version"]


def write_outputs() -> None:
    """Step 3: onnxruntime's raw outputs -> output_N.pb; finish the manifest; drop refused cases."""
    manifest = read_json(os.path.join(OUT, "manifest.json"))
    kept, refused = [], []
    for entry in manifest["cases"]:
        data_dir = os.path.join(OUT, entry["data"])
        io = read_json(os.path.join(data_dir, "io.json"))
        if "error" in io:
            refused.append({"name": entry["name"], "op": entry["op"], "error": io["error"]})
            os.remove(os.path.join(OUT, entry["model"]))
            shutil.rmtree(os.path.join(OUT, entry["name"]))
            continue
        outputs = []
        for i, out in enumerate(io["outputs"]):
            with open(os.path.join(data_dir, out["file"]), "rb") as f:
                raw = f.read()
            value = np.frombuffer(raw, NP_DTYPES[out["dtype"]].newbyteorder("<"))
            value = value.astype(NP_DTYPES[out["dtype"]]).reshape(out["shape"])
            outputs.append(tensor_entry(out["name"], value, f"output_{i}", data_dir))
        if [o["name"] for o in outputs] != [o["name"] for o in entry["outputs"]]:
            raise RuntimeError(f"{entry['name']}: onnxruntime's outputs differ from the model's")
        write_json(os.path.join(data_dir, "io.json"), {"inputs": io["inputs"], "outputs": outputs})
        entry["outputs"] = outputs
        kept.append(entry)
    write_json(os.path.join(OUT, "manifest.json"), {
        "generator": "bash scripts/gen_onnx_op_tests.sh",
        "onnx": onnx.__version__,
        "onnxruntime_node": ort_version(),
        "data_layout": "CASE/test_data_set_0/{input,output}_N.pb (TensorProto) and .bin (raw "
                       "little-endian, row-major; bool one byte); io.json per data set",
        "cases": kept,
        "refused": refused,
    })
    ops = sorted({e["op"] for e in kept})
    print(f"step 3: {len(kept)} cases over {len(ops)} ops with onnxruntime goldens; "
          f"{len(refused)} refused by onnxruntime")
    for r in refused:
        print(f"  refused {r['name']} ({r['op']}): {r['error']}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["models", "outputs", "list"],
                        help="models: step 1; outputs: step 3; list: print the cases")
    parser.add_argument("--only", help="comma-separated case names (step 1)")
    args = parser.parse_args(argv)
    if args.step == "list":
        for c in CASES:
            print(f"{c.name:<32} {c.op:<20} opset {c.opset}")
        print(f"{len(CASES)} cases, {len({c.op for c in CASES})} ops")
        return 0
    if args.step == "models":
        write_models(args.only.split(",") if args.only else None)
        return 0
    write_outputs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
