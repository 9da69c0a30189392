"""GradientTape semantics (issue 2), against analytic derivatives and TF's documented rules."""

import collections
import logging

import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def test_dy_dx_of_square():
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    d = g.gradient(y, x)
    assert isinstance(d, tf.Tensor) and d.dtype == tf.float32 and d.shape == ()
    close(d, 2 * 3.0)


def test_unwatched_constant_gives_none():
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        y = x * x
    assert g.gradient(y, x) is None


def test_second_call_on_non_persistent_raises_and_persistent_answers_many():
    x = tf.constant(2.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x**3
    close(g.gradient(y, x), 12.0)
    with pytest.raises(RuntimeError, match="non-persistent"):
        g.gradient(y, x)
    with tf.GradientTape(persistent=True) as p:
        p.watch(x)
        y = x**3
        z = tf.sin(y)
    for _ in range(3):
        close(p.gradient(y, x), 12.0)
        close(p.gradient(z, x), np.cos(8.0) * 12.0)


def test_variables_auto_watched_unless_untrainable_or_disabled():
    v = tf.Variable(5.0)
    with tf.GradientTape() as t:
        y = v**2
    close(t.gradient(y, v), 10.0)
    nt = tf.Variable(5.0, trainable=False)
    with tf.GradientTape() as t:
        y = nt**2
    assert t.gradient(y, nt) is None
    with tf.GradientTape(watch_accessed_variables=False) as t:
        y = v**2
    assert t.gradient(y, v) is None
    with tf.GradientTape(watch_accessed_variables=False) as t:
        t.watch(nt)
        y = nt**2
    close(t.gradient(y, nt), 10.0)


def test_watched_variables_dedup_in_construction_order_and_reset():
    b = tf.Variable(1.0, name="b")
    a = tf.Variable(2.0, name="a")
    c = tf.Variable(3.0, name="c")
    with tf.GradientTape() as t:
        _ = a * c + a * b
        assert [v.name for v in t.watched_variables()] == ["b:0", "a:0", "c:0"]
        t.reset()
        assert t.watched_variables() == ()
        _ = c * 2.0
    assert [v.name for v in t.watched_variables()] == ["c:0"]


def test_watch_rejects_non_tensors_with_value_error():
    with tf.GradientTape() as t:
        for bad in (1.0, np.ones(2), None, [tf.constant(1.0), 2.0], "abc"):
            with pytest.raises(ValueError, match="not tf.Tensor or tf.Variable"):
                t.watch(bad)
        t.watch({"a": tf.constant(1.0), "b": (tf.constant(2.0),)})


def test_integer_source_is_none_with_tf_warning(caplog, monkeypatch):
    from tapejax import _log

    monkeypatch.setattr(_log, "_counts", {})  # TF logs this at most 5 times per process
    x = tf.constant(3)
    with caplog.at_level(logging.WARNING, logger="tapejax"):
        with tf.GradientTape() as t:
            t.watch(x)
            y = x * x
    assert "must be floating" in caplog.text
    assert t.gradient(y, x) is None


def test_integer_source_zero_and_alias_keep_int_dtype():
    x = tf.constant([1, 2])
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
    z = t.gradient(y, x, unconnected_gradients="zero")
    assert z.dtype == tf.int32 and z.numpy().tolist() == [0, 0]
    one = t.gradient(x, x)
    assert one.dtype == tf.int32 and one.numpy().tolist() == [1, 1]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "complex64"])
def test_gradient_keeps_source_dtype(dtype):
    x = tf.constant(3.0, dtype=dtype)
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * x
    g = t.gradient(y, x)
    assert g.dtype == tf.as_dtype(dtype)
    close(np.asarray(g.numpy(), np.complex64), 6.0, tol=1e-2)


def test_complex_gradients_follow_tf_conjugate_convention():
    z = tf.constant(3 + 4j, dtype=tf.complex64)
    with tf.GradientTape(persistent=True) as t:
        t.watch(z)
        sq = tf.math.real(z * tf.math.conj(z))  # |z|^2, real
        hol = z * z  # holomorphic, complex target
    close(t.gradient(sq, z), 2 * (3 + 4j))  # TF: 2z
    close(t.gradient(hol, z), 2 * (3 - 4j))  # TF: conj(2z)


def test_result_mirrors_source_structure():
    x, y = tf.constant(1.0), tf.constant(2.0)
    NT = collections.namedtuple("NT", "a b")
    with tf.GradientTape(persistent=True) as t:
        t.watch([x, y])
        z = x * y * 3.0
    g = t.gradient(z, [x, y])
    assert isinstance(g, list) and len(g) == 2
    close(g[0], 6.0)
    close(g[1], 3.0)
    gt = t.gradient(z, (x, y))
    assert isinstance(gt, tuple)
    gd = t.gradient(z, {"b": y, "a": x, "n": [x, (y,)]})
    assert set(gd) == {"a", "b", "n"} and isinstance(gd["n"], list) and isinstance(gd["n"][1], tuple)
    close(gd["a"], 6.0)
    close(gd["n"][1][0], 3.0)
    gn = t.gradient(z, NT(x, y))
    assert isinstance(gn, NT)
    close(gn.b, 3.0)


def test_several_and_nonscalar_targets_are_summed():
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
        s = tf.reduce_sum(x)
    close(t.gradient(y, x), [2.0, 4.0, 6.0])
    close(t.gradient([y, s], x), [3.0, 5.0, 7.0])
    close(t.gradient({"y": y, "s": s}, x), [3.0, 5.0, 7.0])


def test_output_gradients_weight_targets():
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
        s = tf.reduce_sum(x)
    w = tf.constant([1.0, 10.0, 100.0])
    close(t.gradient(y, x, output_gradients=w), [2.0, 40.0, 600.0])
    close(t.gradient([y, s], x, output_gradients=[w, tf.constant(2.0)]), [4.0, 42.0, 602.0])
    close(t.gradient(y, x, output_gradients=tf.constant([2.0])), [4.0, 8.0, 12.0])  # broadcast, as TF
    with pytest.raises(tf.errors.InvalidArgumentError, match="Incompatible shapes"):
        t.gradient(y, x, output_gradients=tf.constant([1.0, 2.0]))
    with pytest.raises(ValueError, match="None"):
        t.gradient([y, s], x, output_gradients=[None, tf.constant(1.0)])
    with pytest.raises(ValueError, match="one output gradient per target"):
        t.gradient([y, s], x, output_gradients=[w])


@pytest.mark.parametrize("value,expected", [(tf.UnconnectedGradients.NONE, None), ("none", None), ("zero", 0.0),
                                            (tf.UnconnectedGradients.ZERO, 0.0)])
def test_unconnected_gradients_values(value, expected):
    x, y = tf.constant([2.0, 2.0]), tf.constant(3.0)
    with tf.GradientTape() as t:
        t.watch([x, y])
        z = y**2
    g = t.gradient(z, x, unconnected_gradients=value)
    if expected is None:
        assert g is None
    else:
        assert g.shape == (2,) and g.dtype == tf.float32
        close(g, [0.0, 0.0])


@pytest.mark.parametrize("bad", ["ZERO", "foo", None, 0])
def test_unknown_unconnected_gradients_raises_value_error(bad):
    x = tf.constant(1.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * 2.0
    with pytest.raises(ValueError, match="Unknown value for unconnected_gradients"):
        t.gradient(y, x, unconnected_gradients=bad)


def test_intermediate_sources_and_total_derivative():
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
        z = y * y + x
    dzdx, dzdy = t.gradient(z, [x, y])
    close(dzdx, 4 * 27.0 + 1)  # total derivative through y
    close(dzdy, 2 * 9.0)
    close(t.gradient(z, y), 18.0)


def test_target_alias_of_source_gives_ones_even_unwatched():
    x = tf.constant([1.0, 2.0])
    v = tf.Variable(2.0)
    with tf.GradientTape(persistent=True) as t:
        y = x * 2.0
    close(t.gradient(x, x), [1.0, 1.0])
    close(t.gradient(v, v), 1.0)
    close(t.gradient(y, y), [1.0, 1.0])
    assert t.gradient(v, x) is None


def test_variable_in_targets_adds_ones():
    v = tf.Variable(3.0)
    with tf.GradientTape() as t:
        y = v * 2.0
    close(t.gradient([y, v], v), 3.0)


def test_integer_targets_skipped_and_relu_is_zero_not_none():
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        yi = tf.cast(x, tf.int32)
        yf = x * x
        r = tf.nn.relu(-x)
    assert t.gradient(yi, x) is None
    close(t.gradient(yi, x, unconnected_gradients="zero"), 0.0)
    close(t.gradient([yf, yi], x), 6.0)
    g = t.gradient(r, x)
    assert g is not None
    close(g, 0.0)


def test_gradient_inside_block_persistent_records_on_itself(caplog):
    x = tf.constant(3.0)
    with caplog.at_level(logging.WARNING, logger="tapejax"):
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            y = x**3
            dy = t.gradient(y, x)
            dy5 = dy * 5.0
    close(dy, 27.0)
    close(t.gradient(dy, x), 18.0)
    close(t.gradient(dy5, x), 90.0)


def test_gradient_inside_block_non_persistent_stops_recording():
    x = tf.constant(3.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = x**3
        dy = t.gradient(y, x)
        with pytest.raises(RuntimeError):
            t.gradient(y, x)
    close(dy, 27.0)


@pytest.mark.parametrize("inner_inside", [True, False])
def test_nested_second_derivative(inner_inside):
    x = tf.Variable(3.0)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = x**3
        if inner_inside:
            dy = inner.gradient(y, x)
    if not inner_inside:
        dy = inner.gradient(y, x)
    close(dy, 27.0)
    d2 = outer.gradient(dy, x)
    if inner_inside:
        close(d2, 18.0)
    else:
        assert d2 is None  # computed after the outer block: not recorded, as in TF


def test_third_derivative():
    x = tf.constant(3.0)
    with tf.GradientTape() as t3:
        t3.watch(x)
        with tf.GradientTape() as t2:
            t2.watch(x)
            with tf.GradientTape() as t1:
                t1.watch(x)
                y = x**4
            d1 = t1.gradient(y, x)
        d2 = t2.gradient(d1, x)
    d3 = t3.gradient(d2, x)
    close(d1, 108.0)
    close(d2, 108.0)
    close(d3, 72.0)


def test_reentering_active_tape_raises_and_tape_stays_usable():
    x = tf.constant(3.0)
    t = tf.GradientTape()
    with t:
        t.watch(x)
        with pytest.raises(ValueError, match="re-enter"):
            with t:
                pass
        y = x * x
    close(t.gradient(y, x), 6.0)


def test_reentering_after_exit_continues_record_and_spent_starts_fresh():
    x = tf.constant(3.0)
    t = tf.GradientTape()
    with t:
        t.watch(x)
        y = x * x
    with t:
        z = y * x
    close(t.gradient(z, x), 27.0)
    with t:  # spent non-persistent tape: starts afresh, the old watch is gone
        w = x * x
    assert t.gradient(w, x) is None


def test_reset_and_its_errors():
    x = tf.constant(3.0)
    t = tf.GradientTape()
    with pytest.raises(ValueError, match="not recording"):
        t.reset()
    with t:
        t.watch(x)
        y = x * x
        t.reset()
        t.watch(x)
        z = x * 5.0
    assert t.gradient([y, z], [x])[0] is not None
    with pytest.raises(ValueError, match="not recording"):
        t.reset()


def test_stop_recording_pauses_only_this_tape_and_errors():
    x = tf.constant(3.0)
    with pytest.raises(RuntimeError, match="not recording"):
        with tf.GradientTape().stop_recording():
            pass
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape(persistent=True) as inner:
            inner.watch(x)
            with inner.stop_recording():
                y = x * x
                with pytest.raises(ValueError, match="not recording"):
                    with inner.stop_recording():
                        pass
            z = x * 2.0
    assert inner.gradient(y, x) is None
    close(outer.gradient(y, x), 6.0)
    close(inner.gradient(z, x), 2.0)
    t = tf.GradientTape()
    with t:
        t.watch(x)
        y = x * x
    t.gradient(y, x)
    with pytest.raises(RuntimeError, match="not recording"):
        with t.stop_recording():
            pass


def test_watch_inside_stop_recording_ignored_when_nothing_records():
    x = tf.constant(3.0)
    with tf.GradientTape() as t:
        with t.stop_recording():
            t.watch(x)
        y = x * x
    assert t.gradient(y, x) is None


def test_exception_inside_block_leaves_stack_clean():
    from tapejax._core import _recorder as _core

    x = tf.constant(3.0)
    t = tf.GradientTape()
    with pytest.raises(ZeroDivisionError):
        with t:
            t.watch(x)
            y = x * x
            1 / 0
    assert not _core.state.recording
    close(t.gradient(y, x), 6.0)
    with pytest.raises(KeyError):
        with tf.GradientTape() as t2:
            with t2.stop_recording():
                raise KeyError("boom")
    assert not _core.state.recording


def test_python_control_flow_on_values():
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
    assert grad(x, 6).numpy() == 12.0
    assert grad(x, 5).numpy() == 12.0
    assert grad(x, 4).numpy() == 4.0
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * 3.0 if x > 1.0 else x * 5.0
    close(t.gradient(y, x), 3.0)


def test_variable_reads_sum_and_assign_is_not_differentiable():
    v = tf.Variable(1.0)
    x = tf.constant(2.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y1 = v * v
        v.assign(3.0)
        y2 = v * v
        total = y1 + y2
        v.assign(x * 2.0)
        y3 = v * 1.0
    close(t.gradient(y1, v), 2.0)
    close(t.gradient(y2, v), 6.0)
    close(t.gradient(total, v), 8.0)
    assert t.gradient(y3, x) is None
    close(t.gradient(y3, v), 1.0)


def test_recorded_value_survives_later_assign():
    v = tf.Variable(2.0)
    with tf.GradientTape() as t:
        y = v * v
    v.assign(10.0)
    close(t.gradient(y, v), 4.0)


def test_same_value_different_tensor_is_a_different_source():
    x = tf.constant(1.0)
    x2 = tf.constant(1.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * 3.0
    assert t.gradient(y, x2) is None


@pytest.mark.parametrize("bad", [3.0, None, np.array(1.0), "abc"])
def test_bad_targets_and_sources_raise_type_error(bad):
    x = tf.constant(1.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * 2.0
    with pytest.raises(TypeError, match="must be tf.Tensor or tf.Variable"):
        t.gradient(bad, x)
    with pytest.raises(TypeError, match="must be tf.Tensor or tf.Variable"):
        t.gradient(y, [x, bad])


def test_nan_and_inf_propagate():
    x = tf.constant([np.nan, np.inf, 1.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * x
    g = t.gradient(y, x).numpy()
    assert np.isnan(g[0]) and np.isinf(g[1]) and g[2] == 2.0


def test_matmul_and_broadcast_gradients_match_jax():
    import jax

    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=(4,)).astype(np.float32)
    w = rng.normal(size=(4, 2)).astype(np.float32)
    ta, tb, tw = tf.constant(a), tf.constant(b), tf.Variable(w)
    with tf.GradientTape() as t:
        t.watch([ta, tb])
        y = tf.reduce_sum(tf.tanh(tf.matmul(ta + tb, tw)) ** 2)
    ga, gb, gw = t.gradient(y, [ta, tb, tw])

    def f(a, b, w):
        return jnp.sum(jnp.tanh((a + b) @ w) ** 2)

    ja, jb, jw = jax.grad(f, argnums=(0, 1, 2))(a, b, w)
    close(ga, ja)
    close(gb, jb)
    close(gw, jw)
