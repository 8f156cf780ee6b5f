"""GPT-2's BPE as its encoder.py does it (the `regex` module's \\p{L}, \\p{N}
and \\s; merges by rank), independent of runtime/data/tokenizer.c, for
bpe_reference.sh.
  bpe_reference.py learn CORPUS DIR N    writes DIR/vocab.json and DIR/merges.txt:
                                         the 256 bytes and N merges learned from CORPUS
  bpe_reference.py encode DIR FILE       prints FILE's ids, one a line
  bpe_reference.py text SEED FILE        writes random text mixing scripts,
                                         digits, marks, spaces, contractions"""
import json
import random
import sys
from collections import Counter

import regex

PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


B2U = bytes_to_unicode()


def words(text):
    return ["".join(B2U[b] for b in w.encode("utf-8")) for w in PAT.findall(text)]


def learn(corpus, out, n):
    counts = Counter(tuple(w) for w in words(open(corpus, encoding="utf-8").read()))
    merges = []
    for _ in range(int(n)):
        pairs = Counter()
        for w, c in counts.items():
            for a, b in zip(w, w[1:]):
                pairs[a, b] += c
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(best)
        merged = Counter()
        for w, c in counts.items():
            i, nw = 0, []
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    nw.append(w[i] + w[i + 1])
                    i += 2
                else:
                    nw.append(w[i])
                    i += 1
            merged[tuple(nw)] += c
        counts = merged
    vocab = {c: i for i, c in enumerate(B2U.values())}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    json.dump(vocab, open(f"{out}/vocab.json", "w", encoding="utf-8"), ensure_ascii=False)
    with open(f"{out}/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))


def bpe(token, ranks):
    word = list(token)
    while len(word) > 1:
        pairs = {(a, b) for a, b in zip(word, word[1:])}
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        i, nw = 0, []
        while i < len(word):
            if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                nw.append(word[i] + word[i + 1])
                i += 2
            else:
                nw.append(word[i])
                i += 1
        word = nw
    return word


def encode(folder, path):
    vocab = json.load(open(f"{folder}/vocab.json", encoding="utf-8"))
    lines = open(f"{folder}/merges.txt", encoding="utf-8").read().split("\n")[1:]
    ranks = {tuple(m.split(" ")): i for i, m in enumerate(l for l in lines if l)}
    text = open(path, encoding="utf-8", newline="").read()
    print("\n".join(str(vocab[t]) for w in words(text) for t in bpe(w, ranks)))


# Characters of long-assigned blocks (the same class in every Unicode version)
PIECES = ["the", "The", " of", "and", "ing", "tion", "'s", "'t", "'re", "'ve", "'m", "'ll",
          "'d", "'x", "0", "42", "1999", "3.14", " ", "  ", "   ", "\n", "\n\n", "\t", " \n",
          "\r\n", ",", ".", "!?", "...", "--", "(", ")", "\"", "'", "é", "ü", "ß", "Ω",
          "λόγος", "Москва", "中文", "日本語", "ﾃﾞ", "٣٤", "½", "Ⅻ", "e\u0301", "\u0300",
          "\u00a0", "\u2003", "\u3000", "\u2028", "😀", "👍🏽", "€", "¬", "\x1c", "\x85"]


def random_text(seed, path):
    rng = random.Random(int(seed))
    text = "".join(rng.choice(PIECES) + (" " if rng.random() < 0.3 else "") for _ in range(4000))
    open(path, "w", encoding="utf-8", newline="").write(text)


if __name__ == "__main__":
    {"learn": learn, "encode": encode, "text": random_text}[sys.argv[1]](*sys.argv[2:])
