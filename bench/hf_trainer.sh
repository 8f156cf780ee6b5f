#!/usr/bin/env bash
# Hugging Face's Trainer against trainc on the sentence-pair task, side by side:
# the same BERT pair classifier (examples/minilm_pairs.nn; Hugging Face's
# BertForSequenceClassification, bench/hf_trainer.py), the same tokenized data
# (scripts/make-verse-pairs: N_TRAIN / N_TEST pairs at T = 64), the same initial
# weights (written by the Hugging Face side, read by trainc's --init under the
# same names), accumulation 4, clipping 1.0, AdamW lr 5e-5 with linear decay,
# evaluation every epoch with loss, accuracy and F1. Hugging Face runs with
# gradient_checkpointing=True, trainc with `checkpoint sqrt`; both report the
# activation memory they hold (trainc's plan: stored activations; Hugging
# Face's: the bytes autograd saves for one micro-batch, saved_tensors_hooks).
# From the pretrained all-MiniLM-L6-v2 and from scratch, for each seed. Both
# sides on 2 threads; PyTorch with tcmalloc and OMP_WAIT_POLICY=active, the
# environment bench/torch_compare.sh's quiet-machine sweep found fastest for
# the transformers (gpt124m: tcmalloc/active).
# PRECISION bf16: Hugging Face's `bf16=True` (autocast on the CPU) against
# trainc's `--precision bf16`. The load average is printed before and after;
# the sides alternate.
# usage: bench/hf_trainer.sh [BUILD_DIR] [EPOCHS] [SEEDS] [N_TRAIN] [N_TEST] [PRECISION]
#        (default: build 2 "1" 2000 500 fp32)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/quiet.sh
build=${1:-build} epochs=${2:-2} seeds=${3:-1} n_train=${4:-2000} n_test=${5:-500}
precision=${6:-fp32}
work=$build/bench_hf_trainer
mkdir -p "$work"
scripts/install-peers --quiet
scripts/fetch-minilm data/minilm >/dev/null
scripts/make-verse-pairs "$work/data" "$n_train" "$n_test" >/dev/null
py=${TRAINC_PEERS:-/opt/trainc-peers}/bin/python
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
sed -e "s/^  epochs .*/  epochs $epochs/" -e "s/^  seed 42/  seed 42\n  log_every 1/" \
  examples/minilm_pairs.nn >"$work/minilm.nn"
"$build/driver/trainc" build "$work/minilm.nn" -o "$work/minilm" >/dev/null
"$build/driver/trainc" plan "$work/minilm.nn" --format json >"$work/plan.json"
batch=$(sed -n 's/^  batch //p' "$work/minilm.nn")
lr=$(sed -n 's/.*adamw(lr = \([^,]*\),.*/\1/p' "$work/minilm.nn")
t=$(sed -n 's/^const T = \([0-9]*\).*/\1/p' "$work/minilm.nn")

for seed in $seeds; do
  for init in pretrained scratch; do
    source=data/minilm
    [[ $init == pretrained ]] || source=scratch
    "$py" bench/hf_trainer.py init "$source" "$work/w0_${init}_$seed" "$seed" 2>/dev/null
  done
done

trainc_side() { # init seed
  /usr/bin/time -f %M -o "$work/trainc_$1_$2.rss" "$work/minilm" --threads 2 --seed "$2" \
    --init "$work/w0_$1_$2/model.safetensors" --tokenizer data/minilm \
    --pairs "$work/data/train.tsv" --eval-pairs "$work/data/test.tsv" \
    --precision "$precision" --log "$work/trainc_$1_$2.jsonl" --quiet >/dev/null \
    2>"$work/trainc_$1_$2.err"
}
hf_side() { # init seed
  OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4 \
    "$py" bench/hf_trainer.py train "$work/w0_$1_$2" data/minilm "$work/data" "$t" "$batch" \
    "$epochs" "$lr" "$2" "$precision" >"$work/hf_$1_$2.json" 2>"$work/hf_$1_$2.err"
}

wait_quiet
for seed in $seeds; do
  for init in pretrained scratch; do
    hf_side "$init" "$seed"
    trainc_side "$init" "$seed"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

"$py" - "$work" "$seeds" "$n_train" <<'PY'
import json, statistics, sys
work, seeds, n_train = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
plan = json.load(open(f"{work}/plan.json"))
trainc_act = plan["peak"]["stored_activations"] / 2**20
print("| init | side | epoch | eval_loss | eval_accuracy | eval_f1 | training s | examples/s |"
      " peak RSS MiB | activation MiB |")
print("|---|---|---|---|---|---|---|---|---|---|")
for init in ("pretrained", "scratch"):
    for seed in seeds:
        hf = json.loads(open(f"{work}/hf_{init}_{seed}.json").read().strip().splitlines()[-1])
        for e in hf["epochs"]:
            print(f"| {init} (seed {seed}) | Hugging Face | {e['epoch']} | {e['eval_loss']:.4f} |"
                  f" {e['eval_accuracy']:.4f} | {e['eval_f1']:.4f} | {e['seconds']:.1f} |"
                  f" {n_train / e['seconds']:.1f} | {hf['peak_rss_mib']:.0f} |"
                  f" {hf['saved_activation_mib']:.1f} |")
        log = [json.loads(l) for l in open(f"{work}/trainc_{init}_{seed}.jsonl")]
        rss = int(open(f"{work}/trainc_{init}_{seed}.rss").read().split()[-1]) / 1024
        steps = [r for r in log if "examples_per_s" in r]
        evals = [r for r in log if "eval_loss" in r]
        for n, e in enumerate(evals, 1):
            # time in steps only: each record's examples (its share of an epoch)
            # over its examples_per_s, summed over the epoch's records
            seconds, previous = 0.0, 0.0
            for r in steps:
                if n - 1 < r["epoch"] <= n + 1e-9:
                    seconds += (r["epoch"] - max(previous, n - 1)) * n_train / r["examples_per_s"]
                previous = r["epoch"]
            print(f"| {init} (seed {seed}) | trainc | {n} | {e['eval_loss']:.4f} |"
                  f" {e['eval_accuracy']:.4f} | {e['eval_f1']:.4f} | {seconds:.1f} |"
                  f" {n_train / seconds:.1f} | {rss:.0f} | {trainc_act:.1f} |")
PY
