#!/usr/bin/env bash
# Sentence pairs in, a classifier trained (docs/trainer.md, Sentence pairs):
# a model with inputs input_ids, token_type_ids, attention_mask and label
# (masked mean pooling of token and segment embeddings) learns "does b say
# yes" from TSV and JSON Lines files through a hand-made BERT vocab.txt;
# bad files, flags and models refused with a message.
# usage: pairs.sh TRAINC WORKDIR
set -euo pipefail
trainc=$1 work=$2
rm -rf "$work" && mkdir -p "$work/bert"
cd "$work"
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' yes no the cat dog sat , . '##s' a is \
  >bert/vocab.txt

# model NAME EXTRA_INPUT: the classifier over 16 tokens, T = 16
model() {
  cat >"$1.nn" <<NN
model $1 {
  input  input_ids      : i32[B, 16]
  input  token_type_ids : i32[B, 16]
  input  attention_mask : i32[B, 16]
  input  label          : i32[B]
  $2
  tok    = embedding(input_ids, 16, 8)
  seg    = embedding(token_type_ids, 2, 8)
  mask   = reshape(f32(attention_mask), 4, 1, 16)
  pooled = reshape(mask @ (tok + seg), 4, 8)
  logits = linear(pooled, 2)
  loss   = cross_entropy(logits, label)
  predict logits
}
train {
  batch 4
  steps 60
  optimizer adamw(lr = 3e-2)
  eval every 30 steps: loss, accuracy, f1
}
NN
  "$trainc" build "$1.nn" -o "$1" --cflags "${TRAINC_TEST_CFLAGS:-} -O1" >/dev/null
}
model pairs ""

fail() { echo "FAIL: $*"; exit 1; }
# expect_error WHAT -- command...: exits non-zero, stderr mentions WHAT
expect_error() {
  local what=$1; shift 2
  if "$@" 2>err.txt >/dev/null; then fail "$* succeeded"; fi
  grep -qF -- "$what" err.txt || { cat err.txt; fail "no '$what' from $*"; }
}

# b says yes (label 1) or no (label 0); a is noise
words=(the cat dog sat a is cats dogs)
{
  printf 's1\ts2\ty\n'
  for i in $(seq 0 199); do
    a="${words[i % 8]} ${words[i / 8 % 8]}."
    if ((i * 7 % 5 < 2)); then
      b="The ${words[i % 5]}, yes!" y=1
    else
      b="no, ${words[i % 3]}" y=0
    fi
    printf '%s\t%s\t%d\n' "$a" "$b" "$y"
  done
} >train.tsv
tail -n 40 train.tsv |
  awk -F'\t' '{printf "{\"s1\": \"%s\", \"s2\": \"%s\", \"y\": %s}\n", $1, $2, $3}' >eval.jsonl

echo "training from TSV, evaluating on JSON Lines:"
./pairs --pairs train.tsv --eval-pairs eval.jsonl --pair-fields s1,s2,y --tokenizer bert \
  --quiet >out.txt || fail "training on pairs"
cat out.txt
acc=$(sed -n "s/.*'eval_accuracy': \([0-9.]*\).*/\1/p" out.txt | tail -1)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }' || fail "eval_accuracy $acc, expected >= 0.9"
tail -n +2 train.tsv | gzip -c >plain.tsv.gz # no header: text_a, text_b, label
./pairs --pairs plain.tsv.gz --tokenizer bert --steps 2 --quiet >/dev/null || fail "gzip"

echo "refused:"
expect_error "sentence pairs need BERT's WordPiece" -- ./pairs --pairs plain.tsv.gz --steps 1
expect_error "--data, --text and --pairs each give the training data" -- \
  ./pairs --pairs plain.tsv.gz --data . --tokenizer bert
expect_error "--pair-fields is for --pairs and --eval-pairs" -- \
  ./pairs --data . --pair-fields a,b,c
expect_error "--pair-fields: expected TEXT_A,TEXT_B,LABEL" -- \
  ./pairs --pairs plain.tsv.gz --tokenizer bert --pair-fields a,b
printf 'a\tb\t1\nthe cat\tno\n' >bad.tsv
expect_error "bad.tsv:2: error: expected 3 tab-separated fields" -- \
  ./pairs --pairs bad.tsv --tokenizer bert
printf 'a\tb\t1\na\tb\tmaybe\n' >label.tsv
expect_error "label.tsv:2: error: the label 'maybe' is not an integer" -- \
  ./pairs --pairs label.tsv --tokenizer bert
printf '{"text_a": "a", "text_b": "b", "label": 1, "idx": 3}\n' >key.jsonl
expect_error 'key.jsonl:1: error: unknown key "idx"' -- ./pairs --pairs key.jsonl --tokenizer bert
expect_error "train.tsv:1: error: the first line is neither a pair" -- \
  ./pairs --pairs train.tsv --tokenizer bert
expect_error "no tokenizer here: expected vocab.txt" -- ./pairs --pairs plain.tsv.gz --tokenizer .
model extra "input  extra : f32[B, 3]"
expect_error "has an input 'extra' that the pairs do not give" -- \
  ./extra --pairs plain.tsv.gz --tokenizer bert
echo "pairs: all checks passed"
