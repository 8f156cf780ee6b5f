#!/usr/bin/env bash
# Checkpointing benchmark (issue 3): a deep MLP (32 layers of width 1024) and
# a residual MLP (16 blocks), batch 512, AdamW. For each trainc policy: the
# planned peak, the stored activations, the measured peak RSS, the step time
# and the recompute overhead against `off`; beside it, the same model in
# Debian's PyTorch with checkpoint_sequential at several segment counts.
# Runs are interleaved (trainc, torch, trainc, ...) and the medians of REPS
# runs reported, so machine noise hits both sides alike.
# Environment of every timed command: OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE unset, OMP_WAIT_POLICY=passive, glibc malloc tuned as the
# issue's "tuned PyTorch"; torch.set_num_threads(2).
# A policy ending in " bf16" is planned with --compress bf16 (activations
# stored in bf16 where the backward pass allows it).
# The plans use this machine's profile (`trainc calibrate`, measured first),
# and each policy's predicted recompute overhead is set against the measured
# one ("prediction error": predicted / measured - 1; the goal is within 25%).
# usage: bench/checkpoint.sh [BUILD_DIR] [REPS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} reps=${2:-3} steps=${3:-8}
work=$build/bench_checkpoint
mkdir -p "$work/data"
PY=/usr/bin/python3
source bench/quiet.sh
"$PY" -c '
import numpy as np, sys
rng = np.random.default_rng(0)
np.save(sys.argv[1] + "/x.npy", rng.standard_normal((2048, 1024), dtype=np.float32))
np.save(sys.argv[1] + "/label.npy", rng.integers(0, 10, 2048, dtype=np.int32))' "$work/data"
tuned=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=passive MALLOC_MMAP_MAX_=0
       MALLOC_TRIM_THRESHOLD_=17179869184)

# flags_for POLICY: sets `flags` to trainc's flags for it: --policy P, and
# --compress bf16 when it ends in " bf16".
flags_for() {
  if [[ $1 == *" bf16" ]]; then flags=(--policy "${1% bf16}" --compress bf16)
  else flags=(--policy "$1"); fi
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# trainc_run BIN -> "seconds_per_step maxrss_kib": the median step after the
# first (as checkpoint_torch.py times PyTorch), from the log's running time.
trainc_run() {
  local out
  out=$("${tuned[@]}" /usr/bin/time -f "maxrss=%M" "$1" --data "$work/data" --steps "$steps" \
    --log "$work/run.jsonl" --log-every 1 2>&1 >/dev/null)
  "$PY" -c '
import json, statistics, sys
t = [json.loads(l)["seconds"] for l in open(sys.argv[1]) if "\"loss\"" in l]
print("%.4f %s" % (statistics.median(b - a for a, b in zip(t, t[1:])), sys.argv[2]))' \
    "$work/run.jsonl" "$(sed -n 's/maxrss=//p' <<<"$out")"
}

torch_run() {
  local out
  out=$("${tuned[@]}" "$PY" bench/checkpoint_torch.py "$1" "$2" "$steps")
  sed -E 's/step_seconds=([0-9.]+) saved_mib=([0-9.]+) maxrss_kib=([0-9]+)/\1 \3 \2/' <<<"$out"
}

wait_quiet
"$build/driver/trainc" calibrate -o "$work/profile"
for model in deep res; do
  nn=$([[ $model == deep ]] && echo examples/deep_mlp.nn || echo bench/models/res_mlp.nn)
  echo "## ${model}_mlp"
  echo
  policies=(off sqrt "every 2" "every 4" "every 8")
  # Budgets whose stored activations land near 24 MiB and 40 MiB.
  fixed=$("$build/driver/trainc" plan "$nn" --policy off --format json | "$PY" -c '
import json, sys; p = json.load(sys.stdin)["peak"]; print(p["total"] - p["stored_activations"] - p["backward_workspace"])')
  policies+=("budget $((fixed + 28 * 1048576))" "budget $((fixed + 44 * 1048576))")
  # bf16 storage: at those budgets, at one whose stored activations land
  # near 24 MiB, and off
  policies+=("budget $((fixed + 28 * 1048576)) bf16" "budget $((fixed + 34 * 1048576)) bf16"
             "budget $((fixed + 44 * 1048576)) bf16" "off bf16")
  declare -A t_time t_rss
  for policy in "${policies[@]}"; do
    flags_for "$policy"
    "$build/driver/trainc" build "$nn" "${flags[@]}" --profile "$work/profile" \
      -o "$work/${model}_${policy// /_}" >/dev/null
  done
  wait_quiet
  segs=(0 2 4 6 8)
  for ((r = 0; r < reps; r++)); do
    for i in "${!policies[@]}"; do
      p=${policies[$i]}
      read -r s m < <(trainc_run "$work/${model}_${p// /_}")
      t_time[$p]+="$s " t_rss[$p]+="$m "
      if ((i < ${#segs[@]})); then
        read -r s m a < <(torch_run "$model" "${segs[$i]}")
        t_time[torch${segs[$i]}]+="$s " t_rss[torch${segs[$i]}]+="$m " t_saved[${segs[$i]}]=$a
      fi
    done
  done
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  off_time=$(tr ' ' '\n' <<<"${t_time[off]}" | grep . | median)
  echo "| trainc policy | planned peak (MiB) | stored activations (MiB) | predicted overhead | peak RSS (MiB) | step (s) | overhead vs off | prediction error |"
  echo "|---|---|---|---|---|---|---|---|"
  for p in "${policies[@]}"; do
    flags_for "$p"
    read -r total stored over < <("$build/driver/trainc" plan "$nn" "${flags[@]}" --profile "$work/profile" \
      --format json | "$PY" -c '
import json, sys; d = json.load(sys.stdin); p = d["peak"]
print(p["total"] / 2**20, p["stored_activations"] / 2**20, 100 * d["overhead"])')
    t=$(tr ' ' '\n' <<<"${t_time[$p]}" | grep . | median)
    m=$(tr ' ' '\n' <<<"${t_rss[$p]}" | grep . | median)
    awk -v p="$p" -v a="$total" -v b="$stored" -v c="$over" -v m="$m" -v t="$t" -v o="$off_time" \
      'BEGIN { measured = 100 * (t / o - 1)
               error = measured > 0.5 ? sprintf("%+.0f%%", 100 * (c / measured - 1)) : "-"
               printf "| %s | %.1f | %.1f | +%.1f%% | %.0f | %.3f | %+.1f%% | %s |\n", p, a, b, c, m / 1024, t, measured, error }'
  done
  echo
  t0=$(tr ' ' '\n' <<<"${t_time[torch0]}" | grep . | median)
  echo "| PyTorch checkpoint_sequential | saved activations (MiB) | peak RSS (MiB) | step (s) | overhead vs none | this step / trainc off step |"
  echo "|---|---|---|---|---|---|"
  for sg in "${segs[@]}"; do
    t=$(tr ' ' '\n' <<<"${t_time[torch$sg]}" | grep . | median)
    m=$(tr ' ' '\n' <<<"${t_rss[torch$sg]}" | grep . | median)
    awk -v s="$sg" -v a="${t_saved[$sg]}" -v m="$m" -v t="$t" -v o="$t0" -v ours="$off_time" \
      'BEGIN { printf "| %s | %.1f | %.0f | %.3f | %+.1f%% | %.2f |\n", (s == 0 ? "none" : s " segments"), a, m / 1024, t, 100 * (t / o - 1), t / ours }'
  done
  echo
  unset t_time t_rss
done
