#!/usr/bin/env python3
"""Writes vocab.json and merges.txt here: a hand-made GPT-2-format BPE for the
tokenizer tests (tests/runtime/test_tokenizer.c, text.sh). The first 256 ids
are the bytes in GPT-2's own order (bytes_to_unicode), then one token per
merge, then <|endoftext|>. The merges are chosen so that the expected
tokenizations in test_tokenizer.c show the merge ranks, the pre-tokenizer's
splits (letters / numbers / whitespace lookahead / contractions) and
multi-byte characters."""
import json


def bytes_to_unicode():  # as GPT-2's encoder.py
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, [chr(c) for c in cs]


MERGES = ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld",
          "Ċ Ċ", "Ã ©", "x 1", "1 2", "Ġ Ġ", "' s", "Ġ b", "Ġ '"]

bs, cs = bytes_to_unicode()
vocab = {c: i for i, c in enumerate(cs)}
for m in MERGES:
    a, b = m.split(" ")
    vocab[a + b] = len(vocab)
vocab["<|endoftext|>"] = len(vocab)
with open("vocab.json", "w", encoding="utf-8") as f:
    json.dump(vocab, f, ensure_ascii=False, indent=0)
with open("merges.txt", "w", encoding="utf-8") as f:
    f.write("#version: 0.2\n" + "\n".join(MERGES) + "\n")
