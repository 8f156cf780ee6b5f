"""A minimal .safetensors reader (json + struct + NumPy), F32 only,
independent of trainc's runtime: an 8-byte little-endian header length, a JSON
header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the
raw little-endian data."""
import json
import struct

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
