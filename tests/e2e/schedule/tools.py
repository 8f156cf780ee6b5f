"""Helpers for the step-schedule tests (accumulate.sh, localsgd.sh, resume.sh):
.safetensors and .npy files, weight comparisons, and an independent NumPy
reference of softmax-regression training with accumulation windows.

usage: tools.py COMMAND ARGS...  (exit 0: check passed, 1: failed)
  data DIR N SEED                 x.npy f32[N,8], y.npy i32[N] (4 classes)
  init OUT SEED                   weights for `logits = linear(x, 4)`
  close A B RTOL                  max|a-b| <= RTOL * max|b| for every parameter
  same A B                        the parameters are bitwise equal
  same-state A B                  every tensor (optimizer state too) is bitwise equal
  differ A B                      some parameter differs
  reference DATA INIT ORDER B ACC EPOCHS LR MOMENTUM OUT
                                  NumPy (float64) training, windows as in docs/trainer.md
  log KEY STEP FILE               prints the value of KEY in FILE's record of step STEP
  param-bytes FILE                bytes of the parameters in a weights file
"""
import json
import struct
import sys

import numpy as np

STATE_PREFIX = "trainc."  # optimizer and outer-optimizer arrays in state files


def read_st(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + b:8 + n + e], "<f4").reshape(t["shape"])
    return out


def write_st(path, tensors, model="m"):
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, "<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    header["__metadata__"] = {"format": "pt", "trainc_model": model}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def params(path):
    return {k: v for k, v in read_st(path).items() if not k.startswith(STATE_PREFIX)}


def make_data(folder, n, seed):
    rng = np.random.default_rng(int(seed))
    x = rng.normal(size=(int(n), 8)).astype("<f4")
    y = np.argmax(x @ rng.normal(size=(8, 4)) + 0.5 * rng.normal(size=(int(n), 4)), 1)
    np.save(f"{folder}/x.npy", x)
    np.save(f"{folder}/y.npy", y.astype("<i4"))


def make_init(out, seed):
    rng = np.random.default_rng(int(seed))
    write_st(out, {"logits.weight": rng.normal(0, 0.3, (4, 8)), "logits.bias": rng.normal(0, 0.1, 4)})


def softmax_grad(w, b, x, y):
    """Gradient of the mean cross-entropy of x @ w.T + b over the rows."""
    z = x @ w.T + b
    z -= z.max(1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    p /= len(y)
    return p.T @ x, p.sum(0)


def reference(data, init, order_file, batch, acc, epochs, lr, momentum, out):
    """Epoch e visits rows order[e]; floor(N/B) micro-batches; windows of `acc`
    micro-batches, the last one of an epoch shorter; each window's gradient is
    that of the mean loss over all its examples; SGD with momentum."""
    x = np.load(f"{data}/x.npy").astype(np.float64)
    y = np.load(f"{data}/y.npy")
    p = {k: v.astype(np.float64) for k, v in read_st(init).items()}
    orders = [np.array(line.split(), dtype=np.int64) for line in open(order_file)]
    batch, acc, epochs = int(batch), int(acc), int(epochs)
    lr, momentum = float(lr), float(momentum)
    buf = {k: np.zeros_like(v) for k, v in p.items()}
    per_epoch = len(x) // batch
    for e in range(epochs):
        for first in range(0, per_epoch, acc):
            micro = min(acc, per_epoch - first)
            rows = orders[e][first * batch:(first + micro) * batch]
            gw, gb = softmax_grad(p["logits.weight"], p["logits.bias"], x[rows], y[rows])
            for k, g in (("logits.weight", gw), ("logits.bias", gb)):
                buf[k] = momentum * buf[k] + g
                p[k] = p[k] - lr * buf[k]
    write_st(out, p)


def max_rel_diff(a, b):
    pa, pb = params(a), params(b)
    assert pa.keys() == pb.keys(), (sorted(pa), sorted(pb))
    return max(np.abs(pa[k].astype(np.float64) - pb[k]).max() / max(np.abs(pb[k]).max(), 1e-30)
               for k in pa)


def same(a, b):
    pa, pb = params(a), params(b)
    return pa.keys() == pb.keys() and all(pa[k].tobytes() == pb[k].tobytes() for k in pa)


def log_value(key, step, path):
    for line in open(path):
        r = json.loads(line)
        if r.get("step") == int(step) and key in r:
            return r[key]
    raise SystemExit(f"{path}: no record of step {step} with '{key}'")


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "data":
        make_data(*args)
    elif cmd == "init":
        make_init(*args)
    elif cmd == "close":
        d = max_rel_diff(args[0], args[1])
        print(f"max relative difference {d:.3g} (tolerance {args[2]})")
        return 0 if d <= float(args[2]) else 1
    elif cmd == "same":
        return 0 if same(*args) else 1
    elif cmd == "same-state":
        a, b = read_st(args[0]), read_st(args[1])
        return 0 if a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in a) else 1
    elif cmd == "differ":
        return 1 if same(*args) else 0
    elif cmd == "reference":
        reference(*args)
    elif cmd == "log":
        print(log_value(*args))
    elif cmd == "param-bytes":
        print(sum(v.nbytes for v in params(args[0]).values()))
    else:
        raise SystemExit(f"unknown command {cmd}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
