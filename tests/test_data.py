"""tf.data (``tapejax.data``): what the oracle tests cannot compare with TF directly: training loops
over datasets (eager and inside ``tapejax.function``), the background threads of ``prefetch`` and
parallel ``map``, the statistics of ``shuffle``'s buffer, laziness, caching, and the docstrings'
examples. Element values, specs, cardinalities and exception classes are pinned against real TF in
tests/oracle/test_oracle_data.py."""

from __future__ import annotations

import doctest
import gc
import importlib
import threading
import time

import numpy as np
import pytest

import tapejax as tf
from tapejax.data import _dataset


@pytest.mark.parametrize("module", ["tapejax.data", "tapejax.data._dataset", "tapejax.data.experimental",
                                    "tapejax.data._csv"])
def test_docstring_examples_run(module):
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def _regression_data(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    w_true = np.array([[1.5], [-2.0], [0.5]], np.float32)
    y = x @ w_true + 0.25
    return x, y, w_true


def test_tutorial_training_loop_over_shuffled_batches_trains():
    # The seed tutorials' loop: for x, y in ds.shuffle(100).batch(32): tape, gradient, update.
    x, y, w_true = _regression_data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(100, seed=1).batch(32)
    w = tf.Variable(tf.zeros((3, 1)))
    b = tf.Variable(0.0)
    seen = 0
    for _epoch in range(30):
        for xb, yb in ds:
            assert isinstance(xb, tf.Tensor) and xb.dtype == tf.float32
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((tf.matmul(xb, w) + b - yb) ** 2)
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(0.1 * gw)
            b.assign_sub(0.1 * gb)
            seen += int(xb.shape[0])
    assert seen == 30 * 256
    np.testing.assert_allclose(w.numpy(), w_true, atol=1e-3)
    np.testing.assert_allclose(b.numpy(), 0.25, atol=1e-3)


def test_function_training_step_consumes_dataset_batches():
    # A tapejax.function step fed batch by batch: one trace for the fixed batch shape, and the same
    # weights as the eager step on the same (unshuffled) batches.
    x, y, _ = _regression_data(128)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def make():
        w = tf.Variable(tf.zeros((3, 1)))

        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((tf.matmul(xb, w) - yb) ** 2)
            w.assign_sub(0.05 * tape.gradient(loss, w))
            return loss

        return w, step

    w_eager, eager_step = make()
    w_comp, comp = make()
    comp_step = tf.function(comp)
    losses = []
    for _ in range(5):
        for xb, yb in ds:
            eager_step(xb, yb)
            losses.append(float(comp_step(xb, yb)))
    assert comp_step.experimental_get_tracing_count() == 1
    np.testing.assert_allclose(w_comp.numpy(), w_eager.numpy(), rtol=1e-5, atol=1e-6)
    assert losses[-1] < 0.5 * losses[0]


def test_python_loop_over_a_dataset_inside_a_function():
    # Inside tapejax.function the loop is Python over concrete batches (TF's autograph would make
    # it a dataset loop); the values are those of the dataset.
    ds = tf.data.Dataset.from_tensor_slices(np.arange(10, dtype=np.float32)).batch(4)

    @tf.function
    def total(dataset, scale):
        s = tf.constant(0.0)
        for batch in dataset:
            s = s + tf.reduce_sum(batch) * scale
        return s

    assert float(total(ds, tf.constant(2.0))) == 90.0
    assert float(total(ds, tf.constant(1.0))) == 45.0


def test_map_is_not_recorded_by_an_outer_tape_and_reads_variables_when_it_runs():
    v = tf.Variable(2.0)
    ds = tf.data.Dataset.from_tensor_slices([1.0, 2.0]).map(lambda e: e * v)
    with tf.GradientTape() as t:
        s = tf.add_n([e for e in ds])
    assert t.gradient(s, v) is None  # as TF: the dataset's functions are not on the tape
    v.assign(3.0)
    assert [float(e) for e in ds] == [3.0, 6.0]


def test_map_functions_are_traced_once_unless_they_need_concrete_values():
    traced = []

    def f(x):
        traced.append(1)
        return x * 2

    ds = tf.data.Dataset.range(50).map(f)
    assert [int(v) for v in ds] == list(range(0, 100, 2)) and [int(v) for v in ds][-1] == 98
    assert len(traced) <= 2  # TF: 1 (tapejax traces for the spec at map(), then compiles once)

    eager = []

    def g(x):
        eager.append(1)
        return int(x.numpy()) + 1  # concrete values: TF cannot trace this; tapejax runs it eagerly

    assert [int(v) for v in tf.data.Dataset.range(5).map(g)] == [1, 2, 3, 4, 5]
    assert len(eager) == 1 + 5  # the trace at map() that stopped at .numpy(), then every element
    # Unknown dimensions (batches of a ragged generator): eager per element, no compile per shape.
    gen = tf.data.Dataset.from_generator(lambda: ([1.0] * n for n in range(1, 4)),
                                         output_signature=tf.TensorSpec([None], tf.float32))
    assert [float(v) for v in gen.map(lambda v: tf.reduce_sum(v) * 2.0)] == [2.0, 4.0, 6.0]


def test_map_gets_tapejax_tensors_and_unpacks_tuples():
    got = []

    def f(a, b):
        got.append((type(a), type(b)))
        return {"sum": a + b, "prod": tf.math.multiply(a, b)}

    ds = tf.data.Dataset.from_tensor_slices(([1.0, 2.0], [3.0, 4.0])).map(f)
    out = list(ds)
    assert all(t == (tf.Tensor, tf.Tensor) for t in got)
    assert [float(e["sum"]) for e in out] == [4.0, 6.0] and [float(e["prod"]) for e in out] == [3.0, 8.0]


def test_parallel_map_uses_threads_and_keeps_order():
    threads = set()
    lock = threading.Lock()

    def slow(x):
        # .numpy() needs a concrete value: the function runs in Python for every element.
        with lock:
            threads.add(threading.get_ident())
        time.sleep(0.01)
        return x.numpy() * 2

    ds = tf.data.Dataset.range(24).map(slow, num_parallel_calls=4)
    threads.clear()
    assert [int(e) for e in ds] == [2 * i for i in range(24)]
    assert len(threads) > 1 and threading.get_ident() not in threads


def _prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "tapejax.data.prefetch"]


def _wait_for(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_prefetch_produces_on_a_background_thread_and_stops_when_abandoned():
    where = []

    def gen():
        for i in range(10**6):
            where.append(threading.current_thread().name)
            yield i

    ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([], tf.int32)).prefetch(3)
    it = iter(ds)
    assert int(next(it)) == 0
    # The producer runs ahead of the consumer, up to the buffer.
    assert _wait_for(lambda: len(where) >= 4)
    assert set(where) == {"tapejax.data.prefetch"}
    assert len(where) <= 1 + 3 + 1
    assert _prefetch_threads()
    del it
    gc.collect()
    assert _wait_for(lambda: not _prefetch_threads())
    # A complete iteration ends its thread too.
    assert [int(e) for e in tf.data.Dataset.range(5).prefetch(2)] == [0, 1, 2, 3, 4]
    assert _wait_for(lambda: not _prefetch_threads())


def test_prefetch_raises_the_pipeline_error_in_the_consumer():
    def gen():
        yield 1
        raise ValueError("bad record")

    ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([], tf.int32)).prefetch(1)
    it = iter(ds)
    assert int(next(it)) == 1
    with pytest.raises(ValueError, match="bad record"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


def test_shuffle_buffer_bounds_how_far_an_element_moves():
    # TF's buffer: the element at output position p was among the first p + buffer_size inputs.
    n, k = 30, 4
    for seed in range(40):
        out = [int(e) for e in tf.data.Dataset.range(n).shuffle(k, seed=seed).as_numpy_iterator()]
        assert sorted(out) == list(range(n))
        assert all(v < p + k for p, v in enumerate(out))
    assert [int(e) for e in tf.data.Dataset.range(6).shuffle(1)] == list(range(6))


def test_shuffle_with_a_full_buffer_is_uniform():
    n, runs = 5, 2000
    ds = tf.data.Dataset.range(n).shuffle(n, seed=3)
    counts = np.zeros((n, n))
    for _ in range(runs):
        for pos, v in enumerate(ds.as_numpy_iterator()):
            counts[int(v), pos] += 1
    expected = runs / n
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 50  # 16 degrees of freedom: p < 1e-4 for a uniform permutation to exceed this


def test_shuffle_seeds_reproduce_orders():
    def order(**kw):
        return [int(e) for e in tf.data.Dataset.range(50).shuffle(50, **kw)]

    assert order(seed=4) == order(seed=4) != order(seed=5)
    try:
        tf.random.set_seed(11)
        a = order()
        tf.random.set_seed(11)
        assert order() == a
    finally:
        tf.random.set_seed(None)


def test_pipelines_are_lazy():
    calls = []

    def gen():
        calls.append("start")
        i = 0
        while True:
            yield i
            i += 1

    ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([], tf.int32))
    ds = ds.map(lambda x: x * 3).filter(lambda x: x % 2 == 0).batch(2).take(2)
    assert calls == []
    assert [b.tolist() for b in ds.as_numpy_iterator()] == [[0, 6], [12, 18]]
    assert [b.tolist() for b in ds.as_numpy_iterator()] == [[0, 6], [12, 18]]
    assert calls == ["start", "start"]  # the generator is called again for every iteration
    assert int(next(iter(tf.data.Dataset.range(10**12).skip(5)))) == 5


def test_cache_keeps_only_a_complete_first_iteration():
    passes = []

    def gen():
        passes.append(1)
        yield from range(4)

    ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([], tf.int32)).cache()
    it = iter(ds)
    next(it)  # a partial iteration caches nothing
    assert [int(e) for e in ds] == [0, 1, 2, 3]
    assert [int(e) for e in ds] == [0, 1, 2, 3]
    assert len(passes) == 2


def test_iterators_and_elements_are_tapejax_values():
    ds = tf.data.Dataset.from_tensor_slices({"x": np.ones((2, 3), np.float32), "y": [1, 2]})
    it = iter(ds)
    assert isinstance(it, tf.data.Iterator) and it.element_spec == ds.element_spec
    e = next(it)
    assert isinstance(e["x"], tf.Tensor) and e["x"].shape == (3,) and e["y"].dtype == tf.int32
    spec = ds.element_spec["x"]
    assert isinstance(spec, tf.TensorSpec) and spec.shape == (3,) and spec.dtype == tf.float32
    assert repr(ds).startswith("<_TensorSliceDataset element_spec={'x': TensorSpec(shape=(3,)")
    card = ds.cardinality()
    assert isinstance(card, tf.Tensor) and int(card) == 2
    assert card.dtype == (tf.int64 if tf.x64_enabled() else tf.int32)  # TF: int64 (the x64 rule)
    assert len(ds) == 2 and next(ds.take(1).as_numpy_iterator())["y"] == 1


def test_tensors_and_variables_as_sources():
    v = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    assert [e.tolist() for e in tf.data.Dataset.from_tensor_slices(v).as_numpy_iterator()] == [[1.0, 2.0], [3.0, 4.0]]
    t = tf.constant([5, 6])
    assert [int(e) for e in tf.data.Dataset.from_tensor_slices(t)] == [5, 6]
    assert int(tf.data.Dataset.range(tf.constant(4)).cardinality()) == 4


def test_bad_input_raises_tf_classes_with_guidance():
    ds = tf.data.Dataset.range(3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="greater than zero"):
        ds.batch(0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="buffer_size"):
        ds.shuffle(0)
    with pytest.raises(ValueError, match="tf.bool"):
        ds.filter(lambda x: x + 1)
    with pytest.raises(TypeError, match="must return a tf.data.Dataset"):
        list(ds.interleave(lambda x: x, cycle_length=1))
    with pytest.raises(TypeError, match="nested structure of tf.data.Dataset"):
        tf.data.Dataset.zip((ds, [1, 2]))
    with pytest.raises(TypeError, match="infinite"):
        len(ds.repeat())
    gen = tf.data.Dataset.from_generator(lambda: iter([(1, 2)]), output_signature=tf.TensorSpec([], tf.int32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected structure|shape"):
        list(gen)
    with pytest.raises(TypeError, match="output_types"):
        tf.data.Dataset.from_generator(lambda: iter([]))
    with pytest.raises(TypeError, match="must return a `tf.data.Dataset`"):
        ds.apply(lambda d: 3)


def test_strings_are_refused_until_tapejax_has_a_string_dtype():
    # TF: a tf.string dataset. tapejax has no string tensors yet (compat_docs/differences.md).
    with pytest.raises(TypeError, match="string"):
        tf.data.Dataset.from_tensor_slices(["a", "bc"])


def test_reduce_returns_tensors_and_checks_the_state_structure():
    total = tf.data.Dataset.range(1, 5).reduce(np.int64(0), lambda s, x: s + x)  # int64 in TF
    assert isinstance(total, tf.Tensor) and int(total) == 10
    with pytest.raises(TypeError, match="must match the initial state"):
        tf.data.Dataset.range(3).reduce((np.int64(0), np.int64(0)), lambda s, x: s[0] + x)


def test_options_are_accepted():
    ds = tf.data.Dataset.range(3)
    opts = ds.options()
    assert isinstance(opts, tf.data.Options)
    assert ds.with_options(opts) is ds


def test_autotune_map_parallelism_is_bounded_by_the_cpus():
    assert _dataset._parallelism(tf.data.AUTOTUNE) >= 1
    assert _dataset._parallelism(None) == 1 and _dataset._parallelism(3) == 3


def test_sample_from_datasets_follows_the_weights_and_the_seed():
    def draw(seed):
        a = tf.data.Dataset.from_tensors(0).repeat()
        b = tf.data.Dataset.from_tensors(1).repeat()
        ds = tf.data.Dataset.sample_from_datasets([a, b], weights=[0.25, 0.75], seed=seed).take(4000)
        return np.array([int(x) for x in ds.as_numpy_iterator()])

    picks = draw(3)
    assert abs(picks.mean() - 0.75) < 0.03  # binomial sd 0.007
    assert np.array_equal(draw(3), picks) and not np.array_equal(draw(4), picks)
    # An exhausted dataset drops out; stop_on_empty_dataset ends everything instead.
    a, b = tf.data.Dataset.range(3), tf.data.Dataset.range(10, 110)
    mixed = [int(x) for x in tf.data.Dataset.sample_from_datasets([a, b], seed=0)]
    assert sorted(mixed) == [0, 1, 2, *range(10, 110)]
    stopped = [int(x) for x in tf.data.Dataset.sample_from_datasets([a, b], seed=0, stop_on_empty_dataset=True)]
    assert stopped == mixed[: len(stopped)] and len(stopped) < len(mixed)
    assert [v for v in stopped if v < 10] == [0, 1, 2]


def test_a_dataset_of_symbolic_tensors_says_to_build_it_outside_the_function():
    @tf.function
    def f(x):
        return tf.data.Dataset.from_tensor_slices(x).reduce(0.0, lambda s, e: s + e)

    with pytest.raises(TypeError, match="Build the dataset outside the function"):
        f(tf.constant([1.0, 2.0]))


def test_csv_walkthrough_style_training(tmp_path):
    # TF 2's custom training walkthrough: make_csv_dataset, a map that packs the feature dict into
    # a matrix, and a softmax regression trained batch by batch.
    rng = np.random.default_rng(0)
    centers = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])
    labels = rng.integers(0, 3, 150)
    rows = centers[labels] + rng.normal(scale=0.2, size=(150, 4))
    path = tmp_path / "iris_training.csv"
    lines = ["150,4,setosa,versicolor,virginica"] + [
        ",".join(f"{v:.1f}" for v in r) + f",{c}" for r, c in zip(rows, labels)]
    path.write_text("\n".join(lines) + "\n")
    names = ["sepal_length", "sepal_width", "petal_length", "petal_width", "species"]
    ds = tf.data.experimental.make_csv_dataset(str(path), 32, column_names=names, label_name="species",
                                               num_epochs=1, shuffle_seed=0)
    features, y = next(iter(ds))
    assert list(features) == names[:4] and y.dtype == tf.int32 and features["sepal_length"].dtype == tf.float32

    def pack_features_vector(features, labels):
        return tf.stack(list(features.values()), axis=1), labels

    ds = ds.map(pack_features_vector)
    w = tf.Variable(tf.zeros((4, 3)))
    b = tf.Variable(tf.zeros((3,)))
    for _ in range(60):
        for x, yb in ds:
            with tf.GradientTape() as tape:
                logits = tf.matmul(x, w) + b
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=yb, logits=logits))
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(0.1 * gw)
            b.assign_sub(0.1 * gb)
    logits = rows.astype(np.float32) @ w.numpy() + b.numpy()
    assert (logits.argmax(1) == labels).mean() > 0.9


def test_csv_text_columns_and_64_bit_columns_say_what_to_do(tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text("name,x,y\nsetosa,1.5,1e39\n")
    with pytest.raises(TypeError, match="select_columns"):
        tf.data.experimental.make_csv_dataset(str(path), 1, num_epochs=1)
    if not tf.x64_enabled():
        with pytest.raises(TypeError, match="64-bit"):
            tf.data.experimental.make_csv_dataset(str(path), 1, select_columns=["y"], num_epochs=1)
    ds = tf.data.experimental.make_csv_dataset(str(path), 1, select_columns=["x"], num_epochs=1)
    assert [float(f["x"][0]) for f in ds] == [1.5]
    with pytest.raises(ValueError, match="No files match"):
        tf.data.experimental.make_csv_dataset(str(tmp_path / "none*.csv"), 1)


def test_random_augmentation_in_map_draws_fresh_numbers_per_element_and_epoch():
    for calls in (None, 4):
        ds = tf.data.Dataset.range(16).map(lambda x: tf.random.uniform([]), num_parallel_calls=calls)
        a = [float(v) for v in ds]
        b = [float(v) for v in ds]
        assert len(set(a)) == 16 and set(a).isdisjoint(b)
    try:
        tf.random.set_seed(1)
        first = [float(v) for v in tf.data.Dataset.range(3).map(lambda x: tf.random.uniform([]))]
        tf.random.set_seed(1)
        assert [float(v) for v in tf.data.Dataset.range(3).map(lambda x: tf.random.uniform([]))] == first
    finally:
        tf.random.set_seed(None)
