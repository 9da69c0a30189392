"""The replay's fast paths (benchmarks/run.py measures them): equal Python constants
share one leaf, and a gradient over a slice with a matmul reuses the recorded
forward values (``vjp_res``) instead of recomputing them.

The oracle is twofold: ``jax.grad`` of the same pure function, and the plain
``vjp`` replay (which recomputes the forward) run on the same record with
``_replay.reuse_residuals`` off. Both must give the same numbers, for every
shape of slice the residual path handles differently: intermediate sources,
sources that are targets, several targets, weighted targets, variables read
twice, multiple-result ops, complex values, nesting, and ``tapejax.function``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf
from tapejax._engine import _replay

# These tests check the compiled tier's cache and transforms: pin that tier.
pytestmark = pytest.mark.usefixtures("compile_tier")

RNG = np.random.default_rng(7)
X = RNG.normal(size=(4, 3)).astype(np.float32)
W1 = (RNG.normal(size=(3, 5)) / 2).astype(np.float32)
W2 = (RNG.normal(size=(5, 2)) / 2).astype(np.float32)


@pytest.fixture
def spy(monkeypatch):
    """The transform names of the replays compiled or reused during the test."""
    names: list = []
    orig = _replay._compiled

    def wrapped(key, avals):
        names.append(key[0])
        return orig(key, avals)

    monkeypatch.setattr(_replay, "_compiled", wrapped)
    return names


def both(fn):
    """``fn()`` with the residual path on, then off; returns both results as NumPy."""

    def as_np(r):
        return jax.tree_util.tree_map(lambda t: None if t is None else np.asarray(t), r,
                                      is_leaf=lambda t: t is None or isinstance(t, tf.Tensor))

    old = _replay.reuse_residuals
    try:
        _replay.reuse_residuals = True
        on = as_np(fn())
        _replay.reuse_residuals = False
        off = as_np(fn())
    finally:
        _replay.reuse_residuals = old
    return on, off


def assert_same(on, off, rtol=1e-5, atol=1e-6):
    for a, b in zip(jax.tree_util.tree_leaves(on), jax.tree_util.tree_leaves(off)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _mlp(x, w1, w2):
    return jnp.sum(jnp.square(jnp.tanh(x @ w1) @ w2))


def test_mlp_gradient_uses_residuals_and_matches_jax_grad(spy):
    w1, w2 = tf.Variable(W1), tf.Variable(W2)
    x = tf.constant(X)
    with tf.GradientTape() as t:
        y = tf.reduce_sum(tf.square(tf.matmul(tf.tanh(tf.matmul(x, w1)), w2)))
    g1, g2 = t.gradient(y, [w1, w2])
    if tf.config.get_execution() == "lazy":
        # A deferred gradient runs inside the step's program, which computes the forward
        # itself: the plain vjp, never residual inputs (_lazy.deferred_transform).
        assert spy and set(spy) == {"vjp"}
    else:
        assert "vjp_res" in spy
    r1, r2 = jax.grad(lambda a, b: _mlp(X, a, b), argnums=(0, 1))(W1, W2)
    np.testing.assert_allclose(g1.numpy(), r1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g2.numpy(), r2, rtol=1e-5, atol=1e-6)


def test_elementwise_slices_keep_the_plain_vjp(spy):
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.sin(x) * x
    t.gradient(y, x)
    if tf.config.get_execution() == "lazy":
        assert spy and set(spy) == {"vjp"}  # the deferred node's program, looked up when it runs
    else:
        assert spy == ["vjp"]


def test_intermediate_source_target_source_and_weights():
    x = tf.constant(X)
    w = tf.constant(W1)

    def run():
        with tf.GradientTape(persistent=True) as t:
            t.watch([x, w])
            h = tf.matmul(x, w)
            z = tf.tanh(h) * h
            y = tf.reduce_sum(z * z)
        out = (
            t.gradient(y, [h, x, w]),  # an intermediate source, and sources upstream of it
            t.gradient([y, z], [x, h]),  # a target upstream of another target
            t.gradient(z, w, output_gradients=tf.ones_like(z) * 0.5),
            t.gradient([y, x], x),  # a source that is itself a target
            t.gradient(y, [x, tf.constant(1.0)]),  # an unconnected source stays None
        )
        return out

    on, off = both(run)
    assert on[4][1] is None and off[4][1] is None
    assert_same(on, off)
    hx = np.asarray(X) @ W1
    ref_h = jax.grad(lambda h: jnp.sum((jnp.tanh(h) * h) ** 2))(hx)
    np.testing.assert_allclose(on[0][0], ref_h, rtol=1e-5, atol=1e-6)


def test_variable_read_twice_and_multiple_result_op():
    w = tf.Variable(W1)
    x = tf.constant(X)

    def run():
        with tf.GradientTape() as t:
            h = tf.matmul(x, w) + tf.reduce_sum(w)  # w read twice: gradients sum
            a, b = tf.split(h, [2, 3], axis=1)  # a multiple-result op
            y = tf.reduce_sum(tf.sin(a)) + tf.reduce_sum(b * b)
        return t.gradient(y, w)

    on, off = both(run)
    assert_same(on, off)

    def f(w):
        h = X @ w + jnp.sum(w)
        return jnp.sum(jnp.sin(h[:, :2])) + jnp.sum(h[:, 2:] ** 2)

    np.testing.assert_allclose(on, jax.grad(f)(W1), rtol=1e-5, atol=1e-5)


def test_complex_matmul_keeps_tf_conjugate_convention():
    z = tf.constant((X + 1j * X[::-1]).astype(np.complex64))
    w = tf.constant((W1 - 0.5j * W1).astype(np.complex64))

    def run():
        with tf.GradientTape() as t:
            t.watch(w)
            y = tf.reduce_sum(tf.matmul(z, w) * tf.matmul(z, w))
        return t.gradient(y, w)

    on, off = both(run)
    assert on.dtype == np.complex64
    assert_same(on, off, rtol=1e-4, atol=1e-4)


def test_nested_tapes_differentiate_through_residuals():
    x = tf.constant(X)
    w = tf.constant(W1)

    def run():
        with tf.GradientTape() as outer:
            outer.watch(w)
            with tf.GradientTape() as inner:
                inner.watch(w)
                y = tf.reduce_sum(tf.tanh(tf.matmul(x, w)) ** 3)
            g = inner.gradient(y, w)
            s = tf.reduce_sum(g * g)
        return outer.gradient(s, w)

    on, off = both(run)
    assert_same(on, off, rtol=1e-4, atol=1e-5)

    def f(w):
        return jnp.sum(jnp.tanh(X @ w) ** 3)

    ref = jax.grad(lambda w: jnp.sum(jax.grad(f)(w) ** 2))(W1)
    np.testing.assert_allclose(on, ref, rtol=1e-4, atol=1e-5)


def test_function_step_with_residual_gradient_matches_eager():
    def make():
        w1, w2 = tf.Variable(W1), tf.Variable(W2)

        def step(x):
            with tf.GradientTape() as t:
                y = tf.reduce_sum(tf.square(tf.matmul(tf.tanh(tf.matmul(x, w1)), w2)))
            g1, g2 = t.gradient(y, [w1, w2])
            w1.assign_sub(0.1 * g1)
            w2.assign_sub(0.1 * g2)
            return y

        return step, (w1, w2)

    eager, ve = make()
    compiled, vc = make()
    compiled = tf.function(compiled)
    for _ in range(3):
        a, b = eager(tf.constant(X)), compiled(tf.constant(X))
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)
    for p, q in zip(ve, vc):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# Python constants: one leaf per distinct constant, never conflating distinct ones


def _slice_of(fn):
    x = tf.constant(0.5)
    with tf.GradientTape() as t:
        t.watch(x)
        y = fn(x)
    sl, _ = t._cut(t._tape, [y], [x])
    return sl, t, x, y


def test_equal_python_constants_share_one_leaf():
    def chain(x):
        for _ in range(10):
            x = tf.sin(x) * 1.5 + 0.1
        return x

    sl, t, x, y = _slice_of(chain)
    assert sorted(v for v in sl.leaf_vals if isinstance(v, float)) == [0.1, 1.5]
    ref = jax.grad(lambda x: _jchain(x))(jnp.float32(0.5))
    np.testing.assert_allclose(t.gradient(y, x).numpy(), ref, rtol=1e-5)


def _jchain(x):
    for _ in range(10):
        x = jnp.sin(x) * 1.5 + 0.1
    return x


def test_distinct_constants_that_compare_equal_stay_apart():
    # 0.0 == -0.0 and 1 == 1.0 == True in Python; as constants they differ (1/-0.0, dtypes).
    sl, t, x, y = _slice_of(lambda x: (x + 0.0) / (x * 0.0 + 1.0) + x * -0.0 + x / (x * -0.0 - 1.0))
    consts = [repr(v) for v in sl.leaf_vals if isinstance(v, float)]
    assert sorted(consts) == ["-0.0", "0.0", "1.0"]  # each once: equal ones shared, distinct ones apart

    def f(x):
        return (x + 0.0) / (x * 0.0 + 1.0) + x * -0.0 + x / (x * -0.0 - 1.0)

    np.testing.assert_allclose(t.gradient(y, x).numpy(), jax.grad(f)(jnp.float32(0.5)), rtol=1e-6)
