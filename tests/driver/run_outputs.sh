#!/bin/bash
# `trainc run`'s outputs (issue 26): the trainer's --save, --log,
# --dump-step, --save-state and --tensorboard are checked against trainc's
# inputs as `build -o` is (the model file by path, symlink or hard link) and
# against the binary that runs them (trainc itself here): each is refused
# before any training, naming the input, and the input is left as it was.
# usage: run_outputs.sh TRAINC
set -u
trainc=$1
work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

printf 'model p {\n  input x : f32[B, 4]\n  loss = mean(linear(x, 2))\n}\ntrain { batch 2 }\n' >m.nn
cp m.nn original.nn
ln m.nn hard.nn
ln -s m.nn sym.nn
# a copy of trainc runs the case that names trainc's binary: if it were
# overwritten, the build's trainc would still be whole
cp "$trainc" trainc-copy

# refused NAME TEXT TRAINC ARGS...: exit 1, TEXT on stderr, no training
refused() {
  local name=$1 text=$2
  shift 2
  timeout 60 "$@" >"$name.out" 2>"$name.err"
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, expected 1: $(cat "$name.err")"
  grep -qF -- "$text" "$name.err" || fail "$name: no '$text' in: $(cat "$name.err")"
  ! grep -q "saved weights" "$name.out" || fail "$name: saved before refusing"
}

names_model() { echo "error: $1 names the input file m.nn; refusing to overwrite it"; }
refused save "m.nn: $(names_model --save)" "$trainc" run m.nn --steps 0 --save m.nn
refused save_eq "./m.nn: $(names_model --save)" "$trainc" run m.nn --steps 0 --save=./m.nn
refused log "$(names_model --log)" "$trainc" run m.nn --steps 0 --log m.nn
refused log_hard_link "hard.nn: $(names_model --log)" "$trainc" run m.nn --steps 0 --log hard.nn
refused save_symlink "sym.nn: $(names_model --save)" "$trainc" run m.nn --steps 0 --save sym.nn
refused dump_step "$(names_model --dump-step)" "$trainc" run m.nn --data . --dump-step m.nn
refused save_state "$(names_model --save-state)" "$trainc" run m.nn --steps 0 --save-state m.nn
refused tensorboard "$(names_model --tensorboard)" "$trainc" run m.nn --steps 0 --tensorboard m.nn
cmp -s m.nn original.nn || fail "the model file was changed"
refused save_trainc "trainc-copy: error: --save names this program's own binary" \
  ./trainc-copy run m.nn --steps 0 --save trainc-copy
cmp -s trainc-copy "$trainc" || fail "trainc's binary was replaced"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "run_outputs: all checks passed"
