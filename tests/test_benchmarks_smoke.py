"""Smoke test of benchmarks/: every workload runs (one step, no timing assertions) on
tapejax and JAX, and tapejax's values and gradients agree with the ``jax.jit``
reference the benchmark compares against. Also the runner's own logic: the
mismatch check and the markdown block that must leave other sections alone.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import _workloads as W  # noqa: E402
from benchmarks import run as R  # noqa: E402

import tapejax  # noqa: E402

TIMED = [n for n, w in W.WORKLOADS.items() if w.kind == "time" and n != "batch_jacobian_b256"]


def _opts() -> dict:
    # One warm-up-free run of one step: this checks the code paths, never the speed.
    return {"warmup": 0, "repeats": 1, "min_run_s": 0.0, "builtin_xent": W.has_builtin_xent(tapejax),
            "sizes": R.default_sizes(quick=True, smoke=True)}


_REF: dict = {}


def _reference(workload: str) -> list:
    if workload not in _REF:
        lib = R.load_lib("jax.jit", "cpu", pinned=False)
        _REF[workload] = lib.to_numpy(R.build_step(workload, "jax.jit", lib, {}, False)())
    return _REF[workload]


@pytest.mark.parametrize("impl", ["tapejax", "tapejax.function", "jax"])
@pytest.mark.parametrize("workload", TIMED)
def test_workload_matches_jax_jit(workload, impl):
    lib = R.load_lib(impl, "cpu", pinned=False)
    metrics, check = R.run_timed(workload, impl, lib, _opts())
    assert metrics["median_s"] > 0 and metrics["min_s"] <= metrics["median_s"]
    ok, err, why = R.compare(_reference(workload), check, W.WORKLOADS[workload].rtol)
    assert ok, f"{workload}/{impl}: {why}"


def test_mlp_gradients_are_the_analytic_ones():
    # Independent of the benchmark's own JAX code: jax.grad of a separately written loss.
    d = W.mlp_data("mlp_step_small")
    lib = R.load_lib("tapejax", "cpu", pinned=False)
    loss, *grads = lib.to_numpy(R.build_step("mlp_step_small", "tapejax", lib, {}, False)())
    w1, b1, w2, b2, w3, b3 = (jnp.asarray(p) for p in d["params"])

    def f(w1, b1, w2, b2, w3, b3):
        h = jnp.maximum(d["x"] @ w1 + b1, 0)
        h = jnp.maximum(h @ w2 + b2, 0)
        return jnp.mean((h @ w3 + b3 - d["y"]) ** 2)

    ref = jax.grad(f, argnums=tuple(range(6)))(w1, b1, w2, b2, w3, b3)
    np.testing.assert_allclose(loss, f(w1, b1, w2, b2, w3, b3), rtol=1e-5)
    for g, r in zip(grads, ref):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-6)


def test_record_overhead_modes_compute_the_same_forward():
    lib = R.load_lib("tapejax", "cpu", pinned=False)
    metrics, (y,) = R.run_overhead("tapejax", lib, _opts())
    assert set(metrics) >= {"bare jnp", "no tape", "tape", "overhead_us_per_op", "recording_us_per_op"}
    assert metrics["ops"] == 4 * W.SCALAR_CHAIN_BLOCKS
    ref = W.scalar_chain_forward(jnp, jnp.float32(0.5), W.SCALAR_CHAIN_BLOCKS)
    np.testing.assert_allclose(y, ref, rtol=1e-6)


def test_memory_workloads_run_and_match():
    lib = R.load_lib("tapejax", "cpu", pinned=False)
    m, check = R.run_memory("memory_mlp", "tapejax", lib, _opts())
    assert m["steps"] == 3 and m["peak_rss_mb"] > 0
    ok, _, why = R.compare(_reference("mlp_step"), check, W.WORKLOADS["mlp_step"].rtol)
    assert ok, why
    m, (y, g) = R.run_memory("memory_chain", "tapejax", lib, _opts())
    nb = m["ops"] // 4
    ry, rg = jax.value_and_grad(lambda x: W.scalar_chain_forward(jnp, x, nb))(jnp.float32(0.5))
    np.testing.assert_allclose([y, g], [ry, rg], rtol=1e-4)


def test_compare_reports_a_mismatch():
    ref = [np.array([1.0, 2.0, 3.0])]
    assert R.compare(ref, [np.array([1.0, 2.0, 3.0 + 1e-6])], 1e-4)[0]
    ok, err, why = R.compare(ref, [np.array([1.0, 2.1, 3.0])], 1e-4)
    assert not ok and err == pytest.approx(0.1 / 3) and "output 0" in why
    assert not R.compare(ref, [np.ones(2)], 1e-4)[0]
    assert not R.compare(ref, ref + ref, 1e-4)[0]
    assert not R.compare(ref, [np.array([1.0, np.nan, 3.0])], 1e-4)[0]


def test_write_block_keeps_other_sections(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\nintro\n\n## Jacobians\n\ntheirs\n")
    R.write_block(str(doc), "cpu", "first table")
    R.write_block(str(doc), "gpu", "gpu table")
    R.write_block(str(doc), "cpu", "second table")
    text = doc.read_text()
    assert "intro" in text and "## Jacobians\n\ntheirs" in text and "gpu table" in text
    assert "second table" in text and "first table" not in text
    assert text.count(R.markers("cpu")[0]) == 1


def test_runner_end_to_end_in_subprocesses(tmp_path):
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--no-write", "--workloads",
           "scalar_chain", "--impls", "tapejax,jax.jit", "--repeats", "1", "--warmup", "0", "--core", "-1", "--rounds", "2",
           "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())["scalar_chain"]
    assert res["jax.jit"]["ok"] and res["tapejax"]["ok"], proc.stderr[-2000:]
    assert res["tapejax"]["check"][0] == "ok" and res["tapejax"]["metrics"]["rounds"] == 2
    assert "| scalar_chain |" in proc.stdout


def test_rounds_merge_medians_and_minima():
    def res(med, mn, over):
        return {"ok": True, "wall_s": 1.0, "metrics": {"median_s": med, "min_s": mn, "inner": 4,
                                                       "tape": {"us_per_op": over, "min_us_per_op": mn},
                                                       "overhead_us_per_op": over}}

    merged = R.merge_rounds([res(3.0, 2.0, 5.0), res(1.0, 0.5, 1.0), res(2.0, 1.5, 2.0)])
    m = merged["metrics"]
    assert (m["median_s"], m["min_s"], m["overhead_us_per_op"]) == (2.0, 0.5, 2.0)
    assert (m["tape"]["us_per_op"], m["tape"]["min_us_per_op"], m["rounds"]) == (2.0, 0.5, 3)
    assert merged["wall_s"] == 3.0
    failed = {"ok": False, "error": "boom", "wall_s": 1.0}
    assert R.merge_rounds([res(1.0, 1.0, 1.0), failed]) is failed


def test_autograph_benchmark_loops_agree():
    """benchmarks/bench_autograph.py: the converted tapejax loop and the lax loop give the same
    losses and weights (its main() asserts that before timing)."""
    from benchmarks import bench_autograph as B

    res = B.main(["--steps", "3", "--repeats", "1"])
    assert res["ratio"] > 0


def test_gc_benchmark_runs_with_and_without_the_freeze():
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_gc.py"), "--workloads", "scalar_chain", "--impls",
           "tapejax,tapejax-nofreeze", "--runs", "1", "--first-steps", "2", "--min-loop-s", "0", "--max-steps", "20"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    frozen = {}
    for line in proc.stderr.splitlines():
        name, impl, rest = line.split(None, 2)
        r = json.loads(rest)
        assert r["steps"] == 20 and r["mean_ms"] > 0 and 0 <= r["gc_share"] < 1, r
        frozen[impl] = r["frozen"]
    assert frozen["tapejax-nofreeze"] == 0 and frozen["tapejax"] > 50_000
    assert proc.stdout.count("| scalar_chain |") == 2


def test_keras_saving_benchmark_times_every_operation(tmp_path):
    out = tmp_path / "saving.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_keras_saving.py"), "--models", "mlp", "--impls", "tapejax",
           "--runs", "1", "--repeats", "1", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(out.read_text())["mlp/tapejax"]
    assert sorted(r) == sorted(["deepcopy", "pickle", "save_keras", "load_keras", "save_h5", "load_h5"]), r
    assert all(v["first_s"] > 0 and v["median_s"] > 0 for v in r.values())
    assert proc.stdout.count("| mlp |") == 6


def test_lazy_floor_benchmark_checks_its_model_against_the_lazy_step(tmp_path):
    """benchmarks/bench_lazy_floor.py: its model of a verified step gives the lazy step's losses
    and weights (the measuring process asserts that before timing) and every case is timed."""
    out = tmp_path / "floor.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_lazy_floor.py"), "--impls", "lazy,jax.jit,program,floor",
           "--rounds", "1", "--steps", "5", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    r = json.loads(out.read_text())
    assert sorted(r) == sorted(["lazy", "jax.jit", "program", "floor"]), r
    assert all(v["median_s"] > 0 and v["ratios"] is None for v in r.values()), r


def test_lazy_benchmark_rounds_merge_to_medians():
    from benchmarks import bench_lazy as B

    rs = [{"ok": True, "median_s": m, "min_s": m / 2, "first_s": 10 * m, "first_n_s": 100 * m} for m in (3.0, 1.0, 2.0)]
    r = B.merge(rs)
    assert (r["median_s"], r["min_s"], r["first_s"], r["first_n_s"]) == (2.0, 1.0, 20.0, 200.0)
    assert r["rounds"] == [3.0, 1.0, 2.0] and r["ok"]
    assert not B.merge(rs + [dict(rs[0], ok=False)])["ok"]
    assert B.merge(rs + [{"error": "boom"}]) == {"error": "boom"}
