"""Physics with nested tapes: forces, a Hessian, and a gradient through a numerical solver.

A small 2-D Lennard-Jones cluster, E(x) = sum over pairs 4 eps ((sigma/r)^12 - (sigma/r)^6):

1. Forces F = -dE/dx from one tape. Newton's third law makes them sum to zero.
2. The Hessian d2E/dx2 from nested tapes (``outer.jacobian(inner.gradient(E, x), x)``);
   it is symmetric, and translation invariance makes every block row sum to zero.
3. A velocity-Verlet integrator whose forces come from an inner tape at every
   step, recorded on an outer tape that watches sigma: the outer gradient is the
   sensitivity of the trajectory (its mean squared displacement) to sigma,
   differentiated through the whole solver, second derivatives included.

Every result is checked against the same computation written as a pure JAX
function and differentiated with ``jax.grad``/``jax.hessian``.

Run:  python examples/physics.py [--steps 40]
"""

from __future__ import annotations

import argparse
import itertools

import jax
import jax.numpy as jnp
import numpy as np

import tapejax as tf

EPS = 1.0


def initial_cluster(n: int = 5, seed: int = 0) -> np.ndarray:
    """Atoms near the sites of a triangular lattice (spacing near the LJ minimum), slightly jiggled."""
    rng = np.random.default_rng(seed)
    sites = np.array([[0.0, 0.0], [1.12, 0.0], [0.56, 0.97], [-0.56, 0.97], [-1.12, 0.0], [-0.56, -0.97], [0.56, -0.97]])
    return (sites[:n] + rng.normal(scale=0.03, size=(n, 2))).astype(np.float32)


def pair_matrix(n: int) -> np.ndarray:
    """D with one row per pair i < j: (D @ x)[p] = x_i - x_j (a constant, so gradients stay dense)."""
    pairs = list(itertools.combinations(range(n), 2))
    d = np.zeros((len(pairs), n), np.float32)
    for p, (i, j) in enumerate(pairs):
        d[p, i], d[p, j] = 1.0, -1.0
    return d


# ---- the model, written TF-style -------------------------------------------------------


def energy(x: tf.Tensor, sigma: tf.Tensor, pairs: tf.Tensor) -> tf.Tensor:
    diff = tf.matmul(pairs, x)
    r2 = tf.reduce_sum(diff * diff, axis=-1)
    inv6 = (sigma * sigma / r2) ** 3
    return tf.reduce_sum(4.0 * EPS * (inv6 * inv6 - inv6))


def forces(x: tf.Tensor, sigma: tf.Tensor, pairs: tf.Tensor) -> tf.Tensor:
    with tf.GradientTape() as tape:
        tape.watch(x)
        e = energy(x, sigma, pairs)
    return -tape.gradient(e, x)


def verlet(x: tf.Tensor, v: tf.Tensor, sigma: tf.Tensor, pairs: tf.Tensor, steps: int, dt: float) -> tuple:
    """Velocity Verlet (unit masses); each force evaluation is a tape of its own."""
    f = forces(x, sigma, pairs)
    for _ in range(steps):
        v_half = v + 0.5 * dt * f
        x = x + dt * v_half
        f = forces(x, sigma, pairs)
        v = v_half + 0.5 * dt * f
    return x, v


# ---- the same model in pure JAX (the reference) ------------------------------------------


def energy_jax(x: jax.Array, sigma: jax.Array, pairs: jax.Array) -> jax.Array:
    diff = pairs @ x
    r2 = jnp.sum(diff * diff, axis=-1)
    inv6 = (sigma * sigma / r2) ** 3
    return jnp.sum(4.0 * EPS * (inv6 * inv6 - inv6))


def msd_jax(sigma: jax.Array, x0: jax.Array, v0: jax.Array, pairs: jax.Array, steps: int, dt: float) -> jax.Array:
    force = jax.grad(lambda x: -energy_jax(x, sigma, pairs))
    x, v = x0, v0
    f = force(x)
    for _ in range(steps):
        v_half = v + 0.5 * dt * f
        x = x + dt * v_half
        f = force(x)
        v = v_half + 0.5 * dt * f
    return jnp.mean((x - x0) ** 2)


def main(atoms: int = 5, steps: int = 40, dt: float = 0.005, verbose: bool = True) -> dict:
    """Forces, Hessian and a solver sensitivity, each checked against pure JAX; returns the errors."""
    x0_np = initial_cluster(atoms)
    pairs_np = pair_matrix(atoms)
    x0, pairs = tf.constant(x0_np), tf.constant(pairs_np)
    sigma = tf.constant(1.0)
    v0_np = np.random.default_rng(1).normal(scale=0.3, size=x0_np.shape).astype(np.float32)
    v0_np -= v0_np.mean(axis=0)  # no drift of the centre of mass
    v0 = tf.constant(v0_np)

    def progress(msg: str) -> None:
        if verbose:
            print(msg, flush=True)

    # 1. Forces.
    progress("[1/3] forces from one tape...")
    f = forces(x0, sigma, pairs)
    # The references are jitted: JAX's op-by-op mode is slow for jax.hessian.
    f_ref = -jax.jit(jax.grad(energy_jax))(jnp.asarray(x0_np), 1.0, jnp.asarray(pairs_np))
    force_error = float(np.max(np.abs(f.numpy() - np.asarray(f_ref))) / np.max(np.abs(np.asarray(f_ref))))
    net_force = float(np.max(np.abs(f.numpy().sum(axis=0))))

    # 2. The Hessian from nested tapes.
    progress("[2/3] Hessian from nested tapes (jacobian of a gradient)...")
    with tf.GradientTape() as outer:
        outer.watch(x0)
        with tf.GradientTape() as inner:
            inner.watch(x0)
            e = energy(x0, sigma, pairs)
        g = inner.gradient(e, x0)
    h = outer.jacobian(g, x0).numpy().reshape(2 * atoms, 2 * atoms)
    h_ref = np.asarray(jax.jit(jax.hessian(energy_jax))(jnp.asarray(x0_np), 1.0, jnp.asarray(pairs_np))).reshape(2 * atoms, 2 * atoms)
    scale = np.max(np.abs(h_ref))
    hessian_error = float(np.max(np.abs(h - h_ref)) / scale)
    hessian_asymmetry = float(np.max(np.abs(h - h.T)) / scale)
    translation_residual = float(np.max(np.abs(h.reshape(2 * atoms, atoms, 2).sum(axis=1))) / scale)

    # 3. Through the solver: d(mean squared displacement)/d(sigma), nested tapes in every step.
    progress(f"[3/3] gradient through {steps} Verlet steps...")
    with tf.GradientTape() as tape:
        tape.watch(sigma)
        x_t, v_t = verlet(x0, v0, sigma, pairs, steps, dt)
        msd = tf.reduce_mean(tf.square(x_t - x0))
    dmsd = float(tape.gradient(msd, sigma).numpy())
    dmsd_ref_fn = jax.jit(jax.grad(msd_jax), static_argnums=(4, 5))
    dmsd_ref = float(dmsd_ref_fn(jnp.float32(1.0), jnp.asarray(x0_np), jnp.asarray(v0_np), jnp.asarray(pairs_np), steps, dt))
    solver_grad_error = abs(dmsd - dmsd_ref) / abs(dmsd_ref)

    # The integrator itself: total energy is (nearly) conserved.
    e0 = float(energy(x0, sigma, pairs)) + 0.5 * float(np.sum(v0_np**2))
    e_t = float(energy(x_t, sigma, pairs)) + 0.5 * float(tf.reduce_sum(v_t * v_t))
    energy_drift = abs(e_t - e0) / abs(e0)

    results = {
        "force_error": force_error,
        "net_force": net_force,
        "hessian_error": hessian_error,
        "hessian_asymmetry": hessian_asymmetry,
        "translation_residual": translation_residual,
        "dmsd_dsigma": dmsd,
        "dmsd_dsigma_jax": dmsd_ref,
        "solver_grad_error": solver_grad_error,
        "energy_drift": energy_drift,
    }
    if verbose:
        print(f"{atoms}-atom Lennard-Jones cluster, energy {float(e):.4f}")
        print(f"forces: max |F - F_jax| / max|F| = {force_error:.2e}, |sum F| = {net_force:.2e}")
        print(f"Hessian ({2 * atoms}x{2 * atoms}) from nested tapes: error vs jax.hessian {hessian_error:.2e}, "
              f"asymmetry {hessian_asymmetry:.2e}, translation residual {translation_residual:.2e}")
        print(f"Verlet, {steps} steps of {dt}: d(MSD)/d(sigma) = {dmsd:.6f} (jax.grad: {dmsd_ref:.6f}, "
              f"rel. error {solver_grad_error:.2e}); energy drift {energy_drift:.2e}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atoms", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--dt", type=float, default=0.005)
    args = parser.parse_args()
    main(atoms=args.atoms, steps=args.steps, dt=args.dt)
