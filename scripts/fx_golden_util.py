"""Shared writer for the pass goldens (gen_split_goldens.py, gen_const_fold_goldens.py,
gen_fuse_goldens.py): a golden is a text file of sections "-- <name>\n<text>". The "graph"
section holds a traced graph in the line format tests/cpp/golden_graph_util.h parses (one node
per line: op, name, target, args, kwargs, type, separated by tabs; nodes as %name, other values as
Python literals); "modules" lists the attribute tree (path, class name, extra_repr) and "tensors"
its parameters and buffers (path, p|b, dtype, shape, values as float32 text that round-trips).
"""
import os

import torch
import torch.fx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def lit(v):
    if isinstance(v, torch.fx.Node):
        return "%" + v.name
    if isinstance(v, tuple):
        inner = ", ".join(lit(e) for e in v)
        return "(" + inner + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(lit(e) for e in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(repr(k) + ": " + lit(e) for k, e in v.items()) + "}"
    if isinstance(v, torch.dtype):
        return str(v)
    if v is Ellipsis:
        return "Ellipsis"
    if isinstance(v, slice):
        return f"slice({lit(v.start)}, {lit(v.stop)}, {lit(v.step)})"
    if v is None or isinstance(v, (bool, int, float, str)):
        return repr(v)
    raise SystemExit(f"cannot write {v!r} ({type(v).__name__})")


def target(n):
    if n.op == "call_function":
        return n._pretty_print_target(n.target)
    return str(n.target)


def type_str(n):
    if n.type is None:
        return ""
    return torch.fx.graph._type_repr(n.type) if hasattr(torch.fx.graph, "_type_repr") else repr(n.type)


def graph_lines(g):
    return "\n".join("\t".join([n.op, n.name, target(n), lit(tuple(n.args)), lit(dict(n.kwargs)),
                                type_str(n)]) for n in g.nodes)


def module_lines(m):
    out = []
    for name, sub in m.named_modules():
        if not name:
            continue
        out.append("\t".join([name, type(sub).__name__, sub.extra_repr().replace("\n", "\\n")]))
    return "\n".join(out)


def tensor_lines(m):
    out = []
    params = set(n for n, _ in m.named_parameters())
    for name, t in list(m.named_parameters()) + list(m.named_buffers()):
        t = t.detach()
        vals = " ".join(format(float(v), ".9g") for v in t.reshape(-1).tolist())
        dtype = str(t.dtype).replace("torch.", "")
        out.append("\t".join([name, "p" if name in params else "b", dtype,
                              ",".join(str(d) for d in t.shape), vals]))
    return "\n".join(out)


def write(path, sections):
    with open(path, "w") as f:
        for name, text in sections:
            f.write(f"-- {name}\n{text}\n")


def write_index(out_dir, names):
    with open(os.path.join(out_dir, "INDEX.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
