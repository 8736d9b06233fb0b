#!/usr/bin/python3
"""torch.fx 1.13 twin of bench/torch_interp.cpp's tracing figure: median time of
torch.fx.symbolic_trace(torchvision resnet18()) (GraphModule included), one thread."""
import sys
import time

import torch
import torch.fx
import torchvision

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
torch.set_num_threads(1)
m = torchvision.models.resnet18().eval()
torch.fx.symbolic_trace(m)  # warm-up (imports, caches)
t = []
for _ in range(runs):
    t0 = time.perf_counter()
    torch.fx.symbolic_trace(m)
    t.append((time.perf_counter() - t0) * 1000)
t.sort()
print(f"torchfx_resnet18_trace_ms {t[len(t) // 2]:.3f}")
