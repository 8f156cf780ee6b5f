"""trainc against PyTorch: the same model, weights, data and optimizer,
training step time and peak RSS. Run by bench/torch_compare.sh.

The PyTorch side is bench/torch_experts.py: the models as a PyTorch expert
writes them (fused q/k/v, F.linear for the tied head, nn.LayerNorm,
F.cross_entropy, AdamW foreach, zero_grad(set_to_none=True)). Neither side
has dropout in the timed runs (it is edited out of the model files). Both
start from the trainer's seeded initial weights and train on the same .npy
data held in memory, drawing shuffled batches, with the train block's AdamW,
schedule and clipping. A step is: gather the batch, forward, backward, clip,
update.

  step time  the median over the timed steps of one run (the first WARMUP
             steps are left out); trainc's from its JSON Lines log with
             --log-every 1 (`examples_per_s` covers only the time inside the
             step), PyTorch's from time.perf_counter around each step.
  peak RSS   the process's maximum resident set size (/usr/bin/time's %M),
             dataset included.

PyTorch runs in each BLAS configuration (Debian's two OpenBLAS builds, chosen
per process with LD_LIBRARY_PATH), always with torch.set_num_threads(N) and
OMP_WAIT_POLICY=passive; the faster one is the anchor of the ratio. trainc
runs as built, with --threads N; N is --threads (default 2) on both sides.
Runs alternate trainc, torch (each configuration), trainc, ...
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset on both sides (the machine
sets them to a slower sgemm kernel). The load average must be below 0.5 at the
start (--force runs anyway and says so); it is printed before and after.

usage: torch_compare.py TRAINC WORKDIR [--runs N] [--models a,b] [--blas pthread,openmp]
                        [--threads N] [--force]
       torch_compare.py --worker MODEL DATADIR W0 HELP STEPS THREADS   (one PyTorch run)"""
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

BLAS_DIRS = {"pthread": "/usr/lib/x86_64-linux-gnu/openblas-pthread",
             "openmp": "/usr/lib/x86_64-linux-gnu/openblas-openmp"}
TORCH_ENV = {"OMP_WAIT_POLICY": "passive"}


def environment(blas=None):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    if blas:
        env.update(TORCH_ENV, LD_LIBRARY_PATH=BLAS_DIRS[blas])
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

def worker(model_name, data_dir, w0, help_path, steps, threads):
    import torch
    import parity
    import safetensors_np
    import torch_experts
    torch.set_num_threads(threads)
    weights, _ = safetensors_np.read(w0)
    model = torch_experts.build(model_name, weights)
    data = {f[:-4]: torch.from_numpy(np.load(os.path.join(data_dir, f)))
            for f in os.listdir(data_dir) if f.endswith(".npy")}
    n = next(iter(data.values())).shape[0]
    with open(help_path) as f:
        help_text = f.read()
    adamw, (kind, warmup, min_lr), clip = parity.compiled_adamw(help_text)
    batch = int(help_text.split("; B = ")[1].split(")")[0])
    opt = torch.optim.AdamW(torch_experts.param_groups(model), foreach=True, **adamw)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: parity.schedule_factor(kind, warmup, min_lr / adamw["lr"], s, steps))
    gen = torch.Generator().manual_seed(0)
    perm, pos, times, losses = torch.randperm(n, generator=gen), 0, [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        if pos + batch > n:
            perm, pos = torch.randperm(n, generator=gen), 0
        rows = perm[pos:pos + batch]
        pos += batch
        b = {k: v.index_select(0, rows) for k, v in data.items()}
        opt.zero_grad(set_to_none=True)
        loss = model(b)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    print(json.dumps({"step_s": statistics.median(times[WARMUP:]), "loss": losses[-1],
                      "first_loss": losses[0], "threads": torch.get_num_threads()}))


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
    p.add_argument("--blas", default=",".join(BLAS_DIRS))
    p.add_argument("--threads", type=int, default=2, help="threads of both sides (default 2)")
    p.add_argument("--force", action="store_true", help="run even when the machine is not quiet")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    if load[0] >= 0.5 and not args.force:
        sys.exit("torch_compare: the machine is not quiet (1-minute load average >= 0.5); "
                 "stop other work or pass --force (the figures are then not worth much)")
    results = [compare(args, name) for name in args.models.split(",")]
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


def trainc_run(d, trainer, w0, batch, steps, threads):
    _, rss = child_run([trainer, "--data", f"{d}/data", "--init", w0, "--steps", str(steps),
                        "--log", f"{d}/log.jsonl", "--log-every", "1", "--quiet",
                        "--threads", str(threads)], environment(), d)
    with open(f"{d}/log.jsonl") as f:
        log = [json.loads(line) for line in f if "examples_per_s" in line]
    return {"step_s": statistics.median(batch / r["examples_per_s"] for r in log[WARMUP:]),
            "loss": log[-1]["loss"], "first_loss": log[0]["loss"], "rss_mib": rss}


def compare(args, name):
    d, trainer, w0, help_path, batch, steps = build(args, name)
    sides = ["trainc"] + [f"torch-{b}" for b in args.blas.split(",")]
    runs = {side: [] for side in sides}
    for r in range(args.runs):
        for side in sides:
            if side == "trainc":
                runs[side].append(trainc_run(d, trainer, w0, batch, steps, args.threads))
                continue
            out, rss = child_run([sys.executable, __file__, "--worker", name, f"{d}/data", w0,
                                  help_path, str(steps), str(args.threads)], environment(side[6:]), d)
            runs[side].append(dict(json.loads(out), rss_mib=rss))
        print(f"{name} run {r + 1}: " + ", ".join(
            f"{side} {x[-1]['step_s'] * 1e3:.2f} ms/step {x[-1]['rss_mib']:.0f} MiB "
            f"(loss {x[-1]['first_loss']:.4f} -> {x[-1]['loss']:.4f})" for side, x in runs.items()),
            flush=True)
    return {"model": name, "batch": batch, "steps": steps, "runs": runs,
            "load_average_after": os.getloadavg()}


def summary(xs, key):
    v = sorted(x[key] for x in xs)
    return statistics.median(v), v[0], v[-1]


def print_table(results):
    print("\n| model | trainc ms/step (range) | PyTorch ms/step (range), best BLAS | speed-up | "
          "trainc peak RSS | PyTorch peak RSS | load after |\n|---|---|---|---|---|---|---|")
    for res in results:
        t = summary(res["runs"]["trainc"], "step_s")
        torch_sides = [s for s in res["runs"] if s != "trainc"]
        best = min(torch_sides, key=lambda s: summary(res["runs"][s], "step_s")[0])
        p = summary(res["runs"][best], "step_s")
        tr = summary(res["runs"]["trainc"], "rss_mib")[0]
        pr = summary(res["runs"][best], "rss_mib")[0]
        others = ", ".join(f"{s[6:]} {summary(res['runs'][s], 'step_s')[0] * 1e3:.1f}"
                           for s in torch_sides if s != best)
        print(f"| {res['model']} (B={res['batch']}) | {t[0] * 1e3:.2f} ({t[1] * 1e3:.2f}-{t[2] * 1e3:.2f}) | "
              f"{p[0] * 1e3:.2f} ({p[1] * 1e3:.2f}-{p[2] * 1e3:.2f}), {best[6:]}"
              f"{' (' + others + ')' if others else ''} | {p[0] / t[0]:.2f}x | {tr:.0f} MiB | {pr:.0f} MiB | "
              f"{res['load_average_after'][0]:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:6], int(sys.argv[6]), int(sys.argv[7]))
    else:
        main()
