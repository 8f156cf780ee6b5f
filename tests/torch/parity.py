"""Compares a trainc trainer with the same model written in PyTorch
(models.py), on the same weights and the same data.

  parity.py data    MODEL WEIGHTS OUTDIR N SEED   random inputs for MODEL as .npy
  parity.py step    MODEL WEIGHTS DUMP DATADIR    one step: loss, predict, every gradient;
                                                  then the negative checks below
  parity.py train   MODEL HELP W0 W_FINAL LOG DATADIR
                                                  AdamW steps: every step's loss, final weights

DUMP is the trainer's `--dump-step` file (loss, predict, grad.<param>); the
data directory holds exactly one batch. The tensors checked are those of the
files: every parameter in WEIGHTS must have a gradient in DUMP and in torch,
and every tensor in DUMP must be one that is checked.

Negative checks (`step`), so that the comparison is shown to fail: it must
flag the dump's last gradient when noise of 1e-3 of its norm is added to it,
and when it is missing; and must flag something when PyTorch runs on weights
whose last matrix (the head) has noise of 1e-2 of its norm added.

PARITY_SAVED=bf16 (a trainer built with `--compress bf16`): PyTorch's
forward runs under saved_tensors_hooks that round what autograd saves to
bf16 as trainc stores it (pack_bf16); the step's negative checks then also
require the comparison against PyTorch without that rounding to fail, so
that the trainer is shown to have rounded.

Error of a tensor a against the reference b: ||a - b|| / max(||b||, TINY)
(Frobenius norms in float64), required below TOL = 1e-4.

Gradients that are zero in exact arithmetic: the bias of attention's keys
(softmax is unchanged when q.b is added to a whole row of scores) gets only
float32 rounding noise in both implementations (about 1e-9 of the gradient's
norm here), and noise has no relative error. A gradient tensor whose PyTorch
norm is below ZERO = 1e-6 of the norm of the whole PyTorch gradient counts as
zero: it passes when trainc's is below that bound too. AdamW turns such noise
into steps of up to lr in random directions, in both implementations
differently; so `train` does not compare the weights of a parameter whose
gradient counts as zero at the first step, and says so. Exit 0 when all
agree and every negative check is caught, 3 when not (the output names the
tensor or the check); 1 is an error (a bad file, a model that does not
load)."""
import contextlib
import io
import json
import math
import os
import re
import sys

import numpy as np
import torch

import safetensors_np
from models import MODELS

SAVED = os.environ.get("PARITY_SAVED", "f32")
TOL = 1e-4
TINY = 1e-30  # only guards the division: a zero reference needs an exact zero
ZERO = 1e-6  # of the whole gradient's norm: below it, a gradient is rounding noise
EXIT_MISMATCH = 3


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return math.inf
    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), TINY))


class Report:
    """Rows of a comparison, printed to `out`; `failed` names what disagrees."""

    def __init__(self, out=None):
        self.out = out or sys.stdout
        self.failed = []

    def row(self, name, shape, err, note=""):
        ok = err < TOL
        if not ok:
            self.failed.append(name)
        print(f"  {name:40s} {str(list(shape)):18s} rel err {err:.2e}  {'ok' if ok else 'FAIL'}"
              f"{'  ' + note if note else ''}", file=self.out)

    def gradient(self, name, mine, ref, total):
        """A gradient against PyTorch's; total: the norm of PyTorch's whole gradient."""
        bound = ZERO * total
        if np.linalg.norm(ref) > bound:
            self.row(name, ref.shape, rel_err(mine, ref))
            return
        ok = np.linalg.norm(np.asarray(mine, np.float64)) <= bound
        if not ok:
            self.failed.append(name)
        print(f"  {name:40s} {str(list(ref.shape)):18s} zero: norms {np.linalg.norm(mine):.1e} "
              f"and {np.linalg.norm(ref):.1e} vs bound {bound:.1e}  {'ok' if ok else 'FAIL'}",
              file=self.out)

    def missing(self, name, where):
        self.failed.append(name)
        print(f"  {name:40s} FAIL: {where}", file=self.out)

    def exit(self, what, extra_failures=0):
        n = len(self.failed) + extra_failures
        print(f"{what}: {'FAIL' if n else 'ok'} ({n} failed, TOL {TOL:g})")
        sys.exit(EXIT_MISMATCH if n else 0)


def model_class(name):
    """models.py's model `name`, or hf_models.py's for an hf_ name (which
    needs the transformers package)."""
    if name.startswith("hf_"):
        import hf_models
        return hf_models.MODELS[name]
    return MODELS[name]


def build_model(name, weights, **kwargs):
    """The PyTorch model holding `weights` ({name: array}, every one used)."""
    model = model_class(name)(weights, **kwargs)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    return model


def load_model(name, weights_path, **kwargs):
    weights, _ = safetensors_np.read(weights_path)
    return build_model(name, weights, **kwargs), weights


def load_batch(model, data_dir):
    """Every input the model reads, from DATADIR/<input>.npy, as tensors."""
    names = model.make_data(np.random.default_rng(0), 1).keys()
    return {k: torch.from_numpy(np.load(os.path.join(data_dir, k + ".npy"))) for k in names}


def cmd_data(name, weights_path, out_dir, n, seed):
    model, _ = load_model(name, weights_path)
    os.makedirs(out_dir, exist_ok=True)
    for k, v in model.make_data(np.random.default_rng(int(seed)), int(n)).items():
        np.save(os.path.join(out_dir, k + ".npy"), v)


# Saved values whose f32 bits lie within TIE_ULPS of a bf16 rounding tie:
# PyTorch's f32 and trainc's differ by an ulp or two (other summation
# orders), so such a value may round to either bf16 neighbour in trainc; the
# step comparison then tries PyTorch with some of them rounded the other way
# (cmd_step). TIES lists them as (saved tensor's number, flat index) as
# pack_bf16 meets them; FLIP names those to round the other way.
TIE_ULPS = 4
TIES, FLIP = [], set()


def pack_bf16(t):
    """What `--compress bf16` stores in bf16, as autograd saves it: every f32
    activation but log_softmax's output (cross_entropy's gradient reads it
    through an exponential, which trainc never stores rounded); parameters
    stay f32. Rounded to nearest even, as trc_round_bf16 (but FLIP)."""
    param = isinstance(t, torch.nn.Parameter) or isinstance(t._base, torch.nn.Parameter)
    if t.dtype != torch.float32 or param or type(t.grad_fn).__name__ == "LogSoftmaxBackward0":
        return t
    number = pack_bf16.count
    pack_bf16.count += 1
    rounded = t.detach().bfloat16().float().reshape(-1).clone()
    bits = t.detach().reshape(-1).view(torch.int32)
    low = (bits & 0xFFFF) - 0x8000
    for i in torch.nonzero(low.abs() <= TIE_ULPS).reshape(-1).tolist():
        TIES.append((number, i))
        if (number, i) in FLIP:  # the other neighbour: down if it rounded up, else up
            down = int(bits[i]) & ~0xFFFF
            up_was = int(rounded.view(torch.int32)[i]) != down
            rounded.view(torch.int32)[i] = down if up_was else down + 0x10000
    return rounded.reshape(t.shape)


pack_bf16.count = 0  # saved tensors packed since torch_step began


def saving(saved):
    """The context PyTorch's forward runs in: saved tensors as is (f32) or rounded (bf16)."""
    if saved == "bf16":
        return torch.autograd.graph.saved_tensors_hooks(pack_bf16, lambda t: t)
    return contextlib.nullcontext()


def torch_step(name, weights, batch, saved=SAVED, flip=()):
    """PyTorch's loss, predictions and gradients ({param: array or None});
    saved in bf16, with the ties of `flip` rounded the other way (TIES)."""
    TIES.clear()
    FLIP.clear()
    FLIP.update(flip)
    pack_bf16.count = 0
    model = build_model(name, weights)
    with saving(saved):
        loss, predict = model(batch)
    loss.backward()
    grads = {n: None if p.grad is None else p.grad.numpy() for n, p in model.named_parameters()}
    return loss.item(), predict.detach().numpy(), grads


def compare_step(weights, dump, ref, r):
    """trainc's dump against PyTorch's step `ref`, row by row into Report r."""
    loss, predict, grads = ref
    total = math.sqrt(sum(float(np.linalg.norm(g.astype(np.float64))) ** 2
                          for g in grads.values() if g is not None))
    checked = {"loss", "predict"}
    r.row("loss", [], rel_err(dump["loss"], loss))
    if "predict" in dump:
        r.row("predict", dump["predict"].shape, rel_err(dump["predict"], predict))
    else:
        r.missing("predict", "not in the dump")
    for pname in weights:  # every parameter of the weights file
        gname = "grad." + pname
        checked.add(gname)
        if gname not in dump:
            r.missing(gname, "not in the dump")
        elif grads[pname] is None:
            r.missing(gname, "PyTorch computed no gradient")
        else:
            r.gradient(gname, dump[gname], grads[pname], total)
    for extra in dump.keys() - checked:
        r.missing(extra, "in the dump but not a parameter of the weights file")


def with_noise(tensors, name, size):
    """A copy of {name: array} with seeded noise of `size` times tensor name's norm added."""
    t = tensors[name]
    noise = np.random.default_rng(0).standard_normal(t.shape)
    scale = size * max(np.linalg.norm(t), 1e-6) / np.linalg.norm(noise)
    return dict(tensors, **{name: (t + scale * noise).astype(t.dtype)})


def negative_checks(name, weights, dump, ref, batch):
    """The comparison must flag broken inputs; returns how many were not caught."""
    last = [k for k in dump if k.startswith("grad.")][-1]
    head = [k for k, v in weights.items() if v.ndim >= 2][-1]
    cases = [(f"{last} off by 1e-3", last, weights, with_noise(dump, last, 1e-3), ref),
             (f"{last} missing", last, weights, {k: v for k, v in dump.items() if k != last}, ref),
             (f"PyTorch on {head} off by 1e-2", None, weights, dump,
              torch_step(name, with_noise(weights, head, 1e-2), batch))]
    if SAVED == "bf16":
        cases.append(("PyTorch saving f32 (no rounding)", None, weights, dump,
                      torch_step(name, weights, batch, saved="f32")))
    missed = 0
    for what, expected, w, d, r in cases:
        report = Report(io.StringIO())
        compare_step(w, d, r, report)
        caught = report.failed and (expected is None or expected in report.failed)
        missed += not caught
        print(f"negative check, {what}: {'caught' if caught else 'NOT CAUGHT'} "
              f"({len(report.failed)} tensors flagged)")
    return missed


def rounded_as_trainc(name, weights, dump, ref, batch, most=10):
    """Saved in bf16, a value at a tie (TIES) may round either way: the first
    reference that agrees with the dump, trying every choice of the ties
    (at most `most` of them) rounded the other way; else `ref` as it was."""
    ties = list(TIES)
    if SAVED != "bf16" or not ties or matches(weights, dump, ref):
        return ref
    if len(ties) > most:
        print(f"  {len(ties)} saved values within {TIE_ULPS} ulps of a bf16 tie: too many to try")
        return ref
    for choice in range(1, 1 << len(ties)):
        flip = {tie for k, tie in enumerate(ties) if choice >> k & 1}
        other = torch_step(name, weights, batch, flip=flip)
        if matches(weights, dump, other):
            print(f"  {len(ties)} saved values within {TIE_ULPS} ulps of a bf16 tie; "
                  f"PyTorch agrees with {len(flip)} of them rounded the other way")
            return other
    return ref


def matches(weights, dump, ref):
    report = Report(io.StringIO())
    compare_step(weights, dump, ref, report)
    return not report.failed


def cmd_step(name, weights_path, dump_path, data_dir):
    model, weights = load_model(name, weights_path)
    dump, _ = safetensors_np.read(dump_path)
    batch = load_batch(model, data_dir)
    ref = torch_step(name, weights, batch)
    print(f"{name}: one step, trainc (--dump-step) vs PyTorch {torch.__version__}, saved {SAVED}")
    ref = rounded_as_trainc(name, weights, dump, ref, batch)
    r = Report()
    compare_step(weights, dump, ref, r)
    r.exit("step", negative_checks(name, weights, dump, ref, batch))


def zero_gradients(params):
    """Names of the parameters whose gradient counts as zero (see ZERO)."""
    grads = {n: p.grad.numpy().astype(np.float64) for n, p in params.items() if p.grad is not None}
    total = math.sqrt(sum(float(np.linalg.norm(g)) ** 2 for g in grads.values()))
    return {n for n, g in grads.items() if np.linalg.norm(g) <= ZERO * total}


def compiled_adamw(help_text):
    """The trainer's compiled AdamW, schedule and clip norm (0: none), from the
    training settings of its --help text (one `  --flag-name VALUES value help`
    line per setting, values exact)."""
    table = help_text.split("training settings", 1)[-1]
    cfg = {k.replace("-", "_"): v for k, v in re.findall(r"^  --([\w-]+) \S+ +(\S+)", table, re.M)}
    if cfg.get("optimizer") != "adamw" or "schedule" not in cfg:
        sys.exit("parity.py: the trainer's --help lists no adamw optimizer and schedule")
    num = lambda k: float(cfg[k])
    return dict(lr=num("lr"), betas=(num("beta1"), num("beta2")), eps=num("eps"),
                weight_decay=num("weight_decay")), \
        (cfg["schedule"], int(cfg["warmup"]), num("min_lr")), num("clip_norm")


def schedule_factor(kind, warmup, min_ratio, step, total):
    """Hugging Face's get_{constant,linear,cosine}_schedule_with_warmup, with a floor."""
    if step < warmup:
        return step / warmup
    if kind == "constant" or total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / (total - warmup))
    f = 1.0 - progress if kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))
    return min_ratio + (1.0 - min_ratio) * f


def trainer_losses(log_path):
    with open(log_path) as f:
        records = [json.loads(line) for line in f]
    return [rec["loss"] for rec in records if "loss" in rec]


def cmd_train(name, help_path, w0_path, final_path, log_path, data_dir):
    with open(help_path) as f:
        adamw, (kind, warmup, min_lr), clip = compiled_adamw(f.read())
    model, weights = load_model(name, w0_path)
    final, _ = safetensors_np.read(final_path)
    losses = trainer_losses(log_path)
    steps = len(losses)
    params = dict(model.named_parameters())
    # Weight decay on weights (rank >= 2), not on biases or norm scales.
    groups = [{"params": [p for p in params.values() if p.dim() >= 2]},
              {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, **adamw)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: schedule_factor(kind, warmup, min_lr / adamw["lr"], s, steps))
    batch = load_batch(model, data_dir)
    r = Report()
    print(f"{name}: {steps} AdamW steps {adamw}, schedule {kind}(warmup={warmup}), clip {clip}, "
          f"trainc vs PyTorch {torch.__version__}")
    for step in range(steps):
        opt.zero_grad()
        with saving(SAVED):
            loss, _ = model(batch)
        loss.backward()
        if step == 0:
            noise_driven = zero_gradients(params)
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        r.row(f"loss at step {step + 1}", [], rel_err(losses[step], loss.item()),
              f"{losses[step]:.6f}")
    for pname, w in weights.items():
        if pname not in final:
            r.missing(pname, "not in the trainer's final weights")
            continue
        mine, ref = final[pname], params[pname].detach().numpy()
        if pname in noise_driven:
            print(f"  {pname:40s} not compared: its gradient is zero but for rounding noise")
            continue
        r.row(pname, ref.shape, rel_err(mine, ref))
        # Their change over the run: the stricter number, as it leaves out w0.
        r.row(pname + " - w0", ref.shape, rel_err(mine - w, ref - w))
    for extra in final.keys() - weights.keys():
        r.missing(extra, "in the final weights but not in the initial ones")
    r.exit("train")


COMMANDS = {"data": cmd_data, "step": cmd_step, "train": cmd_train}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    torch.manual_seed(0)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
