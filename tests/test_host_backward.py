"""The host-resident backward pass (tapejax/_engine/_interpret.py ``_gradient_host``).

A first gradient nothing watches runs op by op on CPU, and the host answers most of its
kernel calls. Its cotangents then stay NumPy values (``_kernels.HostValue``) between
kernels instead of becoming device arrays and Tensors at every op. That route must be
invisible: the same values bit for bit, the same host answers and the same compiles as
the Tensor route (``_gradient``), whatever the point where a signature's host calls run
out and its compiled kernel takes over.

Both routes are run in fresh processes (the kernels' host counts and jit's caches are
per process), each on the same seeded random programs in the same order, and compared.
"""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf
from tapejax import config
from tapejax._engine import _interpret, _kernels

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the host answers on CPU only")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _program(rng, n_ops):
    """A random program over a (2, 3) matrix ``a`` and a (3,) vector ``b``, as a function of
    a namespace (tapejax or jax.numpy with TF's names): broadcasting, fan-out (values read
    more than once), the rules' ops, the fused-gradient ops (tanh, exp, sigmoid), generic
    pullbacks (maximum, abs, where), reductions, matmuls, reshapes, multi-output ops
    (unstack) and unconnected values."""
    steps = [(int(rng.integers(22)), int(rng.integers(2 + i)), int(rng.integers(2 + i)),
              float(rng.uniform(0.5, 1.5))) for i in range(n_ops)]

    def run(ns, a, b):
        vals = [a, b]
        for op, i, j, c in steps:
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
                r = -x * c
            elif op == 5:
                r = ns.sin(x) + c
            elif op == 6:
                r = ns.tanh(x)
            elif op == 7:
                r = ns.exp(x * 0.25)
            elif op == 8:
                r = ns.sigmoid(x)
            elif op == 9:
                r = ns.maximum(x, y)
            elif op == 10:
                r = ns.abs(x) + ns.square(y)
            elif op == 11:
                r = ns.reduce_sum(x, axis=0) if len(x.shape) == 2 else ns.reduce_mean(x) * y
            elif op == 12:
                r = ns.matmul(ns.matmul(x, ns.transpose(x)), x) if len(x.shape) == 2 else x * c
            elif op == 13:
                r = ns.reshape(ns.transpose(x), (2, 3)) if len(x.shape) == 2 else x
            elif op == 14:
                r = ns.stack([x, y * c]) if x.shape == y.shape == (3,) else x
            elif op == 15:
                r = ns.unstack(x)[1] if len(x.shape) == 2 else x
            elif op == 16:
                r = ns.where(x > y, x, y * c)
            elif op == 17:
                r = ns.cos(x) * ns.log(ns.abs(y) + 1.0)
            elif op == 18:
                r = ns.pow(ns.abs(x) + 1.0, 1.5)
            elif op == 19:
                r = x + x * c  # fan-out: two cotangents summed
            elif op == 20:
                r = ns.reduce_sum(x) * c + y
            else:
                r = ns.stop_gradient(x) * y
            vals.append(r)
        return ns.reduce_sum(vals[-1]) + ns.reduce_sum(vals[-2]) * 0.5

    return run


class _JNP:
    """jax.numpy under the TF names ``_program`` uses."""

    sin, cos, tanh, exp, log, abs, square = jnp.sin, jnp.cos, jnp.tanh, jnp.exp, jnp.log, jnp.abs, jnp.square
    maximum, where, stack, transpose, reshape, matmul = jnp.maximum, jnp.where, jnp.stack, jnp.transpose, jnp.reshape, jnp.matmul
    sigmoid = staticmethod(jax.nn.sigmoid)
    pow = staticmethod(jnp.power)
    stop_gradient = staticmethod(jax.lax.stop_gradient)

    @staticmethod
    def reduce_sum(x, axis=None):
        return jnp.sum(x, axis=axis)

    @staticmethod
    def reduce_mean(x):
        return jnp.mean(x)

    @staticmethod
    def unstack(x):
        return list(x)


class _TF:
    sin, cos, tanh, exp, sigmoid, maximum, where = tf.sin, tf.cos, tf.tanh, tf.exp, tf.sigmoid, tf.maximum, tf.where
    abs, square, reduce_sum, reduce_mean, matmul = tf.abs, tf.square, tf.reduce_sum, tf.reduce_mean, tf.matmul
    transpose, reshape, stack, unstack, pow, stop_gradient = tf.transpose, tf.reshape, tf.stack, tf.unstack, tf.pow, tf.stop_gradient
    log = tf.math.log


def _cases(seed, n, dtype=np.float32):
    rng = np.random.default_rng(seed)
    for case in range(n):
        run = _program(rng, int(rng.integers(1, 12)))
        a0 = rng.normal(size=(2, 3)).astype(dtype)
        b0 = rng.normal(size=(3,)).astype(dtype)
        yield case, run, a0, b0


def _worker(route: str, seed: int, n: int, budget: str, dtype: str = "float32") -> dict:
    """Runs in a fresh process: every case's gradient three times (a signature's host calls
    run out at different points of the three), with the host route on or off; the
    gradients' bytes and the host and compile counts."""
    from tapejax._core import _recorder

    compiles = [0]
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, _d, **_kw: compiles.__setitem__(0, compiles[0] + ("backend_compile" in event)))
    config.replay_tier = "interpret"
    if budget == "small":
        # 3 host calls a signature, then its compiled kernel: the switch falls inside gradients.
        config.kernel_host_first_calls = 3
        config.kernel_host_budget_elements = 0
    if route == "off":
        _interpret._host_route = lambda sl, given: False
    elif route == "planted":
        # A planted fault: one cotangent sum in 200 drops a term.
        real, calls = _interpret._host_sum, [0]

        def faulty(a, b):
            calls[0] += 1
            return b if calls[0] % 200 == 0 else real(a, b)

        _interpret._host_sum = faulty
    taken = [0]
    real_host = _interpret._gradient_host

    def counted(*args):
        taken[0] += 1
        return real_host(*args)

    _interpret._gradient_host = counted
    out = []
    for _case, run, a0, b0 in _cases(seed, n, np.dtype(dtype)):
        for _ in range(3):
            a, b = tf.Variable(a0), tf.Variable(b0)
            with tf.GradientTape() as t:
                y = run(_TF, a, b)
            gs = t.gradient(y, [a, b], unconnected_gradients="zero")
            out.append([np.asarray(g.numpy()).tobytes().hex() for g in gs])
    assert not _recorder.state.recording
    return {"grads": out, "host": _kernels.host_counts["answered"], "compiles": compiles[0], "taken": taken[0]}


def _run(route: str, seed: int, n: int, budget: str, dtype: str = "float32") -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + HERE, TAPEJAX_REPLAY_TIER="interpret",
               TAPEJAX_EXECUTION="eager", JAX_ENABLE_X64="1" if dtype == "float64" else "0")
    code = (f"import json, test_host_backward as m; "
            f"print('RESULT ' + json.dumps(m._worker({route!r}, {seed}, {n}, {budget!r}, {dtype!r})))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and line, p.stderr[-3000:]
    return json.loads(line[0][7:])


def _expected(seed, n, dtype):
    out = []
    with jax.enable_x64(dtype == "float64"):
        for _case, run, a0, b0 in _cases(seed, n, np.dtype(dtype)):
            out.append([np.asarray(g) for g in jax.grad(lambda a, b: run(_JNP, a, b), argnums=(0, 1))(a0, b0)])
    return out


def _decode(hexes, like):
    return [np.frombuffer(bytes.fromhex(h), e.dtype).reshape(e.shape) for h, e in zip(hexes, like)]


# The subprocess tests set their own tier and execution mode: CI's passes that force another
# (TAPEJAX_REPLAY_TIER, TAPEJAX_EXECUTION) would rerun the same processes.
_OWN_MODE = pytest.mark.skipif(
    bool(os.environ.get("TAPEJAX_REPLAY_TIER") or os.environ.get("TAPEJAX_EXECUTION")),
    reason="runs its own processes with the interpreter and eager mode forced: the default pass runs it")


@_OWN_MODE
@pytest.mark.parametrize("budget,dtype", [("default", "float32"), ("small", "float32"), ("small", "float64")])
def test_random_programs_give_the_tensor_routes_bits_and_counts(budget, dtype):
    # 200 random programs, three gradients each, in two fresh processes: the host route's
    # gradients are the Tensor route's bit for bit, with the same host answers and compiles;
    # both agree with jax.grad. (float64: with x64 on.)
    seed, n = 20261129, 200
    on, off = _run("on", seed, n, budget, dtype), _run("off", seed, n, budget, dtype)
    assert on["taken"] == 3 * n and off["taken"] == 0
    assert (on["host"], on["compiles"]) == (off["host"], off["compiles"])
    # (the host answered most calls by default; with 3 calls a signature, many signatures
    # went on to compile, so both the host and compiled kernels ran inside gradients)
    assert on["host"] > (1000 if budget == "default" else 200)
    assert budget == "default" or on["compiles"] > 50
    expected = _expected(seed, n, dtype)
    tol = 2e-5 if dtype == "float32" else 1e-12
    for k, (g_on, g_off) in enumerate(zip(on["grads"], off["grads"])):
        assert g_on == g_off, f"case {k // 3}, gradient {k % 3}: the routes differ"
        for g, e in zip(_decode(g_on, expected[k // 3]), expected[k // 3]):
            assert g.dtype == np.dtype(dtype)
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol / 2, err_msg=f"case {k // 3}: jax.grad")


@_OWN_MODE
def test_the_comparison_finds_a_1_in_200_fault():
    # One cotangent sum in 200 dropping a term: the comparison above must fail.
    seed, n = 20261129, 60
    bad, off = _run("planted", seed, n, "default"), _run("off", seed, n, "default")
    assert any(g1 != g0 for g1, g0 in zip(bad["grads"], off["grads"]))


def test_a_host_value_is_keyed_and_counted_as_its_array(monkeypatch):
    # A call given a host value finds the signature the array would have, and counts against it.
    monkeypatch.setattr(config, "kernel_host_first_calls", 5)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 0)
    k = _kernels.kernel(lambda a, b: a * b + 0.1875)
    x = jnp.linspace(0.5, 1.5, 7, dtype=jnp.float32)
    h = k.on_host(x, x)
    assert type(h) is _kernels.HostValue
    assert (h.shape, h.dtype, h.weak_type) == (x.shape, x.dtype, False)
    arr = h.device()
    np.testing.assert_array_equal(np.asarray(arr), np.asarray(x) * np.asarray(x) + np.float32(0.1875))
    assert (arr.aval, arr.sharding, arr._committed) == (h.aval, h.sharding, h.committed)
    # Calls 2-5 on the host, whichever form the argument takes; call 6 compiles and gives an array.
    outs = [k.on_host(h, x), k(arr, x), k.on_host(arr, x), k.on_host(h, x)]
    assert [type(o) for o in outs] == [_kernels.HostValue, _kernels.ArrayImpl, _kernels.HostValue, _kernels.HostValue]
    last = k.on_host(h, x)
    assert type(last) is _kernels.ArrayImpl
    np.testing.assert_array_equal(np.asarray(last), outs[0].x)


def test_a_watched_or_batched_backward_pass_keeps_the_tensor_route(monkeypatch):
    # Recorded backward ops (a nested tape) and jacobians are the Tensor route's: the host
    # route makes no Tensors to record.
    monkeypatch.setattr(config, "replay_tier", "interpret")
    taken = []
    real = _interpret._gradient_host
    monkeypatch.setattr(_interpret, "_gradient_host", lambda *a: taken.append(1) or real(*a))
    x = tf.Variable([0.5, 1.5])
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = tf.reduce_sum(tf.sin(x) * x)
        g = inner.gradient(y, x)
        z = tf.reduce_sum(g * g)
    assert taken == []
    h = outer.gradient(z, x)
    assert taken == [1]  # (the outer gradient: nothing watches it)
    f = lambda v: jnp.sum(jax.grad(lambda u: jnp.sum(jnp.sin(u) * u))(v) ** 2)  # noqa: E731
    np.testing.assert_allclose(h.numpy(), jax.grad(f)(jnp.array([0.5, 1.5])), rtol=1e-5)
    with tf.GradientTape(persistent=True) as t:
        y = tf.tanh(x) * 2.0
    taken.clear()
    jac = t.jacobian(y, x)
    np.testing.assert_allclose(jac.numpy(), np.diag(2 * (1 - np.tanh([0.5, 1.5]) ** 2)), rtol=1e-6)
    # A custom gradient's Python backward runs on Tensors too.
    @tf.custom_gradient
    def double(v):
        return v * 2.0, lambda dy: dy * 2.0

    with tf.GradientTape() as t2:
        y = tf.reduce_sum(double(x) * x)
    taken.clear()
    np.testing.assert_allclose(t2.gradient(y, x).numpy(), 4 * np.array([0.5, 1.5]), rtol=1e-6)
    assert taken == []


def test_float64_and_complex_sources(monkeypatch):
    # float64 (x64 on) through the host; complex values, which the host declines, through
    # the compiled kernels, conjugated as TF does.
    monkeypatch.setattr(config, "replay_tier", "interpret")
    with jax.enable_x64(True):
        x = tf.Variable(np.array([0.25, 0.75]))
        with tf.GradientTape() as t:
            y = tf.reduce_sum(tf.tanh(x) * tf.sin(x) + x * x)
        g = t.gradient(y, x)
        assert g.dtype == tf.float64
        f = lambda v: jnp.sum(jnp.tanh(v) * jnp.sin(v) + v * v)  # noqa: E731
        np.testing.assert_allclose(g.numpy(), jax.grad(f)(jnp.array([0.25, 0.75])), rtol=1e-12)
    z = tf.Variable(np.array([1 + 2j, 0.5 - 1j], np.complex64))

    def grad_z():
        with tf.GradientTape() as t:
            y = tf.reduce_sum(tf.math.real(z * z * (1 - 1j)) + tf.math.imag(z) * 3.0)
        return t.gradient(y, z).numpy()

    got = grad_z()
    monkeypatch.setattr(_interpret, "_host_route", lambda sl, given: False)
    np.testing.assert_array_equal(got, grad_z())  # (the Tensor route: TF's convention, tested elsewhere)
    # TF's gradient of a real function of z = a + ib is dy/da + i dy/db.
    a, b = np.real(z.numpy()), np.imag(z.numpy())
    re = lambda a, b: jnp.sum(jnp.real((a + 1j * b) ** 2 * (1 - 1j)) + b * 3.0)  # noqa: E731
    da, db = jax.grad(re, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(got, np.asarray(da) + 1j * np.asarray(db), rtol=1e-6)


def test_past_the_budget_only_kernels_not_compiled_are_answered_on_the_host(monkeypatch):
    # While a slice's compiled program is on its way, its interpreted gradient's kernels whose
    # host calls are spent are answered on the host again, unless they are compiled already.
    monkeypatch.setattr(config, "kernel_host_first_calls", 2)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 0)
    k = _kernels.kernel(lambda a: a * 1.4375 + 0.5)
    x = jnp.linspace(0.5, 1.5, 9, dtype=jnp.float32)
    want = np.asarray(x) * np.float32(1.4375) + np.float32(0.5)
    assert [type(k.on_host(x)) for _ in range(2)] == [_kernels.HostValue] * 2
    before = k.fast._cache_size()
    try:
        _kernels.past_budget.on = True
        h = k.on_host(x)
        assert type(h) is _kernels.HostValue and k.fast._cache_size() == before
        np.testing.assert_array_equal(h.x, want)
    finally:
        _kernels.past_budget.on = False
    a = k.on_host(x)  # spent: compiled now
    assert type(a) is _kernels.ArrayImpl and k.fast._cache_size() == before + 1
    try:
        _kernels.past_budget.on = True
        b = k.on_host(x)  # compiled already: runs compiled
    finally:
        _kernels.past_budget.on = False
    assert type(b) is _kernels.ArrayImpl
    np.testing.assert_array_equal(np.asarray(b), want)
    # The jit route (a forward op) never answers past the budget.
    try:
        _kernels.past_budget.on = True
        k2 = _kernels.kernel(lambda a: a * 1.5625)
        outs = [k2(x) for _ in range(3)]
    finally:
        _kernels.past_budget.on = False
    assert k2.fast._cache_size() == 1
    np.testing.assert_array_equal(np.asarray(outs[2]), np.asarray(x) * np.float32(1.5625))


def _loop_compiles(n, monkeypatch, window: bool) -> list:
    # Six steps of a small loop on fresh shapes, hot at the second and switching at the fifth:
    # the gradients against jax.grad, and the names of the programs XLA compiled meanwhile.
    import logging

    monkeypatch.setattr(config, "replay_tier", "auto")
    monkeypatch.setattr(config, "replay_hot", 2)
    monkeypatch.setattr(config, "replay_lag", 3)
    monkeypatch.setattr(config, "kernel_host_first_calls", 2)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 0)
    if not window:
        real = _interpret.gradient
        monkeypatch.setattr(_interpret, "gradient", lambda sl, t, g, pending=False: real(sl, t, g))
    x0 = np.linspace(-1, 1, n).astype(np.float32)
    f = lambda v: jnp.sum(jnp.sin(v) * 1.3125 + jnp.tanh(v) * v)  # noqa: E731
    want = jax.grad(f)(jnp.asarray(x0))
    names: list = []

    class Names(logging.Handler):
        def emit(self, record):
            m = record.getMessage()
            if m.startswith("Compiling "):
                names.append(m.split()[1])

    handler, log = Names(), logging.getLogger("jax")
    log.addHandler(handler)
    jax.config.update("jax_log_compiles", True)
    try:
        x = tf.Variable(x0)
        for _ in range(6):
            with tf.GradientTape() as t:
                y = tf.reduce_sum(tf.sin(x) * 1.3125 + tf.tanh(x) * x)
            np.testing.assert_allclose(t.gradient(y, x).numpy(), want, rtol=2e-6, atol=1e-7)
    finally:
        jax.config.update("jax_log_compiles", False)
        log.removeHandler(handler)
    return names


@pytest.mark.skipif(bool(os.environ.get("TAPEJAX_REPLAY_TIER") or os.environ.get("TAPEJAX_EXECUTION")),
                    reason="about the auto tier's background compile in eager mode: the default pass runs it")
@pytest.mark.filterwarnings("ignore")  # (jax_log_compiles logs as warnings)
def test_a_pending_slice_compiles_no_kernel_only_its_interpreter_needs(monkeypatch):
    # The same loop on two fresh shapes, with and without the window: without it, the third
    # step compiles sin's pullback and TanhGrad for the interpreted gradient, which the
    # compiled slice replaces two steps later; with it, they stay on the host. The forward
    # pass's kernels and the slice's own program compile either way.
    with_window = _loop_compiles(11, monkeypatch, True)
    without = _loop_compiles(13, monkeypatch, False)
    assert "jit(pullback)" in without and "jit(pullback)" not in with_window, (with_window, without)
    assert without.count("jit(<lambda>)") > with_window.count("jit(<lambda>)")
    assert "jit(grads)" in with_window and "jit(grads)" in without
    assert {n for n in without if n not in ("jit(pullback)", "jit(<lambda>)")} == set(with_window) - {"jit(<lambda>)"}


@pytest.mark.filterwarnings("ignore")  # (jax_log_compiles logs as warnings)
def test_a_structural_op_in_the_backward_pass_keeps_the_host_schedule(monkeypatch):
    # A reduction's backward pass broadcasts its cotangent back (``broadcast_to``, a structural op
    # that strings share: ``strings._by_index`` wraps its kernel). The host-resident pass calls the
    # kernel's own ``on_host`` through that wrapper, so past the host budget, while the slice's
    # compiled program is on its way, the call is answered on the host, not compiled (a training
    # loop compiled it at its 9th step for a step or two).
    import logging

    from tapejax._ops._machinery import PRIMS

    monkeypatch.setattr(config, "kernel_host_first_calls", 2)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 0)
    prim = PRIMS["broadcast_to"]
    ct = jnp.float32(0.71875)  # (a scalar cotangent, as reduce_mean's)
    shape = (3, 11)  # (a shape no other test broadcasts to)
    names: list = []

    class Names(logging.Handler):
        def emit(self, record):
            if record.getMessage().startswith("Compiling "):
                names.append(record.getMessage().split()[1])

    handler, log = Names(), logging.getLogger("jax")
    log.addHandler(handler)
    jax.config.update("jax_log_compiles", True)
    try:
        outs = [_interpret._host_call(prim, ct, shape=shape) for _ in range(2)]
        _kernels.past_budget.on = True
        try:
            outs += [_interpret._host_call(prim, ct, shape=shape) for _ in range(3)]
        finally:
            _kernels.past_budget.on = False
    finally:
        jax.config.update("jax_log_compiles", False)
        log.removeHandler(handler)
    assert names == []
    # (the first call builds the kernel's programs for these parameters through its jit, whose cache
    # miss the host answers: a device array; the rest stay host values)
    assert [type(o) for o in outs[1:]] == [_kernels.HostValue] * 4
    for o in outs:
        np.testing.assert_array_equal(np.asarray(o.x if type(o) is _kernels.HostValue else o),
                                      np.broadcast_to(np.float32(0.71875), shape))
    # Strings still take the wrapper's own route (element indices), on the host or not.
    s = np.array([b"ab", b"c"], dtype=object)
    np.testing.assert_array_equal(prim.impl.on_host(s, shape=(2, 2)), np.broadcast_to(s, (2, 2)))
