#!/usr/bin/env bash
# Gradient accumulation (docs/trainer.md, Training): one optimizer step is a
# window of `accumulate` micro-batches whose gradient is that of the mean loss
# over all the window's examples; the last window of an epoch is shorter and
# normalized by its own size; a last partial batch is dropped.
#  1. accumulate 4 at batch 10 equals accumulate 1 at batch 40 (tight
#     tolerance; 205 examples, so 5 are dropped by both);
#  2. accumulate 3 at batch 10 (windows 3,3,3,3,3,3,2 per epoch) equals an
#     independent NumPy implementation in float64, and differs from the same
#     NumPy run with the short window normalized by 3 instead of 2.
# usage: accumulate.sh TRAINC SOURCE_DIR WORKDIR PRINT_ORDER
set -euo pipefail
trainc=$1 src=$2 work=$3 print_order=$4
. "$src/tests/e2e/schedule/preamble.sh" data

. "$src/tests/e2e/schedule/acc_model.sh"

$PY "$tools" data data 205 1
$PY "$tools" init init.safetensors 2
acc_model b40a1 40 1
acc_model b10a4 10 4
acc_model b10a3 10 3
for m in b40a1 b10a4 b10a3; do ./$m --data data --init init.safetensors --save $m.safetensors --quiet; done
"$print_order" 205 5 2 >order.txt

echo "accumulate 4 x batch 10 against accumulate 1 x batch 40:"
$PY "$tools" close b10a4.safetensors b40a1.safetensors 1e-5

echo "accumulate 3 x batch 10 (a short last window) against NumPy:"
$PY "$tools" reference data init.safetensors order.txt 10 3 2 0.5 0.9 ref.safetensors
$PY "$tools" close b10a3.safetensors ref.safetensors 1e-5

# the check can tell: normalizing the short window by 3 is far off
$PY - "$tools" <<'EOF2'
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location("tools", sys.argv[1])
t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
right = t.softmax_grad
def wrong(w, b, x, y):   # mean over a full window of 30 rows whatever its size
    gw, gb = right(w, b, x, y)
    return gw * len(y) / 30, gb * len(y) / 30
t.softmax_grad = wrong
t.reference("data", "init.safetensors", "order.txt", 10, 3, 2, 0.5, 0.9, "wrong.safetensors")
d = t.max_rel_diff("b10a3.safetensors", "wrong.safetensors")
print(f"against the mis-normalized reference: {d:.3g}")
sys.exit(0 if d > 1e-3 else 1)
EOF2
