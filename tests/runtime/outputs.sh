#!/usr/bin/env bash
# outputs.sh TRAINER MAKE_DATA — the trainer's output paths (docs/trainer.md,
# Outputs), with the tiny hand-written trainer: an output that is a device
# node, FIFO or directory is refused before training and left as it was (a
# log may be a character device or a FIFO with a reader: written in place);
# no output overwrites an input, the trainer's binary or another output
# (--save over the --init file is allowed); temp files of interrupted saves
# are removed at start; flags the run would ignore are refused; a full disk
# or `ulimit -f` gives the reason. Device nodes and FIFOs are made in a temporary folder.
NAME=outputs
. "$(dirname "$0")/harness.sh" "$1" "$2" 200
# refused NAME TEXT ARGS...: exit 1 before any training (no evaluation printed), TEXT on stderr
refused() {
  local name=$1 text=$2
  shift 2
  run "$name" 1 "$TRAINER" --data d --steps 30 --quiet "$@"
  expect "$name" err "$text"
  [ ! -s "$name.out" ] || fail "$name: trained before refusing"
}

"$TRAINER" --data d --steps 2 --quiet --save w0.safetensors >/dev/null || exit 1

echo "1. outputs that are not regular files"
mkfifo fifo
mkdir folder
refused save_fifo "fifo: error: is a FIFO, not a regular file; refusing to replace it" --save fifo
refused save_dir "folder: error: is a directory, not a regular file" --save folder
run dump_fifo 1 "$TRAINER" --data d --dump-step fifo
expect dump_fifo err "fifo: error: is a FIFO, not a regular file"
[ -p fifo ] && [ -d folder ] || fail "a refused output was replaced"
refused log_dir "folder: error: is a directory" --log folder
refused log_no_reader "fifo: error: is a FIFO that no process reads" --log fifo
exec 3<>fifo # a reader (read-write: the open does not wait); the pipe buffer holds the log
run log_reader 0 "$TRAINER" --data d --steps 3 --log-every 1 --quiet --log fifo
timeout 10 head -n 5 <&3 >fifo.log
exec 3<&-
[ "$(grep -c '"loss"' fifo.log)" -eq 3 ] || fail "a log into a FIFO with a reader lost lines"
run log_stdout 0 "$TRAINER" --data d --steps 2 --quiet --log /dev/stdout
expect log_stdout out '"step":2,'
refused state_file "w0.safetensors: error: --save-state: not a directory" --save-state w0.safetensors
if mknod null c 1 3 2>/dev/null && mknod full c 1 7; then
  refused save_device "null: error: is a character device, not a regular file" --save null
  [ -c null ] || fail "--save replaced a device node"
  run log_full 0 "$TRAINER" --data d --steps 3 --log-every 1 --quiet --log full
  expect log_full err "full: warning: cannot write the log: No space left on device"
else
  echo "   (mknod not permitted: device node cases skipped)"
fi

echo "2. no output overwrites an input or another output"
cp -r d d2
ln d2/y.npy labels-link
run log_data 1 "$TRAINER" --data d2 --steps 30 --quiet --log d2/x.npy
expect log_data err "d2/x.npy: error: --log names the input file d2/x.npy"
run log_hardlink 1 "$TRAINER" --data d2 --steps 30 --quiet --log labels-link
expect log_hardlink err "--log names the input file d2/y.npy"
refused save_eval_data "--save names the input file d2/y.npy" --eval-data d2 --save d2/y.npy
cmp -s d/x.npy d2/x.npy && cmp -s d/y.npy d2/y.npy || fail "a data file was changed"
run dump_init 1 "$TRAINER" --data d --init w0.safetensors --dump-step w0.safetensors
expect dump_init err "--dump-step names the --init file"
refused save_is_log "--save and --log name the same file" --save out.st --log ./out.st
cp "$TRAINER" trainer-copy # replaced, if the check fails, instead of the build's trainer
ln trainer-copy trainer-link
run save_self 1 ./trainer-copy --data d --steps 30 --quiet --save trainer-copy
expect save_self err "trainer-copy: error: --save names this program's own binary"
run log_self 1 ./trainer-link --data d --steps 30 --quiet --log trainer-copy
expect log_self err "--log names this program's own binary"
cmp -s "$TRAINER" trainer-copy || fail "the trainer's binary was replaced"
cp w0.safetensors w1.safetensors
run continue_apart 0 "$TRAINER" --data d --steps 5 --quiet --init w0.safetensors --save apart.safetensors
run continue_in_place 0 "$TRAINER" --data d --steps 5 --quiet --init w1.safetensors --save w1.safetensors
cmp -s apart.safetensors w1.safetensors || fail "--save over the --init file differs from saving elsewhere"

echo "3. temp files of interrupted saves are removed at start, nothing else"
mkdir st
touch .w.safetensors.tmp-Ab12Cd .w.safetensors.tmp-Ab12C .other.tmp-Ab12Cd
touch st/.state-5.rank-0.safetensors.tmp-x9Y8z7 st/.state-5.rank-1.safetensors.tmp-x9Y8z7 st/.notes.tmp-x9Y8z7
run temps 0 "$TRAINER" --data d --steps 2 --quiet --save w.safetensors --save-state st
[ ! -e .w.safetensors.tmp-Ab12Cd ] || fail "--save's temp file was left"
[ ! -e st/.state-5.rank-0.safetensors.tmp-x9Y8z7 ] || fail "this rank's state temp file was left"
[ -e .w.safetensors.tmp-Ab12C ] && [ -e .other.tmp-Ab12Cd ] || fail "a file not of this save was removed"
[ -e st/.state-5.rank-1.safetensors.tmp-x9Y8z7 ] && [ -e st/.notes.tmp-x9Y8z7 ] ||
  fail "a state temp file of another rank or name was removed"

echo "4. flags the run would ignore"
run gradcheck_save 2 "$TRAINER" --gradcheck --save gc.safetensors
expect gradcheck_save err "--save does nothing with --gradcheck"
[ ! -e gc.safetensors ] || fail "--gradcheck --save wrote a file"
run init_resume 2 "$TRAINER" --data d --resume st --init w0.safetensors
expect init_resume err "--init does nothing with --resume"

echo "5. a write that fails says why"
cp w0.safetensors keep.safetensors
(ulimit -f 1 && "$TRAINER" --data d --steps 2 --quiet --save keep.safetensors >/dev/null 2>efbig.err)
[ $? -eq 1 ] || fail "a save past ulimit -f did not fail with status 1"
grep -q "keep.safetensors: error: .*File too large" efbig.err || { fail "no reason for EFBIG"; cat efbig.err >&2; }
cmp -s w0.safetensors keep.safetensors || fail "a failed save changed the previous file"

finish
