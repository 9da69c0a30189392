"""tf.keras losses and metrics on tapejax: Keras 3's formulas, clipping, rank rules and
reductions (NumPy references), gradients against jax.grad, and metric state."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf

losses = tf.keras.losses
EPS = 1e-7

LOGITS = np.array([[2.0, -1.0, 0.5], [0.0, 0.0, 0.0], [-3.0, 4.0, 1.0], [30.0, -30.0, 0.0]], np.float32)
LABELS = np.array([0, 2, 1, 1], np.int32)
ONEHOT = np.eye(3, dtype=np.float32)[LABELS]


def np_log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def test_mse_reductions_and_rank_rule():
    y_true = np.array([1.0, 2.0, 3.0], np.float32)
    y_pred = np.array([[1.5], [2.0], [2.0]], np.float32)  # (3, 1) against (3,): squeezed, not broadcast
    per = np.array([0.25, 0.0, 1.0])
    assert float(losses.MeanSquaredError()(y_true, y_pred)) == pytest.approx(per.mean())
    assert float(losses.MeanSquaredError(reduction="sum")(y_true, y_pred)) == pytest.approx(per.sum())
    np.testing.assert_allclose(losses.MeanSquaredError(reduction=None)(y_true, y_pred).numpy(), per)
    sw = np.array([1.0, 0.0, 2.0], np.float32)
    assert float(losses.MeanSquaredError()(y_true, y_pred, sample_weight=sw)) == pytest.approx((per * sw).sum() / 3)
    assert float(losses.MeanSquaredError(reduction="mean_with_sample_weight")(y_true, y_pred, sample_weight=sw)) == (
        pytest.approx((per * sw).sum() / 3.0)
    )
    np.testing.assert_allclose(losses.mse(np.ones((2, 4), np.float32), np.zeros((2, 4), np.float32)).numpy(), [1.0, 1.0])
    with pytest.raises(ValueError, match="Invalid value for argument `reduction`"):
        losses.MeanSquaredError(reduction="avg")


def test_binary_crossentropy_clips_probabilities_and_averages_the_last_axis():
    y = np.array([[1.0, 0.0], [1.0, 1.0]], np.float32)
    p = np.array([[1.0, 0.0], [0.0, 0.7]], np.float32)  # exact 0/1 probabilities: clipped to [eps, 1 - eps]
    pc = np.clip(p, np.float32(EPS), np.float32(1 - EPS))  # float32, as the clip runs (1 - pc is not 1e-7)
    per = (-(y * np.log(pc) + (1 - y) * np.log(1 - pc))).mean(-1)
    np.testing.assert_allclose(losses.BinaryCrossentropy(reduction="none")(y, p).numpy(), per, rtol=1e-4, atol=1e-6)
    assert float(losses.BinaryCrossentropy()(y, p)) == pytest.approx(per.mean(), rel=1e-4)
    smooth = y * 0.8 + 0.1
    per_s = (-(smooth * np.log(pc) + (1 - smooth) * np.log(1 - pc))).mean(-1)
    assert float(losses.BinaryCrossentropy(label_smoothing=0.2)(y, p)) == pytest.approx(per_s.mean(), rel=1e-4)


def test_binary_crossentropy_from_logits_value_and_gradient_at_zero():
    y = tf.constant([[1.0, 0.0, 1.0, 0.0]])
    x = tf.constant([[0.0, 0.0, 40.0, -3.0]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = losses.BinaryCrossentropy(from_logits=True)(y, x)
    ref = lambda x: jnp.mean(jnp.logaddexp(0.0, x) - x * y.numpy())  # noqa: E731
    assert float(loss) == pytest.approx(float(ref(x.numpy())), rel=1e-6)
    # d/dx = (sigmoid(x) - y) / n, also at x = 0 exactly (a kink of TF's stable formula).
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), jax.jit(jax.grad(ref))(x.numpy()), rtol=1e-6, atol=1e-8)


def test_categorical_crossentropy_renormalises_then_clips():
    p = np.array([[2.0, 1.0, 1.0], [0.0, 1.0, 0.0]], np.float32)  # not normalised; an exact zero
    y = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]], np.float32)
    q = np.clip(p / p.sum(-1, keepdims=True), EPS, 1 - EPS)
    per = -(y * np.log(q)).sum(-1)
    np.testing.assert_allclose(losses.categorical_crossentropy(y, p).numpy(), per, rtol=1e-5)
    ls = y * 0.9 + 0.1 / 3
    np.testing.assert_allclose(losses.categorical_crossentropy(y, p, label_smoothing=0.1).numpy(), -(ls * np.log(q)).sum(-1), rtol=1e-5)


def test_crossentropies_from_logits_match_log_softmax():
    ref = -(ONEHOT * np_log_softmax(LOGITS)).sum(-1)
    cce = losses.CategoricalCrossentropy(from_logits=True, reduction=None)(ONEHOT, LOGITS)
    scce = losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)(LABELS, LOGITS)
    scce_col = losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)(LABELS[:, None], LOGITS)
    for out in (cce, scce, scce_col):
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)


def test_sparse_crossentropy_from_probabilities_follows_keras():
    p = np.array([[0.0, 0.3, 0.7], [0.2, 0.2, 0.6]], np.float32)
    q = np.clip(p.astype(np.float64), EPS, 1 - EPS)
    # Keras's TF backend: logs of clipped probabilities into a sparse softmax cross-entropy.
    ref = -np_log_softmax(np.log(q))[np.arange(2), [0, 2]]
    np.testing.assert_allclose(losses.sparse_categorical_crossentropy(np.array([0, 2]), p).numpy(), ref, rtol=1e-5)
    ig = losses.SparseCategoricalCrossentropy(ignore_class=0, reduction=None)(np.array([0, 2]), p)
    np.testing.assert_allclose(ig.numpy(), [0.0, ref[1]], rtol=1e-5)


def test_softmax_output_uses_its_logits_like_keras():
    # A saturated softmax: probabilities would clip at 1e-7, the logits give the exact loss.
    dense = tf.keras.layers.Dense(3, activation="softmax", kernel_initializer="zeros", bias_initializer="zeros")
    dense(tf.ones((1, 2)))
    dense.trainable_variables[1].assign([40.0, 0.0, 0.0])
    x = tf.ones((1, 2))
    with tf.GradientTape() as tape:
        probs = dense(x)
        loss = losses.SparseCategoricalCrossentropy()(tf.constant([1]), probs)
    assert float(loss) == pytest.approx(40.0, rel=1e-5)  # clipping would give -log(1e-7) = 16.1
    g = tape.gradient(loss, dense.trainable_variables[1]).numpy()
    np.testing.assert_allclose(g, [1.0, -1.0, 0.0], atol=1e-6)  # softmax(logits) - onehot
    with pytest.warns(UserWarning, match="received `from_logits=True`"):
        losses.CategoricalCrossentropy(from_logits=True)(tf.constant([[0.0, 1.0, 0.0]]), probs)
    sig = tf.keras.activations.sigmoid(tf.constant([[-50.0]]))
    assert float(losses.BinaryCrossentropy()(tf.constant([[1.0]]), sig)) == pytest.approx(50.0, rel=1e-5)


def test_loss_gradients_match_jax_grad():
    x = tf.constant(LOGITS)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        probs = tf.sigmoid(x)  # not a Keras activation: no logits link, the clipping path
        l1 = losses.SparseCategoricalCrossentropy(from_logits=True)(LABELS, x)
        l2 = losses.CategoricalCrossentropy()(ONEHOT, probs)
        l3 = losses.MeanSquaredError()(ONEHOT, x)
    r1 = jax.jit(jax.grad(lambda z: -jnp.mean(jnp.sum(ONEHOT * jax.nn.log_softmax(z), -1))))(LOGITS)

    def cce(z):
        p = jax.nn.sigmoid(z)
        p = jnp.clip(p / p.sum(-1, keepdims=True), EPS, 1 - EPS)
        return -jnp.mean(jnp.sum(ONEHOT * jnp.log(p), -1))

    r3 = jax.jit(jax.grad(lambda z: jnp.mean((ONEHOT - z) ** 2)))(LOGITS)
    np.testing.assert_allclose(tape.gradient(l1, x).numpy(), r1, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(tape.gradient(l2, x).numpy(), jax.jit(jax.grad(cce))(LOGITS), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(tape.gradient(l3, x).numpy(), r3, rtol=1e-5, atol=1e-7)


def test_losses_get():
    assert losses.get("mse") is losses.mse
    assert isinstance(losses.get("BinaryCrossentropy"), losses.BinaryCrossentropy)
    cfg = losses.SparseCategoricalCrossentropy(from_logits=True).get_config()
    assert cfg == {"name": "sparse_categorical_crossentropy", "reduction": "sum_over_batch_size", "from_logits": True,
                   "ignore_class": None}


# ---- metrics ---------------------------------------------------------------------------------


def test_mean_metric():
    m = tf.keras.metrics.Mean()
    assert float(m.result()) == 0.0  # nothing seen yet: divide_no_nan
    m.update_state([1.0, 3.0])
    m.update_state(5.0)
    assert float(m.result()) == 3.0 and m.name == "mean"
    m.update_state([[2.0, 4.0]], sample_weight=[3.0])  # per-sample mean 3, weight 3
    assert float(m.result()) == pytest.approx((1 + 3 + 5 + 9) / 6)
    m.reset_state()
    assert float(m.result()) == 0.0 and [float(v) for v in m.variables] == [0.0, 0.0]


def test_sparse_categorical_accuracy():
    acc = tf.keras.metrics.SparseCategoricalAccuracy()
    assert float(acc(LABELS, LOGITS)) == pytest.approx(np.mean(LOGITS.argmax(-1) == LABELS))
    acc.update_state(LABELS[:, None].astype(np.float32), LOGITS, sample_weight=[0.0, 0.0, 0.0, 1.0])
    hits = (LOGITS.argmax(-1) == LABELS).astype(float)
    assert float(acc.result()) == pytest.approx((hits.sum() + hits[3]) / 5)
    assert acc.name == "sparse_categorical_accuracy"


def test_metrics_accumulate_inside_a_compiled_step():
    acc = tf.keras.metrics.SparseCategoricalAccuracy()
    mean = tf.keras.metrics.Mean()

    @tf.function
    def step(y, logits):
        acc.update_state(y, logits)
        mean.update_state(tf.reduce_max(logits, axis=-1))

    for _ in range(3):
        step(tf.constant(LABELS), tf.constant(LOGITS))
    assert float(acc.result()) == pytest.approx(np.mean(LOGITS.argmax(-1) == LABELS))
    assert float(mean.result()) == pytest.approx(LOGITS.max(-1).mean()) and float(mean.count) == 12.0
