"""Small kernels compiled for a fast first call (tapejax/_engine/_kernels.py).

An eager op's or a tier-0 pullback's program whose inputs are all small is compiled with
XLA:CPU's optimizer off. It must compute what the normally compiled program computes, be
used only for small calls, and stay inlinable inside traces.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_replay_tiers import _random_program

import tapejax as tf
from tapejax import config
from tapejax._engine import _kernels

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the fast options are XLA:CPU's")


@pytest.fixture
def limit():
    saved, tier = config.kernel_fast_compile_elements, config.replay_tier

    def set_(n):
        config.kernel_fast_compile_elements = n

    yield set_
    config.kernel_fast_compile_elements, config.replay_tier = saved, tier


def test_small_calls_use_the_fast_program_and_large_ones_the_full_one(limit):
    limit(64)
    k = _kernels.jit(lambda a, b: jnp.tanh(a) * b + 1.0)
    small, large = jnp.linspace(-2, 2, 64), jnp.linspace(-2, 2, 65)
    np.testing.assert_allclose(k(small, 2.0), jnp.tanh(small) * 2.0 + 1.0, rtol=1e-6)
    assert (k.fast._cache_size(), k.full._cache_size()) == (1, 0)
    np.testing.assert_allclose(k(large, 2.0), jnp.tanh(large) * 2.0 + 1.0, rtol=1e-6)
    assert (k.fast._cache_size(), k.full._cache_size()) == (1, 1)
    limit(0)  # off: everything through the full pipeline
    k(jnp.linspace(0, 1, 8), 2.0)
    assert (k.fast._cache_size(), k.full._cache_size()) == (1, 2)


def test_a_kernel_inside_a_trace_is_inlined(limit):
    # Compile options belong to the outermost program: a nested call must not carry them.
    limit(1024)
    k = _kernels.jit(jnp.sin)
    # jit's cache of a function is shared by every jit of it with the same options: another
    # test's (or lazy mode's) concrete calls of the same kernel may have filled it already.
    before = (k.fast._cache_size(), k.full._cache_size())
    x = jnp.arange(4.0)
    np.testing.assert_allclose(jax.jit(lambda v: k(v) * 2)(x), 2 * jnp.sin(x), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda v: jnp.sum(k(v)))(x), jnp.cos(x), rtol=1e-6)
    assert (k.fast._cache_size(), k.full._cache_size()) == before
    # Concrete arguments inside a trace: inlined too (JAX refuses options on a nested jit).
    c = jnp.arange(3.0)
    np.testing.assert_allclose(jax.jit(lambda v: k(c) + v)(x[:3]), jnp.sin(c) + x[:3], rtol=1e-6)
    op = tf.function(lambda v: tf.constant([1.0, 2.0])[0] * v)
    np.testing.assert_allclose(op(tf.constant(3.0)).numpy(), 3.0)


def test_random_programs_agree_with_the_fast_kernels_on_and_off(limit):
    # 200 random programs, forward and tier-0 gradient, with fast kernels and without,
    # against jax.grad: a rule the fast pipeline computes differently shows here.
    config.replay_tier = "interpret"
    rng = np.random.default_rng(20261125)
    for case in range(200):
        jax_fn, tf_fn = _random_program(rng, int(rng.integers(1, 9)))
        a0, b0 = rng.normal(size=(2, 5)).astype(np.float32)
        expected = jax.grad(jax_fn, argnums=(0, 1))(jnp.asarray(a0), jnp.asarray(b0))
        got = {}
        for n in (1024, 0):
            limit(n)
            a, b = tf.Variable(a0), tf.Variable(b0)
            with tf.GradientTape() as t:
                y = tf_fn(a, b)
            got[n] = (y.numpy(), [g.numpy() for g in t.gradient(y, [a, b], unconnected_gradients="zero")])
            for g, e in zip(got[n][1], expected):
                np.testing.assert_allclose(g, np.asarray(e), rtol=2e-5, atol=1e-6, err_msg=f"case {case}, limit {n}")
        np.testing.assert_allclose(got[1024][0], got[0][0], rtol=1e-6, atol=1e-6, err_msg=f"case {case}")
        for f, s in zip(got[1024][1], got[0][1]):
            np.testing.assert_allclose(f, s, rtol=1e-6, atol=1e-6, err_msg=f"case {case}")


def test_a_tape_over_large_arrays_is_unaffected(limit):
    # Above the limit the op and its pullback run XLA's full pipeline: same values as jax.grad.
    limit(16)
    x0 = np.linspace(-1, 1, 4096).astype(np.float32)
    x = tf.Variable(x0)
    with tf.GradientTape() as t:
        y = tf.reduce_sum(tf.tanh(x) * tf.sin(x))
    g = t.gradient(y, x)
    np.testing.assert_allclose(g.numpy(), jax.grad(lambda v: jnp.sum(jnp.tanh(v) * jnp.sin(v)))(x0), rtol=1e-5, atol=1e-6)
