"""An MLP classifier trained with a custom GradientTape loop, eagerly and with tapejax.function.

The TF 2 custom-training-loop pattern, unchanged but for the import:

    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = loss_fn(y, logits)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))

Data: a synthetic 10-class problem (Gaussian clusters in 16 dimensions). The
loop runs twice: eagerly (every op dispatched from Python, gradients replayed
compiled) and as a compiled step (``@tf.function``: tape, gradient and Adam
update in one XLA program). Prints a Keras-style line per epoch and the device
it ran on.

Run:  python examples/mlp_classifier.py [--epochs 8] [--samples 2000] [--mode both|eager|function]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import tapejax as tf

NUM_CLASSES = 10
FEATURES = 16


def make_data(samples: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian clusters: class k is centred at a random point, unit noise around it."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=2.5, size=(NUM_CLASSES, FEATURES))
    y = rng.integers(0, NUM_CLASSES, size=samples)
    x = centers[y] + rng.normal(size=(samples, FEATURES))
    return x.astype(np.float32), y.astype(np.int32)


def make_model() -> tf.keras.Model:
    return tf.keras.Sequential([
        tf.keras.Input(shape=(FEATURES,)),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dropout(0.1),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(NUM_CLASSES),
    ])


def train(x: np.ndarray, y: np.ndarray, epochs: int, batch_size: int, compiled: bool, seed: int = 0,
          verbose: bool = True) -> dict:
    tf.keras.utils.set_random_seed(seed)
    model = make_model()
    optimizer = tf.keras.optimizers.Adam(learning_rate=3e-3)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    train_loss = tf.keras.metrics.Mean(name="loss")
    train_acc = tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")

    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            logits = model(xb, training=True)
            loss = loss_fn(yb, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        train_loss.update_state(loss)
        train_acc.update_state(yb, logits)
        return loss

    step = tf.function(train_step) if compiled else train_step
    rng = np.random.default_rng(seed)
    n = len(x)
    start = time.perf_counter()
    for epoch in range(epochs):
        train_loss.reset_state()
        train_acc.reset_state()
        order = rng.permutation(n)
        # Whole batches only: every compiled call then has the same shapes (one trace).
        for i in range(0, n - batch_size + 1, batch_size):
            idx = order[i:i + batch_size]
            step(tf.constant(x[idx]), tf.constant(y[idx]))
        if verbose:
            print(f"Epoch {epoch + 1}/{epochs} - loss: {float(train_loss.result()):.4f} - "
                  f"accuracy: {float(train_acc.result()):.4f}")
    seconds = time.perf_counter() - start

    # Training accuracy of the final model, in inference mode (no dropout), batch by batch.
    final_acc = tf.keras.metrics.SparseCategoricalAccuracy()
    for i in range(0, n, batch_size):
        final_acc.update_state(tf.constant(y[i:i + batch_size]), model(tf.constant(x[i:i + batch_size]), training=False))
    return {
        "accuracy": float(final_acc.result()),
        "loss": float(train_loss.result()),
        "seconds": seconds,
        "steps": int(optimizer.iterations),
        "traces": step.experimental_get_tracing_count() if compiled else 0,
        "device": model.trainable_variables[0].device,
    }


def main(epochs: int = 8, samples: int = 2000, batch_size: int = 64, mode: str = "both", verbose: bool = True) -> dict:
    """Train eagerly and/or compiled; returns the final metrics of each run."""
    x, y = make_data(samples)
    results: dict = {}
    for name, compiled in (("eager", False), ("function", True)):
        if mode not in ("both", name):
            continue
        if verbose:
            print(f"--- {name} training ({'tapejax.function' if compiled else 'eager'}) ---")
        r = train(x, y, epochs, batch_size, compiled, verbose=verbose)
        if verbose:
            print(f"{name}: training accuracy {r['accuracy']:.4f} in {r['seconds']:.1f}s "
                  f"({r['steps']} steps) on {r['device']}")
        results[name] = r
    results["device"] = next(iter(r["device"] for r in results.values() if isinstance(r, dict)))
    results["backend"] = jax.default_backend()
    if verbose:
        kind = jax.devices()[0].device_kind
        detail = results["backend"] if kind.lower() == results["backend"] else f"{results['backend']}, {kind}"
        print(f"ran on {results['device']} (JAX backend: {detail})")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--mode", choices=["both", "eager", "function"], default="both")
    args = parser.parse_args()
    main(epochs=args.epochs, samples=args.samples, batch_size=args.batch_size, mode=args.mode)
