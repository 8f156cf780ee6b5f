# Sourced by the benchmarks: wait_quiet waits (up to 5 minutes) for the
# 1-minute load average to fall below 0.5 — the builds before a timed part
# raise it — and fails if it does not; it prints the load it starts from.
wait_quiet() {
  local i
  for i in $(seq 60); do
    awk '{ exit !($1 < 0.5) }' /proc/loadavg && break
    sleep 5
  done
  awk '{ exit !($1 < 0.5) }' /proc/loadavg ||
    { echo "the machine is not quiet (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2; return 1; }
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
}
