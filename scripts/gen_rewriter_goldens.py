#!/usr/bin/python3
"""Goldens for fx::replace_pattern from torch.fx 1.13's own subgraph_rewriter.

Run with Debian's Python and torch (the plain `python3` on PATH has no torch):

    /usr/bin/python3 scripts/gen_rewriter_goldens.py

For each case, traces the original module, the pattern and the replacement with torch.fx,
runs torch.fx.subgraph_rewriter.replace_pattern, and writes tests/golden/rewriter/<case>.txt:
the three input graphs in a line format the C++ test parses (one node per line:
op, name, target, args, kwargs separated by tabs; nodes as %name, other values as Python
literals), the matches (pattern anchor and the pattern->graph map) and the resulting code and
graph text. tests/cpp/rewriter_test.cpp rebuilds the graphs, runs fx::replace_pattern and
compares byte for byte.
"""
import os
import operator
import sys

import torch
import torch.fx
from torch.fx import subgraph_rewriter

from fx_golden_util import ROOT, lit, target

OUT = os.path.join(ROOT, "tests", "golden", "rewriter")


def graph_lines(g):  # five fields: the rewriter goldens carry no node types
    return "\n".join("\t".join([n.op, n.name, target(n), lit(tuple(n.args)), lit(dict(n.kwargs))])
                     for n in g.nodes)


def match_value(v):
    return v.name if isinstance(v, torch.fx.Node) else repr(v)


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


@case
def docstring_example():
    class M(torch.nn.Module):
        def forward(self, x, w1, w2):
            m1 = torch.cat([w1, w2]).sum()
            m2 = torch.cat([w1, w2]).sum()
            return x + torch.max(m1) + torch.max(m2)

    def pattern(w1, w2):
        return torch.cat([w1, w2]).sum()

    def replacement(w1, w2):
        return torch.stack([w1, w2])

    return M(), pattern, replacement


@case
def overlapping_chain():
    def f(a, b, c, d, e):
        return (((a + b) + c) + d) + e

    def pattern(x, y, z):
        return (x + y) + z

    def replacement(x, y, z):
        return torch.addcmul(x, y, z)

    return f, pattern, replacement


@case
def literal_types_must_match():
    def f(x):
        return (x + 1) * (x + 2) - (x + 1.0)

    def pattern(x):
        return x + 1

    def replacement(x):
        return x - 1

    return f, pattern, replacement


@case
def placeholder_binds_literal():
    def f(x, y):
        return torch.mul(x, 3) + torch.mul(y, y)

    def pattern(a, b):
        return torch.mul(a, b)

    def replacement(a, b):
        return torch.sub(a, b)

    return f, pattern, replacement


@case
def escaping_intermediate_is_not_matched():
    def f(x):
        r = torch.relu(x)
        return torch.sigmoid(r), r

    def pattern(x):
        return torch.sigmoid(torch.relu(x))

    def replacement(x):
        return torch.tanh(x)

    return f, pattern, replacement


@case
def multiple_outputs():
    def f(x):
        y = x + 1
        z = x + 1
        return torch.relu(x), torch.sigmoid(x), torch.relu(y), torch.sigmoid(z)

    def pattern(x):
        return torch.relu(x), torch.sigmoid(x)

    def replacement(x):
        return torch.tanh(x), torch.neg(x)

    return f, pattern, replacement


@case
def kwargs_must_match():
    def f(x):
        return torch.sum(x, dim=1) + torch.sum(x, 1)

    def pattern(x):
        return torch.sum(x, dim=1)

    def replacement(x):
        return torch.mean(x, dim=1)

    return f, pattern, replacement


@case
def call_method_pattern():
    def f(x):
        return x.relu().neg() + x.neg()

    def pattern(x):
        return x.relu().neg()

    def replacement(x):
        return torch.nn.functional.relu(x).mul(-1)

    return f, pattern, replacement


@case
def no_match_leaves_the_graph():
    def f(x):
        return torch.relu(x) + 1

    def pattern(x):
        return torch.sigmoid(x)

    def replacement(x):
        return torch.tanh(x)

    return f, pattern, replacement


@case
def repeated_placeholder():
    def f(x, y):
        return x * x + x * y

    def pattern(a):
        return a * a

    def replacement(a):
        return torch.square(a)

    return f, pattern, replacement


@case
def replacement_with_constants_and_kwargs():
    def f(x):
        return torch.relu(x * 2).sum()

    def pattern(x):
        return torch.relu(x * 2)

    def replacement(x):
        return torch.clamp(x * 2.0, min=0.0, max=None)

    return f, pattern, replacement


@case
def getitem_and_tuples():
    def f(x):
        t = torch.topk(x, 2)
        return t[0] + t[1]

    def pattern(x):
        t = torch.topk(x, 2)
        return t[0]

    def replacement(x):
        return torch.sort(x, descending=True)[0][..., :2]

    return f, pattern, replacement


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, make in CASES.items():
        mod, pattern, replacement = make()
        gm = torch.fx.symbolic_trace(mod)
        pg = torch.fx.symbolic_trace(pattern).graph
        rg = torch.fx.symbolic_trace(replacement).graph
        original = graph_lines(gm.graph)
        lines = [f"-- original\n{original}", f"-- pattern\n{graph_lines(pg)}",
                 f"-- replacement\n{graph_lines(rg)}", "-- matches"]
        try:
            matches = subgraph_rewriter.replace_pattern(gm, pattern, replacement)
        except KeyError as e:
            # 1.13 raises KeyError when a pattern anchor occurs nowhere in the graph; fxwasm
            # returns no match instead (the graph is left as it was, as here).
            matches = []
            lines.append(f"torch 1.13 raised KeyError: {e}")
        for m in matches:
            pairs = ", ".join(f"{pn.name}: {match_value(gn)}" for pn, gn in m.nodes_map.items())
            lines.append(f"anchor {m.anchor.name}: {{{pairs}}}")
        lines.append(f"-- code\n{gm.code}")
        lines.append(f"-- graph\n{gm.graph}")
        with open(os.path.join(OUT, name + ".txt"), "w", newline="") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{name}: {len(matches)} matches")
    with open(os.path.join(OUT, "INDEX.txt"), "w", newline="") as f:
        f.write("\n".join(CASES) + "\n")


if __name__ == "__main__":
    sys.exit(main())
