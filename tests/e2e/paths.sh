#!/usr/bin/env bash
# Paths the compiler reads and writes (README, docs/trainer.md):
#  1. no output overwrites the model file (-o, emit -o, through a hard link);
#  2. outputs are checked before any work: an -o in a missing folder, a FIFO,
#     a directory, -o equal to --keep-c, --keep-c not ending in .c are
#     refused before the C compiler runs; stream outputs (emit -o, --svg) may
#     be a character device; a FIFO without a reader never blocks;
#  3. a --keep-c name starting with '-' reaches the C compiler as a file;
#  4. model paths with spaces, parentheses, "??/" and "*/" build, and the
#     trainer shows the path exactly;
#  5. a model "file" that is a FIFO, a device or too large is refused at once.
# Device nodes and FIFOs are made in the work folder.
# usage: paths.sh TRAINC WORKDIR
set -u
trainc=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
FAILED=0
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
CFLAGS="${TRAINC_TEST_CFLAGS:-} -O1"
# the C compiler, recording that it ran
printf '#!/bin/sh\ntouch "%s/cc-ran"\nexec cc "$@"\n' "$work" >cc.sh && chmod +x cc.sh

# refused NAME TEXT ARGS...: trainc exits non-zero, says TEXT, never runs the C compiler
refused() {
  local name=$1 text=$2
  shift 2
  rm -f cc-ran
  timeout 30 "$trainc" "$@" --cc "$work/cc.sh" >"$name.out" 2>"$name.err"
  local rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$name: exit $rc"
  grep -qF -- "$text" "$name.err" || { fail "$name: no '$text' in: $(cat "$name.err")"; }
  [ ! -e cc-ran ] || fail "$name: the C compiler ran before the refusal"
}

printf 'model p {\n  input x : f32[B, 4]\n  loss = mean(x)\n}\n' >m.nn
cp m.nn original.nn

echo "1. no output overwrites the model file"
refused build_self "m.nn: error: -o names the input file m.nn; refusing to overwrite it" build m.nn -o m.nn
refused emit_self "./m.nn: error: -o names the input file m.nn" emit m.nn -o ./m.nn
ln m.nn same.nn
refused emit_link "same.nn: error: -o names the input file m.nn" emit m.nn -o same.nn
refused keep_c_self "--keep-c" build m.nn -o t --keep-c m.nn
cmp -s m.nn original.nn || fail "the model file was changed"

echo "2. outputs checked before any work"
mkfifo fifo
mkdir folder
refused missing_folder "no/such/t: error: cannot create (folder no/such): No such file or directory" build m.nn -o no/such/t
refused build_fifo "fifo: error: refusing to write over a FIFO" build m.nn -o fifo
refused build_folder "folder: error: refusing to write over a directory" build m.nn -o folder
refused keep_c_is_o "-o and --keep-c name the same file" build m.nn -o t.c --keep-c ./t.c
refused keep_c_suffix "t.txt: error: --keep-c: the name must end in .c" build m.nn -o t --keep-c t.txt
refused svg_folder "folder: error: refusing to write over a directory" plan m.nn --sweep --svg folder
refused emit_fifo "fifo: error: cannot write: a FIFO that no process reads" emit m.nn -o fifo
[ -p fifo ] && [ -d folder ] || fail "a refused output was replaced"
timeout 30 "$trainc" emit m.nn -o /dev/stdout >stdout.c || fail "emit -o /dev/stdout failed"
grep -q "trc_main" stdout.c || fail "emit -o /dev/stdout wrote no C"
if mknod null c 1 3 2>/dev/null; then
  timeout 30 "$trainc" plan m.nn --sweep --svg null >/dev/null || fail "--svg into a character device failed"
  [ -c null ] || fail "--svg replaced a character device"
  refused build_device "null: error: refusing to write over a character device" build m.nn -o null
else
  echo "   (mknod not permitted: device cases skipped)"
fi

echo "3. a --keep-c name starting with '-'"
"$trainc" build m.nn -o t --keep-c -k.c --cflags "$CFLAGS" >/dev/null || fail "--keep-c -k.c failed"
[ -s ./-k.c ] && [ -x t ] || fail "--keep-c -k.c: no C file or no trainer"

echo "4. model paths with spaces, parentheses, ??/ and */"
for dir in "exp ()" "q??" "star*"; do
  mkdir -p "$dir/sub" && cp m.nn "$dir/sub/x.nn"
  if "$trainc" build "$dir/sub/x.nn" -o "$dir/t" --cflags "$CFLAGS" >/dev/null 2>build.err; then
    "$dir/t" --help | grep -qF "compiled from $dir/sub/x.nn." || fail "--help does not show '$dir/sub/x.nn'"
  else
    fail "cannot build from '$dir/sub/x.nn': $(cat build.err)"
  fi
done

echo "5. model files that are not regular files or too large"
refused check_fifo "fifo: error: not a regular file (a FIFO)" check fifo
if mknod zero c 1 5 2>/dev/null; then
  refused check_device "zero: error: not a regular file (a character device)" check zero
fi
truncate -s $((16 * 1024 * 1024 + 1)) big.nn
refused check_big "big.nn: error: 16777217 bytes; a model file may be at most 16.0 MiB" check big.nn

if [ "$FAILED" -ne 0 ]; then
  echo "paths: $FAILED failure(s)"
  exit 1
fi
echo ok
