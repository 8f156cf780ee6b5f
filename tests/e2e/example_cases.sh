#!/usr/bin/env bash
# Sourced by the tests that train every example (threads.sh, fuse.sh): fetches
# or makes their data under $work and shrinks the large examples by sed (fewer
# layers, narrower, smaller batches: the same ops), then sets `cases` to
# MODEL=DATA_DIR pairs. Needs $trainc, $src (the source tree) and $work.
PY=/usr/bin/python3
"$src/scripts/fetch-fashion-mnist" "$work/fashion" >/dev/null
[[ -d $work/kjv ]] || "$src/scripts/fetch-kjv" "$work/kjv" 32 >/dev/null
[[ -d $work/pairs ]] || "$PY" "$src/scripts/make-pair-data" "$work/pairs" >/dev/null
[[ -d $work/random ]] || { mkdir -p "$work/random" && "$PY" -c '
import numpy as np, sys
r = np.random.default_rng(7)
np.save(sys.argv[1] + "/x.npy", r.standard_normal((256, 1024), dtype=np.float32))
np.save(sys.argv[1] + "/label.npy", r.integers(0, 10, size=256, dtype=np.int32))' "$work/random"; }

ex=$src/examples
sed -e 's/^const T = 64 /const T = 32 /' -e 's/^const D = 128 /const D = 48 /' \
  -e 's/^const LAYERS = 4$/const LAYERS = 2/' -e 's/^  batch 32$/  batch 8/' \
  "$ex/gpt.nn" >"$work/gpt.nn"
sed -e 's/^const T = 64$/const T = 32/' -e 's/^const D = 768$/const D = 96/' \
  -e 's/^const LAYERS = 12$/const LAYERS = 2/' "$ex/gpt124m.nn" >"$work/gpt124m.nn"
sed -e 's/repeat 32 layer/repeat 3 layer/' -e 's/^  batch 512$/  batch 64/' \
  "$ex/deep_mlp.nn" >"$work/deep_mlp.nn"
for shrunk in gpt gpt124m deep_mlp; do
  [[ $(diff "$ex/$shrunk.nn" "$work/$shrunk.nn" | grep -c '^>') -ge 2 ]] ||
    { echo "FAIL: examples/$shrunk.nn no longer has the lines this test shrinks"; exit 1; }
done
cases=("$ex/fashion_mlp.nn=fashion/train" "$ex/fashion_cnn.nn=fashion/train"
  "$ex/pair_classifier.nn=pairs/train" "$work/gpt.nn=kjv/train" "$work/gpt124m.nn=kjv/train"
  "$work/deep_mlp.nn=random")
# No example has the encoder ops (self_attention over a padding mask, the
# pools): the checkpoint tests' BERT-style encoder, on random rows, stands in.
encoder=$src/tests/e2e/checkpoint/encoder.nn
[[ -d $work/random_encoder ]] || { "$trainc" emit "$encoder" -o "$work/encoder.c" >/dev/null &&
  "$PY" "$src/tests/e2e/random_data.py" "$work/encoder.c" "$work/random_encoder" 64; }
cases+=("$encoder=random_encoder")
