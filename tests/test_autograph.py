"""AutoGraph (issue 18): converted control flow under tapejax.function, checked against plain
Python run eagerly and against jax.grad of the same function written with lax."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf


def test_gradient_through_converted_if_while_for_matches_jax():
    @tf.function
    def f(x, w):
        with tf.GradientTape() as t:
            t.watch(x)
            y = x * w
            for i in tf.range(4):
                if tf.reduce_sum(y) > 1.0:
                    y = tf.sin(y) * w
                else:
                    y = y * 1.5 + x
            for _ in tf.range(2):
                y = y * x
            loss = tf.reduce_sum(y)
        return loss, t.gradient(loss, [x, w])

    def pure(x, w):
        y = x * w
        for _ in range(4):
            y = jax.lax.cond(jnp.sum(y) > 1.0, lambda y: jnp.sin(y) * w, lambda y: y * 1.5 + x, y)
        y = y * x * x
        return jnp.sum(y)

    for xv in ([0.3, -0.2], [1.5, 0.7]):
        x, w = tf.constant(xv), tf.Variable(0.8)
        loss, (gx, gw) = f(x, w)
        want = jax.value_and_grad(pure, argnums=(0, 1))(jnp.array(xv), jnp.float32(0.8))
        np.testing.assert_allclose(float(loss), float(want[0]), rtol=1e-5)
        np.testing.assert_allclose(gx.numpy(), np.asarray(want[1][0]), rtol=1e-5)
        np.testing.assert_allclose(float(gw), float(want[1][1]), rtol=1e-5)


def test_converted_training_loop_matches_eager():
    w = tf.Variable([[0.5], [-0.3]])
    w_eager = tf.Variable([[0.5], [-0.3]])
    x = tf.constant([[1.0, 2.0], [0.5, -1.0], [2.0, 0.1]])
    y = tf.constant([[1.0], [0.0], [2.0]])

    def train(w, steps):
        losses = tf.constant(0.0)
        for i in tf.range(steps):
            with tf.GradientTape() as t:
                loss = tf.reduce_mean((tf.matmul(x, w) - y) ** 2)
            g = t.gradient(loss, w)
            if loss > 0.5:
                w.assign_sub(0.1 * g)
            else:
                w.assign_sub(0.01 * g)
            losses += loss
        return losses

    got = tf.function(train)(w, tf.constant(20))
    want = train(w_eager, tf.constant(20))
    np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), w_eager.numpy(), rtol=1e-5)


def test_to_code_do_not_convert_and_autograph_false():
    def f(x):
        while x > 1:
            x = x / 2
        if x > 0.5:
            return x
        return -x

    code = tf.autograph.to_code(f)
    assert "while_stmt" in code and "if_stmt" in code and "retval_" in code
    assert float(tf.function(f)(tf.constant(10.0))) == 0.625
    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError, match="test_autograph.py"):
        tf.function(f, autograph=False)(tf.constant(10.0))


def test_recursive_conversion_of_user_functions_and_methods():
    class Gate:
        def __init__(self, t):
            self.t = t

        def apply(self, x):
            if tf.reduce_sum(x) > self.t:
                x = x * 0.5
            return x

    def twice(g, x):
        return g.apply(g.apply(x))

    class Twice:
        def __call__(self, g, x):
            if tf.reduce_sum(x) < 0:
                x = -x
            return twice(g, x)

    g = Gate(1.0)
    f = tf.function(lambda x: Twice()(g, x))
    for v in ([4.0], [1.5], [0.2], [-3.0]):
        np.testing.assert_allclose(f(tf.constant(v)).numpy(), Twice()(g, tf.constant(v)).numpy())


def test_python_iterables_stay_python_and_tensor_iteration():
    class Batches:
        """A tf.data-like Python iterable: iterated in Python, unrolled in the trace."""

        def __iter__(self):
            return iter([tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])])

    traced = []

    @tf.function
    def f(m):
        traced.append(1)
        s = tf.zeros([2])
        for b in Batches():
            s += b
        for row in m:
            if tf.reduce_sum(row) > 0:
                s += row
        return s

    m = tf.constant([[1.0, 1.0], [-5.0, 1.0], [2.0, 0.0]])
    np.testing.assert_allclose(f(m).numpy(), [7.0, 7.0])
    f(m)
    assert len(traced) == 1


def test_errors_name_the_users_line():
    @tf.function
    def f(x):
        if x > 0:
            y = x
        return y

    with pytest.raises(ValueError, match=r"(?s)test_autograph.py.*if x > 0.*'y' must also be initialized in the else"):
        f(tf.constant(1.0))

    @tf.function
    def g(x):
        s = tf.constant(0)
        while s < 3:
            s = tf.cast(s, tf.float32) + x
        return s

    with pytest.raises(TypeError, match="'s' has dtype int32 before the loop, but dtype float32"):
        g(tf.constant(1.0))


def test_run_functions_eagerly_runs_python_every_call():
    calls = []

    @tf.function
    def f(x):
        calls.append(1)
        if x > 0:
            return x.numpy() * 2
        return -x.numpy()

    tf.config.run_functions_eagerly(True)
    try:
        assert f(tf.constant(2.0)) == 4.0 and f(tf.constant(-1.0)) == 1.0
    finally:
        tf.config.run_functions_eagerly(False)
    assert len(calls) == 2 and not tf.config.functions_run_eagerly()


def test_unconvertible_code_falls_back_to_eager_with_one_warning():
    """Code autograph cannot read (built by exec, no source) with a tensor condition: the
    call runs eagerly, with one AutoGraphWarning naming the line, and gives eager Python's
    numbers (TF raises OperatorNotAllowedInGraphError here: compat_docs/differences.md)."""
    ns = {}
    exec("def absval(x):\n    if x > 0:\n        return x\n    return -x\n", ns)  # noqa: S102
    absval = ns["absval"]

    @tf.function
    def f(x):
        return absval(x) * 2.0

    with pytest.warns(tf.autograph.AutoGraphWarning, match="runs eagerly") as rec:
        got = [float(f(tf.constant(v))) for v in (-3.0, 2.0, -1.0)]
    assert got == [6.0, 4.0, 2.0]
    assert len(rec) == 1 and "line 2" in str(rec[0].message)


def test_lambdas_are_converted():
    f = tf.function(lambda x: x * 2.0 if tf.reduce_sum(x) > 0 else -x)
    np.testing.assert_allclose(f(tf.constant([1.0])).numpy(), [2.0])
    np.testing.assert_allclose(f(tf.constant([-1.0])).numpy(), [1.0])
