"""Copies of tapejax Keras objects: deepcopy, pickle, files, configs, clones.

Every way a TF program copies a model must give back tapejax's classes (calls on the tape), the
original's numbers, and its own variables. A random generator draws models and copy mechanisms;
tests/oracle/test_oracle_keras_saving.py checks the files and configs against real TF.
"""

from __future__ import annotations

import copy
import os
import pickle
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax as tf
from tapejax.keras import _saving
from tapejax.keras._layer import LayerMixin
from tapejax.keras._objects import LossMixin, MetricMixin

X = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
Y = np.stack([X[:, 0] ** 2, X[:, 1] - X[:, 2]], axis=1).astype(np.float32)


def _layer(spec):
    kind, arg = spec
    if kind == "dense":
        return tf.keras.layers.Dense(arg[0], activation=arg[1])
    if kind == "bn":
        return tf.keras.layers.BatchNormalization()
    if kind == "ln":
        return tf.keras.layers.LayerNormalization()
    return tf.keras.layers.Dropout(arg)


OPTIMIZERS = {"sgd": lambda: tf.keras.optimizers.SGD(0.1), "sgd_momentum": lambda: tf.keras.optimizers.SGD(0.05, momentum=0.9),
              "adam": lambda: tf.keras.optimizers.Adam(0.01), "rmsprop": lambda: tf.keras.optimizers.RMSprop(0.01, momentum=0.3),
              "adagrad": lambda: tf.keras.optimizers.Adagrad(0.1)}


def make_model(kind, specs, loss, compiled, seed, opt="sgd"):
    layers = [_layer(s) for s in specs] + [tf.keras.layers.Dense(2)]
    if kind == "sequential":
        model = tf.keras.Sequential([tf.keras.Input((3,)), *layers])
    else:
        i = tf.keras.Input((3,))
        h = i
        for layer in layers[:-1]:
            h = layer(h)
        h = tf.keras.layers.Concatenate()([h, i])  # a second path into the last layer
        model = tf.keras.Model(i, layers[-1](h))
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(size=w.shape).astype(np.float32) * 0.5 + (1.5 if "variance" in w.path else 0.0)
                       for w in model.weights])
    if compiled:
        # (Huber's default delta: Keras's Huber.get_config drops delta, so a copy of Huber(delta=0.3)
        # has delta 1.0, in TF too.)
        losses = {"mse": tf.keras.losses.MeanSquaredError(), "mae": tf.keras.losses.MeanAbsoluteError(),
                  "huber": tf.keras.losses.Huber()}
        model.compile(optimizer=OPTIMIZERS[opt](), loss=losses[loss],
                      metrics=[tf.keras.metrics.MeanSquaredError(), tf.keras.metrics.MeanAbsoluteError()])
    return model


def _file_copy(model):
    path = os.path.join(tempfile.mkdtemp(prefix="tapejax_copy_"), "m.keras")
    model.save(path)
    return tf.keras.models.load_model(path)


def _with_weights(make):
    def copy_it(model):
        twin = make(model)
        twin.set_weights(model.get_weights())
        return twin

    return copy_it


MECHANISMS = {
    "deepcopy": copy.deepcopy,
    "pickle": lambda m: pickle.loads(pickle.dumps(m)),
    "file": _file_copy,
    "from_config": _with_weights(lambda m: type(m).from_config(m.get_config())),
    "model_from_json": _with_weights(lambda m: tf.keras.models.model_from_json(m.to_json())),
    "clone_model": _with_weights(tf.keras.models.clone_model),
}
KEEPS_COMPILE = ("deepcopy", "pickle", "file")


def observe(model):
    out = model(X, training=False)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.sin(model(X, training=False)))
    return np.asarray(out), [np.asarray(g) for g in tape.gradient(loss, model.trainable_variables)]


def check_copy(model, twin, mechanism, compiled):
    assert isinstance(twin, LayerMixin) and isinstance(twin, tf.keras.Model)
    # The original's classes, layer by layer (an Input's InputLayer is Keras's own in the original,
    # and may come back as tapejax's subclass of it).
    assert [type(a).__name__ for a in twin.layers] == [type(a).__name__ for a in model.layers]
    assert [type(a) for a in twin.layers if type(a).__name__ != "InputLayer"] == [
        type(a) for a in model.layers if type(a).__name__ != "InputLayer"]
    assert all(isinstance(a, LayerMixin) for a in twin.layers if type(a).__name__ != "InputLayer")
    (o1, g1), (o2, g2) = observe(model), observe(twin)
    np.testing.assert_allclose(o2, o1, rtol=1e-5, atol=1e-6)
    assert len(g1) == len(g2) and all(g is not None for g in g2)
    for a, b in zip(g2, g1):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    if compiled and mechanism in KEEPS_COMPILE:
        assert type(twin.loss) is type(model.loss) and isinstance(twin.loss, LossMixin)
        np.testing.assert_allclose(twin.evaluate(X, Y, verbose=0), model.evaluate(X, Y, verbose=0), rtol=1e-5)
        # The optimizer's state came along: training on from the copy is training on from the original.
        assert int(twin.optimizer.iterations) == int(model.optimizer.iterations)
        h1 = model.fit(X, Y, epochs=2, batch_size=2, shuffle=False, verbose=0).history["loss"]
        h2 = twin.fit(X, Y, epochs=2, batch_size=2, shuffle=False, verbose=0).history["loss"]
        np.testing.assert_allclose(h2, h1, rtol=1e-4, atol=1e-6)
        for a, b in zip(twin.weights, model.weights):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    # The copy's variables are its own.
    before = [np.asarray(w) for w in model.weights]
    for w in twin.trainable_variables:
        w.assign(w * 0.0 + 3.0)
    for w, b in zip(model.weights, before):
        np.testing.assert_array_equal(np.asarray(w), b)


_SPEC = st.one_of(
    st.tuples(st.just("dense"), st.tuples(st.integers(1, 5), st.sampled_from([None, "relu", "tanh", "sigmoid"]))),
    st.tuples(st.just("bn"), st.none()), st.tuples(st.just("ln"), st.none()),
    st.tuples(st.just("dropout"), st.sampled_from([0.1, 0.5])))


@settings(max_examples=12)
@given(kind=st.sampled_from(["sequential", "functional"]), specs=st.lists(_SPEC, min_size=0, max_size=3),
       loss=st.sampled_from(["mse", "mae", "huber"]), compiled=st.booleans(),
       mechanism=st.sampled_from(sorted(MECHANISMS)), seed=st.integers(0, 2**16), opt=st.sampled_from(sorted(OPTIMIZERS)))
def test_random_models_copied_any_way_are_tapejax_models_with_the_originals_numbers(kind, specs, loss, compiled,
                                                                                   mechanism, seed, opt):
    model = make_model(kind, specs, loss, compiled, seed, opt)
    if compiled:
        model.fit(X, Y, epochs=1, batch_size=2, shuffle=False, verbose=0)  # optimizer and metric state to carry
    check_copy(model, MECHANISMS[mechanism](model), mechanism, compiled)


@pytest.mark.slow
@settings(max_examples=200)
@given(kind=st.sampled_from(["sequential", "functional"]), specs=st.lists(_SPEC, min_size=0, max_size=4),
       loss=st.sampled_from(["mse", "mae", "huber"]), compiled=st.booleans(),
       mechanism=st.sampled_from(sorted(MECHANISMS)), seed=st.integers(0, 2**16), opt=st.sampled_from(sorted(OPTIMIZERS)),
       trained=st.booleans())
def test_random_models_copied_any_way_slow(kind, specs, loss, compiled, mechanism, seed, opt, trained):
    model = make_model(kind, specs, loss, compiled, seed, opt)
    if compiled and trained:
        model.fit(X, Y, epochs=1, batch_size=2, shuffle=False, verbose=0)
    check_copy(model, MECHANISMS[mechanism](model), mechanism, compiled)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_layer_loss_and_metric_are_tapejax_classes(how):
    fn = MECHANISMS[how]
    dense = tf.keras.layers.Dense(3)
    dense(X)
    twin = fn(dense)
    assert type(twin) is tf.keras.layers.Dense
    np.testing.assert_allclose(np.asarray(twin(X)), np.asarray(dense(X)), rtol=1e-6)
    loss = fn(tf.keras.losses.MeanAbsoluteError(reduction="sum"))
    assert type(loss) is tf.keras.losses.MeanAbsoluteError and loss.get_config()["reduction"] == "sum"
    np.testing.assert_allclose(float(loss(Y, X[:, :2])), np.abs(Y - X[:, :2]).mean(axis=1).sum(), rtol=1e-5)
    metric = fn(tf.keras.metrics.AUC())
    assert type(metric) is tf.keras.metrics.AUC and isinstance(metric, MetricMixin)


def test_an_unregistered_subclassed_model_raises_tfs_type_error():
    class Net(tf.keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.d = tf.keras.layers.Dense(2)

        def call(self, x):
            return self.d(x)

    net = Net()
    net(X)
    with pytest.raises(TypeError, match="register_keras_serializable"):
        copy.deepcopy(net)


def test_a_registered_subclassed_model_copies_with_its_weights():
    @tf.keras.utils.register_keras_serializable(package="tapejax_tests")
    class Net2(tf.keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.d = tf.keras.layers.Dense(2)

        def call(self, x):
            return tf.nn.relu(self.d(x))

    net = Net2()
    net(X)
    twin = copy.deepcopy(net)
    assert type(twin) is Net2 and isinstance(twin.d, tf.keras.layers.Dense)
    np.testing.assert_allclose(np.asarray(twin(X)), np.asarray(net(X)), rtol=1e-6)


def test_configs_name_kerass_public_classes():
    # What a saved file holds: Keras's public names, so TF loads a file tapejax saved.
    assert tf.keras.layers.serialize(tf.keras.layers.Dense(2))["module"] == "keras.layers"
    assert tf.keras.losses.serialize(tf.keras.losses.Huber())["module"] == "keras.losses"
    assert tf.keras.metrics.serialize(tf.keras.metrics.AUC())["module"] == "keras.metrics"
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
    cfg = tf.keras.layers.serialize(model)
    assert (cfg["module"], cfg["class_name"], cfg["registered_name"]) == ("keras", "Sequential", None)


def test_plain_keras_outside_tapejax_loads_plain_keras_classes():
    import keras

    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
    path = os.path.join(tempfile.mkdtemp(prefix="tapejax_copy_"), "m.keras")
    model.save(path)
    assert type(tf.keras.models.load_model(path)) is tf.keras.Sequential
    plain = keras.saving.load_model(path)
    assert type(plain) is keras.Sequential and type(plain.layers[0]) is keras.layers.Dense
    assert type(keras.layers.deserialize(keras.layers.serialize(keras.layers.Dense(2)))) is keras.layers.Dense


def test_a_failed_load_leaves_kerass_table_as_it_was():
    from keras.src import api_export

    before = dict(api_export.REGISTERED_NAMES_TO_OBJS)
    with pytest.raises(TypeError):
        tf.keras.layers.deserialize({"module": "nowhere", "class_name": "Nothing", "config": {}, "registered_name": "Nothing"})
    assert api_export.REGISTERED_NAMES_TO_OBJS == before
    assert "keras.layers.Dense" in _saving.registered()


def test_an_optimizer_state_without_kerass_layout_warns_when_saved():
    # Adam(amsgrad=True): optax keeps a different maximum than Keras, so nothing is saved for it.
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
    model.compile(optimizer=tf.keras.optimizers.Adam(amsgrad=True), loss="mse")
    model.fit(X, Y, epochs=1, verbose=0)
    path = os.path.join(tempfile.mkdtemp(prefix="tapejax_copy_"), "m.keras")
    with pytest.warns(UserWarning, match="no Keras layout"):
        model.save(path)


def test_a_saved_state_that_does_not_fit_is_skipped_as_keras_does_and_nothing_is_assigned():
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="mse")
    model.fit(X, Y, epochs=1, verbose=0)
    opt = model.optimizer
    before = [np.asarray(v) for v in opt.variables]
    with pytest.warns(UserWarning, match="Skipping variable loading"):
        opt.load_own_variables({"0": np.asarray(5), "1": np.asarray(0.5)})
    assert all(np.array_equal(np.asarray(v), b) for v, b in zip(opt.variables, before))
    good = {str(i): np.asarray(v) for i, (v, _) in enumerate(opt._keras_state())}
    good[str(len(good) - 1)] = np.zeros((7,), np.float32)  # a wrong shape: an error, and still nothing assigned
    with pytest.raises(ValueError, match="shape"):
        opt.load_own_variables(good)
    assert all(np.array_equal(np.asarray(v), b) for v, b in zip(opt.variables, before))


def test_a_keras_optimizer_object_given_to_compile_trains_as_tapejaxs():
    # Keras's legacy .h5 loader deserializes a Keras optimizer; code importing keras passes one too.
    import keras

    def trained(opt):
        model = make_model("sequential", [("dense", (3, "tanh"))], "mse", False, 5)
        model.compile(optimizer=opt, loss="mse")
        return model, model.fit(X, Y, epochs=3, batch_size=2, shuffle=False, verbose=0).history["loss"]

    model, got = trained(keras.optimizers.Adam(0.02, beta_1=0.8))
    assert type(model.optimizer) is tf.keras.optimizers.Adam
    assert model.optimizer.get_config()["beta_1"] == 0.8
    _, want = trained(tf.keras.optimizers.Adam(0.02, beta_1=0.8))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    used = keras.optimizers.SGD(0.1)
    used.build([keras.Variable(np.zeros(2, np.float32))])
    with pytest.raises(ValueError, match="already been used"):
        tf.keras.optimizers.get(used)
