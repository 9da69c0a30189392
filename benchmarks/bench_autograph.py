#!/usr/bin/env python
"""A converted training loop under ``tapejax.function`` (autograph turns the Python
``for i in tf.range(steps)`` and ``if loss > ...`` into ``tf.while_loop``/``tf.cond``)
against the same loop written by hand with ``lax.fori_loop``/``lax.cond`` and
``jax.value_and_grad`` under ``jax.jit``. Same data, same run, same process.

    python benchmarks/bench_autograph.py [--steps 50] [--repeats 20]

Prints the median seconds per call of each and the ratio tapejax / lax.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def data(n: int = 256, d: int = 32, h: int = 64, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.normal(size=(n, d)).astype(np.float32),
        "y": rng.normal(size=(n, 1)).astype(np.float32),
        "w1": (rng.normal(size=(d, h)) * 0.1).astype(np.float32),
        "w2": (rng.normal(size=(h, 1)) * 0.1).astype(np.float32),
    }


def tapejax_loop(D: dict):
    import tapejax as tf

    w1, w2 = tf.Variable(D["w1"]), tf.Variable(D["w2"])
    x, y = tf.constant(D["x"]), tf.constant(D["y"])

    @tf.function
    def train(steps):
        total = tf.constant(0.0)
        for i in tf.range(steps):
            with tf.GradientTape() as t:
                loss = tf.reduce_mean((tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2) - y) ** 2)
            g1, g2 = t.gradient(loss, [w1, w2])
            if loss > 0.5:
                lr = 0.05
            else:
                lr = 0.01
            w1.assign_sub(lr * g1)
            w2.assign_sub(lr * g2)
            total += loss
        return total

    def run(steps: int) -> float:
        return float(train(tf.constant(steps)))

    return run, lambda: (w1.numpy(), w2.numpy())


def lax_loop(D: dict):
    import jax
    import jax.numpy as jnp
    from jax import lax

    x, y = jnp.asarray(D["x"]), jnp.asarray(D["y"])
    state = {"w": (jnp.asarray(D["w1"]), jnp.asarray(D["w2"]))}

    def loss_fn(w):
        w1, w2 = w
        return jnp.mean((jax.nn.relu(x @ w1) @ w2 - y) ** 2)

    @jax.jit
    def train(w, steps):
        def body(i, carry):
            w, total = carry
            loss, g = jax.value_and_grad(loss_fn)(w)
            lr = lax.cond(loss > 0.5, lambda: jnp.float32(0.05), lambda: jnp.float32(0.01))
            w = jax.tree_util.tree_map(lambda p, gp: p - lr * gp, w, g)
            return w, total + loss

        return lax.fori_loop(0, steps, body, (w, jnp.float32(0.0)))

    def run(steps: int) -> float:
        w, total = train(state["w"], steps)
        state["w"] = w
        return float(total)

    return run, lambda: tuple(np.asarray(p) for p in state["w"])


def median_seconds(fns: list, steps: int, repeats: int) -> list:
    """Median seconds per call of each function, timed alternately (a load spike on a
    shared machine then hits both, not one)."""
    for fn in fns:
        fn(steps)  # compile
    times: list = [[] for _ in fns]
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn(steps)
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times], [min(t) for t in times]


def main(argv: list | None = None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args(argv)
    D = data()
    tj, tj_w = tapejax_loop(D)
    lx, lx_w = lax_loop(D)
    # Same numbers first (one call each from the same start).
    l1, l2 = tj(a.steps), lx(a.steps)
    assert abs(l1 - l2) <= 1e-3 * max(1.0, abs(l2)), (l1, l2)
    for p, q in zip(tj_w(), lx_w()):
        np.testing.assert_allclose(p, q, rtol=1e-3, atol=1e-5)
    (t_tj, t_lx), (m_tj, m_lx) = median_seconds([tj, lx], a.steps, a.repeats)
    res = {"tapejax.function (autograph)": t_tj, "jax.jit + lax by hand": t_lx, "ratio": t_tj / t_lx,
           "ratio_min": m_tj / m_lx}
    print(f"{a.steps}-step training loop, median of {a.repeats}: tapejax.function {t_tj * 1e3:.3f} ms, "
          f"lax by hand {t_lx * 1e3:.3f} ms, ratio {t_tj / t_lx:.3f} (min: {m_tj * 1e3:.3f} / {m_lx * 1e3:.3f} ms, "
          f"ratio {m_tj / m_lx:.3f})")
    return res


if __name__ == "__main__":
    main()
