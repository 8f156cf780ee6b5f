#!/bin/sh
# fake_cc.sh — stands in for the C compiler in the `trainc calibrate` test:
# the "executable" it writes (the -o argument) prints a fixed profile, so the
# test runs trainc's build, run and parse path and no benchmark.
while [ $# -gt 0 ]; do
  [ "$1" = -o ] && out=$2
  shift
done
printf '#!/bin/sh\nprintf "gemm_flops = 1e11\\nloop_flops = 8e9\\n# a comment\\nbandwidth = 2e10\\nkernel_overhead = 2e-6\\n"\n' >"$out" &&
  chmod +x "$out"
