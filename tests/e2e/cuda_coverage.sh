#!/usr/bin/env bash
# Every kernel the CUDA backend can generate runs in an emulated test
# (docs/cuda.md): for the models e2e.cuda_emulate.* runs, the .cu of each
#  - calls every kernel it defines, from device_forward or device_backward
#    (which every step runs whole), and
#  - together they hold a kernel of every op of the op table that has code
#    (class LOOP or GEMM in ir/ops.def; VIEW ops when they add into a
#    gradient slot), so no op's kernel goes untested;
#  - runs a kernel as one thread only where its value is one number (a
#    loss, a sum: kernel_grid maps every other to a grid) or where its
#    outermost loop, over a batch of one, has one trip and what it runs per
#    row is no perfect nest to map further (batch_one.nn's mean pool and
#    logsumexp: the backend prints that loop as `const int64_t i0 = 0;`). The .cu is emitted
#    with --no-fuse: fusion (passes/fuse.c) moves a pointwise op's statements
#    into its reader's kernel, where the emulated runs execute them too, and
#    e2e.fuse shows fused and unfused programs compute the same bits.
# usage: cuda_coverage.sh TRAINC SOURCE_DIR WORKDIR MODEL.nn...
set -euo pipefail
trainc=$1 src=$2 work=$3
shift 3
mkdir -p "$work"
fail=0
for model in "$@"; do
  for policy in off "every 2"; do
    cu=$work/$(basename "$model" .nn)_${policy// /_}.cu
    "$trainc" emit "$model" --policy "$policy" --no-fuse --backend cuda -o "$cu" >/dev/null
    defined=$(sed -n 's/^static \(__global__ \)\{0,1\}void \(k[0-9]*\)(char \*.*/\2/p' "$cu" | sort -u)
    called=$(sed -n '/^static void device_forward/,/^static void forward/p' "$cu" |
      sed -n 's/^  \(trc_launch(\)\{0,1\}\(k[0-9]*\)[(,].*/\2/p' | sort -u)
    if [[ "$defined" != "$called" ]]; then
      echo "FAIL: $cu: kernels defined but not called: $(comm -23 <(echo "$defined") <(echo "$called") | tr '\n' ' ')"
      fail=1
    fi
    single=$(sed -n 's/^  trc_launch(k\([0-9]*\)\(_[0-9]*\)\{0,1\}, dim3(1), dim3(1),.*/\1/p' "$cu")
    for k in $single; do
      grep -q "^/\* %$k = .* : f32\[\]" "$cu" ||
        sed -n "/^static __global__ void k$k(/,/^}/p" "$cu" | grep -q '^  const int64_t i0 = 0;$' ||
        { echo "FAIL: $cu: k$k runs as one thread"; fail=1; }
    done
  done
done
ops=$(sed -n 's/^OP(OP_[A-Z0-9_]*, "\([a-z_0-9]*\)", \(LOOP\|GEMM\|VIEW\).*/\1/p' "$src/ir/ops.def")
covered=0
for op in $ops; do
  if grep -q "^/\* %[0-9]* = $op " "$work"/*.cu; then
    covered=$((covered + 1))
  elif [[ $op != slice && $op != head_loss ]]; then # a view that never has a kernel
    # (ir/ops.def); the chunked loss head's loss, which the CUDA backends never get
    echo "FAIL: no emulated model has a kernel of op '$op'"
    fail=1
  fi
done
echo "$covered ops with kernels covered; every kernel defined is called; one thread for scalars and rows of a batch of one only"
exit $fail
