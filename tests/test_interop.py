"""JAX interop: ``tapejax.to_jax`` (TF-style function -> pure JAX function) and ``tapejax.from_jax``
(JAX function -> one op on the tape), checked against ``jax.grad`` of the same pure functions."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapejax as tf
from tapejax._tf import _interop

# (tapejax op, jax.numpy op): the random programs below draw chains from this table.
UNARY = [
    (tf.sin, jnp.sin), (tf.tanh, jnp.tanh), (tf.exp, jnp.exp), (tf.square, jnp.square),
    (tf.nn.sigmoid, jax.nn.sigmoid), (tf.math.softplus, jax.nn.softplus), (lambda x: x * 0.5, lambda x: x * 0.5),
]
# Not tf.maximum: at ties TF's gradient goes to the first argument, JAX's is split (both are kept).
BINARY = [(tf.add, jnp.add), (tf.multiply, jnp.multiply), (tf.subtract, jnp.subtract), (tf.math.divide_no_nan, None)]
BINARY[3] = (tf.math.divide_no_nan, lambda a, b: jnp.where(b == 0, 0.0, a / jnp.where(b == 0, 1.0, b)))


def _chain(ops: list, lib: int):
    def f(x, y):
        a, b = x, y
        for kind, k in ops:
            if kind == "u":
                a = UNARY[k][lib](a)
            else:
                a, b = BINARY[k][lib](a, b), a
        return a

    return f


def _reduce(lib: int):
    return tf.reduce_sum if lib == 0 else jnp.sum


programs = st.lists(st.one_of(st.tuples(st.just("u"), st.integers(0, len(UNARY) - 1)),
                              st.tuples(st.just("b"), st.integers(0, len(BINARY) - 1))), min_size=1, max_size=8)
vectors = st.lists(st.floats(-1.5, 1.5, allow_nan=False, width=32), min_size=3, max_size=3)


# ---- to_jax --------------------------------------------------------------------------------------


def test_to_jax_grad_jit_vmap_match_pure_jax():
    def loss(w, x):
        return tf.reduce_sum(tf.square(tf.matmul(x, w)) + tf.sin(w[0]))

    def ref(w, x):
        return jnp.sum(jnp.square(x @ w) + jnp.sin(w[0]))

    w = jnp.linspace(-1.0, 1.0, 6).reshape(3, 2)
    x = jnp.linspace(0.0, 2.0, 12).reshape(4, 3)
    f = tf.to_jax(loss)
    np.testing.assert_allclose(jax.grad(f)(w, x), jax.grad(ref)(w, x), rtol=1e-6)
    np.testing.assert_allclose(jax.jit(jax.grad(f, argnums=1))(w, x), jax.grad(ref, argnums=1)(w, x), rtol=1e-6)
    batched = jax.vmap(jax.grad(f), in_axes=(None, 0))(w, jnp.stack([x, 2 * x]))
    np.testing.assert_allclose(batched, jax.vmap(jax.grad(ref), in_axes=(None, 0))(w, jnp.stack([x, 2 * x])), rtol=1e-6)
    np.testing.assert_allclose(jax.hessian(lambda v: f(v.reshape(3, 2), x))(w.ravel()),
                               jax.hessian(lambda v: ref(v.reshape(3, 2), x))(w.ravel()), rtol=1e-5)


def test_to_jax_arguments_are_tensors_results_are_arrays_in_structure():
    seen = {}

    def fn(d):
        seen["types"] = {k: type(v).__name__ for k, v in d.items()}
        return {"s": tf.reduce_sum(d["a"]), "pair": (d["b"] * 2.0, 3)}

    out = tf.to_jax(fn)({"a": jnp.ones(3), "b": np.float32(2.0)})
    assert seen["types"] == {"a": "Tensor", "b": "Tensor"}
    assert isinstance(out["s"], jax.Array) and float(out["s"]) == 3.0
    assert isinstance(out["pair"][0], jax.Array) and float(out["pair"][0]) == 4.0 and out["pair"][1] == 3


def test_to_jax_closes_over_variables_and_refuses_traced_assign():
    v = tf.Variable(2.0)
    f = tf.to_jax(lambda x: x * v)
    assert float(jax.grad(f)(3.0)) == 2.0
    with pytest.raises(ValueError, match="to_jax assigned the variable"):
        jax.jit(tf.to_jax(lambda x: v.assign(x * 2.0)))(1.0)
    assert float(v.numpy()) == 2.0  # nothing leaked into the variable
    # Eagerly (no transformation) an assign is an ordinary assign.
    tf.to_jax(lambda x: v.assign(x))(5.0)
    assert float(v.numpy()) == 5.0


def test_to_jax_inside_tapejax_function_sees_variables():
    v = tf.Variable(3.0)
    pure = tf.to_jax(lambda x: x * v)

    @tf.function
    def step(x):
        return pure(x)

    assert float(step(tf.constant(2.0))) == 6.0
    v.assign(4.0)
    assert float(step(tf.constant(2.0))) == 8.0  # the variable is captured, not baked in


def test_jax_grad_of_a_tapejax_function_names_to_jax():
    def f(x):
        return tf.reduce_sum(tf.sin(x))

    with pytest.raises(ValueError, match="tapejax.to_jax"):
        jax.grad(f)(jnp.ones(3))


@given(programs, vectors, vectors)
def test_to_jax_random_programs_match_jax_grad(ops, xs, ys):
    x, y = jnp.asarray(xs, jnp.float32), jnp.asarray(ys, jnp.float32)
    ours = jax.grad(tf.to_jax(lambda a, b: tf.reduce_sum(_chain(ops, 0)(a, b))), argnums=(0, 1))(x, y)
    ref = jax.grad(lambda a, b: jnp.sum(_chain(ops, 1)(a, b)), argnums=(0, 1))(x, y)
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(o, r, rtol=2e-5, atol=1e-6)


# ---- from_jax ------------------------------------------------------------------------------------


def test_from_jax_first_and_second_order_on_the_tape():
    softplus = tf.from_jax(lambda a: jnp.logaddexp(a, 0.0))
    x = tf.constant([-1.0, 0.5, 2.0])
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(softplus(x) * x)
        d = inner.gradient(y, x)
    dd = outer.gradient(d, x)
    ref = lambda a: jnp.sum(jnp.logaddexp(a, 0.0) * a)  # noqa: E731
    np.testing.assert_allclose(d.numpy(), jax.grad(ref)(x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(dd.numpy(), jnp.diag(jax.hessian(ref)(x.numpy())), rtol=1e-5)


def test_from_jax_jacobian_variables_and_compiled_step():
    def layer(params, x):
        return jnp.tanh(x @ params["w"] + params["b"])

    f = tf.from_jax(layer)
    w = tf.Variable(np.linspace(-1, 1, 6).reshape(3, 2).astype(np.float32))
    b = tf.Variable(np.array([0.1, -0.2], np.float32))
    x = tf.constant(np.linspace(0, 1, 6).reshape(2, 3).astype(np.float32))
    with tf.GradientTape(persistent=True) as t:
        y = f({"w": w, "b": b}, x)
        s = tf.reduce_sum(y)
    gw, gb = t.gradient(s, [w, b])
    ref = jax.grad(lambda p: jnp.sum(layer(p, x.numpy())))({"w": w.numpy(), "b": b.numpy()})
    np.testing.assert_allclose(gw.numpy(), ref["w"], rtol=1e-6)
    np.testing.assert_allclose(gb.numpy(), ref["b"], rtol=1e-6)
    jac = t.jacobian(y, w)
    np.testing.assert_allclose(jac.numpy(), jax.jacrev(lambda ww: layer({"w": ww, "b": b.numpy()}, x.numpy()))(w.numpy()),
                               rtol=1e-6)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(f({"w": w, "b": b}, x))
        return tape.gradient(loss, w)

    np.testing.assert_allclose(step().numpy(), ref["w"], rtol=1e-6)


def test_from_jax_rejects_non_callables():
    with pytest.raises(TypeError, match="function of JAX arrays"):
        tf.from_jax(3)


@given(programs, vectors, vectors)
def test_from_jax_random_programs_match_jax_grad(ops, xs, ys):
    pure = _chain(ops, 1)
    op = tf.from_jax(pure)
    x, y = tf.constant(np.asarray(xs, np.float32)), tf.constant(np.asarray(ys, np.float32))
    with tf.GradientTape() as t:
        t.watch([x, y])
        s = tf.reduce_sum(op(x, y))
    gx, gy = t.gradient(s, [x, y])
    rx, ry = jax.grad(lambda a, b: jnp.sum(pure(a, b)), argnums=(0, 1))(x.numpy(), y.numpy())
    np.testing.assert_allclose(gx.numpy(), rx, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(gy.numpy(), ry, rtol=2e-5, atol=1e-6)


# ---- unrecorded JAX code on a tape -----------------------------------------------------------------


def test_jax_code_on_a_watched_tensor_warns_once_and_points_to_from_jax(monkeypatch):
    monkeypatch.setattr(_interop, "_warned_unrecorded", False)
    x = tf.constant([1.0, 2.0])
    with pytest.warns(UserWarning, match="from_jax") as rec:
        with tf.GradientTape() as g:
            g.watch(x)
            y = tf.constant(jnp.sum(jnp.sin(x)))
            tf.constant(jnp.cos(x))  # a second conversion: no second warning
    assert len([w for w in rec if "from_jax" in str(w.message)]) == 1
    assert rec[0].filename == __file__  # the user's line, not JAX's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert g.gradient(y, x) is None  # what the warning explains
    # Outside a tape nothing is reported.
    monkeypatch.setattr(_interop, "_warned_unrecorded", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jnp.sin(x)


def test_a_tensor_is_not_a_jax_array_as_the_docs_say():
    # compat_docs/README.md and debugging.md: a Tensor holds a jax.Array but is not one.
    t = tf.constant([1.0, 2.0])
    v = tf.Variable([1.0])
    assert not isinstance(t, jax.Array) and not isinstance(v, jax.Array)
    assert isinstance(jnp.asarray(t), jax.Array) and isinstance(jnp.asarray(v), jax.Array)
    np.testing.assert_array_equal(jnp.asarray(t), np.array([1.0, 2.0], np.float32))


def test_optax_with_variables_matches_optax_on_plain_arrays():
    # The values recipe of compat_docs/debugging.md (what weight decay needs): optax sees the
    # variables' values, the updates are assigned. Compared with the same optax run with jax.grad.
    optax = pytest.importorskip("optax")
    w0 = np.array([1.0, -2.0, 0.5], np.float32)
    b0 = np.array(0.25, np.float32)
    x = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], np.float32)

    def loss_jax(p):
        return jnp.sum(jnp.tanh(x @ p["w"] + p["b"]) ** 2)

    opt = optax.adam(0.1)
    ref = {"w": jnp.asarray(w0), "b": jnp.asarray(b0)}
    ref_state = opt.init(ref)
    params = {"w": tf.Variable(w0), "b": tf.Variable(b0)}
    state = opt.init(tf.nest.map_structure(tf.convert_to_tensor, params))
    for _ in range(5):
        g = jax.grad(loss_jax)(ref)
        u, ref_state = opt.update(g, ref_state, ref)
        ref = optax.apply_updates(ref, u)

        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.tanh(tf.linalg.matvec(tf.constant(x), params["w"]) + params["b"]) ** 2)
        grads = tape.gradient(loss, params)
        values = tf.nest.map_structure(tf.convert_to_tensor, params)
        updates, state = opt.update(grads, state, values)
        tf.nest.map_structure(lambda p, u: p.assign_add(u), params, updates)
    np.testing.assert_allclose(params["w"].numpy(), ref["w"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(params["b"].numpy(), ref["b"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make_opt", ["adam", "sgd_momentum", "chain_clip_rmsprop"])
def test_optax_takes_variables_as_params(make_opt):
    # opt.init(params) on the Variables themselves and opt.update(grads, state, params) with the
    # tape's gradients: the state's nodes are Tensors, as the gradients are. Compared with the same
    # optax run on plain arrays with jax.grad.
    optax = pytest.importorskip("optax")
    opt = {"adam": lambda: optax.adam(0.1), "sgd_momentum": lambda: optax.sgd(0.05, momentum=0.9),
           "chain_clip_rmsprop": lambda: optax.chain(optax.clip_by_global_norm(0.5), optax.rmsprop(0.05))}[make_opt]()
    w0 = np.array([1.0, -2.0, 0.5], np.float32)
    x = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], np.float32)
    ref = {"w": jnp.asarray(w0), "b": jnp.asarray(0.25, jnp.float32)}
    ref_state = opt.init(ref)
    params = {"w": tf.Variable(w0), "b": tf.Variable(0.25)}
    state = opt.init(params)
    for _ in range(4):
        g = jax.grad(lambda p: jnp.sum(jnp.tanh(x @ p["w"] + p["b"]) ** 2))(ref)
        u, ref_state = opt.update(g, ref_state, ref)
        ref = optax.apply_updates(ref, u)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.tanh(tf.linalg.matvec(tf.constant(x), params["w"]) + params["b"]) ** 2)
        grads = tape.gradient(loss, params)
        updates, state = opt.update(grads, state, params)
        tf.nest.map_structure(lambda p, u: p.assign_add(u), params, updates)
    np.testing.assert_allclose(params["w"].numpy(), ref["w"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(params["b"].numpy(), ref["b"], rtol=1e-5, atol=1e-6)


def test_optax_zipping_variables_with_updates_fails_as_debugging_md_says():
    # compat_docs/debugging.md quotes this error and gives the values recipe as the fix: a
    # transformation that walks params *alongside* the updates (weight decay; apply_updates) meets
    # a Variable node against a Tensor node, and JAX's pytrees compare node types (making both
    # leaves would take them out of jax.jit's arguments). If this starts to pass, update the page.
    optax = pytest.importorskip("optax")
    params = {"w": tf.Variable([1.0, 2.0])}
    opt = optax.adamw(0.1)
    state = opt.init(params)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(params["w"] ** 2)
    grads = tape.gradient(loss, params)
    with pytest.raises(ValueError, match=r"(?s)pytree structure error: different types.*Tensor.*Variable"):
        opt.update(grads, state, params)
    with pytest.raises(ValueError, match=r"(?s)pytree structure error: different types.*Variable.*Tensor"):
        optax.apply_updates(params, grads)
    np.testing.assert_array_equal(params["w"].numpy(), [1.0, 2.0])  # nothing half-updated
    values = tf.nest.map_structure(tf.convert_to_tensor, params)
    updates, _ = opt.update(grads, state, values)  # the recipe
    np.testing.assert_allclose(updates["w"].numpy(), optax.adamw(0.1).update(
        {"w": jnp.array([2.0, 4.0])}, optax.adamw(0.1).init({"w": jnp.array([1.0, 2.0])}),
        {"w": jnp.array([1.0, 2.0])})[0]["w"], rtol=1e-6)


def _equinox_linear():
    eqx = pytest.importorskip("equinox")
    return eqx.nn.Linear(3, 2, key=jax.random.PRNGKey(0))


def _flax_linear():
    nnx = pytest.importorskip("flax.nnx")
    return nnx.Linear(3, 2, rngs=nnx.Rngs(0))


@pytest.mark.parametrize("make_layer", [_equinox_linear, _flax_linear], ids=["equinox", "flax.nnx"])
def test_a_jax_library_layer_on_a_tape_warns_then_from_jax_records_it(monkeypatch, make_layer):
    # Real non-tapejax JAX libraries (both in the `test` extra): their layer applied to a watched
    # tensor is not recorded (one warning naming from_jax); wrapped with from_jax it is, with
    # jax.grad's gradient.
    layer = make_layer()
    x0 = np.array([0.5, -1.0, 2.0], np.float32)
    x = tf.constant(x0)
    monkeypatch.setattr(_interop, "_warned_unrecorded", False)
    with pytest.warns(UserWarning, match="tapejax.from_jax") as rec:
        with tf.GradientTape(persistent=True) as g:
            g.watch(x)
            y = tf.reduce_sum(tf.convert_to_tensor(layer(x)))
            layer(x)  # a second call: still one warning
    assert len([w for w in rec if "from_jax" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert g.gradient(y, x) is None

    recorded = tf.from_jax(layer)
    with tf.GradientTape() as g2:
        g2.watch(x)
        z = tf.reduce_sum(tf.tanh(recorded(x)))
    want = jax.grad(lambda a: jnp.sum(jnp.tanh(layer(a))))(jnp.asarray(x0))
    np.testing.assert_allclose(g2.gradient(z, x).numpy(), want, rtol=1e-6, atol=1e-6)


_SHARDED = r'''
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import tapejax as tf

def loss(w, x):
    return tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))

mesh = Mesh(np.array(jax.devices()), ("batch",))
x = jax.random.normal(jax.random.PRNGKey(0), (16, 3))
w = jnp.arange(3.0).reshape(3, 1) / 3
xs = jax.device_put(x, NamedSharding(mesh, P("batch", None)))
step = jax.jit(jax.value_and_grad(tf.to_jax(loss)))
l1, g1 = step(w, xs)
l0, g0 = jax.value_and_grad(lambda w, x: jnp.mean(jnp.square(x @ w - 1.0)))(w, x)
np.testing.assert_allclose(l1, l0, rtol=1e-5)
np.testing.assert_allclose(g1, g0, rtol=1e-5, atol=1e-6)
per_row = jax.jit(jax.vmap(tf.to_jax(lambda r: tf.reduce_sum(r * r))))(xs)
assert len(per_row.sharding.device_set) == 4, per_row.sharding   # the batch stays sharded
np.testing.assert_allclose(per_row, jnp.sum(x * x, axis=1), rtol=1e-5)
print("ok", len(jax.devices()))
'''


def test_to_jax_composes_with_sharding_over_four_devices(tmp_path):
    # Four virtual CPU devices need a fresh process (XLA reads the flag at start-up).
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    script = tmp_path / "sharded.py"
    script.write_text(_SHARDED)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "ok 4"


def test_equinox_filter_grad_names_to_jax_and_works_with_it():
    eqx = pytest.importorskip("equinox")

    def f(x):
        return tf.reduce_sum(tf.sin(x))

    with pytest.raises(ValueError, match="tapejax.to_jax"):
        eqx.filter_grad(f)(jnp.ones(3))
    np.testing.assert_allclose(eqx.filter_grad(tf.to_jax(f))(jnp.ones(3)), jax.grad(lambda a: jnp.sum(jnp.sin(a)))(jnp.ones(3)),
                               rtol=1e-6)


def test_numpy_inside_jax_grad_names_to_jax():
    with pytest.raises(AttributeError, match="tapejax.to_jax"):
        jax.grad(lambda x: tf.sin(x).numpy().sum())(jnp.ones(3))
