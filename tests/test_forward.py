"""tf.autodiff.ForwardAccumulator: jvp values against analytic derivatives and jax.jvp,
nesting with GradientTape in both orders (Hessian-vector products), and TF's errors."""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax as tf

FA = tf.autodiff.ForwardAccumulator


@pytest.fixture(autouse=True)
def _keep_log_first_n_budget():
    # TF's dtype warnings are logged at most N times per process; do not use up the budget.
    from tapejax import _log

    saved = dict(_log._counts)
    yield
    _log._counts.clear()
    _log._counts.update(saved)


def test_namespace():
    assert tf.autodiff.GradientTape is tf.GradientTape
    assert tf.autodiff.ForwardAccumulator.__name__ == "ForwardAccumulator"


def test_basic_jvp():
    x = tf.constant([1.0, 2.0])
    t = tf.constant([1.0, 0.5])
    with FA(x, t) as acc:
        y = x * x
        z = tf.reduce_sum(y)
    np.testing.assert_array_equal(acc.jvp(y).numpy(), [2.0, 2.0])  # 2 x t
    assert float(acc.jvp(z)) == 4.0
    assert acc.jvp(x) is t  # a primal's jvp is its tangent


@given(st.lists(st.floats(-2, 2, width=32), min_size=1, max_size=4), st.floats(-2, 2, width=32))
@settings(max_examples=8)
def test_jvp_matches_jax(xs, tv):
    x0 = np.asarray(xs, np.float32)
    t0 = np.full_like(x0, tv)
    x = tf.constant(x0)
    with FA(x, tf.constant(t0)) as acc:
        y = tf.reduce_sum(tf.tanh(x) * tf.exp(x)) + tf.reduce_sum(x * x * x)
    _, expected = jax.jvp(lambda v: jnp.sum(jnp.tanh(v) * jnp.exp(v)) + jnp.sum(v ** 3), (x0,), (t0,))
    np.testing.assert_allclose(float(acc.jvp(y)), float(expected), rtol=1e-5, atol=1e-5)


def test_unconnected_and_structures():
    x, u = tf.constant(2.0), tf.constant(3.0)
    with FA(x, tf.constant(1.0)) as acc:
        y = u * 2.0
        w = x * u
    assert acc.jvp(y) is None
    assert float(acc.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO)) == 0.0
    assert float(acc.jvp(y, unconnected_gradients="zero")) == 0.0
    assert float(acc.jvp(w, unconnected_gradients="zero")) == 3.0  # connected stays itself
    assert acc.jvp(tf.constant(5.0)) is None
    out = acc.jvp({"a": [y, x], "b": (w,)})
    assert out["a"][0] is None and float(out["a"][1]) == 1.0 and isinstance(out["b"], tuple) and float(out["b"][0]) == 3.0


def test_zero_has_the_target_dtype_and_shape():
    x = tf.constant(2.0)
    n = tf.constant([1, 2])
    with FA(x, 1.0) as acc:
        pass
    z = acc.jvp(n, unconnected_gradients="zero")
    assert z.dtype == tf.int32 and z.numpy().tolist() == [0, 0]


def test_after_exit_never_entered_inside():
    x = tf.constant(2.0)
    with FA(x, tf.constant(1.0)) as acc:
        y = x * 3.0
        inside = acc.jvp(y)
    z = y * x  # after exit: not recorded
    assert float(inside) == 3.0 and float(acc.jvp(y)) == 3.0 and acc.jvp(z) is None
    acc2 = FA(x, tf.constant(1.0))
    assert acc2.jvp(x * 3.0) is None


def test_reenter_after_exit_records_again():
    x = tf.constant(3.0)
    with FA(x, 1.0) as acc:
        pass
    with acc:
        y = x * x
    assert float(acc.jvp(y)) == 6.0


def test_jvp_taken_inside_is_not_recorded_by_the_accumulator():
    # TF: the jvp of a jvp computed inside the block is None; the jvp is a constant to it.
    x = tf.constant(3.0)
    with FA(x, 1.0) as acc:
        y = x * x
        j = acc.jvp(y)
        z = j * x
    assert float(j) == 6.0 and acc.jvp(j) is None and float(acc.jvp(z)) == 6.0


def test_several_primals_and_variables():
    x, w = tf.constant(2.0), tf.constant(3.0)
    with FA((x, w), (1.0, 10.0)) as acc:
        y = x * w
    assert float(acc.jvp(y)) == 1 * 3 + 10 * 2
    v = tf.Variable([1.0, 2.0])
    t = tf.constant([1.0, 0.0])
    other = tf.Variable(5.0)
    with FA(v, t) as acc:
        y = v * v
        r = v.read_value()
        o = other * 2.0
    np.testing.assert_array_equal(acc.jvp(y).numpy(), [2.0, 0.0])
    assert acc.jvp(v) is t
    np.testing.assert_array_equal(acc.jvp(r).numpy(), [1.0, 0.0])
    assert acc.jvp(other) is None and acc.jvp(o) is None
    assert float(acc.jvp(other, unconnected_gradients="zero")) == 0.0


def test_dict_primals():
    x, w = tf.constant(3.0), tf.constant(2.0)
    with FA({"a": x, "b": [w]}, {"a": 1.0, "b": [10.0]}) as acc:
        y = x * w
    res = acc.jvp([y, {"k": x}])
    assert float(res[0]) == 1 * 2 + 10 * 3 and float(res[1]["k"]) == 1.0


def test_scalar_tangent_broadcasts():
    x = tf.constant([1.0, 2.0])
    with FA(x, 2.0) as acc:
        y = x * x
    np.testing.assert_array_equal(acc.jvp(y).numpy(), [4.0, 8.0])
    assert acc.jvp(x).shape == ()  # the tangent as given, as in TF


def test_int_primal_warns_and_does_not_propagate(caplog):
    x = tf.constant(2)
    with caplog.at_level(logging.WARNING, logger="tapejax"):
        acc = FA(x, 1)
    assert "The dtype of the watched primal must be floating (e.g. tf.float32), got tf.int32" in caplog.text
    with acc:
        y = tf.cast(x, tf.float32) * 2.0
    assert int(acc.jvp(x)) == 1 and acc.jvp(x).dtype == tf.int32
    assert acc.jvp(y) is None


def test_through_stop_gradient_cast_and_custom_gradient():
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    x = tf.constant(3.0)
    with FA(x, 1.0) as acc:
        s = tf.stop_gradient(x)
        a = s * x
        i = tf.cast(tf.round(x), tf.int32)
        c = f(x)
        d = tf.cast(x, tf.float16) * 2.0
    assert acc.jvp(s) is None and float(acc.jvp(a)) == 3.0 and acc.jvp(i) is None
    assert float(acc.jvp(c)) == 2.0  # TF's accumulators run the function's own ops, not the custom rule
    assert float(acc.jvp(d)) == 2.0


def test_recompute_grad_inside():
    block = tf.recompute_grad(lambda h: tf.sin(h) * h)
    x = tf.constant(0.7)
    with FA(x, 1.0) as acc:
        y = block(x)
    np.testing.assert_allclose(float(acc.jvp(y)), np.cos(0.7) * 0.7 + np.sin(0.7), rtol=1e-6)


def test_complex_matches_jax():
    z0 = np.complex64(1 + 2j)
    x = tf.constant(z0)
    with FA(x, tf.constant(np.complex64(1 + 0j))) as acc:
        y = x * x
        c = tf.math.conj(x) * x
        r = tf.abs(x)
    np.testing.assert_allclose(acc.jvp(y).numpy(), 2 + 4j, rtol=1e-6)
    np.testing.assert_allclose(acc.jvp(c).numpy(), 2.0, rtol=1e-6)
    np.testing.assert_allclose(float(acc.jvp(r)), float(jax.jvp(jnp.abs, (z0,), (np.complex64(1),))[1]), rtol=1e-6)


# ---------------------------------------------------------------------------
# Nesting: Hessian-vector products


def _hvp_expected(x0, v0):
    return np.asarray(jax.jvp(jax.grad(lambda x: jnp.sum(x ** 3)), (x0,), (v0,))[1])


def test_forward_over_backward():
    x0, v0 = np.float32([1.0, 2.0]), np.float32([1.0, 0.0])
    x = tf.constant(x0)
    with FA(x, tf.constant(v0)) as acc:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(x ** 3)
        g = tape.gradient(y, x)
    np.testing.assert_array_equal(g.numpy(), [3.0, 12.0])
    np.testing.assert_allclose(acc.jvp(g).numpy(), _hvp_expected(x0, v0))  # [6, 0]


def test_backward_over_forward():
    x0, v0 = np.float32([1.0, 2.0]), np.float32([0.0, 1.0])
    x = tf.constant(x0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        with FA(x, tf.constant(v0)) as acc:
            y = tf.reduce_sum(x ** 3)
        j = acc.jvp(y)
    assert float(j) == 12.0
    np.testing.assert_allclose(tape.gradient(j, x).numpy(), _hvp_expected(x0, v0))  # [0, 12]


def test_tf_docs_hvp_with_a_variable():
    v = tf.Variable([1.0, 2.0])
    with FA(v, tf.constant([1.0, 0.0])) as acc:
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(v ** 3.0)
        backward = tape.gradient(y, v)
    assert backward.numpy().tolist() == [3.0, 12.0]
    assert acc.jvp(backward).numpy().tolist() == [6.0, 0.0]
    with tf.GradientTape() as tape:
        with FA(v, tf.constant([1.0, 0.0])) as acc:
            y = tf.reduce_sum(v ** 3.0)
        jvp = acc.jvp(y)
    assert tape.gradient(jvp, v).numpy().tolist() == [6.0, 0.0]


def test_gradient_with_respect_to_the_tangent():
    # The tangent is data of the jvp replay: an outer tape can differentiate it (d(J t)/dt = J).
    x = tf.constant([1.0, 2.0])
    t = tf.constant([1.0, 1.0])
    with tf.GradientTape() as tape:
        tape.watch(t)
        with FA(x, t) as acc:
            y = tf.reduce_sum(x * x)
        j = acc.jvp(y)
    np.testing.assert_array_equal(tape.gradient(j, t).numpy(), [2.0, 4.0])


def test_nested_accumulators_second_derivative():
    x = tf.constant(3.0)
    with FA(x, 1.0) as acc1:
        with FA(x, 1.0) as acc2:
            y = x * x * x
        j = acc2.jvp(y)
    assert float(j) == 27.0 and float(acc1.jvp(j)) == 18.0


def test_forward_over_backward_through_custom_gradient():
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    x = tf.constant(1.0)
    with FA(x, 1.0) as acc:
        with tf.GradientTape() as t:
            t.watch(x)
            y = f(x) * x
        g = t.gradient(y, x)
    # g = 100 * x (grad_fn's op on the upstream x) + f(x) (tangent from f's own ops: 2)
    assert float(g) == 102.0 and float(acc.jvp(g)) == 102.0
    with tf.GradientTape() as t:
        t.watch(x)
        with FA(x, 1.0) as acc:
            y = f(x)
        j = acc.jvp(y)
    assert float(j) == 2.0 and float(t.gradient(j, x)) == 0.0


def test_tangents_are_computed_as_ops_run():
    # TF's semantics: a tangent exists as soon as its op ran (inside the block), and no
    # replay is compiled for it.
    x = tf.constant([1.0, 2.0])
    tf.replay_cache_clear()
    for _ in range(3):
        with FA(x, tf.constant([1.0, 1.0])) as acc:
            y = tf.reduce_sum(tf.sin(x))
            inside = acc.jvp(y)
        np.testing.assert_allclose(float(inside), float(np.cos(1.0) + np.cos(2.0)), rtol=1e-6)
        assert acc.jvp(y) is inside
    assert tf.replay_cache_info().misses == 0


# ---------------------------------------------------------------------------
# Errors, as TF


def test_reenter_while_recording():
    x = tf.constant(1.0)
    acc = FA(x, 1.0)
    with acc:
        with pytest.raises(ValueError, match=r"^Accumulator is already recording\.$"):
            acc.__enter__()
    assert acc.__exit__(None, None, None) is None  # exiting when not recording is a no-op


def test_duplicate_primal():
    x = tf.constant(3.0)
    with pytest.raises(ValueError) as e:
        FA([x, x], [1.0, 2.0])
    assert str(e.value) == (
        "Tensor {} was specified as a primal multiple times. This may indicate an error. If it was intended, "
        "please sum the corresponding tangents."
    )


def test_bad_unconnected_gradients():
    x = tf.constant(3.0)
    with FA(x, 1.0) as acc:
        y = x * x
    for bad in ("foo", "ZERO"):
        with pytest.raises(ValueError) as e:
            acc.jvp(y, unconnected_gradients=bad)
        assert str(e.value) == f"{bad!r} is not a valid UnconnectedGradients"


def test_non_tensor_target_and_primal():
    x = tf.constant(3.0)
    with FA(x, 1.0) as acc:
        pass
    with pytest.raises(AttributeError, match="'float' object has no attribute '_id'"):
        acc.jvp(3.0)
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute '_id'"):
        acc.jvp(None)
    with pytest.raises(AttributeError, match="'float' object has no attribute 'dtype'"):
        FA(2.0, 1.0)


def test_tangent_dtype_and_structure_mismatch():
    x, w = tf.constant(2.0), tf.constant(3.0)
    with pytest.raises(ValueError, match="Tensor conversion requested dtype float32 for Tensor with dtype float16"):
        FA(x, tf.constant(1.0, tf.float16))
    with pytest.raises(ValueError, match="The two structures don't have the same nested structure."):
        FA([x, w], [tf.constant(1.0)])
    with pytest.raises(ValueError, match="The two structures don't have the same nested structure."):
        FA(tf.constant([1.0, 2.0]), [1.0, 0.0])  # a list is a structure, not a tensor (as in TF)


def test_tangent_shape_mismatch():
    x = tf.constant([1.0, 2.0])
    with pytest.raises(ValueError, match="Dimensions must be equal"):
        FA(x, tf.constant([1.0, 2.0, 3.0]))
