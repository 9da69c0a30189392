"""Linear algebra with TF's signatures: ``matmul``, ``tensordot``, ``einsum`` and ``tf.linalg``.

TF conventions kept here:

* ``eigh``/``eigvalsh`` read only the lower triangle (as TF's kernel does), so
  their gradient is lower-triangular; ``cholesky`` reads the lower triangle too
  but its gradient is symmetric (TF's ``CholeskyGrad``).
* ``svd`` returns ``(s, u, v)`` (not ``v^H``), ``qr`` a ``Qr(q, r)`` namedtuple,
  ``slogdet`` a ``LogMatrixDeterminant(sign, log_abs_determinant)``.
* ``inv`` of a singular matrix raises ``InvalidArgumentError`` (checked on
  concrete values); ``cholesky`` of a non-positive-definite one gives nan, as TF.
"""

from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import errors
from .._core._recorder import Tensor, bind, bind_ran2, state  # noqa: F401
from . import _tfgrad
from ._machinery import (
    INEXACT,
    NUMERIC,
    _as_t,
    _binary_operands,
    _concrete,
    _dt,
    _export,
    _is_t,
    check_dtype,
    fast_values,
    lazy_mixed,
    norm_axis,
    prim,
    same_dtype,
)
from .array import _int, expand_dims, squeeze, transpose

# ---- matmul, matvec, tensordot, einsum ----------------------------------------------------


def _mt(x: Any, t: bool, a: bool) -> Any:
    if t or a:
        x = jnp.swapaxes(x, -1, -2)
    return jnp.conj(x) if a else x


_matmul_p = prim("matmul", lambda a, b, ta, tb, aa, ab: jnp.matmul(_mt(a, ta, aa), _mt(b, tb, ab)))
# The two products of MatMulGrad for matrices, as JAX's pullback of ``a @ b`` writes them
# (``_ops/_gradfns``: a nested gradient records them): ``c @ b^T`` and ``(c^T @ a)^T``. The
# same dot as the pullback's gives its bits; ``c @ transpose(b)`` sums in another order.
prim("matmul_grad_a", lambda c, b: lax.dot_general(c, b, (((1,), (1,)), ((), ()))))
prim("matmul_grad_b", lambda c, a: jnp.transpose(lax.dot_general(c, a, (((0,), (0,)), ((), ())))))
_MATMUL_PARAMS = {"ta": False, "tb": False, "aa": False, "ab": False}
_MATMUL_KEY = tuple(sorted(_MATMUL_PARAMS.items()))
_MATMUL_PKEY = tuple(_MATMUL_PARAMS.items())  # (lazy mode's node key: ``bind``'s keyword order below)
_matmul_run2 = _matmul_p.impl.run2  # type: ignore[attr-defined]


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False, adjoint_a: bool = False,
           adjoint_b: bool = False, a_is_sparse: bool = False, b_is_sparse: bool = False,
           output_type: Any = None, grad_a: bool = False, grad_b: bool = False, name: str | None = None) -> Tensor:
    """Matrix product of the last two axes (batch axes broadcast), as ``tf.linalg.matmul``.

    Example:
        >>> import tapejax as tf
        >>> tf.matmul(tf.ones((2, 3)), tf.ones((3, 4))).shape
        TensorShape([2, 4])
    """
    if not (transpose_a or transpose_b or adjoint_a or adjoint_b):
        vs = fast_values(a, b)
        if vs is not None:
            va, vb = vs
            # Two concrete matrices of one accepted dtype whose inner sizes agree: the checks below pass.
            ax, bx = va.aval, vb.aval  # (``v.shape`` and ``v.dtype`` are Python properties over it)
            sa, sb = ax.shape, bx.shape
            if len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0] and ax.dtype == bx.dtype and ax.dtype in NUMERIC:
                out = _matmul_run2(va, vb, _MATMUL_KEY, _MATMUL_PARAMS)
                if state.__dict__["recording"]:  # (one thread-local lookup)
                    return bind_ran2(_matmul_p, a, b, va, vb, out, dict(_MATMUL_PARAMS))
                return Tensor(out)
        else:
            # Lazy mode: ``h @ W`` of a layer (pending, concrete or variable operands) deferred
            # without the general path's conversions (its node passed the checks below once).
            out = lazy_mixed(_matmul_p, a, b, NUMERIC, _MATMUL_PKEY, dict(_MATMUL_PARAMS))
            if out is not NotImplemented:
                return out
    a, b = _binary_operands("MatMul", a, b)
    a, b = _as_t(a), _as_t(b)
    if (transpose_a and adjoint_a) or (transpose_b and adjoint_b):
        raise ValueError("Only one of transpose and adjoint may be True for each operand.")
    if _dt(a) not in NUMERIC:
        check_dtype("MatMul", a, NUMERIC)
    sa, sb = a._aval.shape, b._aval.shape
    if len(sa) < 2 or len(sb) < 2:
        raise errors.InvalidArgumentError(
            f"In[0] and In[1] must be at least rank 2 for MatMul, got shapes {list(sa)} and {list(sb)} [Op:MatMul]. "
            "Use tf.linalg.matvec or tf.tensordot for vectors."
        )
    ka = sa[-2] if (transpose_a or adjoint_a) else sa[-1]
    kb = sb[-1] if (transpose_b or adjoint_b) else sb[-2]
    if ka != kb:
        raise errors.InvalidArgumentError(f"Matrix size-incompatible: In[0]: {list(sa)}, In[1]: {list(sb)} [Op:MatMul]")
    if len(sa) > 2 or len(sb) > 2:  # (no batch axes: nothing to check, and the check costs µs per op)
        try:
            jnp.broadcast_shapes(sa[:-2], sb[:-2])
        except ValueError:
            raise errors.InvalidArgumentError(f"In[0] and In[1] must have compatible batch dimensions: {list(sa)} vs. "
                                              f"{list(sb)} [Op:BatchMatMulV2]") from None
    return bind(_matmul_p, a, b, ta=bool(transpose_a), tb=bool(transpose_b), aa=bool(adjoint_a), ab=bool(adjoint_b))


def matvec(a: Any, b: Any, transpose_a: bool = False, adjoint_a: bool = False, a_is_sparse: bool = False,
           b_is_sparse: bool = False, name: str | None = None) -> Tensor:
    """Matrix-vector product ``a @ b`` over the last axes (batches broadcast), as ``tf.linalg.matvec``.

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.matvec(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([1.0, 1.0])).numpy().tolist()
        [3.0, 7.0]
    """
    return squeeze(matmul(a, expand_dims(_as_t(b), -1), transpose_a=transpose_a, adjoint_a=adjoint_a), axis=-1)


def _tensordot_impl(a: Any, b: Any, axes: Any) -> Any:
    return jnp.tensordot(a, b, axes=axes)


_tensordot_p = prim("tensordot", _tensordot_impl)


def tensordot(a: Any, b: Any, axes: Any, name: str | None = None) -> Tensor:
    """Contract ``axes`` of ``a`` with ``axes`` of ``b`` (an int N: last N with first N), as ``tf.tensordot``.

    Example:
        >>> import tapejax as tf
        >>> tf.tensordot(tf.ones((2, 3)), tf.ones((3, 4)), axes=1).shape
        TensorShape([2, 4])
    """
    a, b = _binary_operands("MatMul", a, b)
    a, b = _as_t(a), _as_t(b)
    if _is_t(axes):
        axes = _concrete(axes).tolist()
    if isinstance(axes, int | np.integer):
        ax: Any = int(axes)
        if ax < 0 or ax > min(a._aval.ndim, b._aval.ndim):
            raise ValueError(f"'axes' must be at most {min(a._aval.ndim, b._aval.ndim)}, got {ax}.")
    else:
        pa, pb = axes
        pa = (pa,) if isinstance(pa, int | np.integer) else tuple(int(v) for v in pa)
        pb = (pb,) if isinstance(pb, int | np.integer) else tuple(int(v) for v in pb)
        for i, j in zip(pa, pb):
            if a._aval.shape[i] != b._aval.shape[j]:
                raise errors.InvalidArgumentError(f"Matrix size-incompatible: contracting dims {a._aval.shape[i]} and {b._aval.shape[j]}")
        ax = (pa, pb)
    return bind(_tensordot_p, a, b, axes=ax)


_einsum_p = prim("einsum", lambda *xs, eq: jnp.einsum(eq, *xs))


def einsum(equation: str, *inputs: Any, **kwargs: Any) -> Tensor:
    """Einstein summation over same-dtype inputs, as ``tf.einsum``.

    Example:
        >>> import tapejax as tf
        >>> tf.einsum("ij,jk->ik", tf.ones((2, 3)), tf.ones((3, 4))).shape
        TensorShape([2, 4])
    """
    kwargs.pop("name", None)
    kwargs.pop("optimize", None)
    if kwargs:
        raise TypeError(f"Invalid keyword arguments for einsum: {sorted(kwargs)}")
    xs = same_dtype("Einsum", *inputs)
    eq = equation.replace(" ", "")
    problem = _einsum_problem(eq, tuple((tuple(x._aval.shape), x._aval.dtype) for x in xs))
    if problem:
        raise errors.InvalidArgumentError(f"einsum {equation!r}: {problem}")
    return bind(_einsum_p, *xs, eq=eq)


@functools.lru_cache(maxsize=256)
def _einsum_problem(eq: str, avals: tuple) -> str:
    # Validated once per (equation, shapes): a clear InvalidArgumentError instead of a JAX trace error.
    try:
        jax.eval_shape(lambda *v: jnp.einsum(eq, *v), *[jax.ShapeDtypeStruct(s, d) for s, d in avals])
    except (ValueError, TypeError) as e:
        return str(e)
    return ""


_export(matmul, "matmul", "linalg.matmul", jax_name="jax.numpy.matmul")
_export(matvec, "linalg.matvec", jax_name="jax.numpy.matmul")
_export(tensordot, "tensordot", "linalg.tensordot", jax_name="jax.numpy.tensordot")
_export(einsum, "einsum", "linalg.einsum", jax_name="jax.numpy.einsum")


# ---- square-matrix ops -------------------------------------------------------------------------


def _square(x: Any, opname: str, dtypes: frozenset = INEXACT) -> Any:
    t = _as_t(x)
    if _dt(t) not in dtypes:
        check_dtype(opname, t, dtypes)
    s = t._aval.shape
    if len(s) < 2 or s[-1] != s[-2]:
        raise errors.InvalidArgumentError(f"Input matrix must be square, got shape {list(s)} [Op:{opname}]")
    return t


def _lower_hermitian(a: Any) -> Any:
    # The matrix TF's kernels actually read: the lower triangle, mirrored.
    low = jnp.tril(a)
    return low + jnp.conj(jnp.swapaxes(jnp.tril(a, -1), -1, -2))


def _inv_impl(a: Any, adjoint: bool) -> Any:
    r = jnp.linalg.inv(a)
    return jnp.conj(jnp.swapaxes(r, -1, -2)) if adjoint else r


_inv_p = prim("matrix_inverse", _inv_impl)


def inv(input: Any, adjoint: bool = False, name: str | None = None) -> Tensor:  # noqa: A002
    """Inverse of each square matrix; a singular one raises ``InvalidArgumentError`` (as TF).

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.inv(tf.constant([[2.0, 0.0], [0.0, 4.0]])).numpy().tolist()
        [[0.5, 0.0], [0.0, 0.25]]
    """
    a = _square(input, "MatrixInverse")
    out = bind(_inv_p, a, adjoint=bool(adjoint))
    c, ac = _concrete(out), _concrete(a)
    if c is not None and ac is not None and np.all(np.isfinite(ac)) and not np.all(np.isfinite(c)):
        raise errors.InvalidArgumentError("Input is not invertible. [Op:MatrixInverse]")
    return out


_det_p = prim("det", lambda a: jnp.linalg.det(a))
LogMatrixDeterminant = namedtuple("LogMatrixDeterminant", ["sign", "log_abs_determinant"])
_slogdet_p = prim("slogdet", lambda a: tuple(jnp.linalg.slogdet(a)), multiple_results=True)
_logdet_p = prim("logdet", lambda a: 2.0 * jnp.sum(jnp.log(jnp.abs(jnp.diagonal(_chol_impl(a), axis1=-2, axis2=-1))), axis=-1))


def det(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """Determinant of each square matrix, as ``tf.linalg.det``.

    Example:
        >>> import tapejax as tf
        >>> round(float(tf.linalg.det(tf.constant([[4.0, 1.0], [1.0, 3.0]]))), 4)
        11.0
    """
    return bind(_det_p, _square(input, "MatrixDeterminant"))


def slogdet(input: Any, name: str | None = None) -> LogMatrixDeterminant:  # noqa: A002
    """``(sign, log|det|)`` of each square matrix, as ``tf.linalg.slogdet``.

    Example:
        >>> import tapejax as tf
        >>> float(tf.linalg.slogdet(tf.constant([[-1.0, 0.0], [0.0, 2.0]])).sign)
        -1.0
    """
    return LogMatrixDeterminant(*bind(_slogdet_p, _square(input, "LogMatrixDeterminant")))


def logdet(matrix: Any, name: str | None = None) -> Tensor:
    """``log(det(matrix))`` of Hermitian positive-definite matrices via Cholesky, as ``tf.linalg.logdet``.

    Example:
        >>> import tapejax as tf
        >>> round(float(tf.linalg.logdet(tf.constant([[4.0, 1.0], [1.0, 3.0]]))), 4)
        2.3979
    """
    return bind(_logdet_p, _square(matrix, "Cholesky"))


def _chol_impl(a: Any) -> Any:
    # Value from the lower triangle (what TF's kernel reads); gradient through the
    # symmetric part, which gives TF's symmetric CholeskyGrad.
    sym = 0.5 * (a + jnp.conj(jnp.swapaxes(a, -1, -2)))
    used = sym + lax.stop_gradient(_lower_hermitian(a) - sym)
    return jnp.linalg.cholesky(used, symmetrize_input=False)


_chol_p = prim("cholesky", _chol_impl)


def cholesky(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """Lower Cholesky factor of each Hermitian positive-definite matrix (nan if it is not one).

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.cholesky(tf.constant([[4.0, 0.0], [0.0, 9.0]])).numpy().tolist()
        [[2.0, 0.0], [0.0, 3.0]]
    """
    return bind(_chol_p, _square(input, "Cholesky"))


_chol_solve_p = prim("cholesky_solve", lambda chol, rhs: jax.scipy.linalg.cho_solve((chol, True), rhs))


def cholesky_solve(chol: Any, rhs: Any, name: str | None = None) -> Tensor:
    """Solve ``A x = rhs`` given ``chol = cholesky(A)``, as ``tf.linalg.cholesky_solve``.

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.cholesky_solve(tf.constant([[2.0, 0.0], [0.0, 3.0]]), tf.constant([[4.0], [9.0]])).numpy().tolist()
        [[1.0], [1.0]]
    """
    l_, r = same_dtype("CholeskySolve", chol, rhs)
    _square(l_, "CholeskySolve")
    return bind(_chol_solve_p, l_, r)


def _solve_impl(a: Any, b: Any, adjoint: bool) -> Any:
    if adjoint:
        a = jnp.conj(jnp.swapaxes(a, -1, -2))
    return jnp.linalg.solve(a, b)


_solve_p = prim("matrix_solve", _solve_impl)


def solve(matrix: Any, rhs: Any, adjoint: bool = False, name: str | None = None) -> Tensor:
    """Solve ``matrix @ x = rhs`` (``rhs`` is ``[..., M, K]``), as ``tf.linalg.solve``.

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.solve(tf.constant([[2.0, 0.0], [0.0, 4.0]]), tf.constant([[2.0], [4.0]])).numpy().tolist()
        [[1.0], [1.0]]
    """
    a, b = same_dtype("MatrixSolve", matrix, rhs)
    _square(a, "MatrixSolve")
    if b._aval.ndim != a._aval.ndim:
        raise errors.InvalidArgumentError("All input tensors must have the same rank. [Op:MatrixSolve]")
    if b._aval.shape[-2] != a._aval.shape[-1]:
        raise errors.InvalidArgumentError(f"Input matrix and right-hand side must have the same number of rows: {a._aval.shape[-1]} vs. "
                                          f"{b._aval.shape[-2]} [Op:MatrixSolve]")
    return bind(_solve_p, a, b, adjoint=bool(adjoint))


def _trisolve_impl(a: Any, b: Any, lower: bool, adjoint: bool) -> Any:
    a = jnp.tril(a) if lower else jnp.triu(a)
    return jax.scipy.linalg.solve_triangular(a, b, lower=lower, trans="C" if adjoint else 0)


_trisolve_p = prim("triangular_solve", _trisolve_impl)


def triangular_solve(matrix: Any, rhs: Any, lower: bool = True, adjoint: bool = False, name: str | None = None) -> Tensor:
    """Solve a triangular system (the other triangle of ``matrix`` is ignored), as ``tf.linalg.triangular_solve``.

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.triangular_solve(tf.constant([[2.0, 0.0], [1.0, 1.0]]), tf.constant([[2.0], [3.0]])).numpy().tolist()
        [[1.0], [2.0]]
    """
    a, b = same_dtype("MatrixTriangularSolve", matrix, rhs)
    _square(a, "MatrixTriangularSolve")
    return bind(_trisolve_p, a, b, lower=bool(lower), adjoint=bool(adjoint))


def _eigh_impl(a: Any) -> tuple:
    w, v = jnp.linalg.eigh(_lower_hermitian(a), symmetrize_input=False)
    return w, v


_eigh_p = prim("eigh", _eigh_impl, multiple_results=True)
_eigvalsh_p = prim("eigvalsh", lambda a: jnp.linalg.eigvalsh(_lower_hermitian(a)))


def eigh(tensor: Any, name: str | None = None) -> tuple:
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices, from the lower triangle (``tf.linalg.eigh``).

    Example:
        >>> import tapejax as tf
        >>> e, v = tf.linalg.eigh(tf.constant([[2.0, 0.0], [0.0, 1.0]]))
        >>> e.numpy().tolist()
        [1.0, 2.0]
    """
    return tuple(bind(_eigh_p, _square(tensor, "SelfAdjointEigV2")))


def eigvalsh(tensor: Any, name: str | None = None) -> Tensor:
    """Eigenvalues of Hermitian matrices (lower triangle), as ``tf.linalg.eigvalsh``."""
    return bind(_eigvalsh_p, _square(tensor, "SelfAdjointEigV2"))


def _svd_impl(a: Any, full: bool, uv: bool) -> Any:
    if not uv:
        return (jnp.linalg.svd(a, compute_uv=False),)
    u, s, vh = jnp.linalg.svd(a, full_matrices=full)
    return s, u, jnp.conj(jnp.swapaxes(vh, -1, -2))


_svd_p = prim("svd", _svd_impl, multiple_results=True)


def svd(tensor: Any, full_matrices: bool = False, compute_uv: bool = True, name: str | None = None) -> Any:
    """Singular values ``s`` (descending), and ``u``, ``v`` with ``a = u diag(s) v^H`` (``tf.linalg.svd``).

    With ``compute_uv=False`` only ``s`` is returned.

    Example:
        >>> import tapejax as tf
        >>> s, u, v = tf.linalg.svd(tf.ones((3, 2)))
        >>> s.shape, u.shape, v.shape
        (TensorShape([2]), TensorShape([3, 2]), TensorShape([2, 2]))
    """
    t = _as_t(tensor)
    if _dt(t) not in INEXACT:
        check_dtype("Svd", t, INEXACT)
    if t._aval.ndim < 2:
        raise errors.InvalidArgumentError(f"Input must have rank >= 2, got {t._aval.ndim} [Op:Svd]")
    out = bind(_svd_p, t, full=bool(full_matrices), uv=bool(compute_uv))
    return tuple(out) if compute_uv else out[0]


Qr = namedtuple("Qr", ["q", "r"])
_qr_p = prim("qr", lambda a, full: tuple(jnp.linalg.qr(a, mode="complete" if full else "reduced")), multiple_results=True)


def qr(input: Any, full_matrices: bool = False, name: str | None = None) -> Qr:  # noqa: A002
    """QR decomposition ``Qr(q, r)``, as ``tf.linalg.qr``.

    Example:
        >>> import tapejax as tf
        >>> q, r = tf.linalg.qr(tf.ones((3, 2)))
        >>> q.shape, r.shape
        (TensorShape([3, 2]), TensorShape([2, 2]))
    """
    t = _as_t(input)
    if _dt(t) not in INEXACT:
        check_dtype("Qr", t, INEXACT)
    if t._aval.ndim < 2:
        raise errors.InvalidArgumentError(f"Input must have rank >= 2, got {t._aval.ndim} [Op:Qr]")
    return Qr(*bind(_qr_p, t, full=bool(full_matrices)))


_pinv_p = prim("pinv", lambda a, rcond: jnp.linalg.pinv(a, rtol=rcond))


def pinv(a: Any, rcond: Any = None, validate_args: bool = False, name: str | None = None) -> Tensor:
    """Moore-Penrose pseudo-inverse, as ``tf.linalg.pinv`` (default cutoff ``10 * max(m, n) * eps``)."""
    t = _as_t(a)
    if _dt(t) not in INEXACT:
        check_dtype("Pinv", t, INEXACT)
    m, n = t._aval.shape[-2:]
    rc = float(10 * max(m, n) * np.finfo(_dt(t)).eps) if rcond is None else float(rcond)
    return bind(_pinv_p, t, rcond=rc)


_lstsq_p = prim("lstsq", lambda a, b, l2: jnp.linalg.solve(jnp.swapaxes(a, -1, -2).conj() @ a + l2 * jnp.eye(a.shape[-1], dtype=a.dtype),
                                                          jnp.swapaxes(a, -1, -2).conj() @ b) if a.shape[-2] >= a.shape[-1] else
                 jnp.swapaxes(a, -1, -2).conj()
                 @ jnp.linalg.solve(a @ jnp.swapaxes(a, -1, -2).conj() + l2 * jnp.eye(a.shape[-2], dtype=a.dtype), b))


def lstsq(matrix: Any, rhs: Any, l2_regularizer: float = 0.0, fast: bool = True, name: str | None = None) -> Tensor:
    """Least-squares solution by the normal equations (TF's ``fast=True`` path), as ``tf.linalg.lstsq``."""
    a, b = same_dtype("MatrixSolveLs", matrix, rhs)
    return bind(_lstsq_p, a, b, l2=float(l2_regularizer))


_expm_p = prim("expm", lambda a: jax.scipy.linalg.expm(a))


def expm(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """Matrix exponential, as ``tf.linalg.expm``."""
    return bind(_expm_p, _square(input, "MatrixExponential"))


_export(inv, "linalg.inv", jax_name="jax.numpy.linalg.inv")
_export(det, "linalg.det", jax_name="jax.numpy.linalg.det")
_export(slogdet, "linalg.slogdet", jax_name="jax.numpy.linalg.slogdet")
_export(logdet, "linalg.logdet", jax_name="jax.numpy.linalg.cholesky")
_export(cholesky, "linalg.cholesky", jax_name="jax.numpy.linalg.cholesky")
_export(cholesky_solve, "linalg.cholesky_solve", jax_name="jax.scipy.linalg.cho_solve")
_export(solve, "linalg.solve", jax_name="jax.numpy.linalg.solve")
_export(triangular_solve, "linalg.triangular_solve", jax_name="jax.scipy.linalg.solve_triangular")
_export(eigh, "linalg.eigh", jax_name="jax.numpy.linalg.eigh")
_export(eigvalsh, "linalg.eigvalsh", jax_name="jax.numpy.linalg.eigvalsh")
_export(svd, "linalg.svd", jax_name="jax.numpy.linalg.svd")
_export(qr, "linalg.qr", jax_name="jax.numpy.linalg.qr")
_export(pinv, "linalg.pinv", jax_name="jax.numpy.linalg.pinv")
_export(lstsq, "linalg.lstsq", jax_name="jax.numpy.linalg.solve (normal equations)")
_export(expm, "linalg.expm", jax_name="jax.scipy.linalg.expm")


# ---- structure: diag, trace, transpose, band_part, cross --------------------------------------


def _diag_impl(d: Any, k: int, rows: int, cols: int, pad: Any) -> Any:
    n = d.shape[-1]
    i = jnp.arange(n)
    r, c = (i, i + k) if k >= 0 else (i - k, i)
    out = jnp.full(d.shape[:-1] + (rows, cols), pad, dtype=d.dtype)
    return out.at[..., r, c].set(d)


_diag_p = prim("matrix_diag", _diag_impl)


def diag(diagonal: Any, name: str = "diag", k: int = 0, num_rows: int = -1, num_cols: int = -1, padding_value: Any = 0,
         align: str = "RIGHT_LEFT") -> Tensor:
    """Batched diagonal matrices with ``diagonal`` on the k-th diagonal, as ``tf.linalg.diag``.

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.diag(tf.constant([1.0, 2.0])).numpy().tolist()
        [[1.0, 0.0], [0.0, 2.0]]
    """
    d = _as_t(diagonal)
    k = int(k)
    n = d._aval.shape[-1]
    # TF: with neither given the result is square, of size len(diagonal) + |k|.
    if num_rows == -1 and num_cols == -1:
        rows = cols = n + abs(k)
    else:
        rows = n + max(-k, 0) if num_rows == -1 else int(num_rows)
        cols = n + max(k, 0) if num_cols == -1 else int(num_cols)
    pv = padding_value.item() if isinstance(padding_value, np.generic) else padding_value
    return bind(_diag_p, d, k=k, rows=rows, cols=cols, pad=pv)


_diag_part_p = prim("matrix_diag_part", lambda x, k: jnp.diagonal(x, offset=k, axis1=-2, axis2=-1))


def diag_part(input: Any, name: str = "diag_part", k: int = 0, padding_value: Any = 0, align: str = "RIGHT_LEFT") -> Tensor:  # noqa: A002
    """The k-th diagonal of each matrix, as ``tf.linalg.diag_part``.

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.diag_part(tf.constant([[1.0, 2.0], [3.0, 4.0]])).numpy().tolist()
        [1.0, 4.0]
    """
    x = _as_t(input)
    if x._aval.ndim < 2:
        raise errors.InvalidArgumentError("input must be at least 2-dim [Op:MatrixDiagPartV3]")
    return bind(_diag_part_p, x, k=int(k))


def _set_diag_impl(x: Any, d: Any, k: int) -> Any:
    i = jnp.arange(d.shape[-1])
    r, c = (i, i + k) if k >= 0 else (i - k, i)
    return x.at[..., r, c].set(d)


_set_diag_p = prim("matrix_set_diag", _set_diag_impl)


def set_diag(input: Any, diagonal: Any, name: str = "set_diag", k: int = 0, align: str = "RIGHT_LEFT") -> Tensor:  # noqa: A002
    """``input`` with its k-th diagonal replaced by ``diagonal``, as ``tf.linalg.set_diag``."""
    x, d = same_dtype("MatrixSetDiag", input, diagonal)
    return bind(_set_diag_p, x, d, k=int(k))


def _tensor_diag_impl(d: Any) -> Any:
    n = d.size
    flat = jnp.zeros((n, n), d.dtype).at[jnp.arange(n), jnp.arange(n)].set(d.reshape(-1))
    return flat.reshape(d.shape + d.shape)


_tensor_diag_p = prim("tensor_diag", _tensor_diag_impl)


def tensor_diag(diagonal: Any, name: str | None = None) -> Tensor:
    """A rank-2k tensor with ``diagonal`` (rank k) on its diagonal, as ``tf.linalg.tensor_diag``.

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.tensor_diag(tf.constant([1.0, 2.0])).numpy().tolist()
        [[1.0, 0.0], [0.0, 2.0]]
    """
    return bind(_tensor_diag_p, _as_t(diagonal))


def _tensor_diag_part_impl(x: Any) -> Any:
    k = x.ndim // 2
    shape = x.shape[:k]
    n = int(np.prod(shape, dtype=np.int64))
    m = x.reshape(n, n)
    return m[jnp.arange(n), jnp.arange(n)].reshape(shape)


_tensor_diag_part_p = prim("tensor_diag_part", _tensor_diag_part_impl)


def tensor_diag_part(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The diagonal of a rank-2k tensor whose shape is ``s + s``, as ``tf.linalg.tensor_diag_part``.

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.tensor_diag_part(tf.constant([[1.0, 5.0], [7.0, 2.0]])).numpy().tolist()
        [1.0, 2.0]
    """
    x = _as_t(input)
    s = tuple(x._aval.shape)
    k = len(s) // 2
    if len(s) % 2 or s[:k] != s[k:]:
        raise errors.InvalidArgumentError(
            f"Invalid shape {list(s)}: dimensions i and i + rank/2 must match (the input must be tensor_diag's output "
            "shape, diagonal.shape + diagonal.shape) [Op:DiagPart]")
    return bind(_tensor_diag_part_p, x)


_trace_p = prim("trace", lambda x: jnp.trace(x, axis1=-2, axis2=-1))


def trace(x: Any, name: str | None = None) -> Tensor:
    """Sum of the main diagonal of each matrix, as ``tf.linalg.trace``.

    Example:
        >>> import tapejax as tf
        >>> float(tf.linalg.trace(tf.constant([[1.0, 2.0], [3.0, 4.0]])))
        5.0
    """
    t = _as_t(x)
    if t._aval.ndim < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {t._aval.ndim}")
    return bind(_trace_p, t)


def matrix_transpose(a: Any, name: str = "matrix_transpose", conjugate: bool = False) -> Tensor:
    """Swap the last two axes (conjugating if asked), as ``tf.linalg.matrix_transpose``.

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.matrix_transpose(tf.ones((2, 3, 4))).shape
        TensorShape([2, 4, 3])
    """
    t = _as_t(a)
    nd = t._aval.ndim
    if nd < 2:
        raise ValueError(f"Argument `a` should be a (batch) matrix with rank >= 2.  Received `a` = {t!r} with shape: {t.shape}")
    return transpose(t, list(range(nd - 2)) + [nd - 1, nd - 2], conjugate=conjugate)


def adjoint(matrix: Any, name: str | None = None) -> Tensor:
    """Conjugate transpose of the last two axes, as ``tf.linalg.adjoint``."""
    return matrix_transpose(matrix, conjugate=True)


def _band(x: Any, lo: int, hi: int) -> Any:
    rows = jnp.arange(x.shape[-2])[:, None]
    cols = jnp.arange(x.shape[-1])[None, :]
    keep = ((rows - cols) <= (lo if lo >= 0 else x.shape[-2])) & ((cols - rows) <= (hi if hi >= 0 else x.shape[-1]))
    return x * keep.astype(x.dtype)


_band_p = prim("band_part", _band)


def band_part(input: Any, num_lower: Any, num_upper: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """Keep ``num_lower`` sub- and ``num_upper`` super-diagonals (-1: all), as ``tf.linalg.band_part``.

    Example:
        >>> import tapejax as tf
        >>> tf.linalg.band_part(tf.ones((2, 2)), 0, -1).numpy().tolist()
        [[1.0, 1.0], [0.0, 1.0]]
    """
    return bind(_band_p, _as_t(input), lo=_int(num_lower), hi=_int(num_upper))


_cross_p = prim("cross", lambda a, b: jnp.cross(a, b))


def cross(a: Any, b: Any, name: str | None = None) -> Tensor:
    """Cross product of 3-vectors in the last axis, as ``tf.linalg.cross``."""
    x, y = same_dtype("Cross", a, b)
    if x._aval.shape[-1:] != (3,) or y._aval.shape[-1:] != (3,):
        raise errors.InvalidArgumentError("Cross: the last dimension of both inputs must be 3 [Op:Cross]")
    return bind(_cross_p, x, y)


_export(diag, "linalg.diag", jax_name="jax.Array.at[].set on a diagonal")
_export(diag_part, "linalg.diag_part", jax_name="jax.numpy.diagonal")
_export(set_diag, "linalg.set_diag", jax_name="jax.Array.at[].set")
_export(tensor_diag, "linalg.tensor_diag", jax_name="jax.Array.at[].set on a flattened diagonal")
_export(tensor_diag_part, "linalg.tensor_diag_part", jax_name="fancy indexing of the flattened diagonal")
_export(trace, "linalg.trace", jax_name="jax.numpy.trace")
_export(matrix_transpose, "linalg.matrix_transpose", jax_name="jax.numpy.swapaxes")
_export(adjoint, "linalg.adjoint", jax_name="jax.numpy.conj(swapaxes)")
_export(band_part, "linalg.band_part", jax_name="jax.numpy mask")
_export(cross, "linalg.cross", jax_name="jax.numpy.cross")


# ---- norms ----------------------------------------------------------------------------------


def _norm_impl(x: Any, ord: Any, axis: Any, keepdims: bool) -> Any:  # noqa: A002
    a = jnp.abs(x) if jnp.iscomplexobj(x) else x
    if isinstance(axis, tuple) and len(axis) == 2:
        r, c = axis
        if ord in ("fro", "euclidean"):
            out = _tfgrad.sqrt(jnp.sum(jnp.square(jnp.abs(x)) if jnp.iscomplexobj(x) else x * x, axis=axis, keepdims=keepdims))
        elif ord == 1:
            out = jnp.max(jnp.sum(jnp.abs(a), axis=r, keepdims=True), axis=c, keepdims=True)
            out = out if keepdims else jnp.squeeze(out, axis=axis)
        elif ord == np.inf:
            out = jnp.max(jnp.sum(jnp.abs(a), axis=c, keepdims=True), axis=r, keepdims=True)
            out = out if keepdims else jnp.squeeze(out, axis=axis)
        else:  # 2: the largest singular value
            m = jnp.moveaxis(x, (r, c), (-2, -1))
            out = jnp.linalg.svd(m, compute_uv=False)[..., 0]
            if keepdims:
                out = jnp.expand_dims(out, axis)
        return out.astype(jnp.real(x).dtype)
    if ord in ("euclidean", "fro", 2):
        sq = jnp.square(jnp.abs(x)) if jnp.iscomplexobj(x) else x * x
        return _tfgrad.sqrt(jnp.sum(sq, axis=axis, keepdims=keepdims))
    if ord == 1:
        return jnp.sum(jnp.abs(a), axis=axis, keepdims=keepdims)
    if ord == np.inf:
        return jnp.max(jnp.abs(a), axis=axis, keepdims=keepdims)
    p = float(ord)
    return jnp.power(jnp.sum(jnp.power(jnp.abs(a), p), axis=axis, keepdims=keepdims), 1.0 / p)


_norm_p = prim("norm", _norm_impl)


def norm(tensor: Any, ord: Any = "euclidean", axis: Any = None, keepdims: Any = None, name: str | None = None) -> Tensor:  # noqa: A002
    """Vector norm (``axis`` None or an int) or matrix norm (``axis`` a pair), as ``tf.norm``.

    ``ord``: 'euclidean'/'fro', 1, 2, ``np.inf`` or any p > 0 for vectors; 'fro',
    'euclidean', 1, 2 and ``np.inf`` for matrices. With ``axis=None`` the whole
    tensor is one vector. The gradient at 0 is nan, as TF's.

    Example:
        >>> import tapejax as tf
        >>> float(tf.norm(tf.constant([3.0, 4.0])))
        5.0
    """
    x = _as_t(tensor)
    if _dt(x) not in INEXACT:
        check_dtype("Sqrt", x, INEXACT)
    nd = x._aval.ndim
    ax = None if axis is None else norm_axis(axis, nd, "norm")
    if isinstance(axis, list | tuple) and len(axis) == 2:
        r, c = (int(a) % nd for a in axis)
        if r == c:
            raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique integers, got {axis}")
        if ord not in ("fro", "euclidean", 1, 2, np.inf):
            raise ValueError(f"'ord' must be a supported matrix norm in ['euclidean', 'fro', 1, 2, inf], got {ord}")
        ax = (r, c)
    elif isinstance(axis, list | tuple) and len(axis) > 2:
        raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique integers, got {axis}")
    else:
        if isinstance(ord, str) and ord not in ("fro", "euclidean"):
            raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
        if not isinstance(ord, str) and not (float(ord) > 0):
            raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
        if ord == "fro" and axis is not None:
            raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
    o = ord if isinstance(ord, str) or ord == np.inf else (int(ord) if float(ord).is_integer() else float(ord))
    return bind(_norm_p, x, ord=o, axis=ax, keepdims=bool(keepdims))


_export(norm, "norm", "linalg.norm", jax_name="jax.numpy.linalg.norm")
