"""Every op case of ``_op_cases.CASES``: tapejax's value and tape gradient against the
``jax.numpy`` reference and ``jax.vjp`` of it, on random inputs.

The gradient is taken with random output cotangents (``output_gradients``), so a
wrong transpose or a wrong broadcast reduction cannot hide behind a sum. For
complex values the expected TF gradient is ``conj(vjp(conj(cotangent)))``.
Cases marked ``grad=False`` are ops TF does not differentiate: their gradient
must be None.

Speed: XLA compilation dominates (tens of ms per program), so cases are run in
groups: one tape and one ``gradient`` call per group (one compiled replay), one
compiled reference program per group. The cases' inputs are distinct tensors,
so each case's gradient is exactly what it would be alone; each case is still
its own test item, asserting its own outputs and gradients.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf
from _op_cases import CASES, make_inputs

INEXACT = ("f", "c")
GROUP = 12


def flat(out):
    return list(out) if isinstance(out, tuple | list) else [out]


def is_inexact(a) -> bool:
    dt = np.dtype(a.dtype) if hasattr(a, "dtype") else np.asarray(a).dtype
    return dt.kind in INEXACT or str(dt) == "bfloat16"


def cotangent(rng, t):
    a = np.asarray(t)
    c = rng.normal(size=a.shape)
    if a.dtype.kind == "c":
        c = c + 1j * rng.normal(size=a.shape)
    return c.astype(a.dtype)


class Run:
    """One case's inputs, tapejax outputs and gradients, and reference outputs and gradients."""

    def __init__(self, case):
        self.case = case
        rng = np.random.default_rng(case.seed())
        self.inputs = make_inputs(case.args, rng)
        self.rng = rng
        self.diff = [i for i, a in enumerate(self.inputs) if is_inexact(a)]
        self.error: BaseException | None = None


def _forward(runs, tape):
    for r in runs:
        try:
            r.tensors = [tf.constant(a) for a in r.inputs]
            for i in r.diff:
                tape.watch(r.tensors[i])
            r.out = flat(r.case.fn(tf, *r.tensors))
            r.float_outs = [o for o in r.out if is_inexact(o.numpy())]
            r.cts = [cotangent(r.rng, o) for o in r.float_outs]
        except Exception as e:  # reported by that case's test
            r.error = e


def _tape_grads(runs):
    """tapejax outputs, and gradients of the inexact outputs (weighted by random cotangents), one replay per group."""
    with tf.GradientTape() as tape:
        _forward(runs, tape)
    live = [r for r in runs if r.error is None and r.diff and r.float_outs]
    targets = [o for r in live for o in r.float_outs]
    cts = [tf.constant(c) for r in live for c in r.cts]
    sources = [[r.tensors[i] for i in r.diff] for r in live]
    for r in runs:
        r.grads = None
    if live:
        grads = tape.gradient(targets, sources, output_gradients=cts)
        for r, g in zip(live, grads):
            r.grads = g


def _ref_fn(runs):
    """f(diff arrays per run, cotangents per run) -> (outputs per run, TF-convention gradients per run)."""

    def fn(diffs, cts):
        outs, grads = [], []
        for r, d, c in zip(runs, diffs, cts):
            arrays = [jnp.asarray(a) for a in r.inputs]

            def f(*dv, r=r, arrays=arrays):
                vals = list(arrays)
                for i, v in zip(r.diff, dv):
                    vals[i] = v
                o = flat(r.case.ref(*vals))
                return tuple(x for x in o if is_inexact(x)), o

            if c:
                _, vjp, o = jax.vjp(f, *d, has_aux=True)
                g = vjp(tuple(jnp.conj(x) for x in c))
            else:
                o, g = f(*d)[1], ()
            outs.append(o)
            grads.append(g)
        return outs, grads

    return fn


def _reference(runs, jit=True):
    args = ([[jnp.asarray(r.inputs[i]) for i in r.diff] for r in runs],
            [[jnp.asarray(c) for c in r.cts] if (r.case.grad and r.diff) else [] for r in runs])
    fn = _ref_fn(runs)
    # One compiled program for the group rather than one per jnp primitive.
    outs, grads = jax.jit(fn)(*args) if jit else fn(*args)
    for r, o, g in zip(runs, outs, grads):
        r.ref = [np.asarray(x) for x in o]
        r.exp = [np.conj(np.asarray(x)) for x in g]


FAST = [i for i, c in enumerate(CASES) if not c.slow]


@functools.lru_cache(maxsize=None)
def _group(k: int) -> dict:
    return _group_of([Run(CASES[i]) for i in FAST[k * GROUP:(k + 1) * GROUP]])


@functools.lru_cache(maxsize=None)
def _alone(index: int) -> dict:
    return _group_of([Run(CASES[index])])


def _group_of(runs: list) -> dict:
    _tape_grads(runs)
    ok = [r for r in runs if r.error is None]
    try:
        _reference(ok)
    except Exception:
        for r in ok:  # isolate the case whose reference fails
            try:
                _reference([r])
            except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
                _reference([r], jit=False)  # a data-dependent shape (argwhere, unique): eager
            except Exception as e:
                r.error = e
    return {r.case.id: r for r in runs}


def _run(index: int) -> Run:
    if CASES[index].slow:
        return _alone(index)[CASES[index].id]
    return _group(FAST.index(index) // GROUP)[CASES[index].id]


@pytest.mark.parametrize("index", [pytest.param(i, marks=pytest.mark.slow) if c.slow else i for i, c in enumerate(CASES)],
                         ids=[c.id for c in CASES])
def test_value_and_gradient_match_jax(index):
    r = _run(index)
    case = r.case
    if r.error is not None:
        raise r.error
    out, ref = r.out, r.ref
    assert len(out) == len(ref), f"{case.id}: {len(out)} outputs, reference has {len(ref)}"
    for o, e in zip(out, ref):
        assert isinstance(o, tf.Tensor), f"{case.id}: output is {type(o).__name__}, not a Tensor"
        assert o.numpy().dtype == e.dtype, f"{case.id}: dtype {o.numpy().dtype} != reference {e.dtype}"
        assert tuple(o.shape) == e.shape, f"{case.id}: shape {tuple(o.shape)} != reference {e.shape}"
        np.testing.assert_allclose(o.numpy().astype(e.dtype), e, rtol=case.rtol, atol=case.atol, err_msg=case.id)
    if not r.diff or not r.cts:
        assert not case.grad or not r.diff, f"{case.id}: declared differentiable but has no inexact output"
        return
    if not case.grad:
        assert all(g is None for g in r.grads), f"{case.id}: TF gives no gradient here, got {r.grads}"
        return
    for k, (g, e) in enumerate(zip(r.grads, r.exp)):
        assert g is not None, f"{case.id}: gradient of input {r.diff[k]} is None"
        assert g.numpy().dtype == np.asarray(r.inputs[r.diff[k]]).dtype, f"{case.id}: gradient dtype {g.numpy().dtype}"
        np.testing.assert_allclose(g.numpy(), e, rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5),
                                   err_msg=f"{case.id}: gradient of input {r.diff[k]}")


def test_every_case_names_a_public_symbol():
    for case in CASES:
        for n in (case.name,) + tuple(case.covers):
            if n.startswith("__"):
                assert hasattr(tf.Tensor, n), n
                continue
            obj = tf
            for part in n.split("."):
                obj = getattr(obj, part, None)
                assert obj is not None, f"tapejax has no {n}"


def test_a_case_alone_gives_the_grouped_result():
    # The grouping is an optimisation only: one case run by itself gives the same numbers.
    index = next(i for i, c in enumerate(CASES) if c.name == "math.top_k")
    grouped = _run(index)
    alone = Run(CASES[index])
    _tape_grads([alone])
    for a, b in zip(grouped.out, alone.out):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(grouped.grads, alone.grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
