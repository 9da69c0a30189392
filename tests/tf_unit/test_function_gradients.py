"""Port of TF's ``tensorflow/python/eager/function_gradients_test.py`` to the public API.

Each test runs through the ``tf`` fixture on real TF (``oracle``) and on tapejax.
``def_function.function``/``function.defun`` are ``tf.function``; ``gradients_impl.gradients`` is
``tf.gradients`` (TF 2 supports it inside a ``tf.function``); the private ``backprop`` wrappers are
the tape-based ones of ``_helpers.py``; ``ResourceVariable`` is ``tf.Variable``. The ``setUp`` that
splits the CPU into 4 logical devices is dropped (no test here places ops on them).

Not portable (not counted as tests here), with the reason:
- testGraphGradientVariable, testSymGradGatherNd, testGraphLoopGradientInsideSession,
  testSymbolicGradientVariableNoneNotZerosLike, testDeeplyNestedDifferentiableFunctionWithVariable-
  MultipleTFGrads: a v1 ``ops.Graph()``/``context.graph_mode()`` with a ``Session``.
- testGraphModeEagerGradError: ``run_v1_only``, ``variable_scope.get_variable`` in graph mode.
"""

import numpy as np
import pytest

from _helpers import assert_close, gradients_function, implicit_grad

_NO_TF_GRADIENTS = ("differences.md, '`tf.gradients` is not provided': tapejax differentiates with tapes only; "
                    "use a GradientTape inside the tf.function")


def _cos_derivatives(tf):
    return [tf.cos, lambda x: -tf.sin(x), lambda x: -tf.cos(x), tf.sin, tf.cos]


def test_graph_mode_with_gradients(tf):
    v = tf.Variable(1.0, name="v")

    @tf.function
    def step():
        return implicit_grad(tf, lambda: v * v)()[0][0]

    assert_close(step(), 2.0)


@pytest.mark.tapejax_xfail(reason=_NO_TF_GRADIENTS)
def test_symbolic_higher_order(tf):
    @tf.function
    def f(x, order):
        y = tf.function(lambda: tf.cos(x))()
        for _ in range(order):
            y, = tf.gradients(y, [x])
        return y

    for order, expected in enumerate(_cos_derivatives(tf)):
        assert_close(f(tf.constant(1.), order), expected(tf.constant(1.)), rtol=1e-6)


@pytest.mark.tapejax_xfail(reason=_NO_TF_GRADIENTS)
@pytest.mark.parametrize("persistent", [True, False])
def test_symbolic_higher_order_under_tape(tf, persistent):
    @tf.function
    def f(x, order):
        with tf.GradientTape(persistent=persistent) as tape:
            tape.watch(x)
            y = tf.function(lambda: tf.cos(x))()
        tape_dy = tape.gradient(y, x)
        for _ in range(order):
            y, = tf.gradients(y, [x])
        if order > 0:
            y1 = tape_dy
            for _ in range(order - 1):
                y1, = tf.gradients(y1, [x])
        else:
            y1 = y
        return y, y1

    for order, expected_f in enumerate(_cos_derivatives(tf)):
        expected = expected_f(tf.constant(1.))
        assert_close(f(tf.constant(1.), order), (expected, expected), rtol=1e-6)


def test_iterated_gradients_nested(tf):
    def _grad(f):
        def _grad_function(primal):
            with tf.GradientTape() as tape:
                tape.watch(primal)
                primal_out = f(primal)
            return tape.gradient(primal_out, primal)

        return _grad_function

    @tf.function
    def _forward(x):
        return tf.cos(x)

    f = _forward
    traced_f = tf.function(f)
    one = tf.constant(1.)
    for expected in _cos_derivatives(tf):
        assert_close(f(one), expected(one), rtol=1e-6)
        assert_close(traced_f(one), expected(one), rtol=1e-6)
        assert_close(tf.function(f)(one), expected(one), rtol=1e-6)
        f = _grad(f)
        traced_f = tf.function(_grad(traced_f))


def test_iterated_gradients_nested_with_variable(tf):
    def _grad(f):
        def _grad_function():
            with tf.GradientTape() as tape:
                primal_out = f()
            g, = tape.gradient(primal_out, tape.watched_variables())
            return g

        return _grad_function

    v = tf.Variable(2.)

    @tf.function
    def _forward():
        return tf.cos(v)

    f = _forward
    two = tf.constant(2.)
    for expected in _cos_derivatives(tf):
        assert_close(f(), expected(two), rtol=1e-6)
        assert_close(tf.function(f)(), expected(two), rtol=1e-6)
        f = _grad(f)


def test_iterated_gradients_persistent(tf):
    @tf.function
    def _forward(z):
        return tf.cos(z)

    with tf.GradientTape(persistent=True) as tape:
        start = tf.constant(1.)
        tape.watch(start)
        x = _forward(start)
        for expected in _cos_derivatives(tf):
            assert_close(x, expected(start), rtol=1e-6)
            x = tape.gradient(x, start)


def test_higher_order_with_variable(tf):
    v = tf.Variable(1.)

    @tf.function
    def _forward():
        return tf.cos(v)

    with tf.GradientTape(persistent=True) as tape:
        x = _forward()
        for expected in _cos_derivatives(tf):
            assert_close(x, expected(tf.constant(1.)), rtol=1e-6)
            x, = tape.gradient(x, tape.watched_variables())


def test_gradients_chained(tf):
    @tf.function
    def _forward(z):
        return tf.cos(z)

    x = tf.constant(1.)
    with tf.GradientTape() as t:
        t.watch(x)
        y = _forward(x)
    with tf.GradientTape() as tt:
        doutputs = tf.constant(2.)
        tt.watch(doutputs)
        g = t.gradient(y, x, doutputs)
    assert_close(g, -2. * tf.sin(x), rtol=1e-6)
    assert_close(tt.gradient(g, doutputs), -tf.sin(x), rtol=1e-6)


@pytest.mark.tapejax_xfail(reason=_NO_TF_GRADIENTS)
def test_no_sym_grad_nested_defun(tf):
    @tf.function
    def outer():
        @tf.function
        def f(x):
            return tf.gather_nd(x, [[0]])

        c = tf.constant([[2.]])
        g, = tf.gradients(f(c), c)
        assert isinstance(g, tf.IndexedSlices)

    outer()


def test_graph_function_with_gradients(tf):
    v = tf.Variable(1.0, name="v")

    @tf.function
    def step():
        return implicit_grad(tf, lambda: v * v)()[0][0]

    step_op = step.get_concrete_function()
    assert step_op.output_dtypes == tf.float32
    assert step_op.output_shapes == tf.TensorShape([])
    assert_close(step_op(), 2.0)


def test_defun_cond_gradient(tf):
    @tf.function
    def f(x):
        return tf.cond(x > 0.5, lambda: 2 * x, lambda: 3 * x)

    with tf.GradientTape() as t:
        x = tf.constant(1.0)
        t.watch(x)
        y = f(x)
    assert_close(t.gradient(y, x), 2.0)


@pytest.mark.tapejax_xfail(reason="differences.md, 'Control flow inside `tapejax.function`: static shapes, "
                            "bounded reverse-mode loops': a reverse-mode gradient through a lowered tf.while_loop "
                            "needs maximum_iterations (tapejax raises UnimplementedError saying so)")
def test_graph_loop_gradient(tf):
    @tf.function
    def f(x):
        return tf.while_loop(lambda _, i: i < 2, lambda x, i: (2 * x, i + 1), [x, 0])[0]

    with tf.GradientTape() as t:
        x = tf.constant(1.0)
        t.watch(x)
        y = f(x)
    assert_close(t.gradient(y, x), 4.0)


def test_defun_differentiable(tf):
    v = tf.Variable(1.0)

    @tf.function
    def f():
        return v * v

    assert_close(implicit_grad(tf, f)()[0][0], 2.0)


def test_defun_can_be_differentiated_twice(tf):
    v = tf.Variable(1.0)

    @tf.function
    def f():
        return v * v

    assert_close(implicit_grad(tf, f)()[0][0], 2.0)
    assert_close(implicit_grad(tf, f)()[0][0], 2.0)  # v is watched again


def test_defun_call_backprop(tf):
    @tf.function
    def f(x):
        return tf.add(x, x)

    @tf.function
    def g(x):
        return gradients_function(tf, f, [0])(x)[0]

    assert_close(g(tf.constant(2.)), 2)


def test_defun_call_backprop_using_same_object_for_multiple_arguments(tf):
    @tf.function
    def g(x):
        return gradients_function(tf, tf.multiply, [0, 1])(x, x)

    def np_g(x):
        return [d.numpy() for d in g(x)]

    assert_close(np_g(tf.constant(1.)), [1., 1.])
    assert_close(np_g(1.), [1., 1.])


def test_gradient_tensor_conversion_with_defun(tf):
    three = tf.Variable(3.0, name="v")

    @tf.function
    def f(x):
        return tf.add(x, three)

    g = implicit_grad(tf, lambda x: f(x))(tf.constant(1.0))[0][0]
    assert_close(g, 1.0)


def test_gradient(tf):
    matmul = tf.function(tf.matmul)
    grad_t, = gradients_function(tf, lambda x: matmul(x, x, transpose_a=True), [0])(
        tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    assert_close(grad_t, [[6, 6], [14, 14]])


def test_gradient_in_function(tf):
    @tf.function
    def f(x):
        return gradients_function(tf, lambda y: y * y, [0])(x)[0]

    assert_close(f(tf.constant(1.0)), 2.0)


@pytest.mark.tapejax_xfail(reason="differences.md, 'Gradients of `tf.gather` are dense tensors, not "
                            "`tf.IndexedSlices`': the gradients have no .values/.indices")
def test_gradient_of_gather_with_defun(tf):
    v = tf.Variable([0.0, 1.0, 2.0])

    def sum_gather():
        return tf.reduce_sum(tf.gather(v, [1, 2]))

    gradient = implicit_grad(tf, sum_gather)()
    defun_gradient = implicit_grad(tf, tf.function(sum_gather))()
    assert len(gradient) == len(defun_gradient)
    gradient = gradient[0][0]
    defun_gradient = defun_gradient[0][0]
    assert_close(gradient.values, defun_gradient.values)
    assert_close(gradient.indices, defun_gradient.indices)
    assert_close(gradient.dense_shape, defun_gradient.dense_shape)


def test_differentiable_function_none_outputs(tf):
    @tf.function
    def my_function(x):
        return x, None

    g = gradients_function(tf, lambda x: my_function(x)[0], [0])(tf.constant(0.0))
    assert_close(g[0], 1.)

    @tf.function
    def foo(a):
        return None, a * a

    x = tf.constant(5.0)
    with tf.GradientTape() as tp:
        tp.watch(x)
        none, r = foo(x)
    g = tp.gradient(r, x)
    assert none is None
    assert_close(r, 25.0)
    assert_close(g, 2 * 5.0)


def test_nested_differentiable_function(tf):
    @tf.function
    def inner_fn(a, b):
        return a * tf.add(a, b)

    @tf.function
    def outer_fn(x):
        return inner_fn(x, 1.0)

    x = tf.constant(5.0)
    with tf.GradientTape() as tp:
        tp.watch(x)
        result = outer_fn(x)
    assert_close(tp.gradient(result, x), 2 * 5.0 + 1.0)


def _nested_fns(tf, b_is_inner=True):
    @tf.function
    def inner_inner_fn(a, b):
        return tf.add(a, b)

    @tf.function
    def inner_fn(a, b):
        return inner_inner_fn(a, b)

    @tf.function
    def middle_fn(a, b):
        return a * inner_fn(a, b)

    return inner_fn, middle_fn


def test_deeply_nested_differentiable_function(tf):
    _, middle_fn = _nested_fns(tf)

    @tf.function
    def outer_fn(x):
        return middle_fn(x, 1.0)

    x = tf.constant(5.0)
    with tf.GradientTape() as tp:
        tp.watch(x)
        result = outer_fn(x)
    assert_close(tp.gradient(result, x), 2 * 5.0 + 1.0)


def test_deeply_nested_differentiable_function_with_multiple_grad_calls(tf):
    @tf.function
    def inner_fn(a, b):
        return tf.add(a, b)

    @tf.function
    def middle_fn(a, b):
        return tf.multiply(a, inner_fn(a, b))

    @tf.function
    def outer_fn(x):
        return middle_fn(x, 3.0)

    x = tf.constant(5.0)
    assert_close(outer_fn(x), 5.0 * (5.0 + 3.0))
    with tf.GradientTape() as tp:
        tp.watch(x)
        result = outer_fn(x)
    assert_close(tp.gradient(result, x), 2 * 5.0 + 3.0)
    assert_close(outer_fn(x), 5.0 * (5.0 + 3.0))
    assert_close(middle_fn(3.0, x), 3.0 * (3.0 + 5.0))
    with tf.GradientTape() as tp:
        tp.watch(x)
        result = outer_fn(x)
    assert_close(tp.gradient(result, x), 2 * 5.0 + 3.0)
    y = tf.constant(4.0)
    with tf.GradientTape() as tp:
        tp.watch(y)
        result = outer_fn(y)
    assert_close(tp.gradient(result, y), 2 * 4.0 + 3.0)
    with tf.GradientTape() as tp:
        tp.watch(y)
        result = inner_fn(y, y)
    assert_close(tp.gradient(result, y), 2.0)


@pytest.mark.parametrize("depth", [1, 2, 3], ids=["InDefun", "InNestedDefun", "InMultNestedDefun"])
def test_deeply_nested_differentiable_function_gradient_tape(tf, depth):
    _, middle_fn = _nested_fns(tf)

    @tf.function
    def fn(x):
        with tf.GradientTape() as tp:
            tp.watch(x)
            result = middle_fn(x, 1.0)
        return tp.gradient(result, x)

    for _ in range(depth - 1):
        fn = tf.function(fn)
    assert_close(fn(tf.constant(5.0)), 2 * 5.0 + 1.0)


@pytest.mark.tapejax_xfail(reason=_NO_TF_GRADIENTS)
@pytest.mark.parametrize("depth", [1, 2, 3], ids=["InDefun", "InNestedDefun", "InMultNestedDefun"])
def test_deeply_nested_differentiable_function_tf_gradient(tf, depth):
    _, middle_fn = _nested_fns(tf)

    @tf.function
    def fn(x):
        result = middle_fn(x, 1.0)
        return tf.gradients(result, [x])[0]

    for _ in range(depth - 1):
        fn = tf.function(fn)
    assert_close(fn(tf.constant(5.0)), 2 * 5.0 + 1.0)


def test_deeply_nested_differentiable_function_with_variable(tf):
    var = tf.Variable(tf.constant(1.0))

    @tf.function
    def inner_fn(a, b):
        return tf.add(a, b)

    @tf.function
    def middle_fn(a, b):
        return a * inner_fn(a, b)

    @tf.function
    def outer_fn(x):
        return middle_fn(x, var)

    x = tf.constant(5.0)
    with tf.GradientTape() as tp:
        tp.watch(x)
        result = outer_fn(x)
    assert_close(tp.gradient(result, x), 2 * 5.0 + 1.0)


def test_deeply_nested_differentiable_function_with_variable_multiple_grad_calls(tf):
    v = tf.Variable(tf.constant(3.0))

    @tf.function
    def inner_fn(a, b):
        return tf.add(a, b)

    @tf.function
    def middle_fn(a, b):
        return tf.multiply(a, inner_fn(a, b))

    @tf.function
    def outer_fn(x):
        return middle_fn(x, v)

    def grad_of(fn, x):
        with tf.GradientTape() as tp:
            tp.watch(x)
            result = fn(x)
        return tp.gradient(result, x)

    x = tf.constant(5.0)
    assert_close(outer_fn(x), 5.0 * (5.0 + 3.0))
    assert_close(grad_of(outer_fn, x), 2 * 5.0 + 3.0)
    assert_close(outer_fn(x), 5.0 * (5.0 + 3.0))
    assert_close(middle_fn(v, x), 3.0 * (3.0 + 5.0))
    assert_close(grad_of(outer_fn, x), 2 * 5.0 + 3.0)
    y = tf.constant(4.0)
    assert_close(grad_of(outer_fn, y), 2 * 4.0 + 3.0)
    v.assign(tf.constant(1.5))
    assert_close(grad_of(outer_fn, y), 2 * 4.0 + 1.5)
    assert_close(grad_of(lambda y: inner_fn(y, v), y), 1.0)


def test_nested_differentiable_function_none_outputs(tf):
    @tf.function
    def foo(a, b):
        return None, a * tf.add(a, b), None, 2 * a

    @tf.function
    def bar(x):
        return foo(x, 1.0)

    x = tf.constant(5.0)
    with tf.GradientTape(persistent=True) as tp:
        tp.watch(x)
        none1, r1, none2, r2 = bar(x)
    g1 = tp.gradient(r1, x)
    g2 = tp.gradient(r2, x)
    assert_close(r1, 30.0)
    assert_close(r2, 10.0)
    assert none1 is None
    assert none2 is None
    assert_close(g1, 2 * 5.0 + 1.0)
    assert_close(g2, 2.0)


def test_gradient_with_keyword_arguments(tf):
    matmul = tf.function(tf.matmul)
    t = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    grad_t, = gradients_function(tf, lambda x: matmul(a=x, b=x, transpose_a=True), [0])(t)
    assert_close(grad_t, [[6, 6], [14, 14]])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(t)
        one = matmul(t, b=t, transpose_a=True)
        two = matmul(b=t, a=t, transpose_a=True)
        three = matmul(a=t, b=t, transpose_a=True)
    for output in [one, two, three]:
        assert_close(tape.gradient(output, t), [[6, 6], [14, 14]])


def test_gradient_in_function_with_keyword_arguments(tf):
    @tf.function
    def f(x):
        return gradients_function(tf, lambda y: y * y, [0])(x)[0]

    assert_close(f(x=tf.constant(1.0)), 2.0)


def test_function_has_no_second_order_gradient(tf):
    v = tf.Variable(1.)

    @tf.function
    def f(labels, logits):
        return tf.function(tf.nn.sparse_softmax_cross_entropy_with_logits)(labels=labels, logits=logits + v)

    @tf.function
    def f_grad():
        with tf.GradientTape() as tape:
            logits = tf.constant([1., 2.])
            tape.watch(logits)
            out = f(tf.constant(1), logits)
        return tape.gradient(out, logits)

    assert list(f_grad().shape) == [2]


def test_backward_none(tf):
    model = tf.Variable(1.0, name="model")
    count = tf.Variable(0)

    @tf.function
    def forward_pass(value):
        count.assign_add(1)
        residuals = value - model
        loss = 0.5 * tf.reduce_mean(tf.pow(residuals, 2))
        return loss, count  # count is an integer, so its output gradient is None

    with tf.GradientTape() as t:
        loss, _ = forward_pass(tf.constant([7.0]))
    g = t.gradient(loss, model)
    assert_close(tf.nest.flatten(g), [-6.0])
