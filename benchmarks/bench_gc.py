"""Python's cycle collector in long eager loops: tapejax with and without the import-time freeze.

CPython's full collections walk every tracked object of the oldest generation. JAX's and
tapejax's modules leave about 125,000 (Keras 3 about 120,000 more); an eager loop's
short-lived containers age into that generation and set off a full collection every few dozen
steps (tapejax/_heap.py). ``import tapejax`` freezes its import-time objects out of those walks
(``gc.freeze``; ``TAPEJAX_GC_FREEZE=0`` turns that off).

Each (workload, implementation) runs in fresh processes pinned to one core (``taskset``), each
process measuring, over a loop of at least ``--min-loop-s`` seconds after 100 first steps: the
*mean* time per step (pauses of the collector are part of a long loop's time, so no median
within a run), the share of it spent in the collector (``gc.callbacks``), the number of full
collections and their mean pause. The table reports the median over ``--runs`` processes of
each figure, and the ratio of mean step times to PyTorch eager in the same invocation.
``keras_step`` is a Keras 3 MLP trained by an eager custom loop (``GradientTape``,
``apply_gradients``): the process imports ``tapejax.keras``, whose import freezes Keras's objects too.

    python benchmarks/bench_gc.py                                   # euler_loop, scalar_chain, mlp_step_small, keras_step
    python benchmarks/bench_gc.py --workloads euler_loop --impls tapejax,tapejax-nofreeze --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.bench_lazy import run_pinned  # noqa: E402  (one way to run a pinned child)

WORKLOADS = ["euler_loop", "scalar_chain", "mlp_step_small", "keras_step"]
# ``-nofreeze``: the same process with TAPEJAX_GC_FREEZE=0 (the collector as CPython leaves it).
IMPLS = ["tapejax", "tapejax-nofreeze", "lazy", "lazy-nofreeze", "jax.jit", "tf", "torch"]

_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, {root!r})
from benchmarks import run as R
workload, real, first_steps, min_loop_s, max_steps = {args!r}
lib = R.load_lib(real, "cpu", True)


def keras_step():
    # A Keras 3 MLP (32-32-32-1, batch 16) trained by an eager custom loop: TF's tutorial shape.
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    y = rng.standard_normal((16, 1)).astype(np.float32)
    if real == "torch":
        import torch
        model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = torch.mean(torch.square(model(xt) - yt))
            loss.backward()
            opt.step()
            return loss
        return step
    if real not in ("tapejax", "tf"):
        raise R.Unavailable("a Keras eager loop: tapejax, TF and PyTorch only")
    tf = lib.module
    model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(32, activation="relu"),
                                 tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD(0.01)
    loss_fn = tf.keras.losses.MeanSquaredError()
    xt, yt = tf.constant(x), tf.constant(y)

    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(yt, model(xt, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step


try:
    step = keras_step() if workload == "keras_step" else R.build_step(workload, real, lib, {{}}, False)
except R.Unavailable as e:
    print("RESULT " + json.dumps({{"error": "unavailable: " + str(e)}}))
    sys.exit(0)
pauses = []
began = [0.0]
def on_gc(phase, info):
    if phase == "start":
        began[0] = time.perf_counter()
    else:
        pauses.append((info["generation"], time.perf_counter() - began[0]))
gc.callbacks.append(on_gc)
t0 = time.perf_counter()
for _ in range(first_steps):
    lib.block(step())
first_s = time.perf_counter() - t0
first_gc = sum(p for _, p in pauses)
del pauses[:]
n = 0
t0 = time.perf_counter()
while n < max_steps and (n < 20 or time.perf_counter() - t0 < min_loop_s):
    lib.block(step())
    n += 1
loop_s = time.perf_counter() - t0
full = [p for g, p in pauses if g == 2]
print("RESULT " + json.dumps({{
    "mean_ms": loop_s / n * 1e3, "steps": n, "gc_share": sum(p for _, p in pauses) / loop_s,
    "full_collections_per_1000_steps": len(full) / n * 1e3, "full_pause_ms": (sum(full) / len(full) * 1e3) if full else 0.0,
    "first_s": first_s, "first_gc_share": first_gc / first_s, "frozen": gc.get_freeze_count()}}))
"""


def run_one(workload: str, impl: str, first_steps: int, min_loop_s: float, max_steps: int) -> dict:
    env = dict(os.environ)
    env["TAPEJAX_EXECUTION"] = "lazy" if impl.startswith("lazy") else "eager"
    env["TAPEJAX_GC_FREEZE"] = "0" if impl.endswith("-nofreeze") else "1"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    real = "tapejax" if impl.startswith(("tapejax", "lazy")) else impl
    return run_pinned(_CHILD.format(root=ROOT, args=(workload, real, first_steps, min_loop_s, max_steps)), env, 1800)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per (workload, implementation)")
    ap.add_argument("--first-steps", type=int, default=100)
    ap.add_argument("--min-loop-s", type=float, default=5.0)
    ap.add_argument("--max-steps", type=int, default=20000)
    a = ap.parse_args()
    impls = a.impls.split(",")
    workloads = a.workloads.split(",")
    runs: dict = {(w, i): [] for w in workloads for i in impls}
    for _ in range(a.runs):  # interleaved rounds: a slow minute of the machine hits every configuration
        for w in workloads:
            for i in impls:
                r = run_one(w, i, a.first_steps, a.min_loop_s, a.max_steps)
                runs[(w, i)].append(r)
                print(f"{w:16s} {i:18s} {json.dumps(r)}", file=sys.stderr)

    def med(w: str, i: str, k: str) -> float | None:
        vals = [r[k] for r in runs.get((w, i), []) if k in r]
        return statistics.median(vals) if vals else None

    print("| workload | implementation | ms per step (mean of a long loop) | × PyTorch | collector's share "
          "| full collections per 1000 steps | full pause, ms | first 100 steps, s (collector's share) |")
    print("|---|---|---|---|---|---|---|---|")
    for w in workloads:
        base = med(w, "torch", "mean_ms")
        for i in impls:
            m = med(w, i, "mean_ms")
            if m is None:
                err = next((r["error"] for r in runs[(w, i)] if "error" in r), "")
                print(f"| {w} | {i} | n/a ({err.splitlines()[-1][:80] if err else ''}) | | | | | |")
                continue
            ratio = f"{m / base:.2f}×" if base and i != "torch" else ""
            print(f"| {w} | {i} | {m:.3f} | {ratio} | {100 * med(w, i, 'gc_share'):.1f}% "
                  f"| {med(w, i, 'full_collections_per_1000_steps'):.1f} | {med(w, i, 'full_pause_ms'):.1f} "
                  f"| {med(w, i, 'first_s'):.2f} ({100 * med(w, i, 'first_gc_share'):.1f}%) |")
    print(f"\nmedians over {a.runs} fresh processes pinned to one core; each process: {a.first_steps} first steps, "
          f"then a loop of at least {a.min_loop_s:g} s (at most {a.max_steps} steps).")


if __name__ == "__main__":
    main()
