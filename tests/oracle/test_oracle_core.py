"""Differential tests of the core tape (issue 2): each snippet runs twice, with ``tf = tensorflow``
(the ``real_tf`` fixture) and with ``tf = tapejax``, and the two outcomes must agree in values
(np.allclose), None-ness, dtype, shape, result structure (list/tuple/dict/namedtuple types, dict key
order) and, for bad input, the exception's class name (``tf.errors.InvalidArgumentError`` and
``tapejax.errors.InvalidArgumentError`` match by name).

Rules for a snippet: it takes the framework module as ``tf`` and returns a structure (never a bare
None, so a snippet that forgot to return cannot pass). A snippet whose TF run raises must declare the
exception with ``@case(raises=...)``; exceptions caught in the middle of a snippet are reported as
their class name by ``raises()``.

Where tapejax differs from TF on purpose, the case is tested separately below (``DOCUMENTED
DIFFERENCE``, see compat_docs/differences.md).
"""

from __future__ import annotations

import collections
import contextlib
from typing import Any, Callable

import jax
import numpy as np
import pytest

import tapejax
from _seed_helpers import Raised, assert_same, keep_log_once_budget, outcome  # noqa: F401  (autouse fixture)

CASES: list = []


class Snippet:
    """``fn(tf)`` (or ``fn(tf, arg)`` for a variant) plus what the differential test needs to know."""

    def __init__(self, fn: Callable, raises: str | None, x64: bool, arg: Any = None, has_arg: bool = False):
        self.fn, self.raises, self.x64, self.arg, self.has_arg = fn, raises, x64, arg, has_arg

    def __call__(self, tf: Any) -> Any:
        return self.fn(tf, self.arg) if self.has_arg else self.fn(tf)


def case(
    fn: Callable | None = None,
    *,
    raises: str | None = None,
    x64: bool = False,
    xfail: str | None = None,
    variants: dict | None = None,
):
    """Register ``fn(tf)`` as a differential case.

    raises: the exception class name TF raises for it (None: TF must return normally).
    x64: run the tapejax side inside ``jax.enable_x64()`` (float64 needs it; TF has it always).
    xfail: a core bug, as "core bug: ..."; the case is expected to fail until it is fixed.
    variants: {id: arg}; registers ``fn(tf, arg)`` once per entry.
    """

    def register(f: Callable) -> Callable:
        marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
        name = f.__name__.removeprefix("c_")
        if variants is None:
            CASES.append(pytest.param(Snippet(f, raises, x64), id=name, marks=marks))
        else:
            for vid, arg in variants.items():
                CASES.append(pytest.param(Snippet(f, raises, x64, arg, True), id=f"{name}[{vid}]", marks=marks))
        return f

    return register(fn) if fn is not None else register


def raises(fn: Callable[[], Any]) -> str:
    """The class name of what ``fn()`` raises, or "no error"."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__
    return "no error"


def names(variables: Any) -> list:
    return [type(variables).__name__] + [v.name for v in variables]


# =====================================================================================
# watch, auto-watch, trainable=False, watch_accessed_variables=False
# =====================================================================================


@case
def c_watch_constant(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    return [g.gradient(y, x)]


@case
def c_unwatched_constant_is_none(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        y = x * x
    return [g.gradient(y, x)]


@case
def c_variable_is_auto_watched(tf):
    v = tf.Variable(5.0)
    with tf.GradientTape() as g:
        y = v * v
    return [g.gradient(y, v), names(g.watched_variables())]


@case
def c_non_trainable_variable(tf):
    v = tf.Variable(5.0, trainable=False)
    with tf.GradientTape() as g:
        y = v * v
    with tf.GradientTape() as g2:
        g2.watch(v)
        y2 = v * v
    return [g.gradient(y, v), names(g.watched_variables()), g2.gradient(y2, v), names(g2.watched_variables())]


@case
def c_watch_accessed_variables_false(tf):
    v = tf.Variable(5.0, name="v")
    w = tf.Variable(2.0, name="w")
    with tf.GradientTape(watch_accessed_variables=False) as g:
        y = v * v
    with tf.GradientTape(watch_accessed_variables=False, persistent=True) as g2:
        g2.watch(v)
        y2 = v * v * w
    return [g.gradient(y, v), names(g.watched_variables()), g2.gradient(y2, [v, w]), names(g2.watched_variables())]


@case
def c_watch_nested_structure(tf):
    a, b, c = tf.constant(1.0), tf.constant(2.0), tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch({"a": a, "b": [b, (c,)]})
        y = a * b * c
    return g.gradient(y, (a, b, c))


@case(variants={k: k for k in ["float", "int", "str", "None", "ndarray", "list_with_float"]})
def c_watch_rejects_non_tensors(tf, bad):
    x = tf.constant(1.0)
    arg = {"float": 1.0, "int": 3, "str": "abc", "None": None, "ndarray": np.array([1.0, 2.0]), "list_with_float": [1.0]}[bad]
    with tf.GradientTape() as g:
        err = raises(lambda: g.watch(arg))
        y = x * x
    return [err, g.gradient(y, x)]


@case()
def c_watch_mixed_list_watches_leaves_before_the_bad_one(tf):
    x = tf.constant(1.0)
    with tf.GradientTape() as g:
        err = raises(lambda: g.watch([x, 2.0]))
        y = x * x
    return [err, g.gradient(y, x)]


@case
def c_watch_after_the_op_does_not_connect_it(tf):
    x = tf.constant(2.0)
    with tf.GradientTape(persistent=True) as g:
        y = x * x
        g.watch(x)
        z = x * x
    return [g.gradient(y, x), g.gradient(z, x)]


@case
def c_watch_of_an_op_input_after_the_op(tf):
    # c is watched after y = x*c was recorded (because of x); TF still gives dy/dc.
    x, c = tf.constant(2.0), tf.constant(5.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * c
        g.watch(c)
    return [g.gradient(y, c), g.gradient(y, [x, c])]


@case
def c_watch_inside_stop_recording_is_ignored(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        with g.stop_recording():
            g.watch(x)
        y = x * x
    return [g.gradient(y, x)]


@case
def c_watch_after_exit_is_ignored(tf):
    x = tf.constant(3.0)
    g = tf.GradientTape()
    with g:
        pass
    g.watch(x)  # the tape exists but does not record: TF ignores the watch
    with g:
        y = x * x
    return [g.gradient(y, x)]


@case
def c_tape_stacks_are_per_thread(tf):
    import threading

    x = tf.constant(3.0)
    out = {}
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        t = threading.Thread(target=lambda: out.setdefault("y", x * x))
        t.start()
        t.join()
        z = x * x
    return [g.gradient(out["y"], x), g.gradient(z, x)]


@case
def c_watch_twice_is_harmless(tf):
    x = tf.constant(2.0)
    with tf.GradientTape() as g:
        g.watch(x)
        g.watch(x)
        y = x * x
    return [g.gradient(y, x)]


@case()
def c_unwatched_constant_input_of_a_recorded_op(tf):
    # seed 002: t1 is a constant, t2 a variable; only t2 is watched.
    t1 = tf.constant([1.0, 2.0, 3.0])
    t2 = tf.Variable([10.0, 20.0, 30.0])
    with tf.GradientTape(persistent=True) as tape:
        t3 = t1 * t2
    return [
        tape.gradient(t3, [t1, t2]),
        tape.gradient(t3, t1, unconnected_gradients="zero"),
    ]


@case()
def c_source_watched_only_by_another_tape(tf):
    x, w = tf.constant(2.0), tf.constant(3.0)
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape(persistent=True) as inner:
            inner.watch(w)
            y = x * w
    return [inner.gradient(y, [x, w]), outer.gradient(y, [x, w])]


@case
def c_source_watched_only_by_outer_tape_no_inner_record(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            y = x * x
    return [inner.gradient(y, x), outer.gradient(y, x)]


# =====================================================================================
# Structure of sources and targets
# =====================================================================================

NT = collections.namedtuple("NT", ["p", "q"])


def _xwyz(tf):
    x, w = tf.constant(3.0), tf.constant(2.0)
    g = tf.GradientTape(persistent=True)
    with g:
        g.watch([x, w])
        y = x * x
        z = x * w
    return g, x, w, y, z


@case
def c_sources_list(tf):
    g, x, w, y, z = _xwyz(tf)
    return g.gradient(y, [x, w])


@case
def c_sources_tuple(tf):
    g, x, w, y, z = _xwyz(tf)
    return g.gradient(y, (x, w))




@case()
def c_sources_dict_keeps_key_order(tf):
    g, x, w, y, z = _xwyz(tf)
    return [g.gradient(y, {"b": x, "a": w}), g.gradient(z, {"z": x, "a": w})]


@case
def c_sources_dict_sorted_keys(tf):
    g, x, w, y, z = _xwyz(tf)
    return [g.gradient(y, {"a": x, "b": w}), g.gradient(z, {"a": [x], "b": (w,)})]


@case()
def c_sources_nested(tf):
    g, x, w, y, z = _xwyz(tf)
    return g.gradient(y, {"k": [x, w], "j": (w,)})


@case
def c_sources_namedtuple(tf):
    g, x, w, y, z = _xwyz(tf)
    return [g.gradient(y, NT(x, w))]


@case
def c_sources_single_element_list_and_empty(tf):
    g, x, w, y, z = _xwyz(tf)
    return [g.gradient(y, [x]), g.gradient(y, []), g.gradient(y, {})]


@case
def c_targets_structures_are_summed(tf):
    g, x, w, y, z = _xwyz(tf)
    return [
        g.gradient([y, z], x),
        g.gradient((y, z), x),
        g.gradient({"a": y, "b": z}, x),
        g.gradient({"a": [y], "b": (z, y)}, [x, w]),
        g.gradient([], x),
    ]


@case
def c_targets_namedtuple(tf):
    g, x, w, y, z = _xwyz(tf)
    return g.gradient(NT(y, z), [x, w])


@case
def c_duplicate_sources_and_targets(tf):
    g, x, w, y, z = _xwyz(tf)
    return [g.gradient(y, [x, x]), g.gradient([y, y], x)]


# =====================================================================================
# Non-scalar and multiple targets, output_gradients
# =====================================================================================


def _vec(tf):
    xv = tf.constant([1.0, 2.0, 3.0])
    g = tf.GradientTape(persistent=True)
    with g:
        g.watch(xv)
        y = xv * xv
        s = tf.reduce_sum(xv)
    return g, xv, y, s


@case
def c_non_scalar_target_is_summed(tf):
    g, xv, y, s = _vec(tf)
    return [g.gradient(y, xv), g.gradient([y, s], xv)]


@case
def c_output_gradients_tensor_list_and_python_values(tf):
    g, xv, y, s = _vec(tf)
    og = tf.constant([1.0, 10.0, 100.0])
    return [
        g.gradient(y, xv, output_gradients=og),
        g.gradient([y], xv, output_gradients=[og]),
        g.gradient([y, s], xv, output_gradients=[og, 2.0]),
        g.gradient(y, xv, output_gradients=5.0),
        g.gradient(y, xv, output_gradients=np.array([1.0, 2.0, 3.0], np.float32)),
        g.gradient(s, xv, output_gradients=3.0),
    ]


@case
def c_output_gradients_broadcastable(tf):
    g, xv, y, s = _vec(tf)
    return [
        g.gradient(y, xv, output_gradients=tf.constant(2.0)),
        g.gradient(y, xv, output_gradients=tf.constant([2.0])),
    ]


@case
def c_output_gradients_dicts(tf):
    g, xv, y, s = _vec(tf)
    return [
        g.gradient({"a": y, "b": s}, xv, output_gradients={"a": tf.ones((3,)), "b": 3.0}),
        g.gradient({"b": s, "a": y}, xv, output_gradients={"b": 3.0, "a": tf.constant([10.0, 10.0, 10.0])}),
        # A list for dict targets is matched in sorted-key order (both are flattened).
        g.gradient({"b": s, "a": y}, xv, output_gradients=[tf.constant([10.0, 10.0, 10.0]), 3.0]),
    ]


@case
def c_output_gradients_with_target_that_is_the_source(tf):
    xv = tf.constant([1.0, 2.0])
    with tf.GradientTape() as g:
        g.watch(xv)
        y = 2.0 * xv
    return [g.gradient([y, xv], xv, output_gradients=[tf.ones((2,)), tf.constant([10.0, 10.0])])]


@case(raises="InvalidArgumentError")
def c_output_gradients_wrong_shape(tf):
    g, xv, y, s = _vec(tf)
    return g.gradient(y, xv, output_gradients=tf.constant([1.0, 2.0]))


@case(raises="InvalidArgumentError")
def c_output_gradients_wrong_rank(tf):
    g, xv, y, s = _vec(tf)
    return g.gradient(y, xv, output_gradients=tf.ones((3, 1)))


@case(raises="InvalidArgumentError")
def c_output_gradients_wrong_dtype(tf):
    g, xv, y, s = _vec(tf)
    return g.gradient(y, xv, output_gradients=tf.constant([1, 2, 3]))


@case
def c_output_gradients_none_entry(tf):
    g, xv, y, s = _vec(tf)
    return [
        raises(lambda: g.gradient([y, s], xv, output_gradients=[None, tf.constant(1.0)])),
        raises(lambda: g.gradient([y], xv, output_gradients=[None])),
        g.gradient(y, xv, output_gradients=None),
    ]


# =====================================================================================
# Unconnected gradients: NONE / ZERO
# =====================================================================================


@case
def c_unconnected_none_and_zero(tf):
    x, u = tf.constant(3.0), tf.constant([[1.0, 2.0, 3.0]])
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, u])
        y = x * x
    return [
        g.gradient(y, u),
        g.gradient(y, u, unconnected_gradients=tf.UnconnectedGradients.NONE),
        g.gradient(y, u, unconnected_gradients="none"),
        g.gradient(y, u, unconnected_gradients=tf.UnconnectedGradients.ZERO),
        g.gradient(y, u, unconnected_gradients="zero"),
        g.gradient(y, [x, u], unconnected_gradients="zero"),
    ]


@case
def c_unconnected_zero_keeps_dtype_and_gives_tensors(tf):
    xi = tf.constant([1, 2])
    v = tf.Variable([[1.0, 2.0]])
    vi = tf.Variable(3)
    h = tf.constant([1.0], dtype=tf.float16)
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, xi, h])
        y = x * x
    return [g.gradient(y, [xi, v, vi, h], unconnected_gradients="zero"), g.gradient(y, [xi, v, vi, h])]


@case
def c_unconnected_mixed_never_watched_source(tf):
    xv, a = tf.constant([1.0, 2.0]), tf.constant([5.0, 6.0])
    with tf.GradientTape() as g:
        g.watch([xv, a])
        y = xv * xv
    # a*1.0 is computed outside the block (not recorded); the last source was never watched.
    return g.gradient([y, a * 1.0], [xv, a, tf.constant(1.0)], unconnected_gradients="zero")


@case(variants={"ZERO": "ZERO", "None_str": "None", "foo": "foo", "None": None, "0": 0})
def c_unconnected_bad_value(tf, value):
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    err = raises(lambda: g.gradient(y, x, unconnected_gradients=value))
    # A failed call does not use up the non-persistent tape.
    return [err, g.gradient(y, x)]


# =====================================================================================
# Intermediate sources, aliases of the target, integer targets/sources, special points
# =====================================================================================


@case
def c_intermediate_sources_total_derivative(tf):
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
        z = y * y
        z2 = y * y + x
    return [g.gradient(z, [x, y]), g.gradient(z2, [y, x]), g.gradient(z, y)]


@case
def c_intermediate_source_watched_after_the_fact(tf):
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        y = x * x
        g.watch(y)
        z = y * y
    return [g.gradient(z, y), g.gradient(z, x)]


@case
def c_target_is_the_source_tensor(tf):
    x = tf.constant(3.0)
    xv = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        pass
    with tf.GradientTape(persistent=True) as g2:
        g2.watch(x)
        y = x * x
    return [
        g.gradient(x, x),
        g.gradient(x, x, unconnected_gradients="zero"),
        g.gradient(xv, xv, output_gradients=tf.constant([3.0, 4.0])),
        g2.gradient(x, x),
        g2.gradient(y, y),
        g2.gradient([y, x], x),
    ]


@case
def c_target_is_an_unrecorded_intermediate(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        y = x * x
    return [g.gradient(y, y)]


@case
def c_target_is_the_source_variable(tf):
    v = tf.Variable(3.0)
    x = tf.constant(2.0)
    with tf.GradientTape(persistent=True) as g:
        pass
    with tf.GradientTape(persistent=True) as g2:
        g2.watch(x)
        y = v * x
        y2 = v * 2.0
    return [
        g.gradient(v, v),
        g2.gradient(v, v),
        g2.gradient(v, x),
        g2.gradient(v, x, unconnected_gradients="zero"),
        g2.gradient([y2, v], v),
    ]


@case
def c_integer_source(tf):
    xi = tf.constant(3)
    with tf.GradientTape(persistent=True) as g:
        g.watch(xi)
        y = xi * xi
        yf = tf.cast(xi, tf.float32) ** 2
    return [
        g.gradient(y, xi),
        g.gradient(y, xi, unconnected_gradients="zero"),
        g.gradient(xi, xi),
        g.gradient(yf, xi),
    ]


@case
def c_bool_source(tf):
    xb = tf.constant([True, False])
    with tf.GradientTape() as g:
        g.watch(xb)
        y = tf.cast(xb, tf.float32) * 2.0
    return [g.gradient([y, xb], xb)]


@case
def c_integer_variable(tf):
    v = tf.Variable(3)
    with tf.GradientTape() as g:
        y = v * v
    return [g.gradient(y, v), names(g.watched_variables())]


@case
def c_integer_targets_are_skipped(tf):
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        yf = x * x
        yi = tf.cast(x, tf.int32)
        t = x * tf.cast(tf.cast(x, tf.int32), tf.float32)
        b = x > 0.0
    return [
        g.gradient(b, x),
        g.gradient(yi, x),
        g.gradient(yi, x, unconnected_gradients="zero"),
        g.gradient([yf, yi], x),
        g.gradient(t, x),
    ]


@case
def c_relu_at_negative_and_zero_is_a_zero_tensor(tf):
    x = tf.constant([-1.0, 0.0, 2.0])
    s = tf.constant(-1.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, s])
        y = tf.nn.relu(x)
        ys = tf.nn.relu(s)
    return [g.gradient(y, x), g.gradient(ys, s)]


@case
def c_broadcast_source_is_reduced(tf):
    xv, b = tf.ones((2, 2)), tf.constant([1.0, 2.0])
    with tf.GradientTape() as g:
        g.watch([xv, b])
        y = xv + b
    return g.gradient(y, [xv, b])


@case
def c_low_precision_and_complex_dtypes(tf):
    out = []
    for dt in (tf.float16, tf.bfloat16, tf.complex64):
        x = tf.constant(3.0, dtype=dt)
        with tf.GradientTape() as g:
            g.watch(x)
            y = x * x
        out.append(g.gradient(y, x))
    return out


@case
def c_complex_gradient_convention(tf):
    z = tf.constant(3.0 + 4.0j, dtype=tf.complex64)
    with tf.GradientTape(persistent=True) as g:
        g.watch(z)
        a = tf.abs(z) ** 2  # real-valued: dL/dRe + i dL/dIm
        h = z * z  # holomorphic: TF gives conj(f'(z))
        r = tf.math.real(z)
    return [g.gradient(a, z), g.gradient(h, z), g.gradient(r, z)]


@case(x64=True)
def c_float64(tf):
    x = tf.constant(3.0, dtype=tf.float64)
    x32 = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, x32])
        y = x * x
        y32 = tf.cast(x32, tf.float64) ** 2
    return [g.gradient(y, x), g.gradient(y32, x32)]


# =====================================================================================
# Persistent / non-persistent use, gradient inside the block
# =====================================================================================


@case
def c_persistent_repeated_calls(tf):
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
        z = y * x
    return [g.gradient(y, x), g.gradient(z, x), g.gradient(y, x)]


@case
def c_non_persistent_second_call(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    first = g.gradient(y, x)
    return [first, raises(lambda: g.gradient(y, x)), raises(lambda: g.gradient(y, x))]


@case
def c_non_persistent_jacobian_then_gradient(tf):
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    j = g.jacobian(y, x)
    return [j, raises(lambda: g.gradient(y, x)), raises(lambda: g.jacobian(y, x))]


@case
def c_failed_call_does_not_spend_the_tape(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    return [raises(lambda: g.gradient(y, None)), g.gradient(y, x)]


@case
def c_persistent_gradient_inside_block_is_recorded(tf):
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x * x
        dy = g.gradient(y, x)
        z = y * 2.0
        d2 = g.gradient(dy, x)
    return [dy, d2, g.gradient(z, x), g.gradient(dy, x), g.gradient(d2, x)]


@case
def c_non_persistent_gradient_inside_block_stops_recording(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x * x
        dy = g.gradient(y, x)
        z = y * 2.0
        second = raises(lambda: g.gradient(z, x))
        reset = raises(g.reset)
    return [dy, second, reset, raises(lambda: g.gradient(z, x))]


@case
def c_failed_call_inside_non_persistent_block_pops_the_tape(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
        err = raises(lambda: g.gradient(y, x, unconnected_gradients="foo"))
        z = y * x
    return [err, g.gradient(z, x)]


# =====================================================================================
# Nested tapes
# =====================================================================================


@case
def c_nested_second_order(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as t1:
        t1.watch(x)
        with tf.GradientTape() as t2:
            t2.watch(x)
            y = x * x * x
        dy = t2.gradient(y, x)
    return [dy, t1.gradient(dy, x)]


@case
def c_nested_inner_gradient_inside_its_own_block(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as g:
            g.watch(x)
            y = x**3
            dy = g.gradient(y, x)
    return [dy, outer.gradient(dy, x)]


@case
def c_nested_third_order(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as t1:
        t1.watch(x)
        with tf.GradientTape() as t2:
            t2.watch(x)
            with tf.GradientTape() as t3:
                t3.watch(x)
                y = x**4
            d1 = t3.gradient(y, x)
        d2 = t2.gradient(d1, x)
    d3 = t1.gradient(d2, x)
    return [d1, d2, d3]


@case
def c_nested_gradient_after_both_blocks_is_not_recorded(tf):
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as t1:
        t1.watch(x)
        with tf.GradientTape() as t2:
            t2.watch(x)
            y = x**2
    dydx = t2.gradient(y, x)
    return [dydx, t1.gradient(dydx, x), t1.gradient(dydx, x, unconnected_gradients="zero")]


@case
def c_nested_variables(tf):
    v = tf.Variable(3.0)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = v**3
        dy = inner.gradient(y, v)
    return [dy, outer.gradient(dy, v), names(outer.watched_variables()), names(inner.watched_variables())]


@case
def c_nested_vector_hessian_diagonal(tf):
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(x**3)
        g = inner.gradient(y, x)
    return [g, outer.gradient(g, x)]


@case
def c_only_outer_watches(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            y = x * x
        dy = inner.gradient(y, x)
    return [dy, outer.gradient(y, x)]


# =====================================================================================
# Re-entering, reset, stop_recording
# =====================================================================================


@case
def c_reenter_active_tape(tf):
    x = tf.constant(3.0)
    out = []
    for persistent in (False, True):
        g = tf.GradientTape(persistent=persistent)
        with g:
            g.watch(x)

            def reenter():
                with g:
                    pass

            out.append(raises(reenter))
            y = x * x
        out.append(g.gradient(y, x))
    return out


@case
def c_reenter_after_exit_continues_the_record(tf):
    x = tf.constant(3.0)
    g = tf.GradientTape()
    with g:
        g.watch(x)
        y = x * x
    between = y * x  # not recorded
    with g:
        z = y * x
    return [g.gradient([z, between], x)]


@case
def c_reenter_empty_block_then_gradient(tf):
    x = tf.constant(3.0)
    g = tf.GradientTape()
    with g:
        g.watch(x)
        y = x * x
    with g:
        pass
    return [g.gradient(y, x)]


@case
def c_reenter_spent_non_persistent_starts_fresh(tf):
    x = tf.constant(3.0)
    v = tf.Variable(1.0)
    g = tf.GradientTape()
    with g:
        g.watch(x)
        y = x * x * v
    first = g.gradient(y, x)
    with g:
        w = x * x  # x not re-watched: the old watch is gone
        g.watch(x)
        z = x**3
    return [first, g.gradient([z, w, y], x), names(g.watched_variables())]


@case
def c_reenter_persistent_after_gradient_continues(tf):
    x = tf.constant(3.0)
    g = tf.GradientTape(persistent=True)
    with g:
        g.watch(x)
        y = x * x
    first = g.gradient(y, x)
    with g:
        z = y * x
    return [first, g.gradient(z, x)]


@case
def c_exception_inside_block_pops_the_tape(tf):
    x = tf.constant(3.0)
    g = tf.GradientTape()

    def body():
        with g:
            g.watch(x)
            y = x * x
            out.append(y)
            raise KeyError("boom")

    out: list = []
    err = raises(body)
    y = out[0]
    after = y * x  # not recorded
    x2 = tf.constant(3.0)
    with tf.GradientTape() as g2:
        g2.watch(x2)
        w = x2**3
    return [err, g.gradient([y, after], x), g2.gradient(w, x2)]


@case
def c_reset_outside_block(tf):
    x = tf.constant(3.0)
    g = tf.GradientTape()
    never = raises(g.reset)
    with g:
        g.watch(x)
        y = x * x
        with g.stop_recording():
            inside_stop = raises(g.reset)
    after = raises(g.reset)
    return [never, inside_stop, after, g.gradient(y, x)]


@case
def c_reset_inside_block(tf):
    x = tf.constant(3.0)
    v = tf.Variable(3.0, name="v")
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x * v
        g.reset()
        cleared = names(g.watched_variables())
        z = x * x * v
        g.watch(x)
        w = x * x
    return [cleared, g.gradient(z, [x, v]), g.gradient(w, x), g.gradient(y, [x, v]), names(g.watched_variables())]


@case
def c_reset_keeps_settings(tf):
    v = tf.Variable(3.0)
    with tf.GradientTape(watch_accessed_variables=False) as g:
        g.reset()
        y = v * v
    return [g.gradient(y, v)]


@case
def c_stop_recording_errors(tf):
    x = tf.constant(3.0)

    def enter(tape):
        def f():
            with tape.stop_recording():
                pass

        return f

    never = tf.GradientTape()
    out = [raises(enter(never))]
    spent = tf.GradientTape()
    with spent:
        spent.watch(x)
        y = x * x
    out.append(raises(enter(spent)))  # exited, not spent yet
    spent.gradient(y, x)
    out.append(raises(enter(spent)))  # spent
    with tf.GradientTape() as g:

        def nested():
            with g.stop_recording():
                with g.stop_recording():
                    pass

        out.append(raises(nested))
    return out


@case
def c_stop_recording_pauses_only_this_tape(tf):
    x = tf.constant(3.0)
    v = tf.Variable(2.0, name="v")
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape(persistent=True) as inner:
            inner.watch(x)
            with inner.stop_recording():
                a = x * x
                r = v * 1.0
            with outer.stop_recording():
                b = x * x
            c = a * x
    return [
        inner.gradient([a, b, c], x),
        outer.gradient([a, b, c], x),
        names(inner.watched_variables()),
        names(outer.watched_variables()),
        inner.gradient(r, v),
    ]


@case
def c_stop_recording_exception_resumes(tf):
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)

        def body():
            with g.stop_recording():
                raise KeyError("boom")

        err = raises(body)
        y = x * x
    return [err, g.gradient(y, x)]


@case
def c_persistent_stop_recording_gradient_is_not_traced(tf):
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape(persistent=True) as t:
        loss = tf.reduce_sum(v * v)
        with t.stop_recording():
            grads = t.gradient(loss, v)
    return [grads, t.gradient(grads, v)]


# =====================================================================================
# Variables: reads before/after assign, assign not differentiable
# =====================================================================================


@case
def c_reads_before_and_after_assign(tf):
    v = tf.Variable(1.0)
    with tf.GradientTape(persistent=True) as g:
        y1 = v * v
        v.assign(3.0)
        y2 = v * v
        s = y1 + y2
    outside = y1 + y2
    return [g.gradient(y1, v), g.gradient(y2, v), g.gradient(outside, v), g.gradient(s, v)]


@case
def c_assign_is_not_differentiable(tf):
    x = tf.constant(3.0)
    v = tf.Variable(0.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        v.assign(x * 2.0)
        y = v * 1.0
    return [g.gradient(y, x), g.gradient(y, v)]


@case
def c_assign_add_result_is_a_read(tf):
    v = tf.Variable(1.0)
    with tf.GradientTape(persistent=True) as g:
        r = v.assign_add(2.0)
        y = r * r
    return [g.gradient(y, v), g.gradient(r, v), v.numpy()]


@case
def c_assign_watches_the_variable(tf):
    v = tf.Variable(1.0, name="v")
    w = tf.Variable(1.0, name="w")
    with tf.GradientTape() as g:
        v.assign(2.0)
        w.assign_sub(1.0)
    return [names(g.watched_variables())]


@case
def c_assign_after_exit_does_not_change_the_record(tf):
    v = tf.Variable(2.0)
    with tf.GradientTape() as g:
        y = v * v
    v.assign(10.0)
    return [g.gradient(y, v)]


@case
def c_read_forms(tf):
    v = tf.Variable(1.0)
    with tf.GradientTape(persistent=True) as g:
        ys = [v.value() * 2, v.read_value() * 2, tf.convert_to_tensor(v) * 2, (v + 1) * 2]
    return [g.gradient(y, v) for y in ys]


@case
def c_variable_created_inside_tape(tf):
    with tf.GradientTape(persistent=True) as g:
        v = tf.Variable(2.0, name="unread")
        w = tf.Variable(2.0, name="read")
        y = w * w
    return [names(g.watched_variables()), g.gradient(y, [v, w])]


@case
def c_watched_variables_order_is_creation_order(tf):
    v2 = tf.Variable(2.0, name="v2")
    v1 = tf.Variable(1.0, name="v1")
    v3 = tf.Variable(3.0, name="v3")
    with tf.GradientTape() as g:
        before = names(g.watched_variables())
        y = v1 * v2
        y = v2 * v1 * v1
        g.watch(v3)
        g.watch(v1)
    after = names(g.watched_variables())
    g.gradient(y, v1)
    spent = names(g.watched_variables())
    return [names(tf.GradientTape().watched_variables()), before, after, spent]


# =====================================================================================
# Python control flow
# =====================================================================================


@case
def c_python_control_flow(tf):
    def f(x, y):
        output = 1.0
        for i in range(y):
            if i > 1 and i < 5:
                output = tf.multiply(output, x)
        return output

    def grad(x, y):
        with tf.GradientTape() as t:
            t.watch(x)
            out = f(x, y)
        return t.gradient(out, x)

    x = tf.convert_to_tensor(2.0)
    return [grad(x, 6), grad(x, 5), grad(x, 4), grad(x, 3)]


@case
def c_branch_on_tensor_value(tf):
    x = tf.constant(2.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x
        for _ in range(3):
            y = y * x
        if y > 10.0:
            y = y * 3.0
        else:
            y = y * 0.0
    return [g.gradient(y, x)]


# =====================================================================================
# Bad targets/sources with the same exception type in TF and tapejax
# =====================================================================================


@case
def c_bad_targets_and_sources_type_errors(tf):
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
    return [
        raises(lambda: g.gradient(None, x)),
        raises(lambda: g.gradient([y, None], x)),
        raises(lambda: g.gradient("abc", x)),
        raises(lambda: g.gradient(y, None)),
        raises(lambda: g.gradient(y, [x, None])),
        raises(lambda: g.gradient(y, "abc")),
        g.gradient(y, tf.constant(3.0)),  # an equal-valued other tensor is not x
    ]


# =====================================================================================
# The differential test
# =====================================================================================


@pytest.mark.parametrize("snippet", CASES)
def test_matches_tf(snippet, real_tf):
    expected = outcome(snippet, real_tf)
    if isinstance(expected, Raised):
        assert snippet.raises == expected.name, f"TF raised unexpectedly: {expected!r}"
    else:
        assert snippet.raises is None, f"TF was expected to raise {snippet.raises}"
        assert expected is not None, "a snippet must return a structure, not a bare None"
    with jax.enable_x64() if snippet.x64 else contextlib.nullcontext():
        actual = outcome(snippet, tapejax)
    assert_same(expected, actual)


# =====================================================================================
# Seed tutorial errata: what real TF gives for the code the tutorials print wrong numbers for
# =====================================================================================


def _seed001_ex3(tf):
    x = tf.Variable(2, dtype=tf.float32)
    w = tf.Variable(5, dtype=tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(w)
        y = x**2
        z = w**3
    return [tape.gradient(y, x), tape.gradient(z, w)]


def _seed001_ex4(tf):
    x = tf.Variable(3, dtype=tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x**2
        z = y**3
    return [tape.gradient(z, x), tape.gradient(y, x)]


def _seed001_ex7_method2(tf):
    x = tf.Variable(3, dtype=tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y1 = 2 * x
        y2 = x**3
        y3 = -(x**2) + 5 * x
    first = tape.gradient({"y1": y1, "y2": y2, "y3": y3}, x)
    return [first, raises(lambda: tape.gradient([y1, y2, y3], x))]


@pytest.mark.parametrize(
    "snippet, truth",
    [
        (_seed001_ex3, [4.0, 75.0]),  # the tutorial prints 10 and 27
        (_seed001_ex4, [1458.0, 6.0]),  # the tutorial prints 27 for dy/dx
        (_seed001_ex7_method2, [28.0, "RuntimeError"]),  # the tutorial prints 28 for Method 2
    ],
    ids=["ex3", "ex4", "ex7_method2"],
)
@pytest.mark.parametrize("framework", ["tensorflow", "tapejax"])
def test_seed_errata_match_tf(snippet, truth, framework, real_tf):
    tf = real_tf if framework == "tensorflow" else tapejax
    result = snippet(tf)
    got = [r if isinstance(r, str) else float(r.numpy()) for r in result]
    assert got == truth


# =====================================================================================
# DOCUMENTED DIFFERENCES (compat_docs/differences.md): tapejax deliberately departs from TF
# =====================================================================================


def _persistent_xy(tf):
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
    return g, x, y


_NON_TENSOR_CALLS = {
    "target_float": lambda g, x, y: g.gradient(3.0, x),
    "target_ndarray": lambda g, x, y: g.gradient(np.array(1.0), x),
    "target_list_with_float": lambda g, x, y: g.gradient([y, 3.0], x),
    "source_float": lambda g, x, y: g.gradient(y, 3.0),
    "source_ndarray": lambda g, x, y: g.gradient(y, np.array(1.0)),
    "source_list_with_float": lambda g, x, y: g.gradient(y, [x, 3.0]),
}


@pytest.mark.parametrize("call", list(_NON_TENSOR_CALLS), ids=list(_NON_TENSOR_CALLS))
def test_difference_non_tensor_target_or_source(call, real_tf):
    # DOCUMENTED DIFFERENCE: TF fails inside its internals with AttributeError ("'float' object has
    # no attribute 'dtype'" / "... '_id'"); tapejax raises TypeError saying what to pass instead.
    fn = _NON_TENSOR_CALLS[call]
    with pytest.raises(AttributeError):
        fn(*_persistent_xy(real_tf))
    with pytest.raises(TypeError, match="must be tf.Tensor or tf.Variable"):
        fn(*_persistent_xy(tapejax))


def _two_targets(tf):
    xv = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(xv)
        y = xv * xv
        s = tf.reduce_sum(xv)
    return g, xv, y, s


_OG_MISMATCH = {
    # name: (call, what TF silently returns)
    "two_for_one_target": (lambda tf, g, xv, y, s: g.gradient([y], xv, output_gradients=[tf.ones((3,)), tf.ones((3,))]), [2.0, 4.0, 6.0]),
    "one_for_two_targets": (lambda tf, g, xv, y, s: g.gradient([y, s], xv, output_gradients=[tf.constant([10.0, 10.0, 10.0])]), [21.0, 41.0, 61.0]),
    "bare_tensor_for_two_targets": (lambda tf, g, xv, y, s: g.gradient([y, s], xv, output_gradients=tf.constant([10.0, 10.0, 10.0])), [21.0, 41.0, 61.0]),
    "three_for_two_targets": (lambda tf, g, xv, y, s: g.gradient([y, s], xv, output_gradients=[tf.constant([10.0] * 3), 5.0, 7.0]), [25.0, 45.0, 65.0]),
}


@pytest.mark.parametrize("call", list(_OG_MISMATCH), ids=list(_OG_MISMATCH))
def test_difference_output_gradients_length_mismatch(call, real_tf):
    # DOCUMENTED DIFFERENCE: TF zips targets and output_gradients silently (extra weights are dropped,
    # missing ones default to ones); tapejax raises ValueError instead of guessing.
    fn, tf_result = _OG_MISMATCH[call]
    np.testing.assert_allclose(fn(real_tf, *_two_targets(real_tf)).numpy(), tf_result)
    with pytest.raises(ValueError, match="output_gradients has"):
        fn(tapejax, *_two_targets(tapejax))


def _never_entered_tape(tf):
    return tf.GradientTape()


def _spent_tape(tf):
    x = tf.constant(1.0)
    g = tf.GradientTape()
    with g:
        g.watch(x)
        y = x * x
    g.gradient(y, x)
    return g


@pytest.mark.parametrize("make_tape", [_never_entered_tape, _spent_tape], ids=["never_entered", "spent"])
def test_difference_watch_on_a_tape_without_a_record(make_tape, real_tf):
    # DOCUMENTED DIFFERENCE: watch() on a tape never entered, or spent (non-persistent, gradient
    # taken): TF fails with AttributeError ("'NoneType' object has no attribute '_tape'"); tapejax
    # raises RuntimeError saying to call it inside the `with` block.
    with pytest.raises(AttributeError):
        make_tape(real_tf).watch(real_tf.constant(1.0))
    with pytest.raises(RuntimeError, match="inside the tape's `with` block"):
        make_tape(tapejax).watch(tapejax.constant(1.0))
