"""Programs the tf.distribute tests run in subprocesses (each needs its own JAX/TF device setup).

``python tests/_distribute_programs.py MODE OUT.npz``; MODE:
- ``tapejax-N``: the canonical custom training loop with ``tapejax`` on a MirroredStrategy of N replicas
  (N=1: OneDeviceStrategy); run with XLA_FLAGS giving N host devices.
- ``tf-N``: the same loop with real TensorFlow on N logical CPU devices (the oracle).
- ``worker``: a MultiWorkerMirroredStrategy from TF_CONFIG (one JAX device per process).
- ``fit-tapejax-N`` / ``fit-tf-N``: Keras ``compile``/``fit``/``evaluate``/``predict`` of a small model created
  under the strategy's scope (TF's "distributed training with Keras" guide), tapejax or real TF.
The loop is TF's "custom training with tf.distribute" guide: distributed dataset, per-example loss,
``tf.nn.compute_average_loss``, ``strategy.run`` under ``tf.function``, ``strategy.reduce``.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

GLOBAL_BATCH = 16
EPOCHS = 3


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5)).astype(np.float32)
    y = (x @ rng.normal(size=(5, 3)) > 0).argmax(1).astype(np.int32)
    w0 = (0.3 * rng.normal(size=(5, 8))).astype(np.float32)
    w1 = (0.3 * rng.normal(size=(8, 3))).astype(np.float32)
    return x, y, w0, w1


def loop(tf, strategy, keras_optimizers, timing=False, build=False):
    x, y, w0, w1 = data()
    with strategy.scope():
        a = tf.Variable(w0, name="a")
        b = tf.Variable(np.zeros(8, np.float32), name="b")
        c = tf.Variable(w1, name="c")
        opt = keras_optimizers.Adam(learning_rate=0.05)
        accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
    params = [a, b, c]
    if build:  # Keras 3 on TF cannot create a mirrored optimizer's slots inside the tf.function step
        with strategy.scope():
            opt.build(params)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    dist = strategy.experimental_distribute_dataset(ds)

    def train_step(inputs):
        xb, yb = inputs
        with tf.GradientTape() as tape:
            logits = tf.matmul(tf.nn.relu(tf.matmul(xb, a) + b), c)
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=yb, logits=logits)
            loss = tf.nn.compute_average_loss(per_example)
            loss += tf.nn.scale_regularization_loss(1e-3 * tf.reduce_sum(a * a))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        accuracy.update_state(yb, logits)
        return loss

    @tf.function
    def distributed_train_step(inputs):
        per_replica_losses = strategy.run(train_step, args=(inputs,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

    losses, accuracies = [], []
    for _ in range(EPOCHS):
        for inputs in dist:
            losses.append(float(distributed_train_step(inputs)))
        accuracies.append(float(accuracy.result()))
        accuracy.reset_state()
    out = {"losses": np.array(losses), "accuracy": np.array(accuracies), "a": a.numpy(), "b": b.numpy(), "c": c.numpy(),
           "iterations": int(opt.iterations.numpy()), "replicas": strategy.num_replicas_in_sync}
    if timing:
        batch = next(iter(dist))
        for _ in range(3):
            distributed_train_step(batch)
        t = time.perf_counter()
        for _ in range(20):
            r = distributed_train_step(batch)
        float(r)
        out["step_s"] = (time.perf_counter() - t) / 20
    return out


FIT_SAMPLES = 72  # four global batches of 16 and a partial one of 8 (evenly split over 8 replicas, not over 16)


def fit_program(tf, strategy, timing=False):
    """compile/fit/evaluate/predict under ``strategy.scope()``, deterministic initial weights, no shuffling."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(FIT_SAMPLES, 5)).astype(np.float32)
    y = (x @ rng.normal(size=(5, 3)) > 0).argmax(1).astype(np.int32)
    tapejax = hasattr(tf, "to_jax")
    spe = int(os.environ.get("DIST_SPE", "1"))
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((5,)), tf.keras.layers.Dense(8, activation="relu"),
                                     tf.keras.layers.Dense(3)])
        created = [v.keras_variable.value.sharding for v in model.weights] if tapejax else []
        model.set_weights([(0.5 * np.sin(np.arange(w.size) + 1.0)).reshape(w.shape).astype(np.float32)
                           for w in model.get_weights()])
        model.compile(optimizer=tf.keras.optimizers.Adam(0.05),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                      steps_per_execution=spe)
    inputs = []
    if tapejax:
        # Record how each step's global batch is laid out when the trainer hands it to the strategy.
        distribute_global = strategy._distribute_global

        def recording(element):
            out = distribute_global(element)
            for leaf in __import__("jax").tree_util.tree_leaves(out, is_leaf=lambda t: isinstance(t, tf.distribute.PerReplica)):
                a = leaf._tensor._value
                inputs.append((len(a.sharding.device_set), a.sharding.shard_shape(a.shape)[0], a.shape[0],
                               a.sharding.spec == __import__("jax").sharding.PartitionSpec("batch")))
            return out

        strategy._distribute_global = recording
    batches = []
    record = type("Record", (tf.keras.callbacks.Callback,), {"on_train_batch_end": lambda self, b, logs=None: batches.append(b)})
    hist = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=EPOCHS, verbose=0, shuffle=False, callbacks=[record()])
    ev = model.evaluate(x, y, batch_size=GLOBAL_BATCH, verbose=0)
    pred = model.predict(x[:40], batch_size=GLOBAL_BATCH, verbose=0)
    out = {"loss": np.array(hist.history["loss"]), "accuracy": np.array(hist.history["accuracy"]),
           "evaluate": np.array(ev), "predict": pred, "replicas": strategy.num_replicas_in_sync,
           "iterations": int(model.optimizer.iterations.numpy()), "batches": np.array(batches)}
    if tapejax:
        strategy._distribute_global = distribute_global
        # Replicated when Keras created them under the scope (before any fit): every device, one full copy each.
        out["created_devices"] = min(len(sh.device_set) for sh in created)
        out["created_replicated"] = all(sh.is_fully_replicated for sh in created)
        # Each step's inputs: (devices, rows per device, global rows, split over the 'batch' axis).
        out["inputs"] = np.array(inputs, np.int64).reshape(-1, 4)
    for i, w in enumerate(model.get_weights()):
        out[f"w{i}"] = w
    if hasattr(model.trainable_variables[0], "_v"):  # tapejax only
        # Batches of 12 do not split over 8 replicas: each runs unsplit on the replicated
        # variables (one-device numbers; TF would split them unevenly, see compat_docs/distribute.md).
        with strategy.scope():
            other = tf.keras.Sequential([tf.keras.Input((5,)), tf.keras.layers.Dense(3)])
            other.set_weights([np.full(w.shape, 0.1, np.float32) for w in other.get_weights()])
            other.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                          loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        out["uneven_loss"] = np.array(other.fit(x, y, batch_size=12, epochs=2, verbose=0, shuffle=False).history["loss"])
        out["uneven_w0"] = other.get_weights()[0]
        # How the variables are laid out.
        v = model.trainable_variables[0]._v
        out["variable_devices"] = len(v.sharding.device_set)
        out["slot_devices"] = min(len(s._v.sharding.device_set) for s in model.optimizer.variables)
    if timing:
        import time

        xs, ys = np.concatenate([x[:64]] * 4), np.concatenate([y[:64]] * 4)
        model.fit(xs, ys, batch_size=GLOBAL_BATCH, epochs=1, verbose=0, shuffle=False)
        t = time.perf_counter()
        model.fit(xs, ys, batch_size=GLOBAL_BATCH, epochs=2, verbose=0, shuffle=False)
        out["step_s"] = (time.perf_counter() - t) / (2 * len(xs) // GLOBAL_BATCH)
    return out


def merge_program(tf, strategy):
    """merge_call as TF's optimizers use it: per-replica values reduced, gathered, listed; a variable updated."""
    n = strategy.num_replicas_in_sync
    x = np.arange(4 * n, dtype=np.float32).reshape(2 * n, 2) ** 1.5
    with strategy.scope():
        v = tf.Variable([1.0, 2.0])
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x).batch(2 * n))

    def fn(b):
        ctx = tf.distribute.get_replica_context()
        local = tf.reduce_sum(b * b, axis=0) + tf.cast(ctx.replica_id_in_sync_group, tf.float32)

        def merge_fn(strategy, local, scale):
            assert tf.distribute.in_cross_replica_context() and tf.distribute.get_replica_context() is None
            total = strategy.extended.reduce_to(tf.distribute.ReduceOp.SUM, local, v)
            [mean] = strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.MEAN, [(local, v)])
            along = strategy.reduce("SUM", local, axis=0)
            gathered = strategy.gather(local, axis=0)
            listed = tf.stack(strategy.experimental_local_results(local))
            strategy.extended.update(v, lambda var, d: var.assign_sub(scale * d), args=(total,), group=False)
            return total, mean, along, gathered, listed, local

        return ctx.merge_call(merge_fn, args=(local,), kwargs={"scale": 1e-3})

    @tf.function
    def step(b):
        return strategy.run(fn, args=(b,))

    outs = [step(b) for b in dist] + [step(b) for b in dist]
    first = [strategy.experimental_local_results(o)[0].numpy() for o in outs[-1][:5]]
    out = {k: a for k, a in zip(("total", "mean", "along", "gathered", "listed"), first)}
    out["local"] = np.stack([t.numpy() for t in strategy.experimental_local_results(outs[-1][5])])
    out["v"] = v.numpy()
    out["replicas"] = n
    return out


def _tf_logical_cpus(tf, n):
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    devs = [f"/cpu:{i}" for i in range(n)]
    return tf.distribute.MirroredStrategy(devs) if n > 1 else tf.distribute.OneDeviceStrategy("/cpu:0")


def main(mode: str, path: str) -> None:
    if mode.startswith("merge-"):
        n = int(mode.rsplit("-", 1)[1])
        if mode.startswith("merge-tf-"):
            import tensorflow as tf

            strategy = _tf_logical_cpus(tf, n)
        else:
            import tapejax as tf

            strategy = tf.distribute.MirroredStrategy()
        out = merge_program(tf, strategy)
    elif mode.startswith("fit-"):
        n = int(mode.rsplit("-", 1)[1])
        if mode.startswith("fit-tf-"):
            import tensorflow as tf

            strategy = _tf_logical_cpus(tf, n)
        else:
            import tapejax as tf

            strategy = tf.distribute.MirroredStrategy() if n > 1 else tf.distribute.OneDeviceStrategy("/cpu:0")
        assert strategy.num_replicas_in_sync == n, strategy
        out = fit_program(tf, strategy, timing=os.environ.get("DIST_TIMING") == "1")
    elif mode.startswith("tf-"):
        import tensorflow as tf

        n = int(mode[3:])
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
        devs = [f"/cpu:{i}" for i in range(n)]
        strategy = tf.distribute.MirroredStrategy(devs) if n > 1 else tf.distribute.OneDeviceStrategy("/cpu:0")
        out = loop(tf, strategy, tf.keras.optimizers, build=True, timing=os.environ.get("DIST_TIMING") == "1")
    elif mode == "worker":
        import tapejax as tf

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        out = loop(tf, strategy, tf.keras.optimizers)
        out["process_count"] = __import__("jax").process_count()
    else:
        import tapejax as tf

        n = int(mode.split("-")[1])
        strategy = tf.distribute.MirroredStrategy() if n > 1 else tf.distribute.OneDeviceStrategy(__import__("jax").devices()[0])
        assert strategy.num_replicas_in_sync == n, strategy
        out = loop(tf, strategy, tf.keras.optimizers, timing=os.environ.get("DIST_TIMING") == "1")
    np.savez(path, **out)


if __name__ == "__main__" and len(sys.argv) == 3:
    main(sys.argv[1], sys.argv[2])


def features() -> None:
    """Checks of the SPMD pieces on 8 host devices; raises AssertionError on a mismatch."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    import tapejax as tf

    strategy = tf.distribute.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    assert n == 8, n
    with strategy.scope():
        v = tf.Variable(np.ones(3, np.float32))
        count = tf.Variable(0.0, aggregation=tf.VariableAggregation.SUM)
        plain = tf.Variable(0.0)
        avg = tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN)
        first = tf.Variable(0.0, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        on_read = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ, aggregation=tf.VariableAggregation.SUM)
    assert not on_read.trainable
    # Replicated over the ('batch',) mesh.
    assert isinstance(v._v.sharding, NamedSharding) and v._v.sharding.spec == PartitionSpec(), v._v.sharding
    assert len(v._v.sharding.device_set) == 8

    # replica ids and all_reduce.
    def ids():
        ctx = tf.distribute.get_replica_context()
        rid = ctx.replica_id_in_sync_group
        total = ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(rid, tf.float32))
        mean = ctx.all_reduce("MEAN", tf.cast(rid, tf.float32))
        return rid, total, mean

    rid, total, mean = strategy.run(ids)
    assert [int(t) for t in strategy.experimental_local_results(rid)] == list(range(8))
    assert all(float(t) == 28.0 for t in total.values), total
    assert all(float(t) == 3.5 for t in mean.values), mean
    assert int(strategy.reduce("SUM", rid, axis=None)) == 28

    # The distributed batch: replica r sees rows [2r, 2r+2) of the global batch of 16.
    x = np.arange(32, dtype=np.float32).reshape(16, 2)
    batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x).batch(16))))
    assert isinstance(batch, tf.distribute.PerReplica)
    assert batch._tensor._value.sharding.spec == PartitionSpec("batch")
    firsts = strategy.run(lambda b: b[0, 0], args=(batch,))
    assert [float(t) for t in firsts.values] == [4.0 * r for r in range(8)]
    # reduce with an axis: over the replicas and along the axis of each value.
    assert float(strategy.reduce("SUM", batch, axis=0)[0]) == float(x[:, 0].sum())
    np.testing.assert_allclose(strategy.reduce("MEAN", batch, axis=0).numpy(), x.mean(0))
    np.testing.assert_allclose(strategy.reduce("SUM", batch, axis=None).numpy(), x.reshape(8, 2, 2).sum(0))
    rows = strategy.run(lambda b: b[0], args=(batch,))
    np.testing.assert_allclose(strategy.gather(rows, axis=0).numpy(), x[0::2].reshape(-1))
    # A plain tensor cannot be summed over replicas (TF's ValueError); MEAN passes it through.
    try:
        strategy.reduce("SUM", tf.constant(1.0), axis=None)
        raise AssertionError("expected ValueError")
    except ValueError:
        pass
    assert float(strategy.reduce("MEAN", tf.constant(2.0), axis=None)) == 2.0

    # Per-replica assign_add (a metric's update): the changes of all replicas add up.
    @tf.function
    def count_rows(b):
        strategy.run(lambda bb: count.assign_add(tf.reduce_sum(bb[:, 0]) * 0.0 + tf.cast(tf.shape(bb)[0], tf.float32)), args=(b,))

    count_rows(batch)
    count_rows(batch)
    assert float(count.numpy()) == 32.0, count.numpy()
    assert count_rows.experimental_get_tracing_count() == 1

    # Aggregations of replica writes: MEAN of the values, replica 0's value, sync-on-read SUM of the
    # changes (even when every replica adds the same amount); no aggregation and different values: ValueError.
    def writes():
        r = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
        avg.assign(r)
        first.assign(r + 10.0)
        on_read.assign_add(1.0)

    strategy.run(writes)
    assert (float(avg.numpy()), float(first.numpy()), float(on_read.numpy())) == (3.5, 10.0, 8.0)
    try:
        strategy.run(lambda: plain.assign(tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)))
        raise AssertionError("expected ValueError")
    except ValueError as e:
        assert "aggregation" in str(e)
    assert float(plain.numpy()) == 0.0

    # distribute_datasets_from_function: one per-replica batch per replica, in order.
    def dataset_fn(ctx):
        assert ctx.num_replicas_in_sync == 8 and ctx.input_pipeline_id == 0
        return tf.data.Dataset.from_tensor_slices(x).batch(ctx.get_per_replica_batch_size(16))

    b2 = next(iter(strategy.distribute_datasets_from_function(dataset_fn)))
    np.testing.assert_array_equal(np.concatenate([t.numpy() for t in b2.values]), x[:16])

    # An uneven last batch is refused with a message that says what to do.
    uneven = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x[:12]).batch(12))
    try:
        next(iter(uneven))
        raise AssertionError("expected InvalidArgumentError")
    except tf.errors.InvalidArgumentError as e:
        assert "drop_remainder=True" in str(e)

    # Replicated variables stay replicated after a compiled step; compute_average_loss
    # without global_batch_size uses per-replica batch * replicas.
    @tf.function
    def step(b):
        def f(bb):
            with tf.GradientTape() as t:
                loss = tf.nn.compute_average_loss(tf.reduce_sum(bb * v[:2], axis=1))
            g = t.gradient(loss, v)
            v.assign_sub(g)
            return loss
        return strategy.reduce("SUM", strategy.run(f, args=(b,)), axis=None)

    loss = step(batch)
    np.testing.assert_allclose(float(loss), x.sum() / 16, rtol=1e-6)
    np.testing.assert_allclose(v.numpy(), [1.0 - x[:, 0].sum() / 16, 1.0 - x[:, 1].sum() / 16, 1.0], rtol=1e-6)
    assert v._v.sharding.spec == PartitionSpec()
    # The whole step, strategy.run included, is one compiled program: its jaxpr holds the shard_map.
    jaxpr = str(jax.make_jaxpr(lambda: step(batch))())
    assert "shard_map" in jaxpr or "shmap" in jaxpr
    # Optimizer slots created by the first apply_gradients (inside run, eagerly) are replicated too,
    # and the update equals the one-device SGD-with-momentum step on the global batch.
    with strategy.scope():
        u = tf.Variable(np.ones(2, np.float32))
        opt = tf.keras.optimizers.SGD(0.5, momentum=0.9)

    def opt_step(bb):
        with tf.GradientTape() as t:
            loss = tf.nn.compute_average_loss(tf.reduce_sum(bb * u, axis=1))
        opt.apply_gradients([(t.gradient(loss, u), u)])

    strategy.run(opt_step, args=(batch,))
    strategy.run(opt_step, args=(batch,))
    g = x[:16].mean(0)
    np.testing.assert_allclose(u.numpy(), 1.0 - 0.5 * g - (0.9 * 0.5 * g + 0.5 * g), rtol=1e-6)
    assert len(opt.variables) > 1 and int(opt.iterations.numpy()) == 2
    for sv in opt.variables:
        assert sv._v.sharding.spec == PartitionSpec() and len(sv._v.sharding.device_set) == 8, sv._v.sharding
    # A Keras layer built lazily inside strategy.run (eagerly, then as the first call of a compiled
    # step): its variables are created before the SPMD step runs, replicated, and the step gives
    # the one-device numbers (TF's too): per-example loss 18, gradient 6 for each weight.
    ones = np.ones((16, 3), np.float32)
    for compiled in (False, True):
        with strategy.scope():
            layer = tf.keras.layers.Dense(2, kernel_initializer="ones")
            sgd = tf.keras.optimizers.SGD(0.1)

        def lazy_step(bb):
            with tf.GradientTape() as t:
                loss = tf.nn.compute_average_loss(tf.reduce_sum(layer(bb) ** 2, axis=1))
            sgd.apply_gradients(zip(t.gradient(loss, layer.trainable_variables), layer.trainable_variables))
            return loss

        def lazy_run(b):
            return strategy.reduce("SUM", strategy.run(lazy_step, args=(b,)), axis=None)

        b1 = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(ones).batch(16))))
        total = (tf.function(lazy_run) if compiled else lazy_run)(b1)
        np.testing.assert_allclose(float(total), 18.0, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(layer.kernel), np.full((3, 2), 0.4), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(layer.bias), np.full(2, -0.6), rtol=1e-6)
        assert all(len(w._v.sharding.device_set) == 8 for w in layer.trainable_variables)

    # Two strategies over different devices: reading the other's variable is allowed (as in TF);
    # writing it is TF's RuntimeError, and the variable keeps its value.
    sa, sb = tf.distribute.MirroredStrategy(jax.devices()[:4]), tf.distribute.MirroredStrategy(jax.devices()[4:])
    with sa.scope():
        va = tf.Variable([1.0, 2.0])
    assert [t.numpy().tolist() for t in sb.run(lambda: va * 2.0).values] == [[2.0, 4.0]] * 4
    try:
        sb.run(lambda: va.assign_add([1.0, 1.0]))
        raise AssertionError("expected RuntimeError")
    except RuntimeError as e:
        assert "Mixing different tf.distribute.Strategy" in str(e), e
    assert va.numpy().tolist() == [1.0, 2.0]
    print("features OK")


if __name__ == "__main__" and len(sys.argv) == 2 and sys.argv[1] == "features":
    features()


def random_merge_programs() -> None:
    """Random merge_call programs on 4 replicas (hypothesis, deterministic): every cross-replica
    operation merge_fn can apply to a distributed argument, against NumPy on the stacked values."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    import tapejax as tf

    strategy = tf.distribute.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    assert n == 4, n

    @st.composite
    def programs(draw):
        shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
        dtype = draw(st.sampled_from([np.float32, np.int32]))
        data = np.array(draw(st.lists(st.integers(-5, 5), min_size=n * int(np.prod(shape)),
                                      max_size=n * int(np.prod(shape)))), dtype).reshape((n,) + shape)
        ops = [("sum", None), ("reduce_to_sum", None), ("local", None)]
        ops += [("sum", a) for a in range(len(shape))] + [("gather", a) for a in range(len(shape))]
        if dtype == np.float32:
            ops += [("mean", None), ("reduce_to_mean", None)] + [("mean", a) for a in range(len(shape))]
        op = draw(st.sampled_from(ops))
        return data, op, draw(st.booleans()), draw(st.booleans())

    def expected(data, op):
        kind, axis = op
        if kind in ("sum", "reduce_to_sum"):
            return data.sum(0) if axis is None else data.sum(0).sum(axis)
        if kind in ("mean", "reduce_to_mean"):
            return data.mean(0) if axis is None else data.sum(0).sum(axis) / (n * data.shape[axis + 1])
        if kind == "gather":
            return np.concatenate(list(data), axis=axis)
        return np.stack(list(data))

    @settings(max_examples=150, deadline=None, derandomize=True, database=None)
    @given(programs())
    def check(program):
        data, (kind, axis), by_keyword, compiled = program
        values = strategy.experimental_distribute_values_from_function(lambda ctx: data[ctx.replica_id_in_sync_group])

        def merge_fn(s, x):
            if kind == "sum":
                return s.reduce(tf.distribute.ReduceOp.SUM, x, axis=axis)
            if kind == "mean":
                return s.reduce(tf.distribute.ReduceOp.MEAN, x, axis=axis)
            if kind == "reduce_to_sum":
                return s.extended.reduce_to("SUM", x, destinations=None)
            if kind == "reduce_to_mean":
                return s.extended.batch_reduce_to("MEAN", [(x, None)])[0]
            if kind == "gather":
                return s.gather(x, axis=axis)
            return tf.stack(s.experimental_local_results(x))

        def fn(v):
            ctx = tf.distribute.get_replica_context()
            if by_keyword:
                return ctx.merge_call(lambda s, x=None: merge_fn(s, x), kwargs={"x": v})
            return ctx.merge_call(merge_fn, args=(v,))

        def step(vals):
            return strategy.run(fn, args=(vals,))

        out = (tf.function(step) if compiled else step)(values)
        want = expected(data, (kind, axis))
        for got in strategy.experimental_local_results(out):  # every replica gets the same result
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, err_msg=str((kind, axis, data.dtype)))

    check()
    print("random merge programs OK")


if __name__ == "__main__" and len(sys.argv) == 2 and sys.argv[1] == "random-merge":
    random_merge_programs()
