"""The benchmark's PyTorch side, written as a PyTorch expert writes these
models (not as the parity tests do, whose models mirror trainc's parameter
layout one to one): nn.Linear / nn.Conv2d / nn.LayerNorm / nn.Embedding
modules, one fused nn.Linear(d, 3d) for q, k and v, the causal mask built once
as a buffer, F.linear(x, wte.weight) for the tied output layer,
F.cross_entropy on logits, zero_grad(set_to_none=True), AdamW's multi-tensor
implementation (foreach=True) and PyTorch 2's fused causal attention
(F.scaled_dot_product_attention, is_causal=True), as nanoGPT writes it.

Each model loads a trainc trainer's initial weights (.safetensors), mapping
names (and concatenating q, k, v into c_attn), so that both sides start from
the same point and their first losses can be compared.

  build(name, weights) -> model     weights: {trainc name: np.ndarray}
  model(batch) -> loss              batch: {input name: tensor}, as the trainer reads it
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def _set(param, array):
    with torch.no_grad():
        param.copy_(torch.from_numpy(array.copy()))


def _linear(weights, name):
    w = weights[name + ".weight"]
    layer = nn.Linear(w.shape[1], w.shape[0], bias=name + ".bias" in weights)
    _set(layer.weight, w)
    if layer.bias is not None:
        _set(layer.bias, weights[name + ".bias"])
    return layer


def _layernorm(weights, name):
    layer = nn.LayerNorm(weights[name + ".weight"].shape[0])
    _set(layer.weight, weights[name + ".weight"])
    _set(layer.bias, weights[name + ".bias"])
    return layer


class MLP(nn.Module):
    """fashion_mlp (u8 image / 255) and deep_mlp (f32 x): Linear + ReLU layers, a linear head."""

    def __init__(self, weights, names, scale_input):
        super().__init__()
        self.scale_input = scale_input
        self.layers = nn.ModuleList(_linear(weights, n) for n in names)

    def forward(self, batch):
        x = batch["image"].float() / 255.0 if self.scale_input else batch["x"]
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return F.cross_entropy(self.layers[-1](x), batch["label"].long())


class CNN(nn.Module):
    """fashion_cnn without dropout: two (conv 3x3 pad 1, ReLU, max-pool 2), then two linear layers."""

    def __init__(self, weights):
        super().__init__()
        convs = []
        for name in ("conv1", "conv2"):
            w = weights[name + ".weight"]
            conv = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], padding=1)
            _set(conv.weight, w)
            _set(conv.bias, weights[name + ".bias"])
            convs += [conv, nn.ReLU(), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*convs, nn.Flatten())
        self.fc = _linear(weights, "fc")
        self.head = _linear(weights, "logits")

    def forward(self, batch):
        x = (batch["image"].float() / 255.0).view(-1, 1, 28, 28)
        return F.cross_entropy(self.head(F.relu(self.fc(self.features(x)))), batch["label"].long())


class Attention(nn.Module):
    def __init__(self, weights, prefix, heads):
        super().__init__()
        self.heads = heads
        parts = [weights[f"{prefix}.{p}.weight"] for p in "qkv"]
        d = parts[0].shape[1]
        self.c_attn = nn.Linear(d, 3 * d)
        _set(self.c_attn.weight, np.concatenate(parts, 0))
        _set(self.c_attn.bias, np.concatenate([weights[f"{prefix}.{p}.bias"] for p in "qkv"]))
        self.c_proj = _linear(weights, prefix + ".proj")

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, weights, prefix, heads):
        super().__init__()
        self.ln_1 = _layernorm(weights, prefix + ".ln_1")
        self.attn = Attention(weights, prefix + ".attn", heads)
        self.ln_2 = _layernorm(weights, prefix + ".ln_2")
        self.c_fc = _linear(weights, prefix + ".fc")
        self.c_proj = _linear(weights, prefix + ".proj")

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    """gpt.nn / gpt124m.nn without dropout: tied wte, learned positions, pre-LN blocks."""

    def __init__(self, weights, heads):
        super().__init__()
        depth = sum(1 for k in weights if k.startswith("block.") and k.endswith(".ln_1.weight"))
        self.wte = nn.Embedding(*weights["wte"].shape)
        self.wpe = nn.Embedding(*weights["wpe"].shape)
        _set(self.wte.weight, weights["wte"])
        _set(self.wpe.weight, weights["wpe"])
        self.h = nn.ModuleList(Block(weights, f"block.{i}", heads) for i in range(depth))
        self.ln_f = _layernorm(weights, "ln_f")

    def forward(self, batch):
        idx = batch["tokens"].long()
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), batch["targets"].long().view(-1))


def build(name, weights):
    if name == "fashion_mlp":
        return MLP(weights, ["h1", "h2", "logits"], True)
    if name == "deep_mlp":
        depth = sum(1 for k in weights if k.startswith("layer.") and k.endswith(".weight"))
        return MLP(weights, [f"layer.{i}.linear" for i in range(depth)] + ["logits"], False)
    if name == "fashion_cnn":
        return CNN(weights)
    if name == "gpt":
        return GPT(weights, heads=4)
    if name == "gpt124m":
        return GPT(weights, heads=12)
    raise KeyError(name)


def param_groups(model):
    """AdamW's groups as trainc applies weight decay: matrices and tables decay,
    biases and layernorm parameters do not."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2]},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
