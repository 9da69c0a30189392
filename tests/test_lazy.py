"""Lazy execution (``tapejax.config.set_execution("lazy")``) gives eager mode's values.

Every case runs the same function eagerly and lazily (several times, so the lazy
program goes from its op-by-op first sightings to its compiled form) and compares
values, gradients, None-ness, variable state and exceptions.
"""

from __future__ import annotations

import itertools
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax as tf
from tapejax import config
from tapejax._core._recorder import Tensor
from tapejax._engine import _lazy


def _leaves(out):
    return jax.tree_util.tree_leaves(out, is_leaf=lambda a: a is None or hasattr(a, "_id") or hasattr(a, "_uid"))


def _np(out):
    res = []
    for a in _leaves(out):
        res.append(None if a is None else np.asarray(a.numpy()))
    return res


def _run(mode, fn, repeats):
    old = config.get_execution()
    config.set_execution(mode)
    try:
        return [_np(fn()) for _ in range(repeats)]
    finally:
        config.set_execution(old)


def assert_same(fn, repeats=4, rtol=1e-6, atol=1e-6):
    """``fn`` (building its own state) gives the same values eagerly and lazily, every repeat."""
    eager = _run("eager", fn, repeats)
    lazy = _run("lazy", fn, repeats)
    for e_rep, l_rep in zip(eager, lazy):
        assert len(e_rep) == len(l_rep)
        for e, l in zip(e_rep, l_rep):
            assert (e is None) == (l is None)
            if e is not None:
                assert e.dtype == l.dtype and e.shape == l.shape
                np.testing.assert_allclose(l, e, rtol=rtol, atol=atol)
    return eager, lazy


@pytest.fixture
def lazy_mode(execution_mode):
    execution_mode("lazy")


def test_switch_and_handles(lazy_mode):
    x = tf.constant([1.0, 2.0])
    y = tf.sin(x) * 2.0 + 1.0
    # a lazy tensor is a plain Tensor (pytree node type, type tests) whose value is not computed yet
    assert type(y) is Tensor and _lazy.pending(y)
    # shape and dtype without running anything
    assert y.shape == (2,) and y.dtype == tf.float32 and _lazy.pending(y)
    np.testing.assert_allclose(y.numpy(), np.sin([1.0, 2.0]) * 2 + 1, rtol=1e-6)
    assert config.get_execution() == "lazy"
    with pytest.raises(ValueError, match="eager or 'lazy'|'eager' or 'lazy'"):
        config.set_execution("fast")


def test_scalar_chain_gradient():
    def step():
        x = tf.constant(0.5)
        with tf.GradientTape() as t:
            t.watch(x)
            y = x
            for _ in range(20):
                y = tf.tanh(tf.sin(y) * 1.5 + 0.1)
        return y, t.gradient(y, x)

    assert_same(step, repeats=12)


def _mlp_step_factory():
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((8, 16)).astype(np.float32) * 0.3, rng.standard_normal(16).astype(np.float32) * 0.1,
          rng.standard_normal((16, 1)).astype(np.float32) * 0.3, rng.standard_normal(1).astype(np.float32) * 0.1]
    xs = rng.standard_normal((4, 8)).astype(np.float32)
    ys = rng.standard_normal((4, 1)).astype(np.float32)
    state = {}

    def step():
        if "v" not in state:
            state["v"] = [tf.Variable(w) for w in ws]
        vs = state["v"]
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(tf.constant(xs), vs[0]) + vs[1])
            loss = tf.reduce_mean(tf.square(tf.matmul(h, vs[2]) + vs[3] - ys))
        grads = tape.gradient(loss, vs)
        for v, g in zip(vs, grads):
            v.assign_sub(0.1 * g)
        # the variables' state is visible at every read
        return loss, grads, [tf.identity(v) for v in vs]

    return step


def test_mlp_steps_with_variable_updates():
    eager = _run("eager", _mlp_step_factory(), 12)
    lazy = _run("lazy", _mlp_step_factory(), 12)
    for e_rep, l_rep in zip(eager, lazy):
        for e, l in zip(e_rep, l_rep):
            np.testing.assert_allclose(l, e, rtol=2e-5, atol=1e-6)


def test_nested_tapes_hessian():
    def step():
        x = tf.constant([0.3, -1.2, 2.0])
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = tf.reduce_sum(tf.sin(x) * x ** 3)
            g = inner.gradient(y, x)
        return g, outer.gradient(g, x)

    assert_same(step, repeats=6, rtol=1e-5)


def test_persistent_tape_and_none():
    def step():
        x = tf.constant(1.5)
        z = tf.constant(2.0)
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            y = x * x * 3.0
            w = tf.exp(y / 10.0)
        return t.gradient(y, x), t.gradient(w, [x, z]), t.gradient(w, z, unconnected_gradients="zero")

    _, lazy = assert_same(step, repeats=5)
    assert lazy[0][2] is None  # the unconnected source stays None lazily


def test_control_flow_on_values(lazy_mode):
    x = tf.constant(3.0)
    y = x * 2.0
    total = 0.0
    while float(y) > 1.0:  # Python control flow forces the program, then laziness goes on
        y = y / 2.0
        total += 1.0
    assert total == 3.0
    assert bool(y < 1.0)


def test_error_raised_at_user_line(lazy_mode):
    a = tf.ones((2, 3))
    b = tf.ones((4, 5))

    def user_code():
        c = a * 2.0
        return tf.matmul(c, b)  # the bad line

    with pytest.raises(tf.errors.InvalidArgumentError) as ei:
        user_code()
    frames = traceback.extract_tb(ei.value.__traceback__)
    assert any(f.name == "user_code" and "tf.matmul(c, b)" in (f.line or "") for f in frames)


def test_error_matches_eager():
    def bad():
        return tf.constant([1.0, 2.0]) + tf.constant([1.0, 2.0, 3.0])

    errs = []
    for mode in ("eager", "lazy"):
        config.set_execution(mode)
        try:
            with pytest.raises(Exception) as ei:
                bad().numpy()
            errs.append(type(ei.value))
        finally:
            config.set_execution("eager")
    assert errs[0] is errs[1]


def test_random_stream_unchanged():
    def draws():
        tf.random.set_seed(7)
        return [tf.random.normal((3,)) * 2.0 for _ in range(3)] + [tf.random.uniform((2,), seed=3)]

    assert_same(draws, repeats=3)


def test_compiled_after_repeat(lazy_mode, monkeypatch):
    # The schedule of a program without a deferred gradient: op by op until its HOT + replay_lag-th
    # sighting, which starts the whole program's compile in the background; op by op again for
    # replay_lag sightings, then compiled. (With a deferred gradient it starts at the HOT-th:
    # test_a_repeated_step_is_one_program_run.)
    lag = 3
    monkeypatch.setattr(config, "replay_lag", lag)
    monkeypatch.setattr(config, "replay_background_compile", True)
    x = tf.constant([0.1, 0.2])
    c = 3.0 + len(_lazy._programs) * 1e-3  # (a structure no earlier test ran)
    before = _lazy.stats()
    got = [(tf.cos(x) * c + 1.0).numpy() for _ in range(_lazy.HOT + 2 * lag + 2)]
    after = _lazy.stats()
    assert after["runs_interpreted"] - before["runs_interpreted"] == _lazy.HOT + 2 * lag - 1
    assert after["runs_compiled"] - before["runs_compiled"] == 3
    assert after["background_compiles"] - before["background_compiles"] == 1
    want = np.cos(np.float32([0.1, 0.2])) * np.float32(c) + np.float32(1.0)
    for g in got:
        np.testing.assert_allclose(g, want, rtol=1e-6)


def test_background_compiled_program_keeps_values_uncommitted(lazy_mode, monkeypatch):
    # Eager mode (and jit) leave a computation on uncommitted arrays uncommitted: such a value may
    # still meet an array committed to another device, and a jit it reaches later is not compiled
    # again for a placement. A program compiled in the background must return the same arrays: the
    # values before and after its switch agree in commitment, and a committed input's stays committed.
    lag = 2
    monkeypatch.setattr(config, "replay_lag", lag)
    monkeypatch.setattr(config, "replay_background_compile", True)
    x = tf.constant([0.3, 0.7])
    pinned = tf.constant(jax.device_put(np.float32([1.5, 2.5]), jax.devices()[0]))
    c = 9.0 + len(_lazy._programs) * 1e-3  # (a structure no earlier test ran)
    before = _lazy.stats()
    outs = []
    for _ in range(_lazy.HOT + 2 * lag + 3):
        a = (tf.exp(x) * c + 1.0)._value  # (read: one program, then the next)
        b = (tf.tanh(pinned) * c)._value
        outs.append((a, b))
    after = _lazy.stats()
    assert after["runs_compiled"] - before["runs_compiled"] >= 6
    assert after["background_compiles"] - before["background_compiles"] == 2
    assert [va.committed for va, _ in outs] == [False] * len(outs)
    assert [vb.committed for _, vb in outs] == [True] * len(outs)
    want = np.exp(np.float32([0.3, 0.7])) * np.float32(c) + np.float32(1.0)
    for va, vb in outs:
        np.testing.assert_allclose(np.asarray(va), want, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(vb), np.tanh(np.float32([1.5, 2.5])) * np.float32(c), rtol=1e-6)


def test_compiled_in_the_foreground_without_background_compiles(lazy_mode, monkeypatch):
    monkeypatch.setattr(config, "replay_background_compile", False)
    x = tf.constant([0.3, 0.4])
    c = 5.0 + len(_lazy._programs) * 1e-3
    before = _lazy.stats()
    for _ in range(_lazy.HOT + 2):
        (tf.sin(x) * c - 1.0).numpy()
    after = _lazy.stats()
    assert after["runs_interpreted"] - before["runs_interpreted"] == _lazy.HOT - 1
    assert after["runs_compiled"] - before["runs_compiled"] == 3
    assert after["background_compiles"] == before["background_compiles"]


def _spy_host_decisions(monkeypatch) -> tuple:
    """The kernels' host decisions as ``(step, compiled)`` pairs, ``step`` read from ``now[0]``."""
    from tapejax._engine import _kernels

    calls: list = []
    real = _kernels._host_eval
    now = [0]

    def spy(jitted: object, table: dict, args: tuple, host: bool = False) -> object:
        out = real(jitted, table, args, host)
        calls.append((now[0], out is None))
        return out

    monkeypatch.setattr(_kernels, "_host_eval", spy)
    return calls, now


def test_warming_runs_keep_kernels_on_the_host(lazy_mode, monkeypatch):
    # While a hot program compiles in the background its runs are op by op, and a kernel whose
    # host answers are spent is answered on the host again instead of being compiled for the few
    # runs left: every kernel call is past its budget here, and nothing compiles on this thread.
    lag = 4
    monkeypatch.setattr(config, "replay_lag", lag)
    monkeypatch.setattr(config, "replay_background_compile", True)
    # The host answers each kernel's calls until the warming runs begin (a step a tape: each
    # signature is called once a tape), and not one more.
    monkeypatch.setattr(config, "kernel_host_first_calls", _lazy.HOT + lag - 1)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 0)
    x = tf.constant(np.linspace(0.1, 0.9, 7, dtype=np.float32))
    c = 7.0 + len(_lazy._programs) * 1e-3
    calls, now = _spy_host_decisions(monkeypatch)
    def step() -> np.ndarray:
        now[0] += 1
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.tanh(x * c) + c
        return y.numpy()

    outs = [step() for _ in range(_lazy.HOT + 2 * lag + 1)]
    want = np.tanh(np.float32(np.linspace(0.1, 0.9, 7, dtype=np.float32)) * np.float32(c)) + np.float32(c)
    for o in outs:
        np.testing.assert_allclose(o, want, rtol=1e-6)
    warming = [compiled for k, compiled in calls if _lazy.HOT + lag <= k < _lazy.HOT + 2 * lag]
    assert len(warming) >= 3 * lag  # (three kernels in each warming run: past their host budget)
    assert not any(warming)  # answered on the host again, none compiled



def test_a_recurring_program_keeps_kernels_on_the_host_before_it_is_hot(lazy_mode, monkeypatch):
    # A structure seen before is compiled whole at its HOT + replay_lag-th sighting: a kernel whose
    # host budget runs out before then is answered on the host again, not compiled for the few op by
    # op runs left (a training loop's forward kernels compiled at its 9th step, their host budget
    # spent, and were replaced ten steps later: mlp_step_small 180 ms).
    lag = 4
    monkeypatch.setattr(config, "replay_lag", lag)
    monkeypatch.setattr(config, "replay_background_compile", True)
    monkeypatch.setattr(config, "kernel_host_first_calls", 2)  # (spent at the third step)
    monkeypatch.setattr(config, "kernel_host_budget_elements", 0)
    # A shape no other test uses: a kernel an earlier test compiled makes no host decisions
    # (sin on f32[5] compiled by an earlier test in the same worker failed this test).
    n = 23
    x = tf.constant(np.linspace(0.2, 0.8, n, dtype=np.float32))
    c = 11.0 + len(_lazy._programs) * 1e-3  # (a structure no earlier test ran)
    calls, now = _spy_host_decisions(monkeypatch)

    def step() -> np.ndarray:
        now[0] += 1
        return (tf.sin(x * c) - c).numpy()

    outs = [step() for _ in range(_lazy.HOT + 2 * lag + 1)]
    want = np.sin(np.linspace(0.2, 0.8, n, dtype=np.float32) * np.float32(c)) - np.float32(c)
    for o in outs:
        np.testing.assert_allclose(o, want, rtol=1e-6)
    before_hot = [compiled for k, compiled in calls if 3 <= k < _lazy.HOT + 2 * lag]
    assert len(before_hot) >= 2 * (_lazy.HOT + 2 * lag - 3)  # (two kernels a run, past their budget)
    assert not any(before_hot)

def test_value_printed(lazy_mode, capsys):
    y = tf.constant([1.0, 2.0]) * 3.0
    print(y)
    assert "3." in capsys.readouterr().out and "6." in repr(y)


# ---- random programs -----------------------------------------------------------------

_UNARY = ["sin", "tanh", "exp_small", "square", "relu", "sigmoid"]
_BINARY = ["add", "mul", "sub", "matmul_t", "maximum"]


def _apply(op, a, b):
    if op == "sin":
        return tf.sin(a)
    if op == "tanh":
        return tf.tanh(a)
    if op == "exp_small":
        return tf.exp(a * 0.1)
    if op == "square":
        return tf.square(a)
    if op == "relu":
        return tf.nn.relu(a)
    if op == "sigmoid":
        return tf.sigmoid(a)
    if op == "add":
        return a + b
    if op == "mul":
        return a * b
    if op == "sub":
        return a - 0.5 * b
    if op == "matmul_t":
        return tf.matmul(a, b, transpose_b=True) * 0.1
    return tf.maximum(a, b)


@st.composite
def programs(draw):
    n = draw(st.integers(1, 10))
    ops = []
    for _ in range(n):
        if draw(st.booleans()):
            ops.append((draw(st.sampled_from(_UNARY)), draw(st.integers(0, 8)), 0))
        else:
            ops.append((draw(st.sampled_from(_BINARY)), draw(st.integers(0, 8)), draw(st.integers(0, 8))))
    persistent = draw(st.booleans())
    nested = draw(st.booleans())
    use_var = draw(st.booleans())
    force_at = draw(st.integers(-1, n))  # a Python read of a value mid-program
    return ops, persistent, nested, use_var, force_at


@given(programs())
def test_random_programs_match_eager(prog):
    ops, persistent, nested, use_var, force_at = prog
    rng = np.random.default_rng(len(ops))
    x0 = rng.standard_normal((3, 3)).astype(np.float32)
    w0 = rng.standard_normal((3, 3)).astype(np.float32)
    holder = {}

    def fn():
        if "v" not in holder:
            holder["v"] = tf.Variable(w0)
        v = holder["v"]
        x = tf.constant(x0)
        outer = tf.GradientTape(persistent=True)
        with outer:
            outer.watch(x)
            with tf.GradientTape(persistent=persistent) as tape:
                tape.watch(x)
                pool = [x, v if use_var else x * 0.5]
                for k, (op, i, j) in enumerate(ops):
                    if k == force_at:
                        float(tf.reduce_sum(pool[-1]))
                    pool.append(_apply(op, pool[i % len(pool)], pool[j % len(pool)]))
                y = tf.reduce_sum(pool[-1])
            gx, gv = tape.gradient(y, [x, v])
            inner_g = gx if nested and gx is not None else None
        hx = outer.gradient(tf.reduce_sum(inner_g), x) if inner_g is not None else None
        if gv is not None:
            v.assign_sub(0.01 * gv)
        return y, gx, gv, hx, tf.identity(v)

    eager = _run("eager", fn, 3)
    holder.clear()
    lazy = _run("lazy", fn, 3)
    for e_rep, l_rep in zip(eager, lazy):
        for e, l in zip(e_rep, l_rep):
            assert (e is None) == (l is None)
            if e is not None:
                np.testing.assert_allclose(l, e, rtol=1e-4, atol=1e-5)


def test_threads_share_lazy_tensors(lazy_mode):
    import threading

    made = {}
    done = threading.Event()

    def worker():
        a = tf.constant([1.0, 2.0]) * 3.0  # pending in this thread's program
        made["a"] = a
        done.set()
        made["b"] = (a + 1.0).numpy()

    th = threading.Thread(target=worker)
    th.start()
    done.wait()
    # Read from another thread: runs (or waits for) the worker's program.
    got = (made["a"] * 2.0).numpy()
    th.join()
    np.testing.assert_allclose(got, [6.0, 12.0])
    np.testing.assert_allclose(made["b"], [4.0, 7.0])


def test_copy_and_type_name(lazy_mode):
    import copy

    y = tf.constant([1.0]) * 2.0
    assert type(y).__name__ == "Tensor"
    z = copy.copy(y)
    assert z.numpy().tolist() == [2.0] and z._id == y._id


def test_tf_print_order_and_forward_accumulator(lazy_mode, capsys):
    x = tf.constant(2.0)
    y = x * 3.0
    tf.print("first", y)
    z = y + 1.0
    tf.print("second", float(z))
    tf.print("third", z * 2.0)
    text = capsys.readouterr().err  # tf.print writes to stderr, as TF's
    assert text.index("first 6") < text.index("second 7") < text.index("third 14")
    # forward mode runs eagerly (ops under an accumulator are not deferred), values as eager
    with tf.autodiff.ForwardAccumulator(x, tf.constant(1.0)) as acc:
        w = tf.sin(y) * x
    np.testing.assert_allclose(acc.jvp(w).numpy(), np.sin(6.0) * 1.0, rtol=1e-6)


def test_python_scalar_slots_survive_an_op_that_falls_back():
    # An op whose later argument makes it run eagerly (a JAX tracer) must not leave its Python
    # scalar in the pending program's scalar table: `5 * t` then read whatever input took the
    # slot (the value of `t`), a silent wrong value, as in a custom_gradient's grad function
    # (traced once for its shapes, then run).
    def fn():
        jax.make_jaxpr(lambda a: (5 * Tensor(a))._value)(jnp.ones(()))

        @tf.custom_gradient
        def sq(x):
            def grad(dr):
                return 5 * dr * x + 10

            return tf.square(x), grad

        x = tf.Variable(3.0)
        with tf.GradientTape() as t:
            y = sq(x)
        return [5 * tf.ones(()), 7.0 * tf.constant(2.0), t.gradient(y, x)]

    eager, _ = assert_same(fn, repeats=2)
    assert float(eager[0][2]) == 25.0  # 5 * 1 * 3 + 10


def test_function_traced_after_lazy_updates():
    # An eager step leaves variable updates pending (lazy mode); the tapejax.function trace of
    # the same step then reads those variables. The pending program must run outside the JAX
    # trace (it once ran inside it: its cells kept tracers, UnexpectedTracerError at the next read).
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    b0 = rng.standard_normal(3).astype(np.float32)
    xs = rng.standard_normal((5, 4)).astype(np.float32)

    def run():
        w, b = tf.Variable(w0), tf.Variable(b0)
        opt = tf.keras.optimizers.Adam(0.05)

        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.tanh(tf.matmul(tf.constant(xs), w) + b) ** 2)
            grads = tape.gradient(loss, [w, b])
            opt.apply_gradients(zip(grads, [w, b]))
            return loss

        losses = [step(), step()]
        compiled = tf.function(step)
        losses += [compiled() for _ in range(3)]
        return losses, tf.identity(w), tf.identity(b)

    _, lazy = assert_same(run, repeats=2, rtol=1e-5, atol=1e-6)
    assert len(lazy[0]) == 7


def test_x64_block_runs_each_op_under_its_own_flag():
    # A program holds ops of one jax_enable_x64 state and runs under it wherever it is forced:
    # a gradient pending from before a ``jax.enable_x64`` block, float64 ops inside it (read
    # after the block), a Python float under both states. tapejax.testing's analytic check does
    # exactly this (its float64 reference once ran the pending float32 gradient under x64).
    def run():
        x = tf.constant([0.5, 1.5])
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.reduce_sum(tf.sin(x) * 2.0)
        g = t.gradient(y, x)
        with jax.enable_x64(True):
            w = tf.constant(np.array([0.25, 0.75]))
            z = tf.cos(w) * 3.0 + 1.0
            h = g * 1.5
            inside = [tf.constant(h.numpy())]  # forces g's program (built outside) in the block
            z2 = z * 2.0  # pending past the block: forced after it, by the caller
        after = g * 1.5
        return y, g, z, h, after, inside, z2

    eager, _ = assert_same(run, repeats=4)
    assert eager[0][2].dtype == np.float64 and eager[0][3].dtype == np.float32 and eager[0][-1].dtype == np.float64
    np.testing.assert_allclose(eager[0][1], 2 * np.cos([0.5, 1.5]), rtol=1e-6)


def test_lazy_tensors_are_the_pytree_node_of_eager_tensors(lazy_mode):
    # A lazy tensor is a Tensor: JAX flattens it as the same node (computing its value), so trees
    # mixing lazy and concrete tensors match in either order, and jit takes them.
    x = tf.constant([1.0, 2.0])
    lazy = tf.sin(x) * 2.0
    eager = tf.constant([0.5, 0.25])
    assert _lazy.pending(lazy) and not _lazy.pending(eager)
    assert jax.tree_util.tree_structure({"a": lazy}) == jax.tree_util.tree_structure({"a": eager})
    want = np.sin([1.0, 2.0]) * 2.0 + [0.5, 0.25]
    for a, b in ((lazy, eager), (eager, lazy)):
        out = jax.tree_util.tree_map(lambda p, q: p + q, {"a": a}, {"a": b})
        np.testing.assert_allclose(out["a"].numpy(), want, rtol=1e-6)
    late = tf.cos(x) + 1.0
    got = jax.jit(lambda t: jax.tree_util.tree_map(lambda v: v * 3.0, t))({"c": late, "d": [eager]})
    assert type(got["c"]) is Tensor
    np.testing.assert_allclose(got["c"].numpy(), (np.cos([1.0, 2.0]) + 1.0) * 3.0, rtol=1e-6)
    np.testing.assert_allclose(got["d"][0].numpy(), [1.5, 0.75], rtol=1e-6)


def test_optax_recipe_matches_eager_and_jax_grad(monkeypatch):
    # compat_docs/debugging.md's optax recipe: the tape's gradients (lazy handles in lazy mode, which
    # the step's program computes when the gradient call ends) meet optax's state (concrete tensors
    # from opt.init) in optax's tree_maps and jitted updates.
    optax = pytest.importorskip("optax")
    # The default tier policy (CI also forces one tier): a hot gradient joins the pending program.
    monkeypatch.setattr(config, "replay_tier", "auto")
    w0, b0 = np.array([1.0, 2.0], np.float32), np.float32(0.5)
    seen_pending = []

    def run():
        params = {"w": tf.Variable(w0), "b": tf.Variable(b0)}
        opt = optax.adam(0.1)
        state = opt.init(params)
        losses = []
        for _ in range(4):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(params["w"] ** 2) * params["b"] + params["b"] ** 2
            grads = tape.gradient(loss, params)
            seen_pending.append(grads["w"]._lz is not None)
            updates, state = opt.update(grads, state, params)
            tf.nest.map_structure(lambda p, u: p.assign_add(u), params, updates)
            losses.append(loss)
        return losses, params["w"], params["b"]

    eager, lazy = assert_same(run, repeats=3, rtol=1e-5, atol=1e-6)
    assert any(seen_pending), "the lazy run never handed optax a deferred gradient"

    def loss_fn(p):
        return jnp.sum(p["w"] ** 2) * p["b"] + p["b"] ** 2

    p = {"w": jnp.asarray(w0), "b": jnp.asarray(b0)}
    opt = optax.adam(0.1)
    s = opt.init(p)
    for _ in range(4):
        u, s = opt.update(jax.grad(loss_fn)(p), s, p)
        p = optax.apply_updates(p, u)
    for rep in lazy:
        np.testing.assert_allclose(rep[-2], np.asarray(p["w"]), rtol=1e-5)
        np.testing.assert_allclose(rep[-1], np.asarray(p["b"]), rtol=1e-5)


def test_jacobian_after_a_deferred_gradient_on_a_persistent_tape():
    # A hot gradient joins the pending program, leaving the persistent tape's recorded values
    # pending; jacobian / batch_jacobian of the same tape then read them (they once handed JAX a
    # pending cell: TypeError).
    xv = np.array([0.4, 1.6, -0.7, 2.2], np.float32)

    def run():
        x = tf.constant(xv)
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            r = tf.floor(x)
            s = tf.reduce_sum(r * r)
            y = tf.sin(x) * r + x * x
            x2 = tf.reshape(x, (2, 2))
            y2 = tf.sin(x2) * x2
        return (t.gradient(s, r), t.gradient(s, x), t.jacobian(r, r), t.jacobian(y, x), t.batch_jacobian(y2, x2))

    eager, _ = assert_same(run, repeats=6, rtol=1e-5)
    np.testing.assert_allclose(eager[0][0], 2 * np.floor(xv))
    assert eager[0][1] is None  # floor has no gradient
    np.testing.assert_allclose(eager[0][2], np.eye(4))
    np.testing.assert_allclose(eager[0][3], np.diag(np.cos(xv) * np.floor(xv) + 2 * xv), rtol=1e-5)
    d2 = (np.cos(xv) * xv + np.sin(xv)).reshape(2, 2)
    np.testing.assert_allclose(eager[0][4], np.stack([np.diag(d2[b]) for b in range(2)]), rtol=1e-5)


def test_threads_read_one_lazy_tensor_at_once(lazy_mode):
    # Several threads read the same pending tensor together: one runs the program, every one
    # gets its value (never an AttributeError from the moment the value is being stored).
    import threading

    for k in range(30):
        x = tf.constant([1.0, 2.0, float(k)])
        y = tf.sin(x) * 3.0 + 1.0
        want = np.sin([1.0, 2.0, float(k)]).astype(np.float32) * 3.0 + 1.0
        got, errors = [], []
        barrier = threading.Barrier(4)

        def read():
            try:
                barrier.wait()
                got.append(np.asarray(y._value))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and len(got) == 4
        for g in got:
            np.testing.assert_allclose(g, want, rtol=1e-6)


def test_a_repeated_step_is_one_program_run(lazy_mode, monkeypatch):
    monkeypatch.setattr(config, "replay_tier", "auto")  # the default policy (CI also forces one tier)
    # Nothing in the op layer reads a lazy tensor's value mid-step (an eager fast path that
    # did, the numeric test of add/sub/mul/..., ran the program after every op: 26 runs a step).
    x = tf.constant(0.5)
    c = tf.constant(0.25)

    def step():
        with tf.GradientTape() as t:
            t.watch(x)
            y = x
            for _ in range(6):
                y = tf.tanh(tf.sin(y) * 1.5 + 0.1) - c * y
                y = y / 2.0 + y * c
        return float(t.gradient(y, x))

    def jax_f(v):
        y = v
        for _ in range(6):
            y = jnp.tanh(jnp.sin(y) * 1.5 + 0.1) - 0.25 * y
            y = y / 2.0 + y * 0.25
        return y

    # Past the replay tiers' switch (the gradient joins the step's program) and past that program's
    # own switch to its compiled form (``_lazy._Warming``).
    for _ in range(config.replay_hot + config.replay_lag + _lazy.HOT + config.replay_lag + 1):
        step()
    before = _lazy.stats()
    got = [step() for _ in range(5)]
    after = _lazy.stats()
    runs = sum(after[k] - before[k] for k in ("runs_interpreted", "runs_compiled"))
    assert runs == 5 and after["runs_compiled"] - before["runs_compiled"] == 5
    np.testing.assert_allclose(got, [float(jax.grad(jax_f)(0.5))] * 5, rtol=1e-5)


def test_a_loop_that_reads_nothing_settles_on_one_program(lazy_mode, monkeypatch):
    # One deferred gradient per program: a training loop that never reads a value runs programs
    # cut at the same point every step (gradient, updates, next forward), so a few structures
    # cover every step (cut only by MAX_PENDING, each offset was a new structure and compile).
    rng = np.random.default_rng(5)
    xs = rng.normal(size=(8, 3)).astype(np.float32)
    ys = rng.normal(size=(8, 1)).astype(np.float32)

    def run(n):
        w, b = tf.Variable(np.zeros((3, 1), np.float32)), tf.Variable(np.zeros((1,), np.float32))
        for _ in range(n):
            with tf.GradientTape() as t:
                loss = tf.reduce_mean((tf.matmul(tf.constant(xs), w) + b - tf.constant(ys)) ** 2)
            gw, gb = t.gradient(loss, [w, b])
            w.assign_sub(0.05 * gw)
            b.assign_sub(0.05 * gb)
        return w, b

    monkeypatch.setattr(_lazy, "MAX_PENDING", 97)  # prime: cuts by size land at every offset
    run(30)  # past the replay tiers' switch
    before = set(_lazy._programs)
    w, b = run(400)
    new = set(_lazy._programs) - before
    assert len(new) <= 4, f"{len(new)} program structures for one repeated step"
    config.set_execution("eager")
    we, be = run(430 - 30)
    np.testing.assert_allclose(w.numpy(), we.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.numpy(), be.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("at_gradient", [True, False], ids=["second-core", "one-core"])
def test_a_deferred_gradient_runs_its_step_as_one_program(lazy_mode, monkeypatch, at_gradient):
    # In a loop that reads nothing, a step's forward and its gradient are one program (the next
    # gradient used to cut the program before its own node: the forward ran in one program and its
    # vjp computed it again in the next), and the updates after it are pending in the next step's
    # program. With a second core the program starts as the gradient call returns (the issue's
    # "end of a gradient() call"); on one core it ends at the next tape.
    monkeypatch.setattr(config, "replay_tier", "auto")
    monkeypatch.setattr(_lazy, "RUN_AT_GRADIENT", at_gradient)
    rng = np.random.default_rng(7)
    xs = tf.constant(rng.normal(size=(8, 3)).astype(np.float32))
    w0 = rng.normal(size=(3, 1)).astype(np.float32)

    def loss_fn(w):
        return jnp.mean(jnp.tanh(xs.numpy() @ w) ** 2)

    w = tf.Variable(w0)
    want = jnp.asarray(w0)
    one_program = 0
    for _ in range(config.replay_hot + config.replay_lag + _lazy.HOT + config.replay_lag + 6):
        with tf.GradientTape() as t:
            loss = tf.reduce_mean(tf.tanh(tf.matmul(xs, w)) ** 2)
        g = t.gradient(loss, w)
        deferred = g._lz is not None  # (past the replay tiers' switch)
        if deferred:
            assert _lazy.pending(g) is not at_gradient and _lazy.pending(loss) is not at_gradient
            one_program += g._lz.prog is loss._lz.prog
        w.assign_sub(0.1 * g)
        assert type(w._raw) is _lazy._Cell and w._raw.value is _lazy._UNSET  # the update is pending
        if deferred:
            # in the next step's program, or (one core) in the gradient's, which the next tape ends
            assert (w._raw.prog is g._lz.prog) is not at_gradient
        want = want - 0.1 * jax.grad(loss_fn)(want)
    assert one_program >= 6
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-6)


_SHAPE_READERS = {
    "getitem": lambda y: y[1],
    "strided": lambda y: y[:, ::-2],
    "stack": lambda y: tf.stack([y[0], y[1]]),
    "concat": lambda y: tf.concat([y, y], 0),
    "reshape": lambda y: tf.reshape(y, [3, 2]),
    "expand_squeeze": lambda y: tf.squeeze(tf.expand_dims(y, 0)),
    "tile": lambda y: tf.tile(y, [1, 2]),
    "transpose": lambda y: tf.transpose(y),
    "gather": lambda y: tf.gather(y, [1, 0]),
    "split": lambda y: tf.split(y, 3, axis=1)[2],
    "unstack": lambda y: tf.unstack(y)[1],
    "broadcast_to": lambda y: tf.broadcast_to(y[0], [2, 3]),
    "pad": lambda y: tf.pad(y, [[1, 0], [0, 1]]),
    "matmul": lambda y: tf.matmul(y, y, transpose_b=True),
    "reduce": lambda y: tf.reduce_sum(y, axis=1),
    "softmax_xent": lambda y: tf.nn.softmax_cross_entropy_with_logits(tf.one_hot([0, 2], 3), y),
}


@pytest.mark.parametrize("name", sorted(_SHAPE_READERS))
def test_ops_that_check_shapes_keep_pending_inputs_pending(lazy_mode, name):
    # The op library reads its inputs' shapes and dtypes from ``_aval`` (a pending tensor's
    # abstract value): an op that only checks shapes must not run the pending program. (The Euler
    # loop's ``x[1]`` and ``tf.stack`` read ``_value.shape``, which ran the program twice an Euler
    # step: 200 programs, and a background compile for each structure, a gradient.)
    op = _SHAPE_READERS[name]
    x = tf.constant([[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]])
    y = tf.sin(x) * 1.5
    before = _lazy.stats()
    out = op(y)
    after = _lazy.stats()
    assert _lazy.pending(out)
    assert after["runs_interpreted"] + after["runs_compiled"] == before["runs_interpreted"] + before["runs_compiled"]
    got = out.numpy()
    config.set_execution("eager")
    want = op(tf.sin(x) * 1.5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ---- the fast path's node keys ---------------------------------------------------------

# Python scalars whose keys must stay apart (1 / 1.0, 0.0 / -0.0) or coincide (equal values).
_KEY_SCALARS = [1.5, 0.1, 0.0, -0.0, 1, 1.0, 2, -3]
_KEY_UNARY = {"sin": (tf.sin, jnp.sin), "tanh": (tf.tanh, jnp.tanh), "square": (tf.square, jnp.square)}


@st.composite
def keyed_programs(draw):
    n = draw(st.integers(1, 12))
    ops = []
    for k in range(n):
        kind = draw(st.sampled_from(["unary", "mul_s", "add_s", "add", "mul", "add_x", "add_c"]))
        i = draw(st.integers(0, k))  # an earlier value (0 is the watched input)
        if kind == "unary":
            ops.append((kind, draw(st.sampled_from(sorted(_KEY_UNARY))), i))
        elif kind in ("mul_s", "add_s"):
            ops.append((kind, draw(st.sampled_from(_KEY_SCALARS)), i))
        elif kind in ("add_x", "add_c"):
            ops.append((kind, None, i))  # a concrete input again (x: the same array; c: another one)
        else:
            ops.append((kind, draw(st.integers(0, k)), i))
    return ops


def _structure(ops):
    # What a program's key must tell apart: the ops, their wiring and each scalar's type and exact value.
    return tuple((kind, (type(a), repr(a)) if kind.endswith("_s") else a, i) for kind, a, i in ops)


def _build(lib, ops, y, x, c):
    pool = [y]
    for kind, a, i in ops:
        v = pool[i]
        if kind == "add_x":
            pool.append(v + x)
        elif kind == "add_c":
            pool.append(v * c)
        elif kind == "unary":
            pool.append((_KEY_UNARY[a][0] if lib is tf else _KEY_UNARY[a][1])(v))
        elif kind == "mul_s":
            pool.append(v * a)
        elif kind == "add_s":
            pool.append(v + a)
        elif kind == "add":
            pool.append(v + pool[a])
        else:
            pool.append(v * pool[a])
    return pool[-1]


def _lazy_run(ops, x0):
    """(the pending program's key before the gradient, y, dy/dx) of ``ops`` run lazily."""
    x = tf.constant(np.float32(x0))
    c = tf.constant(np.float32(0.5))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.sin(x)  # a first op on a concrete input: the program starts here in every run
        y = _build(tf, ops, y, x, c)
    key = tuple(_lazy._tls.prog.key)
    g = tape.gradient(y, x)
    return key, float(y), float(g)


@given(keyed_programs(), keyed_programs(), st.sampled_from(["same", "mutate", "other"]), st.data())
def test_fast_path_keys_match_structure_and_values_match_jax_grad(a, b, how, data):
    if how != "other":
        b = list(a)
    if how == "mutate":
        # One op changed a little (often only a scalar's type or sign): near misses must not share a key.
        k = data.draw(st.integers(0, len(a) - 1))
        kind, arg, i = a[k]
        if kind.endswith("_s"):
            b[k] = (kind, data.draw(st.sampled_from(_KEY_SCALARS)), i)
        else:
            b[k] = (kind, arg, data.draw(st.integers(0, k)))
    with_lazy = config.get_execution()
    config.set_execution("lazy")
    try:
        ka1, ya, ga = _lazy_run(a, 0.3)
        ka2, ya2, ga2 = _lazy_run(a, 0.7)  # the same structure on another value: the same key
        kb, yb, gb = _lazy_run(b, 0.3)
    finally:
        config.set_execution(with_lazy)
    assert ka1 == ka2
    assert (ka1 == kb) == (_structure(a) == _structure(b))
    for ops, x0, y, g in ((a, 0.3, ya, ga), (a, 0.7, ya2, ga2), (b, 0.3, yb, gb)):
        f = lambda x, ops=ops: _build(jnp, ops, jnp.sin(x), x, jnp.float32(0.5))  # noqa: E731
        np.testing.assert_allclose(y, float(f(jnp.float32(x0))), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(g, float(jax.grad(f)(jnp.float32(x0))), rtol=1e-4, atol=1e-5)


# ---- random chains whose programs run at arbitrary points ---------------------------------

# add_t: y + t * c, t a concrete tensor: an op whose input is a new array in mid-program.
_CHAIN_OPS = ["sin", "tanh", "mul", "add", "var_add", "var_mul", "square", "add_t"]
_CHAIN_CONSTANTS = [-1.25, -0.5, 0.75, 1.5, 0.25]


def _chain_jax(prog, x, w, t, eps=None):
    """(sum of the last value, every value) of ``prog`` on x, the variable's value w and the
    constant t, in jnp; ``eps[k]`` multiplies op k's result (a rounding-sized perturbation)."""
    outs = []
    y = x
    for k, (name, c) in enumerate(prog):
        y = {"sin": jnp.sin, "tanh": jnp.tanh, "square": jnp.square}[name](y) if name in ("sin", "tanh", "square") \
            else y * c if name == "mul" else y + c if name == "add" else y + w if name == "var_add" \
            else y + t * c if name == "add_t" else y * w
        if eps is not None:
            y = y * eps[k]
        outs.append(y)
    return jnp.sum(y), outs


def _chain_tf(prog, x, v, t, made):
    """``prog`` on tensors (x watched by the caller's tape, v a variable, t a constant), each
    value appended to ``made``."""
    y = x
    for name, c in prog:
        y = tf.sin(y) if name == "sin" else tf.tanh(y) if name == "tanh" else tf.square(y) \
            if name == "square" else y * c if name == "mul" else y + c if name == "add" \
            else y + v if name == "var_add" else y + t * c if name == "add_t" else y * v
        made.append(y)
    return tf.reduce_sum(y)


def _chain_tol(b):  # float32 through up to 31 ops: tolerances scaled to the values
    b = np.asarray(b, np.float64)
    return 1e-4 * np.abs(b) + 1e-4 * (1.0 + float(np.max(np.abs(b), initial=0.0)))


def _chain_within(got, want, frac=1.0):
    return all(np.all(np.abs(np.asarray(a, np.float64) - b) <= _chain_tol(b) * frac) for a, b in zip(got, want))


def _float64_reference(f, args, n_ops, rng):
    """Float64 (values, gradients w.r.t. args 0 and 1) of ``f(*args, eps) -> (loss, values)``, or
    None when its float32 answer is not determined to well within the tolerance.

    Squares of squares and saturated tanhs amplify rounding, and XLA's fused kernels round
    unlike op-by-op ones, so an ill-conditioned program has no float32 answer to test against
    (one chain in a few hundred failed against jax's float32 values). So the reference is
    float64, and a program is used only if its float64 values and gradients move by less than a
    20th of the tolerance when every op's result is perturbed by 1e-6 (about 16 float32
    roundings, random signs; two perturbed copies as extra rows of one batched run) and jax's
    float32 values are as close.
    """
    eps = 1.0 + 1e-6 * rng.choice([-1.0, 1.0], (n_ops, 3, 3))
    eps[:, 0] = 1.0  # row 0: unperturbed
    vg = jax.value_and_grad(f, argnums=(0, 1), has_aux=True)
    with jax.enable_x64(True):
        (_, outs), gs = vg(*[np.tile(a.astype(np.float64), (3, 1)) for a in args], eps)
        rows = [np.asarray(o) for o in [*outs, *gs]]
    want = [r[0] for r in rows]
    (_, outs32), g32 = vg(*args, None)
    if _chain_within([r[1] for r in rows], want, 1 / 20) and _chain_within([r[2] for r in rows], want, 1 / 20) \
            and _chain_within([*outs32, *g32], want, 1 / 20):
        return want[:n_ops], tuple(want[n_ops:])
    return None


def _well_conditioned_chain(rng):
    """(prog, x0, w0, t0, lr, values, (dx, dw)): a random chain of 10-30 ops and its float64 values
    and gradients, drawn until ``_float64_reference`` accepts it (about one in ten is drawn again)."""
    for _ in range(50):
        # Constants from a small set: nodes (keyed by a constant's value) recur across chains,
        # so the programs of different chains and wirings meet in the node and program caches.
        prog = [(_CHAIN_OPS[i], float(rng.choice(_CHAIN_CONSTANTS)))
                for i in rng.integers(0, len(_CHAIN_OPS), rng.integers(10, 31))]
        prog.insert(int(rng.integers(0, len(prog))), ("var_mul", 0.0))  # the variable is always used
        x0 = rng.uniform(-1.0, 1.0, 3).astype(np.float32)
        w0 = rng.uniform(-1.0, 1.0, 3).astype(np.float32)
        t0 = rng.uniform(-1.0, 1.0, 3).astype(np.float32)
        lr = float(rng.uniform(0.01, 0.2))
        ref = _float64_reference(lambda x, w, t, eps: _chain_jax(prog, x, w, t, eps), [x0, w0, t0], len(prog), rng)
        if ref is not None:
            return prog, x0, w0, t0, lr, *ref
    raise AssertionError("no well-conditioned chain in 50 draws")


def _check_chain(prog, x0, w0, lr, want_outs, grads, made, seen, gx_l, gw_l, v):
    def close(a, b):
        assert _chain_within([a], [b]), (a, b, prog)

    gx, gw = grads
    for k, got in seen:
        close(got, want_outs[k])
    for k, t in enumerate(made):
        close(t.numpy(), want_outs[k])
    close(gx_l.numpy(), gx)
    close(gw_l.numpy(), gw)
    close(v.numpy(), w0 - np.float32(lr) * np.asarray(gw))


@pytest.mark.parametrize("seed", range(4))
def test_random_chains_while_another_thread_forces_them(seed):
    # One thread appends ops to its pending program while another reads earlier results, so
    # the program runs at arbitrary points of the chain: an op then finds its program done (the
    # fast path's locked check) and starts the next one. 60 chains of 10-30 random ops per seed
    # (240 in all, each op a chance to race) on a watched tensor, a variable and its updates:
    # every value and gradient as jax computes them in float64, the variable never half-updated.
    # Deterministic chains per seed: the reader draws from its own generator.
    import sys
    import threading

    rng = np.random.default_rng(seed)
    old = config.get_execution()
    old_switch = sys.getswitchinterval()
    sys.setswitchinterval(2e-5)  # (thread switches inside the chain, not once per 5 ms)
    config.set_execution("lazy")
    try:
        for _ in range(60):
            prog, x0, w0, t0, lr, want_outs, grads = _well_conditioned_chain(rng)
            t = tf.constant(t0)
            x = tf.constant(x0)
            v = tf.Variable(w0)
            made: list = []
            stop = threading.Event()
            seen: list = []
            errors: list = []
            pick = np.random.default_rng(int(rng.integers(1 << 30)))  # the reader's own: chains stay the seed's

            def reader():
                try:
                    while not stop.is_set():
                        if made:
                            k = int(pick.integers(0, len(made)))
                            seen.append((k, np.asarray(made[k]._value)))
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            th = threading.Thread(target=reader)
            th.start()
            try:
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    loss = _chain_tf(prog, x, v, t, made)
                gx_l, gw_l = tape.gradient(loss, [x, v])
                v.assign_sub(lr * gw_l)
            finally:
                stop.set()
                th.join()
            assert not errors
            _check_chain(prog, x0, w0, lr, want_outs, grads, made, seen, gx_l, gw_l, v)
    finally:
        sys.setswitchinterval(old_switch)
        config.set_execution(old)


# Pool programs: each op reads earlier values at random (pending ones, or the concrete inputs
# at the pool's start, which become new program inputs mid-program), so one op sequence occurs
# with many wirings; with constants from a small set the nodes recur across programs.
_POOL_UNARY = {"sin": (tf.sin, jnp.sin), "tanh": (tf.tanh, jnp.tanh)}
_POOL_CONSTANTS = [0.5, -0.75, 1.25]


def _pool_eval(prog, pool, lib, eps=None):
    pool = list(pool)
    for k, (kind, i, j) in enumerate(prog):
        a = pool[i]
        if kind in _POOL_UNARY:
            y = _POOL_UNARY[kind][0 if lib is tf else 1](a)
        elif kind == "mul_c":
            y = a * j
        else:
            y = a + pool[j]
        if eps is not None:
            y = y * eps[k]
        pool.append(y)
    return pool


def _pool_program(rng):
    """(prog, inputs, values, gradients): a random pool program (2-8 ops) on x (watched), two
    constants and a variable, with its float64 values and gradients, drawn until
    ``_float64_reference`` accepts it."""
    for _ in range(50):
        prog = []
        for k in range(int(rng.integers(2, 9))):
            n = 4 + k
            kind = str(rng.choice(["sin", "tanh", "mul_c", "add", "add"]))
            i = int(rng.integers(0, n))
            j = float(rng.choice(_POOL_CONSTANTS)) if kind == "mul_c" else int(rng.integers(0, n))
            prog.append((kind, i, j))
        ins = [rng.uniform(-1.0, 1.0, 3).astype(np.float32) for _ in range(4)]

        def f(x, w, c1, c2, eps):
            pool = _pool_eval(prog, [x, c1, c2, w], jnp, eps)
            return jnp.sum(pool[-1]), pool[4:]

        ref = _float64_reference(f, [ins[0], ins[3], ins[1], ins[2]], len(prog), rng)
        if ref is not None:
            return prog, ins, *ref
    raise AssertionError("no well-conditioned program in 50 draws")


@pytest.mark.parametrize("seed", range(2))
def test_random_programs_run_at_random_points_keep_their_wirings_apart(seed, monkeypatch):
    # The interleaving a reader thread makes at random, made deterministic and frequent: when the
    # fast path hands a new op to the general path (its key not seen yet), the pending program is
    # run right there (as another thread reading one of its values would) in a third of the
    # cases, and a value is read after an op in a third. Programs are then short and one node
    # sequence occurs with several wirings: each must get its own program, also once compiled
    # (from a structure's second sighting). 50 pool programs per seed, each run 3 times with its
    # runs at other points; every value and gradient (x and the variable) against float64.
    rng = np.random.default_rng(1000 + seed)
    real = _lazy._lazy_bind_general

    def racing(prim, args, params, fast_key=None, *rest):
        prog = _lazy._tls.prog
        if fast_key is not None and prog is not None and not prog.done and rng.random() < 0.33:
            prog.run()  # what a reader thread does at this point
        return real(prim, args, params, fast_key, *rest)

    old = config.get_execution()
    config.set_execution("lazy")
    monkeypatch.setattr(_lazy, "_lazy_bind_general", racing)
    try:
        for _ in range(50):
            prog, ins, want_outs, (gx, gw) = _pool_program(rng)
            for _rep in range(3):
                x, c1, c2 = (tf.constant(a) for a in ins[:3])
                v = tf.Variable(ins[3])
                seen: list = []
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    pool = [x, c1, c2, v]
                    for k, op in enumerate(prog):
                        pool = _pool_eval([op], pool, tf)
                        if rng.random() < 0.33:
                            seen.append((k, pool[-1].numpy()))
                    loss = tf.reduce_sum(pool[-1])
                gx_l, gw_l = tape.gradient(loss, [x, v], unconnected_gradients="zero")
                for k, got in seen:
                    assert _chain_within([got], [want_outs[k]]), (prog, k)
                for k, t in enumerate(pool[4:]):
                    assert _chain_within([t.numpy()], [want_outs[k]]), (prog, k)
                assert _chain_within([gx_l.numpy(), gw_l.numpy()], [gx, gw]), (prog, gx_l, gw_l, gx, gw)
    finally:
        config.set_execution(old)


@pytest.mark.parametrize("seed", range(2))
def test_recorded_equations_kept_only_while_held(seed, monkeypatch):
    # A program's recorded equations are patched with the values when it runs, and only while
    # something holds them: a tape that is still alive (its gradient, taken after the forward was
    # read, uses them, against jax.grad) or a dropped tape (its equations must not keep their
    # inputs as program outputs: only the handles still held leave the program). 120 random
    # chains, each kept or dropped at random. Seed 1 bounds the shared wiring tuples at 3, so the
    # table is emptied while programs that use its tuples are pending.
    if seed == 1:
        monkeypatch.setattr(_lazy, "_SLOT_TUPLES_MAX", 3)
    rng = np.random.default_rng(100 + seed)
    old = config.get_execution()
    config.set_execution("lazy")
    try:
        for _ in range(60):
            cs = rng.uniform(-1.2, 1.2, int(rng.integers(3, 25)))
            kinds = rng.integers(0, 3, len(cs))
            x0 = rng.uniform(-1.0, 1.0, 2).astype(np.float32)

            def f(x):
                y = x
                for c, k in zip(cs, kinds):
                    y = jnp.sin(y) * c if k == 0 else jnp.tanh(y + c) if k == 1 else y * y * c
                return jnp.sum(y)

            want, gwant = jax.value_and_grad(f)(x0)
            _lazy.flush()
            x = tf.constant(x0)
            keep = bool(rng.integers(0, 2))
            with tf.GradientTape(persistent=True) as tape:
                tape.watch(x)
                y = x
                for c, k in zip(cs, kinds):
                    y = tf.sin(y) * float(c) if k == 0 else tf.tanh(y + float(c)) if k == 1 else y * y * float(c)
                loss = tf.reduce_sum(y)
            if not keep:
                del tape
            got = loss.numpy()  # runs the program
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * (1 + abs(float(want))))
            live = next(reversed(_lazy._programs))[1]
            if keep:
                # Patched when the program ran (before the gradient, which would resolve them itself).
                assert tape._tape.eqns and all(type(v) is not _lazy._Cell for e in tape._tape.eqns for v in e.in_vals)
                g = tape.gradient(loss, x)
                np.testing.assert_allclose(g.numpy(), gwant, rtol=1e-4, atol=1e-4 * (1 + float(np.max(np.abs(gwant)))))
            else:
                assert len(live) == 2  # y and loss, nothing the dropped tape's equations held
            if seed == 1:
                assert len(_lazy._slot_tuples) <= 3 + 3 * len(cs) + 2  # the bound, plus one program's nodes
    finally:
        config.set_execution(old)


def test_a_program_run_between_the_fast_key_and_the_node_keeps_wirings_apart(monkeypatch):
    # Another thread can run the pending program after the fast path keyed an op (its input a
    # pending cell of that program) and before the general path builds the node (the input is now
    # a computed array, a new program's input). That node must not be registered under the fast
    # key: a program whose op reads a pending cell would share node numbers, and so a compiled
    # program, with one whose op reads a new array. Made deterministic here: the other thread's
    # run is done at that point, once.
    real = _lazy._lazy_bind_general
    raced: list = []

    def racing(prim, args, params, fast_key=None, *rest):
        prog = _lazy._tls.prog
        if fast_key is not None and not raced and prog is not None and not prog.done:
            raced.append(prim)
            prog.run()  # what a reader thread does at this point
        return real(prim, args, params, fast_key, *rest)

    old = config.get_execution()
    config.set_execution("lazy")
    try:
        _lazy.flush()
        c = 0.734  # (a constant no other test uses: the fast path has not seen these nodes)
        x = tf.constant(np.array([0.1, 0.2, 0.3], np.float32))
        (tf.sin(x) * 0.5).numpy()  # (the ops' first use takes the general path, without a fast key)
        monkeypatch.setattr(_lazy, "_lazy_bind_general", racing)
        z = tf.sin(x) * c
        np.testing.assert_allclose(z.numpy(), np.sin([0.1, 0.2, 0.3]) * c, rtol=1e-6)
        monkeypatch.setattr(_lazy, "_lazy_bind_general", real)
        assert raced
        for k in range(3):  # sin, then the product of its pending output: compiled once repeated
            xk = np.array([0.5, 0.6, 0.7], np.float32) + k
            np.testing.assert_allclose((tf.sin(tf.constant(xk)) * c).numpy(), np.sin(xk) * c, rtol=1e-5)
        for k in range(3):  # sin (unused), then the product of another array
            w = np.array([2.0, 3.0, 4.0], np.float32) + k
            tf.sin(tf.constant(np.array([0.9, 1.0, 1.1], np.float32)))
            r = tf.constant(w) * c
            np.testing.assert_allclose(r.numpy(), w * np.float32(c), rtol=1e-6)
    finally:
        config.set_execution(old)


def _step_programs():
    from tapejax._engine import _kernels

    return {k: e.compiled for k, e in list(_lazy._programs.items())
            if type(e) is _lazy._Ready and isinstance(e.compiled, _kernels.FastFirst)}


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the fast pipeline's options are XLA:CPU's")
def test_a_small_step_program_is_built_fast_first(lazy_mode, monkeypatch):
    # A small training step's whole program runs its fast-built form for ``replay_fast_runs`` runs,
    # then the full pipeline's; every step's values are jax.grad's, before, across and after both
    # switches (the replay tiers', then this program's fast and full forms).
    monkeypatch.setattr(config, "replay_tier", "auto")
    monkeypatch.setattr(config, "replay_background_compile", True)
    monkeypatch.setattr(config, "replay_fast_runs", 6)
    rng = np.random.default_rng(11)
    xs = rng.normal(size=(8, 3)).astype(np.float32)
    w0 = rng.normal(size=(3, 2)).astype(np.float32)
    before = set(_lazy._programs)

    def loss_fn(w):
        return jnp.mean(jnp.tanh(xs @ w) ** 2)

    w = tf.Variable(w0)
    x = tf.constant(xs)
    want = jnp.asarray(w0)
    n = config.replay_hot + config.replay_lag + _lazy.HOT + config.replay_lag + 12
    for step in range(n):
        with tf.GradientTape() as t:
            loss = tf.reduce_mean(tf.tanh(tf.matmul(x, w)) ** 2)
        g = t.gradient(loss, w)
        np.testing.assert_allclose(g.numpy(), jax.grad(loss_fn)(want), rtol=1e-5, atol=1e-6, err_msg=f"step {step}")
        w.assign_sub(0.1 * g)
        want = want - 0.1 * jax.grad(loss_fn)(want)
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-6)
    mine = [p for k, p in _step_programs().items() if k not in before]
    assert mine and all(p.upgraded for p in mine)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the fast pipeline's options are XLA:CPU's")
def test_random_small_steps_agree_with_jax_grad_on_both_programs(lazy_mode, monkeypatch):
    # 30 random programs as training loops, each step's program run op by op, then fast-built, then
    # full-built: a form that computes one value wrong, or a switch that wires another program's
    # inputs, shows as a gradient or an update unlike jax.grad's.
    from test_replay_tiers import _random_program

    monkeypatch.setattr(config, "replay_tier", "auto")
    monkeypatch.setattr(config, "replay_background_compile", True)
    monkeypatch.setattr(config, "replay_hot", 1)
    monkeypatch.setattr(config, "replay_lag", 1)
    monkeypatch.setattr(config, "replay_fast_runs", 2)
    rng = np.random.default_rng(20261129)
    before = set(_lazy._programs)
    for case in range(30):
        jax_fn, tf_fn = _random_program(rng, int(rng.integers(1, 9)))
        a0 = rng.normal(size=(3,)).astype(np.float32)
        b0 = rng.normal(size=(3,)).astype(np.float32)
        a, b = tf.Variable(a0), tf.Variable(b0)
        wa, wb = jnp.asarray(a0), jnp.asarray(b0)
        for step in range(_lazy.HOT + 2 * config.replay_lag + 6):
            with tf.GradientTape() as t:
                y = tf_fn(a, b)
            ga, gb = t.gradient(y, [a, b], unconnected_gradients="zero")
            a.assign_sub(0.01 * ga)
            b.assign_sub(0.01 * gb)
            ea, eb = jax.grad(jax_fn, argnums=(0, 1))(wa, wb)
            wa, wb = wa - 0.01 * ea, wb - 0.01 * eb
        # (read once, at the end: every step stays in one pending program with its updates)
        np.testing.assert_allclose(a.numpy(), np.asarray(wa), rtol=1e-4, atol=1e-5, err_msg=f"case {case}")
        np.testing.assert_allclose(b.numpy(), np.asarray(wb), rtol=1e-4, atol=1e-5, err_msg=f"case {case}")
    mine = [p for k, p in _step_programs().items() if k not in before]
    assert len(mine) >= 20 and all(p.upgraded for p in mine)


def test_the_hot_slice_of_a_deferred_gradient_builds_only_the_deferred_program(lazy_mode, monkeypatch):
    # From the replay tiers' switch a deferrable gradient joins its step's program: its slice's
    # background build makes that node's program (no residual inputs) and not eager mode's too,
    # which the switch waited for (mlp_step_small: 90 ms). A later gradient of the slice that
    # cannot be deferred (an outer tape watches it) compiles eager mode's program then, right.
    from tapejax._engine import _replay

    monkeypatch.setattr(config, "replay_tier", "auto")
    monkeypatch.setattr(config, "replay_background_compile", True)
    tf.replay_cache_clear()
    rng = np.random.default_rng(13)
    xs = rng.normal(size=(6, 3)).astype(np.float32)
    w0 = rng.normal(size=(3, 2)).astype(np.float32)
    x = tf.constant(xs)

    def loss_fn(w):
        return jnp.mean(jnp.sin(xs @ w) ** 2)

    w = tf.Variable(w0)
    for _ in range(config.replay_hot + config.replay_lag + 3):
        with tf.GradientTape() as t:
            loss = tf.reduce_mean(tf.sin(tf.matmul(x, w)) ** 2)
        g = t.gradient(loss, w)
        np.testing.assert_allclose(g.numpy(), jax.grad(loss_fn)(jnp.asarray(w0)), rtol=1e-5, atol=1e-6)
    kinds = [k[0][0] for k in list(_replay._cache.data)]
    assert "vjp" in kinds and "vjp_res" not in kinds

    with tf.GradientTape() as outer:
        with tf.GradientTape() as t:
            loss = tf.reduce_mean(tf.sin(tf.matmul(x, w)) ** 2)
        g = t.gradient(loss, w)
        s = tf.reduce_sum(g * g)
    np.testing.assert_allclose(g.numpy(), jax.grad(loss_fn)(jnp.asarray(w0)), rtol=1e-5, atol=1e-6)
    want = jax.grad(lambda v: jnp.sum(jax.grad(loss_fn)(v) ** 2))(jnp.asarray(w0))
    np.testing.assert_allclose(outer.gradient(s, w).numpy(), want, rtol=1e-4, atol=1e-6)


_FRESH_ROWS = itertools.count(101, 2)


def _traces_of(fn):
    # JAX's own count of jaxpr traces (one duration event per trace) while ``fn`` runs.
    from jax._src import dispatch, monitoring

    names = []

    def listen(event, duration, **kw):
        if event == dispatch.JAXPR_TRACE_EVENT:
            names.append(kw.get("fun_name"))

    monitoring.register_event_duration_secs_listener(listen)
    try:
        out = fn()
    finally:
        monitoring.unregister_event_duration_listener(listen)
    return out, names


def test_a_new_op_is_traced_as_often_as_in_eager_mode(execution_mode):
    # Lazy mode's shapes of a new op come from the trace its first run needs anyway (the kernel's
    # own program: ``_kernels.kernel``'s ``out_info``), so a step of new signatures traces as many
    # programs as eager mode's. Through ``jax.eval_shape`` of a new partial each was traced once
    # more, under a wrapper jit (mlp_step_small's first step: 60 traces against eager's 48).
    rng = np.random.default_rng(0)
    counts = {}
    for mode in ("eager", "lazy"):
        execution_mode(mode)
        # Shapes no other test uses: every kernel signature of the step is new to the process.
        shape = (next(_FRESH_ROWS), 97)
        a_np = rng.standard_normal(shape).astype(np.float32)
        b_np = rng.standard_normal(shape[::-1]).astype(np.float32)
        a, b = tf.constant(a_np), tf.constant(b_np)

        def step():
            y = tf.matmul(tf.sin(a) * 1.5, b)  # (a kernel with no parameters, a scalar operand)
            z = tf.reduce_sum(tf.reshape(y, [-1, 1]), axis=1)  # (a structural op; parameters)
            return z.numpy()

        got, names = _traces_of(step)
        want = (np.sin(a_np) * np.float32(1.5) @ b_np).reshape(-1)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        assert names, "a step of new signatures traced nothing: the shapes were not new"
        counts[mode] = len(names)
        again, names2 = _traces_of(step)
        np.testing.assert_allclose(again, got, rtol=1e-6)
        assert names2 == [], names2
    assert counts["lazy"] == counts["eager"], counts


# Ops whose output shape or dtype follow from their inputs and static parameters in different ways:
# elementwise, weakly typed Python scalars, reductions with parameters, structural ops, a matmul.
_NEW_SIG_OPS = {
    "sin": lambda x: tf.sin(x),
    "mul_float": lambda x: x * 1.5,
    "add_int": lambda x: x + 2,
    "relu": lambda x: tf.nn.relu(x),
    "maximum": lambda x: tf.maximum(x, 0.25),
    "sum_last": lambda x: tf.reduce_sum(x, axis=-1, keepdims=True),
    "max_first": lambda x: tf.reduce_max(x, axis=0, keepdims=True),
    "mean_all": lambda x: tf.reshape(tf.reduce_mean(x), [1]),
    "flatten": lambda x: tf.reshape(x, [-1]),
    "transpose": lambda x: tf.transpose(x),
    "concat": lambda x: tf.concat([x, x * 0.5], axis=0),
    # (an inner product: an outer one of an outer one exhausts memory)
    "inner": lambda x: tf.matmul(tf.reshape(x, [1, -1]), tf.reshape(x, [-1, 1])),
}


# (200 examples, about 3 s: new signatures are cheap, and a 1-in-200 shape rule should show)
@settings(max_examples=200)
@given(st.lists(st.sampled_from(sorted(_NEW_SIG_OPS)), min_size=1, max_size=5), st.integers(1, 24), st.data())
def test_random_new_signatures_get_the_shapes_and_values_of_eager_mode(names, cols, data):
    # Every example's shapes are new to the process (rows from a counter), so every op's shapes in
    # lazy mode come from a first abstract evaluation (the kernel's ``out_info``), on the fast or the
    # full program by size. The pending handle's shape, dtype and weak type, known before anything
    # runs, must be the ones eager mode's computed value has, and the values equal.
    rows = next(_FRESH_ROWS)
    x_np = np.random.default_rng(rows).standard_normal((rows, cols)).astype(np.float32)
    if data.draw(st.booleans()):
        x_np = x_np[: data.draw(st.integers(1, 4))]  # (and sometimes a short one)

    def run(mode):
        prev = config.get_execution()
        config.set_execution(mode)
        try:
            h = tf.constant(x_np)
            avals, outs = [], []
            for n in names:
                h = _NEW_SIG_OPS[n](h)
                a = _lazy.peek(h)  # (lazy mode: the pending cell's aval; eager mode: the array)
                avals.append((tuple(a.shape), np.dtype(a.dtype), bool(a.weak_type)))
                outs.append(h)
            return avals, [o.numpy() for o in outs]
        finally:
            config.set_execution(prev)

    lazy_avals, lazy_vals = run("lazy")
    eager_avals, eager_vals = run("eager")
    assert lazy_avals == eager_avals, (names, lazy_avals, eager_avals)
    for a, b in zip(lazy_vals, eager_vals):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
