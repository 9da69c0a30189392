"""Reliability under exceptions: a failure anywhere leaves no tape on the stack, no recording
flag stuck, no trace or variable binding active and no variable half-assigned, and the next
tape works normally. One test per place an exception can come from.
"""

from __future__ import annotations

import threading

import jax
import numpy as np
import pytest

import tapejax as tf
from tapejax._core import _recorder as _core


class Boom(Exception):
    """A user error no library code catches."""


def _assert_clean_and_working() -> None:
    assert _core.state.recording == [], "a tape was left on the stack"
    assert _core.state.tracing == [], "a variable-capturing trace was left active"
    assert getattr(_core.state, "bound", None) is None, "variables were left bound to traced values"
    # The next tapes work normally: a constant, a variable, a nested pair.
    x = tf.constant(3.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * x * x
    assert float(t.gradient(y, x)) == 27.0
    v = tf.Variable(2.0)
    with tf.GradientTape() as t:
        y = v * v
    assert float(t.gradient(y, v)) == 4.0
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = x * x * x
        dy = inner.gradient(y, x)
    assert float(outer.gradient(dy, x)) == 18.0
    assert _core.state.recording == []


def _is_concrete(v: tf.Variable) -> bool:
    return not isinstance(v._v, jax.core.Tracer)


def test_exception_inside_with_tape():
    x = tf.constant(3.0)
    v = tf.Variable(1.0)
    with pytest.raises(Boom):
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(x)
            with tf.GradientTape() as g:
                g.watch(x)
                y = x * x
                v.assign(5.0)
                raise Boom("inside the block")
    # Both tapes were popped (TF's __exit__ pops and does not suppress), flags cleared.
    assert not g._recording and not outer._recording
    # What was recorded before the failure is still usable (TF: 6.0).
    assert float(g.gradient(y, x)) == 6.0
    assert float(outer.gradient(y, x)) == 6.0
    # The assign completed before the raise, as in eager TF; nothing is half-done.
    assert float(v) == 5.0 and _is_concrete(v)
    # Ops after the block are not recorded.
    z = x * x
    assert outer.gradient(z, x) is None
    _assert_clean_and_working()


def test_exception_inside_stop_recording():
    x = tf.constant(3.0)
    # Caught inside the tape's block: recording resumes (TF: the finally re-pushes).
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        try:
            with g.stop_recording():
                assert _core.state.recording == []
                unrecorded = x * x
                raise Boom("inside stop_recording")
        except Boom:
            pass
        assert g._recording and _core.state.recording == [g._tape]
        y = x * x
    assert g.gradient(unrecorded, x) is None
    assert float(g.gradient(y, x)) == 6.0
    # Not caught: it leaves both the stop_recording block and the tape's block.
    with pytest.raises(Boom):
        with tf.GradientTape() as g2:
            g2.watch(x)
            y2 = x * x
            with g2.stop_recording():
                raise Boom("through both blocks")
    assert not g2._recording
    assert float(g2.gradient(y2, x)) == 6.0
    _assert_clean_and_working()


def test_exception_inside_a_custom_gradient():
    x = tf.constant(2.0)
    w = tf.Variable(3.0)
    calls = {"grad": 0}

    @tf.custom_gradient
    def f(x):
        y = x * w

        def grad(dy, variables=None):
            calls["grad"] += 1
            raise Boom("inside grad_fn")

        return y, grad

    @tf.custom_gradient
    def g_fwd_fails(x):
        raise Boom("inside the forward function")

    with pytest.raises(Boom):
        with tf.GradientTape() as t0:
            t0.watch(x)
            g_fwd_fails(x)
    assert not t0._recording

    with tf.GradientTape() as t:
        t.watch(x)
        y = f(x) * 2.0
    assert float(y) == 12.0
    with pytest.raises(Boom):
        t.gradient(y, [x, w])
    assert calls["grad"] >= 1
    # The variable was bound to a traced value while grad_fn ran: it is back, unchanged.
    assert float(w) == 3.0 and _is_concrete(w)
    # A failed gradient() does not use up a non-persistent tape (TF): it fails the same way again.
    with pytest.raises(Boom):
        t.gradient(y, x)
    # No lock held by the failed call: another thread can still use custom gradients.
    ok = []

    def other() -> None:
        @tf.custom_gradient
        def h(x):
            return x * 3.0, lambda dy: dy * 10.0

        z = tf.constant(1.0)
        with tf.GradientTape() as t2:
            t2.watch(z)
            out = h(z)
        ok.append(float(t2.gradient(out, z)))

    th = threading.Thread(target=other)
    th.start()
    th.join(60)
    assert ok == [10.0]
    _assert_clean_and_working()


def _traced_only_failure(x):
    # Fine on concrete arrays (the eager call), fails when a replay traces it.
    if isinstance(x, jax.core.Tracer):
        raise Boom("this op cannot be traced")
    return x * 2.0


FRAGILE = _core.Primitive("fragile_double", _traced_only_failure)


def test_exception_inside_a_replay():
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape() as g:
            g.watch(x)
            y = _core.bind(FRAGILE, x) * x
        assert float(y) == 18.0
        n_outer = len(outer._tape.eqns)
        with pytest.raises(Boom):
            g.gradient(y, x)  # replayed (and traced by jit) only here
        # Nothing half-recorded on the outer tape by the failed replay.
        assert len(outer._tape.eqns) == n_outer
        # The non-persistent tape was popped (TF pops it before computing) but is not spent.
        assert not g._recording and outer._recording
        assert _core.state.recording == [outer._tape]
    with pytest.raises(Boom):
        g.gradient(y, x)
    # The failure left no broken program behind: an unrelated replay compiles and runs.
    info = tf.replay_cache_info()
    assert info.size <= info.maxsize
    _assert_clean_and_working()


def test_exception_inside_a_function_trace():
    v1 = tf.Variable(1.0)
    v2 = tf.Variable([1.0, 2.0])

    @tf.function
    def step(x):
        v1.assign(x * 10.0)
        with tf.GradientTape() as t:
            t.watch(x)
            y = x * x
            v2.assign_add(tf.ones(2))
            raise Boom("while tracing")
        return t.gradient(y, x)

    with pytest.raises(Boom):
        step(tf.constant(2.0))
    # The trace saw traced values; no variable kept one, and none was half-assigned.
    assert _is_concrete(v1) and _is_concrete(v2)
    assert float(v1) == 1.0
    np.testing.assert_array_equal(v2.numpy(), [1.0, 2.0])
    # The same function fails the same way again (no broken cache entry).
    with pytest.raises(Boom):
        step(tf.constant(2.0))
    assert float(v1) == 1.0

    # A working step on the same variables updates them normally.
    @tf.function
    def good(x):
        with tf.GradientTape() as t:
            loss = v1 * x * x + tf.reduce_sum(v2 * x)
        g1, g2 = t.gradient(loss, [v1, v2])
        v1.assign_sub(0.5 * g1)
        v2.assign_sub(0.5 * g2)
        return loss

    assert float(good(tf.constant(2.0))) == pytest.approx(1.0 * 4 + 3 * 2)
    assert float(v1) == pytest.approx(1.0 - 0.5 * 4)
    np.testing.assert_allclose(v2.numpy(), [0.0, 1.0])
    _assert_clean_and_working()


def test_failed_assign_leaves_the_variable_untouched():
    v = tf.Variable([1.0, 2.0])
    for bad in ([1.0, 2.0, 3.0], tf.constant([1, 2]), tf.ones((2, 1)), "a"):
        for op in (v.assign, v.assign_add, v.assign_sub):
            with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
                op(bad)
            np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    # Also inside a recording tape: the failed assign is not half-recorded either.
    with tf.GradientTape() as t:
        with pytest.raises(ValueError):
            v.assign([1.0, 2.0, 3.0])
        y = tf.reduce_sum(v * v)
    np.testing.assert_array_equal(t.gradient(y, v).numpy(), [2.0, 4.0])
    _assert_clean_and_working()


def test_failed_gradient_call_inside_the_block_pops_but_does_not_spend_the_tape():
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
        with pytest.raises(ValueError):
            g.gradient(y, x, unconnected_gradients="foo")
        # TF: the non-persistent tape was popped before the check failed.
        assert not g._recording and _core.state.recording == []
    assert float(g.gradient(y, x)) == 6.0
    _assert_clean_and_working()
