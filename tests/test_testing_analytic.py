"""Self-tests of tapejax.testing.assert_matches_analytic: right formulas pass, wrong ones FAIL with a report."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

import tapejax as tf
from tapejax.testing import GradientCheckError, assert_matches_analytic
from tapejax.testing import strategies as tst


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x)))


# (fn, derivative formula, args): the seed functions of the tutorials.
RIGHT = {
    "x**2": (lambda x: x ** 2, lambda x: 2 * x, (tf.constant([1.5, -2.0, 0.5]),)),
    "x**3": (lambda x: x ** 3, lambda x: 3 * x ** 2, (tf.constant([1.5, -2.0, 0.5]),)),
    "sigmoid": (tf.sigmoid, lambda x: _sigmoid(x) * (1 - _sigmoid(x)), (tf.constant([1.5, -2.0, 0.5]),)),
    "(x**2+2y)**2": (lambda x, y: (x ** 2 + 2 * y) ** 2,
                     lambda x, y: (4 * x * (x ** 2 + 2 * y), 4 * (x ** 2 + 2 * y)),
                     (tf.constant(2.0), tf.constant(3.0))),
    "sum(x*x) (jnp formula)": (lambda x: tf.reduce_sum(x * x), lambda x: 2 * jnp.asarray(x),
                               (tf.constant([[1.0, 2.0], [3.0, 4.0]]),)),
}


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_right_formulas_pass(name):
    fn, dfn, args = RIGHT[name]
    assert assert_matches_analytic(fn, dfn, args) is None


def test_wrong_formula_fails_with_argument_element_values_and_tolerance():
    x = tf.constant([1.0, 2.0, -3.0])
    with pytest.raises(GradientCheckError) as info:
        assert_matches_analytic(lambda x: x ** 3, lambda x: 2 * x ** 2, (x,))  # should be 3x^2
    (m,) = info.value.failures
    assert m.argument == "args[0]"
    assert m.where == "worst element args[0][2]"  # |27 - 18| is the largest error
    assert m.tape == pytest.approx(27.0) and m.reference == pytest.approx(18.0)
    assert m.tolerance == pytest.approx(1e-4 + 1e-3 * 18.0)
    msg = str(info.value)
    for piece in ("args[0]", "worst element args[0][2]", "tape = 27", "analytic = 18", "tolerance"):
        assert piece in msg, (piece, msg)


def test_wrong_formula_for_one_of_two_arguments_names_it():
    f, df_right, args = RIGHT["(x**2+2y)**2"]
    df_wrong = lambda x, y: (df_right(x, y)[0], 2 * (x ** 2 + 2 * y))  # noqa: E731  (should be 4*(...))
    with pytest.raises(GradientCheckError) as info:
        assert_matches_analytic(f, df_wrong, args)
    assert [m.argument for m in info.value.failures] == ["args[1]"]
    assert info.value.failures[0].tape == pytest.approx(40.0)


def test_nested_structures():
    params = {"w": tf.Variable([[1.0, 2.0], [3.0, 4.0]]), "b": [tf.constant(0.5), tf.constant([1.0, -1.0])]}
    x = tf.constant([1.0, 2.0])

    def fn(p, x):
        return {"a": tf.reduce_sum(tf.matmul(x[None, :], p["w"])) * p["b"][0], "b": p["b"][1] * p["b"][1]}

    def dfn(p, x):
        w, b0, b1 = np.asarray(p["w"].numpy()), float(p["b"][0].numpy()), np.asarray(p["b"][1].numpy())
        xv = np.asarray(x.numpy())
        dw = b0 * np.outer(xv, np.ones(2))
        return ({"w": dw, "b": [float(np.sum(xv @ w)), 2 * b1]}, b0 * w.sum(axis=1))

    assert_matches_analytic(fn, dfn, (params, x))
    with pytest.raises(GradientCheckError) as info:
        assert_matches_analytic(fn, lambda p, x: ({"w": 0.0, "b": dfn(p, x)[0]["b"]}, dfn(p, x)[1]), (params, x))
    assert [m.argument for m in info.value.failures] == ["args[0]['w']"]


def test_none_means_unconnected():
    args = (tf.constant(1.0), tf.constant(2.0))
    assert_matches_analytic(lambda x, y: x * 3.0, lambda x, y: (3.0, None), args)
    # Claiming "unconnected" for a connected argument fails, and says so.
    with pytest.raises(GradientCheckError, match="dfn returned None"):
        assert_matches_analytic(lambda x, y: x * y, lambda x, y: (y, None), args)
    # A tape None (unconnected) matches a formula of zeros.
    assert_matches_analytic(lambda x, y: x * 3.0, lambda x, y: (3.0, 0.0), args)


def test_formula_is_evaluated_in_float64():
    # The reference must not itself be a float32 approximation: the formula sees float64 inputs.
    seen = []

    def dfn(x):
        seen.append(x.dtype)
        return tf.sin(x)

    assert_matches_analytic(lambda x: 1.0 - tf.cos(x), dfn, (tf.constant([1e-3, 0.5]),))
    assert seen == [tf.float64]


def test_tolerances_override():
    x = tf.constant([1.0, 2.0])
    assert_matches_analytic(lambda x: x * x, lambda x: 2.1 * x, (x,), rtol=0.1)
    with pytest.raises(GradientCheckError):
        assert_matches_analytic(lambda x: x * x, lambda x: 2.1 * x, (x,), rtol=0.01)


def test_structure_errors_are_clear():
    args = (tf.constant(1.0), tf.constant(2.0))
    with pytest.raises(ValueError, match="one entry per argument"):
        assert_matches_analytic(lambda x, y: x * y, lambda x, y: y, args)
    with pytest.raises(ValueError, match="does not broadcast"):
        assert_matches_analytic(lambda x: x * 2.0, lambda x: np.ones(3), (tf.constant([1.0, 2.0]),))


@settings(max_examples=8)
@given(tst.tensors(shape=(4,)), tst.tensors(shape=(4,)))
def test_property_product_rule_formula(x, y):
    assert_matches_analytic(lambda x, y: tf.sin(x) * tf.exp(y),
                            lambda x, y: (tf.cos(x) * tf.exp(y), tf.sin(x) * tf.exp(y)), (x, y))


def test_jax_formula_under_x64():
    with jax.enable_x64(True):
        x = tf.constant(np.array([0.2, 0.7]))
        assert_matches_analytic(lambda x: tf.tanh(x), lambda x: 1 - jnp.tanh(jnp.asarray(x)) ** 2, (x,))
