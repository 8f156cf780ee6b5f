#!/usr/bin/env bash
# memory.sh TRAINER MAKE_DATA TRAINC MODEL — the memory a run needs checked
# before it is touched (docs/trainer.md, Memory and speed), against a fake
# /proc/meminfo and cgroup under TRAINC_MEMORY_ROOT (trc_memory.h), never
# the machine's own figures:
#  1. a plan larger than MemAvailable is refused with both numbers and the
#     `checkpoint auto --memory` hint; a smaller one trains;
#  2. a cgroup room (memory.max less memory.current) below MemAvailable
#     wins; "max" is no limit; cgroup v1's limit_in_bytes counts too;
#  3. unreadable files: no check; TRAINC_NO_MEMORY_CHECK=1 skips it;
#  4. `trainc plan --policy auto` plans for the same figure.
NAME=memory
TRAINC=$3 MODEL=$4
. "$(dirname "$0")/harness.sh" "$1" "$2" 400
export TRAINC_MEMORY_ROOT=$WORK/root
CG=root/sys/fs/cgroup
TRAIN=(--data d --steps 2 --quiet)
# The tiny trainer's plan: its 10688-byte arena and AdamW's two moments of
# its 212 parameters.
NEED="this run needs 12384 bytes (0.0 MiB: arena 10688, optimizer state 1696, copies of the \
parameters 0)"

# fake KIB [CGROUP_MAX CGROUP_CURRENT]: MemAvailable, and the cgroup v2 files
fake() {
  rm -rf root && mkdir -p root/proc "$CG"
  printf 'MemTotal:       99999999 kB\nMemAvailable:   %s kB\n' "$1" >root/proc/meminfo
  [ $# -eq 1 ] || { echo "$2" >"$CG/memory.max" && echo "$3" >"$CG/memory.current"; }
}

echo "1. MemAvailable against the plan"
fake 8
run small 1 "$TRAINER" "${TRAIN[@]}"
expect small err "$NEED but 8192 bytes (0.0 MiB) may be used (MemAvailable); build the \
trainer with \`checkpoint auto --memory SIZE\` or a smaller batch"
fake 13
run enough 0 "$TRAINER" "${TRAIN[@]}"

echo "2. the cgroup's room"
fake 1000000 20000 15000
run cgroup 1 "$TRAINER" "${TRAIN[@]}"
expect cgroup err "but 5000 bytes (0.0 MiB) may be used (/sys/fs/cgroup/memory.max)"
fake 1000000 max 15000
run cgroup_max 0 "$TRAINER" "${TRAIN[@]}"
fake 1000000
mkdir "$CG/memory" && echo 12000 >"$CG/memory/memory.limit_in_bytes" &&
  echo 0 >"$CG/memory/memory.usage_in_bytes"
run cgroup_v1 1 "$TRAINER" "${TRAIN[@]}"
expect cgroup_v1 err "but 12000 bytes (0.0 MiB) may be used \
(/sys/fs/cgroup/memory/memory.limit_in_bytes)"

echo "3. no figures: no check; the check turned off"
rm -rf root && mkdir root
run unreadable 0 "$TRAINER" "${TRAIN[@]}"
fake 8
run off 0 env TRAINC_NO_MEMORY_CHECK=1 "$TRAINER" "${TRAIN[@]}"

echo "4. checkpoint auto plans for the same figure"
fake 99999999 "$((4 << 20))" 0
"$TRAINC" plan "$MODEL" --policy auto >auto.txt 2>&1 || fail "plan --policy auto: $(cat auto.txt)"
"$TRAINC" plan "$MODEL" --policy auto --memory 4MiB >given.txt 2>&1
cmp -s auto.txt given.txt || fail "checkpoint auto under a 4 MiB cgroup: $(head -n 1 auto.txt)"
rm -rf root && mkdir root
run no_figure 1 "$TRAINC" plan "$MODEL" --policy auto
expect no_figure err "cannot read the free memory (/proc/meminfo): give --memory SIZE for \
checkpoint auto"

finish
