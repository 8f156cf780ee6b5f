"""trainc against upstream PyTorch 2 (eager and torch.compile) and JAX: the
same model, weights, data and optimizer, training step time and peak RSS, in
fp32 and in bf16. Run by bench/torch_compare.sh, with the peers' virtual
environment of scripts/install-peers.

The PyTorch side is bench/torch_experts.py: the models as a PyTorch expert
writes them (fused q/k/v, scaled_dot_product_attention, F.linear for the tied
head, nn.LayerNorm, F.cross_entropy, AdamW foreach,
zero_grad(set_to_none=True)); `compile` is the same model under
torch.compile (Inductor, default mode, static shapes). In bf16, PyTorch runs
under torch.autocast("cpu", dtype=torch.bfloat16) and trainc with
--precision bf16. The JAX side (the GPTs) is bench/jax_experts.py: one
jax.jit step with optax's AdamW; in bf16, as JAX's mixed-precision users
write it (jmp's policy, Flax's dtype/param_dtype), fp32 parameters and
optimizer state with bf16 compute (matmuls, activations) and fp32
LayerNorms, softmax and loss. Neither side has dropout in the timed runs (it
is edited out of the model files). All start from the trainer's seeded
initial weights and train on the same .npy data held in memory, drawing
shuffled batches, with the train block's AdamW, schedule and clipping. A step
is: gather the batch, forward, backward, clip, update.

  step time  the median over the timed steps of one run (the first WARMUP
             steps, torch.compile's and jax.jit's compilation among them, are
             left out); trainc's from its JSON Lines log with --log-every 1
             (`examples_per_s` covers only the time inside the step), the
             peers' from time.perf_counter around each step (after
             loss.item() / block_until_ready, so the step has finished).
  peak RSS   the process's maximum resident set size (/usr/bin/time's %M),
             dataset included.

Tuning, per PyTorch's CPU performance guide: before the timed rounds, a short
eager run of each model in each process environment — the allocator (glibc
malloc kept from trimming and mmapping, so freed memory is reused instead of
returned to the kernel; jemalloc with the guide's MALLOC_CONF; tcmalloc), each
with OMP_WAIT_POLICY active and passive — and the fastest is the environment
of every PyTorch and JAX run of that model and precision (the sweep is
printed and kept in results.json). Both sides run N threads (--threads,
default 2): torch.set_num_threads(N) and OMP_NUM_THREADS=N; trainc --threads
N; XLA's CPU thread pool has the machine's cores. Rounds alternate trainc,
eager, compile, jax, trainc, ... The ratio is against the best peer.
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset on every side. The load
average must be below 0.5 at the start (--force runs anyway and says so); it
is printed before and after.

usage: torch_compare.py TRAINC WORKDIR [--runs N] [--models a,b] [--precision fp32,bf16]
                        [--peers eager,compile,jax] [--threads N] [--force]
       torch_compare.py --worker PEER PRECISION MODEL DATADIR W0 HELP STEPS THREADS
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "torch"))
sys.path.insert(0, HERE)

WARMUP = 3

NO_ATTN_DROPOUT = {"dropout = 0.1": "dropout = 0", "dropout(proj, 0.1)": "proj"}
GPT_SMALL = dict(NO_ATTN_DROPOUT, **{"const VOCAB = 256": "const VOCAB = 8192", "const T = 64": "const T = 128",
                                     "const D = 128": "const D = 256", "batch 32": "batch 8"})

# name: (model file, {text: replacement} applied to it, the data: None for
#        Fashion-MNIST's 60,000 images, else (examples, tokens per example or
#        0 for deep_mlp's f32 rows), optimizer steps per run)
MODELS = {
    "fashion_mlp": ("examples/fashion_mlp.nn", {}, None, 300),
    "fashion_cnn": ("examples/fashion_cnn.nn", {"dropout(flatten(pool2), 0.25)": "flatten(pool2)"}, None, 40),
    "deep_mlp": ("examples/deep_mlp.nn", {}, (2048, 0), 15),
    # gpt.nn at vocabulary 8192, context 128, width 256, 4 layers, 4 heads, batch 8
    "gpt": ("examples/gpt.nn", GPT_SMALL, (1024, 128), 15),
    # GPT-2 124M at B = 4, T = 64, AdamW, clip 1 (the timing point of llm.c's train_gpt2.c)
    "gpt124m": ("examples/gpt124m.nn", NO_ATTN_DROPOUT, (64, 64), 8),
}

LIB = "/usr/lib/x86_64-linux-gnu"
ALLOCATORS = {
    # glibc: no mmap for large blocks and no trimming, so freed tensors' pages are reused
    "glibc": {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)},
    "jemalloc": {"LD_PRELOAD": f"{LIB}/libjemalloc.so.2",
                 "MALLOC_CONF": "oversize_threshold:1,background_thread:true,metadata_thp:auto,"
                                "dirty_decay_ms:-1,muzzy_decay_ms:-1"},
    "tcmalloc": {"LD_PRELOAD": f"{LIB}/libtcmalloc.so.4"},
}
WAIT_POLICIES = ("active", "passive")
TUNE_STEPS = 8
PEERS = ("eager", "compile", "jax")
GPTS = ("gpt", "gpt124m")


def environment(tuning=None, threads=None):
    """The process environment: the machine's, less the OpenBLAS overrides, plus
    a peer's tuning ((allocator, OMP wait policy))."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    if tuning:
        allocator, wait = tuning
        env.update(ALLOCATORS[allocator], OMP_WAIT_POLICY=wait, OMP_NUM_THREADS=str(threads))
    return env


# ---- data ----

def read_idx_gz(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * rank).reshape(dims)


def prepare_data(spec, weights, out):
    """The model's training data as .npy files in `out`: Fashion-MNIST, or
    random rows / token ids (a step's time does not depend on the values)."""
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1)
    if spec is None:
        src = "/usr/share/datasets/fashion-mnist"
        arrays = {"image": read_idx_gz(f"{src}/train-images-idx3-ubyte.gz").reshape(-1, 784),
                  "label": read_idx_gz(f"{src}/train-labels-idx1-ubyte.gz").astype(np.int32)}
    elif spec[1] == 0:
        n, width = spec[0], weights["layer.0.linear.weight"].shape[1]
        arrays = {"x": rng.standard_normal((n, width), dtype=np.float32),
                  "label": rng.integers(0, weights["logits.weight"].shape[0], n, dtype=np.int32)}
    else:
        vocab = weights["wte"].shape[0]
        arrays = {k: rng.integers(0, vocab, spec, dtype=np.int32) for k in ("tokens", "targets")}
    for k, v in arrays.items():
        np.save(os.path.join(out, k + ".npy"), v)


# ---- one PyTorch run (a separate process, so its RSS is its own) ----

def worker(peer, precision, model_name, data_dir, w0, help_path, steps, threads):
    import parity
    import safetensors_np
    weights, _ = safetensors_np.read(w0)
    data = {f[:-4]: np.load(os.path.join(data_dir, f))
            for f in os.listdir(data_dir) if f.endswith(".npy")}
    n = next(iter(data.values())).shape[0]
    with open(help_path) as f:
        help_text = f.read()
    adamw, schedule, clip = parity.compiled_adamw(help_text)
    batch = int(help_text.split("; B = ")[1].split(")")[0])
    run = jax_steps if peer == "jax" else torch_steps
    times, losses = run(peer, precision, model_name, weights, data, n, batch, adamw, schedule,
                        clip, steps, threads)
    print(json.dumps({"step_s": statistics.median(times[WARMUP:]), "loss": losses[-1],
                      "first_loss": losses[0], "threads": threads}))


def batches(n, batch, steps):
    """The rows of each step's batch: shuffled epochs, as the trainer draws them."""
    rng, perm, pos = np.random.default_rng(0), None, n
    for _ in range(steps):
        if pos + batch > n:
            perm, pos = rng.permutation(n), 0
        yield perm[pos:pos + batch]
        pos += batch


def torch_steps(peer, precision, model_name, weights, data, n, batch, adamw, schedule, clip,
                steps, threads):
    import contextlib
    import torch
    import parity
    import torch_experts
    torch.set_num_threads(threads)
    model = torch_experts.build(model_name, weights)
    opt = torch.optim.AdamW(torch_experts.param_groups(model), foreach=True, **adamw)
    kind, warmup, min_lr = schedule
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: parity.schedule_factor(kind, warmup, min_lr / adamw["lr"], s, steps))
    forward = torch.compile(model, dynamic=False) if peer == "compile" else model
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if precision == "bf16" \
        else contextlib.nullcontext
    tensors = {k: torch.from_numpy(v) for k, v in data.items()}
    times, losses = [], []
    for rows in batches(n, batch, steps):
        t0 = time.perf_counter()
        index = torch.from_numpy(rows)
        b = {k: v.index_select(0, index) for k, v in tensors.items()}
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = forward(b)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
    return times, losses


def jax_steps(peer, precision, model_name, weights, data, n, batch, adamw, schedule, clip,
              steps, threads):
    import jax_experts
    heads = {"gpt": 4, "gpt124m": 12}[model_name]
    step, params, opt_state = jax_experts.step_fn(weights, heads, adamw, schedule, clip, steps,
                                                  precision)
    times, losses = [], []
    for rows in batches(n, batch, steps):
        t0 = time.perf_counter()
        params, opt_state, loss = step(params, opt_state, data["tokens"][rows], data["targets"][rows])
        losses.append(float(loss))
        times.append(time.perf_counter() - t0)
    return times, losses


# ---- the comparison ----

def child_run(cmd, env, work):
    """Runs cmd to the end; returns (stdout, peak RSS of the process in MiB).
    The RSS comes from /usr/bin/time, a small process: ru_maxrss of a child
    of this one would also count this process's own RSS at the fork."""
    rss_file = os.path.join(work, "rss.txt")
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file] + cmd, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"torch_compare: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    with open(rss_file) as f:
        return proc.stdout, int(f.read().split()[-1]) / 1024.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trainc")
    p.add_argument("work")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--precision", default="fp32,bf16")
    p.add_argument("--peers", default=",".join(PEERS))
    p.add_argument("--threads", type=int, default=2, help="threads of every side (default 2)")
    p.add_argument("--force", action="store_true", help="run even when the machine is not quiet")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    if load[0] >= 0.5 and not args.force:
        sys.exit("torch_compare: the machine is not quiet (1-minute load average >= 0.5); "
                 "stop other work or pass --force (the figures are then not worth much)")
    results = [compare(args, name, precision) for name in args.models.split(",")
               for precision in args.precision.split(",")]
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print_table(results)


def build(args, name):
    source, edits, data_spec, steps = MODELS[name]
    d = os.path.join(args.work, name)
    os.makedirs(d, exist_ok=True)
    trainer, w0, help_path = f"{d}/trainer", f"{d}/w0.safetensors", f"{d}/help.txt"
    with open(os.path.join(ROOT, source)) as f:
        text = f.read()
    for old, new in edits.items():
        if old not in text:
            sys.exit(f"torch_compare: {source} has no '{old}' to replace")
        text = text.replace(old, new)
    with open(f"{d}/{name}.nn", "w") as f:
        f.write(text)
    subprocess.run([args.trainc, "build", f"{d}/{name}.nn", "-o", trainer], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([trainer, "--steps", "0", "--save", w0, "--quiet"], check=True)
    with open(help_path, "w") as f:
        subprocess.run([trainer, "--help"], check=True, stdout=f)
    with open(help_path) as f:
        batch = int(f.read().split("; B = ")[1].split(")")[0])
    import safetensors_np
    prepare_data(data_spec, safetensors_np.read(w0)[0], f"{d}/data")
    return d, trainer, w0, help_path, batch, steps


def trainc_run(d, trainer, w0, batch, steps, threads, precision):
    _, rss = child_run([trainer, "--data", f"{d}/data", "--init", w0, "--steps", str(steps),
                        "--log", f"{d}/log.jsonl", "--log-every", "1", "--quiet",
                        "--threads", str(threads), "--precision", precision], environment(), d)
    with open(f"{d}/log.jsonl") as f:
        log = [json.loads(line) for line in f if "examples_per_s" in line]
    return {"step_s": statistics.median(batch / r["examples_per_s"] for r in log[WARMUP:]),
            "loss": log[-1]["loss"], "first_loss": log[0]["loss"], "rss_mib": rss}


def peer_run(peer, precision, name, d, w0, help_path, steps, threads, tuning):
    out, rss = child_run([sys.executable, __file__, "--worker", peer, precision, name, f"{d}/data",
                          w0, help_path, str(steps), str(threads)],
                         environment(tuning, threads), d)
    return dict(json.loads(out), rss_mib=rss)


def tune(args, name, precision, d, w0, help_path):
    """The fastest process environment of a short eager run, and every one tried."""
    tried = {}
    for allocator in ALLOCATORS:
        for wait in WAIT_POLICIES:
            r = peer_run("eager", precision, name, d, w0, help_path, TUNE_STEPS, args.threads,
                         (allocator, wait))
            tried[f"{allocator}/{wait}"] = r["step_s"]
    best = min(tried, key=tried.get)
    print(f"{name} {precision} tuning (eager ms/step): " +
          ", ".join(f"{k} {v * 1e3:.1f}" for k, v in tried.items()) + f" -> {best}", flush=True)
    return tuple(best.split("/")), tried


def compare(args, name, precision):
    d, trainer, w0, help_path, batch, steps = build(args, name)
    tuning, tried = tune(args, name, precision, d, w0, help_path)
    peers = [p for p in args.peers.split(",") if p != "jax" or name in GPTS]
    runs = {side: [] for side in ["trainc"] + peers}
    for r in range(args.runs):
        for side in runs:
            if side == "trainc":
                runs[side].append(trainc_run(d, trainer, w0, batch, steps, args.threads, precision))
            else:
                runs[side].append(peer_run(side, precision, name, d, w0, help_path, steps,
                                           args.threads, tuning))
        print(f"{name} {precision} run {r + 1}: " + ", ".join(
            f"{side} {x[-1]['step_s'] * 1e3:.2f} ms/step {x[-1]['rss_mib']:.0f} MiB "
            f"(loss {x[-1]['first_loss']:.4f} -> {x[-1]['loss']:.4f})" for side, x in runs.items()),
            flush=True)
    return {"model": name, "precision": precision, "batch": batch, "steps": steps,
            "tuning": "/".join(tuning), "tuning_sweep_s": tried, "runs": runs,
            "load_average_after": os.getloadavg()}


def summary(xs, key):
    v = sorted(x[key] for x in xs)
    return statistics.median(v), v[0], v[-1]


def print_table(results):
    print("\n| model | precision | trainc ms/step (range) | best peer ms/step (range) | others | "
          "speed-up vs best | trainc peak RSS | best peer peak RSS | peer env | load after |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
    for res in results:
        t = summary(res["runs"]["trainc"], "step_s")
        peers = [s for s in res["runs"] if s != "trainc"]
        best = min(peers, key=lambda s: summary(res["runs"][s], "step_s")[0])
        p = summary(res["runs"][best], "step_s")
        tr = summary(res["runs"]["trainc"], "rss_mib")[0]
        pr = summary(res["runs"][best], "rss_mib")[0]
        others = ", ".join(f"{s} {summary(res['runs'][s], 'step_s')[0] * 1e3:.1f}"
                           for s in peers if s != best)
        print(f"| {res['model']} (B={res['batch']}) | {res['precision']} | "
              f"{t[0] * 1e3:.2f} ({t[1] * 1e3:.2f}-{t[2] * 1e3:.2f}) | "
              f"{best} {p[0] * 1e3:.2f} ({p[1] * 1e3:.2f}-{p[2] * 1e3:.2f}) | {others} | "
              f"{p[0] / t[0]:.2f}x | {tr:.0f} MiB | {pr:.0f} MiB | {res['tuning']} | "
              f"{res['load_average_after'][0]:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:8], int(sys.argv[8]), int(sys.argv[9]))
    else:
        main()
