"""TF's gradient functions written with tapejax's primitives (tapejax/_ops/_gradfns.py).

The interpreted tier computes the cotangents of add, subtract, multiply, divide,
negative, identity, add_n, stack, transpose and reshape with the ops' own kernels (TF's MulGrad is ``grad * y``)
where no tape watches the backward pass, so a new tape's first gradient reuses the
programs its forward pass compiled. Where a tape watches it (a nested gradient), those
rules and the nonlinear ones (sin, cos, log, square, pow, reduce_sum, reduce_mean) are
bound as recorded ops, as TF records its gradient ops. Each rule must give what
``jax.vjp`` of the op gives, bit for bit (or decline), and a whole gradient, nested or
not, must not change with the rules on or off (values, and which derivatives are None).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.lax.lax import _convert_element_type  # the one way to make a weakly typed array

import tapejax as tf
from tapejax import config
from tapejax._engine._interpret import ADD, OUTPUT_RULES, _run_kernel
from tapejax._ops._gradfns import GRAD_KERNEL_RULES, RULES
from tapejax._ops._machinery import PRIMS

_RULED = [PRIMS[n] for n in RULES] + [OUTPUT_RULES[n] for n in GRAD_KERNEL_RULES] + [ADD]
# Every rule by the name its test cases use: the op library's primitives, and the fused
# gradient kernels (TanhGrad(y, grad)) a nested gradient records.
_ALL = {**{n: (PRIMS[n], r) for n, r in RULES.items()},
        **{OUTPUT_RULES[n].name: (OUTPUT_RULES[n], r) for n, r in GRAD_KERNEL_RULES.items()}}


@pytest.fixture
def interpret():
    saved = config.replay_tier
    config.replay_tier = "interpret"
    yield
    config.replay_tier = saved


@pytest.fixture
def rules_off():
    saved = [(p, p.vjp_rule) for p in _RULED]

    def off():
        for p in _RULED:
            p.vjp_rule = None

    yield off
    for p, r in saved:
        p.vjp_rule = r


def _operand(rng, shape, dtype, weak=False):
    if dtype == "py":
        return float(rng.normal())
    v = rng.normal(size=shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.normal(size=shape).astype(dtype)
    a = jnp.asarray(v)
    return _convert_element_type(a, a.dtype, weak_type=True) if weak else a


def _vjp(name, vals, ct, act, params):
    impl = _ALL[name][0].impl

    def f(*d):
        a = list(vals)
        for j, v in zip(act, d):
            a[j] = v
        return impl(*a, **params)

    _, pb = jax.vjp(f, *[vals[j] for j in act])
    return pb(ct)


_SHAPES = [(), (3,), (2, 3), (1, 3)]
_UNARY = ("sin", "cos", "log", "square")


def _case(rng, name, dtypes):
    """Random operands and static parameters for one call of ``name``'s rule."""
    dtype = dtypes[int(rng.integers(len(dtypes)))]
    if name in ("negative", "identity") + _UNARY:
        v = _operand(rng, _SHAPES[int(rng.integers(4))], dtype, weak=rng.random() < 0.2)
        if name == "log":
            v = jnp.abs(v) + 0.25
        return (v,), {}
    if name == "add_n":
        shape = _SHAPES[int(rng.integers(4))]
        return tuple(_operand(rng, shape, dtype) for _ in range(int(rng.integers(1, 4)))), {}
    if name == "transpose":
        shape = [(2, 3), (2, 3, 4), (5,)][int(rng.integers(3))]
        perm = None if rng.random() < 0.2 else tuple(int(i) for i in rng.permutation(len(shape)))
        return (_operand(rng, shape, dtype),), {"perm": perm, "conj": bool(rng.random() < 0.5)}
    if name == "reshape":
        return (_operand(rng, (2, 6), dtype, weak=rng.random() < 0.1),), {
            "shape": [(3, 4), (12,), (-1, 2), (2, 2, 3)][int(rng.integers(4))]}
    if name == "stack":
        shape = _SHAPES[int(rng.integers(3))]
        n = int(rng.integers(1, 4))
        vals = tuple(_operand(rng, shape, dtype, weak=rng.random() < 0.1) for _ in range(n))
        return vals, {"axis": int(rng.integers(-len(shape) - 1, len(shape) + 1))}
    if name in ("ExpGrad", "TanhGrad", "SigmoidGrad"):
        shape = _SHAPES[int(rng.integers(4))]
        y = _operand(rng, shape, dtype, weak=rng.random() < 0.1)
        y = jnp.tanh(y) if name == "TanhGrad" else jax.nn.sigmoid(y) if name == "SigmoidGrad" else jnp.exp(y)
        return (y, _operand(rng, shape if rng.random() < 0.9 else (), dtype)), {}
    if name in ("reduce_sum", "reduce_mean"):
        shape = [(), (3,), (2, 3), (2, 3, 4), (0, 3)][int(rng.integers(5))]
        axis = None
        if shape and rng.random() < 0.7:
            axis = tuple(sorted(int(a) for a in rng.choice(len(shape), int(rng.integers(1, len(shape) + 1)),
                                                            replace=False)))
        return (_operand(rng, shape, dtype, weak=rng.random() < 0.1),), {"axis": axis,
                                                                          "keepdims": bool(rng.random() < 0.5)}
    if name == "matmul":
        n, k, m = (int(v) for v in rng.integers(1, 6, size=3))
        if rng.random() < 0.1:
            return (_operand(rng, (2, n, k), dtype), _operand(rng, (2, k, m), dtype)), {
                "ta": False, "tb": False, "aa": False, "ab": False}
        flags = {f: bool(rng.random() < 0.1) for f in ("ta", "tb", "aa", "ab")}
        sa = (k, n) if flags["ta"] or flags["aa"] else (n, k)
        sb = (m, k) if flags["tb"] or flags["ab"] else (k, m)
        return (_operand(rng, sa, dtype), _operand(rng, sb, dtype)), flags
    if name in ("matmul_grad_a", "matmul_grad_b"):
        n, k, m = (int(v) for v in rng.integers(1, 6, size=3))
        other = (n, k) if name == "matmul_grad_b" else (k, m)  # (GB(c, a) = a^T c, GA(c, b) = c b^T)
        return (_operand(rng, (n, m), dtype), _operand(rng, other, dtype)), {}
    if name == "pow":
        x = jnp.abs(_operand(rng, _SHAPES[int(rng.integers(4))], dtype)) + 0.5
        r = rng.random()
        y = int(rng.integers(-3, 5)) if r < 0.4 else float(rng.uniform(-2.5, 3.5)) if r < 0.8 else (
            _operand(rng, _SHAPES[int(rng.integers(4))], dtype))
        return (x, y), {}
    sx, sy = (_SHAPES[int(rng.integers(4))] for _ in range(2))
    vals = (_operand(rng, sx, dtype), _operand(rng, sy, dtype if rng.random() < 0.8 else "py"))
    return (vals[::-1] if rng.random() < 0.3 else vals), {}


@pytest.mark.parametrize("x64", [False, True])
def test_each_rule_gives_jax_vjp_or_declines(x64, monkeypatch):
    # 400 random calls of the rules (shapes that broadcast or not, Python scalars, weak
    # types, complex, float16, reductions over any axes): where a rule answers, its
    # cotangents are jax.vjp's (bit for bit for real dtypes, except the rules of gradient
    # kernels, a second derivative's sums of products; XLA may round a complex product
    # differently in another program), with the inputs' shapes, dtypes and weak types.
    # Kernels compiled by XLA's full pipeline, as the pullback is (the host evaluator's
    # libm, and XLA's fast pipeline's dot, may differ from it by an ulp, which the
    # comparison would see; each agrees with itself).
    monkeypatch.setattr(config, "kernel_host_first_calls", 0)
    monkeypatch.setattr(config, "kernel_fast_compile_elements", 0)
    dtypes = [np.float32, np.complex64, np.float16] + ([np.float64] if x64 else [])
    rng = np.random.default_rng(2026_11_25 + x64)
    answered = {n: 0 for n in _ALL}
    with jax.enable_x64(x64):
        for case in range(400):
            name = list(_ALL)[case % len(_ALL)]
            vals, params = _case(rng, name, dtypes)
            out = _ALL[name][0].impl(*vals, **params)
            act = tuple(j for j, v in enumerate(vals)
                        if not isinstance(v, int | float) and (j == 0 or rng.random() < 0.8))
            if not act:
                continue
            ct = _operand(rng, out.shape, out.dtype)
            got = _ALL[name][1](vals, ct, act, params, _run_kernel)
            if got is None:
                continue
            answered[name] += 1
            # (each input's cotangent by a pullback of its own, as a watched backward pass binds
            # them: XLA lays out a program holding both of a matmul's products differently)
            want = [_vjp(name, vals, ct, (j,), params)[0] for j in act]
            for g, w, j in zip(got, want, act):
                assert g.shape == w.shape == vals[j].shape, (name, case)
                assert g.dtype == w.dtype and g.weak_type == w.weak_type, (name, case)
                if np.dtype(g.dtype).kind == "c":
                    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, err_msg=f"{name} case {case}")
                elif name.endswith("Grad") or name.startswith("matmul_grad"):
                    # A gradient kernel's own pullback (a second derivative's rule) is a sum of
                    # products, which XLA may contract into a fused multiply-add or sum in
                    # another order in the generic pullback's program (TF's TanhGradGrad
                    # orders the products differently again): rounding, not bits.
                    eps = float(np.finfo(g.dtype).eps)
                    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=64 * eps, atol=64 * eps,
                                               err_msg=f"{name} case {case}")
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


def test_a_linear_backward_pass_compiles_nothing_new(interpret, monkeypatch, execution_mode):
    # The forward pass compiled every kernel the backward pass needs (mul, neg, sub, add,
    # stack, and indexing for stack's gradient): the first gradient of a new tape
    # compiles no program. (The host evaluator off: it answers a signature's first calls
    # without compiling, so whether the forward pass compiled a kernel would otherwise
    # depend on how often earlier tests in this process had called it. Eager mode: lazy
    # mode defers the backward's ops too and compiles their program when it first runs them
    # together, whatever the kernels; this passed in lazy mode only when an earlier test in
    # the same process had run that program.)
    execution_mode("eager")
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


def _nested_program(rng, n_ops):
    """A random program over a (3,) vector: the nonlinear ops with rules, the linear
    ones, ops without rules (tanh, exp) and shapes that broadcast (a reduction times a
    vector), and the same math in jax.numpy. Returns ``run(x, np_like) -> values``."""
    prog = []
    for _ in range(n_ops):
        k = len(prog) + 1
        prog.append((int(rng.integers(17)), int(rng.integers(k)), int(rng.integers(k)),
                     float(rng.uniform(0.5, 1.5)), int(rng.integers(1, 4))))
    # (op 13 is exp or sigmoid, by the parity of its first operand's index)

    def run(x, np_like):
        vals = [x]
        for op, i, j, c, n in prog:
            a, b = vals[i], vals[j]
            if op == 0:
                r = a + b
            elif op == 1:
                r = a - b * c
            elif op == 2:
                r = a * b
            elif op == 3:
                r = a / (b * b + 1.0)
            elif op == 4:
                r = -np_like.sin(a)
            elif op == 5:
                r = np_like.cos(a) * c
            elif op == 6:
                r = np_like.log(a * a + 1.0)
            elif op == 7:
                r = np_like.square(a)
            elif op == 8:
                r = a ** n
            elif op == 9:
                r = (a * a + 0.5) ** c
            elif op == 10:
                r = np_like.reduce_sum(a) * b
            elif op == 11:
                r = np_like.reduce_mean(a * b) + a
            elif op == 12:
                r = np_like.tanh(a)
            elif op == 13:
                r = np_like.exp(a * 0.1) if i % 2 else np_like.sigmoid(a)
            elif op == 14:
                r = np_like.reshape(np_like.transpose(np_like.reshape(a, (1, 3))), (3,)) - b
            elif op == 15:
                r = np_like.reshape(np_like.matmul(np_like.reshape(a, (1, 3)), _M33 * c), (3,))
            else:
                r = np_like.reduce_sum(np_like.matmul(np_like.reshape(a, (3, 1)), np_like.reshape(b, (1, 3))), 0)
            vals.append(r)
        return vals

    return run


_M33 = np.array([[0.5, -1.0, 0.25], [1.5, 0.3, -0.7], [-0.2, 0.8, 1.1]], np.float32)


class _TFN:
    sin, cos, log, square, tanh, exp, sigmoid = tf.sin, tf.cos, tf.math.log, tf.square, tf.tanh, tf.exp, tf.sigmoid
    reshape, transpose, reduce_sum, reduce_mean, matmul = tf.reshape, tf.transpose, tf.reduce_sum, tf.reduce_mean, tf.matmul


class _JNP:
    sin, cos, log, square, tanh, exp, reshape, transpose = (jnp.sin, jnp.cos, jnp.log, jnp.square, jnp.tanh,
                                                            jnp.exp, jnp.reshape, jnp.transpose)
    reduce_sum, reduce_mean, sigmoid, matmul = jnp.sum, jnp.mean, jax.nn.sigmoid, jnp.matmul


def _nested_results(cases):
    # Per program: the inner gradient, the outer gradient with respect to x and an
    # intermediate (None where unconnected), the outer jacobian, and a forward-over-reverse
    # tangent, all as NumPy (or None).
    out = []
    for run, x0, w0, k, mode in cases:
        x = tf.constant(x0)
        w = tf.constant(w0)
        res = []
        if mode == "fwd":
            with tf.autodiff.ForwardAccumulator(x, tf.constant(w0)) as acc:
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    y = tf.reduce_sum(run(x, _TFN)[-1])
                g = inner.gradient(y, x)
            t = acc.jvp(g)
            res = [g, t]
        else:
            with tf.GradientTape(persistent=True) as outer:
                outer.watch(x)
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    vals = run(x, _TFN)
                    y = tf.reduce_sum(vals[-1])
                g = inner.gradient(y, x)
                z = tf.reduce_sum(g * w)
            res = [g, *outer.gradient(z, [x, vals[k]])]
            if mode == "jac":
                res.append(outer.jacobian(g, x))
        out.append([None if r is None else r.numpy() for r in res])
    return out


def test_random_nested_programs_agree_with_rules_on_and_off_and_with_jax(interpret, rules_off):
    # 240 random programs differentiated twice (tape in tape, a jacobian of the inner
    # gradient, forward over reverse): with the rules the inner gradient's ops are recorded
    # as TF's gradient ops, without them as generic pullbacks. The values agree to rounding
    # (the host evaluator's libm and XLA's differ by an ulp, and which kernels are compiled
    # differs between the two passes; a second derivative multiplies in another order), the
    # None-ness of every derivative (an intermediate as a source included) exactly, and
    # both agree with jax's nested derivatives of the same function.
    rng = np.random.default_rng(2026_11_29)
    cases = []
    for _ in range(240):
        n = int(rng.integers(1, 8))
        run = _nested_program(rng, n)
        x0 = rng.uniform(-1.5, 1.5, size=(3,)).astype(np.float32)
        w0 = rng.normal(size=(3,)).astype(np.float32)
        cases.append((run, x0, w0, int(rng.integers(n + 1)), ["grad", "grad", "jac", "fwd"][int(rng.integers(4))]))
    with_rules = _nested_results(cases)
    rules_off()
    without = _nested_results(cases)
    for case, ((run, x0, w0, k, mode), got, base) in enumerate(zip(cases, with_rules, without)):
        msg = f"case {case} ({mode})"
        assert [r is None for r in got] == [r is None for r in base], msg
        for a, b in zip(got, base):
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-5, err_msg=msg)

        def inner_grad(xv):
            return jax.grad(lambda v: jnp.sum(run(v, _JNP)[-1]))(xv)

        xj, wj = jnp.asarray(x0), jnp.asarray(w0)
        np.testing.assert_allclose(got[0], inner_grad(xj), rtol=2e-5, atol=1e-5, err_msg=msg)
        if mode == "fwd":
            want = jax.jvp(inner_grad, (xj,), (wj,))[1]
        else:
            want = jax.grad(lambda v: jnp.sum(inner_grad(v) * wj))(xj)
        # None (not connected: a program linear in x) where jax's derivative is zero
        np.testing.assert_allclose(np.zeros(3) if got[1] is None else got[1], want, rtol=1e-4, atol=1e-4,
                                   err_msg=msg)
        if mode == "jac":
            np.testing.assert_allclose(np.zeros((3, 3)) if got[3] is None else got[3], jax.hessian(lambda v: jnp.sum(run(v, _JNP)[-1]))(xj),
                                       rtol=1e-4, atol=1e-4, err_msg=msg)


def test_a_nested_gradient_records_tf_gradient_ops(interpret):
    # The inner gradient of sum(sin(x) * x**3) is recorded on the outer tape as TF's
    # gradient ops (cos, multiply, pow), not as generic pullbacks, and the
    # second derivative is the analytic one.
    x0 = np.array([0.3, -1.2, 2.0], np.float32)
    x = tf.constant(x0)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(tf.sin(x) * x**3)
        g = inner.gradient(y, x)
    names = {e.prim.name for e in outer._tape.eqns}
    assert "vjp" not in names and {"cos", "multiply", "pow"} <= names, names
    h = outer.gradient(g, x).numpy()
    xd = x0.astype(np.float64)
    want = -np.sin(xd) * xd**3 + 6 * np.cos(xd) * xd**2 + 6 * np.sin(xd) * xd
    np.testing.assert_allclose(h, want, rtol=1e-5)


def test_a_watched_backward_pass_still_records_its_ops(interpret):
    # An outer tape watches the inner gradient: the rules' ops are recorded, and the
    # second derivative is right (d2/dx2 of x*x*c = 2c).
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
