#!/usr/bin/python3
"""Goldens for fx::fuse_conv_bn_modules from torch.fx 1.13's
torch.fx.experimental.optimization.fuse (conv + batch-norm folding of traced modules).

    /usr/bin/python3 scripts/gen_fuse_goldens.py

For each seeded eval-mode module, writes tests/golden/fuse/<case>.txt (format:
scripts/fx_golden_util.py): the traced graph and attribute tree with every tensor's values, and
what torch produced: the fused module's repr, graph text and code, and its parameters and buffers
("fused_tensors", float32 values as text that round-trips). tests/cpp/fuse_test.cpp fuses in C++
and compares the text byte for byte and the tensors numerically.
"""
import os
import sys

import torch
import torch.fx
from torch.fx.experimental.optimization import fuse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fx_golden_util as U  # noqa: E402

OUT = os.path.join(U.ROOT, "tests", "golden", "fuse")
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def randomize_bn(m):
    for mod in m.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            if mod.affine:
                mod.weight.data = torch.randn_like(mod.weight)
                mod.bias.data = torch.randn_like(mod.bias)
            if mod.track_running_stats:
                mod.running_mean.data = torch.randn_like(mod.running_mean)
                mod.running_var.data = torch.rand_like(mod.running_var) + 0.5
    return m


@case
def conv_bn_relu_chain():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(8)
            self.conv2 = torch.nn.Conv2d(8, 4, 1)
            self.bn2 = torch.nn.BatchNorm2d(4, eps=1e-3)

        def forward(self, x):
            return self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
    return M(), (1, 3, 6, 6)


@case
def conv_used_twice_is_kept():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 4, 3)
            self.bn = torch.nn.BatchNorm2d(4)
            self.conv_b = torch.nn.Conv2d(2, 4, 3, stride=2, groups=2)
            self.bn_b = torch.nn.BatchNorm2d(4)

        def forward(self, x):
            c = self.conv(x)
            return self.bn(c) + c.mean(), self.bn_b(self.conv_b(x))
    return M(), (1, 2, 7, 7)


@case
def nested_conv1d_and_affine_false():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(4, 6, 3, padding=1)
            self.bn = torch.nn.BatchNorm1d(6, affine=False)

        def forward(self, x):
            return self.bn(self.conv(x))

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.conv3 = torch.nn.Conv3d(6, 2, 1, bias=False)
            self.bn3 = torch.nn.BatchNorm3d(2)

        def forward(self, x):
            y = self.block(x)
            return self.bn3(self.conv3(y.unsqueeze(-1).unsqueeze(-1)))
    return M(), (1, 4, 5)


@case
def no_running_stats_is_kept():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 3, 1)
            self.bn = torch.nn.BatchNorm2d(3, track_running_stats=False)
            self.conv2 = torch.nn.Conv2d(3, 3, 1)
            self.bn2 = torch.nn.BatchNorm2d(3)

        def forward(self, x):
            return self.bn2(self.conv2(self.bn(self.conv(x))))
    return M(), (2, 3, 4, 4)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    torch.manual_seed(0)
    names = []
    for name, fn in CASES.items():
        mod, shape = fn()
        mod = randomize_bn(mod).eval()
        traced = torch.fx.symbolic_trace(mod)
        fused = fuse(mod)
        x = torch.randn(*shape)
        a, b = traced(x), fused(x)
        for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            assert torch.allclose(u, v, atol=1e-5), name
        sections = [("graph", U.graph_lines(traced.graph)), ("modules", U.module_lines(traced)),
                    ("tensors", U.tensor_lines(traced)), ("repr", repr(fused)),
                    ("fused.graph", str(fused.graph)), ("fused.code", fused.code),
                    ("fused_tensors", U.tensor_lines(fused))]
        U.write(os.path.join(OUT, name + ".txt"), sections)
        names.append(name)
    U.write_index(OUT, names)
    print(f"wrote {len(names)} goldens to {OUT}")


if __name__ == "__main__":
    main()
