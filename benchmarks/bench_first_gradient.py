#!/usr/bin/env python
"""Time to the first gradient of a new tape: tapejax (each replay tier), TF eager and PyTorch.

    python benchmarks/bench_first_gradient.py            # every size, writes compat_docs/performance.md
    python benchmarks/bench_first_gradient.py --quick    # small sizes only, prints only

Workloads (the same source text runs under ``import tensorflow as tf`` and
``import tapejax as tf``; PyTorch gets the same math):

- ``euler_N``: a damped oscillator integrated for N explicit Euler steps on one
  tape (about 8 recorded ops a step), gradient of the final energy with respect
  to a Variable ``k``;
- ``chain_2000``: a fixed pseudo-random chain of 2,000 elementwise ops on a
  16-vector;
- ``pinn_nested``: a physics-informed network's training step: a 1-32-32-1 tanh MLP on
  64 points, its second derivative in x through two nested tapes, and the gradient of
  the residual's mean square with respect to the weights on a third (third-order
  nesting: every gradient but the last is interpreted op by op, as in TF);
- the standard workloads of ``benchmarks/run.py`` (``scalar_chain``, ``mlp_step``,
  ``mlp_step_small``, ``jacobian``, ``batch_jacobian``, ``hessian_nested``), built by
  that script's own step builders: their first call (``--standard``, or name them in
  ``--sizes``).

Each (workload, implementation) runs in a fresh process, so the first call pays
every cold cost (tracing, kernel compiles) but not the library's import. Reported:
the first gradient (record + gradient + transfer to NumPy), then the median of
the next (up to) five calls of the same code (a new tape each time), for tapejax's
default tier the median of its last three of twelve calls ("settled": after the
switch to a compiled or segmented program), and the process's peak RSS. The outputs are compared with TF's.
``tapejax:cached`` is the default tier in a process whose persistent compilation cache
(``tapejax.config.set_compilation_cache_dir``) an earlier process of the same workload
filled: a user's second run of a script or a restarted notebook.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "compat_docs", "performance.md")
BEGIN, END = "<!-- first-gradient:begin -->", "<!-- first-gradient:end -->"

# A fixed op sequence for the chain (no RNG: the same in every library).
_CHAIN_OPS = ["sin", "mul", "tanh", "add", "sin", "sub", "tanh", "add"]


def _chain(lib, x, n: int):
    """The chain's ops on ``x``, with ``lib`` (tapejax, tensorflow or torch: the same names)."""
    for i in range(n):
        op = _CHAIN_OPS[i % len(_CHAIN_OPS)]
        if op == "mul":
            x = x * 0.99
        elif op == "add":
            x = x + 0.01
        elif op == "sub":
            x = x - 0.02
        else:
            x = getattr(lib, op)(x)
    return x


def _pinn_data() -> dict:
    import numpy as np

    rng = np.random.default_rng(0)
    return {"W1": rng.normal(size=(1, 32)).astype(np.float32), "b1": np.zeros(32, np.float32),
            "W2": (rng.normal(size=(32, 32)) / 6).astype(np.float32), "b2": np.zeros(32, np.float32),
            "W3": (rng.normal(size=(32, 1)) / 6).astype(np.float32),
            "x": np.linspace(-1, 1, 64, dtype=np.float32)[:, None]}


def _tf_pinn(tf):
    d = _pinn_data()
    params = [tf.Variable(d[k]) for k in ("W1", "b1", "W2", "b2", "W3")]
    W1, b1, W2, b2, W3 = params
    xs = tf.constant(d["x"])

    def u(x):
        h = tf.tanh(tf.matmul(x, W1) + b1)
        h = tf.tanh(tf.matmul(h, W2) + b2)
        return tf.matmul(h, W3)

    def step():
        with tf.GradientTape() as t3:
            with tf.GradientTape() as t2:
                t2.watch(xs)
                with tf.GradientTape() as t1:
                    t1.watch(xs)
                    y = u(xs)
                ux = t1.gradient(y, xs)
            uxx = t2.gradient(ux, xs)
            loss = tf.reduce_mean(tf.square(uxx + tf.sin(xs)))
        return t3.gradient(loss, params)

    return step


def _torch_pinn(torch):
    d = _pinn_data()
    params = [torch.tensor(d[k], requires_grad=True) for k in ("W1", "b1", "W2", "b2", "W3")]
    W1, b1, W2, b2, W3 = params
    xs = torch.tensor(d["x"])

    def step():
        x = xs.clone().requires_grad_(True)
        h = torch.tanh(x @ W1 + b1)
        h = torch.tanh(h @ W2 + b2)
        y = h @ W3
        (ux,) = torch.autograd.grad(y.sum(), [x], create_graph=True)
        (uxx,) = torch.autograd.grad(ux.sum(), [x], create_graph=True)
        loss = ((uxx + torch.sin(x)) ** 2).mean()
        return torch.autograd.grad(loss, params)

    return step


def _tf_step(tf, workload: str):
    if workload == "pinn_nested":
        return _tf_pinn(tf)
    if workload.startswith("euler_"):
        n = int(workload.split("_")[1])
        k = tf.Variable(2.0)

        def step():
            x = tf.constant([1.0, 0.0])
            with tf.GradientTape() as t:
                for _ in range(n):
                    x = x + 0.01 * tf.stack([x[1], -k * x[0] - 0.1 * x[1]])
                loss = tf.reduce_sum(x * x)
            return t.gradient(loss, k)

        return step
    n = int(workload.split("_")[1])
    w = tf.Variable(tf.linspace(0.1, 1.0, 16))

    def step():
        with tf.GradientTape() as t:
            loss = tf.reduce_sum(_chain(tf, w, n))
        return t.gradient(loss, w)

    return step


def _torch_step(torch, workload: str):
    if workload == "pinn_nested":
        return _torch_pinn(torch)
    if workload.startswith("euler_"):
        n = int(workload.split("_")[1])
        k = torch.tensor(2.0, requires_grad=True)

        def step():
            x = torch.tensor([1.0, 0.0])
            for _ in range(n):
                x = x + 0.01 * torch.stack([x[1], -k * x[0] - 0.1 * x[1]])
            loss = (x * x).sum()
            (g,) = torch.autograd.grad(loss, [k])
            return g

        return step
    n = int(workload.split("_")[1])
    w = torch.linspace(0.1, 1.0, 16, requires_grad=True)

    def step():
        (g,) = torch.autograd.grad(_chain(torch, w, n).sum(), [w])
        return g

    return step


STANDARD = ["scalar_chain", "mlp_step", "mlp_step_small", "jacobian", "batch_jacobian", "hessian_nested"]


def _standard_step(workload: str, impl: str):
    """A standard workload's step as ``benchmarks/run.py`` builds it, and its read-back."""
    sys.path.insert(0, ROOT)
    from benchmarks import run as R

    name = "tapejax" if impl.startswith("tapejax") else impl
    lib = R.load_lib(name, "cpu", pinned=False)
    step = R.build_step(workload, name, lib, {}, R.W.has_builtin_xent(lib.module) if name != "torch" else True)
    import numpy as np

    return step, lambda out: np.concatenate([a.reshape(-1) for a in lib.to_numpy(out)])


def _flat(read):
    # One gradient, or a list of them (pinn_nested), as one flat NumPy array.
    import numpy as np

    def to_np(g):
        if isinstance(g, list | tuple):
            return np.concatenate([read(v).reshape(-1) for v in g])
        return read(g)

    return to_np


def worker(workload: str, impl: str, repeats: int) -> dict:
    import resource

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if impl.startswith("tapejax"):
        tier = impl.split(":")[1] if ":" in impl else "auto"
        os.environ["TAPEJAX_REPLAY_TIER"] = "auto" if tier == "cached" else tier
    if workload in STANDARD:
        step, to_np = _standard_step(workload, impl)
    elif impl.startswith("tapejax"):
        import tapejax as tf

        step = _tf_step(tf, workload)
        to_np = _flat(lambda g: g.numpy())
    elif impl == "tf":
        import tensorflow as tf

        step = _tf_step(tf, workload)
        to_np = _flat(lambda g: g.numpy())
    else:
        import torch

        torch.set_num_threads(1)
        step = _torch_step(torch, workload)
        to_np = _flat(lambda g: g.detach().numpy())
    c0, t0 = time.process_time(), time.perf_counter()
    out = to_np(step())
    first = time.perf_counter() - t0
    # CPU time of the whole process (compile threads included): what a quiet machine's wall
    # clock shows when other jobs share this one.
    first_cpu = time.process_time() - c0
    # The issue's memory bound is on the first gradient: the peak so far, before later calls.
    peak_first_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    later = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        to_np(step())
        later.append(time.perf_counter() - t0)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # "later": the median of the calls after the first; "settled": of the last three, which
    # for tapejax's default tier come after its switch to a compiled program (sighting
    # replay_hot + replay_lag = 10) when there are at least 12 calls.
    return {"first_s": first, "first_cpu_s": first_cpu, "steady_s": statistics.median(later[:5]) if later else None,
            "settled_s": statistics.median(later[-3:]) if len(later) >= 3 else None,
            # the time to six results: a compile moved out of the first call is paid here
            "first6_s": first + sum(later[:5]) if len(later) >= 5 else None,
            "peak_mb": peak_mb, "peak_first_mb": peak_first_mb, "out": [float(v) for v in out.reshape(-1)[:4]]}


def run(workload: str, impl: str, repeats: int, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", workload, impl, str(repeats)]
    # No column reads a cache the user's environment points at, except "tapejax:cached",
    # whose cache an earlier process of the same workload filled.
    env = {k: v for k, v in os.environ.items() if k != "TAPEJAX_COMPILATION_CACHE_DIR"}
    cache = None
    try:
        if impl == "tapejax:cached":
            cache = tempfile.mkdtemp(prefix="tapejax-bench-cache-")
            env["TAPEJAX_COMPILATION_CACHE_DIR"] = cache
            subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (r.stderr.strip().splitlines() or ["failed"])[-1][:120]}


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--worker", nargs=3)
    p.add_argument("--impls", default="tapejax,tapejax:cached,tapejax:interpret,tapejax:compile,tf,torch")
    p.add_argument("--sizes", default=None)
    p.add_argument("--standard", action="store_true", help="also the first call of benchmarks/run.py's workloads")
    p.add_argument("--timeout", type=float, default=600)
    a = p.parse_args(argv)
    if a.worker:
        wl, impl, reps = a.worker
        print("RESULT " + json.dumps(worker(wl, impl, int(reps))))
        return 0
    workloads = (a.sizes.split(",") if a.sizes else
                 ["euler_100", "euler_300"] if a.quick else
                 ["euler_100", "euler_300", "euler_1000", "euler_10000", "chain_2000", "pinn_nested"])
    if a.standard:
        workloads += [w for w in STANDARD if w not in workloads]
    impls = a.impls.split(",")
    rows = []
    for wl in workloads:
        res = {}
        for impl in impls:
            if impl == "tapejax:compile" and wl in ("euler_1000", "euler_10000"):
                res[impl] = {"error": "not run (a whole-slice compile of this length takes minutes)"}
                continue
            # The default tier gets enough calls to pass its switch point; the others (whose
            # cost per call does not change after the first) fewer.
            # (30 for the standard workloads: a kernel signature's compiles come after its
            # host and fast-program calls, up to call 16 or so, so "settled" is calls 29-31)
            reps = (30 if wl in STANDARD else 12) if impl == "tapejax" else 2 if wl == "euler_10000" else 5
            res[impl] = run(wl, impl, reps, a.timeout)
            print(wl, impl, res[impl], flush=True)
        rows.append((wl, res))
    table = render(rows, impls)
    print(table)
    if not a.quick:
        write(table)
    return 0


def _cell(r: dict, field: str) -> str:
    if "error" in r:
        return "–"
    v = r.get(field)
    return "–" if v is None else f"{v:.3f}"


def render(rows: list, impls: list) -> str:
    load = os.getloadavg()
    lines = [f"Measured {time.strftime('%Y-%m-%d')}, load average {load[0]:.1f} (2-core CPU machine); "
             "seconds; each cell a fresh process. `tapejax` is the default (auto) tier.", ""]
    lines.append("| workload | " + " | ".join(f"{i} first | {i} later" for i in impls)
                 + " | tapejax first 6 | tf first 6 | tapejax settled | tapejax first / TF first"
                 " | tapejax peak MB (first gradient / all calls) |")
    lines.append("|---" * (2 * len(impls) + 6) + "|")
    for wl, res in rows:
        cells = []
        for i in impls:
            cells += [_cell(res[i], "first_s"), _cell(res[i], "steady_s")]
        cells.append(_cell(res.get("tapejax", {"error": 1}), "first6_s"))
        cells.append(_cell(res.get("tf", {"error": 1}), "first6_s"))
        cells.append(_cell(res.get("tapejax", {"error": 1}), "settled_s"))
        t, f = res.get("tapejax", {}), res.get("tf", {})
        ratio = (f"{t['first_s'] / f['first_s']:.2f}×" if "first_s" in t and "first_s" in f else "–")
        c = res.get("tapejax:cached", {})
        if "first_s" in c and "first_s" in f:
            ratio += f" (cached {c['first_s'] / f['first_s']:.2f}×)"
        lines.append(f"| {wl} | " + " | ".join(cells)
                     + f" | {ratio} | {t.get('peak_first_mb', 0):.0f} / {t.get('peak_mb', 0):.0f} |")
    return "\n".join(lines)


def write(table: str) -> None:
    with open(DOC) as fh:
        doc = fh.read()
    block = f"{BEGIN}\n{table}\n{END}"
    if BEGIN in doc:
        doc = doc[: doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):]
    else:
        doc += "\n\n## First gradient of a new tape (replay tiers)\n\n" + block + "\n"
    with open(DOC, "w") as fh:
        fh.write(doc)


if __name__ == "__main__":
    sys.exit(main())
