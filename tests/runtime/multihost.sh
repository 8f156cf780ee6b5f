#!/usr/bin/env bash
# multihost.sh TRAINER MAKE_DATA — a job of 2 ranks on 2 hosts, over TCP
# (docs/trainer.md, Distributed training, Several hosts). The hosts are two
# network namespaces joined by a veth pair, 10.213.0.1 (h1) and 10.213.0.2
# (h2), each with its own host name; mpirun runs on h1 and starts h2's daemon
# through a launcher agent script in place of ssh. Nothing is sent outside
# those two namespaces. Checks, with the tiny trainer built for MPI:
#  1. LocalSGD and `sync gradients` across the hosts train to bitwise the
#     weights of the same 2 ranks on one host (with 2 ranks every element of
#     an all-reduce is one sum of two floats, in either order the same);
#  2. the link set down mid-run: both ranks exit non-zero within
#     --comm-timeout, each naming the other rank and its host; mpirun ends;
#  3. the last saved state (--save-state, --save-every) resumes on the two
#     hosts and ends with the uninterrupted run's weights;
#  4. the rank on h2 killed: the job ends with a non-zero status in seconds;
#  5. a lossy, slow link (tc netem delay 20ms loss 5% on both veth ends):
#     slower, same weights. Without sch_netem in the kernel, the same check
#     runs through a token bucket (tbf: a slow link that drops what overflows
#     its small queue) and says so.
# Needs root, iproute2 (ip, tc) and unshare; skips (77) without them or where
# the kernel refuses network namespaces or veth pairs.
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
for tool in mpirun ip tc unshare; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (ip, tc: iproute2; scripts/install-deps --test)"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 # Open MPI's own allocations
NAME=multihost
. "$(dirname "$0")/harness.sh" "$1" "$2" 400

# Names unique to this run: a second run (another build folder) does not
# collide with it. Interface names have at most 15 characters.
NS1=trc-h1-$$ NS2=trc-h2-$$ IF1=trc1-$$ IF2=trc2-$$
IP1=10.213.0.1 IP2=10.213.0.2
cleanup() {
  local ns pid
  for ns in "$NS1" "$NS2"; do
    # whatever this test left running in its namespaces (ranks, daemons, mpirun)
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null # deletes its end of the veth pair, so the pair
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM # through cleanup
# A run killed outright (SIGKILL: ctest's timeout) cannot clean up: its
# namespaces, named after a process that no longer exists, go now.
for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(trc-h[12]-\([0-9]*\)\)\( .*\)\{0,1\}$/\1 \2/p' | tr ' ' :); do
  kill -0 "${ns#*:}" 2>/dev/null && continue # that test still runs
  for pid in $(ip netns pids "${ns%:*}"); do kill -KILL "$pid" 2>/dev/null; done
  ip netns del "${ns%:*}" && echo "removed the namespace ${ns%:*} of an earlier run"
done

ip netns add "$NS1" 2>netns.err || skip "cannot create a network namespace: $(cat netns.err)"
ip netns add "$NS2" 2>netns.err || skip "cannot create a network namespace: $(cat netns.err)"
ip link add "$IF1" netns "$NS1" type veth peer name "$IF2" netns "$NS2" 2>netns.err ||
  skip "cannot create a veth pair: $(cat netns.err)"
ip -n "$NS1" addr add "$IP1/24" dev "$IF1" && ip -n "$NS2" addr add "$IP2/24" dev "$IF2" &&
  ip -n "$NS1" link set "$IF1" up && ip -n "$NS2" link set "$IF2" up &&
  ip -n "$NS1" link set lo up && ip -n "$NS2" link set lo up || { echo "FAIL: cannot set up the veth pair"; exit 1; }
for ns in "$NS1" "$NS2"; do
  # A TCP connection whose peer vanished is given up after 4 retransmits
  # (seconds) instead of the default 15 (~15 min): mpirun, which cannot reach
  # the other host's daemon to end the job after the link went down, then
  # ends in seconds too. Per namespace: the machine's setting is untouched.
  ip netns exec "$ns" sh -c 'echo 4 >/proc/sys/net/ipv4/tcp_retries2' ||
    { echo "FAIL: cannot set tcp_retries2 in $ns"; exit 1; }
done

# The launcher agent: mpirun runs `agent HOST orted ARGS` where it would run
# `ssh HOST orted ARGS`; ARGS arrive as one shell command line, as ssh would
# pass them. The daemon runs in HOST's namespace under HOST's host name.
cat >agent <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
  $IP1) ns=$NS1 name=h1 ;;
  $IP2) ns=$NS2 name=h2 ;;
  *) echo "agent: no host \$host in this test" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name && \$*"
EOF
# Each rank through a wrapper that records where it ran, its stderr, its exit
# status and when it exited (the far rank's stderr would reach mpirun through
# the link under test).
cat >rank <<'EOF'
#!/bin/sh
r=$OMPI_COMM_WORLD_RANK
hostname >"rank$r.host"
"$@" 2>"rank$r.err"
status=$?
echo "$status $(date +%s.%N)" >"rank$r.exit"
exit $status
EOF
chmod +x agent rank
printf '%s slots=1\n%s slots=1\n' "$IP1" "$IP2" >hostfile
# TCP only, on the veth only; one rank per host; no binding, because both
# "hosts" share this machine's cores (on real hosts: --bind-to core).
TCP_OPTS=(--hostfile hostfile -np 2 --map-by node --bind-to none --mca plm_rsh_agent "$WORK/agent"
          --mca btl tcp,self --mca btl_tcp_if_include 10.213.0.0/24 --mca oob_tcp_if_include 10.213.0.0/24
          --mca mpi_yield_when_idle 1)
ONE_HOST=(-np 2 --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none
          --mca mpi_yield_when_idle 1)

# two_hosts SECONDS ARGS...: mpirun on h1 (ARGS: the trainer's), bounded;
# its output in two.out, two.err; the ranks' in rankR.host, rankR.err, rankR.exit.
two_hosts() {
  local limit=$1
  shift
  rm -f rank?.host rank?.err rank?.exit
  timeout "$limit" ip netns exec "$NS1" unshare --uts sh -c 'hostname h1 && exec "$@"' sh \
    mpirun "${TCP_OPTS[@]}" "$WORK/rank" "$TRAINER" "$@" >two.out 2>two.err
}
# one_host ARGS...: the same 2 ranks here, over shared memory, bounded
one_host() { timeout 120 mpirun "${ONE_HOST[@]}" "$TRAINER" "$@" >one.out 2>one.err; }
now() { date +%s.%N; }
# seconds FROM TO: TO - FROM, to a tenth
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
# wait_for FILE_GLOB SECONDS: until a file matches (training has reached it)
wait_for() {
  local _
  for _ in $(seq $(($2 * 10))); do compgen -G "$1" >/dev/null && return 0; sleep 0.1; done
  return 1
}

echo "1. LocalSGD and sync gradients: 2 hosts against 1 host"
for mode in "--sync-gradients yes" "--local-sgd 4"; do
  tag=${mode%% *} tag=${tag#--}
  start=$(now)
  two_hosts 120 --data d --steps 60 $mode --quiet --save "two-$tag.st"
  rc=$?
  clean_link=$(seconds "$start" "$(now)") # the last one, LocalSGD's: for 5.
  [ "$rc" -eq 0 ] || { fail "$mode on 2 hosts: exit $rc"; cat two.err rank?.err >&2; continue; }
  hosts=$(cat rank0.host rank1.host | paste -sd ' ')
  [ "$hosts" = "h1 h2" ] || fail "$mode: the ranks ran on '$hosts', not on h1 and h2"
  one_host --data d --steps 60 $mode --quiet --save "one-$tag.st" || fail "$mode on 1 host: exit $?"
  cmp -s "two-$tag.st" "one-$tag.st" || fail "$mode: 2 hosts and 1 host trained different weights"
  echo "   $mode: ranks on $hosts; the weights are bitwise those of 1 host"
done

# The fault runs: LocalSGD for long enough that the faults come mid-run, a
# state saved every 500 steps.
LONG=(--data d --steps 20000 --local-sgd 4 --quiet --log-every 1000)

echo "2. the link set down mid-run, --comm-timeout 5"
two_hosts 60 "${LONG[@]}" --comm-timeout 5 --save-state st --save-every 500 --save down.st &
job=$!
wait_for 'st/state-*.rank-1.safetensors' 30 || fail "no state saved within 30 s"
down=$(now)
ip -n "$NS2" link set "$IF2" down
wait "$job"
rc=$?
ended=$(now)
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "link down: mpirun exit $rc"
for r in 0 1; do
  [ -e "rank$r.exit" ] || { fail "link down: rank $r did not exit"; continue; }
  read -r status at <"rank$r.exit"
  took=$(seconds "$down" "$at")
  [ "$status" -ne 0 ] || fail "link down: rank $r exited 0"
  awk -v t="$took" 'BEGIN { exit !(t >= 4 && t <= 8) }' || fail "link down: rank $r exited after $took s (--comm-timeout 5)"
  echo "   rank $r exited with status $status $took s after the link went down"
done
# (in an all-reduce, or in the barrier after a save)
for r in 0 1; do
  sed -n 's/^trainer: error: /   /p' "rank$r.err"
  expect "rank$r" err "rank $r on h$((r + 1)): the "
  expect "rank$r" err "has waited 5 s for the other ranks (--comm-timeout); rank $((1 - r)) on h$((2 - r)) is stopped, hung, far slower or unreachable"
done
[ ! -e down.st ] || fail "link down: weights saved"
echo "   mpirun exited with status $rc $(seconds "$down" "$ended") s after the link went down"
ip -n "$NS2" link set "$IF2" up

echo "3. the last saved state resumes on the 2 hosts"
saved=$(ls st | sed -n 's/^state-\([0-9]*\)\.rank-1\.safetensors$/\1/p')
two_hosts 120 "${LONG[@]}" --resume st --save resumed.st
rc=$?
[ "$rc" -eq 0 ] || { fail "resume: exit $rc"; cat two.err rank?.err >&2; }
one_host "${LONG[@]}" --save whole.st || fail "the uninterrupted run on 1 host: exit $?"
cmp -s resumed.st whole.st || fail "resumed from step $saved: not the uninterrupted weights"
echo "   resumed from step $saved of 20000: the uninterrupted weights, bitwise"

echo "4. the rank on h2 killed"
rm -rf st
# --comm-timeout 60: the job must end because the rank died, not on the watchdog
two_hosts 60 "${LONG[@]}" --comm-timeout 60 --save-state st --save-every 500 &
job=$!
wait_for 'st/state-*.rank-1.safetensors' 30 || fail "no state saved within 30 s"
# trainers NS: the pids of the trainers running in namespace NS
trainers() {
  local pid
  for pid in $(ip netns pids "$1"); do
    [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$TRAINER")" ] && echo "$pid"
  done
}
victim=$(trainers "$NS2")
[ -n "$victim" ] || fail "no trainer found running on h2"
killed=$(now)
[ -n "$victim" ] && kill -KILL $victim
# rank 0 is ended by mpirun (its wrapper too: no rank0.exit): watch it go
for _ in $(seq 600); do [ -z "$(trainers "$NS1")" ] && break; sleep 0.1; done
gone=$(seconds "$killed" "$(now)")
wait "$job"
rc=$?
took=$(seconds "$killed" "$(now)")
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a killed rank: mpirun exit $rc"
awk -v t="$took" 'BEGIN { exit !(t <= 10) }' || fail "a killed rank: the job ended after $took s"
echo "   rank 0 ended $gone s, mpirun exited with status $rc $took s after rank 1 was killed"

echo "5. a lossy, slow link"
# qdisc on both ends of the veth: each direction is delayed and loses packets
if ip netns exec "$NS1" tc qdisc add dev "$IF1" root netem delay 20ms loss 5% 2>tc.err; then
  ip netns exec "$NS2" tc qdisc add dev "$IF2" root netem delay 20ms loss 5%
  link="netem delay 20ms loss 5%"
elif grep -q "qdisc kind is unknown" tc.err; then
  echo "   SKIP netem: this kernel has no sch_netem ($(cat tc.err)); the same check through tbf"
  # 100 kbit/s with room for one packet in the queue: a sync's parameters
  # (848 bytes) take ~70 ms each way, and what comes while a packet waits
  # is dropped, for TCP to resend
  for end in "$NS1 $IF1" "$NS2 $IF2"; do
    set -- $end
    ip netns exec "$1" tc qdisc add dev "$2" root tbf rate 100kbit burst 1600 limit 1600
  done
  link="tbf rate 100kbit limit 1600"
else
  fail "tc: $(cat tc.err)"
  link=
fi
if [ -n "$link" ]; then
  start=$(now)
  two_hosts 300 --data d --steps 60 --local-sgd 4 --quiet --save lossy.st
  rc=$?
  took=$(seconds "$start" "$(now)")
  [ "$rc" -eq 0 ] || { fail "over $link: exit $rc"; cat two.err rank?.err >&2; }
  cmp -s lossy.st two-local-sgd.st || fail "over $link: not the weights of a clean link"
  # (a clean link took well under a second; every sync now waits on the link)
  awk -v t="$took" -v c="$clean_link" 'BEGIN { exit !(t > c) }' ||
    fail "over $link: $took s, no slower than a clean link ($clean_link s): is the qdisc in the path?"
  dropped=$(ip netns exec "$NS1" tc -s qdisc show dev "$IF1" | sed -n 's/.*dropped \([0-9]*\).*/\1/p')
  dropped2=$(ip netns exec "$NS2" tc -s qdisc show dev "$IF2" | sed -n 's/.*dropped \([0-9]*\).*/\1/p')
  echo "   over $link: the same weights in $took s (clean link: $clean_link s);" \
       "packets dropped: $dropped on h1, $dropped2 on h2"
fi

finish
