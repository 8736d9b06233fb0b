#!/usr/bin/python3
"""Writes the hostile models of the malformed-input table (issue 16) into tests/malformed/.

Each case is one small .onnx file plus a line of cases.tsv:
    name <TAB> stage <TAB> kind <TAB> message <TAB> options
stage: 'load' (import must fail), 'run' (import succeeds, running it with no inputs must fail),
'lazy' (external data: the model loads from its folder, running it reads the data and fails).
kind: the fx::Error / FxError kind; message: a substring the error's message must contain;
options: 'opset=error' (the importer's opset check), or '-'. Both tests/cpp/malformed_test.cpp
and tests/js/malformed.test.mjs replay the table natively and in wasm under the limits
max_tensor_bytes = 1 GiB, max_run_bytes = 2 GiB, max_elements = 2^30 (the wasm defaults) and
max_loop_iterations = 2^16.
The 'lazy' cases need their folder arranged by the test (weights.bin a directory, a symlink out
of the folder, ...), which the tests do in a scratch folder.

Regenerate: /usr/bin/python3 tests/malformed/gen.py   (Debian's python3-onnx; deterministic)
"""
import os
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
I64_MAX = 2**63 - 1
CASES = []


def model(nodes, outputs, inits=(), inputs=(), opsets=(("", 13),), ir=8):
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = ir
    return m


def out(name="y", elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, None)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def f32(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


def raw(name, elem, dims, data):
    """A TensorProto whose dims claim what the raw bytes need not hold."""
    t = TensorProto()
    t.name = name
    t.data_type = elem
    t.dims.extend(dims)
    t.raw_data = data
    return t


def string_tensor(dims=(1,), count=1):
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.STRING
    t.dims.extend(dims)
    t.string_data.extend([b"x"] * count)
    return t


def short_field():
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.append(2**28)
    t.float_data.extend([1.0, 2.0])
    return t


def case(name, stage, kind, message, m, options="-"):
    data = m if isinstance(m, bytes) else m.SerializeToString()
    with open(os.path.join(HERE, name + ".onnx"), "wb") as f:
        f.write(data)
    CASES.append((name, stage, kind, message, options))


def identity_of(t, elem=TensorProto.FLOAT):
    return model([helper.make_node("Identity", [t.name], ["y"], name="id")], [out("y", elem)], [t])


def op(op_type, inits, name, elem=TensorProto.FLOAT, **attrs):
    n = helper.make_node(op_type, [t.name if t is not None else "" for t in inits], ["y"],
                         name=name, **attrs)
    return model([n], [out("y", elem)], [t for t in inits if t is not None])


# ---- initializers and Constants whose dims need terabytes (checked before allocating) ----
case("init_terabytes", "load", "ResourceError", "over the limit",
     identity_of(raw("w", TensorProto.FLOAT, [2**20, 2**20, 2**20], b"\0" * 4)))
case("init_4gb_in_83_bytes", "load", "ResourceError", "over the per-tensor limit",
     identity_of(raw("w", TensorProto.FLOAT, [2**30], b"\0" * 4)))
case("init_int64_overflow", "load", "ResourceError", "more elements than int64",
     identity_of(raw("w", TensorProto.FLOAT, [2**62, 4], b"")))
case("init_short_raw_data", "load", "ParseError", "raw_data has 4 bytes",
     identity_of(raw("w", TensorProto.FLOAT, [1000], b"\0" * 4)))
case("init_short_typed_field", "load", "ParseError", "float_data has 2 values",
     identity_of(short_field()))
case("init_negative_dim", "load", "ParseError", "is negative",
     identity_of(raw("w", TensorProto.FLOAT, [-4], b"")))
case("init_string_count", "load", "ParseError", "1 strings for 3 elements",
     identity_of(string_tensor((3,), 1), TensorProto.STRING))
case("string_into_add", "run", "RuntimeError", "does not take string tensors",
     model([helper.make_node("Add", ["w", "w"], ["y"], name="add")], [out("y", TensorProto.STRING)],
           [string_tensor()]))
case("init_undefined_type", "load", "UnsupportedError", "element type 0",
     identity_of(raw("w", 0, [1], b"\0" * 4)))
c = helper.make_node("Constant", [], ["y"], name="big",
                     value=raw("v", TensorProto.FLOAT, [2**40, 2**20], b""))
case("constant_terabytes", "load", "ResourceError", "over the limit", model([c], [out()]))

# ---- ops that compute an output shape from data ----
case("constant_of_shape_huge", "run", "ResourceError", "(onnx.ConstantOfShape)",
     op("ConstantOfShape", [i64("s", [2**20, 2**20, 2**20])], "cos"))
case("constant_of_shape_2p20_squared", "run", "ResourceError", "over the limit",
     op("ConstantOfShape", [i64("s", [2**20, 2**20])], "cos"))
case("constant_of_shape_int64_overflow", "run", "ResourceError", "more elements than int64",
     op("ConstantOfShape", [i64("s", [2**40, 2**40])], "cos"))
case("constant_of_shape_negative", "run", "RuntimeError", "negative",
     op("ConstantOfShape", [i64("s", [2, -3])], "cos"))
case("expand_huge", "run", "ResourceError", "(onnx.Expand)",
     op("Expand", [f32("x", [1.0]), i64("s", [2**31, 2**31])], "ex"))
case("expand_int64_overflow", "run", "ResourceError", "more elements than int64",
     op("Expand", [f32("x", [1.0]), i64("s", [2**62, 2**62])], "ex"))
case("tile_huge", "run", "ResourceError", "over the limit",
     op("Tile", [f32("x", [[1.0, 2.0]]), i64("r", [2**20, 2**20])], "tile"))
case("tile_int64_overflow", "run", "ResourceError", "overflows int64",
     op("Tile", [f32("x", [[1.0, 2.0]]), i64("r", [2**62, 2**62])], "tile"))
case("onehot_huge_depth", "run", "ResourceError", "(onnx.OneHot)",
     op("OneHot", [i64("i", [0, 1]), i64("d", [2**40]), f32("v", [0.0, 1.0])], "oh"))
case("pad_2p40", "run", "ResourceError", "(onnx.Pad)",
     op("Pad", [f32("x", [1.0, 2.0]), i64("p", [0, 2**40])], "pad"))
case("pad_int64_overflow", "run", "ResourceError", "overflows int64",
     op("Pad", [f32("x", [1.0, 2.0]), i64("p", [0, I64_MAX])], "pad"))
x4 = f32("x", np.ones((1, 1, 2, 2)))
case("resize_huge_scales", "run", "ResourceError", "(onnx.Resize)",
     op("Resize", [x4, None, f32("sc", [1, 1, 1e6, 1e6])], "rs"))
case("resize_inf_scale", "run", "ResourceError", "the scaled size",
     op("Resize", [x4, None, f32("sc", [1, 1, np.inf, 1])], "rs"))
case("resize_huge_sizes", "run", "ResourceError", "(onnx.Resize)",
     op("Resize", [x4, None, None, i64("sz", [1, 1, 2**20, 2**20])], "rs"))
case("range_to_int64_max", "run", "ResourceError", "(onnx.Range)",
     op("Range", [i64("a", 0), i64("b", I64_MAX), i64("d", 1)], "rg", TensorProto.INT64))
case("range_span_overflows", "run", "ResourceError", "overflows int64",
     op("Range", [i64("a", -I64_MAX), i64("b", I64_MAX), i64("d", 1)], "rg", TensorProto.INT64))
case("range_float_to_inf", "run", "ResourceError", "(onnx.Range)",
     op("Range", [f32("a", 0.0), f32("b", np.inf), f32("d", 1.0)], "rg"))
case("range_float_nan", "run", "RuntimeError", "not a number",
     op("Range", [f32("a", 0.0), f32("b", np.nan), f32("d", 1.0)], "rg"))
case("range_zero_delta", "run", "RuntimeError", "delta cannot be 0",
     op("Range", [i64("a", 0), i64("b", 10), i64("d", 0)], "rg", TensorProto.INT64))
case("reshape_wraps_to_zero", "run", "ResourceError", "the target shape overflows int64",
     op("Reshape", [f32("x", np.zeros((0,))), i64("s", [2**32, 2**32])], "rs"))

def runaway_loop():
    """Loop(M = 2^62, cond = true) over a body that keeps cond true: a hang without a cap."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Neg", ["s"], ["s_out"])],
        "body", [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []),
                 vi("s", TensorProto.FLOAT, [1])],
        [vi("c_out", TensorProto.BOOL, []), vi("s_out", TensorProto.FLOAT, [1])])
    cond = numpy_helper.from_array(np.array(True), "cond")
    n = helper.make_node("Loop", ["m", "cond", "s0"], ["y"], name="spin", body=body)
    return model([n], [out()], [i64("m", 2**62), cond, f32("s0", [1.0])])


case("loop_runaway", "run", "ResourceError", "past 65536 iterations", runaway_loop())

# ---- graphs that are wrong ----
case("unknown_op", "run", "UnsupportedError", "no implementation",
     op("NoSuchOp", [f32("x", [1.0])], "nope"))
case("dangling_input", "load", "ParseError", "is not produced by any node",
     model([helper.make_node("Relu", ["nowhere"], ["y"], name="r")], [out()]))
case("cycle", "load", "ParseError", "has a cycle",
     model([helper.make_node("Add", ["b", "x"], ["a"], name="a"),
            helper.make_node("Relu", ["a"], ["b"], name="b"),
            helper.make_node("Identity", ["b"], ["y"], name="c")], [out()], [f32("x", [1.0])]))
case("gather_index_out_of_range", "run", "RuntimeError", "index 5 is out of range",
     op("Gather", [f32("x", [1.0, 2.0]), i64("i", [5])], "g"))
case("matmul_shape_mismatch", "run", "RuntimeError", "shapes do not multiply",
     op("MatMul", [f32("a", np.ones((2, 3))), f32("b", np.ones((4, 5)))], "mm"))
case("concat_bad_axis", "run", "RuntimeError", "axis 3 is out of range",
     op("Concat", [f32("a", [1.0]), f32("b", [2.0])], "cat", axis=3))
case("split_sizes_wrong", "run", "RuntimeError", "do not add up",
     op("Split", [f32("x", [1.0, 2.0, 3.0]), i64("s", [1, 1])], "sp"))
case("mistyped_attribute", "run", "RuntimeError", "'axis' must be an int",
     model([helper.make_node("Concat", ["a", "b"], ["y"], name="cat",
                             axis="zero")],
           [out()], [f32("a", [1.0]), f32("b", [2.0])]))

# ---- opsets ----
relu = [helper.make_node("Relu", ["x"], ["y"], name="r")]
case("opset_99_error", "load", "UnsupportedError", "newer than fxwasm knows",
     model(relu, [out()], [f32("x", [1.0])], opsets=(("", 99),)), "opset=error")
case("ml_opset_99_error", "load", "UnsupportedError", "ai.onnx.ml",
     model(relu, [out()], [f32("x", [1.0])], opsets=(("", 13), ("ai.onnx.ml", 99))),
     "opset=error")
case("opset_missing", "load", "ParseError", "no opset_import",
     model(relu, [out()], [f32("x", [1.0])], opsets=()))
case("opset_zero", "load", "ParseError", "must be >= 1",
     model(relu, [out()], [f32("x", [1.0])], opsets=(("", 0),)))

# ---- bytes that are not a model ----
good = model(relu, [out()], [f32("x", [1.0])]).SerializeToString()
case("empty_file", "load", "ParseError", "empty", b"")
case("random_bytes", "load", "ParseError", "not an ONNX model",
     bytes(np.random.default_rng(16).integers(0, 256, 300, dtype=np.uint8)))
case("truncated", "load", "ParseError", "not an ONNX model", good[: len(good) // 2])
nograph = onnx.ModelProto()
nograph.ir_version = 8
nograph.opset_import.add().version = 13
case("no_graph", "load", "ParseError", "no graph", nograph)


# ---- external data (the test arranges weights.bin in a scratch folder) ----
def external(name, location, offset=None, length=None, dims=(4,)):
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return identity_of(t)


case("ext_absolute", "lazy", "ValueError", "inside the model's folder",
     external("ext_absolute", "/etc/passwd"))
case("ext_dotdot", "lazy", "ValueError", "inside the model's folder",
     external("ext_dotdot", "../weights.bin"))
case("ext_missing_file", "lazy", "ValueError", "cannot open",
     external("ext_missing_file", "absent.bin"))
case("ext_directory", "lazy", "ValueError", "directory", external("ext_directory", "weights.bin"))
case("ext_symlink_escape", "lazy", "ValueError", "outside the model's folder",
     external("ext_symlink_escape", "weights.bin"))
case("ext_range_beyond_file", "lazy", "ParseError", "outside the file",
     external("ext_range_beyond_file", "weights.bin", 0, 400, (100,)))
case("ext_offset_overflow", "lazy", "ParseError", "outside the file",
     external("ext_offset_overflow", "weights.bin", I64_MAX, 16))
case("ext_length_mismatch", "load", "ParseError", "does not match",
     external("ext_length_mismatch", "weights.bin", 0, 8))

with open(os.path.join(HERE, "cases.tsv"), "w") as f:
    f.write("# name\tstage\tkind\tmessage\toptions  (written by gen.py)\n")
    for row in CASES:
        f.write("\t".join(row) + "\n")
print(f"{len(CASES)} cases")
