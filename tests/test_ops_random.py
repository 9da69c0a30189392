"""``tf.random``, ``tf.random.Generator`` and ``tf.nn.dropout``: TF's seed semantics.

The values differ from TF's (JAX's generator is not TF's Philox stream); what
must match is the structure, pinned here from real TF 2.21 runs: which draws
repeat, which do not, and what a seed pair controls.
"""

from __future__ import annotations

import numpy as np
import pytest

import tapejax as tf


def u(**k):
    return float(tf.random.uniform([], **k))


def test_set_seed_makes_the_sequence_reproducible():
    tf.random.set_seed(1)
    a = [u(), u(seed=5), u(seed=5), u(), float(tf.random.normal([], seed=2)), float(tf.random.truncated_normal([]))]
    tf.random.set_seed(1)
    b = [u(), u(seed=5), u(seed=5), u(), float(tf.random.normal([], seed=2)), float(tf.random.truncated_normal([]))]
    assert a == b
    assert a[1] != a[2]  # TF: repeating a seeded op inside one run gives new values
    assert a[0] != a[3]


def test_op_seed_streams_are_per_kind_and_independent_of_unseeded_ops():
    # TF: each op kind keeps its own counter per (global seed, op seed); unseeded ops
    # draw from a separate global counter.
    tf.random.set_seed(1)
    a = [u(seed=7), u(seed=7)]
    tf.random.set_seed(1)
    b = [u(seed=7), float(tf.random.normal([], seed=7)), u(seed=7)]
    assert b[0] == a[0] and b[2] == a[1]
    tf.random.set_seed(1)
    c = [u(), u(seed=7), u()]
    tf.random.set_seed(1)
    d = [u(seed=7), u(), u(seed=7), u()]
    assert d[1] == c[0] and d[3] == c[2] and d[0] == c[1]


def test_shape_and_range_do_not_change_the_stream_position():
    tf.random.set_seed(3)
    a = [u(seed=9), u(seed=9), u(seed=9)]
    tf.random.set_seed(3)
    b = [u(seed=9), float(tf.random.uniform([], seed=9, maxval=2.0)) / 2.0, u(seed=9)]
    assert b[0] == a[0] and np.isclose(b[1], a[1]) and b[2] == a[2]


def test_global_seed_changes_the_values():
    tf.random.set_seed(1)
    x = u()
    tf.random.set_seed(2)
    assert u() != x
    tf.random.set_seed(1)
    y = u(seed=5)
    tf.random.set_seed(2)
    assert u(seed=5) != y


def test_op_seed_without_global_seed_is_deterministic_after_reset():
    tf.random.set_seed(None)
    a = u(seed=11)
    tf.random.set_seed(None)
    assert u(seed=11) == a
    assert tf.random.get_seed(11) == (87654321, 11)


def test_unseeded_draws_differ():
    tf.random.set_seed(None)
    assert u() != u()
    assert tf.random.get_seed(None) == (None, None)


def test_distributions_and_dtypes():
    tf.random.set_seed(0)
    n = tf.random.normal([2000], mean=1.0, stddev=2.0)
    assert n.dtype == tf.float32 and abs(float(tf.reduce_mean(n)) - 1.0) < 0.2 and abs(float(tf.math.reduce_std(n)) - 2.0) < 0.2
    t = tf.random.truncated_normal([2000], mean=-1.0, stddev=0.5)
    assert float(tf.reduce_min(t)) >= -2.0 and float(tf.reduce_max(t)) <= 0.0
    x = tf.random.uniform([1000], 2, 5, dtype=tf.int32)
    assert x.dtype == tf.int32 and set(np.unique(x.numpy())) == {2, 3, 4}
    f = tf.random.uniform([1000], -1.0, 3.0)
    assert -1.0 <= float(tf.reduce_min(f)) and float(tf.reduce_max(f)) < 3.0
    assert tf.random.uniform([2], dtype=tf.float16).dtype == tf.float16
    c = tf.random.categorical(tf.math.log([[0.0, 1.0], [1.0, 0.0]]), 50, seed=1)
    assert c.shape == (2, 50) and c.dtype == tf.int32 and c.numpy()[0].tolist() == [1] * 50 and c.numpy()[1].tolist() == [0] * 50
    g = tf.random.gamma([3], alpha=[1.0, 2.0])
    assert g.shape == (3, 2) and float(tf.reduce_min(g)) > 0
    p = tf.random.poisson([4], lam=3.0)
    assert p.shape == (4,) and p.dtype == tf.float32


def test_normal_is_differentiable_in_mean_and_stddev():
    tf.random.set_seed(4)
    m, s = tf.constant(1.0), tf.constant(2.0)
    with tf.GradientTape() as t:
        t.watch([m, s])
        x = tf.random.normal([5], mean=m, stddev=s)
        total = tf.reduce_sum(x)
    gm, gs = t.gradient(total, [m, s])
    assert float(gm) == 5.0
    assert np.isclose(float(gs), float(tf.reduce_sum((x - 1.0) / 2.0)), rtol=1e-5)


def test_shuffle():
    tf.random.set_seed(5)
    x = tf.reshape(tf.range(12), (6, 2))
    s = tf.random.shuffle(x, seed=1)
    assert sorted(s.numpy()[:, 0].tolist()) == [0, 2, 4, 6, 8, 10]
    assert (s.numpy()[:, 1] == s.numpy()[:, 0] + 1).all()  # rows move whole
    tf.random.set_seed(5)
    assert (tf.random.shuffle(x, seed=1).numpy() == s.numpy()).all()


def test_stateless_ops_depend_only_on_the_seed():
    for op in (tf.random.stateless_normal, tf.random.stateless_uniform, tf.random.stateless_truncated_normal):
        a, b = op([4], seed=[1, 2]), op([4], seed=[1, 2])
        assert (a.numpy() == b.numpy()).all()
        assert not (a.numpy() == op([4], seed=[1, 3]).numpy()).all()
    assert tf.random.stateless_categorical([[0.0, 0.0]], 4, seed=[1, 2]).shape == (1, 4)


def test_generator():
    g1, g2 = tf.random.Generator.from_seed(3), tf.random.Generator.from_seed(3)
    a = g1.normal([3])
    tf.random.set_seed(99)  # the global seed does not touch generators
    assert (a.numpy() == g2.normal([3]).numpy()).all()
    assert not (g1.normal([3]).numpy() == a.numpy()).all()
    state = g1.state
    x = g1.uniform([2])
    g1.reset(state)
    assert (g1.uniform([2]).numpy() == x.numpy()).all()
    g1.reset_from_seed(3)
    assert (g1.normal([3]).numpy() == a.numpy()).all()
    c1, c2 = g1.split(2)
    assert not (c1.normal([4]).numpy() == c2.normal([4]).numpy()).all()
    assert g1.make_seeds(3).shape == (2, 3)
    assert g1.uniform([5], 0, 4, dtype=tf.int32).dtype == tf.int32
    with pytest.raises(ValueError, match="both `None` or both non-`None`"):
        g1.uniform([2], dtype=tf.int32)
    assert g1.uniform([3], None, None, dtype=tf.int32).dtype == tf.int32
    assert g1.uniform_full_int([2], tf.int32).dtype == tf.int32
    assert float(tf.reduce_max(tf.abs(g1.truncated_normal([500])))) <= 2.0
    assert g1.binomial([3], counts=[5.0, 5.0, 5.0], probs=[0.5, 0.5, 0.5]).dtype == tf.int32
    before = g1.state.numpy()
    g1.skip(2)
    assert g1.state.numpy()[2] == before[2] + 2
    assert tf.random.get_global_generator() is tf.random.get_global_generator()
    tf.random.set_global_generator(g2)
    assert tf.random.get_global_generator() is g2
    assert tf.random.experimental.Generator is tf.random.Generator


def test_dropout():
    x = tf.ones(1000)
    y = tf.nn.dropout(x, rate=0.5, seed=1)
    vals = set(y.numpy().tolist())
    assert vals == {0.0, 2.0} and 350 < int(tf.math.count_nonzero(y)) < 650
    assert tf.nn.dropout(tf.constant([1.0, 2.0]), rate=0.0).numpy().tolist() == [1.0, 2.0]
    tf.random.set_seed(7)
    a = tf.nn.dropout(x, 0.3, seed=2)
    tf.random.set_seed(7)
    assert (tf.nn.dropout(x, 0.3, seed=2).numpy() == a.numpy()).all()
    z = tf.nn.dropout(tf.ones((3, 8)), rate=0.5, noise_shape=[1, 8], seed=3).numpy()
    assert (z == z[0]).all()  # the mask broadcasts over the rows
    v = tf.constant([1.0, 2.0, 3.0, 4.0])
    with tf.GradientTape() as t:
        t.watch(v)
        d = tf.nn.dropout(v, 0.5, seed=4)
    g = t.gradient(d, v).numpy()
    assert (g == np.where(d.numpy() != 0, 2.0, 0.0)).all()


def test_random_ops_in_a_compiled_function_draw_new_numbers_each_call():
    # TF: a stateful random op inside tf.function gives new values on every call; the
    # sequence restarts after set_seed. tapejax captures its random state like a variable.
    @tf.function
    def f(x):
        return x + tf.random.normal([3]) + tf.random.uniform([3], seed=1) + tf.nn.dropout(tf.ones(3), 0.5, seed=2)

    tf.random.set_seed(1)
    a = [f(tf.zeros(3)).numpy().tolist() for _ in range(3)]
    tf.random.set_seed(1)
    b = [f(tf.zeros(3)).numpy().tolist() for _ in range(3)]
    assert a == b
    assert a[0] != a[1] != a[2]
    assert f.experimental_get_tracing_count() == 1


def test_unseeded_draw_inside_a_foreign_jax_trace_does_not_leak_the_global_key():
    # Keras (JAX backend) builds a model under jax.jit and runs a tf.random initializer there
    # (TF's basics guide: Dense(kernel_initializer=tf.random.normal)); the global key must stay concrete.
    import jax

    tf.random.set_seed(None)
    inside = jax.jit(lambda: tf.random.normal([3])._value)()
    assert inside.shape == (3,)
    after = tf.random.normal([3]).numpy()  # raised UnexpectedTracerError before
    assert np.isfinite(after).all()
    assert not np.array_equal(tf.random.normal([3]).numpy(), after)
