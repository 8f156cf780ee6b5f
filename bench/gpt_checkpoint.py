"""Checkpointing a GPT side by side (issue 24): trainc's plans against PyTorch
2's no checkpointing and its per-block checkpointing, on the GPT of
bench/gpt_ab.sh (examples/gpt.nn at vocabulary 8192, context 128, width
256, 4 layers, batch 8, no dropout), the same random tokens, AdamW, clip 1.

trainc (with and without the chunked loss head, --loss-head whole; and with
--compress bf16, activations stored and GEMMs recomputed in bf16):
  off         everything the backward pass reads is stored
  all         every stage boundary only
  budget@X    the least predicted overhead whose stored activations are at
              most X: PyTorch per-block's saved bytes, and half of
              trainc's own `off --loss-head whole` (the issue's baseline);
              found by planning budgets from off's peak down, 1 MiB apart
PyTorch 2 (bench/torch_experts.py's GPT, eager):
  none        no checkpointing
  block       torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
              around every block, as Hugging Face's gradient_checkpointing does

stored      trainc: the plan's stored activations (what forward() leaves for
            backward(); equal to the measured arena by the plan's promise);
            PyTorch: the bytes autograd saves during forward
            (saved_tensors_hooks, one count per storage, parameters left out)
step        the median step time of a run (trainc: from --log-every 1's
            examples_per_s; PyTorch: perf_counter around each step, the first
            3 left out), the median over the runs
overhead    against the same side's own no-checkpoint step (trainc: `off`
            with the same loss head, in f32 for the bf16 plans too; PyTorch: none); `predicted` is the
            plan's `overhead`: its recompute time, less what backward saves reading recomputed values
            from the cache, over the rest of its predicted step (the update included)

PyTorch's environment is tuned first as bench/torch_compare.py does (its
allocators: glibc malloc without trimming and mmap, jemalloc, tcmalloc;
OMP_WAIT_POLICY active or passive: the fastest no-checkpoint run), both sides run 2 threads, runs
alternate trainc's plans and PyTorch's modes, and the load average must be
below 0.5 at the start (--force runs anyway and says so).

usage: /opt/trainc-peers/bin/python bench/gpt_checkpoint.py TRAINC WORKDIR [--runs N] [--steps N] [--force]
       ... --torch-worker MODE WEIGHTS DATADIR STEPS MODEL BATCH SKIP    (one PyTorch run; prints JSON)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

from torch_compare import ALLOCATORS, environment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20
B, T, V = 8, 128, 8192
NO_DROPOUT = (("dropout = 0.1", "dropout = 0"), ("dropout(proj, 0.1)", "proj"))


def edited_example(name, replacements, path):
    """examples/NAME.nn with each (a, b) of replacements made, written to path."""
    text = open(os.path.join(ROOT, f"examples/{name}.nn")).read()
    for a, b in replacements:
        if a not in text:
            sys.exit(f"{os.path.basename(sys.argv[0])}: examples/{name}.nn changed ({a!r} not found)")
        text = text.replace(a, b)
    open(path, "w").write(text)
    return path


def model_file(work):
    return edited_example("gpt", NO_DROPOUT + (("const VOCAB = 256 ", "const VOCAB = 8192 "),
                                               ("const T = 64 ", "const T = 128 "),
                                               ("const D = 128 ", "const D = 256 "), ("batch 32", "batch 8")),
                          os.path.join(work, "gpt.nn"))


def load():
    return float(open("/proc/loadavg").read().split()[0])


def wait_for_quiet(force):
    """Waits up to 5 minutes for a load average below 0.5 (force: not at all),
    and prints it."""
    for _ in range(0 if force else 60):
        if load() < 0.5:
            break
        time.sleep(5)
    else:
        if not force:
            sys.exit(f"the machine is not quiet (load average {load()})")
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}" + (" (--force)" if force else ""))


# ---- trainc ----

def plan(trainc, nn, args):
    out = subprocess.run([trainc, "plan", nn, "--format", "json"] + args, capture_output=True, text=True)
    if out.returncode:
        return None
    d = json.loads(out.stdout)
    return {"stored": d["peak"]["stored_activations"], "total": d["peak"]["total"],
            "predicted": d["overhead"]}


def budget_for(trainc, nn, head, stored_at_most, top):
    """The largest budget (1 MiB steps down from `top`) whose plan stores at most
    `stored_at_most`: the least overhead there (the sweep is monotone)."""
    budget = top
    while budget > 8 * MIB:
        p = plan(trainc, nn, head + ["--budget", f"{budget // MIB}MiB"])
        if p and p["stored"] <= stored_at_most:
            return f"{budget // MIB}MiB", p
        budget -= MIB
    return None, None


def trainc_step_ms(binary, data, steps, batch=B, skip=3):
    """The median step of a run in ms, its first `skip` steps left out."""
    log = binary + ".jsonl"
    subprocess.run([binary, "--data", data, "--steps", str(steps), "--threads", "2", "--log-every", "1",
                    "--log", log, "--quiet"], check=True, env=environment(), stdout=subprocess.DEVNULL)
    recs = [json.loads(line) for line in open(log)]
    return statistics.median([1000.0 * batch / r["examples_per_s"] for r in recs if "examples_per_s" in r][skip:])


# ---- PyTorch ----

def torch_worker(mode, weights_path, data, steps, model_name="gpt", batch=B, skip=3):
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint
    sys.path.insert(0, HERE)
    import torch_experts
    from safetensors.numpy import load_file

    torch.set_num_threads(2)
    model = torch_experts.build(model_name, load_file(weights_path))
    if mode == "block":
        for block in model.h:
            block.forward = (lambda f: lambda x: checkpoint(f, x, use_reentrant=False))(block.forward)
    opt = torch.optim.AdamW(torch_experts.param_groups(model), lr=2e-3, weight_decay=0.1, foreach=True)
    tokens = torch.from_numpy(np.load(f"{data}/tokens.npy"))
    targets = torch.from_numpy(np.load(f"{data}/targets.npy"))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {"bytes": 0, "seen": set()}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in saved["seen"] and key not in params:
            saved["seen"].add(key)
            saved["bytes"] += t.untyped_storage().nbytes()
        return t

    times = []
    for i in range(steps):
        rows = torch.from_numpy(np.random.default_rng(i).integers(0, tokens.shape[0], batch))
        inputs = {"tokens": tokens[rows], "targets": targets[rows]}
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        saved["bytes"], saved["seen"] = 0, set()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()
        times.append(time.perf_counter() - start)
    print(json.dumps({"step_ms": 1000 * statistics.median(times[skip:]), "stored": saved["bytes"]}))


def torch_run(mode, weights, data, steps, tuning, model_name="gpt", batch=B, skip=3):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-worker", mode, weights, data,
                          str(steps), model_name, str(batch), str(skip)],
                         capture_output=True, text=True, env=environment(tuning, 2), check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def tune_torch(weights, data):
    """The fastest (allocator, OMP wait policy) of a short no-checkpoint run."""
    best = None
    for allocator in ALLOCATORS:
        for wait in ("active", "passive"):
            ms = torch_run("none", weights, data, 8, (allocator, wait))["step_ms"]
            print(f"  tuning PyTorch: {allocator}, OMP_WAIT_POLICY={wait}: {ms:.1f} ms/step")
            if best is None or ms < best[0]:
                best = (ms, (allocator, wait))
    return best[1], ", ".join(best[1])


# ---- the comparison ----

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trainc")
    ap.add_argument("work")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    nn = model_file(work)
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(1)
    for name in ("tokens", "targets"):
        np.save(f"{data}/{name}.npy", rng.integers(0, V, (1024, T), dtype=np.int32))
    trainc = os.path.abspath(args.trainc)
    weights = os.path.join(work, "init.safetensors")
    subprocess.run([trainc, "build", nn, "-o", os.path.join(work, "init")], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([os.path.join(work, "init"), "--data", data, "--steps", "0", "--save", weights], check=True,
                   stdout=subprocess.DEVNULL)

    wait_for_quiet(args.force)
    torch_env, torch_tuning = tune_torch(weights, data)
    torch_block = torch_run("block", weights, data, 5, torch_env)["stored"]

    whole = ["--loss-head", "whole"]
    off_whole = plan(trainc, nn, whole)
    bf16 = ["--compress", "bf16"]
    plans = [("off, whole head", whole + ["--policy", "off"]), ("off", ["--policy", "off"]),
             ("all", ["--policy", "all"]), ("off, bf16", bf16 + ["--policy", "off"])]
    for head_name, head in (("", []), (", whole head", whole), (", bf16", bf16)):
        top = plan(trainc, nn, head)["total"]
        for what, target in (("PyTorch per-block's stored", torch_block),
                             ("half of off (whole head)'s stored", off_whole["stored"] // 2)):
            budget, _ = budget_for(trainc, nn, head, target, top)
            if budget:
                plans.append((f"budget {budget}{head_name} (at {what})", head + ["--budget", budget]))
    built = []
    for i, (name, flags) in enumerate(plans):
        binary = os.path.join(work, f"plan{i}")
        subprocess.run([trainc, "build", nn, "-o", binary] + flags, check=True, stdout=subprocess.DEVNULL)
        built.append((name, flags, binary, plan(trainc, nn, flags)))

    trainc_ms = {name: [] for name, *_ in built}
    torch_ms = {"none": [], "block": []}
    torch_stored = {}
    for r in range(args.runs):
        for name, _, binary, _ in built:
            trainc_ms[name].append(trainc_step_ms(binary, data, args.steps))
        for mode in torch_ms:
            res = torch_run(mode, weights, data, args.steps, torch_env)
            torch_ms[mode].append(res["step_ms"])
            torch_stored[mode] = res["stored"]
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")
    print(f"PyTorch {__import__('torch').__version__}, environment: {torch_tuning}")
    print(f"{'plan':58s} {'stored MiB':>10s} {'step ms':>9s} {'range':>13s} {'overhead':>9s} {'predicted':>9s}")
    base = {"": statistics.median(trainc_ms["off"]),
            "whole": statistics.median(trainc_ms["off, whole head"])}
    for name, flags, _, p in built:
        ms = statistics.median(trainc_ms[name])
        own = base["whole" if "whole" in flags else ""]
        print(f"trainc {name:51s} {p['stored'] / MIB:10.1f} {ms:9.1f} {min(trainc_ms[name]):6.1f}-"
              f"{max(trainc_ms[name]):6.1f} {100 * (ms / own - 1):+8.1f}% {100 * p['predicted']:+8.1f}%")
    none = statistics.median(torch_ms["none"])
    for mode in torch_ms:
        ms = statistics.median(torch_ms[mode])
        print(f"PyTorch {mode:50s} {torch_stored[mode] / MIB:10.1f} {ms:9.1f} {min(torch_ms[mode]):6.1f}-"
              f"{max(torch_ms[mode]):6.1f} {100 * (ms / none - 1):+8.1f}%")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        torch_worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6], int(sys.argv[7]),
                     int(sys.argv[8]))
    else:
        main()
