"""Numerics: float16 and bfloat16 gradients stay within documented tolerances of float32, and
complex sources follow TF's conjugate convention. (The same against real TF:
tests/oracle/test_oracle_reliability_numerics.py.)

Documented tolerances (compat_docs/reliability.md), on the max-abs-normalised error
``max|g_low - g_32| / max|g_32|`` of the gradients of a small MLP whose inputs are exactly
representable in both formats: float16 1e-2, bfloat16 5e-2 (measured over five seeds: at most
1.6e-3 and 1.8e-2; TF itself 2.3e-3 and 1.1e-2).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import tapejax as tf

TOLERANCE = {"float16": 1e-2, "bfloat16": 5e-2}
SEEDS = range(5)


def mlp_data(seed: int) -> dict:
    """A small MLP's inputs and weights, rounded to bfloat16 so every format holds them exactly."""
    rng = np.random.default_rng(seed)
    arrs = dict(x=rng.normal(size=(8, 4)), W1=rng.normal(size=(4, 16)) * 0.5, b1=rng.normal(size=(16,)) * 0.1,
                W2=rng.normal(size=(16, 3)) * 0.5, y=rng.normal(size=(8, 3)))
    return {k: v.astype(ml_dtypes.bfloat16).astype(np.float32) for k, v in arrs.items()}


def mlp_grads(d: dict, dtype) -> list:
    c = {k: tf.constant(v, dtype=dtype) if dtype == tf.float32 else tf.cast(tf.constant(v), dtype) for k, v in d.items()}
    with tf.GradientTape() as g:
        g.watch([c["W1"], c["b1"], c["W2"]])
        h = tf.tanh(tf.matmul(c["x"], c["W1"]) + c["b1"])
        loss = tf.reduce_mean((tf.matmul(h, c["W2"]) - c["y"]) ** 2)
    grads = g.gradient(loss, [c["W1"], c["b1"], c["W2"]])
    for gr in grads:
        assert gr.dtype == dtype  # TF: the gradient has the source's dtype
    return [np.asarray(tf.cast(gr, tf.float32).numpy(), np.float64) for gr in grads]


def normalised_error(low: list, ref: list) -> float:
    return max(float(np.max(np.abs(a - b)) / np.max(np.abs(b))) for a, b in zip(low, ref))


def _jax_mlp_grads(d: dict) -> list:
    def loss(W1, b1, W2):
        h = jnp.tanh(d["x"] @ W1 + b1)
        return jnp.mean((h @ W2 - d["y"]) ** 2)

    return [np.asarray(g, np.float64) for g in jax.grad(loss, argnums=(0, 1, 2))(d["W1"], d["b1"], d["W2"])]


@pytest.mark.parametrize("seed", SEEDS)
def test_float32_mlp_gradient_matches_jax_grad(seed):
    d = mlp_data(seed)
    for got, want in zip(mlp_grads(d, tf.float32), _jax_mlp_grads(d)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_mlp_gradient_within_documented_tolerance_of_float32(seed, dtype):
    d = mlp_data(seed)
    ref = mlp_grads(d, tf.float32)
    err = normalised_error(mlp_grads(d, getattr(tf, dtype)), ref)
    assert err <= TOLERANCE[dtype], f"{dtype} gradient off by {err:.2e} (documented: {TOLERANCE[dtype]})"


def test_low_precision_overflow_gives_inf_not_a_wrong_finite_value():
    # float16's max is 65504: the gradient of x**2 at 300 is 600 (fine), its square's gradient
    # 4x**3 = 1.08e8 overflows to inf, as in TF; bfloat16's range holds it.
    x16 = tf.constant(300.0, tf.float16)
    xb = tf.constant(300.0, tf.bfloat16)
    with tf.GradientTape(persistent=True) as g:
        g.watch([x16, xb])
        y16, yb = (x16 * x16) * (x16 * x16), (xb * xb) * (xb * xb)
    assert np.isinf(float(y16)) and np.isinf(float(g.gradient(y16, x16)))
    assert float(g.gradient(yb, xb)) == pytest.approx(4 * 300.0**3, rel=2e-2)


# --------------------------------------------------------------------------
# Complex sources: TF's gradient is the conjugate of JAX's convention.


def _z(values) -> tf.Tensor:
    return tf.constant(np.asarray(values, np.complex64))


Z = [3 + 4j, -1 + 0.5j, 0.25 - 2j]
W = np.asarray([1 - 2j, 0.5 + 1j, -3 + 0.25j], np.complex64)


def _real_loss_grad(loss_fn, z: np.ndarray) -> np.ndarray:
    """dL/dRe z + i dL/dIm z for a real-valued L, by jax.grad over the real and imaginary parts."""
    da, db = jax.grad(lambda a, b: loss_fn(a + 1j * b), argnums=(0, 1))(z.real.astype(np.float32), z.imag.astype(np.float32))
    return np.asarray(da) + 1j * np.asarray(db)


@pytest.mark.parametrize(
    "name, build, jnp_loss",
    [
        ("|z|^2", lambda z: tf.reduce_sum(tf.abs(z) ** 2), lambda z: jnp.sum(jnp.abs(z) ** 2)),
        ("Re(z w)", lambda z: tf.reduce_sum(tf.math.real(z * _z(W))), lambda z: jnp.sum(jnp.real(z * W))),
        ("|z|", lambda z: tf.reduce_sum(tf.abs(z)), lambda z: jnp.sum(jnp.abs(z))),
        ("Im(z^2)", lambda z: tf.reduce_sum(tf.math.imag(z * z)), lambda z: jnp.sum(jnp.imag(z * z))),
    ],
)
def test_real_valued_loss_of_a_complex_source_gives_dre_plus_i_dim(name, build, jnp_loss):
    z = _z(Z)
    with tf.GradientTape() as g:
        g.watch(z)
        loss = build(z)
    got = g.gradient(loss, z)
    assert got.dtype == tf.complex64
    want = _real_loss_grad(jnp_loss, np.asarray(Z, np.complex64))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6, err_msg=name)


def test_holomorphic_complex_target_gives_the_conjugate_derivative():
    z = _z(Z)
    zn = np.asarray(Z, np.complex64)
    with tf.GradientTape(persistent=True) as g:
        g.watch(z)
        sq = z * z
        s = tf.sin(z)
    np.testing.assert_allclose(g.gradient(sq, z).numpy(), np.conj(2 * zn), rtol=1e-5)
    np.testing.assert_allclose(g.gradient(s, z).numpy(), np.conj(np.cos(zn)), rtol=1e-5)
    # A complex output gradient c weights it as c * conj(f'(z)).
    c = np.asarray([1 + 1j, 2 - 1j, -0.5j], np.complex64)
    np.testing.assert_allclose(g.gradient(sq, z, output_gradients=_z(c)).numpy(), c * np.conj(2 * zn), rtol=1e-5)


def test_complex_matrix_least_squares_gradient():
    rng = np.random.default_rng(0)
    A = (rng.normal(size=(3, 3)) + 1j * rng.normal(size=(3, 3))).astype(np.complex64)
    zn = np.asarray(Z, np.complex64).reshape(3, 1)
    z = tf.constant(zn)
    with tf.GradientTape() as g:
        g.watch(z)
        loss = tf.reduce_sum(tf.abs(tf.matmul(tf.constant(A), z)) ** 2)
    # L = ||A z||^2: dL/dRe + i dL/dIm = 2 A^H A z.
    np.testing.assert_allclose(g.gradient(loss, z).numpy(), 2 * A.conj().T @ A @ zn, rtol=1e-4, atol=1e-4)
