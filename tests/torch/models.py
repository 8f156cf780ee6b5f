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


class PairClassifier(nn.Module):
    """examples/pair_classifier.nn: bags of words a, b → mean embeddings u, v →
    Sentence-BERT head over [u, v, |u-v|, u*v] → relu → linear → 2 classes."""

    def __init__(self, weights):
        super().__init__()
        self.emb = nn.Parameter(torch.empty(weights["emb"].shape))
        self.pu = linear_like(weights, "pu")
        self.pv = linear_like(weights, "pv")
        self.pd = linear_like(weights, "pd")
        self.pm = linear_like(weights, "pm")
        self.logits = linear_like(weights, "logits")

    def make_data(self, rng, n):
        """Random sentences of 1..12 words, as normalized bags of words."""
        vocab = self.emb.shape[0]

        def bags():
            out = np.zeros((n, vocab), np.float32)
            for row in out:
                words = rng.integers(0, vocab, rng.integers(1, 13))
                np.add.at(row, words, np.float32(1.0 / len(words)))
            return out
        return {"a": bags(), "b": bags(), "label": rng.integers(0, 2, n, dtype=np.int32)}

    def forward(self, batch):
        u, v = batch["a"] @ self.emb, batch["b"] @ self.emb
        h = F.relu(self.pu(u) + self.pv(v) + self.pd(torch.abs(u - v)) + self.pm(u * v))
        logits = self.logits(h)
        return F.cross_entropy(logits, batch["label"].long()), logits


class DeepMLP(nn.Module):
    """examples/deep_mlp.nn: `repeat N layer(x)` with layer = relu(linear(x, width)),
    then a linear layer to the classes. trainc names copy i's weights
    layer.<i>.linear.weight, which a ModuleList of {"linear": Linear} matches."""

    def __init__(self, weights):
        super().__init__()
        depth = sum(1 for k in weights if k.startswith("layer.") and k.endswith(".weight"))
        self.layer = nn.ModuleList(
            nn.ModuleDict({"linear": linear_like(weights, f"layer.{i}.linear")})
            for i in range(depth))
        self.logits = linear_like(weights, "logits")

    def make_data(self, rng, n):
        width = self.layer[0]["linear"].in_features
        return {"x": rng.standard_normal((n, width), dtype=np.float32),
                "label": rng.integers(0, self.logits.out_features, n, dtype=np.int32)}

    def forward(self, batch):
        h = batch["x"]
        for layer in self.layer:
            h = F.relu(layer["linear"](h))
        logits = self.logits(h)
        return F.cross_entropy(logits, batch["label"].long()), logits


MODELS = {"fashion_mlp": FashionMLP, "pair_classifier": PairClassifier, "deep_mlp": DeepMLP}
