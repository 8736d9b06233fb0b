#!/usr/bin/python3
"""Export fxwasm's model zoo to ONNX with seeded random weights.

Run with Debian's interpreter that has torch (python3-torch 1.13, python3-torchvision, python3-onnx):

    /usr/bin/python3 models/generate.py [--out DIR] [--only name,...] [--small] [--sample] [--bench]

For every model NAME the script writes, into DIR (default models/zoo/, git-ignored):

  NAME.onnx   exported by torch.onnx.export, then checked by onnx.checker.check_model
  NAME.json   the input/output specs (name, shape, dtype), opset, node count and op-type histogram;
              scripts/ort_run.mjs reads it to build seeded random inputs

Weights come from torch.manual_seed(SEED) right before each model is built, so every run exports
byte-identical files (checked for models/sample.onnx by --sample, see below).

  --small    only the models that export in well under a second (skips the torchvision CNNs)
  --bench    also export the benchmark-only models (not part of the default zoo): `resnet50`
             (torchvision ResNet-50, ~98 MB, the "~100 MB model" of bench/run_onnx_import.sh);
             `--only resnet50` exports it alone
  --sample   also (re)write the committed sample models/sample.onnx + models/sample.json, a copy of
             `cnn_bn_train` (Conv, BatchNormalization in training mode, Relu, pooling, Gemm; ~9 KB),
             and verify that exporting it twice gives the same bytes

A summary table (name, size, nodes, op types) goes to stdout.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import io
import json
import math
import os
import re
import sys
import time
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import onnx
import onnx.checker
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "zoo")
SAMPLE_MODEL = "cnn_bn_train"
SEED = 0
DEFAULT_OPSET = 13

warnings.filterwarnings("ignore")  # torch.onnx's tracer warnings are expected and noisy


# --- models ---------------------------------------------------------------------------------------


class MyModule(nn.Module):
    """torch.fx's seed example: a parameter, a linear layer and a clamp."""

    def __init__(self) -> None:
        super().__init__()
        self.param = nn.Parameter(torch.rand(3, 4))
        self.linear = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x + self.param).clamp(min=0.0, max=1.0)


class MLP(nn.Module):
    """Three linear layers with ReLU and dropout (exported in eval mode, so dropout vanishes)."""

    def __init__(self, d_in: int = 64, hidden: int = 128, d_out: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden), nn.ReLU(), nn.Dropout(0.1),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(0.1),
            nn.Linear(hidden, d_out),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ConvBnReluCNN(nn.Module):
    """Two conv-bn-relu stages, a max pool, global average pooling and a classifier."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


class GPTBlock(nn.Module):
    """A GPT-2 style pre-LN decoder block: causal self-attention written out with matmul/softmax,
    LayerNorm and a GELU MLP (opset 13 decomposes LayerNorm and GELU into primitive ops)."""

    def __init__(self, d_model: int = 64, heads: int = 4, max_seq: int = 16) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.fc_out = nn.Linear(4 * d_model, d_model)
        mask = torch.tril(torch.ones(max_seq, max_seq)).view(1, 1, max_seq, max_seq)
        self.register_buffer("mask", mask)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        hd = c // self.heads
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.heads, hd).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))


class LSTMModel(nn.Module):
    """A two-layer batch-first LSTM followed by a linear head on every step."""

    def __init__(self, d_in: int = 16, hidden: int = 32, d_out: int = 8) -> None:
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y, (h, c) = self.lstm(x)
        return self.head(y), h, c


def transformer_encoder() -> nn.Module:
    """nn.TransformerEncoder: d_model 64, 4 heads, 2 layers, feed-forward 128, batch_first."""
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.1, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


def bert_encoder() -> nn.Module:
    """A BERT-base-sized encoder: 12 post-LN layers of d_model 768, 12 heads, feed-forward 3072,
    GELU, batch_first; embeddings in, hidden states out; batch and sequence length dynamic;
    ~340 MB, benchmark-only."""
    layer = nn.TransformerEncoderLayer(768, 12, dim_feedforward=3072, dropout=0.1,
                                       activation="gelu", batch_first=True)
    encoder = nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)
    # The layers are deep copies of one: give each its own weights, or the exporter keeps one
    # copy (equal initializers are shared) and the model is 1/12 of BERT's size.
    for p in encoder.parameters():
        nn.init.normal_(p, std=0.02)
    return encoder


@dataclasses.dataclass
class Spec:
    """How to build and export one zoo model."""

    name: str
    description: str
    build: Callable[[], nn.Module]
    inputs: Dict[str, Tuple[int, ...]]  # input name -> shape (float32)
    outputs: List[str]
    opset: int = DEFAULT_OPSET
    training: bool = False  # export with TrainingMode.TRAINING (model in train mode)
    # export with TrainingMode.PRESERVE (model in eval mode): the exporter's eval peephole, which
    # folds BatchNormalization into Conv even without constant folding, does not run
    preserve: bool = False
    small: bool = True  # exports quickly; part of --small
    bench_only: bool = False  # not in the default zoo: only with --bench or --only NAME
    # input/output name -> {dim: symbolic name}: axes exported dynamic (torch.onnx dynamic_axes)
    dynamic: Optional[Dict[str, Dict[int, str]]] = None


IMAGE = {"input": (1, 3, 224, 224)}

ZOO: List[Spec] = [
    Spec("mymodule", "torch.fx's seed MyModule: x + param, Linear(4, 5), clamp(0, 1)",
         MyModule, {"x": (3, 4)}, ["y"]),
    Spec("mlp", "MLP 64-128-128-10 with ReLU and Dropout(0.1), eval mode",
         MLP, {"x": (8, 64)}, ["logits"]),
    Spec("cnn_bn_train", "conv-bn-relu x2, max pool, global average pool, Linear; exported in "
         "training mode so BatchNormalization (training_mode=1) survives",
         ConvBnReluCNN, {"input": (2, 3, 32, 32)}, ["logits"], opset=15, training=True),
    Spec("cnn_bn_eval", "the same CNN in eval mode, exported with TrainingMode.PRESERVE so that "
         "inference BatchNormalization follows each Conv unfused (for the fuse-conv-bn pass)",
         ConvBnReluCNN, {"input": (2, 3, 32, 32)}, ["logits"], opset=15, preserve=True),
    Spec("resnet18", "torchvision ResNet-18 (BN folded into Conv by the exporter)",
         lambda: torchvision.models.resnet18(weights=None), IMAGE, ["logits"], small=False),
    Spec("mobilenet_v2", "torchvision MobileNetV2 (BN folded, Clip for ReLU6)",
         lambda: torchvision.models.mobilenet_v2(weights=None), IMAGE, ["logits"], small=False),
    Spec("squeezenet1_1", "torchvision SqueezeNet 1.1 (Concat of expand branches, ceil-mode MaxPool)",
         lambda: torchvision.models.squeezenet1_1(weights=None), IMAGE, ["logits"], small=False),
    Spec("shufflenet_v2_x1_0", "torchvision ShuffleNetV2 x1.0 (channel shuffle: Reshape/Transpose, "
         "Split)", lambda: torchvision.models.shufflenet_v2_x1_0(weights=None), IMAGE, ["logits"],
         small=False),
    Spec("efficientnet_b0", "torchvision EfficientNet-B0 (SiLU as Sigmoid*Mul, squeeze-excitation)",
         lambda: torchvision.models.efficientnet_b0(weights=None), IMAGE, ["logits"], small=False),
    Spec("transformer_encoder", transformer_encoder.__doc__ or "", transformer_encoder,
         {"src": (1, 16, 64)}, ["output"]),
    Spec("gpt_block", "GPT-style pre-LN decoder block: causal mask, LayerNorm, multi-head attention "
         "with MatMul/Softmax, GELU MLP; d_model 64, 4 heads, seq 16",
         GPTBlock, {"x": (1, 16, 64)}, ["y"]),
    Spec("lstm", "2-layer LSTM (input 16, hidden 32, batch_first) and a Linear head; seq 10",
         LSTMModel, {"x": (2, 10, 16)}, ["y", "h", "c"]),
    Spec("transformer_dynamic", "nn.TransformerEncoder (d_model 32, 4 heads, 1 layer, batch_first) "
         "exported with dynamic batch and sequence axes: its shape arithmetic (Shape, Gather, "
         "Concat, Reshape) depends on the input",
         lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(
             32, 4, dim_feedforward=64, dropout=0.1, batch_first=True), num_layers=1,
             enable_nested_tensor=False),
         {"src": (2, 7, 32)}, ["output"],
         dynamic={"src": {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}}),
    Spec("cnn_dynamic", "the conv-bn-relu CNN in eval mode with a dynamic batch axis",
         ConvBnReluCNN, {"input": (2, 3, 32, 32)}, ["logits"], opset=15,
         dynamic={"input": {0: "N"}, "logits": {0: "N"}}),
    # Benchmark-only, big models (issue 19; bench/run_big_models.sh): opset 14 as the issue's
    # torchvision exports, seeded random weights.
    Spec("convnext_tiny", "torchvision ConvNeXt-T (7x7 depthwise convs, channels-last LayerNorm, "
         "GELU); ~110 MB, benchmark-only", lambda: torchvision.models.convnext_tiny(weights=None),
         IMAGE, ["logits"], opset=14, small=False, bench_only=True),
    Spec("vit_b_16", "torchvision ViT-B/16 (12 layers, 12 heads, d 768); ~330 MB, benchmark-only",
         lambda: torchvision.models.vit_b_16(weights=None), IMAGE, ["logits"], opset=14,
         small=False, bench_only=True),
    Spec("bert_encoder", bert_encoder.__doc__ or "", bert_encoder, {"x": (1, 128, 768)},
         ["y"], opset=14, small=False, bench_only=True,
         dynamic={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}),
    # Benchmark-only (bench/run_onnx_import.sh): the ~100 MB model of SPEC §3's import target.
    Spec("resnet50", "torchvision ResNet-50 (BN folded into Conv by the exporter); ~98 MB, "
         "benchmark-only", lambda: torchvision.models.resnet50(weights=None), IMAGE, ["logits"],
         small=False, bench_only=True),
]


# --- export ---------------------------------------------------------------------------------------


def export(spec: Spec) -> onnx.ModelProto:
    """Build `spec`'s model from a fixed seed, export it and return the checked ModelProto."""
    torch.manual_seed(SEED)
    model = spec.build()
    model.train(spec.training)
    args = tuple(torch.randn(*shape) for shape in spec.inputs.values())
    buf = io.BytesIO()
    # Not under torch.no_grad(): with grad enabled nn.TransformerEncoderLayer skips its fused
    # fast path (aten::_transformer_encoder_layer_fwd), which has no ONNX symbolic.
    torch.onnx.export(
        model, args, buf,
        opset_version=spec.opset,
        input_names=list(spec.inputs),
        output_names=spec.outputs,
        training=(torch.onnx.TrainingMode.TRAINING if spec.training else
                  torch.onnx.TrainingMode.PRESERVE if spec.preserve else
                  torch.onnx.TrainingMode.EVAL),
        do_constant_folding=not spec.training,
        dynamic_axes=spec.dynamic,
        verbose=False,
    )
    proto = onnx.load_from_string(buf.getvalue())
    strip_doc_strings(proto)
    onnx.checker.check_model(proto, full_check=True)
    return proto


def strip_doc_strings(proto: onnx.ModelProto) -> None:
    """Clear every doc_string (the exporter can put source locations there)."""
    proto.doc_string = ""
    proto.graph.doc_string = ""
    for node in proto.graph.node:
        node.doc_string = ""


DTYPE_NAMES = {
    onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.INT64: "int64", onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.BOOL: "bool", onnx.TensorProto.UINT8: "uint8",
}


def value_specs(values: Sequence[onnx.ValueInfoProto]) -> List[dict]:
    """[{name, shape, dtype}] of graph inputs/outputs (symbolic dims kept as their names)."""
    out = []
    for v in values:
        t = v.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]
        out.append({"name": v.name, "shape": shape, "dtype": DTYPE_NAMES[t.elem_type]})
    return out


def describe(spec: Spec, proto: onnx.ModelProto) -> dict:
    """The NAME.json document for an exported model."""
    ops = collections.Counter(n.op_type for n in proto.graph.node)
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    return {
        "name": spec.name,
        "description": spec.description,
        "opset": opset,
        "seed": SEED,
        # A dynamic input also records the shape it was exported at ("example"), which the
        # benchmarks run it at.
        "inputs": [dict(v, example=list(spec.inputs[v["name"]]))
                   if any(isinstance(d, str) for d in v["shape"]) else v
                   for v in value_specs(proto.graph.input)],
        "outputs": value_specs(proto.graph.output),
        "nodes": len(proto.graph.node),
        "initializers": len(proto.graph.initializer),
        "op_types": dict(sorted(ops.items())),
    }


def write(out_dir: str, name: str, proto: onnx.ModelProto, info: dict) -> bytes:
    """Write NAME.onnx and NAME.json into `out_dir`; returns the model bytes."""
    data = proto.SerializeToString()
    with open(os.path.join(out_dir, name + ".onnx"), "wb") as f:
        f.write(data)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        f.write(to_json(info))
    return data


def to_json(doc: dict) -> str:
    """Indented JSON with lists of scalars (shapes) kept on one line."""
    text = json.dumps(doc, indent=2)
    flat = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    return flat + "\n"


def write_sample() -> None:
    """Export the sample model twice, require identical bytes, write models/sample.{onnx,json}."""
    spec = next(s for s in ZOO if s.name == SAMPLE_MODEL)
    first, second = export(spec), export(spec)
    if first.SerializeToString() != second.SerializeToString():
        sys.exit(f"error: exporting {spec.name} twice gave different bytes")
    info = describe(spec, first)
    info["name"] = "sample"
    data = write(HERE, "sample", first, info)
    print(f"models/sample.onnx: {spec.name}, {len(data)} bytes, deterministic")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="output folder (default models/zoo)")
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--small", action="store_true", help="skip the torchvision CNNs")
    parser.add_argument("--sample", action="store_true", help="also rewrite models/sample.onnx")
    parser.add_argument("--bench", action="store_true",
                        help="also export the benchmark-only models (resnet50, ~98 MB)")
    args = parser.parse_args(argv)

    specs = [s for s in ZOO if args.bench or not s.bench_only]
    if args.only:
        names = args.only.split(",")
        unknown = sorted(set(names) - {s.name for s in ZOO})
        if unknown:
            parser.error(f"unknown model(s) {', '.join(unknown)}; known: "
                         + ", ".join(s.name for s in ZOO))
        specs = [s for s in ZOO if s.name in names]
    if args.small:
        specs = [s for s in specs if s.small]
    os.makedirs(args.out, exist_ok=True)

    start = time.perf_counter()
    rows = []
    for spec in specs:
        t0 = time.perf_counter()
        proto = export(spec)
        info = describe(spec, proto)
        data = write(args.out, spec.name, proto, info)
        ops = " ".join(f"{op}:{n}" if n > 1 else op for op, n in info["op_types"].items())
        rows.append((spec.name, len(data), info["nodes"], time.perf_counter() - t0, ops))
    if args.sample:
        write_sample()

    print(f"{'model':<20} {'bytes':>10} {'nodes':>6} {'secs':>6}  op types")
    for name, size, nodes, secs, ops in rows:
        print(f"{name:<20} {size:>10} {nodes:>6} {secs:>6.2f}  {ops}")
    print(f"{len(rows)} models in {time.perf_counter() - start:.1f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
