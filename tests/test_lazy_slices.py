"""Lazy mode's cache of cut slices (``_replay.cut``): a repeated record reuses its cut, right values.

Random tape programs (seeded) run in lazy mode several times with fresh values, next to near
misses of themselves: another source, other shapes or dtypes, one op more, other Python
constants, unconnected sources, persistent and nested tapes. Every gradient is checked against
``jax.grad`` of the same program written in ``jax.numpy`` (and against eager tapejax where
jax.grad has no direct counterpart: intermediate sources, nested tapes); a record that repeats
must hit the cache, and a stale template (values bound from another step) would show as a
wrong gradient, since every run draws new values.
"""

from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf
from tapejax import config
from tapejax._engine import _replay

UNARY = {"sin": (tf.sin, jnp.sin), "tanh": (tf.tanh, jnp.tanh), "square": (tf.square, jnp.square),
         "cos": (tf.cos, jnp.cos), "sum": (tf.reduce_sum, jnp.sum)}
BINARY = {"add": (lambda a, b: a + b, lambda a, b: a + b), "mul": (lambda a, b: a * b, lambda a, b: a * b),
          "sub": (lambda a, b: a - b, lambda a, b: a - b)}


@pytest.fixture
def lazy():
    old = config.get_execution()
    config.set_execution("lazy")
    try:
        yield
    finally:
        config.set_execution(old)


def make_spec(rng: random.Random) -> dict:
    n_in = rng.randint(1, 3)
    shape = rng.choice([(), (3,), (2, 3)])
    inputs = [{"kind": rng.choice(["var", "const"]), "shape": rng.choice([shape, ()])} for _ in range(n_in)]
    ops = []
    n_vals = n_in
    for _ in range(rng.randint(1, 8)):
        r = rng.random()
        if r < 0.4:
            ops.append(("u", rng.choice(sorted(UNARY)), rng.randrange(n_vals)))
        elif r < 0.8:
            ops.append(("b", rng.choice(sorted(BINARY)), rng.randrange(n_vals), rng.randrange(n_vals)))
        else:
            ops.append(("c", rng.choice(sorted(BINARY)), rng.randrange(n_vals), rng.choice([0.5, 1.5, 2.0, -1.0])))
        n_vals += 1
    # Sources: inputs (maybe not all), sometimes one intermediate value.
    sources = sorted(rng.sample(range(n_in), rng.randint(1, n_in)))
    if rng.random() < 0.25 and n_vals - 1 > n_in:
        sources.append(rng.randrange(n_in, n_vals - 1))
    return {"inputs": inputs, "ops": ops, "sources": sources, "dtype": "float32", "extra_unconnected": False}


def variants(spec: dict, rng: random.Random) -> list[tuple[str, dict]]:
    """Near misses: equal but for one thing."""
    out = []
    n_in = len(spec["inputs"])
    other = [i for i in range(n_in) if i not in spec["sources"]]
    if other:
        out.append(("other source", dict(spec, sources=sorted(set(spec["sources"][1:]) | {rng.choice(other)}))))
    out.append(("other shape", dict(spec, inputs=[dict(d, shape=d["shape"] + (4,)) for d in spec["inputs"]])))
    out.append(("float64", dict(spec, dtype="float64")))
    n_vals = n_in + len(spec["ops"])
    out.append(("extra op", dict(spec, ops=spec["ops"] + [("u", "tanh", n_vals - 1)])))
    consts = [k for k, o in enumerate(spec["ops"]) if o[0] == "c"]
    if consts:
        k = consts[0]
        ops = list(spec["ops"])
        ops[k] = ops[k][:3] + (ops[k][3] + 0.25,)
        out.append(("other constant", dict(spec, ops=ops)))
    out.append(("unconnected source", dict(spec, extra_unconnected=True)))
    return out


def draw_values(spec: dict, rng: np.random.Generator) -> list:
    return [rng.uniform(-1.0, 1.0, d["shape"]).astype(spec["dtype"]) for d in spec["inputs"]]


def apply_ops(ops: list, pool: list, impl: int = 0) -> None:
    """Append each op's result to ``pool``: ``impl`` 0 runs the tapejax op, 1 the jnp one."""
    for op in ops:
        if op[0] == "u":
            pool.append(UNARY[op[1]][impl](pool[op[2]]))
        elif op[0] == "b":
            pool.append(BINARY[op[1]][impl](pool[op[2]], pool[op[3]]))
        else:
            c = op[3] if impl == 0 else jnp.asarray(op[3], pool[op[2]].dtype)
            pool.append(BINARY[op[1]][impl](pool[op[2]], c))


def run_tf(spec: dict, values: list) -> tuple:
    """The program under a tape: (target, gradients), as NumPy (None for a None gradient)."""
    if spec["dtype"] == "float64":
        with jax.enable_x64(True):
            return _run_tf(spec, values)
    return _run_tf(spec, values)


def _run_tf(spec: dict, values: list) -> tuple:
    pool: list = []
    made = []
    unconnected = tf.constant(np.ones((2,), spec["dtype"]))
    with tf.GradientTape() as tape:
        for k, (d, v) in enumerate(zip(spec["inputs"], values)):
            if d["kind"] == "var":
                var = tf.Variable(v)
                made.append(var)
                pool.append(var)
            else:
                t = tf.constant(v)
                tape.watch(t)
                made.append(t)
                pool.append(t)
        if spec["extra_unconnected"]:
            tape.watch(unconnected)
            _ = unconnected * 2.0
        apply_ops(spec["ops"], pool)
        y = tf.reduce_sum(pool[-1])
    srcs = [made[i] if i < len(made) else pool[i] for i in spec["sources"]]
    if spec["extra_unconnected"]:
        srcs.append(unconnected)
    grads = tape.gradient(y, srcs)
    return np.asarray(y.numpy()), [None if g is None else np.asarray(g.numpy()) for g in grads]


def run_jax(spec: dict, values: list) -> tuple:
    """jax.grad of the same program, with respect to the input sources (None where unconnected)."""
    n_in = len(spec["inputs"])

    def f(*xs):
        pool = list(xs)
        apply_ops(spec["ops"], pool, 1)
        return jnp.sum(pool[-1])

    with jax.enable_x64(spec["dtype"] == "float64"):
        xs = [jnp.asarray(v) for v in values]
        y, g = jax.value_and_grad(f, argnums=tuple(range(n_in)))(*xs)
        y, g = np.asarray(y), [np.asarray(a) for a in g]
    # Connectivity, as TF sees it: does the target's record reach the input at all?
    reach = set()
    needed = {n_in + len(spec["ops"]) - 1}
    for k in range(len(spec["ops"]) - 1, -1, -1):
        if n_in + k in needed:
            op = spec["ops"][k]
            needed.update([op[2]] + ([op[3]] if op[0] == "b" else []))
    reach = {i for i in range(n_in) if i in needed or (n_in + len(spec["ops"]) - 1 == i)}
    grads = []
    for i in spec["sources"]:
        grads.append(g[i] if i < n_in and i in reach else None if i < n_in else "skip")
    if spec["extra_unconnected"]:
        grads.append(None)
    return y, grads


def _tol(spec: dict) -> dict:
    return {"rtol": 1e-4, "atol": 1e-5} if spec["dtype"] == "float32" else {"rtol": 1e-9, "atol": 1e-10}


def check(spec: dict, got: tuple, want: tuple, ref_eager: tuple | None = None) -> None:
    y, grads = got
    wy, wgrads = want
    np.testing.assert_allclose(y, wy, **_tol(spec))
    assert y.dtype == np.dtype(spec["dtype"])
    assert len(grads) == len(wgrads)
    for k, (g, w) in enumerate(zip(grads, wgrads)):
        if isinstance(w, str):  # an intermediate source: eager tapejax is the reference
            w = ref_eager[1][k] if ref_eager is not None else g
        assert (g is None) == (w is None), (k, g, w, spec)
        if g is not None:
            assert g.shape == np.shape(w) and g.dtype == np.dtype(spec["dtype"])
            np.testing.assert_allclose(g, w, **_tol(spec), err_msg=str(spec))


def eager(fn, *args):
    old = config.get_execution()
    config.set_execution("eager")
    try:
        return fn(*args)
    finally:
        config.set_execution(old)


def hits() -> int:
    return _replay.cut_stats["hits"]


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_hit_and_near_misses_are_right(lazy, seed):
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    for _ in range(5):
        spec = make_spec(rng)
        cases = [("base", spec)] + variants(spec, rng)
        # Interleaved: base, a near miss, base, the next near miss... each run with new values.
        order = [c for v in cases[1:] for c in (cases[0], v)] + [cases[0]] * 3
        last_base_hit = None
        for name, sp in order:
            vals = draw_values(sp, nrng)
            h0 = hits()
            got = run_tf(sp, vals)
            hit = hits() > h0
            want = run_jax(sp, vals)
            ref = eager(run_tf, sp, vals) if any(isinstance(w, str) for w in want[1]) else None
            check(sp, got, want, ref)
            if ref is not None:
                check(sp, got, ref)
            if name == "base":
                last_base_hit = hit
        # The same structure three times in a row (fresh tensors, same variables kind): the last one hits.
        assert last_base_hit, spec


@pytest.mark.parametrize("seed", range(4))
def test_training_loop_with_updates_hits_and_matches_eager(lazy, seed):
    """Variables updated every step (their values pending between steps): each step's gradient
    is right, and the steady-state steps hit the cache."""
    rng = random.Random(100 + seed)
    spec = make_spec(rng)
    spec["inputs"] = [dict(d, kind="var") for d in spec["inputs"]]
    spec["sources"] = [i for i in spec["sources"] if i < len(spec["inputs"])]
    nrng = np.random.default_rng(seed)
    init = draw_values(spec, nrng)
    xs = [nrng.uniform(-1, 1, np.shape(v)).astype("float32") for v in init]

    def loop(steps):
        variables = [tf.Variable(v) for v in init]
        out = []
        for _ in range(steps):
            with tf.GradientTape() as tape:
                pool = [v * x for v, x in zip(variables, xs)]
                apply_ops(spec["ops"], pool)
                y = tf.reduce_sum(pool[-1])
            srcs = [variables[i] for i in spec["sources"]]
            h0 = hits()
            grads = tape.gradient(y, srcs)
            out.append((hits() > h0, float(y.numpy())))
            for v, g in zip(srcs, grads):
                if g is not None:
                    v.assign_sub(0.01 * g)
        return out, [v.numpy() for v in variables]

    lazy_out, lazy_vars = loop(8)
    eager_out, eager_vars = eager(loop, 8)
    np.testing.assert_allclose([y for _, y in lazy_out], [y for _, y in eager_out], rtol=1e-4, atol=1e-5)
    for a, b in zip(lazy_vars, eager_vars):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert all(h for h, _ in lazy_out[4:]), lazy_out


@pytest.mark.parametrize("seed", range(4))
def test_persistent_tape_repeats_its_cut(lazy, seed):
    """A persistent tape asked the same gradient twice hits; other targets on it are right too."""
    rng = random.Random(200 + seed)
    spec = make_spec(rng)
    nrng = np.random.default_rng(seed)
    vals = draw_values(spec, nrng)
    ts = [tf.constant(v) for v in vals]
    with tf.GradientTape(persistent=True) as tape:
        for t in ts:
            tape.watch(t)
        pool = list(ts)
        apply_ops(spec["ops"], pool)
        y = tf.reduce_sum(pool[-1])
        z = tf.reduce_sum(pool[len(ts)] * 3.0) if len(pool) > len(ts) else y
    want_y = run_jax(dict(spec, sources=list(range(len(ts)))), vals)[1]
    g1 = tape.gradient(y, ts)
    h0 = hits()
    g2 = tape.gradient(y, ts)
    assert hits() == h0 + 1
    gz = tape.gradient(z, ts)
    for a, b, w in zip(g1, g2, want_y):
        assert (a is None) == (w is None) and (b is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(a.numpy(), w, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(b.numpy(), w, rtol=1e-4, atol=1e-5)

    def zgrad():
        with tf.GradientTape() as t2:
            for t in ts:
                t2.watch(t)
            pool = list(ts)
            apply_ops(spec["ops"], pool)
            zz = tf.reduce_sum(pool[len(ts)] * 3.0)
        return [None if g is None else g.numpy() for g in t2.gradient(zz, ts)]

    for a, w in zip(gz, eager(zgrad)):
        assert (a is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(a.numpy(), w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_nested_tapes_second_order(lazy, seed):
    """outer.gradient(inner.gradient(...)) repeated with new values: right every time (jax.grad of jax.grad)."""
    nrng = np.random.default_rng(seed)
    c = float(nrng.uniform(0.5, 1.5))

    def f(x):
        return jnp.sum(jnp.sin(x) * x * c + jnp.tanh(x))

    for _ in range(4):
        v = nrng.uniform(-1, 1, (3,)).astype("float32")
        x = tf.constant(v)
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = tf.reduce_sum(tf.sin(x) * x * c + tf.tanh(x))
            g = inner.gradient(y, x)
            s = tf.reduce_sum(g * g)
        h = outer.gradient(s, x)
        gj = jax.grad(f)(v)
        hj = jax.grad(lambda u: jnp.sum(jax.grad(f)(u) ** 2))(v)
        np.testing.assert_allclose(g.numpy(), gj, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(h.numpy(), hj, rtol=1e-4, atol=1e-5)


def test_rollback_makes_the_record_uncachable(lazy):
    """Equations removed from a record (a failed backward pass) leave no signature to match."""
    x = tf.constant(1.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tf.sin(x) * 2.0
    assert tape._tape.sig is not None and tape._tape.sig_n == len(tape._tape.eqns)
    from tapejax._engine import _interpret

    with pytest.raises(ZeroDivisionError):
        _interpret._atomic(lambda: 1 / 0)  # (no tape records: nothing to roll back)
    t = tape._tape
    from tapejax._core import _recorder

    _recorder.push(t)
    try:
        with pytest.raises(ZeroDivisionError):
            _interpret._atomic(lambda: 1 / 0)
    finally:
        _recorder.pop(t)
    assert t.sig is None
    h0 = hits()
    g = tape.gradient(y, x)
    assert hits() == h0
    np.testing.assert_allclose(g.numpy(), 2.0 * np.cos(1.0), rtol=1e-6)
