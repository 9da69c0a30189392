"""Lazy mode's op-layer fast branches (``_lazy.unary``/``_lazy.binary``) against the general path.

A seeded random program of unary and binary op calls on values pending in the thread's lazy
program (with Python floats and ints beside them, both operand orders, broadcasting, dtypes the
fast branches refuse, tapes off, watched, nested and persistent) runs in lazy mode twice: with
the op fast paths on and off (``_machinery.FAST_PATHS``). Both runs must build the same pending
program (its structure key, node by node), record the same equations and structure signatures on
every tape, give the same values, dtypes and errors; the values and the gradients are also checked
against eager mode (to rounding: a structure's first run is op by op, a later one compiled whole).

``test_the_harness_finds_a_1_in_200_bug`` plants a fault in one fast call of 200 and checks the
harness reports it.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import tapejax as tf
from tapejax import config
from tapejax._engine import _lazy
from tapejax._ops import _machinery as M

UNARY = ["sin", "cos", "tanh", "exp", "square", "negative", "abs", "sigmoid", "relu", "sqrt", "log1p", "identity"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "pow", "squared_difference", "div_no_nan"]
# Rarer: ops whose dtypes end or break a float chain (bool results, bool-only inputs, no gradient).
ODD_UNARY = ["floor", "logical_not"]
ODD_BINARY = ["less", "logical_and"]
SCALARS = [1.5, -0.25, 0.5, 0.0, -0.0, 2, 0, -3, 2**31, True, float("nan")]


@pytest.fixture
def lazy(execution_mode: Any) -> None:
    execution_mode("lazy")


def _describe(v: Any) -> Any:
    if isinstance(v, tf.Tensor):
        a = np.asarray(v._value)
        return ("T", str(a.dtype), tuple(a.shape))
    if isinstance(v, tuple | list):
        return tuple(_describe(e) for e in v)
    return ("other", repr(v))


def _structure(tape: Any, base: int) -> list:
    # The recorded equations with ids relative to the case's first id (the two runs make the same
    # number of tensors, so equal structures give equal relative ids).
    out = []
    for e in tape.eqns:
        ins = tuple(("id", i - base if i >= base else "old") if i is not None else ("const", repr(v))
                    for i, v in zip(e.in_ids, e.in_vals))
        out.append((e.prim.name, ins, tuple(o - base for o in e.out_ids)))
    return out


def _sig(tape: Any) -> Any:
    # (an id older than the tape is kept absolute, as minus itself: "old" here)
    return None if tape.sig is None else ([("old" if type(v) is int and v < 0 else v) for v in tape.sig], tape.sig_n)


def _case(rng: random.Random, nrng: np.random.Generator) -> dict:
    dtype = rng.choice(["float32"] * 5 + ["float16", "int32", "bool"])
    shape = rng.choice([(), (3,), (2, 3)])
    n = rng.randint(3, 14)
    calls = []
    for _ in range(n):
        odd = rng.random() < 0.04
        # The operand: the last value mostly, else one of the first (the program's first cells,
        # slots 0 and 1: a slot's encoding must never be taken for anything else).
        src = rng.choice([-1, -1, -1, 0, 1])
        r = rng.random()
        if r < 0.35:
            calls.append(("unary", rng.choice(ODD_UNARY if odd else UNARY), src))
        elif r < 0.42:
            # A reduction over every axis or one (in range or not), keepdims or not.
            calls.append(("reduce", rng.choice(["reduce_sum", "reduce_mean", "reduce_max"]),
                          rng.choice([None, None, 0, -1, 1, 2]), rng.random() < 0.3, src))
        elif r < 0.5:
            # A layer's product: the matrix a variable, a concrete tensor or a pending value (a
            # scalar or vector operand raises on both paths).
            calls.append(("matmul", rng.choice(["variable", "variable", "concrete", "pending"]), rng.random() < 0.3, src))
        else:
            other = rng.choice(["scalar", "scalar", "scalar", "pending", "pending", "broadcast", "concrete",
                                "variable", "variable", "assigned"] + ["mixed"] * (rng.random() < 0.2))
            calls.append(("binary", rng.choice(ODD_BINARY if odd else BINARY), other, rng.choice(SCALARS),
                          rng.random() < 0.3, src))
    if dtype == "bool":
        x0 = nrng.random(shape) < 0.5
    elif dtype == "int32":
        x0 = nrng.integers(-3, 4, shape).astype(np.int32)
    else:
        x0 = (nrng.standard_normal(shape) * 0.7 + 0.2).astype(dtype)
    return {"dtype": dtype, "shape": shape, "calls": calls, "x0": x0,
            "tapes": rng.choice(["none", "watched", "watched", "nested", "persistent", "unwatched"])}


def _chain(case: dict, x: Any, errors: list) -> list:
    # Two pending values to draw operands from, then the calls; a call that raises is noted (its
    # class and message must be the same on both paths) and the chain goes on without it.
    pool = [x + x, x * x if case["dtype"] != "bool" else x]
    # Variables: one concrete, one assigned in this program (it holds a pending value), and the
    # matrices of ``matmul`` calls (the last axis's size, square).
    var = tf.Variable(case["x0"])
    assigned = tf.Variable(case["x0"])
    k = case["shape"][-1] if case["shape"] else 1
    w0 = (np.eye(k) * 0.5 + 0.125).astype(case["dtype"])
    mats = {"variable": tf.Variable(w0), "concrete": tf.constant(w0)}
    try:
        assigned.assign_add(pool[0])
        mats["pending"] = mats["concrete"] + mats["concrete"]
    except Exception as e:  # noqa: BLE001 - (bool: no add; the same on both paths)
        errors.append((type(e).__name__, str(e)))
        mats["pending"] = mats["concrete"]
    for c in case["calls"]:
        a = pool[c[-1]]
        try:
            if c[0] == "unary":
                y = M.OPS[c[1]](a)
            elif c[0] == "reduce":
                y = getattr(tf, c[1])(a, axis=c[2], keepdims=c[3])
            elif c[0] == "matmul":
                w = mats[c[1]]
                y = tf.matmul(w if c[2] and a.shape.rank == 2 else a, a if c[2] and a.shape.rank == 2 else w)
            else:
                _, name, other, s, swap, _src = c
                if other == "scalar":
                    b: Any = s
                elif other == "pending":
                    b = pool[-2]
                elif other == "broadcast":
                    b = pool[0][..., :1] if a.shape.rank else pool[0]
                elif other == "concrete":
                    b = tf.constant(case["x0"])
                elif other == "variable":
                    b = var
                elif other == "assigned":
                    b = assigned
                else:
                    b = tf.constant(np.ones(case["shape"], np.float16))
                y = M.OPS[name](b, a) if swap else M.OPS[name](a, b)
        except Exception as e:  # noqa: BLE001
            errors.append((type(e).__name__, str(e)))
            continue
        pool.append(y)
    return pool


def _run(case: dict, fast: bool) -> dict:
    try:
        _lazy.flush()
    except Exception:  # noqa: BLE001, S110 - (nothing of an earlier case should be pending)
        pass
    M.FAST_PATHS = fast
    try:
        x = tf.constant(case["x0"])
        base = tf.constant(0.0)._id
        res: dict = {}
        errors: list = []
        try:
            if case["tapes"] == "none":
                pool = _chain(case, x, errors)
                res["prog"] = list(_lazy._tls.prog.key) if _lazy._tls.prog is not None else None
            else:
                with tf.GradientTape(persistent=case["tapes"] == "persistent") as outer:
                    if case["tapes"] != "unwatched":
                        outer.watch(x)
                    with tf.GradientTape() as inner:
                        if case["tapes"] == "nested":
                            inner.watch(x)
                        pool = _chain(case, x, errors)
                    out = pool[-1]
                    loss = tf.reduce_sum(out) if out.dtype.is_floating else None
                res["prog"] = list(_lazy._tls.prog.key) if _lazy._tls.prog is not None else None
                res["outer"] = (_structure(outer._tape, base), _sig(outer._tape))
                res["inner"] = (_structure(inner._tape, base), _sig(inner._tape))
                if loss is not None and case["tapes"] != "unwatched":
                    g = outer.gradient(loss, x)
                    res["grad"] = None if g is None else np.asarray(g.numpy(), np.float64)
            res["errors"] = errors
            res["out"] = _describe(pool)
            # Every value the chain made, not only the last (a wrong one may not reach it).
            res["vals"] = [np.asarray(p.numpy()).astype(np.float64) for p in pool]
        except Exception as e:  # noqa: BLE001 - the error must be the same on both paths
            res["raised"] = (type(e).__name__, str(e))
        return res
    finally:
        M.FAST_PATHS = True


def _same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        if k == "vals":
            if len(a[k]) != len(b[k]) or not all(np.array_equal(u, v, equal_nan=True) for u, v in zip(a[k], b[k])):
                return False
        elif k == "grad":
            if (a[k] is None) != (b[k] is None):
                return False
            if a[k] is not None and not np.array_equal(a[k], b[k], equal_nan=True):
                return False
        elif a[k] != b[k]:
            return False
    return True


def _program(seed: int, n: int) -> tuple[list, int]:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    bad = []
    taken = [0]  # op calls the fast branches deferred
    emit = _lazy._emit

    def counting(*a: Any) -> Any:
        out = emit(*a)
        taken[0] += out is not NotImplemented
        return out

    _lazy._emit = counting
    try:
        for _ in range(n):
            case = _case(rng, nrng)
            # Twice each: a case's first run registers its nodes, the second meets them known (the
            # fast branches' case); the general run in between sees the same nodes.
            for _rep in range(2):
                a = _run(case, True)
                b = _run(case, False)
                if not _same(a, b):
                    bad.append((case, a, b))
                    break
    finally:
        _lazy._emit = emit
    return bad, taken[0]


def _eager(case: dict) -> dict:
    config.set_execution("eager")
    try:
        return _run(case, True)
    finally:
        config.set_execution("lazy")


def test_fast_and_general_lazy_paths_agree_on_random_programs(lazy: None) -> None:
    bad, taken = _program(seed=20, n=120)
    assert taken > 400
    assert not bad, bad[:2]


def test_the_fast_branches_match_eager_mode(lazy: None) -> None:
    rng = random.Random(21)
    nrng = np.random.default_rng(21)
    checked = 0
    for _ in range(50):
        case = _case(rng, nrng)
        got = [_run(case, True) for _ in range(3)]  # (the third run of a structure: compiled or not, equal)
        want = _eager(case)
        for g in got:
            assert ("raised" in g) == ("raised" in want), (case, g, want)
            if "raised" in g:
                assert g["raised"][0] == want["raised"][0]
                continue
            assert g["out"] == want["out"]
            assert [e[0] for e in g["errors"]] == [e[0] for e in want["errors"]]
            for u, v in zip(g["vals"], want["vals"]):
                np.testing.assert_allclose(u, v, rtol=2e-3 if case["dtype"] == "float16" else 1e-5,
                                           atol=1e-6, equal_nan=True)
            if want.get("grad") is not None:
                checked += 1
                np.testing.assert_allclose(g["grad"], want["grad"], rtol=2e-2 if case["dtype"] == "float16" else 1e-4,
                                           atol=1e-5, equal_nan=True)
            else:
                assert g.get("grad") is None
    assert checked > 25


def test_the_fast_branches_are_taken(lazy: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # Not a vacuous comparison: a training step's unary ops and its binary ops on pending values
    # (with a Python float, or two pending values) are deferred by the fast branches once seen.
    hits: list = []
    real = _lazy._emit

    def spy(prog: Any, prim: Any, *a: Any) -> Any:
        out = real(prog, prim, *a)
        if out is not NotImplemented:
            hits.append(prim.name)
        return out

    monkeypatch.setattr(_lazy, "_emit", spy)
    x = tf.constant([0.5, 1.5])
    for _ in range(4):
        hits.clear()
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.sin(x * 1.5)
            y = tf.tanh(y + 0.1) * y
        t.gradient(y, x).numpy()
    # Once the nodes are known (two steps), every op but the first (it starts the step's program,
    # on a concrete tensor) is deferred by a fast branch.
    assert sorted(hits) == ["add", "multiply", "sin", "tanh"], hits


def _faulty_emit(real_emit: Any, count: list, mixed_only: bool) -> Any:
    # ``_lazy._emit`` with a fault in one call of 200 (of ``mixed``'s calls only: two operands and a
    # parameter dict): an operand wired to another value of the program (the other operand, the cell
    # or input just before its own), else the recorded input ids dropped. (A swap of the two operands
    # would go unseen on a commutative op, dropped ids on an unwatched one.)
    def faulty_emit(prog: Any, prim: Any, sl: tuple, node: tuple, rec: Any, in_ids: tuple, in_vals: tuple,
                    new_sc: Any = None, ps: Any = None, new_arr: Any = None) -> Any:
        if not mixed_only or (ps is not None and len(sl) == 2):
            count[0] += 1
            if count[0] % 200 == 0:
                if len(sl) == 2 and new_sc is None and sl[0] != sl[1]:
                    sl = (sl[0], sl[0])
                elif sl[0] < -1:  # (cell ~s, s >= 1: wired to cell s - 1)
                    sl = (sl[0] + 1,) + sl[1:]
                elif sl[0] >= 1:  # (input j >= 1: wired to input j - 1)
                    sl = (sl[0] - 1,) + sl[1:]
                else:
                    in_ids = tuple(None for _ in in_ids)
        return real_emit(prog, prim, sl, node, rec, in_ids, in_vals, new_sc, ps, new_arr)

    return faulty_emit


def test_the_harness_finds_a_1_in_200_bug(lazy: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fault in one fast-branch call of 200: the operands' wiring swapped (a wrong slot), or an
    # input id dropped from the recorded equation. The random program must report it.
    count = [0]
    monkeypatch.setattr(_lazy, "_emit", _faulty_emit(_lazy._emit, count, mixed_only=False))
    bad, _ = _program(seed=20, n=120)
    assert count[0] >= 200, count
    assert bad


def test_the_harness_finds_a_1_in_200_bug_in_the_mixed_branch(lazy: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same for ``_lazy.mixed`` alone (a concrete tensor, a variable or a matmul operand): one of
    # its 200 deferred calls gets its operands' wiring swapped or its recorded input ids dropped.
    count = [0]
    monkeypatch.setattr(_lazy, "_emit", _faulty_emit(_lazy._emit, count, mixed_only=True))
    bad, _ = _program(seed=20, n=120)
    assert count[0] >= 200, count
    assert bad


def test_variables_and_concrete_operands_take_the_mixed_branch(lazy: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # A dense layer's ops: ``x @ W`` (the step's first op, concrete operands), ``h + b`` (a
    # variable), ``h - y`` (a concrete tensor) and an update's variable, all deferred by ``mixed``
    # once seen, with gradients equal to eager mode's.
    hits: list = []
    real = _lazy.mixed

    def spy(prim: Any, *a: Any) -> Any:
        out = real(prim, *a)
        if out is not NotImplemented:
            hits.append(prim.name)
        return out

    monkeypatch.setattr(_lazy, "mixed", spy)
    rng = np.random.default_rng(3)
    x = tf.constant(rng.standard_normal((4, 3)).astype(np.float32))
    y = tf.constant(rng.standard_normal((4, 2)).astype(np.float32))

    def run() -> list:
        w = tf.Variable(rng.standard_normal((3, 2)).astype(np.float32))
        b = tf.Variable(np.float32([0.5, -0.5]))
        out = []
        for _ in range(4):
            hits.clear()
            with tf.GradientTape() as t:
                h = tf.matmul(x, w) + b
                loss = tf.reduce_sum(tf.square(h - y) * b)
            gw, gb = t.gradient(loss, [w, b])
            b.assign_sub(0.1 * gb)
            out.append((loss.numpy(), gw.numpy(), gb.numpy(), b.numpy()))
        return out

    lazy_out = run()
    assert sorted(hits) == ["add", "matmul", "multiply", "subtract"], hits
    rng = np.random.default_rng(3)
    x = tf.constant(rng.standard_normal((4, 3)).astype(np.float32))
    y = tf.constant(rng.standard_normal((4, 2)).astype(np.float32))
    config.set_execution("eager")
    try:
        eager_out = run()
    finally:
        config.set_execution("lazy")
    for got, want in zip(lazy_out, eager_out):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_scalar_first_operand_new_to_the_program_beside_its_first_value(lazy: None) -> None:
    # ``1.5 / (x + x)``: the pending operand is the program's cell 0 (slot ~0 == -1) and the scalar is
    # new (its slot is given under the lock). A placeholder of -1 for the scalar's slot once took
    # the cell's slot for it and computed (x + x) / 1.5 from the third step on.
    x = tf.constant(np.float32([2.0, 4.0]))
    for _ in range(5):
        y = M.OPS["divide"](1.5, x + x)
        z = M.OPS["subtract"](0.25, y)
        np.testing.assert_allclose(y.numpy(), np.float32([0.375, 0.1875]))
        np.testing.assert_allclose(z.numpy(), np.float32([0.25 - 0.375, 0.25 - 0.1875]))
