#!/usr/bin/env bash
# Frozen parameters under `sync gradients` on 2 ranks: each step's
# all-reduce sends the trained parameters' gradients only (the log's
# comm_bytes is steps x the trained gradient region, not the whole
# parameter block), and the frozen parameters end bitwise as they began.
# usage: frozen_mpi.sh TRAINC MODEL.nn WORKDIR (MODEL as frozen/frozen_mlp.nn)
set -euo pipefail
trainc=$1 model=$2 work=$3 steps=8
PY=/usr/bin/python3
fail() { echo "FAIL: $*"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
mkdir -p "$work" && cd "$work"
. "$here/schedule/mpi.sh"
sed 's/freeze \(.*\) }$/freeze \1; sync gradients }/' "$model" >frozen.nn
sed 's/; freeze .*; sync gradients }$/; sync gradients }/' frozen.nn >full.nn
grep -q 'freeze .*sync gradients' frozen.nn && ! grep -q freeze full.nn ||
  fail "$model no longer ends its train block with a freeze setting"
for m in frozen full; do
  "$trainc" build "$m.nn" -o "$m" --keep-c "$m.c" >/dev/null
done
"$PY" "$here/random_data.py" frozen.c data 64
./frozen --data data --steps 0 --save init.safetensors --quiet
for m in frozen full; do
  timeout 120 "${MPIRUN[@]}" "./$m" --data data --init init.safetensors --steps $steps --quiet \
    --log "$m.jsonl" --save "$m.safetensors"
done
trained_floats() { sed -n 's/^    \.trained_count = \([0-9]*\),.*/\1/p' "$1.c"; }
"$PY" - "$here/../torch" "$steps" "$(trained_floats frozen)" "$(trained_floats full)" <<'PYEOF'
import json, sys
sys.path.insert(0, sys.argv[1])
import safetensors_np
steps, trained = int(sys.argv[2]), {"frozen": int(sys.argv[3]), "full": int(sys.argv[4])}
bad = []
for m in ("frozen", "full"):
    comm = [json.loads(l)["comm_bytes"] for l in open(m + ".jsonl") if '"comm_bytes"' in l][-1]
    want = steps * 4 * trained[m]
    print(f"{m}: {comm} bytes all-reduced in {steps} steps, the trained gradients: {want}")
    if comm != want:
        bad.append(m + " comm_bytes")
if not trained["frozen"] < trained["full"]:
    bad.append("trained floats")
before, _ = safetensors_np.read("init.safetensors")
after, _ = safetensors_np.read("frozen.safetensors")
for k in ("base.weight", "base.bias", "scale"):
    if not (before[k] == after[k]).all():
        bad.append(k + " changed")
print("FAIL: " + ", ".join(bad) if bad else "ok: frozen parameters unchanged, never all-reduced")
sys.exit(1 if bad else 0)
PYEOF
