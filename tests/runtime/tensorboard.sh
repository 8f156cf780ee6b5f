#!/usr/bin/env bash
# tensorboard.sh TRAINER MAKE_DATA — --tensorboard DIR writes a TensorBoard
# event file holding the numbers of the --log file (docs/trainer.md, Logs).
# The file is read back by a reader written here from the format's
# definition (TFRecord framing with masked CRC-32C; Event, Summary and
# Summary.Value protobufs decoded from the wire format), not by the writer's
# code: every record's two checksums must match (CRC-32C computed bit by bit
# here), the first event must be the file version, and every train/, eval/
# and memory/ scalar must equal the JSON Lines value rounded to float32 (to
# one float32 step: the log rounds to 9 digits first), at the same step. A
# flipped bit must be caught.
NAME=tensorboard
. "$(dirname "$0")/harness.sh" "$1" "$2" 300

run train 0 "$TRAINER" --data d --eval-data d --steps 12 --log-every 4 --quiet \
  --log run.jsonl --tensorboard tb
[ "$(ls tb | grep -c '^events\.out\.tfevents\.')" -eq 1 ] || fail "expected one event file in tb/"

cat >reader.py <<'EOF'
import json, struct, sys

def crc32c(data):                      # bitwise, reflected polynomial 0x82F63B78
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def records(raw):
    at = 0
    while at < len(raw):
        head = raw[at:at + 8]
        (n,) = struct.unpack("<Q", head)
        (head_crc,) = struct.unpack("<I", raw[at + 8:at + 12])
        data = raw[at + 12:at + 12 + n]
        (data_crc,) = struct.unpack("<I", raw[at + 12 + n:at + 16 + n])
        if head_crc != masked(head) or data_crc != masked(data) or len(data) != n:
            raise ValueError(f"bad checksum in the record at byte {at}")
        yield data
        at += 16 + n

def varint(b, i):
    v = shift = 0
    while True:
        v |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return v, i

def fields(b):                          # protobuf wire format: (field, value)
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield field, v

def events(path):
    for data in records(open(path, "rb").read()):
        e = {"step": 0, "scalars": {}}
        for f, v in fields(data):
            if f == 1: e["wall_time"] = struct.unpack("<d", v)[0]
            elif f == 2: e["step"] = v
            elif f == 3: e["file_version"] = v.decode()
            elif f == 5:
                for sf, value in fields(v):
                    assert sf == 1
                    tag = x = None
                    for vf, vv in fields(value):
                        if vf == 1: tag = vv.decode()
                        elif vf == 2: x = struct.unpack("<f", vv)[0]
                    e["scalars"][tag] = x
        yield e

def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]

path, log = sys.argv[1], sys.argv[2]
evs = list(events(path))
assert evs[0].get("file_version") == "brain.Event:2", evs[0]
got = {}
for e in evs[1:]:
    assert e["wall_time"] > 1.5e9
    for tag, x in e["scalars"].items():
        got[(e["step"], tag)] = x
want = {}
for line in open(log):
    r = json.loads(line)
    group = ("memory" if "arena_planned" in r else "best" if "best_step" in r
             else "eval" if any(k.startswith("eval_") for k in r) else "train")
    for k, v in r.items():
        # counters and words stay in the log only, as do the per-class lists
        if k in ("step", "syncs", "comm_bytes", "best_step") or not isinstance(v, (int, float)):
            continue
        tag = "eval/" + k[5:] if k.startswith("eval_") else f"{group}/{k}"
        want[(r["step"], tag)] = f32(v)
missing = sorted(set(want) - set(got))
extra = sorted(set(got) - set(want))
# the log's 9 digits of a double, rounded to float32, may land one float32 step
# from the double rounded directly: allow that step, no more
wrong = [(k, got[k], want[k]) for k in want
         if k in got and abs(got[k] - want[k]) > 2.0**-23 * abs(want[k])]
for name, bad in (("missing", missing), ("unexpected", extra), ("different", wrong)):
    if bad:
        sys.exit(f"{name} scalars: {bad[:5]}")
tags = {t for _, t in got}
for t in ("train/loss", "train/lr", "eval/loss", "eval/accuracy", "memory/arena_high_water"):
    assert t in tags, f"no {t} in {sorted(tags)}"
print(f"{len(got)} scalars match the log")
EOF
event=$(ls tb/events.out.tfevents.*)
"$PY" reader.py "$event" run.jsonl || fail "the event file does not hold the log's numbers"

# the reader can tell: one flipped bit in the last record's payload
cp "$event" flipped
"$PY" - flipped <<'EOF'
import sys
raw = bytearray(open(sys.argv[1], "rb").read())
raw[-6] ^= 0x10
open(sys.argv[1], "wb").write(raw)
EOF
if "$PY" reader.py flipped run.jsonl >flip.out 2>&1; then fail "a flipped bit went unnoticed"; fi
grep -q "bad checksum" flip.out || { fail "the flipped bit was not caught by a checksum"; cat flip.out; }

run notdir 1 "$TRAINER" --data d --steps 1 --quiet --tensorboard run.jsonl
expect notdir err "run.jsonl: error: --tensorboard: not a directory"
finish
