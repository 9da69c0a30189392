"""The TF API around the tape (issue 17) without real TF: the module-level AttributeError, py_function's
gradient against jax.grad, tf.device, and what tf.Module finds."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf


def test_missing_tf_name_raises_attribute_error_pointing_to_the_porting_guide():
    with pytest.raises(AttributeError, match=r"tf.saved_model is not supported by tapejax.*compat_docs/README.md"):
        tf.saved_model  # noqa: B018
    assert not hasattr(tf, "saved_model")
    with pytest.raises(AttributeError, match=r"^module 'tapejax' has no attribute 'not_a_tf_name'$"):
        tf.not_a_tf_name  # noqa: B018


def test_py_function_gradient_matches_jax_grad_eager_and_compiled():
    f = lambda a: jnp.sin(a) * a  # noqa: E731
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
    with pytest.raises(ValueError, match="Unknown device"):
        with tf.device("/XPU:0"):
            pass


def test_module_finds_variables_added_after_construction_and_in_nested_containers():
    m = tf.Module()
    m.layers = [tf.Module(name="l0")]
    m.layers[0].w = tf.Variable(1.0)
    m.extra = {"a": (tf.Variable(2.0, trainable=False),)}
    assert [float(v) for v in m.variables] == [2.0, 1.0]
    assert [float(v) for v in m.trainable_variables] == [1.0]
    assert m.submodules == (m.layers[0],)
