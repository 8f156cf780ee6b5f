"""Hugging Face weights in and out of a trainc trainer: gpt2 (hf_gpt2.nn,
GPT-2's Conv1D layout: `transposed`) or bert (hf_bert.nn, nn.Linear's
layout; `{i}` and `*` in map patterns; BertModel's pooler unexpected):

1. a random tiny model's save_pretrained model.safetensors loads through the
   model file's `weights` block (--init), and the trainer's outputs on a
   batch (--dump-step) equal transformers' on the same tokens (gpt2: logits
   and loss; bert: last_hidden_state): the names and layouts are right;
   the same through `trainc run` (the LLVM backend's tables), and for the
   model saved in bfloat16 (with its rounded weights);
2. missing and unexpected tensors are errors that list them, unless
   --allow-missing / --allow-unexpected accept them (then said on stderr, and
   a missing parameter keeps its seeded init); a shape mismatch is an error
   naming both shapes even when everything is allowed; a PyTorch pickle is
   refused with the command that converts it (gpt2 only: one code path);
3. after training, --save writes the same names: from_pretrained loads the
   file with no missing and no unexpected keys (bert: without the pooler,
   which the file lacks; with it, the pooler alone is missing), and its
   tensors are the trained ones (gpt2: transposed back to [in, out]).

usage: hf_roundtrip.py gpt2|bert TRAINC MODEL.nn WORKDIR  (the venv's python)"""
import copy
import os
import subprocess
import sys

import numpy as np
import torch
from safetensors.numpy import load_file, save_file
from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

kind, trainc, model_file, work = sys.argv[1:5]
B, T, V = 4, 8, 16
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def trainer(*args, expect_ok=True, llvm=False):
    """The built (C) trainer, or with llvm the same through `trainc run`."""
    command = [trainc, "run", model_file] if llvm else [os.path.join(work, "trainer")]
    run = subprocess.run([*command, *args], capture_output=True, text=True)
    if (run.returncode == 0) != expect_ok:
        print(run.stdout, run.stderr)
        sys.exit(f"trainer {' '.join(args)}: exit {run.returncode}")
    return run.stderr


def tiny_model():
    torch.manual_seed(0)
    if kind == "gpt2":
        model = GPT2Model(GPT2Config(vocab_size=V, n_positions=T, n_embd=8, n_layer=2, n_head=2,
                                     activation_function="gelu", resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                                     eos_token_id=0))
    else:
        model = BertModel(BertConfig(vocab_size=V, hidden_size=8, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=T, type_vocab_size=2,
                                     hidden_act="gelu", hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0))
    with torch.no_grad():  # LayerNorms away from ones and zeros, so their names matter too
        for name, p in model.named_parameters():
            if "ln" in name or "LayerNorm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def write_data(folder):
    """The model's inputs, 8 batches; returns the first batch's."""
    rng = np.random.default_rng(3)
    os.makedirs(folder, exist_ok=True)
    tokens = rng.integers(0, V, size=(8 * B, T)).astype("<i4")
    if kind == "gpt2":
        arrays = {"tokens": tokens, "targets": np.roll(tokens, -1, axis=1)}
    else:
        arrays = {"input_ids": tokens,
                  "token_type_ids": rng.integers(0, 2, size=tokens.shape).astype("<i4"),
                  "targets": rng.integers(0, 8, size=tokens.shape).astype("<i4")}
    for name, a in arrays.items():
        np.save(os.path.join(folder, name + ".npy"), a)
    return {name: a[:B] for name, a in arrays.items()}


def hf_output(model, batch):
    """What the trainer's `predict` is: GPT-2's logits, BERT's hidden states."""
    with torch.no_grad():
        if kind == "gpt2":
            hidden = model(torch.tensor(batch["tokens"], dtype=torch.long)).last_hidden_state
            return (hidden @ model.wte.weight.T).numpy()
        return model(torch.tensor(batch["input_ids"], dtype=torch.long),
                     token_type_ids=torch.tensor(batch["token_type_ids"], dtype=torch.long)
                     ).last_hidden_state.numpy()


def has_llvm():
    help_text = subprocess.run([trainc, "--help"], capture_output=True, text=True).stdout
    return "\n  run " in help_text


def check_outputs_match(model, hf_file, data, batch, what="--init FILE", llvm=False):
    dump = os.path.join(work, "dump.safetensors")
    trainer("--data", data, "--init", hf_file, "--dump-step", dump, llvm=llvm)
    got = load_file(dump)
    want = hf_output(model, batch)
    err = float(np.abs(got["predict"] - want).max())
    check(err < 1e-5, f"outputs of {what} equal transformers' (max |diff| {err:.2e})")
    classes = want.shape[-1]
    want_loss = torch.nn.functional.cross_entropy(torch.tensor(want).reshape(-1, classes),
                                                  torch.tensor(batch["targets"]).reshape(-1).long())
    check(abs(float(got["loss"]) - float(want_loss)) < 1e-5,
          f"loss {float(got['loss']):.6f}, transformers' {float(want_loss):.6f}")


def check_bf16_file(model, data, batch):
    """The same model saved in bf16 (torch_dtype=bfloat16 checkpoints): widened
    exactly, transposed, it computes what transformers computes with the
    rounded weights."""
    bf16_dir = os.path.join(work, "hf_bf16")
    bf16 = copy.deepcopy(model).to(torch.bfloat16)  # a copy: the config says bfloat16 now
    bf16.save_pretrained(bf16_dir)
    check_outputs_match(bf16.to(torch.float32), os.path.join(bf16_dir, "model.safetensors"), data,
                        batch, "a BF16 file")


def check_missing_and_unexpected(tensors, data):
    missing = dict(tensors)
    del missing["ln_f.weight"], missing["ln_f.bias"]
    extra = dict(tensors, **{"pooler.dense.weight": np.zeros((2, 2), np.float32)})
    paths = {}
    for name, t in (("missing", missing), ("extra", extra)):
        paths[name] = os.path.join(work, name + ".safetensors")
        save_file(t, paths[name], metadata={"format": "pt"})
    err = trainer("--data", data, "--init", paths["missing"], "--steps", "0", expect_ok=False)
    check("2 missing" in err and "missing 'ln_f.weight'" in err and "--allow-missing" in err,
          "missing tensors are an error that lists them")
    err = trainer("--data", data, "--init", paths["extra"], "--steps", "0", expect_ok=False)
    check("1 unexpected" in err and "unexpected 'pooler.dense.weight'" in err,
          "unexpected tensors are an error that lists them")
    saved = os.path.join(work, "kept.safetensors")
    err = trainer("--data", data, "--init", paths["missing"], "--allow-missing", "ln_f.*",
                  "--steps", "0", "--save", saved)
    kept = load_file(saved)
    check("2 missing, kept their seeded init: ln_f.weight, ln_f.bias" in err and
          np.array_equal(kept["ln_f.weight"], np.ones(8, np.float32)),
          "--allow-missing keeps the seeded init (layernorm: ones) and says so")
    err = trainer("--data", data, "--init", paths["extra"], "--allow-unexpected", "pooler.*",
                  "--steps", "0")
    check("1 unexpected, ignored: pooler.dense.weight" in err, "--allow-unexpected ignores them")
    wrong = dict(tensors, **{"wpe.weight": np.zeros((16, 8), np.float32)})
    paths["wrong"] = os.path.join(work, "wrong.safetensors")
    save_file(wrong, paths["wrong"], metadata={"format": "pt"})
    err = trainer("--data", data, "--init", paths["wrong"], "--allow-missing", "*",
                  "--allow-unexpected", "*", "--steps", "0", expect_ok=False)
    check("'wpe.weight' has shape [16, 8], the model expects [8, 8]" in err,
          "a shape mismatch is an error naming both shapes, whatever is allowed")
    pickle = os.path.join(work, "pytorch_model.bin")
    torch.save({"wte.weight": torch.zeros(V, 8)}, pickle)
    err = trainer("--data", data, "--init", pickle, "--steps", "0", expect_ok=False)
    check("PyTorch pickle" in err and "save_file(" in err, "a pytorch_model.bin is refused")


def check_save_loads_in_transformers(model, hf_file, data):
    out = os.path.join(work, "trained")
    os.makedirs(out, exist_ok=True)
    model.config.save_pretrained(out)
    saved = os.path.join(out, "model.safetensors")
    trainer("--data", data, "--init", hf_file, "--steps", "3", "--save", saved)
    cls, options = ((GPT2Model, {}) if kind == "gpt2"
                    else (BertModel, {"add_pooling_layer": False}))
    loaded, info = cls.from_pretrained(out, output_loading_info=True, **options)
    check(not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"],
          f"from_pretrained: missing {info['missing_keys']}, unexpected "
          f"{info['unexpected_keys']}, mismatched {info['mismatched_keys']}")
    if kind == "bert":
        _, info = BertModel.from_pretrained(out, output_loading_info=True)
        check(sorted(info["missing_keys"]) == ["pooler.dense.bias", "pooler.dense.weight"],
              f"with a pooler, from_pretrained misses it alone: {sorted(info['missing_keys'])}")
    file = load_file(saved)
    state = {k: v.numpy() for k, v in loaded.state_dict().items()}
    same = all(np.array_equal(state[k], file[k]) for k in file)
    before = load_file(hf_file)
    changed = [k for k in file if not np.array_equal(file[k], before[k])]
    check(same and len(changed) == len(file),
          f"transformers holds the trained tensors ({len(changed)} of {len(file)} changed)")


def main():
    os.makedirs(work, exist_ok=True)
    subprocess.run([trainc, "build", model_file, "-o", os.path.join(work, "trainer")],
                   check=True, stdout=subprocess.DEVNULL)
    model = tiny_model()
    hf_dir = os.path.join(work, "hf")
    model.save_pretrained(hf_dir)
    hf_file = os.path.join(hf_dir, "model.safetensors")
    data = os.path.join(work, "data")
    batch = write_data(data)
    check_outputs_match(model, hf_file, data, batch)
    if has_llvm():  # the LLVM backend's own copy of the names table
        check_outputs_match(model, hf_file, data, batch, "--init FILE in trainc run", llvm=True)
    check_bf16_file(model, data, batch)
    if kind == "gpt2":
        check_missing_and_unexpected(load_file(hf_file), data)
    check_save_loads_in_transformers(model, hf_file, data)
    sys.exit(1 if failures else 0)


main()
