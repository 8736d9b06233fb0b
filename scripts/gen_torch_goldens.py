#!/usr/bin/python3
"""Goldens for the LibTorch layer (tests/torch/): what torch.fx 1.13 prints for the Python twin of
every C++ model of the zoo (tests/torch/zoo.h).

Run with Debian's interpreter that has torch:   /usr/bin/python3 scripts/gen_torch_goldens.py

For every model NAME it writes to tests/golden/torch/:
  NAME.graph.txt     str(gm.graph) after torch.fx.symbolic_trace
  NAME.code.py       gm.code
  NAME.readable.py   what gm.print_readable() prints
  NAME.repr.txt      nn.Module.__repr__(gm) (the attribute tree the GraphModule copied)
  NAME.shapes.txt    ShapeProp: `node: meta['tensor_meta']` per node that has one
Inputs for ShapeProp are zeros of the shapes in MODELS (only shapes matter; ("long", shape) is
an int64 input).
Output is deterministic: rerunning produces identical files.
"""
import contextlib
import io
import math
import os
import warnings

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

# The twins scripts/gen_goldens.py already defines (the C++ zoo mirrors the same classes).
from gen_goldens import CNN, GetItem, MyModule, TopkModule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "torch")

warnings.filterwarnings("ignore")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 4)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.drop(x)
        x = torch.relu(self.fc2(x))
        x = F.dropout(x, p=0.2, training=self.training)
        return self.fc3(x).softmax(dim=-1)


def resnet18():
    import torchvision
    return torchvision.models.resnet18()


class EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block; attention written with matmul/softmax."""

    def __init__(self, d=64, heads=4, ff=128):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ff)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(ff, d)

    def forward(self, x):
        b = x.size(0)
        t = x.size(1)
        c = x.size(2)
        hd = c // self.heads
        qkv = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        q = qkv[0]
        k = qkv[1]
        v = qkv[2]
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = self.drop(att.softmax(dim=-1))
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class DictTuple(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(4))
        self.lin = nn.Linear(4, 4)

    def forward(self, x, y=None, alpha: float = 2.0):
        a = torch.cat([x, x * alpha], dim=0)
        b = torch.zeros(2, 4)
        c = a.to(torch.float64)
        d = torch.clamp(x, min=-math.inf, max=float("inf"))
        e = (x * self.scale, self.lin(x))
        return {"cat": a, "zeros": b, "tup": (c, d), "lst": [e[0], e[1], None], "n": 3}, (a, e[1])


class Ops(nn.Module):
    """Reflected operators, tensor-first operators, parameters vs buffers vs constants."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(4, 4))
        self.register_buffer("b", torch.ones(4))

    def forward(self, x):
        c = torch.ones(4)
        a = 1 + x
        m = 2.0 * a - 1 / x
        n = -m
        p = n ** 2 + 2 ** x
        q = c + p
        r = self.b * q
        s = self.w * r
        t = (s @ self.w).transpose(0, 1)
        u = (t > 0) | (t < -1)
        return torch.where(u, t, x % 3 // 2), t.sum(dim=0, keepdim=True)


class Layers(nn.Module):
    """The other LibTorch layers: Embedding, Conv1d/3d, BatchNorm1d/3d, ModuleList, AvgPool2d,
    Flatten, GELU, LayerNorm."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.conv1d = nn.Conv1d(8, 8, 3, padding=1)
        self.bn1d = nn.BatchNorm1d(8)
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8)])
        self.conv3d = nn.Conv3d(1, 2, 3, padding=1)
        self.bn3d = nn.BatchNorm3d(2)
        self.pool = nn.AvgPool2d(2)
        self.flat = nn.Flatten()

    def forward(self, idx, vol):
        h = self.emb(idx)
        h = self.bn1d(self.conv1d(h.transpose(1, 2))).transpose(1, 2)
        for blk in self.blocks:
            h = blk(h)
        v = self.bn3d(self.conv3d(vol))
        v = self.pool(v.sum(dim=2))
        return h.mean(dim=1), self.flat(v)


class Concrete(nn.Module):
    def forward(self, x, flag, y):
        out = x + 1 if flag else x * 2
        if y is None:
            return out
        return out + y


class Leafy(nn.Module):
    """Traced with a Tracer whose is_leaf_module also keeps `block` (a user module) a leaf."""

    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.block(x))


class LeafTracer(torch.fx.Tracer):
    def is_leaf_module(self, m, qualname):
        return qualname == "block" or super().is_leaf_module(m, qualname)


# name -> (module factory, ShapeProp input shapes or None, concrete_args, tracer class)
MODELS = {
    "my_module": (MyModule, [(3, 4)], None, None),
    "topk": (TopkModule, [(5, 4)], None, None),
    "mlp": (MLP, [(8, 16)], None, None),
    "cnn": (CNN, [(2, 3, 16, 16)], None, None),
    "resnet18": (resnet18, [(1, 3, 64, 64)], None, None),
    "encoder_block": (EncoderBlock, [(2, 10, 64)], None, None),
    "dict_tuple": (DictTuple, [(2, 4)], None, None),
    "getitem": (GetItem, [(2, 4, 6)], None, None),
    "ops": (Ops, [(4, 4)], None, None),
    "layers": (Layers, [("long", (2, 5)), (2, 1, 4, 6, 6)], None, None),
    "concrete": (Concrete, None, {"flag": True, "y": None}, None),
    "leafy": (Leafy, [(3, 4)], None, LeafTracer),
}


def make_input(spec):
    if spec and spec[0] == "long":
        return torch.zeros(spec[1], dtype=torch.long)
    return torch.zeros(spec)


def printed(f):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        f()
    s = buf.getvalue()
    assert s.endswith("\n")
    return s[:-1]


def stable_memory_format(m):
    """torch 1.13's ShapeProp reports the first memory format a tensor is contiguous in, iterating
    a *set* whose order changes between runs: a [2, 16, 1, 1] tensor is contiguous_format in one
    run and channels_last in the next. The goldens (and the C++ ShapeProp) take the first of
    contiguous_format, channels_last, channels_last_3d."""
    t = torch.empty_strided(tuple(m.shape), m.stride)
    for fmt in (torch.contiguous_format, torch.channels_last, torch.channels_last_3d):
        if t.is_contiguous(memory_format=fmt):
            return m._replace(memory_format=fmt)
    return m._replace(memory_format=None)


def fmt_meta(m):
    if isinstance(m, TensorMetadata):
        return repr(stable_memory_format(m))
    if isinstance(m, (tuple, list)):
        inner = ", ".join(fmt_meta(e) for e in m)
        if isinstance(m, tuple):
            return "(" + inner + ("," if len(m) == 1 else "") + ")"
        return "[" + inner + "]"
    if isinstance(m, dict):
        return "{" + ", ".join(f"{k!r}: {fmt_meta(v)}" for k, v in m.items()) + "}"
    return repr(m)


def write(name, suffix, text):
    with open(os.path.join(GOLDEN, f"{name}.{suffix}"), "w", newline="\n") as f:
        f.write(text)


def main():
    os.makedirs(GOLDEN, exist_ok=True)
    for name, (factory, shapes, concrete, tracer_cls) in MODELS.items():
        torch.manual_seed(0)
        m = factory().eval()
        if tracer_cls is None:
            gm = torch.fx.symbolic_trace(m, concrete_args=concrete)
        else:
            graph = tracer_cls().trace(m, concrete_args=concrete)
            gm = torch.fx.GraphModule(m, graph, m.__class__.__name__)
        write(name, "graph.txt", str(gm.graph))
        write(name, "code.py", gm.code)
        write(name, "readable.py", printed(gm.print_readable))
        write(name, "repr.txt", nn.Module.__repr__(gm))
        if shapes is not None:
            ShapeProp(gm).propagate(*[make_input(s) for s in shapes])
            lines = [f"{n.name}: {fmt_meta(n.meta['tensor_meta'])}"
                     for n in gm.graph.nodes if "tensor_meta" in n.meta]
            write(name, "shapes.txt", "\n".join(lines) + "\n")
    with open(os.path.join(GOLDEN, "INDEX.txt"), "w") as f:
        f.write("\n".join(MODELS) + "\n")


if __name__ == "__main__":
    main()
