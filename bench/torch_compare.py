"""trainc against PyTorch: the same model, weights, data and optimizer,
training step time and peak RSS. Run by bench/torch_compare.sh.

For each model, both implementations train from the trainer's seeded initial
weights on the same .npy data held in memory, drawing shuffled batches, with
the train block's AdamW and schedule (PyTorch: tests/torch/models.py and
torch.optim.AdamW). A step is: gather the batch, forward, backward, update.

  step time  the median over the timed steps of one run (the first WARMUP
             steps are left out); trainc's from its JSON Lines log with
             --log-every 1 (`examples_per_s` covers only the time inside the
             step), PyTorch's from time.perf_counter around each step.
  peak RSS   the process's maximum resident set size (/usr/bin/time's %M),
             dataset included.

Runs are interleaved — trainc, torch, trainc, torch, ... for each
configuration — so that load from other work on the machine hits both; the
figure of a model is the median over the runs.

Configurations (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset in both, as
for every benchmark here; the machine sets them to a slower sgemm kernel):
  shipped  PyTorch's defaults
  tuned    torch.set_num_threads(2), OMP_WAIT_POLICY=passive,
           MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_=17179869184;
           the trainc trainer runs in the same environment.

usage: torch_compare.py TRAINC WORKDIR [--runs N] [--models a,b] [--configs shipped,tuned]
       torch_compare.py --worker MODEL DATADIR W0 HELP STEPS CONFIG   (one PyTorch run)"""
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

WARMUP = 3

# name: (model file, {text: replacement} applied to it, examples in the
#        dataset (None: Fashion-MNIST's 60,000), optimizer steps per run,
#        keyword arguments of the PyTorch model (the file's dropout))
MODELS = {
    "fashion_mlp": ("examples/fashion_mlp.nn", {}, None, 300, {}),
    "fashion_cnn": ("examples/fashion_cnn.nn", {}, None, 40, {"dropout": 0.25}),
    "deep_mlp": ("examples/deep_mlp.nn", {}, 2048, 15, {}),
    # gpt.nn at vocabulary 8192, context 128, width 256, 4 layers, 4 heads, batch 8
    "gpt": ("examples/gpt.nn", {"const VOCAB = 256": "const VOCAB = 8192", "const T = 64": "const T = 128",
                                "const D = 128": "const D = 256", "batch 32": "batch 8"},
            1024, 15, {"dropout": 0.1}),
}

TUNED_ENV = {"OMP_WAIT_POLICY": "passive", "MALLOC_MMAP_MAX_": "0",
             "MALLOC_TRIM_THRESHOLD_": "17179869184"}


def environment(config):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    if config == "tuned":
        env.update(TUNED_ENV)
    return env


# ---- data ----

def read_idx_gz(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * rank).reshape(dims)


def prepare_data(model_name, weights, out, examples):
    """The model's training data as .npy files in `out`."""
    os.makedirs(out, exist_ok=True)
    if examples is None:
        src = "/usr/share/datasets/fashion-mnist"
        arrays = {"image": read_idx_gz(f"{src}/train-images-idx3-ubyte.gz").reshape(-1, 784),
                  "label": read_idx_gz(f"{src}/train-labels-idx1-ubyte.gz").astype(np.int32)}
    else:
        import safetensors_np
        from models import MODELS as TORCH_MODELS
        w, _ = safetensors_np.read(weights)
        arrays = TORCH_MODELS[model_name](w).make_data(np.random.default_rng(1), examples)
    for k, v in arrays.items():
        np.save(os.path.join(out, k + ".npy"), v)


# ---- one PyTorch run (a separate process, so its RSS is its own) ----

def worker(model_name, data_dir, w0, help_path, steps, config):
    import torch
    import parity
    if config == "tuned":
        torch.set_num_threads(2)
    model, _ = parity.load_model(model_name, w0, **MODELS[model_name][4])
    data = parity.load_batch(model, data_dir)
    n = next(iter(data.values())).shape[0]
    with open(help_path) as f:
        help_text = f.read()
    adamw, (kind, warmup, min_lr), clip = parity.compiled_adamw(help_text)
    batch = int(help_text.split("; B = ")[1].split(")")[0])
    params = dict(model.named_parameters())
    groups = [{"params": [p for p in params.values() if p.dim() >= 2]},
              {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, **adamw)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: parity.schedule_factor(kind, warmup, min_lr / adamw["lr"], s, steps))
    gen = torch.Generator().manual_seed(0)
    perm, pos, times = torch.randperm(n, generator=gen), 0, []
    for _ in range(steps):
        t0 = time.perf_counter()
        if pos + batch > n:
            perm, pos = torch.randperm(n, generator=gen), 0
        rows = perm[pos:pos + batch]
        pos += batch
        b = {k: v.index_select(0, rows) for k, v in data.items()}
        opt.zero_grad()
        loss, _ = model(b)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"step_s": statistics.median(times[WARMUP:]), "loss": loss.item(),
                      "threads": torch.get_num_threads()}))


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
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--configs", default="shipped,tuned")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    results = []
    print(f"load average before: {os.getloadavg()}", flush=True)
    for name in args.models.split(","):
        results.append(compare(args, name))
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print_table(results)


def build(args, name):
    source, edits, examples, steps, _ = MODELS[name]
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
    prepare_data(name, w0, f"{d}/data", examples)
    return d, trainer, w0, help_path, batch, steps


def compare(args, name):
    d, trainer, w0, help_path, batch, steps = build(args, name)
    runs = {c: {"trainc": [], "torch": []} for c in args.configs.split(",")}
    for r in range(args.runs):
        for config, rec in runs.items():
            env = environment(config)
            _, rss = child_run([trainer, "--data", f"{d}/data", "--init", w0, "--steps", str(steps),
                                "--log", f"{d}/log.jsonl", "--log-every", "1", "--quiet"], env, d)
            with open(f"{d}/log.jsonl") as f:
                log = [json.loads(line) for line in f if "examples_per_s" in line]
            rec["trainc"].append({"step_s": statistics.median(batch / r["examples_per_s"]
                                                              for r in log[WARMUP:]),
                                  "loss": log[-1]["loss"], "rss_mib": rss})
            out, rss = child_run([sys.executable, __file__, "--worker", name, f"{d}/data", w0,
                                  help_path, str(steps), config], env, d)
            rec["torch"].append(dict(json.loads(out), rss_mib=rss))
            print(f"{name} {config} run {r + 1}: " + ", ".join(
                f"{impl} {x[-1]['step_s'] * 1e3:.2f} ms/step {x[-1]['rss_mib']:.0f} MiB "
                f"(last loss {x[-1]['loss']:.4f})" for impl, x in rec.items()), flush=True)
    return {"model": name, "batch": batch, "steps": steps, "runs": runs,
            "load_average_after": os.getloadavg()}


def print_table(results):
    print("load averages after each model: " +
          ", ".join(f"{r['model']} {r['load_average_after'][0]:.1f}" for r in results))
    print("\n| model | config | trainc ms/step | PyTorch ms/step | speed-up | trainc peak RSS | "
          "PyTorch peak RSS |\n|---|---|---|---|---|---|---|")
    for res in results:
        for config, rec in res["runs"].items():
            t = statistics.median(x["step_s"] for x in rec["trainc"]) * 1e3
            p = statistics.median(x["step_s"] for x in rec["torch"]) * 1e3
            tr = statistics.median(x["rss_mib"] for x in rec["trainc"])
            pr = statistics.median(x["rss_mib"] for x in rec["torch"])
            print(f"| {res['model']} (B={res['batch']}) | {config} | {t:.2f} | {p:.2f} | "
                  f"{p / t:.2f}x | {tr:.0f} MiB | {pr:.0f} MiB |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:6], int(sys.argv[6]), sys.argv[7])
    else:
        main()
