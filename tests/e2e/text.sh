#!/usr/bin/env bash
# Text in, tokens out (docs/trainer.md, Text and Sampling): a small language
# model trained from a .txt file and from JSON Lines, with the byte tokenizer
# and with the hand-made GPT-2 BPE of tests/runtime/bpe_small; --sample
# through the tokenizer (a trained BPE model continues "hello" with the
# token " world"), where --top-k 1 and a tiny --top-p must give the greedy
# (--temperature 0) text; bad input refused with a message.
# usage: text.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
bpe=$src/tests/runtime/bpe_small
rm -rf "$work" && mkdir -p "$work"
cd "$work"

# lm NAME VOCAB: a causal model over VOCAB tokens, context 8
lm() {
  cat >"$1.nn" <<NN
model $1 {
  input  tokens  : i32[B, 8]
  input  targets : i32[B, 8]
  param  wte : f32[$2, 16] = normal(0, 0.1)
  h      = causal_self_attention(embedding(tokens, wte), 2)
  logits = linear(h, $2)
  loss   = cross_entropy(logits, targets)
  predict logits
}
train {
  batch 4
  steps 6
  optimizer adamw(lr = 1e-2)
  eval every 3 steps: loss, accuracy
}
NN
  "$trainc" build "$1.nn" -o "$1" --cflags "${TRAINC_TEST_CFLAGS:-} -O1" >/dev/null
}
lm bytes 256
lm bpe 274

fail() { echo "FAIL: $*"; exit 1; }
# expect_error WHAT -- command...: exits non-zero, stderr mentions WHAT
expect_error() {
  local what=$1; shift 2
  if "$@" 2>err.txt >/dev/null; then fail "$* succeeded"; fi
  grep -qF -- "$what" err.txt || { cat err.txt; fail "no '$what' from $*"; }
}

for i in $(seq 40); do echo "hello world, it's line $i of the text"; done >train.txt
head -5 train.txt >eval.txt
printf '{"text": "hello world"}\n{"id": 7, "text": "hello\\nworld, it'"'"'s JSON"}\n' >docs.jsonl
for i in $(seq 8); do cat docs.jsonl; done >train.jsonl

echo "training from text, bytes and BPE:"
./bytes --text train.txt --eval-text eval.txt --quiet --save bytes.safetensors >bytes.out
grep -q "'eval_loss'" bytes.out || fail "no evaluation from --eval-text"
./bpe --text train.txt --tokenizer "$bpe" --steps 80 --quiet --save bpe.safetensors >/dev/null
./bpe --text train.jsonl --tokenizer "$bpe" --quiet >/dev/null
gzip -c train.jsonl >train.jsonl.gz
./bytes --text train.jsonl.gz --quiet >/dev/null

echo "sampling through the tokenizer:"
sample() { ./"$1" --steps 0 --init "$1.safetensors" --sample 12 --prompt "hello" "${@:2}"; }
for m in bytes bpe; do
  tok=bytes; [ "$m" = bpe ] && tok=$bpe
  greedy=$(sample "$m" --tokenizer "$tok" --temperature 0)
  [ "${greedy:0:5}" = hello ] || fail "$m: the sample does not start with the prompt: $greedy"
  [ "$(sample "$m" --tokenizer "$tok" --top-k 1)" = "$greedy" ] ||
    fail "$m: --top-k 1 is not greedy"
  [ "$(sample "$m" --tokenizer "$tok" --top-p 1e-9)" = "$greedy" ] ||
    fail "$m: a tiny --top-p is not greedy"
  a=$(sample "$m" --tokenizer "$tok" --top-k 5 --top-p 0.9 --seed 3)
  [ "$a" = "$(sample "$m" --tokenizer "$tok" --top-k 5 --top-p 0.9 --seed 3)" ] ||
    fail "$m: not repeatable"
done
# trained longer, the BPE model has learned that " world" (one token) follows "hello"
case $(sample bpe --tokenizer "$bpe" --temperature 0) in
  "hello world"*) ;;
  *) fail "the BPE model's greedy text does not continue 'hello' with ' world'" ;;
esac

echo "bad input:"
printf 'hello \xff world\n' >bad.txt
expect_error "bad.txt: error: line 1, column 7: invalid UTF-8" -- \
  ./bpe --text bad.txt --tokenizer "$bpe"
printf '{"text": "ok"}\n{"text": }\n' >bad.jsonl
expect_error "bad.jsonl: error: line 2: malformed JSON" -- ./bytes --text bad.jsonl
mkdir -p nomerges && cp "$bpe/vocab.json" nomerges/
expect_error "nomerges/merges.txt" -- ./bpe --text train.txt --tokenizer nomerges
expect_error "the tokenizer has 274 tokens, but input 'tokens' takes ids below 256" -- \
  ./bytes --text train.txt --tokenizer "$bpe"
expect_error "--data, --text and --pairs each give the training data" -- \
  ./bytes --text train.txt --data .
expect_error "--top-p: expected a number in (0, 1]" -- ./bytes --steps 0 --sample 3 --top-p 2
expect_error "--tokenizer is for --text" -- ./bytes --data . --tokenizer bytes
echo "text.sh: ok"
