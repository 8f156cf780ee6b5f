#!/usr/bin/env bash
# `trainc plan --format json` against its documented schema (docs/planner.md,
# "trainc-plan/1"): every key, every type, and the sums the doc promises
# (total = arena + optimizer state; arena = the categories below it; memory:
# what `auto` planned for, null for the other policies; compress: "bf16"
# under --compress bf16, which off and every 2 are also planned with); and
# `--sweep --format json` ("trainc-sweep/1").
# usage: plan_json.sh TRAINC MODEL.nn...
set -euo pipefail
trainc=$1
PY=/usr/bin/python3
shift
profile=$(mktemp) # a machine profile's figures, for --profile
trap 'rm -f "$profile"' EXIT
printf 'gemm_flops = 1e11\nloop_flops = 1e10\nbandwidth = 2e10\nkernel_overhead = 1e-6\n' >"$profile"
# The loss head's rows and default chunk ("0 0" without one).
head_dims() {
  "$trainc" plan "$1" --format json | /usr/bin/python3 -c '
import json, sys
h = json.load(sys.stdin)["loss_head"]
print(h["rows"], h["chunk"]) if h else print(0, 0)'
}
for model in "$@"; do
  for run in off all sqrt "every 2" auto "off bf16" "every 2 bf16"; do
    policy=${run% bf16} compress=none
    [[ $run == *bf16 ]] && compress=bf16
    "$trainc" plan "$model" --policy "$policy" --compress $compress --memory 64GiB --format json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
def want(obj, key, types):
    assert key in obj, f"missing key {key!r}"
    assert isinstance(obj[key], types) and not isinstance(obj[key], bool), f"{key!r}: {obj[key]!r}"
assert d["schema"] == "trainc-plan/1"
assert set(d) == {"schema", "model", "batch", "policy", "memory", "compress", "stages", "values", "stage_plan",
                  "peak", "loss_head", "attention", "flops", "seconds", "overhead", "added", "profile",
                  "measured"}, sorted(d)
assert d["profile"] is None, d["profile"] # no --profile: the built-in figures
a = d["attention"]
assert set(a) == {"form", "fused", "chosen", "other"} and a["form"] in ("fused", "whole"), a
assert isinstance(a["fused"], int) and (a["fused"] > 0) == (a["form"] == "fused"), a
assert isinstance(a["chosen"], bool) and (a["other"] is None) == (not a["chosen"]), a
assert a["other"] is None or (set(a["other"]) == {"fits", "step", "peak"} and isinstance(a["other"]["fits"], bool)
                              and isinstance(a["other"]["peak"], int) and a["other"]["peak"] > 0
                              and (a["other"]["step"] > 0) == a["other"]["fits"]), a
assert d["added"] == d["overhead"], (d["added"], d["overhead"]) # the default chunk: nothing else added
assert d["measured"] is None, d["measured"] # no --measured given
modes = ("KEEP", "SELECT", "CKPT", "DROP", "BF16")
assert d["compress"] == {"none": None, "bf16": "bf16"}[sys.argv[2]], d["compress"]
assert [s["stage"] for s in d["stage_plan"]] == list(range(1, d["stages"] + 1)), d["stage_plan"]
for s in d["stage_plan"]:
    assert set(s) == {"stage", "mode", "stored", "recomputed", "recompute_seconds"}, s
    assert s["mode"] in modes and s["stored"] >= 0 and s["recomputed"] >= 0, s
    assert (s["recomputed"] == 0) == (s["recompute_seconds"] == 0) or s["mode"] != "KEEP", s
recompute = sum(s["recompute_seconds"] for s in d["stage_plan"])
assert abs(recompute - d["seconds"]["recompute"]) <= 1e-5 * max(recompute, 1e-9), (recompute, d["seconds"])
h = d["loss_head"]
counts = ("chunk", "rows", "classes", "scratch", "default_chunk")
assert h is None or (set(h) == {*counts, "planner_chooses", "seconds"} and
                     all(isinstance(h[k], int) and h[k] > 0 for k in counts) and h["chunk"] <= h["rows"] and
                     h["scratch"] == 4 * h["chunk"] * h["classes"] and h["planner_chooses"] is False and
                     h["chunk"] == h["default_chunk"] and h["seconds"] > 0), h
want(d, "model", str); want(d, "batch", int); want(d, "policy", str); want(d, "stages", int)
assert d["policy"] == sys.argv[1], d["policy"]
assert d["memory"] == (64 << 30 if d["policy"] == "auto" else None), d["memory"]
for v in d["values"]:
    assert set(v) == {"id", "name", "op", "line", "shape", "bytes", "stage", "stage_mode", "boundary", "decision",
                      "kept_back", "saved_bytes", "paid_seconds"}, sorted(v)
    # kept back: stored although its stage mode would recompute it
    assert isinstance(v["kept_back"], bool) and v["kept_back"] <= (v["decision"] == "STORE"), v
    assert v["kept_back"] <= (v["stage_mode"] != "KEEP"), v
    want(v, "saved_bytes", int)
    assert v["saved_bytes"] == {"RECOMPUTE": v["bytes"], "STORE bf16": v["bytes"] // 2}.get(v["decision"], 0), v
    assert v["paid_seconds"] >= 0 and (v["paid_seconds"] > 0) <= (v["decision"] in ("RECOMPUTE", "STORE bf16")), v
    assert v["stage_mode"] in modes, v
    for k in ("id", "line", "bytes", "stage"): want(v, k, int)
    assert v["name"] is None or isinstance(v["name"], str)
    assert isinstance(v["boundary"], bool) and isinstance(v["op"], str)
    assert all(isinstance(x, int) for x in v["shape"])
    assert v["decision"] in ("STORE", "RECOMPUTE", "transient", "STORE bf16"), v
    assert (v["decision"] == "STORE bf16") <= (v["stage_mode"] == "BF16" and d["compress"] == "bf16"), v
    assert 1 <= v["stage"] <= d["stages"]
p = d["peak"]
assert set(p) == {"parameters", "gradients", "inputs", "stored_activations", "backward_workspace",
                  "most_alive_activations", "arena", "optimizer_state", "bf16_parameters", "bf16_operands",
                  "total"}, sorted(p)
assert all(isinstance(x, int) and x >= 0 for x in p.values())
assert p["total"] == p["arena"] + p["optimizer_state"] + p["bf16_parameters"] + p["bf16_operands"]
# operands are rounded only by recomputed GEMMs under compress (fp32 here)
assert (p["bf16_operands"] > 0) <= (d["compress"] == "bf16" and
                                    any(v["op"] in ("matmul", "bmm") and v["decision"] == "RECOMPUTE" for v in d["values"])), p
assert p["arena"] == p["parameters"] + p["gradients"] + p["inputs"] + p["stored_activations"] + p["backward_workspace"]
# no placement of the activations needs fewer bytes than are alive at once
assert p["stored_activations"] <= p["most_alive_activations"] <= p["stored_activations"] + p["backward_workspace"], p
assert set(d["flops"]) == {"forward", "backward", "recompute"}
t = d["seconds"]
assert set(t) == {"forward", "backward", "recompute", "update", "step", "cache_credit"}, t
# the step is its phases, the optimizer step share included (a trained
# model has one), and the overhead recompute less what backward saves
# reading its values from the cache, against the step without them (as off)
assert abs(t["step"] - t["forward"] - t["backward"] - t["recompute"] - t["update"]) <= 1e-5 * t["step"], t
assert t["update"] > 0 and t["forward"] > 0 and t["backward"] > 0, t
assert t["cache_credit"] >= 0 and (t["cache_credit"] > 0) <= (t["recompute"] > 0), t
# a step whose whole arena fits in the 16 MiB cache of the default profile
# reads nothing from memory twice: recomputing saves no read there
assert t["cache_credit"] == 0 or d["peak"]["arena"] > 16 << 20, (t, d["peak"]["arena"])
# the overhead: recompute less the credit, never below zero (recompute_cost)
off_step = t["step"] - t["recompute"] + t["cache_credit"]
cost = max(0.0, t["recompute"] - t["cache_credit"])
assert abs(d["overhead"] - cost / off_step) <= 1e-4 * abs(d["overhead"]) + 1e-9, (d["overhead"], t)
assert (d["flops"]["recompute"] == 0) == all(v["decision"] != "RECOMPUTE" for v in d["values"])
# what each value costs adds up to the recompute time, stage by stage and in all
paid = sum(v["paid_seconds"] for v in d["values"])
assert abs(paid - d["seconds"]["recompute"]) <= 1e-5 * d["seconds"]["recompute"] + 1e-12, (paid, d["seconds"])
for st in d["stage_plan"]:
    mine = sum(v["paid_seconds"] for v in d["values"] if v["stage"] == st["stage"])
    assert abs(mine - st["recompute_seconds"]) <= 1e-5 * st["recompute_seconds"] + 1e-12, (st, mine)
' "$policy" "$compress" || { echo "FAIL: $model, policy $policy, compress $compress"; exit 1; }
  done
  # the sweep ("trainc-sweep/1"): budgets ascending, a fitting plan's peak
  # within its budget, and a larger budget never predicting more of what
  # the search minimizes ("added"); that is the recompute overhead unless
  # the search chose the loss head's chunk (--loss-head auto), whose chunks
  # are then all rows, or that halved, down to 64 rows
  for run in none bf16 "none auto"; do
    compress=${run% auto} head=chunked
    [[ $run == *auto ]] && head=auto
    "$trainc" plan "$model" --sweep --compress $compress --loss-head $head --format json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
assert set(d) == {"schema", "model", "compress", "points"} and d["schema"] == "trainc-sweep/1", sorted(d)
assert d["compress"] == (None if sys.argv[1] == "none" else "bf16")
pts = d["points"]
assert len(pts) == 17 and all(set(p) == {"budget", "fits", "peak", "overhead", "added", "head_chunk"} for p in pts)
assert [p["budget"] for p in pts] == sorted(p["budget"] for p in pts)
fit = [p for p in pts if p["fits"]]
assert fit and all(p["peak"] <= p["budget"] and p["overhead"] >= 0 for p in fit)
assert all(p["peak"] is None and p["overhead"] is None and p["added"] is None for p in pts if not p["fits"])
assert all(a["added"] >= b["added"] for a, b in zip(fit, fit[1:])), [p["added"] for p in fit]
chunks = {p["head_chunk"] for p in fit}
if sys.argv[2] == "chunked" or chunks == {0}: # no choice made: the recompute overhead alone
    assert len(chunks) == 1 and all(p["added"] == p["overhead"] for p in fit), fit
else:
    rows, ladder = int(sys.argv[3]), set()
    while True:
        ladder.add(rows)
        if rows <= 64: break
        rows = (rows + 1) // 2
    assert chunks <= ladder | {int(sys.argv[4])}, (chunks, ladder)
' $compress $head $(head_dims "$model") || { echo "FAIL: $model, --sweep --compress $compress --loss-head $head"; exit 1; }
  done
  # offering the loss head's chunk never predicts a slower plan: at every
  # budget of the default chunk's sweep where a plan fits, --loss-head
  # auto's plan adds at most what the default chunk's does (every
  # $PLAN_JSON_EVERY_NTH_BUDGET-th budget of them: the sanitizers' build)
  if [[ $(head_dims "$model") != "0 0" ]]; then
    for budget in $("$trainc" plan "$model" --sweep --format json | "$PY" -c '
import json, sys
fit = [p["budget"] for p in json.load(sys.stdin)["points"] if p["fits"]]
print(" ".join(str(b) for b in fit[::int(sys.argv[1])]))' "${PLAN_JSON_EVERY_NTH_BUDGET:-1}"); do
      "$PY" - <("$trainc" plan "$model" --budget "$budget" --format json) \
        <("$trainc" plan "$model" --budget "$budget" --loss-head auto --format json) <<'PY' ||
import json, sys
fixed, auto = (json.load(open(f)) for f in sys.argv[1:3])
assert auto["added"] <= fixed["added"] + 1e-12, (fixed["added"], auto["added"])
PY
        { echo "FAIL: $model: --loss-head auto predicts a slower plan than the default chunk at $budget"; exit 1; }
    done
  fi
  # --profile: the plan names the file its prices come from
  "$trainc" plan "$model" --profile "$profile" --format json | "$PY" -c '
import json, sys
assert json.load(sys.stdin)["profile"] == sys.argv[1]' "$profile" || { echo "FAIL: $model: --profile not named"; exit 1; }
  echo "ok: $model"
done
