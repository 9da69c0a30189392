"""A kernel's first call evaluated on the host (``tapejax/_engine/_host.py``): NumPy must
give XLA:CPU's values (bit for bit on IEEE arithmetic, to a few ulp elsewhere) or decline,
and the kernel must compile at its next call and keep jit's fast path from then on."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax._src import pjit

import tapejax as tf
from tapejax import config
from tapejax._engine import _host, _kernels


def _xla(fn, args):
    """``fn`` on ``args`` by XLA:CPU, through the fast pipeline a small kernel uses."""
    return jax.jit(fn, compiler_options=_kernels.FAST_OPTIONS)(*args)


def _xla_per_op(cj, args):
    """The jaxpr evaluated one primitive at a time, each one XLA:CPU program: XLA's values
    without its fusion (which may contract a multiply and an add into one FMA rounding)."""
    from jax.extend.core import jaxpr_as_fun

    with jax.disable_jit():
        return jaxpr_as_fun(cj)(*args)


def _same_bits(a, b) -> np.ndarray:
    # Equal values with equal zero signs, or both NaN (XLA and NumPy may pick other NaN payloads).
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "f":
        return a == b
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


# ---- a random-program generator -------------------------------------------------------
# Programs over a pool of (3, 4) arrays. ``EXACT`` ops are IEEE-rounded or move data: the
# host must match XLA's per-operation values bit for bit. ``INEXACT`` ops (libm,
# reductions, matmuls) to a tolerance. Both against the fused kernel to a tolerance. Each op is a jnp/lax function, so the jaxprs hold the primitives users' ops
# bind (with jnp's nested jits and custom_jvp calls).
SHAPE = (3, 4)

EXACT_UNARY = [
    jnp.negative, jnp.abs, jnp.sign, jnp.floor, jnp.ceil, jnp.sqrt, jnp.square,
    lambda x: x**3, lambda x: x**-2, lambda x: lax.integer_pow(x, 5),
    lambda x: jnp.flip(x, 0), lambda x: x.T.reshape(SHAPE),
    lambda x: jnp.concatenate([x[:, 3:], x[:, :3]], axis=1),
    lambda x: jnp.pad(x[1:, 1:3], ((1, 0), (1, 1))),
    lambda x: jnp.broadcast_to(x[:1], SHAPE), lambda x: jnp.stack([x, -x])[1],
    lambda x: jnp.max(x, axis=1, keepdims=True) + x, lambda x: jnp.min(x, axis=0, keepdims=True) - x,
    lambda x: jnp.where(jnp.isfinite(x), x, 0.5), lambda x: jax.nn.relu(x),
    lambda x: jnp.clip(x, -2.0, 3.0), lambda x: (x > 0.5).astype(x.dtype),
    lambda x: jnp.trunc(jnp.clip(x, -1e6, 1e6)).astype(jnp.int32).astype(x.dtype),
    lambda x: lax.dynamic_update_slice(x, x[:2, :2] * 2.0, (1, 2)),
    lambda x: lax.clamp(-2.0, x, 3.0), lambda x: lax.clamp(-x, x, jnp.abs(x) + 1.0),
    lambda x: jnp.argmax(x, axis=1).astype(x.dtype)[:, None] - x,
    lambda x: jnp.argmin(x, axis=0).astype(x.dtype) + x,
    lambda x: jnp.cumsum(x, axis=0),  # (no NumPy rule: the host declines)
]
EXACT_BINARY = [
    jnp.add, jnp.subtract, jnp.multiply, jnp.divide, jnp.maximum, jnp.minimum, lax.rem,
    lambda a, b: jnp.where(a > b, a, b), lambda a, b: (a == b).astype(a.dtype) + (a <= b),
    lambda a, b: a * 2.0 + b, lambda a, b: jnp.concatenate([a[:1], b[1:]], axis=0),
]
INEXACT_UNARY = [
    # (sin and cos of arguments clipped to +-1e4: a last-bit difference of an inexact op's
    # result near 1e30 is an ulp of 1e23, which a periodic function turns into any value
    # in [-1, 1]; their huge arguments are checked on identical inputs below)
    jnp.exp, jnp.log, lambda x: jnp.sin(jnp.clip(x, -1e4, 1e4)), lambda x: jnp.cos(jnp.clip(x, -1e4, 1e4)), jnp.tanh, jnp.log1p, jnp.expm1, jax.nn.sigmoid,
    jax.nn.softplus, lax.rsqrt, lambda x: x**2.5, jnp.arctan,
    lambda x: x - jnp.mean(x, axis=1, keepdims=True), lambda x: jnp.sum(x, axis=0) * x,
    lambda x: x @ jnp.linspace(-1.0, 1.0, 16, dtype=x.dtype).reshape(4, 4),
    lambda x: jax.nn.logsumexp(x, axis=1, keepdims=True) - x,  # (stop_gradient in its jaxpr)
    lambda x: jnp.einsum("ij,kj->ik", x, x)[:, :1] * x,
]
INEXACT_BINARY = [jnp.power, jnp.arctan2, lambda a, b: jnp.sum(a * b, axis=1, keepdims=True) + a]

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 2.0, -3.0, 0.5, 1.5e-38, 1e-20]


def _program(rng, exact: bool):
    unary, binary = (EXACT_UNARY, EXACT_BINARY) if exact else (EXACT_UNARY + INEXACT_UNARY, EXACT_BINARY + INEXACT_BINARY)
    steps = []
    for _ in range(int(rng.integers(1, 6))):
        if rng.random() < 0.55:
            steps.append((0, int(rng.integers(len(unary))), int(rng.integers(3))))
        else:
            steps.append((1, int(rng.integers(len(binary))), int(rng.integers(3)), int(rng.integers(3))))

    def fn(a, b):
        pool = [a, b, a - b]
        for s in steps:
            r = unary[s[1]](pool[s[2]]) if s[0] == 0 else binary[s[1]](pool[s[2]], pool[s[3]])
            pool.append(r)
            pool = pool[-3:]
        return pool[-1], pool[0]

    return fn


def _inputs(rng, dtype, special: bool):
    xs = rng.normal(size=(2, *SHAPE)) * 3.0
    if special:
        mask = rng.random(xs.shape) < 0.3
        xs[mask] = rng.choice(SPECIAL, size=int(mask.sum()))
    return [jnp.asarray(x, dtype=dtype) for x in xs]


def _check_programs(seed: int, n: int, dtype) -> tuple[int, int]:
    """``n`` random exact and inexact programs on ordinary and special inputs: the host's
    outputs against XLA's. Returns (programs evaluated, programs declined)."""
    rng = np.random.default_rng(seed)
    done = declined = 0
    for case in range(n):
        exact = case % 2 == 0
        fn = _program(rng, exact)
        for k in range(3):
            args = _inputs(rng, dtype, special=k > 0)
            cj = jax.make_jaxpr(fn)(*args)
            try:
                got = _host.evaluate(cj, args)
            except _host.Unsupported:
                declined += 1
                continue
            done += 1
            want = _xla_per_op(cj, args)
            for g, w, f in zip(got, want, _xla(fn, args)):
                w = np.asarray(w)
                assert g.dtype == w.dtype and g.shape == w.shape, (case, k)
                # The fused kernel (a compiled kernel's own values) agrees to rounding where
                # both are finite (fused, XLA may rewrite ``float(p) * x`` as a select, so
                # ``0 * NaN`` gives 0 there and NaN op by op).
                fin = np.isfinite(g) & np.isfinite(np.asarray(f))
                np.testing.assert_allclose(g[fin], np.asarray(f)[fin], rtol=2e-4 if dtype == jnp.float32 else 1e-9,
                                           atol=1e-5, err_msg=f"case {case} input {k}")
                if exact:
                    ok = _same_bits(g, w)
                    assert ok.all(), f"case {case} input {k}: host {g[~ok]} XLA {w[~ok]}"
                else:
                    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"case {case} input {k}")
                    np.testing.assert_allclose(g, w, rtol=2e-4 if dtype == jnp.float32 else 1e-9,
                                               atol=1e-5, equal_nan=True, err_msg=f"case {case} input {k}")
    return done, declined


def test_periodic_functions_of_huge_arguments_match_xla():
    # Argument reduction of huge float32 values: the host (libm in float64, rounded once)
    # against XLA's kernel on the same inputs.
    x = np.float32([1e4, -3.7e5, 1e8, 2.5e12, 1e20, -6.0000005e29, 1e30, 3.4e38])
    for fn in (jnp.sin, jnp.cos):
        cj = jax.make_jaxpr(fn)(jnp.asarray(x))
        (got,) = _host.evaluate(cj, [jnp.asarray(x)])
        want = np.asarray(_xla(fn, [jnp.asarray(x)]))
        assert (np.abs(got.view(np.int32) - want.view(np.int32)) <= 2).all(), (fn, got, want)


def test_random_programs_match_xla_or_are_declined():
    # 300 programs, 3 inputs each (ordinary, then with zeros of both signs, infinities,
    # NaNs, huge and near-subnormal values): a rule that differs from XLA on one program
    # in 200 shows here.
    done, declined = _check_programs(20261128, 300, jnp.float32)
    assert done >= 450 and declined >= 20  # (most evaluate; cumsum, subnormals and out-of-range casts decline)


def test_the_generator_finds_a_1_in_200_bug(monkeypatch):
    # Every 200th rule call off by one (negated for booleans): the same generator must see it.
    count = [0]

    def spoiled(rule):
        def run(e, *xs):
            out = rule(e, *xs)
            count[0] += 1
            if count[0] % 200 == 0 and not isinstance(out, list):
                out = np.asarray(out)
                out = ~out if out.dtype == np.bool_ else out + out.dtype.type(1)
            return out

        return run

    for name, rule in list(_host.RULES.items()):
        monkeypatch.setitem(_host.RULES, name, spoiled(rule))
    with pytest.raises(AssertionError):
        _check_programs(20261128, 300, jnp.float32)
    assert count[0] >= 200


def test_random_programs_in_float64_match_xla():
    with jax.enable_x64(True):
        done, _ = _check_programs(20261129, 120, jnp.float64)
    assert done >= 180


def test_subnormal_values_are_left_to_xla():
    # XLA:CPU flushes subnormals to zero (inputs and results): the host declines them.
    tiny = np.float32(1e-40)
    cj = jax.make_jaxpr(lambda a, b: a * b)(jnp.float32(1.0), jnp.float32(1.0))
    with pytest.raises(_host.Unsupported):
        _host.evaluate(cj, [jnp.float32(tiny), jnp.float32(1e30)])  # an argument
    with pytest.raises(_host.Unsupported):
        _host.evaluate(cj, [jnp.float32(1e-20), jnp.float32(1e-20)])  # a result
    assert float(_xla(lambda a, b: a * b, [jnp.float32(1e-20), jnp.float32(1e-20)])) == 0.0


@pytest.mark.parametrize(
    "fn, args",
    [
        (jnp.maximum, (np.float32([0.0, -0.0, -0.0]), np.float32([-0.0, 0.0, -0.0]))),
        (jnp.minimum, (np.float32([0.0, -0.0, 0.0]), np.float32([-0.0, 0.0, 0.0]))),
        (jnp.sign, (np.float32([-0.0, 0.0, -2.0, np.nan]),)),
        (lambda x: x.astype(jnp.int32), (np.float32([2.7, -2.7, -0.5, 1e9]),)),
        (lambda x, i: lax.dynamic_slice(x, (i,), (2,)), (np.float32([1, 2, 3, 4]), np.int32(7))),
        (lambda x, i: lax.dynamic_slice(x, (i,), (2,)), (np.float32([1, 2, 3, 4]), np.int32(-3))),
        (lambda x: lax.integer_pow(x, 7), (np.float32([1.1, -3.3, 1e5]),)),
        (lambda x: jnp.sum(x.astype(jnp.int32)), (np.float32([2e9, 2e9]).astype(np.float32) * 0 + 1,)),
    ],
)
def test_xla_conventions_where_numpy_differs(fn, args):
    # Signed zeros in max/min/sign, truncating casts, clamped dynamic starts, repeated
    # squaring, integer sums kept int32: XLA's answers, bit for bit.
    args = [jnp.asarray(a) for a in args]
    got = _host.evaluate(jax.make_jaxpr(fn)(*args), args)[0]
    want = np.asarray(_xla(fn, args))
    assert got.dtype == want.dtype and _same_bits(got, want).all(), (got, want)


def test_an_out_of_range_float_to_int_cast_is_left_to_xla():
    cj = jax.make_jaxpr(lambda x: x.astype(jnp.int32))(jnp.ones(2))
    for bad in (np.nan, 3e9, -np.inf):
        with pytest.raises(_host.Unsupported):
            _host.evaluate(cj, [jnp.float32([1.0, bad])])


# ---- the kernel hook ----------------------------------------------------------------


@pytest.fixture
def misses(monkeypatch):
    """How often jit's slow path (trace cache, then a compile) ran for a kernel: a call the
    host answered stops before it."""
    seen = []
    hook = pjit._pjit_call_impl_python

    def counting(*args, **kw):
        seen.append(kw["jaxpr"])
        return hook(*args, **kw)

    monkeypatch.setattr(pjit, "_pjit_call_impl_python", counting)
    monkeypatch.setattr(config, "kernel_host_first_calls", 1)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 0)  # (exactly kernel_host_first_calls)
    return seen


def _fresh_kernel(scale: float):
    # A kernel no other test compiled (its closure constant is this test's own).
    return _kernels.jit(lambda a, b: jnp.tanh(a) * b + scale)


def test_a_kernels_first_call_runs_on_the_host_and_its_next_call_compiles(misses):
    k = _fresh_kernel(0.125)
    x, y = jnp.linspace(-2.0, 2.0, 8), jnp.full(8, 3.0)
    misses.clear()  # (building the inputs ran jnp's own jits)
    answered = _kernels.host_counts["answered"]
    first = k(x, y)
    # answered without an executable, and without jit's slow path
    assert len(misses) == 0 and k.fast._cache_size() == 0
    assert _kernels.host_counts["answered"] == answered + 1
    second = k(x, y)
    assert len(misses) == 1 and k.fast._cache_size() == 1  # compiled now
    third = k(x, y)
    assert len(misses) == 1  # jit's C++ fast path from then on
    assert _kernels.host_counts["answered"] == answered + 1
    for r in (first, second, third):
        assert r.aval == second.aval and r.sharding == second.sharding and r._committed == second._committed
    np.testing.assert_allclose(first, np.tanh(np.asarray(x)) * 3.0 + 0.125, rtol=1e-6)
    np.testing.assert_allclose(first, second, rtol=2e-7, atol=1e-7)  # (tanh: NumPy's libm against XLA's)
    np.testing.assert_array_equal(second, third)


def test_weak_types_and_committed_devices_are_kept(misses):
    dev = jax.devices("cpu")[0]
    k = _kernels.jit(lambda a, b: a * b - 0.375)
    w = jnp.asarray(2.0)  # a weakly typed scalar array
    assert w.aval.weak_type
    host = k(w, 3.0)
    compiled = k(w, 3.0)
    assert host.aval == compiled.aval and host.aval.weak_type
    c = jax.device_put(jnp.arange(4.0), dev)
    host, compiled = k(c, c), k(c, c)
    assert host._committed and compiled._committed and host.sharding == compiled.sharding
    np.testing.assert_array_equal(host, compiled)


def test_declined_calls_compile_at_once(misses):
    k = _kernels.jit(lambda a: jnp.cumsum(a) * 0.625)  # cumsum: no NumPy rule
    k(jnp.arange(5.0))
    assert k.fast._cache_size() == 1
    k2 = _kernels.jit(lambda a: a * 0.6875)
    k2(jnp.full(3, 1e-40, dtype=jnp.float32))  # a subnormal argument
    assert k2.fast._cache_size() == 1


def test_the_setting_turns_it_off_and_counts_calls(misses, monkeypatch):
    monkeypatch.setattr(config, "kernel_host_first_calls", 0)
    k = _kernels.jit(lambda a: a * 0.8125)
    k(jnp.ones(3))
    assert k.fast._cache_size() == 1
    monkeypatch.setattr(config, "kernel_host_first_calls", 3)
    k = _kernels.jit(lambda a: a * 0.9375)
    for _ in range(3):
        k(jnp.ones(3))
        assert k.fast._cache_size() == 0
    k(jnp.ones(3))
    assert k.fast._cache_size() == 1


def test_user_jits_and_staged_programs_always_compile(misses):
    f = jax.jit(lambda a: a * 1.0625)
    f(jnp.ones(3))
    assert f._cache_size() == 1
    s = _kernels.staged(lambda a: a * 1.1875)
    s(jnp.ones(3))
    assert s.fast._cache_size() == 1


def test_random_tape_programs_answer_from_the_host_as_from_xla(monkeypatch, execution_mode):
    # 200 random tape programs (forward, tier-0 pullbacks) with every kernel call answered
    # on the host (caches cleared, no compile ever): values and gradients against jax.grad.
    from test_kernels import _random_cases, _value_and_grads

    execution_mode("eager")
    monkeypatch.setattr(config, "replay_tier", "interpret")
    monkeypatch.setattr(config, "kernel_host_first_calls", 10**9)
    jax.clear_caches()
    tf.replay_cache_clear()
    for case, _jax_fn, tf_fn, a0, b0, expected in _random_cases(20261128, 200):
        _y, grads = _value_and_grads(tf_fn, a0, b0)
        for g, e in zip(grads, expected):
            np.testing.assert_allclose(g, np.asarray(e), rtol=2e-5, atol=1e-6, err_msg=f"case {case}")
    # (most kernel calls answered without a compile: forward ops and pullbacks alike)
    assert tf.replay_cache_info().host_first_calls > 1000


def test_uncommitted_arguments_under_a_default_device_compile(misses):
    # jit places such a call on the default device; the host does not second-guess it.
    k = _kernels.jit(lambda a: a * 1.3125)
    with jax.default_device(jax.devices("cpu")[0]):
        k(jnp.ones(3))
    assert k.fast._cache_size() == 1


def test_host_calls_follow_the_element_budget(misses, monkeypatch):
    # At least kernel_host_first_calls, more while the calls' elements (each counted
    # _HOST_CALL_ELEMENTS more) stay within the budget; then the signature compiles.
    c = _kernels._HOST_CALL_ELEMENTS
    monkeypatch.setattr(config, "kernel_host_first_calls", 2)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 5 * (3 + c))
    assert _kernels.host_calls(3) == 5 and _kernels.host_calls(10 * c) == 2
    monkeypatch.setattr(config, "kernel_host_budget_elements", 0)
    assert _kernels.host_calls(3) == 2
    monkeypatch.setattr(config, "kernel_host_budget_elements", 5 * (3 + c))
    k = _kernels.jit(lambda a: jnp.exp(a) * 1.4375)
    x = jnp.asarray([0.5, -1.0, 2.0])
    misses.clear()  # (building the input ran jnp's own jits)
    before = _kernels.host_counts["answered"]
    vals = []
    for i in range(7):
        vals.append(np.asarray(k(x)))
        assert k.fast._cache_size() == (i >= 5), i  # the sixth call compiles
    assert _kernels.host_counts["answered"] - before == 5 and len(misses) == 1
    for v in vals:
        np.testing.assert_allclose(v, np.exp(np.float64([0.5, -1.0, 2.0])) * 1.4375, rtol=1e-6)


def test_concrete_calls_inside_an_outer_trace_are_left_to_jit(misses, monkeypatch):
    # jit inlines a call whose arguments are concrete arrays while an outer jax.jit traces:
    # the host does not answer it (its value would be a constant of the outer program).
    monkeypatch.setattr(config, "kernel_host_first_calls", 10**9)
    k = _kernels.jit(lambda a: jnp.sin(a) + 1.5)
    c = jnp.asarray([0.25, 0.5])
    before = _kernels.host_counts["answered"]
    out = jax.jit(lambda y: y * k(c))(jnp.asarray(2.0))
    assert _kernels.host_counts["answered"] == before
    np.testing.assert_allclose(out, 2.0 * (np.sin([0.25, 0.5]) + 1.5), rtol=1e-6)
    k(c)  # the same signature outside a trace: answered on the host
    assert _kernels.host_counts["answered"] == before + 1


def test_x64_mode_is_part_of_the_signature(monkeypatch):
    # The same arguments traced with and without x64 are different programs (a Python float
    # is a weak float32 or float64): each gets its own host program, as jit's cache keeps two.
    monkeypatch.setattr(config, "kernel_host_first_calls", 10**9)
    k = _kernels.jit(lambda a, s: a * s + s)
    x = np.asarray([0.1, 0.2, 0.3])
    a32 = k(jnp.asarray(x, jnp.float32), 1.1)
    assert a32.dtype == jnp.float32
    with jax.enable_x64(True):
        a64 = k(jnp.asarray(x, jnp.float64), 1.1)
        assert a64.dtype == jnp.float64
        np.testing.assert_array_equal(a64, x * 1.1 + 1.1)
    np.testing.assert_array_equal(a32, np.asarray(x, np.float32) * np.float32(1.1) + np.float32(1.1))


def test_the_tape_clock_ends_the_budget(misses, monkeypatch):
    # A signature called a few times a tape (a training step's op) stays on the host for
    # kernel_host_tapes tapes; one called more than kernel_host_first_calls times in the
    # tape where it came up (a long tape) compiles at its first call in a later tape.
    monkeypatch.setattr(config, "kernel_host_first_calls", 2)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 10**9)
    monkeypatch.setattr(config, "kernel_host_tapes", 3)

    def new_tape():
        with tf.GradientTape():  # (a tape is made when entered)
            pass

    x = jnp.asarray([1.0, 2.0])
    want = np.float32([1.0, 2.0]) * np.float32(1.5625) - np.float32(0.5)
    few = _kernels.jit(lambda a: a * 1.5625 - 0.5)
    many = _kernels.jit(lambda a: a * 1.5625 - 0.5 + 0.0)
    compiled = []
    for tape in range(4):
        new_tape()
        np.testing.assert_array_equal(few(x), want)  # one call a tape
        for _ in range(5 if tape == 0 else 1):
            np.testing.assert_array_equal(many(x), want)
        compiled.append((few.fast._cache_size(), many.fast._cache_size()))
    # ``many``: five calls in its first tape, so it compiles in the second; ``few``: its
    # third tape after the first is the clock's end (and its 2 first calls are spent)
    assert compiled == [(0, 0), (0, 1), (0, 1), (1, 1)]


def test_a_pullbacks_dead_primal_is_not_evaluated():
    # jax.vjp's pullback of sin recomputes sin(x), which XLA drops: so does the host.
    def pullback(x, ct):
        return jax.vjp(jnp.sin, x)[1](ct)[0]

    x, ct = jnp.linspace(-3.0, 3.0, 7), jnp.linspace(0.5, 2.0, 7)
    cj = jax.make_jaxpr(pullback)(x, ct)
    assert "sin" in [e.primitive.name for e in cj.jaxpr.eqns]
    program = _host.Program(cj)
    names = [c[1].primitive.name for c in program.code]
    assert "sin" not in names and "cos" in names
    (got,) = program.run([x, ct])
    np.testing.assert_allclose(got, np.cos(np.asarray(x, np.float64)) * np.asarray(ct), rtol=1e-6)
    np.testing.assert_allclose(got, _xla(pullback, [x, ct]), rtol=2e-7, atol=1e-7)


@pytest.mark.parametrize("fn", [
    lambda x: jnp.split(x, [2, 5]),  # several results from one equation
    lambda x: x.astype(jnp.float32),  # no equation at all: the argument is the result
    lambda x: (x, x * 2.0, x),  # an argument twice among the results
    lambda x: lax.convert_element_type(x, jnp.float32) + 1.0,  # a weak scalar made strong
])
def test_programs_of_any_shape_give_xlas_values(fn):
    x = jnp.linspace(-1.0, 1.0, 8)
    cj = jax.make_jaxpr(fn)(x)
    got = _host.evaluate(cj, [x])
    want = jax.tree_util.tree_leaves(_xla(fn, [x]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert _same_bits(g, w).all()


def test_an_answer_read_by_the_next_host_call(monkeypatch):
    # The host keeps its own small answers' values (no transfer back, no second subnormal
    # check), tells them from new arrays by identity, keeps none alive, and a donated one
    # still raises as jit does.
    import gc
    import weakref

    monkeypatch.setattr(config, "kernel_host_budget_elements", 4_000_000)
    first, then = _fresh_kernel(0.25), _kernels.jit(lambda a: jnp.sqrt(jnp.abs(a)) - 0.0625)
    x, y = jnp.linspace(-2.0, 2.0, 8), jnp.full(8, 3.0)
    answered = _kernels.host_counts["answered"]
    a = first(x, y)
    assert id(a) in _kernels._answers
    b = then(a)
    assert _kernels.host_counts["answered"] == answered + 2
    np.testing.assert_array_equal(b, jax.jit(lambda a: jnp.sqrt(jnp.abs(a)) - 0.0625)(a))
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None
    c = first(x, y)
    jax.jit(lambda v: v * 2.0, donate_argnums=0)(c)
    with pytest.raises(RuntimeError, match="deleted"):
        then(c)


def test_host_calls_raise_no_warnings_and_leave_numpy_settings(monkeypatch):
    import warnings

    monkeypatch.setattr(config, "kernel_host_budget_elements", 4_000_000)
    before = np.geterr()
    k = _kernels.jit(lambda a: jnp.exp(a * 1e3) / a)  # overflow, a division by zero
    x = jnp.asarray([0.0, 1.0, -1.0, 100.0])
    answered = _kernels.host_counts["answered"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = k(x)
    assert _kernels.host_counts["answered"] == answered + 1
    assert np.geterr() == before
    np.testing.assert_array_equal(got, jax.jit(lambda a: jnp.exp(a * 1e3) / a)(x))
    tiny = jnp.asarray([1e-40, 1.0], jnp.float32)  # a subnormal: declined, then compiled
    _kernels.jit(lambda a: a * 2.0)(tiny)
    assert np.geterr() == before
