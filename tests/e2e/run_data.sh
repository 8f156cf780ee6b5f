# run_data.sh — helpers the planner's e2e scripts (checkpoint.sh,
# compress.sh) share; sourced, with trainc, src, work and PY set.

# data_dir KIND MODEL.nn: a data directory for the model's trainer.
#   random  64 random rows of every input (index inputs below their limit)
#   fashion Fashion-MNIST; kjv scripts/fetch-kjv at T = 32; pairs
#   scripts/make-pair-data
data_dir() {
  case $1 in
  random)
    local rows=$work/random_$(basename "$2" .nn)
    "$trainc" emit "$2" -o "$rows.c" >/dev/null &&
      "$PY" "$src/tests/e2e/random_data.py" "$rows.c" "$rows" 64 && echo "$rows" ;;
  fashion) "$src/scripts/fetch-fashion-mnist" "$work/fashion" >/dev/null && echo "$work/fashion/train" ;;
  kjv) [[ -d $work/kjv ]] || "$src/scripts/fetch-kjv" "$work/kjv" 32 >/dev/null; echo "$work/kjv/train" ;;
  pairs) [[ -d $work/pairs ]] || "$PY" "$src/scripts/make-pair-data" "$work/pairs" >/dev/null; echo "$work/pairs/train" ;;
  esac
}

# arena_of LOG.jsonl -> "planned measured": the trainer's last arena record;
# operands_of: its bf16 GEMM operands' buffer ("0 0" when none was planned).
memory_of() {
  "$PY" -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if "arena_high_water" in l][-1]
print(r.get(sys.argv[2] + "_planned", 0), r.get(sys.argv[2] + "_high_water", 0))' "$1" "$2"
}
arena_of() { memory_of "$1" arena; }
operands_of() { memory_of "$1" bf16_operands; }
