#!/usr/bin/python3
"""Pass benchmark, torch.fx 1.13 twin of bench/passes.cpp (run by bench/run_passes.sh).

Run with /usr/bin/python3 (Debian torch 1.13). On the relu(x + 1) chains (built with explicit
names, bench/ir_chain_torchfx.py's build_chain_named, so that setup is not quadratic), times each
op on a fresh copy: cse (torch.fx.passes.dialect.common.cse_pass.CSEPass), dce
(Graph.eliminate_dead_code with one dead mul per 10 steps), replace_pattern (relu(x + 1) ->
sigmoid(x)), split_module (partition = node index // 1000). An op still running after --cap
seconds is interrupted and reported as a lower bound; one that raises (1.13's recursive cycle
check hits RecursionError on long chains) is reported with the error.

    /usr/bin/python3 bench/passes_torchfx.py [--sizes 10000,50000] [--runs 5] [--cap 60]
"""
import argparse
import json
import os
import signal
import statistics
import sys
import time

import torch
import torch.fx
from torch.fx import subgraph_rewriter
from torch.fx.passes.dialect.common.cse_pass import CSEPass
from torch.fx.passes.split_module import split_module

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ir_chain_torchfx import build_chain_named  # noqa: E402

IMPL = "torchfx"


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout()


def pattern(x):
    return torch.relu(x + 1)


def replacement(x):
    return torch.sigmoid(x)


def gm_of(g):
    return torch.fx.GraphModule(torch.nn.Module(), g)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,50000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cap", type=float, default=60.0)
    a = ap.parse_args()
    signal.signal(signal.SIGALRM, on_alarm)
    # 1.13's cycle check in the matcher recurses once per node of the chain.
    sys.setrecursionlimit(200000)

    def run_split(gm):
        index = {n: i for i, n in enumerate(gm.graph.nodes)}
        return split_module(gm, gm, lambda n: index[n] // 1000)

    for N in [int(s) for s in a.sizes.split(",")]:
        steps = N // 2
        ops = [
            ("cse", lambda: gm_of(build_chain_named(steps)), lambda gm: CSEPass()(gm).graph_module),
            ("dce", lambda: build_chain_named(steps, dead_every=10),
             lambda g: g.eliminate_dead_code() and g),
            ("replace_pattern", lambda: gm_of(build_chain_named(steps)),
             lambda gm: subgraph_rewriter.replace_pattern(gm, pattern, replacement) and gm),
            ("split_module", lambda: gm_of(build_chain_named(steps)), run_split),
        ]
        for op, prep, fn in ops:
            ts, status, after = [], "ok", None
            for r in range(a.runs):
                x = prep()
                signal.setitimer(signal.ITIMER_REAL, a.cap)
                t0 = time.perf_counter()
                try:
                    out = fn(x)
                    ts.append(time.perf_counter() - t0)
                except Timeout:
                    ts.append(time.perf_counter() - t0)
                    status = "timeout"
                except RecursionError as e:
                    ts.append(time.perf_counter() - t0)
                    status = "RecursionError: " + str(e)[:60]
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                if status != "ok":
                    break
                g = out.graph if hasattr(out, "graph") else (out if isinstance(out, torch.fx.Graph) else x.graph if hasattr(x, "graph") else x)
                after = len(g.nodes)
                if ts[0] > 5.0:  # slow: one sample is enough
                    break
            print(json.dumps(dict(impl=IMPL, N=N, op=op, seconds=statistics.median(ts),
                                  runs=len(ts), lower_bound=status == "timeout",
                                  status=status, nodes_after=after)), flush=True)


if __name__ == "__main__":
    main()
