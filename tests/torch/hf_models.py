"""trainc models against Hugging Face transformers' own modules (needs the
transformers package): the same weights loaded into transformers' BertModel
under its names, for parity.py (model names hf_*).

HFBert is tests/torch/bert_small.nn as transformers.BertModel (a config
read from the weights: exact GELU, layernorm eps 1e-12, no dropout) with its
pooler, then the file's head: linear maps of the mean pooling over the mask
and of the pooler's output, summed. Its parameters are named as trainc names
them (named_parameters, load_state_dict), so parity.py compares them as it
compares models.py's."""
import re

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig, BertModel

import models

# trainc's names (tests/torch/bert_small.nn) → BertModel's, as regexes.
NAMES = [(r"words\.weight", "embeddings.word_embeddings.weight"),
         (r"types\.weight", "embeddings.token_type_embeddings.weight"),
         (r"position", "embeddings.position_embeddings.weight"),
         (r"h\.(weight|bias)", r"embeddings.LayerNorm.\1"),
         (r"layer\.(\d+)\.attention\.q\.", r"encoder.layer.\1.attention.self.query."),
         (r"layer\.(\d+)\.attention\.k\.", r"encoder.layer.\1.attention.self.key."),
         (r"layer\.(\d+)\.attention\.v\.", r"encoder.layer.\1.attention.self.value."),
         (r"layer\.(\d+)\.attention\.proj\.", r"encoder.layer.\1.attention.output.dense."),
         (r"layer\.(\d+)\.attention_ln\.", r"encoder.layer.\1.attention.output.LayerNorm."),
         (r"layer\.(\d+)\.ffn\.", r"encoder.layer.\1.intermediate.dense."),
         (r"layer\.(\d+)\.ffn_1\.", r"encoder.layer.\1.output.dense."),
         (r"layer\.(\d+)\.layernorm\.", r"encoder.layer.\1.output.LayerNorm."),
         (r"pooler\.", "pooler.dense.")]


def to_hf(name):
    """BertModel's name of trainc's parameter `name` ("bert." + it), or the
    head's own."""
    for pattern, replacement in NAMES:
        hf, n = re.subn("^" + pattern, replacement, name)
        if n:
            return "bert." + hf
    return name


class HFBert(nn.Module):
    HEADS = models.Bert.HEADS
    T = models.Bert.T

    def __init__(self, weights):
        super().__init__()
        vocab, width = weights["words.weight"].shape
        depth = sum(1 for k in weights
                    if k.startswith("layer.") and k.endswith(".layernorm.weight"))
        config = BertConfig(vocab_size=vocab, hidden_size=width, num_hidden_layers=depth,
                            num_attention_heads=self.HEADS,
                            intermediate_size=weights["layer.0.ffn.weight"].shape[0],
                            max_position_embeddings=weights["position"].shape[0],
                            type_vocab_size=weights["types.weight"].shape[0], hidden_act="gelu",
                            layer_norm_eps=1e-12, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)
        self.bert = BertModel(config, add_pooling_layer=True)
        self.logits = models.linear_like(weights, "logits")
        self.logits_1 = models.linear_like(weights, "logits_1")
        self.to_ours = {to_hf(k): k for k in weights}

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        for name, p in super().named_parameters(prefix, recurse, remove_duplicate):
            yield self.to_ours[name], p

    def load_state_dict(self, state, strict=True):
        return super().load_state_dict({to_hf(k): v for k, v in state.items()}, strict=strict)

    def make_data(self, rng, n):
        """Padded sequences, none all padding (where BertModel's attention
        weighs every key alike and trainc's weighs none: docs/ops.md)."""
        return models.encoder_batch(rng, n, self.T, self.bert.config.vocab_size,
                                    self.logits.out_features, all_padding=False)

    def forward(self, batch):
        mask = batch["mask"]
        out = self.bert(input_ids=batch["ids"].long(), attention_mask=mask.long(),
                        token_type_ids=batch["token_types"].long())
        pooled = models.mean_pool(out.last_hidden_state, mask)
        logits = self.logits(pooled) + self.logits_1(out.pooler_output)
        return F.cross_entropy(logits, batch["label"].long()), logits


MODELS = {"hf_bert": HFBert}
