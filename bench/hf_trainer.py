"""The seed's own system on the sentence-pair task: Hugging Face's Trainer
fine-tuning a BERT-style pair classifier (BertForSequenceClassification:
BertModel, the [CLS] pooler, a linear head) with
TrainingArguments(gradient_checkpointing=True, gradient_accumulation_steps=4,
eval_strategy="epoch") and compute_metrics returning accuracy and F1, as its
documentation writes it. Run by bench/hf_trainer.sh beside trainc.

  hf_trainer.py init MODEL_DIR|scratch OUT_DIR SEED
      writes the initial weights (OUT_DIR/model.safetensors, config.json):
      all-MiniLM-L6-v2's with a new classifier head drawn by SEED, or the same
      architecture drawn wholly by SEED; both sides start from these. The
      tensors are saved under the pretrained file's names (BertModel's, no
      "bert." prefix) and the head's `classifier.*`, which from_pretrained
      loads into BertForSequenceClassification with no missing or unexpected
      keys, and which examples/minilm_pairs.nn's weights block maps.
  hf_trainer.py train INIT_DIR VOCAB_DIR DATA_DIR T B EPOCHS LR SEED [PRECISION]
      fine-tunes INIT_DIR (PRECISION bf16: TrainingArguments(bf16=True), the
      Trainer's torch.autocast on the CPU; default fp32) on DATA_DIR/{train,test}.tsv (text_a, text_b,
      label), pairs tokenized by BertTokenizerFast (truncation longest_first,
      padding to T) and prints one JSON line: per epoch eval_loss,
      eval_accuracy, eval_f1 and seconds; examples/s; peak RSS; the bytes
      autograd saves for one micro-batch (saved_tensors_hooks, parameters
      excluded) with gradient checkpointing on.
"""
import json
import os
import resource
import sys
import time

import torch


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = [line.rstrip("\n").split("\t") for line in f]
    col = {name: i for i, name in enumerate(header)}
    return ([r[col["text_a"]] for r in rows], [r[col["text_b"]] for r in rows],
            [int(r[col["label"]]) for r in rows])


def init(source, out, seed):
    from transformers import BertConfig, BertForSequenceClassification
    torch.manual_seed(seed)
    if source == "scratch":
        config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                            num_attention_heads=12, intermediate_size=1536,
                            layer_norm_eps=1e-12, num_labels=2)
        model = BertForSequenceClassification(config)
    else:
        model = BertForSequenceClassification.from_pretrained(source, num_labels=2)
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    model.config.save_pretrained(out)
    tensors = {k.removeprefix("bert."): v.contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


class Dataset(torch.utils.data.Dataset):
    def __init__(self, encoded, labels):
        self.encoded, self.labels = encoded, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        item = {k: torch.tensor(v[i]) for k, v in self.encoded.items()}
        item["labels"] = torch.tensor(self.labels[i])
        return item


def compute_metrics(prediction):
    logits, labels = prediction
    predicted = logits.argmax(-1)
    tp = int(((predicted == 1) & (labels == 1)).sum())
    fp = int(((predicted == 1) & (labels == 0)).sum())
    fn = int(((predicted == 0) & (labels == 1)).sum())
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {"accuracy": float((predicted == labels).mean()), "f1": f1}


def saved_activation_bytes(model, batch):
    """Bytes autograd saves in one forward of a micro-batch, each storage once,
    parameters excluded (saved_tensors_hooks), in training mode."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(**batch).loss
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(seen.values())


def train(init_dir, vocab_dir, data_dir, t, b, epochs, lr, seed, precision):
    from transformers import (BertForSequenceClassification, BertTokenizerFast, Trainer,
                              TrainerCallback, TrainingArguments)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    tokenizer = BertTokenizerFast.from_pretrained(vocab_dir)
    splits = {}
    for name in ("train", "test"):
        a, bb, labels = read_tsv(os.path.join(data_dir, name + ".tsv"))
        enc = tokenizer(a, bb, truncation="longest_first", max_length=t, padding="max_length")
        splits[name] = Dataset({k: enc[k] for k in ("input_ids", "token_type_ids",
                                                     "attention_mask")}, labels)
    model = BertForSequenceClassification.from_pretrained(init_dir)
    epoch_begins, epoch_ends = [], []

    class EpochClock(TrainerCallback):
        """Each epoch's training time (its evaluation comes after on_epoch_end)."""

        def on_epoch_begin(self, args, state, control, **kwargs):
            epoch_begins.append(time.perf_counter())

        def on_epoch_end(self, args, state, control, **kwargs):
            epoch_ends.append(time.perf_counter())

    args = TrainingArguments(
        output_dir=os.path.join(init_dir, "hf_out"), per_device_train_batch_size=b,
        per_device_eval_batch_size=b, gradient_accumulation_steps=4,
        gradient_checkpointing=True, eval_strategy="epoch", num_train_epochs=epochs,
        learning_rate=lr, weight_decay=0.01, lr_scheduler_type="linear", warmup_steps=0,
        max_grad_norm=1.0, logging_strategy="epoch", save_strategy="no", report_to=[],
        seed=seed, use_cpu=True, dataloader_num_workers=0, disable_tqdm=True,
        bf16=precision == "bf16")
    trainer = Trainer(model=model, args=args, train_dataset=splits["train"],
                      eval_dataset=splits["test"], compute_metrics=compute_metrics,
                      callbacks=[EpochClock()])
    out = trainer.train()
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    batch = next(iter(trainer.get_train_dataloader()))
    saved = saved_activation_bytes(trainer.model, {k: v[:b] for k, v in batch.items()})
    print(json.dumps({
        "epochs": [{"epoch": i + 1, "eval_loss": e["eval_loss"],
                    "eval_accuracy": e["eval_accuracy"], "eval_f1": e["eval_f1"],
                    "seconds": end - start}
                   for i, (e, start, end) in enumerate(zip(evals, epoch_begins, epoch_ends))],
        "train_seconds": out.metrics["train_runtime"],
        "examples_per_s": out.metrics["train_samples_per_second"],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "saved_activation_mib": saved / 2**20}))


if __name__ == "__main__":
    if sys.argv[1] == "init":
        init(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        train(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]),
              int(sys.argv[7]), float(sys.argv[8]), int(sys.argv[9]),
              sys.argv[10] if len(sys.argv) > 10 else "fp32")
