"""tf.keras models: compile/fit/evaluate/predict with TF's train_step, a user train_step (the keras.io
pattern), callbacks, run_eagerly, saving, loading and cloning. Values are checked against the same
computation done by hand (jax.grad of the loss for the optimizer step)."""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf

L = tf.keras.layers
RNG = np.random.default_rng(0)
X = RNG.standard_normal((16, 3)).astype(np.float32)
Y = (X @ np.array([[1.0], [-1.0], [2.0]], np.float32)).astype(np.float32)


def _linear(seed=0):
    model = tf.keras.Sequential([tf.keras.Input((3,)), L.Dense(1)])
    rng = np.random.default_rng(seed)
    model.set_weights([rng.standard_normal((3, 1)).astype(np.float32), np.zeros(1, np.float32)])
    return model


def _sgd_reference(w, b, x, y, lr, steps, batch):
    def loss(w, b, x, y):
        return jnp.mean((x @ w + b - y) ** 2)

    for _ in range(steps):
        for i in range(0, len(x), batch):
            gw, gb = jax.grad(loss, argnums=(0, 1))(w, b, x[i:i + batch], y[i:i + batch])
            w, b = w - lr * gw, b - lr * gb
    return w, b


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_fit_runs_tf_train_step_and_matches_sgd_by_hand(run_eagerly):
    model = _linear()
    w0, b0 = model.get_weights()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse", run_eagerly=run_eagerly)
    history = model.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    w, b = _sgd_reference(w0, b0, X, Y, 0.1, 2, 8)
    np.testing.assert_allclose(model.get_weights()[0], w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.get_weights()[1], b, rtol=1e-5, atol=1e-6)
    assert list(history.history) == ["loss"] and len(history.history["loss"]) == 2
    assert hasattr(model.train_function, "experimental_get_tracing_count") != run_eagerly


def test_custom_train_step_keras_io_pattern():
    calls = []

    class CustomModel(tf.keras.Model):
        def train_step(self, data):
            calls.append(1)  # fit compiles the step with tapejax.function: not called per batch
            x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=y_pred)
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    inputs = tf.keras.Input((3,))
    model = CustomModel(inputs, L.Dense(1)(inputs))
    model.set_weights(_linear().get_weights())
    w0, b0 = model.get_weights()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    history = model.fit(X, Y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    w, b = _sgd_reference(w0, b0, X, Y, 0.05, 3, 16)
    np.testing.assert_allclose(model.get_weights()[0], w, rtol=1e-5, atol=1e-6)
    assert sorted(history.history) == ["loss", "mae"]
    # One epoch is one batch here: its loss is the loss at the weights before that step.
    w1, b1 = _sgd_reference(w0, b0, X, Y, 0.05, 1, 16)
    np.testing.assert_allclose(history.history["loss"][1], np.mean((X @ w1 + b1 - Y) ** 2), rtol=1e-5)
    # The first call creates the optimizer's slots, so it runs eagerly, then traces (as
    # tf.function with variables created on the first call); 3 steps, at most 2 Python calls.
    assert len(calls) <= 2
    # tf.keras.Model itself is untouched by the functional subclass.
    assert not issubclass(tf.keras.Model, tf.keras.models.Functional)


def test_evaluate_predict_and_metrics_per_element():
    model = _linear(1)
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    loss, mae = model.evaluate(X, Y, batch_size=5, verbose=0)
    pred = X @ model.get_weights()[0] + model.get_weights()[1]
    np.testing.assert_allclose(loss, np.mean((pred - Y) ** 2), rtol=1e-5)
    np.testing.assert_allclose(mae, np.mean(np.abs(pred - Y)), rtol=1e-5)  # per element, batches of 5, 5, 5, 1
    np.testing.assert_allclose(model.predict(X, batch_size=5, verbose=0), pred, rtol=1e-5, atol=1e-6)
    # tapejax tensors are accepted as data, as tf.Tensors are by TF's fit.
    np.testing.assert_allclose(model.predict(tf.constant(X), verbose=0), pred, rtol=1e-5, atol=1e-6)
    assert model.evaluate(tf.constant(X), tf.constant(Y), verbose=0)[0] == pytest.approx(loss, rel=1e-6)
    assert model.evaluate(X, Y, verbose=0, return_dict=True).keys() == {"loss", "mae"}


def test_callbacks_history_early_stopping_scheduler_checkpoint_custom(tmp_path):
    seen = []

    class Recorder(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(("batch", batch, sorted(logs)))

        def on_epoch_end(self, epoch, logs=None):
            seen.append(("epoch", epoch, float(self.model.optimizer.learning_rate)))

    model = _linear()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    path = str(tmp_path / "best.keras")
    history = model.fit(
        X, Y, batch_size=8, epochs=20, shuffle=False, verbose=0, validation_data=(X[:4], Y[:4]),
        callbacks=[Recorder(),
                   tf.keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.1 if epoch < 2 else 0.0),
                   tf.keras.callbacks.EarlyStopping(monitor="loss", patience=1, min_delta=1e-9),
                   tf.keras.callbacks.ModelCheckpoint(path, monitor="val_loss", save_best_only=True),
                   tf.keras.callbacks.LambdaCallback(on_train_end=lambda logs: seen.append(("end",)))])
    epochs = [s for s in seen if s[0] == "epoch"]
    # lr 0 from epoch 2: the loss stops improving and EarlyStopping ends training after patience 1.
    assert [e[2] for e in epochs][:3] == [pytest.approx(0.1), pytest.approx(0.1), 0.0]
    assert len(history.history["loss"]) == len(epochs) == 4
    assert sorted(history.history) == ["learning_rate", "loss", "val_loss"]
    assert seen[0] == ("batch", 0, ["loss"]) and seen[-1] == ("end",)
    again = tf.keras.models.load_model(path)
    np.testing.assert_allclose(again.predict(X, verbose=0), model.predict(X, verbose=0), rtol=1e-6)


def test_save_load_clone_and_weights(tmp_path):
    inputs = tf.keras.Input((3,))
    h = L.BatchNormalization()(L.Dense(4, activation="relu")(inputs))
    model = tf.keras.Model(inputs, L.Dense(2)(h))
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="mse")
    model.fit(X, np.concatenate([Y, -Y], 1), epochs=1, verbose=0)
    p = str(tmp_path / "m.keras")
    model.save(p)
    loaded = tf.keras.models.load_model(p)
    assert isinstance(loaded, tf.keras.Model) and isinstance(loaded.optimizer, tf.keras.optimizers.Adam)
    np.testing.assert_allclose(loaded.predict(X, verbose=0), model.predict(X, verbose=0), rtol=1e-6)
    clone = tf.keras.models.clone_model(model)
    assert isinstance(clone, tf.keras.Model) and len(clone.weights) == len(model.weights)
    assert not np.allclose(clone.get_weights()[0], model.get_weights()[0])  # fresh weights
    model.save_weights(str(tmp_path / "w.weights.h5"))
    clone.load_weights(str(tmp_path / "w.weights.h5"))
    np.testing.assert_allclose(clone.predict(X, verbose=0), model.predict(X, verbose=0), rtol=1e-6)
    clone.set_weights([np.zeros_like(w) for w in model.get_weights()])
    assert np.all(clone.predict(X, verbose=0) == 0)
    with tf.GradientTape() as tape:  # a loaded model is on the tape like any other
        y = tf.reduce_sum(loaded(tf.constant(X)))
    assert all(g is not None for g in tape.gradient(y, loaded.trainable_variables))


def test_huber_reduction_and_accuracy_per_element():
    y, p = tf.constant([[0.0, 1.0]]), tf.Variable([[0.5, 3.0]])
    with tf.GradientTape() as tape:
        loss = tf.keras.losses.Huber(delta=1.0, reduction=tf.keras.losses.Reduction.SUM)(y, p)
    assert float(loss) == pytest.approx((0.125 + 1.5) / 2)  # mean over the last axis, summed over the batch
    np.testing.assert_allclose(tape.gradient(loss, p).numpy(), [[0.25, 0.5]])
    acc = tf.keras.metrics.Accuracy()
    acc.update_state([1, 2, 3, 4], [0, 2, 3, 4])
    acc.update_state([1, 2], [1, 2])
    assert float(acc.result()) == pytest.approx(5 / 6)
    m = tf.keras.metrics.BinaryAccuracy()

    @tf.function
    def update(y, p):
        m.update_state(y, p)

    update(tf.constant([[1.0], [0.0], [1.0], [1.0]]), tf.constant([[0.9], [0.2], [0.3], [0.8]]))
    update(tf.constant([[0.0], [1.0]]), tf.constant([[0.1], [0.7]]))
    assert float(m.result()) == pytest.approx(5 / 6)  # accumulated across compiled calls


def test_a_model_keras_built_is_put_on_the_tape():
    import keras

    plain = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])  # Keras's own class
    model = tf.keras.models.tape_model(plain)
    assert model is plain and isinstance(model, tf.keras.Sequential)
    x = tf.constant(X[:2])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(model(x) ** 2)
    k, b = (v.numpy() for v in model.trainable_variables)
    np.testing.assert_allclose(tape.gradient(y, model.trainable_variables)[0].numpy(),
                               X[:2].T @ (2 * (X[:2] @ k + b)), rtol=1e-5)


@pytest.mark.slow
def test_models_keras_builds_are_on_the_tape():
    # An FGSM-style gradient with respect to the image of a model from tf.keras.applications.
    model = tf.keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3), classes=3, alpha=0.35)
    assert isinstance(model, tf.keras.Model)
    image = tf.constant(np.random.default_rng(0).random((1, 32, 32, 3), np.float32))
    with tf.GradientTape() as tape:
        tape.watch(image)
        loss = tf.keras.losses.CategoricalCrossentropy()(tf.constant([[0.0, 1.0, 0.0]]), model(image))
    g = tape.gradient(loss, image)
    tv = [v.numpy() for v in model.trainable_variables]
    ntv = [v.numpy() for v in model.non_trainable_variables]

    def f(x):
        p, _ = model.stateless_call(tv, ntv, x)
        return -jnp.log(jnp.clip(p[0, 1] / p[0].sum(), 1e-7, 1 - 1e-7))

    np.testing.assert_allclose(g.numpy(), jax.grad(f)(image.numpy()), rtol=2e-3, atol=1e-6)


def test_compile_with_loss_and_metric_functions_written_with_tapejax_ops():
    def my_loss(y, p):
        return tf.reduce_mean(tf.square(y - p), axis=-1)

    def my_mae(y, p):
        return tf.reduce_mean(tf.abs(y - p), axis=-1)

    a, b = _linear(2), _linear(2)
    a.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss=my_loss, metrics=[my_mae])
    b.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    ha = a.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    hb = b.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(ha.history["loss"], hb.history["loss"], rtol=1e-6)
    np.testing.assert_allclose(ha.history["my_mae"], hb.history["mae"], rtol=1e-6)
