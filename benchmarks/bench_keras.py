"""Benchmark: a Conv2D classifier's ``fit`` step, tapejax.keras vs an equivalent ``jax.jit`` step (issue 16).

Run as a script from the repository root:

    python benchmarks/bench_keras.py            # batch 64, 28x28x1 images
    python benchmarks/bench_keras.py --quick    # fewer repeats

Both sides train the same Keras 3 model (same weights, Adam, sparse categorical
cross-entropy), on Keras's JAX backend:

* ``tapejax.function``: the step ``model.fit`` runs (``model.make_train_function()``:
  TF's ``train_step`` with a ``GradientTape``, ``optimizer.apply_gradients`` and the
  loss tracker, compiled with ``tapejax.function``), called on one batch.
* ``jax.jit``: ``jax.value_and_grad`` of the model's ``stateless_call`` and the loss,
  then ``optax.adam``, in one ``jax.jit`` function threading the state.
* ``fit``: ``model.fit`` over 16 batches (the loop, callbacks and the progress
  bar off), per step.

Every figure is the median over repeats of runs of back-to-back steps (after
warm-up), each run blocked on its last loss; milliseconds per step. The two
compiled steps are timed alternately, and the ratio tapejax.function / jax.jit
(the issue's goal: within 1.2x) is the median of the per-repeat ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import tapejax as tf  # noqa: E402


def make_model(seed: int = 0):
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)),
        layers.Conv2D(16, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(32, 3, activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(10),
    ])
    rng = np.random.default_rng(seed)
    model.set_weights([(0.1 * rng.standard_normal(w.shape)).astype(np.float32) for w in model.get_weights()])
    return model


def _run(step, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        out = step()
    np.asarray(out)
    return (time.perf_counter() - t0) / steps * 1e3


def timed_pair(a, b, steps: int, repeats: int, warmup: int) -> tuple[float, float, float]:
    """Median ms/step of ``a`` and ``b``, timed alternately (a shared machine's load hits both alike),
    and the median of the per-repeat ratios a/b."""
    for _ in range(warmup):
        a(), b()
    ta, tb = [], []
    for _ in range(repeats):
        ta.append(_run(a, steps))
        tb.append(_run(b, steps))
    return statistics.median(ta), statistics.median(tb), statistics.median(x / y for x, y in zip(ta, tb))


def main(batch: int = 64, steps: int = 20, repeats: int = 11, warmup: int = 3) -> dict:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, batch).astype(np.int32)

    # tapejax: the step fit runs.
    model = make_model()
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0)  # builds everything, traces the step
    train = model.make_train_function()
    data = (tf.constant(x), tf.constant(y))

    # jax.jit: the same model through Keras's stateless_call, optax.adam.
    ref = make_model()
    tv = [jnp.asarray(v.numpy()) for v in ref.trainable_variables]
    ntv = [jnp.asarray(v.numpy()) for v in ref.non_trainable_variables]
    tx = optax.adam(1e-3, eps=1e-7)
    opt_state = tx.init(tv)

    def loss_fn(tv, ntv, x, y):
        logits, ntv = ref.stateless_call(tv, ntv, x, training=True)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), ntv

    @jax.jit
    def jit_step(tv, ntv, opt_state, x, y):
        (loss, ntv), g = jax.value_and_grad(loss_fn, has_aux=True)(tv, ntv, x, y)
        updates, opt_state = tx.update(g, opt_state, tv)
        return optax.apply_updates(tv, updates), ntv, opt_state, loss

    state = [tv, ntv, opt_state]
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    def jstep():
        state[0], state[1], state[2], loss = jit_step(state[0], state[1], state[2], xj, yj)
        return loss

    t_tape, t_jit, ratio = timed_pair(lambda: train(data)["loss"], jstep, steps, repeats, warmup)

    # model.fit itself, per step (16 batches, no callbacks output).
    xs, ys = np.concatenate([x] * 16), np.concatenate([y] * 16)
    fit_runs = []
    for _ in range(max(3, repeats // 2)):
        t0 = time.perf_counter()
        model.fit(xs, ys, batch_size=batch, epochs=1, verbose=0, shuffle=False)
        fit_runs.append((time.perf_counter() - t0) / 16)
    t_fit = statistics.median(fit_runs) * 1e3

    out = {"tapejax.function": t_tape, "jax.jit": t_jit, "fit": t_fit, "ratio": ratio,
           "device": jax.devices()[0].platform}
    print(f"conv classifier train step, batch {batch}, 28x28x1, on {out['device']}:")
    print(f"  tapejax.function (fit's step)  {t_tape:8.3f} ms")
    print(f"  jax.jit (stateless_call+optax) {t_jit:8.3f} ms")
    print(f"  model.fit, per step            {t_fit:8.3f} ms")
    print(f"  ratio tapejax.function / jax.jit (median of alternating runs): {out['ratio']:.2f}x")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args()
    if a.quick:
        main(batch=a.batch, steps=10, repeats=3, warmup=2)
    else:
        main(batch=a.batch)
