"""Programs the tf.distribute tests run in subprocesses (each needs its own JAX/TF device setup).

``python tests/_distribute_programs.py MODE OUT.npz``; MODE:
- ``tapejax-N``: the canonical custom training loop with ``tapejax`` on a MirroredStrategy of N replicas
  (N=1: OneDeviceStrategy); run with XLA_FLAGS giving N host devices.
- ``tf-N``: the same loop with real TensorFlow on N logical CPU devices (the oracle).
- ``worker``: a MultiWorkerMirroredStrategy from TF_CONFIG (one JAX device per process).
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
        return loss

    @tf.function
    def distributed_train_step(inputs):
        per_replica_losses = strategy.run(train_step, args=(inputs,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

    losses = []
    for _ in range(EPOCHS):
        for inputs in dist:
            losses.append(float(distributed_train_step(inputs)))
    out = {"losses": np.array(losses), "a": a.numpy(), "b": b.numpy(), "c": c.numpy(),
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


def main(mode: str, path: str) -> None:
    if mode.startswith("tf-"):
        import tensorflow as tf

        n = int(mode[3:])
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
        devs = [f"/cpu:{i}" for i in range(n)]
        strategy = tf.distribute.MirroredStrategy(devs) if n > 1 else tf.distribute.OneDeviceStrategy("/cpu:0")
        out = loop(tf, strategy, tf.keras.optimizers, build=True)
    elif mode == "worker":
        import tapejax as tf

        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        out = loop(tf, strategy, tf.keras.optimizers)
        out["process_count"] = __import__("jax").process_count()
    else:
        import tapejax as tf

        n = int(mode.split("-")[1])
        strategy = tf.distribute.MirroredStrategy() if n > 1 else tf.distribute.OneDeviceStrategy("/cpu:0")
        assert strategy.num_replicas_in_sync == n, strategy
        out = loop(tf, strategy, tf.keras.optimizers, timing=os.environ.get("DIST_TIMING") == "1")
    np.savez(path, **out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
