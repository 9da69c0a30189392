"""tf.stop_gradient, tf.custom_gradient and tf.recompute_grad, against analytic values and jax.grad."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax as tf
from tapejax._engine import _replay


def P() -> tf.GradientTape:
    return tf.GradientTape(persistent=True)


def f32(x) -> np.ndarray:
    return np.asarray(x, np.float32)


# ---------------------------------------------------------------------------
# stop_gradient


def test_stop_gradient_value_and_cut():
    x = tf.constant([1.0, 2.0])
    with P() as g:
        g.watch(x)
        s = tf.stop_gradient(x)
        y = x * s
    np.testing.assert_array_equal(s.numpy(), [1.0, 2.0])
    assert s is not x
    np.testing.assert_allclose(g.gradient(y, x).numpy(), [1.0, 2.0])  # d(x*c)/dx = c
    assert g.gradient(s, x) is None
    np.testing.assert_array_equal(g.gradient(s, x, unconnected_gradients="zero").numpy(), [0.0, 0.0])


def test_stop_gradient_output_is_not_watched():
    # TF never records StopGradient, so its output is not watched: a value computed
    # only from it is not recorded, even with the output itself as the source.
    x = tf.constant(3.0)
    with P() as g:
        g.watch(x)
        s = tf.stop_gradient(x)
        z = s * 2.0
    assert g.gradient(z, s) is None
    assert g.gradient(z, x) is None
    assert float(g.gradient(s, s)) == 1.0


def test_stop_gradient_on_variable_and_python_value():
    v = tf.Variable(3.0)
    with P() as g:
        y = tf.stop_gradient(v) * v
    assert float(g.gradient(y, v)) == 3.0
    assert float(tf.stop_gradient(2.5)) == 2.5


def test_stop_gradient_notes_only_on_watching_tapes():
    x, w = tf.constant(1.0), tf.constant(2.0)
    with P() as g:
        g.watch(x)
        tf.stop_gradient(x)
        tf.stop_gradient(w)
    notes = [n for n in g._tape.notes if n[0] == "stop_gradient"]
    assert [n[1] for n in notes] == [x._id]


# ---------------------------------------------------------------------------
# custom_gradient: the TF examples


@tf.custom_gradient
def log1pexp(x):
    e = tf.exp(x)

    def grad(upstream):
        return upstream * (1 - 1 / (1 + e))

    return tf.math.log(1 + e), grad


def test_log1pexp_uses_the_custom_gradient():
    x = tf.constant(100.0)
    with P() as g:
        g.watch(x)
        y = log1pexp(x)
    assert np.isinf(y.numpy())  # float32 overflow of exp, as in TF
    assert float(g.gradient(y, x)) == 1.0


def test_upstream_is_passed_to_grad_fn():
    x = tf.constant(2.0)
    with P() as g:
        g.watch(x)
        y = log1pexp(x) * 3.0
    sig = 1.0 / (1.0 + np.exp(-2.0))
    np.testing.assert_allclose(float(g.gradient(y, x)), 3 * sig, rtol=1e-6)
    np.testing.assert_allclose(float(g.gradient(y, x, output_gradients=2.0)), 6 * sig, rtol=1e-6)


def test_functional_form_and_name():
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    h = tf.custom_gradient(f)
    assert h.__name__ == "f"
    x = tf.constant(1.0)
    with P() as g:
        g.watch(x)
        y = h(x)
    assert float(y) == 2.0 and float(g.gradient(y, x)) == 100.0


def test_decorator_with_parentheses():
    @tf.custom_gradient()
    def f(x):
        return x * 2.0, lambda dy: dy * 5.0

    x = tf.constant(1.0)
    with P() as g:
        g.watch(x)
        y = f(x)
    assert float(g.gradient(y, x)) == 5.0


@given(st.lists(st.floats(-3, 3, width=32), min_size=1, max_size=4))
@settings(max_examples=8)
def test_custom_gradient_equal_to_true_gradient_matches_jax(xs):
    # A custom rule that IS the true derivative gives jax.grad's numbers.
    @tf.custom_gradient
    def sin_sq(x):
        def grad(dy):
            return dy * 2.0 * tf.sin(x) * tf.cos(x)

        return tf.sin(x) * tf.sin(x), grad

    x = tf.constant(f32(xs))
    with P() as g:
        g.watch(x)
        y = tf.reduce_sum(sin_sq(x) * x)
    expected = jax.grad(lambda v: jnp.sum(jnp.sin(v) ** 2 * v))(jnp.asarray(f32(xs)))
    np.testing.assert_allclose(g.gradient(y, x).numpy(), np.asarray(expected), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# custom_gradient: inputs, outputs, None


def test_two_inputs_list_grads_and_none():
    @tf.custom_gradient
    def f(a, b):
        def grad(dy):
            return [dy, dy * 2.0]

        return a * b, grad

    @tf.custom_gradient
    def h(a, b):
        def grad(dy):
            return None, dy * 2.0

        return a * b, grad

    a, b = tf.constant(1.0), tf.constant(2.0)
    with P() as g:
        g.watch([a, b])
        y = f(a, b)
        z = h(a, b)
    assert [float(t) for t in g.gradient(y, [a, b])] == [1.0, 2.0]
    ga, gb = g.gradient(z, [a, b])
    assert ga is None and float(gb) == 2.0  # None from grad_fn means no gradient, as in TF
    assert float(g.gradient(z, a, unconnected_gradients="zero")) == 0.0


def test_grad_fn_returning_none_for_the_only_input():
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: None

    x = tf.constant(1.0)
    with P() as g:
        g.watch(x)
        y = f(x)
    assert g.gradient(y, x) is None


def test_wrong_number_of_gradients():
    @tf.custom_gradient
    def f(a, b):
        return a * b, lambda dy: dy

    @tf.custom_gradient
    def h(a):
        return a * 2.0, lambda dy: (dy, dy)

    a, b = tf.constant(1.0), tf.constant(2.0)
    with P() as g:
        g.watch([a, b])
        y = f(a, b)
        z = h(a)
    # (str() is TF's exact message; JAX may add a traceback note, which pytest's match would see)
    with pytest.raises(ValueError) as e:
        g.gradient(y, [a, b])
    assert str(e.value) == "custom_gradient function expected to return 2 gradients, but returned 1 instead."
    with pytest.raises(ValueError) as e:
        g.gradient(z, a)
    assert str(e.value) == "custom_gradient function expected to return 1 gradients, but returned 2 instead."


def test_multiple_outputs_get_one_upstream_each_and_zero_when_unused():
    seen = []

    @tf.custom_gradient
    def f(x):
        def grad(da, db):
            seen.append(2)
            return da * 10.0 + db * 100.0

        return [x * 2.0, x * 3.0], grad

    x = tf.constant(1.0)
    with P() as g:
        g.watch(x)
        a, b = f(x)
        only_a = a * 10.0
        both = a + b
    assert [float(a), float(b)] == [2.0, 3.0]
    assert float(g.gradient(only_a, x)) == 100.0  # upstreams (10, 0)
    assert float(g.gradient(both, x)) == 110.0  # upstreams (1, 1)
    assert seen  # grad_fn ran with two positional upstreams


def test_one_argument_grad_fn_for_two_outputs_is_a_type_error():
    @tf.custom_gradient
    def f(x):
        return [x * 2.0, x * 3.0], lambda dy: dy

    x = tf.constant(1.0)
    with P() as g:
        g.watch(x)
        a, b = f(x)
        y = a + b
    with pytest.raises(TypeError):
        g.gradient(y, x)


def test_dict_output_flat_upstreams():
    @tf.custom_gradient
    def f(x):
        def grad(da, db):  # flattened (sorted keys), as TF does
            return da * 100.0 + db

        return {"a": x * 2.0, "b": x}, grad

    x = tf.constant(1.0)
    with P() as g:
        g.watch(x)
        y = f(x)
    assert sorted(y) == ["a", "b"]
    assert float(g.gradient(y["a"], x)) == 100.0
    assert float(g.gradient(y, x)) == 101.0


def test_result_not_a_pair_is_a_type_error():
    @tf.custom_gradient
    def f(x):
        return x * 2.0

    with pytest.raises(TypeError, match="Cannot iterate over a scalar tensor."):
        f(tf.constant(1.0))


def test_python_args_kwargs():
    @tf.custom_gradient
    def f(x, n, k=1.0):
        return x * k, lambda dy: (dy * k, None)

    @tf.custom_gradient
    def h(x, k=None):
        return x * k, lambda dy: dy * 3.0

    x, kt = tf.constant(1.0), tf.constant(5.0)
    with P() as g:
        g.watch([x, kt])
        y = f(x, 3, k=5.0)
        z = h(x, k=kt)
    assert float(y) == 5.0 and float(g.gradient(y, x)) == 5.0
    gx, gk = g.gradient(z, [x, kt])
    assert float(gx) == 3.0 and gk is None  # keyword arguments get no gradient, as in TF
    assert isinstance(f(2.0, 0), tf.Tensor)  # Python results become tensors


def test_no_tape_returns_new_tensor():
    @tf.custom_gradient
    def f(x):
        return x, lambda dy: dy

    x = tf.constant(1.0)
    y = f(x)
    assert y is not x and float(y) == 1.0


def test_grad_shape_broadcasts_or_raises():
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: tf.constant(1.0)  # a scalar for a vector input

    @tf.custom_gradient
    def h(x):
        return x * 2.0, lambda dy: tf.constant([1.0, 2.0, 3.0])

    x = tf.constant([1.0, 2.0])
    with P() as g:
        g.watch(x)
        y = f(x)
        z = h(x)
    np.testing.assert_array_equal(g.gradient(y, x).numpy(), [1.0, 1.0])
    with pytest.raises(ValueError, match="grad_fn returned a gradient of shape"):
        g.gradient(z, x)


def test_complex_convention_matches_plain_ops():
    # grad_fn written in TF's convention (conj of the holomorphic derivative) gives
    # the same gradient as the plain ops do on the tape.
    @tf.custom_gradient
    def sq(z):
        return z * z, lambda dy: dy * tf.math.conj(2.0 * z)

    z = tf.constant(3.0 + 4.0j, tf.complex64)
    with P() as g:
        g.watch(z)
        a = tf.math.real(sq(z) * tf.math.conj(sq(z)))
        b = tf.math.real((z * z) * tf.math.conj(z * z))
        c = sq(z)
        d = z * z
    np.testing.assert_allclose(g.gradient(a, z).numpy(), g.gradient(b, z).numpy(), rtol=1e-5)
    np.testing.assert_allclose(g.gradient(c, z).numpy(), g.gradient(d, z).numpy(), rtol=1e-5)
    np.testing.assert_allclose(g.gradient(c, z).numpy(), 6 - 8j, rtol=1e-6)


# ---------------------------------------------------------------------------
# custom_gradient with variables


def test_variables_form():
    v = tf.Variable(3.0)

    @tf.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            assert len(variables) == 1 and variables[0] is v
            return dy * 1.0, [dy * 7.0]

        return x * v, grad

    x = tf.constant(2.0)
    with P() as g:
        g.watch(x)
        y = f(x)
    assert float(y) == 6.0
    assert [float(t) for t in g.gradient(y, [x, v])] == [1.0, 7.0]
    assert list(g.watched_variables()) == [v]


def test_variables_grad_fn_can_use_the_variable():
    v = tf.Variable(3.0)

    @tf.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            return dy * v, [dy * x]

        return x * v, grad

    x = tf.constant(2.0)
    with P() as g:
        g.watch(x)
        y = f(x) * f(x)  # y = (xv)^2
    gx, gv = g.gradient(y, [x, v])
    assert float(gx) == pytest.approx(2 * 2.0 * 9.0)
    assert float(gv) == pytest.approx(2 * 4.0 * 3.0)


def test_variables_without_kwarg_is_a_type_error():
    v = tf.Variable(3.0)

    @tf.custom_gradient
    def f(x):
        return x * v, lambda dy: dy

    with P() as g, pytest.raises(TypeError) as e:
        f(tf.constant(1.0))
    assert str(e.value) == (
        "@tf.custom_gradient grad_fn must accept keyword argument 'variables', since function uses variables: "
        f"[{v!r}]"
    )
    del g


def test_wrong_number_of_variable_gradients():
    v, w = tf.Variable(3.0), tf.Variable(4.0)

    @tf.custom_gradient
    def f(x):
        return x * v * w, lambda dy, variables=None: (dy, [dy])

    x = tf.constant(1.0)
    with P() as g:
        g.watch(x)
        y = f(x)
    with pytest.raises(ValueError) as e:
        g.gradient(y, [x, v, w])
    assert str(e.value) == "Must return gradient for each variable from @custom_gradient grad_fn."


def test_variable_as_argument_is_an_input_not_a_variable():
    v = tf.Variable(3.0)

    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 7.0

    with P() as g:
        y = f(v)
    assert float(g.gradient(y, v)) == 7.0
    assert list(g.watched_variables()) == [v]


# ---------------------------------------------------------------------------
# custom_gradient: higher order, compiled replays, nesting


def test_second_order_differentiates_grad_fn_ops():
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    x = tf.constant(1.0)
    with P() as outer:
        outer.watch(x)
        with P() as inner:
            inner.watch(x)
            y = f(x) * x
        d = inner.gradient(y, x)
    assert float(d) == 102.0  # 100 * x + f(x)
    assert float(outer.gradient(d, x)) == 200.0  # TF's value: both terms use the custom rule


@pytest.mark.parametrize("x0", [-1.0, 0.5, 2.0])
def test_second_order_sees_values_grad_fn_captured(x0):
    # grad_fn captures e = exp(x); the Hessian must differentiate through it: sigmoid'(x).
    x = tf.constant(x0)
    with P() as outer:
        outer.watch(x)
        with P() as inner:
            inner.watch(x)
            y = log1pexp(x)
        d = inner.gradient(y, x)
    s = 1 / (1 + np.exp(-x0))
    np.testing.assert_allclose(float(d), s, rtol=1e-6)
    np.testing.assert_allclose(float(outer.gradient(d, x)), s * (1 - s), rtol=1e-5)


def test_grad_fn_runs_eagerly_on_every_gradient():
    # TF runs grad_fn eagerly, once per gradient, on concrete values (issue 14, item 8).
    calls = []

    @tf.custom_gradient
    def log1pexp_counted(x):
        e = tf.exp(x)

        def grad(upstream):
            calls.append(float(upstream.numpy()))  # concrete: no JAX trace
            return upstream * (1 - 1 / (1 + e))

        return tf.math.log(1 + e), grad

    x = tf.constant(2.0)
    vals = []
    for _ in range(3):
        with tf.GradientTape() as g:
            g.watch(x)
            y = log1pexp_counted(x) * x
        vals.append(float(g.gradient(y, x)))
    assert calls == [2.0, 2.0, 2.0]
    s = 1 / (1 + np.exp(-2.0))
    np.testing.assert_allclose(vals, [s * 2 + np.log1p(np.exp(2.0))] * 3, rtol=1e-6)


def test_uncompiled_replay_gives_the_same():
    x = tf.constant(2.0)
    _replay.set_compile(False)
    try:
        with tf.GradientTape() as g:
            g.watch(x)
            y = log1pexp(x)
        d = float(g.gradient(y, x))
    finally:
        _replay.set_compile(True)
    np.testing.assert_allclose(d, 1 / (1 + np.exp(-2.0)), rtol=1e-6)


def test_jacobian_uses_the_custom_rule():
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    x = tf.constant([1.0, 2.0])
    with P() as g:
        g.watch(x)
        y = f(x)
    np.testing.assert_array_equal(g.jacobian(y, x).numpy(), [[100.0, 0.0], [0.0, 100.0]])


def test_custom_gradient_inside_recompute_grad_keeps_its_rule():
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 100.0

    block = tf.recompute_grad(lambda x: f(x) * 3.0)
    x = tf.constant(1.0)
    with P() as g:
        g.watch(x)
        y = block(x)
    assert float(y) == 6.0
    assert float(g.gradient(y, x)) == 300.0


# ---------------------------------------------------------------------------
# recompute_grad


def _chain(ws, h):
    for w in ws:
        h = tf.tanh(tf.matmul(h, w))
    return h


def test_recompute_grad_values_and_gradients_match_plain():
    rng = np.random.default_rng(0)
    ws = [tf.constant((rng.normal(size=(3, 3)) / 2).astype(np.float32)) for _ in range(4)]
    x0 = (rng.normal(size=(2, 3))).astype(np.float32)
    x = tf.constant(x0)
    block = tf.recompute_grad(lambda h: _chain(ws, h))
    with P() as g:
        g.watch(x)
        y1 = block(x)
        y2 = _chain(ws, x)
        l1, l2 = tf.reduce_sum(y1 * y1), tf.reduce_sum(y2 * y2)
    # Equal to rounding, not bit for bit: block(x) makes these matmul/tanh signatures' first
    # calls, which NumPy answers on the host (correctly rounded tanh), while _chain's calls come
    # later and run XLA's compiled kernels (compat_docs/differences.md, issue 19).
    np.testing.assert_allclose(y1.numpy(), y2.numpy(), rtol=2e-6, atol=1e-7)
    wv = [w.numpy() for w in ws]

    def ref(h):
        for w in wv:
            h = jnp.tanh(h @ w)
        return jnp.sum(h * h)

    np.testing.assert_allclose(g.gradient(l1, x).numpy(), np.asarray(jax.grad(ref)(x0)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.gradient(l1, x).numpy(), g.gradient(l2, x).numpy(), rtol=1e-6)


def test_recompute_grad_variables_kwargs_multiple_outputs():
    v = tf.Variable(2.0)
    r = tf.recompute_grad(lambda x, s=1.0: [x * v * v * s, x + v])
    x = tf.constant(3.0)
    with P() as g:
        g.watch(x)
        a, b = r(x, s=4.0)
        t = a + b
    assert [float(a), float(b)] == [48.0, 5.0]
    gx, gv = g.gradient(t, [x, v])
    assert float(gx) == 4.0 * 4.0 + 1.0  # s*v^2 + 1
    assert float(gv) == 2 * 3.0 * 2.0 * 4.0 + 1.0  # 2*x*v*s + 1
    assert list(g.watched_variables()) == [v]


def test_recompute_grad_without_tape_and_record_size():
    r = tf.recompute_grad(lambda x: tf.tanh(x) * 2.0)
    assert float(r(tf.constant(0.0))) == 0.0
    x = tf.constant([0.5])
    with P() as g:
        g.watch(x)
        y = r(x)
    assert len(g._tape.eqns) == 1  # one equation for the block: its activations are not kept
    np.testing.assert_allclose(g.gradient(y, x).numpy(), 2 * (1 - np.tanh(0.5) ** 2), rtol=1e-6)


def test_recompute_grad_second_order():
    r = tf.recompute_grad(lambda x: x * x * x)
    x = tf.constant(2.0)
    with P() as outer:
        outer.watch(x)
        with P() as inner:
            inner.watch(x)
            y = r(x)
        d = inner.gradient(y, x)
    assert float(d) == 12.0 and float(outer.gradient(d, x)) == 12.0


@pytest.mark.usefixtures("compile_tier")
def test_recompute_grad_lowers_peak_memory(monkeypatch):
    # A chain of K blocks of M tanh(h @ W) layers; gradient with respect to the input.
    # Plain, every activation is kept (by the tape's record, and by the compiled
    # backward, as a temporary or as a residual argument); with each block under
    # recompute_grad, only the block boundaries are, plus one block's activations
    # while the backward recomputes it.
    B, W, K, M = 256, 32, 8, 8
    rng = np.random.default_rng(1)
    ws = [tf.constant((rng.normal(size=(W, W)) / np.sqrt(W)).astype(np.float32)) for _ in range(K * M)]
    x = tf.constant(rng.normal(size=(B, W)).astype(np.float32))
    weights = {id(w._value) for w in ws}
    captured = []
    orig = _replay._compiled

    def spy(key, avals):
        fn = orig(key, avals)
        return lambda leaves, extra: (captured.append((fn, leaves, extra)), fn(leaves, extra))[1]

    monkeypatch.setattr(_replay, "_compiled", spy)

    def run(blocks):
        captured.clear()
        with tf.GradientTape() as g:
            g.watch(x)
            h = x
            for b in blocks:
                h = b(h)
            loss = tf.reduce_sum(h * h)
        # Both measured on values that ran: lazy mode (TAPEJAX_EXECUTION=lazy) runs the forward
        # when the loss is read, and the gradient when it is read (until then the replay was only
        # shape-evaluated, with tracers).
        loss.numpy()
        held = {id(v): v.nbytes for e in g._tape.eqns for v in e.in_vals if hasattr(v, "nbytes") and id(v) not in weights}
        grad = g.gradient(loss, x)
        grad.numpy()
        fn, leaves, extra = captured[-1]
        m = fn.lower(leaves, extra).compile().memory_analysis()
        return grad, m.temp_size_in_bytes + m.argument_size_in_bytes, sum(held.values())

    def block(k):
        return lambda h: _chain(ws[k * M:(k + 1) * M], h)

    g0, plain, plain_held = run([block(k) for k in range(K)])
    g1, remat, remat_held = run([tf.recompute_grad(block(k)) for k in range(K)])
    np.testing.assert_allclose(g0.numpy(), g1.numpy(), rtol=1e-5, atol=1e-6)
    activation = B * W * 4
    assert plain >= K * M * activation  # the compiled backward holds every activation
    assert remat < 0.5 * plain, (plain, remat)
    assert plain_held >= K * M * activation and remat_held <= (K + 2) * activation  # the tape's record too


# ---------------------------------------------------------------------------
# No stale values: what the functions capture is data of each call, or keys a new program


def test_custom_gradient_sees_a_rebound_captured_tensor():
    box = [tf.constant(2.0)]

    @tf.custom_gradient
    def f(x):
        s = box[0]
        return x * s, lambda dy: dy * s

    x = tf.constant(1.0)
    grads = []
    for v in (2.0, 3.0, 3.0):
        if v != float(box[0]):
            box[0] = tf.constant(v)
        with tf.GradientTape() as g:
            g.watch(x)
            y = f(x) * x
        grads.append(float(g.gradient(y, x)))
    assert grads == [4.0, 6.0, 6.0]  # d(s x^2)/dx = 2 s x


def test_custom_gradient_sees_an_assigned_non_trainable_variable():
    w = tf.Variable(2.0, trainable=False)

    @tf.custom_gradient
    def f(x):
        return x * w, lambda dy: dy * w

    x = tf.constant(1.0)
    grads = []
    for v in (2.0, 5.0):
        w.assign(v)
        with tf.GradientTape() as g:
            g.watch(x)
            y = f(x) * x
        grads.append(float(g.gradient(y, x)))
    assert grads == [4.0, 10.0]


def test_custom_gradient_python_constant_in_closure():
    scale = {"k": 2.0}

    @tf.custom_gradient
    def f(x):
        k = scale["k"]
        return x * k, lambda dy: dy * k

    x = tf.constant(1.0)
    out = []
    for k in (2.0, 7.0):
        scale["k"] = k
        with tf.GradientTape() as g:
            g.watch(x)
            y = f(x) * x
        out.append(float(g.gradient(y, x)))
    assert out == [4.0, 14.0]


def test_grad_fn_with_an_inner_tape_and_nested_custom_gradients():
    @tf.custom_gradient
    def f(x):
        def grad(dy):
            with tf.GradientTape() as t:
                t.watch(x)
                y = tf.sin(x) * x
            return dy * t.gradient(y, x)

        return tf.sin(x) * x, grad

    @tf.custom_gradient
    def outer(x):
        return f(x) * 2.0, lambda dy: dy * 3.0

    x = tf.constant(0.7)
    with P() as g:
        g.watch(x)
        y = f(x)
        z = outer(x)
    np.testing.assert_allclose(float(g.gradient(y, x)), np.cos(0.7) * 0.7 + np.sin(0.7), rtol=1e-6)
    assert float(g.gradient(z, x)) == 3.0


def test_recompute_grad_keeps_the_eager_random_draw():
    tf.random.set_seed(0)
    block = tf.recompute_grad(lambda h: h * tf.random.uniform((4,)))
    x = tf.constant([1.0, 1.0, 1.0, 1.0])
    with P() as g:
        g.watch(x)
        y = block(x)
    # y = x * r with r drawn once, eagerly: the gradient is that r (y at x = 1)
    np.testing.assert_array_equal(g.gradient(y, x).numpy(), y.numpy())


def test_recompute_grad_python_branches_and_captured_values():
    box = [tf.constant(2.0)]
    w = tf.Variable(1.0, trainable=False)

    def f(h):
        if float(tf.reduce_sum(h)) > 0:  # a Python branch on a value: fine, the eager call decides
            return h * box[0] * w
        return -h

    block = tf.recompute_grad(f)
    x = tf.constant([1.0, 2.0])
    res = []
    for s, wv in ((2.0, 1.0), (3.0, 1.0), (3.0, 4.0)):
        box[0] = tf.constant(s)
        w.assign(wv)
        with tf.GradientTape() as g:
            g.watch(x)
            y = tf.reduce_sum(block(x))
        res.append(g.gradient(y, x).numpy().tolist())
    assert res == [[2.0, 2.0], [3.0, 3.0], [12.0, 12.0]]
    with tf.GradientTape() as g:
        g.watch(x)
        y = tf.reduce_sum(block(-x))
    assert g.gradient(y, x).numpy().tolist() == [1.0, 1.0]


@pytest.mark.usefixtures("compile_tier")
def test_recompute_grad_reuses_the_compiled_program():
    block = tf.recompute_grad(lambda h: tf.tanh(h) * 2.0)
    x = tf.constant([0.1, 0.2])
    tf.replay_cache_clear()
    for _ in range(3):
        with tf.GradientTape() as g:
            g.watch(x)
            y = block(x)
        g.gradient(y, x)
    info = tf.replay_cache_info()
    if tf.config.get_execution() == "lazy":
        # Lazy mode: the step's program runs op by op while its compiled form is on its way
        # (``_lazy._Warming``), and each such run looks the replay up again: one compile, reused.
        assert info.misses == 1 and info.hits >= 2
    else:
        assert info.misses == 1 and info.hits == 2
