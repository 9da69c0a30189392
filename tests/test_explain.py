"""tapejax.explain: one test per cause (the exact cause asserted), the config flag and the env var."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

import tapejax as tf
from tapejax import NoneGradientCause as C


def P() -> tf.GradientTape:
    return tf.GradientTape(persistent=True)


@pytest.fixture(autouse=True)
def _keep_log_first_n_budget():
    # TF's dtype warnings are logged at most N times per process; the integer cases
    # here must not use up the budget that other tests check.
    from tapejax import _log

    saved = dict(_log._counts)
    yield
    _log._counts.clear()
    _log._counts.update(saved)


def cause(tape, target, source) -> C:
    return tf.explain(tape, target, source).cause


# ---------------------------------------------------------------------------
# One test per cause


def test_connected():
    x = tf.constant(3.0)
    with P() as g:
        g.watch(x)
        y = x * x
    e = tf.explain(g, y, x)
    assert e.cause is C.CONNECTED and g.gradient(y, x) is not None


def test_never_watched_tensor():
    x = tf.constant(3.0)
    with P() as g:
        y = x * x
    assert g.gradient(y, x) is None
    e = tf.explain(g, y, x)
    assert e.cause is C.NEVER_WATCHED
    assert "tape.watch" in e.message


def test_never_watched_tensor_next_to_a_watched_variable():
    # the op is recorded (because of v), yet x, never watched, gets no gradient (TF)
    x, v = tf.constant(3.0), tf.Variable(2.0)
    with P() as g:
        y = v * x
    gv, gx = g.gradient(y, [v, x])
    assert float(gv) == 3.0 and gx is None
    assert cause(g, y, x) is C.NEVER_WATCHED


@pytest.mark.parametrize("how", ["not_trainable", "no_auto_watch", "not_read_inside"])
def test_never_watched_variable(how):
    v = tf.Variable(2.0, trainable=how != "not_trainable")
    y0 = v * 2.0
    with tf.GradientTape(persistent=True, watch_accessed_variables=how != "no_auto_watch") as g:
        y = y0 + 1.0 if how == "not_read_inside" else v * v
    assert g.gradient(y, v) is None
    e = tf.explain(g, y, v)
    assert e.cause is C.NEVER_WATCHED
    assert {"not_trainable": "not trainable", "no_auto_watch": "watch_accessed_variables=False",
            "not_read_inside": "not read while the tape was recording"}[how] in e.message


def test_integer_source():
    xi = tf.constant(3)
    with P() as g:
        g.watch(xi)
        y = tf.cast(xi, tf.float32) * 2.0
    assert g.gradient(y, xi) is None
    assert cause(g, y, xi) is C.INTEGER_DTYPE


def test_integer_target():
    x = tf.constant(3.0)
    with P() as g:
        g.watch(x)
        y = tf.cast(x * 2.0, tf.int32)
    assert g.gradient(y, x) is None
    e = tf.explain(g, y, x)
    assert e.cause is C.INTEGER_DTYPE and "target has dtype int32" in e.message


def test_integer_on_the_path():
    x = tf.constant(3.0)
    with P() as g:
        g.watch(x)
        y = tf.cast(tf.cast(x, tf.int32), tf.float32) * 2.0
    assert g.gradient(y, x) is None
    e = tf.explain(g, y, x)
    assert e.cause is C.INTEGER_DTYPE and "'cast'" in e.message


def test_cut_by_stop_gradient_recorded_path():
    # the cut value meets another watched value: the path is in the record, up to the cut
    x, w = tf.constant(3.0), tf.constant(2.0)
    with P() as g:
        g.watch([x, w])
        y = tf.stop_gradient(x * 2.0) * w
        direct = tf.stop_gradient(x)
    assert g.gradient(y, x) is None and g.gradient(direct, x) is None
    assert cause(g, y, x) is C.STOP_GRADIENT
    assert cause(g, direct, x) is C.STOP_GRADIENT


def test_cut_by_stop_gradient_unrecorded_after():
    # nothing after the cut is recorded (TF never watches stop_gradient's output)
    x = tf.constant(3.0)
    with P() as g:
        g.watch(x)
        y = tf.stop_gradient(x) * 2.0
    assert g.gradient(y, x) is None
    assert cause(g, y, x) is C.STOP_GRADIENT


def test_cut_by_stop_recording():
    x = tf.constant(3.0)
    with P() as g:
        g.watch(x)
        with g.stop_recording():
            h = x * x
        y = h * 2.0
    assert g.gradient(y, x) is None
    e = tf.explain(g, y, x)
    assert e.cause is C.STOP_RECORDING and "stop_recording" in e.message
    assert cause(g, h, x) is C.STOP_RECORDING


def test_variable_read_inside_stop_recording():
    v = tf.Variable(2.0)
    w = tf.constant(1.0)
    with P() as g:
        g.watch(w)
        with g.stop_recording():
            h = v * 3.0
        y = h * w
    assert g.gradient(y, v) is None
    assert cause(g, y, v) is C.STOP_RECORDING


def test_recorded_on_another_tape_source_watched_elsewhere():
    x = tf.constant(3.0)
    with P() as outer:
        outer.watch(x)
        with P() as inner:
            y = x * x
    assert inner.gradient(y, x) is None
    e = tf.explain(inner, y, x)
    assert e.cause is C.OTHER_TAPE
    assert cause(outer, y, x) is C.CONNECTED


def test_recorded_on_another_tape_intermediate():
    # t2 watches x but was paused (exited) while t1 computed h from x; t2 then used h.
    x = tf.constant(3.0)
    with P() as t2:
        t2.watch(x)
    with P() as t1:
        t1.watch(x)
        h = x * x
    with t2:
        y = h * 2.0
    assert t2.gradient(y, x) is None
    assert cause(t2, y, x) is C.OTHER_TAPE


def test_no_path():
    x, w = tf.constant(3.0), tf.constant(2.0)
    with P() as g:
        g.watch([x, w])
        y = w * 2.0
    assert g.gradient(y, x) is None
    assert cause(g, y, x) is C.NO_PATH


def test_watched_variable_never_read_is_no_path():
    v = tf.Variable(2.0)
    w = tf.constant(1.0)
    with P() as g:
        g.watch([v, w])
        y = w * 3.0
    assert g.gradient(y, v) is None
    assert cause(g, y, v) is C.NO_PATH


def test_created_before_the_tape():
    x = tf.constant(3.0)
    y = x * x
    with P() as g:
        g.watch(x)
    assert g.gradient(y, x) is None
    e = tf.explain(g, y, x)
    assert e.cause is C.CREATED_BEFORE_TAPE and "before this tape started" in e.message


def test_created_before_the_tape_variable_loss():
    # the classic: the loss computed outside the tape's block
    v = tf.Variable(2.0)
    loss = v * v
    with P() as g:
        pass
    assert g.gradient(loss, v) is None
    assert cause(g, loss, v) is C.CREATED_BEFORE_TAPE


def test_created_before_reset():
    x = tf.constant(3.0)
    w = tf.constant(1.0)
    with P() as g:
        g.watch(x)
        h = x * x
        g.reset()
        g.watch([x, w])
        y = h * w
    assert g.gradient(y, x) is None
    assert cause(g, y, x) is C.CREATED_BEFORE_TAPE


# ---------------------------------------------------------------------------
# API details


def test_structure_and_mixed_sources():
    x, u, v = tf.constant(3.0), tf.constant(1.0), tf.Variable(2.0)
    with P() as g:
        g.watch(x)
        y = x * v
    res = tf.explain(g, y, {"a": [x, u], "b": (v,)})
    assert isinstance(res, dict) and isinstance(res["a"], list) and isinstance(res["b"], tuple)
    assert [res["a"][0].cause, res["a"][1].cause, res["b"][0].cause] == [C.CONNECTED, C.NEVER_WATCHED, C.CONNECTED]
    assert str(res["a"][1]) == res["a"][1].message and "source #1" in res["a"][1].message


def test_explain_does_not_consume_a_non_persistent_tape():
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    assert cause(g, y, x) is C.CONNECTED
    assert float(g.gradient(y, x)) == 6.0
    with pytest.raises(RuntimeError, match="holds no record"):
        tf.explain(g, y, x)


def test_explain_bad_arguments():
    x = tf.constant(3.0)
    with pytest.raises(TypeError, match="needs a tf.GradientTape"):
        tf.explain(object(), x, x)
    with P() as g:
        pass
    with pytest.raises(TypeError):
        tf.explain(g, x, 3.0)


def test_cause_values():
    assert [c.value for c in C] == [
        "connected", "never watched", "integer or bool dtype", "cut by stop_gradient", "cut by stop_recording",
        "recorded on another tape", "no path from source to target", "created before the tape",
    ]


# ---------------------------------------------------------------------------
# The config flag and the environment variable


@pytest.fixture
def explain_on(monkeypatch):
    monkeypatch.setattr(tf.config, "explain_none_gradients", True)


def test_flag_warns_with_the_cause_and_keeps_return_values(explain_on):
    x, u = tf.constant(3.0), tf.constant(1.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    with pytest.warns(tf.NoneGradientWarning) as rec:
        grads = g.gradient(y, [x, u])
    assert float(grads[0]) == 6.0 and grads[1] is None
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert "returned None for 1 of 2 source(s)" in msg and "never watched: source #1" in msg
    assert rec[0].filename == __file__  # points at the user's gradient() call


def test_flag_no_warning_when_connected_or_zero(explain_on):
    x, u = tf.constant(3.0), tf.constant(1.0)
    with P() as g:
        g.watch(x)
        y = x * x
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(g.gradient(y, x)) == 6.0
        assert float(g.gradient(y, u, unconnected_gradients="zero")) == 0.0


def test_flag_off_by_default_no_warning():
    assert os.environ.get("TAPEJAX_EXPLAIN_NONE", "") in ("", "0") or tf.config.explain_none_gradients
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        y = x * x
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if not tf.config.explain_none_gradients:
            assert g.gradient(y, x) is None


def test_env_var_turns_it_on():
    code = (
        "import warnings, tapejax as tf\n"
        "assert tf.config.explain_none_gradients\n"
        "x = tf.constant(3.0)\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    with tf.GradientTape() as g:\n"
        "        y = x * x\n"
        "    assert g.gradient(y, x) is None\n"
        "print(w[0].category.__name__, 'never watched' in str(w[0].message))\n"
    )
    env = dict(os.environ, TAPEJAX_EXPLAIN_NONE="1", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["NoneGradientWarning", "True"]
