"""tf.keras layers and models on tapejax: lazy build, initializers, activations, dropout,
variable tracking through attributes, training-flag propagation, and gradients checked
against jax.grad of the same computation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf

layers = tf.keras.layers


def test_dense_builds_on_first_call_with_keras_shapes():
    d = layers.Dense(3, activation="relu")
    assert d.variables == [] and not d.built
    y = d(tf.ones((2, 4)))
    assert d.built and [tuple(v.shape) for v in d.variables] == [(4, 3), (3,)]
    assert d.trainable_variables == [d.kernel, d.bias]
    k, b = d.kernel.numpy(), d.bias.numpy()
    np.testing.assert_allclose(y.numpy(), np.maximum(np.ones((2, 4)) @ k + b, 0), rtol=1e-6)
    # Rank > 2 inputs are multiplied along the last axis.
    assert d(tf.ones((5, 2, 4))).shape == (5, 2, 3)


def test_seed003_unbuilt_layer_variables_are_not_watched():
    # The GradientTape docs' example, with the real tf.keras.layers.Dense.
    inputs = tf.ones((1, 4))
    a = layers.Dense(32)
    b = layers.Dense(32)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(a.variables)  # [] here: `a` is not built yet
        result = b(a(inputs))
    assert len(a.variables) == 2
    assert tape.gradient(result, a.variables) == [None, None]


def test_dense_gradients_match_jax_grad():
    d = layers.Dense(3, activation="tanh", kernel_initializer="he_normal", bias_initializer="ones")
    x = tf.constant(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(d(x) ** 2)
    gk, gb = tape.gradient(loss, d.trainable_variables)

    def f(k, b):
        return jnp.sum(jnp.tanh(x.numpy() @ k + b) ** 2)

    rk, rb = jax.jit(jax.grad(f, argnums=(0, 1)))(d.kernel.numpy(), d.bias.numpy())
    np.testing.assert_allclose(gk.numpy(), rk, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb.numpy(), rb, rtol=1e-5, atol=1e-6)


def test_inputs_are_cast_to_the_layer_dtype_and_shapes_checked():
    d = layers.Dense(2)
    assert d(np.ones((1, 3))).dtype == tf.float32  # float64 NumPy -> float32, as Keras
    assert d(np.ones((1, 3), np.int32)).dtype == tf.float32
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 3"):
        d(tf.ones((1, 4)))
    with pytest.raises(ValueError, match="expected min_ndim=2, found ndim=1"):
        layers.Dense(2)(tf.ones((3,)))


def test_bad_identifiers():
    with pytest.raises(ValueError, match="Could not interpret activation function identifier: nope"):
        layers.Dense(1, activation="nope")
    with pytest.raises(ValueError, match="Could not interpret initializer identifier: nope"):
        layers.Dense(1, kernel_initializer="nope")


@pytest.mark.parametrize(
    "name, ref",
    [
        ("relu", lambda x: np.maximum(x, 0)),
        ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        ("tanh", np.tanh),
        ("softmax", lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
        ("linear", lambda x: x),
        ("elu", lambda x: np.where(x > 0, x, np.exp(x) - 1)),
        ("softplus", lambda x: np.log1p(np.exp(x))),
        ("gelu", lambda x: 0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2)))),
        ("swish", lambda x: x / (1 + np.exp(-x))),
        ("leaky_relu", lambda x: np.where(x > 0, x, 0.2 * x)),
    ],
)
def test_activations_by_name(name, ref):
    x = np.array([[-2.0, -0.5, 0.0, 0.7, 3.0]], np.float32)
    out = tf.keras.activations.get(name)(tf.constant(x))
    np.testing.assert_allclose(out.numpy(), ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_initializer_distributions():
    tf.keras.utils.set_random_seed(0)
    k = tf.keras.initializers.get("glorot_uniform")((200, 300)).numpy()
    limit = np.sqrt(6 / 500)
    assert np.abs(k).max() <= limit and k.std() == pytest.approx(limit / np.sqrt(3), rel=0.02)
    h = tf.keras.initializers.HeNormal()((400, 300)).numpy()
    std = np.sqrt(2 / 400)  # truncated at 2 stddevs of the untruncated normal it is rescaled from
    assert h.std() == pytest.approx(std, rel=0.02) and np.abs(h).max() <= 2 * std / 0.87962566103423978 + 1e-6
    assert not tf.keras.initializers.get("zeros")((3,)).numpy().any()
    seeded = tf.keras.initializers.GlorotUniform(seed=7)
    np.testing.assert_array_equal(seeded((4, 4)).numpy(), seeded((4, 4)).numpy())
    tf.keras.utils.set_random_seed(1)
    a = layers.Dense(4)
    a.build((None, 3))
    tf.keras.utils.set_random_seed(1)
    b = layers.Dense(4)
    b.build((None, 3))
    np.testing.assert_array_equal(a.kernel.numpy(), b.kernel.numpy())


def test_flatten():
    assert layers.Flatten()(tf.ones((2, 3, 4))).shape == (2, 12)
    assert layers.Flatten()(tf.ones((3,))).shape == (3, 1)


def test_dropout_training_flag_and_gradient():
    drop = layers.Dropout(0.5, seed=1)
    x = tf.ones((1000,))
    assert drop(x) is x and drop(x, training=False) is x
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = drop(x, training=True)
        total = tf.reduce_sum(y)
    vals = y.numpy()
    assert set(np.unique(vals).tolist()) == {0.0, 2.0} and 0.4 < (vals == 0).mean() < 0.6
    np.testing.assert_array_equal(tape.gradient(total, x).numpy(), vals)  # the mask, scaled
    assert not np.array_equal(drop(x, training=True).numpy(), vals)  # the state moved on
    assert drop.variables == [drop.seed_generator.state] and drop.weights == []


def test_dropout_draws_a_new_mask_in_every_compiled_call():
    drop = layers.Dropout(0.5, seed=2)

    @tf.function
    def f(x):
        return drop(x, training=True)

    x = tf.ones((64,))
    masks = [f(x).numpy() for _ in range(3)]
    assert not np.array_equal(masks[1], masks[2]) and f.experimental_get_tracing_count() == 1


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = layers.Dense(4, activation="relu")
        self.blocks = [layers.Dense(4), layers.Dense(4)]
        self.heads = {"b": layers.Dense(2), "a": layers.Dense(1)}
        self.scale = tf.Variable(1.0, name="scale")
        self.shift = tf.Variable(0.5, trainable=False, name="shift")
        self.drop = layers.Dropout(0.5)

    def call(self, x, training=False):
        h = self.d1(x)
        for block in self.blocks:
            h = block(h)
        h = self.drop(h)  # no explicit training: inherits the model call's
        return self.heads["a"](h) * self.scale + self.heads["b"](h)[:, :1] + self.shift


def test_model_tracks_layers_in_lists_dicts_and_variables():
    m = Net()
    assert len(m.trainable_variables) == 1  # only `scale` exists before the first call
    m(tf.ones((3, 5)))
    tv = m.trainable_variables
    expected_layers = [m.d1, *m.blocks, m.heads["b"], m.heads["a"]]
    assert tv == [m.scale] + [v for layer in expected_layers for v in (layer.kernel, layer.bias)]
    assert m.non_trainable_variables == [m.shift, m.drop.seed_generator.state]
    assert m.layers == expected_layers + [m.drop]
    m.blocks.append(layers.Dense(4))  # appended later: still tracked (built on the next call)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(m(tf.ones((3, 5))))
    assert len(m.trainable_variables) == len(tv) + 2 and m.trainable_variables[7] is m.blocks[2].kernel
    grads = tape.gradient(loss, m.trainable_variables)
    assert all(g is not None for g in grads)


def test_model_build_creates_the_weights_before_a_call():
    m = Net()
    m.build((None, 5))
    assert m.built and len(m.trainable_variables) == 11 and tuple(m.d1.kernel.shape) == (5, 4)


def test_freezing_a_layer():
    m = Net()
    m(tf.ones((2, 5)))
    n = len(m.trainable_variables)
    m.d1.trainable = False
    assert len(m.trainable_variables) == n - 2 and m.d1.trainable_variables == []
    assert any(v is m.d1.kernel for v in m.non_trainable_variables) and not m.d1.kernel.trainable
    with tf.GradientTape() as tape:  # frozen variables are no longer watched automatically
        y = m.d1(tf.ones((1, 5)))
    assert tape.watched_variables() == ()
    m.d1.trainable = True
    assert len(m.trainable_variables) == n


def test_training_flag_reaches_nested_layers():
    m = Net()
    x = tf.ones((4, 5))
    np.testing.assert_array_equal(m(x).numpy(), m(x).numpy())  # inference: no dropout
    outs = {m(x, training=True).numpy().tobytes() for _ in range(4)}
    assert len(outs) > 1
    seq = tf.keras.Sequential([layers.Dropout(0.9)])
    assert (seq(tf.ones((50,)), training=True).numpy() == 0).any()
    assert (seq(tf.ones((50,))).numpy() == 1).all()


def test_forgetting_super_init():
    class Bad(tf.keras.Model):
        def __init__(self):
            self.d = layers.Dense(1)

    with pytest.raises(RuntimeError, match=r"forgot to call `super\(\).__init__\(\)`"):
        Bad()


def test_sequential_build_and_names():
    tf.keras.backend.clear_session()
    seq = tf.keras.Sequential([tf.keras.Input(shape=(4,)), layers.Dense(3, activation="relu"), layers.Dense(2)])
    assert seq.built and [tuple(v.shape) for v in seq.variables] == [(4, 3), (3,), (3, 2), (2,)]
    assert [layer.name for layer in seq.layers] == ["dense", "dense_1"] and seq.name == "sequential"
    with pytest.warns(UserWarning, match="Do not pass an `input_shape`"):
        seq2 = tf.keras.Sequential([layers.Dense(3, input_shape=(5,))])
    assert tuple(seq2.weights[0].shape) == (5, 3)
    seq.add(layers.Dense(1))
    assert seq(tf.ones((2, 4))).shape == (2, 1)
    seq.pop()
    assert seq(tf.ones((2, 4))).shape == (2, 2)
    assert seq.count_params() == 4 * 3 + 3 + 3 * 2 + 2
    w = seq.get_weights()
    seq.set_weights([np.zeros_like(a) for a in w])
    assert not seq(tf.ones((1, 4))).numpy().any()
    with pytest.raises(NotImplementedError, match="functional API"):
        tf.keras.Model(tf.keras.Input(shape=(2,)), None)


def test_custom_layer_with_add_weight():
    class Scale(layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")
            self.count = self.add_weight(shape=(), initializer="zeros", trainable=False, name="count")

        def call(self, x):
            self.count.assign_add(1.0)
            return x * self.w

    s = Scale()
    s(tf.ones((2, 3)))
    assert s.trainable_variables == [s.w] and s.non_trainable_variables == [s.count]
    assert s.variables == [s.w, s.count] and float(s.count) == 1.0
