"""Bad input, one case at a time: TF's exception type where TF's is meaningful, a clear
TypeError/ValueError where TF's is an accident of its internals, and always a message that
says what to do. Then a property test that throws random malformed calls at the API.

TF's own types for each case are in compat_docs/reliability.md (and pinned against real TF in
tests/oracle/test_oracle_bad_input.py).
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax as tf
from tapejax._core import _recorder as _core

DOCUMENTED = (TypeError, ValueError, RuntimeError, tf.errors.InvalidArgumentError)


def _persistent_square():
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
    return g, x, y


# --------------------------------------------------------------------------
# watch


@pytest.mark.parametrize(
    "bad, named",
    [(1.0, "1.0"), (3, "3"), ("abc", "abc"), (np.array([1.0, 2.0]), "ndarray"), (None, "None"),
     ([1.0], "1.0"), ([tf.constant(1.0), 2.0], "2.0"), ({"a": object()}, "object")],
)
def test_watch_a_non_tensor_raises_value_error(bad, named):
    with tf.GradientTape() as g:
        with pytest.raises(ValueError) as e:  # TF: ValueError
            g.watch(bad)
    msg = str(e.value)
    assert "Passed in object" in msg and named in msg
    assert "tf.constant" in msg  # says what to do


# --------------------------------------------------------------------------
# targets and sources


@pytest.mark.parametrize("bad", [3.0, 7, None, np.array(1.0), np.float32(2.0), "abc"])
@pytest.mark.parametrize("role", ["target", "source", "nested target", "nested source"])
def test_non_tensor_target_or_source_raises_type_error(bad, role):
    g, x, y = _persistent_square()
    args = {
        "target": (bad, x),
        "source": (y, bad),
        "nested target": ([y, bad], x),
        "nested source": (y, [x, bad]),
    }[role]
    # TF: TypeError for None / strings, AttributeError (an accident) for numbers and arrays.
    with pytest.raises(TypeError) as e:
        g.gradient(*args)
    msg = str(e.value)
    assert "must be tf.Tensor or tf.Variable" in msg and "tf.constant" in msg
    # The failed call did not spend or corrupt the tape.
    np.testing.assert_array_equal(g.gradient(y, x).numpy(), [2.0, 4.0, 6.0])


def test_failed_gradient_does_not_spend_a_non_persistent_tape():
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    with pytest.raises(TypeError):
        g.gradient(y, 3.0)
    assert float(g.gradient(y, x)) == 6.0  # TF: the tape is spent only by a successful call


# --------------------------------------------------------------------------
# output_gradients


@pytest.mark.parametrize("shape", [(2,), (3, 1), (2, 3), (4,)])
def test_mismatched_output_gradient_shape_raises_invalid_argument(shape):
    g, x, y = _persistent_square()
    with pytest.raises(tf.errors.InvalidArgumentError) as e:  # TF: InvalidArgumentError
        g.gradient(y, x, output_gradients=tf.ones(shape))
    assert "Incompatible shapes" in str(e.value) and "target's shape" in str(e.value)


@pytest.mark.parametrize("og", [2.0, [2.0], np.float32(2.0)])
def test_broadcastable_output_gradient_is_accepted_as_in_tf(og):
    g, x, y = _persistent_square()
    w = og if not isinstance(og, list) else tf.constant(og)
    np.testing.assert_array_equal(g.gradient(y, x, output_gradients=w).numpy(), [4.0, 8.0, 12.0])


def test_output_gradient_of_the_wrong_dtype_raises_invalid_argument():
    g, x, y = _persistent_square()
    with pytest.raises(tf.errors.InvalidArgumentError, match="use tf.cast"):  # TF: InvalidArgumentError
        g.gradient(y, x, output_gradients=tf.ones(3, tf.float16))


@pytest.mark.parametrize("og", [[None], (None,)])
def test_none_output_gradient_raises_value_error(og):
    g, x, y = _persistent_square()
    with pytest.raises(ValueError, match="tf.ones_like"):  # TF: ValueError
        g.gradient([y], x, output_gradients=og)


def test_output_gradient_count_mismatch_raises_value_error():
    g, x, y = _persistent_square()
    s = tf.reduce_sum(x)
    with pytest.raises(ValueError, match="one output gradient per target"):  # TF: silently zips
        g.gradient([y, s], x, output_gradients=[tf.ones(3)])


# --------------------------------------------------------------------------
# batch_jacobian


def test_batch_jacobian_with_mismatched_batch_dims_raises_value_error():
    x = tf.ones((2, 2))
    a = tf.ones((4, 1))
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = tf.reduce_sum(x) * a  # batch 4 vs the source's batch 2
    with pytest.raises(ValueError) as e:  # TF: ValueError, same text
        g.batch_jacobian(y, x)
    assert "Need first dimension of target shape ((4, 1)) and source shape ((2, 2)) to match." in str(e.value)
    # The tape is still usable.
    np.testing.assert_array_equal(g.gradient(y, x).numpy(), np.full((2, 2), 4.0))


def test_batch_jacobian_with_rank_1_raises_value_error():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
    with pytest.raises(ValueError, match="must have rank at least 2"):  # TF: ValueError
        g.batch_jacobian(y, x)


# --------------------------------------------------------------------------
# The tape's state machine


def test_stop_recording_on_a_tape_that_is_not_recording():
    x = tf.constant(1.0)
    never = tf.GradientTape()
    with pytest.raises(RuntimeError, match="inside the tape's `with` block"):  # TF: RuntimeError
        with never.stop_recording():
            pass
    exited = tf.GradientTape()
    with exited:
        exited.watch(x)
    with pytest.raises(ValueError, match="not recording"):  # TF: ValueError
        with exited.stop_recording():
            pass
    spent = tf.GradientTape()
    with spent:
        spent.watch(x)
        y = x * x
    spent.gradient(y, x)
    with pytest.raises(RuntimeError):  # TF: RuntimeError
        with spent.stop_recording():
            pass
    with tf.GradientTape() as g:
        with g.stop_recording():
            with pytest.raises(ValueError, match="not recording"):  # TF: ValueError
                with g.stop_recording():
                    pass
        assert g._recording  # the outer stop_recording re-pushed it
    assert _core.state.recording == []


def test_gradient_twice_on_a_non_persistent_tape_raises_runtime_error():
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    assert float(g.gradient(y, x)) == 6.0
    with pytest.raises(RuntimeError) as e:  # TF: RuntimeError
        g.gradient(y, x)
    assert "only be used to compute one set of gradients" in str(e.value)
    assert "persistent=True" in str(e.value)  # what to do
    with pytest.raises(RuntimeError, match="persistent=True"):
        g.jacobian(y, x)


def test_re_entering_an_active_tape_raises_value_error():
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        with pytest.raises(ValueError) as e:  # TF: ValueError, same text
            with g:
                pass
        assert "re-enter an already-active tape" in str(e.value)
        assert g._recording and _core.state.recording == [g._tape]  # unaffected
        y = x * x
    assert float(g.gradient(y, x)) == 6.0


@pytest.mark.parametrize("bad", ["ZERO", "None", "foo", None, 0, 1.5])
def test_unknown_unconnected_gradients_raises_value_error(bad):
    g, x, y = _persistent_square()
    with pytest.raises(ValueError) as e:  # TF: ValueError
        g.gradient(y, x, unconnected_gradients=bad)
    assert f"Unknown value for unconnected_gradients: {bad!r}" in str(e.value)
    assert "'zero'" in str(e.value)  # the accepted values


def test_reset_outside_the_block_raises_value_error():
    x = tf.constant(1.0)
    g = tf.GradientTape()
    with pytest.raises(ValueError, match="not recording"):  # TF: ValueError
        g.reset()
    with g:
        g.watch(x)
    with pytest.raises(ValueError, match="not recording"):
        g.reset()


# --------------------------------------------------------------------------
# NaN and Inf propagate; they are never turned into zeros.


def test_nan_and_inf_inputs_propagate_through_gradients():
    x = tf.constant([np.nan, np.inf, -np.inf, 1.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        sq = x * x
        ex = tf.exp(x)
        total = tf.reduce_sum(x * x)
    np.testing.assert_array_equal(g.gradient(sq, x).numpy(), [np.nan, np.inf, -np.inf, 2.0])
    np.testing.assert_array_equal(g.gradient(ex, x).numpy(), np.array([np.nan, np.inf, 0.0, np.e], np.float32))
    np.testing.assert_array_equal(g.gradient(total, x).numpy(), [np.nan, np.inf, -np.inf, 2.0])


def test_nan_and_inf_gradients_at_singular_points_are_kept():
    z = tf.constant(0.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(z)
        outs = {"sqrt": tf.sqrt(z), "log": tf.math.log(z), "recip": 1.0 / z, "x/x": z / z}
    want = {"sqrt": math.inf, "log": math.inf, "recip": -math.inf, "x/x": math.nan}  # TF's values
    for k, w in want.items():
        got = float(g.gradient(outs[k], z))
        assert (math.isnan(got) and math.isnan(w)) or got == w, (k, got)


def test_nan_loss_gives_nan_updates_not_zero():
    v = tf.Variable([1.0, 2.0])
    data = tf.constant([np.nan, 1.0])
    with tf.GradientTape() as g:
        loss = tf.reduce_sum(v * data)
    grad = g.gradient(loss, v)
    np.testing.assert_array_equal(grad.numpy(), [np.nan, 1.0])
    v.assign_sub(0.1 * grad)
    np.testing.assert_array_equal(v.numpy(), np.array([np.nan, 1.9], np.float32))


# --------------------------------------------------------------------------
# assign


SHAPE = (ValueError, tf.errors.InvalidArgumentError, tf.errors.InvalidArgumentError)  # TF: assign, assign_add/sub


@pytest.mark.parametrize(
    "value, excs, says",
    [
        ([1.0, 2.0, 3.0], SHAPE, ("Shape mismatch", "shapes must be equal")),
        (1.0, SHAPE, ("Shape mismatch", "shapes must be equal")),  # no broadcasting, in any of them
        ([[1.0, 2.0]], SHAPE, ("Shape mismatch", "shapes must be equal")),
        (tf.constant([1, 2]), (ValueError,) * 3, ("tf.cast",)),  # TF: ValueError
        (tf.constant([1.0, 2.0], tf.float16), (ValueError,) * 3, ("tf.cast",)),
        ("a", (TypeError,) * 3, ("Cannot assign",)),  # TF: TypeError
        (None, (ValueError,) * 3, ("None",)),
    ],
)
def test_mismatched_assign_raises_and_leaves_the_variable_unchanged(value, excs, says):
    v = tf.Variable([1.0, 2.0])
    for op, exc in zip((v.assign, v.assign_add, v.assign_sub), excs):
        with pytest.raises(exc) as e:
            op(value)
        assert any(s in str(e.value) for s in says), str(e.value)
        np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])


# --------------------------------------------------------------------------
# optimizers


def test_int_variable_given_to_an_optimizer_raises_a_clear_error():
    keras = getattr(tf, "keras", None)
    optimizers = getattr(keras, "optimizers", None)
    assert optimizers is not None, "tapejax.keras.optimizers is part of the API (issue 7)"
    for name in ("SGD", "Adam"):
        v = tf.Variable(3)
        opt = getattr(optimizers, name)(0.1)
        for grad in (tf.constant(1), tf.constant(1.0)):
            # TF: SGD silently succeeds, Adam raises InvalidArgumentError from a Mul inside its
            # update (an accident); tapejax raises TF's InvalidArgumentError up front, saying why.
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                opt.apply_gradients([(grad, v)])
            assert "floating-point" in str(e.value) and "dtype" in str(e.value)
            assert int(v) == 3


# --------------------------------------------------------------------------
# Random malformed calls.


@contextlib.contextmanager
def _deadline(seconds: int):
    """Fail (instead of hanging the run) if the body takes longer than ``seconds``."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def on_alarm(signum, frame):
        raise TimeoutError(f"a call hung for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


class _World:
    """The objects one example plays with, and what their gradients must be."""

    def __init__(self) -> None:
        self.x = tf.constant([1.0, 2.0])
        self.c = tf.constant([5.0, 6.0])
        self.v = tf.Variable(3.0)
        self.u = tf.Variable([1.0, 2.0])  # the target of random assigns
        self.i = tf.constant([1, 2])
        self.h = tf.constant([1.0, 2.0], tf.float16)
        self.p = tf.GradientTape(persistent=True)
        self.never = tf.GradientTape()
        self.record_valid = True

    def value(self, k: int):
        pool = [
            lambda: self.x, lambda: self.c, lambda: self.v, lambda: self.y, lambda: self.i, lambda: self.h,
            lambda: tf.constant(1.5), lambda: tf.ones((2, 2)), lambda: tf.ones((3,)),
            lambda: None, lambda: 3, lambda: 2.5, lambda: "abc", lambda: b"raw", lambda: np.array([1.0, 2.0]),
            lambda: np.float32(4.0), lambda: [1.0, None], lambda: {"a": None}, lambda: object(), lambda: (),
            lambda: [], lambda: float("nan"), lambda: [self.x, self.c], lambda: {"k": self.x},
            lambda: tf.GradientTape(), lambda: print, lambda: [[1.0], [2.0, 3.0]], lambda: 2**40,
        ]
        return pool[k % len(pool)]()

    # The expected gradient of one (target, source) pair of tensors, or "skip" if unknown.
    def expected(self, t, s, ug_zero: bool):
        if not isinstance(t, _core.Tensor | _core.VariableBase) or not isinstance(s, _core.Tensor | _core.VariableBase):
            return "skip"
        if t is s:
            return np.ones(np.shape(s.numpy()), s.numpy().dtype)
        if t is self.y and self.record_valid and s is self.x:
            return 2 * self.x.numpy() * 3.0
        if t is self.y and self.record_valid and s is self.v:
            return np.float32(np.sum(self.x.numpy() ** 2))
        known = (self.x, self.c, self.v, self.y, self.i, self.h)
        if any(t is k for k in known) and any(s is k for k in known):
            if ug_zero:
                return np.zeros(np.shape(s.numpy()), s.numpy().dtype)
            return None
        return "skip"


ACTIONS = ["watch", "gradient", "assign", "constant", "op", "stop_recording", "reset", "reenter",
           "never_stop", "watched_variables"]
OPS = {
    "add": (tf.add, np.add), "multiply": (tf.multiply, np.multiply), "subtract": (tf.subtract, np.subtract),
    "sin": (tf.sin, np.sin), "reduce_sum": (tf.reduce_sum, np.sum), "matmul": (tf.matmul, np.matmul),
}
UGS = ["none", "zero", "ZERO", None, 3, tf.UnconnectedGradients.ZERO]
DTYPES = [None, tf.float32, tf.int32, tf.float16, tf.bool, "foo", 3, "float32"]
call = st.tuples(st.sampled_from(ACTIONS), st.integers(0, 63), st.integers(0, 63), st.integers(0, 7),
                 st.sampled_from(sorted(OPS)))


def _as_np(a):
    if isinstance(a, _core.Tensor | _core.VariableBase):
        return np.asarray(a.numpy())
    return np.asarray(a)


def _run(w: _World, action: str, a: int, b: int, k: int, opname: str, depth: int = 0) -> None:
    g = w.p
    if action == "watch":
        g.watch(w.value(a))
    elif action == "gradient":
        t, s = w.value(a), w.value(b)
        ug = UGS[k % len(UGS)]
        r = g.gradient(t, s, unconnected_gradients=ug)
        want = w.expected(t, s, ug in ("zero", tf.UnconnectedGradients.ZERO))
        if isinstance(want, str):
            return
        if want is None:
            assert r is None, f"gradient({t!r}, {s!r}) should be None, got {r!r}"
        else:
            assert r is not None, f"gradient({t!r}, {s!r}) should be {want}, got None"
            np.testing.assert_allclose(_as_np(r), want, rtol=1e-6)
    elif action == "assign":
        before = w.u.numpy().copy()
        value = w.value(a)
        op = (w.u.assign, w.u.assign_add, w.u.assign_sub)[k % 3]
        try:
            op(value)
        except DOCUMENTED:
            np.testing.assert_array_equal(w.u.numpy(), before)  # never half-assigned
            raise
        delta = np.broadcast_to(_as_np(value).astype(np.float32), (2,))
        want = (delta, before + delta, before - delta)[k % 3]
        np.testing.assert_allclose(w.u.numpy(), want, rtol=1e-6)
    elif action == "constant":
        value, dtype = w.value(a), DTYPES[k % len(DTYPES)]
        r = tf.constant(value, dtype=dtype)
        if isinstance(value, _core.Tensor | _core.VariableBase | np.ndarray | float | int) and not isinstance(value, bool):
            ref = _as_np(value)
            if ref.dtype.kind in "fiu" and np.all(np.isfinite(ref)) and np.all(np.abs(ref.astype(np.float64)) < 2**31):
                with np.errstate(over="ignore"):  # float16 overflow is inf, in TF and here
                    want = ref.astype(r.numpy().dtype).astype(np.float64)
                np.testing.assert_allclose(r.numpy().astype(np.float64), want)
    elif action == "op":
        fn, ref_fn = OPS[opname]
        if opname in ("sin", "reduce_sum"):
            args = (w.value(a),)
        else:
            args = (w.value(a), w.value(b))
        r = fn(*args)
        try:
            np_args = [_as_np(x).astype(np.float64) for x in args]
            ref = ref_fn(*np_args)
        except Exception:  # noqa: BLE001  (NumPy refuses too: nothing to compare)
            return
        got = _as_np(r)
        with np.errstate(over="ignore", invalid="ignore"):  # the result's dtype decides (float16 overflow: inf)
            want = np.asarray(ref).astype(got.dtype).astype(np.float64)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=1e-3, equal_nan=True)
    elif action == "stop_recording":
        with g.stop_recording():
            assert not any(t is g._tape for t in _core.state.recording)
            if depth < 2:
                _run(w, ACTIONS[b % len(ACTIONS)], a, k, b, opname, depth + 1)
    elif action == "reset":
        g.reset()
        w.record_valid = False
    elif action == "reenter":
        with g:
            pass
    elif action == "never_stop":
        with w.never.stop_recording():
            pass
    elif action == "watched_variables":
        vs = g.watched_variables()
        assert isinstance(vs, tuple) and all(isinstance(v, tf.Variable) for v in vs)


@settings(max_examples=60)
@given(calls=st.lists(call, min_size=1, max_size=8))
def test_random_malformed_calls_raise_only_documented_errors(calls):
    w = _World()
    failures: list = []
    with _deadline(120):
        with contextlib.ExitStack() as stack:
            stack.enter_context(w.p)
            w.p.watch(w.x)
            w.y = w.x * w.x * w.v
            for action, a, b, k, opname in calls:
                depth_before = len(_core.state.recording)
                try:
                    _run(w, action, a, b, k, opname)
                except DOCUMENTED as e:
                    failures.append(e)
                    assert str(e), f"{type(e).__name__} with an empty message from {action}"
                # Whatever happened, the stack is as it was.
                assert len(_core.state.recording) == depth_before
                assert _core.state.tracing == []
        assert _core.state.recording == []
    # The tape object still answers.
    assert isinstance(w.p.watched_variables(), tuple)
    for e in failures:
        assert isinstance(e, DOCUMENTED)
