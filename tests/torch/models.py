"""The trainc examples written again by hand in PyTorch (torch.nn modules and
torch.nn.functional), independent of trainc's lowering. Attribute names follow
trainc's parameter names (docs/ops.md: `h1 = relu(linear(x, 512))` declares
h1.weight and h1.bias), so a trainer's .safetensors file loads with
load_state_dict(strict=True). Layer sizes are read from the weights; the
architecture is what is written here.

Each model class has:
  __init__(weights)         modules sized from {name: array}
  make_data(rng, n)         {input name: array}, n random examples as the
                            trainer reads them (.npy dtypes)
  forward(batch)            (loss, predict) from {input name: tensor}
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def linear_like(weights, name):
    out_features, in_features = weights[name + ".weight"].shape
    return nn.Linear(in_features, out_features, bias=name + ".bias" in weights)


class FashionMLP(nn.Module):
    """examples/fashion_mlp.nn: u8 image / 255 → linear+relu → linear+relu → linear."""

    def __init__(self, weights):
        super().__init__()
        self.h1 = linear_like(weights, "h1")
        self.h2 = linear_like(weights, "h2")
        self.logits = linear_like(weights, "logits")

    def make_data(self, rng, n):
        return {"image": rng.integers(0, 256, (n, self.h1.in_features), dtype=np.uint8),
                "label": rng.integers(0, self.logits.out_features, n, dtype=np.int32)}

    def forward(self, batch):
        x = batch["image"].float() / 255.0
        h = F.relu(self.h1(x))
        h = F.relu(self.h2(h))
        logits = self.logits(h)
        return F.cross_entropy(logits, batch["label"].long()), logits


MODELS = {"fashion_mlp": FashionMLP}
