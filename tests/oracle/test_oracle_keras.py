"""tapejax.keras against real Keras 3 (TF 2.21): the same code on the same data.

Optimizers run 20 steps of a small regression (gradients from each framework's own
tape) and must agree at every step; losses, metrics, schedules, configs and layer
outputs are compared value for value.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapejax as tj

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 3)).astype(np.float32)
Y = RNG.normal(size=(8, 2)).astype(np.float32)
W0 = RNG.normal(size=(3, 2)).astype(np.float32)
B0 = RNG.normal(size=(2,)).astype(np.float32)


def _train(tf, make_opt, steps=20, skip_c=False):
    """20 steps on mean((X w + b - Y)^2) + 0.5 c^2; with skip_c, c gets no gradient on odd steps."""
    w, b, c = tf.Variable(W0), tf.Variable(B0), tf.Variable(np.float32(0.7))
    opt = make_opt(tf)
    trajectory = []
    for i in range(steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(tf.constant(X), w) + b - tf.constant(Y))) + 0.5 * c * c
        gw, gb, gc = tape.gradient(loss, [w, b, c])
        if skip_c and i % 2:
            gc = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # both warn about the None gradient
            opt.apply_gradients(zip([gw, gb, gc], [w, b, c]))
        trajectory.append([w.numpy().copy(), b.numpy().copy(), np.float32(c.numpy())])
    return trajectory, int(opt.iterations.numpy())


OPTIMIZERS = {
    "sgd": lambda tf: tf.keras.optimizers.SGD(0.1),
    "sgd_momentum_exponential_decay": lambda tf: tf.keras.optimizers.SGD(
        tf.keras.optimizers.schedules.ExponentialDecay(0.2, 5, 0.5), momentum=0.9),
    "sgd_nesterov_weight_decay": lambda tf: tf.keras.optimizers.SGD(0.05, momentum=0.5, nesterov=True, weight_decay=0.01),
    "adam": lambda tf: tf.keras.optimizers.Adam(0.01),
    "adam_cosine_warmup": lambda tf: tf.keras.optimizers.Adam(
        tf.keras.optimizers.schedules.CosineDecay(0.05, 10, alpha=0.1, warmup_target=0.1, warmup_steps=5)),
    "adamw": lambda tf: tf.keras.optimizers.AdamW(0.01, weight_decay=0.1),
    "rmsprop": lambda tf: tf.keras.optimizers.RMSprop(0.01),
    "rmsprop_centered_momentum_piecewise": lambda tf: tf.keras.optimizers.RMSprop(
        tf.keras.optimizers.schedules.PiecewiseConstantDecay([5, 10], [0.01, 0.005, 0.001]), momentum=0.9, centered=True),
    "adagrad": lambda tf: tf.keras.optimizers.Adagrad(0.1),
    "adam_clipnorm": lambda tf: tf.keras.optimizers.Adam(0.01, clipnorm=0.5),
    "sgd_global_clipnorm": lambda tf: tf.keras.optimizers.SGD(0.1, global_clipnorm=0.5),
    "sgd_clipvalue": lambda tf: tf.keras.optimizers.SGD(0.1, clipvalue=0.2),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_trajectory_matches_keras(real_tf, name):
    skip = name in ("adam", "sgd_nesterov_weight_decay")  # also: a variable that misses every other step
    want, it_want = _train(real_tf, OPTIMIZERS[name], skip_c=skip)
    got, it_got = _train(tj, OPTIMIZERS[name], skip_c=skip)
    assert it_got == it_want == 20
    for step, (a, b) in enumerate(zip(got, want)):
        for va, vb in zip(a, b):
            np.testing.assert_allclose(va, vb, rtol=1e-4, atol=1e-6, err_msg=f"{name}, step {step + 1}")


@pytest.mark.parametrize("cls", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_optimizer_default_config_matches_keras(real_tf, cls):
    want = getattr(real_tf.keras.optimizers, cls)().get_config()
    got = getattr(tj.keras.optimizers, cls)().get_config()
    want.pop("name"), got.pop("name")
    assert got == want


def test_schedules_match_keras(real_tf):
    def make(tf):
        S = tf.keras.optimizers.schedules
        return [S.ExponentialDecay(0.1, 4, 0.7), S.ExponentialDecay(0.1, 4, 0.7, staircase=True),
                S.PiecewiseConstantDecay([3, 7], [0.3, 0.2, 0.1]),
                S.CosineDecay(0.1, 12, alpha=0.05), S.CosineDecay(0.1, 8, warmup_target=0.3, warmup_steps=4)]

    for s_tf, s_tj in zip(make(real_tf), make(tj)):
        assert s_tj.get_config() == s_tf.get_config()
        want = [float(s_tf(i)) for i in range(25)]
        got = [float(s_tj(i)) for i in range(25)]
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=type(s_tf).__name__)


# ---- losses ----------------------------------------------------------------------------------

P = np.array([[0.0, 0.3, 0.7], [0.2, 0.2, 0.6], [1.0, 0.0, 0.0], [0.5, 0.49, 0.01]], np.float32)
Z = np.array([[2.0, -1.0, 0.5], [0.0, 0.0, 0.0], [-30.0, 40.0, 1.0], [3.0, 3.0, -3.0]], np.float32)
LAB = np.array([0, 2, 1, 1], np.int32)
ONE = np.eye(3, dtype=np.float32)[LAB]
BIN_T = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]], np.float32)
SW = np.array([1.0, 0.5, 0.0, 2.0], np.float32)

LOSS_CASES = [
    ("mse", lambda L: L.MeanSquaredError(), ONE, P, None),
    ("mse_sum_weighted", lambda L: L.MeanSquaredError(reduction="sum"), ONE, Z, SW),
    ("mse_rank_fix", lambda L: L.MeanSquaredError(reduction=None), LAB.astype(np.float32), P[:, :1], None),
    ("bce_probs_clipped", lambda L: L.BinaryCrossentropy(), BIN_T, P, None),
    ("bce_logits", lambda L: L.BinaryCrossentropy(from_logits=True, reduction=None), BIN_T, Z, None),
    ("bce_smoothing", lambda L: L.BinaryCrossentropy(label_smoothing=0.1), BIN_T, P, SW),
    ("cce_probs", lambda L: L.CategoricalCrossentropy(reduction=None), ONE, P, None),
    ("cce_logits_smoothing", lambda L: L.CategoricalCrossentropy(from_logits=True, label_smoothing=0.2), ONE, Z, None),
    ("scce_probs", lambda L: L.SparseCategoricalCrossentropy(reduction=None), LAB, P, None),
    ("scce_logits", lambda L: L.SparseCategoricalCrossentropy(from_logits=True), LAB, Z, SW),
    ("scce_logits_column_labels", lambda L: L.SparseCategoricalCrossentropy(from_logits=True, reduction=None), LAB[:, None], Z, None),
    ("scce_ignore_class", lambda L: L.SparseCategoricalCrossentropy(from_logits=True, ignore_class=2, reduction="sum"), LAB, Z, None),
    ("mean_with_sample_weight", lambda L: L.CategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight"), ONE, Z, SW),
]


def _loss_and_grad(tf, make, y_true, y_pred, sw):
    yp = tf.constant(y_pred)
    with tf.GradientTape() as tape:
        tape.watch(yp)
        loss = make(tf.keras.losses)(tf.constant(y_true), yp, sample_weight=None if sw is None else tf.constant(sw))
    return loss.numpy(), tape.gradient(loss, yp).numpy()


@pytest.mark.parametrize("case", LOSS_CASES, ids=[c[0] for c in LOSS_CASES])
def test_loss_value_and_gradient_match_keras(real_tf, case):
    _, make, y_true, y_pred, sw = case
    want = _loss_and_grad(real_tf, make, y_true, y_pred, sw)
    got = _loss_and_grad(tj, make, y_true, y_pred, sw)
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("activation, loss", [("softmax", "SparseCategoricalCrossentropy"), ("sigmoid", "BinaryCrossentropy")])
def test_keras_activation_outputs_are_scored_from_their_logits(real_tf, activation, loss):
    # Keras recognises a softmax/sigmoid activation's output and computes the loss from its logits.
    def run(tf):
        dense = tf.keras.layers.Dense(3, activation=activation, kernel_initializer="ones", bias_initializer="zeros")
        x = tf.constant(np.array([[20.0, -5.0], [-20.0, 1.0]], np.float32))
        y = tf.constant(LAB[:2]) if activation == "softmax" else tf.constant(BIN_T[:2])
        with tf.GradientTape() as tape:
            out = getattr(tf.keras.losses, loss)()(y, dense(x))
        return out.numpy(), [g.numpy() for g in tape.gradient(out, dense.trainable_variables)]

    want, got = run(real_tf), run(tj)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# ---- metrics, layers -------------------------------------------------------------------------


def test_metrics_match_keras(real_tf):
    def run(tf):
        acc = tf.keras.metrics.SparseCategoricalAccuracy()
        mean = tf.keras.metrics.Mean()
        acc.update_state(LAB, Z)
        acc.update_state(LAB[:, None], P, sample_weight=SW)
        mean.update_state(Z, sample_weight=SW)
        mean.update_state([1.0, 2.0])
        out = [float(acc.result()), float(mean.result())]
        acc.reset_state()
        return out + [float(acc.result()), acc.name, mean.name]

    got, want = run(tj), run(real_tf)
    np.testing.assert_allclose(got[:3], want[:3], rtol=1e-6)
    assert got[3:] == want[3:]


def test_dense_and_sequential_outputs_match_keras(real_tf):
    def run(tf):
        model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(4, activation="relu"),
                                     tf.keras.layers.Dropout(0.5), tf.keras.layers.Dense(2, activation="softmax")])
        model.set_weights([w.astype(np.float32) for w in (
            np.linspace(-1, 1, 12).reshape(3, 4), np.linspace(0, 0.3, 4), np.linspace(1, -1, 8).reshape(4, 2), np.zeros(2))])
        shapes = [tuple(v.shape) for v in model.trainable_variables]
        return model(X).numpy(), shapes, [len(model.variables), len(model.weights), model.count_params()]

    want, got = run(real_tf), run(tj)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[1:] == want[1:]


def test_initializer_statistics_match_keras(real_tf):
    for name in ("glorot_uniform", "he_normal", "glorot_normal", "he_uniform"):
        a = real_tf.keras.initializers.get(name)((300, 200)).numpy()
        b = tj.keras.initializers.get(name)((300, 200)).numpy()
        assert b.std() == pytest.approx(a.std(), rel=0.03), name
        assert np.abs(b).max() == pytest.approx(np.abs(a).max(), rel=0.05), name


def test_seed003_example_matches_keras(real_tf):
    def run(tf):
        inputs = tf.ones((1, 4))
        a = tf.keras.layers.Dense(32)
        b = tf.keras.layers.Dense(32)
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(a.variables)
            result = b(a(inputs))
        return tape.gradient(result, a.variables), [tuple(v.shape) for v in a.variables]

    assert run(tj) == run(real_tf) == ([None, None], [(4, 32), (32,)])
