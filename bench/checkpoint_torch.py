"""The PyTorch side of bench/checkpoint.sh: the same deep or residual MLP,
trained with AdamW, optionally under torch.utils.checkpoint.checkpoint_sequential.

usage: checkpoint_torch.py deep|res SEGMENTS STEPS   (SEGMENTS 0: no checkpointing)
prints: step_seconds=<median> saved_mib=<activation bytes saved by forward> maxrss_kib=<peak RSS>
"""
import resource
import statistics
import sys
import time

import torch
from torch.utils.checkpoint import checkpoint_sequential

kind, segments, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(2)
torch.manual_seed(0)
B, D = 512, 1024


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(D, D), torch.nn.Linear(D, D)

    def forward(self, x):
        return x + self.l2(torch.relu(self.l1(x)))


if kind == "deep":
    layers = []
    for _ in range(32):
        layers += [torch.nn.Linear(D, D), torch.nn.ReLU()]
else:
    layers = [Block() for _ in range(16)]
body = torch.nn.Sequential(*layers)
head = torch.nn.Linear(D, 10)
params = list(body.parameters()) + list(head.parameters())
opt = torch.optim.AdamW(params, lr=1e-4)
x = torch.randn(B, D)
y = torch.randint(0, 10, (B,))

saved = {"bytes": 0, "seen": set(), "count": False}
param_storage = {p.storage().data_ptr() for p in params}


def pack(t):
    """Counts the activation bytes autograd saves during forward (not weights)."""
    if saved["count"]:
        key = t.storage().data_ptr()
        if key not in saved["seen"] and key not in param_storage:
            saved["seen"].add(key)
            saved["bytes"] += t.numel() * t.element_size()
    return t


def step():
    opt.zero_grad(set_to_none=False)
    saved["bytes"], saved["seen"], saved["count"] = 0, set(), True
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        # torch 1.13's checkpoint_sequential is reentrant: without an input
        # that requires grad, parameters silently get no gradient.
        inp = x.clone().requires_grad_(segments > 0)
        h = checkpoint_sequential(body, segments, inp) if segments > 0 else body(inp)
        loss = torch.nn.functional.cross_entropy(head(h), y)
        saved["count"] = False
        loss.backward()
    opt.step()


times = []
for i in range(steps + 2):
    t = time.perf_counter()
    step()
    if i >= 2:
        times.append(time.perf_counter() - t)
print(f"step_seconds={statistics.median(times):.4f} saved_mib={saved['bytes'] / 2**20:.1f} "
      f"maxrss_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
