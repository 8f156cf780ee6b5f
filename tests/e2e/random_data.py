#!/usr/bin/env python3
"""Random training data for any model, from the input table of its generated
trainer (the `inputs[]` of the .c or .cu trainc emitted): ROWS examples of
every input as DIR/NAME.npy; index inputs (class labels, token ids) below
their limit, u8 inputs over 0..255, f32 inputs standard normal.
usage: random_data.py TRAINER.c DIR ROWS [SEED]"""
import os
import re
import sys

import numpy as np

ROW = re.compile(r'\{\.name = "(\w+)", \.dtype = TRC_(F32|I32|U8), \.rank = (\d+), \.dims = \{([\d, ]+)\}, '
                 r'\.offset = \d+, \.example_bytes = \d+, \.index_limit = (\d+)\}')


def main():
    source, folder, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = np.random.default_rng(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    table = open(source).read().split("static const trc_input inputs[] = {", 1)[1].split("};", 1)[0]
    os.makedirs(folder, exist_ok=True)
    found = 0
    for name, dtype, _rank, dims, limit in ROW.findall(table):
        shape = (rows,) + tuple(int(d) for d in dims.split(","))[1:]
        limit = int(limit)
        if limit > 0:
            x = rng.integers(0, limit, size=shape).astype("<i4" if dtype == "I32" else "u1")
        elif dtype == "U8":
            x = rng.integers(0, 256, size=shape).astype("u1")
        elif dtype == "I32":
            x = rng.integers(0, 10, size=shape).astype("<i4")
        else:
            x = rng.standard_normal(size=shape).astype("<f4")
        np.save(os.path.join(folder, name + ".npy"), x)
        found += 1
    if found == 0:
        sys.exit(f"{source}: no inputs table found")


main()
