#!/usr/bin/env python3
"""Half-precision .safetensors for --init (runtime/io/safetensors.c), with
NumPy: `write SRC.safetensors OUT_PREFIX` writes the F32 weights of SRC as
OUT_PREFIX_f16 (NumPy's float16, with subnormal and negative-zero values
planted), OUT_PREFIX_bf16 (bf16 as uint16 bit patterns: the high half of the
f32, rounded to nearest even), OUT_PREFIX_mixed (the first tensor F32, the
rest BF16) and OUT_PREFIX_f64 (refused); `check GOT.safetensors
EXPECTED_FROM.safetensors` says whether the trainer's F32 save of GOT holds
exactly the f32 values of the half file EXPECTED_FROM, widened by NumPy."""
import json
import struct
import sys

import numpy as np


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        raw = blob[8 + n + begin:8 + n + end]
        dtype = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}[e["dtype"]]
        tensors[name] = (e["dtype"], np.frombuffer(raw, dtype=dtype).reshape(e["shape"]))
    return tensors


def widened(dtype, data):
    """The f32 value of every element of a stored tensor."""
    if dtype == "BF16":
        return (data.astype(np.uint32) << 16).view(np.float32)
    return data.astype(np.float32)


def write(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, (dtype, data) in tensors.items():
        raw = np.ascontiguousarray(data).tobytes()
        header[name] = {"dtype": dtype, "shape": list(data.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def to_bf16_bits(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def make(src, prefix):
    weights = {name: data for name, (_, data) in read(src).items()}
    f16 = {name: ("F16", w.astype(np.float16)) for name, w in weights.items()}
    first = next(iter(f16))
    planted = f16[first][1].copy().reshape(-1)
    planted[:3] = np.array([6e-8, -3e-6, -0.0], dtype=np.float16)  # subnormals, -0
    f16[first] = ("F16", planted.reshape(f16[first][1].shape))
    write(prefix + "_f16.safetensors", f16)
    write(prefix + "_bf16.safetensors",
          {name: ("BF16", to_bf16_bits(w)) for name, w in weights.items()})
    mixed = {name: ("BF16", to_bf16_bits(w)) for name, w in weights.items()}
    mixed[first] = ("F32", weights[first])
    write(prefix + "_mixed.safetensors", mixed)
    write(prefix + "_f64.safetensors", {name: ("F64", w.astype(np.float64))
                                        for name, w in weights.items()})


def check(got_path, expected_path):
    got, expected = read(got_path), read(expected_path)
    bad = 0
    for name, (dtype, data) in expected.items():
        want = widened(dtype, data)
        have = got[name][1]
        if got[name][0] != "F32" or have.tobytes() != want.astype("<f4").tobytes():
            print(f"FAIL: {name} ({dtype}) not loaded as its exact f32 values")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        make(sys.argv[2], sys.argv[3])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3]))
