"""Small kernels compiled for a fast first call (tapejax/_engine/_kernels.py).

An eager op's or a tier-0 pullback's program whose inputs are all small is compiled with
XLA:CPU's optimizer off. It must compute what the normally compiled program computes, be
used only for small calls, and stay inlinable inside traces.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_replay_tiers import _random_program

import tapejax as tf
from tapejax import config
from tapejax._engine import _kernels

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the fast options are XLA:CPU's")


@pytest.fixture
def limit(monkeypatch):
    # These tests are about the compiled pipelines: no call is answered on the host.
    monkeypatch.setattr(config, "kernel_host_first_calls", 0)
    # (and the switch to the full program is by call count alone: no element budget)
    monkeypatch.setattr(config, "kernel_fast_budget_elements", 0)
    saved = config.kernel_fast_compile_elements, config.replay_tier, config.kernel_fast_first_calls

    def set_(n):
        config.kernel_fast_compile_elements = n

    yield set_
    config.kernel_fast_compile_elements, config.replay_tier, config.kernel_fast_first_calls = saved


def test_small_calls_use_the_fast_program_and_large_ones_switch_to_the_full_one(limit):
    limit(64)
    config.kernel_fast_first_calls = 1
    k = _kernels.jit(lambda a, b: jnp.tanh(a) * b + 1.0)

    def check(x):
        np.testing.assert_allclose(k(x, 2.0), jnp.tanh(x) * 2.0 + 1.0, rtol=1e-6, atol=1e-6)
        return k.fast._cache_size(), k.full._cache_size()

    assert check(jnp.linspace(-2, 2, 64)) == (1, 0)
    # A large signature's first call: the fast program; its second and later: the full one.
    large = jnp.linspace(-2, 2, 65)
    assert check(large) == (2, 0)
    assert check(large) == (2, 1)
    assert check(large) == (2, 1)
    # Another large signature starts over; a weak-typed scalar is part of the signature.
    assert check(jnp.linspace(-2, 2, 66)) == (3, 1)
    # 0: the full program at once.
    config.kernel_fast_first_calls = 0
    assert check(jnp.linspace(-2, 2, 67)) == (3, 2)
    limit(0)  # off: everything through the full pipeline
    assert check(jnp.linspace(0, 1, 8)) == (3, 3)


def test_the_element_budget_sets_when_a_large_signature_compiles_the_full_program(limit, monkeypatch):
    # With a budget, a large signature runs its fast program while its calls have read at
    # most the budget's elements (at least kernel_fast_first_calls calls), counting the
    # host's first calls too; the values agree with the full program's throughout.
    limit(64)
    config.kernel_fast_first_calls = 1
    monkeypatch.setattr(config, "kernel_fast_budget_elements", 1000)
    assert _kernels.fast_calls(200) == 5 and _kernels.fast_calls(5000) == 1
    monkeypatch.setattr(config, "kernel_host_first_calls", 3)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 0)
    assert _kernels.fast_calls(200) == 8
    monkeypatch.setattr(config, "kernel_host_first_calls", 0)
    k = _kernels.jit(lambda a: jnp.tanh(a) * 3.0)
    x = jnp.linspace(-2, 2, 200)  # 200 elements: 5 fast calls, then the full program
    ran = []
    for _ in range(7):
        before = k.full._cache_size()
        np.testing.assert_allclose(k(x), jnp.tanh(x) * 3.0, rtol=1e-6, atol=1e-6)
        ran.append(k.full._cache_size() > before)
    assert ran == [False] * 5 + [True, False]
    assert k.fast._cache_size() == 1
    config.kernel_fast_first_calls = 0  # 0 still compiles the full program at once
    assert _kernels.fast_calls(200) == 0


def test_a_large_signature_with_few_fast_calls_runs_them_on_the_host(limit, monkeypatch):
    # 400 elements, budget 1000: 2 fast calls + 3 host first calls = 5, at most twice 3, so the
    # host answers all five and the first program built is the full one. 200 elements: 8 > 6,
    # so the host answers its 3 and the fast program runs the rest, as before.
    limit(64)
    config.kernel_fast_first_calls = 1
    monkeypatch.setattr(config, "kernel_fast_budget_elements", 1000)
    monkeypatch.setattr(config, "kernel_host_first_calls", 3)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 0)
    # (every signature here large for the host's schedule too, not only for the pipelines)
    monkeypatch.setattr(_kernels, "_HOST_BUDGET_MAX_ELEMENTS", 0)
    for n, host, fast in ((400, 5, 0), (200, 3, 1)):
        k = _kernels.jit(lambda a: jnp.tanh(a) * 3.0 - 1.0)
        x = jnp.linspace(-2, 2, n)
        before = _kernels.host_counts["answered"]
        vals = [np.asarray(k(x)) for _ in range(_kernels.fast_calls(n) + 2)]
        assert _kernels.host_counts["answered"] - before == host
        assert (k.fast._cache_size(), k.full._cache_size()) == (fast, 1)
        for v in vals:
            np.testing.assert_allclose(v, np.tanh(np.asarray(x)) * 3.0 - 1.0, rtol=1e-6, atol=1e-6)


def test_a_large_signature_of_few_elements_gets_the_host_budget(limit, monkeypatch):
    # An argument over kernel_fast_compile_elements makes a signature large (fast program
    # first, full one later), but one whose arguments hold at most _HOST_BUDGET_MAX_ELEMENTS
    # in all is scheduled by the host budget, as a small one: a nested gradient of a small
    # network calls such signatures dozens of times in its first tape. Past the cap, the
    # host answers only kernel_host_first_calls.
    limit(64)
    monkeypatch.setattr(config, "kernel_host_first_calls", 3)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 40_000)
    monkeypatch.setattr(_kernels, "_HOST_BUDGET_MAX_ELEMENTS", 1000)
    monkeypatch.setattr(config, "kernel_fast_budget_elements", 1 << 18)  # (many fast calls: the host takes 3)
    for n, host in ((400, 40_000 // (400 + _kernels._HOST_CALL_ELEMENTS)), (1200, 3)):
        k = _kernels.jit(lambda a: jnp.tanh(a) * 3.0 - 1.0)
        x = jnp.linspace(-2, 2, n)
        before = _kernels.host_counts["answered"]
        vals = [np.asarray(k(x)) for _ in range(host + 3)]
        assert _kernels.host_counts["answered"] - before == host, n
        for v in vals:
            np.testing.assert_allclose(v, np.tanh(np.asarray(x)) * 3.0 - 1.0, rtol=1e-6, atol=1e-6)


def test_kernels_with_static_params_switch_per_signature(limit, monkeypatch):
    limit(64)
    config.kernel_fast_first_calls = 2
    decisions = []
    large = _kernels._large
    monkeypatch.setattr(_kernels, "_large", lambda *a: decisions.append(large(*a)) or decisions[-1])
    k = _kernels.kernel(lambda a, *, axis: jnp.sum(jnp.exp(a), axis=axis))
    x = jnp.linspace(-1, 1, 200).reshape(20, 10)
    for axis in (0, 1, 0, 1, 0, 1):
        np.testing.assert_allclose(k(x, axis=axis), jnp.sum(jnp.exp(x), axis=axis), rtol=1e-6)
    # Each axis is its own signature: two fast calls each, then the full program.
    assert decisions == [True, True, True, True, False, False]


def test_first_and_later_steps_over_large_arrays_agree(limit):
    # A loop's first step runs the fast programs and its second the full ones: the values
    # agree with each other and with jax.grad, in every replay tier and execution mode.
    limit(64)
    config.kernel_fast_first_calls = 1
    rng = np.random.default_rng(20261127)
    w0 = rng.normal(size=(96, 48)).astype(np.float32) * 0.1
    x0 = rng.normal(size=(32, 96)).astype(np.float32)

    def f(w, x):
        h = jnp.tanh(x @ w)
        return jnp.mean(jnp.log1p(jnp.exp(h)) * jax.nn.sigmoid(h)) + jnp.sum(w * w) * 1e-3

    expected = jax.value_and_grad(f)(jnp.asarray(w0), jnp.asarray(x0))
    w, x = tf.Variable(w0), tf.constant(x0)
    steps = []
    for _ in range(3):
        with tf.GradientTape() as t:
            h = tf.tanh(tf.matmul(x, w))
            y = tf.reduce_mean(tf.math.log1p(tf.exp(h)) * tf.sigmoid(h)) + tf.reduce_sum(w * w) * 1e-3
        steps.append((y.numpy(), t.gradient(y, w).numpy()))
    for y, g in steps:
        np.testing.assert_allclose(y, np.asarray(expected[0]), rtol=1e-5)
        np.testing.assert_allclose(g, np.asarray(expected[1]), rtol=1e-4, atol=1e-7)
    # The full pipeline from the second step on: later steps are bit-identical.
    np.testing.assert_array_equal(steps[1][1], steps[2][1])
    np.testing.assert_allclose(steps[0][1], steps[1][1], rtol=1e-6, atol=1e-9)


def test_a_kernel_inside_a_trace_is_inlined(limit):
    # Compile options belong to the outermost program: a nested call must not carry them.
    limit(1024)
    k = _kernels.jit(jnp.sin)
    # jit's cache of a function is shared by every jit of it with the same options: another
    # test's (or lazy mode's) concrete calls of the same kernel may have filled it already.
    before = (k.fast._cache_size(), k.full._cache_size())
    x = jnp.arange(4.0)
    np.testing.assert_allclose(jax.jit(lambda v: k(v) * 2)(x), 2 * jnp.sin(x), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda v: jnp.sum(k(v)))(x), jnp.cos(x), rtol=1e-6)
    assert (k.fast._cache_size(), k.full._cache_size()) == before
    # Concrete arguments inside a trace: inlined too (JAX refuses options on a nested jit).
    c = jnp.arange(3.0)
    np.testing.assert_allclose(jax.jit(lambda v: k(c) + v)(x[:3]), jnp.sin(c) + x[:3], rtol=1e-6)
    op = tf.function(lambda v: tf.constant([1.0, 2.0])[0] * v)
    np.testing.assert_allclose(op(tf.constant(3.0)).numpy(), 3.0)


def _random_cases(seed, n):
    """``n`` random programs of ``_random_program`` with their inputs and jax.grad's gradients."""
    rng = np.random.default_rng(seed)
    for case in range(n):
        jax_fn, tf_fn = _random_program(rng, int(rng.integers(1, 9)))
        a0, b0 = rng.normal(size=(2, 5)).astype(np.float32)
        yield case, jax_fn, tf_fn, a0, b0, jax.grad(jax_fn, argnums=(0, 1))(jnp.asarray(a0), jnp.asarray(b0))


def _value_and_grads(tf_fn, a0, b0):
    """``tf_fn``'s value on two variables and its tape gradients (unconnected ones zero), as arrays."""
    a, b = tf.Variable(a0), tf.Variable(b0)
    with tf.GradientTape() as t:
        y = tf_fn(a, b)
    return y.numpy(), [g.numpy() for g in t.gradient(y, [a, b], unconnected_gradients="zero")]


def test_random_programs_agree_with_the_fast_kernels_on_and_off(limit):
    # 200 random programs, forward and tier-0 gradient, with fast kernels and without,
    # against jax.grad: a rule the fast pipeline computes differently shows here.
    config.replay_tier = "interpret"
    for case, jax_fn, tf_fn, a0, b0, expected in _random_cases(20261125, 200):
        got = {}
        for n in (1024, 0):
            limit(n)
            got[n] = _value_and_grads(tf_fn, a0, b0)
            for g, e in zip(got[n][1], expected):
                np.testing.assert_allclose(g, np.asarray(e), rtol=2e-5, atol=1e-6, err_msg=f"case {case}, limit {n}")
        np.testing.assert_allclose(got[1024][0], got[0][0], rtol=1e-6, atol=1e-6, err_msg=f"case {case}")
        for f, s in zip(got[1024][1], got[0][1]):
            np.testing.assert_allclose(f, s, rtol=1e-6, atol=1e-6, err_msg=f"case {case}")


def test_a_tape_over_large_arrays_is_unaffected(limit):
    # Above the limit the op and its pullback run XLA's full pipeline: same values as jax.grad.
    limit(16)
    x0 = np.linspace(-1, 1, 4096).astype(np.float32)
    x = tf.Variable(x0)
    with tf.GradientTape() as t:
        y = tf.reduce_sum(tf.tanh(x) * tf.sin(x))
    g = t.gradient(y, x)
    np.testing.assert_allclose(g.numpy(), jax.grad(lambda v: jnp.sum(jnp.tanh(v) * jnp.sin(v)))(x0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["jacobian", "batch_jacobian"])
def test_a_jacobian_program_starts_fast_and_switches_to_the_full_one(limit, monkeypatch, kind):
    # Jacobians compile whole on their first sighting: that first program is built the fast
    # way and the next call of the same signature runs the fully compiled one; both agree
    # with jax.jacrev.
    limit(1024)
    config.kernel_fast_first_calls = 1
    ran = []
    staged = _kernels.staged

    def spy(fn):
        c = staged(fn)
        fast, full = c.fast, c.full

        def call(*a):
            before = fast._cache_size(), full._cache_size()
            out = c(*a)
            ran.append("fast" if fast._cache_size() > before[0] else "full" if full._cache_size() > before[1] else "hit")
            return out

        return call

    monkeypatch.setattr(_kernels, "staged", spy)
    rng = np.random.default_rng(7)
    n = int(rng.integers(37, 61))  # a shape no other test compiles
    w0 = rng.normal(size=(n, n)).astype(np.float32) / n
    x0 = rng.normal(size=(4, n)).astype(np.float32)

    def f(x):
        return jnp.tanh(x @ w0) * x

    w = tf.constant(w0)
    outs = []
    for _ in range(3):
        x = tf.constant(x0)
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.tanh(tf.matmul(x, w)) * x
        outs.append((t.jacobian(y, x) if kind == "jacobian" else t.batch_jacobian(y, x)).numpy())
    expected = jax.jacrev(f)(jnp.asarray(x0))
    if kind == "batch_jacobian":
        expected = jnp.stack([expected[i, :, i, :] for i in range(4)])
    for o in outs:
        np.testing.assert_allclose(o, np.asarray(expected), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(outs[1], outs[2])
    assert ran[:3] == ["fast", "full", "hit"]


def test_random_programs_on_large_inputs_agree_across_the_switch(limit):
    # Every input "large" (limit 4, 5-element inputs): each new signature's first call runs the
    # fast program and later ones the full one. 100 random programs, each gradient taken twice
    # (across the switch), against jax.grad.
    limit(4)
    config.kernel_fast_first_calls = 1
    config.replay_tier = "interpret"
    for case, jax_fn, tf_fn, a0, b0, expected in _random_cases(20261127, 100):
        for _ in range(2):
            y, grads = _value_and_grads(tf_fn, a0, b0)
            np.testing.assert_allclose(y, np.asarray(jax_fn(jnp.asarray(a0), jnp.asarray(b0))), rtol=1e-5,
                                       atol=1e-6, err_msg=f"case {case}")
            for g, e in zip(grads, expected):
                np.testing.assert_allclose(g, np.asarray(e), rtol=2e-5, atol=1e-6, err_msg=f"case {case}")


# ---- the kernels' shared MLIR context (_kernels._install_shared_ir_context) ----------

from jax._src.interpreters import mlir as _mlir  # noqa: E402

_shared = getattr(_mlir.make_ir_context, "_tapejax_shared", False)
_new_width = iter(range(101, 10_000))  # a width no other test compiles: each use is a new signature


def _uses():
    st = _kernels._ctx_local.__dict__
    return st.get("ctx"), st.get("uses", 0)


@pytest.fixture
def eager(execution_mode, monkeypatch):
    # Op by op: a lazy-mode step is one deferred program (the steady state's), not kernels;
    # and every kernel compiles at its first call (none answered on the host).
    execution_mode("eager")
    monkeypatch.setattr(config, "kernel_host_first_calls", 0)


@pytest.mark.skipif(not _shared, reason="the suite runs with TAPEJAX_SHARE_IR_CONTEXT=0")
def test_kernel_compiles_share_a_context_and_other_compiles_do_not(monkeypatch, eager):
    n = next(_new_width)
    x = tf.constant(np.linspace(0.1, 1.0, 3 * n, dtype=np.float32).reshape(3, n))
    ctx0, u0 = _uses()
    y = tf.sin(x)  # the op layer's fast path compiles sin for the new shape
    ctx1, u1 = _uses()
    assert u1 == u0 + 1 and (ctx0 is None or ctx1 is ctx0 or u0 >= _kernels._CTX_USES)
    with tf.GradientTape() as t:
        t.watch(x)
        z = tf.reduce_sum(tf.tanh(x) * 3.0)
    g = t.gradient(z, x)  # tier 0's pullback kernels for the new shape
    ctx2, u2 = _uses()
    assert u2 > u1 and ctx2 is ctx1
    np.testing.assert_allclose(y, np.sin(np.asarray(x)), rtol=1e-6)
    np.testing.assert_allclose(g, jax.grad(lambda a: jnp.sum(jnp.tanh(a) * 3.0))(np.asarray(x)), rtol=1e-6)
    # A user's jax.jit (it may embed large constants) gets JAX's own fresh context.
    big = np.arange(4 * n, dtype=np.float32)
    np.testing.assert_array_equal(jax.jit(lambda a: a * big)(np.ones(4 * n, np.float32)), big)
    assert _uses() == (ctx2, u2)
    # A staged program (a jacobian's whole program, which may hold a tape's constants)
    # does not share it either; a kernel wrapper's own program does.
    np.testing.assert_array_equal(_kernels.staged(lambda a: a * big)(np.ones(4 * n, np.float32)), big)
    assert _uses() == (ctx2, u2)
    np.testing.assert_array_equal(_kernels.jit(lambda a: a + 1.0)(big), big + 1.0)
    assert _uses() == (ctx2, u2 + 1)
    u2 += 1
    # Renewed after _CTX_USES lowerings, so its uniqued types and attributes stay bounded.
    monkeypatch.setattr(_kernels, "_CTX_USES", u2 + 1)
    tf.cos(x)
    ctx3, u3 = _uses()
    assert ctx3 is ctx2 and u3 == u2 + 1
    tf.exp(x)
    ctx4, u4 = _uses()
    assert ctx4 is not ctx2 and u4 == 1


@pytest.mark.skipif(not _shared, reason="the suite runs with TAPEJAX_SHARE_IR_CONTEXT=0")
def test_each_thread_has_its_own_context_and_threads_agree(eager):
    import threading

    n = next(_new_width)
    xs = [np.linspace(-1.0, 1.0, n, dtype=np.float32) * (i + 1) for i in range(4)]
    main_ctx = _uses()[0]
    out: dict = {}

    def work(i):
        x = tf.constant(xs[i])
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.reduce_sum(tf.sigmoid(x) * x)
        out[i] = (t.gradient(y, x).numpy(), _uses()[0])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ctxs = {id(c) for _, c in out.values() if c is not None}
    assert len(out) == 4 and ctxs and id(main_ctx) not in ctxs
    for i in range(4):
        ref = jax.grad(lambda a: jnp.sum(jax.nn.sigmoid(a) * a))(xs[i])
        np.testing.assert_allclose(out[i][0], ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", [3, 4])
def test_random_programs_give_the_same_bits_with_and_without_the_shared_context(tmp_path, seed):
    # The context changes where a module's types live, never the module: each process
    # runs the same random tape programs (chains with Python scalars, matmuls, nested
    # tapes, jacobians, variable updates) and the digests of every value must match.
    import json
    import os
    import subprocess
    import sys

    from test_compilation_cache import _PROGRAM

    script = tmp_path / "program.py"
    script.write_text(_PROGRAM)
    digests = []
    for share in ("1", "0"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("TAPEJAX_COMPILATION_CACHE")}
        env.update(TAPEJAX_SHARE_IR_CONTEXT=share, JAX_PLATFORMS="cpu")
        r = subprocess.run([sys.executable, str(script), str(seed), "8"], capture_output=True, text=True,
                           env=env, timeout=600)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
        assert lines, r.stderr[-3000:]
        digests.append(json.loads(lines[0][7:])["digest"])
    assert digests[0] == digests[1]


# ---- whole programs: the fast pipeline's build first, the full one at a count (FastFirst) --------


def test_fast_first_runs_the_fast_program_until_the_count_then_the_full_one(monkeypatch):
    monkeypatch.setattr(config, "replay_fast_runs", 8)
    built = []

    def build_full():
        built.append(len(ran))  # (the run during which the background build began)
        return lambda x: ("full", 2 * x)

    ran = []
    ff = _kernels.FastFirst(lambda x: ("fast", 2 * x), build_full)
    for i in range(12):
        kind, v = ff(i)
        ran.append(kind)
        assert v == 2 * i
    # The full build starts at run 8 // 4 = 2 and takes over at run 8, whatever the machine's speed.
    assert ran == ["fast"] * 7 + ["full"] * 5
    assert built == [1] and ff.upgraded


def test_fast_first_keeps_the_fast_program_when_the_full_build_fails(monkeypatch):
    monkeypatch.setattr(config, "replay_fast_runs", 4)

    def build_full():
        raise RuntimeError("XLA ran out of something")

    ff = _kernels.FastFirst(lambda x: x + 1, build_full)
    assert [ff(i) for i in range(10)] == list(range(1, 11))
    assert not ff.upgraded


def test_a_short_loop_never_builds_the_full_program(monkeypatch):
    monkeypatch.setattr(config, "replay_fast_runs", 1000)
    built = []
    ff = _kernels.FastFirst(lambda x: x, lambda: built.append(1))
    for i in range(249):  # (the full build would begin at run 250)
        ff(i)
    assert built == [] and ff.done is None


@pytest.mark.parametrize(("shapes", "runs", "want"), [
    ([(16, 32), (32, 32), ()], 1000, True),
    ([(16, 32), (33, 32)], 1000, False),  # an array over kernel_fast_compile_elements
    ([(4,)], 0, False),  # replay_fast_runs = 0: the full pipeline at once
])
def test_which_programs_are_built_fast_first(monkeypatch, shapes, runs, want):
    monkeypatch.setattr(config, "replay_fast_runs", runs)
    monkeypatch.setattr(config, "kernel_fast_compile_elements", 1024)
    assert _kernels.fast_first_eligible(shapes) is (want and jax.default_backend() == "cpu")


def test_a_long_program_is_built_by_the_full_pipeline_at_once(monkeypatch):
    monkeypatch.setattr(config, "replay_fast_runs", 1000)

    def chain(x, n):
        for _ in range(n):
            x = jnp.sin(x) * 1.5 + 0.1
        return x

    spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    short = jax.jit(lambda x: chain(x, 10)).lower(spec)
    long = jax.jit(lambda x: chain(x, _kernels.FAST_FIRST_MAX_OPS)).lower(spec)
    on_cpu = jax.default_backend() == "cpu"
    assert _kernels.fast_first_eligible([(3,)], short) is on_cpu
    assert _kernels.fast_first_eligible([(3,)], long) is False
