#!/usr/bin/python3
"""IR chain benchmark, torch.fx reference runner (issue "FX IR core").

Run with /usr/bin/python3 (Debian torch 1.13). Builds a chain of `relu(x + 1)` steps with the
torch.fx Graph API and times build / print / codegen / lint / dce / graph_copy.
Prints one JSON line per (impl, N, op, seconds), plus `check` lines (length + FNV-1a 64 of the
1k chain's str(graph) and generated code) that run_ir.sh compares with the C++ runner.

    /usr/bin/python3 bench/ir_chain_torchfx.py [--sizes 1000,10000,50000] [--dump PREFIX]
                                               [--build-cap SECONDS]
"""
import argparse
import copy
import json
import operator
import statistics
import sys
import time

import torch
import torch.fx

IMPL = "torchfx"


def fnv1a64(s: str) -> str:
    h = 0xCBF29CE484222325
    for b in s.encode("utf-8"):
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def build_chain(steps, cap=None):
    """The timed build: plain Graph API, torch.fx picks the names (quadratic in 1.13).

    With `cap` (seconds), stops early once the cap is exceeded; returns (graph, complete)."""
    t0 = time.perf_counter()
    g = torch.fx.Graph()
    prev = g.placeholder("x")
    for i in range(steps):
        add = g.call_function(operator.add, (prev, 1))
        prev = g.call_function(torch.relu, (add,))
        if cap is not None and (i & 255) == 255 and time.perf_counter() - t0 > cap:
            return g, False
    g.output(prev)
    return g, True


def build_chain_named(steps, dead_every=0):
    """The same graph, built with explicit names (the ones torch.fx would pick) so setup of the
    graphs for the other ops is not quadratic. `dead_every`: one dead `operator.mul(add, 2)`
    node after every `dead_every`-th step (the DCE variant)."""
    g = torch.fx.Graph()
    prev = g.placeholder("x")
    n_dead = 0
    for i in range(steps):
        sfx = f"_{i}" if i else ""
        add = g.create_node("call_function", operator.add, (prev, 1), {}, name="add" + sfx)
        prev = g.create_node("call_function", torch.relu, (add,), {}, name="relu" + sfx)
        if dead_every and i % dead_every == dead_every - 1:
            g.create_node("call_function", operator.mul, (add, 2), {},
                          name="mul" + (f"_{n_dead}" if n_dead else ""))
            n_dead += 1
    g.output(prev)
    return g


def emit(**kw):
    print(json.dumps(kw), flush=True)


def timed(fn, runs, slow=None):
    """Median of `runs` timings of fn() (fn returns seconds or does the work itself).
    If `slow` is given and the first run takes longer, stop after it."""
    ts = []
    for r in range(runs):
        ts.append(fn())
        if slow is not None and ts[0] > slow:
            break
    return statistics.median(ts), len(ts)


def stopwatch(f):
    def run():
        t0 = time.perf_counter()
        f()
        return time.perf_counter() - t0
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build-cap", type=float, default=120.0,
                    help="stop a build that exceeds this many seconds; report a lower bound")
    ap.add_argument("--slow", type=float, default=5.0,
                    help="at N >= 50000, an op whose first run exceeds this many seconds is "
                         "run only once")
    ap.add_argument("--dump", default=None, help="write the 1k chain's text to PREFIX.{str,code}")
    a = ap.parse_args()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))

    for N in [int(s) for s in a.sizes.split(",")]:
        steps = N // 2
        slow = a.slow if N >= 50000 else None
        g = build_chain_named(steps)

        if N == 1000:
            auto, _ = build_chain(steps)
            s, c = str(g), g.python_code("self").src
            assert str(auto) == s and auto.python_code("self").src == c, "named build differs"
            emit(impl=IMPL, N=N, check="str", len=len(s.encode()), fnv1a64=fnv1a64(s))
            emit(impl=IMPL, N=N, check="code", len=len(c.encode()), fnv1a64=fnv1a64(c))
            if a.dump:
                with open(a.dump + ".str", "w") as f:
                    f.write(s)
                with open(a.dump + ".code", "w") as f:
                    f.write(c)

        # build: the plain Graph API; capped, as 1.13 names nodes in quadratic time.
        def run_build():
            t0 = time.perf_counter()
            _, complete = build_chain(steps, cap=a.build_cap)
            dt = time.perf_counter() - t0
            run_build.complete = complete
            return dt
        run_build.complete = True
        secs, runs = timed(run_build, a.runs, slow=slow)
        emit(impl=IMPL, N=N, op="build", seconds=secs, runs=runs,
             lower_bound=not run_build.complete, nodes=len(g.nodes))

        for op, f in [("print", lambda: str(g)),
                      ("codegen", lambda: g.python_code("self").src),
                      ("lint", lambda: g.lint())]:
            secs, runs = timed(stopwatch(f), a.runs, slow=slow)
            emit(impl=IMPL, N=N, op=op, seconds=secs, runs=runs, lower_bound=False)

        def run_dce():
            gd = build_chain_named(steps, dead_every=10)
            t0 = time.perf_counter()
            changed = gd.eliminate_dead_code()
            dt = time.perf_counter() - t0
            assert changed and len(gd.nodes) == len(g.nodes)
            return dt
        secs, runs = timed(run_dce, a.runs, slow=slow)
        emit(impl=IMPL, N=N, op="dce", seconds=secs, runs=runs, lower_bound=False)

        def run_copy():
            t0 = time.perf_counter()
            g2 = copy.deepcopy(g)
            dt = time.perf_counter() - t0
            assert len(g2.nodes) == len(g.nodes)
            return dt
        secs, runs = timed(run_copy, a.runs, slow=slow)
        emit(impl=IMPL, N=N, op="graph_copy", seconds=secs, runs=runs, lower_bound=False)


if __name__ == "__main__":
    main()
