"""Benchmarks for GradientTape.jacobian / batch_jacobian (issue 3).

Run as a script from the repository root:

    python benchmarks/bench_jacobian.py            # everything
    python benchmarks/bench_jacobian.py --quick    # fewer repeats
    python benchmarks/bench_jacobian.py --only jacobian,batch,sweep,switch,memory

Every figure is the median of ``--repeats`` timed runs after ``--warmup``
untimed ones, blocking on the result (``.numpy()``), in milliseconds.

* jacobian: f(x) = tanh(W x + b) * x, R^256 -> R^256. tapejax (record + jacobian;
  and the jacobian call alone) vs TF eager (tape + jacobian, pfor) vs
  ``jax.jit(jax.jacrev(f))`` (and, for reference, the TF code under ``tf.function``).
* batch: y = tanh(x @ W), batch 64, 32 -> 32. tapejax batch_jacobian vs TF
  eager batch_jacobian (pfor) vs ``jax.jit(jax.vmap(jax.jacrev(f_example)))``.
* sweep: batch_jacobian for b = 16, 64, 256, d = 32 and 128 (time and XLA FLOPs per
  example should be flat: the cost is one per-example Jacobian times b), next to the
  full [b*y, b*x] Jacobian (quadratic in b), which batch_jacobian avoids.
* switch: reverse vs forward direction for y = tanh(Wx)*sin(Wx)*|x|^2, n_in=256,
  n_out = n_in * r, to place the jacrev/jacfwd switch (``_jacobian.FWD_RATIO``).
* memory: experimental_use_pfor=False with parallel_iterations chunks vs one
  vectorized program (compiled peak temp memory from XLA's memory analysis).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tapejax as ttf  # noqa: E402
from tapejax._tf import _jacobian  # noqa: E402


def median_ms(fn, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts)


def load_tf():
    try:
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")
        return tf
    except Exception as err:  # pragma: no cover - depends on the environment
        print(f"(TensorFlow not importable, TF columns skipped: {err})")
        return None


# --------------------------------------------------------------------------


def bench_jacobian(tf, warmup: int, repeats: int) -> dict:
    n = 256
    rng = np.random.default_rng(0)
    W = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    x0 = rng.standard_normal(n).astype(np.float32)

    Wt, bt, xt = ttf.constant(W), ttf.constant(b), ttf.constant(x0)

    def ours():
        with ttf.GradientTape() as g:
            g.watch(xt)
            y = ttf.tanh(ttf.reshape(ttf.matmul(Wt, ttf.reshape(xt, [n, 1])), [n]) + bt) * xt
        return g.jacobian(y, xt).numpy()

    Wj, bj, xj = jnp.asarray(W), jnp.asarray(b), jnp.asarray(x0)
    jac = jax.jit(jax.jacrev(lambda x: jnp.tanh(Wj @ x + bj) * x))

    def jax_ref():
        return np.asarray(jac(xj).block_until_ready())

    with ttf.GradientTape(persistent=True) as pg:
        pg.watch(xt)
        py = ttf.tanh(ttf.reshape(ttf.matmul(Wt, ttf.reshape(xt, [n, 1])), [n]) + bt) * xt

    def ours_call_only():
        # The forward pass recorded once, outside the timing: only the compiled Jacobian.
        return pg.jacobian(py, xt).numpy()

    ref = jax_ref()
    np.testing.assert_allclose(ours(), ref, rtol=1e-4, atol=1e-5)
    res = {
        "tapejax": median_ms(ours, warmup, repeats),
        "tapejax jacobian() call only": median_ms(ours_call_only, warmup, repeats),
        "jax.jit(jacrev)": median_ms(jax_ref, warmup, repeats),
    }
    if tf is not None:
        Wf, bf, xf = tf.constant(W), tf.constant(b), tf.constant(x0)

        def tf_eager():
            with tf.GradientTape() as g:
                g.watch(xf)
                y = tf.tanh(tf.reshape(tf.matmul(Wf, tf.reshape(xf, [n, 1])), [n]) + bf) * xf
            return g.jacobian(y, xf)

        tf_graph = tf.function(tf_eager)
        np.testing.assert_allclose(tf_eager().numpy(), ref, rtol=1e-4, atol=1e-5)
        res["TF eager (pfor)"] = median_ms(lambda: tf_eager().numpy(), max(1, warmup // 2), max(3, repeats // 3))
        res["TF tf.function (pfor)"] = median_ms(lambda: tf_graph().numpy(), warmup, repeats)
    return res


def _batch_problem(bsz: int, d: int = 32):
    rng = np.random.default_rng(1)
    W = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    x0 = rng.standard_normal((bsz, d)).astype(np.float32)
    return W, x0


def _ours_batch(W, x0):
    Wt, xt = ttf.constant(W), ttf.constant(x0)

    def ours():
        with ttf.GradientTape() as g:
            g.watch(xt)
            y = ttf.tanh(ttf.matmul(xt, Wt))
        return g.batch_jacobian(y, xt).numpy()

    return ours


def bench_batch(tf, warmup: int, repeats: int, bsz: int = 64) -> dict:
    W, x0 = _batch_problem(bsz)
    ours = _ours_batch(W, x0)
    Wj, xj = jnp.asarray(W), jnp.asarray(x0)
    bjac = jax.jit(jax.vmap(jax.jacrev(lambda x: jnp.tanh(x @ Wj))))

    def jax_ref():
        return np.asarray(bjac(xj).block_until_ready())

    ref = jax_ref()
    np.testing.assert_allclose(ours(), ref, rtol=1e-4, atol=1e-5)
    res = {"tapejax": median_ms(ours, warmup, repeats), "jax.jit(vmap(jacrev))": median_ms(jax_ref, warmup, repeats)}
    if tf is not None:
        Wf, xf = tf.constant(W), tf.constant(x0)

        def tf_eager():
            with tf.GradientTape() as g:
                g.watch(xf)
                y = tf.tanh(tf.matmul(xf, Wf))
            return g.batch_jacobian(y, xf)

        tf_graph = tf.function(tf_eager)
        np.testing.assert_allclose(tf_eager().numpy(), ref, rtol=1e-4, atol=1e-5)
        res["TF eager (pfor)"] = median_ms(lambda: tf_eager().numpy(), max(1, warmup // 2), max(3, repeats // 3))
        res["TF tf.function (pfor)"] = median_ms(lambda: tf_graph().numpy(), warmup, repeats)
    return res


def _bj_flops(W, x0) -> float:
    """FLOPs of the compiled batch_jacobian program (XLA's cost analysis): deterministic, unlike time."""
    x = ttf.constant(x0)
    with ttf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = ttf.tanh(ttf.matmul(x, ttf.constant(W)))
    sl, _ = g._cut(g._tape, [y], [x])
    key = ("batch_jacobian", sl.code, sl.diff, sl.groups, sl.target_slots, "rev", None)
    cost = jax.jit(_jacobian._make_batch_jacobian(key)).lower(list(sl.leaf_vals), []).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost.get("flops", float("nan")))


def bench_sweep(warmup: int, repeats: int, sizes=(16, 64, 256), dims=(32, 128)) -> dict:
    out = {}
    for d in dims:
        for bsz in sizes:
            W, x0 = _batch_problem(bsz, d)
            Wj, xj = jnp.asarray(W), jnp.asarray(x0)
            ours = _ours_batch(W, x0)
            # The full Jacobian of the batched function: what batch_jacobian avoids.
            full = jax.jit(jax.jacrev(lambda x: jnp.tanh(x @ Wj)))
            per_ex = jax.jit(jax.vmap(jax.jacrev(lambda r: jnp.tanh(r @ Wj))))
            row = {
                "tapejax": median_ms(ours, warmup, repeats),
                "jax.jit(vmap(jacrev))": median_ms(lambda: np.asarray(per_ex(xj)), warmup, repeats),
            }
            if d * bsz <= 32 * 256:  # the full Jacobian is (b*d)^2 floats: 256 MiB at b=256, d=32
                row["full jacrev [b*y, b*x]"] = median_ms(lambda: np.asarray(full(xj)), 1, max(3, repeats // 4))
            row["MFLOP"] = _bj_flops(W, x0) / 1e6
            out[(d, bsz)] = row
    return out


def bench_switch(warmup: int, repeats: int, n_in: int = 256, ratios=(0.25, 0.5, 1, 2, 4)) -> dict:
    """The compiled jacobian program in each direction (called directly, blocking), so that the
    tape's own per-call overhead, identical in both, does not blur the comparison."""
    out = {}
    for r in ratios:
        n_out = int(n_in * r)
        rng = np.random.default_rng(2)
        W = ttf.constant((rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32))
        x = ttf.constant(rng.standard_normal(n_in).astype(np.float32))
        with ttf.GradientTape(persistent=True) as g:
            g.watch(x)
            h = ttf.reshape(ttf.matmul(W, ttf.reshape(x, [n_in, 1])), [n_out])
            y = ttf.tanh(h) * ttf.sin(h) * ttf.reduce_sum(x * x)
        sl, _ = g._cut(g._tape, [y], [x])
        leaves = list(sl.leaf_vals)
        row = {}
        for direction in ("rev", "fwd"):
            key = ("jacobian", sl.code, sl.diff, sl.groups, sl.target_slots, direction, None)
            fn = jax.jit(_jacobian._make_jacobian(key))
            row[direction] = median_ms(lambda: fn(leaves, [])[0].block_until_ready(), warmup, repeats)
        out[r] = row
    return out


def bench_memory(n_in: int = 64, hidden: int = 8192, n_out: int = 512, chunks=(None, 128, 32, 8)) -> dict:
    """Peak temporary memory of the compiled jacobian program (XLA's memory analysis) and its time.

    y = W2 tanh(W1 x) with a wide hidden layer: one vectorized reverse program
    carries an [n_out, hidden] cotangent; the loop only [chunk, hidden]. (The
    forward direction, which the default picks here since n_out = 8 n_in, is
    listed for reference.)
    """
    rng = np.random.default_rng(3)
    W1 = ttf.constant((rng.standard_normal((hidden, n_in)) / np.sqrt(n_in)).astype(np.float32))
    W2 = ttf.constant((rng.standard_normal((n_out, hidden)) / np.sqrt(hidden)).astype(np.float32))
    x = ttf.constant(rng.standard_normal((n_in, 1)).astype(np.float32))
    out = {}
    with ttf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = ttf.matmul(W2, ttf.tanh(ttf.matmul(W1, x)))
    sl, _ = g._cut(g._tape, [y], [x])
    old = _jacobian.FWD_RATIO
    try:
        for direction, c in [("fwd", None)] + [("rev", c) for c in chunks]:
            key = ("jacobian", sl.code, sl.diff, sl.groups, sl.target_slots, direction, c)
            mem = jax.jit(_jacobian._make_jacobian(key)).lower(list(sl.leaf_vals), []).compile().memory_analysis()
            temp = getattr(mem, "temp_size_in_bytes", None)
            pfor = c is None
            _jacobian.FWD_RATIO = 0 if direction == "fwd" else 10**9
            t = median_ms(lambda: g.jacobian(y, x, experimental_use_pfor=pfor, parallel_iterations=c).numpy(), 1, 5)
            name = f"one program ({direction})" if pfor else f"loop, chunk {c}"
            out[name] = {"temp MiB": float("nan") if temp is None else temp / 2**20, "ms": t}
    finally:
        _jacobian.FWD_RATIO = old
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--only", default="jacobian,batch,sweep,switch,memory")
    a = ap.parse_args()
    if a.quick:
        a.warmup, a.repeats = 2, 7
    only = set(a.only.split(","))
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs; "
          f"median of {a.repeats} after {a.warmup} warm-up, ms")
    tf = load_tf() if only & {"jacobian", "batch"} else None
    if tf is not None:
        print(f"tensorflow {tf.__version__}")

    def ratios(res: dict) -> str:
        base = res["tapejax"]
        return ", ".join(f"{k} {v:.3f} ms ({v / base:.2f}x tapejax)" for k, v in res.items())

    if "jacobian" in only:
        print("jacobian  tanh(Wx+b)*x, R^256->R^256:", ratios(bench_jacobian(tf, a.warmup, a.repeats)))
    if "batch" in only:
        print("batch_jacobian tanh(x@W), b=64, 32->32:", ratios(bench_batch(tf, a.warmup, a.repeats)))
    if "sweep" in only:
        print("batch_jacobian sweep, y = tanh(x@W), d -> d (ms, us per example; XLA MFLOP of our program):")
        for (d, bsz), row in bench_sweep(a.warmup, a.repeats).items():
            mf = row.pop("MFLOP")
            cells = [f"{k} {v:.3f} ({1e3 * v / bsz:.2f} us/ex)" for k, v in row.items()]
            cells.append(f"{mf:.2f} MFLOP ({1e3 * mf / bsz:.1f} kFLOP/ex)")
            print(f"  d={d:3d} b={bsz:4d}: " + ", ".join(cells))
    if "switch" in only:
        print("jacobian direction, y = tanh(Wx)*sin(Wx)*|x|^2, n_in=256, n_out=256*r (compiled program, ms):")
        for r, row in bench_switch(a.warmup, a.repeats).items():
            print(f"  r={r:<5}: rev {row['rev']:.3f}  fwd {row['fwd']:.3f}  rev/fwd {row['rev'] / row['fwd']:.2f}")
    if "memory" in only:
        print("jacobian of W2 tanh(W1 x), 64 -> 8192 -> 512 (XLA temp memory; time):")
        for k, row in bench_memory().items():
            print(f"  {k:18s}: temp {row['temp MiB']:.2f} MiB, {row['ms']:.2f} ms")


if __name__ == "__main__":
    main()
