"""The tape-semantics property helpers of tapejax.testing: they pass on correct tapes and FAIL on broken ones.

Broken tapes are subclasses of tf.GradientTape passed as ``tape_factory``. The jacobian helpers are
also tested against reference jacobians computed column by column in forward mode (the double-VJP
identity), an algorithm independent of the stacked reverse-mode rows the helpers build.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import tapejax as tf
from tapejax.testing import (
    GradientCheckError,
    assert_batch_jacobian_matches_jacobian,
    assert_jacobian_matches_gradients,
    assert_persistent_repeatable,
    assert_zero_vs_none,
)
from tapejax.testing._check import _tape_jvp

HAS_JACOBIAN = hasattr(tf.GradientTape, "jacobian")
HAS_BATCH_JACOBIAN = hasattr(tf.GradientTape, "batch_jacobian")


def _jvp_column(tape, target, source, e):
    (col,) = _tape_jvp(tape, [target], [source], [tf.constant(e)], tf.GradientTape)
    return np.zeros(target.shape, np.float32) if col is None else col.numpy()


class ForwardColumnsTape(tf.GradientTape):
    """Reference ``jacobian``/``batch_jacobian``: columns J e_j by forward mode (double VJP)."""

    scale = 1.0
    flip_batch = False

    def jacobian(self, target, sources, unconnected_gradients="none", **kwargs):
        single = not isinstance(sources, list | tuple)
        srcs = [sources] if single else list(sources)
        probe = self.gradient(target, srcs)  # structural connectivity (None = unconnected)
        out = []
        for s, connected in zip(srcs, probe):
            xs = tuple(s.shape)
            if connected is None:
                zero = str(getattr(unconnected_gradients, "value", unconnected_gradients)) == "zero"
                out.append(tf.zeros(tuple(target.shape) + xs) if zero else None)
                continue
            cols = []
            for j in range(int(np.prod(xs, dtype=np.int64))):
                e = np.zeros(int(np.prod(xs, dtype=np.int64)), np.float32)
                e[j] = 1.0
                cols.append(_jvp_column(self, target, s, e.reshape(xs)))
            jac = np.stack(cols, axis=-1).reshape(tuple(target.shape) + xs) * self.scale
            out.append(tf.constant(jac.astype(np.float32)))
        return out[0] if single else out

    def batch_jacobian(self, target, source, unconnected_gradients="none", **kwargs):
        b, xs = int(source.shape[0]), tuple(source.shape[1:])
        cols = []
        for j in range(int(np.prod(xs, dtype=np.int64))):
            e = np.zeros((b, int(np.prod(xs, dtype=np.int64))), np.float32)
            e[:, j] = 1.0  # the same tangent in every example: examples are independent
            cols.append(_jvp_column(self, target, source, e.reshape((b,) + xs)).reshape(b, -1))
        bj = np.stack(cols, axis=-1).reshape((b,) + tuple(target.shape[1:]) + xs) * self.scale
        if self.flip_batch:
            bj = bj[::-1]
        return tf.constant(np.ascontiguousarray(bj).astype(np.float32))


class ScaledJacobianTape(ForwardColumnsTape):
    scale = 1.01  # a 1% error in every entry


class FlippedBatchTape(ForwardColumnsTape):
    flip_batch = True  # example b gets example B-1-b's block


class NoneForZeroTape(tf.GradientTape):
    """Broken: ignores unconnected_gradients=ZERO."""

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients="none"):
        return super().gradient(target, sources, output_gradients)


class DriftingTape(tf.GradientTape):
    """Broken: every call on the same persistent tape answers slightly differently."""

    calls = 0

    def gradient(self, *args, **kwargs):
        self.calls += 1
        g = super().gradient(*args, **kwargs)
        return jax.tree_util.tree_map(lambda t: t * (1.0 + 1e-6 * self.calls), g,
                                      is_leaf=lambda v: isinstance(v, tf.Tensor))


class NeverSpentTape(tf.GradientTape):
    """Broken: a non-persistent tape that answers twice."""

    def __init__(self, persistent=False, **kwargs):
        super().__init__(persistent=True, **kwargs)


ARGS = (tf.constant([1.0, 2.0, -0.5]), tf.Variable([0.5, 0.25, 1.0]), tf.constant(3.0))


def fn(x, v, unused):
    return tf.sin(x) * v


# --- ZERO vs NONE ---------------------------------------------------------------------------------


def test_zero_vs_none_passes_and_reports_connectivity():
    assert assert_zero_vs_none(fn, ARGS) == {"args[0]": True, "args[1]": True, "args[2]": False}


def test_zero_vs_none_fails_on_a_tape_that_ignores_zero():
    with pytest.raises(GradientCheckError) as info:
        assert_zero_vs_none(fn, ARGS, tape_factory=NoneForZeroTape)
    assert {m.argument for m in info.value.failures} == {"args[2]"}
    assert "ZERO returned None" in str(info.value)


# --- persistent repeatability ----------------------------------------------------------------------


def test_persistent_repeatable_passes():
    assert_persistent_repeatable(lambda x, v, u: [fn(x, v, u), tf.reduce_sum(x * x)], ARGS)


def test_persistent_repeatable_fails_on_drift_and_on_a_tape_that_is_never_spent():
    with pytest.raises(GradientCheckError, match="differs from the first call"):
        assert_persistent_repeatable(fn, ARGS, tape_factory=DriftingTape)
    with pytest.raises(GradientCheckError, match="must raise RuntimeError"):
        assert_persistent_repeatable(fn, ARGS, tape_factory=NeverSpentTape)


# --- jacobian vs stacked gradients -------------------------------------------------------------------

JAC_FNS = {
    "elementwise": (lambda x, v, u: tf.sin(x) * v, ARGS),
    "matrix": (lambda a: tf.tanh(tf.matmul(a, a)), (tf.constant([[0.1, 0.2], [0.3, -0.4]]),)),
    "scalar target": (lambda x: tf.reduce_sum(x * x * x), (tf.constant([1.0, 2.0]),)),
}


@pytest.mark.parametrize("name", sorted(JAC_FNS))
def test_jacobian_helper_passes_on_forward_columns_reference(name):
    f, args = JAC_FNS[name]
    assert_jacobian_matches_gradients(f, args, tape_factory=ForwardColumnsTape)
    assert_jacobian_matches_gradients(f, args, tape_factory=ForwardColumnsTape, unconnected_gradients="zero")


def test_jacobian_helper_fails_on_a_wrong_jacobian():
    f, args = JAC_FNS["matrix"]
    with pytest.raises(GradientCheckError) as info:
        assert_jacobian_matches_gradients(f, args, tape_factory=ScaledJacobianTape, rtol=1e-3)
    m = info.value.failures[0]
    assert m.argument == "args[0]" and m.tape / m.reference == pytest.approx(1.01, rel=1e-4)


class GradientOnlyTape:
    """A tape with only the gradient API (no jacobian/batch_jacobian): delegates to a real tape."""

    def __init__(self, persistent=False):
        self._tape = tf.GradientTape(persistent=persistent)

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    def watch(self, x):
        self._tape.watch(x)

    def gradient(self, *args, **kwargs):
        return self._tape.gradient(*args, **kwargs)


def test_jacobian_helpers_say_when_the_tape_lacks_the_method():
    with pytest.raises(NotImplementedError, match="jacobian is not available"):
        assert_jacobian_matches_gradients(*JAC_FNS["matrix"], tape_factory=GradientOnlyTape)
    with pytest.raises(NotImplementedError, match="batch_jacobian is not available"):
        assert_batch_jacobian_matches_jacobian(lambda x: x * x, XB, tape_factory=GradientOnlyTape)
    # The other helpers need only gradient.
    assert assert_zero_vs_none(fn, ARGS, tape_factory=GradientOnlyTape)["args[2]"] is False


@pytest.mark.skipif(not HAS_JACOBIAN, reason="GradientTape.jacobian is being added by another change")
@pytest.mark.parametrize("name", sorted(JAC_FNS))
def test_real_jacobian_matches_stacked_gradients(name):
    f, args = JAC_FNS[name]
    assert_jacobian_matches_gradients(f, args)
    assert_jacobian_matches_gradients(f, args, unconnected_gradients="zero")


# --- batch_jacobian vs per-example jacobians ----------------------------------------------------------

XB = tf.constant([[1.0, 2.0], [3.0, 4.0], [-0.5, 0.25]])
W = tf.constant([[1.0, -1.0, 0.5], [0.25, 2.0, 1.0]])


def per_example(x):
    return tf.tanh(tf.matmul(x, W)) * tf.reduce_sum(x * x, axis=1, keepdims=True)


def test_batch_jacobian_helper_passes_on_forward_columns_reference():
    assert_batch_jacobian_matches_jacobian(per_example, XB, tape_factory=ForwardColumnsTape)


def test_batch_jacobian_helper_fails_when_examples_are_mixed_up():
    with pytest.raises(GradientCheckError) as info:
        assert_batch_jacobian_matches_jacobian(per_example, XB, tape_factory=FlippedBatchTape)
    assert "batch_jacobian" in str(info.value)


def test_batch_jacobian_helper_refuses_functions_that_mix_examples():
    with pytest.raises(ValueError, match="fn mixes examples"):
        assert_batch_jacobian_matches_jacobian(lambda x: x * tf.reduce_sum(x), XB, tape_factory=ForwardColumnsTape)


@pytest.mark.skipif(not HAS_BATCH_JACOBIAN, reason="GradientTape.batch_jacobian is being added by another change")
def test_real_batch_jacobian_matches_per_example_jacobians():
    assert_batch_jacobian_matches_jacobian(per_example, XB)
    assert_batch_jacobian_matches_jacobian(lambda x: x * x, XB)
