"""Differential oracle: random tape programs run on real TensorFlow and on tapejax must agree
(values, None-ness, structure). Hypothesis draws the op sequence, what is watched, persistence,
nesting, and which of gradient / jacobian / batch_jacobian is called (issue 10)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax

# Unary and binary ops, written once against the `tf` module passed in.
UNARY = {
    "sin": lambda tf, a: tf.sin(a),
    "tanh": lambda tf, a: tf.tanh(a),
    "square": lambda tf, a: tf.square(a),
    "sigmoid": lambda tf, a: tf.sigmoid(a),
    "relu": lambda tf, a: tf.nn.relu(a),
    "abs": lambda tf, a: tf.abs(a),
    "neg": lambda tf, a: -a,
    "exp_tanh": lambda tf, a: tf.exp(tf.tanh(a)),
    "scale": lambda tf, a: a * 1.5,
    "rsub": lambda tf, a: 0.5 - a,
    "sum_keep": lambda tf, a: a - tf.reduce_sum(a, axis=1, keepdims=True),
    "mean_all": lambda tf, a: a * tf.reduce_mean(a),
    "max_row": lambda tf, a: a + tf.reduce_max(a, axis=0, keepdims=True),
    "stop": lambda tf, a: tf.stop_gradient(a) if hasattr(tf, "stop_gradient") else a,
    "round": lambda tf, a: tf.round(a),
    "pow3": lambda tf, a: a**3,
}
BINARY = {
    "add": lambda tf, a, b: a + b,
    "mul": lambda tf, a, b: a * b,
    "sub": lambda tf, a, b: a - b,
    "div": lambda tf, a, b: a / (1.0 + b * b),
    "maximum": lambda tf, a, b: tf.maximum(a, b),
}

op_step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(sorted(UNARY)), st.integers(0, 10)),
    st.tuples(st.just("b"), st.sampled_from(sorted(BINARY)), st.integers(0, 10), st.integers(0, 10)),
)

program = st.fixed_dictionaries(
    {
        "x": st.lists(st.floats(-2, 2, width=32), min_size=6, max_size=6),
        "v": st.lists(st.floats(-2, 2, width=32), min_size=3, max_size=3),
        "steps": st.lists(op_step, min_size=1, max_size=8),
        "watch_x": st.booleans(),
        "watch_vars": st.booleans(),
        "persistent": st.booleans(),
        "nested": st.booleans(),
        "call": st.sampled_from(["gradient", "gradient_list", "gradient_zero", "jacobian", "batch_jacobian"]),
    }
)


def run(tf, p):
    """Execute program ``p`` with framework ``tf``; return a nested structure of numpy arrays / None."""
    x = tf.constant(np.array(p["x"], np.float32).reshape(2, 3))
    v = tf.Variable(np.array(p["v"], np.float32))
    vals = [x, v]

    def body(tape):
        vals[:] = [x, v]
        for s in p["steps"]:
            if s[0] == "u":
                a = vals[s[2] % len(vals)]
                vals.append(UNARY[s[1]](tf, a) if not isinstance(a, tf.Variable) else UNARY[s[1]](tf, a * 1.0))
            else:
                a, b = vals[s[2] % len(vals)], vals[s[3] % len(vals)]
                vals.append(BINARY[s[1]](tf, a, b))
        target = vals[-1] + tf.zeros((2, 3))  # every target has shape (2, 3)
        return target

    def finish(tape, target, inner_result=None):
        call = p["call"]
        if call == "gradient":
            return tape.gradient(target, x)
        if call == "gradient_list":
            return tape.gradient(target, [x, v, vals[min(2, len(vals) - 1)]])
        if call == "gradient_zero":
            return tape.gradient(target, {"x": x, "v": v}, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        if call == "jacobian":
            return tape.jacobian(target, [x, v])
        return tape.batch_jacobian(target, x)

    if not p["nested"]:
        with tf.GradientTape(persistent=p["persistent"], watch_accessed_variables=p["watch_vars"]) as tape:
            if p["watch_x"]:
                tape.watch(x)
            target = body(tape)
        return finish(tape, target)
    with tf.GradientTape(persistent=p["persistent"], watch_accessed_variables=p["watch_vars"]) as outer:
        outer.watch(x)
        with tf.GradientTape(persistent=p["persistent"]) as inner:
            if p["watch_x"]:
                inner.watch(x)
            target = body(inner)
        g = inner.gradient(target, x, unconnected_gradients="zero")
        y2 = tf.reduce_sum(g * g) + tf.reduce_sum(target)
    p = dict(p, call=p["call"] if p["call"] != "batch_jacobian" else "gradient")
    if p["call"] in ("jacobian",):
        return outer.jacobian(g, x)
    return outer.gradient(y2, [x, v]) if p["call"] != "gradient_zero" else outer.gradient(
        y2, [x, v], unconnected_gradients="zero")


def to_numpy(r):
    if r is None:
        return None
    if isinstance(r, dict):
        return {k: to_numpy(r[k]) for k in sorted(r)}
    if isinstance(r, (list, tuple)):
        return type(r)(to_numpy(e) for e in r)
    return np.asarray(r)


def assert_same(a, b, path="result"):
    if a is None or b is None:
        assert a is None and b is None, f"{path}: None-ness differs (TF {a is None}, tapejax {b is None})"
        return
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), f"{path}: dict keys differ"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: structure differs {type(a)} vs {type(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
        return
    assert a.shape == b.shape, f"{path}: shape {a.shape} vs {b.shape}"
    finite = np.abs(a[np.isfinite(a)])
    scale = 1.0 + float(finite.max()) if finite.size else 1.0  # inf/nan compare by position
    np.testing.assert_allclose(b, a, rtol=2e-3, atol=2e-3 * scale, err_msg=path)


def outcome(tf, p):
    try:
        return "ok", to_numpy(run(tf, p))
    except Exception as e:  # noqa: BLE001 - the exception *type* is what we compare
        return "error", type(e).__name__


@settings(max_examples=60)
@given(p=program)
def test_random_tape_programs_agree_with_tensorflow(real_tf, p):
    ref = outcome(real_tf, p)
    got = outcome(tapejax, p)
    assert ref[0] == got[0], f"TF gave {ref}, tapejax gave {got}"
    if ref[0] == "error":
        assert ref[1] == got[1], f"exception types differ: TF {ref[1]}, tapejax {got[1]}"
    else:
        assert_same(ref[1], got[1])


def test_generator_covers_every_call_kind(real_tf):
    """A fixed program per call kind, so each transform is exercised even with few examples."""
    base = {"x": [0.1, -0.5, 1.0, 2.0, -1.5, 0.3], "v": [0.2, -0.4, 1.1], "watch_x": True, "watch_vars": True,
            "persistent": True, "nested": False,
            "steps": [("b", "mul", 0, 1), ("u", "sin", 2, 0), ("b", "add", 3, 0), ("u", "relu", 4, 0)]}
    for call in ["gradient", "gradient_list", "gradient_zero", "jacobian", "batch_jacobian"]:
        for nested in (False, True):
            p = dict(base, call=call, nested=nested)
            ref, got = outcome(real_tf, p), outcome(tapejax, p)
            assert ref[0] == got[0] == "ok", (call, nested, ref, got)
            assert_same(ref[1], got[1], f"{call}/nested={nested}")


pytestmark = pytest.mark.oracle


def test_identically_zero_higher_order_derivatives_follow_tf(real_tf):
    """d/dx of d(x + max(x))/dx is zero through reduce_max's tie mask: TF answers None (its
    gradient graph reaches x only through Equal, a bool), and so does tapejax (a pullback
    that reads an input only inside a mask is not connected to it). relu's is zeros in both
    (ReluGrad is one kernel over the float input)."""

    def run_one(tf):
        x = tf.constant([[0.5, -1.0, 2.0]])
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = x + tf.reduce_max(x, axis=0, keepdims=True)
            g = inner.gradient(y, x)
        return outer.jacobian(g, x)

    assert run_one(real_tf) is None and run_one(tapejax) is None

    def relu(tf):
        x = tf.constant([[0.5, -1.0, 2.0]])
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = tf.nn.relu(x)
            g = inner.gradient(y, x)
        return outer.jacobian(g, x)

    ref, got = relu(real_tf), relu(tapejax)
    assert ref is not None and got is not None and not np.any(got.numpy())
    np.testing.assert_array_equal(got.numpy(), ref.numpy())
    # With a linear inner function both agree on None: the gradient does not depend on x at all.
    def linear(tf):
        x = tf.constant([1.0, 2.0])
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = x + x
            g = inner.gradient(y, x)
        return outer.gradient(g, x)

    assert linear(real_tf) is None and linear(tapejax) is None
