"""Saved Keras models, configs and copies between tapejax and real TF 2.21's tf.keras.

A ``.keras`` file written by TF loads into tapejax as tapejax's classes (trainable on a tape,
``evaluate`` giving TF's numbers), and a file written by tapejax loads into TF. Configs
(``serialize``, ``to_json``) are TF's, and ``copy.deepcopy``/``pickle`` of models, layers, losses
and metrics succeed or raise as in TF. TF's side runs in a subprocess (tests/oracle/_tf_side.py).
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import tempfile

import numpy as np
import pytest
from _tf_side import result, run_tf_jobs

import tapejax as tj

X = np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(8, 3)
Y = np.stack([np.sin(3 * X[:, 0]), X[:, 1] * X[:, 2]], axis=1).astype(np.float32)
KINDS = ("sequential", "functional")


def build(tf, kind):
    """A compiled model with fixed weights: the same function in either library."""
    if kind == "sequential":
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(5, activation="tanh"),
                                     tf.keras.layers.BatchNormalization(), tf.keras.layers.Dense(2)])
    else:
        i = tf.keras.Input((3,))
        h = tf.keras.layers.Dense(4, activation="relu")(i)
        h = tf.keras.layers.Concatenate()([h, i])
        model = tf.keras.Model(i, tf.keras.layers.Dense(2)(tf.keras.layers.LayerNormalization()(h)))
    rng = np.random.default_rng(7)
    model.set_weights([rng.normal(size=w.shape).astype(np.float32) * 0.5 + (1.0 if "variance" in w.path else 0.0)
                       for w in model.weights])
    # A loss and metrics of the same class name (MeanSquaredError): each must come back as its kind.
    model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss=tf.keras.losses.MeanSquaredError(),
                  metrics=[tf.keras.metrics.MeanSquaredError(), tf.keras.metrics.MeanAbsoluteError()])
    return model


def observe(tf, model):
    """What a porter checks after loading: outputs, a tape's gradients, evaluate, and a further fit."""
    pred = model(X, training=False)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(X, training=True) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    ev = model.evaluate(X, Y, verbose=0)
    history = model.fit(X, Y, epochs=2, batch_size=4, shuffle=False, verbose=0).history["loss"]
    return [np.asarray(pred), [np.asarray(g) for g in grads], [float(v) for v in ev], [float(v) for v in history]]


def save(tf, kind, path):
    """Build, train a little, save to ``path``: what the saving side observes of the model it saved."""
    model = build(tf, kind)
    model.fit(X, Y, epochs=2, batch_size=4, shuffle=False, verbose=0)
    model.save(path)
    return observe(tf, model)


def load(tf, path):
    return observe(tf, tf.keras.models.load_model(path))


OPTIMIZERS = {"sgd_momentum": ("SGD", {"learning_rate": 0.05, "momentum": 0.9}),
              "adam": ("Adam", {"learning_rate": 0.01}),
              "adamw": ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.05}),
              "rmsprop_centered": ("RMSprop", {"learning_rate": 0.01, "momentum": 0.5, "centered": True}),
              "adagrad": ("Adagrad", {"learning_rate": 0.1})}


def resume_save(tf, opt, path, loss="mse"):
    """Train, save with the optimizer's state, train on: the continued run a loaded file must repeat."""
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(4, activation="tanh"),
                                 tf.keras.layers.Dense(2)])
    rng = np.random.default_rng(3)
    model.set_weights([rng.normal(size=w.shape).astype(np.float32) * 0.5 for w in model.weights])
    cls, kwargs = OPTIMIZERS[opt]
    # (Keras 3's legacy .h5 loader cannot read the loss "mse" back, in TF too: .h5 files get the object.)
    model.compile(optimizer=getattr(tf.keras.optimizers, cls)(**kwargs),
                  loss=tf.keras.losses.MeanSquaredError() if loss == "object" else loss)
    model.fit(X, Y, epochs=3, batch_size=4, shuffle=False, verbose=0)
    model.save(path)
    return resume(tf, model)


def resume(tf, model):
    history = model.fit(X, Y, epochs=3, batch_size=4, shuffle=False, verbose=0).history["loss"]
    return [[float(v) for v in history], [np.asarray(w) for w in model.weights], int(model.optimizer.iterations)]


def resume_load(tf, path):
    return resume(tf, tf.keras.models.load_model(path))


def predict_loaded(tf, path):
    # (TF 2.21 cannot train on from its own legacy .h5 files: its optimizer is rebuilt on the
    # Keras variables and refuses the model's. Outputs are what TF can be compared on.)
    return np.asarray(tf.keras.models.load_model(path)(X))


H5_OPTIMIZERS = ("sgd_momentum", "adam", "rmsprop_centered")


def configs(tf):
    """Configs of built-in objects with fixed names: the data a saved file holds."""
    model = tf.keras.Sequential([tf.keras.Input((3,), name="x"), tf.keras.layers.Dense(2, name="d")], name="m")
    js = json.loads(model.to_json())
    js.pop("keras_version", None)
    js.pop("backend", None)
    return [tf.keras.layers.serialize(tf.keras.layers.Dense(3, activation="relu", name="d3")),
            tf.keras.layers.serialize(tf.keras.layers.Conv2D(2, 3, name="c")),
            tf.keras.losses.serialize(tf.keras.losses.Huber(delta=0.5)),
            tf.keras.metrics.serialize(tf.keras.metrics.AUC(name="auc")),
            js]


def copies(tf):
    """Each copy: ('ok', the copy's values, whether they equal the original's) or ('error', class)."""
    x = X[:2]
    dense = tf.keras.layers.Dense(3, name="d")
    dense(x)
    metric = tf.keras.metrics.Mean()
    metric.update_state([1.0, 3.0])

    class Unregistered(tf.keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.d = tf.keras.layers.Dense(2)

        def call(self, x):
            return self.d(x)

    # The same model, registered: Keras finds it by name when it loads the copy.
    Registered = tf.keras.utils.register_keras_serializable(package="oracle_saving")(
        type("Registered", (Unregistered,), {}))

    unreg, reg = Unregistered(), Registered()
    unreg(x)
    reg(x)
    out = {}
    for how, fn in (("deepcopy", copy.deepcopy), ("pickle", lambda o: pickle.loads(pickle.dumps(o)))):
        for name, obj, value in (
                ("sequential", build(tf, "sequential"), lambda m: m(x)),
                ("functional", build(tf, "functional"), lambda m: m(x)),
                ("dense", dense, lambda m: m(x)),
                ("loss", tf.keras.losses.Huber(delta=0.5), lambda m: m(Y[:2], x[:, :2])),
                ("metric", metric, lambda m: m.result()),
                ("unregistered", unreg, lambda m: m(x)),
                ("registered", reg, lambda m: m(x))):
            try:
                twin = fn(obj)
            except Exception as e:  # noqa: BLE001  (the class is what TF's behaviour is compared on)
                out[how, name] = ("error", type(e).__name__)
                continue
            out[how, name] = ("ok", np.asarray(value(twin)), bool(np.allclose(value(twin), value(obj))))
    return out


@pytest.fixture(scope="module")
def files():
    d = tempfile.mkdtemp(prefix="tapejax_saving_")
    saved = {kind: save(tj, kind, os.path.join(d, f"tapejax_{kind}.keras")) for kind in KINDS}
    saved.update({opt: resume_save(tj, opt, os.path.join(d, f"tapejax_{opt}.keras")) for opt in OPTIMIZERS})
    saved.update({("h5", opt): resume_save(tj, opt, os.path.join(d, f"tapejax_{opt}.h5"), "object") for opt in H5_OPTIMIZERS})
    return d, saved


@pytest.fixture(scope="module")
def TF(files):
    d, _ = files
    jobs = ([(("save", k), "save", (k, os.path.join(d, f"tf_{k}.keras"))) for k in KINDS]
            + [(("load", k), "load", (os.path.join(d, f"tapejax_{k}.keras"),)) for k in KINDS]
            + [(("resume_save", o), "resume_save", (o, os.path.join(d, f"tf_{o}.keras"))) for o in OPTIMIZERS]
            + [(("resume_load", o), "resume_load", (os.path.join(d, f"tapejax_{o}.keras"),)) for o in OPTIMIZERS]
            + [(("h5_save", o), "resume_save", (o, os.path.join(d, f"tf_{o}.h5"), "object")) for o in H5_OPTIMIZERS]
            + [(("h5_predict", o), "predict_loaded", (os.path.join(d, f"tapejax_{o}.h5"),)) for o in H5_OPTIMIZERS]
            + [(("configs",), "configs", ()), (("copies",), "copies", ())])
    return run_tf_jobs(__file__, jobs)


def _close(got, want):
    if isinstance(want, list):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            _close(a, b)
    else:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_a_file_tf_saved_loads_as_tapejax_classes_with_tfs_numbers(TF, kind, files):
    from tapejax.keras._layer import LayerMixin  # (here: the TF side imports this module under TF's Keras)

    d, _ = files
    want = result(TF, ("save", kind))
    model = tj.keras.models.load_model(os.path.join(d, f"tf_{kind}.keras"))
    # tapejax's classes all the way down: calls go on the tape, the loss is a loss, not a same-named metric.
    assert isinstance(model, tj.keras.Model)
    assert all(isinstance(layer, LayerMixin) for layer in model.layers)
    assert isinstance(model.loss, tj.keras.losses.MeanSquaredError)
    _close(observe(tj, model), want)


@pytest.mark.parametrize("kind", KINDS)
def test_a_file_tapejax_saved_loads_in_tf_with_the_same_numbers(TF, kind, files):
    _, saved = files
    _close(result(TF, ("load", kind)), saved[kind])


def _same_run(got, want):
    # (loss curve, weights, iterations) of 3 epochs after loading, against the saving side's own
    # 3 further epochs: 6 steps before the save and 6 after.
    assert got[2] == want[2] == 12
    _close(got[:2], want[:2])


@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_training_resumed_from_tfs_file_continues_tfs_run(TF, opt, files):
    # The optimizer's state (iterations, moments, accumulators) is in the file, in Keras's layout.
    _same_run(resume_load(tj, os.path.join(files[0], f"tf_{opt}.keras")), result(TF, ("resume_save", opt)))


@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_training_resumed_in_tf_from_tapejaxs_file_continues_tapejaxs_run(TF, opt, files):
    _same_run(result(TF, ("resume_load", opt)), files[1][opt])


@pytest.mark.parametrize("opt", H5_OPTIMIZERS)
def test_a_legacy_h5_file_tf_saved_resumes_tfs_run(TF, opt, files):
    # Keras's legacy .h5 format (model.save("m.h5")): the model, its compile and its optimizer's
    # state. tapejax trains on from TF's file as TF's in-memory model does.
    _same_run(resume_load(tj, os.path.join(files[0], f"tf_{opt}.h5")), result(TF, ("h5_save", opt)))


@pytest.mark.parametrize("opt", H5_OPTIMIZERS)
def test_a_legacy_h5_file_tapejax_saved_loads_in_tf_and_in_tapejax(TF, opt, files):
    d, saved = files
    path = os.path.join(d, f"tapejax_{opt}.h5")
    model = tj.keras.models.load_model(path)
    _close(np.asarray(model(X)), result(TF, ("h5_predict", opt)))
    assert resume(tj, model)[2] == 12  # (the saved run's 6 steps, and 6 more)


def test_configs_are_tfs(TF):
    got = configs(tj)
    assert got == result(TF, ("configs",))


def test_copies_succeed_or_raise_as_in_tf(TF):
    want = result(TF, ("copies",))
    got = copies(tj)
    assert sorted(got) == sorted(want)
    for key in want:
        if want[key][0] == "error" or got[key][0] == "error":
            assert got[key][:2] == want[key][:2], key
            continue
        # Whether the copy computes what its original does (a metric's copy starts from zero in TF).
        assert got[key][2] == want[key][2], key
        if key[1] in ("loss", "metric"):  # no random weights: the values themselves
            np.testing.assert_allclose(got[key][1], want[key][1], rtol=1e-6)
