#!/usr/bin/python3
"""Quantize zoo models to 8 bits, in the two forms ONNX models are shipped in.

Run with Debian's interpreter (numpy + python3-onnx; onnxruntime.quantization is not available):

    /usr/bin/python3 models/quantize.py [--zoo DIR] [--out DIR] [--only resnet18,transformer_encoder]

For every model NAME (default: resnet18 and transformer_encoder of models/zoo/) it writes into
models/zoo/quantized/ (--out; a folder of its own, so that the tests that walk models/zoo/ and
compare float models with onnxruntime at float tolerances do not take 8-bit models):

  NAME_qdq.onnx   QDQ form: QuantizeLinear -> DequantizeLinear pairs around the float graph.
                  Every Conv, MatMul and Gemm reads its activations through a Q/DQ pair (uint8,
                  asymmetric, per tensor) and its constant weights as int8 through a
                  DequantizeLinear (symmetric, per output channel: axis 0 of Conv and of Gemm's
                  transposed B, axis 1 of MatMul's K x N weight); its bias is int32 at scale
                  x_scale * w_scale. Its output (or the output of the Relu that is its only
                  reader) goes through a Q/DQ pair too.
  NAME_qop.onnx   QOperator form: each DequantizeLinear -> Conv / MatMul -> QuantizeLinear of the
                  QDQ model becomes QLinearConv / QLinearMatMul on the 8-bit tensors (a Relu in
                  between is the saturation at a zero point of 0); Gemm keeps its QDQ form (ONNX
                  has no quantized Gemm).
  NAME_q*.json    the float model's input spec (scripts/ort_run.mjs and the benches read it).

Activation ranges are calibrated on CALIB_RUNS seeded random inputs (uniform in [-1, 1), the
distribution of scripts/ort_run.mjs's inputs) run through a small numpy interpreter of the ops
these models use. Scales: (max(0, hi) - min(0, lo)) / 255, zero point round(-min(0, lo) / scale);
weights max|w| / 127 per channel.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
CALIB_RUNS = 4
QUANTIZED = ("Conv", "MatMul", "Gemm")


# ---- a numpy interpreter, enough for calibration ----

def conv2d(x, w, b, attrs):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilations", [1, 1])
    pt, pl, pb, pr = attrs.get("pads", [0, 0, 0, 0])
    group = attrs.get("group", 1)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.empty((n, m, oh, ow), np.float32)
    mg = m // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        cols = np.empty((n, cg, kh, kw, oh, ow), np.float32)
        for i in range(kh):
            for j in range(kw):
                cols[:, :, i, j] = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                                      j * dw:j * dw + sw * (ow - 1) + 1:sw]
        wg = w[g * mg:(g + 1) * mg].reshape(mg, -1)
        out[:, g * mg:(g + 1) * mg] = np.einsum("mk,nkp->nmp", wg,
                                                cols.reshape(n, cg * kh * kw, oh * ow)
                                                ).reshape(n, mg, oh, ow)
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def max_pool(x, attrs):
    kh, kw = attrs["kernel_shape"]
    sh, sw = attrs.get("strides", [1, 1])
    pt, pl, pb, pr = attrs.get("pads", [0, 0, 0, 0])
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=-np.inf)
    oh = (x.shape[2] + pt + pb - kh) // sh + 1
    ow = (x.shape[3] + pl + pr - kw) // sw + 1
    out = np.full(x.shape[:2] + (oh, ow), -np.inf, np.float32)
    for i in range(kh):
        for j in range(kw):
            out = np.maximum(out, xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw])
    return out


def run_node(node, ins, attrs):
    op = node.op_type
    if op == "Identity":
        return [ins[0]]
    if op == "Constant":
        return [numpy_helper.to_array(attrs["value"])]
    if op == "Conv":
        return [conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None, attrs)]
    if op == "Relu":
        return [np.maximum(ins[0], 0)]
    if op in ("Add", "Sub", "Mul", "Div", "Pow"):
        f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
             "Pow": np.power}[op]
        r = f(ins[0], ins[1])
        if ins[0].dtype.kind == "i" and ins[1].dtype.kind == "i" and op == "Div":
            r = ins[0] // ins[1]
        return [r.astype(np.result_type(ins[0], ins[1]))]
    if op == "Sqrt":
        return [np.sqrt(ins[0])]
    if op == "MaxPool":
        return [max_pool(ins[0], attrs)]
    if op == "GlobalAveragePool":
        return [ins[0].mean(axis=(2, 3), keepdims=True)]
    if op == "Flatten":
        a = attrs.get("axis", 1)
        return [ins[0].reshape(int(np.prod(ins[0].shape[:a])), -1)]
    if op == "Gemm":
        a = ins[0].T if attrs.get("transA", 0) else ins[0]
        b = ins[1].T if attrs.get("transB", 0) else ins[1]
        y = attrs.get("alpha", 1.0) * (a @ b)
        if len(ins) > 2:
            y = y + attrs.get("beta", 1.0) * ins[2]
        return [y.astype(np.float32)]
    if op == "MatMul":
        return [np.matmul(ins[0], ins[1])]
    if op == "Transpose":
        return [np.transpose(ins[0], attrs.get("perm"))]
    if op == "Reshape":
        shape = [d if d != 0 else ins[0].shape[i] for i, d in enumerate(ins[1])]
        return [ins[0].reshape(shape)]
    if op == "Shape":
        return [np.array(ins[0].shape, np.int64)]
    if op == "Gather":
        return [np.take(ins[0], ins[1], axis=attrs.get("axis", 0))]
    if op == "Slice":
        x = ins[0]
        axes = ins[3] if len(ins) > 3 else range(len(ins[1]))
        steps = ins[4] if len(ins) > 4 else [1] * len(ins[1])
        sl = [slice(None)] * x.ndim
        for s, e, a, st in zip(ins[1], ins[2], axes, steps):
            sl[int(a)] = slice(int(s), int(min(e, 2**62)), int(st))
        return [x[tuple(sl)]]
    if op == "ReduceMean":
        return [ins[0].mean(axis=tuple(attrs["axes"]), keepdims=bool(attrs.get("keepdims", 1)))]
    if op == "Softmax":
        x = ins[0] - ins[0].max(axis=attrs.get("axis", -1), keepdims=True)
        e = np.exp(x)
        return [e / e.sum(axis=attrs.get("axis", -1), keepdims=True)]
    raise NotImplementedError(f"calibration interpreter: no {op} (node {node.name})")


def evaluate(model, feeds):
    """Every tensor's value for these inputs."""
    env = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    env.update(feeds)
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        outs = run_node(node, [env[i] if i else None for i in node.input], attrs)
        for name, v in zip(node.output, outs):
            env[name] = np.asarray(v)
    return env


def seeded_inputs(model, spec, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in spec["inputs"]:
        feeds[i["name"]] = rng.uniform(-1, 1, i["shape"]).astype(np.float32)
    return feeds


# ---- quantization ----

def act_params(lo, hi):
    lo, hi = min(0.0, float(lo)), max(0.0, float(hi))
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zp = int(np.clip(np.round(-lo / scale), 0, 255))
    return scale, zp


def quantize_model(model, spec):
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    producers = {o: n for n in g.node for o in n.output}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)

    def constant(name):
        """The initializer behind `name` (through Identity nodes), or None."""
        for _ in range(16):
            if name in inits:
                return numpy_helper.to_array(inits[name])
            p = producers.get(name)
            if p is None or p.op_type != "Identity":
                return None
            name = p.input[0]
        return None

    # Which activations get a Q/DQ pair.
    quant_nodes = [n for n in g.node if n.op_type in QUANTIZED]
    acts = []
    for n in quant_nodes:
        for k, i in enumerate(n.input[:2]):
            if constant(i) is None and (k == 0 or n.op_type == "MatMul"):
                acts.append(i)
        out = n.output[0]
        users = consumers.get(out, [])
        if len(users) == 1 and users[0].op_type == "Relu":
            out = users[0].output[0]
        acts.append(out)
    acts = list(dict.fromkeys(acts))

    # Calibration.
    lo = {a: np.inf for a in acts}
    hi = {a: -np.inf for a in acts}
    for seed in range(CALIB_RUNS):
        env = evaluate(model, seeded_inputs(model, spec, 1000 + seed))
        for a in acts:
            lo[a] = min(lo[a], float(env[a].min()))
            hi[a] = max(hi[a], float(env[a].max()))

    new_inits = []
    nodes = []
    rename = {}  # activation -> its dequantized name
    qparams = {}
    for a in acts:
        s, z = act_params(lo[a], hi[a])
        qparams[a] = (s, z)
        base = a.strip("/").replace("/", "_").replace(":", "_")
        new_inits += [numpy_helper.from_array(np.array(s, np.float32), base + "_scale"),
                      numpy_helper.from_array(np.array(z, np.uint8), base + "_zero_point")]
        rename[a] = base + "_dequantized"

    def qdq_pair(a):
        base = a.strip("/").replace("/", "_").replace(":", "_")
        return [helper.make_node("QuantizeLinear", [a, base + "_scale", base + "_zero_point"],
                                 [base + "_quantized"], name=base + "_QuantizeLinear"),
                helper.make_node("DequantizeLinear",
                                 [base + "_quantized", base + "_scale", base + "_zero_point"],
                                 [rename[a]], name=base + "_DequantizeLinear")]

    for i in g.input:
        if i.name in rename:
            nodes += qdq_pair(i.name)
    for n in g.node:
        node = onnx.NodeProto()
        node.CopyFrom(n)
        if n.op_type in QUANTIZED:
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            x_scale = qparams[n.input[0]][0] if n.input[0] in qparams else None
            for k in range(1, min(3, len(n.input))):
                w = constant(n.input[k])
                if w is None or k == 2:
                    continue
                if n.op_type == "Conv" or (n.op_type == "Gemm" and attrs.get("transB", 0)):
                    axis = 0
                else:
                    axis = 1
                red = tuple(d for d in range(w.ndim) if d != axis)
                ws = (np.abs(w).max(axis=red) / 127.0).astype(np.float32)
                ws[ws == 0] = 1.0
                shape = [1] * w.ndim
                shape[axis] = -1
                wq = np.clip(np.round(w / ws.reshape(shape)), -127, 127).astype(np.int8)
                wname = n.name.strip("/").replace("/", "_") + f"_w{k}"
                new_inits += [numpy_helper.from_array(wq, wname + "_quantized"),
                              numpy_helper.from_array(ws, wname + "_scale"),
                              numpy_helper.from_array(np.zeros(ws.shape, np.int8),
                                                      wname + "_zero_point")]
                nodes.append(helper.make_node(
                    "DequantizeLinear", [wname + "_quantized", wname + "_scale",
                                         wname + "_zero_point"],
                    [wname + "_dequantized"], name=wname + "_DequantizeLinear", axis=axis))
                node.input[k] = wname + "_dequantized"
                # The bias, int32 at x_scale * w_scale.
                bias = constant(n.input[2]) if len(n.input) > 2 and n.input[2] else None
                if bias is not None and x_scale is not None and bias.ndim == 1 and \
                        bias.shape[0] == ws.shape[0]:
                    bs = (x_scale * ws).astype(np.float32)
                    bq = np.round(bias / bs).astype(np.int32)
                    bname = wname + "_bias"
                    new_inits += [numpy_helper.from_array(bq, bname + "_quantized"),
                                  numpy_helper.from_array(bs, bname + "_scale"),
                                  numpy_helper.from_array(np.zeros(bs.shape, np.int32),
                                                          bname + "_zero_point")]
                    nodes.append(helper.make_node(
                        "DequantizeLinear", [bname + "_quantized", bname + "_scale",
                                             bname + "_zero_point"],
                        [bname + "_dequantized"], name=bname + "_DequantizeLinear", axis=0))
                    node.input[2] = bname + "_dequantized"
        for k, i in enumerate(node.input):
            if i in rename:
                node.input[k] = rename[i]
        nodes.append(node)
        for o in n.output:
            if o in rename:
                nodes += qdq_pair(o)
    # Graph outputs keep their names: a quantized output is read before its Q/DQ pair.
    used = {i for n in nodes for i in n.input} | {o.name for o in g.output}
    keep_inits = [i for i in g.initializer if i.name in used]
    graph = helper.make_graph(nodes, g.name, list(g.input), list(g.output),
                              keep_inits + new_inits)
    out = helper.make_model(graph, opset_imports=list(model.opset_import),
                            producer_name="fxwasm models/quantize.py")
    onnx.checker.check_model(out)
    return out


def to_qoperator(model):
    """DequantizeLinear -> Conv/MatMul [-> Relu] -> QuantizeLinear as QLinearConv/QLinearMatMul."""
    g = model.graph
    producers = {o: n for n in g.node for o in n.output}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    inits = {i.name: i for i in g.initializer}
    replaced = {}  # node name -> replacement (inserted at the Q's position)
    dropped = set()
    for n in g.node:
        if n.op_type not in ("Conv", "MatMul"):
            continue
        dqs = [producers.get(i) for i in n.input[:2]]
        if any(d is None or d.op_type != "DequantizeLinear" for d in dqs):
            continue
        last = n
        users = consumers.get(n.output[0], [])
        if len(users) == 1 and users[0].op_type == "Relu":
            last = users[0]
            users = consumers.get(last.output[0], [])
        qs = [u for u in users if u.op_type == "QuantizeLinear"]
        if len(users) != 1 or not qs:
            continue
        q = qs[0]
        if last is not n:  # the Relu becomes the saturation at y's zero point
            zp = numpy_helper.to_array(inits[q.input[2]])
            if int(zp) != 0:
                continue
        (xd, wd) = dqs
        if n.op_type == "Conv":
            ins = [xd.input[0], xd.input[1], xd.input[2], wd.input[0], wd.input[1], wd.input[2],
                   q.input[1], q.input[2]]
            if len(n.input) > 2 and n.input[2]:
                bd = producers.get(n.input[2])
                if bd is None or bd.op_type != "DequantizeLinear":
                    continue
                ins.append(bd.input[0])
                dropped.add(bd.name)
            new = helper.make_node("QLinearConv", ins, [q.output[0]], name=n.name + "_quant")
            new.attribute.extend(n.attribute)
        else:
            ins = [xd.input[0], xd.input[1], xd.input[2], wd.input[0], wd.input[1], wd.input[2],
                   q.input[1], q.input[2]]
            new = helper.make_node("QLinearMatMul", ins, [q.output[0]], name=n.name + "_quant")
        replaced[q.name] = new
        dropped.update({n.name, q.name} | ({last.name} if last is not n else set()))
    nodes = []
    for n in g.node:
        if n.name in replaced:
            nodes.append(replaced[n.name])
        elif n.name not in dropped:
            nodes.append(n)
    # Dead DequantizeLinear nodes (their only reader was replaced).
    while True:
        used = {i for n in nodes for i in n.input} | {o.name for o in g.output}
        live = [n for n in nodes if any(o in used for o in n.output)]
        if len(live) == len(nodes):
            break
        nodes = live
    used = {i for n in nodes for i in n.input}
    graph = helper.make_graph(nodes, g.name, list(g.input), list(g.output),
                              [i for i in g.initializer if i.name in used])
    out = helper.make_model(graph, opset_imports=list(model.opset_import),
                            producer_name="fxwasm models/quantize.py")
    onnx.checker.check_model(out)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", default=os.path.join(HERE, "zoo"))
    ap.add_argument("--out", default=os.path.join(HERE, "zoo", "quantized"))
    ap.add_argument("--only", default="resnet18,transformer_encoder")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.only.split(","):
        path = os.path.join(args.zoo, name + ".onnx")
        with open(os.path.join(args.zoo, name + ".json")) as f:
            spec = json.load(f)
        model = onnx.load(path)
        qdq = quantize_model(model, spec)
        qop = to_qoperator(qdq)
        for suffix, m in (("_qdq", qdq), ("_qop", qop)):
            onnx.save(m, os.path.join(args.out, name + suffix + ".onnx"))
            s = dict(spec)
            s["name"] = name + suffix
            s["description"] = f"{name} quantized to 8 bits ({suffix[1:]} form) by models/quantize.py"
            s["nodes"] = len(m.graph.node)
            ops = {}
            for n in m.graph.node:
                ops[n.op_type] = ops.get(n.op_type, 0) + 1
            s["op_types"] = dict(sorted(ops.items()))
            with open(os.path.join(args.out, name + suffix + ".json"), "w") as f:
                json.dump(s, f, indent=2)
            print(f"{name + suffix:32s} {os.path.getsize(os.path.join(args.out, name + suffix + '.onnx')) / 1e6:6.2f} MB"
                  f"  {len(m.graph.node)} nodes  {s['op_types']}")


if __name__ == "__main__":
    sys.exit(main())
