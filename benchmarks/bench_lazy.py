"""Lazy execution against eager tapejax, ``tapejax.function``, ``jax.jit``, TF eager and PyTorch eager.

The same TF-style source (``benchmarks/_workloads.py``) runs as eager tapejax, as
lazy tapejax (``TAPEJAX_EXECUTION=lazy``, no decorator) and inside
``tapejax.function``; ``jax.jit``, TF eager and PyTorch eager run the same math.
Each (workload, implementation) runs in its own process, all pinned to one core
when ``taskset`` exists, in one invocation; the table reports medians (ms per step,
each step blocked on) and the ratio to PyTorch eager, then a fresh process's first step
and first 100 steps (time to first results, compiles included). Outputs are checked
against ``jax.jit`` (the runner's tolerance) before timing. tapejax's steady state is
measured past ``config.replay_fast_runs`` steps (at most 5 s of them): the runs before
use a small program's fast-built form.

    python benchmarks/bench_lazy.py                       # the issue's workloads
    python benchmarks/bench_lazy.py --workloads scalar_chain --impls lazy,tapejax
    python benchmarks/bench_lazy.py --rounds 3     # on a noisy machine: medians of 3 interleaved rounds
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = ["scalar_chain", "mlp_step", "mlp_step_small", "hessian_nested", "euler_loop"]
IMPLS = ["tapejax", "lazy", "tapejax.function", "jax.jit", "tf", "torch"]
FIRST_STEPS = 100

_CHILD = r"""
import json, os, sys
sys.path.insert(0, {root!r})
from benchmarks import run as R, _workloads as W
workload, impl, warmup, repeats, min_run_s = {args!r}
FIRST_STEPS = {first_steps!r}
real = "tapejax" if impl == "lazy" else impl
try:
    if workload == "euler_loop" and impl == "tapejax.function":
        # The Python loop unrolled into one XLA program: minutes of compile (_workloads_jax.make_euler_loop).
        raise R.Unavailable("an unrolled 100-step loop compiles for minutes on XLA CPU")
    lib = R.load_lib(real, "cpu", True)
    builtin = W.has_builtin_xent(lib.module) if real.startswith(("tapejax", "tf")) else False
    step = R.build_step(workload, real, lib, {{}}, builtin)
    ref = R.build_step(workload, "jax.jit", R.load_lib("jax.jit", "cpu", True), {{}}, False) if real != "jax.jit" else None
    import time
    t0 = time.perf_counter()
    out = [a for a in lib.to_numpy(step())]
    first_s = time.perf_counter() - t0
    ok = True
    if ref is not None and workload in ("scalar_chain", "hessian_nested", "euler_loop"):
        import numpy as np
        r = [np.asarray(a) for a in R._flatten(ref())]
        ok = all(np.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(out, r))
    # Time to first results: the first step (above) and the first FIRST_STEPS, each blocked on.
    t0 = time.perf_counter()
    for _ in range(FIRST_STEPS - 1):
        lib.block(step())
    first_n_s = first_s + time.perf_counter() - t0
    if real.startswith("tapejax"):
        # The steady state is past a small program's fast-built runs (config.replay_fast_runs:
        # about 11 us a step slower for mlp_step_small), within a time cap.
        from tapejax import config as C
        t0 = time.perf_counter()
        for _ in range(max(0, C.replay_fast_runs + 20 - FIRST_STEPS)):
            if time.perf_counter() - t0 > 5.0:
                break
            lib.block(step())
    m = R.measure(step, lib.block, warmup, repeats, min_run_s)
    extra = {{}}
    if impl == "lazy":
        from tapejax._engine import _lazy
        extra = _lazy.stats()
    print("RESULT " + json.dumps({{"ok": ok, "median_s": m["median_s"], "min_s": m["min_s"], "first_s": first_s,
                                  "first_n_s": first_n_s, "stats": extra}}))
except R.Unavailable as e:
    print("RESULT " + json.dumps({{"unavailable": str(e)}}))
"""


def run_one(workload: str, impl: str, warmup: int, repeats: int, min_run_s: float) -> dict:
    env = dict(os.environ)
    env["TAPEJAX_EXECUTION"] = "lazy" if impl == "lazy" else "eager"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return run_pinned(_CHILD.format(root=ROOT, args=(workload, impl, warmup, repeats, min_run_s),
                                    first_steps=FIRST_STEPS), env, 900)


def run_pinned(code: str, env: dict, timeout: float) -> dict:
    """``code`` in a fresh Python process pinned to core 0 (when ``taskset`` exists): its ``RESULT`` JSON line,
    or ``{"error": ...}`` with the end of its output."""
    cmd = [sys.executable, "-c", code]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (p.stderr or p.stdout)[-600:]}


def merge(rs: list) -> dict:
    """One (workload, implementation)'s rounds: the median of each timing, the first error if any."""
    ok = [r for r in rs if "median_s" in r]
    if len(ok) < len(rs):
        return next(r for r in rs if "median_s" not in r)
    out = dict(ok[-1])
    for k in ("median_s", "min_s", "first_s", "first_n_s"):
        out[k] = statistics.median([r[k] for r in ok])
    out["ok"] = all(r.get("ok", True) for r in ok)
    out["rounds"] = [r["median_s"] for r in ok]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--min-run-ms", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=1,
                    help="fresh processes per (workload, implementation), interleaved across implementations: "
                         "each figure is the median of the rounds, each ratio the median of the rounds' ratios")
    a = ap.parse_args()
    impls = a.impls.split(",")
    per: dict = {}
    for w in a.workloads.split(","):
        for rnd in range(a.rounds):
            for i in impls:
                r = run_one(w, i, a.warmup, a.repeats, a.min_run_ms / 1e3)
                per.setdefault((w, i), []).append(r)
                print(f"{w:16s} {i:18s} round {rnd + 1}/{a.rounds} {json.dumps(r)[:200]}", file=sys.stderr)
    results = {k: merge(rs) for k, rs in per.items()}
    head = "| workload | " + " | ".join(impls) + " |"
    print(head)
    print("|" + "---|" * (len(impls) + 1))
    for w in a.workloads.split(","):
        base = results.get((w, "torch"), {}).get("rounds")
        cells = []
        for i in impls:
            r = results[(w, i)]
            if "median_s" not in r:
                cells.append("n/a")
                continue
            s = f"{r['median_s'] * 1e3:.3f}"
            if base and i != "torch":
                # Per round: this implementation and PyTorch measured minutes apart at most.
                s += f" ({statistics.median([m / b for m, b in zip(r['rounds'], base)]):.2f}×)"
            if not r.get("ok", True):
                s += " WRONG"
            cells.append(s)
        print(f"| {w} | " + " | ".join(cells) + " |")
    print(f"\nms per step, median of {a.rounds} round(s); (×) = ratio to PyTorch eager in the same round, "
          "median of the rounds.\n")
    print(f"| workload (first step, ms / first {FIRST_STEPS} steps, s) | " + " | ".join(impls) + " |")
    print("|" + "---|" * (len(impls) + 1))
    for w in a.workloads.split(","):
        cells = []
        for i in impls:
            r = results[(w, i)]
            cells.append(f"{r['first_s'] * 1e3:.0f} / {r['first_n_s']:.2f}" if "first_s" in r else "n/a")
        print(f"| {w} | " + " | ".join(cells) + " |")
    print(f"\nfirst step and first {FIRST_STEPS} steps of a fresh process (each step blocked on), compiles included"
          + (f"; medians of {a.rounds} processes." if a.rounds > 1 else "."))


if __name__ == "__main__":
    main()
