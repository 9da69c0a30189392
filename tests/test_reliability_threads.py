"""Reliability under threads: per-thread tape stacks, many concurrent training loops, and the
compiled-replay cache used (and evicted) from several threads at once.

Every result is checked against an analytic NumPy reference computed from the values the step
actually saw, so a value that leaked across threads (a tape, a tracer, a cache entry) fails.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tapejax as tf
from tapejax._core import _recorder as _core

N_THREADS = 8
STEPS = 200
LR = 0.05
JOIN_TIMEOUT_S = 240


def _run_threads(target, n: int) -> None:
    """Run ``target(i)`` on ``n`` threads released together; re-raise the first failure, fail on a hang."""
    errors: list = []
    barrier = threading.Barrier(n)

    def wrap(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            target(i)
        except BaseException as e:  # noqa: BLE001  (reported to the main thread)
            errors.append((i, e))
        finally:
            # A thread must leave its own stack clean too.
            if _core.state.recording or _core.state.tracing:
                errors.append((i, AssertionError(f"thread {i} left a tape/trace on its stack")))

    threads = [threading.Thread(target=wrap, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=JOIN_TIMEOUT_S)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    if errors:
        i, e = errors[0]
        raise AssertionError(f"thread {i} failed: {type(e).__name__}: {e}") from e


def _linreg(w: np.ndarray, b: np.ndarray, X: np.ndarray, Y: np.ndarray) -> tuple:
    """Loss and analytic gradients of mean((X @ w + b - Y)**2), in float64."""
    w, b, X, Y = (np.asarray(a, np.float64) for a in (w, b, X, Y))
    r = X @ w + b - Y
    n = r.size
    return (r**2).mean(), 2.0 / n * X.T @ r, 2.0 / n * r.sum(0)


def _data(seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(4, 3)).astype(np.float32)
    Y = rng.normal(size=(4, 2)).astype(np.float32)
    w0 = rng.normal(size=(3, 2)).astype(np.float32)
    return X, Y, w0


def _close(got, want, what: str) -> None:
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2e-4, atol=2e-5, err_msg=what)


# --------------------------------------------------------------------------
# Per-thread tape stacks (TF: tapes are thread-local).


def test_op_in_another_thread_is_not_recorded_on_this_threads_tape():
    x = tf.constant(3.0)
    v = tf.Variable(2.0)
    seen: dict = {}

    def other() -> None:
        seen["stack"] = list(_core.state.recording)
        seen["y"] = x * x  # x is watched by the main thread's tape, but this thread has no tape
        seen["z"] = v * 3.0  # a trainable variable read here is not auto-watched there

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y_here = x * x
        th = threading.Thread(target=other)
        th.start()
        th.join()
    assert seen["stack"] == []
    assert float(seen["y"]) == 9.0 and float(seen["z"]) == 6.0  # the ops ran, unrecorded
    assert tape.gradient(seen["y"], x) is None
    assert tape.gradient(seen["z"], v) is None
    assert tape.watched_variables() == ()
    assert float(tape.gradient(y_here, x)) == 6.0


def test_a_tape_open_in_another_thread_does_not_see_this_threads_ops():
    x = tf.constant(3.0)
    opened, main_done = threading.Event(), threading.Event()
    res: dict = {}

    def worker() -> None:
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            opened.set()
            assert main_done.wait(30)
            y = x * x * x
        res["own"] = t.gradient(y, x)
        res["foreign"] = t.gradient(res["z"], x)
        res["n_eqns"] = len(t._tape.eqns)

    th = threading.Thread(target=worker)
    th.start()
    assert opened.wait(30)
    assert _core.state.recording == []  # the worker's tape is not on this thread's stack
    res["z"] = x * x + 1.0  # computed while the worker's tape records x
    main_done.set()
    th.join(30)
    assert not th.is_alive()
    assert float(res["own"]) == 27.0
    assert res["foreign"] is None
    assert res["n_eqns"] == 2  # exactly the worker's two multiplications


def test_nested_tapes_in_threads_keep_their_own_order():
    """Each thread nests two tapes (second derivative) while the others do the same."""

    def work(i: int) -> None:
        c = float(i + 1)
        x = tf.constant(c)
        for _ in range(20):
            with tf.GradientTape() as outer:
                outer.watch(x)
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    y = x * x * x
                dy = inner.gradient(y, x)
            d2 = outer.gradient(dy, x)
            assert float(dy) == pytest.approx(3 * c * c, rel=1e-6)
            assert float(d2) == pytest.approx(6 * c, rel=1e-6)

    _run_threads(work, N_THREADS)


# --------------------------------------------------------------------------
# Many training loops at once.


def test_8_threads_x_200_steps_eager_and_function_training_are_all_correct():
    results: dict = {}

    def work(i: int) -> None:
        X, Y, w_init = _data(100 + i)
        Xt, Yt = tf.constant(X), tf.constant(Y)
        # Eager model and compiled model: separate variables, same data.
        we, be = tf.Variable(w_init), tf.Variable(np.zeros(2, np.float32))
        wf, bf = tf.Variable(w_init), tf.Variable(np.zeros(2, np.float32))

        @tf.function
        def compiled_step(x, y):
            with tf.GradientTape() as t:
                loss = tf.reduce_mean((tf.matmul(x, wf) + bf - y) ** 2)
            gw, gb = t.gradient(loss, [wf, bf])
            wf.assign_sub(LR * gw)
            bf.assign_sub(LR * gb)
            return loss, gw, gb

        for step in range(STEPS):
            # Eager step, checked against the reference at the values it read.
            w0, b0 = we.numpy(), be.numpy()
            with tf.GradientTape() as t:
                loss = tf.reduce_mean((tf.matmul(Xt, we) + be - Yt) ** 2)
            gw, gb = t.gradient(loss, [we, be])
            rl, rgw, rgb = _linreg(w0, b0, X, Y)
            _close(loss, rl, f"thread {i} step {step}: eager loss")
            _close(gw, rgw, f"thread {i} step {step}: eager dL/dw")
            _close(gb, rgb, f"thread {i} step {step}: eager dL/db")
            we.assign_sub(LR * gw)
            be.assign_sub(LR * gb)
            _close(we.numpy(), w0 - LR * rgw, f"thread {i} step {step}: eager update")

            # Compiled step.
            w0, b0 = wf.numpy(), bf.numpy()
            loss, gw, gb = compiled_step(Xt, Yt)
            rl, rgw, rgb = _linreg(w0, b0, X, Y)
            _close(loss, rl, f"thread {i} step {step}: compiled loss")
            _close(gw, rgw, f"thread {i} step {step}: compiled dL/dw")
            _close(gb, rgb, f"thread {i} step {step}: compiled dL/db")
            _close(wf.numpy(), w0 - LR * rgw, f"thread {i} step {step}: compiled update")
        assert compiled_step.experimental_get_tracing_count() == 1
        results[i] = (we.numpy(), wf.numpy())

    _run_threads(work, N_THREADS)
    assert sorted(results) == list(range(N_THREADS))
    for i, (w_eager, w_compiled) in results.items():
        # Both loops ran the same 200 steps from the same start.
        np.testing.assert_allclose(w_eager, w_compiled, rtol=1e-4, atol=1e-5)
        # And they trained: the loss went down.
        X, Y, w_init = _data(100 + i)
        assert _linreg(w_eager, np.zeros(2), X, Y)[0] < _linreg(w_init, np.zeros(2), X, Y)[0]


def test_one_function_shared_by_threads_with_their_own_variables():
    """A module-level compiled step given each thread's variables as arguments."""

    @tf.function
    def step(w, x, y):
        with tf.GradientTape() as t:
            loss = tf.reduce_sum((tf.matmul(x, w) - y) ** 2)
        g = t.gradient(loss, w)
        w.assign_sub(0.01 * g)
        return g

    def work(i: int) -> None:
        X, Y, w_init = _data(200 + i)
        w = tf.Variable(w_init)
        Xt, Yt = tf.constant(X), tf.constant(Y)
        for k in range(50):
            w0 = w.numpy().astype(np.float64)
            g = step(w, Xt, Yt)
            want = 2.0 * X.T.astype(np.float64) @ (X @ w0 - Y)
            _close(g, want, f"thread {i} step {k}")
            _close(w.numpy(), w0 - 0.01 * want, f"thread {i} step {k}: update")

    _run_threads(work, N_THREADS)


def test_shared_variable_read_by_another_thread_while_a_step_using_it_is_traced():
    """Tracing substitutes traced values for the variables a step captures; another thread
    reading the same variable meanwhile must see its real value. Each trace is held open until
    the other thread has read, so the interleaving is certain, not left to the scheduler."""
    want = np.arange(6, dtype=np.float32).reshape(3, 2)
    w = tf.Variable(want)
    in_trace, read_done, finished = threading.Event(), threading.Event(), threading.Event()
    reads: list = []

    @tf.function
    def step(x):
        y = tf.matmul(x, w) * 2.0
        in_trace.set()
        assert read_done.wait(30), "the reader never read"
        read_done.clear()
        return y

    def reader() -> None:
        while True:
            assert in_trace.wait(30)
            in_trace.clear()
            if finished.is_set():
                return
            try:
                reads.append(((w * 1.0).numpy(), w.numpy()))
            except Exception as e:  # noqa: BLE001  (a leaked tracer fails here)
                reads.append(e)
            read_done.set()

    th = threading.Thread(target=reader)
    th.start()
    x = np.ones((1, 3), np.float32)
    out = step(tf.constant(x))
    finished.set()
    in_trace.set()
    th.join(30)
    assert not th.is_alive()
    np.testing.assert_allclose(out.numpy(), x @ want * 2.0)
    # One trace, one read: w becomes a traced input the moment the trace first reads it.
    assert len(reads) == step.experimental_get_tracing_count() == 1
    for r in reads:
        assert not isinstance(r, Exception), f"a reader saw a traced value: {type(r).__name__}: {r}"
        np.testing.assert_array_equal(r[0], want)
        np.testing.assert_array_equal(r[1], want)


# --------------------------------------------------------------------------
# The compiled-replay cache under concurrency.


@pytest.fixture
def restore_cache_size():
    size = tf.replay_cache_info().maxsize
    yield
    tf.set_replay_cache_size(size)


@pytest.fixture
def lookups(monkeypatch):
    """Counts the compiled-replay cache's lookups, independently of its own statistics. Eager
    mode looks up once per gradient; lazy mode (TAPEJAX_EXECUTION=lazy) fewer: a program compiled
    whole runs the replay inside it, looked up only by its trace."""
    from tapejax._engine import _replay

    count = [0]
    lock = threading.Lock()
    get = _replay._cache.get

    def counting_get(key, make):
        with lock:
            count[0] += 1
        return get(key, make)

    monkeypatch.setattr(_replay._cache, "get", counting_get)
    return count


@pytest.mark.usefixtures("compile_tier")
def test_replay_cache_concurrent_first_miss_and_hits_are_consistent(restore_cache_size, lookups):
    """8 threads race on the same new program, then hit it; the statistics add up exactly."""
    tf.replay_cache_clear()
    n_steps = 25
    # A structure no other test records: sin(x) * cos(x) summed, shape (5,).
    xs = np.linspace(-1, 1, 5).astype(np.float32)

    def work(i: int) -> None:
        x = tf.constant(xs + i)
        for _ in range(n_steps):
            with tf.GradientTape() as t:
                t.watch(x)
                y = tf.reduce_sum(tf.sin(x) * tf.cos(x))
            g = t.gradient(y, x)
            np.testing.assert_allclose(g.numpy(), np.cos(2 * (xs + i).astype(np.float64)), rtol=1e-5, atol=1e-6)

    _run_threads(work, N_THREADS)
    info = tf.replay_cache_info()
    assert info.hits + info.misses == lookups[0]  # every lookup counted once
    assert info.compiled == N_THREADS * n_steps  # every gradient answered by the compiled tier
    if tf.config.get_execution() != "lazy":
        assert lookups[0] == N_THREADS * n_steps
    assert 1 <= info.misses <= N_THREADS  # only the racing first calls can miss
    assert info.size == 1


@pytest.mark.usefixtures("compile_tier")
def test_replay_cache_safe_while_another_thread_evicts_with_a_tiny_size(restore_cache_size, lookups):
    tf.replay_cache_clear()
    tf.set_replay_cache_size(1)
    stop = threading.Event()
    n_workers, n_steps = 4, 15

    def evictor() -> None:
        k = 0
        while not stop.is_set():
            tf.set_replay_cache_size(1 + k % 2)  # shrink to 1 and back to 2, evicting as it goes
            info = tf.replay_cache_info()
            assert info.size <= info.maxsize <= 2
            k += 1
            stop.wait(0.001)

    def worker(i: int) -> None:
        for k in range(n_steps):
            n = 2 + (i + k) % 3  # three shapes per worker: the tiny cache keeps evicting
            xs = np.linspace(0.1, 1.0, n).astype(np.float32) * (i + 1)
            x = tf.constant(xs)
            with tf.GradientTape() as t:
                t.watch(x)
                y = tf.reduce_sum(x * x * x)
            g = t.gradient(y, x)
            np.testing.assert_allclose(g.numpy(), 3 * xs.astype(np.float64) ** 2, rtol=1e-5)

    def work(i: int) -> None:
        if i == n_workers:
            evictor()
        else:
            try:
                worker(i)
            finally:
                done.append(i)
                if len(done) == n_workers:
                    stop.set()

    done: list = []
    _run_threads(work, n_workers + 1)
    info = tf.replay_cache_info()
    assert info.hits + info.misses == lookups[0]  # every lookup counted once
    assert info.compiled == n_workers * n_steps
    if tf.config.get_execution() != "lazy":
        assert lookups[0] == n_workers * n_steps
    assert info.size <= info.maxsize
    # Every program inserted is either still cached or was evicted (two threads that miss the
    # same key at once insert it once).
    assert 0 < info.evictions <= info.misses - info.size


def test_concurrent_calls_of_a_random_function_draw_what_sequential_calls_draw():
    # Each call reads the random-key state, runs and writes the advanced key back; two threads
    # must not both read the same key (the first calls used to draw identical numbers).
    import threading

    def draws(concurrent: bool) -> list:
        tf.random.set_seed(7)

        @tf.function
        def f():
            return tf.random.normal((3,))

        out: list = []
        if not concurrent:
            return sorted(tuple(f().numpy().tolist()) for _ in range(8))
        barrier = threading.Barrier(8)

        def run():
            barrier.wait()
            out.append(tuple(f().numpy().tolist()))

        threads = [threading.Thread(target=run) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sorted(out)

    sequential = draws(False)
    assert len(set(sequential)) == 8
    assert draws(True) == sequential  # the same eight draws, whichever thread got which



def test_autograph_parses_and_compiles_in_one_thread_at_a_time(monkeypatch):
    # CPython 3.11-3.12 keeps the AST converter's recursion depth interpreter-wide: two threads
    # inside ast.parse/compile at once, with a thread switch inside one of them (a collection
    # running a finalizer), raised "SystemError: AST constructor recursion depth mismatch" out
    # of a tf.function's first call. The wrappers below force that switch on every call and
    # count how many threads are inside at once.
    import ast
    import time

    from tapejax._tf import _autograph

    inside = [0]
    most = [0]
    count_lock = threading.Lock()

    def counted(real):
        def wrapper(*a, **k):
            with count_lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            try:
                time.sleep(0.002)  # another thread runs here
                return real(*a, **k)
            finally:
                with count_lock:
                    inside[0] -= 1
        return wrapper

    monkeypatch.setattr(ast, "parse", counted(ast.parse))
    monkeypatch.setattr(_autograph, "compile", counted(compile), raising=False)

    def work(i: int) -> None:
        for k in range(10):
            def step(x, k=k):
                y = x
                for j in tf.range(3):
                    if y[0] > 100.0:
                        y = y - 1.0
                    else:
                        y = y * 2.0 + tf.cast(j, tf.float32)
                return [y + k, {"s": tf.reduce_sum(y)}]

            got = tf.autograph.to_graph(step)(tf.constant([float(i)]))
            want = float(i)
            for j in range(3):
                want = want - 1.0 if want > 100.0 else want * 2.0 + j
            np.testing.assert_allclose(got[0].numpy(), [want + k])
            np.testing.assert_allclose(got[1]["s"].numpy(), want)
            assert "if_stmt" in tf.autograph.to_code(step)

    _run_threads(work, N_THREADS)
    assert most[0] == 1, f"{most[0]} threads were inside ast.parse/compile at once"
