"""A Conv2D classifier trained with ``model.fit``, as in TF's Keras tutorials.

    model = tf.keras.Sequential([tf.keras.Input((12, 12, 1)),
                                 tf.keras.layers.Conv2D(8, 3, activation="relu"), ...])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, validation_data=(xv, yv), epochs=3, callbacks=[EarlyStopping(...)])

The layers are Keras 3's, on its JAX backend; each layer call is one op on
tapejax's tape, and ``fit`` runs TensorFlow's ``train_step`` (a
``GradientTape`` and ``optimizer.apply_gradients``) compiled with
``tf.function``. The data: 12x12 images holding a horizontal bar, a vertical
bar or a diagonal, in noise; three classes.

Run:  python examples/conv_classifier.py [--epochs 3]
"""

from __future__ import annotations

import argparse

import numpy as np

import tapejax as tf


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = 0.3 * rng.standard_normal((n, 12, 12, 1)).astype(np.float32)
    y = rng.integers(0, 3, n).astype(np.int32)
    for i in range(n):
        k = rng.integers(2, 10)
        if y[i] == 0:
            x[i, k, 2:10, 0] += 1.0
        elif y[i] == 1:
            x[i, 2:10, k, 0] += 1.0
        else:
            x[i, np.arange(2, 10), np.arange(2, 10), 0] += 1.0
    return x, y


def make_model() -> tf.keras.Model:
    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input((12, 12, 1)),
        layers.Conv2D(8, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(16, 3, activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dropout(0.1),
        layers.Dense(3, activation="softmax"),
    ])


def main(epochs: int = 3, samples: int = 768, verbose: bool = True) -> dict:
    tf.keras.utils.set_random_seed(0)
    x, y = make_data(samples, seed=1)
    xv, yv = make_data(256, seed=2)
    model = make_model()
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    history = model.fit(x, y, batch_size=32, epochs=epochs, validation_data=(xv, yv), verbose=2 if verbose else 0,
                        callbacks=[tf.keras.callbacks.EarlyStopping(monitor="val_loss", patience=2)])
    loss, accuracy = model.evaluate(xv, yv, verbose=0)
    predicted = model.predict(xv[:8], verbose=0).argmax(-1)
    if verbose:
        print(f"validation accuracy {accuracy:.3f}; predicted {predicted.tolist()}, true {yv[:8].tolist()}")
    return {"history": history.history, "val_loss": loss, "val_accuracy": accuracy,
            "predicted": predicted, "true": yv[:8]}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    main(epochs=p.parse_args().epochs)
