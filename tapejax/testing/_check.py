"""``check_gradients``: tape derivatives against numerical ones, with a readable failure report.

How a check works (``order=1``, for each differentiated argument ``x_i`` and
each random direction ``v``):

* numerical side: ``D = d/dt fn(x + t v)`` for every output, by a five-point
  central difference of ``fn`` re-run in float64 (see ``_numeric``);
* ``"rev"``: for each output ``y_k`` and a random cotangent ``u_k``,
  ``g = tape.gradient(y_k, x, output_gradients=u_k)`` (plain ``gradient`` for
  a real scalar output); the check is ``<g, v> == <u_k, D_k>``. When it fails
  and ``x_i`` is small, the full numerical gradient is computed element by
  element so the report can name the worst element;
* ``"rev"`` also checks ``GradientTape.jacobian`` contracted with ``v``
  against ``D_k`` element by element, when the tape has ``jacobian``;
* ``"fwd"``: ``J v`` for every output, element by element, computed by
  ``tapejax.autodiff.ForwardAccumulator`` for real arguments and otherwise
  (complex arguments, an op with no forward rule) by the double-VJP identity
  ``J v = d/du <J^T u, v>`` (an outer tape watching the cotangent ``u`` of the
  recording tape).

``order=2`` adds Hessian-vector checks: ``<v, H w>`` from reverse-over-reverse
nested tapes (``"rev"``) and forward-over-reverse (``"fwd"``), against a
Richardson-extrapolated mixed central difference of ``L = sum_k <u_k, y_k>``.

Directional checks use the bound implied by the elementwise rule
``|g_j - g*_j| <= atol + rtol*|g_j|``: summed along ``v`` it gives
``|<g,v> - <g*,v>| <= atol*||v||_1 + rtol*sum_j |g_j v_j|`` (the rtol term
never below ``rtol * |<g*,v>|``). Elementwise forward checks, where ``J`` is
not at hand, use ``atol*||v||_1 + rtol*max(|tape|, |numeric|)`` per element.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from .._core._recorder import Tensor, VariableBase
from ._numeric import Evaluator, directional, flatten_outputs, is_inexact, mixed_second, real_dot
from ._tolerances import default_tolerance

__all__ = ["check_gradients", "GradientCheckError", "GradientCheckResult", "Mismatch"]


class GradientCheckError(AssertionError):
    """A derivative disagreed with its reference; ``failures`` holds the details.

    An ``AssertionError``, so test runners show it as a failed assertion.
    """

    def __init__(self, message: str, failures: list):
        super().__init__(message)
        self.failures = failures


@dataclass
class Mismatch:
    """One failed comparison.

    ``where`` says which element is worst (of the argument for a gradient, of
    the output for a forward or jacobian check); ``tape`` and ``reference`` are
    the two values there; ``tolerance`` the bound they had to meet.
    """

    check: str
    order: int
    output: str
    argument: str
    direction: str
    where: str
    tape: complex
    reference: complex
    tolerance: float
    reference_name: str = "numeric"
    notes: list = field(default_factory=list)

    def describe(self) -> str:
        diff = abs(self.tape - self.reference)
        head = f"[{self.check}, order {self.order}] "
        if self.output:
            head += f"d {self.output} / d {self.argument}"
        else:
            head += self.argument
        if self.direction:
            head += f", {self.direction}"
        lines = [head + ":"]
        lines.append(
            f"    {self.where}: tape = {_fmt(self.tape)}, {self.reference_name} = {_fmt(self.reference)}, "
            f"|diff| = {diff:.4g} > tolerance {self.tolerance:.4g}"
        )
        lines += [f"    {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass
class GradientCheckResult:
    """What a passing ``check_gradients`` compared (returned for inspection; safe to ignore).

    ``checks`` counts the comparisons; ``worst_ratio`` is the largest
    ``|diff| / tolerance`` seen (below 1 when everything passed).
    """

    checks: int
    worst_ratio: float
    atol: float
    rtol: float
    dtype: str
    numeric_dtype: str
    forward_impl: str


def _fmt(x: complex) -> str:
    x = complex(x)
    if x.imag == 0:
        return f"{x.real:.7g}"
    return f"({x.real:.7g}{x.imag:+.7g}j)"


def _index(shape: tuple, flat: int) -> str:
    if not shape:
        return " (scalar)"
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(flat, shape)) + "]"


def _elem(name: str, shape: tuple, flat: int) -> str:
    """``args[0][1, 2]`` for an element; ``args[0] (scalar)`` for a scalar."""
    return name + _index(tuple(shape), flat)


def _is_leaf(v: Any) -> bool:
    return v is None or isinstance(v, Tensor | VariableBase | np.ndarray | np.generic | jax.Array)


def _path_name(path: tuple) -> str:
    return "args" + jax.tree_util.keystr(path)


def _prepare(args: Any, argnums: Any) -> tuple:
    """Flatten ``args``, convert arrays to tensors, pick the differentiated leaves."""
    from .._ops._tensor import constant

    if not isinstance(args, tuple | list):
        args = (args,)
    pairs, treedef = jax.tree_util.tree_flatten_with_path(tuple(args), is_leaf=_is_leaf)
    if argnums is not None:
        argnums = {int(argnums)} if isinstance(argnums, int) else {int(a) for a in argnums}
    leaves, names, diff = [], [], []
    for p, (path, leaf) in enumerate(pairs):
        if isinstance(leaf, np.ndarray | np.generic | jax.Array) and is_inexact(np.asarray(leaf).dtype):
            leaf = constant(np.asarray(leaf))
        leaves.append(leaf)
        names.append(_path_name(path))
        top = getattr(path[0], "idx", None)
        if isinstance(leaf, Tensor | VariableBase) and is_inexact(leaf._value.dtype):
            if argnums is None or top in argnums:
                diff.append(p)
    if not diff:
        raise ValueError(
            "check_gradients: no floating-point Tensor, Variable or array among the arguments to differentiate. "
            "Pass the inputs as tf.constant(...)/tf.Variable(...) (float or complex dtype)."
        )
    return leaves, names, treedef, diff


def _random_like(rng: np.random.Generator, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A random direction with entries in [-1, 1] (max-normalised), real or complex."""
    z = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        z = z + 1j * rng.standard_normal(shape)
    m = np.max(np.abs(z)) if z.size else 1.0
    return np.asarray(z / (m if m > 0 else 1.0))


def _rounded(a: np.ndarray, dtype: Any) -> np.ndarray:
    """``a`` rounded to ``dtype`` and widened back: the tape and the numerical side then use the
    very same direction or cotangent, even for float16 or bfloat16 arguments."""
    wide = np.complex128 if np.iscomplexobj(a) else np.float64
    return np.asarray(a).astype(dtype).astype(wide)


def _tensor_of(a: np.ndarray, dtype: np.dtype) -> Tensor:
    import jax.numpy as jnp

    # Built from the raw array (not tf.constant): a float64 direction for a
    # float64 argument must not trip the x64 check when x64 is already on.
    return Tensor(jnp.asarray(np.asarray(a).astype(dtype)))


def _dot_t(g: Any, v: Tensor) -> Tensor:
    """``Re <g, v>`` as a recorded tapejax op (the scalar an outer tape differentiates)."""
    from .._ops import _machinery as _ops

    E = _ops.OPS
    if np.dtype(v._value.dtype).kind == "c":
        return E["real"](E["reduce_sum"](E["multiply"](E["conj"](g), v)))
    return E["reduce_sum"](E["multiply"](g, v))


def _np(v: Any, shape: tuple, dtype: Any) -> np.ndarray:
    """A tape result as a wide NumPy array (None, an unconnected result, as zeros)."""
    if v is None:
        return np.zeros(shape, np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    a = np.asarray(v._value if isinstance(v, Tensor | VariableBase) else v)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def _forward_accumulator() -> Any:
    import tapejax

    return getattr(getattr(tapejax, "autodiff", None), "ForwardAccumulator", None)


def _tape_jvp(tape: Any, ys: list, sources: list, tangents: list, tape_cls: Any) -> list:
    """``J v`` by the double-VJP identity: ``<J^T u, v>`` is linear in ``u``, its gradient is ``J v``.

    ``tape`` must be persistent (or unused); ``ys`` were recorded on it. The
    cotangents' values do not matter (the map is linear); ones are used. The
    scalar ``<J^T u, v>`` is passed as a list of per-source terms, which
    ``gradient`` sums, so sources of different dtypes never meet in one op.
    """
    import jax.numpy as jnp

    cts = [Tensor(jnp.ones(y._value.shape, y._value.dtype)) for y in ys]
    with tape_cls() as outer:
        outer.watch(cts)
        gs = tape.gradient(ys, sources, output_gradients=cts)
        terms = [_dot_t(g, v) for g, v in zip(gs, tangents) if g is not None]
    if not terms:
        return [None] * len(ys)
    return outer.gradient(terms, cts)


class _Checker:
    def __init__(self, fn, args, order, modes, atol, rtol, argnums, num_directions, step, seed, forward_impl,
                 max_refine):
        import tapejax

        self.tf = tapejax
        self.fn = fn
        self.order = int(order)
        if self.order not in (1, 2):
            raise ValueError(f"check_gradients: order must be 1 or 2, got {order!r}.")
        modes = (modes,) if isinstance(modes, str) else tuple(modes)
        bad = [m for m in modes if m not in ("rev", "fwd")]
        if bad or not modes:
            raise ValueError(f"check_gradients: modes must be a non-empty subset of ('rev', 'fwd'), got {modes!r}.")
        self.modes = modes
        self.leaves, self.names, self.treedef, self.diff = _prepare(args, argnums)
        self.args = jax.tree_util.tree_unflatten(self.treedef, self.leaves)
        self.rng = np.random.default_rng(seed)
        self.num_directions = max(1, int(num_directions))
        self.max_refine = max_refine
        if forward_impl not in ("auto", "accumulator", "double_vjp"):
            raise ValueError("forward_impl must be 'auto', 'accumulator' or 'double_vjp'.")
        acc = _forward_accumulator()
        if forward_impl == "accumulator" and acc is None:
            raise NotImplementedError("tapejax.autodiff.ForwardAccumulator is not available in this build.")
        # TF's ForwardAccumulator watches only real floating primals (it logs a
        # warning for complex ones), so 'auto' takes the double VJP for complex arguments.
        all_real = all(np.dtype(self.leaves[p]._value.dtype).kind != "c" for p in self.diff)
        use_acc = acc is not None and (forward_impl == "accumulator" or (forward_impl == "auto" and all_real))
        self.forward_impl = "accumulator" if use_acc else "double_vjp"
        self.forward_requested = forward_impl
        self.forward_note = ""
        self.failures: list[Mismatch] = []
        self.checks = 0
        self.worst = 0.0
        self.user_atol, self.user_rtol = atol, rtol
        self.step = step

    # --- helpers -------------------------------------------------------------

    def tol(self, order: int) -> tuple[float, float]:
        atol, rtol, _ = default_tolerance(self.dtypes, order)
        return (atol if self.user_atol is None else float(self.user_atol),
                rtol if self.user_rtol is None else float(self.user_rtol))

    def record(self, diff: float, tol: float, mismatch: Callable[[], Mismatch]) -> bool:
        self.checks += 1
        ok = bool(np.isfinite(diff)) and diff <= tol
        ratio = diff / tol if tol > 0 else (0.0 if diff == 0 else np.inf)
        if not np.isfinite(ratio):
            ratio = np.inf
        self.worst = max(self.worst, float(ratio))
        if not ok:
            self.failures.append(mismatch())
        return ok

    def diff_sources(self) -> list:
        return [self.leaves[p] for p in self.diff]

    def run_under(self, tape: Any) -> list:
        tape.watch(self.diff_sources())
        return flatten_outputs(self.fn(*self.args))

    # --- the main driver ----------------------------------------------------------

    def run(self) -> GradientCheckResult:
        tf = self.tf
        with tf.GradientTape(persistent=True) as tape:
            outs = self.run_under(tape)
        self.out_names = ["output" + jax.tree_util.keystr(path) for path, _ in outs]
        self.keep = [k for k, (_, y) in enumerate(outs) if is_inexact(y._value.dtype)]
        if not self.keep:
            raise ValueError("check_gradients: fn returned no floating-point tensor to differentiate.")
        self.ys = [outs[k][1] for k in self.keep]
        self.dtypes = [self.leaves[p]._value.dtype for p in self.diff] + [y._value.dtype for y in self.ys]
        self.ev = Evaluator(self.fn, self.leaves, self.treedef, self.diff, self.keep, len(outs), self.step)
        # Cotangents: ones for a real scalar output (so the plain gradient path
        # is exercised), random otherwise.
        self.us: list = []
        for y in self.ys:
            v = y._value
            if v.ndim == 0 and np.dtype(v.dtype).kind != "c":
                self.us.append(None)
            else:
                self.us.append(_rounded(_random_like(self.rng, v.shape, v.dtype), v.dtype))
        self.dirs = {}
        for p in self.diff:
            x = self.leaves[p]._value
            n = 1 if x.size <= 1 else self.num_directions
            self.dirs[p] = [_rounded(_random_like(self.rng, x.shape, x.dtype) * self.ev.scale(p), x.dtype)
                            for _ in range(n)]
        numeric = {(p, d): directional(self.ev, p, v) for p in self.diff for d, v in enumerate(self.dirs[p])}

        if "rev" in self.modes:
            self.check_rev(tape, numeric)
            if hasattr(tape, "jacobian"):
                self.check_jacobian(tape, numeric)
        if "fwd" in self.modes:
            self.check_fwd(tape, numeric)
        del tape
        if self.order == 2:
            self.check_second()
        if self.failures:
            raise GradientCheckError(self.report(), self.failures)
        atol, rtol = self.tol(self.order)
        _, _, dname = default_tolerance(self.dtypes, 1)
        return GradientCheckResult(self.checks, self.worst, atol, rtol, dname,
                                   "float64" if self.ev.mode == "float64" else "native",
                                   self.forward_impl + self.forward_note)

    def report(self) -> str:
        _, _, dname = default_tolerance(self.dtypes, 1)
        a1, r1 = self.tol(1)
        lines = [
            f"check_gradients failed: {len(self.failures)} of {self.checks} comparisons out of tolerance "
            f"(dtype {dname}; order 1 atol={a1:g}, rtol={r1:g}"
            + (f"; order 2 atol={self.tol(2)[0]:g}, rtol={self.tol(2)[1]:g}" if self.order == 2 else "") + ")."
        ]
        for m in self.failures[:6]:
            lines.append(m.describe())
        if len(self.failures) > 6:
            lines.append(f"... and {len(self.failures) - 6} more.")
        if self.ev.mode == "float64":
            lines.append(f"Numeric side: five-point central differences of fn re-run in float64 (step {self.ev.step:g} "
                         "x max(|x|, 0.1) per element).")
        else:
            lines.append(f"Numeric side: fn could not run in float64 ({self.ev.fallback_reason}); differences were "
                         f"taken in the inputs' own dtype (step {self.ev.step:g}), which is less accurate. Make fn "
                         "dtype-generic for a sharper check.")
        lines.append(f"Forward mode computed by: {self.forward_impl}{self.forward_note}.")
        return "\n".join(lines)

    # --- order 1 ---------------------------------------------------------------------

    def _grad(self, tape: Any, k: int, sources: list) -> list:
        y, u = self.ys[k], self.us[k]
        if u is None:
            return tape.gradient(y, sources)
        return tape.gradient(y, sources, output_gradients=_tensor_of(u, y._value.dtype))

    def _u_dot(self, k: int, d: np.ndarray) -> float:
        u = self.us[k]
        return float(np.real(d)) if u is None else real_dot(u, d)

    def check_rev(self, tape: Any, numeric: dict) -> None:
        atol, rtol = self.tol(1)
        sources = self.diff_sources()
        for k in range(len(self.ys)):
            grads = self._grad(tape, k, sources)
            for p, g in zip(self.diff, grads):
                x = self.leaves[p]._value
                gn = _np(g, x.shape, x.dtype)
                for d, v in enumerate(self.dirs[p]):
                    a = real_dot(gn, v)
                    b = self._u_dot(k, numeric[(p, d)][k])
                    tol = atol * float(np.sum(np.abs(v))) + rtol * max(float(np.sum(np.abs(gn) * np.abs(v))), abs(b))

                    def mk(k=k, p=p, d=d, a=a, b=b, tol=tol, g=g, gn=gn) -> Mismatch:
                        return self.refine(k, p, d, a, b, tol, g, gn)

                    if not self.record(abs(a - b), tol, mk):
                        break  # one report per (output, argument) is enough

    def refine(self, k: int, p: int, d: int, a: float, b: float, tol: float, g: Any, gn: np.ndarray) -> Mismatch:
        """Name the worst element: the numerical gradient element by element (small arguments only)."""
        x = self.leaves[p]._value
        notes = [f"along random direction #{d}: tape <g, v> = {_fmt(a)}, numeric = {_fmt(b)}, "
                 f"|diff| = {abs(a - b):.4g} > tolerance {tol:.4g}"]
        if g is None:
            notes.append("the tape returned None (unconnected) for this argument; compared as zeros.")
        label = self.out_label(k)
        if x.size > self.max_refine:
            notes.append(f"argument has {x.size} elements (> max_refine={self.max_refine}); no per-element search.")
            return Mismatch("rev", 1, label, self.names[p], f"random direction #{d}", "directional derivative",
                            a, b, tol, notes=notes)
        atol, rtol = self.tol(1)
        scale = self.ev.scale(p).reshape(-1)
        complex_x = np.dtype(x.dtype).kind == "c"
        num = np.zeros(x.size, np.complex128 if complex_x else np.float64)
        for j in range(x.size):
            parts = [1.0, 1j] if complex_x else [1.0]
            for c in parts:
                e = np.zeros(x.size, np.complex128 if complex_x else np.float64)
                e[j] = c * scale[j]
                dd = directional(self.ev, p, e.reshape(x.shape))[k]
                num[j] += c * self._u_dot(k, dd) / scale[j]
        flat = gn.reshape(-1)
        err = np.abs(flat - num)
        tols = atol + rtol * np.maximum(np.abs(flat), np.abs(num))
        j = int(np.argmax(err / tols))
        return Mismatch("rev", 1, label, self.names[p], "", f"worst element {_elem(self.names[p], x.shape, j)}",
                        complex(flat[j]), complex(num[j]), float(tols[j]), notes=notes)

    def out_label(self, k: int) -> str:
        name = self.out_names[self.keep[k]]
        if self.us[k] is not None:
            return f"<u, {name}> (random cotangent u)"
        return name

    def _elementwise(self, check: str, order: int, k: int, p: int, d: int, tape_vals: np.ndarray, num: np.ndarray,
                     v: np.ndarray, mag: np.ndarray | None, note: str = "") -> None:
        atol, rtol = self.tol(order)
        ref = np.abs(num) if mag is None else mag
        tols = atol * float(np.sum(np.abs(v))) + rtol * np.maximum(np.maximum(ref, np.abs(tape_vals)), np.abs(num))
        err = np.abs(tape_vals - num).reshape(-1)
        tols = np.broadcast_to(tols, tape_vals.shape).reshape(-1)
        if err.size == 0:
            return
        ratios = np.where(tols > 0, err / np.where(tols > 0, tols, 1), np.where(err > 0, np.inf, 0))
        ratios = np.where(np.isfinite(err), ratios, np.inf)
        j = int(np.argmax(ratios))
        shape = tape_vals.shape
        name = self.out_names[self.keep[k]]

        def mk() -> Mismatch:
            notes = [note] if note else []
            return Mismatch(check, order, name, self.names[p], f"along random direction #{d} (J v)",
                            f"worst element {_elem(name, shape, j)}", complex(tape_vals.reshape(-1)[j]),
                            complex(num.reshape(-1)[j]), float(tols[j]), notes=notes)

        self.record(float(err[j]), float(tols[j]), mk)

    def check_jacobian(self, tape: Any, numeric: dict) -> None:
        for k, y in enumerate(self.ys):
            yv = y._value
            if yv.ndim == 0 or np.dtype(yv.dtype).kind == "c":
                continue  # scalar: the gradient check covers it; complex: TF's jacobian is real-only
            cols = [p for p in self.diff if np.dtype(self.leaves[p]._value.dtype).kind != "c"
                    and yv.size * self.leaves[p]._value.size <= 65536]
            if not cols:
                continue
            jac = tape.jacobian(y, [self.leaves[p] for p in cols])
            for p, jp in zip(cols, jac):
                x = self.leaves[p]._value
                jn = _np(jp, yv.shape + x.shape, x.dtype).reshape(yv.size, x.size)
                for d, v in enumerate(self.dirs[p]):
                    jv = (jn @ v.reshape(-1)).reshape(yv.shape)
                    mag = (np.abs(jn) @ np.abs(v).reshape(-1)).reshape(yv.shape)
                    note = "GradientTape.jacobian returned None (unconnected); compared as zeros." if jp is None else ""
                    self._elementwise("jacobian", 1, k, p, d, jv, numeric[(p, d)][k], v, mag, note)

    def check_fwd(self, tape: Any, numeric: dict) -> None:
        tf = self.tf
        for p in self.diff:
            x = self.leaves[p]
            for d, v in enumerate(self.dirs[p]):
                vt = _tensor_of(v, x._value.dtype)
                jvs = None
                if self.forward_impl == "accumulator":
                    jvs = self._with_fallback(functools.partial(self._acc_jvp, x, vt))
                if jvs is None:
                    jvs = _tape_jvp(tape, self.ys, [x], [vt], tf.GradientTape)
                for k, (y, jv) in enumerate(zip(self.ys, jvs)):
                    note = "the forward derivative was None (unconnected); compared as zeros." if jv is None else ""
                    self._elementwise("fwd", 1, k, p, d, _np(jv, y._value.shape, y._value.dtype),
                                      numeric[(p, d)][k], v, None, note)

    def _acc_jvp(self, x: Any, vt: Tensor) -> list:
        with _forward_accumulator()(x, vt) as acc:
            outs = flatten_outputs(self.fn(*self.args))
        return [acc.jvp(outs[k][1]) for k in self.keep]

    def _with_fallback(self, run: Callable[[], list]) -> list | None:
        """Run a ForwardAccumulator computation; under ``forward_impl='auto'`` fall back to the double VJP.

        Some recorded primitives have no forward rule (a ``jax.custom_vjp``
        impl, for one); the tape's reverse mode still differentiates them, and
        the double-VJP identity needs nothing else. The fallback is reported.
        """
        try:
            return run()
        except (TypeError, NotImplementedError) as e:
            if self.forward_requested == "accumulator":
                raise
            self.forward_impl = "double_vjp"
            self.forward_note = f" (ForwardAccumulator raised {type(e).__name__}: {str(e).splitlines()[0]})"
            return None

    # --- order 2 --------------------------------------------------------------------------

    def _loss_scalar(self, outs: list) -> float:
        return sum(self._u_dot(k, o) for k, o in enumerate(outs))

    def _inner_grads(self, inner: Any, ys: list) -> list:
        sources = self.diff_sources()
        if len(ys) == 1 and self.us[0] is None:
            return inner.gradient(ys[0], sources)
        # output_gradients takes no None entries: a real scalar output gets 1.
        cts = [_tensor_of(np.ones(()) if u is None else u, y._value.dtype) for u, y in zip(self.us, ys)]
        return inner.gradient(ys, sources, output_gradients=cts)

    def check_second(self) -> None:
        """Hessian-vector products: ``<v_p, (H w)_p>`` per argument p, w a joint direction over all arguments.

        One joint w keeps the number of distinct replay programs (each one a
        compilation) independent of the number of arguments.
        """
        tf = self.tf
        atol, rtol = self.tol(2)
        ws = {}
        for p in self.diff:
            x = self.leaves[p]._value
            ws[p] = _rounded(_random_like(self.rng, x.shape, x.dtype) * self.ev.scale(p), x.dtype)
        numeric = {p: mixed_second(self.ev, self._loss_scalar, {p: self.dirs[p][0]}, ws) for p in self.diff}
        sources = self.diff_sources()
        w_t = [_tensor_of(ws[p], self.leaves[p]._value.dtype) for p in self.diff]

        with tf.GradientTape(persistent=True) as outer:
            # The outer tape watches first: a variable's reads inside fn must
            # be tracked by both tapes.
            outer.watch(sources)
            with tf.GradientTape() as inner:
                outs = self.run_under(inner)
            ys = [outs[k][1] for k in self.keep]
            gs = self._inner_grads(inner, ys)
            dots = [_dot_t(g, w) for g, w in zip(gs, w_t) if g is not None]

        results = {}
        if "rev" in self.modes:
            results["rev-over-rev"] = outer.gradient(dots, sources) if dots else [None] * len(sources)
        if "fwd" in self.modes:
            live = [k for k, g in enumerate(gs) if g is not None]
            res = None
            if not live:
                res = [None] * len(sources)
            elif self.forward_impl == "accumulator":
                res = self._with_fallback(lambda: self._fwd_over_rev_acc(w_t))
            if res is None:
                got = _tape_jvp(outer, [gs[k] for k in live], sources, w_t, tf.GradientTape)
                res = [None] * len(sources)
                for k, r in zip(live, got):
                    res[k] = r
            results["fwd-over-rev"] = res
        del outer
        for check, hws in results.items():
            for p, h in zip(self.diff, hws):
                x = self.leaves[p]._value
                v = self.dirs[p][0]
                hn = _np(h, x.shape, x.dtype)
                a = real_dot(hn, v)
                b = numeric[p]
                wmax = max(float(np.max(np.abs(w))) if w.size else 0.0 for w in ws.values())
                tol = (atol * float(np.sum(np.abs(v))) * max(1.0, wmax) +
                       rtol * max(float(np.sum(np.abs(hn) * np.abs(v))), abs(b)))

                def mk(check=check, p=p, a=a, b=b, tol=tol, h=h) -> Mismatch:
                    notes = ["compared <v, H w>: v a random direction of this argument, w a random direction of "
                             "all differentiated arguments together."]
                    if h is None:
                        notes.append("the tape's second derivative was None (unconnected); compared as zeros.")
                    return Mismatch(check, 2, "L = sum_k <u_k, y_k>", f"{self.names[p]} (v) and all arguments (w)",
                                    "", "<v, H w>", a, b, tol, notes=notes)

                self.record(abs(a - b), tol, mk)

    def _fwd_over_rev_acc(self, w_t: list) -> list:
        tf = self.tf
        acc_cls = _forward_accumulator()
        with acc_cls(self.diff_sources(), w_t) as acc:
            with tf.GradientTape() as inner:
                outs = self.run_under(inner)
            ys = [outs[k][1] for k in self.keep]
            gs = self._inner_grads(inner, ys)
        return [None if g is None else acc.jvp(g) for g in gs]


def check_gradients(
    fn: Callable,
    args: Any,
    order: int = 1,
    modes: Sequence[str] = ("rev", "fwd"),
    atol: float | None = None,
    rtol: float | None = None,
    *,
    argnums: int | Sequence[int] | None = None,
    num_directions: int = 2,
    step: float = 1e-3,
    seed: int = 0,
    forward_impl: str = "auto",
    max_refine: int = 256,
) -> GradientCheckResult:
    """Check the tape's derivatives of ``fn(*args)`` against numerical ones; raise with a report if they differ.

    ``fn`` is TF-style code on tapejax ops; ``args`` is the tuple of its
    positional arguments (a single tensor is accepted too), possibly nested.
    Every floating or complex ``Tensor``, ``Variable`` or NumPy array among
    them is differentiated (restrict with ``argnums``); other arguments are
    passed through unchanged. ``fn`` may return a tensor or a nested structure
    of tensors.

    The numerical side re-runs ``fn`` in float64 (inside ``jax.enable_x64()``)
    and takes five-point central differences along ``num_directions`` random
    directions per argument; ``"rev"`` checks ``tape.gradient`` (with random
    ``output_gradients`` for non-scalar outputs) and ``tape.jacobian`` where
    available, ``"fwd"`` checks Jacobian-vector products. ``order=2`` also
    checks Hessian-vector products through nested tapes.

    ``atol``/``rtol`` default to ``TOLERANCES[dtype][order]`` for the
    loosest dtype among the differentiated inputs and the outputs. On failure
    a ``GradientCheckError`` (an ``AssertionError``) names the output, the
    argument, the worst element, both values and the tolerance.

    Keep points away from kinks (``relu``, ``abs``) and domain edges: the
    stencil moves each element by up to ``2 * step * max(|x|, 0.1)``.

    Other options: ``seed`` fixes the random directions and cotangents (the
    check is deterministic); ``forward_impl`` is ``"auto"`` (the
    ForwardAccumulator when available, else, or if it cannot handle an op,
    the double-VJP identity), ``"accumulator"`` or ``"double_vjp"``;
    ``max_refine`` bounds the size of an argument for which a failing
    directional check is refined element by element.

    Example:
        >>> import tapejax as tf
        >>> from tapejax.testing import check_gradients
        >>> res = check_gradients(lambda x, y: (x ** 2 + 2 * y) ** 2, (tf.constant(2.0), tf.constant(3.0)))
        >>> res.worst_ratio < 1
        True
    """
    checker = _Checker(fn, args, order, modes, atol, rtol, argnums, num_directions, step, seed, forward_impl,
                       max_refine)
    return checker.run()
