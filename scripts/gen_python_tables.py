#!/usr/bin/python3
"""Generate src/ir/python_names.inc and src/ir/function_table.inc from the real torch.fx (the oracle).

Run with Debian's interpreter that has torch 1.13:  /usr/bin/python3 scripts/gen_python_tables.py

* python_names.inc: the names torch.fx's _Namespace refuses for fresh objects (keyword.kwlist,
  builtins.__dict__ after `import torch`, and torch.fx.graph._custom_builtins) as X-macro lists.
* function_table.inc: one FX_FUNCTION(printed qualname, python module, __name__, KIND, IMPURE)
  line per known callable, all values read from the live objects (Node._pretty_print_target,
  _find_module_of_method, repr(), torch.fx.node._side_effectful_functions). Optional extra
  lists are guarded by #ifdef so an includer that only defines FX_FUNCTION ignores them:
    FX_FUNCTION_ALIAS("spelling", "printed qualname")  other Python spellings of the same object
                                                       (torch.nn.functional.gelu -> torch._C._nn.gelu)
    FX_FUNCTION_REPR_NAME("printed qualname", "name in repr")  Python functions whose repr() shows
                                                       a __qualname__ different from __name__
                                                       (<function boolean_dispatch.<locals>.fn at 0x...>)
"""
import builtins
import keyword
import math
import operator
import os
import re
import sys

import torch  # noqa: F401  (a traced program imports torch before naming anything)
import torch.fx
import torch.nn.functional as F
from torch.fx.graph import _custom_builtins, inplace_methods, magic_methods
from torch.fx.node import Node, _find_module_of_method, _side_effectful_functions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src", "ir")

OPERATOR_EXTRA = ["getitem", "setitem", "abs", "not_", "truth", "contains", "concat", "index"]
BUILTINS = ["getattr", "len", "isinstance", "hasattr", "max", "min", "abs", "int", "float", "bool",
            "range", "tuple", "list", "dict", "slice", "print"]
MATH = ["sqrt", "exp", "log", "log2", "log10", "log1p", "expm1", "floor", "ceil", "trunc", "pow",
        "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "erf", "erfc",
        "fabs", "gcd", "hypot", "isnan", "isinf", "isfinite", "fmod", "copysign", "prod", "fsum",
        "degrees", "radians"]
TORCH = """
_assert abs absolute acos acosh adaptive_avg_pool1d adaptive_max_pool1d add addbmm addcdiv addcmul
addmm addmv addr all allclose amax amin angle any arange arccos arcsin arctan argmax argmin argsort
as_strided as_tensor asin asinh atan atan2 atanh avg_pool1d baddbmm batch_norm bernoulli bilinear
binary_cross_entropy_with_logits bitwise_and bitwise_not bitwise_or bitwise_xor block_diag bmm
broadcast_tensors broadcast_to bucketize cartesian_prod cat cdist ceil celu chain_matmul cholesky
chunk clamp clamp_ clamp_max clamp_min clip clone column_stack complex concat conj constant_pad_nd
conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d cos cosh cosine_similarity
count_nonzero cross cummax cummin cumprod cumsum deg2rad det diag diag_embed diagonal diff dist div
divide dot dropout dsplit dstack einsum embedding empty empty_like eq equal erf erfc erfinv exp exp2
expm1 eye flatten flip fliplr flipud float_power floor floor_divide fmax fmin fmod frac full
full_like gather gcd ge gelu ger greater group_norm gru_cell gt hardshrink heaviside hsplit hstack
hypot index_add index_copy index_fill index_put index_select inner instance_norm inverse isclose
isfinite isinf isnan kron kthvalue layer_norm lcm le lerp lgamma linspace log log10 log1p log2
log_softmax logaddexp logical_and logical_not logical_or logical_xor logit logspace logsumexp lt
lu masked_fill masked_scatter masked_select matmul matrix_exp max max_pool1d max_pool2d maximum mean
median meshgrid min minimum mm mode moveaxis movedim msort mul multinomial multiply mv mvlgamma
nan_to_num nanmean nanmedian nansum narrow native_layer_norm ne neg negative nonzero norm normal
numel ones ones_like outer pdist permute pinverse pixel_shuffle pixel_unshuffle polar pow prelu
prod quantile rad2deg rand rand_like randint randn randn_like randperm range ravel reciprocal relu
relu_ remainder renorm repeat_interleave reshape resolve_conj roll rot90 round rrelu rsqrt scatter
scatter_add searchsorted select selu selu_ sigmoid sigmoid_ sign signbit sin sinc sinh slice_scatter
softmax sort split sqrt square squeeze stack std std_mean stft sub subtract sum svd swapaxes t take
take_along_dim tan tanh tanh_ tensor tensor_split tensordot tile topk trace transpose trapz tril
triu true_divide trunc unbind unflatten unique unique_consecutive unsqueeze vander var var_mean
vsplit vstack where xlogy zeros zeros_like
""".split()
FUNCTIONAL = """
adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d
adaptive_max_pool3d affine_grid alpha_dropout avg_pool1d avg_pool2d avg_pool3d batch_norm bilinear
binary_cross_entropy binary_cross_entropy_with_logits celu conv1d conv2d conv3d conv_transpose1d
conv_transpose2d conv_transpose3d cosine_embedding_loss cosine_similarity cross_entropy ctc_loss
dropout dropout1d dropout2d dropout3d elu elu_ embedding embedding_bag feature_alpha_dropout fold
gaussian_nll_loss gelu glu grid_sample group_norm gumbel_softmax hardshrink hardsigmoid hardswish
hardtanh hardtanh_ hinge_embedding_loss huber_loss instance_norm interpolate kl_div l1_loss
layer_norm leaky_relu leaky_relu_ linear local_response_norm log_softmax logsigmoid lp_pool1d
lp_pool2d margin_ranking_loss max_pool1d max_pool2d max_pool3d max_unpool1d max_unpool2d mish
mse_loss multi_head_attention_forward multi_margin_loss multilabel_margin_loss nll_loss normalize
one_hot pad pairwise_distance pdist pixel_shuffle pixel_unshuffle poisson_nll_loss prelu relu relu6
relu_ rrelu selu silu smooth_l1_loss soft_margin_loss softmax softmin softplus softshrink softsign
tanh tanhshrink threshold threshold_ triplet_margin_loss unfold upsample upsample_bilinear
upsample_nearest
""".split()
TORCH_C_NN = ["linear", "gelu", "softplus", "leaky_relu", "hardtanh", "elu", "hardsigmoid",
              "hardswish", "silu", "mish", "pad", "upsample_nearest2d", "upsample_bilinear2d",
              "avg_pool2d", "adaptive_avg_pool2d"]
PROFILER_OPS = ["_record_function_enter", "_record_function_enter_new", "_record_function_exit"]


def kind_of(obj):
    r = repr(obj)
    if r.startswith("<built-in function "):
        return "BuiltinFunction"
    if r.startswith("<built-in method "):
        return "BuiltinMethod"
    if r.startswith("<function "):
        return "Function"
    if r.startswith("<class "):
        return "Class"
    if r.startswith("<OpOverloadPacket("):
        return "OpPacket"
    return None


def c_str(s):
    assert all(32 <= ord(c) < 127 for c in s), s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write(path, text):
    with open(path, "w", newline="") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(path, ROOT)}")


def gen_names():
    kws = list(keyword.kwlist)
    names = sorted(builtins.__dict__.keys())
    custom = list(_custom_builtins.keys())
    # src/namespace.cpp skips the reserved-name lookup for names ending in _<digits> (the
    # numbered names _Namespace makes); that is only sound while no reserved name has that form.
    numbered = [n for n in kws + names + custom if re.fullmatch(r".*_\d+", n)]
    if numbered:
        raise SystemExit(f"reserved names ending in _<digits> break Namespace's fast path: {numbered}")

    def xlist(macro, items, per_line=8):
        lines = [f"#define {macro}(X)"]
        for i in range(0, len(items), per_line):
            lines.append("  " + " ".join(f"X({c_str(n)})" for n in items[i:i + per_line]))
        return " \\\n".join(lines) + "\n"

    text = (
        "// Generated by scripts/gen_python_tables.py from the oracle "
        f"(Python {sys.version.split()[0]}, torch {torch.__version__}). Do not edit.\n"
        "// Names torch.fx's _Namespace never gives a fresh object: keyword.kwlist, the keys of\n"
        "// builtins.__dict__ (after `import torch`), and torch.fx.graph._custom_builtins.\n"
        "#pragma once\n\n"
        f"// {len(kws)} keywords\n" + xlist("FX_PY_KEYWORDS", kws) + "\n"
        f"// {len(names)} builtins.__dict__ keys, sorted\n" + xlist("FX_PY_BUILTINS", names) + "\n"
        "// torch.fx.graph._custom_builtins, in its order\n" + xlist("FX_CUSTOM_BUILTINS", custom))
    write(os.path.join(SRC, "python_names.inc"), text)
    return kws, names, custom


def candidates():
    """(spelling, object) pairs in table order."""
    out = []
    op_names = [n for n in list(magic_methods) + list(inplace_methods)] + OPERATOR_EXTRA
    import _operator
    for n in op_names:
        if hasattr(_operator, n):
            out.append((f"operator.{n}", getattr(_operator, n)))
    for n in BUILTINS:
        out.append((f"builtins.{n}", getattr(builtins, n)))
    for n in MATH:
        if hasattr(math, n):
            out.append((f"math.{n}", getattr(math, n)))
    for n in TORCH:
        if hasattr(torch, n):
            out.append((f"torch.{n}", getattr(torch, n)))
    for n in FUNCTIONAL:
        if hasattr(F, n):
            out.append((f"torch.nn.functional.{n}", getattr(F, n)))
    for n in TORCH_C_NN:
        if hasattr(torch._C._nn, n):
            out.append((f"torch._C._nn.{n}", getattr(torch._C._nn, n)))
    for n in PROFILER_OPS:
        if hasattr(torch.ops.profiler, n):
            out.append((f"torch.ops.profiler.{n}", getattr(torch.ops.profiler, n)))
    return out


def gen_functions():
    rows, aliases, repr_names, skipped = [], [], [], []
    seen = {}
    for spelling, obj in candidates():
        if not callable(obj):
            skipped.append((spelling, "not callable"))
            continue
        kind = kind_of(obj)
        if kind is None:
            skipped.append((spelling, repr(obj)))
            continue
        qual = Node._pretty_print_target(None, obj)
        module = _find_module_of_method(obj)
        name = obj.__name__
        impure = obj in _side_effectful_functions
        if qual in seen:
            assert seen[qual] is obj, (qual, spelling)
        else:
            seen[qual] = obj
            rows.append((qual, module, name, kind, impure))
            if kind == "Function" and obj.__qualname__ != name:
                repr_names.append((qual, obj.__qualname__))
        if spelling != qual and spelling != f"{module}.{name}":
            aliases.append((spelling, qual))
    # every row's repr must be reproducible from (kind, name[, repr name])
    rn = dict(repr_names)
    for qual, module, name, kind, impure in rows:
        r = re.sub(r"0x[0-9a-f]+", "0x0", repr(seen[qual]))
        cls = name if module == "builtins" else f"{module}.{name}"
        want = {"BuiltinFunction": f"<built-in function {name}>",
                "BuiltinMethod": f"<built-in method {name} of type object at 0x0>",
                "Function": f"<function {rn.get(qual, name)} at 0x0>",
                "Class": f"<class '{cls}'>",
                "OpPacket": f"<OpOverloadPacket(op='{qual.removeprefix('torch.ops.')}')>"}[kind]
        assert r == want, (qual, r, want)

    lines = [
        "// Generated by scripts/gen_python_tables.py from the oracle "
        f"(Python {sys.version.split()[0]}, torch {torch.__version__}). Do not edit.",
        "// FX_FUNCTION(printed qualname (Node._pretty_print_target), Python module",
        "//             (_find_module_of_method), __name__, kind of repr(), in _side_effectful_functions)",
        f"// {len(rows)} functions.",
    ]
    for qual, module, name, kind, impure in rows:
        lines.append(f"FX_FUNCTION({c_str(qual)}, {c_str(module)}, {c_str(name)}, {kind}, "
                     f"{'true' if impure else 'false'})")
    lines.append("")
    lines.append("// Other spellings of the callables above (the same Python object).")
    lines.append("#ifdef FX_FUNCTION_ALIAS")
    for spelling, qual in aliases:
        lines.append(f"FX_FUNCTION_ALIAS({c_str(spelling)}, {c_str(qual)})")
    lines.append("#endif")
    lines.append("")
    lines.append("// Python functions whose repr() shows a __qualname__ other than __name__.")
    lines.append("#ifdef FX_FUNCTION_REPR_NAME")
    for qual, rname in repr_names:
        lines.append(f"FX_FUNCTION_REPR_NAME({c_str(qual)}, {c_str(rname)})")
    lines.append("#endif")
    if skipped:
        lines.append("")
        lines.append("// Skipped (repr() is none of the known kinds):")
        for spelling, why in skipped:
            lines.append(f"//   {spelling}: {why}")
    write(os.path.join(SRC, "function_table.inc"), "\n".join(lines) + "\n")
    return rows, aliases, repr_names, skipped


def main():
    kws, names, custom = gen_names()
    rows, aliases, repr_names, skipped = gen_functions()
    print(f"{len(kws)} keywords, {len(names)} builtins, {len(custom)} custom builtins; "
          f"{len(rows)} functions, {len(aliases)} aliases, {len(repr_names)} repr names, "
          f"{len(skipped)} skipped")


if __name__ == "__main__":
    main()
