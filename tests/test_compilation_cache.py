"""The persistent compilation cache (``tapejax.config.set_compilation_cache_dir``).

What matters to a user: a later process loads what an earlier one compiled, so its first
gradient compiles nothing, and its numbers are the very bits it would get without the
cache. Each process here runs random tape programs (a generator over the op families a
first gradient meets: elementwise chains with Python scalars, matmuls, reductions, nested
tapes, jacobians, variable updates) and prints a digest of every value and gradient, with
JAX's cache hit and miss counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import tapejax as tf

_PROGRAM = textwrap.dedent(
    r'''
    import hashlib, json, sys
    import numpy as np
    from jax import monitoring

    counts = {"hits": 0, "misses": 0}

    def _on_event(name, **kw):
        if name == "/jax/compilation_cache/cache_hits":
            counts["hits"] += 1
        elif name == "/jax/compilation_cache/cache_misses":
            counts["misses"] += 1

    monitoring.register_event_listener(_on_event)
    import tapejax as tf

    seed, n_programs = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(seed)
    import jax
    dtype = tf.float64 if jax.config.jax_enable_x64 else tf.float32
    UNARY = [tf.sin, tf.tanh, tf.exp, tf.square, tf.nn.relu, tf.math.softplus, tf.abs, tf.sigmoid]
    BINARY = [tf.add, tf.subtract, tf.multiply, tf.maximum]
    digest = hashlib.sha256()

    def put(t):
        if t is not None:
            digest.update(np.asarray(t).tobytes())

    for p in range(n_programs):
        n = int(rng.choice([3, 4, 6]))
        x = tf.constant(rng.uniform(-1.0, 1.0, (n,)), dtype=dtype)
        v = tf.Variable(rng.uniform(-1.0, 1.0, (n,)), dtype=dtype)
        w = tf.Variable(rng.uniform(-0.5, 0.5, (n, n)), dtype=dtype)
        kind = p % 4
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                h = x * v
                for _ in range(int(rng.integers(2, 6))):
                    r = rng.random()
                    if r < 0.4:
                        h = UNARY[int(rng.integers(len(UNARY)))](h)
                    elif r < 0.7:
                        h = BINARY[int(rng.integers(len(BINARY)))](h, v if rng.random() < 0.5 else x)
                    elif r < 0.85:
                        h = h * float(rng.choice([0.5, 2.0, -1.5])) + 1.0  # weakly typed scalars
                    else:
                        h = tf.reshape(tf.matmul(w, tf.reshape(h, [n, 1])), [n])
                y = tf.reduce_sum(h) if kind != 2 else tf.reduce_mean(tf.square(h))
            g = inner.gradient(y, [x, v, w])
            gx = g[0]
        put(y)
        for t in g:
            put(t)
        if kind == 1:
            put(outer.gradient(gx, x))  # nested: a second-order gradient through the replayed pullbacks
        elif kind == 3:
            put(outer.jacobian(h, x))
        del outer
        v.assign_sub(0.1 * g[1])
        put(v)
    print("RESULT " + json.dumps({"digest": digest.hexdigest(), **counts, "dir": tf.config.get_compilation_cache_dir()}))
    '''
)


def _run(tmp_path, seed: int, n: int, cache: str | None, x64: bool = False) -> dict:
    script = tmp_path / "program.py"
    if not script.exists():
        script.write_text(_PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COMPILATION_CACHE", "TAPEJAX_COMPILATION_CACHE"))}
    env["JAX_ENABLE_X64"] = "1" if x64 else "0"
    env["JAX_PLATFORMS"] = "cpu"
    # (the cache holds compiled programs: every kernel compiles at its first call, none is
    # answered on the host, so eight small programs exercise it)
    env["TAPEJAX_KERNEL_HOST_FIRST_CALLS"] = "0"
    if cache is not None:
        env["TAPEJAX_COMPILATION_CACHE_DIR"] = cache
    r = subprocess.run([sys.executable, str(script), str(seed), str(n)], capture_output=True, text=True, env=env, timeout=600)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise AssertionError(f"the program failed:\n{r.stderr[-3000:]}")


def test_a_later_process_compiles_nothing_and_gets_the_same_bits(tmp_path):
    cache = str(tmp_path / "cache")
    plain = _run(tmp_path, 7, 8, None)
    cold = _run(tmp_path, 7, 8, cache)
    warm = _run(tmp_path, 7, 8, cache)
    assert plain["dir"] is None and cold["dir"] == cache
    assert plain["hits"] == plain["misses"] == 0  # no cache: JAX never looks
    # (A cold process may already hit: two jit objects of one program, as a kernel's
    # per-parameter pair and a pullback of the same op, share an entry.)
    assert cold["misses"] > 10
    # Every program of the later process comes from disk: each lookup the earlier
    # process made is found.
    assert warm["misses"] == 0 and warm["hits"] == cold["misses"] + cold["hits"]
    assert plain["digest"] == cold["digest"] == warm["digest"]
    # The same programs in float64 (x64 on) find nothing of the float32 ones, then
    # serve themselves.
    wide_cold = _run(tmp_path, 7, 8, cache, x64=True)
    wide_warm = _run(tmp_path, 7, 8, cache, x64=True)
    assert wide_cold["misses"] > 10 and wide_warm["misses"] == 0
    assert wide_cold["digest"] == wide_warm["digest"] == _run(tmp_path, 7, 8, None, x64=True)["digest"] != plain["digest"]


def test_random_programs_with_and_without_the_cache_agree_bit_for_bit(tmp_path):
    # Two seeds share some op signatures and not others: the second process meets a cache
    # holding part of what it needs, and each entry must serve only its own program.
    cache = str(tmp_path / "cache")
    first, second = _run(tmp_path, 1, 8, cache), _run(tmp_path, 2, 8, cache)
    assert second["hits"] > 0 and second["misses"] > 0
    assert first["digest"] == _run(tmp_path, 1, 8, None)["digest"]
    assert second["digest"] == _run(tmp_path, 2, 8, None)["digest"]


def test_a_corrupt_entry_is_compiled_again_not_used(tmp_path):
    cache = tmp_path / "cache"
    cold = _run(tmp_path, 11, 4, str(cache))
    entries = [p for p in cache.iterdir() if p.is_file() and not p.name.startswith(".")]
    assert entries
    for p in entries:  # truncated, as by a crash in mid-write
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2])
    again = _run(tmp_path, 11, 4, str(cache))
    assert again["digest"] == cold["digest"]


def test_setting_and_clearing_the_directory_restores_jax_options(tmp_path):
    import jax

    names = ["jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes", "jax_enable_compilation_cache"]
    prev = tf.config.get_compilation_cache_dir()  # (set when the suite runs with TAPEJAX_COMPILATION_CACHE_DIR)
    tf.config.set_compilation_cache_dir(None)
    before = {n: getattr(jax.config, n) for n in names}
    try:
        tf.config.set_compilation_cache_dir(tmp_path / "a")
        assert tf.config.get_compilation_cache_dir() == str(tmp_path / "a")
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "a")
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
        tf.config.set_compilation_cache_dir(str(tmp_path / "b"))  # a second directory replaces the first
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "b")
        assert (tmp_path / "b").is_dir()
    finally:
        tf.config.set_compilation_cache_dir(None)
    assert tf.config.get_compilation_cache_dir() is None
    assert {n: getattr(jax.config, n) for n in names} == before
    tf.config.set_compilation_cache_dir(prev)


def test_bad_directories_say_what_to_give(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    prev = tf.config.get_compilation_cache_dir()
    with pytest.raises(ValueError, match="is a file; give a directory"):
        tf.config.set_compilation_cache_dir(f)
    with pytest.raises(TypeError, match="directory path or None"):
        tf.config.set_compilation_cache_dir(3)
    assert tf.config.get_compilation_cache_dir() == prev  # nothing half-set
