"""Memory over a long eager training loop, and under a shape-changing loop (issue 11).

Run as a script from the repository root:

    python benchmarks/bench_memory.py                 # 10,000 steps
    python benchmarks/bench_memory.py --steps 2000    # shorter
    python benchmarks/bench_memory.py --plot mem.png  # also draw the curves (matplotlib)

* steady: a linear-regression step (tape, gradient of two variables, two assign_sub) run
  ``--steps`` times after 200 warm-up steps, twice. The first pass records, every ``--every``
  steps, the process RSS, the number of live (gc-tracked) Python objects, the number of
  allocated memory blocks and the elapsed time; the second, under tracemalloc, the Python heap
  (current and peak). Growth is relative to the start of each pass.
  Flat means: growth at the end is noise (a few KiB of heap), not proportional to the steps.
* shapes: a loop whose input shape changes every step (cycling through 10 shapes) with the
  replay cache bounded to 3 programs: cache statistics, RSS, and how many lowered/compiled
  programs jax itself keeps (``jax._src.pjit._pjit_lower``), which must not grow.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import tapejax as tf  # noqa: E402


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def steady(steps: int, every: int) -> list[tuple]:
    rng = np.random.default_rng(0)
    X = tf.constant(rng.normal(size=(8, 3)).astype(np.float32))
    Y = tf.constant(rng.normal(size=(8, 1)).astype(np.float32))
    w = tf.Variable(np.zeros((3, 1), np.float32))
    b = tf.Variable(np.zeros((1,), np.float32))

    def step():
        with tf.GradientTape() as t:
            loss = tf.reduce_mean((tf.matmul(X, w) + b - Y) ** 2)
        gw, gb = t.gradient(loss, [w, b])
        w.assign_sub(0.05 * gw)
        b.assign_sub(0.05 * gb)

    for _ in range(200):
        step()
    gc.collect()
    # Two passes of `steps` steps: RSS, objects and time untraced (tracemalloc's own bookkeeping
    # would grow the RSS and slow the steps), then the Python heap under tracemalloc.
    untraced = []
    r0, o0, b0 = rss_kib(), len(gc.get_objects()), sys.getallocatedblocks()
    t0 = time.perf_counter()
    for k in range(1, steps + 1):
        step()
        if k % every == 0:
            # Minus the records this loop has kept so far (one tuple per checkpoint).
            untraced.append((rss_kib() - r0, len(gc.get_objects()) - o0 - len(untraced),
                             sys.getallocatedblocks() - b0, time.perf_counter() - t0))
    rows = []
    tracemalloc.start()
    tm0 = tracemalloc.get_traced_memory()[0]
    for k in range(1, steps + 1):
        step()
        if k % every == 0:
            cur, peak = tracemalloc.get_traced_memory()
            rss, objs, blocks, s = untraced[len(rows)]
            rows.append((k, cur - tm0, peak - tm0, rss, objs, blocks, s))
    tracemalloc.stop()
    return rows


def shapes(reps: int) -> list[tuple]:
    from jax._src import pjit

    tf.replay_cache_clear()
    tf.set_replay_cache_size(3)
    rows = []

    def step(n):
        x = tf.constant(np.linspace(0, 1, n).astype(np.float32))
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.reduce_sum(tf.sin(x) * x)
        t.gradient(y, x).numpy()

    for rep in range(reps):
        for n in range(1, 11):
            step(n)
        gc.collect()
        info = tf.replay_cache_info()
        rows.append((rep, info.hits, info.misses, info.evictions, info.size, rss_kib(),
                     pjit._pjit_lower.cache_info().currsize))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--every", type=int, default=1_000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--plot", default=None, help="write the steady-loop curves to this PNG")
    a = p.parse_args()

    rows = steady(a.steps, a.every)
    print(f"steady eager training loop, {a.steps} steps (after 200 warm-up steps; s = untraced time):")
    print(f"{'step':>7} {'heap KiB':>9} {'heap peak KiB':>14} {'RSS KiB':>8} {'objects':>8} {'blocks':>7} {'s':>6}")
    for k, cur, peak, rss, objs, blocks, s in rows:
        print(f"{k:>7} {cur / 1024:>9.1f} {peak / 1024:>14.1f} {rss:>8} {objs:>8} {blocks:>7} {s:>6.1f}")
    print()
    print("shape-changing loop, 10 shapes per pass, replay cache bounded to 3:")
    print(f"{'pass':>5} {'hits':>5} {'misses':>7} {'evictions':>10} {'size':>5} {'RSS KiB':>9} {'jax lowered':>12}")
    for rep, h, m, e, size, rss, low in shapes(a.reps):
        print(f"{rep:>5} {h:>5} {m:>7} {e:>10} {size:>5} {rss:>9} {low:>12}")

    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ks = [r[0] for r in rows]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(ks, [r[1] / 1024 for r in rows], label="Python heap growth (tracemalloc), KiB")
        ax.plot(ks, [r[3] for r in rows], label="RSS growth (untraced pass), KiB")
        ax.set_xlabel("training step")
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.plot)
        print(f"wrote {a.plot}")


if __name__ == "__main__":
    main()
