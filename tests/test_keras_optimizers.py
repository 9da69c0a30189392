"""tf.keras.optimizers on tapejax: Keras 3's update formulas (written out here in NumPy as the
reference), None-gradient and dtype rules, state, config, schedules and compiled steps.

The agreement with real Keras over 20 steps is in tests/oracle/test_oracle_keras.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tapejax as tf

TARGET = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
W0 = np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)


def run(opt, steps=5, compiled=False):
    """Minimise 0.5 * ||w - TARGET||^2 (gradient w - TARGET); the trajectory of w."""
    w = tf.Variable(W0)

    def step():
        with tf.GradientTape() as tape:
            loss = 0.5 * tf.reduce_sum(tf.square(w - TARGET))
        grads = tape.gradient(loss, [w])
        opt.apply_gradients(zip(grads, [w]))

    fn = tf.function(step) if compiled else step
    out = []
    for _ in range(steps):
        fn()
        out.append(w.numpy().copy())
    return out, w


def ref_run(update, steps=5):
    """The same problem with a NumPy update rule ``update(w, g, i) -> w``."""
    w = W0.astype(np.float64)
    out = []
    for i in range(steps):
        w = update(w, w - TARGET, i)
        out.append(w.copy())
    return out


def assert_traj(got, want, rtol=2e-5, atol=1e-6):
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"step {i + 1}")


# ---- update rules (Keras 3's formulas) -------------------------------------------------------


def test_sgd_momentum_keeps_the_learning_rate_inside_the_buffer_under_a_schedule():
    sched = tf.keras.optimizers.schedules.ExponentialDecay(0.2, decay_steps=2, decay_rate=0.5)
    opt = tf.keras.optimizers.SGD(learning_rate=sched, momentum=0.9)
    m = np.zeros_like(W0, np.float64)

    def upd(w, g, i):
        nonlocal m
        lr = 0.2 * 0.5 ** (i / 2)  # schedule evaluated at iterations = i (before the increment)
        m = 0.9 * m - lr * g
        return w + m

    got, _ = run(opt)
    assert_traj(got, ref_run(upd))


def test_sgd_nesterov_with_weight_decay():
    opt = tf.keras.optimizers.SGD(learning_rate=0.1, momentum=0.5, nesterov=True, weight_decay=0.05)
    m = np.zeros_like(W0, np.float64)

    def upd(w, g, i):
        nonlocal m
        w = w - w * 0.05 * 0.1  # Keras decays the weights before the step
        m = 0.5 * m - 0.1 * g
        return w + 0.5 * m - 0.1 * g

    got, _ = run(opt)
    assert_traj(got, ref_run(upd))


@pytest.mark.parametrize("eps", [1e-7, 0.5])
def test_adam_uses_keras_epsilon_hat(eps):
    # A large epsilon makes the placement visible: Keras adds it to sqrt(v) before bias correction.
    opt = tf.keras.optimizers.Adam(learning_rate=0.1, epsilon=eps)
    m = np.zeros_like(W0, np.float64)
    v = np.zeros_like(W0, np.float64)

    def upd(w, g, i):
        nonlocal m, v
        t = i + 1
        m = m + (g - m) * (1 - 0.9)
        v = v + (g * g - v) * (1 - 0.999)
        alpha = 0.1 * math.sqrt(1 - 0.999**t) / (1 - 0.9**t)
        return w - m * alpha / (np.sqrt(v) + eps)

    got, _ = run(opt)
    assert_traj(got, ref_run(upd))


def test_adamw_decays_decoupled_from_the_gradient():
    opt = tf.keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.2)
    m = np.zeros_like(W0, np.float64)
    v = np.zeros_like(W0, np.float64)

    def upd(w, g, i):
        nonlocal m, v
        t = i + 1
        w = w - w * 0.2 * 0.1
        m = m + (g - m) * 0.1
        v = v + (g * g - v) * 0.001
        alpha = 0.1 * math.sqrt(1 - 0.999**t) / (1 - 0.9**t)
        return w - m * alpha / (np.sqrt(v) + 1e-7)

    got, _ = run(opt)
    assert_traj(got, ref_run(upd))


def test_rmsprop_centered_with_momentum_has_epsilon_inside_the_sqrt():
    opt = tf.keras.optimizers.RMSprop(learning_rate=0.05, rho=0.8, momentum=0.5, epsilon=0.1, centered=True)
    vel = np.zeros_like(W0, np.float64)
    avg = np.zeros_like(W0, np.float64)
    mom = np.zeros_like(W0, np.float64)

    def upd(w, g, i):
        nonlocal vel, avg, mom
        vel = 0.8 * vel + 0.2 * g * g
        avg = 0.8 * avg + 0.2 * g
        inc = 0.05 * g / np.sqrt(vel - avg * avg + 0.1)
        mom = 0.5 * mom + inc
        return w - mom

    got, _ = run(opt)
    assert_traj(got, ref_run(upd))


def test_adagrad_starts_its_accumulator_at_0_1():
    opt = tf.keras.optimizers.Adagrad(learning_rate=0.3)
    acc = np.full_like(W0, 0.1, np.float64)

    def upd(w, g, i):
        nonlocal acc
        acc = acc + g * g
        return w - 0.3 * g / np.sqrt(acc + 1e-7)

    got, _ = run(opt)
    assert_traj(got, ref_run(upd))
    slots = [v for v in opt.variables if tuple(v.shape) == W0.shape]
    np.testing.assert_allclose(slots[0].numpy(), acc, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs, clip",
    [
        ({"clipnorm": 0.5}, lambda g: g * 0.5 / max(np.linalg.norm(g), 0.5)),
        ({"clipvalue": 0.3}, lambda g: np.clip(g, -0.3, 0.3)),
        ({"global_clipnorm": 0.5}, lambda g: g * 0.5 / max(np.linalg.norm(g), 0.5)),
    ],
)
def test_gradient_clipping(kwargs, clip):
    opt = tf.keras.optimizers.SGD(learning_rate=0.5, **kwargs)
    got, _ = run(opt, steps=3)
    assert_traj(got, ref_run(lambda w, g, i: w - 0.5 * clip(g), steps=3))


# ---- TF's rules for what apply_gradients accepts ---------------------------------------------


def test_none_gradients_are_skipped_with_keras_warning():
    a, b = tf.Variable(1.0, name="a"), tf.Variable(2.0, name="b")
    opt = tf.keras.optimizers.SGD(learning_rate=0.5)
    with pytest.warns(UserWarning, match=r"Gradients do not exist for variables \['a:0'\]"):
        it = opt.apply_gradients([(None, a), (tf.constant(1.0), b)])
    assert (float(a), float(b)) == (1.0, 1.5)
    assert it is opt.iterations and int(opt.iterations) == 1
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.apply_gradients([(None, a), (None, b)])
    with pytest.raises(ValueError):
        opt.apply_gradients([])


def test_bias_correction_counts_optimizer_iterations_when_a_variable_skips_steps():
    # Keras's Adam step uses the optimizer's iterations + 1 even for a variable that got
    # no gradient on earlier steps.
    a, b = tf.Variable(1.0, name="a"), tf.Variable(1.0, name="b")
    opt = tf.keras.optimizers.Adam(learning_rate=0.1, epsilon=0.5)
    opt.apply_gradients([(tf.constant(1.0), a), (tf.constant(1.0), b)])
    with pytest.warns(UserWarning):
        opt.apply_gradients([(tf.constant(1.0), a), (None, b)])
    opt.apply_gradients([(tf.constant(1.0), a), (tf.constant(1.0), b)])
    m, v, w = 0.0, 0.0, 1.0
    for t in (1, 3):
        m += (1 - m) * 0.1
        v += (1 - v) * 0.001
        w -= m * 0.1 * math.sqrt(1 - 0.999**t) / (1 - 0.9**t) / (math.sqrt(v) + 0.5)
    assert float(b) == pytest.approx(w, rel=1e-6)


def test_integer_variable_is_rejected_with_tf_error_type():
    v = tf.Variable(1)
    for opt in (tf.keras.optimizers.SGD(), tf.keras.optimizers.Adam()):
        with pytest.raises(tf.errors.InvalidArgumentError, match="int32.*floating-point"):
            opt.apply_gradients([(tf.constant(1), v)])
    assert int(v) == 1


def test_a_tensor_is_not_a_variable():
    with pytest.raises(TypeError, match="tf.Variable"):
        tf.keras.optimizers.SGD().apply_gradients([(tf.constant(1.0), tf.constant(2.0))])


def test_unknown_variable_after_build():
    a, b = tf.Variable(1.0), tf.Variable(2.0)
    opt = tf.keras.optimizers.SGD()
    opt.apply_gradients([(tf.constant(1.0), a)])
    with pytest.raises(ValueError, match="Unknown variable"):
        opt.apply_gradients([(tf.constant(1.0), b)])


def test_learning_rate_must_be_a_float_like_keras():
    with pytest.raises(ValueError, match="should be float"):
        tf.keras.optimizers.SGD(learning_rate=1)


def test_minimize_with_a_callable_and_with_a_tape():
    w = tf.Variable(3.0)
    opt = tf.keras.optimizers.SGD(learning_rate=0.25)
    opt.minimize(lambda: w * w, [w])
    assert float(w) == 1.5
    with tf.GradientTape() as tape:
        loss = w * w
    opt.minimize(loss, [w], tape=tape)
    assert float(w) == 0.75 and int(opt.iterations) == 2
    with pytest.raises(ValueError, match="`tape` is required"):
        opt.minimize(w * w, [w])


# ---- state, variables, config ----------------------------------------------------------------


def test_state_lives_in_variables_and_survives_between_steps():
    opt = tf.keras.optimizers.Adam(learning_rate=0.1)
    assert [v.name for v in opt.variables] == ["iteration:0", "learning_rate:0"]
    assert opt.iterations.dtype == tf.int32  # int64 in TF; JAX without x64 has no int64
    got, w = run(opt, steps=2)
    names = [v.name for v in opt.variables]
    assert names[:2] == ["iteration:0", "learning_rate:0"]
    moments = [v for v in opt.variables[2:] if tuple(v.shape) == W0.shape]
    assert len(moments) == 2 and all(not v.trainable for v in opt.variables)
    g1, g2 = W0 - TARGET, got[0] - TARGET
    m_expected = 0.9 * (0.1 * g1) + 0.1 * g2  # the first moment after two steps
    np.testing.assert_allclose(moments[0].numpy(), m_expected, rtol=1e-5)
    assert int(opt.iterations) == 2


def test_learning_rate_variable_and_setter():
    opt = tf.keras.optimizers.SGD(learning_rate=0.5)
    assert isinstance(opt.learning_rate, tf.Variable) and float(opt.learning_rate) == 0.5
    opt.learning_rate = 0.1
    got, _ = run(opt, steps=1)
    np.testing.assert_allclose(got[0], W0 - 0.1 * (W0 - TARGET), rtol=1e-6)
    sched = tf.keras.optimizers.schedules.PiecewiseConstantDecay([1], [0.5, 0.25])
    opt2 = tf.keras.optimizers.SGD(learning_rate=sched)
    assert float(opt2.learning_rate) == 0.5
    with pytest.raises(TypeError, match="not settable"):
        opt2.learning_rate = 0.1


def test_get_config_and_from_config():
    opt = tf.keras.optimizers.Adam(learning_rate=0.01, beta_1=0.8)
    cfg = opt.get_config()
    assert cfg["learning_rate"] == float(np.float32(0.01)) and cfg["beta_1"] == 0.8 and cfg["epsilon"] == 1e-7
    assert set(cfg) >= {"name", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue", "use_ema", "amsgrad"}
    clone = tf.keras.optimizers.Adam.from_config(cfg)
    assert clone.get_config() == cfg
    sched = tf.keras.optimizers.schedules.CosineDecay(0.1, 100, alpha=0.1)
    cfg = tf.keras.optimizers.SGD(learning_rate=sched, momentum=0.9).get_config()
    assert cfg["learning_rate"]["class_name"] == "CosineDecay" and cfg["momentum"] == 0.9
    clone = tf.keras.optimizers.SGD.from_config(cfg)
    assert float(clone.learning_rate) == pytest.approx(0.1)


def test_exclude_from_weight_decay():
    a, b = tf.Variable(1.0, name="kernel"), tf.Variable(1.0, name="bias")
    opt = tf.keras.optimizers.SGD(learning_rate=0.5, weight_decay=0.1)
    opt.exclude_from_weight_decay(var_names=["bias"])
    opt.apply_gradients([(tf.constant(0.0), a), (tf.constant(0.0), b)])
    assert float(a) == pytest.approx(1.0 - 0.5 * 0.1) and float(b) == 1.0


# ---- schedules -------------------------------------------------------------------------------


def test_schedule_values():
    S = tf.keras.optimizers.schedules
    e = S.ExponentialDecay(0.1, 4, 0.5, staircase=True)
    assert [round(float(e(i)), 6) for i in (0, 3, 4, 9)] == [0.1, 0.1, 0.05, 0.025]
    e = S.ExponentialDecay(0.1, 4, 0.5)
    assert float(e(2)) == pytest.approx(0.1 * 0.5**0.5, rel=1e-6)
    p = S.PiecewiseConstantDecay([5, 10], [1.0, 0.5, 0.1])
    assert [float(p(i)) for i in (0, 5, 6, 10, 11)] == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.1])
    c = S.CosineDecay(0.1, 10, alpha=0.1, warmup_target=0.2, warmup_steps=5)
    expected = []
    for i in (0, 2, 5, 10, 15, 30):
        if i < 5:
            expected.append(0.1 + (0.2 - 0.1) * i / 5)
        else:
            s = min(i - 5, 10)
            expected.append(0.2 * ((1 - 0.1) * 0.5 * (1 + math.cos(math.pi * s / 10)) + 0.1))
    assert [float(c(i)) for i in (0, 2, 5, 10, 15, 30)] == pytest.approx(expected, rel=1e-6)
    assert c(tf.Variable(3)).dtype == tf.float32


# ---- compiled steps --------------------------------------------------------------------------


def test_compiled_step_matches_eager_and_keeps_state():
    eager, _ = run(tf.keras.optimizers.Adam(learning_rate=0.1), steps=4)
    opt = tf.keras.optimizers.Adam(learning_rate=0.1)
    compiled, _ = run(opt, steps=4, compiled=True)
    assert_traj(compiled, eager, rtol=1e-6)
    assert int(opt.iterations) == 4


def test_model_training_step_compiles_once_and_matches_eager():
    x = tf.constant(np.linspace(-1, 1, 24, dtype=np.float32).reshape(8, 3))
    y = tf.constant(np.arange(8, dtype=np.float32).reshape(8, 1) / 8)

    def train(compiled):
        tf.keras.utils.set_random_seed(3)
        # Built eagerly (Input first), so both runs start from the same weights; the optimizer's
        # state is still created inside the first call of the compiled step.
        model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(4, activation="tanh"),
                                     tf.keras.layers.Dense(1)])
        opt = tf.keras.optimizers.RMSprop(0.05, momentum=0.5)
        mse = tf.keras.losses.MeanSquaredError()

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = mse(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        fn = tf.function(step) if compiled else step
        losses = [float(fn(x, y)) for _ in range(4)]
        return losses, [v.numpy() for v in model.trainable_variables], fn

    l_eager, w_eager, _ = train(False)
    l_comp, w_comp, fn = train(True)
    np.testing.assert_allclose(l_comp, l_eager, rtol=1e-5)
    for a, b in zip(w_comp, w_eager):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert l_eager[-1] < l_eager[0]
    # TF traces a variable-creating function twice (initialisation trace, then the step).
    assert fn.experimental_get_tracing_count() == 2
