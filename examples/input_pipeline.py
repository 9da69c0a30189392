"""A `tf.data` input pipeline feeding a compiled training step.

The pipeline is the one TF's tutorials build: slices of NumPy arrays, cached,
shuffled through a buffer (a new order every epoch), batched, augmented by a
``map`` with random noise (compiled once, fresh noise per batch) and prefetched on a
background thread while the step runs. The step is a ``tf.function`` called once per
batch: every batch has the same shape (``drop_remainder=True``), so it traces once.

Run:  python examples/input_pipeline.py [--epochs 10]
"""

from __future__ import annotations

import argparse

import numpy as np

import tapejax as tf


def make_data(samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two noisy interleaved half-moons: a problem a linear model cannot solve."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.0, np.pi, samples)
    label = rng.integers(0, 2, samples)
    x = np.where(label[:, None] == 0, np.c_[np.cos(t), np.sin(t)], np.c_[1.0 - np.cos(t), 0.5 - np.sin(t)])
    x = x + rng.normal(scale=0.1, size=x.shape)
    return x.astype(np.float32), label.astype(np.int32)


def pipeline(x: np.ndarray, y: np.ndarray, batch_size: int, seed: int) -> tf.data.Dataset:
    def augment(features, labels):
        return features + tf.random.normal(tf.shape(features), stddev=0.02), labels

    return (tf.data.Dataset.from_tensor_slices((x, y))
            .cache()
            .shuffle(len(x), seed=seed)
            .batch(batch_size, drop_remainder=True)
            .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE))


def main(samples: int = 1024, epochs: int = 30, batch_size: int = 64, seed: int = 0, verbose: bool = True) -> dict:
    tf.random.set_seed(seed)
    x, y = make_data(samples, seed)
    ds = pipeline(x, y, batch_size, seed)

    hidden = 32
    w1 = tf.Variable(tf.random.normal((2, hidden), stddev=1.0))
    b1 = tf.Variable(tf.zeros((hidden,)))
    w2 = tf.Variable(tf.random.normal((hidden, 2), stddev=0.1))
    b2 = tf.Variable(tf.zeros((2,)))
    params = [w1, b1, w2, b2]

    def logits_of(features):
        return tf.matmul(tf.nn.relu(tf.matmul(features, w1) + b1), w2) + b2

    @tf.function
    def train_step(features, labels):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                                 logits=logits_of(features)))
        for p, g in zip(params, tape.gradient(loss, params)):
            p.assign_sub(0.5 * g)
        return loss

    steps = 0
    loss = tf.constant(0.0)
    for epoch in range(epochs):
        for features, labels in ds:
            loss = train_step(features, labels)
            steps += 1
        if verbose and (epoch + 1) % 10 == 0:
            print(f"Epoch {epoch + 1}/{epochs} - loss: {float(loss):.4f}")
    accuracy = float(np.mean(np.argmax(logits_of(tf.constant(x)).numpy(), axis=1) == y))
    if verbose:
        print(f"{steps} steps, {train_step.experimental_get_tracing_count()} trace(s), accuracy {accuracy:.4f}")
    return {"accuracy": accuracy, "loss": float(loss), "steps": steps,
            "traces": train_step.experimental_get_tracing_count()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--samples", type=int, default=1024)
    args = parser.parse_args()
    main(samples=args.samples, epochs=args.epochs)
