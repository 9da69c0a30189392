"""The seed tutorial's simple linear regression: learn y = 3x + 1 with a GradientTape.

Part 1 is the tutorial's loop as written (one sample per step, the variables
rebuilt from ``w - learning_rate * gradient``). Part 2 is the same fit the way
the tutorial's ``apply_gradients`` section suggests: a Keras optimizer updating
the variables in place, on mini-batches, inside a compiled ``tf.function`` step.
Both recover w ≈ 3 and b ≈ 1.

Run:  python examples/linear_regression.py [--samples 1000] [--plot weights.png]

``--plot FILE`` draws ``w`` and ``b`` over the tutorial loop's steps, as the tutorial does,
into an image file (needs matplotlib: ``pip install matplotlib``).
"""

from __future__ import annotations

import argparse

import tapejax as tf


def seed_loop(x_data: tf.Tensor, y_data: tf.Tensor, learning_rate: float = 0.01, history: list | None = None,
              report_every: int = 0) -> tuple[float, float]:
    """The tutorial's code: per-sample SGD, each step making new variables.

    ``history``, when given, receives ``(w, b)`` after every step (the tutorial's ``w_list``
    and ``b_list``); ``report_every`` prints a progress line every that many steps.
    """
    w = tf.Variable(-1.0)
    b = tf.Variable(-1.0)
    n = int(x_data.shape[0])
    for step, (x, y) in enumerate(zip(x_data, y_data), start=1):
        with tf.GradientTape() as tape:
            predictions = x * w + b
            loss = tf.pow((predictions - y), 2)
        gradients = tape.gradient(loss, [w, b])
        w = tf.Variable(w - learning_rate * gradients[0])
        b = tf.Variable(b - learning_rate * gradients[1])
        if history is not None:
            history.append((float(w.numpy()), float(b.numpy())))
        if report_every and (step % report_every == 0 or step == n):
            print(f"  step {step}/{n}: w = {float(w.numpy()):.4f}, b = {float(b.numpy()):.4f}", flush=True)
    return float(w.numpy()), float(b.numpy())


def plot_history(history: list, path: str) -> bool:
    """The tutorial's figure (w and b over the steps) saved to ``path``; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # a file, no window
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install matplotlib): no plot written")
        return False
    fig, ax = plt.subplots(2, figsize=(10, 5))
    ax[0].plot([w for w, _ in history])
    ax[0].set_xlabel("weight")
    ax[1].plot([b for _, b in history])
    ax[1].set_xlabel("bias")
    fig.subplots_adjust(hspace=0.3)
    fig.savefig(path)
    plt.close(fig)
    return True


def optimizer_loop(x_data: tf.Tensor, y_data: tf.Tensor, epochs: int = 10, batch_size: int = 50,
                   verbose: bool = True) -> tuple[float, float, float]:
    """The same model with ``tf.keras.optimizers.SGD`` and a compiled step."""
    w = tf.Variable(-1.0)
    b = tf.Variable(-1.0)
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
    mse = tf.keras.losses.MeanSquaredError()

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = mse(y, x * w + b)
        gradients = tape.gradient(loss, [w, b])
        optimizer.apply_gradients(zip(gradients, [w, b]))
        return loss

    n = int(x_data.shape[0])
    loss = tf.constant(0.0)
    for epoch in range(epochs):
        for i in range(0, n - batch_size + 1, batch_size):
            loss = train_step(x_data[i:i + batch_size], y_data[i:i + batch_size])
        if verbose:
            print(f"Epoch {epoch + 1}/{epochs} - loss: {float(loss):.6f} - w: {float(w.numpy()):.4f} - b: {float(b.numpy()):.4f}")
    return float(w.numpy()), float(b.numpy()), float(loss)


def main(samples: int = 1000, epochs: int = 5, seed: int = 0, verbose: bool = True, plot: str | None = None) -> dict:
    """Fit y = 3x + 1 both ways; returns the learned parameters (and, with ``plot``, writes the figure)."""
    tf.random.set_seed(seed)
    x_data = tf.random.normal(shape=(samples,), dtype=tf.float32)
    y_data = 3 * x_data + 1  # 3x + 1

    history: list = []
    w1, b1 = seed_loop(x_data, y_data, history=history, report_every=max(samples // 5, 1) if verbose else 0)
    plotted = plot_history(history, plot) if plot else False
    if verbose and plotted:
        print(f"plot of w and b over {len(history)} steps written to {plot}")
    if verbose:
        print(f"tutorial loop ({samples} single-sample steps): w = {w1:.4f}, b = {b1:.4f}")
    w2, b2, loss = optimizer_loop(x_data, y_data, epochs=epochs, verbose=verbose)
    if verbose:
        print(f"optimizer loop (SGD, compiled step): w = {w2:.4f}, b = {b2:.4f}, final loss {loss:.2e}")
    return {"w": w1, "b": b1, "w_optimizer": w2, "b_optimizer": b2, "loss_optimizer": loss, "history": history,
            "plotted": plotted}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--plot", metavar="FILE", help="save the tutorial's plot of w and b to FILE (needs matplotlib)")
    args = parser.parse_args()
    main(samples=args.samples, epochs=args.epochs, plot=args.plot)
