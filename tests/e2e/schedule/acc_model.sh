# acc_model.sh — sourced by accumulate.sh and ignore.sh: the softmax
# regression both train, built by the trainc in $trainc.
# acc_model NAME BATCH ACCUMULATE [CROSS_ENTROPY_ARGS [TRAIN_SETTING]]:
# e.g. ", ignore = -100" "sync gradients"
acc_model() {
  cat >"$1.nn" <<NN
model acc {
  input x : f32[B, 8]
  input y : i32[B]
  logits = linear(x, 4)
  loss = cross_entropy(logits, y${4:-})
  predict logits
}
train {
  batch $2
  accumulate $3
  epochs 2
  optimizer sgd(lr = 0.5, momentum = 0.9)
  seed 5
  ${5:-}
}
NN
  "$trainc" build "$1.nn" -o "$1" --cflags "${TRAINC_TEST_CFLAGS:-} -O2" >/dev/null
}
