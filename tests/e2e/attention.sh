#!/usr/bin/env bash
# Fused causal attention (the ATTENTION pass, docs/planner.md *Attention
# without stored probabilities*); its numbers are checked elsewhere
# (e2e.gradcheck.attention_fused: finite differences; torch.gpt_small_fused:
# PyTorch on identical weights). Here:
#  - which attention is fused: --attention auto (the default) from T = 128
#    on, fused at any length, whole never; dropout on the probabilities
#    keeps the unfused form;
#  - the fused plan stores exactly the probabilities' bytes less than the
#    unfused one (off), and trains with its arena high-water mark = plan;
#  - fused and whole train a GPT without dropout to the same losses (within
#    1e-5 relative: other summation orders, not other arithmetic);
#  - a bad --attention value, and fused attention on a CUDA backend, are
#    errors.
# usage: attention.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
PY=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work"
fail=0
flunk() { echo "FAIL: $*"; fail=1; }
source "$src/tests/e2e/run_data.sh"

long=$src/tests/e2e/gradcheck/attention_fused.nn  # T = 130
short=$src/tests/torch/gpt_small.nn                # T = 12
dropped=$src/tests/e2e/gradcheck/attention.nn      # dropout on the probabilities
fused_calls() { # MODEL FLAGS...: lines calling trc_causal_attention in its C (layers alike share one)
  "$trainc" emit "$@" -o "$work/out.c" >/dev/null
  grep -c 'trc_causal_attention(' "$work/out.c" || true
}
[[ $(fused_calls "$long") == 1 ]] || flunk "T = 130 is not fused by default"
[[ $(fused_calls "$short") == 0 ]] || flunk "T = 12 is fused by default"
[[ $(fused_calls "$short" --attention fused) == 1 ]] || flunk "--attention fused leaves gpt_small unfused"
[[ $(fused_calls "$long" --attention whole) == 0 ]] || flunk "--attention whole fuses"
[[ $(fused_calls "$dropped" --attention fused) == 0 ]] || flunk "attention with dropout on its probabilities is fused"

stored() { # MODEL FLAGS...: the plan's stored activations
  "$trainc" plan "$@" --policy off --format json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["peak"]["stored_activations"])'
}
probabilities=$((2 * 2 * 130 * 130 * 4)) # [B, heads, T, T] floats
(($(stored "$long" --attention whole) - $(stored "$long") == probabilities)) ||
  flunk "fused attention does not store exactly the probabilities' $probabilities bytes less"

data=$(data_dir random "$long")
"$trainc" build "$long" -o "$work/fused" --cflags "${TRAINC_TEST_CFLAGS:-} -O2" >/dev/null
"$work/fused" --data "$data" --steps 3 --quiet --log "$work/fused.jsonl"
read -r planned measured < <(arena_of "$work/fused.jsonl")
[[ $planned == "$measured" ]] || flunk "fused: arena planned $planned bytes, high-water mark $measured"

sed 's/dropout = 0.1/dropout = 0/; s/dropout(proj, 0.1)/proj/; s/const T = 64 /const T = 32 /; s/batch 32/batch 4/' \
  "$src/examples/gpt.nn" >"$work/gpt.nn"
kjv=$(data_dir kjv "$work/gpt.nn")
for form in fused whole; do
  "$trainc" build "$work/gpt.nn" --attention "$form" -o "$work/gpt_$form" --cflags "${TRAINC_TEST_CFLAGS:-} -O2" >/dev/null
  "$work/gpt_$form" --data "$kjv" --steps 5 --log-every 1 --quiet --log "$work/gpt_$form.jsonl"
done
"$PY" - "$work/gpt_fused.jsonl" "$work/gpt_whole.jsonl" <<'PYEOF' || flunk "fused and whole attention train to other losses"
import json, sys
loss = lambda p: [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
f, w = loss(sys.argv[1]), loss(sys.argv[2])
print("losses fused", f, "whole", w)
sys.exit(not (len(f) == len(w) == 5 and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(f, w))))
PYEOF

expect_error() { # what pattern command...
  local what=$1 pattern=$2
  shift 2
  if "$@" >"$work/err.out" 2>&1; then flunk "$what was accepted"; return; fi
  grep -q -- "$pattern" "$work/err.out" || { flunk "$what: unexpected message"; cat "$work/err.out"; }
}
expect_error "--attention sparse" "--attention takes auto, fused or whole, not 'sparse'" \
  "$trainc" plan "$long" --attention sparse
expect_error "fused attention on CUDA" "the CUDA backends have no fused attention" \
  "$trainc" emit "$long" --backend cuda --attention fused -o "$work/x.cu"
exit $fail
