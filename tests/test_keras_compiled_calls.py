"""A built-in Keras call's eager value is compiled once it repeats (``tapejax/keras/_bridge.py``).

Every test runs the same eager program twice, with the compiled calls on and off
(``_bridge.compile_calls``), on models with the same weights and seeds, and compares values,
gradients and variable states step by step; it also asserts that the compiled path was taken (or,
for code of the user's, never taken). The random-model test draws stacks of built-in layers,
activations, training flags and losses.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax as tf
from tapejax.keras import _bridge

L = tf.keras.layers
STEPS = _bridge.HOT + _bridge.LAG + 5  # past the switch to the compiled program


def _set_compile(on: bool) -> None:
    _bridge.compile_calls = on


@pytest.fixture
def compile_switch():
    saved = _bridge.compile_calls
    yield _set_compile
    _bridge.compile_calls = saved


def _layers(spec: list) -> list:
    out = []
    for kind, arg in spec:
        if kind == "dense":
            units, act = arg
            out.append(L.Dense(units, activation=act))
        elif kind == "dropout":
            out.append(L.Dropout(arg, seed=7))
        elif kind == "bn":
            out.append(L.BatchNormalization(momentum=arg))
        else:
            out.append(L.LayerNormalization())
    return out


def _run(spec: list, loss_name: str, trainings: list, x: np.ndarray, y: np.ndarray, compiled: bool, switch) -> dict:
    switch(compiled)
    tf.keras.utils.set_random_seed(3)
    model = tf.keras.Sequential([tf.keras.Input((x.shape[1],)), *_layers(spec), L.Dense(1)])
    rng = np.random.default_rng(11)
    model.set_weights([(0.3 * rng.standard_normal(w.shape)).astype(np.float32) for w in model.get_weights()])
    loss_fn = {"mse": tf.keras.losses.MeanSquaredError(), "mae": tf.keras.losses.MeanAbsoluteError(),
               "huber": tf.keras.losses.Huber()}[loss_name]
    opt = tf.keras.optimizers.SGD(0.05)
    mean = tf.keras.metrics.Mean()
    xt, yt = tf.constant(x), tf.constant(y)
    before = dict(_bridge.fwd_stats)
    losses, grads = [], []
    for training in trainings:
        with tf.GradientTape() as tape:
            loss = loss_fn(yt, model(xt, training=training))
        g = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(g, model.trainable_variables))
        mean.update_state(loss)
        losses.append(float(loss))
        grads.append([np.asarray(v) for v in g])
    compiled_calls = _bridge.fwd_stats["compiled"] - before["compiled"]
    return {"losses": losses, "grads": grads, "weights": [np.asarray(w) for w in model.get_weights()],
            "mean": float(mean.result()), "compiled_calls": compiled_calls}


def _assert_same(a: dict, b: dict) -> None:
    np.testing.assert_allclose(a["losses"], b["losses"], rtol=2e-5, atol=1e-6)
    for ga, gb in zip(a["grads"], b["grads"]):
        for u, v in zip(ga, gb):
            np.testing.assert_allclose(u, v, rtol=2e-4, atol=1e-5)
    for u, v in zip(a["weights"], b["weights"]):  # moving statistics and dropout seeds included
        np.testing.assert_allclose(u, v, rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(a["mean"], b["mean"], rtol=2e-5, atol=1e-6)


_LAYER = st.one_of(
    st.tuples(st.just("dense"), st.tuples(st.sampled_from([3, 8]),
                                          st.sampled_from([None, "relu", "tanh", "sigmoid", "gelu", "softplus",
                                                           tf.nn.relu, tf.math.tanh]))),
    st.tuples(st.just("dropout"), st.sampled_from([0.2, 0.5])),
    st.tuples(st.just("bn"), st.sampled_from([0.5, 0.9])),
    st.tuples(st.just("ln"), st.none()),
)
_PROGRAM = st.tuples(
    st.lists(_LAYER, min_size=1, max_size=4),
    st.sampled_from(["mse", "mae", "huber"]),
    # Mostly one training flag (one compiled call per flag), sometimes both interleaved.
    st.one_of(st.sampled_from([[True] * STEPS, [False] * STEPS]),
              st.lists(st.booleans(), min_size=STEPS, max_size=STEPS)),
)


def _random_models(program) -> None:
    spec, loss_name, trainings = program
    rng = np.random.default_rng(len(spec))
    x = rng.standard_normal((6, 4)).astype(np.float32)
    y = rng.standard_normal((6, 1)).astype(np.float32)
    saved = _bridge.compile_calls
    try:
        eager = _run(spec, loss_name, trainings, x, y, False, _set_compile)
        compiled = _run(spec, loss_name, trainings, x, y, True, _set_compile)
    finally:
        _bridge.compile_calls = saved
    assert eager["compiled_calls"] == 0
    if trainings.count(trainings[0]) == len(trainings):
        # model, loss and metric calls past the switch
        assert compiled["compiled_calls"] >= 3 * (STEPS - _bridge.HOT - _bridge.LAG - 1)
    _assert_same(eager, compiled)


@settings(max_examples=12)
@given(program=_PROGRAM)
def test_random_models_give_eager_values_when_their_calls_are_compiled(program):
    _random_models(program)


@pytest.mark.slow
@settings(max_examples=200)
@given(program=_PROGRAM)
def test_random_models_give_eager_values_when_their_calls_are_compiled_200(program):
    _random_models(program)


def test_an_attribute_change_after_the_switch_is_seen(compile_switch):
    """``layer.trainable = False`` on a BatchNormalization (its call reads it: moving statistics
    instead of the batch's) and a new activation, set after the calls were compiled."""
    x = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)

    def run(compiled: bool) -> list:
        compile_switch(compiled)
        tf.keras.utils.set_random_seed(1)
        bn, dense = L.BatchNormalization(), L.Dense(3, activation="relu")
        model = tf.keras.Sequential([tf.keras.Input((4,)), dense, bn])
        outs = [np.asarray(model(x, training=True)) for _ in range(STEPS)]
        bn.trainable = False
        outs += [np.asarray(model(x, training=True)) for _ in range(STEPS)]
        dense.activation = tf.keras.activations.tanh
        outs += [np.asarray(model(x, training=True)) for _ in range(STEPS)]
        outs += [np.asarray(w) for w in model.get_weights()]
        return outs

    before = _bridge.fwd_stats["compiled"]
    compiled = run(True)
    assert _bridge.fwd_stats["compiled"] - before >= 3 * (STEPS - _bridge.HOT - _bridge.LAG - 1)
    eager = run(False)
    for a, b in zip(compiled, eager):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # (the change is real: frozen statistics and tanh give other values)
    assert not np.allclose(compiled[STEPS - 1], compiled[2 * STEPS - 1])
    assert not np.allclose(compiled[2 * STEPS - 1], compiled[3 * STEPS - 1])


def test_a_tapejax_op_as_an_activation_is_compiled(compile_switch):
    """``Dense(activation=tf.nn.relu)``: tapejax's own op, so the call is compiled, with eager values."""
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)

    def run(compiled: bool) -> tuple:
        compile_switch(compiled)
        tf.keras.utils.set_random_seed(5)
        model = tf.keras.Sequential([tf.keras.Input((4,)), L.Dense(6, activation=tf.nn.relu),
                                     L.Dense(2, activation=tf.math.tanh)])
        before = _bridge.fwd_stats["compiled"]
        outs = [np.asarray(model(x)) for _ in range(STEPS)]
        return outs, _bridge.fwd_stats["compiled"] - before

    compiled, n = run(True)
    eager, n0 = run(False)
    assert n == STEPS - _bridge.HOT - _bridge.LAG and n0 == 0
    np.testing.assert_allclose(compiled, eager, rtol=1e-6, atol=1e-7)


def test_code_of_the_users_runs_on_every_call(compile_switch):
    """A Lambda, an activation and a layer the user wrote run their Python on every call, as in
    TF eager: such calls are never compiled."""
    compile_switch(True)
    counts = {"lambda": 0, "act": 0, "layer": 0}

    def lam(t):
        counts["lambda"] += 1
        return t * 2.0

    def act(t):
        counts["act"] += 1
        return tf.nn.relu(t)

    class Mine(tf.keras.layers.Layer):
        def call(self, t):
            counts["layer"] += 1
            return t + 1.0

    x = tf.constant(np.ones((2, 3), np.float32))
    models = [tf.keras.Sequential([tf.keras.Input((3,)), L.Lambda(lam), L.Dense(2)]),
              tf.keras.Sequential([tf.keras.Input((3,)), L.Dense(2, activation=act)]),
              tf.keras.Sequential([tf.keras.Input((3,)), Mine(), L.Dense(2)])]
    for m in models:
        m(x)
    base = dict(counts)
    before = _bridge.fwd_stats["compiled"]
    for m in models:
        for _ in range(STEPS):
            m(x)
    assert _bridge.fwd_stats["compiled"] == before
    assert {k: counts[k] - base[k] for k in counts} == {"lambda": STEPS, "act": STEPS, "layer": STEPS}


def test_a_compiled_call_returns_unwritten_variables_as_they_were(compile_switch):
    """Variables a call does not write keep their values (no assignment), and a layer's own
    variables written by the call (BatchNormalization's statistics) are updated."""
    compile_switch(True)
    dense, bn = L.Dense(2), L.BatchNormalization()
    model = tf.keras.Sequential([tf.keras.Input((3,)), dense, bn])
    x = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)
    model(x, training=True)
    kernel = dense.kernel._value  # (the Keras variable's array: the same object if nothing assigned it)
    before = _bridge.fwd_stats["compiled"]
    means = []
    for _ in range(STEPS):
        model(x, training=True)
        means.append(np.asarray(bn.moving_mean))
    assert _bridge.fwd_stats["compiled"] > before
    assert dense.kernel._value is kernel
    h = np.asarray(jnp.asarray(x) @ np.asarray(kernel) + np.asarray(dense.bias))
    # moving_mean <- 0.99 * moving_mean + 0.01 * batch mean, once per call (the first call included)
    expected = np.zeros(2, np.float32)
    for _ in range(STEPS + 1):
        expected = 0.99 * expected + 0.01 * h.mean(axis=0)
    np.testing.assert_allclose(means[-1], expected, rtol=1e-4, atol=1e-6)


def test_a_deleted_model_is_freed_with_its_compiled_calls(compile_switch):
    """The compiled calls live on the layer (not in a global cache): deleting the model frees it and
    its variables' arrays."""
    import gc
    import weakref

    import jax

    compile_switch(True)
    shape = (5, 13)  # a kernel shape no other test's array has
    before = _bridge.fwd_stats["compiled"]

    def make() -> weakref.ref:
        model = tf.keras.Sequential([tf.keras.Input((shape[0],)), L.Dense(shape[1], activation="relu")])
        x = np.ones((2, shape[0]), np.float32)
        for _ in range(STEPS):
            model(x)
        return weakref.ref(model)

    ref = make()
    assert _bridge.fwd_stats["compiled"] > before
    gc.collect()
    assert ref() is None
    assert not [a for a in jax.live_arrays() if a.shape == shape]
