#!/usr/bin/python3
"""Regenerate every golden file under tests/golden/ from the oracle (real torch.fx, torch 1.13).

Run with Debian's interpreter that has torch:   /usr/bin/python3 scripts/gen_goldens.py

Each case is a small function below (its docstring's first line goes to INDEX.txt). It builds a
graph through torch.fx's own Graph API (or symbolic_trace for the reference modules of
docs/inventory section 2.5) and returns a Case. For every case NAME the script writes:

  NAME.graph.txt            str(graph)                                (torch 1.13: `[#users=N]`)
  NAME.graph_num_users.txt  the same with `[#users=` -> `[num_users=` (how torch 2.x prints)
  NAME.tabular.txt          stdout of graph.print_tabular(), addresses masked to 0x000000000000
  NAME.code.py              graph.python_code('self').src (== GraphModule.code), byte-exact
  NAME.extra.txt            optional: `-- key` lines, each followed by the value and a newline

tests/cpp/golden_test.cpp builds the same graphs through the C++ API and compares byte for byte.
Output is deterministic: rerunning produces identical files.
"""
import contextlib
import copy
import inspect
import io
import math
import operator
import os
import re
import sys
import typing
import warnings

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import Graph, GraphModule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden")

warnings.filterwarnings("ignore")

ADDR_RE = re.compile(r"0x[0-9a-f]+")
MASK = "0x000000000000"


class Case:
    def __init__(self, graph, extra=None, gm=None):
        self.graph = graph
        self.extra = extra or []  # list of (key, value)
        self.gm = gm


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def capture(f, *args):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        f(*args)
    return buf.getvalue()


def printed(f, *args):
    """What f(*args) print()s, without the newline print() adds."""
    s = capture(f, *args)
    assert s.endswith("\n")
    return s[:-1]


def mask_addresses(text):
    def repl(m):
        addr = m.group(0)
        if len(addr) != 2 + 12:
            raise SystemExit(f"address {addr} does not have 12 hex digits; column widths of the "
                             "masked table would differ from the original")
        return MASK
    return ADDR_RE.sub(repl, text)


def names(nodes):
    return "[" + ", ".join(n.name for n in nodes) + "]"


def error_text(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001
        return str(e)
    raise SystemExit(f"expected an exception from {f}")


def module_extras(gm):
    return [
        ("module_repr", nn.Module.__repr__(gm)),
        ("str", str(gm)),
        ("print_readable", printed(gm.print_readable)),
    ]


# ---------------------------------------------------------------------------------------------
# The five reference modules (inventory section 2.5), traced with symbolic_trace.


class MyModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.param = torch.nn.Parameter(torch.rand(3, 4))
        self.linear = torch.nn.Linear(4, 5)

    def forward(self, x):
        return self.linear(x + self.param).clamp(min=0.0, max=1.0)


class TopkModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.param = torch.nn.Parameter(torch.rand(3, 4))
        self.linear = torch.nn.Linear(4, 5)

    def forward(self, x):
        return torch.topk(torch.sum(self.linear(x + self.linear.weight).relu(), dim=-1), 3)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.MaxPool2d(2))
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.features(x)
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        x = self.drop(x)
        return F.log_softmax(self.fc(x), dim=1)


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x, y=None, alpha: float = 2.0):
        a = torch.cat([x, x * alpha], dim=0)
        b = torch.zeros(2, 4, dtype=torch.float32, device=torch.device("cpu"))
        c = a.to(torch.float64)
        d = torch.clamp(x, min=-math.inf, max=float('inf'))
        e = (x * self.scale, torch.tensor([1.0, 2.0]))
        return {"cat": a, "zeros": b, "tup": (c, d), "lst": [e[0], e[1], None], "n": 3}


class GetItem(nn.Module):
    def forward(self, x):
        b = x.size(0)
        c = x.shape[1]
        y = x.view(b, -1)
        z = x[:, 1:3]
        w = x[..., None, 0]
        s = y[0]
        n = x.size()[-1]
        return y.reshape(b, c, -1) + z.sum() + w.mean() + s.max() * n, x.dim()


def traced(cls):
    torch.manual_seed(0)
    m = cls()
    if cls is CNN:
        m.eval()
    gm = torch.fx.symbolic_trace(m)
    return Case(gm.graph, module_extras(gm), gm)


@case
def ref_my_module():
    """MyModule traced: get_attr param, call_module linear, call_method clamp with kwargs."""
    return traced(MyModule)


@case
def ref_topk_module():
    """TopkModule traced: linear.weight get_attr, torch.sum -> sum_1, torch.topk."""
    return traced(TopkModule)


@case
def ref_cnn():
    """CNN traced (eval): Sequential children features.0..3, F.relu/F.log_softmax default kwargs."""
    return traced(CNN)


@case
def ref_dict_out():
    """DictOut traced: defaults, float annotation, tensor constants, dict/tuple/list output."""
    return traced(DictOut)


@case
def ref_get_item():
    """GetItem traced: size/view/getitem with slices, Ellipsis and None, getattr shape, max_1."""
    return traced(GetItem)


# ---------------------------------------------------------------------------------------------
# Graph-building API (inventory section 2.7).


def manual_graph():
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y", default_value=3)
    w = g.get_attr("lin.weight")
    a = g.call_function(torch.add, (x, y), {"alpha": 2})
    b = g.call_method("relu", (a,))
    c = g.call_module("lin", (b,))
    d = g.call_function(operator.getitem, (c, slice(None, 2)))
    e = g.call_function(torch.cat, ([d, d],), {"dim": -1})
    g.output((e, {"w": w}))
    return g, x, y, w, a, b, c, d, e


@case
def manual_construction():
    """Section 2.7 manual construction: all opcodes, default value, kwargs, slice, list arg."""
    g, *_ = manual_graph()
    return Case(g)


@case
def manual_edits():
    """Section 2.7 edits: inserting_after + replace_all_uses_with(delete_user_cb), replace_input_with."""
    g, x, y, w, a, b, c, d, e = manual_graph()
    with g.inserting_after(a):
        s = g.call_function(torch.sigmoid, (a,))
    changed = a.replace_all_uses_with(s, delete_user_cb=lambda u: u is not s)
    with g.inserting_before(e):
        n1 = g.call_function(torch.neg, (d,))
    e.replace_input_with(d, n1)
    return Case(g, [
        ("replace_all_uses_with", names(changed)),
        ("users(add)", names(a.users)),
        ("users(sigmoid)", names(s.users)),
        ("users(getitem)", names(d.users)),
        ("all_input_nodes(cat)", names(e.all_input_nodes)),
        ("len(nodes)", str(len(g.nodes))),
    ])


@case
def manual_update_arg():
    """Section 2.7: update_arg(1, 5) and update_kwarg('alpha', 1) on the torch.add node."""
    g, x, y, w, a, b, c, d, e = manual_graph()
    a.update_arg(1, 5)
    a.update_kwarg("alpha", 1)
    a.update_kwarg("out", None)
    return Case(g, [
        ("format_node(add)", a.format_node()),
        ("users(y)", names(y.users)),
        ("all_input_nodes(add)", names(a.all_input_nodes)),
    ])


@case
def all_opcodes():
    """One node per opcode, plus format_node() of each."""
    g = Graph()
    x = g.placeholder("x")
    w = g.get_attr("w")
    r = g.call_function(torch.relu, (x,))
    s = g.call_module("sub", (r,), {"scale": w})
    v = g.call_method("view", (s, -1))
    o = g.output(v)
    return Case(g, [("format_node", "\n".join(n.format_node() for n in (x, w, r, s, v, o)))])


# ---------------------------------------------------------------------------------------------
# Argument kinds.


@case
def args_none_bool_int():
    """None, bools, ints incl. negative and 64-bit extremes, as args and kwargs."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_method("scalars", (x, None, True, False, 0, 1, -1, 2 ** 62, -2 ** 63, 9223372036854775807),
                      {"a": None, "b": True, "c": -7})
    g.output(a)
    return Case(g)


@case
def args_floats():
    """Float reprs: 1e-05, 1e+20, -0.0, inf, -inf, nan, 0.1, 1.0, 123456789.0, 1e16, extremes."""
    g = Graph()
    x = g.placeholder("x")
    vals = (1e-05, 1e+20, -0.0, math.inf, -math.inf, math.nan, 0.1, 1.0, 123456789.0, 1e16, 1e15,
            1.5, -2.5e-300, 5e-324, 1.7976931348623157e308, 1 / 3, 100.0, -1000000000.0, 2.5e-05,
            0.0001, 1e22, 12345678901234567.0)
    a = g.call_method("floats", (x,) + vals, {"eps": 1e-05, "neg": -0.5})
    c = g.call_function(torch.clamp, (a,), {"min": -math.inf, "max": math.inf})
    d = g.call_function(operator.add, (c, math.nan))
    g.output(d)
    return Case(g)


@case
def args_complex():
    """Complex reprs: (1+2j), 2j, (1.5-2.5j), -1j, (-0+1j), 1e+20j, (inf+nanj)."""
    g = Graph()
    x = g.placeholder("x")
    vals = (1 + 2j, 2j, complex(1.5, -2.5), complex(0, -1), complex(-0.0, 1.0), 1e20j,
            complex(math.inf, math.nan))
    a = g.call_method("cplx", (x,) + vals, {"z": 1 + 2j})
    m = g.call_function(operator.mul, (a, 1 + 2j))
    g.output(m)
    return Case(g)


@case
def args_strings():
    """Strings with quotes, backslashes, newlines, tabs, control chars and non-ASCII text."""
    g = Graph()
    x = g.placeholder("x")
    vals = ("hello", "it's", 'say "hi"', "a'b\"c", "back\\slash", "line1\nline2", "tab\there", "",
            "\x01\x7f", "caf\u00e9", " padded ")
    a = g.call_method("strs", (x,) + vals, {"msg": "it's \"quoted\"\n"})
    g.output(a)
    return Case(g)


@case
def args_tuples():
    """Tuples: (), (1,), many elements, nested, with nodes, with strings."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    a = g.call_method("tuples", (x, (), (1,), (1, 2, 3), ((1, 2), (3, (4,))), (y,), (x, (y, 1)),
                                 ("a", "b")), {"t": (x,), "e": ()})
    g.output(a)
    return Case(g)


@case
def args_lists():
    """Lists: [], [1], nested with nodes, lists of empty containers, strings and None."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    a = g.call_function(torch.cat, ([x, y],))
    b = g.call_method("lists", (a, [], [1], [x, [y, 2]], [[], [()]], ["s", None]), {"l": [a]})
    g.output(b)
    return Case(g)


@case
def args_dicts():
    """Dicts: empty, str keys, int keys, nested in lists, as kwarg values."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    a = g.call_method("dicts", (x, {}, {"a": 1, "b": x}, {1: "one", 2: x}, {"k": [x, {"j": (y,)}]},
                                {"a": 1, 2: "b"}), {"d": {"key": y, "s": "v"}})
    g.output(a)
    return Case(g)


@case
def args_slices():
    """Slices (with ints, None, strings and nodes), Ellipsis, index tuples."""
    g = Graph()
    x = g.placeholder("x")
    n = g.placeholder("n")
    a = g.call_function(operator.getitem, (x, slice(None, 2, None)))
    b = g.call_function(operator.getitem, (a, slice(1, -1, 2)))
    c = g.call_function(operator.getitem, (b, slice(None, None, None)))
    d = g.call_function(operator.getitem, (c, slice(n, None)))
    e = g.call_function(operator.getitem, (d, (None, Ellipsis, slice(1, -1, 2))))
    f = g.call_function(operator.getitem, (e, Ellipsis))
    h = g.call_function(operator.getitem, (f, (slice(None, None, None), slice(1, 3, None))))
    i = g.call_method("sl", (h, slice("a", "b"), Ellipsis), {"s": slice(n, n, n)})
    g.output(i)
    return Case(g, [("users(n)", names(n.users))])


@case
def args_dtypes():
    """Every torch dtype of the C++ enum that torch 1.13 has."""
    g = Graph()
    x = g.placeholder("x")
    dts = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
           torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex32, torch.complex64,
           torch.complex128, torch.qint8, torch.quint8, torch.qint32)
    a = g.call_method("to", (x, torch.float16))
    b = g.call_method("dtypes", (a,) + dts, {"dtype": torch.int64})
    g.output(b)
    return Case(g)


@case
def args_devices():
    """torch.device('cpu'), device('cuda', 0), device('cuda'), device('cpu', 1)."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_method("to", (x, torch.device("cpu")))
    b = g.call_method("to", (a,), {"device": torch.device("cuda", 0)})
    c = g.call_method("devices", (b, torch.device("cuda"), torch.device("cpu", 1)))
    g.output(c)
    return Case(g)


@case
def args_memory_format_layout():
    """Memory formats and layouts, with a to(device=, dtype=, memory_format=) call."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_method("to", (x,), {"device": torch.device("cpu"), "dtype": torch.float16,
                                   "memory_format": torch.contiguous_format})
    b = g.call_method("formats", (a, torch.contiguous_format, torch.channels_last,
                                  torch.channels_last_3d, torch.preserve_format))
    c = g.call_method("layouts", (b, torch.strided, torch.sparse_coo, torch.sparse_csr),
                      {"layout": torch.strided})
    g.output(c)
    return Case(g)


# ---------------------------------------------------------------------------------------------
# Operators.

BINARY = ["add", "sub", "mul", "floordiv", "truediv", "div", "mod", "pow", "lshift", "rshift",
          "and_", "or_", "xor", "getitem", "matmul", "eq", "ne", "lt", "gt", "le", "ge"]
UNARY = ["pos", "neg", "invert"]
INPLACE = ["iadd", "iand", "ifloordiv", "ilshift", "imod", "imul", "imatmul", "ior", "ipow",
           "irshift", "isub", "itruediv", "ixor"]


@case
def magic_binary():
    """Every binary magic method of torch.fx.graph.magic_methods on two nodes."""
    from torch.fx.graph import magic_methods
    assert set(BINARY + UNARY) == set(magic_methods)
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    # operator.div does not exist in Python 3 (the "div" template is unreachable)
    outs = [g.call_function(getattr(operator, name), (x, y)) for name in BINARY if name != "div"]
    g.output(tuple(outs))
    return Case(g)


@case
def magic_reflected():
    """Magic methods with constant operands: 1 + x, 2 * x, 3 ** x, 1 >> x, x[0], x['k'], x[(0, 0)]."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.add, (1, x))
    b = g.call_function(operator.mul, (2, a))
    c = g.call_function(operator.pow, (3, b))
    d = g.call_function(operator.rshift, (1, c))
    e = g.call_function(operator.truediv, (d, 3))
    f = g.call_function(operator.getitem, (e, 0))
    h = g.call_function(operator.getitem, (f, "k"))
    i = g.call_function(operator.getitem, (h, (0, 0)))
    j = g.call_function(operator.sub, (2.5, i))
    k = g.call_function(operator.eq, (j, None))
    g.output(k)
    return Case(g)


@case
def magic_unary():
    """Unary magic methods pos/neg/invert, chained."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    gt = g.call_function(operator.gt, (x, y))
    inv = g.call_function(operator.invert, (gt,))
    p = g.call_function(operator.pos, (x,))
    n = g.call_function(operator.neg, (p,))
    g.output((inv, n))
    return Case(g)


@case
def inplace_ops():
    """Every in-place operator of torch.fx.graph.inplace_methods, including setitem."""
    from torch.fx.graph import inplace_methods
    assert set(INPLACE + ["setitem"]) == set(inplace_methods)
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    cur = x
    for name in INPLACE:
        cur = g.call_function(getattr(operator, name), (cur, y))
    s = g.call_function(operator.setitem, (cur, 0, y))
    g.output(s)
    return Case(g)


@case
def operator_misc():
    """Non-magic _operator functions become globals: _operator_abs, _operator_not_, ..."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    a = g.call_function(operator.abs, (x,))
    b = g.call_function(operator.not_, (a,))
    c = g.call_function(operator.truth, (b,))
    d = g.call_function(operator.contains, (y, c))
    e = g.call_function(operator.concat, (y, [d]))
    f = g.call_function(operator.index, (e,))
    h = g.call_function(operator.getitem, (y, f))
    g.output(h)
    return Case(g)


@case
def getattr_calls():
    """builtins.getattr: identifier attr -> x.shape; non-identifier and 3-arg -> getattr(...)."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(getattr, (x, "shape"))
    b = g.call_function(getattr, (x, "my attr"))
    c = g.call_function(getattr, (x, "shape", None))
    d = g.call_function(getattr, (x, "0"))
    e = g.call_function(getattr, (a, "T"))
    f = g.call_function(getattr, (x, b))
    g.output((a, b, c, d, e, f))
    return Case(g)


@case
def builtins_calls():
    """builtins len/max/min/abs/print/hasattr keep their builtin global names."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    a = g.call_function(len, (x,))
    b = g.call_function(max, (a, y))
    c = g.call_function(min, (b, 3))
    d = g.call_function(abs, (c,))
    e = g.call_function(hasattr, (x, "shape"))
    p = g.call_function(print, (d, e), {"sep": ", "})
    g.output((d, p))
    return Case(g)


@case
def math_calls():
    """math functions become sanitised globals: math_sqrt, math_pow, ..."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(math.sqrt, (x,))
    b = g.call_function(math.pow, (a, 2))
    c = g.call_function(math.floor, (b,))
    d = g.call_function(math.exp, (c,))
    e = g.call_function(math.sqrt, (d,))
    f = g.call_function(math.log, (e, 10))
    g.output(f)
    return Case(g)


@case
def torch_calls():
    """torch.* / torch.nn.functional.* / torch._C._nn.* / torch.functional.* targets."""
    g = Graph()
    x = g.placeholder("x")
    w = g.placeholder("w")
    b = g.placeholder("b")
    a = g.call_function(torch.relu, (x,))
    s = g.call_function(torch.sum, (a,), {"dim": -1, "keepdim": True})
    r = g.call_function(F.relu, (s,), {"inplace": False})
    lin = g.call_function(F.linear, (r, w, b))
    ge = g.call_function(F.gelu, (lin,))
    sp = g.call_function(torch.split, (ge, 2))
    sp0 = g.call_function(operator.getitem, (sp, 0))
    ln = g.call_function(F.layer_norm, (sp0, (4,)))
    t = g.call_function(torch.topk, (ln, 3))
    t0 = g.call_function(operator.getitem, (t, 0))
    c = g.call_function(torch.cat, ([t0, t0],), {"dim": 0})
    sm = g.call_function(F.softmax, (c,), {"dim": -1})
    mm = g.call_function(torch.matmul, (sm, w))
    g.output(mm)
    return Case(g)


# ---------------------------------------------------------------------------------------------
# Naming.


@case
def naming_collisions():
    """Name hints through create_node(name=...): add, add, add_1, input, sum, class, torch, ..."""
    g = Graph()
    x = g.placeholder("x")
    hints = ["add", "add", "add_1", "add", "x_1", "x", "x", "1abc", "foo.bar", "linear.weight",
             "input", "list", "sum", "class", "torch", "inf", "a-b c", "add_01", "getattr", "Foo",
             "MyLayer", "nan", "device", "print", "self", "_"]
    cur = x
    for h in hints:
        cur = g.create_node("call_function", torch.relu, (cur,), name=h)
    g.output(cur)
    return Case(g, [("names", names(g.nodes))])


@case
def naming_targets():
    """Names derived from targets: __add__ -> add, MyLayer -> my_layer, torch.sum -> sum_1, ..."""
    g = Graph()
    inp = g.placeholder("input")
    lst = g.placeholder("list")
    slf = g.placeholder("self_")
    a = g.call_method("__add__", (inp, lst))
    m = g.call_module("MyLayer", (a,))
    c = g.call_module("ALL_CAPS", (m,))
    d = g.call_module("Conv2D", (c,))
    e = g.call_module("layer1Block", (d,))
    f = g.call_module("fooBar.BazQux", (e,))
    w = g.get_attr("linear.weight")
    s = g.call_function(torch.sum, (f,))
    mx = g.call_method("max", (s,))
    ga = g.call_function(getattr, (mx, "shape"))
    p = g.call_function(operator.pow, (mx, 2))
    an = g.call_function(operator.and_, (p, slf))
    th = g.call_function(F.threshold, (an, 0.5, 0.0))
    g.output((ga, th, w))
    return Case(g, [("names", names(g.nodes))])


@case
def naming_star_args():
    """Placeholders *args and **kwargs: node names _args/_kwargs, code `_args = args`."""
    g = Graph()
    x = g.placeholder("x")
    a = g.placeholder("*args")
    k = g.placeholder("**kwargs")
    r = g.call_function(torch.add, (x, a), {"k": k})
    g.output(r)
    return Case(g, [("names", names(g.nodes))])


@case
def naming_erased_names():
    """Erased names are never reused: add, erase, add -> add_1."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.add, (x, 1))
    g.erase_node(a)
    b = g.call_function(operator.add, (x, 2))
    c = g.create_node("call_function", operator.add, (b, 3), name="add")
    g.output(c)
    return Case(g, [("names", names(g.nodes)), ("erased", a.name)])


@case
def naming_global_collision():
    """A node named math_sqrt pushes the math.sqrt global to math_sqrt_1."""
    g = Graph()
    x = g.placeholder("x")
    a = g.create_node("call_function", torch.relu, (x,), name="math_sqrt")
    b = g.call_function(math.sqrt, (a,))
    c = g.create_node("call_function", torch.neg, (b,), name="math_floor_1")
    d = g.call_function(math.floor, (c,))
    g.output(d)
    return Case(g)


@case
def wrapped_functions():
    """meta['is_wrapped'] functions: torch.fx._symbolic_trace.wrap("math_sqrt") header lines."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(math.sqrt, (x,))
    a.meta["is_wrapped"] = True
    b = g.call_function(len, (a,))
    b.meta["is_wrapped"] = True
    c = g.call_function(math.sqrt, (b,))
    c.meta["is_wrapped"] = True
    d = g.call_function(torch.relu, (c,))
    g.output(d)
    return Case(g)


# ---------------------------------------------------------------------------------------------
# Placeholders and outputs.


@case
def placeholder_defaults():
    """Placeholder defaults: None, 2.0, 'abc', (1, 'a'), -3, True (str in graph, repr in code)."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y", default_value=None)
    alpha = g.placeholder("alpha", default_value=2.0)
    s = g.placeholder("s", default_value="abc")
    t = g.placeholder("t", default_value=(1, "a"))
    n = g.placeholder("n", default_value=-3)
    flag = g.placeholder("flag", default_value=True)
    out = g.call_method("f", (x, y, alpha, s, t, n, flag))
    g.output(out)
    return Case(g)


@case
def placeholder_types():
    """Type annotations on placeholders, a call node, a get_attr and the output."""
    g = Graph()
    x = g.placeholder("x", type_expr=torch.Tensor)
    n = g.placeholder("n", type_expr=int)
    f = g.placeholder("f", type_expr=float, default_value=1.5)
    ys = g.placeholder("ys", type_expr=typing.List[torch.Tensor])
    tup = g.placeholder("tup", type_expr=typing.Tuple[torch.Tensor, int])
    d = g.placeholder("d", type_expr=typing.Dict[str, torch.Tensor])
    w = g.get_attr("w", type_expr=torch.Tensor)
    a = g.call_function(operator.add, (x, n), type_expr=torch.Tensor)
    b = g.call_method("mul", (a, f))
    c = g.call_function(operator.getitem, (ys, 0))
    e = g.call_function(operator.getitem, (tup, 1))
    h = g.call_function(operator.getitem, (d, "k"))
    g.output((b, c, e, h, w), type_expr=typing.Tuple[torch.Tensor, int])
    return Case(g)


@case
def unused_placeholders():
    """Unused placeholders get #users=0 and are never freed."""
    g = Graph()
    x = g.placeholder("x")
    g.placeholder("y")
    z = g.placeholder("z")
    a = g.call_function(operator.mul, (x, 2))
    g.output((a, z))
    return Case(g)


@case
def output_nested():
    """Output of nested tuple/list/dict with strings, None, floats and an empty tuple."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    g.output((x, [y, "str", None], {"k": (x, "v"), "n": None, 3: y}, "str'q", 'a"b', 1.5, ()))
    return Case(g)


@case
def output_string():
    """Output of a plain string: `return hello` in the graph, `return 'hello'` in code."""
    g = Graph()
    g.placeholder("x")
    g.output("hello")
    return Case(g)


@case
def output_list_dict():
    """Output of a list holding a dict; output node type in the graph is never printed."""
    g = Graph()
    x = g.placeholder("x")
    r = g.call_function(torch.relu, (x,))
    g.output([{"relu": r, "x": x}, r])
    return Case(g)


@case
def output_only():
    """An empty graph: only `return None`."""
    g = Graph()
    g.output(None)
    return Case(g)


@case
def no_output_node():
    """Placeholders and no output node: codegen emits `pass`."""
    g = Graph()
    g.placeholder("x")
    g.placeholder("y", default_value=1)
    return Case(g)


@case
def no_nodes():
    """A graph with no nodes at all: header only, `def forward(self):` + pass."""
    return Case(Graph())


# ---------------------------------------------------------------------------------------------
# Attribute targets.


class _Root(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.ReLU())
        self.seq = nn.Sequential(nn.Identity(), nn.Identity(), nn.Sequential(nn.Tanh()))
        self.layers = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
        self.unused = nn.Linear(3, 3)


@case
def module_targets():
    """get_attr/call_module with digit atoms: features.0, seq.2.0, layers.1.weight; GraphModule copy."""
    torch.manual_seed(0)
    g = Graph()
    x = g.placeholder("x")
    f0 = g.call_module("features.0", (x,))
    s = g.call_module("seq.2.0", (f0,))
    w = g.get_attr("layers.1.weight")
    gi = g.call_function(operator.getitem, (w, (0, 0)))
    m = g.call_function(operator.mul, (s, gi))
    g.output(m)
    gm = GraphModule(_Root(), g)
    return Case(g, [("module_repr", nn.Module.__repr__(gm)),
                    ("named_modules", "[" + ", ".join(repr(n) for n, _ in gm.named_modules()) + "]"),
                    ("named_parameters",
                     "[" + ", ".join(repr(n) for n, _ in gm.named_parameters()) + "]")], gm)


@case
def verbose_stack_trace():
    """Verbose codegen: `# File: ...` comments from stack traces, `# No stacktrace found ...`."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    a.stack_trace = ('File "model.py", line 12, in forward\n'
                     '    return torch.relu(x) + 1\n')
    b = g.call_function(operator.add, (a, 1))
    b.stack_trace = a.stack_trace
    c = g.call_function(torch.neg, (b,))
    d = g.call_function(torch.sigmoid, (c,))
    d.stack_trace = ('File "model.py", line 14, in forward\n'
                     '    return torch.sigmoid(y)\n')
    g.output(d)
    gm = GraphModule(nn.Module(), g)
    return Case(g, [("verbose_code", g.python_code("self", verbose=True).src),
                    ("print_readable", printed(gm.print_readable))], gm)


# ---------------------------------------------------------------------------------------------
# Graph manipulation.


@case
def erase_node():
    """erase_node of a leaf, len(nodes), and the error for a node that still has users."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.add, (x, 1))
    s = g.call_function(torch.sigmoid, (a,))
    dead = g.call_function(torch.neg, (x,))
    g.output(s)
    before = len(g.nodes)
    g.erase_node(dead)
    err = error_text(lambda: g.erase_node(a))
    return Case(g, [("len_before", str(before)), ("len_after", str(len(g.nodes))),
                    ("erase_error", err), ("users(x)", names(x.users))])


@case
def replace_all_uses():
    """replace_all_uses_with with and without delete_user_cb; returned user lists."""
    g = Graph()
    x = g.placeholder("x")
    d = g.call_function(torch.tanh, (x,))
    a = g.call_function(torch.relu, (x,))
    b = g.call_function(torch.neg, (a,))
    c = g.call_function(operator.add, (a, b), {"k": a})
    r1 = a.replace_all_uses_with(d, delete_user_cb=lambda u: u.name != "neg")
    e = g.call_function(torch.exp, (c,))
    r2 = c.replace_all_uses_with(b)
    g.output((e, a))
    return Case(g, [("rauw_1", names(r1)), ("rauw_2", names(r2)), ("users(relu)", names(a.users)),
                    ("users(tanh)", names(d.users)), ("users(neg)", names(b.users)),
                    ("users(add)", names(c.users))])


@case
def node_updates():
    """replace_input_with / update_arg / update_kwarg and the resulting users order."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    b = g.call_function(torch.relu, (y,))
    a = g.call_function(operator.add, (x, x), {"alpha": x})
    a.replace_input_with(x, b)
    c = g.call_function(torch.mul, (a, y), {"out": None})
    c.update_arg(0, x)
    c.update_kwarg("out", a)
    c.update_kwarg("new", [y, b])
    g.output(c)
    return Case(g, [("users(x)", names(x.users)), ("users(y)", names(y.users)),
                    ("users(relu)", names(b.users)), ("all_input_nodes(mul)", names(c.all_input_nodes)),
                    ("format_node(mul)", c.format_node())])


@case
def node_copy():
    """node_copy into a graph that already uses the names: relu -> relu_1, meta copied."""
    src = Graph()
    x = src.placeholder("x")
    a = src.call_function(torch.relu, (x,))
    b = src.call_method("sum", (a,), {"dim": 0})
    src.output(b)
    g = Graph()
    y = g.placeholder("x")
    r = g.call_function(torch.relu, (y,))
    env = {x: r}
    for n in [a, b]:
        env[n] = g.node_copy(n, lambda m: env[m])
    g.output(env[b])
    return Case(g, [("names", names(g.nodes))])


@case
def graph_copy_val_map():
    """graph_copy with a pre-seeded val_map binding the source placeholder to `inp`."""
    src = Graph()
    x = src.placeholder("x")
    a = src.call_function(torch.relu, (x,))
    b = src.call_function(operator.add, (a, x))
    src.output(b)
    g = Graph()
    inp = g.placeholder("inp")
    val_map = {x: inp}
    out = g.graph_copy(src, val_map)
    g.output(out)
    return Case(g, [("names", names(g.nodes)), ("output", str(out)),
                    ("val_map", ", ".join(f"{k.name}->{v.name}" for k, v in val_map.items()))])


@case
def deepcopy_graph():
    """deepcopy keeps names; the copy's namespace only knows live names (add reusable there)."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.add, (x, 1))
    g.erase_node(a)
    b = g.call_function(operator.add, (x, 2))
    r = g.call_function(torch.relu, (b,))
    g.output(r, type_expr=torch.Tensor)
    g2 = copy.deepcopy(g)
    orig_new = g.create_node("call_function", operator.add, (x, 3))
    x2 = next(iter(g2.nodes))
    out2 = list(g2.nodes)[-1]
    with g2.inserting_before(out2):
        copy_new = g2.call_function(operator.add, (x2, 3))
    return Case(g2, [("names(original)", names(g.nodes)), ("new_in_original", orig_new.name),
                     ("new_in_copy", copy_new.name), ("output_type", torch.fx.node._type_repr(out2.type))])


@case
def inserting_context():
    """inserting_before/after as context managers, reversed order of repeated inserting_after."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    o = g.output(a)
    with g.inserting_after(x):
        b1 = g.call_function(torch.neg, (x,))
        b2 = g.call_function(torch.tanh, (x,))
    with g.inserting_before(a):
        c1 = g.call_function(torch.exp, (x,))
        c2 = g.call_function(torch.log, (x,))
    with g.inserting_before(None):
        d1 = g.placeholder("first")
        d2 = g.placeholder("second")
    e = g.call_function(torch.sigmoid, (a,))  # insert point restored: appended at the end
    with g.inserting_before(o):
        f = g.call_function(operator.add, (a, b1))
    return Case(g, [("names", names(g.nodes)),
                    ("unused", names([b2, c1, c2, d1, d2, e, f]))])


@case
def inserting_permanent():
    """Permanent insert points: g.inserting_before(n) / inserting_after(n) without `with`."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    g.output(a)
    g.inserting_before(a)
    b = g.call_function(torch.neg, (x,))
    c = g.call_function(torch.tanh, (b,))
    g.inserting_after(x)
    d = g.call_function(torch.exp, (x,))
    e = g.call_function(torch.log, (x,))
    g.inserting_after(None)
    f = g.call_function(torch.sigmoid, (c,))
    return Case(g, [("names", names(g.nodes)), ("unused", names([d, e, f]))])


@case
def prepend_append_moves():
    """Node.prepend / Node.append move existing nodes; moving a node next to itself is a no-op."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    b = g.call_function(torch.neg, (x,))
    c = g.call_function(torch.tanh, (x,))
    d = g.call_function(torch.exp, (x,))
    g.output((a, b, c, d))
    a.prepend(d)      # d before a
    c.append(a)       # a after c
    b.prepend(c)      # c before b
    x.append(b)       # b right after x
    d.append(d.next)  # no-op-ish: next node after d moved after d
    return Case(g, [("names", names(g.nodes))])


@case
def dead_code_elimination():
    """eliminate_dead_code: dead nodes removed, torch._assert kept.

    1.13 also removes an unused in-place x.mul_(2) (a bug fxwasm fixes on purpose, see
    tests/cpp/graph_api_test.cpp), so the golden leaves in-place ops out."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    dead1 = g.call_function(torch.relu, (x,))
    g.call_function(torch.neg, (dead1,))
    gt = g.call_function(operator.gt, (x, 0))
    g.call_function(torch._assert, (gt, "x must be positive"))
    a = g.call_function(operator.add, (x, 1))
    g.output(a)
    before = str(g)
    r1 = g.eliminate_dead_code()
    r2 = g.eliminate_dead_code()
    return Case(g, [("before", before), ("first", str(r1)), ("second", str(r2)),
                    ("names", names(g.nodes))])


@case
def lint_out_of_order():
    """lint(): an argument used before it is defined (after a prepend move)."""
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    b = g.call_function(torch.neg, (a,))
    g.output(b)
    a.prepend(b)
    return Case(g, [("lint_error", error_text(g.lint))])


@case
def lint_foreign_node():
    """lint(): an argument that belongs to another graph."""
    other = Graph()
    p = other.placeholder("p")
    g = Graph()
    x = g.placeholder("x")
    r = g.call_function(torch.relu, (p,))
    a = g.call_function(operator.add, (r, x))
    g.output(a)
    return Case(g, [("lint_error", error_text(g.lint)), ("users(p)", names(p.users))])


class _LintRoot(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)


@case
def lint_missing_target():
    """lint() on a GraphModule: get_attr target missing, then a call_module on a parameter."""
    torch.manual_seed(0)
    g = Graph()
    x = g.placeholder("x")
    a = g.call_module("linear", (x,))
    o = g.output(a)
    gm = GraphModule(_LintRoot(), g)
    gm.graph.lint()
    with gm.graph.inserting_before(o):
        n = gm.graph.get_attr("nonexistent")
    err1 = error_text(gm.graph.lint)
    gm.graph.erase_node(n)
    with gm.graph.inserting_before(o):
        m = gm.graph.create_node("call_module", "linear.weight", (x,))  # call_module() would refuse
    err2 = error_text(gm.graph.lint)
    gm.graph.erase_node(m)
    with gm.graph.inserting_before(o):
        k = gm.graph.get_attr("linear.nope")
    err3 = error_text(gm.graph.lint)
    gm.graph.erase_node(k)
    gm.graph.lint()
    return Case(g, [("lint_error_get_attr", err1), ("lint_error_call_module", err2),
                    ("lint_error_nested", err3)], gm)


# ---------------------------------------------------------------------------------------------
# Freeing of dead values.


@case
def freeing_order():
    """`;  a = b = None` lists values in reverse-scan discovery order; outputs are never freed."""
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    z = g.placeholder("z")
    a = g.call_function(operator.add, (x, y))
    b = g.call_function(operator.mul, (y, z))
    c = g.call_function(torch.cat, ([b, a, z],), {"extra": x})
    d = g.call_function(torch.relu, (c,))
    e = g.call_function(torch.neg, (d,))
    g.output((d, e))
    return Case(g)


# ---------------------------------------------------------------------------------------------
# torch 1.13 codegen bugs (C++ fixes them unless CodegenOptions::torch113_bugs).


@case
def bug_pow_neg():
    """torch 1.13 bug: operator.pow(-2, x) prints `pow_1 = -2 ** x` (C++ fix: `(-2) ** x`)."""
    g = Graph()
    x = g.placeholder("x")
    p = g.call_function(operator.pow, (-2, x))
    g.output(p)
    return Case(g)


@case
def bug_keyword_attr():
    """torch 1.13 bug: submodule `lambda` prints `self.lambda(x)` (C++ fix: getattr(self, "lambda"))."""
    g = Graph()
    x = g.placeholder("x")
    m = g.call_module("lambda", (x,))
    g.output(m)
    return Case(g)


# ---------------------------------------------------------------------------------------------


def write(path, text):
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write(text)


def main():
    os.makedirs(GOLDEN, exist_ok=True)
    for fn in os.listdir(GOLDEN):  # this script's files; subfolders belong to other scripts
        if os.path.isfile(os.path.join(GOLDEN, fn)):
            os.remove(os.path.join(GOLDEN, fn))
    index = []
    seen = set()
    for fn in CASES:
        name = fn.__name__
        assert name not in seen and re.fullmatch(r"[a-z0-9_]+", name), name
        seen.add(name)
        doc = inspect.getdoc(fn).splitlines()[0]
        c = fn()
        g = c.graph
        text = str(g)
        assert "[num_users=" not in text
        code = g.python_code("self").src
        if c.gm is not None:
            assert c.gm.graph is g
            c.gm.recompile()
            assert c.gm.code == code, name
        tab = capture(g.print_tabular)
        files = {
            "graph.txt": text,
            "graph_num_users.txt": text.replace("[#users=", "[num_users="),
            "tabular.txt": mask_addresses(tab),
            "code.py": code,
        }
        if c.extra:
            out = []
            for k, v in c.extra:
                assert "\n" not in k
                out.append(f"-- {k}\n{mask_addresses(v)}\n")
            files["extra.txt"] = "".join(out)
        for suffix, content in files.items():
            write(os.path.join(GOLDEN, f"{name}.{suffix}"), content)
        index.append(f"{name}\t{' '.join(files)}\t{doc}")
    write(os.path.join(GOLDEN, "INDEX.txt"),
          "# Generated by scripts/gen_goldens.py (torch %s, Python %s). name<TAB>files<TAB>what\n"
          % (torch.__version__, sys.version.split()[0]) + "\n".join(index) + "\n")
    print(f"wrote {len(index)} cases to {os.path.relpath(GOLDEN, ROOT)}")


if __name__ == "__main__":
    main()
