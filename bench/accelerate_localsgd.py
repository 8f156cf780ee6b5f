"""Accelerate's LocalSGD on Fashion-MNIST, as Accelerate's own example
(examples/by_feature/local_sgd.py) writes it: `Accelerator(cpu=True,
gradient_accumulation_steps=A)`, the model, optimizer, data loader and
scheduler through `accelerator.prepare`, and inside `with LocalSGD(...,
local_sgd_steps=K)` one `local_sgd.step()` per batch, in the
`accelerator.accumulate(model)` block. Launched by torchrun on N processes
(gloo), one thread each. Run by bench/accelerate_localsgd.sh, which runs
trainc beside it.

The model is examples/fashion_mlp.nn's (784-512-256-10, ReLU), from a trainc
trainer's initial weights; the optimizer its train block's AdamW and
schedule (read from the trainer's --help), batch B per process, the
training images sharded over the processes each epoch. Rank 0 prints one
JSON line: the wall time of the training loop, optimizer steps, LocalSGD
syncs (parameter averages: every K batches, plus the one on leaving the
`with`), bytes all-reduced per process, and the test accuracy after training.

usage: torchrun --nproc_per_node N accelerate_localsgd.py W0 HELP DATA_DIR EPOCHS K A
"""
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.local_sgd import LocalSGD
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "torch"))
sys.path.insert(0, HERE)
import parity  # noqa: E402
import safetensors_np  # noqa: E402
from torch_compare import read_idx_gz  # noqa: E402


class CountingLocalSGD(LocalSGD):
    """LocalSGD that counts its parameter averages (nothing else changed)."""

    syncs = 0

    def _sync_and_avg_model_params(self):
        CountingLocalSGD.syncs += 1
        super()._sync_and_avg_model_params()


def mlp(weights):
    layers = []
    for name in ("h1", "h2", "logits"):
        w = weights[name + ".weight"]
        layer = nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(w))
            layer.bias.copy_(torch.from_numpy(weights[name + ".bias"]))
        layers += [layer, nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def fashion(data_dir, split):
    """A scripts/fetch-fashion-mnist folder's images (u8 [N, 784]) and labels (i64)."""
    images = read_idx_gz(f"{data_dir}/{split}/image.idx.gz").reshape(-1, 784)
    labels = read_idx_gz(f"{data_dir}/{split}/label.idx.gz")
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


def main(w0, help_path, data_dir, epochs, k, accumulate):
    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=accumulate)
    weights, _ = safetensors_np.read(w0)
    model = mlp(weights)
    with open(help_path) as f:
        help_text = f.read()
    adamw, (kind, warmup, min_lr), _ = parity.compiled_adamw(help_text)
    batch = int(help_text.split("; B = ")[1].split(")")[0])
    images, labels = fashion(data_dir, "train")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels),
                                         batch_size=batch, shuffle=True, drop_last=True)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
                            foreach=True, **adamw)
    steps = epochs * (len(images) // (batch * accelerator.num_processes)) // accumulate
    # Accelerate's prepared scheduler steps num_processes times per optimizer
    # step (its schedules count batches over all processes): s / processes is
    # the optimizer step, as trainc's schedule counts.
    processes = accelerator.num_processes
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: parity.schedule_factor(
        kind, warmup, min_lr / adamw["lr"], s / processes, steps))
    model, opt, loader, sched = accelerator.prepare(model, opt, loader, sched)
    optimizer_steps = 0
    t0 = time.perf_counter()
    with CountingLocalSGD(accelerator=accelerator, model=model, local_sgd_steps=k,
                          enabled=True) as local_sgd:
        for _ in range(epochs):
            model.train()
            for x, y in loader:
                with accelerator.accumulate(model):
                    loss = F.cross_entropy(model(x.float() / 255.0), y)
                    accelerator.backward(loss)
                    opt.step()
                    sched.step()
                    opt.zero_grad()
                    optimizer_steps += accelerator.sync_gradients
                    local_sgd.step()
    seconds = time.perf_counter() - t0
    if accelerator.is_main_process:
        test_x, test_y = fashion(data_dir, "test")
        with torch.no_grad():
            accuracy = (model(test_x.float() / 255.0).argmax(1) == test_y).float().mean().item()
        param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        print(json.dumps({"seconds": seconds, "optimizer_steps": optimizer_steps,
                          "syncs": CountingLocalSGD.syncs,
                          "mb_allreduced": CountingLocalSGD.syncs * param_bytes / 1e6,
                          "accuracy": accuracy}), flush=True)
    # every rank leaves together and closes gloo itself: a rank that exits
    # while another still evaluates aborts in gloo's teardown ("terminate
    # called without an active exception"), and torchrun kills the other
    accelerator.wait_for_everyone()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
         int(sys.argv[6]))
