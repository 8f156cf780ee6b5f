#!/usr/bin/env bash
# state.sh TRAINER MAKE_DATA — resumable state files (docs/trainer.md,
# Resuming), with the tiny trainer: a flipped bit in a state file's tensor
# data or counters is refused by its checksum (never resumed into other
# weights); a state without a checksum is refused; names in the state folder
# that are not the trainer's own (leading zeros, other shapes, a directory)
# are passed over, not fatal.
NAME=state
. "$(dirname "$0")/harness.sh" "$1" "$2" 200

"$TRAINER" --data d --steps 20 --quiet --save full.safetensors >/dev/null || exit 1
"$TRAINER" --data d --steps 20 --quiet --save-state st --save-every 10 >/dev/null 2>&1 || exit 1
state=st/state-20.rank-0.safetensors # the last: resuming from it trains nothing more
cp "$state" intact.safetensors

# edit FILE WHAT: flips one bit of the tensor data ("data"), changes the step
# counter ("step"), or drops the checksum ("checksum"), keeping the file valid
edit() {
  "$PY" - "$@" <<'EOF'
import json, struct, sys
path, what = sys.argv[1], sys.argv[2]
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
if what == "data":
    raw[8 + n + 100] ^= 0x04
else:
    h = json.loads(raw[8:8 + n])
    if what == "step":
        h["__metadata__"]["step"] = "10"
    else:
        del h["__metadata__"]["checksum"]
    text = json.dumps(h, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    raw = bytearray(struct.pack("<Q", len(text)) + text + raw[8 + n:])
open(path, "wb").write(raw)
EOF
}

echo "1. a damaged state is refused by its checksum"
for what in data step checksum; do
  cp intact.safetensors "$state" && edit "$state" "$what"
  run "damaged_$what" 1 "$TRAINER" --data d --steps 20 --quiet --resume st --save out.safetensors
  [ ! -e out.safetensors ] || fail "resumed from a state with its $what changed"
done
expect damaged_data err "st/state-20.rank-0.safetensors: error: damaged: the checksum says crc32:"
expect damaged_step err "damaged: the checksum says"
expect damaged_checksum err "has no checksum"

echo "2. names the trainer does not write are passed over"
cp intact.safetensors "$state"
touch st/state-021.rank-0.safetensors st/state-+22.rank-0.safetensors "st/state- 23.rank-0.safetensors" \
  st/state-99999999999999999999.rank-0.safetensors st/state-24.rank-0.safetensors.bak st/notes.txt
mkdir st/state-25.rank-0.safetensors
run stray_names 0 "$TRAINER" --data d --steps 20 --resume st --save resumed.safetensors
expect stray_names err "resumed from st at step 20"
cmp -s full.safetensors resumed.safetensors || fail "the resumed run's weights differ from the uninterrupted run's"

finish
