"""PyTorch eager-autograd versions of the workloads (measured when torch is installed).

The math matches ``_workloads``' TF-style source; each ``make_*`` returns a
callable that runs one step and returns its outputs (torch tensors).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from . import _workloads as W


def _t(a: Any, device: str, requires_grad: bool = False) -> Any:
    return torch.tensor(np.asarray(a), device=device, requires_grad=requires_grad)


def scalar_chain_forward(x: Any, n_blocks: int) -> Any:
    y = x
    for _ in range(n_blocks):
        y = torch.sin(y)
        y = y * 1.5
        y = y + 0.1
        y = torch.tanh(y)
    return y


def make_scalar_chain(device: str) -> Callable:
    x = _t(W.scalar_chain_data()["x"], device, requires_grad=True)

    def step() -> tuple:
        y = scalar_chain_forward(x, W.SCALAR_CHAIN_BLOCKS)
        (g,) = torch.autograd.grad(y, x)
        return y, g

    return step


def make_mlp_step(name: str, device: str, builtin_xent: bool = False) -> Callable:
    d = W.mlp_data(name)
    params = [_t(p, device, requires_grad=True) for p in d["params"]]
    x, y = _t(d["x"], device), _t(d["y"], device)
    opt = torch.optim.SGD(params, lr=d["lr"])
    n_layers = len(params) // 2

    def step() -> tuple:
        opt.zero_grad(set_to_none=True)
        h = x
        for i in range(n_layers):
            h = torch.matmul(h, params[2 * i]) + params[2 * i + 1]
            if i < n_layers - 1:
                h = torch.relu(h)
        if d["loss"] == "xent" and builtin_xent:
            # torch's fused op (probability targets), as TF's softmax_cross_entropy_with_logits.
            loss = F.cross_entropy(h, y)
        elif d["loss"] == "xent":
            loss = torch.mean(torch.logsumexp(h, dim=-1) - torch.sum(y * h, dim=-1))
        else:
            loss = torch.mean(torch.square(h - y))
        loss.backward()
        grads = [p.grad for p in params]
        opt.step()
        return loss, grads

    return step


def make_jacobian(device: str) -> Callable:
    d = W.jacobian_data()
    Wm, b, x = (_t(d[k], device) for k in ("W", "b", "x"))

    def f(x: Any) -> Any:
        return torch.tanh(Wm @ x + b) * x

    # The default (vectorize=False): one backward pass per output row, as the reference.
    return lambda: torch.autograd.functional.jacobian(f, x)


def make_batch_jacobian(batch: int, device: str) -> Callable:
    d = W.batch_jacobian_data(batch)
    Wm, x = _t(d["W"], device), _t(d["x"], device)

    def f(x: Any) -> Any:
        # Summed over the batch (TF's batch_jacobian definition): one backward per output column.
        return torch.tanh(x @ Wm).sum(0)

    return lambda: torch.autograd.functional.jacobian(f, x).permute(1, 0, 2)


def make_hessian_nested(device: str) -> Callable:
    x = _t(W.hessian_data()["x"], device, requires_grad=True)

    def step() -> Any:
        y = torch.sum(torch.sin(x) * x**3)
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), x)
        return h

    return step


def make_euler_loop(device: str) -> Callable:
    d = W.euler_data()
    k = _t(d["k"], device, requires_grad=True)
    x0 = _t(d["x0"], device)

    def step() -> tuple:
        x = x0
        for _ in range(W.EULER_STEPS):
            x = x + 0.01 * torch.stack([x[1], -k * x[0] - 0.1 * x[1]])
        loss = torch.sum(x * x)
        (g,) = torch.autograd.grad(loss, [k])
        return loss, g

    return step


def to_numpy(out: Any) -> list:
    flat: list = []

    def walk(o: Any) -> None:
        if isinstance(o, list | tuple):
            for e in o:
                walk(e)
        else:
            flat.append(o.detach().cpu().numpy().copy())

    walk(out)
    return flat


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
