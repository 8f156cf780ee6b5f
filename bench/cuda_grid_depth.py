"""The grid of a CUDA trainer's loop kernels, counted from its .cu text (no GPU
needed; docs/cuda.md, *The grid*): per launch its threads and the statements
one thread runs (each `;`-statement of the kernel weighted by the trips of the
loops around it), and

  - the launches that run as one thread, with their share of all launches'
    statements;
  - the summed per-thread depth: over the step's launches, the statements of
    one thread, which a GPU runs one after another — by op, deepest first.

An approximation of work (a statement is not a fixed cost) for comparing two
kernel forms, not a timing.

usage: trainc emit MODEL.nn --backend cuda -o model.cu
       python3 bench/cuda_grid_depth.py model.cu
"""
import re
import sys
from collections import defaultdict

FOR = re.compile(r"for \(int64_t i\d+ = (\w+); i\d+ < ([^;]+); i\d+\+\+\)(.*)")
LANE_GROUPS = re.compile(r"for \(int64_t c = 0; c < (\d+); c \+= 16\)$")
DECLARATIONS = ("const float *", "float *", "const int32_t", "const uint8_t", "int32_t *",
                "uint8_t *", "int64_t thread", "if (thread", "const int64_t i", "thread /=")


def thread_statements(body):
    """Statements one thread of a kernel body runs."""
    total, trips, pending = 0, [], 1
    for line in (l.strip() for l in body.split("\n")):
        if not line:
            continue
        outer = 1
        for t in trips:
            outer *= t
        if m := LANE_GROUPS.match(line):  # a reduction's groups of lanes
            pending = int(m.group(1)) // 16
        elif m := FOR.match(line):
            first, end, rest = m.group(1), m.group(2), m.group(3).strip()
            n = 16 if first == "c" else int(end) - (0 if first == "0" else int(first))
            if rest == "{":
                trips.append(n * pending)
            else:  # a one-statement loop
                total += outer * pending * n
            pending = 1
        elif line.startswith("for (int "):  # a reduction's lanes: set up, folded
            total += outer * 16 if line.endswith(";") else 0
        elif line.endswith("{") or line.startswith("{"):
            trips.append(1)
        elif line == "}":
            trips.pop()
        elif line.endswith(";") and not line.startswith(DECLARATIONS):
            total += outer * pending
            pending = 1
    return total


def main(path):
    src = open(path).read()
    kernels = dict(re.findall(r"^static __global__ void (k[0-9_]+)\(char \*__restrict__ D\) "
                              r"\{\n(.*?)^\}\n", src, re.S | re.M))
    ops = {"k" + n: op for n, op in re.findall(r"^/\* %(\d+) = (\w+)", src, re.M)}
    launches = []
    for name, blocks, threads in re.findall(r"trc_launch\((k[0-9_]+), dim3\((\d+)\), "
                                            r"dim3\((\d+)\)", src):
        if name in kernels:
            per_thread = thread_statements(kernels[name])
            t = int(blocks) * int(threads)
            launches.append((ops.get(name.split("_")[0], "?"), t, per_thread))
    total = sum(t * w for _, t, w in launches)
    print(f"{path}: {len(launches)} loop-kernel launches, {total:.3g} statements")
    single = [(op, w) for op, t, w in launches if t == 1]
    print(f"  one thread: {len(single)} launches, "
          f"{100 * sum(w for _, w in single) / max(total, 1):.1f}% of the statements "
          f"({', '.join(sorted(set(op for op, _ in single)))})")
    depth = defaultdict(lambda: [0, 0])
    for op, t, w in launches:
        depth[op][0] += 1
        depth[op][1] += w
    summed = sum(d for _, d in depth.values())
    print(f"  summed per-thread depth: {summed:.3g} statements; deepest:")
    for op, (n, d) in sorted(depth.items(), key=lambda x: -x[1][1])[:8]:
        print(f"    {op:24s} {n:4d} launches {d:10.3g} ({100 * d / summed:.1f}%)")


if __name__ == "__main__":
    main(sys.argv[1])
