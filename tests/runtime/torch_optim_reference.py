"""Reference optimizer runs for test_optim_torch: reads p0.npy (f32 [n]) and
g.npy (f32 [steps, n]) from the directory argv[1], runs each configuration
with torch.optim, writes <name>.npy with the final parameters. The C test
holds the same table of configurations."""
import sys

import numpy as np
import torch

CONFIGS = [
    ("sgd", torch.optim.SGD, dict(lr=0.1)),
    ("sgd_momentum", torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("sgd_nesterov", torch.optim.SGD,
     dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.001)),
    ("adamw", torch.optim.AdamW, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)),
    ("adamw_nodecay", torch.optim.AdamW,
     dict(lr=0.003, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.0)),
]

d = sys.argv[1]
p0 = np.load(d + "/p0.npy")
grads = np.load(d + "/g.npy")
for name, cls, kw in CONFIGS:
    p = torch.nn.Parameter(torch.tensor(p0))
    opt = cls([p], **kw)
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
    np.save(f"{d}/{name}.npy", p.detach().numpy())
