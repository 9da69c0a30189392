#!/usr/bin/env python
"""tapejax against jax.jit, TensorFlow and PyTorch on the same work, measured side by side.

    python benchmarks/run.py                       # everything, CPU, writes compat_docs/performance.md
    python benchmarks/run.py --quick               # fewer repeats, smaller memory runs, prints only
    python benchmarks/run.py --workloads mlp_step,jacobian --impls tapejax,jax.jit,tf
    python benchmarks/run.py --device gpu          # the same on a GPU machine (its own table)

Every (workload, implementation) pair runs in a fresh Python process (this file
with ``--worker``), pinned to one CPU core by default (``os.sched_setaffinity``;
TF and torch also get one intra-op thread), so one library's caches, threads or
memory never colour another's numbers. A worker builds the workload from the
same NumPy data, runs one step and saves its outputs (the values and gradients),
warms up, then times ``--repeats`` runs; a run is enough back-to-back steps to
last ``--min-run-ms``, each step blocked on (``block_until_ready``, ``.numpy()``,
or synchronous torch). Reported: median and min seconds per step.

The parent compares every implementation's outputs with the reference
(``jax.jit``; TF for the memory workloads) and prints a clear MISMATCH line when
they differ beyond the workload's tolerance, then writes markdown tables (ratios
to ``jax.jit``) between this script's markers in ``compat_docs/performance.md``,
with the date, CPU/GPU model, load average and library versions.

Implementations: ``tapejax`` (eager), ``tapejax.function``, ``jax.jit``
(``jax.jit(jax.value_and_grad)``; optax.sgd for the MLPs), ``jax`` (no jit),
``tf`` (TF eager GradientTape), ``tf.function``, ``torch`` (eager autograd). The
TF-style ones run the same source text (``benchmarks/_workloads.py``) under
``import tensorflow as tf`` and ``import tapejax as tf``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import _workloads as W  # noqa: E402  (NumPy only: safe in every worker)

DOC = os.path.join(ROOT, "compat_docs", "performance.md")
IMPLS = W.TIMED_IMPLS


class Unavailable(Exception):
    """This implementation cannot run here (library missing, no GPU build): a skip, not a failure."""


# ==========================================================================
# Worker side: build one (workload, implementation) case and measure it.


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _flatten(out: Any) -> list:
    if isinstance(out, list | tuple):
        return [y for x in out for y in _flatten(x)]
    return [out]


class Lib:
    """How to block on, and read back, one library's outputs."""

    def __init__(self, name: str, block: Callable, to_numpy: Callable, module: Any = None):
        self.name = name
        self.block = block
        self.to_numpy = to_numpy
        self.module = module


def load_lib(impl: str, device: str, pinned: bool) -> Lib:
    """Import the library ``impl`` measures (and only that one)."""
    import numpy as np

    if impl.startswith("tapejax") or impl.startswith("jax"):
        import jax

        if device == "gpu" and jax.default_backend() == "cpu":
            raise Unavailable("JAX sees no GPU")
        if impl.startswith("tapejax"):
            import tapejax

            def block(out: Any) -> Any:
                return jax.block_until_ready([x._value for x in _flatten(out)])

            return Lib(impl, block, lambda out: [np.array(x._value) for x in _flatten(out)], tapejax)
        return Lib(impl, jax.block_until_ready, lambda out: [np.array(x) for x in _flatten(out)], jax)
    if impl.startswith("tf"):
        if importlib.util.find_spec("tensorflow") is None:
            raise Unavailable("tensorflow is not installed (the `oracle` extra)")
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")
        if pinned:
            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        if device == "gpu" and not tf.config.list_physical_devices("GPU"):
            raise Unavailable("this TensorFlow build has no GPU")

        def block(out: Any) -> Any:
            return [x.numpy() for x in _flatten(out)]

        return Lib(impl, block, lambda out: [np.array(x.numpy()) for x in _flatten(out)], tf)
    if impl == "torch":
        if importlib.util.find_spec("torch") is None:
            raise Unavailable("torch is not installed")
        import torch

        if pinned:
            torch.set_num_threads(1)
        if device == "gpu" and not torch.cuda.is_available():
            raise Unavailable("this torch build has no CUDA")
        tdev = "cuda" if device == "gpu" else "cpu"
        from benchmarks import _workloads_torch as WT

        def block(out: Any) -> Any:
            WT.sync(tdev)
            return out

        lib = Lib(impl, block, WT.to_numpy, torch)
        lib.device = tdev  # type: ignore[attr-defined]
        return lib
    raise ValueError(f"unknown implementation {impl!r}; choose from {', '.join(IMPLS)}")


def build_step(workload: str, impl: str, lib: Lib, sizes: dict, builtin_xent: bool) -> Callable[[], Any]:
    """One step of ``workload`` under ``impl``: a no-argument callable returning its outputs."""
    if impl in ("tapejax", "tapejax.function", "tf", "tf.function"):
        return _build_tf_style(workload, lib.module, impl.endswith(".function"), sizes, builtin_xent)
    if impl in ("jax.jit", "jax"):
        from benchmarks import _workloads_jax as WJ

        jit = impl == "jax.jit"
        if workload == "scalar_chain":
            return WJ.make_scalar_chain(jit)
        if workload in W.MLP_SIZES:
            return WJ.make_mlp_step(workload, jit)
        if workload == "jacobian":
            return WJ.make_jacobian(jit)
        if workload in W.BATCH_JACOBIAN_SIZES:
            return WJ.make_batch_jacobian(W.BATCH_JACOBIAN_SIZES[workload], jit)
        if workload == "hessian_nested":
            return WJ.make_hessian_nested(jit)
        if workload == "euler_loop":
            return WJ.make_euler_loop(jit)
    if impl == "torch":
        from benchmarks import _workloads_torch as WT

        dev = lib.device  # type: ignore[attr-defined]
        if workload == "scalar_chain":
            return WT.make_scalar_chain(dev)
        if workload in W.MLP_SIZES:
            return WT.make_mlp_step(workload, dev, builtin_xent)
        if workload == "jacobian":
            return WT.make_jacobian(dev)
        if workload in W.BATCH_JACOBIAN_SIZES:
            return WT.make_batch_jacobian(W.BATCH_JACOBIAN_SIZES[workload], dev)
        if workload == "hessian_nested":
            return WT.make_hessian_nested(dev)
        if workload == "euler_loop":
            return WT.make_euler_loop(dev)
    raise Unavailable(f"{workload} has no {impl} implementation")


def _build_tf_style(workload: str, tf: Any, compiled: bool, sizes: dict, builtin_xent: bool) -> Callable:
    # The same source text for TensorFlow and tapejax: only ``tf`` differs.
    wrap = tf.function if compiled else (lambda f: f)
    if workload == "scalar_chain":
        x = tf.constant(W.scalar_chain_data()["x"])
        nb = W.SCALAR_CHAIN_BLOCKS
        f = wrap(lambda x: W.scalar_chain_step(tf, x, nb))
        return lambda: f(x)
    if workload in W.MLP_SIZES:
        d = W.mlp_data(workload)
        variables = [tf.Variable(p) for p in d["params"]]
        x, y = tf.constant(d["x"]), tf.constant(d["y"])
        lr, loss = d["lr"], d["loss"]
        f = wrap(lambda x, y: W.mlp_step(tf, variables, x, y, lr, loss, builtin_xent))
        return lambda: f(x, y)
    if workload == "jacobian":
        d = W.jacobian_data()
        Wm, b, x = tf.constant(d["W"]), tf.constant(d["b"]), tf.constant(d["x"])
        n = W.JACOBIAN_N
        f = wrap(lambda Wm, b, x: W.jacobian_step(tf, Wm, b, x, n))
        return lambda: f(Wm, b, x)
    if workload in W.BATCH_JACOBIAN_SIZES:
        d = W.batch_jacobian_data(W.BATCH_JACOBIAN_SIZES[workload])
        Wm, x = tf.constant(d["W"]), tf.constant(d["x"])
        f = wrap(lambda Wm, x: W.batch_jacobian_step(tf, Wm, x))
        return lambda: f(Wm, x)
    if workload == "hessian_nested":
        x = tf.constant(W.hessian_data()["x"])
        f = wrap(lambda x: W.hessian_nested_step(tf, x))
        return lambda: f(x)
    if workload == "euler_loop":
        d = W.euler_data()
        k, x0 = tf.Variable(d["k"]), tf.constant(d["x0"])
        n = W.EULER_STEPS
        f = wrap(lambda x0: W.euler_step(tf, k, x0, n))
        return lambda: f(x0)
    raise Unavailable(f"{workload} has no TF-style implementation")


def measure(step: Callable, block: Callable, warmup: int, repeats: int, min_run_s: float) -> dict:
    """Median and min seconds per step; every step is blocked on before the next starts."""
    for _ in range(warmup):
        block(step())
    t0 = time.perf_counter()
    block(step())
    once = time.perf_counter() - t0
    inner = max(1, min(100_000, int(min_run_s / max(once, 1e-7))))
    per = []
    cpu = []
    for _ in range(repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(inner):
            block(step())
        per.append((time.perf_counter() - t0) / inner)
        # CPU time of this process (all threads): on a pinned core it equals the wall
        # time of a quiet machine, and other processes' load barely moves it.
        cpu.append((time.process_time() - c0) / inner)
    return {"median_s": statistics.median(per), "min_s": min(per), "inner": inner, "repeats": repeats,
            "cpu_median_s": statistics.median(cpu), "cpu_min_s": min(cpu)}


def run_timed(workload: str, impl: str, lib: Lib, opts: dict) -> tuple[dict, list]:
    step = build_step(workload, impl, lib, opts["sizes"], opts["builtin_xent"])
    t0 = time.perf_counter()
    first = step()
    check = lib.to_numpy(first)
    first_s = time.perf_counter() - t0
    m = measure(step, lib.block, opts["warmup"], opts["repeats"], opts["min_run_s"])
    m["first_call_s"] = first_s
    return m, check


def run_overhead(impl: str, lib: Lib, opts: dict) -> tuple[dict, list]:
    """Microseconds per op of the scalar_chain forward: under a tape, without one, and bare."""
    import numpy as np

    nb = W.SCALAR_CHAIN_BLOCKS
    n_ops = W.WORKLOADS["record_overhead"].ops_per_step
    x0 = W.scalar_chain_data()["x"]
    modes: dict[str, tuple[Callable, Callable, Callable]] = {}
    if impl == "tapejax":
        import jax
        import jax.numpy as jnp

        tf = lib.module
        xj, xt = jnp.asarray(x0), tf.constant(x0)
        jax_lib = Lib("jax", jax.block_until_ready, lambda o: [np.array(o)])
        modes["bare jnp"] = (lambda: W.scalar_chain_forward(jnp, xj, nb), jax_lib.block, jax_lib.to_numpy)
        modes["no tape"] = (lambda: W.scalar_chain_forward(tf, xt, nb), lib.block, lib.to_numpy)
        modes["tape"] = (lambda: W.record_forward_taped(tf, xt, nb), lib.block, lib.to_numpy)
    elif impl == "tf":
        tf = lib.module
        xt = tf.constant(x0)
        modes["no tape"] = (lambda: W.scalar_chain_forward(tf, xt, nb), lib.block, lib.to_numpy)
        modes["tape"] = (lambda: W.record_forward_taped(tf, xt, nb), lib.block, lib.to_numpy)
    elif impl == "torch":
        import torch

        from benchmarks import _workloads_torch as WT

        x = torch.tensor(x0, device=lib.device, requires_grad=True)  # type: ignore[attr-defined]

        def no_grad() -> Any:
            with torch.no_grad():
                return WT.scalar_chain_forward(x, nb)

        modes["no tape"] = (no_grad, lib.block, lib.to_numpy)
        modes["tape"] = (lambda: WT.scalar_chain_forward(x, nb), lib.block, lib.to_numpy)
    else:
        raise Unavailable(f"record_overhead has no {impl} implementation")
    metrics: dict = {"ops": n_ops}
    check = []
    for name, (f, block, to_np) in modes.items():
        check += to_np(f())
        m = measure(f, block, opts["warmup"], opts["repeats"], opts["min_run_s"])
        metrics[name] = {"us_per_op": 1e6 * m["median_s"] / n_ops, "min_us_per_op": 1e6 * m["min_s"] / n_ops,
                         "cpu_us_per_op": 1e6 * m["cpu_median_s"] / n_ops}
    base = metrics.get("bare jnp", metrics["no tape"])
    metrics["overhead_us_per_op"] = metrics["tape"]["us_per_op"] - base["us_per_op"]
    metrics["recording_us_per_op"] = metrics["tape"]["us_per_op"] - metrics["no tape"]["us_per_op"]
    metrics["cpu_overhead_us_per_op"] = metrics["tape"]["cpu_us_per_op"] - base["cpu_us_per_op"]
    metrics["cpu_recording_us_per_op"] = metrics["tape"]["cpu_us_per_op"] - metrics["no tape"]["cpu_us_per_op"]
    # Every mode computes the same forward value: the check is one copy of it.
    return metrics, check[-1:]


def run_memory(workload: str, impl: str, lib: Lib, opts: dict) -> tuple[dict, list]:
    sizes = opts["sizes"]
    metrics: dict = {"rss_start_mb": _rss_mb()}
    if workload == "memory_mlp":
        step = build_step("mlp_step", impl, lib, sizes, opts["builtin_xent"])
        steps = sizes["memory_steps"]
        marks = sorted({1, 10, 100, steps // 2, steps} & set(range(1, steps + 1)))
        rss = {}
        t0 = time.perf_counter()
        check = lib.to_numpy(step())
        rss[1] = _rss_mb()
        for i in range(2, steps + 1):
            lib.block(step())
            if i in marks:
                rss[i] = _rss_mb()
        metrics.update(steps=steps, s_per_step=(time.perf_counter() - t0) / steps, rss_mb=rss, peak_rss_mb=_peak_rss_mb())
        lo = 100 if 100 in rss and steps > 100 else min(rss)
        metrics["growth_mb"] = rss[steps] - rss[lo]
        metrics["growth_from"] = lo
        return metrics, check
    if workload == "memory_chain":
        n_ops = sizes["chain_ops"]
        nb = n_ops // 4
        x0 = W.scalar_chain_data()["x"]
        if impl == "torch":
            import torch

            from benchmarks import _workloads_torch as WT

            x = torch.tensor(x0, device=lib.device, requires_grad=True)  # type: ignore[attr-defined]
            before = _rss_mb()
            t0 = time.perf_counter()
            y = WT.scalar_chain_forward(x, nb)

            def grad() -> Any:
                return torch.autograd.grad(y, x, retain_graph=True)[0]
        elif impl in ("tapejax", "tf"):
            tf = lib.module
            x = tf.constant(x0)
            before = _rss_mb()
            t0 = time.perf_counter()
            tape, y = W.chain_persistent_tape(tf, x, nb)

            def grad() -> Any:
                return tape.gradient(y, x)
        else:
            raise Unavailable(f"memory_chain has no {impl} implementation")
        lib.block(y)
        metrics["record_s"] = time.perf_counter() - t0
        after = _rss_mb()
        metrics.update(ops=n_ops, recorded_mb=after - before, bytes_per_op=(after - before) * 2**20 / n_ops)
        t0 = time.perf_counter()
        g = grad()
        lib.block(g)
        metrics["first_gradient_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        lib.block(grad())
        metrics["second_gradient_s"] = time.perf_counter() - t0
        metrics["peak_rss_mb"] = _peak_rss_mb()
        return metrics, lib.to_numpy((y, g))
    raise ValueError(workload)


def worker_main(a: argparse.Namespace) -> int:
    import numpy as np

    result: dict = {"workload": a.worker, "impl": a.impl, "ok": False}
    try:
        w = W.WORKLOADS[a.worker]
        lib = load_lib(a.impl, a.device, a.core is not None)
        opts = {
            "warmup": a.warmup,
            "repeats": a.repeats,
            "min_run_s": a.min_run_ms / 1e3,
            "builtin_xent": a.xent == "builtin",
            "sizes": json.loads(a.sizes),
        }
        if w.kind == "time":
            metrics, check = run_timed(a.worker, a.impl, lib, opts)
        elif w.kind == "overhead":
            metrics, check = run_overhead(a.impl, lib, opts)
        else:
            metrics, check = run_memory(a.worker, a.impl, lib, opts)
        np.savez(a.check, *check)
        result.update(ok=True, metrics=metrics)
    except Unavailable as e:
        result.update(skipped=str(e))
    except Exception as e:  # reported in the table, never hidden
        result.update(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
    with open(a.result, "w") as f:
        json.dump(result, f)
    return 0


def worker_entry(argv: list) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--impl", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--core", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--min-run-ms", type=float, default=20.0)
    ap.add_argument("--xent", default="lse")
    ap.add_argument("--sizes", default="{}")
    ap.add_argument("--result", required=True)
    ap.add_argument("--check", required=True)
    a = ap.parse_args(argv)
    if a.core is not None:
        # Before importing any library: XLA, TF and torch size their thread pools from this mask.
        os.sched_setaffinity(0, {a.core})
    return worker_main(a)


# ==========================================================================
# Parent side: run the workers, compare outputs, write the tables.


def default_sizes(quick: bool, smoke: bool = False) -> dict:
    if smoke:
        return {"memory_steps": 3, "chain_ops": 100}
    if quick:
        return {"memory_steps": 200, "chain_ops": W.MEMORY_CHAIN_OPS}
    return {"memory_steps": W.MEMORY_MLP_STEPS, "chain_ops": W.MEMORY_CHAIN_OPS}


def compare(ref: list, got: list, rtol: float) -> tuple[bool, float, str]:
    """Max error relative to each reference array's largest magnitude; ok when within ``rtol``."""
    import numpy as np

    if len(ref) != len(got):
        return False, float("inf"), f"{len(got)} outputs, reference has {len(ref)}"
    worst = 0.0
    for k, (r, g) in enumerate(zip(ref, got)):
        r, g = np.asarray(r, np.float64), np.asarray(g, np.float64)
        if r.shape != g.shape:
            return False, float("inf"), f"output {k}: shape {g.shape}, reference {r.shape}"
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        err = float(np.max(np.abs(r - g))) if r.size else 0.0
        if not np.isfinite(err):
            return False, float("inf"), f"output {k}: non-finite values"
        rel = err / scale if scale > 0 else (0.0 if err == 0 else float("inf"))
        if rel > worst:
            worst = rel
            if rel > rtol:
                return False, rel, f"output {k}: max |diff| {err:.3g} = {rel:.3g} x max|ref| (tolerance {rtol:g})"
    return True, worst, ""


def _probe(device: str) -> dict:
    """Versions and capabilities, read in a throwaway process (the parent imports no array library)."""
    code = (
        "import json, jax, tapejax\n"
        "from benchmarks import _workloads as W\n"
        "print(json.dumps({'has_xent': W.has_builtin_xent(tapejax), 'tapejax': tapejax.__version__,"
        " 'jax_backend': jax.default_backend(), 'jax_device': str(jax.devices()[0].device_kind)}))\n"
    )
    env = _worker_env(device)
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except Exception as e:  # pragma: no cover - reported, not fatal
        return {"has_xent": False, "error": str(e)}


def _worker_env(device: str) -> dict:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if device == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def run_worker(a: argparse.Namespace, workload: str, impl: str, tmp: str, xent: str, sizes: dict,
               round_: int = 0) -> dict:
    res_path = os.path.join(tmp, f"{workload}.{impl}.{round_}.json")
    chk_path = os.path.join(tmp, f"{workload}.{impl}.{round_}.npz")
    cmd = [
        sys.executable, os.path.abspath(__file__), "--worker", workload, "--impl", impl, "--device", a.device,
        "--warmup", str(a.warmup), "--repeats", str(a.repeats), "--min-run-ms", str(a.min_run_ms),
        "--xent", xent, "--sizes", json.dumps(sizes), "--result", res_path, "--check", chk_path,
    ]
    if a.core is not None:
        cmd += ["--core", str(a.core)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=_worker_env(a.device), cwd=ROOT, capture_output=True, text=True,
                              timeout=a.timeout)
        stderr = proc.stderr
    except subprocess.TimeoutExpired:
        return {"workload": workload, "impl": impl, "ok": False, "error": f"timed out after {a.timeout} s"}
    wall = time.perf_counter() - t0
    try:
        with open(res_path) as f:
            res = json.load(f)
    except (OSError, ValueError):
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        res = {"workload": workload, "impl": impl, "ok": False, "error": f"worker died (rc {proc.returncode}): {tail}"}
    res["wall_s"] = wall
    if res.get("ok"):
        import numpy as np

        with np.load(chk_path) as z:
            res["_check"] = [z[k] for k in sorted(z.files, key=lambda s: int(s.split("_")[1]))]
    return res


def _progress(wl: str, impl: str, w: W.Workload, r: dict, rnd: int) -> None:
    if r.get("ok") and w.kind == "time":
        m = r["metrics"]
        msg = (f"median {_ms(m['median_s'])} ms, min {_ms(m['min_s'])} ms, "
               f"cpu {_ms(m['cpu_median_s'])} ms (x{m['inner']})")
    elif r.get("ok") and w.kind == "overhead":
        msg = (f"overhead {r['metrics']['overhead_us_per_op']:.2f} us/op, "
               f"cpu {r['metrics']['cpu_overhead_us_per_op']:.2f} us/op")
    elif r.get("ok"):
        msg = f"peak RSS {r['metrics']['peak_rss_mb']:.0f} MiB"
    else:
        msg = "skipped: " + r["skipped"] if r.get("skipped") else "ERROR " + r.get("error", "?")
    print(f"{wl:22s} {impl:17s} r{rnd} {msg}   [{r['wall_s']:.1f} s]", file=sys.stderr, flush=True)
    if r.get("traceback") and not r.get("ok"):
        print(r["traceback"], file=sys.stderr)


def _merge_metrics(ms: list) -> Any:
    """Per field: the min of the minima, the median of everything else (per-round medians,
    and derived differences such as an overhead, each taken within its own round)."""
    first = ms[0]
    if isinstance(first, dict):
        return {k: _merge_field(k, [m[k] for m in ms]) for k in first}
    return first


def _merge_field(k: str, vals: list) -> Any:
    if isinstance(vals[0], dict):
        return _merge_metrics(vals)
    if isinstance(vals[0], bool) or not all(isinstance(v, int | float) for v in vals):
        return vals[0]
    return min(vals) if k.startswith(("min", "cpu_min")) else statistics.median(vals)


def merge_rounds(rs: list) -> dict:
    """One result from the rounds of one implementation: any failure wins (it is reported)."""
    bad = [r for r in rs if not r.get("ok")]
    if bad:
        return bad[0]
    out = dict(rs[0])
    out["metrics"] = _merge_metrics([r["metrics"] for r in rs])
    out["metrics"]["rounds"] = len(rs)
    out["wall_s"] = sum(r["wall_s"] for r in rs)
    return out


def reference_impl(workload: W.Workload, results: dict) -> str | None:
    order = [workload.reference, "jax.jit", "tf", "tapejax", "jax", "torch"]
    if workload.kind == "memory":
        order = ["tf", "tapejax", "torch"]
    for r in order:
        if results.get(r, {}).get("ok"):
            return r
    return None


def check_all(w: W.Workload, results: dict) -> None:
    ref = reference_impl(w, results)
    for impl, res in results.items():
        if not res.get("ok"):
            continue
        if impl == ref:
            res["check"] = ("reference", 0.0, "")
            continue
        ok, err, why = compare(results[ref]["_check"], res["_check"], w.rtol)
        res["check"] = ("ok" if ok else "MISMATCH", err, why)
        if not ok:
            print(f"MISMATCH {w.name}: {impl} differs from {ref}: {why}", file=sys.stderr)


# --------------------------------------------------------------------------
# Markdown.


def _ms(s: float) -> str:
    v = s * 1e3
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _ratio(r: float) -> str:
    return f"{r:.0f}×" if r >= 100 else f"{r:.1f}×" if r >= 10 else f"{r:.2f}×"


def _cell_status(res: dict) -> str | None:
    if res is None:
        return "—"
    if res.get("skipped"):
        return "n/a"
    if not res.get("ok"):
        return "error"
    return None


def _mark(res: dict) -> str:
    return " ✗" if res.get("check", ("ok",))[0] == "MISMATCH" else ""


def timed_tables(all_results: dict, impls: list) -> str:
    names = [n for n, w in W.WORKLOADS.items() if w.kind == "time" and n in all_results]
    if not names:
        return ""
    head = "| workload | " + " | ".join(f"`{i}`" for i in impls) + " |\n|---|" + "---:|" * len(impls) + "\n"
    med = "Median wall-clock ms per step (ratio to `jax.jit`):\n\n" + head
    mins = "Min wall-clock ms per step:\n\n" + head
    cpus = ("Median CPU ms per step (`time.process_time`, all threads; ratio to `jax.jit`): on a pinned core "
            "this is what a quiet machine's wall clock would show, whatever else runs:\n\n" + head)
    for n in names:
        res = all_results[n]
        base = res.get("jax.jit", {})
        base_s = base["metrics"]["median_s"] if base.get("ok") else None
        base_c = base["metrics"].get("cpu_median_s") if base.get("ok") else None
        mrow, nrow, crow = [], [], []
        for i in impls:
            r = res.get(i)
            st = _cell_status(r)
            if st:
                mrow.append(st)
                nrow.append(st)
                crow.append(st)
                continue
            m = r["metrics"]
            ratio = f" ({_ratio(m['median_s'] / base_s)})" if base_s else ""
            mrow.append(f"{_ms(m['median_s'])}{ratio}{_mark(r)}")
            nrow.append(f"{_ms(m['min_s'])}{_mark(r)}")
            c = m.get("cpu_median_s")
            cratio = f" ({_ratio(c / base_c)})" if c and base_c else ""
            crow.append(f"{_ms(c)}{cratio}" if c else "—")
        med += f"| {n} | " + " | ".join(mrow) + " |\n"
        mins += f"| {n} | " + " | ".join(nrow) + " |\n"
        cpus += f"| {n} | " + " | ".join(crow) + " |\n"
    return med + "\n" + mins + "\n" + cpus


def sweep_table(all_results: dict, impls: list) -> str:
    rows = [(n, W.BATCH_JACOBIAN_SIZES[n]) for n in ("batch_jacobian_b16", "batch_jacobian", "batch_jacobian_b256")
            if n in all_results]
    if len(rows) < 2:
        return ""
    out = ("batch_jacobian sweep, tanh(x @ W), 32 -> 32: median ms per step, and µs per example "
           "(flat per-example cost = linear growth in b):\n\n| b | " + " | ".join(f"`{i}`" for i in impls)
           + " |\n|---:|" + "---:|" * len(impls) + "\n")
    for n, b in sorted(rows, key=lambda r: r[1]):
        cells = []
        for i in impls:
            r = all_results[n].get(i)
            st = _cell_status(r)
            cells.append(st or f"{_ms(r['metrics']['median_s'])} ms ({1e6 * r['metrics']['median_s'] / b:.1f} µs/ex)")
        out += f"| {b} | " + " | ".join(cells) + " |\n"
    return out


def overhead_table(all_results: dict) -> str:
    res = all_results.get("record_overhead")
    if not res:
        return ""
    out = ("record_overhead: the scalar_chain forward (200 ops), µs per op: wall-clock median (min) / CPU median. "
           "*Overhead* = under a tape − bare baseline (bare `jnp` for tapejax, the same library without a tape "
           "for TF and torch); *recording* = under a tape − without a tape:\n\n"
           "| impl | bare jnp | no tape | tape | overhead (wall / CPU) | recording (wall / CPU) |\n"
           "|---|---:|---:|---:|---:|---:|\n")
    for impl in ("tapejax", "tf", "torch"):
        r = res.get(impl)
        st = _cell_status(r)
        if st:
            out += f"| `{impl}` | {st} | | | | |\n"
            continue
        m = r["metrics"]

        def c(mode: str) -> str:
            if mode not in m:
                return "—"
            return f"{m[mode]['us_per_op']:.2f} ({m[mode]['min_us_per_op']:.2f}) / {m[mode]['cpu_us_per_op']:.2f}"

        out += (f"| `{impl}` | {c('bare jnp')} | {c('no tape')} | {c('tape')} | "
                f"{m['overhead_us_per_op']:.2f} / {m['cpu_overhead_us_per_op']:.2f} | "
                f"{m['recording_us_per_op']:.2f} / {m['cpu_recording_us_per_op']:.2f} |{_mark(r)}\n")
    return out


def memory_tables(all_results: dict) -> str:
    out = ""
    res = all_results.get("memory_mlp")
    if res:
        out += ("memory_mlp: RSS (MiB) during eager mlp_step iterations; *growth* is from iteration 100 "
                "(after warm-up and compilation) to the last:\n\n"
                "| impl | steps | RSS after 1 | after 10 | after 100 | after last | growth | peak RSS | ms/step |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
        for impl in ("tapejax", "tf", "torch"):
            r = res.get(impl)
            st = _cell_status(r)
            if st:
                out += f"| `{impl}` | {st} | | | | | | | |\n"
                continue
            m = r["metrics"]
            rss = {int(k): v for k, v in m["rss_mb"].items()}
            g = lambda k: f"{rss[k]:.0f}" if k in rss else "—"  # noqa: E731
            out += (f"| `{impl}` | {m['steps']} | {g(1)} | {g(10)} | {g(100)} | {g(m['steps'])} | "
                    f"{m['growth_mb']:+.1f} | {m['peak_rss_mb']:.0f} | {1e3 * m['s_per_step']:.2f} |{_mark(r)}\n")
        out += "\n"
    res = all_results.get("memory_chain")
    if res:
        out += ("memory_chain: a persistent tape over a scalar chain; RSS added by recording, then two gradients "
                "(the first compiles):\n\n"
                "| impl | ops | record s | recorded MiB | bytes/op | 1st gradient s | 2nd gradient s | peak RSS MiB |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|\n")
        for impl in ("tapejax", "tf", "torch"):
            r = res.get(impl)
            st = _cell_status(r)
            if st:
                out += f"| `{impl}` | {st} | | | | | | |\n"
                continue
            m = r["metrics"]
            out += (f"| `{impl}` | {m['ops']} | {m['record_s']:.3f} | {m['recorded_mb']:.1f} | "
                    f"{m['bytes_per_op']:.0f} | {m['first_gradient_s']:.3f} | {m['second_gradient_s']:.4f} | "
                    f"{m['peak_rss_mb']:.0f} |{_mark(r)}\n")
    return out


# The goals; ``ref`` is the issue's own measurement of the denominator (ms) on this machine.
GOALS = [
    ("eager tapejax ≤ 0.2× TF eager, scalar_chain", "scalar_chain", "tapejax", "tf", 0.2, 37.7),
    ("eager tapejax ≤ 0.35× TF eager, mlp_step", "mlp_step", "tapejax", "tf", 0.35, 23.4),
    ("eager tapejax ≤ 0.05× TF eager, jacobian", "jacobian", "tapejax", "tf", 0.05, 235.0),
    ("eager tapejax ≤ 0.05× TF eager, batch_jacobian", "batch_jacobian", "tapejax", "tf", 0.05, 233.0),
    ("eager tapejax ≤ 1.3× torch eager, mlp_step", "mlp_step", "tapejax", "torch", 1.3, 4.4),
    ("tapejax.function ≤ 1.10× jax.jit, mlp_step", "mlp_step", "tapejax.function", "jax.jit", 1.10, 3.8),
    ("tapejax.function ≤ 1.5× jax.jit, mlp_step_small", "mlp_step_small", "tapejax.function", "jax.jit", 1.5, None),
    ("eager tapejax jacobian ≤ 2× jax.jit(jacrev)", "jacobian", "tapejax", "jax.jit", 2.0, 0.67),
]


def goals_table(all_results: dict) -> tuple[str, list]:
    rows = []
    out = ("| goal | wall-clock ratio | CPU-time ratio | tapejax wall ÷ the issue's reference | target | status "
           "(wall; CPU) |\n|---|---:|---:|---:|---:|---|\n")

    def word(ok: bool) -> str:
        return "met" if ok else "**missed**"

    for title, wl, num, den, target, ref_ms in GOALS:
        res = all_results.get(wl, {})
        a, b = res.get(num, {}), res.get(den, {})
        if not (a.get("ok") and b.get("ok")):
            continue
        ma, mb = a["metrics"], b["metrics"]
        ratio = ma["median_s"] / mb["median_s"]
        cratio = ma["cpu_median_s"] / mb["cpu_median_s"] if ma.get("cpu_median_s") and mb.get("cpu_median_s") else None
        vs_ref = f"{ma['median_s'] * 1e3 / ref_ms:.3f}×" if ref_ms else "—"
        met = ratio <= target
        rows.append((title, ratio, cratio, target, met))
        c_txt = f"{cratio:.3f}×" if cratio is not None else "—"
        c_word = word(cratio <= target) if cratio is not None else "—"
        out += f"| {title} | {ratio:.3f}× | {c_txt} | {vs_ref} | {target}× | {word(met)}; {c_word} |\n"
    ro = all_results.get("record_overhead", {}).get("tapejax", {})
    if ro.get("ok"):
        m = ro["metrics"]
        v = m["overhead_us_per_op"]
        cv = m.get("cpu_overhead_us_per_op")
        met = v <= 2.0
        rows.append(("recording overhead ≤ 2 µs/op over bare jnp", v, cv, 2.0, met))
        c_txt = f"{cv:.2f} µs/op" if cv is not None else "—"
        c_word = word(cv <= 2.0) if cv is not None else "—"
        out += f"| recording overhead ≤ 2 µs/op over bare jnp | {v:.2f} µs/op | {c_txt} | — | 2 µs/op | {word(met)}; {c_word} |\n"
    return out, rows


def environment(a: argparse.Namespace, probe: dict, load_before: tuple, load_after: tuple, xent: str) -> str:
    def ver(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    gpu = "none"
    if a.device == "gpu":
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.strip() or probe.get("jax_device", "?")
        except OSError:
            gpu = probe.get("jax_device", "?")
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=30).stdout.strip()
        if dirty:
            commit += " with uncommitted changes"
    except OSError:
        commit = "?"
    tf_ver = ver("tensorflow") if ver("tensorflow") != "not installed" else ver("tensorflow-cpu")
    lines = [
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- device: `{a.device}`; CPU: {cpu}, {os.cpu_count()} logical cores; GPU: {gpu}",
        f"- workers pinned to core {a.core} (one intra-op thread for TF and torch)" if a.core is not None
        else "- workers not pinned",
        f"- load average (1, 5, 15 min): before {load_before[0]:.2f}, {load_before[1]:.2f}, {load_before[2]:.2f}; "
        f"after {load_after[0]:.2f}, {load_after[1]:.2f}, {load_after[2]:.2f}",
        f"- {a.rounds} round(s) of fresh processes per implementation, interleaved; in each, {a.warmup} warm-up "
        f"steps, then {a.repeats} timed runs of ≥ {a.min_run_ms:g} ms each; a table's median is the median of "
        f"the rounds' medians, its min the min" + (" (`--quick`)" if a.quick else ""),
        f"- Python {platform.python_version()}; tapejax {probe.get('tapejax', '?')} (git {commit}); "
        f"jax {ver('jax')}, jaxlib {ver('jaxlib')}, optax {ver('optax')}, numpy {ver('numpy')}; "
        f"tensorflow {tf_ver}; torch {ver('torch')}",
        "- softmax cross-entropy: " + ("`tf.nn.softmax_cross_entropy_with_logits`" if xent == "builtin" else
                                       "`tf.reduce_logsumexp(logits, -1) - tf.reduce_sum(labels * logits, -1)` "
                                       "(tapejax has no `tf.nn.softmax_cross_entropy_with_logits` yet), "
                                       "the same in every implementation"),
    ]
    return "\n".join(lines) + "\n"


def checks_summary(all_results: dict) -> str:
    bad, worst = [], 0.0
    for wl, res in all_results.items():
        for impl, r in res.items():
            c = r.get("check")
            if c and c[0] == "MISMATCH":
                bad.append(f"- MISMATCH {wl} / `{impl}`: {c[2]}")
            elif c:
                worst = max(worst, c[1])
            if r.get("error"):
                bad.append(f"- ERROR {wl} / `{impl}`: {r['error'].splitlines()[0][:300]}")
    head = (f"Outputs (values and gradients) checked against the reference (`jax.jit`; TF for memory): "
            f"largest relative difference among matches {worst:.2g}.")
    return head + ("\n\n" + "\n".join(bad) if bad else " No mismatches, no errors.") + "\n"


def render(a: argparse.Namespace, all_results: dict, impls: list, probe: dict, loads: tuple, xent: str) -> str:
    parts = [
        f"### Measured by `benchmarks/run.py --device {a.device}`" + (" (quick)" if a.quick else "") + "\n",
        environment(a, probe, loads[0], loads[1], xent),
    ]
    goals, _ = goals_table(all_results)
    if goals.count("\n") > 2:
        parts.append("Goals (issue 9), medians:\n\n" + goals)
    for t in (timed_tables(all_results, impls), sweep_table(all_results, [i for i in impls if i in
                                                                          ("tapejax", "tapejax.function", "jax.jit", "tf", "torch")]),
              overhead_table(all_results), memory_tables(all_results), checks_summary(all_results)):
        if t:
            parts.append(t)
    return "\n".join(parts)


def markers(device: str) -> tuple[str, str]:
    return (f"<!-- BEGIN benchmarks/run.py --device {device} (generated: edit run.py, not this block) -->",
            f"<!-- END benchmarks/run.py --device {device} -->")


def write_block(path: str, device: str, body: str) -> None:
    """Replace this device's generated block in ``path``; everything outside the markers survives."""
    begin, end = markers(device)
    text = "# Performance\n"
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        title = "CPU" if device == "cpu" else "GPU"
        text = text.rstrip() + f"\n\n## Measurements: {title}\n\n{block}\n"
    with open(path, "w") as f:
        f.write(text)


def expand_workloads(spec: str | None) -> list:
    if not spec:
        return list(W.WORKLOADS)
    out = []
    for s in spec.split(","):
        s = s.strip()
        if s == "batch_jacobian_sweep":
            out += ["batch_jacobian_b16", "batch_jacobian", "batch_jacobian_b256"]
        elif s == "memory":
            out += ["memory_mlp", "memory_chain"]
        elif s in W.WORKLOADS:
            out.append(s)
        else:
            raise SystemExit(f"unknown workload {s!r}; choose from {', '.join(W.WORKLOADS)}, batch_jacobian_sweep, memory")
    return list(dict.fromkeys(out))


def main(argv: list | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--worker" in argv:
        return worker_entry(argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--quick", action="store_true", help="fewer repeats, shorter runs, 200 memory steps; no write")
    ap.add_argument("--workloads", help="comma-separated (default: all); also batch_jacobian_sweep, memory")
    ap.add_argument("--impls", help=f"comma-separated (default: all available): {', '.join(IMPLS)}")
    ap.add_argument("--repeats", type=int, help="timed runs per case (default 21; 5 with --quick)")
    ap.add_argument("--warmup", type=int, help="untimed steps first (default 3; 2 with --quick)")
    ap.add_argument("--min-run-ms", type=float, help="a timed run repeats the step to last this long (default 20; 5)")
    ap.add_argument("--core", type=int, help="CPU core to pin workers to (default: the last one; -1: no pinning)")
    ap.add_argument("--rounds", type=int, help="fresh processes per implementation, interleaved; the table "
                    "gives the median of their medians (default 3; 1 with --quick)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per worker")
    ap.add_argument("--write", action="store_true", help="write compat_docs/performance.md even with --quick")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--doc", default=DOC, help="markdown file to update")
    ap.add_argument("--json", help="also dump raw results here")
    a = ap.parse_args(argv)
    a.repeats = a.repeats or (5 if a.quick else 21)
    a.warmup = a.warmup if a.warmup is not None else (2 if a.quick else 3)
    a.min_run_ms = a.min_run_ms or (5.0 if a.quick else 20.0)
    a.rounds = a.rounds or (1 if a.quick else 3)
    if a.core is None:
        a.core = max(os.sched_getaffinity(0)) if a.device == "cpu" else None
    elif a.core < 0:
        a.core = None
    workloads = expand_workloads(a.workloads)
    impls = [i.strip() for i in a.impls.split(",")] if a.impls else list(IMPLS)
    for i in impls:
        if i not in IMPLS:
            raise SystemExit(f"unknown implementation {i!r}; choose from {', '.join(IMPLS)}")
    sizes = default_sizes(a.quick)

    load_before = os.getloadavg()
    probe = _probe(a.device)
    xent = "builtin" if probe.get("has_xent") else "lse"
    print(f"# tapejax {probe.get('tapejax', '?')}, JAX backend {probe.get('jax_backend', '?')}; "
          f"load {load_before[0]:.2f}; pinned to core {a.core}", file=sys.stderr)
    all_results: dict = {}
    with tempfile.TemporaryDirectory(prefix="tapejax-bench-") as tmp:
        for wl in workloads:
            w = W.WORKLOADS[wl]
            order = [i for i in [w.reference] + [i for i in impls if i != w.reference]
                     if i in w.impls and (i in impls or i == w.reference)]
            rounds: dict = {i: [] for i in order}
            # Rounds interleave the implementations (A B C A B C ...): a burst of load
            # from other processes then lands on all of them, not on one.
            for rnd in range(a.rounds if w.kind != "memory" else 1):
                for impl in order:
                    r = run_worker(a, wl, impl, tmp, xent, sizes, rnd)
                    rounds[impl].append(r)
                    _progress(wl, impl, w, r, rnd)
            results = {impl: merge_rounds(rs) for impl, rs in rounds.items()}
            check_all(w, results)
            # The reference may not be one of --impls: keep it only for ratios and checks.
            all_results[wl] = results
    load_after = os.getloadavg()
    shown = [i for i in impls if any(i in r for r in all_results.values())]
    body = render(a, all_results, shown, probe, (load_before, load_after), xent)
    print(body)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({wl: {i: {k: v for k, v in r.items() if k != "_check"} for i, r in res.items()}
                       for wl, res in all_results.items()}, f, indent=1, default=str)
    if not a.no_write and (a.write or not a.quick):
        write_block(a.doc, a.device, body)
        print(f"wrote {os.path.relpath(a.doc, ROOT)}", file=sys.stderr)
    mismatches = sum(r.get("check", ("",))[0] == "MISMATCH" for res in all_results.values() for r in res.values())
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
