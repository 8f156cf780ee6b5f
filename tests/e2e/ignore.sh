#!/usr/bin/env bash
# cross_entropy(logits, y, ignore = -100) (docs/ops.md, docs/trainer.md):
# ignored rows add no loss and no gradient, and an accumulation window is
# normalized by the number of labels that count in the WHOLE window. With
# labels ignored unevenly (each micro-batch of 10 has a different number):
#  1. accumulate 4 x batch 10 equals accumulate 1 x batch 40;
#  2. accumulate 3 x batch 10 (short last windows) equals an independent
#     NumPy reference in float64, and differs from the same reference with
#     each micro-batch averaged on its own and the means averaged (the 2024
#     Hugging Face gradient-accumulation bug);
#  3. `sync gradients` on 2 ranks of batch 10 equals one process of batch 20
#     (the count is summed over the ranks; skipped without MPI);
#  4. PyTorch's F.cross_entropy(ignore_index=-100) gives the --dump-step
#     loss and gradients on the same weights and batch (skipped without torch).
# usage: ignore.sh TRAINC SOURCE_DIR WORKDIR PRINT_ORDER
set -euo pipefail
trainc=$1 src=$2 work=$3 print_order=$4
. "$src/tests/e2e/schedule/preamble.sh" data

. "$src/tests/e2e/schedule/acc_model.sh"

$PY "$tools" data data 205 1
$PY - <<'EOF'
import numpy as np
y = np.load("data/y.npy")
rng = np.random.default_rng(7)
y[rng.random(len(y)) < 0.4] = -100      # about 4 of every 10, unevenly
np.save("data/y.npy", y)
EOF
$PY "$tools" init init.safetensors 2
acc_model b40a1 40 1 ", ignore = -100"
acc_model b10a4 10 4 ", ignore = -100"
acc_model b10a3 10 3 ", ignore = -100"
for m in b40a1 b10a4 b10a3; do
  ./$m --data data --init init.safetensors --save $m.safetensors --quiet
done
"$print_order" 205 5 2 >order.txt

echo "accumulate 4 x batch 10 against accumulate 1 x batch 40, labels ignored unevenly:"
$PY "$tools" close b10a4.safetensors b40a1.safetensors 1e-5

echo "accumulate 3 x batch 10 against NumPy, and against the per-micro-batch mean:"
$PY - "$tools" <<'EOF'
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location("tools", sys.argv[1])
t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
plain = t.softmax_grad
def window_mean(w, b, x, y):     # the mean over every label of the window that counts
    keep = y != -100
    if not keep.any():
        return np.zeros_like(w), np.zeros_like(b)
    return plain(w, b, x[keep], y[keep])
def mean_of_means(w, b, x, y):   # each micro-batch of 10 normalized by its own count
    parts = [window_mean(w, b, x[i:i + 10], y[i:i + 10]) for i in range(0, len(y), 10)]
    return sum(p[0] for p in parts) / len(parts), sum(p[1] for p in parts) / len(parts)
for name, grad in (("right", window_mean), ("wrong", mean_of_means)):
    t.softmax_grad = grad
    t.reference("data", "init.safetensors", "order.txt", 10, 3, 2, 0.5, 0.9, f"{name}.safetensors")
right = t.max_rel_diff("b10a3.safetensors", "right.safetensors")
wrong = t.max_rel_diff("b10a3.safetensors", "wrong.safetensors")
print(f"against the reference: {right:.3g}; against the per-micro-batch mean: {wrong:.3g}")
sys.exit(0 if right <= 1e-5 and wrong > 1e-3 else 1)
EOF

echo "sync gradients on 2 ranks against one process on both ranks' rows:"
set +e
(
  set -e
  fail() { echo "FAIL: $*"; exit 1; }
  . "$src/tests/e2e/schedule/mpi.sh"
  acc_model b20 20 1 ", ignore = -100"
  acc_model dp10 10 1 ", ignore = -100" "sync gradients"
  ./b20 --data data --init init.safetensors --save b20.safetensors --quiet
  "${MPIRUN[@]}" ./dp10 --data data --init init.safetensors --save dp10.safetensors --quiet
  $PY "$tools" close dp10.safetensors b20.safetensors 1e-5
)
rc=$?
set -e
case $rc in
  0) ;;
  77) echo "(skipped: no MPI)" ;;
  *) exit 1 ;;
esac

echo "--dump-step against PyTorch's cross_entropy(ignore_index=-100):"
if ! $PY -c 'import torch' 2>/dev/null; then echo "(skipped: no python3-torch)"; exit 0; fi
./b40a1 --dump-step dump.safetensors --data data --init init.safetensors --quiet
$PY - "$tools" <<'EOF'
import importlib.util, sys
import numpy as np, torch
spec = importlib.util.spec_from_file_location("tools", sys.argv[1])
t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
init, dump = t.read_st("init.safetensors"), t.read_st("dump.safetensors")
x = torch.tensor(np.load("data/x.npy")[:40])
y = torch.tensor(np.load("data/y.npy")[:40].astype(np.int64))
w = torch.tensor(init["logits.weight"].copy(), requires_grad=True)
b = torch.tensor(init["logits.bias"].copy(), requires_grad=True)
loss = torch.nn.functional.cross_entropy(x @ w.T + b, y, ignore_index=-100)
loss.backward()
checks = [("loss", float(dump["loss"]), loss.item()),
          ("grad.logits.weight", dump["grad.logits.weight"], w.grad.numpy()),
          ("grad.logits.bias", dump["grad.logits.bias"], b.grad.numpy())]
bad = 0
for name, ours, theirs in checks:
    d = float(np.abs(np.asarray(ours) - theirs).max())
    print(f"  {name}: max |trainc - torch| = {d:.3g}")
    bad += d > 1e-5 * max(1.0, float(np.abs(theirs).max()))
print(f"  ({int((y == -100).sum())} of 40 labels ignored)")
sys.exit(1 if bad else 0)
EOF
