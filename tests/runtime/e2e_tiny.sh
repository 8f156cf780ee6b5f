#!/bin/sh
# e2e_tiny.sh TRAINER BROKEN_TRAINER MAKE_DATA — runs the hand-written tiny
# trainer (tiny_model.c) through trc_main with real flags: usage errors,
# training to high accuracy, logs, deterministic and round-tripping weights,
# evaluation-only runs, data errors, a diverging run, and --gradcheck passing
# on the right backward and failing on the broken one.
set -u
TRAINER=$1 BROKEN=$2 MAKE_DATA=$3
PY=/usr/bin/python3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/trc-e2e-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FAILED=0

fail() { echo "FAIL: $*" >&2; FAILED=$((FAILED + 1)); }

# run NAME EXPECTED_STATUS ARGS... : stdout in $WORK/NAME.out, stderr in $WORK/NAME.err
run() {
  name=$1 want=$2
  shift 2
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  got=$?
  [ "$got" -eq "$want" ] || { fail "$name: exit $got, expected $want"; cat "$WORK/$name.err" >&2; }
}

# expect NAME FILE TEXT : FILE (out or err) of run NAME contains TEXT
expect() {
  grep -qF -- "$3" "$WORK/$1.$2" || { fail "$1: $2 lacks '$3'"; cat "$WORK/$1.$2" >&2; }
}

last_accuracy() { sed -n "s/.*'eval_accuracy': \([0-9.]*\).*/\1/p" "$WORK/$1.out" | tail -n 1; }

mkdir -p "$WORK/train" "$WORK/test" "$WORK/bad"
"$MAKE_DATA" "$WORK/train" 2000 1 && "$MAKE_DATA" "$WORK/test" 500 2 || { echo "cannot make data"; exit 1; }

# --- the command line ---
run help 0 "$TRAINER" --help
expect help out "f32[B, 8]"
expect help out "i32[B]"
expect help out "values in [0, 4)"
expect help out "--gradcheck"
run version 0 "$TRAINER" --version
expect version out "trainc runtime"
run bogus 2 "$TRAINER" --data "$WORK/train" --bogus
expect bogus err "trainer: error: unknown flag '--bogus'"
expect bogus err "--help"
run nodata 2 "$TRAINER"
expect nodata err "--data DIR (or --text FILE, or --pairs FILE) is required"
run saveevery 2 "$TRAINER" --data "$WORK/train" --save-every 3
expect saveevery err "--save-every needs --save-state DIR"
run badvalue 2 "$TRAINER" --data="$WORK/train" --epochs=zero
expect badvalue err "--epochs: expected an integer >= 1, got 'zero'"

# --- training: accuracy, logs, progress lines, saved weights ---
run train 0 "$TRAINER" --data "$WORK/train" --eval-data "$WORK/test" --log "$WORK/run.jsonl" \
  --save "$WORK/w.safetensors"
acc=$(last_accuracy train)
awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.97) }' || fail "train: final eval_accuracy ${acc:-none} < 0.97"
[ "$(grep -c "'epoch'" "$WORK/train.out")" -eq 6 ] || fail "train: expected 6 evaluations (one per epoch)"
expect train err "step 10/186 ["
expect train err "saved weights to"
[ "$(grep -c '"eval_accuracy"' "$WORK/run.jsonl")" -eq 6 ] || fail "log: expected 6 eval records"
[ "$(grep -c '"loss"' "$WORK/run.jsonl")" -eq 19 ] || fail "log: expected 19 step records (every 10 and the last)"
if "$PY" -c 'import json' 2>/dev/null; then
  "$PY" - "$WORK/run.jsonl" <<'EOF' || fail "log: not valid JSON Lines with the documented keys"
import json, sys
steps = evals = memory = reports = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "loss" in r:
        assert set(r) == {"step", "epoch", "loss", "lr", "grad_norm", "examples_per_s", "seconds",
                          "syncs", "comm_bytes", "comm_seconds", "page_faults"}, r
        assert r["grad_norm"] > 0, r
        assert r["syncs"] == 0 and r["comm_bytes"] == 0, r  # one process sends nothing
        steps += 1
    elif "arena_high_water" in r:
        assert set(r) == {"step", "arena_planned", "arena_high_water"}, r
        assert r["arena_planned"] == r["arena_high_water"] and r["step"] == 186, r
        memory += 1
    elif "confusion_matrix" in r:
        assert set(r) == {"step", "precision", "recall", "f1", "support", "confusion_matrix"}, r
        assert sum(map(sum, r["confusion_matrix"])) == 500 and r["step"] == 186, r
        reports += 1
    else:
        assert set(r) == {"step", "epoch", "eval_loss", "eval_accuracy", "eval_f1"}, r
        last_eval = r
        evals += 1
assert steps == 19 and evals == 6 and memory == 1 and reports == 1
assert last_eval["step"] == 186 and last_eval["epoch"] == 6
EOF
fi

# same seed, same weights, bit for bit
run train_again 0 "$TRAINER" --data "$WORK/train" --eval-data "$WORK/test" --quiet \
  --save "$WORK/w2.safetensors"
cmp -s "$WORK/w.safetensors" "$WORK/w2.safetensors" || fail "two runs with one seed differ"
[ ! -s "$WORK/train_again.err" ] || fail "--quiet still printed to stderr"
run other_seed 0 "$TRAINER" --data "$WORK/train" --steps 5 --seed 8 --quiet --save "$WORK/w3.safetensors"
cmp -s "$WORK/w.safetensors" "$WORK/w3.safetensors" && fail "another seed gave the same weights"

# a held-out share of --data (validation 0.2) when there is no --eval-data
run validation 0 "$TRAINER" --data "$WORK/train" --steps 40 --quiet
expect validation out "'eval_accuracy'"

# every train setting is a flag; a bad value is a usage error
expect help out "--weight-decay X"
expect help out "--validation X"
run bad_setting 2 "$TRAINER" --data "$WORK/train" --beta2 1.5
expect bad_setting err "trainer: error: --beta2: expected a finite number from 0 to 1, got '1.5'"
# a flag overrides its train-block value: no learning rate, no decay, no change
run frozen 0 "$TRAINER" --data "$WORK/train" --steps 5 --lr 0 --weight-decay 0 --quiet \
  --init "$WORK/w.safetensors" --save "$WORK/frozen.safetensors"
cmp -s "$WORK/w.safetensors" "$WORK/frozen.safetensors" || fail "--lr 0 changed the weights"
t0=$(date +%s.%N)
run accumulate 0 "$TRAINER" --data "$WORK/train" --epochs 1 --accumulate 5
t1=$(date +%s.%N)
expect accumulate err "trained 10 steps" # 1600 rows / batch 32 / 5
# the time to the first step: positive and within the run's wall time (as the shell saw
# it, plus /proc's 10 ms ticks)
first=$(sed -n "s/^time to first step: \([0-9.]*\) s (from the process's start)$/\1/p" \
  "$WORK/accumulate.err")
awk -v f="${first:-0}" -v t0="$t0" -v t1="$t1" 'BEGIN { exit !(f > 0 && f <= t1 - t0 + 0.02) }' ||
  fail "accumulate: time to first step '${first:-none}' not in (0, the run's wall time]"

# --- weights: init-only save, exact round trip, evaluation of saved weights ---
run init_only 0 "$TRAINER" --steps 0 --save "$WORK/w0.safetensors"
run round_trip 0 "$TRAINER" --steps 0 --init "$WORK/w0.safetensors" --save "$WORK/w0b.safetensors"
cmp -s "$WORK/w0.safetensors" "$WORK/w0b.safetensors" || fail "--init then --save changed the weights"
run eval_only 0 "$TRAINER" --steps 0 --init "$WORK/w.safetensors" --eval-data "$WORK/test"
[ "$(last_accuracy eval_only)" = "$acc" ] || fail "evaluating saved weights: $(last_accuracy eval_only), trained run said $acc"
if "$PY" -c 'import numpy' 2>/dev/null; then
  "$PY" - "$WORK/w.safetensors" <<'EOF' || fail "saved weights unreadable by a plain Python reader"
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
assert h.pop("__metadata__") == {"format": "pt", "trainc_model": "tiny_mlp"}
assert list(h) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"], list(h)
shapes = {k: tuple(v["shape"]) for k, v in h.items()}
assert shapes == {"fc1.weight": (8, 16), "fc1.bias": (16,), "fc2.weight": (16, 4), "fc2.bias": (4,)}
for k, v in h.items():
    b, e = v["data_offsets"]
    w = np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<f4")
    assert np.isfinite(w).all() and np.abs(w).max() > 0, k
EOF
fi

# --- data errors name the file and what was expected ---
ln -s "$WORK/train/y.npy" "$WORK/bad/x.npy"
ln -s "$WORK/train/y.npy" "$WORK/bad/y.npy"
run bad_dtype 1 "$TRAINER" --data "$WORK/bad"
expect bad_dtype err "bad/x.npy: error: expected dtype f32 for input 'x', found <i8"
rm "$WORK/bad/x.npy"
run missing_input 1 "$TRAINER" --data "$WORK/bad"
expect missing_input err "no file for input 'x'"
run bad_init 1 "$TRAINER" --steps 0 --init "$WORK/train/x.npy"
expect bad_init err "x.npy: error:"
run bad_save 1 "$TRAINER" --data "$WORK/train" --save "$WORK/no/such/dir/w.safetensors"
expect bad_save err "cannot create a file in"
[ ! -s "$WORK/bad_save.out" ] || fail "bad_save: trained before finding out it cannot save"

# --- a diverging run stops with a clear message and a null in the log ---
run diverge 1 "$TRAINER" --data "$WORK/train" --lr 1e30 --log "$WORK/nan.jsonl" --log-every 1 --quiet
expect diverge err "the training loss is"
grep -q '"loss":null' "$WORK/nan.jsonl" || fail "diverge: no null loss in the log"

# --- gradcheck: passes on the right backward, fails on the broken one ---
run gradcheck 0 "$TRAINER" --gradcheck
expect gradcheck out "gradcheck: PASS"
run gradcheck_broken 1 "$BROKEN" --gradcheck
expect gradcheck_broken out "gradcheck: FAIL"
expect gradcheck_broken out "fc1.weight"

if [ "$FAILED" -ne 0 ]; then
  echo "e2e_tiny: $FAILED failure(s)"
  exit 1
fi
echo "e2e_tiny: all checks passed"
