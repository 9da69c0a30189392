"""Differential regression tests for issue 14 (exact nested / higher-order differentiation).

Every snippet is written once against a ``tf`` module argument and run on real TensorFlow
(the oracle, fixture ``real_tf``) and on ``tapejax``. They must agree on values, None-ness,
result structure (list / tuple / dict), dtypes, and the class name of any exception raised.
No expected number is hard-coded for tapejax: the TF run is the reference. Where the issue
states TF's value, the TF result is additionally checked against it (``tf_expect``), so a
change in TF's behaviour is noticed too.

Each snippet has the signature ``snippet(tf, wrap)``: ``wrap`` is the identity in eager mode
and ``tf.function`` in compiled mode, so the same code runs eagerly and inside
``tf.function`` / ``tapejax.function``.
"""

import gc
import json
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import tapejax

pytestmark = pytest.mark.oracle

MODES = ["eager", "function"]


# ----------------------------------------------------------------------------- helpers


def to_numpy(r):
    if r is None or isinstance(r, (str, bool)):
        return r
    if isinstance(r, dict):
        return {k: to_numpy(r[k]) for k in sorted(r)}
    if isinstance(r, (list, tuple)):
        return type(r)(to_numpy(e) for e in r)
    return np.asarray(r)


def outcome(tf, snippet, mode="eager"):
    wrap = tf.function if mode == "function" else (lambda f: f)
    try:
        return "ok", to_numpy(snippet(tf, wrap))
    except Exception as e:  # noqa: BLE001 - the exception *class name* is what we compare
        return "error", type(e).__name__


def assert_same(a, b, path="result"):
    """``a`` is TF's result, ``b`` tapejax's (both through ``to_numpy``)."""
    if a is None or b is None:
        assert a is None and b is None, f"{path}: None-ness differs (TF {a!r}, tapejax {b!r})"
        return
    if isinstance(a, (str, bool)):
        assert a == b, f"{path}: TF {a!r}, tapejax {b!r}"
        return
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), f"{path}: dict structure differs: {b!r}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b), f"{path}: structure differs: TF {type(a).__name__}, tapejax {type(b).__name__}"
        assert len(a) == len(b), f"{path}: length differs: TF {len(a)}, tapejax {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
        return
    assert isinstance(b, np.ndarray), f"{path}: TF gave an array, tapejax {type(b).__name__}"
    assert a.shape == b.shape, f"{path}: shape TF {a.shape}, tapejax {b.shape}"
    assert a.dtype == b.dtype, f"{path}: dtype TF {a.dtype}, tapejax {b.dtype}"
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=f"{path} (actual=tapejax, desired=TF)")


def check(real_tf, snippet, mode="eager", tf_expect=None):
    """Run ``snippet`` on both frameworks and compare. ``tf_expect``: optional callable that
    asserts something about TF's own (ok, value) outcome (the issue's stated TF value)."""
    ref = outcome(real_tf, snippet, mode)
    if tf_expect is not None:
        tf_expect(ref)
    got = outcome(tapejax, snippet, mode)
    assert ref[0] == got[0], f"TF gave {ref}, tapejax gave {got}"
    if ref[0] == "error":
        assert ref[1] == got[1], f"exception class differs: TF {ref[1]}, tapejax {got[1]}"
    else:
        assert_same(ref[1], got[1])
    return ref


def expect_value(path, value, rtol=1e-4):
    """tf_expect helper: TF's result (indexed by ``path``) equals ``value`` (issue text)."""

    def _check(ref):
        assert ref[0] == "ok", ref
        r = ref[1]
        for i in path:
            r = r[i]
        if value is None:
            assert r is None, r
        else:
            np.testing.assert_allclose(r, value, rtol=rtol, atol=1e-6, err_msg="TF's own value changed")

    return _check


def expect_error(name):
    def _check(ref):
        assert ref == ("error", name), ref

    return _check


def FA(tf, primal, tangent):
    return tf.autodiff.ForwardAccumulator(primal, tangent)


# ----------------------------------------------------------------------------- 1. inner intermediates

X22 = [[0.5, -1.0], [1.5, 0.3]]

H_OPS = {
    "mul": lambda tf, x: x * x,
    "matmul": lambda tf, x: tf.matmul(x, x),
    "reduce_sum": lambda tf, x: tf.reduce_sum(x * x),
    "reduce_sum_axis": lambda tf, x: tf.reduce_sum(x * x, axis=1, keepdims=True) * x,
    "sin": lambda tf, x: tf.sin(x),
    "exp": lambda tf, x: tf.exp(x),
    "tanh": lambda tf, x: tf.tanh(x),
    "square": lambda tf, x: tf.square(x),
    "div": lambda tf, x: x / (1.0 + x * x),
}
Y_OPS = {
    "sq": lambda tf, x, h: tf.reduce_sum(h * h),
    "sin_mix": lambda tf, x, h: tf.reduce_sum(tf.sin(h) * x),
}


def test_issue_reproducer_1_scalar(real_tf):
    """The issue's exact reproducer: TF 8.0 for d g / d h, 48.0 for d g / d x."""

    def snippet(tf, wrap):
        x = tf.constant(2.0)
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                h = x * x
                y = h * h
            g = inner.gradient(y, x)
        return outer.gradient(g, h), outer.gradient(g, x)

    check(real_tf, snippet, tf_expect=expect_value([0], 8.0))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("yop", sorted(Y_OPS))
@pytest.mark.parametrize("hop", sorted(H_OPS))
def test_outer_gradient_wrt_inner_intermediate(real_tf, hop, yop, mode):
    def snippet(tf, wrap):
        @wrap
        def body(x):
            with tf.GradientTape(persistent=True) as outer:
                outer.watch(x)
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    h = H_OPS[hop](tf, x)
                    y = Y_OPS[yop](tf, x, h)
                g = inner.gradient(y, x)
            return (
                outer.gradient(g, h),
                outer.gradient(g, x),
                outer.gradient(g, [h, x]),
                outer.gradient(g, {"h": h}, unconnected_gradients=tf.UnconnectedGradients.ZERO),
                outer.gradient(tf.reduce_sum(g * g), h),
            )

        return body(tf.constant(X22))

    ref = check(real_tf, snippet, mode)
    assert ref[0] == "ok" and ref[1][0] is not None  # TF connects g to h for every op kind


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hop", ["mul", "sin", "matmul", "reduce_sum"])
def test_outer_jacobian_wrt_inner_intermediate(real_tf, hop, mode):
    def snippet(tf, wrap):
        @wrap
        def body(x):
            with tf.GradientTape(persistent=True) as outer:
                outer.watch(x)
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    h = H_OPS[hop](tf, x)
                    y = tf.reduce_sum(h * h)
                g = inner.gradient(y, x)
            return outer.jacobian(g, h), outer.jacobian(g, x)

        return body(tf.constant(X22))

    check(real_tf, snippet, mode)


def test_issue_reproducer_1_inner_gradient_result(real_tf):
    """c1b: TF 4.0 for d g2 / d g1, None for d g2 / d h."""

    def snippet(tf, wrap):
        x = tf.constant(2.0)
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(x)
            with tf.GradientTape(persistent=True) as inner:
                inner.watch(x)
                h = tf.sin(x) * x
                g1 = inner.gradient(h, x)
                z = g1 * x * x
            g2 = inner.gradient(z, x)
        return outer.gradient(g2, g1), outer.gradient(g2, x), outer.gradient(g2, h)

    check(real_tf, snippet, tf_expect=expect_value([0], 4.0))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hop", sorted(H_OPS))
def test_outer_gradient_wrt_inner_gradient_result(real_tf, hop, mode):
    def snippet(tf, wrap):
        @wrap
        def body(x):
            with tf.GradientTape(persistent=True) as outer:
                outer.watch(x)
                with tf.GradientTape(persistent=True) as inner:
                    inner.watch(x)
                    h = H_OPS[hop](tf, x)
                    g1 = inner.gradient(tf.reduce_sum(h * h), x)
                    z = tf.reduce_sum(g1 * x * x)
                g2 = inner.gradient(z, x)
                w = tf.reduce_sum(g1 * g2)
            return (
                outer.gradient(g2, g1),
                outer.gradient(g2, x),
                outer.gradient(g2, h),
                outer.gradient(g2, [g1, h, x]),
                outer.gradient(w, g1),
            )

        return body(tf.constant(X22))

    check(real_tf, snippet, mode)


# ----------------------------------------------------------------------------- 2. non-differentiable ops as sources


def make_cg_none(tf):
    @tf.custom_gradient
    def cg_none(x):
        def grad(dy):
            return None

        return x * 2.0, grad

    return cg_none


NONDIFF = {
    "round": lambda tf, x: tf.round(x),
    "floor": lambda tf, x: tf.floor(x),
    "ceil": lambda tf, x: tf.math.ceil(x),
    "rint": lambda tf, x: tf.math.rint(x),
    "floordiv": lambda tf, x: x // 1.0,
    "zeros_like": lambda tf, x: tf.zeros_like(x),
    "ones_like": lambda tf, x: tf.ones_like(x),
    "cg_none": lambda tf, x: make_cg_none(tf)(x),
    # controls (agreed before the fix)
    "stop_gradient": lambda tf, x: tf.stop_gradient(x),
    "sign": lambda tf, x: tf.sign(x),
    "argmax_cast": lambda tf, x: tf.cast(tf.argmax(x), tf.float32),
}
XND = [0.4, 1.6, -0.7, 2.2]


def test_issue_reproducer_2_round(real_tf):
    def snippet(tf, wrap):
        x = tf.constant([0.4, 1.6])
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            r = tf.round(x)
            s = tf.reduce_sum(r * r)
        return t.gradient(s, r), t.gradient(s, x), t.jacobian(r, r)

    def tf_expect(ref):
        expect_value([0], [0.0, 4.0])(ref)
        expect_value([1], None)(ref)
        expect_value([2], np.eye(2))(ref)

    check(real_tf, snippet, tf_expect=tf_expect)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", sorted(NONDIFF))
def test_nondifferentiable_op_output_as_source(real_tf, op, mode):
    def snippet(tf, wrap):
        @wrap
        def body(x):
            with tf.GradientTape(persistent=True) as t:
                t.watch(x)
                r = NONDIFF[op](tf, x)
                s = tf.reduce_sum(r * r)
                s2 = tf.reduce_sum(r * r + x * r)
            return (
                t.gradient(s, r),
                t.gradient(s, x),
                t.jacobian(r, r),
                t.gradient(s2, [r, x]),
                t.gradient(s, {"r": r, "x": x}, unconnected_gradients=tf.UnconnectedGradients.ZERO),
            )

        return body(tf.constant(XND))

    check(real_tf, snippet, mode)


@pytest.mark.parametrize("op", ["round", "floor", "zeros_like", "cg_none", "stop_gradient"])
def test_nondifferentiable_op_output_as_source_nested(real_tf, op):
    """The non-differentiable output used as a source on an outer tape around a gradient."""

    def snippet(tf, wrap):
        x = tf.constant(XND)
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                r = NONDIFF[op](tf, x)
                y = tf.reduce_sum(r * r * x)
            g = inner.gradient(y, x)
        return outer.gradient(g, r), outer.gradient(g, x), g

    check(real_tf, snippet)


# ----------------------------------------------------------------------------- 3. abs kink at second order

KINK = {
    "abs_x": lambda tf, x: tf.abs(x) * x,
    "abs_sin": lambda tf, x: tf.abs(x) * tf.sin(x),
    # extra kinks (not in the issue): relu and maximum at 0
    "relu_x": lambda tf, x: tf.nn.relu(x) * x,
    "maximum_x": lambda tf, x: tf.maximum(x, 0.0) * x,
}
XK = [0.0, 0.5, -0.5]


def kink_second(tf, wrap, f, order):
    @wrap
    def body(x):
        ones = tf.ones_like(x)
        if order == "rev_rev":
            with tf.GradientTape(persistent=True) as t2:
                t2.watch(x)
                with tf.GradientTape() as t1:
                    t1.watch(x)
                    y = tf.reduce_sum(KINK[f](tf, x))
                g = t1.gradient(y, x)
            return t2.gradient(g, x), t2.jacobian(g, x)
        if order == "fwd_rev":  # ForwardAccumulator around a tape
            with FA(tf, x, ones) as acc:
                with tf.GradientTape() as t1:
                    t1.watch(x)
                    y = tf.reduce_sum(KINK[f](tf, x))
                g = t1.gradient(y, x)
            return acc.jvp(g)
        if order == "rev_fwd":  # tape around a ForwardAccumulator
            with tf.GradientTape() as t:
                t.watch(x)
                with FA(tf, x, ones) as acc:
                    y = tf.reduce_sum(KINK[f](tf, x))
                jv = acc.jvp(y)
            return t.gradient(jv, x)
        if order == "fwd_fwd":
            with FA(tf, x, ones) as a2:
                with FA(tf, x, ones) as a1:
                    y = KINK[f](tf, x)
            return a2.jvp(a1.jvp(y))
        raise AssertionError(order)

    return body(tf.constant(XK))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", ["rev_rev", "fwd_rev", "rev_fwd", "fwd_fwd"])
@pytest.mark.parametrize("f", sorted(KINK))
def test_second_derivative_at_kink(real_tf, f, order, mode):
    tf_expect = None
    if f == "abs_x":  # the issue: [0, 2, -2]
        tf_expect = expect_value([0] if order == "rev_rev" else [], [0.0, 2.0, -2.0])
    check(real_tf, lambda tf, wrap: kink_second(tf, wrap, f, order), mode, tf_expect=tf_expect)


# ----------------------------------------------------------------------------- 4. back-over-forward through custom_gradient


def make_cg_sin(tf):
    @tf.custom_gradient
    def cg(x):
        def grad(dy):
            return dy * 3 * tf.cos(x)

        return tf.sin(x), grad

    return cg


CG_Y = {
    "cg_times_x": lambda tf, cg, x: cg(x) * x,
    "cg": lambda tf, cg, x: cg(x),
    "cg_of_square": lambda tf, cg, x: cg(x * x),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", ["rev_fwd", "fwd_rev", "rev_rev", "fwd_fwd"])
@pytest.mark.parametrize("ycase", sorted(CG_Y))
def test_custom_gradient_second_order(real_tf, ycase, order, mode):
    def snippet(tf, wrap):
        cg = make_cg_sin(tf)

        @wrap
        def body(x):
            one = tf.ones_like(x)
            if order == "rev_fwd":
                with tf.GradientTape() as t:
                    t.watch(x)
                    with FA(tf, x, one) as acc:
                        y = CG_Y[ycase](tf, cg, x)
                    jv = acc.jvp(y)
                return t.gradient(jv, x), jv
            if order == "fwd_rev":
                with FA(tf, x, one) as acc:
                    with tf.GradientTape() as t:
                        t.watch(x)
                        y = CG_Y[ycase](tf, cg, x)
                    g = t.gradient(y, x)
                return acc.jvp(g), g, acc.jvp(y)
            if order == "rev_rev":
                with tf.GradientTape() as t2:
                    t2.watch(x)
                    with tf.GradientTape() as t1:
                        t1.watch(x)
                        y = CG_Y[ycase](tf, cg, x)
                    g = t1.gradient(y, x)
                return t2.gradient(g, x), g
            with FA(tf, x, one) as a2:
                with FA(tf, x, one) as a1:
                    y = CG_Y[ycase](tf, cg, x)
            return a2.jvp(a1.jvp(y)), a1.jvp(y)

        return body(tf.constant(0.3))

    tf_expect = None
    if ycase == "cg_times_x" and order == "rev_fwd":
        tf_expect = expect_value([0], 3.733, rtol=1e-3)  # the issue: TF 3.733
    check(real_tf, snippet, mode, tf_expect=tf_expect)


# ----------------------------------------------------------------------------- 5. custom_gradient under forward mode

CG_BODIES = {
    "const5": lambda tf, x: tf.constant(5.0),
    "times2": lambda tf, x: x * 2,
    "sin": lambda tf, x: tf.sin(x),
    "stop_times2": lambda tf, x: tf.stop_gradient(x) * 2,
    "const_plus_zero_x": lambda tf, x: tf.constant(1.0) + 0 * x,
}
# TF's values under ForwardAccumulator(c, 2.) with grad 3*dy, as stated by the issue / brief
CG_FWD_TF = {"const5": 6.0, "times2": 4.0, "stop_times2": 6.0}


def make_cg_body(tf, body):
    @tf.custom_gradient
    def f(x):
        def grad(dy):
            return 3 * dy

        return CG_BODIES[body](tf, x), grad

    return f


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", ["acc", "acc_in_tape", "tape_in_acc", "acc_in_acc"])
@pytest.mark.parametrize("body", sorted(CG_BODIES))
def test_custom_gradient_under_forward_accumulator(real_tf, body, order, mode):
    def snippet(tf, wrap):
        f = make_cg_body(tf, body)

        @wrap
        def run(c):
            two = tf.constant(2.0)
            if order == "acc":
                with FA(tf, c, two) as acc:
                    y = f(c)
                return acc.jvp(y), y
            if order == "acc_in_tape":
                with tf.GradientTape() as t:
                    t.watch(c)
                    with FA(tf, c, two) as acc:
                        y = f(c)
                    jv = acc.jvp(y)
                return jv, t.gradient(jv, c), t.gradient(y, c)
            if order == "tape_in_acc":
                with FA(tf, c, two) as acc:
                    with tf.GradientTape() as t:
                        t.watch(c)
                        y = f(c)
                    g = t.gradient(y, c)
                return acc.jvp(y), g, acc.jvp(g)
            with FA(tf, c, two) as a2:
                with FA(tf, c, two) as a1:
                    y = f(c)
            return a1.jvp(y), a2.jvp(y), a2.jvp(a1.jvp(y))

        return run(tf.constant(1.0))

    tf_expect = None
    if order == "acc" and body in CG_FWD_TF and mode == "eager":  # (inside tf.function TF differs)
        tf_expect = expect_value([0], CG_FWD_TF[body])
    check(real_tf, snippet, mode, tf_expect=tf_expect)


def make_cg_raising(tf):
    @tf.custom_gradient
    def bad(x):
        def grad(dy):
            raise ValueError("boom from grad_fn")

        return x * 2, grad

    return bad


@pytest.mark.parametrize("mode", MODES)
def test_custom_gradient_raising_grad_fn_under_forward_accumulator(real_tf, mode):
    """The exception from grad_fn propagates; the snippet reports *where* (call vs jvp)."""

    def snippet(tf, wrap):
        bad = make_cg_raising(tf)
        stage = ["enter"]

        @wrap
        def run(c):
            with FA(tf, c, tf.constant(2.0)) as acc:
                stage[0] = "call"
                y = bad(c)
                stage[0] = "after_call"
            stage[0] = "jvp"
            return acc.jvp(y)

        try:
            run(tf.constant(1.0))
        except Exception as e:  # noqa: BLE001
            return stage[0], type(e).__name__
        return stage[0], "no exception"

    def tf_expect(ref):
        assert ref[0] == "ok" and ref[1][1] == "ValueError", ref
        if mode == "eager":
            assert ref[1] == ("call", "ValueError"), ref

    check(real_tf, snippet, mode, tf_expect=tf_expect)


# ----------------------------------------------------------------------------- 6. nested ForwardAccumulators

NEST_F = {
    "pow3_5": lambda tf, p: p**3.5,
    "sin_p": lambda tf, p: tf.sin(p) * p,
    "exp_sq": lambda tf, p: tf.exp(p * p),
}


def test_issue_reproducer_6(real_tf):
    def snippet(tf, wrap):
        p = tf.constant(1.1)
        with FA(tf, p, tf.constant(1.0)) as outer:
            with FA(tf, p, tf.constant(1.0)) as inner:
                out = p**3.5
        return outer.jvp(inner.jvp(out))

    check(real_tf, snippet, tf_expect=expect_value([], 10.0948, rtol=1e-4))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "form",
    ["outer_inner_after", "inner_outer_after", "inside_outer", "tangents_differ", "three_deep",
     "tape_in_accs", "acc_in_tape", "acc_tape_acc"],
)
@pytest.mark.parametrize("fn", sorted(NEST_F))
def test_nested_forward_accumulators(real_tf, fn, form, mode):
    def snippet(tf, wrap):
        @wrap
        def run(p):
            one = tf.constant(1.0)
            F = NEST_F[fn]
            if form in ("outer_inner_after", "inner_outer_after"):
                with FA(tf, p, one) as outer:
                    with FA(tf, p, one) as inner:
                        out = F(tf, p)
                if form == "outer_inner_after":
                    return outer.jvp(inner.jvp(out)), inner.jvp(out), outer.jvp(out)
                return inner.jvp(outer.jvp(out)), outer.jvp(out)
            if form == "inside_outer":
                with FA(tf, p, one) as outer:
                    with FA(tf, p, one) as inner:
                        out = F(tf, p)
                    ji = inner.jvp(out)
                    w = ji * p
                return outer.jvp(ji), outer.jvp(w), inner.jvp(w)
            if form == "tangents_differ":
                with FA(tf, p, tf.constant(2.0)) as outer:
                    with FA(tf, p, tf.constant(3.0)) as inner:
                        out = F(tf, p)
                return outer.jvp(inner.jvp(out)), inner.jvp(outer.jvp(out)), inner.jvp(out), outer.jvp(out)
            if form == "three_deep":
                with FA(tf, p, one) as a1:
                    with FA(tf, p, one) as a2:
                        with FA(tf, p, one) as a3:
                            out = F(tf, p)
                return (
                    a1.jvp(a2.jvp(a3.jvp(out))),
                    a3.jvp(a2.jvp(a1.jvp(out))),
                    a2.jvp(a3.jvp(out)),
                    a1.jvp(a3.jvp(out)),
                )
            if form == "tape_in_accs":
                with FA(tf, p, one) as outer:
                    with FA(tf, p, one) as inner:
                        with tf.GradientTape() as t:
                            t.watch(p)
                            out = F(tf, p)
                        g = t.gradient(out, p)
                return outer.jvp(inner.jvp(g)), inner.jvp(g), outer.jvp(g)
            if form == "acc_in_tape":
                # (a tape around two nested accumulators raises InternalError in TF 2.21:
                # "returned too few gradients", so only one accumulator sits inside the tape)
                with tf.GradientTape() as t:
                    t.watch(p)
                    with FA(tf, p, one) as acc:
                        out = F(tf, p)
                    jv = acc.jvp(out)
                return t.gradient(jv, p), jv
            # acc_tape_acc: accumulator, tape, accumulator
            with FA(tf, p, one) as outer:
                with tf.GradientTape() as t:
                    t.watch(p)
                    with FA(tf, p, one) as inner:
                        out = F(tf, p)
                    ji = inner.jvp(out)
                g = t.gradient(ji, p)
            return outer.jvp(g), g, outer.jvp(ji)

        return run(tf.constant(1.1))

    check(real_tf, snippet, mode)


# ----------------------------------------------------------------------------- 7. grad_fn returning None for an input it reads


def make_f7(tf):
    @tf.custom_gradient
    def f7(x, y):
        def grad(dz):
            return dz * y, None

        return x * y, grad

    return f7


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", ["rev_rev", "fwd_rev", "rev_rev_distinct"])
def test_second_order_through_grad_fn_returning_none(real_tf, order, mode):
    def snippet(tf, wrap):
        f7 = make_f7(tf)

        @wrap
        def run(a):
            if order == "rev_rev":
                with tf.GradientTape() as t2:
                    t2.watch(a)
                    with tf.GradientTape() as t1:
                        t1.watch(a)
                        z = f7(a, a)
                    g = t1.gradient(z, a)
                return t2.gradient(g, a), g
            if order == "fwd_rev":
                with FA(tf, a, tf.constant(1.0)) as acc:
                    with tf.GradientTape() as t1:
                        t1.watch(a)
                        z = f7(a, a)
                    g = t1.gradient(z, a)
                return acc.jvp(g), g
            b = a * 3.0
            with tf.GradientTape(persistent=True) as t2:
                t2.watch([a, b])
                with tf.GradientTape() as t1:
                    t1.watch([a, b])
                    z = f7(a, b)
                ga, gb = t1.gradient(z, [a, b])
            return t2.gradient(ga, [a, b]), gb

        return run(tf.constant(2.0))

    tf_expect = expect_value([0], 1.0) if order == "rev_rev" else None  # the issue: TF 1.0
    check(real_tf, snippet, mode, tf_expect=tf_expect)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("use_variable", [False, True])
def test_gradient_penalty_step_through_grad_fn_returning_none(real_tf, use_variable, mode):
    def snippet(tf, wrap):
        f7 = make_f7(tf)
        wv = tf.Variable(1.5) if use_variable else None

        @wrap
        def step(w0, x):
            w = wv if use_variable else w0
            with tf.GradientTape() as t2:
                if not use_variable:
                    t2.watch(w)
                with tf.GradientTape() as t1:
                    t1.watch(x)
                    z = f7(x * w, x)
                g = t1.gradient(z, x)
                penalty = (g - 1.0) ** 2
                loss = z - 0.5 * penalty
            return t2.gradient(loss, w), g, loss

        return step(tf.constant(1.5), tf.constant(0.5))

    check(real_tf, snippet, mode)


# ----------------------------------------------------------------------------- 8. grad_fn runs eagerly in TF


def make_numpy_grad(tf):
    @tf.custom_gradient
    def f8(x):
        def grad(dy):
            v = dy.numpy()
            if v > 0:
                return dy * 2.0
            return dy * 3.0

        return x * 1.0, grad

    return f8


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_grad_fn_uses_numpy_and_python_control_flow(real_tf, sign):
    def snippet(tf, wrap):
        f8 = make_numpy_grad(tf)
        x = tf.constant(1.0)
        with tf.GradientTape() as t:
            t.watch(x)
            y = f8(x) * sign
        return t.gradient(y, x)

    check(real_tf, snippet, tf_expect=expect_value([], 2.0 if sign > 0 else -3.0))


def test_grad_fn_uses_numpy_at_second_order(real_tf):
    def snippet(tf, wrap):
        f8 = make_numpy_grad(tf)
        x = tf.constant(0.7)
        with tf.GradientTape() as t2:
            t2.watch(x)
            with tf.GradientTape() as t1:
                t1.watch(x)
                y = f8(x) * x
            g = t1.gradient(y, x)
        return t2.gradient(g, x), g

    check(real_tf, snippet)


def test_grad_fn_uses_numpy_inside_function_fails_in_both(real_tf):
    """Inside tf.function the grad_fn is traced: `.numpy()` fails in TF; tapejax must fail too
    (the exception class is compared)."""

    def snippet(tf, wrap):
        f8 = make_numpy_grad(tf)

        @tf.function
        def run(x):
            with tf.GradientTape() as t:
                t.watch(x)
                y = f8(x)
            return t.gradient(y, x)

        return run(tf.constant(1.0))

    ref = check(real_tf, snippet)
    assert ref[0] == "error"


def make_numpy_forward(tf):
    @tf.custom_gradient
    def fnp(x):
        y = tf.constant(np.sin(x.numpy()))
        if x.numpy() > 0:
            y = y * 1.0

        def grad(dy):
            return dy * tf.cos(x)

        return y, grad

    return fnp


@pytest.mark.parametrize("order", ["first", "rev_rev", "fwd_rev", "rev_rev_rev"])
def test_custom_gradient_forward_uses_numpy_under_higher_order(real_tf, order):
    def snippet(tf, wrap):
        fnp = make_numpy_forward(tf)
        x = tf.constant(0.4)
        if order == "first":
            with tf.GradientTape() as t:
                t.watch(x)
                y = fnp(x) * x
            return t.gradient(y, x), y
        if order == "rev_rev":
            with tf.GradientTape() as t2:
                t2.watch(x)
                with tf.GradientTape() as t1:
                    t1.watch(x)
                    y = fnp(x) * x
                g = t1.gradient(y, x)
            return t2.gradient(g, x), g
        if order == "fwd_rev":
            with FA(tf, x, tf.constant(1.0)) as acc:
                with tf.GradientTape() as t1:
                    t1.watch(x)
                    y = fnp(x) * x
                g = t1.gradient(y, x)
            return acc.jvp(g), g
        with tf.GradientTape() as t3:
            t3.watch(x)
            with tf.GradientTape() as t2:
                t2.watch(x)
                with tf.GradientTape() as t1:
                    t1.watch(x)
                    y = fnp(x) * x * x
                g = t1.gradient(y, x)
            g2 = t2.gradient(g, x)
        return t3.gradient(g2, x), g2, g

    check(real_tf, snippet)


# ----------------------------------------------------------------------------- 9. x64 weak types


def make_f9(tf):
    @tf.custom_gradient
    def f9(x):
        def grad(dy):
            return dy * -1.1

        return x * 1.0, grad

    return f9


def x64_first(tf, wrap):
    f9 = make_f9(tf)

    @wrap
    def run(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = f9(x) * 2.0
        return t.gradient(y, x)

    g = run(tf.constant(1.0))
    return g, g.dtype.name


def x64_second(tf, wrap):
    f9 = make_f9(tf)
    x = tf.constant(0.5)
    with tf.GradientTape() as t2:
        t2.watch(x)
        with tf.GradientTape() as t1:
            t1.watch(x)
            y = f9(x) * x * 2.0
        g = t1.gradient(y, x)
    h = t2.gradient(g, x)
    return h, h.dtype.name, g.dtype.name


def x64_scalar_ops(tf, wrap):
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(x * -1.1 + 0.5 / (x + 2.5))
    g = t.gradient(y, x)
    return g, g.dtype.name, y.dtype.name


X64_CASES = {
    "first_eager": (x64_first, "eager"),
    "first_function": (x64_first, "function"),
    "second_eager": (x64_second, "eager"),
    "scalar_ops": (x64_scalar_ops, "eager"),
}


@pytest.fixture(scope="module")
def tapejax_x64_results():
    """Run every X64 case on tapejax in one subprocess with JAX_ENABLE_X64=1."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = (
        "import json, sys, numpy as np, runpy\n"
        f"ns = runpy.run_path({os.path.abspath(__file__)!r})\n"
        "import tapejax, jax\n"
        "assert jax.config.jax_enable_x64\n"
        "out = {}\n"
        "for name, (fn, mode) in ns['X64_CASES'].items():\n"
        "    kind, r = ns['outcome'](tapejax, fn, mode)\n"
        "    if kind == 'ok':\n"
        "        r = [e if isinstance(e, str) else [str(e.dtype), np.asarray(e).tolist()] for e in r]\n"
        "    out[name] = [kind, r]\n"
        "print('RESULT' + json.dumps(out))\n"
    )
    env = dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT"):])


@pytest.mark.parametrize("case", sorted(X64_CASES))
def test_x64_python_scalar_stays_weak(real_tf, tapejax_x64_results, case):
    fn, mode = X64_CASES[case]
    ref = outcome(real_tf, fn, mode)
    assert ref[0] == "ok", ref
    got = tapejax_x64_results[case]
    assert got[0] == "ok", f"tapejax under JAX_ENABLE_X64=1 raised {got[1]}"
    ref_items = [e if isinstance(e, str) else [str(e.dtype), e] for e in ref[1]]
    assert len(ref_items) == len(got[1])
    for i, (a, b) in enumerate(zip(ref_items, got[1])):
        if isinstance(a, str):
            assert a == b, f"[{i}] TF {a!r}, tapejax {b!r}"
        else:
            assert a[0] == b[0], f"[{i}] dtype TF {a[0]}, tapejax {b[0]}"
            np.testing.assert_allclose(np.asarray(b[1]), a[1], rtol=1e-6, err_msg=f"[{i}]")
    if case == "first_eager":  # the issue: TF keeps float32
        assert ref[1][1] == "float32"
        np.testing.assert_allclose(ref[1][0], -2.2, rtol=1e-6)


# ----------------------------------------------------------------------------- 10. dtype rules

DTYPE_CASES = {
    "int_eq_pyfloat": lambda tf: tf.constant([1, 2]) == 1.0,
    "int_ne_pyfloat": lambda tf: tf.constant([1, 2]) != 1.5,
    "float_eq_int_tensor": lambda tf: tf.constant([1.0, 2.0]) == tf.constant([1, 2]),
    "float_ne_int_tensor": lambda tf: tf.constant([1.0, 2.0]) != tf.constant([1, 2]),
    "tf_equal_float_int": lambda tf: tf.equal(tf.constant([1.0, 2.0]), tf.constant([1, 2])),
    "euclidean_norm_int32": lambda tf: (lambda r: (r, r.dtype.name))(
        tf.math.reduce_euclidean_norm(tf.constant([3, 4]))),
    "euclidean_norm_int32_axis": lambda tf: (lambda r: (r, r.dtype.name))(
        tf.math.reduce_euclidean_norm(tf.constant([[3, 4], [6, 8]]), axis=1)),
    "reduce_mean_scalar_axis0": lambda tf: tf.reduce_mean(tf.constant(2.0), axis=0),
    "reduce_sum_scalar_axis0": lambda tf: tf.reduce_sum(tf.constant(2.0), axis=0),
    "int32_plus_pyfloat": lambda tf: tf.constant(1) + 1.0,
    "int32_times_pyfloat": lambda tf: tf.constant([1, 2]) * 0.5,
    "int32_plus_pyint": lambda tf: (lambda r: (r, r.dtype.name))(tf.constant(1) + 1),
    "float_eq_pyint": lambda tf: tf.constant([1.0, 2.0]) == 1,
}
DTYPE_TF = {
    "int_eq_pyfloat": "TypeError",
    "float_eq_int_tensor": "InvalidArgumentError",
    "reduce_mean_scalar_axis0": "InvalidArgumentError",
    "int32_plus_pyfloat": "InvalidArgumentError",
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(DTYPE_CASES))
def test_dtype_rules(real_tf, case, mode):
    def snippet(tf, wrap):
        if mode == "eager":
            return DTYPE_CASES[case](tf)

        @wrap
        def run():
            r = DTYPE_CASES[case](tf)
            return r[0] if isinstance(r, tuple) else r

        return run()

    tf_expect = None
    if mode == "eager" and case in DTYPE_TF:
        tf_expect = expect_error(DTYPE_TF[case])
    if mode == "eager" and case == "euclidean_norm_int32":
        def tf_expect(ref):
            assert ref[0] == "ok" and ref[1][1] == "int32" and int(ref[1][0]) == 5, ref
    check(real_tf, snippet, mode, tf_expect=tf_expect)


# ----------------------------------------------------------------------------- 11. smaller cases


@pytest.mark.parametrize(
    "target", ["list_h_s", "h", "list_h", "s", "list_s_h", "h_wrt_x", "list_h_s_wrt_list"]
)
def test_persistent_tape_source_computed_under_stop_recording(real_tf, target):
    def snippet(tf, wrap):
        x = tf.constant(2.0)
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            with t.stop_recording():
                h = x * x
            s = h * x
        if target == "list_h_s":
            return t.gradient([h, s], h)
        if target == "h":
            return t.gradient(h, h)
        if target == "list_h":
            return t.gradient([h], h)
        if target == "s":
            return t.gradient(s, h)
        if target == "list_s_h":
            return t.gradient([s, h], [h, x])
        if target == "h_wrt_x":
            return t.gradient(h, x)
        return t.gradient([h, s], [h, x], unconnected_gradients=tf.UnconnectedGradients.ZERO)

    tf_expect = expect_value([], None) if target == "list_h_s" else None  # the issue: TF None
    check(real_tf, snippet, tf_expect=tf_expect)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", ["relu", "relu6", "leaky_relu", "elu"])
def test_third_derivative_of_piecewise_activation(real_tf, fn, mode):
    def snippet(tf, wrap):
        act = {"relu": tf.nn.relu, "relu6": tf.nn.relu6, "leaky_relu": tf.nn.leaky_relu, "elu": tf.nn.elu}[fn]

        @wrap
        def run(x):
            with tf.GradientTape() as t3:
                t3.watch(x)
                with tf.GradientTape() as t2:
                    t2.watch(x)
                    with tf.GradientTape() as t1:
                        t1.watch(x)
                        y = act(x)
                    g1 = t1.gradient(y, x)
                g2 = t2.gradient(g1, x)
            return t3.gradient(g2, x), g2, g1

        return run(tf.constant([-1.0, 2.0, 7.0]))

    tf_expect = None
    if fn in ("relu", "relu6"):  # the issue: TF zeros
        tf_expect = expect_value([0], [0.0, 0.0, 0.0])
    check(real_tf, snippet, mode, tf_expect=tf_expect)


JVP_ND = ["sign", "round", "floor", "ceil", "zeros_like", "ones_like", "stop_gradient", "argmax_cast", "floordiv",
          "cg_none"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", JVP_ND)
def test_jvp_of_nondifferentiable_op(real_tf, op, mode):
    def snippet(tf, wrap):
        @wrap
        def run(x):
            with FA(tf, x, tf.ones_like(x)) as acc:
                r = NONDIFF[op](tf, x)
                s = r * x
            return acc.jvp(r), acc.jvp(s), acc.jvp(r, unconnected_gradients=tf.UnconnectedGradients.ZERO)

        return run(tf.constant(XND))

    tf_expect = expect_value([0], None) if op == "sign" else None  # the issue: TF None
    check(real_tf, snippet, mode, tf_expect=tf_expect)


def _accumulator_keeps_primal_alive(tf, with_op):
    x = tf.constant([1.0, 2.0])
    try:
        ref = weakref.ref(x)
    except TypeError:
        return "no weakref support"
    acc = tf.autodiff.ForwardAccumulator(x, tf.constant([1.0, 1.0]))
    with acc:
        if with_op:
            y = x * 2.0
            jv = acc.jvp(y)
            del y, jv
    del x
    gc.collect()
    alive = ref() is not None
    del acc
    return alive


@pytest.mark.parametrize("with_op", [False, True])
def test_forward_accumulator_does_not_keep_primal_alive(real_tf, with_op):
    tf_alive = _accumulator_keeps_primal_alive(real_tf, with_op)
    tj_alive = _accumulator_keeps_primal_alive(tapejax, with_op)
    assert tj_alive is False, "tapejax's ForwardAccumulator keeps its primal alive"
    if tf_alive != "no weakref support":
        assert tf_alive == tj_alive


# ----------------------------------------------------------------------------- jacobians recorded by an outer tape


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["jacobian", "batch_jacobian"])
@pytest.mark.parametrize("hop", ["exp", "sin", "mul"])
def test_inner_jacobian_differentiated_wrt_inner_intermediate(real_tf, hop, kind, mode):
    """An inner (batch_)jacobian recorded on an outer tape reaches every forward value its
    backward reads: the outer gradient with respect to an inner intermediate (TF: pfor over
    recorded gradient ops)."""

    def snippet(tf, wrap):
        @wrap
        def body(x):
            with tf.GradientTape(persistent=True) as outer:
                outer.watch(x)
                with tf.GradientTape(persistent=True) as inner:
                    inner.watch(x)
                    h = {"exp": tf.exp, "sin": tf.sin, "mul": lambda v: v * v}[hop](x)
                    y = tf.concat([tf.sin(h) * x, h * x * x], axis=1)
                j = inner.jacobian(y, x) if kind == "jacobian" else inner.batch_jacobian(y, x)
                s = tf.reduce_sum(j * j)
            return j, outer.gradient(s, h), outer.gradient(s, x), outer.gradient(s, [h, x])

        return body(tf.constant([[0.3], [-0.7], [1.2]]))

    check(real_tf, snippet, mode)


@pytest.mark.parametrize("mode", MODES)
def test_jacobian_of_a_tall_target_through_custom_gradient(real_tf, mode):
    """A target 4x larger than its source would use forward mode; a custom_gradient forces
    reverse mode (JAX has no jvp of a custom_vjp), and TF's rule (grad 3*dy) holds."""

    def snippet(tf, wrap):
        @tf.custom_gradient
        def f(x):
            return x * 2.0, lambda dy: dy * 3.0

        @wrap
        def body(x):
            with tf.GradientTape() as t:
                t.watch(x)
                y = tf.concat([f(x), tf.sin(x), f(x) * x, x], axis=0)
            return t.jacobian(y, x)

        return body(tf.constant([1.0, 2.0]))

    check(real_tf, snippet, mode)
