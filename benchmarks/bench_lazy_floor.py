"""The floor of lazy mode's mlp_step_small: how close any replay of its step can come to PyTorch.

Issue 20 asks lazy tapejax to run mlp_step_small in at most 0.5x PyTorch eager's time. This
measures what stands between the two, in one process pinned to one core, interleaved rounds,
medians (µs per step, each step blocked on):

- ``torch``: PyTorch eager's step, the issue's baseline;
- ``lazy``: lazy tapejax's step (the TF-style source of ``_workloads.mlp_step``, no decorator);
- ``jax.jit``: the same step compiled whole (no Python in the step at all);
- ``program``: lazy mode's own compiled program for the step, called on the step's inputs;
- ``floor``: a model of replay by verification with nothing else in it. Each API call of the
  step is one Python call that checks its operands against the step's script (a pending operand
  by its cell's position, a concrete one by its aval, a variable by identity and aval, a scalar by
  value) and returns a fresh lazy tensor (a cell and a ``Tensor``); the gradient call and the
  updates are predicted the same way; the first read checks which cells are still held and calls
  the program once. No TF signature layer, no dtype checks, no tape record, no node keys:
  a real implementation does all of ``floor`` and more. Its numbers are checked against the lazy
  step's before timing.

``floor`` is a lower bound on any lazy mode that keeps one Python call per API call (which
unchanged eager code makes): if ``floor / torch`` is near 0.5, the target needs that call to be
all there is.

    python benchmarks/bench_lazy_floor.py
    python benchmarks/bench_lazy_floor.py --rounds 3 --steps 200    # quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from benchmarks.bench_lazy import run_pinned  # noqa: E402  (fresh process pinned to core 0, its RESULT line)

IMPLS = ("torch", "lazy", "jax.jit", "program", "floor")


def _child(rounds: int, steps: int, impls: list) -> dict:
    import time

    if hasattr(os, "sched_setaffinity"):  # (one core, as under taskset: before JAX starts its threads)
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    import jax
    import numpy as np

    import tapejax as tf
    from benchmarks import _workloads as W
    from benchmarks import run as R
    from tapejax._core._recorder import Tensor, _next_id
    from tapejax._engine import _lazy

    assert tf.config.get_execution() == "lazy", "run with TAPEJAX_EXECUTION=lazy"
    # One core's schedule, wherever this runs: the step's forward, gradient and updates are one
    # program (with a second core, lazy mode starts the program when the gradient call returns and
    # the updates join the next one), which is the program the floor below models.
    _lazy.RUN_AT_GRADIENT = False
    lib = R.load_lib("tapejax", "cpu", True)
    d = W.mlp_data("mlp_step_small")
    variables = [tf.Variable(p) for p in d["params"]]
    x, y = tf.constant(d["x"]), tf.constant(d["y"])
    lr = d["lr"]

    def lazy_step() -> tuple:
        return W.mlp_step(tf, variables, x, y, lr, d["loss"], False)

    # Past the replay tiers' schedule: the step is one call of its compiled program.
    for _ in range(300):
        lib.block(lazy_step())
    seen: dict = {}
    ready_call = _lazy._Ready.__call__

    def spy(self: object, inputs: list) -> object:
        seen["program"], seen["inputs"] = self, list(inputs)
        return ready_call(self, inputs)

    _lazy._Ready.__call__ = spy  # type: ignore[method-assign]
    try:
        lib.block(lazy_step())
    finally:
        _lazy._Ready.__call__ = ready_call  # type: ignore[method-assign]
    program, p_inputs = seen["program"], seen["inputs"]
    # Which of the program's values leave it, by position among the step's values: the model
    # below must make the same values in the same order (one per API call, six for the gradient).
    p_live = next(k[1] for k, v in _lazy._programs.items() if v is program)

    unset = object()

    class Cell:
        __slots__ = ("value", "run", "slot")

        def force(self) -> object:
            if self.value is unset:
                self.run.materialize()
            return self.value

    class Var:
        """A variable's value, as a verified step would hold it (no tf.Variable machinery)."""

        __slots__ = ("raw",)

        def __init__(self, v: object) -> None:
            self.raw = v

    new_tensor = Tensor.__new__
    new_cell = Cell.__new__
    getrefcount = sys.getrefcount

    class Floor:
        """The step's script (recorded at its first run) and one run's cells and inputs."""

        def __init__(self) -> None:
            self.script: list = []
            self.recording = True
            self.live: tuple = ()

        def begin(self) -> None:
            self.pos = 0
            self.cells: list = []
            self.inputs: list = []
            self.scalars: dict = {}

        def _emit(self) -> Tensor:
            c = new_cell(Cell)
            c.value = unset
            c.run = self
            c.slot = len(self.cells)
            self.cells.append(c)
            t = new_tensor(Tensor)
            t._lz = c
            t._id = _next_id()
            return t

        def _operand(self, a: object, want: tuple | None) -> tuple | None:
            # One operand against the script's entry ``want``; the entry itself when recording.
            ta = type(a)
            if ta is Tensor:
                c = a._lz
                if c is not None and c.value is unset:
                    if c.run is not self:
                        raise AssertionError("another run's value")
                    if want is not None and (want[0] != 0 or want[1] != c.slot):
                        raise AssertionError("script mismatch")
                    return (0, c.slot)
                v = a._value if c is None else c.value
            elif ta is Var:
                v = a.raw
                if type(v) is Cell:
                    if v.run is self and v.value is unset:
                        if want is not None and (want[0] != 0 or want[1] != v.slot):
                            raise AssertionError("script mismatch")
                        return (0, v.slot)
                    v = a.raw = v.value
            else:  # a Python scalar: one input per value
                k = self.scalars.get(a)
                if k is None:
                    k = self.scalars[a] = len(self.inputs)
                    self.inputs.append(a)
                if want is not None and (want[0] != 2 or want[1] != a):
                    raise AssertionError("script mismatch")
                return (2, a)
            av = v.aval
            if want is not None and (want[0] != 1 or want[2] != av or (ta is Var and want[1] is not a)):
                raise AssertionError("script mismatch")
            self.inputs.append(v)
            return (1, a if ta is Var else None, av)

        def op(self, *operands: object) -> Tensor:
            if self.recording:
                self.script.append(tuple(self._operand(a, None) for a in operands))
            else:
                want = self.script[self.pos]
                for a, w in zip(operands, want):
                    self._operand(a, w)
            self.pos += 1
            return self._emit()

        def gradient(self, target: Tensor, sources: list) -> list:
            if self.recording:
                self.script.append(("gradient", target._lz.slot, tuple(sources)))
            else:
                want = self.script[self.pos]
                if target._lz.slot != want[1] or len(sources) != len(want[2]):
                    raise AssertionError("script mismatch")
                for s, w in zip(sources, want[2]):
                    if s is not w:
                        raise AssertionError("script mismatch")
            self.pos += 1
            return [self._emit() for _ in sources]

        def assign(self, var: Var, value: Tensor) -> None:
            if self.recording:
                self.script.append(("assign", var, value._lz.slot))
            else:
                want = self.script[self.pos]
                if want[1] is not var or want[2] != value._lz.slot:
                    raise AssertionError("script mismatch")
            self.pos += 1
            var.raw = self._emit()._lz

        def materialize(self) -> None:
            cells = self.cells
            live = tuple([k for k in range(len(cells)) if getrefcount(cells[k]) > 2])
            if self.recording:
                self.live = live
                self.recording = False
            elif live != self.live:
                raise AssertionError("another set of live values")
            for k, v in zip(live, program(self.inputs)):
                cells[k].value = v

    def floor_step(F: Floor, fvars: list) -> tuple:
        # ``_workloads.mlp_step`` for mlp_step_small, API call for API call.
        F.begin()
        h = x
        n = len(fvars) // 2
        for i in range(n):
            h = F.op(F.op(h, fvars[2 * i]), fvars[2 * i + 1])  # matmul, add
            if i < n - 1:
                h = F.op(h)  # relu
        loss = F.op(F.op(F.op(h, y)))  # subtract, square, reduce_mean
        grads = F.gradient(loss, fvars)
        for v, g in zip(fvars, grads):
            F.assign(v, F.op(lr, g))  # lr * g, assign_sub
        return loss, grads

    # The floor's numbers are the lazy step's: the same program from the same parameters.
    check_steps = 5
    # (read through the variables: with a second core the last updates may still be pending)
    fvars = [Var(jax.numpy.asarray(v.numpy())) for v in variables]

    def first_value(step: object) -> float:
        out = step()  # (held while read: the step's gradients stay live values, as in the timed loop)
        return float(np.asarray(out[0]._value))

    want = [first_value(lazy_step) for _ in range(check_steps)]
    F = Floor()
    got = [first_value(lambda: floor_step(F, fvars)) for _ in range(check_steps)]
    assert F.live == p_live, (F.live, p_live)  # the loss, the gradients, the new values
    assert np.allclose(got, want, rtol=1e-5), (got, want)
    assert all(np.allclose(np.asarray(a._value), np.asarray(b.raw.force()), rtol=1e-5)
               for a, b in zip(variables, fvars))

    jlib = R.load_lib("jax.jit", "cpu", True)
    j_step = R.build_step("mlp_step_small", "jax.jit", jlib, {}, False)

    def floor_block(out: tuple) -> None:
        loss, grads = out
        jax.block_until_ready([t._value for t in (loss, *grads)])

    cases: dict = {}
    if "torch" in impls:
        tlib = R.load_lib("torch", "cpu", True)  # (after tapejax, like the other libraries)
        cases["torch"] = (R.build_step("mlp_step_small", "torch", tlib, {}, False), tlib.block)
    cases.update({
        "lazy": (lazy_step, lib.block),
        "jax.jit": (j_step, jlib.block),
        "program": (lambda: program(p_inputs), jax.block_until_ready),
        "floor": (lambda: floor_step(F, fvars), floor_block),
    })
    cases = {k: cases[k] for k in IMPLS if k in impls}
    for step, block in cases.values():
        for _ in range(50):
            block(step())
    per: dict = {k: [] for k in cases}
    for _ in range(rounds):
        for k, (step, block) in cases.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                block(step())
            per[k].append((time.perf_counter() - t0) / steps)
    base = per.get("torch")
    return {k: {"median_s": statistics.median(v), "ratios": [a / b for a, b in zip(v, base)] if base else None}
            for k, v in per.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--impls", default=None, help="a subset of " + ",".join(IMPLS) + " (default: all; torch where installed)")
    ap.add_argument("--json", default=None, help="also write the results here")
    a = ap.parse_args()
    import importlib.util

    wanted = a.impls.split(",") if a.impls else [i for i in IMPLS if i != "torch" or importlib.util.find_spec("torch")]
    impls = [i for i in IMPLS if i in wanted]
    if os.environ.get("_TAPEJAX_FLOOR_CHILD"):
        print("RESULT " + json.dumps(_child(a.rounds, a.steps, impls)))
        return
    env = dict(os.environ, TAPEJAX_EXECUTION="lazy", _TAPEJAX_FLOOR_CHILD="1", TF_CPP_MIN_LOG_LEVEL="3")
    # The default replay tiers: a forced tier (CI runs the suite under each) changes which program
    # the step is (an interpreted gradient is not part of it), and the floor models the default one.
    env.pop("TAPEJAX_REPLAY_TIER", None)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    argv = [os.path.abspath(__file__), "--rounds", str(a.rounds), "--steps", str(a.steps), "--impls", ",".join(impls)]
    res = run_pinned(f"import runpy, sys; sys.argv = {argv!r}; runpy.run_path(sys.argv[0], run_name='__main__')",
                     env, 1800)
    if "error" in res:
        sys.exit("the measuring process failed:\n" + res["error"])
    print("| | " + " | ".join(impls) + " |")
    print("|" + "---|" * (len(impls) + 1))
    print("| µs per step, median | " + " | ".join(f"{res[k]['median_s'] * 1e6:.0f}" for k in impls) + " |")
    if "torch" in impls:
        print("| ratio to PyTorch, median of rounds | "
              + " | ".join(f"{statistics.median(res[k]['ratios']):.2f}×" for k in impls) + " |")
        print("| ratio to PyTorch, range | "
              + " | ".join(f"{min(res[k]['ratios']):.2f}-{max(res[k]['ratios']):.2f}×" for k in impls) + " |")
    print(f"\n{a.rounds} interleaved rounds of {a.steps} steps, one process pinned to one core.")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
