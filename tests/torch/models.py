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
import math

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


def conv_like(weights, name, **kw):
    out_channels, in_channels, k, _ = weights[name + ".weight"].shape
    return nn.Conv2d(in_channels, out_channels, k, bias=name + ".bias" in weights, **kw)


class FashionCNN(nn.Module):
    """examples/fashion_cnn.nn: two (conv 3x3 padding 1 → relu → max-pool 2),
    flatten → dropout → linear + relu → linear. `dropout` is the example's p
    for benchmarks; the parity test's copy has 0, as here by default."""

    def __init__(self, weights, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.conv1 = conv_like(weights, "conv1", padding=1)
        self.conv2 = conv_like(weights, "conv2", padding=1)
        self.fc = linear_like(weights, "fc")
        self.logits = linear_like(weights, "logits")

    def make_data(self, rng, n):
        return {"image": rng.integers(0, 256, (n, 784), dtype=np.uint8),
                "label": rng.integers(0, self.logits.out_features, n, dtype=np.int32)}

    def forward(self, batch):
        x = (batch["image"].float() / 255.0).view(-1, 1, 28, 28)
        pool1 = F.max_pool2d(F.relu(self.conv1(x)), 2)
        pool2 = F.max_pool2d(F.relu(self.conv2(pool1)), 2)
        fc = F.relu(self.fc(F.dropout(torch.flatten(pool2, 1), self.p, self.training)))
        logits = self.logits(fc)
        return F.cross_entropy(logits, batch["label"].long()), logits


class CausalSelfAttention(nn.Module):
    """GPT-2's attention: q, k, v projections, heads, causal softmax, output projection."""

    def __init__(self, weights, prefix, heads, dropout):
        super().__init__()
        self.heads, self.p = heads, dropout
        for part in ("q", "k", "v", "proj"):
            setattr(self, part, linear_like(weights, f"{prefix}.{part}"))

    def forward(self, x):
        b, t, c = x.shape
        split = lambda y: y.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.heads)
        future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        probs = F.dropout(F.softmax(scores.masked_fill(future, float("-inf")), dim=-1), self.p,
                          self.training)
        return self.proj((probs @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """GPT-2's pre-layernorm block: x + attn(ln_1(x)), then x + proj(gelu(fc(ln_2(x))))."""

    def __init__(self, weights, prefix, heads, dropout):
        super().__init__()
        width = weights[prefix + ".ln_1.weight"].shape[0]
        self.p = dropout
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(weights, prefix + ".attn", heads, dropout)
        self.ln_2 = nn.LayerNorm(width)
        self.fc = linear_like(weights, prefix + ".fc")
        self.proj = linear_like(weights, prefix + ".proj")

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + F.dropout(self.proj(F.gelu(self.fc(self.ln_2(x)))), self.p, self.training)


class GPT(nn.Module):
    """examples/gpt.nn: token embedding wte + learned positions wpe, blocks,
    ln_f, output layer tied to wte; 4 heads. `dropout` (after the attention
    softmax and the MLP) is the example's p for benchmarks; the parity test's
    copy has 0, as here by default."""
    HEADS = 4

    def __init__(self, weights, dropout=0.0):
        super().__init__()
        depth = sum(1 for k in weights if k.startswith("block.") and k.endswith(".ln_1.weight"))
        self.wte = nn.Parameter(torch.empty(weights["wte"].shape))
        self.wpe = nn.Parameter(torch.empty(weights["wpe"].shape))
        self.block = nn.ModuleList(Block(weights, f"block.{i}", self.HEADS, dropout)
                                   for i in range(depth))
        self.ln_f = nn.LayerNorm(self.wte.shape[1])

    def make_data(self, rng, n):
        shape = (n, self.wpe.shape[0])
        return {"tokens": rng.integers(0, self.wte.shape[0], shape, dtype=np.int32),
                "targets": rng.integers(0, self.wte.shape[0], shape, dtype=np.int32)}

    def forward(self, batch):
        x = F.embedding(batch["tokens"].long(), self.wte) + self.wpe
        for block in self.block:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.t()
        loss = F.cross_entropy(logits.flatten(0, 1), batch["targets"].long().flatten())
        return loss, logits


class SelfAttention(nn.Module):
    """BERT's attention: q, k, v projections, heads, a softmax over the keys
    whose mask is 1, output projection. A query whose keys are all masked
    gets weights 0 (trainc's choice; Hugging Face's large negative fill
    gives such a row uniform weights instead): its scores are zeroed before
    the softmax, so that no NaN arises, and its weights multiplied by 0."""

    def __init__(self, weights, prefix, heads):
        super().__init__()
        self.heads = heads
        for part in ("q", "k", "v", "proj"):
            setattr(self, part, linear_like(weights, f"{prefix}.{part}"))

    def forward(self, x, mask):
        b, t, c = x.shape
        split = lambda y: y.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.heads)
        keep = mask.bool()[:, None, None, :]
        any_key = keep.any(-1, keepdim=True)
        scores = scores.masked_fill(~keep, float("-inf")).masked_fill(~any_key, 0.0)
        probs = F.softmax(scores, dim=-1) * keep
        return self.proj((probs @ v).transpose(1, 2).reshape(b, t, c))


class EncoderLayer(nn.Module):
    """BERT's post-layernorm layer: ln(x + attn(x)), then ln(y + ffn_1(gelu(ffn(y))))."""

    def __init__(self, weights, prefix, heads):
        super().__init__()
        width = weights[prefix + ".layernorm.weight"].shape[0]
        self.attention = SelfAttention(weights, prefix + ".attention", heads)
        self.attention_ln = nn.LayerNorm(width, eps=1e-12)
        self.ffn = linear_like(weights, prefix + ".ffn")
        self.ffn_1 = linear_like(weights, prefix + ".ffn_1")
        self.layernorm = nn.LayerNorm(width, eps=1e-12)

    def forward(self, x, mask):
        y = self.attention_ln(x + self.attention(x, mask))
        return self.layernorm(y + self.ffn_1(F.gelu(self.ffn(y))))


def mean_pool(h, mask):
    """sentence-transformers' mean pooling: the mean over the real tokens."""
    m = mask.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)


def encoder_batch(rng, n, t, vocab, classes, all_padding):
    """n sequences of 1..t real tokens then padding (the mask 0 there), the
    second half of each of type 1; with all_padding, the last sequence is
    padding only."""
    lengths = rng.integers(1, t + 1, n)
    if all_padding:
        lengths[-1] = 0
    positions = np.arange(t)[None, :]
    mask = (positions < lengths[:, None]).astype(np.int32)
    types = (positions >= (lengths[:, None] + 1) // 2).astype(np.int32) * mask
    return {"ids": rng.integers(0, vocab, (n, t), dtype=np.int32) * mask,
            "token_types": types, "mask": mask,
            "label": rng.integers(0, classes, n, dtype=np.int32)}


class Bert(nn.Module):
    """tests/torch/bert_small.nn: embeddings words + types + positions (the
    first T rows of the table) → layernorm → post-layernorm layers (4 heads)
    → mean pooling over the mask and a tanh pooler of the [CLS] position,
    each through a linear map to the classes, summed."""
    HEADS = 4
    T = 10  # the model file's sequence length (its position table has more rows)

    def __init__(self, weights):
        super().__init__()
        width = weights["words.weight"].shape[1]
        depth = sum(1 for k in weights
                    if k.startswith("layer.") and k.endswith(".layernorm.weight"))
        self.words = nn.Embedding(*weights["words.weight"].shape, padding_idx=0)
        self.types = nn.Embedding(*weights["types.weight"].shape)
        self.position = nn.Parameter(torch.empty(weights["position"].shape))
        self.h = nn.LayerNorm(width, eps=1e-12)
        self.layer = nn.ModuleList(EncoderLayer(weights, f"layer.{i}", self.HEADS)
                                   for i in range(depth))
        self.pooler = linear_like(weights, "pooler")
        self.logits = linear_like(weights, "logits")
        self.logits_1 = linear_like(weights, "logits_1")

    def make_data(self, rng, n):
        """Padded sequences, the last one all padding (encoder_batch)."""
        return encoder_batch(rng, n, self.T, self.words.num_embeddings, self.logits.out_features,
                             all_padding=True)

    def forward(self, batch):
        ids, mask = batch["ids"].long(), batch["mask"]
        t = ids.shape[1]
        h = self.h(self.words(ids) + self.types(batch["token_types"].long()) + self.position[:t])
        for layer in self.layer:
            h = layer(h, mask)
        pooler = torch.tanh(self.pooler(h[:, 0]))
        logits = self.logits(mean_pool(h, mask)) + self.logits_1(pooler)
        return F.cross_entropy(logits, batch["label"].long()), logits


MODELS = {"fashion_mlp": FashionMLP, "pair_classifier": PairClassifier, "deep_mlp": DeepMLP,
          "fashion_cnn": FashionCNN, "gpt": GPT, "bert": Bert}
