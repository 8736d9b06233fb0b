#!/usr/bin/python3
"""Checks what fx::torch_codegen wrote against PyTorch itself (Debian's torch 1.13).

    /usr/bin/python3 tests/torch_codegen/check_package.py SPEC.json

SPEC (written by tests/cpp/torch_codegen_test.cpp) says what to check:
  {"kind": "state_dict", "file": ".../x.pt", "tensors": [TENSOR...]}
      torch.load(file) is an OrderedDict with exactly these names, in this order, each with the
      dtype, shape and bytes given.
  {"kind": "zip", "file": ".../x.zip", "entries": {"name": "hex", ...}}
      Python's zipfile reads the archive (zip64 records included), its CRCs check, and each
      entry holds the given bytes.
  {"kind": "package", "dir": ".../pkg_name", "class": "Net", "tensors": [TENSOR...],
   "inputs": [TENSOR...], "reference": "<python expression>", "graph": ".../graph.txt",
   "atol": 1e-5}
      imports the package, builds the class, checks its state_dict as above and that exactly
      the tensors marked "param" are nn.Parameters; runs forward (eval mode) on the inputs and
      compares with `reference`, an independent formula evaluated with `sd` (the expected
      tensors by name), `inputs`, `torch` and `F`; checks that print(symbolic_trace(m).graph)
      is the text of `graph` (fxwasm's print of the same graph); without "graph", no trace.
  TENSOR = {"name": "fc.weight", "dtype": "float32", "shape": [2, 3], "hex": "...",
            "param": true}
Prints what differs and exits 1 on any mismatch.
"""
import collections
import importlib
import json
import os
import sys
import zipfile

import torch
import torch.nn.functional as F

failures = []


def fail(msg):
    failures.append(msg)


def tensor_of(spec):
    dtype = getattr(torch, spec["dtype"])
    raw = bytearray(bytes.fromhex(spec["hex"]))
    if not raw:
        return torch.empty(spec["shape"], dtype=dtype)
    flat = torch.frombuffer(raw, dtype=torch.uint8).view(dtype)
    return flat.reshape(spec["shape"]).clone()


def raw_bytes(t):
    # The tensor's bytes (contiguous, little-endian): a uint8 view of its flat copy.
    t = t.detach().contiguous().reshape(-1)
    if t.numel() == 0:
        return b""
    return bytes(t.view(torch.uint8).tolist())


def check_tensors(where, got, specs):
    names = [s["name"] for s in specs]
    if list(got.keys()) != names:
        fail(f"{where}: names {list(got.keys())} != expected {names}")
    for s in specs:
        t = got.get(s["name"])
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            fail(f"{where}: {s['name']} is a {type(t).__name__}, not a tensor")
            continue
        if str(t.dtype) != "torch." + s["dtype"]:
            fail(f"{where}: {s['name']} dtype {t.dtype} != torch.{s['dtype']}")
        if list(t.shape) != s["shape"]:
            fail(f"{where}: {s['name']} shape {list(t.shape)} != {s['shape']}")
        elif raw_bytes(t) != bytes.fromhex(s["hex"]):
            fail(f"{where}: {s['name']} values differ from the bytes fxwasm wrote")


def check_state_dict(spec):
    sd = torch.load(spec["file"])
    if type(sd) is not collections.OrderedDict:
        fail(f"torch.load gave a {type(sd).__name__}, not an OrderedDict")
        return
    check_tensors("torch.load", sd, spec["tensors"])


def check_zip(spec):
    with zipfile.ZipFile(spec["file"]) as z:
        bad = z.testzip()
        if bad is not None:
            fail(f"zipfile: bad CRC in {bad}")
        names = [i.filename for i in z.infolist()]
        if names != list(spec["entries"].keys()):
            fail(f"zipfile: entries {names} != {list(spec['entries'].keys())}")
        for name, hexdata in spec["entries"].items():
            if name in names and z.read(name) != bytes.fromhex(hexdata):
                fail(f"zipfile: {name} holds other bytes")


def check_package(spec):
    folder = spec["dir"]
    sys.path.insert(0, os.path.dirname(folder))
    pkg = importlib.import_module(os.path.basename(folder))
    m = getattr(pkg, spec["class"])()
    m.eval()
    check_tensors("module.state_dict()", m.state_dict(), spec["tensors"])
    params = dict(m.named_parameters())
    for s in spec["tensors"]:
        is_param = isinstance(params.get(s["name"]), torch.nn.Parameter)
        if is_param != s["param"]:
            fail(f"{s['name']}: nn.Parameter is {is_param}, expected {s['param']}")
    check_tensors("torch.load(state_dict.pt)",
                  torch.load(os.path.join(folder, "state_dict.pt")), spec["tensors"])

    sd = {s["name"]: tensor_of(s) for s in spec["tensors"]}
    inputs = [tensor_of(s) for s in spec["inputs"]]
    with torch.no_grad():
        got = m(*inputs)
        want = eval(spec["reference"], {"torch": torch, "F": F, "sd": sd, "inputs": inputs})
    got_list = list(got) if isinstance(got, (tuple, list)) else [got]
    want_list = list(want) if isinstance(want, (tuple, list)) else [want]
    if len(got_list) != len(want_list):
        fail(f"forward gave {len(got_list)} outputs, the reference {len(want_list)}")
    for i, (g, w) in enumerate(zip(got_list, want_list)):
        if g.dtype != w.dtype or g.shape != w.shape:
            fail(f"output {i}: {g.dtype}{list(g.shape)} != reference {w.dtype}{list(w.shape)}")
        elif g.is_floating_point():
            if not torch.allclose(g, w, atol=spec.get("atol", 1e-5), rtol=1e-5):
                fail(f"output {i}: max |diff| {(g - w).abs().max().item()} to the reference")
        elif not torch.equal(g, w):
            fail(f"output {i}: differs from the reference")

    if "graph" not in spec:
        return
    traced = str(torch.fx.symbolic_trace(m).graph)
    with open(spec["graph"]) as f:
        expected = f.read()
    if traced.strip() != expected.strip():
        fail("print(symbolic_trace(module).graph) differs from fxwasm's graph:\n--- torch\n" +
             traced + "\n--- fxwasm\n" + expected)


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    {"state_dict": check_state_dict, "zip": check_zip, "package": check_package}[spec["kind"]](spec)
    for msg in failures:
        print(msg)
    if failures:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
