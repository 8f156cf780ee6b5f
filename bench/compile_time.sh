#!/usr/bin/env bash
# How long the C compiler takes on a generated trainer (issue 10: GPT-2
# 124M's under 2 s): emits MODEL's C with TRAINC, compiles it to an object
# RUNS times with trainc's default compiler and flags (what `trainc build`
# runs, less the link), and prints the file's size, the wall and user
# seconds of each run, their median, the load average before and after, and
# GCC's -ftime-report phases over 2% of the time. Run it on a quiet machine.
# usage: bench/compile_time.sh TRAINC [MODEL [RUNS]]
set -euo pipefail
trainc=$(realpath "$1")
src=$(cd "$(dirname "$0")/.." && pwd)
model=${2:-$src/examples/gpt124m.nn} runs=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=$("$trainc" --help | sed -n 's/^ *--cflags FLAGS .*(default: \(.*\))$/\1/p')
cc=${CC:-cc}
"$trainc" emit "$model" -o "$work/trainer.c" >/dev/null
echo "model $(basename "$model"): $(wc -l <"$work/trainer.c") lines," \
  "$(grep -c '__attribute__((noinline))' "$work/trainer.c") kernel functions"
echo "compiler: $cc $flags -std=c11 -c"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 0; i < runs; i++)); do
  /usr/bin/time -f "%e %U" -o "$work/time.$i" \
    "$cc" $flags -std=c11 -I "$src/runtime" -c "$work/trainer.c" -o "$work/trainer.o"
  echo "run $((i + 1)): $(cut -d' ' -f1 "$work/time.$i") s wall, $(cut -d' ' -f2 "$work/time.$i") s user"
done
echo "median wall: $(cut -d' ' -f1 "$work"/time.* | sort -n | sed -n "$(((runs + 1) / 2))p") s"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "phases of -ftime-report over 2% of the wall time:"
"$cc" $flags -std=c11 -I "$src/runtime" -c "$work/trainer.c" -o "$work/trainer.o" -ftime-report \
  2>&1 | awk -F: '/^ [a-zA-Z]/ && NF == 2 {
      v = $2; gsub(/\( *[0-9]+%\)/, "", v); split(v, f, " ")
      name = $1; sub(/^ +/, "", name); sub(/ +$/, "", name)
      if (name == "TOTAL") total = f[3]; else { n++; names[n] = name; wall[n] = f[3] } }
    END { for (i = 1; i <= n; i++) if (wall[i] >= 0.02 * total)
            printf "  %-36s %6.2f s wall\n", names[i], wall[i]
          printf "  %-36s %6.2f s wall\n", "TOTAL", total }'
