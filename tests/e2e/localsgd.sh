#!/usr/bin/env bash
# LocalSGD and data parallelism over MPI (2 ranks on loopback):
#  1. local_sgd 4: right after every sync (steps 4, 8) both ranks hold
#     bitwise-equal parameters; between syncs (steps 3, 7) they differ; the
#     log's syncs and comm_bytes follow the schedule (parameter bytes x syncs);
#  2. `sync parameters optimizer_state` also makes the optimizer state equal;
#     `local_sgd_warmup 3` averages gradients for 3 steps (ranks equal), then
#     runs rounds of 4 local steps counted from there;
#  3. outer_optimizer nesterov(lr = 1, momentum = 0) equals plain LocalSGD bit
#     for bit; lr 0.7, momentum 0.9 does not;
#  4. `sync gradients` on 2 ranks x batch 8 (accumulate 2) matches one process
#     at batch 16 on the same examples;
#  5. evaluation across ranks (an odd-sized set, split unevenly) equals one
#     process evaluating the same weights;
#  6. a rank killed with SIGKILL ends the job with a non-zero status within
#     seconds (a watchdog fails the test on a hang); ranks that read
#     different data stop with a message instead of waiting on each other;
#  7. a trainer whose train block asks for no distribution does not link
#     libmpi; `trainc build --mpi` links it, and then averages the ranks'
#     parameters every step.
# usage: localsgd.sh TRAINC SOURCE_DIR WORKDIR
set -euo pipefail
trainc=$1 src=$2 work=$3
. "$src/tests/e2e/schedule/preamble.sh" train test
. "$src/tests/e2e/schedule/mpi.sh"

# model NAME BATCH TRAIN_SETTINGS... (one per argument)
model() {
  local name=$1 batch=$2
  shift 2
  {
    printf 'model lsgd {\n  input x : f32[B, 8]\n  input y : i32[B]\n  h = relu(linear(x, 16))\n'
    printf '  logits = linear(h, 4)\n  loss = cross_entropy(logits, y)\n  predict logits\n}\n'
    printf 'train {\n  batch %s\n  optimizer sgd(lr = 0.1, momentum = 0.9)\n  seed 3\n  log_every 1\n' "$batch"
    printf '  %s\n' "$@"
    printf '}\n'
  } >"$name.nn"
  "$trainc" build "$name.nn" -o "$name" --cflags "${TRAINC_TEST_CFLAGS:-} -O2" >/dev/null
}

$PY "$tools" data train 256 1
$PY "$tools" data test 65 2

echo "1-5: training runs"
model k4 8 "local_sgd 4"
for s in 3 4 7 8; do
  "${MPIRUN[@]}" ./k4 --data train --steps "$s" --save-state "st$s" --log "k4_$s.jsonl" --quiet
done
# one sync sends the parameter block: the parameters and their alignment gaps
block=$(./k4 --help | sed -n 's/^parameters: .* block of \([0-9]*\) bytes.*/\1/p')
model k4s 8 "local_sgd 4" "sync parameters optimizer_state"
"${MPIRUN[@]}" ./k4s --data train --steps 8 --save-state sts --log k4s.jsonl --quiet
model warm 8 "local_sgd 4" "local_sgd_warmup 3"
for s in 3 5; do
  "${MPIRUN[@]}" ./warm --data train --steps "$s" --save-state "stw$s" --log "warm_$s.jsonl" --quiet
done
"${MPIRUN[@]}" ./warm --data train --steps 8 --log warm_8.jsonl --quiet
model outer1 8 "local_sgd 4" "outer_optimizer nesterov(lr = 1, momentum = 0)"
model outer7 8 "local_sgd 4" "outer_optimizer nesterov(lr = 0.7, momentum = 0.9)"
for m in k4 outer1 outer7; do "${MPIRUN[@]}" ./$m --data train --steps 14 --save $m.safetensors --quiet; done
model dp 8 "sync gradients" "accumulate 2"
model single 16 "accumulate 2"
"${MPIRUN[@]}" ./dp --data train --steps 12 --save dp.safetensors --log dp.jsonl --quiet
./single --data train --steps 12 --save single.safetensors --quiet
"${MPIRUN[@]}" ./k4 --data train --eval-data test --steps 8 --save k4e.safetensors --quiet >eval_mpi.txt
./single --steps 0 --init k4e.safetensors --eval-data test --quiet >eval_one.txt

$PY - "$tools" "$block" <<'CHECKS'
import importlib.util, re, sys
spec = importlib.util.spec_from_file_location("tools", sys.argv[1])
t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
block = int(sys.argv[2])
failed = []
def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok: failed.append(what)
def state(folder, step, rank):
    return t.read_st(f"{folder}/state-{step}.rank-{rank}.safetensors")
def same(a, b, params_only=True):
    keys = [k for k in a if not (params_only and k.startswith(t.STATE_PREFIX))]
    return a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in keys)

print("1. local_sgd 4")
for s in (3, 4, 7, 8):
    r0, r1 = state(f"st{s}", s, 0), state(f"st{s}", s, 1)
    if s % 4 == 0:
        check(same(r0, r1), f"step {s}: the ranks' parameters are equal right after a sync")
    else:
        check(not same(r0, r1), f"step {s}: the ranks' parameters differ between syncs")
        check(not same(r0, r1, False), f"step {s}: the optimizer state is local")
tensor_bytes = sum(v.nbytes for k, v in state("st8", 8, 0).items() if not k.startswith(t.STATE_PREFIX))
check(tensor_bytes <= block < tensor_bytes + 4 * 64,
      f"the parameter block ({block} bytes) holds the 4 tensors ({tensor_bytes} bytes)")
for s in (3, 4, 7, 8):
    syncs, comm = t.log_value("syncs", s, "k4_8.jsonl"), t.log_value("comm_bytes", s, "k4_8.jsonl")
    check(syncs == s // 4 and comm == s // 4 * block,
          f"step {s}: {syncs} syncs, {comm} bytes logged; the schedule says {s // 4}, {s // 4 * block}")

print("2. sync parameters optimizer_state")
check(same(state("sts", 8, 0), state("sts", 8, 1), False), "the optimizer state is equal after a sync")
check(t.log_value("comm_bytes", 8, "k4s.jsonl") == 2 * 2 * block,
      "each sync sends the parameters and the momentum in one block")

check(same(state("stw3", 3, 0), state("stw3", 3, 1), False), "warm-up: equal after 3 synchronous steps")
check(not same(state("stw5", 5, 0), state("stw5", 5, 1)), "warm-up: local steps after it")
syncs = [t.log_value("syncs", s, "warm_8.jsonl") for s in range(1, 9)]
check(syncs == [1, 2, 3, 3, 3, 3, 4, 4], f"warm-up 3 then rounds of 4: syncs per step {syncs}")

print("3. outer optimizer")
check(open("k4.safetensors", "rb").read() == open("outer1.safetensors", "rb").read(),
      "nesterov(lr = 1, momentum = 0) is plain LocalSGD, bit for bit")
check(not t.same("k4.safetensors", "outer7.safetensors"), "nesterov(lr = 0.7, momentum = 0.9) changes the result")

print("4. sync gradients")
d = t.max_rel_diff("dp.safetensors", "single.safetensors")
check(d <= 1e-5, f"2 ranks x batch 8 match one process at batch 16 (max relative difference {d:.3g})")
check(t.log_value("syncs", 12, "dp.jsonl") == 12, "one gradient all-reduce per step")

print("5. evaluation across ranks")
strip = lambda f: re.sub(r"'epoch': [0-9.]+, ", "", open(f).read())
mpi, one = strip("eval_mpi.txt"), strip("eval_one.txt")
check(mpi == one and "eval_accuracy" in mpi, f"2 ranks: {mpi.strip()}; one process: {one.strip()}")
sys.exit(1 if failed else 0)
CHECKS

echo "6. a rank killed with SIGKILL ends the job"
# timeout exits 124 if the job is still running after 60 s: a hang
timeout 60 "${MPIRUN[@]}" ./k4 --data train --steps 100000000 --quiet >/dev/null 2>dead.err &
job=$!
ranks=
for _ in $(seq 100); do
  launcher=$(pgrep -P "$job" || true)
  ranks=$([ -n "$launcher" ] && pgrep -P "$launcher" || true)
  [ "$(echo "$ranks" | wc -w)" -ge 2 ] && break
  sleep 0.1
done
[ -n "$ranks" ] || fail "the ranks did not start"
sleep 0.5
kill -9 $(echo "$ranks" | tail -n 1)
set +e
wait "$job"
status=$?
set -e
[ "$status" -ne 124 ] || fail "the job still ran 60 s after a rank died"
[ "$status" -ne 0 ] || fail "the job exited 0 after a rank died"
echo "   the job ended with status $status"
mkdir -p short && $PY "$tools" data short 200 1
set +e
timeout 60 mpirun "${MPI_OPTS[@]}" -np 1 ./k4 --data train --quiet : -np 1 ./k4 --data short --quiet \
  >/dev/null 2>uneven.err
status=$?
set -e
[ "$status" -ne 124 ] || fail "ranks reading different data hung"
[ "$status" -ne 0 ] || fail "ranks reading different data exited 0"
grep -q "the ranks read different data" uneven.err || { cat uneven.err; fail "no message for uneven data"; }
echo "7. MPI is linked only when asked for"
model plain 8 "steps 6"
# (the output first: grep -q may close the pipe early, which pipefail counts)
libs_plain=$(ldd ./plain) libs_k4=$(ldd ./k4)
[[ $libs_plain != *libmpi* ]] || fail "a trainer without distribution links libmpi"
[[ $libs_k4 == *libmpi* ]] || fail "a LocalSGD trainer does not link libmpi"
"$trainc" build --mpi plain.nn -o plain_mpi --cflags "${TRAINC_TEST_CFLAGS:-} -O2" >/dev/null
"${MPIRUN[@]}" ./plain_mpi --data train --log plain_mpi.jsonl --quiet
[ "$($PY "$tools" log syncs 6 plain_mpi.jsonl)" -eq 6 ] || fail "--mpi with local_sgd 1: expected a sync every step"
echo "ok"
