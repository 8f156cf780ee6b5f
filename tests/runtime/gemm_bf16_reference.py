#!/usr/bin/env python3
"""trc_gemm under bf16 against NumPy: runs gemm_bf16_cases (which writes
operands and trc_gemm's fp32 and bf16 results), then for every case checks

  * bf16 against A and B rounded to bf16 here (to 8 significant bits, ties to
    even, by np.round on frexp's mantissa: no bit tricks shared with the
    runtime) and multiplied in float64: within 1e-5 of the magnitude
    |A16| @ |B16| + |beta C0| (f32 accumulation of exact bf16 products);
  * bf16 against the fp32 result: within 2^-8 of the magnitude (each operand
    rounded by at most 2^-9 relative), and different from it somewhere;
  * the fp32 result fails the tight check (so the check can fail).

usage: gemm_bf16_reference.py GEMM_BF16_CASES WORKDIR"""
import os
import subprocess
import sys

import numpy as np


def to_bf16(x):
    """x rounded to bf16 (8 significant bits), ties to even, in float64."""
    mantissa, exponent = np.frexp(x.astype(np.float64))
    return np.ldexp(np.round(mantissa * 256.0), exponent - 8)


def op(stored, rows, cols, transpose):
    m = stored[:, :rows, :cols]
    return np.swapaxes(m, 1, 2) if transpose else m


def main():
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    run = subprocess.run([exe, work], check=True, capture_output=True, text=True)
    lines = run.stdout.split("\n")
    failures = 0
    for line in filter(None, lines):
        stem, batch, ta, tb, m, n, k, beta = line.split()
        batch, ta, tb, m, n, k = (int(v) for v in (batch, ta, tb, m, n, k))
        beta = float(beta)
        load = lambda what: np.load(os.path.join(work, f"{stem}_{what}.npy"))
        a = op(load("a"), k if ta else m, m if ta else k, ta)
        b = op(load("b"), n if tb else k, k if tb else n, tb)
        c0, fp32, bf16 = (load(w)[:, :m, :n].astype(np.float64) for w in ("c0", "fp32", "bf16"))
        a16, b16 = to_bf16(a), to_bf16(b)
        reference = a16 @ b16 + beta * c0
        magnitude = np.abs(a16) @ np.abs(b16) + abs(beta) * np.abs(c0)
        tight = np.max(np.abs(bf16 - reference) / magnitude)
        loose = np.max(np.abs(bf16 - fp32) / (np.abs(a) @ np.abs(b) + abs(beta) * np.abs(c0)))
        fp32_tight = np.max(np.abs(fp32 - reference) / magnitude)
        print(f"{stem}: bf16 vs reference {tight:.2e}, vs fp32 {loose:.2e}, "
              f"fp32 vs reference {fp32_tight:.2e}")
        if not tight <= 1e-5:
            print(f"FAIL {stem}: bf16 result off the bf16 reference by {tight:.3g} of magnitude")
            failures += 1
        if not 0 < loose <= 2.0**-8:
            print(f"FAIL {stem}: bf16 result off fp32 by {loose:.3g} (want (0, 2^-8])")
            failures += 1
        if fp32_tight <= 1e-5:
            print(f"FAIL {stem}: the fp32 result passes the bf16 check: it cannot tell them apart")
            failures += 1
    return 1 if failures or not lines[0] else 0


if __name__ == "__main__":
    sys.exit(main())
