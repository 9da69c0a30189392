"""``python -m tapejax``: the seed tutorials' headline examples, printed TF-style."""

from __future__ import annotations

import jax

import tapejax as tf


def main() -> None:
    print(f"tapejax {tf.__version__} on JAX {jax.__version__}, device: {jax.devices()[0]} ({jax.default_backend()})")
    print()

    print("1. dy/dx of y = x**2 at x = 3")
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    print("   dy/dx =", g.gradient(y, x))

    print("2. a second derivative with nested tapes")
    with tf.GradientTape() as g:
        g.watch(x)
        with tf.GradientTape() as gg:
            gg.watch(x)
            y = x * x
        dy_dx = gg.gradient(y, x)
    print("   dy/dx =", dy_dx, "  d2y/dx2 =", g.gradient(dy_dx, x))

    print("3. a persistent tape answers twice")
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
        z = y * y
    print("   dz/dx =", g.gradient(z, x), "  dy/dx =", g.gradient(y, x))

    print("4. the gradient with respect to an intermediate")
    x = tf.ones((2, 2))
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(x)
        z = tf.multiply(y, y)
    print("   dz/dy =", t.gradient(z, y))

    print("5. unconnected sources: NONE vs ZERO")
    a = tf.Variable([2.0, 2.0])
    b = tf.Variable(3.0)
    with tf.GradientTape(persistent=True) as t:
        z = b**2
    print("   NONE:", t.gradient(z, a))
    print("   ZERO:", t.gradient(z, a, unconnected_gradients=tf.UnconnectedGradients.ZERO))
    del t

    out = tf.constant(0.0)
    print()
    print(f"ran on {out.device}; compiled replays cached: {tf.replay_cache_info().size}")


if __name__ == "__main__":
    main()
