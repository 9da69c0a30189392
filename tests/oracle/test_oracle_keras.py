"""tapejax.keras against real TF 2.21's tf.keras: the same code on the same data.

TF's side runs in one subprocess per module (tests/oracle/_tf_side.py: one
process holds one Keras backend), calling this module's job functions with
``tf`` the real TensorFlow; the tests call the same functions with tapejax.
Optimizers run 20 steps of a small regression and must agree at every step;
losses, metrics, schedules and configs value for value; each layer of issue
16's list forward and backward with weights copied across; a small ``fit``
reaches the same loss curve; a DCGAN two-tape step, a WGAN-GP gradient
penalty and a second-order MAML step match.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapejax as tj
from _tf_side import result, run_tf_jobs

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 3)).astype(np.float32)
Y = RNG.normal(size=(8, 2)).astype(np.float32)
W0 = RNG.normal(size=(3, 2)).astype(np.float32)
B0 = RNG.normal(size=(2,)).astype(np.float32)


def train_opt(tf, name, steps=20, skip_c=False):
    """20 steps on mean((X w + b - Y)^2) + 0.5 c^2; with skip_c, c gets no gradient on odd steps."""
    w, b, c = tf.Variable(W0), tf.Variable(B0), tf.Variable(np.float32(0.7))
    opt = OPTIMIZERS[name](tf)
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



LOSS_BY_ID = {c[0]: c for c in LOSS_CASES}


def loss_case(tf, case_id):
    _, make, y_true, y_pred, sw = LOSS_BY_ID[case_id]
    return _loss_and_grad(tf, make, y_true, y_pred, sw)


def opt_config(tf, cls):
    cfg = getattr(tf.keras.optimizers, cls)().get_config()
    cfg.pop("name")
    return cfg


def schedules(tf):
    S = tf.keras.optimizers.schedules
    made = [S.ExponentialDecay(0.1, 4, 0.7), S.ExponentialDecay(0.1, 4, 0.7, staircase=True),
            S.PiecewiseConstantDecay([3, 7], [0.3, 0.2, 0.1]),
            S.CosineDecay(0.1, 12, alpha=0.05), S.CosineDecay(0.1, 8, warmup_target=0.3, warmup_steps=4)]
    return [(s.get_config(), [float(s(i)) for i in range(25)]) for s in made]


def activation_logits(tf, activation, loss):
    # Keras recognises a softmax/sigmoid activation's output and computes the loss from its logits.
    dense = tf.keras.layers.Dense(3, activation=activation, kernel_initializer="ones", bias_initializer="zeros")
    x = tf.constant(np.array([[20.0, -5.0], [-20.0, 1.0]], np.float32))
    y = tf.constant(LAB[:2]) if activation == "softmax" else tf.constant(BIN_T[:2])
    with tf.GradientTape() as tape:
        out = getattr(tf.keras.losses, loss)()(y, dense(x))
    return out.numpy(), [g.numpy() for g in tape.gradient(out, dense.trainable_variables)]


def metrics(tf):
    acc = tf.keras.metrics.SparseCategoricalAccuracy()
    mean = tf.keras.metrics.Mean()
    acc.update_state(LAB, Z)
    acc.update_state(LAB[:, None], P, sample_weight=SW)
    mean.update_state(Z, sample_weight=SW)
    mean.update_state([1.0, 2.0])
    out = [float(acc.result()), float(mean.result())]
    acc.reset_state()
    # Accuracy averages over elements across updates (4 then 2 elements: 5/6).
    a = tf.keras.metrics.Accuracy()
    a.update_state([1, 2, 3, 4], [0, 2, 3, 4])
    a.update_state([1, 2], [1, 2])
    b = tf.keras.metrics.BinaryAccuracy()
    b.update_state([[1.0], [0.0], [1.0], [1.0]], [[0.9], [0.2], [0.3], [0.8]])
    b.update_state([[0.0], [1.0]], [[0.1], [0.7]])
    return out + [float(acc.result()), acc.name, mean.name, float(a.result()), float(b.result())]


def dense_seq(tf):
    model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(4, activation="relu"),
                                 tf.keras.layers.Dropout(0.5), tf.keras.layers.Dense(2, activation="softmax")])
    model.set_weights([w.astype(np.float32) for w in (
        np.linspace(-1, 1, 12).reshape(3, 4), np.linspace(0, 0.3, 4), np.linspace(1, -1, 8).reshape(4, 2), np.zeros(2))])
    shapes = [tuple(v.shape) for v in model.trainable_variables]
    return model(X).numpy(), shapes, [len(model.variables), len(model.weights), model.count_params()]


def init_stats(tf):
    out = {}
    for name in ("glorot_uniform", "he_normal", "glorot_normal", "he_uniform"):
        a = np.asarray(tf.keras.initializers.get(name)((300, 200)))
        out[name] = (float(a.std()), float(np.abs(a).max()))
    return out


def seed003(tf):
    inputs = tf.ones((1, 4))
    a = tf.keras.layers.Dense(32)
    b = tf.keras.layers.Dense(32)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(a.variables)
        result = b(a(inputs))
    return tape.gradient(result, a.variables), [tuple(v.shape) for v in a.variables]


def int_variable_to_optimizer(tf):
    v = tf.Variable(3)
    tf.keras.optimizers.Adam(0.1).apply_gradients([(tf.constant(1.0), v)])


# ---- layers: forward and gradients with weights copied across --------------------------------


def _x(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


# (id, class name, config, positional inputs, call kwargs)
LAYER_CASES = [
    ("Dense", "Dense", dict(units=3, activation="tanh"), (_x(2, 4),), {}),
    ("Conv1D", "Conv1D", dict(filters=3, kernel_size=2, strides=2), (_x(2, 6, 2),), {}),
    ("Conv2D", "Conv2D", dict(filters=3, kernel_size=3, padding="same"), (_x(2, 5, 5, 2),), {}),
    ("Conv3D", "Conv3D", dict(filters=2, kernel_size=2), (_x(1, 4, 4, 4, 2),), {}),
    ("Conv2DTranspose", "Conv2DTranspose", dict(filters=3, kernel_size=4, strides=2, padding="same"), (_x(2, 4, 4, 2),), {}),
    ("DepthwiseConv2D", "DepthwiseConv2D", dict(kernel_size=3), (_x(2, 5, 5, 2),), {}),
    ("SeparableConv2D", "SeparableConv2D", dict(filters=3, kernel_size=3), (_x(2, 5, 5, 2),), {}),
    ("MaxPooling2D", "MaxPooling2D", dict(pool_size=2), (_x(2, 4, 4, 2),), {}),
    ("AveragePooling2D", "AveragePooling2D", dict(pool_size=2), (_x(2, 4, 4, 2),), {}),
    ("GlobalAveragePooling2D", "GlobalAveragePooling2D", {}, (_x(2, 4, 4, 2),), {}),
    ("GlobalMaxPooling1D", "GlobalMaxPooling1D", {}, (_x(2, 4, 3),), {}),
    ("BatchNormalization-train", "BatchNormalization", {}, (_x(4, 3),), {"training": True}),
    ("BatchNormalization-infer", "BatchNormalization", dict(momentum=0.5), (_x(4, 3),), {"training": False}),
    ("LayerNormalization", "LayerNormalization", {}, (_x(2, 4),), {}),
    ("GroupNormalization", "GroupNormalization", dict(groups=2), (_x(2, 3, 4),), {}),
    ("Dropout-infer", "Dropout", dict(rate=0.5), (_x(3, 4),), {"training": False}),
    ("LSTM", "LSTM", dict(units=3, return_sequences=True), (_x(2, 4, 3),), {}),
    ("GRU", "GRU", dict(units=3), (_x(2, 4, 3),), {}),
    ("SimpleRNN", "SimpleRNN", dict(units=3, return_sequences=True), (_x(2, 4, 3),), {}),
    ("MultiHeadAttention", "MultiHeadAttention", dict(num_heads=2, key_dim=3), (_x(2, 4, 5), _x(2, 3, 5, seed=1)), {}),
    ("Reshape", "Reshape", dict(target_shape=(4, 2)), (_x(2, 8),), {}),
    ("Flatten", "Flatten", {}, (_x(2, 3, 2),), {}),
    ("Permute", "Permute", dict(dims=(2, 1)), (_x(2, 3, 4),), {}),
    ("RepeatVector", "RepeatVector", dict(n=3), (_x(2, 4),), {}),
    ("Concatenate", "Concatenate", {}, ([_x(2, 3), _x(2, 2)],), {}),
    ("Add", "Add", {}, ([_x(2, 3), _x(2, 3, seed=1)],), {}),
    ("Multiply", "Multiply", {}, ([_x(2, 3), _x(2, 3, seed=1)],), {}),
    ("ZeroPadding2D", "ZeroPadding2D", dict(padding=1), (_x(2, 3, 3, 2),), {}),
    ("UpSampling2D", "UpSampling2D", dict(size=2), (_x(2, 3, 3, 2),), {}),
    ("Cropping2D", "Cropping2D", dict(cropping=1), (_x(2, 4, 4, 2),), {}),
    ("LeakyReLU", "LeakyReLU", dict(negative_slope=0.2), (_x(2, 5),), {}),
    ("ReLU", "ReLU", dict(max_value=1.0), (_x(2, 5),), {}),
    ("PReLU", "PReLU", {}, (_x(2, 5),), {}),
    ("Softmax", "Softmax", {}, (_x(2, 5),), {}),
    ("Rescaling", "Rescaling", dict(scale=0.5, offset=0.25), (_x(2, 5),), {}),
    ("Normalization", "Normalization", dict(mean=[0.5, 1.0], variance=[4.0, 0.25]), (_x(3, 2),), {}),
    ("Embedding", "Embedding", dict(input_dim=6, output_dim=3), (np.array([[0, 2, 5], [1, 1, 4]], np.int32),), {}),
]
LAYER_BY_ID = {c[0]: c for c in LAYER_CASES}


def _weights(shapes, seed=7):
    rng = np.random.default_rng(seed)
    return [(0.5 * rng.standard_normal(s)).astype(np.float32) for s in shapes]


def layer_case(tf, case_id):
    _, cls, cfg, args, kwargs = LAYER_BY_ID[case_id]
    layer = getattr(tf.keras.layers, cls)(**cfg)
    tens = [[tf.constant(a) for a in x] if isinstance(x, list) else tf.constant(x) for x in args]
    layer(*tens, **kwargs)
    layer.set_weights(_weights([tuple(w.shape) for w in layer.get_weights()]))
    watched = [t for x in tens for t in (x if isinstance(x, list) else [x]) if t.dtype.is_floating]
    with tf.GradientTape() as tape:
        tape.watch(watched)
        out = layer(*tens, **kwargs)
        r = tf.constant(np.cos(np.arange(int(np.prod(out.shape)), dtype=np.float32)).reshape(tuple(out.shape)))
        loss = tf.reduce_sum(out * r)
    g = tape.gradient(loss, watched + list(layer.trainable_weights))
    # TF's Embedding gradient is IndexedSlices: compared densely.
    g = [None if t is None else np.asarray(tf.convert_to_tensor(t)) for t in g]
    return out.numpy(), g, [np.asarray(w) for w in layer.get_weights()]


def masking(tf):
    # Embedding(mask_zero=True) then LSTM, called one after the other: the mask travels with the tensor.
    emb, lstm = tf.keras.layers.Embedding(6, 3, mask_zero=True), tf.keras.layers.LSTM(2, return_sequences=True)
    ids = tf.constant([[1, 2, 0, 0], [3, 0, 0, 4]])
    lstm(emb(ids))
    emb.set_weights(_weights([(6, 3)], seed=12))
    lstm.set_weights(_weights([tuple(w.shape) for w in lstm.get_weights()], seed=13))
    with tf.GradientTape() as tape:
        out = lstm(emb(ids))
        loss = tf.reduce_sum(out * out)
    grads = tape.gradient(loss, lstm.trainable_variables + emb.trainable_variables)
    return out.numpy(), [np.asarray(tf.convert_to_tensor(g)) for g in grads]


# ---- training: fit, DCGAN, WGAN-GP, MAML -----------------------------------------------------

FX = np.random.default_rng(3).standard_normal((24, 4)).astype(np.float32)
FY = (FX @ np.array([[1.0], [-2.0], [0.5], [0.0]], np.float32) + 0.3).astype(np.float32)


def fit_curve(tf, optimizer):
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="tanh"), tf.keras.layers.Dense(1)])
    model.set_weights(_weights([tuple(w.shape) for w in model.get_weights()], seed=11))
    opt = {"sgd": tf.keras.optimizers.SGD(0.05), "adam": tf.keras.optimizers.Adam(0.01)}[optimizer]
    model.compile(optimizer=opt, loss="mse", metrics=["mae"])
    h = model.fit(FX, FY, batch_size=8, epochs=4, shuffle=False, verbose=0, validation_data=(FX[:8], FY[:8]))
    return h.history, model.evaluate(FX, FY, verbose=0), model.predict(FX[:5], verbose=0)


def _dcgan(tf):
    L = tf.keras.layers
    gen = tf.keras.Sequential([tf.keras.Input((4,)), L.Dense(2 * 2 * 8, use_bias=False), L.BatchNormalization(),
                               L.LeakyReLU(), L.Reshape((2, 2, 8)), L.Conv2DTranspose(4, 3, strides=2, padding="same", use_bias=False),
                               L.BatchNormalization(), L.LeakyReLU(), L.Conv2DTranspose(1, 3, strides=2, padding="same", activation="tanh")])
    disc = tf.keras.Sequential([tf.keras.Input((8, 8, 1)), L.Conv2D(4, 3, strides=2, padding="same"), L.LeakyReLU(),
                                L.Dropout(0.0), L.Flatten(), L.Dense(1)])
    gen.set_weights(_weights([tuple(w.shape) for w in gen.get_weights()], seed=1))
    w = gen.get_weights()
    w[2], w[3] = np.zeros_like(w[2]), np.ones_like(w[3])  # moving mean / variance
    w[7], w[8] = np.zeros_like(w[7]), np.ones_like(w[8])
    gen.set_weights(w)
    disc.set_weights(_weights([tuple(w.shape) for w in disc.get_weights()], seed=2))
    return gen, disc


def dcgan_step(tf):
    gen, disc = _dcgan(tf)
    bce = tf.keras.losses.BinaryCrossentropy(from_logits=True)
    g_opt, d_opt = tf.keras.optimizers.Adam(1e-3), tf.keras.optimizers.Adam(1e-3)
    real = tf.constant(_x(6, 8, 8, 1))
    noise = tf.constant(_x(6, 4, seed=5))

    def step():
        with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
            fake = gen(noise, training=True)
            real_out, fake_out = disc(real, training=True), disc(fake, training=True)
            g_loss = bce(tf.ones_like(fake_out), fake_out)
            d_loss = bce(tf.ones_like(real_out), real_out) + bce(tf.zeros_like(fake_out), fake_out)
        gg = gen_tape.gradient(g_loss, gen.trainable_variables)
        dg = disc_tape.gradient(d_loss, disc.trainable_variables)
        g_opt.apply_gradients(zip(gg, gen.trainable_variables))
        d_opt.apply_gradients(zip(dg, disc.trainable_variables))
        return g_loss, d_loss, gg, dg

    first = step()
    compiled = tf.function(step)
    losses = [(float(first[0]), float(first[1]))]
    for _ in range(2):
        g_l, d_l, _, _ = compiled()
        losses.append((float(g_l), float(d_l)))
    return losses, [np.asarray(g) for g in first[2] + first[3]], gen.get_weights(), disc.get_weights()


def wgan_gp(tf):
    L = tf.keras.layers
    critic = tf.keras.Sequential([tf.keras.Input((6,)), L.Dense(8), L.LeakyReLU(0.2), L.Dense(1)])
    critic.set_weights(_weights([tuple(w.shape) for w in critic.get_weights()], seed=4))
    real, fake = tf.constant(_x(5, 6)), tf.constant(_x(5, 6, seed=9))
    alpha = tf.constant(np.linspace(0.1, 0.9, 5, dtype=np.float32).reshape(5, 1))
    with tf.GradientTape() as tape:
        interp = real + alpha * (fake - real)
        with tf.GradientTape() as gp_tape:
            gp_tape.watch(interp)
            pred = critic(interp, training=True)
        grads = gp_tape.gradient(pred, [interp])[0]
        norm = tf.sqrt(tf.reduce_sum(tf.square(grads), axis=[1]))
        gp = tf.reduce_mean((norm - 1.0) ** 2)
        loss = tf.reduce_mean(critic(fake)) - tf.reduce_mean(critic(real)) + 10.0 * gp
    return float(gp), float(loss), [np.asarray(g) for g in tape.gradient(loss, critic.trainable_variables)]


def maml_step(tf):
    L = tf.keras.layers
    model = tf.keras.Sequential([tf.keras.Input((1,)), L.Dense(16, activation="relu"), L.Dense(1)])
    model.set_weights(_weights([tuple(w.shape) for w in model.get_weights()], seed=6))
    xs = tf.constant(np.linspace(-2, 2, 10, dtype=np.float32).reshape(10, 1))
    ys, yq = tf.sin(xs), tf.sin(xs + 0.5)
    mse = tf.keras.losses.MeanSquaredError()
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            support = mse(ys, model(xs))
        grads = inner.gradient(support, model.trainable_variables)
        k1, b1, k2, b2 = [w - 0.01 * g for w, g in zip(model.trainable_variables, grads)]
        fast = tf.matmul(tf.nn.relu(tf.matmul(xs, k1) + b1), k2) + b2
        query = mse(yq, fast)
    meta = outer.gradient(query, model.trainable_variables)
    return float(support), float(query), [np.asarray(g) for g in meta]


# ---- the TF side: one subprocess for the module ----------------------------------------------

JOBS = (
    [(("opt", n, s), "train_opt", (n, 20, s)) for n in OPTIMIZERS for s in ((n in ("adam", "sgd_nesterov_weight_decay")),)]
    + [(("opt_config", c), "opt_config", (c,)) for c in ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"]]
    + [(("schedules",), "schedules", ())]
    + [(("loss", c[0]), "loss_case", (c[0],)) for c in LOSS_CASES]
    + [(("logits", a, lo), "activation_logits", (a, lo)) for a, lo in [("softmax", "SparseCategoricalCrossentropy"), ("sigmoid", "BinaryCrossentropy")]]
    + [(("metrics",), "metrics", ()), (("dense_seq",), "dense_seq", ()), (("init_stats",), "init_stats", ()),
       (("seed003",), "seed003", ()), (("int_var",), "int_variable_to_optimizer", ())]
    + [(("layer", c[0]), "layer_case", (c[0],)) for c in LAYER_CASES] + [(("masking",), "masking", ())]
    + [(("fit", o), "fit_curve", (o,)) for o in ("sgd", "adam")]
    + [(("dcgan",), "dcgan_step", ()), (("wgan_gp",), "wgan_gp", ()), (("maml",), "maml_step", ())]
)


@pytest.fixture(scope="module")
def TF():
    return run_tf_jobs(__file__, JOBS)


def _close(got, want, rtol=1e-5, atol=1e-6, msg=""):
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), msg
        for k in want:
            _close(got[k], want[k], rtol, atol, f"{msg}/{k}")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), msg
        for a, b in zip(got, want):
            _close(a, b, rtol, atol, msg)
    elif want is None or isinstance(want, str):
        assert got == want, msg
    else:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol, err_msg=msg)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_trajectory_matches_keras(TF, name):
    skip = name in ("adam", "sgd_nesterov_weight_decay")  # also: a variable that misses every other step
    want, it_want = result(TF, ("opt", name, skip))
    got, it_got = train_opt(tj, name, 20, skip)
    assert it_got == it_want == 20
    for step, (a, b) in enumerate(zip(got, want)):
        for va, vb in zip(a, b):
            np.testing.assert_allclose(va, vb, rtol=1e-4, atol=1e-6, err_msg=f"{name}, step {step + 1}")


@pytest.mark.parametrize("cls", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_optimizer_default_config_matches_keras(TF, cls):
    assert opt_config(tj, cls) == result(TF, ("opt_config", cls))


def test_schedules_match_keras(TF):
    for (cfg_got, got), (cfg_want, want) in zip(schedules(tj), result(TF, ("schedules",))):
        assert cfg_got == cfg_want
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("case", LOSS_CASES, ids=[c[0] for c in LOSS_CASES])
def test_loss_value_and_gradient_match_keras(TF, case):
    want = result(TF, ("loss", case[0]))
    got = loss_case(tj, case[0])
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("activation, loss", [("softmax", "SparseCategoricalCrossentropy"), ("sigmoid", "BinaryCrossentropy")])
def test_keras_activation_outputs_are_scored_from_their_logits(TF, activation, loss):
    want = result(TF, ("logits", activation, loss))
    got = activation_logits(tj, activation, loss)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_metrics_match_keras_accuracy_per_element(TF):
    got, want = metrics(tj), result(TF, ("metrics",))
    np.testing.assert_allclose(got[:3], want[:3], rtol=1e-6)
    assert got[3:5] == want[3:5]
    np.testing.assert_allclose(got[5:], want[5:], rtol=1e-6)
    assert round(got[5], 4) == 0.8333


def test_dense_and_sequential_outputs_match_keras(TF):
    got, want = dense_seq(tj), result(TF, ("dense_seq",))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[1:] == want[1:]


def test_initializer_statistics_match_keras(TF):
    got, want = init_stats(tj), result(TF, ("init_stats",))
    for name in want:
        assert got[name][0] == pytest.approx(want[name][0], rel=0.03), name
        assert got[name][1] == pytest.approx(want[name][1], rel=0.05), name


def test_seed003_example_matches_keras(TF):
    assert seed003(tj) == result(TF, ("seed003",)) == ([None, None], [(4, 32), (32,)])


def test_int_variable_given_to_an_optimizer(TF):
    # TF's Adam fails inside its update with InvalidArgumentError; tapejax raises the same type up front.
    want = TF[("int_var",)]
    with pytest.raises(tj.errors.InvalidArgumentError):
        int_variable_to_optimizer(tj)
    assert want.cls == "InvalidArgumentError"


@pytest.mark.parametrize("case_id", [c[0] for c in LAYER_CASES])
def test_layer_forward_and_gradients_match_tf_keras(TF, case_id):
    want = result(TF, ("layer", case_id))
    got = layer_case(tj, case_id)
    _close(got[0], want[0], 1e-5, 1e-5, f"{case_id} output")
    assert len(got[1]) == len(want[1])
    for i, (a, b) in enumerate(zip(got[1], want[1])):
        _close(a, b, 1e-4, 1e-5, f"{case_id} gradient {i}")
    _close(got[2], want[2], 1e-5, 1e-6, f"{case_id} weights after the call")


def test_masks_travel_between_layer_calls_as_in_tf(TF):
    got, want = masking(tj), result(TF, ("masking",))
    _close(got, want, 1e-5, 1e-6)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_fit_reaches_the_same_loss_curve(TF, optimizer):
    got, want = fit_curve(tj, optimizer), result(TF, ("fit", optimizer))
    _close(got[0], want[0], 1e-4, 1e-6, "history")
    _close(got[1], want[1], 1e-4, 1e-6, "evaluate")
    _close(got[2], want[2], 1e-4, 1e-5, "predict")


def test_dcgan_two_tape_step_matches_tf(TF):
    got, want = dcgan_step(tj), result(TF, ("dcgan",))
    _close(got[0], want[0], 1e-4, 1e-6, "losses (eager step, then two compiled)")
    _close(got[1], want[1], 1e-3, 1e-5, "first-step gradients")
    _close(got[2], want[2], 1e-4, 1e-5, "generator weights (moving statistics included)")
    _close(got[3], want[3], 1e-4, 1e-5, "discriminator weights")


def test_wgan_gp_gradient_penalty_matches_tf(TF):
    got, want = wgan_gp(tj), result(TF, ("wgan_gp",))
    _close(got, want, 1e-4, 1e-6)


def test_maml_second_order_step_matches_tf(TF):
    got, want = maml_step(tj), result(TF, ("maml",))
    _close(got, want, 1e-4, 1e-6)
