"""The benchmark's JAX side for the GPTs (gpt.nn, gpt124m.nn without dropout),
written as a JAX user writes a training step: the parameters as a pytree,
one `jax.jit`-compiled step (forward, `jax.value_and_grad`, optax's
clip_by_global_norm and adamw) with the parameters and optimizer state
donated, `jax.nn.dot_product_attention(is_causal=True)`, exact GELU, the tied
output layer as `x @ wte.T`. It loads a trainc trainer's initial weights
(.safetensors) under trainc's names, so both sides start from the same point.

In bf16, mixed precision as JAX users write it (jmp's policy: parameters and
optimizer state in fp32, compute in bf16, loss in fp32; Flax's `dtype=bf16,
param_dtype=float32` layers): the loss casts the fp32 parameters to bf16, so
the matmuls, GELU and residual stream run in bf16 and the gradients come back
in fp32 through the casts; the LayerNorms stay in fp32 (their parameters, and
the statistics, as Flax's LayerNorm and Haiku's advice for norms keep them),
`jax.nn.dot_product_attention` takes its softmax in fp32, and the
cross-entropy takes the logits in fp32. No loss scaling (bf16 needs none).

  step_fn(weights, heads, adamw, schedule, clip, total_steps, precision)
      -> (step, params, opt_state)
  step(params, opt_state, tokens, targets) -> (params, opt_state, loss)
"""
import jax
import jax.numpy as jnp
import optax


COMPUTE = {"fp32": jnp.float32, "bf16": jnp.bfloat16}


def _layernorm(x, w, b, eps=1e-5):
    """In fp32 whatever x's dtype; the result in x's dtype."""
    y = x.astype(jnp.float32)
    mean = y.mean(-1, keepdims=True)
    var = ((y - mean) ** 2).mean(-1, keepdims=True)
    return ((y - mean) * jax.lax.rsqrt(var + eps) * w + b).astype(x.dtype)


def _linear(p, name, x):
    y = x @ p[name + ".weight"].T
    return y + p[name + ".bias"] if name + ".bias" in p else y


def _block(p, prefix, heads, x):
    b, t, c = x.shape
    h = _layernorm(x, p[prefix + ".ln_1.weight"], p[prefix + ".ln_1.bias"])
    q, k, v = (_linear(p, f"{prefix}.attn.{n}", h).reshape(b, t, heads, c // heads) for n in "qkv")
    y = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(b, t, c)
    x = x + _linear(p, prefix + ".attn.proj", y)
    h = _layernorm(x, p[prefix + ".ln_2.weight"], p[prefix + ".ln_2.bias"])
    h = jax.nn.gelu(_linear(p, prefix + ".fc", h), approximate=False)
    return x + _linear(p, prefix + ".proj", h)


def _loss(p, heads, depth, compute, tokens, targets):
    p = {k: v if "ln_" in k else v.astype(compute) for k, v in p.items()}  # LayerNorms' stay fp32
    x = p["wte"][tokens] + p["wpe"][: tokens.shape[1]]
    for i in range(depth):
        x = _block(p, f"block.{i}", heads, x)
    logits = (_layernorm(x, p["ln_f.weight"], p["ln_f.bias"]) @ p["wte"].T).astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def _schedule(lr, kind, warmup, min_lr, total):
    """Hugging Face's warm-up then constant / linear / cosine decay, with a floor
    (bench/../tests/torch/parity.py's schedule_factor, in jnp)."""
    def at(step):
        warm = step / max(warmup, 1)
        progress = jnp.clip((step - warmup) / max(total - warmup, 1), 0.0, 1.0)
        decay = {"constant": 1.0, "linear": 1.0 - progress,
                 "cosine": 0.5 * (1.0 + jnp.cos(jnp.pi * progress))}[kind]
        after = min_lr / lr + (1.0 - min_lr / lr) * decay
        return lr * jnp.where(step < warmup, warm, after)
    return at


def step_fn(weights, heads, adamw, schedule, clip, total_steps, precision):
    """weights: {trainc name: np.ndarray}; adamw, schedule, clip as parity.compiled_adamw;
    precision: "fp32" or "bf16" (the compute dtype; parameters and optimizer state are fp32)."""
    depth = sum(1 for k in weights if k.startswith("block.") and k.endswith(".ln_1.weight"))
    params = {k: jnp.asarray(v) for k, v in weights.items()}
    kind, warmup, min_lr = schedule
    decay_mask = {k: v.ndim >= 2 for k, v in params.items()}
    tx = optax.adamw(_schedule(adamw["lr"], kind, warmup, min_lr, total_steps),
                     b1=adamw["betas"][0], b2=adamw["betas"][1], eps=adamw["eps"],
                     weight_decay=adamw["weight_decay"], mask=decay_mask)
    if clip > 0:
        tx = optax.chain(optax.clip_by_global_norm(clip), tx)
    opt_state = tx.init(params)

    def step(params, opt_state, tokens, targets):
        loss, grads = jax.value_and_grad(_loss)(params, heads, depth, COMPUTE[precision], tokens,
                                                targets)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return jax.jit(step, donate_argnums=(0, 1)), params, opt_state
