"""tf.keras layers on the tape: every layer of issue 16's list differentiated by the tape and
by jax.grad of the same layer's ``stateless_call`` (Keras's own pure function), second order,
compiled steps, forward mode, jacobians, state updates, user layers mixed with built-in ones."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf

L = tf.keras.layers
RNG = np.random.default_rng(0)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# (id, constructor, positional args (np arrays, lists of them), call kwargs)
CASES = [
    ("Dense", lambda: L.Dense(3, activation="tanh"), (_x(2, 4),), {}),
    ("Conv1D", lambda: L.Conv1D(3, 2), (_x(2, 6, 2),), {}),
    ("Conv2D", lambda: L.Conv2D(3, 3, padding="same"), (_x(2, 5, 5, 2),), {}),
    ("Conv3D", lambda: L.Conv3D(2, 2), (_x(1, 4, 4, 4, 2),), {}),
    ("Conv2DTranspose", lambda: L.Conv2DTranspose(3, 3, strides=2), (_x(2, 4, 4, 2),), {}),
    ("DepthwiseConv2D", lambda: L.DepthwiseConv2D(3), (_x(2, 5, 5, 2),), {}),
    ("SeparableConv2D", lambda: L.SeparableConv2D(3, 3), (_x(2, 5, 5, 2),), {}),
    ("MaxPooling2D", lambda: L.MaxPooling2D(), (_x(2, 4, 4, 2),), {}),
    ("AveragePooling2D", lambda: L.AveragePooling2D(2), (_x(2, 4, 4, 2),), {}),
    ("MaxPooling1D", lambda: L.MaxPooling1D(), (_x(2, 4, 2),), {}),
    ("GlobalAveragePooling2D", lambda: L.GlobalAveragePooling2D(), (_x(2, 4, 4, 2),), {}),
    ("GlobalMaxPooling2D", lambda: L.GlobalMaxPooling2D(), (_x(2, 4, 4, 2),), {}),
    ("BatchNormalization-train", lambda: L.BatchNormalization(), (_x(4, 3),), {"training": True}),
    ("BatchNormalization-infer", lambda: L.BatchNormalization(), (_x(4, 3),), {"training": False}),
    ("LayerNormalization", lambda: L.LayerNormalization(), (_x(2, 4),), {}),
    ("GroupNormalization", lambda: L.GroupNormalization(groups=2), (_x(2, 3, 4),), {}),
    ("Dropout-train", lambda: L.Dropout(0.5, seed=1), (_x(3, 4),), {"training": True}),
    ("LSTM", lambda: L.LSTM(3, return_sequences=True), (_x(2, 4, 3),), {}),
    ("GRU", lambda: L.GRU(3), (_x(2, 4, 3),), {}),
    ("SimpleRNN", lambda: L.SimpleRNN(3, return_sequences=True), (_x(2, 4, 3),), {}),
    ("MultiHeadAttention", lambda: L.MultiHeadAttention(2, 3), (_x(2, 4, 5), _x(2, 3, 5)), {}),
    ("Reshape", lambda: L.Reshape((4, 2)), (_x(2, 8),), {}),
    ("Flatten", lambda: L.Flatten(), (_x(2, 3, 2),), {}),
    ("Permute", lambda: L.Permute((2, 1)), (_x(2, 3, 4),), {}),
    ("RepeatVector", lambda: L.RepeatVector(3), (_x(2, 4),), {}),
    ("Concatenate", lambda: L.Concatenate(), ([_x(2, 3), _x(2, 2)],), {}),
    ("Add", lambda: L.Add(), ([_x(2, 3), _x(2, 3)],), {}),
    ("Multiply", lambda: L.Multiply(), ([_x(2, 3), _x(2, 3)],), {}),
    ("ZeroPadding2D", lambda: L.ZeroPadding2D(1), (_x(2, 3, 3, 2),), {}),
    ("UpSampling2D", lambda: L.UpSampling2D(2), (_x(2, 3, 3, 2),), {}),
    ("Cropping2D", lambda: L.Cropping2D(1), (_x(2, 4, 4, 2),), {}),
    ("LeakyReLU", lambda: L.LeakyReLU(0.2), (_x(2, 5),), {}),
    ("ReLU", lambda: L.ReLU(), (_x(2, 5),), {}),
    ("PReLU", lambda: L.PReLU(alpha_initializer=tf.keras.initializers.Constant(0.3)), (_x(2, 5),), {}),
    ("Softmax", lambda: L.Softmax(), (_x(2, 5),), {}),
    ("Lambda", lambda: L.Lambda(lambda t: tf.sin(t) * 2.0), (_x(2, 5),), {}),
    ("Rescaling", lambda: L.Rescaling(1 / 255.0, offset=0.5), (_x(2, 5),), {}),
    ("Normalization", lambda: L.Normalization(mean=[0.5, 1.0], variance=[4.0, 0.25]), (_x(3, 2),), {}),
]


def _tensors(args):
    return jax.tree_util.tree_map(tf.constant, args)


def _reference(layer, tv, ntv, args, kwargs, r):
    """jax.grad of sum(r * out) through Keras's own pure function of the layer."""

    def f(tv, args):
        out, _ = layer.stateless_call(tv, ntv, *args, **kwargs)
        return jnp.sum(out * r)

    return jax.grad(f, argnums=(0, 1))(tv, args)


# The default run checks one layer of each kind; the whole list runs under `slow` (about a minute).
_CORE = {"Dense", "Conv2D", "Conv2DTranspose", "BatchNormalization-train", "Dropout-train", "LSTM",
         "MultiHeadAttention", "Concatenate", "Lambda", "PReLU"}


@pytest.mark.parametrize("name,make,args,kwargs", [
    pytest.param(*c, id=c[0], marks=() if c[0] in _CORE else pytest.mark.slow) for c in CASES])
def test_layer_gradients_match_jax_grad_of_stateless_call(name, make, args, kwargs):
    layer = make()
    layer(*_tensors(args), **kwargs)  # build (and a first state update)
    tv = [np.asarray(v.numpy()) for v in layer.trainable_variables]
    ntv = [np.asarray(v.numpy()) for v in layer.non_trainable_variables]
    xs = _tensors(args)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(jax.tree_util.tree_leaves(xs, is_leaf=lambda t: isinstance(t, tf.Tensor)))
        out = layer(*xs, **kwargs)
    r = RNG.standard_normal(out.shape).astype(np.float32)
    with tape:
        loss = tf.reduce_sum(out * r)
    g_vars = tape.gradient(loss, layer.trainable_variables)
    g_x = tape.gradient(loss, xs)
    ref_v, ref_x = _reference(layer, tv, ntv, args, {k: v for k, v in kwargs.items() if k != "training"} | (
        {"training": kwargs["training"]} if "training" in kwargs else {}), r)
    for got, want in zip(g_vars, ref_v):
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=2e-6)
    for got, want in zip(jax.tree_util.tree_leaves(g_x, is_leaf=lambda t: isinstance(t, tf.Tensor)), jax.tree_util.tree_leaves(ref_x)):
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=2e-6)
    assert isinstance(out, tf.Tensor)


def test_embedding_gradient_is_for_the_rows_used():
    emb = L.Embedding(5, 2)
    ids = tf.constant([[0, 2, 2]])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(emb(ids))
    (g,) = tape.gradient(y, emb.trainable_variables)
    np.testing.assert_allclose(np.asarray(g), [[1, 1], [0, 0], [2, 2], [0, 0], [0, 0]])


def test_built_in_layer_call_is_one_op_and_second_order_works():
    conv = L.Conv2D(2, 3, activation="tanh")
    x = tf.Variable(_x(2, 5, 5, 1))
    conv(x)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = tf.reduce_sum(conv(x) ** 2)
        gx = inner.gradient(y, x)
        penalty = tf.reduce_sum(gx ** 2)
    g2 = outer.gradient(penalty, conv.trainable_variables)
    k0, b0 = (np.asarray(v.numpy()) for v in conv.trainable_variables)

    def pen(k, b):
        def y(xv):
            out, _ = conv.stateless_call([k, b], [], xv)
            return jnp.sum(out ** 2)

        return jnp.sum(jax.grad(y)(np.asarray(x.numpy())) ** 2)

    ref = jax.grad(pen, argnums=(0, 1))(k0, b0)
    for got, want in zip(g2, ref):
        # (float32 sums of products up to about 8: an element that cancels to near zero
        # carries rounding of the largest terms, so the absolute bound scales with them)
        scale = float(np.max(np.abs(want)))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=max(1e-6, 1e-6 * scale))


def test_compiled_step_matches_eager_and_updates_batchnorm_statistics():
    model = tf.keras.Sequential([L.Conv2D(3, 3), L.BatchNormalization(), L.Flatten(), L.Dense(1)])
    x = tf.constant(_x(4, 6, 6, 1))
    model(x)

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x, training=True) ** 2)
        return loss, tape.gradient(loss, model.trainable_variables)

    before = [v.numpy() for v in model.non_trainable_variables]
    le, ge = step(x)
    eager_after = [v.numpy() for v in model.non_trainable_variables]
    for v, b in zip(model.non_trainable_variables, before):
        v.assign(b)
    lc, gc = tf.function(step)(x)
    np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-5)
    # The conv bias's gradient is zero in exact arithmetic (batch normalization removes the bias),
    # so both runs give float32 rounding noise there: an absolute tolerance at float32 rounding of
    # the largest gradient (a fused program, like lazy mode's compiled step, rounds differently).
    scale = max(float(np.abs(g.numpy()).max()) for g in ge)
    for a, b in zip(gc, ge):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=max(1e-6, 1e-5 * scale))
    for v, want, old in zip(model.non_trainable_variables, eager_after, before):
        np.testing.assert_allclose(v.numpy(), want, rtol=1e-5, atol=1e-7)
        assert not np.allclose(want, old)  # the moving statistics moved


def test_dropout_draws_a_fresh_mask_per_call_eager_and_compiled():
    drop = L.Dropout(0.5, seed=3)
    x = tf.ones((4, 8))
    a, b = drop(x, training=True), drop(x, training=True)
    assert not np.array_equal(a.numpy(), b.numpy())
    f = tf.function(lambda x: drop(x, training=True))
    c, d = f(x), f(x)
    assert not np.array_equal(c.numpy(), d.numpy())
    np.testing.assert_array_equal(drop(x).numpy(), x.numpy())  # inference: identity


def test_forward_accumulator_and_jacobian_through_a_layer():
    dense = L.Dense(2)
    x = tf.constant(_x(1, 3))
    dense(x)
    k = np.asarray(dense.trainable_variables[0].numpy())
    t = tf.constant(_x(1, 3))
    with tf.autodiff.ForwardAccumulator(x, t) as acc:
        y = dense(x)
    np.testing.assert_allclose(acc.jvp(y).numpy(), t.numpy() @ k, rtol=1e-5)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = dense(x)
    np.testing.assert_allclose(tape.jacobian(y, x).numpy()[0, :, 0, :], k.T, rtol=1e-6)


def test_user_layer_with_add_weight_mixed_with_built_in_layers():
    class Scale(L.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

        def call(self, x):
            return x * self.w + tf.sin(x)

    model = tf.keras.Sequential([tf.keras.Input((2,)), Scale(), L.Dense(1, kernel_initializer="ones")])
    x = tf.constant([[1.0, 2.0]])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(model(x))
    gw, gk, gb = tape.gradient(y, model.trainable_variables)
    np.testing.assert_allclose(gw.numpy(), [1.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(gk.numpy().ravel(), 1.0 * np.array([1.0, 2.0]) + np.sin([1.0, 2.0]), rtol=1e-6)
    np.testing.assert_allclose(gb.numpy(), [1.0])
    assert isinstance(model.layers[0].w, tf.Variable)


def test_user_model_training_flag_reaches_dropout_and_trainable_false_freezes():
    class Net(tf.keras.Model):
        def __init__(self):
            super().__init__()
            # Ones: the relu units are active whatever the random state (random weights could
            # switch them all off and make inference equal training).
            self.d1 = L.Dense(4, activation=tf.nn.relu, kernel_initializer="ones")
            self.drop = L.Dropout(0.999, seed=0)
            self.d2 = L.Dense(1, kernel_initializer="ones")

        def call(self, x, training=False):
            return self.d2(self.drop(self.d1(x), training=training))

    net = Net()
    x = tf.ones((2, 3))
    infer = net(x).numpy()
    train = net(x, training=True).numpy()
    assert not np.allclose(infer, train)
    assert len(net.trainable_variables) == 4
    net.d1.trainable = False
    assert len(net.trainable_variables) == 2 and len(net.non_trainable_variables) >= 2
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(net(x))
    assert all(g is not None for g in tape.gradient(y, net.trainable_variables))


def test_functional_api_multiple_inputs_and_outputs():
    a, b = tf.keras.Input((3,), name="a"), tf.keras.Input((2,), name="b")
    h = L.Concatenate()([L.Dense(4)(a), b])
    out1, out2 = L.Dense(1, name="o1")(h), L.Dense(2, name="o2")(h)
    model = tf.keras.Model([a, b], [out1, out2])
    assert isinstance(model, tf.keras.Model)
    assert model.output_shape == [(None, 1), (None, 2)]
    xa, xb = tf.constant(_x(5, 3)), tf.constant(_x(5, 2))
    with tf.GradientTape() as tape:
        y1, y2 = model([xa, xb])
        loss = tf.reduce_sum(y1) + tf.reduce_sum(y2 ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    assert len(grads) == 6 and all(g is not None for g in grads)
    p1, p2 = model.predict([xa.numpy(), xb.numpy()], verbose=0)
    np.testing.assert_allclose(p1, y1.numpy(), rtol=1e-5)
    np.testing.assert_allclose(p2, y2.numpy(), rtol=1e-5)


def test_summary_and_output_shape():
    model = tf.keras.Sequential([tf.keras.Input((8, 8, 1)), L.Conv2D(4, 3), L.GlobalAveragePooling2D(), L.Dense(2)])
    assert model.output_shape == (None, 2)
    lines = []
    model.summary(print_fn=lambda s, **k: lines.append(s))
    text = "\n".join(lines)
    assert "(None, 6, 6, 4)" in text and "Total params: 50" in text


def test_layer_weights_are_tf_variable_views_of_the_keras_variables():
    d = L.Dense(2, kernel_initializer="ones")
    d.build((None, 3))
    m = d.trainable_variables[0]
    assert isinstance(m, tf.Variable) and d.kernel is m and m.path == f"{d.name}/kernel"
    assert type(m.keras_variable).__name__ == "Variable" and m.keras_variable is d._kernel  # Keras's own
    m.assign(tf.fill((3, 2), 2.0))
    np.testing.assert_array_equal(np.asarray(d._kernel.value), np.full((3, 2), 2.0))  # one storage
    x = tf.ones((1, 3))
    with tf.GradientTape() as tape:  # a weight attribute is on the tape, read directly or by the layer
        y = tf.reduce_sum(d(x)) + tf.nn.l2_loss(d.kernel)
    np.testing.assert_allclose(tape.gradient(y, d.kernel).numpy(), np.full((3, 2), 1.0 + 2.0))
    bn = L.BatchNormalization()
    bn(tf.ones((2, 3)), training=True)
    assert isinstance(bn.moving_mean, tf.Variable) and not bn.moving_mean.trainable
    np.testing.assert_allclose(bn.moving_mean.numpy(), np.full(3, 0.01), rtol=1e-6)


def test_import_tapejax_does_not_import_keras_and_other_backend_is_an_import_error(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    code = "import sys, tapejax; assert 'keras' not in sys.modules; tapejax.keras.layers.Dense; print(sys.modules['keras'].backend.backend())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "jax"
    code = ("import os; os.environ['KERAS_BACKEND'] = 'numpy'; import keras, tapejax\n"
            "try:\n    tapejax.keras\nexcept ImportError as e:\n    print('ImportError', 'numpy' in str(e))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ImportError True", out.stderr


def test_set_floatx_float64_needs_x64():
    with pytest.raises(TypeError, match="64-bit mode"):
        tf.keras.backend.set_floatx("float64")
    assert tf.keras.backend.floatx() == "float32"


def test_tapejax_callables_as_activations_by_keyword_or_position():
    x = tf.Variable([[-1.0, 2.0]])
    cases = [
        (L.Activation(tf.nn.relu), 2.0, [[0.0, 1.0]]),
        (L.Dense(2, tf.nn.relu, kernel_initializer="ones"), 2.0, [[2.0, 2.0]]),
        (L.Dense(2, activation=lambda t: tf.square(t), kernel_initializer="ones"), 2.0, [[4.0, 4.0]]),
        (L.Dense(2, activation=tf.keras.activations.relu, kernel_initializer="ones"), 2.0, [[2.0, 2.0]]),
    ]
    for layer, value, grad in cases:
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(layer(x))
        assert float(y) == value
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), grad)
    assert cases[3][0].get_config()["activation"] == "relu"  # Keras's own function: saved by name


def test_keras_masks_travel_with_tensors_between_separate_layer_calls():
    emb, lstm = L.Embedding(6, 3, mask_zero=True), L.LSTM(2)
    seq = tf.keras.Sequential([emb, lstm])  # one op: Keras passes the mask inside
    ids = tf.constant([[1, 2, 0, 0], [3, 0, 0, 0]])
    whole = seq(ids).numpy()
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(lstm(emb(ids)))  # two ops: the mask rides on the tensor
    np.testing.assert_allclose(tf.reduce_sum(tf.constant(whole)).numpy(), y.numpy(), rtol=1e-6)
    assert all(g is not None for g in tape.gradient(y, seq.trainable_variables))
    unmasked = lstm(tf.constant(emb(ids).numpy()))  # a fresh tensor has no mask
    assert not np.allclose(unmasked.numpy(), whole)


def test_mixed_precision_policy():
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        dense = L.Dense(2)
        x = tf.ones((2, 3))
        with tf.GradientTape() as tape:
            y = dense(x)
            loss = tf.reduce_sum(tf.cast(y, tf.float32))
        grads = tape.gradient(loss, dense.trainable_variables)
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")
    assert y.dtype == tf.float16
    assert [v.dtype for v in dense.trainable_variables] == [tf.float32, tf.float32]
    assert [g.dtype for g in grads] == [tf.float32, tf.float32]
    np.testing.assert_allclose(grads[0].numpy(), np.full((3, 2), 2.0))


def test_keras_ops_in_a_user_layer_are_on_the_tape():
    class MyDense(L.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], 2), initializer="ones")

        def call(self, x):
            return tf.keras.ops.relu(tf.keras.ops.matmul(x, self.w))

    layer = MyDense()
    x = tf.constant([[1.0, -2.0, 3.0]])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(layer(x))
    assert float(y) == 4.0
    np.testing.assert_allclose(tape.gradient(y, layer.w).numpy(), [[1.0, 1.0], [-2.0, -2.0], [3.0, 3.0]])
    np.testing.assert_allclose(tf.keras.ops.nn.softmax(tf.constant([1.0, 1.0])).numpy(), [0.5, 0.5])
