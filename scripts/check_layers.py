#!/usr/bin/env python3
"""Checks fxwasm's layering (docs/architecture.md) over every #include line of the tree.

Each source folder belongs to a layer, and each layer may include only the layers listed for it
in ALLOWED (plus the C++ standard library and the system headers it is allowed). A violation
prints `file:line: <layer> may not include <header> (<layer of header>)` and the script exits 1.

    python3 scripts/check_layers.py            # check
    python3 scripts/check_layers.py --table    # print the rule table (for docs/architecture.md)

Runs in scripts/test.sh. Pure Python 3 standard library: any python3 will do.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Layers, bottom up. A layer's own headers are always allowed.
ALLOWED = {
    "ir": [],
    "passes": ["ir"],
    "kernels": [],
    "exec": ["ir", "passes", "kernels", "onnx-api"],
    "onnx-api": ["ir"],
    "onnx": ["ir", "passes", "onnx-api", "protobuf"],
    "torch": ["ir", "passes", "libtorch"],
    "torch-codegen": ["ir", "passes", "onnx-api", "exec"],
    "cli": ["ir", "passes", "exec", "onnx-api", "torch-codegen"],
    "wasm": ["ir", "passes", "exec", "onnx-api", "torch-codegen", "embind"],
    "tests": ["ir", "passes", "kernels", "exec", "onnx-api", "onnx", "torch-codegen", "protobuf",
              "gtest"],
    "torch-tests": ["ir", "passes", "torch", "libtorch", "gtest", "exec", "onnx-api",
                    "torch-codegen"],
    "bench": ["ir", "passes", "kernels", "exec", "onnx-api", "torch", "libtorch"],
}
# What each layer is, for --table.
ABOUT = {
    "ir": "include/fx/{argument,error,function,graph,graph_module,namespace,node}.h, src/ir/",
    "passes": "include/fx/{passes,pass_manager,subgraph_rewriter,fx}.h, src/passes/",
    "kernels": "src/kernels/ (pointers and shapes; no graphs)",
    "exec": "include/fx/exec.h, include/fx/exec/, src/exec/",
    "onnx-api": "include/fx/onnx.h (the import/export API and the meta-key constants)",
    "onnx": "src/onnx/ (over protoc's classes)",
    "torch": "src/torch/ (LibTorch; native only)",
    "torch-codegen": "include/fx/torch_codegen.h, include/fx/torch_codegen/, src/torch_codegen/ "
                     "(to_folder, PyTorch's state_dict format; no LibTorch)",
    "cli": "src/cli/",
    "wasm": "wasm/ (Embind)",
    "tests": "tests/cpp/, tests/stress/",
    "torch-tests": "tests/torch/",
    "bench": "bench/*.cpp",
}

IR_HEADERS = {"argument.h", "error.h", "function.h", "graph.h", "graph_module.h", "limits.h",
              "namespace.h", "node.h"}
PASSES_HEADERS = {"passes.h", "pass_manager.h", "subgraph_rewriter.h"}


def layer_of_file(rel):
    """The layer a source file belongs to, or None for files the rule does not cover."""
    parts = rel.split("/")
    if parts[0] == "include" and parts[1] == "fx":
        name = parts[-1]
        if len(parts) > 3 and parts[2] == "exec":
            return "exec"
        if len(parts) > 3 and parts[2] == "torch_codegen":
            return "torch-codegen"
        if name in IR_HEADERS:
            return "ir"
        if name in PASSES_HEADERS:
            return "passes"
        if name == "fx.h":
            return "passes"  # the umbrella: the IR and its passes
        if name in ("exec.h", "onnx_passes.h"):
            return "exec"
        if name == "onnx.h":
            return "onnx-api"
        if name == "torch_codegen.h":
            return "torch-codegen"
        return None
    if parts[0] == "src" and len(parts) > 2:
        return {"ir": "ir", "passes": "passes", "kernels": "kernels", "exec": "exec",
                "onnx": "onnx", "torch": "torch", "torch_codegen": "torch-codegen",
                "cli": "cli"}.get(parts[1])
    if parts[0] == "wasm":
        return "wasm"
    if parts[0] == "tests" and len(parts) > 2:
        return {"cpp": "tests", "stress": "tests", "torch": "torch-tests"}.get(parts[1])
    if parts[0] == "bench":
        return "bench"
    return None


def layer_of_include(header, angle):
    """The layer an included header belongs to; "std" for allowed system headers; None if the
    header is the including layer's private business (resolved relative to the file)."""
    if angle:
        top = header.split("/")[0]
        if top == "emscripten":
            return "embind"
        if top in ("torch", "ATen", "c10"):
            return "libtorch"
        if top == "google":
            return "protobuf"
        if top in ("gtest", "gmock"):
            return "gtest"
        return "std"
    if header.startswith("fx/torch/"):
        return "torch"
    if header.startswith("fx/"):
        return layer_of_file("include/" + header) or "unknown"
    top = header.split("/")[0]
    if top in ("ir", "passes", "kernels", "exec", "onnx"):  # private headers, by src/ folder
        return top
    if top == "torch_codegen":
        return "torch-codegen"
    if header == "onnx.pb.h":
        return "protobuf"
    if top == "google":
        return "protobuf"
    return None  # a header next to the file (tests' helpers, .inc tables)


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SOURCE_DIRS = ["include", "src", "wasm", "tests/cpp", "tests/stress", "tests/torch", "bench"]


def check_line(rel, line):
    """The violation `line` of file `rel` makes, or None."""
    layer = layer_of_file(rel)
    m = INCLUDE.match(line)
    if layer is None or not m:
        return None
    target = layer_of_include(m.group(2), m.group(1) == "<")
    if target in (None, "std", layer) or target in ALLOWED[layer]:
        return None
    return f"{layer} may not include {m.group(2)} ({target})"


def self_test():
    """The rule on lines that must and must not pass, so that the check cannot silently pass
    everything."""
    bad = [("src/ir/graph.cpp", '#include "fx/exec.h"'),
           ("src/ir/graph.cpp", '#include "fx/passes.h"'),
           ("include/fx/graph.h", '#include "fx/onnx.h"'),
           ("src/kernels/gemm.cpp", '#include "fx/graph.h"'),
           ("src/exec/ops_nn.cpp", "#include <emscripten/bind.h>"),
           ("src/exec/ops_nn.cpp", "#include <torch/nn.h>"),
           ("src/exec/run.cpp", '#include "onnx/common.h"'),
           ("src/passes/passes.cpp", '#include "exec/ops.h"'),
           ("src/onnx/import.cpp", '#include "fx/exec.h"'),
           ("src/torch/ops.cpp", '#include "fx/exec.h"'),
           ("wasm/bindings.cpp", "#include <torch/nn.h>"),
           ("src/cli/fxwasm_cli.cpp", "#include <emscripten/val.h>"),
           ("tests/cpp/exec_test.cpp", "#include <ATen/ATen.h>"),
           ("src/exec/run.cpp", '#include "fx/torch_codegen.h"'),
           ("src/torch_codegen/to_folder.cpp", '#include "onnx/common.h"'),
           ("src/torch_codegen/to_folder.cpp", "#include <torch/script.h>")]
    good = [("src/ir/graph.cpp", '#include "ir/printer.h"'),
            ("src/ir/graph.cpp", "#include <vector>"),
            ("src/passes/passes.cpp", '#include "fx/graph.h"'),
            ("src/exec/ops_nn.cpp", '#include "kernels/conv.h"'),
            ("src/exec/run.cpp", '#include "fx/onnx.h"'),
            ("src/onnx/import.cpp", '#include "onnx.pb.h"'),
            ("src/torch/ops.cpp", "#include <ATen/ATen.h>"),
            ("wasm/bindings.cpp", "#include <emscripten/bind.h>"),
            ("tests/cpp/exec_test.cpp", '#include "kernels/conv.h"'),
            ("src/torch_codegen/to_folder.cpp", '#include "torch_codegen/zip_writer.h"'),
            ("src/cli/fxwasm_cli.cpp", '#include "fx/torch_codegen.h"')]
    failures = [f"not caught: {f}: {l}" for f, l in bad if not check_line(f, l)]
    failures += [f"wrongly refused: {f}: {l}: {check_line(f, l)}" for f, l in good
                 if check_line(f, l)]
    for f in failures:
        print(f)
    return not failures


def main():
    if not self_test():
        print("check_layers: the self-test failed")
        return 1
    if "--table" in sys.argv:
        print("| layer | what | may include |")
        print("|---|---|---|")
        for layer, allowed in ALLOWED.items():
            print(f"| {layer} | {ABOUT[layer]} | {', '.join(allowed) or '(only itself)'} |")
        return 0
    problems = []
    checked = 0
    for d in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, d)):
            for f in sorted(files):
                if not f.endswith((".h", ".cpp", ".inc")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
                layer = layer_of_file(rel)
                if layer is None:
                    if rel.startswith("include/"):
                        problems.append(f"{rel}: a public header in no layer: add it to "
                                        "scripts/check_layers.py")
                    continue
                checked += 1
                with open(path, encoding="utf-8") as fh:
                    for lineno, line in enumerate(fh, 1):
                        why = check_line(rel, line)
                        if why:
                            problems.append(f"{rel}:{lineno}: {why}")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} violation(s) in {checked} files "
              "(rules: docs/architecture.md, scripts/check_layers.py)")
        return 1
    print(f"check_layers: {checked} files follow the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main())
