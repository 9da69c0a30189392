"""Differential tests of GradientTape.jacobian / batch_jacobian (issue 3) against real TF 2.21.

Each snippet runs with ``tf = tensorflow`` (the ``real_tf`` fixture) and with ``tf = tapejax``; the
outcomes must agree in values, None-ness, dtype, shape, result structure and, for bad input, the
exception's class name (see ``_seed_helpers.assert_same``). Snippets return a structure (never a bare
None); exceptions caught mid-snippet are reported by ``raises()``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tapejax
from _seed_helpers import assert_same, outcome

CASES: list = []


def case(fn: Callable) -> Callable:
    CASES.append(pytest.param(fn, id=fn.__name__.removeprefix("c_")))
    return fn


def raises(fn: Callable[[], Any]) -> str:
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the class name is the result compared)
        return type(e).__name__
    return "no error"


# --- jacobian values and structure ------------------------------------------------------------------


@case
def c_square(tf):
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    return [g.jacobian(y, x)]


@case
def c_nested_sources_and_unconnected(tf):
    x = tf.constant([1.0, 2.0])
    w = tf.constant([[1.0, 2.0, 3.0]])
    u = tf.constant(4.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, w, u])
        y = x * tf.reduce_sum(w)
    return [
        g.jacobian(y, {"x": x, "w": w, "u": u}),
        g.jacobian(y, [x, w, u]),
        g.jacobian(y, (x, u)),
        g.jacobian(y, {"u": u, "w": w}, unconnected_gradients=tf.UnconnectedGradients.ZERO),
        g.jacobian(y, [u, tf.constant([[1.0, 2.0, 3.0]])], unconnected_gradients="zero"),
    ]


@case
def c_shapes(tf):
    x = tf.constant([1.0, 2.0])
    s = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, s])
        y = x * x
        total = tf.reduce_sum(y)
        m = tf.matmul(tf.reshape(x, [2, 1]), tf.constant([[1.0, 2.0, 3.0]]))  # [2, 3]
        ss = s * s
    return [g.jacobian(total, x), g.jacobian(m, x), g.jacobian(ss, s), g.jacobian(y, y), g.jacobian(m, [x, s])]


@case
def c_tanh_affine_against_tf(tf):
    rng = np.random.default_rng(0)
    W = tf.constant(rng.standard_normal((5, 3)).astype(np.float32))
    b = tf.constant(rng.standard_normal(5).astype(np.float32))
    x = tf.constant(rng.standard_normal(3).astype(np.float32))
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, W, b])
        y = tf.tanh(tf.reshape(tf.matmul(W, tf.reshape(x, [3, 1])), [5]) + b) * tf.reduce_sum(x)
        z = tf.exp(x) / tf.reduce_sum(tf.exp(x))  # softmax
    return [
        g.jacobian(y, [x, W, b]),
        g.jacobian(z, x),
        g.jacobian(y, x, experimental_use_pfor=False),
        g.jacobian(y, x, parallel_iterations=2),
        g.jacobian(y, x, experimental_use_pfor=False, parallel_iterations=3),
    ]


@case
def c_identity_unwatched_and_variable(tf):
    x = tf.constant([1.0, 2.0])
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
    with tf.GradientTape(persistent=True) as h:
        pass
    with tf.GradientTape(persistent=True, watch_accessed_variables=False) as k:
        pass
    return [g.jacobian(x, x), h.jacobian(x, x), h.gradient(x, x), h.jacobian(v, v), len(h.watched_variables()),
            k.jacobian(v, v)]


@case
def c_variable_read_twice(tf):
    v = tf.Variable([1.0, 2.0, 3.0])
    with tf.GradientTape() as g:
        y = tf.sin(v) * v
    return [g.jacobian(y, v)]


@case
def c_integer_source_and_target(tf):
    x = tf.constant([1.0, 2.0])
    xi = tf.constant([1, 2])
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, xi])
        y = x * x
        yi = tf.cast(y, tf.int32)
    return [g.jacobian(y, [xi, x]), g.jacobian(y, xi, unconnected_gradients="zero"), g.jacobian(yi, x),
            g.jacobian(yi, x, unconnected_gradients="zero")]


@case
def c_complex(tf):
    xc = tf.constant([1 + 2j, 3 - 1j], tf.complex64)
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch([xc, x])
        y = xc * xc
        n = xc * tf.math.conj(xc)
        r = tf.math.real(xc * xc)
        c = tf.cast(x, tf.complex64) * (1 + 2j)
    return [g.jacobian(y, xc), g.jacobian(n, xc), g.jacobian(r, xc), g.jacobian(c, x)]


# --- batch_jacobian ---------------------------------------------------------------------------------


@case
def c_batch_basic(tf):
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    x3 = tf.constant(np.arange(12, dtype=np.float32).reshape(2, 3, 2) / 10)
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, x3])
        y = x * x
        m = tf.matmul(x, tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
        r3 = tf.reduce_sum(tf.tanh(x3), axis=2, keepdims=True)
    return [g.batch_jacobian(y, x), g.batch_jacobian(m, x), g.batch_jacobian(r3, x3),
            g.batch_jacobian(y, x, experimental_use_pfor=False), g.batch_jacobian(m, x, parallel_iterations=2)]


@case
def c_batch_cross_example_leak(tf):
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * tf.reduce_sum(x)
        z = tf.matmul(tf.constant([[0.0, 1.0], [1.0, 0.0]]), x) * x
    return [g.batch_jacobian(y, x), g.jacobian(y, x), g.batch_jacobian(z, x),
            g.batch_jacobian(z, x, experimental_use_pfor=False)]


@case
def c_batch_unconnected_dtypes(tf):
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    u = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    ui = tf.constant([[1, 2], [3, 4]])
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, ui])
        y = x * x
        yi = tf.cast(x, tf.int32)
    return [g.batch_jacobian(y, u), g.batch_jacobian(y, u, unconnected_gradients="zero"),
            g.batch_jacobian(y, ui), g.batch_jacobian(y, ui, unconnected_gradients="zero"),
            g.batch_jacobian(yi, x), g.batch_jacobian(yi, x, unconnected_gradients="zero")]


# --- nesting ----------------------------------------------------------------------------------------


@case
def c_hessians(tf):
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(x**3)
        g = inner.gradient(y, x)
    h = outer.jacobian(g, x)
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = tf.reduce_sum(v * tf.constant([1.0, 0.0])) ** 2 * tf.reduce_sum(v * tf.constant([0.0, 1.0]))
        gv = inner.gradient(y, v)
    return [g, h, gv, outer.jacobian(gv, v)]


@case
def c_jacobian_of_jacobian_and_batch(tf):
    x = tf.constant([1.0, 2.0])
    xb = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with tf.GradientTape(persistent=True) as outer:
        outer.watch([x, xb])
        with tf.GradientTape(persistent=True) as inner:
            inner.watch([x, xb])
            y = tf.sin(x) * tf.reduce_sum(x * x)
            yb = xb**3
        j = inner.jacobian(y, x)
        jb = inner.batch_jacobian(yb, xb)
    return [outer.jacobian(j, x), outer.batch_jacobian(jb, xb), outer.gradient(jb, xb)]


@case
def c_persistent_jacobian_inside_block(tf):
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
        j = g.jacobian(y, x)
    return [j, g.gradient(j, x)]


# --- errors and the single-use rule ------------------------------------------------------------------


@case
def c_single_use(tf):
    x = tf.constant([1.0, 2.0])
    xb = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    out = []
    for first, second in (("jacobian", "jacobian"), ("jacobian", "gradient"), ("batch_jacobian", "batch_jacobian"),
                          ("gradient", "jacobian")):
        with tf.GradientTape() as g:
            g.watch(xb)
            y = xb * xb
        getattr(g, first)(y, xb)
        out.append(raises(lambda: getattr(g, second)(y, xb)))
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
        j = g.jacobian(y, x)
        out.append(bool(g._recording))
    return [out, j]


@case
def c_pfor_false_non_persistent(tf):
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    out = []
    for what in ("jacobian", "batch_jacobian"):
        with tf.GradientTape() as g:
            g.watch(x)
            y = x * x
            out.append(raises(lambda: getattr(g, what)(y, x, experimental_use_pfor=False)))
            out.append(bool(g._recording))
        out.append(getattr(g, what)(y, x))
    return out


@case
def c_batch_shape_errors(tf):
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    v = tf.reshape(x, [4])
    errs = [
        raises(lambda: g.batch_jacobian(tf.reshape(y, [4, 1]), x)),
        raises(lambda: g.batch_jacobian(v, x)),
        raises(lambda: g.batch_jacobian(y, v)),
        raises(lambda: g.batch_jacobian(v, v)),
        raises(lambda: g.batch_jacobian(tf.reduce_sum(y), x)),
        raises(lambda: g.batch_jacobian(y, [x])),
        raises(lambda: g.batch_jacobian([y], x)),
    ]
    return [errs, g.batch_jacobian(y, x)]  # the failed calls did not use the tape up


@case
def c_bad_arguments(tf):
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
    return [
        raises(lambda: g.jacobian([y, y], x)),
        raises(lambda: g.jacobian(y, x, unconnected_gradients="foo")),
        raises(lambda: g.jacobian(y, x, unconnected_gradients="foo", experimental_use_pfor=False)),
        raises(lambda: g.batch_jacobian(tf.reshape(y, [2, 1]), tf.reshape(x, [2, 1]), unconnected_gradients="foo")),
        raises(lambda: g.jacobian(y, x, parallel_iterations=1)),
        raises(lambda: g.jacobian(y, x, parallel_iterations=0)),
        raises(lambda: g.jacobian(y, x, parallel_iterations=0, experimental_use_pfor=False)),
        g.jacobian(y, []),
        g.jacobian(np.array([1.0, 2.0], np.float32), x),
    ]


@case
def c_failed_calls_and_the_tape(tf):
    x = tf.constant([1.0, 2.0])
    out = []
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    out.append(raises(lambda: g.jacobian(y, x, unconnected_gradients="foo")))
    out.append(g.jacobian(y, x))  # still usable
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    out.append(raises(lambda: g.jacobian(y, x, parallel_iterations=1)))
    out.append(raises(lambda: g.jacobian(y, x)))  # pfor had already run the gradient: used up
    return out


@pytest.mark.parametrize("snippet", CASES)
def test_jacobian_matches_tf(snippet, real_tf):
    expected = outcome(snippet, real_tf)
    actual = outcome(snippet, tapejax)
    assert_same(expected, actual)
