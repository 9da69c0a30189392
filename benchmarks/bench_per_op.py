"""Per-op cost of the eager op layer: each common op through tapejax against the bare
``jax.numpy``/``jax.lax`` call it maps to, on small inputs (16-float vectors, a 16x16 matmul),
with no tape and under a tape watching the input.

CPU time (``time.process_time``, all threads) per call, the median of several repeats, the
tapejax and bare calls interleaved so that load drift hits both alike. What it reports is the
difference: the Python the op layer adds (conversion, dtype checks, ``bind``, the kernel's
program choice, the ``Tensor`` wrapping, and under a tape the recording).

    PYTHONPATH=$PWD python benchmarks/bench_per_op.py [--iters 3000] [--repeats 7] [--ops sin,exp]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

import tapejax as tf


def cases() -> dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]]:
    """name -> (tapejax op on (x, m), bare jnp op on (x, m)); ``x`` a 16-float vector, ``m`` 16x16."""
    c = {
        "add scalar": (lambda x, m: x + 1.0, lambda x, m: jnp.add(x, 1.0)),
        "mul": (lambda x, m: x * x, lambda x, m: jnp.multiply(x, x)),
        "sin": (lambda x, m: tf.sin(x), lambda x, m: jnp.sin(x)),
        "exp": (lambda x, m: tf.exp(x), lambda x, m: jnp.exp(x)),
        "tanh": (lambda x, m: tf.tanh(x), lambda x, m: jnp.tanh(x)),
        "relu": (lambda x, m: tf.nn.relu(x), lambda x, m: jnp.maximum(x, 0)),
        "reduce_sum": (lambda x, m: tf.reduce_sum(x), lambda x, m: jnp.sum(x)),
        "reduce_mean": (lambda x, m: tf.reduce_mean(x), lambda x, m: jnp.mean(x)),
        "reduce_mean axis": (lambda x, m: tf.reduce_mean(m, axis=1), lambda x, m: jnp.mean(m, axis=1)),
        "matmul 16x16": (lambda x, m: tf.matmul(m, m), lambda x, m: jnp.matmul(m, m)),
        "reshape": (lambda x, m: tf.reshape(x, (4, 4)), lambda x, m: jnp.reshape(x, (4, 4))),
        "transpose": (lambda x, m: tf.transpose(m), lambda x, m: jnp.transpose(m)),
        "cast": (lambda x, m: tf.cast(x, tf.float16), lambda x, m: x.astype(jnp.float16)),
        "x[i]": (lambda x, m: x[3], lambda x, m: x[3]),
        "x[a:b]": (lambda x, m: x[2:10], lambda x, m: x[2:10]),
        "concat": (lambda x, m: tf.concat([x, x], 0), lambda x, m: jnp.concatenate([x, x], 0)),
        "stack": (lambda x, m: tf.stack([x, x]), lambda x, m: jnp.stack([x, x])),
        "where": (lambda x, m: tf.where(x > 0.0, x, -x), lambda x, m: jnp.where(x > 0.0, x, -x)),
    }
    return c


def _per_call(fn: Callable[[Any, Any], Any], x: Any, m: Any, iters: int) -> float:
    c0 = time.process_time()
    for _ in range(iters):
        fn(x, m)
    return (time.process_time() - c0) / iters * 1e6


def measure(names: list[str], iters: int, repeats: int) -> list[dict]:
    rng = np.random.default_rng(0)
    xa = jnp.asarray(rng.standard_normal(16), jnp.float32)
    ma = jnp.asarray(rng.standard_normal((16, 16)), jnp.float32)
    xt, mt = tf.constant(np.asarray(xa)), tf.constant(np.asarray(ma))
    table = cases()
    rows = []
    for name in names:
        op, bare = table[name]
        for _ in range(3):  # compile and warm every program first
            op(xt, mt)
            bare(xa, ma)
            with tf.GradientTape() as tape:
                tape.watch(xt)
                tape.watch(mt)
                op(xt, mt)
        t_bare, t_op, t_tape = [], [], []
        for _ in range(repeats):
            t_bare.append(_per_call(bare, xa, ma, iters))
            t_op.append(_per_call(op, xt, mt, iters))
            with tf.GradientTape() as tape:
                tape.watch(xt)
                tape.watch(mt)
                t_tape.append(_per_call(op, xt, mt, iters))
            del tape  # its equations: one per call
        b, o, t = statistics.median(t_bare), statistics.median(t_op), statistics.median(t_tape)
        rows.append({"op": name, "bare": b, "eager": o, "tape": t, "over": o - b, "over_tape": t - b})
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| op | bare jnp µs | tapejax µs | over bare | under a tape µs | over bare |",
           "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['op']} | {r['bare']:.2f} | {r['eager']:.2f} | {r['over']:+.2f} | {r['tape']:.2f} | "
                   f"{r['over_tape']:+.2f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=3000, help="calls per timed run")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs per op (the median is reported)")
    ap.add_argument("--ops", default="", help="comma-separated subset of the ops (default: all)")
    ap.add_argument("--general", action="store_true", help="turn the op fast paths off (the general path, for A/B)")
    a = ap.parse_args(argv)
    if a.general:
        from tapejax._ops import _machinery

        _machinery.FAST_PATHS = False
    names = [n.strip() for n in a.ops.split(",")] if a.ops else list(cases())
    rows = measure(names, a.iters, a.repeats)
    print(f"{'general path' if a.general else 'fast paths'}; load average: {os.getloadavg()[0]:.2f}; {a.iters} calls x {a.repeats} repeats, median µs per call")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
