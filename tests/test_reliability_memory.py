"""Reliability of memory: tapes free their records without the cycle collector, a long eager
training loop stays flat, and the compiled-replay cache bounds a loop whose shapes change.

Records are checked with weakrefs while ``gc`` is disabled: an object that only the cycle
collector could free would stay alive and fail the test.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tracemalloc
import weakref

import numpy as np
import pytest

import tapejax as tf
from tapejax._engine import _replay


@pytest.fixture
def no_gc():
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@pytest.fixture
def restore_cache_size():
    size = tf.replay_cache_info().maxsize
    yield
    tf.set_replay_cache_size(size)


def _rss_kib() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    pytest.skip("RSS is read from /proc/self/status (Linux only)")


# --------------------------------------------------------------------------
# Tapes free their records.


def test_non_persistent_tape_frees_its_record_after_gradient(no_gc):
    xs = np.linspace(-1, 1, 1000).astype(np.float32)
    x = tf.constant(xs)
    with tf.GradientTape() as g:
        g.watch(x)
        h = tf.sin(x)
        y = tf.reduce_sum(h * h)
    record = weakref.ref(g._tape)
    residual = weakref.ref(h._value)  # an intermediate the record keeps for the replay
    del h
    assert residual() is not None
    grad = g.gradient(y, x)
    assert record() is None, "the record outlived gradient() on a non-persistent tape"
    assert residual() is None, "an intermediate kept by the record outlived gradient()"
    np.testing.assert_allclose(grad.numpy(), np.sin(2 * xs.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_non_persistent_tape_with_variables_frees_its_record(no_gc):
    v = tf.Variable(np.ones((3, 3), np.float32))
    with tf.GradientTape() as g:
        y = tf.reduce_sum(tf.matmul(v, v))
    record = weakref.ref(g._tape)
    grad = g.gradient(y, v)
    assert record() is None
    np.testing.assert_allclose(grad.numpy(), np.full((3, 3), 6.0))
    assert g.watched_variables() == (v,)  # TF keeps answering this after gradient()


def test_persistent_tape_frees_its_record_on_del(no_gc):
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        h = tf.exp(x)
        y = tf.reduce_sum(h)
    residual = weakref.ref(h._value)
    del h
    np.testing.assert_allclose(g.gradient(y, x).numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    np.testing.assert_allclose(g.gradient(y, x).numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    record, tape = weakref.ref(g._tape), weakref.ref(g)
    assert record() is not None  # persistent: kept between gradient() calls
    del g
    assert tape() is None and record() is None and residual() is None


def test_persistent_tape_frees_its_record_on_reset(no_gc):
    x = tf.constant(2.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
        old = weakref.ref(g._tape)
        g.reset()
        assert old() is None, "reset() kept the discarded record alive"
        g.watch(x)
        z = x * x * x
    assert g.gradient(y, x) is None
    assert float(g.gradient(z, x)) == 12.0


def test_persistent_tape_frees_its_record_when_it_goes_out_of_scope(no_gc):
    def grads_of_cube(x):
        with tf.GradientTape(persistent=True) as g:
            g.watch(x)
            y = x * x * x
            z = y * 2.0
        refs = (weakref.ref(g), weakref.ref(g._tape))
        return g.gradient(y, x), g.gradient(z, x), refs

    dy, dz, (tape, record) = grads_of_cube(tf.constant(2.0))
    assert float(dy) == 12.0 and float(dz) == 24.0
    assert tape() is None and record() is None


def test_nested_tapes_free_both_records(no_gc):
    x = tf.constant(3.0)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = x * x * x
        dy = inner.gradient(y, x)  # a replay, recorded on the outer tape
    refs = [weakref.ref(outer._tape)]
    d2 = outer.gradient(dy, x)
    assert float(dy) == 27.0 and float(d2) == 18.0
    del outer, inner
    assert all(r() is None for r in refs)


def test_function_step_keeps_no_tape_record(no_gc):
    w = tf.Variable([1.0, 2.0])

    @tf.function
    def step(x):
        with tf.GradientTape() as t:
            loss = tf.reduce_sum(w * x)
        g = t.gradient(loss, w)
        w.assign_sub(0.5 * g)
        return g

    x = tf.constant([3.0, 4.0])
    np.testing.assert_array_equal(step(x).numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(w.numpy(), [-0.5, 0.0])
    from tapejax._core import _recorder as _core

    # Tapes made while tracing are gone: only tapes alive elsewhere remain registered.
    live = getattr(_core, "live_tapes", None)
    if live is not None:
        before = len(live)
        step(x)
        assert len(live) == before


# --------------------------------------------------------------------------
# A long eager training loop. With tracemalloc on, a step costs about 2.5 ms of CPU, so 10,000
# steps take 25 s on an idle core and over 60 s on the busy 2-core CI machine: that run is
# marked slow, and a 2,000-step run of the same test stays in the default run.


@pytest.mark.parametrize("n_steps", [2_000, pytest.param(10_000, marks=pytest.mark.slow)])
def test_eager_training_steps_keep_memory_flat(n_steps):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 3)).astype(np.float32)
    Y = (X @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
    w = tf.Variable(np.zeros((3, 1), np.float32))
    b = tf.Variable(np.zeros((1,), np.float32))
    Xt, Yt = tf.constant(X), tf.constant(Y)
    lr = np.float32(0.05)

    def step():
        with tf.GradientTape() as t:
            loss = tf.reduce_mean((tf.matmul(Xt, w) + b - Yt) ** 2)
        gw, gb = t.gradient(loss, [w, b])
        w.assign_sub(lr * gw)
        b.assign_sub(lr * gb)
        return loss

    # The same loop in NumPy (float64), for the values.
    wr, br = np.zeros((3, 1)), np.zeros((1,))

    def ref_step():
        nonlocal wr, br
        r = X @ wr + br - Y
        gw, gb = 2.0 / r.size * X.T @ r, 2.0 / r.size * r.sum(0)
        wr, br = wr - lr * gw, br - lr * gb

    # Warm-up, untraced (cheap): compile the replay and let jax's own bounded caches fill (eager
    # dispatch keeps per-call debug info in LRU caches: ~0.5 MiB, reached after ~2,000 steps).
    for _ in range(2_000):
        step()
        ref_step()
    # Each measurement is taken with no work pending: reading a variable runs what lazy mode
    # (TAPEJAX_EXECUTION=lazy) still holds, a program of up to _lazy.MAX_PENDING ops, bounded by
    # design (eager mode: a plain read).
    w.numpy()
    gc.collect()
    objs0 = len(gc.get_objects())
    tracemalloc.start()
    try:
        rss0, overhead0 = _rss_kib(), tracemalloc.get_tracemalloc_memory()
        tm0 = tracemalloc.get_traced_memory()[0]
        for k in range(n_steps):
            step()
            if k == n_steps // 2:
                w.numpy()
                tm_half = tracemalloc.get_traced_memory()[0]
        w.numpy()
        gc.collect()
        tm_growth = tracemalloc.get_traced_memory()[0] - tm0
        tm_growth_second_half = tracemalloc.get_traced_memory()[0] - tm_half
        # tracemalloc's own bookkeeping grows the RSS too (~0.7 KiB per step): not ours.
        rss_growth = _rss_kib() - rss0 - (tracemalloc.get_tracemalloc_memory() - overhead0) // 1024
    finally:
        tracemalloc.stop()
    obj_growth = len(gc.get_objects()) - objs0
    for _ in range(n_steps):
        ref_step()
    # Python heap flat (measured: +2 KiB over 8,000 steps after the warm-up); RSS flat up to
    # allocator noise (measured: < 1 MiB over 40,000 steps).
    assert tm_growth < 256 * 1024, f"Python heap grew by {tm_growth} bytes over {n_steps} steps"
    assert tm_growth_second_half < 64 * 1024, f"Python heap still growing: {tm_growth_second_half} bytes"
    assert rss_growth < 64 * 1024, f"RSS grew by {rss_growth} KiB over {n_steps} steps"
    assert obj_growth < 1000, f"{obj_growth} more live objects after {n_steps} steps"
    # And the steps computed the right thing all along.
    np.testing.assert_allclose(w.numpy(), wr, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.numpy(), br, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.numpy()[:, 0], [1.0, -2.0, 0.5], atol=1e-3)


# --------------------------------------------------------------------------
# The compiled-replay cache: bound, eviction, statistics, settings.


def _live_lowerings() -> int | None:
    """How many programs jax itself keeps lowered (and compiled) for jitted functions."""
    try:
        from jax._src import pjit
    except ImportError:  # pragma: no cover  (a jax without this private module)
        return None
    lower = getattr(pjit, "_pjit_lower", None)
    info = getattr(lower, "cache_info", None)
    return info().currsize if info is not None else None


@pytest.mark.usefixtures("compile_tier")
def test_shape_changing_loop_is_bounded_by_the_replay_cache(restore_cache_size, monkeypatch):
    # (kernels compile at their first call: the first pass below compiles every eager op)
    monkeypatch.setattr(tf.config, "kernel_host_first_calls", 0)
    tf.replay_cache_clear()
    tf.set_replay_cache_size(3)
    made: list = []
    make = _replay._make

    def tracking_make(key):
        fn = make(key)
        made.append(weakref.ref(fn))
        return fn

    monkeypatch.setattr(_replay, "_make", tracking_make)
    shapes = range(1, 11)

    def step(n: int) -> None:
        xs = np.linspace(0.0, 1.0, n).astype(np.float32)
        x = tf.constant(xs)
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.reduce_sum(tf.sin(x) * x)
        g = t.gradient(y, x)
        xd = xs.astype(np.float64)
        np.testing.assert_allclose(g.numpy(), np.cos(xd) * xd + np.sin(xd), rtol=1e-5, atol=1e-6)

    for n in shapes:  # first pass: jax also compiles each eager op once per shape
        step(n)
    gc.collect()
    lowered0 = _live_lowerings()
    rss0 = _rss_kib()
    reps = 3
    lowered_last = None
    for r in range(reps):
        if r == reps - 1:
            gc.collect()
            lowered_last = _live_lowerings()
        for n in shapes:  # a new shape every step, cycling through more shapes than the cache holds
            step(n)
    gc.collect()
    info = tf.replay_cache_info()
    total = len(shapes) * (reps + 1)
    lazy = tf.config.get_execution() == "lazy"
    assert info.maxsize == 3 and info.size == 3 and info.compiled == total
    if lazy:
        # Lazy mode: a step's pending program is compiled whole from its second sighting on, the
        # replay inlined in it, so the replay cache is looked up only by the shape evaluation, the
        # op-by-op runs and that compile's trace; still one build per miss, evictions past 3. (That
        # trace runs on the background compile's thread: a key it misses while the step misses it
        # too is built twice, two misses for one entry, so evictions may fall short of misses - 3.)
        assert info.misses == len(made) and info.evictions <= info.misses - 3 and info.misses >= len(shapes)
    else:
        assert info.hits == 0 and info.misses == total  # LRU of 3 over a cycle of 10: always a miss
        assert info.evictions == total - 3, (info, len(made))
        assert len(made) == total
    alive = sum(r() is not None for r in made)
    assert alive <= 3, f"{alive} compiled replays alive with a cache of 3: evicted programs leak"
    lowered1 = _live_lowerings()
    if lowered0 is not None:
        # jax's own count of lowered/compiled programs does not grow with each evicted replay.
        # Lazy mode compiles its own programs per shape (the whole step, the deferred vjp) up to
        # the third sighting, whichever tests ran before: from there on, no growth.
        bound = lowered_last if lazy else lowered0
        assert lowered1 <= bound, f"jax keeps {lowered1 - bound} more compiled programs"
    assert _rss_kib() - rss0 < 64 * 1024


@pytest.mark.usefixtures("compile_tier")
def test_replay_cache_statistics_count_hits_misses_and_evictions(restore_cache_size, monkeypatch):
    # The cache's lookups, counted independently of its statistics: eager mode looks up once per
    # gradient; lazy mode (TAPEJAX_EXECUTION=lazy) by the deferred node's shape evaluation, its
    # op-by-op runs and the trace of the whole step's compile (which the program cache of earlier
    # tests may hold already), so there only their sum is fixed.
    lookups = [0]
    get = _replay._cache.get

    def counting_get(key, make):
        lookups[0] += 1
        return get(key, make)

    monkeypatch.setattr(_replay._cache, "get", counting_get)
    tf.replay_cache_clear()
    info = tf.replay_cache_info()
    assert (info.hits, info.misses, info.evictions, info.size) == (0, 0, 0, 0)
    x = tf.constant([1.0, 2.0])
    for k in range(3):
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.reduce_sum(tf.tanh(x))
        np.testing.assert_allclose(t.gradient(y, x).numpy(), 1 - np.tanh([1.0, 2.0]) ** 2, rtol=1e-5)
    info = tf.replay_cache_info()
    assert (info.misses, info.size) == (1, 1)
    assert info.hits + info.misses == lookups[0]
    if tf.config.get_execution() != "lazy":
        assert info.hits == 2 and lookups[0] == 3
    tf.set_replay_cache_size(1)
    z = tf.constant([1.0, 2.0, 3.0])  # a new shape: a new program, evicting the old one
    with tf.GradientTape() as t:
        t.watch(z)
        y = tf.reduce_sum(tf.tanh(z))
    t.gradient(y, z)
    info = tf.replay_cache_info()
    assert (info.misses, info.evictions, info.size, info.maxsize) == (2, 1, 1, 1)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "8", None])
def test_set_replay_cache_size_rejects_non_positive_ints(bad, restore_cache_size):
    with pytest.raises(ValueError, match="positive int"):
        tf.set_replay_cache_size(bad)


def test_replay_cache_size_environment_variable():
    env = dict(os.environ, TAPEJAX_REPLAY_CACHE_SIZE="7", JAX_PLATFORMS="cpu")
    code = "import tapejax as tf; print(tf.replay_cache_info().maxsize)"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "7"


@pytest.mark.parametrize("bad", ["0", "-3", "lots", ""])
def test_bad_replay_cache_size_environment_variable_says_what_to_do(bad, monkeypatch):
    # The value is read at import; the parser is checked directly (an import per value is slow).
    monkeypatch.setenv("TAPEJAX_REPLAY_CACHE_SIZE", bad)
    with pytest.raises(ValueError, match="TAPEJAX_REPLAY_CACHE_SIZE must be a positive integer.*Unset it"):
        _replay._env_cache_size()
    monkeypatch.setenv("TAPEJAX_REPLAY_CACHE_SIZE", "64")
    assert _replay._env_cache_size() == 64
    monkeypatch.delenv("TAPEJAX_REPLAY_CACHE_SIZE")
    assert _replay._env_cache_size() == 512


# --------------------------------------------------------------------------
# The import-time freeze (tapejax/_heap.py): the objects ``import tapejax`` and ``import
# tapejax.keras`` leave behind are out of the cycle collector's full walks; everything made
# later is collected as before, and the freeze pins no garbage.

_FREEZE_REPORT = """
import gc, json, sys
import tapejax
after_tapejax = (gc.get_freeze_count(), len(gc.get_objects()))
garbage_tapejax = gc.collect() if gc.get_freeze_count() == 0 else None
if "keras" in sys.argv:
    import tapejax.keras
    after_keras = (gc.get_freeze_count(), len(gc.get_objects()))
    garbage_keras = gc.collect() if gc.get_freeze_count() == 0 else None
else:
    after_keras = garbage_keras = None
print(json.dumps([after_tapejax, garbage_tapejax, after_keras, garbage_keras]))
"""


def _freeze_report(freeze: str, keras: bool) -> list:
    env = dict(os.environ, TAPEJAX_GC_FREEZE=freeze, JAX_PLATFORMS="cpu")
    args = [sys.executable, "-c", _FREEZE_REPORT] + (["keras"] if keras else [])
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("keras", [False, True])
def test_the_imports_freeze_their_objects_and_the_opt_out_leaves_the_collector_alone(keras):
    (frozen, walked), _, after_keras, _ = _freeze_report("1", keras)
    (frozen_off, walked_off), garbage, after_keras_off, garbage_keras = _freeze_report("0", keras)
    # Without the freeze every object of the import is walked by a full collection; with it,
    # almost none is (the few left: the freeze's own frame and the report's).
    assert frozen_off == 0 and walked_off > 50_000
    assert frozen >= 0.95 * walked_off and walked < 0.02 * frozen
    # What the freeze pins is never garbage: a collection right after the import finds none.
    assert garbage == 0
    if keras:
        (frozen_k, walked_k), (frozen_k_off, walked_k_off) = after_keras, after_keras_off
        assert frozen_k_off == 0 and walked_k_off > walked_off + 50_000
        assert frozen_k >= 0.95 * walked_k_off and walked_k < 0.02 * frozen_k
        assert garbage_keras == 0


@pytest.mark.parametrize("execution", ["eager", "lazy"])
def test_cyclic_garbage_made_after_the_import_is_still_collected(execution):
    """Tensors, variables, tapes and their device buffers held only by a reference cycle made
    after the import: the collector frees them (the freeze covers only the import's objects)."""
    import jax

    from tapejax import config

    if _heap_enabled():
        assert gc.get_freeze_count() > 0  # the situation under test: this process froze at import
    shape = (3, 7, 11)  # a shape no other array of this test has

    class Box:
        pass

    previous = config.get_execution()
    config.set_execution(execution)
    try:
        def make() -> weakref.ref:
            box = Box()
            box.self = box
            box.v = tf.Variable(np.full(shape, 2.0, np.float32))
            box.x = tf.constant(np.full(shape, 3.0, np.float32))
            with tf.GradientTape(persistent=True) as tape:
                box.y = tf.reduce_sum(box.v * box.x)
            box.tape = tape
            box.g = tape.gradient(box.y, box.v)
            np.testing.assert_array_equal(box.g.numpy(), np.full(shape, 3.0, np.float32))
            return weakref.ref(box)

        ref = make()
        gc.collect()
        assert ref() is None
        assert not [a for a in jax.live_arrays() if a.shape == shape]
    finally:
        config.set_execution(previous)


def _heap_enabled() -> bool:
    from tapejax import _heap

    return _heap.enabled()


@pytest.mark.parametrize("value, on", [("", True), ("1", True), ("yes", True), ("0", False), ("false", False),
                                       (" OFF ", False), ("no", False)])
def test_gc_freeze_environment_variable(value, on, monkeypatch):
    from tapejax import _heap

    monkeypatch.setenv("TAPEJAX_GC_FREEZE", value)
    assert _heap.enabled() is on
