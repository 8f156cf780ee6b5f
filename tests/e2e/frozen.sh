#!/usr/bin/env bash
# Frozen parameters (train { freeze ... }) in a built trainer:
#  - after training (AdamW with weight decay) every frozen parameter is
#    bitwise what --init gave it and every trained one has changed; the
#    same through `trainc run` (the LLVM backend), when trainc has it;
#  - resumed from the state saved at step 4 (optimizer state of the trained
#    parameters only), the run ends bitwise where it did;
#  - --gradcheck passes for the trained parameters and says "frozen" for
#    the others;
#  - --help and the start-up summary count trained and frozen parameters.
# usage: frozen.sh TRAINC MODEL.nn WORKDIR
set -euo pipefail
trainc=$1 model=$2 work=$3
PY=/usr/bin/python3
mkdir -p "$work"
"$trainc" build "$model" -o "$work/frozen" --keep-c "$work/frozen.c" \
  --cflags "${TRAINC_TEST_CFLAGS:-} -O2 -Wall -Wextra -Werror" >/dev/null
"$PY" "$(dirname "$0")/random_data.py" "$work/frozen.c" "$work/data" 64
frozen_names=$(sed -n 's/^    {\.name = "\([^"]*\)", .*\.frozen = 1, .*/\1/p' "$work/frozen.c" | paste -sd,)
[[ -n $frozen_names ]] || { echo "FAIL: no frozen parameter in the trainer's table"; exit 1; }
"$work/frozen" --data "$work/data" --steps 0 --save "$work/init.safetensors" --quiet
compare() { # AFTER.safetensors: frozen ones equal to init, all others changed
  "$PY" -c '
import sys
sys.path.insert(0, sys.argv[1])
import safetensors_np
before, _ = safetensors_np.read(sys.argv[2])
after, _ = safetensors_np.read(sys.argv[3])
frozen = set(sys.argv[4].split(","))
bad = [k for k in before if (before[k] == after[k]).all() != (k in frozen)]
print(("FAIL: " if bad else "ok: ") + sys.argv[3] + ": frozen unchanged "
      + ",".join(sorted(frozen)) + "; the other " + str(len(before) - len(frozen)) + " changed"
      + (" -- wrong: " + ",".join(bad) if bad else ""))
sys.exit(1 if bad else 0)' "$(dirname "$0")/../torch" "$work/init.safetensors" "$1" "$frozen_names"
}
rm -rf "$work/state"
"$work/frozen" --data "$work/data" --init "$work/init.safetensors" --steps 8 \
  --save "$work/c.safetensors" --save-state "$work/state" --save-every 4 --save-total-limit 0 \
  2>"$work/train.err"
compare "$work/c.safetensors"
trained=$(sed -n 's/^    \.trained_count = \([0-9]*\),.*/\1/p' "$work/frozen.c")
all=$(sed -n 's/^    \.param_offset = [0-9]*, \.param_count = \([0-9]*\),.*/\1/p' "$work/frozen.c")
"$PY" -c '
import sys
sys.path.insert(0, sys.argv[1])
import safetensors_np
t, _ = safetensors_np.read(sys.argv[2])
m, v = t["trainc.optimizer.m"], t["trainc.optimizer.v"]
ok = m.shape == v.shape == (int(sys.argv[3]),) and int(sys.argv[3]) < int(sys.argv[4])
print(("ok: " if ok else "FAIL: ")
      + f"AdamW state of {m.shape[0]} floats (all parameters: {sys.argv[4]})")
sys.exit(0 if ok else 1)' "$(dirname "$0")/../torch" "$work/state/state-4.rank-0.safetensors" \
  "$trained" "$all"
rm "$work/state/state-8.rank-0.safetensors"
"$work/frozen" --data "$work/data" --resume "$work/state" --steps 8 --quiet \
  --save "$work/resumed.safetensors"
cmp "$work/c.safetensors" "$work/resumed.safetensors" ||
  { echo "FAIL: resumed at step 4, the run ends elsewhere"; exit 1; }
echo "ok: resumed from a state file, bitwise the uninterrupted run"
grep -q "^parameters: 4 trained (.*), 3 frozen" "$work/train.err" ||
  { echo "FAIL: the summary does not count trained and frozen parameters"
    cat "$work/train.err"; exit 1; }
[[ $("$work/frozen" --help) =~ $'\n'"parameters: 7 tensors, 4 trained "[^$'\n']*", 3 frozen" ]] ||
  { echo "FAIL: --help does not count trained and frozen parameters"; exit 1; }
"$work/frozen" --gradcheck >"$work/gradcheck.out"
[[ $(grep -c ' frozen$' "$work/gradcheck.out") == 3 ]] ||
  { echo "FAIL: gradcheck does not list the 3 frozen parameters"
    cat "$work/gradcheck.out"; exit 1; }
echo "ok: gradcheck passes, frozen rows skipped"
if [[ $("$trainc" --help) == *$'\n  run '* ]]; then # trainc built with LLVM
  "$trainc" run "$model" --data "$work/data" --init "$work/init.safetensors" --steps 8 --quiet \
    --save "$work/llvm.safetensors"
  compare "$work/llvm.safetensors"
fi
