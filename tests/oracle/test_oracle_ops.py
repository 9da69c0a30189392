"""tapejax's ops against real TensorFlow: values, gradients, None-ness and exception types.

* Every case of ``_op_cases.CASES`` runs with ``tf = tensorflow`` and with
  ``tf = tapejax`` on the same inputs and the same output cotangents. Elementwise
  cases draw their (broadcastable) shapes and values with hypothesis; the others
  draw the seed of their random inputs.
* The pinned conventions, dtype errors and error types of
  ``test_ops_conventions`` are re-run on real TF, so the numbers pinned there are
  TF's, not tapejax's.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapejax
import test_ops_conventions as conv
from _op_cases import CASES, Arg, make_inputs

# Documented differences (compat_docs/ops.md): without x64 tapejax's default int64 results are int32.
INT64_AS_INT32 = {"where[coordinates]"}


def _flat(out):
    return list(out) if isinstance(out, tuple | list) else [out]


def _inexact(a) -> bool:
    return np.asarray(a).dtype.kind in "fc"


def _run(tf, case, inputs, cts):
    xs = [tf.constant(a) for a in inputs]
    with tf.GradientTape() as tape:
        for x in xs:
            if _inexact(x.numpy()):
                tape.watch(x)
        out = _flat(case.fn(tf, *xs))
    diff = [x for x in xs if _inexact(x.numpy())]
    fouts = [o for o in out if _inexact(o.numpy())]
    grads = []
    if diff and fouts:
        gs = tape.gradient(fouts, diff, output_gradients=[tf.constant(c) for c in cts])
        grads = [None if g is None else np.asarray(tf.convert_to_tensor(g)) for g in gs]
    return [np.asarray(o) for o in out], grads


def _cotangents(case, inputs, seed):
    # Shapes and dtypes of the float outputs, from a tapejax forward pass.
    out = _flat(case.fn(tapejax, *[tapejax.constant(a) for a in inputs]))
    rng = np.random.default_rng(seed)
    cts = []
    for o in out:
        a = o.numpy()
        if a.dtype.kind in "fc":
            c = rng.normal(size=a.shape)
            if a.dtype.kind == "c":
                c = c + 1j * rng.normal(size=a.shape)
            cts.append(c.astype(a.dtype))
    return cts


def _compare(real_tf, case, inputs, seed):
    cts = _cotangents(case, inputs, seed)
    t_out, t_grads = _run(real_tf, case, inputs, cts)
    j_out, j_grads = _run(tapejax, case, inputs, cts)
    rtol, atol = max(case.rtol * 5, 1e-4), max(case.atol * 5, 1e-5)
    assert len(t_out) == len(j_out)
    for a, b in zip(t_out, j_out):
        if not (case.id in INT64_AS_INT32 and a.dtype == np.int64 and b.dtype == np.int32):
            assert a.dtype == b.dtype, f"{case.id}: TF dtype {a.dtype}, tapejax {b.dtype}"
        assert a.shape == b.shape, f"{case.id}: TF shape {a.shape}, tapejax {b.shape}"
        np.testing.assert_allclose(b.astype(a.dtype), a, rtol=rtol, atol=atol, err_msg=f"{case.id} value")
    assert [g is None for g in t_grads] == [g is None for g in j_grads], f"{case.id}: None-ness TF {t_grads} tapejax {j_grads}"
    for k, (a, b) in enumerate(zip(t_grads, j_grads)):
        if a is not None:
            np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=f"{case.id} gradient {k}")


def _f32_in(lo: float, hi: float) -> tuple:
    # The float32 numbers inside [lo, hi] (hypothesis wants bounds exactly representable).
    lo32, hi32 = np.float32(lo), np.float32(hi)
    if float(lo32) < lo:
        lo32 = np.nextafter(lo32, np.float32(np.inf))
    if float(hi32) > hi:
        hi32 = np.nextafter(hi32, np.float32(-np.inf))
    return float(lo32), float(hi32)


def _elements(a: Arg):
    lo, hi = _f32_in(a.lo, a.hi)
    if a.kind == "int":
        return st.integers(int(a.lo), int(a.hi) - 1)
    if a.kind == "bool":
        return st.booleans()
    if a.kind == "nonzero":
        return st.floats(*_f32_in(0.3, max(a.hi, 0.5)), width=32).flatmap(lambda v: st.sampled_from([v, -v]))
    if a.kind == "complex":
        f = st.floats(lo, hi, width=32)
        return st.builds(complex, f, f)
    return st.floats(lo, hi, width=32)


@st.composite
def _elementwise_inputs(draw, case):
    if case.elementwise == 1:
        shapes = [draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))]
    else:
        shapes = list(draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4)).input_shapes)
    return [draw(hnp.arrays(np.dtype(a.dtype), s, elements=_elements(a))) for a, s in zip(case.args, shapes)]


ORACLE = [c for c in CASES if c.oracle]
ELEMENTWISE = [c for c in ORACLE if c.elementwise]
OTHER = [c for c in ORACLE if not c.elementwise]


@pytest.mark.parametrize("case", ELEMENTWISE, ids=[c.id for c in ELEMENTWISE])
def test_elementwise_ops_match_tf(real_tf, case):
    @settings(max_examples=3)
    @given(inputs=_elementwise_inputs(case), seed=st.integers(0, 2**16))
    def check(inputs, seed):
        _compare(real_tf, case, inputs, seed)

    check()


@pytest.mark.parametrize("case", OTHER, ids=[c.id for c in OTHER])
def test_ops_match_tf(real_tf, case):
    @settings(max_examples=1)
    @given(seed=st.integers(0, 2**16))
    def check(seed):
        _compare(real_tf, case, make_inputs(case.args, np.random.default_rng(seed)), seed)

    check()


# ---- the pinned conventions and errors, on real TF ----------------------------------------------------------------


@pytest.mark.parametrize("fn, xs, expected", [c[1:] for c in conv.CONVENTIONS], ids=[c[0] for c in conv.CONVENTIONS])
def test_pinned_conventions_are_tf(real_tf, fn, xs, expected):
    got = conv.grad(fn, *xs, module=real_tf)
    for g, e in zip(got, expected):
        assert g is not None and conv.close(g, e), (g, e)


@pytest.mark.parametrize("fn", conv.UNCONNECTED, ids=conv.UNCONNECTED_IDS)
def test_unconnected_ops_are_none_in_tf(real_tf, fn):
    assert conv.grad(fn, [1.5, -0.5], module=real_tf) == [None]


@pytest.mark.parametrize("fn", [m[1] for m in conv.MIXED + conv.FLOAT_ONLY], ids=[m[0] for m in conv.MIXED + conv.FLOAT_ONLY])
def test_dtype_errors_are_tf(real_tf, fn):
    with pytest.raises(real_tf.errors.InvalidArgumentError):
        fn(real_tf)


# Where TF's error type differs, on purpose (documented in compat_docs/ops.md).
ERROR_DIFFERENCES = {
    # TF raises ValueError from a Python-side shape check; identical here.
}


@pytest.mark.parametrize("fn, exc", [e[1:3] for e in conv.ERRORS], ids=[e[0] for e in conv.ERRORS])
def test_error_types_are_tf(real_tf, fn, exc):
    with pytest.raises(Exception) as info:
        fn(real_tf)
    assert type(info.value).__name__ == exc.__name__, f"TF raised {type(info.value).__name__}: {info.value}"
