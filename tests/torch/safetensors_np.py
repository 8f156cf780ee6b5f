"""A minimal .safetensors reader and writer (json + struct + NumPy), F32 only,
independent of trainc's runtime: an 8-byte little-endian header length, a JSON
header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the
raw little-endian data. As a command, for the negative tests:

  safetensors_np.py names   FILE [MIN_RANK]     the tensors' names, in file order (only
                                                those of rank >= MIN_RANK)
  safetensors_np.py perturb IN OUT NAME SIZE    a copy with tensor NAME plus seeded random
                                                noise of SIZE times its norm (a relative
                                                error of SIZE, spread over every element),
                                                or without NAME (SIZE drop)"""
import json
import struct
import sys

import numpy as np


def read(path):
    """Returns ({name: float32 array} in file order, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name!r} is {entry['dtype']}, expected F32")
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        if not 0 <= begin <= end <= len(data) or end - begin != 4 * int(np.prod(shape)):
            raise ValueError(f"{path}: tensor {name!r}: bad data_offsets {begin, end}")
        tensors[name] = np.frombuffer(data[begin:end], "<f4").reshape(shape).copy()
    return tensors, meta


def write(path, tensors, meta=None):
    """Writes {name: array} as F32, in dict order, header padded to 8 bytes."""
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(array)),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    header["__metadata__"] = meta or {}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def names(path, min_rank="0"):
    print("\n".join(k for k, v in read(path)[0].items() if v.ndim >= int(min_rank)))


def perturb(in_path, out_path, name, size):
    tensors, meta = read(in_path)
    if name not in tensors:
        sys.exit(f"safetensors_np.py: no tensor {name!r} in {in_path}")
    if size == "drop":
        del tensors[name]
    else:
        t = tensors[name]
        noise = np.random.default_rng(0).standard_normal(t.shape)
        t += (float(size) * max(np.linalg.norm(t), 1e-6) / np.linalg.norm(noise) * noise).astype(t.dtype)
    write(out_path, tensors, meta)


if __name__ == "__main__":
    commands = {"names": names, "perturb": perturb}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
