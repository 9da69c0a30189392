"""Numerics against real TF: float16/bfloat16 MLP gradients within the documented tolerance of
float32 on both sides, and complex sources with TF's conjugate convention, value for value."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tapejax as tj

# The same data and tolerances as tests/test_reliability_numerics.py (documented in
# compat_docs/reliability.md).
TOLERANCE = {"float16": 1e-2, "bfloat16": 5e-2}
SEEDS = range(5)
Z = [3 + 4j, -1 + 0.5j, 0.25 - 2j]


def mlp_data(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    arrs = dict(x=rng.normal(size=(8, 4)), W1=rng.normal(size=(4, 16)) * 0.5, b1=rng.normal(size=(16,)) * 0.1,
                W2=rng.normal(size=(16, 3)) * 0.5, y=rng.normal(size=(8, 3)))
    return {k: v.astype(ml_dtypes.bfloat16).astype(np.float32) for k, v in arrs.items()}


def normalised_error(low: list, ref: list) -> float:
    return max(float(np.max(np.abs(a - b)) / np.max(np.abs(b))) for a, b in zip(low, ref))


def _tf_mlp_grads(tf, d: dict, dtype) -> list:
    c = {k: tf.cast(tf.constant(v), dtype) for k, v in d.items()}
    with tf.GradientTape() as g:
        g.watch([c["W1"], c["b1"], c["W2"]])
        h = tf.tanh(tf.matmul(c["x"], c["W1"]) + c["b1"])
        loss = tf.reduce_mean((tf.matmul(h, c["W2"]) - c["y"]) ** 2)
    grads = g.gradient(loss, [c["W1"], c["b1"], c["W2"]])
    return [np.asarray(tf.cast(gr, tf.float32).numpy(), np.float64) for gr in grads]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_mlp_gradients_against_tf(real_tf, seed, dtype):
    d = mlp_data(seed)
    tf32 = _tf_mlp_grads(real_tf, d, real_tf.float32)
    tj32 = _tf_mlp_grads(tj, d, tj.float32)
    for a, b in zip(tj32, tf32):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # float32: the same numbers
    tf_low = _tf_mlp_grads(real_tf, d, getattr(real_tf, dtype))
    tj_low = _tf_mlp_grads(tj, d, getattr(tj, dtype))
    tol = TOLERANCE[dtype]
    # The documented tolerance holds for TF itself (it is a property of the format, not a
    # tapejax allowance), for tapejax, and between the two low-precision results.
    assert normalised_error(tf_low, tf32) <= tol
    assert normalised_error(tj_low, tf32) <= tol
    assert normalised_error(tj_low, tf_low) <= tol


def _complex_cases(lib, z):
    w = lib.constant(np.asarray([1 - 2j, 0.5 + 1j, -3 + 0.25j], np.complex64))
    c = lib.constant(np.asarray([1 + 1j, 2 - 1j, -0.5j], np.complex64))
    with lib.GradientTape(persistent=True) as g:
        g.watch(z)
        outs = {
            "|z|^2": lib.reduce_sum(lib.abs(z) ** 2),
            "Re(z w)": lib.reduce_sum(lib.math.real(z * w)),
            "|z|": lib.reduce_sum(lib.abs(z)),
            "Im(z^2)": lib.reduce_sum(lib.math.imag(z * z)),
            "z^2": z * z,
            "sin z": lib.sin(z),
            "conj(z) w": lib.math.conj(z) * w,
        }
    res = {k: g.gradient(v, z).numpy() for k, v in outs.items()}
    res["z^2, og c"] = g.gradient(outs["z^2"], z, output_gradients=c).numpy()
    res["conj(z) w, og c"] = g.gradient(outs["conj(z) w"], z, output_gradients=c).numpy()
    return res


def test_complex_source_gradients_match_tf(real_tf):
    zn = np.asarray(Z, np.complex64)
    want = _complex_cases(real_tf, real_tf.constant(zn))
    got = _complex_cases(tj, tj.constant(zn))
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == want[k].dtype == np.complex64, k
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_float16_overflow_matches_tf(real_tf):
    def grads(lib):
        x = lib.constant(300.0, lib.float16)
        with lib.GradientTape() as g:
            g.watch(x)
            y = (x * x) * (x * x)
        return float(y), float(g.gradient(y, x))

    assert grads(tj) == grads(real_tf) == (np.inf, np.inf)
