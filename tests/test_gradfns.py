"""TF's gradient functions of the linear ops on arrays (tapejax/_ops/_gradfns.py).

The interpreted tier computes the cotangents of add, subtract, multiply, divide,
negative, identity, add_n, stack, transpose and reshape with the ops' own kernels (TF's MulGrad is ``grad * y``)
where no tape watches the backward pass, so a new tape's first gradient reuses the
programs its forward pass compiled. Each rule must give what ``jax.vjp`` of the op
gives (or decline), and a whole gradient must not change with the rules on or off.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.lax.lax import _convert_element_type  # the one way to make a weakly typed array

import tapejax as tf
from tapejax import config
from tapejax._ops._gradfns import RULES
from tapejax._ops._machinery import PRIMS


@pytest.fixture
def interpret():
    saved = config.replay_tier
    config.replay_tier = "interpret"
    yield
    config.replay_tier = saved


@pytest.fixture
def rules_off():
    saved = {n: PRIMS[n].vjp_values for n in RULES}

    def off():
        for n in RULES:
            PRIMS[n].vjp_values = None

    yield off
    for n, r in saved.items():
        PRIMS[n].vjp_values = r


def _operand(rng, shape, dtype, weak=False):
    if dtype == "py":
        return float(rng.normal())
    v = rng.normal(size=shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.normal(size=shape).astype(dtype)
    a = jnp.asarray(v)
    return _convert_element_type(a, a.dtype, weak_type=True) if weak else a


def _vjp(name, vals, ct, act, params):
    impl = PRIMS[name].impl

    def f(*d):
        a = list(vals)
        for j, v in zip(act, d):
            a[j] = v
        return impl(*a, **params)

    _, pb = jax.vjp(f, *[vals[j] for j in act])
    return pb(ct)


_SHAPES = [(), (3,), (2, 3), (1, 3)]
_DTYPES = [np.float32, np.complex64]


def test_each_rule_gives_jax_vjp_or_declines():
    # 300 random calls of the rules (shapes that broadcast or not, Python scalars, weak
    # types, complex): where a rule answers, its cotangents are jax.vjp's (bit for bit for
    # real dtypes; XLA may round a complex product differently in another program), with
    # the inputs' shapes, dtypes and weak types.
    rng = np.random.default_rng(2026_11_25)
    answered = {n: 0 for n in RULES}
    for case in range(300):
        name = list(RULES)[case % len(RULES)]
        dtype = _DTYPES[int(rng.integers(len(_DTYPES)))]
        if name in ("negative", "identity"):
            vals = (_operand(rng, _SHAPES[int(rng.integers(4))], dtype, weak=rng.random() < 0.2),)
            params = {}
        elif name == "add_n":
            shape = _SHAPES[int(rng.integers(4))]
            vals = tuple(_operand(rng, shape, dtype) for _ in range(int(rng.integers(1, 4))))
            params = {}
        elif name == "transpose":
            shape = [(2, 3), (2, 3, 4), (5,)][int(rng.integers(3))]
            vals = (_operand(rng, shape, dtype),)
            perm = None if rng.random() < 0.2 else tuple(int(i) for i in rng.permutation(len(shape)))
            params = {"perm": perm, "conj": bool(rng.random() < 0.5)}
        elif name == "reshape":
            vals = (_operand(rng, (2, 6), dtype, weak=rng.random() < 0.1),)
            params = {"shape": [(3, 4), (12,), (-1, 2), (2, 2, 3)][int(rng.integers(4))]}
        elif name == "stack":
            shape = _SHAPES[int(rng.integers(3))]
            n = int(rng.integers(1, 4))
            vals = tuple(_operand(rng, shape, dtype, weak=rng.random() < 0.1) for _ in range(n))
            params = {"axis": int(rng.integers(-len(shape) - 1, len(shape) + 1))}
        else:
            sx, sy = (_SHAPES[int(rng.integers(4))] for _ in range(2))
            vals = (_operand(rng, sx, dtype), _operand(rng, sy, dtype if rng.random() < 0.8 else "py"))
            if rng.random() < 0.3:
                vals = vals[::-1]
            params = {}
        out = PRIMS[name].impl(*vals, **params)
        act = tuple(j for j, v in enumerate(vals) if not isinstance(v, float) and rng.random() < 0.8)
        if not act:
            continue
        ct = _operand(rng, out.shape, out.dtype)
        got = RULES[name](vals, ct, act, params)
        if got is None:
            continue
        answered[name] += 1
        want = _vjp(name, vals, ct, act, params)
        for g, w, j in zip(got, want, act):
            assert g.shape == w.shape == vals[j].shape, (name, case)
            assert g.dtype == w.dtype and g.weak_type == w.weak_type, (name, case)
            if np.dtype(dtype).kind == "c":
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, err_msg=f"{name} case {case}")
            else:
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=f"{name} case {case}")
    assert all(answered.values()), answered  # every rule was exercised


def _program(rng, n_ops):
    """A random TF-style program over a (3,) vector and a scalar (every value has one of
    those shapes), mostly linear ops (with
    broadcasting, Python numbers, stack and indexing) and a few nonlinear ones, and the
    same math in jax.numpy."""
    prog = []
    for _ in range(n_ops):
        k = len(prog) + 2
        prog.append((int(rng.integers(9)), int(rng.integers(k)), int(rng.integers(k)), float(rng.uniform(0.5, 1.5))))

    def run(a, b, np_like):
        vals = [a, b]
        for op, i, j, c in prog:
            x, y = vals[i], vals[j]
            if op == 0:
                r = x + y
            elif op == 1:
                r = x - y
            elif op == 2:
                r = x * y
            elif op == 3:
                r = x / (y * y + 1.0)
            elif op == 4:
                r = -x
            elif op == 5:
                r = c * x if rng_sign(c) else x * c
            elif op == 6:
                # shapes stay () or (3,): scalars are stacked, vectors shifted
                r = np_like.stack([x, y * c, x - y]) if x.shape == y.shape == () else x - c
            elif op == 7:
                r = x[0] if x.shape else x + c
            else:
                r = np_like.sin(x)
            vals.append(r)
        return vals[-1]

    def rng_sign(c):
        return c > 1.0

    return run


class _TF:
    stack = staticmethod(tf.stack)
    sin = staticmethod(tf.sin)


def test_random_programs_agree_with_rules_on_and_off_and_with_jax_grad(interpret, rules_off):
    # 200 random programs: the interpreted gradient with the rules equals the one without
    # them (the generic pullbacks) and jax.grad of the same pure function.
    rng = np.random.default_rng(112526)
    cases = []
    for case in range(200):
        run = _program(rng, int(rng.integers(1, 10)))
        a0 = rng.normal(size=(3,)).astype(np.float32)
        b0 = np.float32(rng.normal())
        cases.append((run, a0, b0))

    def tape_grads():
        out = []
        for run, a0, b0 in cases:
            a, b = tf.Variable(a0), tf.Variable(b0)
            with tf.GradientTape() as t:
                y = tf.reduce_sum(run(a, b, _TF))
            out.append([g.numpy() for g in t.gradient(y, [a, b], unconnected_gradients="zero")])
        return out

    with_rules = tape_grads()
    rules_off()
    without = tape_grads()
    for case, ((run, a0, b0), g1, g0) in enumerate(zip(cases, with_rules, without)):
        expected = jax.grad(lambda a, b: jnp.sum(run(a, b, jnp)), argnums=(0, 1))(jnp.asarray(a0), jnp.asarray(b0))
        for x1, x0, e in zip(g1, g0, expected):
            np.testing.assert_allclose(x1, x0, rtol=1e-6, atol=1e-7, err_msg=f"case {case}: rules on/off")
            np.testing.assert_allclose(x1, np.asarray(e), rtol=2e-5, atol=1e-6, err_msg=f"case {case}: jax.grad")


def _count_compiles(fn):
    # XLA compiles seen by JAX's monitoring (one backend-compile event per program).
    events = []

    def listener(event, duration, **kw):
        if event.endswith("backend_compile_duration"):
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        fn()
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    return len(events)


def test_a_linear_backward_pass_compiles_nothing_new(interpret, monkeypatch):
    # The forward pass compiled every kernel the backward pass needs (mul, neg, sub, add,
    # stack, and indexing for stack's gradient): the first gradient of a new tape
    # compiles no program. (The host evaluator off: it answers a signature's first calls
    # without compiling, so whether the forward pass compiled a kernel would otherwise
    # depend on how often earlier tests in this process had called it.)
    monkeypatch.setattr(config, "kernel_host_first_calls", 0)
    k = tf.Variable(1.25)

    def forward():
        a, b = tf.constant(0.75), tf.constant(-0.5)
        tf.constant([1.0, 2.0])[1]  # the program that indexes a 2-vector
        t = tf.GradientTape()
        with t:
            for _ in range(3):
                a, b = a + b * 0.5, b - k * a
                a = -a
            v = tf.stack([a, b]) * tf.stack([b, a])
        return t, v

    forward()  # compiles the forward kernels
    t, v = forward()
    got = []
    assert _count_compiles(lambda: got.append(t.gradient(v, k).numpy())) == 0

    def pure(kv):
        a, b = 0.75, -0.5
        for _ in range(3):
            a, b = a + b * 0.5, b - kv * a
            a = -a
        return jnp.sum(jnp.stack([a, b]) * jnp.stack([b, a]))

    np.testing.assert_allclose(got[0], jax.grad(pure)(1.25), rtol=1e-6)


def test_a_watched_backward_pass_still_records_its_ops(interpret):
    # An outer tape watches the inner gradient: the rules do not run, the pullbacks are
    # recorded, and the second derivative is right (d2/dx2 of x*x*c = 2c).
    x = tf.Variable(1.5)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = x * x * 3.0 - x
        g = inner.gradient(y, x)
    np.testing.assert_allclose(g.numpy(), 2 * 3.0 * 1.5 - 1)
    np.testing.assert_allclose(outer.gradient(g, x).numpy(), 6.0)


def test_constants_are_copied_and_placed_on_the_default_device():
    # tf.constant from a NumPy array transfers a private copy (no compile); a later
    # write to the user's array does not reach the tensor.
    a = np.arange(5, dtype=np.float32)
    c = tf.constant(a)
    a[0] = 99.0
    assert c.numpy()[0] == 0.0
    dev = jax.devices()[-1]
    with jax.default_device(dev):
        d = tf.constant(np.ones((2, 7), np.float32))
    assert d._value.devices() == {dev}
    assert not d._value.weak_type and d.dtype == tf.float32
