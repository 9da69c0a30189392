"""A GAN training step with two tapes, as in TF's DCGAN tutorial, on 1-D data.

    with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
        generated = generator(noise, training=True)
        real_output = discriminator(real, training=True)
        fake_output = discriminator(generated, training=True)
        gen_loss = generator_loss(fake_output)
        disc_loss = discriminator_loss(real_output, fake_output)
    gen_grads = gen_tape.gradient(gen_loss, generator.trainable_variables)
    disc_grads = disc_tape.gradient(disc_loss, discriminator.trainable_variables)

Both tapes record the same forward pass; each is asked for the gradient of its
own loss with respect to its own network. The first step's gradients are
checked against ``jax.grad`` of the same losses written as pure JAX functions.
Then the step is compiled with ``tf.function`` and the generator learns to
imitate samples from N(4, 1.25^2). Noise is drawn with ``tf.keras.random.normal``
from a ``SeedGenerator`` (state in a variable), so each compiled call draws anew.

Run:  python examples/gan_step.py [--steps 600]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import tapejax as tf

NOISE_DIM = 4
REAL_MEAN, REAL_STD = 4.0, 1.25


def make_generator() -> tf.keras.Model:
    return tf.keras.Sequential([tf.keras.Input(shape=(NOISE_DIM,)), tf.keras.layers.Dense(16, activation="relu"),
                                tf.keras.layers.Dense(1)])


def make_discriminator() -> tf.keras.Model:
    return tf.keras.Sequential([tf.keras.Input(shape=(1,)), tf.keras.layers.Dense(16, activation="relu"),
                                tf.keras.layers.Dense(1)])


cross_entropy = tf.keras.losses.BinaryCrossentropy(from_logits=True)


def discriminator_loss(real_output: tf.Tensor, fake_output: tf.Tensor) -> tf.Tensor:
    real_loss = cross_entropy(tf.ones_like(real_output), real_output)
    fake_loss = cross_entropy(tf.zeros_like(fake_output), fake_output)
    return real_loss + fake_loss


def generator_loss(fake_output: tf.Tensor) -> tf.Tensor:
    return cross_entropy(tf.ones_like(fake_output), fake_output)


def two_tape_gradients(generator, discriminator, real, noise) -> tuple:
    with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
        generated = generator(noise, training=True)
        real_output = discriminator(real, training=True)
        fake_output = discriminator(generated, training=True)
        gen_loss = generator_loss(fake_output)
        disc_loss = discriminator_loss(real_output, fake_output)
    gen_grads = gen_tape.gradient(gen_loss, generator.trainable_variables)
    disc_grads = disc_tape.gradient(disc_loss, discriminator.trainable_variables)
    return gen_loss, disc_loss, gen_grads, disc_grads


# ---- the same losses in pure JAX (the reference for the first step) ------------------------


def _mlp(params: list, x: jax.Array) -> jax.Array:
    k1, b1, k2, b2 = params
    return jax.nn.relu(x @ k1 + b1) @ k2 + b2


def _bce_logits(labels: jax.Array, logits: jax.Array) -> jax.Array:
    return jnp.mean(jnp.maximum(logits, 0) - logits * labels + jnp.log1p(jnp.exp(-jnp.abs(logits))))


def _gen_loss_jax(g_params: list, d_params: list, noise: jax.Array) -> jax.Array:
    fake = _mlp(d_params, _mlp(g_params, noise))
    return _bce_logits(jnp.ones_like(fake), fake)


def _disc_loss_jax(d_params: list, g_params: list, real: jax.Array, noise: jax.Array) -> jax.Array:
    real_out = _mlp(d_params, real)
    fake_out = _mlp(d_params, _mlp(g_params, noise))
    return _bce_logits(jnp.ones_like(real_out), real_out) + _bce_logits(jnp.zeros_like(fake_out), fake_out)


def main(steps: int = 600, batch_size: int = 64, learning_rate: float = 2e-3, seed: int = 0, verbose: bool = True) -> dict:
    """Check one two-tape step against JAX, then train; returns the errors and the learned statistics."""
    tf.keras.utils.set_random_seed(seed)
    generator, discriminator = make_generator(), make_discriminator()
    gen_opt = tf.keras.optimizers.Adam(learning_rate, beta_1=0.5)
    disc_opt = tf.keras.optimizers.Adam(learning_rate, beta_1=0.5)
    noise_gen = tf.keras.random.SeedGenerator(seed)
    rng = np.random.default_rng(seed)

    def real_batch() -> tf.Tensor:
        return tf.constant(rng.normal(REAL_MEAN, REAL_STD, size=(batch_size, 1)).astype(np.float32))

    # 1. One step's gradients against jax.grad of the same losses.
    real = real_batch()
    noise = tf.keras.random.normal((batch_size, NOISE_DIM), seed=noise_gen)
    _, _, gen_grads, disc_grads = two_tape_gradients(generator, discriminator, real, noise)
    g_params = [jnp.asarray(v.numpy()) for v in generator.trainable_variables]
    d_params = [jnp.asarray(v.numpy()) for v in discriminator.trainable_variables]
    gen_ref = jax.jit(jax.grad(_gen_loss_jax))(g_params, d_params, jnp.asarray(noise.numpy()))
    disc_ref = jax.jit(jax.grad(_disc_loss_jax))(d_params, g_params, jnp.asarray(real.numpy()), jnp.asarray(noise.numpy()))
    grad_error = max(
        float(np.max(np.abs(a.numpy() - np.asarray(b))) / (np.max(np.abs(np.asarray(b))) + 1e-12))
        for a, b in zip(list(gen_grads) + list(disc_grads), list(gen_ref) + list(disc_ref))
    )

    # 2. Train with the step compiled. Building the optimizers first (their state variables
    # exist before the first call) lets the first call trace at once instead of running eagerly.
    gen_opt.build(generator.trainable_variables)
    disc_opt.build(discriminator.trainable_variables)

    @tf.function
    def train_step(real):
        noise = tf.keras.random.normal((batch_size, NOISE_DIM), seed=noise_gen)
        gen_loss, disc_loss, gen_grads, disc_grads = two_tape_gradients(generator, discriminator, real, noise)
        gen_opt.apply_gradients(zip(gen_grads, generator.trainable_variables))
        disc_opt.apply_gradients(zip(disc_grads, discriminator.trainable_variables))
        return gen_loss, disc_loss

    d_loss = g_loss = float("nan")
    report_every = max(steps // 6, 1)
    for step in range(steps):
        g, d = train_step(real_batch())
        if (step + 1) % report_every == 0 or step + 1 == steps:
            g_loss, d_loss = float(g), float(d)
            if verbose:
                print(f"Step {step + 1}/{steps} - gen_loss: {g_loss:.4f} - disc_loss: {d_loss:.4f}")

    # 2048 generated samples, drawn in batches of the training shape (already compiled).
    samples = np.concatenate([generator(tf.keras.random.normal((batch_size, NOISE_DIM), seed=noise_gen)).numpy()
                              for _ in range(max(2048 // batch_size, 1))])
    results = {
        "grad_error": grad_error,
        "fake_mean": float(samples.mean()),
        "fake_std": float(samples.std()),
        "gen_loss": g_loss,
        "disc_loss": d_loss,
        "traces": train_step.experimental_get_tracing_count(),
    }
    if verbose:
        print(f"two-tape gradients vs jax.grad: max relative error {grad_error:.2e}")
        print(f"generated samples: mean {results['fake_mean']:.3f} (real {REAL_MEAN}), std {results['fake_std']:.3f} (real {REAL_STD})")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    main(steps=args.steps, batch_size=args.batch_size)
