"""Pure-JAX versions of the workloads: the ``jax.jit`` limit and JAX without jit.

Each ``make_*`` returns a callable taking no arguments that runs one step and
returns its outputs (JAX arrays), given ``jit`` (compile with ``jax.jit`` or run
op by op). The math matches ``_workloads``' TF-style source line for line.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _workloads as W


def _maybe_jit(f: Callable, jit: bool) -> Callable:
    return jax.jit(f) if jit else f


def scalar_chain(x: Any) -> Any:
    # jnp has sin and tanh: the TF-style source runs on it as it is.
    return W.scalar_chain_forward(jnp, x, W.SCALAR_CHAIN_BLOCKS)


def make_scalar_chain(jit: bool) -> Callable:
    x = jnp.asarray(W.scalar_chain_data()["x"])
    f = _maybe_jit(jax.value_and_grad(scalar_chain), jit)
    return lambda: f(x)


def mlp_loss(params: list, x: Any, y: Any, loss_kind: str) -> Any:
    h = x
    n_layers = len(params) // 2
    for i in range(n_layers):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n_layers - 1:
            h = jax.nn.relu(h)
    if loss_kind == "xent":
        return jnp.mean(jax.nn.logsumexp(h, axis=-1) - jnp.sum(y * h, axis=-1))
    return jnp.mean(jnp.square(h - y))


def make_mlp_step(name: str, jit: bool) -> Callable:
    """``step()`` -> (loss, grads); the parameters live in ``state`` and are updated by optax.sgd."""
    d = W.mlp_data(name)
    opt = optax.sgd(d["lr"])
    state = {"params": [jnp.asarray(p) for p in d["params"]]}
    state["opt"] = opt.init(state["params"])
    x, y, loss_kind = jnp.asarray(d["x"]), jnp.asarray(d["y"]), d["loss"]

    def step(params: list, opt_state: Any, x: Any, y: Any) -> tuple:
        loss, grads = jax.value_and_grad(mlp_loss)(params, x, y, loss_kind)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    f = _maybe_jit(step, jit)

    def run() -> tuple:
        # The new parameters come out of the same XLA execution as loss and grads,
        # so blocking on those waits for the update too.
        state["params"], state["opt"], loss, grads = f(state["params"], state["opt"], x, y)
        return loss, grads

    return run


def make_jacobian(jit: bool) -> Callable:
    d = W.jacobian_data()
    Wm, b, x = (jnp.asarray(d[k]) for k in ("W", "b", "x"))
    jac = _maybe_jit(jax.jacrev(lambda x: jnp.tanh(Wm @ x + b) * x), jit)
    return lambda: jac(x)


def make_batch_jacobian(batch: int, jit: bool) -> Callable:
    d = W.batch_jacobian_data(batch)
    Wm, x = jnp.asarray(d["W"]), jnp.asarray(d["x"])
    bjac = _maybe_jit(jax.vmap(jax.jacrev(lambda xb: jnp.tanh(xb @ Wm))), jit)
    return lambda: bjac(x)


def make_hessian_nested(jit: bool) -> Callable:
    x = jnp.asarray(W.hessian_data()["x"])

    def f(x: Any) -> Any:
        return jnp.sum(jnp.sin(x) * x**3)

    # outer.gradient of the (non-scalar) inner gradient sums it, as TF does.
    h = _maybe_jit(jax.grad(lambda x: jnp.sum(jax.grad(f)(x))), jit)
    return lambda: h(x)


def make_euler_loop(jit: bool) -> Callable:
    d = W.euler_data()
    k, x0 = jnp.asarray(d["k"]), jnp.asarray(d["x0"])

    def euler(x: Any, k: Any) -> Any:
        return x + 0.01 * jnp.stack([x[1], -k * x[0] - 0.1 * x[1]])

    def energy(k: Any) -> Any:
        if jit:
            # The loop as JAX code writes it, a fori_loop: the Python loop unrolled into one program
            # compiles for minutes on XLA CPU (its fusion pass duplicates the chain's shared values:
            # 10 steps 0.7 s, 20 steps 2.3 s, 40 steps 12 s, 100 steps over 5 minutes).
            x = jax.lax.fori_loop(0, W.EULER_STEPS, lambda _, x: euler(x, k), x0)
        else:
            x = x0
            for _ in range(W.EULER_STEPS):
                x = euler(x, k)
        return jnp.sum(x * x)

    f = _maybe_jit(jax.value_and_grad(energy), jit)
    return lambda: f(k)


def to_numpy(out: Any) -> list:
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(out)]
