"""Self-tests of tapejax.testing.check_gradients: it passes on correct derivatives and FAILS on wrong ones."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings

import tapejax as tf
from tapejax._core._recorder import Primitive, bind
from tapejax.testing import GradientCheckError, TOLERANCES, check_gradients, default_tolerance
from tapejax.testing import strategies as tst
from tapejax.testing._numeric import Evaluator, directional, mixed_second

HAS_JACOBIAN = hasattr(tf.GradientTape, "jacobian")


# --- a primitive whose recorded derivative is deliberately wrong ---------------------------------
# Its value is x*x, but its VJP rule says 3*x (the true derivative is 2*x): off by a factor 1.5.


@jax.custom_vjp
def _square_wrong_rule(x):
    return x * x


_square_wrong_rule.defvjp(lambda x: (x * x, x), lambda x, g: (3.0 * x * g,))
_WRONG = Primitive("test_square_wrong_rule", _square_wrong_rule)


def wrong_square(x):
    return bind(_WRONG, x)


# --- passing on correct derivatives ---------------------------------------------------------------------

SEEDS = {
    "x**2": (lambda x: x ** 2, (tf.constant([1.5, -2.0, 0.5]),)),
    "x**3": (lambda x: x ** 3, (tf.constant([1.5, -2.0, 0.5]),)),
    "sigmoid": (lambda x: tf.sigmoid(x), (tf.constant([1.5, -2.0, 0.5]),)),
    "(x**2+2y)**2": (lambda x, y: (x ** 2 + 2 * y) ** 2, (tf.constant(2.0), tf.constant(3.0))),
    "sin*cos": (lambda x, y: tf.sin(x) * tf.cos(y), (tf.constant([0.3, 1.1, -0.7]), tf.constant([0.2, 0.4, 0.6]))),
    "matmul+sum": (lambda a, b: tf.reduce_sum(tf.tanh(tf.matmul(a, b))),
                   (tf.constant([[0.1, 0.2], [0.3, -0.4]]), tf.constant([[1.0, -1.0], [0.5, 0.25]]))),
}


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_passes_on_seed_functions(name):
    fn, args = SEEDS[name]
    res = check_gradients(fn, args)
    assert res.checks > 0 and res.worst_ratio < 1.0
    assert res.numeric_dtype == "float64"
    assert (res.atol, res.rtol) == TOLERANCES["float32"][1]


def test_order_two_passes_and_counts_hessian_checks():
    fn, _ = SEEDS["(x**2+2y)**2"]
    args = (tf.Variable(2.0), tf.constant(3.0))  # a variable, too: both tapes must see its reads
    first = check_gradients(fn, args, order=1)
    both = check_gradients(fn, args, order=2)
    # Order 2 adds rev-over-rev and fwd-over-rev comparisons for each of the 2 arguments.
    assert both.checks == first.checks + 4
    assert both.worst_ratio < 1.0
    assert (both.atol, both.rtol) == TOLERANCES["float32"][2]


def test_variables_nested_arguments_and_nested_outputs():
    w = tf.Variable([[0.5, -0.2], [0.1, 0.3]])
    b = tf.Variable([0.05, -0.1])
    x = tf.constant([[1.0, 2.0], [-1.0, 0.5], [0.3, 0.3]])

    def model(params, x):
        h = tf.tanh(tf.matmul(x, params["w"]) + params["b"])
        return {"loss": tf.reduce_mean(h * h), "aux": [h, tf.reduce_sum(params["w"])]}

    res = check_gradients(model, ({"w": w, "b": b}, x), modes=("rev",))
    assert res.worst_ratio < 1.0


def test_fails_on_a_wrong_vjp_rule_and_names_argument_element_and_values():
    x = tf.constant([1.0, 2.0, 3.0])
    with pytest.raises(GradientCheckError) as info:
        check_gradients(lambda x: wrong_square(x), (x,), modes=("rev",))
    err = info.value
    msg = str(err)
    rev = [m for m in err.failures if m.check == "rev"]
    assert rev, msg
    m = rev[0]
    assert m.argument == "args[0]"
    assert m.where.startswith("worst element args[0][")
    # The rule is off by exactly 3/2 at every element, whatever the random cotangent.
    assert m.tape / m.reference == pytest.approx(1.5, rel=1e-4)
    assert m.tolerance > 0
    for piece in ("args[0]", "worst element", "tape =", "numeric =", "tolerance", "atol=0.0001", "rtol=0.001"):
        assert piece in msg, (piece, msg)
    if HAS_JACOBIAN:
        assert any(f.check == "jacobian" for f in err.failures), msg


def test_fails_on_a_wrong_rule_in_forward_mode():
    with pytest.raises(GradientCheckError) as info:
        check_gradients(lambda x: wrong_square(x) + x, (tf.constant([1.0, -2.0]),), modes=("fwd",),
                        forward_impl="double_vjp")
    fwd = [m for m in info.value.failures if m.check == "fwd"]
    assert fwd
    # J v = (3x + 1) v on the tape vs (2x + 1) v: compare the worst output element exactly.
    m = fwd[0]
    assert m.output == "output" and m.where.startswith("worst element output[")
    assert abs(m.tape - m.reference) > m.tolerance


def test_fails_at_order_two_only_when_only_the_second_derivative_is_wrong():
    # d/dx of wrong_square is wrong, so any second derivative through it is wrong as well;
    # multiply its *value* by zero-derivative pieces so order 1 stays right: f = x*x*x recorded
    # with a first-order-correct but second-order-wrong rule.
    @jax.custom_vjp
    def cube(x):
        return x ** 3

    # First derivative correct (3x^2), but written with a non-differentiable trick: its own
    # derivative (what order 2 sees) is 0 instead of 6x.
    cube.defvjp(lambda x: (x ** 3, x), lambda x, g: (jax.lax.stop_gradient(3.0 * x * x) * g,))
    p = Primitive("test_cube_second_order_wrong", cube)
    fn = lambda x: bind(p, x)  # noqa: E731
    x = tf.constant([0.7, -1.2])
    # (A custom_vjp impl has no forward rule: forward_impl='auto' falls back to the double VJP.)
    res = check_gradients(fn, (x,), order=1)
    assert res.worst_ratio < 1.0 and res.forward_impl.startswith("double_vjp")
    with pytest.raises(GradientCheckError) as info:
        check_gradients(fn, (x,), order=2)
    kinds = {m.check for m in info.value.failures}
    assert kinds == {"rev-over-rev", "fwd-over-rev"}, str(info.value)
    assert all(m.order == 2 for m in info.value.failures)


def test_detects_code_that_escapes_the_tape():
    # A round trip through NumPy cuts the tape: the first factor is a constant to it.
    x = tf.constant([1.0, 2.0])
    with pytest.raises(GradientCheckError) as info:
        check_gradients(lambda x: tf.constant(x.numpy()) * x, (x,), modes=("rev",))
    m = [f for f in info.value.failures if f.check == "rev"][0]
    assert m.tape / m.reference == pytest.approx(0.5, rel=1e-4)  # x vs 2x

    # Fully escaped: the tape says None (unconnected), the numbers say 2x.
    with pytest.raises(GradientCheckError) as info:
        check_gradients(lambda x: tf.constant(x.numpy() ** 2), (x,), modes=("rev",))
    assert "None (unconnected)" in str(info.value)


@pytest.mark.skipif(not hasattr(tf, "custom_gradient"),
                    reason="tapejax.custom_gradient is being added by another change; runs once it exists")
def test_fails_on_a_custom_gradient_off_by_a_factor_and_passes_on_the_right_one():
    def make(factor):
        @tf.custom_gradient
        def square(x):
            def grad(dy):
                return dy * factor * x

            return x * x, grad

        return square

    x = tf.constant([0.5, -1.5, 2.0])
    assert check_gradients(make(2.0), (x,), modes=("rev",)).worst_ratio < 1.0
    with pytest.raises(GradientCheckError) as info:
        check_gradients(make(2.2), (x,), modes=("rev",))
    m = [f for f in info.value.failures if f.check == "rev"][0]
    assert m.tape / m.reference == pytest.approx(1.1, rel=1e-4)


def test_argnums_restricts_the_differentiated_arguments():
    # Only y is checked: the wrong rule on x goes unnoticed, as asked.
    fn = lambda x, y: wrong_square(x) + y * y  # noqa: E731
    args = (tf.constant([1.0, 2.0]), tf.constant([0.5, 0.25]))
    assert check_gradients(fn, args, argnums=1).worst_ratio < 1.0
    with pytest.raises(GradientCheckError) as info:
        check_gradients(fn, args, argnums=0, modes=("rev",))
    assert {m.argument for m in info.value.failures} == {"args[0]"}


def test_nested_argument_names_in_report():
    params = {"w": tf.constant([1.0, 2.0]), "b": tf.constant(0.5)}
    with pytest.raises(GradientCheckError) as info:
        check_gradients(lambda p: tf.reduce_sum(wrong_square(p["w"])) + p["b"], (params,), modes=("rev",))
    assert {m.argument for m in info.value.failures} == {"args[0]['w']"}


def test_numpy_arguments_are_converted_and_python_floats_pass_through():
    res = check_gradients(lambda x, k: tf.sin(x) * k, (np.array([0.1, 0.2], np.float32), 3.0))
    assert res.worst_ratio < 1.0


def test_native_fallback_when_fn_pins_float32():
    # tf.constant(2.0) is float32 whatever the input: fn cannot run on float64 inputs.
    res = check_gradients(lambda x: tf.constant(2.0) * tf.sin(x), (tf.constant([0.3, 0.9]),))
    assert res.numeric_dtype == "native" and res.worst_ratio < 1.0


def test_float64_inputs_use_the_float64_row():
    with jax.enable_x64(True):
        x = tf.constant(np.array([0.3, 1.7]))
        res = check_gradients(lambda x: tf.exp(tf.sin(x)) * x, (x,), order=2)
    assert res.dtype == "float64"
    assert (res.atol, res.rtol) == TOLERANCES["float64"][2]
    assert res.worst_ratio < 1.0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_rows_pass_right_rules_and_catch_wrong_ones(dtype):
    x = tf.cast(tf.constant([0.5, 1.25, -0.75]), dtype)
    res = check_gradients(lambda x: tf.sin(x) * x, (x,), modes=("rev",))
    assert res.dtype == dtype and (res.atol, res.rtol) == TOLERANCES[dtype][1] and res.worst_ratio < 1.0
    with pytest.raises(GradientCheckError):
        check_gradients(wrong_square, (x,), modes=("rev",))


def test_complex_inputs_follow_tf_convention():
    z = tf.constant(np.array([1 + 2j, 0.5 - 1j], np.complex64))
    res = check_gradients(lambda z: tf.math.real(z * tf.math.conj(z) * z), (z,))
    assert res.dtype == "complex64" and res.worst_ratio < 1.0


@pytest.mark.skipif(getattr(getattr(tf, "autodiff", None), "ForwardAccumulator", None) is None,
                    reason="tapejax.autodiff.ForwardAccumulator is being added by another change")
def test_forward_accumulator_impl():
    res = check_gradients(lambda x, y: tf.sin(x) * y, (tf.constant([0.1, 0.5]), tf.constant(2.0)), order=2,
                          forward_impl="accumulator")
    assert res.forward_impl == "accumulator" and res.worst_ratio < 1.0


def test_user_tolerances_override_the_table():
    fn = lambda x: wrong_square(x)  # noqa: E731
    # A 50% error passes only with a tolerance wider than it.
    res = check_gradients(fn, (tf.constant([1.0, 2.0]),), modes=("rev",), rtol=0.6, atol=0.0)
    assert res.rtol == 0.6 and res.atol == 0.0
    with pytest.raises(GradientCheckError) as info:
        check_gradients(fn, (tf.constant([1.0, 2.0]),), modes=("rev",), rtol=0.2)
    assert "rtol=0.2" in str(info.value)


def test_bad_calls_raise_clear_errors():
    x = tf.constant(1.0)
    with pytest.raises(ValueError, match="order must be 1 or 2"):
        check_gradients(lambda x: x, (x,), order=3)
    with pytest.raises(ValueError, match="modes"):
        check_gradients(lambda x: x, (x,), modes=("sideways",))
    with pytest.raises(ValueError, match="no floating-point"):
        check_gradients(lambda n: tf.constant(1.0), (3,))
    with pytest.raises(ValueError, match="no floating-point tensor"):
        check_gradients(lambda x: tf.cast(x, tf.int32), (x,))


def test_default_tolerance_table_uses_the_loosest_dtype():
    assert default_tolerance([np.float32, np.float64], 1) == (*TOLERANCES["float32"][1], "float32")
    assert default_tolerance([np.float16, np.float32], 2) == (*TOLERANCES["float16"][2], "float16")
    for row in TOLERANCES.values():
        assert row[2][0] >= row[1][0] and row[2][1] >= row[1][1]


@settings(max_examples=6)
@given(tst.tensors(shape=(3,), domain="log"))
def test_property_log_passes_on_domain_safe_points(x):
    check_gradients(tf.math.log, (x,), modes=("rev",))


# --- the numerical side itself, against JAX's own derivatives in float64 ---------------------------


def _evaluator(fn, x):
    leaves = [x]
    treedef = jax.tree_util.tree_structure((0,))
    return Evaluator(fn, leaves, treedef, [0], [0], 1, step=1e-3)


def test_five_point_stencil_matches_the_analytic_derivative_in_float64():
    x = tf.constant([0.3, -1.2, 2.0])
    ev = _evaluator(lambda x: tf.exp(tf.sin(x)) * x, x)
    v = np.array([0.5, -1.0, 0.25])
    (num,) = directional(ev, 0, v)
    a = np.asarray(x._value, np.float64)
    ref = np.exp(np.sin(a)) * (np.cos(a) * a + 1.0) * v  # d/dx e^sin(x) x, times v
    np.testing.assert_allclose(num, ref, rtol=1e-9, atol=1e-11)


def test_mixed_stencil_matches_the_analytic_hessian_in_float64():
    x = tf.constant([0.3, -1.2, 2.0])
    ev = _evaluator(lambda x: tf.reduce_sum(tf.exp(tf.sin(x)) * x * x), x)
    v = np.array([0.5, -1.0, 0.25])
    w = np.array([1.0, 0.3, -0.6])
    num = mixed_second(ev, lambda outs: float(outs[0]), {0: v}, {0: w})
    a = np.asarray(x._value, np.float64)
    # The Hessian of sum(e^sin(x) x^2) is diagonal: (e^s x^2)'' with s = sin(x).
    d1 = np.cos(a) * a * a + 2 * a
    d2 = np.exp(np.sin(a)) * (d1 * np.cos(a) + (-np.sin(a) * a * a + 2 * a * np.cos(a) + 2))
    assert num == pytest.approx(float(np.sum(v * d2 * w)), rel=1e-7, abs=1e-9)
