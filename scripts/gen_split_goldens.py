#!/usr/bin/python3
"""Goldens for fx::split_module from torch.fx 1.13's torch.fx.passes.split_module.

Run with Debian's Python and torch (the plain `python3` on PATH has no torch):

    /usr/bin/python3 scripts/gen_split_goldens.py

For each case, traces a module, records which partition the callback gave each node, runs
split_module and writes tests/golden/split/<case>.txt (format: scripts/fx_golden_util.py) with
the input graph, attribute tree and partitions, and what torch produced: the module repr, the
outer graph text and code, each submod_N's graph text and code, and the qualname_map (or the
error torch raised). tests/cpp/split_test.cpp rebuilds the input, runs fx::split_module with the
recorded partitions and compares byte for byte.
"""
import os
import sys

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fx_golden_util as U  # noqa: E402

OUT = os.path.join(U.ROOT, "tests", "golden", "split")
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


class DocModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.param = torch.nn.Parameter(torch.rand(3, 4))
        self.linear = torch.nn.Linear(4, 5)

    def forward(self, x, y):
        z = self.linear(x + self.param).clamp(min=0.0, max=1.0)
        w = self.linear(y).clamp(min=0.0, max=1.0)
        return z + w


def round_robin(n):
    counter = [0]

    def cb(node):
        p = counter[0] % n
        counter[0] = (counter[0] + 1) % n
        return p
    return cb


@case
def docstring_example():
    return DocModule(), round_robin(3), {}


@case
def docstring_keep_original_order():
    return DocModule(), round_robin(3), {"keep_original_order": True}


@case
def two_partitions():
    return DocModule(), round_robin(2), {}


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = torch.nn.Module()
        self.sub.lin = torch.nn.Linear(4, 4)
        self.sub.register_buffer("scale", torch.ones(4))
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x, bias=None):
        h = torch.relu(self.sub.lin(x)) * self.sub.scale
        h = h + self.sub.lin.weight.sum()
        return self.head(h), h.mean()


@case
def nested_targets_and_qualname_map():
    def cb(node):
        return 0 if node.op == "call_module" and node.target.startswith("sub") else 7
    return Nested(), cb, {}


@case
def by_kind_keep_order():
    def cb(node):
        return {"call_module": 2, "call_function": 1}.get(node.op, 0)
    return Nested(), cb, {"keep_original_order": True}


@case
def by_kind_topological():
    def cb(node):
        return {"call_module": 2, "call_function": 1}.get(node.op, 0)
    return Nested(), cb, {}


class Independent(torch.nn.Module):
    def forward(self, x, y):
        a = torch.sin(x)
        b = torch.cos(y)
        c = a.neg()
        d = b.exp()
        return c, d, x


@case
def independent_roots():
    # Partitions 0 and 1 do not depend on each other: the topological order pops the last root
    # first (1 before 0); keep_original_order keeps 0 first.
    def cb(node):
        return 0 if node.name in ("sin", "neg") else 1
    return Independent(), cb, {}


@case
def independent_roots_keep_order():
    def cb(node):
        return 0 if node.name in ("sin", "neg") else 1
    return Independent(), cb, {"keep_original_order": True}


class Chain(torch.nn.Module):
    def forward(self, x):
        a = x + 1
        b = a * 2
        c = b - 1
        return c


@case
def cycle_is_an_error():
    def cb(node):
        return 1 if node.name == "mul" else 0
    return Chain(), cb, {}


@case
def kwargs_and_shared_inputs():
    class M(torch.nn.Module):
        def forward(self, x, y):
            a = torch.add(x, y, alpha=2)
            b = torch.clamp(a, min=0.0)
            c = torch.cat([a, b, x], dim=0)
            return torch.sum(c, dim=0, keepdim=True)

    def cb(node):
        return 5 if node.name in ("add", "sum_1") else 3
    return M(), cb, {}


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    torch.manual_seed(0)
    names = []
    for name, fn in CASES.items():
        mod, cb, kw = fn()
        traced = torch.fx.symbolic_trace(mod)
        parts = []

        def logged(node, cb=cb, parts=parts):
            p = cb(node)
            parts.append(f"{node.name}\t{p}")
            return p
        sections = [("graph", U.graph_lines(traced.graph)), ("modules", U.module_lines(traced)),
                    ("tensors", U.tensor_lines(traced)),
                    ("options", "keep_original_order" if kw.get("keep_original_order") else "")]
        qualname_map = {}
        try:
            split = split_module(traced, mod, logged, qualname_map, **kw)
        except Exception as e:  # noqa: BLE001
            sections += [("partitions", "\n".join(parts)), ("error", f"{type(e).__name__}: {e}")]
        else:
            sections += [("partitions", "\n".join(parts)), ("repr", repr(split)),
                         ("out.graph", str(split.graph)), ("out.code", split.code)]
            for sub_name, sub in split.named_children():
                if isinstance(sub, torch.fx.GraphModule):
                    sections += [(f"{sub_name}.graph", str(sub.graph)), (f"{sub_name}.code", sub.code)]
            sections.append(("qualname_map", "\n".join(f"{k}\t{v}" for k, v in qualname_map.items())))
        U.write(os.path.join(OUT, name + ".txt"), sections)
        names.append(name)
    U.write_index(OUT, names)
    print(f"wrote {len(names)} goldens to {OUT}")


if __name__ == "__main__":
    main()
