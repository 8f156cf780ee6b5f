"""GPT-2 124M at T = 1024: trainc's budget sweep with PyTorch's per-block
checkpointing on it (issue 24, item 4). examples/gpt124m.nn at T = 1024
without dropout, batch 2 (the largest PyTorch per-block fits in 5 GiB,
bench/gpt124m_memory.py), random tokens, AdamW, clip 1, 2 threads.

sweep       16 budgets from checkpoint all's planned peak to off's (with
            --compress: --compress bf16 too): each budget's plan, its stored
            activations (what forward() leaves for backward()) and its
            predicted overhead; predicted only
PyTorch     bench/gpt_checkpoint.py's worker: no checkpointing and
            checkpoint(block, use_reentrant=False) per block, the bytes
            autograd saves (saved_tensors_hooks) and the median step
trainc      at PyTorch per-block's stored bytes (the largest budget whose
            plan stores no more), measured against trainc `off`

Both sides' steps: the median of the steps after the first. PyTorch runs with
glibc malloc kept from trimming and mmapping and OMP_WAIT_POLICY=active
(bench/gpt_checkpoint.py's tuning on the small GPT picked it).

usage: /opt/trainc-peers/bin/python bench/gpt124m_sweep.py TRAINC WORKDIR [--batch N] [--steps N] [--compress] [--force]
"""
import argparse
import os
import statistics
import subprocess
import sys

import numpy as np

from gpt124m_memory import T, TORCH_TUNING, V, model_file
from gpt_checkpoint import plan, torch_run, trainc_step_ms, wait_for_quiet

MIB = 1 << 20


def budget_for(trainc, nn, stored_at_most, top):
    """The largest budget in whole MiB up to `top` whose plan stores at most
    `stored_at_most`, by bisection (a plan's stored bytes grow with its
    budget), and its plan."""
    lo, hi = -(-plan(trainc, nn, ["--policy", "all"])["total"] // MIB), top // MIB  # lo: fits, stores at most
    if not (p := plan(trainc, nn, ["--budget", f"{lo}MiB"])) or p["stored"] > stored_at_most:
        lo = None
    while lo is not None and lo < hi:
        mid = (lo + hi + 1) // 2
        p = plan(trainc, nn, ["--budget", f"{mid}MiB"])
        if p and p["stored"] <= stored_at_most:
            lo = mid
        else:
            hi = mid - 1
    return (f"{lo}MiB", plan(trainc, nn, ["--budget", f"{lo}MiB"])) if lo else (None, None)


def sweep(trainc, nn, flags, points=16):
    """[(budget bytes, plan)] at `points` budgets from the least planned peak
    (checkpoint all) to off's, as `trainc plan --sweep` spaces them."""
    lo = plan(trainc, nn, flags + ["--policy", "all"])["total"]
    hi = plan(trainc, nn, flags + ["--policy", "off"])["total"]
    budgets = [lo + (hi - lo) * i // (points - 1) for i in range(points)]
    return [(b, plan(trainc, nn, flags + ["--budget", str(b)])) for b in budgets]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trainc")
    ap.add_argument("work")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--compress", action="store_true", help="also the sweep with --compress bf16")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    trainc = os.path.abspath(args.trainc)
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(1)
    for name in ("tokens", "targets"):
        np.save(f"{data}/{name}.npy", rng.integers(0, V, (16, T), dtype=np.int32))
    nn = model_file(work, args.batch)
    weights, init = os.path.join(work, "init.safetensors"), os.path.join(work, "init")
    subprocess.run([trainc, "build", nn, "-o", init], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([init, "--data", data, "--steps", "0", "--save", weights], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wait_for_quiet(args.force)

    torch = {mode: torch_run(mode, weights, data, args.steps, TORCH_TUNING, "gpt124m", args.batch, 1)
             for mode in ("none", "block")}
    block = torch["block"]["stored"]
    budget, at_block = budget_for(trainc, nn, block, plan(trainc, nn, ["--policy", "off"])["total"])
    measured = {}
    for name, flags in (("off", ["--policy", "off"]), ("at per-block", ["--budget", budget])):
        binary = os.path.join(work, "trainc_" + name.replace(" ", "_"))
        subprocess.run([trainc, "build", nn, "-o", binary] + flags, check=True, stdout=subprocess.DEVNULL)
        measured[name] = trainc_step_ms(binary, data, args.steps, args.batch, 1)
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")

    print(f"GPT-2 124M, T = {T}, batch {args.batch}; PyTorch {__import__('torch').__version__}")
    torch_overhead = torch["block"]["step_ms"] / torch["none"]["step_ms"] - 1
    for label, flags in [("", [])] + ([(" --compress bf16", ["--compress", "bf16"])] if args.compress else []):
        print(f"\ntrainc's plans{label}:")
        print(f"{'budget':>10s} {'planned peak':>13s} {'stored':>10s} {'predicted':>10s}")
        marked = False
        for b, p in sweep(trainc, nn, flags):
            if not marked and p["stored"] >= block:
                print(f"{'':>10s} {'':>13s} {block / MIB:7.1f} MiB {100 * torch_overhead:+9.1f}%  "
                      f"<- PyTorch per-block (measured)")
                marked = True
            print(f"{b / MIB:6.0f} MiB {p['total'] / MIB:9.1f} MiB {p['stored'] / MIB:6.1f} MiB "
                  f"{100 * p['predicted']:+9.1f}%")
    print(f"\nPyTorch: no checkpointing {torch['none']['stored'] / MIB:.1f} MiB saved, "
          f"{torch['none']['step_ms']:.0f} ms; per block {block / MIB:.1f} MiB, {torch['block']['step_ms']:.0f} ms "
          f"({100 * torch_overhead:+.1f}%)")
    print(f"trainc: off {measured['off']:.0f} ms; --budget {budget} stores {at_block['stored'] / MIB:.1f} MiB, "
          f"{measured['at per-block']:.0f} ms ({100 * (measured['at per-block'] / measured['off'] - 1):+.1f}%, "
          f"predicted {100 * at_block['predicted']:+.1f}%)")


if __name__ == "__main__":
    main()
