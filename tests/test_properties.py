"""Property tests: random compositions of ~20 ops give the gradients of ``jax.grad`` on the same
pure jnp function (issue 2)."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tapejax as tf

# Each op: (name, tapejax version, jnp version) acting on (h, a, b, w).
OPS = [
    ("sin", lambda h, a, b, w: tf.sin(h), lambda h, a, b, w: jnp.sin(h)),
    ("cos", lambda h, a, b, w: tf.cos(h), lambda h, a, b, w: jnp.cos(h)),
    ("tanh", lambda h, a, b, w: tf.tanh(h), lambda h, a, b, w: jnp.tanh(h)),
    ("sigmoid", lambda h, a, b, w: tf.sigmoid(h), lambda h, a, b, w: jax.nn.sigmoid(h)),
    ("softplus", lambda h, a, b, w: tf.math.softplus(h), lambda h, a, b, w: jax.nn.softplus(h)),
    ("square", lambda h, a, b, w: tf.square(h), lambda h, a, b, w: h * h),
    ("mul_a", lambda h, a, b, w: h * a, lambda h, a, b, w: h * a),
    ("add_b", lambda h, a, b, w: h + b, lambda h, a, b, w: h + b),
    ("sub_scalar", lambda h, a, b, w: 0.5 - h, lambda h, a, b, w: 0.5 - h),
    ("div", lambda h, a, b, w: h / (1.0 + h * h), lambda h, a, b, w: h / (1.0 + h * h)),
    ("matmul", lambda h, a, b, w: tf.matmul(h, w), lambda h, a, b, w: h @ w),
    ("sum_keep", lambda h, a, b, w: h - tf.reduce_sum(h, axis=0, keepdims=True),
     lambda h, a, b, w: h - jnp.sum(h, axis=0, keepdims=True)),
    ("mean_keep", lambda h, a, b, w: h * tf.reduce_mean(h, axis=1, keepdims=True),
     lambda h, a, b, w: h * jnp.mean(h, axis=1, keepdims=True)),
    ("max_bcast", lambda h, a, b, w: h + tf.reduce_max(h, axis=1, keepdims=True),
     lambda h, a, b, w: h + jnp.max(h, axis=1, keepdims=True)),
    ("pow3", lambda h, a, b, w: h**3, lambda h, a, b, w: h**3),
    ("exp_small", lambda h, a, b, w: tf.exp(tf.tanh(h)), lambda h, a, b, w: jnp.exp(jnp.tanh(h))),
    ("transpose_mm", lambda h, a, b, w: tf.matmul(h, w, transpose_b=True),
     lambda h, a, b, w: h @ w.T),
    ("row_slice", lambda h, a, b, w: h * h[0:1, :], lambda h, a, b, w: h * h[0:1, :]),
]

arrays = st.lists(st.floats(-1.5, 1.5, allow_nan=False, width=32), min_size=12, max_size=12)


@given(
    prog=st.lists(st.integers(0, len(OPS) - 1), min_size=1, max_size=20),
    av=arrays,
    bv=st.lists(st.floats(-1.5, 1.5, width=32), min_size=4, max_size=4),
    wv=st.lists(st.floats(-0.75, 0.75, width=32), min_size=16, max_size=16),
    persistent=st.booleans(),
)
def test_random_compositions_match_jax_grad(prog, av, bv, wv, persistent):
    a0 = np.array(av, np.float32).reshape(3, 4)
    b0 = np.array(bv, np.float32)
    w0 = np.array(wv, np.float32).reshape(4, 4)

    def pure(a, b, w):
        h = a
        for k in prog:
            h = OPS[k][2](h, a, b, w)
        return jnp.sum(h)

    ja, jb, jw = jax.grad(pure, argnums=(0, 1, 2))(a0, b0, w0)

    a, b, w = tf.constant(a0), tf.constant(b0), tf.Variable(w0)
    with tf.GradientTape(persistent=persistent) as t:
        t.watch([a, b])
        h = a
        for k in prog:
            h = OPS[k][1](h, a, b, w)
        y = tf.reduce_sum(h)
    grads = t.gradient(y, {"a": a, "b": b, "w": w})
    uses_b = any(OPS[k][0] == "add_b" for k in prog)
    uses_w = any(OPS[k][0] in ("matmul", "transpose_mm") for k in prog)
    scale = 1.0 + float(np.max(np.abs(ja)))
    np.testing.assert_allclose(grads["a"].numpy(), ja, rtol=2e-3, atol=2e-3 * scale)
    if uses_b:
        np.testing.assert_allclose(grads["b"].numpy(), jb, rtol=2e-3, atol=2e-3 * (1 + np.max(np.abs(jb))))
    else:
        assert grads["b"] is None
    if uses_w:
        np.testing.assert_allclose(grads["w"].numpy(), jw, rtol=2e-3, atol=2e-3 * (1 + np.max(np.abs(jw))))
    else:
        assert grads["w"] is None


@given(x=st.floats(-2, 2, width=32), n=st.integers(1, 4))
def test_nth_derivative_of_power_by_nesting(x, n):
    """d^n/dx^n of x**5 through n nested tapes equals the analytic formula."""
    import math

    xt = tf.constant(x)
    tapes = [tf.GradientTape() for _ in range(n)]
    for tp in tapes:
        tp.__enter__()
        tp.watch(xt)
    y = xt**5
    for tp in reversed(tapes):
        tp.__exit__(None, None, None)
        y = tp.gradient(y, xt)
    expected = math.factorial(5) / math.factorial(5 - n) * x ** (5 - n)
    np.testing.assert_allclose(float(y), expected, rtol=1e-4, atol=1e-4)


@given(x=st.floats(-2, 2, width=32), y=st.floats(0.5, 3.0, width=32))
def test_pow_rule_builds_only_the_terms_a_tangent_needs(x, y):
    """TF's pow gradient at second order: an integer exponent's log term is not traced
    (it would be at every order of a nested gradient), and a float exponent's both terms
    give the analytic derivatives."""
    from tapejax._ops import _tfgrad

    xs = jnp.linspace(-2.0, 2.0, 5) + x
    second = jax.grad(lambda v: jnp.sum(jax.grad(lambda u: jnp.sum(_tfgrad.pow(u, 3)))(v)))
    assert "log" not in str(jax.make_jaxpr(second)(xs))
    np.testing.assert_allclose(second(xs), 6.0 * xs, rtol=1e-5, atol=1e-5)
    xp, yp = jnp.float32(abs(x) + 0.5), jnp.float32(y)
    dx, dy = jax.grad(lambda a, b: _tfgrad.pow(a, b), argnums=(0, 1))(xp, yp)
    np.testing.assert_allclose(dx, yp * xp ** (yp - 1), rtol=1e-5)
    np.testing.assert_allclose(dy, xp**yp * np.log(xp), rtol=1e-5, atol=1e-6)
