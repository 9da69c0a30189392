"""The benchmark workloads: their data, and their TF-style source text.

Every TF-style function here takes the module as its first argument ``tf`` and
is run unchanged as ``import tensorflow as tf`` and as ``import tapejax as tf``
(eagerly, and wrapped in ``tf.function``), so both libraries execute exactly the
same source text. The pure-JAX and PyTorch versions of the same math live in
``_workloads_jax.py`` and ``_workloads_torch.py``.

This module imports only NumPy: the benchmark runner imports it in every worker
process, whatever library that process measures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# --------------------------------------------------------------------------
# Sizes. ``smoke`` (the test suite) shrinks only what would be slow to run once.

SCALAR_CHAIN_BLOCKS = 50  # 4 ops a block (sin, scale, add, tanh): 200 elementwise ops
MLP_SIZES = {"mlp_step": ((784, 256, 256, 10), 128), "mlp_step_small": ((32, 32, 32, 1), 16)}
MLP_LR = 0.01
JACOBIAN_N = 256
BATCH_JACOBIAN_D = 32
BATCH_JACOBIAN_SIZES = {"batch_jacobian": 64, "batch_jacobian_b16": 16, "batch_jacobian_b256": 256}
HESSIAN_N = 1000
MEMORY_MLP_STEPS = 1000
MEMORY_CHAIN_OPS = 10_000
# Explicit Euler steps of the damped oscillator (about 10 recorded ops each): ``bench_lazy.py``'s
# solver loop. Not in WORKLOADS: unrolled into one XLA program (``tapejax.function``, ``jax.jit``
# of the Python loop) its compile takes minutes on CPU (see ``_workloads_jax.make_euler_loop``).
EULER_STEPS = 100


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    # Implementations that make sense for it (the runner intersects with --impls).
    impls: tuple
    # The reference implementation whose gradients every other one must match.
    reference: str = "jax.jit"
    # Relative tolerance: max|a - ref| <= rtol * max(|ref|) + 1e-30, per output array.
    rtol: float = 1e-4
    kind: str = "time"  # "time", "overhead" (record_overhead) or "memory"
    ops_per_step: int = 0
    notes: str = ""  # what the reader of the table should know (not rendered)


TIMED_IMPLS = ("tapejax", "tapejax.function", "jax.jit", "jax", "tf", "tf.function", "torch")

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload("scalar_chain", "200 elementwise ops (sin, *1.5, +0.1, tanh) on a watched scalar; dy/dx",
                 TIMED_IMPLS, rtol=1e-4),
        Workload("mlp_step", "MLP 784-256-256-10, batch 128, relu, softmax cross-entropy; 6 gradients + SGD update",
                 TIMED_IMPLS, rtol=2e-4),
        Workload("mlp_step_small", "MLP 32-32-32-1, batch 16, relu, mean squared error; 6 gradients + SGD update",
                 TIMED_IMPLS, rtol=2e-4,
                 notes="one output unit: a softmax over one logit is constant, so this size uses a squared error"),
        Workload("jacobian", "Jacobian of tanh(W x + b) * x, R^256 -> R^256 (record + jacobian)", TIMED_IMPLS,
                 rtol=1e-4, notes="jax.jit is jax.jit(jax.jacrev(f)); torch is torch.autograd.functional.jacobian"),
        Workload("batch_jacobian", "batch_jacobian of tanh(x @ W), batch 64, 32 -> 32", TIMED_IMPLS, rtol=1e-4,
                 notes="jax.jit is jax.jit(jax.vmap(jax.jacrev(f)))"),
        Workload("batch_jacobian_b16", "batch_jacobian sweep, batch 16", TIMED_IMPLS, rtol=1e-4),
        Workload("batch_jacobian_b256", "batch_jacobian sweep, batch 256", TIMED_IMPLS, rtol=1e-4),
        Workload("hessian_nested", "outer.gradient(inner.gradient(sum(sin(x) * x**3), x), x), x of size 1000",
                 TIMED_IMPLS, rtol=1e-4),
        Workload("record_overhead", "forward of scalar_chain (200 ops): under a tape, without a tape, bare jnp",
                 ("tapejax", "tf", "torch"), kind="overhead", ops_per_step=4 * SCALAR_CHAIN_BLOCKS),
        Workload("memory_mlp", f"peak RSS over {MEMORY_MLP_STEPS} eager mlp_step iterations",
                 ("tapejax", "tf", "torch"), kind="memory"),
        Workload("memory_chain", f"a persistent tape over a {MEMORY_CHAIN_OPS}-op scalar chain, then 2 gradients",
                 ("tapejax", "tf", "torch"), kind="memory"),
    ]
}


# --------------------------------------------------------------------------
# Data: deterministic NumPy arrays, identical in every process.


def scalar_chain_data() -> dict:
    return {"x": np.float32(0.5)}


def mlp_data(name: str) -> dict:
    sizes, batch = MLP_SIZES[name]
    rng = np.random.default_rng(0)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        params.append((rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32))
        params.append((0.1 * rng.standard_normal(fan_out)).astype(np.float32))
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    if sizes[-1] > 1:
        y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
        loss = "xent"
    else:
        y = rng.standard_normal((batch, 1)).astype(np.float32)
        loss = "mse"
    return {"params": params, "x": x, "y": y, "lr": MLP_LR, "loss": loss}


def jacobian_data() -> dict:
    n = JACOBIAN_N
    rng = np.random.default_rng(1)
    return {
        "W": (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32),
        "b": rng.standard_normal(n).astype(np.float32),
        "x": rng.standard_normal(n).astype(np.float32),
    }


def batch_jacobian_data(batch: int) -> dict:
    d = BATCH_JACOBIAN_D
    rng = np.random.default_rng(2)
    return {
        "W": (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32),
        "x": rng.standard_normal((batch, d)).astype(np.float32),
    }


def hessian_data() -> dict:
    rng = np.random.default_rng(3)
    return {"x": rng.uniform(-2.0, 2.0, HESSIAN_N).astype(np.float32)}


# --------------------------------------------------------------------------
# TF-style source text: the same lines run as TensorFlow and as tapejax.


def scalar_chain_forward(tf, x, n_blocks):
    y = x
    for _ in range(n_blocks):
        y = tf.sin(y)
        y = y * 1.5
        y = y + 0.1
        y = tf.tanh(y)
    return y


def scalar_chain_step(tf, x, n_blocks):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = scalar_chain_forward(tf, x, n_blocks)
    return y, tape.gradient(y, x)


def softmax_xent(tf, labels, logits, builtin):
    if builtin:
        return tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return tf.reduce_logsumexp(logits, axis=-1) - tf.reduce_sum(labels * logits, axis=-1)


def mlp_loss(tf, variables, x, y, loss_kind, builtin_xent):
    h = x
    n_layers = len(variables) // 2
    for i in range(n_layers):
        h = tf.matmul(h, variables[2 * i]) + variables[2 * i + 1]
        if i < n_layers - 1:
            h = tf.nn.relu(h)
    if loss_kind == "xent":
        return tf.reduce_mean(softmax_xent(tf, y, h, builtin_xent))
    return tf.reduce_mean(tf.square(h - y))


def mlp_step(tf, variables, x, y, lr, loss_kind, builtin_xent):
    with tf.GradientTape() as tape:
        loss = mlp_loss(tf, variables, x, y, loss_kind, builtin_xent)
    grads = tape.gradient(loss, variables)
    for v, g in zip(variables, grads):
        v.assign_sub(lr * g)
    return loss, grads


def jacobian_step(tf, W, b, x, n):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.tanh(tf.reshape(tf.matmul(W, tf.reshape(x, [n, 1])), [n]) + b) * x
    return tape.jacobian(y, x)


def batch_jacobian_step(tf, W, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.tanh(tf.matmul(x, W))
    return tape.batch_jacobian(y, x)


def hessian_nested_step(tf, x):
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(tf.sin(x) * x**3)
        g = inner.gradient(y, x)
    return outer.gradient(g, x)


def euler_data() -> dict:
    return {"k": np.float32(2.0), "x0": np.array([1.0, 0.0], np.float32)}


def euler_energy(tf, k, x, n):
    """The oscillator's energy after ``n`` Euler steps from ``x`` (``k`` the spring constant)."""
    for _ in range(n):
        x = x + 0.01 * tf.stack([x[1], -k * x[0] - 0.1 * x[1]])
    return tf.reduce_sum(x * x)


def euler_step(tf, k, x0, n):
    with tf.GradientTape() as tape:
        loss = euler_energy(tf, k, x0, n)
    return loss, tape.gradient(loss, k)


def record_forward_taped(tf, x, n_blocks):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = scalar_chain_forward(tf, x, n_blocks)
    return y


def chain_persistent_tape(tf, x, n_blocks):
    tape = tf.GradientTape(persistent=True)
    with tape:
        tape.watch(x)
        y = scalar_chain_forward(tf, x, n_blocks)
    return tape, y


def has_builtin_xent(tf) -> bool:
    """Whether ``tf.nn.softmax_cross_entropy_with_logits`` exists (tapejax may not have it yet)."""
    return hasattr(getattr(tf, "nn", None), "softmax_cross_entropy_with_logits")
