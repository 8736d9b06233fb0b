#!/usr/bin/python3
"""Goldens for fx::split_const_subgraphs from torch.fx 1.13's
torch.fx.experimental.const_fold.split_const_subgraphs (the graph surgery only).

    /usr/bin/python3 scripts/gen_const_fold_goldens.py

Writes tests/golden/const_fold/<case>.txt (format: scripts/fx_golden_util.py): the traced input,
its attribute tree, the nodes the skip function skipped, and what torch produced: the folded
attribute's name, the main graph's text and code and the const subgraph's text and code.
tests/cpp/const_fold_test.cpp compares byte for byte.
"""
import os
import sys

import torch
import torch.fx
from torch.fx.experimental import const_fold

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fx_golden_util as U  # noqa: E402

OUT = os.path.join(U.ROOT, "tests", "golden", "const_fold")
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


@case
def single_folded_value():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(4, 4))
            self.b = torch.nn.Parameter(torch.randn(4, 4))

        def forward(self, x):
            w = self.a + self.b
            return x @ w.t()
    return M(), None


@case
def two_folded_values():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 3))
            self.register_buffer("scale", torch.rand(3))

        def forward(self, x):
            ws = self.w * self.scale
            b = torch.relu(self.scale).sum()
            return torch.mm(x, ws) + b
    return M(), None


@case
def nested_attrs_and_module_call():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = torch.nn.Module()
            self.sub.p = torch.nn.Parameter(torch.randn(2, 4))
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            c = self.lin(self.sub.p)  # constant: a module applied to a parameter
            return self.lin(x) + c.sum(0)
    return M(), None


@case
def nothing_to_fold():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(4))

        def forward(self, x):
            return x + self.a
    return M(), None


@case
def skip_function():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(4))
            self.b = torch.nn.Parameter(torch.randn(4))

        def forward(self, x):
            s = self.a + self.b
            t = torch.sigmoid(s)
            u = self.a * 2
            return x * t + u
    return M(), lambda n: n.name == "sigmoid"


@case
def attr_name_taken():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(4))
            self._FX_CONST_FOLDED_ATTRS = torch.nn.Parameter(torch.randn(4))

        def forward(self, x):
            return x + self.a.neg() + self._FX_CONST_FOLDED_ATTRS
    return M(), None


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    torch.manual_seed(0)
    names = []
    for name, fn in CASES.items():
        mod, skip = fn()
        traced = torch.fx.symbolic_trace(mod)
        skipped = [n.name for n in traced.graph.nodes if skip and skip(n)]
        sections = [("graph", U.graph_lines(traced.graph)), ("modules", U.module_lines(traced)),
                    ("tensors", U.tensor_lines(traced)), ("skip", "\n".join(skipped))]
        folded = const_fold.split_const_subgraphs(traced, skip)
        sections += [("attr_name", str(folded.fx_const_folded_attrs_name)),
                     ("main.graph", str(folded.graph)), ("main.code", folded.code)]
        c = folded.const_subgraph_module
        sections += [("const.graph", "None" if c is None else str(c.graph)),
                     ("const.code", "None" if c is None else c.code)]
        # The folded values, to prove the main graph reads them right (checked in python here).
        x = torch.randn(2, 4) if name != "two_folded_values" else torch.randn(3, 3)
        assert torch.allclose(folded(x), traced(x), atol=1e-5), name
        U.write(os.path.join(OUT, name + ".txt"), sections)
        names.append(name)
    U.write_index(OUT, names)
    print(f"wrote {len(names)} goldens to {OUT}")


if __name__ == "__main__":
    main()
