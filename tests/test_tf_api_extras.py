"""The TF API around the tape (issue 17) without real TF: the module-level AttributeError, py_function's
gradient against jax.grad, tf.device, and what tf.Module finds."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax as tf


def test_missing_tf_name_raises_attribute_error_pointing_to_the_porting_guide():
    with pytest.raises(AttributeError, match=r"tf.audio is not supported by tapejax.*compat_docs/README.md"):
        tf.audio  # noqa: B018
    assert not hasattr(tf, "audio")
    with pytest.raises(AttributeError, match=r"^module 'tapejax' has no attribute 'not_a_tf_name'$"):
        tf.not_a_tf_name  # noqa: B018


def test_py_function_gradient_matches_jax_grad_eager_and_compiled():
    f = lambda a: jnp.sin(a) * a
    x = tf.constant([0.5, 1.5, -2.0])
    want = jax.vmap(jax.grad(f))(x._value)

    def step(x):
        with tf.GradientTape() as g:
            g.watch(x)
            y = tf.py_function(lambda a: tf.sin(a) * a, [x], tf.float32)
        return g.gradient(y, x)

    np.testing.assert_allclose(step(x).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(tf.function(step)(x).numpy(), want, rtol=1e-6)


def test_py_function_second_order_eager():
    x = tf.constant(1.5)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.py_function(lambda a: a * a * a, [x], tf.float32)
        dy = inner.gradient(y, x)
    assert float(dy) == pytest.approx(3 * 1.5**2)
    # TF 2.21 gives None here (its EagerPyFunc gradient is not differentiated again); so does tapejax.
    assert outer.gradient(dy, x) is None


def test_device_context_places_arrays():
    with tf.device("/CPU:0"):
        x = tf.ones(2)
    assert next(iter(x._value.devices())).platform == "cpu"
    with pytest.raises(ValueError, match="Unknown device"), tf.device("/XPU:0"):
        pass


def test_module_finds_variables_added_after_construction_and_in_nested_containers():
    m = tf.Module()
    m.layers = [tf.Module(name="l0")]
    m.layers[0].w = tf.Variable(1.0)
    m.extra = {"a": (tf.Variable(2.0, trainable=False),)}
    assert [float(v) for v in m.variables] == [2.0, 1.0]
    assert [float(v) for v in m.trainable_variables] == [1.0]
    assert m.submodules == (m.layers[0],)


def test_checkpoint_optimizer_restored_before_build_waits_for_restore_deferred(tmp_path):
    from tapejax._tf._checkpoint import restore_deferred

    def make():
        m = tf.Module()
        m.w = tf.Variable([1.0, -2.0])
        return m, tf.keras.optimizers.Adam(learning_rate=0.1)

    def step(m, opt):
        with tf.GradientTape() as g:
            loss = tf.reduce_sum(m.w**2)
        opt.apply_gradients(zip(g.gradient(loss, [m.w]), [m.w]))

    m, opt = make()
    step(m, opt)
    path = tf.train.Checkpoint(model=m, optimizer=opt).save(str(tmp_path / "ck"))
    step(m, opt)
    m2, opt2 = make()
    status = tf.train.Checkpoint(model=m2, optimizer=opt2).restore(path)
    # The slots do not exist yet: TF defers them; tapejax says so until the optimizer is built.
    with pytest.raises(AssertionError, match="optimizer"):
        status.assert_consumed()
    opt2.build([m2.w])
    restore_deferred(opt2)
    status.assert_consumed()
    step(m2, opt2)
    np.testing.assert_allclose(m2.w.numpy(), m.w.numpy(), rtol=1e-6)


def test_checkpoint_saves_string_and_int_variables_and_keras_models(tmp_path):
    ck = tf.train.Checkpoint(s=tf.Variable("abc"), i=tf.Variable([1, 2]),
                             model=tf.keras.Sequential([tf.keras.layers.Dense(2)]))
    ck.model(tf.ones([1, 3]))
    before = [v.numpy().copy() for v in ck.model.variables]
    path = ck.save(str(tmp_path / "ck"))
    ck.s.assign("zzz")
    ck.i.assign([0, 0])
    for v in ck.model.variables:
        v.assign(tf.zeros_like(v))
    ck.restore(path).assert_consumed()
    assert ck.s.numpy() == b"abc" and ck.i.numpy().tolist() == [1, 2]
    for v, b in zip(ck.model.variables, before):
        np.testing.assert_array_equal(v.numpy(), b)
    assert tf.train.latest_checkpoint(str(tmp_path)) == path
    assert tf.train.load_variable(path, "i/.ATTRIBUTES/VARIABLE_VALUE").tolist() == [1, 2]


def test_print_of_string_tensors_quotes_them_as_tf(capsys):
    # TF 2.21 prints ["a" "b"] "abc" x for these (checked by hand: tf.print rejects a StringIO stream).
    import sys

    tf.print(tf.constant(["a", "b"]), tf.constant("abc"), "x", output_stream=sys.stdout)
    assert capsys.readouterr().out == '["a" "b"] "abc" x\n'


def test_string_ops_on_traced_values_run_on_the_host_inside_a_step():
    # Strings inside a compiled function: host callbacks over string ids (_ops/_strtable.py).
    @tf.function
    def step(x):
        return tf.strings.as_string(x)

    assert step(tf.constant(1.0)).numpy() == tf.strings.as_string(tf.constant(1.0)).numpy() == b"1.000000"
    assert step(tf.constant(2.5)).numpy() == b"2.500000"
    assert step.experimental_get_tracing_count() == 1


def test_numpy_function_in_a_step_runs_once_per_call_with_tensorspec_tout():
    calls = []

    def host(a):
        calls.append(a.copy())
        return a * 2

    @tf.function
    def step(x):
        return tf.numpy_function(host, [x], tf.TensorSpec([2], tf.float32))

    assert step(tf.constant([1.0, 2.0])).numpy().tolist() == [2.0, 4.0]
    assert step(tf.constant([3.0, 4.0])).numpy().tolist() == [6.0, 8.0]
    assert [c.tolist() for c in calls] == [[1.0, 2.0], [3.0, 4.0]]  # no shape probe


@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=3))
@settings(max_examples=40)
def test_shape_size_rank_range_stay_static_inside_a_compiled_step(shape):
    """tf.shape/size/rank/range of static values are constants inside tapejax.function (XLA shapes are
    static; TF folds them): get_static_value sees them, and reshape / range / one_hot that need a
    concrete value accept them there, with the eager results; also inside tf.vectorized_map."""
    x = tf.constant(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))
    seen = {}

    def body(x):
        s, n, r = tf.shape(x), tf.size(x), tf.rank(x)
        rng = tf.range(n)
        seen["static"] = [tf.get_static_value(v) for v in (s, n, r, rng)]
        flat = tf.reshape(x, [-1])
        return s, n, r, rng, tf.reshape(flat, s), tf.one_hot(0, n), tf.one_hot(rng, tf.size(rng))

    eager = body(x)
    compiled = tf.function(body)(x)
    static = seen["static"]
    size = int(np.prod(shape))
    assert [np.asarray(v).tolist() for v in static] == [list(shape), size, len(shape), list(range(size))]
    for e, c in zip(eager, compiled):
        assert e.shape == c.shape
        np.testing.assert_array_equal(e.numpy(), c.numpy())

    # A capture's tf.shape/tf.size inside vectorized_map (fn is traced by jax.vmap).
    p = tf.Variable(tf.ones(shape))
    out = tf.vectorized_map(lambda i: tf.reshape(tf.cast(i, tf.float32) * tf.ones([size]), tf.shape(p)),
                            tf.range(2))
    assert out.shape == tuple([2] + list(shape))
    np.testing.assert_array_equal(out.numpy(), np.stack([np.zeros(shape), np.ones(shape)]))
