"""Oracle jobs whose TF side needs TF's own Keras (tests/oracle/_tf_side.py runs them in a
subprocess: this test process's keras is the JAX one); imports nothing from the test suite,
so that subprocess can load it."""

import tempfile

import numpy as np


def checkpoint_restores_optimizer_slots(tf):
    # Train, save, rebuild model and optimizer, restore, train on: Adam's moments and step count come back.
    d = tempfile.mkdtemp(prefix="tapejax_ckpt_")

    def make():
        m = tf.Module()
        m.w = tf.Variable([[0.5, -0.3], [0.1, 0.2]])
        m.b = tf.Variable([0.0, 0.1])
        return m, tf.keras.optimizers.Adam(learning_rate=0.1)

    x = tf.constant([[1.0, 2.0], [3.0, -1.0]])

    def step(m, opt):
        with tf.GradientTape() as g:
            loss = tf.reduce_sum((x @ m.w + m.b) ** 2)
        opt.apply_gradients(zip(g.gradient(loss, [m.w, m.b]), [m.w, m.b]))

    m, opt = make()
    for _ in range(3):
        step(m, opt)
    path = tf.train.Checkpoint(model=m, optimizer=opt).save(d + "/ck")
    for _ in range(2):
        step(m, opt)
    m2, opt2 = make()
    opt2.build([m2.w, m2.b])
    tf.train.Checkpoint(model=m2, optimizer=opt2).restore(path)
    restored_iterations = int(opt2.iterations.numpy())
    for _ in range(2):
        step(m2, opt2)
    # Compared within each framework (the optimizer's own numbers are tapejax.keras's business):
    # training on from the restore must equal training without the interruption.
    return [restored_iterations, bool(np.allclose(m2.w.numpy(), m.w.numpy(), rtol=1e-6, atol=1e-7)),
            bool(np.allclose(m2.b.numpy(), m.b.numpy(), rtol=1e-6, atol=1e-7))]


def optimizer_built_inside_the_step(tf):
    # TF: a tf.function that builds an optimizer (new slot variables) on every call raises.
    w = tf.Variable([1.0, 2.0])

    @tf.function
    def step(x):
        opt = tf.keras.optimizers.SGD(0.1)
        with tf.GradientTape() as t:
            loss = tf.reduce_sum(w * x)
        opt.apply_gradients(zip([t.gradient(loss, w)], [w]))
        return loss

    step(tf.constant([1.0, 1.0]))
    return "no error"
