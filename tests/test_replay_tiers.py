"""The replay tiers of an eager gradient (tapejax/_engine/_tiers.py).

Tier 0 interprets a slice op by op, tier 1 runs it as one compiled program. Both
must give the same gradients (to float rounding) as each other and as jax.grad
of the same pure function; the policy decides which answers when.
"""

import gc
import os
import subprocess
import sys
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf
from tapejax import config


@pytest.fixture
def tier():
    saved = (config.replay_tier, config.replay_hot, config.replay_lag, config.replay_background_compile,
             config.replay_max_compile_eqns, config.replay_segment_eqns)
    tf.replay_cache_clear()

    def set_(mode, **kw):
        config.replay_tier = mode
        for k, v in kw.items():
            setattr(config, "replay_" + k, v)

    yield set_
    (config.replay_tier, config.replay_hot, config.replay_lag, config.replay_background_compile,
     config.replay_max_compile_eqns, config.replay_segment_eqns) = saved
    tf.replay_cache_clear()


def _euler(k, n):
    x = tf.constant([1.0, 0.0])
    with tf.GradientTape() as t:
        for _ in range(n):
            x = x + 0.01 * tf.stack([x[1], -k * x[0] - 0.1 * x[1]])
        loss = tf.reduce_sum(x * x)
    return t.gradient(loss, k)


def _euler_jax(k, n):
    x = jnp.array([1.0, 0.0])
    for _ in range(n):
        x = x + 0.01 * jnp.stack([x[1], -k * x[0] - 0.1 * x[1]])
    return jnp.sum(x * x)


@pytest.mark.parametrize("mode", ["auto", "interpret", "compile"])
def test_every_tier_gives_jax_grad(tier, mode):
    tier(mode, lag=2)
    k = tf.Variable(2.0)
    expected = float(jax.grad(_euler_jax)(2.0, 40))
    for _ in range(6):  # through the switch point in auto mode
        np.testing.assert_allclose(float(_euler(k, 40)), expected, rtol=1e-5)


def test_auto_interprets_first_then_compiles_in_background_and_switches_at_a_count(tier):
    tier("auto", hot=2, lag=3, background_compile=True)
    k = tf.Variable(2.0)
    tiers = []
    for _ in range(7):
        before = tf.replay_cache_info()
        _euler(k, 10)
        after = tf.replay_cache_info()
        tiers.append("i" if after.interpreted > before.interpreted else "c")
    # Sighting 1: cold; 2: hot, compile starts in the background; 3, 4: still interpreted;
    # 5 (= hot + lag): the compiled program, whatever the machine's speed.
    assert tiers == ["i", "i", "i", "i", "c", "c", "c"]
    info = tf.replay_cache_info()
    assert info.background_compiles == 1
    if tf.config.get_execution() == "lazy":
        # Lazy mode: from the switch the gradient joins the step's pending program, whose first
        # runs are op by op while it compiles (``_lazy._Warming``), each looking the replay up.
        assert info.misses == 0 and info.hits >= 3
    else:
        assert info.misses == 0 and info.hits == 3  # the background compile filled the cache


def test_auto_without_background_compiles_when_hot(tier):
    tier("auto", hot=3, background_compile=False)
    k = tf.Variable(2.0)
    for _ in range(4):
        _euler(k, 5)
    info = tf.replay_cache_info()
    assert (info.interpreted, info.compiled, info.background_compiles) == (2, 2, 0)


def test_long_slices_stay_interpreted_without_segments(tier):
    tier("auto", hot=1, max_compile_eqns=50, segment_eqns=0)
    k = tf.Variable(2.0)
    expected = float(jax.grad(_euler_jax)(2.0, 30))
    for _ in range(3):
        np.testing.assert_allclose(float(_euler(k, 30)), expected, rtol=1e-5)
    info = tf.replay_cache_info()
    assert (info.interpreted, info.compiled, info.segmented, info.size) == (3, 0, 0, 0)


def _segmented_kinds(n, runs):
    """Each run's tier ("i" interpreted, "s" segmented) for a fresh ``n``-step Euler gradient, its
    value checked against jax.grad every run."""
    k = tf.Variable(2.0)
    expected = float(jax.grad(_euler_jax)(2.0, n))
    kinds = []
    for _ in range(runs):
        before = tf.replay_cache_info()
        np.testing.assert_allclose(float(_euler(k, n)), expected, rtol=1e-5)
        after = tf.replay_cache_info()
        kinds.append("i" if after.interpreted > before.interpreted else "s" if after.segmented > before.segmented else "?")
    return kinds


def test_long_hot_slices_are_segmented_with_shared_programs(tier):
    # 30 Euler steps (~300 equations) in runs of 20: the loop body's runs share programs.
    from tapejax._engine import _segments

    tier("auto", hot=2, lag=2, max_compile_eqns=50, segment_eqns=20, background_compile=True)
    kinds = _segmented_kinds(30, 6)
    info = tf.replay_cache_info()
    # (Lazy mode alike: the slice's values pending when the tiers see it, its segments are
    # precompiled from their abstract values.)
    assert kinds == ["i", "i", "i", "s", "s", "s"]  # hot at 2, switch at hot + lag = 4
    assert (info.compiled, info.size, info.background_compiles) == (0, 0, 1)
    assert 1 <= len(_segments._programs) <= 12  # far fewer programs than the ~15 runs


def test_a_hot_slice_with_nothing_to_precompile_stays_on_the_hot_tier(tier, monkeypatch):
    # When the background has nothing to compile at ``hot``, the hot tier takes over there, in the
    # foreground; the sightings up to hot + lag must stay on it, not go back to tier 0 as if a
    # background compile were on its way (they did: segmented, interpreted, segmented; lazy mode's
    # segmented slices met it, their values still pending when the tiers saw them).
    from tapejax._engine import _segments

    tier("auto", hot=2, lag=3, max_compile_eqns=50, segment_eqns=20, background_compile=True)
    monkeypatch.setattr(_segments, "precompile", lambda sl, plan: None)
    kinds = _segmented_kinds(30, 6)
    assert kinds == ["i", "s", "s", "s", "s", "s"]
    assert tf.replay_cache_info().background_compiles == 0


def test_segmented_tier_without_background_compile(tier):
    tier("auto", hot=1, max_compile_eqns=10, segment_eqns=7, background_compile=False)
    k = tf.Variable(2.0)
    expected = float(jax.grad(_euler_jax)(2.0, 12))
    for _ in range(2):
        np.testing.assert_allclose(float(_euler(k, 12)), expected, rtol=1e-5)
    info = tf.replay_cache_info()
    assert (info.segmented, info.interpreted) == (2, 0)


def test_cache_clear_makes_slices_cold_again(tier):
    tier("auto", hot=2, background_compile=False)
    k = tf.Variable(2.0)
    _euler(k, 3)
    _euler(k, 3)
    assert tf.replay_cache_info().compiled == 1
    tf.replay_cache_clear()
    _euler(k, 3)
    assert tf.replay_cache_info().interpreted == 1 and tf.replay_cache_info().compiled == 0


def test_background_compile_keeps_no_tensor_alive(tier):
    tier("auto", hot=1, lag=1, background_compile=True)
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        h = tf.exp(x)
        y = tf.reduce_sum(h)
    residual = weakref.ref(h._value)
    del h
    np.testing.assert_allclose(g.gradient(y, x).numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    del g, y
    gc.collect()
    assert residual() is None


def test_precompiled_program_inside_a_trace_uses_the_jit(tier):
    # The background compile stores an ahead-of-time program; a compiled step tracing the
    # same slice shares its cache key and must get a traceable function instead.
    tier("auto", hot=1, lag=1)
    w = tf.Variable(3.0)

    def grad(x):
        with tf.GradientTape() as t:
            y = tf.sin(w * x)
        return t.gradient(y, w)

    x = tf.constant(0.5)
    for _ in range(3):
        eager = grad(x)
    compiled = tf.function(grad)(x)
    np.testing.assert_allclose(float(compiled), float(eager), rtol=1e-6)
    np.testing.assert_allclose(float(eager), 0.5 * np.cos(1.5), rtol=1e-6)


# Ops whose interpreted backward kernel reads the output (ExpGrad, SqrtGrad, ...): for
# complex inputs TF's gradient is conj(f'(z)) * dy. Both tiers must agree with that.
_COMPLEX = {
    "exp": (tf.exp, lambda z: np.exp(z)),
    "tanh": (tf.tanh, lambda z: 1 - np.tanh(z) ** 2),
    "sigmoid": (tf.sigmoid, lambda z: (1 / (1 + np.exp(-z))) * (1 - 1 / (1 + np.exp(-z)))),
    "sqrt": (tf.sqrt, lambda z: 0.5 / np.sqrt(z)),
    "rsqrt": (tf.math.rsqrt, lambda z: -0.5 * z ** -1.5),
    "reciprocal": (tf.math.reciprocal, lambda z: -1 / z ** 2),
}


@pytest.mark.parametrize("mode", ["interpret", "compile"])
@pytest.mark.parametrize("name", sorted(_COMPLEX))
def test_complex_output_reading_kernels_are_conjugated(tier, mode, name):
    tier(mode)
    f, df = _COMPLEX[name]
    z0 = np.complex64(0.3 + 0.4j)
    z = tf.constant(z0)
    with tf.GradientTape() as t:
        t.watch(z)
        y = f(z)
    np.testing.assert_allclose(t.gradient(y, z).numpy(), np.conj(df(np.complex128(z0))), rtol=1e-5)


@pytest.mark.parametrize("name", sorted(_COMPLEX))
def test_complex_output_reading_kernels_nested(tier, name):
    # A watched gradient always runs interpreted: the same conjugation, seen from an outer tape.
    tier("compile")
    f, df = _COMPLEX[name]
    z0 = np.complex64(0.3 + 0.4j)
    z = tf.constant(z0)
    with tf.GradientTape() as outer:
        outer.watch(z)
        with tf.GradientTape() as inner:
            inner.watch(z)
            y = f(z)
        g = inner.gradient(y, z)
    np.testing.assert_allclose(g.numpy(), np.conj(df(np.complex128(z0))), rtol=1e-5)
    assert outer.gradient(g, z) is not None


_UNARY = [("sin", jnp.sin), ("cos", jnp.cos), ("tanh", jnp.tanh), ("exp", lambda v: jnp.exp(0.1 * v)),
          ("sigmoid", jax.nn.sigmoid), ("square", jnp.square), ("softplus", jax.nn.softplus),
          ("abs", jnp.abs), ("relu", jax.nn.relu), ("sqrt1p", lambda v: jnp.sqrt(1.0 + v * v))]
_TF_UNARY = {"sin": tf.sin, "cos": tf.cos, "tanh": tf.tanh, "exp": lambda v: tf.exp(0.1 * v), "sigmoid": tf.sigmoid,
             "square": tf.square, "softplus": tf.nn.softplus, "abs": tf.abs, "relu": tf.nn.relu,
             "sqrt1p": lambda v: tf.sqrt(1.0 + v * v)}
_BINARY = [("add", jnp.add, lambda a, b: a + b), ("mul", jnp.multiply, lambda a, b: a * b),
           ("sub", jnp.subtract, lambda a, b: a - b), ("max", jnp.maximum, tf.maximum),
           ("div", lambda a, b: a / (1.5 + jnp.abs(b)), lambda a, b: a / (1.5 + tf.abs(b)))]


def _random_program(rng, n_ops):
    """A random straight-line program over two inputs, as (jax_fn, tf_fn) of the same math."""
    prog = []
    for _ in range(n_ops):
        if rng.random() < 0.55:
            prog.append(("u", int(rng.integers(len(_UNARY))), int(rng.integers(0, 2 + len(prog)))))
        else:
            prog.append(("b", int(rng.integers(len(_BINARY))), int(rng.integers(0, 2 + len(prog))),
                         int(rng.integers(0, 2 + len(prog)))))

    def run(a, b, unary, binary):
        vals = [a, b]
        for op in prog:
            if op[0] == "u":
                vals.append(unary(op[1])(vals[op[2]]))
            else:
                vals.append(binary(op[1])(vals[op[2]], vals[op[3]]))
        return vals[-1]

    def jax_fn(a, b):
        return jnp.sum(run(a, b, lambda i: _UNARY[i][1], lambda i: _BINARY[i][1]))

    def tf_fn(a, b):
        return tf.reduce_sum(run(a, b, lambda i: _TF_UNARY[_UNARY[i][0]], lambda i: _BINARY[i][2]))

    return jax_fn, tf_fn


def _random_case(rng):
    """A random program of 1-8 ops (``_random_program``), its two (3,) inputs and jax.grad's gradients."""
    jax_fn, tf_fn = _random_program(rng, int(rng.integers(1, 9)))
    a0 = rng.normal(size=(3,)).astype(np.float32)
    b0 = rng.normal(size=(3,)).astype(np.float32)
    return tf_fn, a0, b0, jax.grad(jax_fn, argnums=(0, 1))(jnp.asarray(a0), jnp.asarray(b0))


def _check_case(tf_fn, a, b, expected, msg):
    with tf.GradientTape() as t:
        y = tf_fn(a, b)
    got = t.gradient(y, [a, b], unconnected_gradients="zero")
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g.numpy(), np.asarray(e), rtol=2e-5, atol=1e-6, err_msg=msg)


def test_random_programs_agree_across_tiers_and_with_jax_grad(tier):
    # 200 random programs, each asked in the interpreted and the compiled tier: a
    # rule that one tier gets wrong 1 time in 200 shows here.
    rng = np.random.default_rng(20261124)
    for case in range(200):
        tf_fn, a0, b0, expected = _random_case(rng)
        for mode in ("interpret", "compile"):
            tier(mode)
            _check_case(tf_fn, tf.Variable(a0), tf.Variable(b0), expected, f"case {case}, tier {mode}")


def test_bad_tier_setting_is_a_clear_error(tier):
    tier("fast")
    k = tf.Variable(1.0)
    with pytest.raises(ValueError, match="replay_tier must be one of auto, interpret, compile"):
        _euler(k, 1)


def test_bad_tier_environment_variable_fails_at_import():
    r = subprocess.run([sys.executable, "-c", "import tapejax"], capture_output=True, text=True,
                       env={"TAPEJAX_REPLAY_TIER": "fastest", "PATH": "/usr/bin:/bin"})
    assert r.returncode != 0
    assert "TAPEJAX_REPLAY_TIER must be one of auto, interpret, compile" in r.stderr


def test_exit_during_a_background_compile_waits_instead_of_aborting():
    # XLA aborts the process ("terminate called ...") if Python shuts down while a compile
    # runs on the background thread: the program must exit cleanly, with status 0.
    # 25 steps: a slice short enough to be compiled whole, the background compile of eager and
    # lazy mode alike (a longer one is segmented).
    code = (
        "import tapejax as tf\n"
        "k = tf.Variable(2.0)\n"
        "for _ in range(2):\n"
        "    x = tf.constant([1.0, 0.0])\n"
        "    with tf.GradientTape() as t:\n"
        "        for _ in range(25):\n"
        "            x = x + 0.01 * tf.stack([x[1], -k * x[0] - 0.1 * x[1]])\n"
        "        loss = tf.reduce_sum(x * x)\n"
        "    g = t.gradient(loss, k)\n"
        "print(tf.replay_cache_info().background_compiles, float(g))\n"
    )
    env = dict(os.environ, TAPEJAX_REPLAY_TIER="auto")  # the policy that compiles in the background
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    started, g = r.stdout.split()
    assert started == "1"
    np.testing.assert_allclose(float(g), float(jax.grad(_euler_jax)(2.0, 25)), rtol=1e-5)


@pytest.mark.parametrize("mode", ["interpret", "compile", "auto"])
def test_compiled_gradient_under_an_outer_tape_that_watches_other_values(tier, mode):
    # An outer tape records (so the replay is offered to it) but watches nothing the inner slice
    # reads: the compiled tier ran its live-input analysis with an undefined name here (found
    # by ruff's F821). The outer tape must get no path, as in TF.
    tier(mode)
    x = tf.constant(2.0)
    other = tf.constant(1.0)
    for _ in range(12):  # auto: past the hot threshold and the switch
        with tf.GradientTape() as outer:
            outer.watch(other)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = x * x * x
            g = inner.gradient(y, x)
        assert float(g) == 12.0
        assert outer.gradient(g, other) is None
    v = tf.Variable(2.0)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = v * v * v
        g = inner.gradient(y, v)
    assert float(g) == 12.0 and float(outer.gradient(g, v)) == 12.0


def _segment_program(rng, n_ops):
    """A random program over a vector Variable, a matrix and a scalar Variable with slicing,
    stack/unstack (several outputs), an integer index op and reuse of old values: the
    wiring a segment boundary can cut anywhere."""
    prog = [(int(rng.integers(8)), int(rng.integers(0, 3 + i)), int(rng.integers(0, 3 + i))) for i in range(n_ops)]

    def run(v, m, s, np_):
        vals = [v, np_.tanh(m[0]) if np_ is not jnp else jnp.tanh(m[0]), v * s]
        for op, i, j in prog:
            a, b = vals[i], vals[j]
            if op == 0:
                vals.append(a * b + 0.1)
            elif op == 1:
                vals.append(np_.sin(a) - b * 0.5)
            elif op == 2:
                vals.append(a * s)
            elif op == 3:
                parts = np_.unstack(a) if np_ is not jnp else list(a)
                vals.append(np_.stack([parts[3], parts[0] * 0.9, parts[1], parts[2] + 1.0]))
            elif op == 4:
                vals.append(np_.tanh(a) * 2.0)
            elif op == 5:
                # An integer op: which entry is largest (no gradient through the index).
                idx = np_.argmax(b)
                vals.append(a * (1.0 + 0.1 * np_.cast(idx, np_.float32) if np_ is not jnp else
                                 1.0 + 0.1 * idx.astype(jnp.float32)))
            elif op == 6:
                vals.append(a + m[1] * 0.3)
            else:
                vals.append(a / (1.5 + np_.abs(b)))
        return vals[-1], vals[len(vals) // 2]

    def jax_loss(v, m, s, w1, w2):
        y1, y2 = run(v, m, s, jnp)
        return jnp.sum(y1 * w1) + jnp.sum(y2 * w2)

    return run, jax_loss


def test_random_segmented_programs_agree_with_jax_grad(tier):
    # 200 random programs cut at random segment lengths (segmented tier on every call), two
    # targets, one weighted by output_gradients: against jax.grad of the same function.
    rng = np.random.default_rng(20261125)
    for case in range(200):
        n_ops = int(rng.integers(3, 40))
        run, jax_loss = _segment_program(rng, n_ops)
        tier("auto", hot=1, max_compile_eqns=2, segment_eqns=int(rng.integers(1, 12)), background_compile=False)
        v0 = rng.normal(size=(4,)).astype(np.float32)
        m0 = rng.normal(size=(2, 4)).astype(np.float32)
        s0 = np.float32(rng.normal())
        w1 = rng.normal(size=(4,)).astype(np.float32)
        expected = jax.grad(jax_loss, argnums=(0, 1, 2))(jnp.asarray(v0), jnp.asarray(m0), jnp.asarray(s0),
                                                         jnp.asarray(w1), jnp.ones(4, jnp.float32))
        v, m, s = tf.Variable(v0), tf.Variable(m0), tf.Variable(s0)
        with tf.GradientTape() as t:
            y1, y2 = run(v, m, s, tf)
        before = tf.replay_cache_info()
        got = t.gradient([y1, y2], [v, m, s], output_gradients=[tf.constant(w1), tf.ones_like(y2)],
                         unconnected_gradients="zero")
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g.numpy(), np.asarray(e), rtol=5e-5, atol=1e-5, err_msg=f"case {case}")
        after = tf.replay_cache_info()
        assert after.segmented == before.segmented + 1, f"case {case}"


def test_intermediate_sources_are_interpreted_not_segmented(tier):
    # A source produced inside the slice is not a leaf of any segment: tier 0 answers.
    tier("auto", hot=1, max_compile_eqns=5, segment_eqns=4, background_compile=False)
    k = tf.Variable(2.0)
    for _ in range(2):
        with tf.GradientTape() as t:
            x = tf.constant([1.0, 0.0])
            mid = None
            for i in range(6):
                x = x + 0.01 * tf.stack([x[1], -k * x[0] - 0.1 * x[1]])
                if i == 2:
                    mid = x
            loss = tf.reduce_sum(x * x)
        g_mid, g_k = t.gradient(loss, [mid, k])

        def tail(m, kk):
            for _ in range(3):
                m = m + 0.01 * jnp.stack([m[1], -kk * m[0] - 0.1 * m[1]])
            return jnp.sum(m * m)

        np.testing.assert_allclose(g_mid.numpy(), np.asarray(jax.grad(tail)(jnp.asarray(mid.numpy()), 2.0)), rtol=1e-5)
        np.testing.assert_allclose(float(g_k), float(jax.grad(_euler_jax)(2.0, 6)), rtol=1e-5)
    info = tf.replay_cache_info()
    assert info.segmented == 0 and info.interpreted == 2


def _fast_first_programs():
    from tapejax._engine import _kernels, _replay

    return [e.compiled for e in list(_replay._cache.data.values())
            if isinstance(e, _replay._Precompiled) and isinstance(e.compiled, _kernels.FastFirst)]


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the fast pipeline's options are XLA:CPU's")
def test_a_small_hot_slice_runs_its_fast_program_then_its_full_one(tier, monkeypatch, execution_mode):
    # Eager mode: the compiled tier runs the slice's program (lazy mode defers the gradient into its
    # step's program from the switch: test_lazy's test_a_small_step_program_is_built_fast_first).
    execution_mode("eager")
    tier("auto", hot=2, lag=2, background_compile=True)
    monkeypatch.setattr(config, "replay_fast_runs", 4)
    k = tf.Variable(2.0)
    expected = float(jax.grad(_euler_jax)(2.0, 10))
    seen = []
    for _ in range(10):
        np.testing.assert_allclose(float(_euler(k, 10)), expected, rtol=1e-5)
        seen.append([p.upgraded for p in _fast_first_programs()])
    # Sightings 1-3 interpreted (2: hot, the fast build starts; it lands in the cache when done),
    # 4: the fast program's first run; its 4th run (sighting 7) is the full program's first.
    assert seen[3:6] == [[False]] * 3
    assert seen[6:] == [[True]] * 4


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the fast pipeline's options are XLA:CPU's")
def test_random_small_slices_agree_with_jax_grad_on_both_programs(tier, monkeypatch, execution_mode):
    # 40 random programs, each hot: runs of its fast-built program, then of its full one. A
    # program that one pipeline gets wrong, or a switch that feeds a program another's inputs,
    # shows as a gradient unlike jax.grad's.
    execution_mode("eager")
    tier("auto", hot=1, lag=1, background_compile=True)
    monkeypatch.setattr(config, "replay_fast_runs", 2)
    rng = np.random.default_rng(20261129)
    for case in range(40):
        tf_fn, a0, b0, expected = _random_case(rng)
        a, b = tf.Variable(a0), tf.Variable(b0)
        for step in range(5):
            _check_case(tf_fn, a, b, expected, f"case {case}, step {step}")
    programs = _fast_first_programs()
    assert len(programs) >= 30 and all(p.upgraded for p in programs)
