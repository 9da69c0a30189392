"""``tapejax.numpy``: every jax.numpy / jax.nn / jax.scipy.special function on the tape.

Gradients are compared with ``jax.grad`` of the same jnp function; the wrapper's
rules (static arguments stay static, integer outputs are never watched, output
structures are kept) are checked directly.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import pytest

import tapejax as tf
import tapejax.numpy as tnp
from tapejax._core import _recorder as _core


def tape_grad(fn, *xs):
    ts = [tf.constant(x) for x in xs]
    with tf.GradientTape() as t:
        t.watch(ts)
        y = fn(*ts)
    return y, t.gradient(y, ts)


def test_every_public_function_is_wrapped():
    for mod in (jnp, jax.nn, jss):
        for n in dir(mod):
            if n.startswith("_"):
                continue
            obj = getattr(mod, n)
            if isinstance(obj, types.ModuleType):
                continue
            assert hasattr(tnp, n), f"tapejax.numpy has no {n}"
            w = getattr(tnp, n)
            if isinstance(obj, type) or not callable(obj):
                continue
            if mod is jnp:
                assert hasattr(w, "_tapejax_primitive") or type(w).__name__ == "_UfuncWrapper", n
    for sub, mod in [(tnp.linalg, jnp.linalg), (tnp.fft, jnp.fft), (tnp.nn, jax.nn), (tnp.special, jss)]:
        for n in dir(mod):
            if not n.startswith("_") and callable(getattr(mod, n)) and not isinstance(getattr(mod, n), type | types.ModuleType):
                assert hasattr(getattr(sub, n), "_tapejax_primitive") or type(getattr(sub, n)).__name__ == "_UfuncWrapper", n


def test_jnp_names_take_priority_and_constants_pass_through():
    assert tnp.pi == jnp.pi and tnp.float32 is jnp.float32 and tnp.newaxis is None
    assert tnp.relu.__wrapped__ is jax.nn.relu
    assert tnp.erf.__wrapped__ is jnp.erf if hasattr(jnp, "erf") else tnp.erf.__wrapped__ is jss.erf
    assert tnp.i0.__wrapped__ is jnp.i0  # in jnp and in scipy.special: jnp wins


R = np.random.default_rng(0)
A = R.uniform(0.5, 2.0, size=(3, 4)).astype(np.float32)
B = R.uniform(-1.0, 1.0, size=(4, 2)).astype(np.float32)
C = R.uniform(-1.0, 1.0, size=(3, 4)).astype(np.float32)
SPD = (lambda m: (m @ m.T + 3 * np.eye(3)).astype(np.float32))(R.normal(size=(3, 3)))

GRAD_CASES = [
    ("sin", lambda m, x: m.sin(x), [A]),
    ("exp*log", lambda m, x: m.exp(x) * m.log(x), [A]),
    ("sum axis", lambda m, x: m.sum(x ** 2, axis=1), [A]),
    ("mean keepdims", lambda m, x: m.mean(x, axis=0, keepdims=True), [A]),
    ("std ddof", lambda m, x: m.std(x, ddof=1), [A]),
    ("matmul", lambda m, x, y: m.matmul(x, y), [A, B]),
    ("dot", lambda m, x, y: m.dot(x, y), [A, B]),
    ("einsum", lambda m, x, y: m.einsum("ij,jk->ik", x, y), [A, B]),
    ("where", lambda m, x: m.where(x > 1.0, x, 0.0), [A]),
    ("maximum", lambda m, x, y: m.maximum(x[:, :2], y[:3]), [A, B]),
    ("concatenate list", lambda m, x, y: m.concatenate([x, m.reshape(y, (2, 4))], axis=0), [A, B]),
    ("stack", lambda m, x: m.stack([x, 2 * x]), [A]),
    ("reshape transpose", lambda m, x: m.transpose(m.reshape(x, (2, 6))), [A]),
    ("cumsum", lambda m, x: m.cumsum(x, axis=1), [A]),
    ("sort", lambda m, x: m.sort(x, axis=-1), [A]),
    ("take", lambda m, x: m.take(x, np.array([0, 2, 2]), axis=1), [A]),
    ("clip", lambda m, x: m.clip(x, 0.8, 1.5), [A]),
    ("linalg.inv", lambda m, x: m.linalg.inv(x), [SPD]),
    ("linalg.det", lambda m, x: m.linalg.det(x), [SPD]),
    ("linalg.norm", lambda m, x: m.linalg.norm(x, axis=0), [A]),
    ("fft", lambda m, x: m.abs(m.fft.fft(x)), [A]),
    ("relu (jax.nn)", lambda m, x: m.relu(x - 1.0), [A]),
    ("softmax (jax.nn)", lambda m, x: m.softmax(x, axis=-1), [A]),
    ("gelu (jax.nn)", lambda m, x: m.gelu(x), [A]),
    ("logsumexp (special)", lambda m, x: m.logsumexp(x, axis=1), [A]),
    ("gammaln (special)", lambda m, x: m.gammaln(x), [A]),
    ("erf (special)", lambda m, x: m.special.erf(x), [A]),
    ("pad", lambda m, x: m.pad(x, ((1, 0), (0, 2)), mode="reflect"), [A]),
    ("tile", lambda m, x: m.tile(x, (2, 1)), [A]),
    ("outer ufunc method", lambda m, x: m.multiply.outer(x[0], x[1]), [A]),
    ("reduce ufunc method", lambda m, x: m.add.reduce(x * x, axis=0), [A]),
    ("polyval", lambda m, x: m.polyval(np.array([1.0, -2.0, 0.5], np.float32), x), [A]),
    ("interp", lambda m, x: m.interp(x, np.array([0.0, 1.0, 3.0], np.float32), np.array([0.0, 2.0, 3.0], np.float32)), [A]),
]


class _JnpNamespace:
    """jax.numpy with jax.nn and jax.scipy.special names, for the reference side."""

    def __getattr__(self, n):
        for mod in (jnp, jax.nn, jss):
            if hasattr(mod, n):
                return getattr(mod, n)
        raise AttributeError(n)

    special = jss


@pytest.mark.parametrize("fn, xs", [c[1:] for c in GRAD_CASES], ids=[c[0] for c in GRAD_CASES])
def test_value_and_gradient_match_jax_grad(fn, xs):
    rng = np.random.default_rng(1)
    y, grads = tape_grad(lambda *ts: fn(tnp, *ts), *xs)
    ref = fn(_JnpNamespace(), *[jnp.asarray(x) for x in xs])
    np.testing.assert_allclose(y.numpy(), np.asarray(ref), rtol=1e-5, atol=1e-5)
    ct = rng.normal(size=np.shape(ref)).astype(np.float32)
    # The tape gradient of sum(y * ct) against jax.vjp with the same cotangent.
    ts = [tf.constant(x) for x in xs]
    with tf.GradientTape() as t:
        t.watch(ts)
        out = fn(tnp, *ts)
    got = t.gradient(out, ts, output_gradients=tf.constant(ct))
    _, vjp = jax.vjp(lambda *a: fn(_JnpNamespace(), *a), *[jnp.asarray(x) for x in xs])
    for g, e in zip(got, vjp(jnp.asarray(ct))):
        np.testing.assert_allclose(g.numpy(), np.asarray(e), rtol=1e-4, atol=1e-5)


@pytest.mark.usefixtures("compile_tier")
def test_static_arguments_stay_static():
    x = tf.constant(A)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y1 = tnp.sum(x, axis=1)
        y2 = tnp.sum(x, axis=0)
    eqns = t._tape.program()
    layouts = [e.params["layout"] for e in eqns]
    assert 1 in layouts[0] and 0 in layouts[1]  # the axes are parameters, not data
    assert len(eqns[0].in_ids) == 1  # only the tensor is a data input
    tf.replay_cache_clear()
    for _ in range(3):
        with tf.GradientTape() as t2:
            t2.watch(x)
            y = tnp.sum(tnp.tanh(x), axis=1)
        t2.gradient(y, x)
    assert tf.replay_cache_info().misses == 1
    assert t.gradient(y1, x).shape == (3, 4) and t.gradient(y2, x).shape == (3, 4)


def test_integer_and_bool_outputs_are_never_watched():
    x = tf.constant(A)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        idx = tnp.argsort(x, axis=1)
        amax = tnp.argmax(x)
        isn = tnp.isnan(x)
        s = tnp.sort(x)
    for out in (idx, amax, isn):
        assert out._id not in t._tape.watched
        assert t.gradient(out, x) is None
    assert s._id in t._tape.watched
    assert idx.dtype == tf.int32 and isn.dtype == tf.bool


def test_output_structures_are_kept():
    res = tnp.linalg.svd(tf.constant(A), full_matrices=False)
    assert type(res).__name__ == "SVDResult" and all(isinstance(r, tf.Tensor) for r in res)
    q, r = tnp.linalg.qr(tf.constant(A))
    assert isinstance(q, tf.Tensor) and q.shape == (3, 3)
    assert tnp.shape(tf.constant(A)) == (3, 4)
    assert tnp.ndim(tf.constant(A)) == 2
    assert tnp.result_type(tf.constant(A)) == np.float32
    parts = tnp.split(tf.constant(A), 2, axis=1)
    assert isinstance(parts, list) and len(parts) == 2 and all(isinstance(p, tf.Tensor) for p in parts)


def test_variables_are_read_and_watched():
    v = tf.Variable(A)
    with tf.GradientTape() as t:
        y = tnp.sum(tnp.square(v))
    np.testing.assert_allclose(t.gradient(y, v).numpy(), 2 * A, rtol=1e-6)


def test_arrays_are_constants_and_tensors_are_inputs():
    x = tf.constant(A)
    with tf.GradientTape() as t:
        t.watch(x)
        y = tnp.sum(tnp.add(tnp.multiply(x, jnp.asarray(C)), np.ones((3, 4), np.float32)))
        z = tnp.sum(tnp.multiply(x, C))
    gx = t.gradient([y, z], x)
    np.testing.assert_allclose(gx.numpy(), 2 * C, rtol=1e-6)


def test_second_order_and_mixing_with_tf_ops():
    x = tf.constant([0.5, 1.5])
    with tf.GradientTape() as t2:
        t2.watch(x)
        with tf.GradientTape() as t1:
            t1.watch(x)
            y = tf.reduce_sum(tnp.sin(x) * tf.exp(x))
        g = t1.gradient(y, x)
    h = t2.gradient(g, x)
    f = lambda v: jnp.sum(jnp.sin(v) * jnp.exp(v))  # noqa: E731
    np.testing.assert_allclose(g.numpy(), jax.grad(f)(jnp.asarray(x.numpy())), rtol=1e-5)
    np.testing.assert_allclose(h.numpy(), jnp.diag(jax.hessian(f)(jnp.asarray(x.numpy()))), rtol=1e-5)


def test_jacobian_through_wrapped_functions():
    x = tf.constant([0.5, 1.5, 2.0])
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = tnp.cumsum(tnp.tanh(x))
    want = jax.jacrev(lambda v: jnp.cumsum(jnp.tanh(v)))(jnp.asarray(x.numpy()))
    np.testing.assert_allclose(t.jacobian(y, x).numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(t.jacobian(y, x, experimental_use_pfor=False).numpy(), want, rtol=1e-5)


def test_no_tape_no_record_and_plain_results():
    y = tnp.exp(tf.constant([0.0]))
    assert isinstance(y, tf.Tensor) and y.numpy().tolist() == [1.0]
    assert not _core.state.recording
    z = tnp.arange(3)
    assert isinstance(z, tf.Tensor) and z.numpy().tolist() == [0, 1, 2]
    assert tnp.issubdtype(tnp.float32, tnp.floating) is True


def test_callable_and_dtype_arguments():
    x = tf.constant(A)
    with tf.GradientTape() as t:
        t.watch(x)
        y = tnp.sum(tnp.apply_along_axis(lambda r: r * r, 1, x))
        z = tnp.sum(tnp.asarray(x, dtype=tf.float32))  # a tapejax DType works as a dtype argument
    np.testing.assert_allclose(t.gradient([y, z], x).numpy(), 2 * A + 1, rtol=1e-5)
