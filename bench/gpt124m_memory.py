"""GPT-2 124M at its full context (T = 1024) under a memory size (issue 24):
the largest batch each side trains in that much memory, and its tokens per
second and per GiB. trainc plans for the size (`--budget`, the arena plus
AdamW's state) with its chunked loss head and its checkpoint planner;
PyTorch 2 (bench/torch_experts.py's GPT, eager) checkpoints every block
(torch.utils.checkpoint, use_reentrant=False: Hugging Face's
gradient_checkpointing) and its batch grows while its peak RSS stays within
the size. Both sides: examples/gpt124m.nn at T = 1024 without dropout,
random tokens, AdamW, clip 1, 2 threads; PyTorch with glibc malloc kept from
trimming and mmapping and OMP_WAIT_POLICY=active (bench/gpt_checkpoint.py's
tuning on the small GPT picked it). --compress: trainc also with
--compress bf16 (activations stored and GEMMs recomputed in bf16).

peak RSS   /usr/bin/time's maximum resident set size of the whole process
step       the median of the steps after the first (trainc: its log's
           examples_per_s; PyTorch: perf_counter around each step)

usage: /opt/trainc-peers/bin/python bench/gpt124m_memory.py TRAINC WORKDIR [--memory GIB] [--steps N] [--max-batch N] [--force] [--compress]
       ... --torch-worker BATCH WEIGHTS DATADIR STEPS    (one PyTorch run; prints JSON)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from gpt_checkpoint import NO_DROPOUT, edited_example, wait_for_quiet
from torch_compare import environment

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 1 << 30
T, V = 1024, 50257
TORCH_TUNING = ("glibc", "active")  # what bench/gpt_checkpoint.py's tuning picked on the small GPT


def model_file(work, batch):
    return edited_example("gpt124m", NO_DROPOUT + (("const T = 64", "const T = 1024"), ("batch 4", f"batch {batch}")),
                          os.path.join(work, f"gpt124m_b{batch}.nn"))


def timed(cmd, env):
    """Runs cmd under /usr/bin/time; returns its stdout and peak RSS in bytes."""
    out = subprocess.run(["/usr/bin/time", "-f", "maxrss=%M"] + cmd, capture_output=True, text=True, env=env,
                         check=True)
    rss = int(out.stderr.strip().splitlines()[-1].split("=")[1]) * 1024
    return out.stdout, rss


# ---- trainc ----

def trainc_fits(trainc, nn, memory, flags):
    return subprocess.run([trainc, "plan", nn, "--budget", str(memory)] + flags, capture_output=True).returncode == 0


def trainc_run(trainc, work, batch, memory, data, steps, flags):
    nn = model_file(work, batch)
    binary = os.path.join(work, f"trainc_b{batch}{''.join(flags)}")
    subprocess.run([trainc, "build", nn, "--budget", str(memory), "-o", binary] + flags, check=True,
                   stdout=subprocess.DEVNULL)
    plan = json.loads(subprocess.run([trainc, "plan", nn, "--budget", str(memory), "--format", "json"] + flags,
                                     capture_output=True, text=True, check=True).stdout)
    log = binary + ".jsonl"
    _, rss = timed([binary, "--data", data, "--steps", str(steps), "--threads", "2", "--log-every", "1", "--log",
                    log, "--quiet"], environment())
    recs = [json.loads(line) for line in open(log)]
    step = statistics.median([batch / r["examples_per_s"] for r in recs if "examples_per_s" in r][1:])
    return {"step": step, "rss": rss, "planned": plan["peak"]["total"],
            "predicted": plan["overhead"]}


# ---- PyTorch ----

def torch_worker(batch, weights_path, data, steps):
    import torch
    from torch.utils.checkpoint import checkpoint
    sys.path.insert(0, HERE)
    import torch_experts
    from safetensors.numpy import load_file

    torch.set_num_threads(2)
    model = torch_experts.build("gpt124m", load_file(weights_path))
    for block in model.h:
        block.forward = (lambda f: lambda x: checkpoint(f, x, use_reentrant=False))(block.forward)
    opt = torch.optim.AdamW(torch_experts.param_groups(model), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            foreach=True)
    tokens = torch.from_numpy(np.load(f"{data}/tokens.npy"))
    targets = torch.from_numpy(np.load(f"{data}/targets.npy"))
    times = []
    for i in range(steps):
        rows = torch.from_numpy(np.random.default_rng(i).integers(0, tokens.shape[0], batch))
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model({"tokens": tokens[rows], "targets": targets[rows]})
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()
        times.append(time.perf_counter() - start)
    print(json.dumps({"step": statistics.median(times[1:])}))


def torch_run(batch, weights, data, steps):
    out, rss = timed([sys.executable, __file__, "--torch-worker", str(batch), weights, data, str(steps)],
                     environment(TORCH_TUNING, 2))
    return dict(json.loads(out.strip().splitlines()[-1]), rss=rss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trainc")
    ap.add_argument("work")
    ap.add_argument("--memory", type=float, default=5.0, help="GiB")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--compress", action="store_true", help="also trainc with --compress bf16")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    trainc = os.path.abspath(args.trainc)
    memory = int(args.memory * GIB)
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(1)
    for name in ("tokens", "targets"):
        np.save(f"{data}/{name}.npy", rng.integers(0, V, (64, T), dtype=np.int32))
    weights = os.path.join(work, "init.safetensors")
    init = os.path.join(work, "init")
    subprocess.run([trainc, "build", model_file(work, 1), "-o", init], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([init, "--data", data, "--steps", "0", "--save", weights], check=True, stdout=subprocess.DEVNULL)

    wait_for_quiet(args.force)
    results = []
    for side, flags in [("trainc", [])] + ([("trainc --compress bf16", ["--compress", "bf16"])] if args.compress else []):
        fitting = [b for b in range(1, args.max_batch + 1) if trainc_fits(trainc, model_file(work, b), memory, flags)]
        if fitting:
            b = max(fitting)
            results.append((side, b, trainc_run(trainc, work, b, memory, data, args.steps, flags)))
    best = None
    for b in range(1, args.max_batch + 1):
        r = torch_run(b, weights, data, args.steps)
        print(f"  PyTorch per-block checkpointing, batch {b}: peak RSS {r['rss'] / GIB:.2f} GiB, "
              f"{1000 * r['step']:.0f} ms/step")
        if r["rss"] > memory:
            break
        best = (b, r)
    if best:
        results.append(("PyTorch per-block", best[0], best[1]))
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")
    print(f"memory {args.memory:g} GiB; GPT-2 124M, T = {T}; PyTorch {__import__('torch').__version__}")
    print(f"{'side':22s} {'batch':>5s} {'peak RSS GiB':>12s} {'step s':>8s} {'tokens/s':>9s} {'tokens/s/GiB':>12s}")
    for side, b, r in results:
        tps = b * T / r["step"]
        extra = (f"  (planned {r['planned'] / GIB:.2f} GiB, predicted overhead {100 * r['predicted']:+.1f}%)"
                 if "planned" in r else "")
        print(f"{side:22s} {b:5d} {r['rss'] / GIB:12.2f} {r['step']:8.2f} {tps:9.0f} {tps / (r['rss'] / GIB):12.0f}"
              + extra)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        torch_worker(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
