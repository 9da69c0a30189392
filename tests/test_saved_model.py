"""tf.saved_model.save / load of an object's tf.functions through jax.export (issue 18)."""

import numpy as np
import pytest

import tapejax as tf


class Regressor:
    def __init__(self):
        self.w = tf.Variable([[1.0], [2.0]])
        self.steps = tf.Variable(0)

    @tf.function(input_signature=[tf.TensorSpec([3, 2], tf.float32)])
    def __call__(self, x):
        return tf.matmul(x, self.w)

    @tf.function(input_signature=[tf.TensorSpec([3, 2], tf.float32), tf.TensorSpec([3, 1], tf.float32)])
    def train(self, x, y):
        with tf.GradientTape() as t:
            loss = tf.reduce_mean((tf.matmul(x, self.w) - y) ** 2)
        self.w.assign_sub(0.1 * t.gradient(loss, self.w))
        self.steps.assign_add(1)
        if loss > 1.0:
            loss = loss * 1.0
        return {"loss": loss}


def test_saved_functions_run_without_the_python_and_update_loaded_variables(tmp_path):
    m = Regressor()
    tf.saved_model.save(m, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(3, 2)).astype(np.float32))
    y = tf.constant(rng.normal(size=(3, 1)).astype(np.float32))
    np.testing.assert_allclose(loaded(x).numpy(), m(x).numpy())
    for _ in range(3):
        a, b = loaded.train(x, y), m.train(x, y)
        np.testing.assert_allclose(a["loss"].numpy(), b["loss"].numpy(), rtol=1e-6)
    w, steps = loaded.variables
    np.testing.assert_allclose(w.numpy(), m.w.numpy(), rtol=1e-6)
    assert int(steps.numpy()) == 3 == int(m.steps.numpy())
    assert set(loaded.signatures) == {"__call__", "train"}


def test_save_errors_name_the_alternative(tmp_path):
    class NoSig:
        @tf.function
        def f(self, x):
            return x

    with pytest.raises(ValueError, match="input_signature"):
        tf.saved_model.save(NoSig(), str(tmp_path / "a"))

    class Prints:
        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def f(self, x):
            tf.print(x)
            return x

    with pytest.raises(NotImplementedError, match="tf.print"):
        tf.saved_model.save(Prints(), str(tmp_path / "b"))
    with pytest.raises(NotImplementedError, match="not a tapejax saved model"):
        tf.saved_model.load(str(tmp_path))
