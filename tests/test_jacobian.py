"""GradientTape.jacobian / batch_jacobian (issue 3): analytic Jacobians, stacked gradients,
per-example Jacobians, TF's cross-example leak, nesting, unconnected sources and errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf
from tapejax._core import _recorder as _core
from tapejax._tf import _jacobian


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


RNG = np.random.default_rng(0)
X3 = RNG.standard_normal(3).astype(np.float32)
A53 = RNG.standard_normal((5, 3)).astype(np.float32)

# The ways of computing the same Jacobian: one vectorized program in either
# direction, the chunked loop (pfor=False), and pfor with parallel_iterations.
# (pfor with parallel_iterations and the loop's default chunk: test_chunked_variants.)
MODES = {
    "rev": dict(fwd_ratio=10**9, kw={}),
    "fwd": dict(fwd_ratio=0, kw={}),
    "loop": dict(fwd_ratio=None, kw=dict(experimental_use_pfor=False, parallel_iterations=2)),
}


@pytest.fixture(params=sorted(MODES))
def mode(request, monkeypatch):
    m = MODES[request.param]
    if m["fwd_ratio"] is not None:
        monkeypatch.setattr(_jacobian, "FWD_RATIO", m["fwd_ratio"])
    return m["kw"]


def jac_of(f, x0, mode):
    x = tf.constant(x0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = f(x)
    return g.jacobian(y, x, **mode)


# --- analytic Jacobians ----------------------------------------------------------------------------


def test_elementwise(mode):
    j = jac_of(tf.sin, X3, mode)
    assert j.shape == (3, 3) and j.dtype == tf.float32
    close(j, np.diag(np.cos(X3)))


def test_matmul_matrix_shapes(mode):
    # y = x @ W with x [2,3], W [3,4]: dy[i,k]/dx[p,q] = delta_ip W[q,k]; shape [2,4,2,3].
    W = RNG.standard_normal((3, 4)).astype(np.float32)
    x0 = RNG.standard_normal((2, 3)).astype(np.float32)
    j = jac_of(lambda x: tf.matmul(x, tf.constant(W)), x0, mode)
    assert j.shape == (2, 4, 2, 3)
    close(j, np.einsum("ip,qk->ikpq", np.eye(2), W))


def test_softmax(mode):
    def softmax(x):
        e = tf.exp(x - tf.reduce_max(x))
        return e / tf.reduce_sum(e)

    j = jac_of(softmax, X3, mode)
    s = np.exp(X3 - X3.max())
    s /= s.sum()
    close(j, np.diag(s) - np.outer(s, s))


def test_non_square(mode):
    # R^3 -> R^5: y = A tanh(x); dy/dx = A diag(1 - tanh(x)^2).
    j = jac_of(lambda x: tf.reshape(tf.matmul(tf.constant(A53), tf.reshape(tf.tanh(x), [3, 1])), [5]), X3, mode)
    assert j.shape == (5, 3)
    close(j, A53 * (1 - np.tanh(X3) ** 2)[None, :])
    # and the transpose problem, R^5 -> R^3
    x5 = RNG.standard_normal(5).astype(np.float32)
    j = jac_of(lambda x: tf.reshape(tf.matmul(tf.constant(A53.T), tf.reshape(x * x, [5, 1])), [3]), x5, mode)
    assert j.shape == (3, 5)
    close(j, A53.T * (2 * x5)[None, :])


@pytest.mark.parametrize(
    "kw", [dict(parallel_iterations=2), dict(parallel_iterations=4), dict(experimental_use_pfor=False)]
)
def test_chunked_variants(kw, monkeypatch):
    # 5 output rows in chunks of 2 or 4 (a remainder chunk), and the loop's default chunk; both directions.
    for ratio in (0, 10**9):
        monkeypatch.setattr(_jacobian, "FWD_RATIO", ratio)
        j = jac_of(lambda x: tf.reshape(tf.matmul(tf.constant(A53), tf.reshape(tf.tanh(x), [3, 1])), [5]), X3, kw)
        close(j, A53 * (1 - np.tanh(X3) ** 2)[None, :])


def test_scalar_target_and_scalar_source():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as g:
        g.watch(x)
        y = tf.reduce_sum(x * x)
    j = g.jacobian(y, x)
    assert j.shape == (2,)
    close(j, [2.0, 4.0])
    s = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(s)
        y = s * s
    j = g.jacobian(y, s)
    assert j.shape == ()
    close(j, 6.0)


def test_against_jax_jacrev_multiple_sources(mode):
    W0 = RNG.standard_normal((4, 3)).astype(np.float32)
    b0 = RNG.standard_normal(4).astype(np.float32)
    W, b, x = tf.constant(W0), tf.constant(b0), tf.constant(X3)
    with tf.GradientTape(persistent=True) as g:
        g.watch([W, b, x])
        y = tf.tanh(tf.reshape(tf.matmul(W, tf.reshape(x, [3, 1])), [4]) + b) * tf.sin(tf.reduce_sum(x))
    out = g.jacobian(y, {"W": W, "b": b, "x": x}, **mode)

    def f(W, b, x):
        return jnp.tanh(W @ x + b) * jnp.sin(jnp.sum(x))

    ref = jax.jacrev(f, argnums=(0, 1, 2))(W0, b0, X3)
    assert set(out) == {"W", "b", "x"}
    assert out["W"].shape == (4, 4, 3) and out["b"].shape == (4, 4) and out["x"].shape == (4, 3)
    for k, r in zip("Wbx", ref):
        close(out[k], r)


# --- against stacked gradient calls ---------------------------------------------------------------


def test_rows_equal_stacked_gradients(mode):
    x0 = RNG.standard_normal((2, 3)).astype(np.float32)
    v = tf.Variable(RNG.standard_normal(3).astype(np.float32))
    x = tf.constant(x0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = tf.tanh(x * v) * v + tf.reduce_sum(x)  # v is read twice: its Jacobian sums both reads
    jx, jv = g.jacobian(y, [x, v], **mode)
    rows_x, rows_v = [], []
    for i in range(6):
        # gradient of output element i alone = gradient with a one-hot output weight
        e = np.zeros(6, np.float32)
        e[i] = 1
        gx, gv = g.gradient(y, [x, v], output_gradients=tf.constant(e.reshape(2, 3)))
        rows_x.append(gx.numpy())
        rows_v.append(gv.numpy())
    close(jx, np.stack(rows_x).reshape(2, 3, 2, 3))
    close(jv, np.stack(rows_v).reshape(2, 3, 3))


def test_same_source_twice_and_intermediate_source(mode):
    x = tf.constant(X3)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        h = 2.0 * x
        y = h * h
    j1, j2, jh = g.jacobian(y, [x, x, h], **mode)
    close(j1, np.diag(8 * X3))
    close(j2, np.diag(8 * X3))
    close(jh, np.diag(4 * X3))  # dy/dh with h an intermediate value


# --- batch_jacobian -------------------------------------------------------------------------------


def per_example_jacobians(f, x0):
    out = []
    for b in range(x0.shape[0]):
        xb = tf.constant(x0[b : b + 1])
        with tf.GradientTape() as g:
            g.watch(xb)
            yb = f(xb)
        out.append(g.jacobian(yb, xb).numpy()[0, ..., 0, :])
    return np.stack(out)


@pytest.mark.parametrize("kw", [{}, dict(parallel_iterations=2), dict(experimental_use_pfor=False)])
def test_batch_jacobian_equals_per_example_jacobian(kw):
    W0 = RNG.standard_normal((3, 4)).astype(np.float32)

    def f(x):
        return tf.tanh(tf.matmul(x, tf.constant(W0))) * tf.reduce_sum(x * x, axis=1, keepdims=True)

    x0 = RNG.standard_normal((5, 3)).astype(np.float32)
    x = tf.constant(x0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = f(x)
    bj = g.batch_jacobian(y, x, **kw)
    assert bj.shape == (5, 4, 3)
    close(bj, per_example_jacobians(f, x0))


def test_batch_jacobian_rank3_shapes():
    x0 = RNG.standard_normal((2, 3, 2)).astype(np.float32)
    x = tf.constant(x0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = tf.reduce_sum(x * x, axis=2, keepdims=True)  # [2,3,1]
    bj = g.batch_jacobian(y, x)
    assert bj.shape == (2, 3, 1, 3, 2)
    expect = np.zeros((2, 3, 1, 3, 2), np.float32)
    for b in range(2):
        for i in range(3):
            expect[b, i, 0, i, :] = 2 * x0[b, i]
    close(bj, expect)


def tf_batch_semantics(f_jnp, x0):
    """TF's batch_jacobian, from the full Jacobian: J[b, j, k] = sum_b' d y[b', j] / d x[b, k]."""
    full = jax.jacrev(f_jnp)(x0)  # [B, J, B, K]
    return np.transpose(np.asarray(full).sum(axis=0), (1, 0, 2))


def test_cross_example_dependence_leaks_as_in_tf():
    x0 = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    x = tf.constant(x0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * tf.reduce_sum(x)
    bj = g.batch_jacobian(y, x)
    close(bj, tf_batch_semantics(lambda x: x * jnp.sum(x), x0))
    close(bj, [[[14, 4], [6, 16]], [[14, 4], [6, 16]]])  # TF 2.21's output (tf_facts §24)
    # ... which is NOT the per-example Jacobian (the diagonal blocks of the full Jacobian): the
    # dependence on the other example leaks in.
    full = np.asarray(jax.jacrev(lambda x: x * jnp.sum(x))(x0))
    per_ex = np.stack([full[b, :, b, :] for b in range(2)])
    assert not np.allclose(bj, per_ex)


def test_cross_example_swap_leaks_as_in_tf():
    # y[b] = x[1-b] * x[b] (a batch swap): TF reports d(sum_b' y[b'])/dx[b] = 2 x[b] on the diagonal.
    P = np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)
    x0 = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    x = tf.constant(x0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = tf.matmul(tf.constant(P), x) * x
    for kw in ({}, dict(experimental_use_pfor=False)):
        bj = g.batch_jacobian(y, x, **kw)
        close(bj, tf_batch_semantics(lambda x: (P @ x) * x, x0))
        close(bj, [[[6, 0], [0, 8]], [[2, 0], [0, 4]]])  # TF 2.21's output (tf_facts §24)


def test_batch_jacobian_cost_is_linear_in_batch():
    # The program never forms the [b*y, b*x] Jacobian: XLA's FLOP count grows linearly in b.
    W = tf.constant(RNG.standard_normal((6, 6)).astype(np.float32))

    def f(t):
        return tf.tanh(tf.matmul(t, W))

    flops = {}
    for bsz in (8, 32):
        x = tf.constant(RNG.standard_normal((bsz, 6)).astype(np.float32))
        with tf.GradientTape(persistent=True) as g:
            g.watch(x)
            y = f(x)
        sl, _ = g._cut(g._tape, [y], [x])
        key = ("batch_jacobian", sl.code, sl.diff, sl.groups, sl.target_slots, "rev", None)
        cost = jax.jit(_jacobian._make_batch_jacobian(key)).lower(list(sl.leaf_vals), []).compile().cost_analysis()
        flops[bsz] = (cost[0] if isinstance(cost, list) else cost)["flops"]
        if bsz == 8:
            close(g.batch_jacobian(y, x), per_example_jacobians(f, x.numpy()), 1e-4)
    assert 4 * 0.8 * flops[8] <= flops[32] <= 4 * 1.25 * flops[8]  # linear (the full Jacobian: 16x)


# --- nesting ----------------------------------------------------------------------------------------


def test_hessian_outer_jacobian_of_inner_gradient():
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(x**3)
        g = inner.gradient(y, x)
    close(g, [3.0, 12.0, 27.0])
    close(outer.jacobian(g, x), np.diag([6.0, 12.0, 18.0]))


def test_hessian_of_variable():
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            # y = v0^2 v1
            y = tf.reduce_sum(v * tf.constant([1.0, 0.0])) ** 2 * tf.reduce_sum(v * tf.constant([0.0, 1.0]))
        g = inner.gradient(y, v)
    close(g, [4.0, 1.0])
    close(outer.jacobian(g, v), [[4.0, 2.0], [2.0, 0.0]])


def test_jacobian_of_jacobian(mode):
    x0 = np.array([1.0, 2.0], np.float32)
    x = tf.constant(x0)
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape(persistent=True) as inner:
            inner.watch(x)
            y = tf.sin(x) * tf.reduce_sum(x * x)
        j = inner.jacobian(y, x, **mode)
    jj = outer.jacobian(j, x, **mode)
    ref = jax.jacfwd(jax.jacrev(lambda x: jnp.sin(x) * jnp.sum(x * x)))(x0)
    assert jj.shape == (2, 2, 2)
    close(jj, ref, 1e-4)


def test_batch_jacobian_nested_and_gradient_through_it():
    x0 = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    x = tf.constant(x0)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = x**3
        j = inner.batch_jacobian(y, x)
    bb = outer.batch_jacobian(j, x)
    assert bb.shape == (2, 2, 2, 2)
    expect = np.zeros((2, 2, 2, 2), np.float32)
    for b in range(2):
        for i in range(2):
            expect[b, i, i, i] = 6 * x0[b, i]
    close(bb, expect)
    # gradient of a loss on the batch Jacobian with respect to a weight matrix
    W0 = np.array([[0.3, -0.2], [0.1, 0.4]], np.float32)
    W = tf.Variable(W0)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.tanh(tf.matmul(x, W))
        s = tf.reduce_sum(inner.batch_jacobian(y, x) ** 2)
    gw = outer.gradient(s, W)

    def loss(W):
        return jnp.sum(jax.vmap(jax.jacrev(lambda r: jnp.tanh(r @ W)))(x0) ** 2)

    close(gw, jax.grad(loss)(W0), 1e-4)


def test_persistent_jacobian_inside_its_own_block_is_recorded_there():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
        j = g.jacobian(y, x)
    close(j, [[2.0, 0.0], [0.0, 4.0]])
    close(g.gradient(j, x), [2.0, 2.0])


def test_non_persistent_jacobian_inside_block_stops_recording():
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
        close(g.jacobian(y, x), 6.0)
        assert not _core.state.recording
    with pytest.raises(RuntimeError, match="non-persistent"):
        g.gradient(y, x)


# --- unconnected, integer and identity cases --------------------------------------------------------


def test_unconnected_none_and_zero_shapes():
    x = tf.constant([1.0, 2.0])
    w = tf.constant([[1.0, 2.0, 3.0]])
    u = tf.constant(5.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, w, u])
        y = x * tf.reduce_sum(w)
    out = g.jacobian(y, {"x": x, "w": w, "u": u})
    assert out["u"] is None
    close(out["x"], np.diag([6.0, 6.0]))
    assert out["w"].shape == (2, 1, 3)
    close(out["w"], [[[1, 1, 1]], [[2, 2, 2]]])
    z = g.jacobian(y, [u, w], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert z[0].shape == (2,) and z[0].dtype == tf.float32
    close(z[0], [0.0, 0.0])
    z = g.jacobian(y, tf.constant([[1.0, 2.0, 3.0]]), unconnected_gradients="zero")
    assert z.shape == (2, 1, 3)
    close(z, np.zeros((2, 1, 3)))


def test_integer_source_and_target():
    x = tf.constant([1.0, 2.0])
    xi = tf.constant([1, 2])
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, xi])
        y = x * x
        yi = tf.cast(y, tf.int32)
    assert g.jacobian(y, xi) is None
    z = g.jacobian(y, xi, unconnected_gradients="zero")
    assert z.dtype == tf.int32 and z.shape == (2, 2)
    close(z, np.zeros((2, 2)))
    assert g.jacobian(yi, x) is None
    z = g.jacobian(yi, x, unconnected_gradients="zero")
    assert z.dtype == tf.float32 and z.shape == (2, 2)


def test_identity_and_unwatched_target():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
    close(g.jacobian(x, x), np.eye(2))
    with tf.GradientTape(persistent=True) as g:
        pass
    # TF differentiates reshape(target): an unwatched target is unconnected even to itself.
    assert g.jacobian(x, x) is None
    close(g.gradient(x, x), [1.0, 1.0])
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as g:
        pass
    close(g.jacobian(v, v), np.eye(2))
    assert g.watched_variables() == (v,)


def test_batch_jacobian_unconnected_is_zeros_never_none():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    u = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, u])
        y = tf.cast(x * x, tf.float64) if tf.x64_enabled() else x * x
    for ug in ("none", "zero"):
        z = g.batch_jacobian(y, u, unconnected_gradients=ug)
        assert z is not None and z.shape == (2, 2, 3)
        close(z, np.zeros((2, 2, 3)))
    xi = tf.constant([[1, 2], [3, 4]])
    with tf.GradientTape(persistent=True) as g:
        g.watch([x, xi])
        y = x * x
    assert g.batch_jacobian(y, xi).dtype == tf.float32  # NONE: the target's dtype
    assert g.batch_jacobian(y, xi, unconnected_gradients="zero").dtype == tf.int32  # ZERO: the source's


def test_empty_target():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as g:
        g.watch(x)
        y = tf.reshape(x, [2, 1]) * tf.zeros((2, 0))
        y = tf.reshape(y, [0])
    j = g.jacobian(y, x)
    assert j.shape == (0, 2)


def test_complex_uses_tf_conjugate_convention(monkeypatch):
    x0 = np.array([1 + 2j, 3 - 1j], np.complex64)
    for ratio in (0, 10**9):  # the forward direction must not be used for complex values
        monkeypatch.setattr(_jacobian, "FWD_RATIO", ratio)
        x = tf.constant(x0)
        with tf.GradientTape() as g:
            g.watch(x)
            y = x * x
        j = g.jacobian(y, x)
        assert j.dtype == tf.complex64
        close(j, np.diag(np.conj(2 * x0)))  # TF 2.21: [[2-4j, 0], [0, 6+2j]]


def test_compiled_program_is_cached():
    x = tf.constant(X3)

    def run():
        with tf.GradientTape() as g:
            g.watch(x)
            y = tf.tanh(x) * x
        return g.jacobian(y, x)

    run()
    before = tf.replay_cache_info()
    close(run(), np.diag(1 - np.tanh(X3) ** 2) * X3[:, None] + np.diag(np.tanh(X3)))
    after = tf.replay_cache_info()
    assert after.hits == before.hits + 1 and after.misses == before.misses


def test_choose_direction():
    assert _jacobian.choose_direction(512, 8, True) == "fwd"
    assert _jacobian.choose_direction(8, 512, True) == "rev"
    assert _jacobian.choose_direction(512, 8, False) == "rev"  # complex: reverse only


# --- errors and the single-use rule ------------------------------------------------------------------


def test_non_persistent_single_use():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    g.jacobian(y, x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        g.jacobian(y, x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        g.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        g.batch_jacobian(tf.reshape(y, [2, 1]), tf.reshape(x, [2, 1]))


@pytest.mark.parametrize("what", ["jacobian", "batch_jacobian"])
def test_pfor_false_needs_persistent_and_failed_call_keeps_tape(what):
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
        with pytest.raises(RuntimeError, match="persistent=True"):
            getattr(g, what)(y, x, experimental_use_pfor=False)
        assert _core.state.recording  # not even popped
    out = getattr(g, what)(y, x)
    assert out.shape == ((2, 2, 2, 2) if what == "jacobian" else (2, 2, 2))


def test_batch_jacobian_shape_errors_keep_tape():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    v = tf.reshape(x, [4])
    dims = r"Need first dimension of target shape \(\(4, 1\)\) and source shape \(\(2, 2\)\)"
    with pytest.raises(ValueError, match=dims):
        g.batch_jacobian(tf.reshape(y, [4, 1]), x)
    with pytest.raises(ValueError, match=r"Shape \(4,\) must have rank at least 2"):
        g.batch_jacobian(v, x)
    with pytest.raises(ValueError, match=r"Shape \(4,\) must have rank at least 2"):
        g.batch_jacobian(y, v)
    with pytest.raises(IndexError):
        g.batch_jacobian(tf.reduce_sum(y), x)
    with pytest.raises(AttributeError, match="'list' object has no attribute 'shape'"):
        g.batch_jacobian(y, [x])
    close(g.batch_jacobian(y, x), [[[2, 0], [0, 4]], [[6, 0], [0, 8]]])


def test_bad_arguments():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
    with pytest.raises(AttributeError, match="'list' object has no attribute 'shape'"):
        g.jacobian([y, y], x)
    with pytest.raises(ValueError, match="Unknown value for unconnected_gradients") as ei:
        g.jacobian(y, x, unconnected_gradients="foo")
    assert isinstance(ei.value.__cause__, ValueError)
    with pytest.raises(ValueError, match="Unknown value for unconnected_gradients"):
        g.jacobian(y, x, unconnected_gradients="foo", experimental_use_pfor=False)
    for p in (0, 1, -1):
        with pytest.raises(ValueError, match="parallel_iterations"):
            g.jacobian(y, x, parallel_iterations=p)
    with pytest.raises(TypeError, match="parallel_iterations"):
        g.jacobian(y, x, parallel_iterations=0, experimental_use_pfor=False)
    with pytest.raises(TypeError):
        g.jacobian(y, [x, None])
    assert g.jacobian(np.array([1.0, 2.0], np.float32), x) is None  # a constant target
    assert g.jacobian(y, []) == []


def test_failed_unconnected_value_does_not_use_up_tape():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    with pytest.raises(ValueError):
        g.jacobian(y, x, unconnected_gradients="foo")
    close(g.jacobian(y, x), [[2, 0], [0, 4]])
    # ... but a pfor rejection of parallel_iterations comes after TF's pfor has run the gradient.
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    with pytest.raises(ValueError):
        g.jacobian(y, x, parallel_iterations=1)
    with pytest.raises(RuntimeError, match="non-persistent"):
        g.jacobian(y, x)


def test_loop_memory_is_bounded_by_chunk():
    # pfor=False: the compiled program only holds `chunk` cotangent rows at a time.
    rng = np.random.default_rng(5)
    W1 = tf.constant(rng.standard_normal((2048, 4)).astype(np.float32))
    W2 = tf.constant(rng.standard_normal((128, 2048)).astype(np.float32))
    x = tf.constant(rng.standard_normal((4, 1)).astype(np.float32))
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = tf.matmul(W2, tf.tanh(tf.matmul(W1, x)))
    sl, _ = g._cut(g._tape, [y], [x])
    temps = {}
    for chunk in (None, 8):
        key = ("jacobian", sl.code, sl.diff, sl.groups, sl.target_slots, "rev", chunk)
        mem = jax.jit(_jacobian._make_jacobian(key)).lower(list(sl.leaf_vals), []).compile().memory_analysis()
        if mem is None:
            pytest.skip("this backend gives no memory analysis")
        temps[chunk] = mem.temp_size_in_bytes
    assert temps[8] * 4 < temps[None]  # [8, 2048] rows instead of [128, 2048]
    close(g.jacobian(y, x, experimental_use_pfor=False, parallel_iterations=8), g.jacobian(y, x), 1e-4)
