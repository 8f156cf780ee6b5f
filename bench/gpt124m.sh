#!/usr/bin/env bash
# Times optimizer steps of examples/gpt124m.nn (GPT-2 124M, B=4, T=64, AdamW)
# on random token ids (the time of a step does not depend on the data) and
# prints the median step time over the run's logged steps. The first step
# (first touch of the optimizer state) is left out of the median.
# The benchmark's own command unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE.
# usage: bench/gpt124m.sh [BUILD_DIR] [STEPS]   (default: build, 10)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-10}
work=$build/bench_gpt124m
mkdir -p "$work/data"
python3 - "$work/data" <<'PY'
import random, struct, sys
random.seed(0)
N, T = 64, 64
for name in ("tokens", "targets"):
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d, %d), }" % (N, T)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open("%s/%s.npy" % (sys.argv[1], name), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%di" % (N * T), *(random.randrange(50257) for _ in range(N * T))))
PY
"$build/driver/trainc" build examples/gpt124m.nn -o "$work/gpt124m"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/time -v \
  "$work/gpt124m" --data "$work/data" --steps "$steps" --log-every 1 --quiet --log "$work/log.jsonl" \
  2>"$work/time.txt"
grep "Maximum resident" "$work/time.txt"
# seconds per step from each record's examples_per_s (B = 4 examples a step)
sed -n 's/.*"examples_per_s":\([0-9.e+-]*\).*/\1/p' "$work/log.jsonl" | tail -n +2 |
  awk '{ print 4 / $1 }' | sort -g |
  awk '{ s[NR] = $1 } END { m = NR % 2 ? s[(NR + 1) / 2] : (s[NR / 2] + s[NR / 2 + 1]) / 2
         printf "median step %.3f s over %d steps (min %.3f, max %.3f)\n", m, NR, s[1], s[NR] }'
