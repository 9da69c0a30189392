"""Differential tests of issue 5 against real TF: stop_gradient, custom_gradient, recompute_grad,
ForwardAccumulator and UnconnectedGradients. Each snippet runs with ``tf = tensorflow`` and with
``tf = tapejax``; values, None-ness, dtypes, shapes, structures and exception class names must agree
(``_seed_helpers.assert_same``). A snippet never returns a bare None."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tapejax
from _seed_helpers import assert_same, outcome

SNIPPETS: list = []


def snippet(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    SNIPPETS.append(pytest.param(fn, id=fn.__name__))
    return fn


def P(tf):
    return tf.GradientTape(persistent=True)


def FA(tf, *a):
    return tf.autodiff.ForwardAccumulator(*a)


# --- stop_gradient ------------------------------------------------------------------------------


@snippet
def sg_basic(tf):
    x = tf.constant([1.0, 2.0])
    with P(tf) as g:
        g.watch(x)
        s = tf.stop_gradient(x)
        y = x * s
        z = s * 2.0
    return [s, g.gradient(y, x), g.gradient(s, x), g.gradient(s, x, unconnected_gradients="zero"),
            g.gradient(z, s), g.gradient(z, x), g.gradient(s, s)]


@snippet
def sg_variable(tf):
    v = tf.Variable(3.0)
    with P(tf) as g:
        y = tf.stop_gradient(v) * v
        s = tf.stop_gradient(v)
    return [g.gradient(y, v), g.gradient(s, v)]


# --- custom_gradient ----------------------------------------------------------------------------


def _log1pexp(tf):
    @tf.custom_gradient
    def log1pexp(x):
        e = tf.exp(x)

        def grad(upstream):
            return upstream * (1 - 1 / (1 + e))

        return tf.math.log(1 + e), grad

    return log1pexp


@snippet
def cg_log1pexp(tf):
    f = _log1pexp(tf)
    x, x2 = tf.constant(100.0), tf.constant(2.0)
    with P(tf) as g:
        g.watch([x, x2])
        y = f(x)
        y2 = f(x2) * 3.0
    return [y, g.gradient(y, x), g.gradient(y2, x2), g.gradient(y2, x2, output_gradients=2.0)]


@snippet
def cg_second_order_captured(tf):
    f = _log1pexp(tf)
    x = tf.constant(2.0)
    with P(tf) as o:
        o.watch(x)
        with P(tf) as i:
            i.watch(x)
            y = f(x)
        d = i.gradient(y, x)
    return [d, o.gradient(d, x)]


@snippet
def cg_second_order_grad_fn_ops(tf):
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    x = tf.constant(1.0)
    with P(tf) as o:
        o.watch(x)
        with P(tf) as i:
            i.watch(x)
            y = f(x) * x
        d = i.gradient(y, x)
    return [d, o.gradient(d, x)]


@snippet
def cg_functional_form(tf):
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    h = tf.custom_gradient(f)
    x = tf.constant(1.0)
    with P(tf) as g:
        g.watch(x)
        y = h(x)
    return [y, g.gradient(y, x), h.__name__]


@snippet
def cg_grad_counts(tf):
    @tf.custom_gradient
    def two_list(a, b):
        return a * b, lambda dy: [dy, dy * 2.0]

    @tf.custom_gradient
    def none_first(a, b):
        return a * b, lambda dy: (None, dy * 2.0)

    @tf.custom_gradient
    def only_none(a):
        return a * 2.0, lambda dy: None

    a, b = tf.constant(1.0), tf.constant(2.0)
    with P(tf) as g:
        g.watch([a, b])
        y, z, w = two_list(a, b), none_first(a, b), only_none(a)
    return [g.gradient(y, [a, b]), g.gradient(z, [a, b]), g.gradient(z, [a, b], unconnected_gradients="zero"),
            g.gradient(w, a)]


@snippet
def cg_too_few(tf):
    @tf.custom_gradient
    def f(a, b):
        return a * b, lambda dy: dy

    a, b = tf.constant(1.0), tf.constant(2.0)
    with P(tf) as g:
        g.watch([a, b])
        y = f(a, b)
    return g.gradient(y, [a, b])


@snippet
def cg_too_many(tf):
    @tf.custom_gradient
    def f(a):
        return a * 2.0, lambda dy: (dy, dy)

    a = tf.constant(1.0)
    with P(tf) as g:
        g.watch(a)
        y = f(a)
    return g.gradient(y, a)


@snippet
def cg_multiple_outputs(tf):
    @tf.custom_gradient
    def f(x):
        return [x * 2.0, x * 3.0], lambda da, db: da * 10.0 + db * 100.0

    x = tf.constant(1.0)
    with P(tf) as g:
        g.watch(x)
        a, b = f(x)
        only_a = a * 10.0
        both = a + b
    return [a, b, g.gradient(only_a, x), g.gradient(both, x)]


@snippet
def cg_one_arg_grad_for_two_outputs(tf):
    @tf.custom_gradient
    def f(x):
        return [x * 2.0, x * 3.0], lambda dy: dy

    x = tf.constant(1.0)
    with P(tf) as g:
        g.watch(x)
        a, b = f(x)
        y = a + b
    return g.gradient(y, x)


@snippet
def cg_dict_output(tf):
    @tf.custom_gradient
    def f(x):
        return {"a": x * 2.0, "b": x}, lambda da, db: da * 100.0 + db

    x = tf.constant(1.0)
    with P(tf) as g:
        g.watch(x)
        y = f(x)
    return [y, g.gradient(y["a"], x), g.gradient(y, x)]


@snippet
def cg_variables(tf):
    v = tf.Variable(3.0)

    @tf.custom_gradient
    def f(x):
        return x * v, lambda dy, variables=None: (dy * 1.0, [dy * 7.0])

    x = tf.constant(2.0)
    with P(tf) as g:
        g.watch(x)
        y = f(x)
    return [y, g.gradient(y, [x, v]), len(g.watched_variables())]


@snippet
def cg_variables_without_kwarg(tf):
    v = tf.Variable(3.0)

    @tf.custom_gradient
    def f(x):
        return x * v, lambda dy: dy

    with P(tf):
        return f(tf.constant(1.0))


@snippet
def cg_variables_wrong_count(tf):
    v, w = tf.Variable(3.0), tf.Variable(4.0)

    @tf.custom_gradient
    def f(x):
        return x * v * w, lambda dy, variables=None: (dy, [dy])

    x = tf.constant(1.0)
    with P(tf) as g:
        g.watch(x)
        y = f(x)
    return g.gradient(y, [x, v, w])


@snippet
def cg_variable_argument(tf):
    v = tf.Variable(3.0)

    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 7.0

    with P(tf) as g:
        y = f(v)
    return [y, g.gradient(y, v)]


@snippet
def cg_not_a_pair(tf):
    @tf.custom_gradient
    def f(x):
        return x * 2.0

    return f(tf.constant(1.0))


@snippet
def cg_python_args_and_kwargs(tf):
    @tf.custom_gradient
    def f(x, n, k=1.0):
        return x * k, lambda dy: (dy * k, None)

    @tf.custom_gradient
    def h(x, k=None):
        return x * k, lambda dy: dy * 3.0

    x, kt = tf.constant(1.0), tf.constant(5.0)
    with P(tf) as g:
        g.watch([x, kt])
        y = f(x, 3, k=5.0)
        z = h(x, k=kt)
    return [y, g.gradient(y, x), g.gradient(z, [x, kt]), f(2.0, 0)]


@snippet
def cg_no_tape(tf):
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    return f(tf.constant(1.0))


@snippet
def cg_jacobian(tf):
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    x = tf.constant([1.0, 2.0])
    with P(tf) as g:
        g.watch(x)
        y = f(x)
    return g.jacobian(y, x)


# --- recompute_grad -----------------------------------------------------------------------------


@snippet
def rg_basic(tf):
    r = tf.recompute_grad(lambda x: tf.tanh(x) * 2.0)
    x = tf.constant([0.5, 1.0])
    with P(tf) as g:
        g.watch(x)
        y = r(x)
    return [y, g.gradient(y, x), r(tf.constant(2.0))]


@snippet
def rg_variables(tf):
    v = tf.Variable(2.0)
    r = tf.recompute_grad(lambda x: x * v * v)
    x = tf.constant(3.0)
    with P(tf) as g:
        g.watch(x)
        y = r(x)
    return [y, g.gradient(y, [x, v]), len(g.watched_variables())]


@snippet
def rg_kwargs_and_outputs(tf):
    r = tf.recompute_grad(lambda x, z, s=1.0: [x * z * s, x + z])
    x, z = tf.constant(3.0), tf.constant(2.0)
    with P(tf) as g:
        g.watch([x, z])
        a, b = r(x, z, s=4.0)
        t = a + b
    return [a, b, g.gradient(t, [x, z])]


@snippet
def rg_chain(tf):
    rng = np.random.default_rng(0)
    ws = [tf.constant((rng.normal(size=(3, 3)) / 2).astype(np.float32)) for _ in range(3)]

    def block(h):
        for w in ws:
            h = tf.tanh(tf.matmul(h, w))
        return h

    r = tf.recompute_grad(block)
    x = tf.constant(rng.normal(size=(2, 3)).astype(np.float32))
    with P(tf) as g:
        g.watch(x)
        y = tf.reduce_sum(r(r(x)) ** 2)
    return [y, g.gradient(y, x)]


# --- ForwardAccumulator -------------------------------------------------------------------------


@snippet
def fa_basic(tf):
    x = tf.constant([1.0, 2.0])
    with FA(tf, x, tf.constant([1.0, 0.5])) as acc:
        y = x * x
        z = tf.reduce_sum(y)
    return [acc.jvp(y), acc.jvp(z), acc.jvp(x)]


@snippet
def fa_unconnected(tf):
    x, u = tf.constant(2.0), tf.constant(3.0)
    with FA(tf, x, tf.constant(1.0)) as acc:
        y = u * 2.0
    return [acc.jvp(y), acc.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO),
            acc.jvp(y, unconnected_gradients="zero"), acc.jvp(tf.constant(5.0)), acc.jvp({"a": [y, x]}),
            acc.jvp(tf.constant([1, 2]), unconnected_gradients="zero")]


@snippet
def fa_exit_and_not_entered(tf):
    x = tf.constant(2.0)
    with FA(tf, x, tf.constant(1.0)) as acc:
        y = x * 3.0
        inside = acc.jvp(y)
    z = y * x
    acc2 = FA(tf, x, tf.constant(1.0))
    return [inside, acc.jvp(y), acc.jvp(z), acc2.jvp(x * 3.0)]


@snippet
def fa_reenter_after_exit(tf):
    x = tf.constant(3.0)
    with FA(tf, x, 1.0) as acc:
        pass
    with acc:
        y = x * x
    return acc.jvp(y)


@snippet
def fa_jvp_of_jvp_inside(tf):
    x = tf.constant(3.0)
    with FA(tf, x, 1.0) as acc:
        y = x * x
        j = acc.jvp(y)
        z = j * x
    return [j, acc.jvp(j), acc.jvp(z)]


@snippet
def fa_several_primals_dict(tf):
    x, w = tf.constant(2.0), tf.constant(3.0)
    with FA(tf, (x, w), (1.0, 10.0)) as acc:
        y = x * w
    with FA(tf, {"a": x, "b": [w]}, {"a": 1.0, "b": [10.0]}) as acc2:
        y2 = x * w
    return [acc.jvp(y), acc2.jvp([y2, {"k": x}])]


@snippet
def fa_variable_primal(tf):
    v = tf.Variable([1.0, 2.0])
    other = tf.Variable(5.0)
    with FA(tf, v, tf.constant([1.0, 0.0])) as acc:
        y = v * v
        o = other * 2.0
    return [acc.jvp(v), acc.jvp(y), acc.jvp(other), acc.jvp(o), acc.jvp(other, unconnected_gradients="zero")]


@snippet
def fa_scalar_tangent(tf):
    x = tf.constant([1.0, 2.0])
    with FA(tf, x, 2.0) as acc:
        y = x * x
    return [acc.jvp(x), acc.jvp(y)]


@snippet
def fa_int_primal(tf):
    x = tf.constant(2)
    with FA(tf, x, 1) as acc:
        y = tf.cast(x, tf.float32) * 2.0
    return [acc.jvp(x), acc.jvp(y), acc.jvp(x, unconnected_gradients="zero")]


@snippet
def fa_cuts(tf):
    x = tf.constant(3.0)
    with FA(tf, x, tf.constant(1.0)) as acc:
        s = tf.stop_gradient(x)
        a = s * x
        r = tf.round(x) * 1.0
        c = tf.cast(tf.cast(x, tf.int32), tf.float32)
        h = tf.cast(x, tf.float16) * 2.0
    return [acc.jvp(s), acc.jvp(a), acc.jvp(r), acc.jvp(c), acc.jvp(h)]


@snippet
def fa_complex(tf):
    x = tf.constant(1.0 + 2.0j, tf.complex64)
    with FA(tf, x, tf.constant(1.0 + 0.0j, tf.complex64)) as acc:
        y = x * x
        z = tf.math.conj(x) * x
        r = tf.abs(x)
    return [acc.jvp(y), acc.jvp(z), acc.jvp(r)]


@snippet
def fa_custom_gradient(tf):
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    x = tf.constant(1.0)
    with FA(tf, x, 1.0) as acc:
        y = f(x)
    with P(tf) as g:
        g.watch(x)
        with FA(tf, x, 1.0) as acc2:
            y2 = f(x)
        j = acc2.jvp(y2)
    with FA(tf, x, 1.0) as acc3:
        with P(tf) as t:
            t.watch(x)
            y3 = f(x) * x
        gg = t.gradient(y3, x)
    return [acc.jvp(y), j, g.gradient(j, x), gg, acc3.jvp(gg)]


@snippet
def fa_hvp_forward_over_backward(tf):
    x = tf.constant([1.0, 2.0])
    with FA(tf, x, tf.constant([1.0, 0.0])) as acc:
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.reduce_sum(x ** 3)
        g = t.gradient(y, x)
    return [g, acc.jvp(g)]


@snippet
def fa_hvp_backward_over_forward(tf):
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        with FA(tf, x, tf.constant([0.0, 1.0])) as acc:
            y = tf.reduce_sum(x ** 3)
        jvp = acc.jvp(y)
    return [jvp, tape.gradient(jvp, x)]


@snippet
def fa_docs_example(tf):
    v = tf.Variable([1.0, 2.0])
    with FA(tf, v, tf.constant([1.0, 0.0])) as acc:
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(v ** 3.0)
        backward = tape.gradient(y, v)
    with tf.GradientTape() as tape2:
        with FA(tf, v, tf.constant([1.0, 0.0])) as acc2:
            y2 = tf.reduce_sum(v ** 3.0)
        jvp = acc2.jvp(y2)
    return [backward, acc.jvp(backward), tape2.gradient(jvp, v)]


@snippet
def fa_nested_accumulators(tf):
    x = tf.constant(3.0)
    with FA(tf, x, 1.0) as acc1:
        with FA(tf, x, 1.0) as acc2:
            y = x * x * x
        j = acc2.jvp(y)
    return [j, acc1.jvp(j)]


@snippet
def fa_err_reenter(tf):
    x = tf.constant(1.0)
    with FA(tf, x, 1.0) as acc:
        with acc:
            pass
    return "unreachable"


@snippet
def fa_err_duplicate(tf):
    x = tf.constant(1.0)
    return FA(tf, [x, x], [1.0, 2.0])


@snippet
def fa_err_unconnected_value(tf):
    x = tf.constant(1.0)
    with FA(tf, x, 1.0) as acc:
        y = x * x
    return acc.jvp(y, unconnected_gradients="foo")


@snippet
def fa_err_python_primal(tf):
    return FA(tf, 2.0, 1.0)


@snippet
def fa_err_python_target(tf):
    x = tf.constant(1.0)
    with FA(tf, x, 1.0) as acc:
        pass
    return acc.jvp(3.0)


@snippet
def fa_err_tangent_dtype(tf):
    return FA(tf, tf.constant(2.0), tf.constant(1.0, tf.float16))


@snippet
def fa_err_structure(tf):
    x, w = tf.constant(2.0), tf.constant(3.0)
    return FA(tf, [x, w], [tf.constant(1.0)])


@snippet
def fa_err_list_tangent(tf):
    return FA(tf, tf.constant([1.0, 2.0]), [1.0, 0.0])


@snippet
def fa_err_tangent_shape(tf):
    x = tf.constant([1.0, 2.0])
    with FA(tf, x, tf.constant([1.0, 2.0, 3.0])) as acc:
        y = x * x
    return acc.jvp(y)


# --- UnconnectedGradients ------------------------------------------------------------------------


@snippet
def ug_enum(tf):
    U = tf.UnconnectedGradients
    return [[m.name for m in U], [m.value for m in U], repr(U.ZERO), str(U.NONE), U("zero") is U.ZERO]


@pytest.mark.parametrize("bad", ["ZERO", "None", "foo", None, 0])
def test_unconnected_gradients_bad_values(real_tf, bad):
    def run(tf):
        x = tf.constant(1.0)
        with P(tf) as g:
            g.watch(x)
            y = x * 2.0
        try:
            g.gradient(y, x, unconnected_gradients=bad)
        except ValueError as e:
            return str(e).split(". ")[0]
        return "no error"

    assert run(tapejax).startswith(run(real_tf))


@pytest.mark.parametrize("fn", SNIPPETS)
def test_against_tf(real_tf, fn):
    assert_same(outcome(fn, real_tf), outcome(fn, tapejax))


def test_exact_messages(real_tf):
    """The messages TF users match on are TF's, word for word."""

    def msg(tf, fn):
        try:
            fn(tf)
        except Exception as e:  # noqa: BLE001
            return str(e)
        return "no error"

    for fn in (cg_too_few, cg_too_many, cg_variables_wrong_count, cg_not_a_pair, fa_err_reenter, fa_err_duplicate,
               fa_err_unconnected_value, fa_err_python_primal, fa_err_python_target):
        assert msg(tapejax, fn) == msg(real_tf, fn), fn.__name__
    # TF's variable reprs differ only in the numpy= suffix style; the sentence is the same
    assert msg(tapejax, cg_variables_without_kwarg).split(": [")[0] == msg(real_tf, cg_variables_without_kwarg).split(": [")[0]
