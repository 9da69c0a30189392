"""TF's functional control flow: ``cond``, ``case``, ``switch_case``, ``while_loop``,
``map_fn``, ``vectorized_map``, ``scan``, ``foldl``, ``foldr``.

Two regimes, as in TF:

* Eagerly (a concrete predicate, concrete loop variables, no compiled step
  tracing) the Python runs as TF eager runs it: the taken branch, each
  iteration. The tapes simply record the ops that run, so every gradient,
  nested tape, jacobian and accumulator is right with no extra machinery.
* Inside ``tapejax.function`` (the values are jax tracers) each construct is
  *lowered* to ``lax.switch`` / ``lax.while_loop`` / ``lax.scan`` /
  ``jax.vmap``. The user's callables are first *functionalized*: run once on
  fresh tracers under ``jax.make_jaxpr``, with every tape and accumulator
  suspended, which yields a closed jaxpr. Its constants are what the callable
  closed over: outer tensors (found by identity among the inputs of the ops
  the callable ran, recorded by a private record-everything tape), variable
  values (found by identity among the variables it read) and plain constants.
  The whole construct is then bound as ONE primitive whose explicit inputs
  are the operands plus those captures, so tapes, the compiled replay
  (``jax.vjp`` over the slice), the interpreted nested tier and forward
  accumulators differentiate it like any other op: with respect to operands,
  captured tensors and captured variables, to any order.

Variables assigned inside a lowered branch or body are carried as extra
outputs (and, in loops, as extra loop state) and written back after the op.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import errors
from .._core import _recorder as _core
from .._core._recorder import Primitive, Tensor, VariableBase, bind, read_variable, state
from .._engine._interpret import handle
from .._ops._tensor import convert_to_tensor

__all__ = ["cond", "case", "switch_case", "while_loop"]


# --------------------------------------------------------------------------
# Structures.


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase) or getattr(x, "_tapejax_tensor_array", False)


def _flatten(tree: Any) -> tuple[list, Any]:
    return jax.tree_util.tree_flatten(tree, is_leaf=_is_leaf)


def _listless(tree: Any) -> Any:
    """A structure with lists turned into tuples: TF's nest compares them as the same."""
    if isinstance(tree, list):
        return tuple(_listless(x) for x in tree)
    if isinstance(tree, tuple) and not hasattr(tree, "_fields"):
        return tuple(_listless(x) for x in tree)
    if isinstance(tree, dict):
        return {k: _listless(v) for k, v in tree.items()}
    return tree


def _same_structure(a: Any, b: Any) -> bool:
    return _flatten(_listless(_unflatten(a, [0] * a.num_leaves)))[1] == _flatten(
        _listless(_unflatten(b, [0] * b.num_leaves)))[1]


def _unflatten(treedef: Any, leaves: Sequence[Any]) -> Any:
    return jax.tree_util.tree_unflatten(treedef, list(leaves))


def _is_tracer(v: Any) -> bool:
    return isinstance(v, jax.core.Tracer)


def _value(x: Any) -> Any:
    if isinstance(x, Tensor | VariableBase):
        return x._value
    return x


def _lowering(values: Sequence[Any]) -> bool:
    """Lower to a lax construct (a compiled step is tracing, or a value is a tracer)?"""
    if any(getattr(c, "trace", False) for c in state.tracing):
        return True
    return any(_is_tracer(_value(v)) for v in values)


def _as_tensor(x: Any) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, VariableBase):
        return read_variable(x)
    return convert_to_tensor(x)


def _aval(a: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(np.shape(a), jnp.result_type(a))


def _strong(x: Any, dtype: Any) -> Any:
    # TF tensors are never weakly typed; lax.while_loop / lax.switch demand identical avals.
    return lax.convert_element_type(x, np.dtype(dtype))


def _shape_str(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


# --------------------------------------------------------------------------
# Functionalizing a Python callable over tapejax tensors.


class _Everything(set):
    """A watched-set containing every id: the private tape records every op the callable runs."""

    def __contains__(self, i: object) -> bool:
        return True


class _Hook:
    """Pushed on ``state.tracing`` while a callable is functionalized: sees variable access,
    passing it on to the enclosing compiled step (which captures the variables)."""

    trace = True

    def __init__(self, prev: Any):
        self.prev = prev
        self.reads: dict[int, VariableBase] = {}
        self.writes: dict[int, VariableBase] = {}

    def read(self, var: VariableBase) -> None:
        if self.prev is not None:
            self.prev.read(var)
        self.reads.setdefault(var._uid, var)

    def write(self, var: VariableBase) -> None:
        if self.prev is not None:
            self.prev.write(var)
        self.reads.setdefault(var._uid, var)
        self.writes.setdefault(var._uid, var)

    def created(self, var: VariableBase) -> None:
        raise ValueError(
            "A tf.Variable was created inside a tf.cond branch or a loop body while it was being traced "
            "(inside tapejax.function). Create the variable outside the control-flow construct."
        )


def _outer_value(var: VariableBase, bound: dict | None) -> Any:
    if bound is not None and var._uid in bound:
        return bound[var._uid]
    return var._v


class _Fn:
    """A functionalized callable: ``jaxpr(consts, *args, *carried) -> (*outs, *carried', *written)``.

    ``consts`` are classified as ("var", variable), ("tensor", id) or ("const",):
    see ``_externals``.
    """

    def __init__(self, jaxpr: Any, consts: list, kinds: list, out_tree: Any, out_avals: list, n_out: int,
                 written: list, out_leaves: list):
        self.jaxpr = jaxpr
        self.consts = consts
        self.kinds = kinds
        self.out_tree = out_tree
        self.out_avals = out_avals
        self.n_out = n_out
        self.written = written
        self.out_leaves = out_leaves  # per user output: a description for error messages


def _leaf_array(x: Any) -> Any:
    if isinstance(x, Tensor | VariableBase):
        return x._value
    if x is None:
        raise TypeError("A control-flow branch or body returned None where a tensor was expected.")
    return convert_to_tensor(x)._value


def _functionalize(fn: Callable, make_args: Callable[[list], tuple], in_avals: list, carried: list,
                   what: str) -> _Fn:
    """Trace ``fn(*make_args(arrays))`` into a closed jaxpr over ``in_avals`` plus the
    ``carried`` variables' values (bound to extra inputs).

    ``make_args`` rebuilds the callable's arguments (Tensors, nests) from arrays.
    """
    outer_bound = state.bound
    prev = next((c for c in reversed(state.tracing)), None)
    info: dict = {}
    n_args = len(in_avals)

    def pure(*arrays: Any) -> tuple:
        rec = _core.Tape(watch_accessed_variables=False)
        rec.watched = _Everything()
        start = _core._next_id()
        hook = _Hook(prev)
        bound = dict(outer_bound) if outer_bound else {}
        for v, a in zip(carried, arrays[n_args:]):
            bound[v._uid] = a
        saved = (state.recording, state.accumulators, state.order, state.bound)
        state.recording, state.accumulators, state.order = [rec], [], []
        state.bound = bound
        state.tracing.append(hook)
        try:
            args = make_args(list(arrays[:n_args]))
            out = fn(*args)
            flat, tree = _flatten(out)
            out_arrays = [_leaf_array(x) for x in flat]
            carried_out = [bound[v._uid] for v in carried]
        finally:
            state.tracing.pop()
            state.recording, state.accumulators, state.order, state.bound = saved
        written = [v for u, v in hook.writes.items() if not any(v is c for c in carried)]
        # Outer tensors the callable used: the inputs of its ops (and outputs it returned as
        # they were) that existed before it ran. Held with their values, matched by identity.
        ids: dict[int, tuple] = {}
        for e in rec.eqns:
            for i, val in zip(e.in_ids, e.in_vals):
                if i is not None and i < start:
                    ids.setdefault(id(val), (i, val))
        for x in flat:
            if isinstance(x, Tensor) and x._id < start:
                ids.setdefault(id(x._value), (x._id, x._value))
        info.update(tree=tree, written=written, ids=ids, reads=dict(hook.reads), flat=flat)
        return tuple(out_arrays) + tuple(carried_out) + tuple(bound[v._uid] for v in written)

    closed, shapes = jax.make_jaxpr(pure, return_shape=True)(*in_avals, *[_aval(_outer_value(v, outer_bound))
                                                                              for v in carried])
    reads = info["reads"]
    ids = info["ids"]
    kinds: list = []
    for c in closed.consts:
        var = next((v for v in reads.values() if _outer_value(v, outer_bound) is c), None)
        if var is not None:
            kinds.append(("var", var))
        elif id(c) in ids and ids[id(c)][1] is c:
            kinds.append(("tensor", ids[id(c)][0]))
        else:
            kinds.append(("const",))
    n_out = len(shapes) - len(carried) - len(info["written"])
    out_leaves = info["flat"]
    return _Fn(closed.jaxpr, list(closed.consts), kinds, info["tree"], list(shapes), n_out, info["written"],
               out_leaves)


class _Externals:
    """The captured inputs of a lowered construct, shared by its branches/bodies."""

    def __init__(self) -> None:
        self.keys: dict = {}
        self.items: list = []  # (kind, payload, value)

    def add(self, kind: tuple, value: Any) -> int:
        if kind[0] == "var":
            key: Any = ("var", kind[1]._uid)
        elif kind[0] == "tensor":
            key = ("tensor", kind[1])
        else:
            key = ("const", id(value))
        k = self.keys.get(key)
        if k is None:
            k = self.keys[key] = len(self.items)
            self.items.append((kind, value))
        return k

    def add_fn(self, f: _Fn) -> tuple:
        return tuple(self.add(kind, c) for kind, c in zip(f.kinds, f.consts))

    def inputs(self) -> list:
        """The data inputs to bind: variable reads (watched where the variable is), tensor
        handles (the recorded tensors' ids), constants."""
        out = []
        for kind, value in self.items:
            if kind[0] == "var":
                out.append(read_variable(kind[1]))
            elif kind[0] == "tensor":
                out.append(handle(kind[1], value))
            else:
                out.append(value)
        return out


def _eval(jaxpr: Any, cmap: tuple, ext: Sequence[Any], args: Sequence[Any]) -> list:
    return jax.core.eval_jaxpr(jaxpr, [ext[k] for k in cmap], *args)


def _write_back(variables: Sequence[VariableBase], tensors: Sequence[Tensor]) -> None:
    for v, t in zip(variables, tensors):
        _core.touch_variable(v)
        v._value = t._value


# --------------------------------------------------------------------------
# cond / switch_case / case


def _switch_impl(index: Any, *ext: Any, branches: tuple, out_dtypes: tuple) -> tuple:
    def make(br: tuple) -> Callable:
        jaxpr, cmap, omap = br

        def run(ext: tuple) -> tuple:
            outs = _eval(jaxpr, cmap, ext, ())
            return tuple(_strong(outs[k] if src == 0 else ext[k], d) for (src, k), d in zip(omap, out_dtypes))

        return run

    fns = [make(b) for b in branches]
    if len(fns) == 1:
        return fns[0](ext)
    return tuple(lax.switch(jnp.asarray(index, jnp.int32), fns, ext))


class _ControlFlowPrimitive(Primitive):
    __slots__ = ()


SWITCH = _ControlFlowPrimitive("switch_case", _switch_impl, multiple_results=True)


def _describe(x: Any) -> str:
    if isinstance(x, Tensor | VariableBase):
        v = x._value
        return f"Tensor(shape={_shape_str(v.shape)}, dtype={np.dtype(v.dtype).name})"
    return repr(x)


def _lowered_switch(index: Any, fns: Sequence[Callable], api: str) -> Any:
    traced = [_functionalize(f, lambda arrays: (), [], [], api) for f in fns]
    first = traced[0]
    for k, t in enumerate(traced[1:], 1):
        if t.out_tree != first.out_tree:
            if api == "cond":
                raise ValueError(
                    "true_fn and false_fn arguments to tf.cond must have the same number, type, and overall "
                    f"structure of return values.\n\ntrue_fn output: {first.out_tree}\nfalse_fn output: "
                    f"{t.out_tree}"
                )
            raise ValueError(
                f"The branches of {api} must return the same structure: branch 0 returned {first.out_tree}, "
                f"branch {k} returned {t.out_tree}."
            )
        for j in range(first.n_out):
            a, b = first.out_avals[j], t.out_avals[j]
            if np.dtype(a.dtype) != np.dtype(b.dtype):
                raise TypeError(
                    f"true_fn and false_fn arguments to tf.cond must have the same number, type, and overall "
                    f"structure of return values. The branches of {api} return different dtypes for output {j}: "
                    f"{np.dtype(a.dtype).name} (branch 0) and {np.dtype(b.dtype).name} (branch {k}). Cast one "
                    "branch's result."
                )
            if tuple(a.shape) != tuple(b.shape):
                raise ValueError(
                    f"Branches of {api} return different shapes for output {j}: {_shape_str(a.shape)} (branch 0) "
                    f"and {_shape_str(b.shape)} (branch {k}). tapejax compiles with XLA, which needs one static "
                    "shape per output (TF would give an unknown shape): pad or reshape the branches to one shape."
                )
    written: list = []
    for t in traced:
        for v in t.written:
            if not any(v is w for w in written):
                written.append(v)
    ext = _Externals()
    outer_bound = state.bound
    branches = []
    for t in traced:
        cmap = ext.add_fn(t)
        omap = [(0, k) for k in range(t.n_out)]
        for v in written:
            pos = next((m for m, w in enumerate(t.written) if w is v), None)
            if pos is not None:
                omap.append((0, t.n_out + pos))
            else:
                # This branch leaves the variable as it was: its value passes through.
                omap.append((1, ext.add(("var", v), _outer_value(v, outer_bound))))
        branches.append((t.jaxpr, cmap, tuple(omap)))
    out_dtypes = tuple(np.dtype(a.dtype) for a in first.out_avals[:first.n_out]) + tuple(
        np.dtype(jnp.result_type(_outer_value(v, outer_bound))) for v in written)
    idx = _as_tensor(index)
    outs = bind(SWITCH, idx, *ext.inputs(), branches=tuple(branches), out_dtypes=out_dtypes)
    _write_back(written, outs[first.n_out:])
    return _unflatten(first.out_tree, outs[:first.n_out])


def _check_callable(f: Any, name: str, api: str) -> None:
    if not callable(f):
        raise TypeError(f"{name} must be callable.")


def _pred_value(pred: Any) -> Any:
    if isinstance(pred, Tensor | VariableBase):
        return pred._value
    return pred


def cond(pred: Any, true_fn: Callable | None = None, false_fn: Callable | None = None, name: str | None = None) -> Any:
    """``true_fn()`` if ``pred`` is true, else ``false_fn()`` (TF's ``tf.cond``).

    Eagerly, only the taken branch runs, as in TF. Inside ``tapejax.function``
    both branches are traced and the call lowers to ``lax.cond``; it is
    differentiable (any order, forward mode too) with respect to everything
    the branches use: tensors, variables and captured outer tensors. Both
    branches must then return the same structure, dtypes and shapes.

    Example:
        >>> import tapejax as tf
        >>> x = tf.constant(3.0)
        >>> with tf.GradientTape() as g:
        ...     g.watch(x)
        ...     y = tf.cond(x > 0, lambda: x * x, lambda: -x)
        >>> float(y), float(g.gradient(y, x))
        (9.0, 6.0)
    """
    if true_fn is None:
        raise TypeError("cond(): 'true_fn' argument required")
    if false_fn is None:
        raise TypeError("cond(): 'false_fn' argument required")
    if not callable(true_fn):
        raise TypeError("'true_fn' must be callable.")
    if not callable(false_fn):
        raise TypeError("'false_fn' must be callable.")
    p = _pred_value(pred)
    if _lowering([p]):
        pt = _as_tensor(pred)
        if np.dtype(pt._value.dtype) != np.bool_:
            raise errors.InvalidArgumentError(
                f"Input 'pred' passed {np.dtype(pt._value.dtype).name} expected bool: the predicate of tf.cond "
                "must be a bool tensor inside tapejax.function (compare it, e.g. x > 0)."
            )
        if pt._value.ndim != 0:
            raise ValueError(f"Shape must be rank 0 but is rank {pt._value.ndim} for the predicate of tf.cond.")
        idx = Tensor(jnp.where(pt._value, 1, 0).astype(jnp.int32))
        return _lowered_switch(idx, [false_fn, true_fn], "cond")
    # Eagerly TF runs the branch that Python truthiness picks.
    return true_fn() if bool(np.asarray(p)) else false_fn()


def switch_case(branch_index: Any, branch_fns: Any, default: Callable | None = None, name: str = "switch_case") -> Any:
    """Run ``branch_fns[branch_index]()`` (TF's ``tf.switch_case``); an index out of range runs
    ``default`` (or the last branch when there is no default), as in TF.

    ``branch_fns`` is a list of callables, a list of ``(int, callable)`` pairs or a
    dict ``{int: callable}``. Lowered to ``lax.switch`` inside ``tapejax.function``.

    Example:
        >>> import tapejax as tf
        >>> float(tf.switch_case(tf.constant(1), [lambda: tf.constant(10.0), lambda: tf.constant(20.0)]))
        20.0
    """
    if isinstance(branch_fns, dict):
        pairs = sorted(branch_fns.items())
    elif isinstance(branch_fns, list | tuple) and branch_fns and all(isinstance(b, tuple) for b in branch_fns):
        pairs = sorted(branch_fns)
    elif isinstance(branch_fns, list | tuple):
        pairs = list(enumerate(branch_fns))
    else:
        raise TypeError("branch_fns must be a list, tuple, or dict")
    if not pairs:
        raise ValueError("Must provide at least one item in branch_fns")
    keys = [k for k, _ in pairs]
    if keys != list(range(len(keys))):
        raise ValueError(f"branch indices (keys) must form contiguous range of [0 to {len(keys)}) but found {keys}.")
    fns = [f for _, f in pairs]
    for f in fns:
        if not callable(f):
            raise TypeError("fn for branch_fns must be callable.")
    if default is None:
        default = fns[-1]
    bi = _pred_value(branch_index)
    if _lowering([bi]):
        it = _as_tensor(branch_index)
        i = jnp.asarray(it._value, jnp.int32)
        n = len(fns)
        # Out of range -> the default, which is appended as branch n.
        idx = Tensor(jnp.where((i < 0) | (i >= n), n, i))
        return _lowered_switch(idx, fns + [default], "switch_case")
    if isinstance(branch_index, Tensor | VariableBase) and not np.issubdtype(np.dtype(bi.dtype), np.integer):
        raise TypeError(f"branch_index must be an int32 or int64 tensor, got {np.dtype(bi.dtype).name}.")
    i = int(np.asarray(bi))
    return (fns[i] if 0 <= i < len(fns) else default)()


def case(pred_fn_pairs: Any, default: Callable | None = None, exclusive: bool = False, strict: bool = False,
         name: str = "case") -> Any:
    """Run the callable of the first true predicate in ``pred_fn_pairs`` (TF's ``tf.case``),
    else ``default``. With no default and no true predicate, eagerly an
    ``InvalidArgumentError`` (as in TF). ``exclusive`` is accepted (TF 2.21 does not
    enforce it either).

    Example:
        >>> import tapejax as tf
        >>> x = tf.constant(5)
        >>> int(tf.case([(x < 0, lambda: tf.constant(-1)), (x > 3, lambda: tf.constant(1))],
        ...             default=lambda: tf.constant(0)))
        1
    """
    if isinstance(pred_fn_pairs, dict):
        pred_fn_pairs = list(pred_fn_pairs.items())
    if not isinstance(pred_fn_pairs, list | tuple):
        raise TypeError("pred_fn_pairs must be a list, tuple, or dict")
    for pair in pred_fn_pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError(f"Each entry in pred_fn_pairs must be a 2-tuple. Received {pair}.")
        if not callable(pair[1]):
            raise TypeError("fn for pred_fn_pairs must be callable.")
    if default is None and not pred_fn_pairs:
        raise ValueError("Must provide at least one item in pred_fn_pairs.")
    preds = [_as_tensor(p) for p, _ in pred_fn_pairs]
    fns = [f for _, f in pred_fn_pairs]
    if _lowering(preds):
        stacked = jnp.stack([jnp.reshape(p._value, ()).astype(bool) for p in preds])
        # TF asserts at run time that some predicate holds when there is no default; XLA cannot
        # raise, so the last pair's function runs then (what TF runs after its assertion).
        fallback = default if default is not None else fns[-1]
        idx = Tensor(jnp.where(jnp.any(stacked), jnp.argmax(stacked), len(fns)).astype(jnp.int32))
        return _lowered_switch(idx, fns + [fallback], "case")
    vals = [bool(np.asarray(p._value)) for p in preds]
    for v, f in zip(vals, fns):
        if v:
            return f()
    if default is None:
        raise errors.InvalidArgumentError(
            "Input error: None of conditions evaluated as True: " + ", ".join(str(v) for v in vals)
            + ". Pass default= to tf.case for that case."
        )
    return default()


# --------------------------------------------------------------------------
# while_loop


class _NoReverse(Exception):
    pass


def _reverse_mode(vals: Sequence[Any]) -> bool:
    # A reverse-mode derivative (jax.vjp / linearize) sees LinearizeTracers; forward mode JVPTracers.
    def lin(v: Any) -> bool:
        t = type(v)
        return _is_tracer(v) and t.__name__ == "LinearizeTracer"

    return any(lin(v) for v in vals)


def _while_impl(*vals: Any, cond_br: tuple, body_br: tuple, n_carry: int, carry_dtypes: tuple,
                max_iter: int | None) -> tuple:
    carry0 = tuple(_strong(v, d) for v, d in zip(vals[:n_carry], carry_dtypes))
    ext = vals[n_carry:]

    def c(cr: tuple) -> Any:
        return jnp.reshape(_eval(cond_br[0], cond_br[1], ext, cr)[0], ()).astype(bool)

    def b(cr: tuple) -> tuple:
        outs = _eval(body_br[0], body_br[1], ext, cr)
        return tuple(_strong(o, d) for o, d in zip(outs, carry_dtypes))

    if max_iter is None:
        if _reverse_mode(vals):
            raise errors.UnimplementedError(
                "A reverse-mode gradient through a tf.while_loop traced inside tapejax.function needs a bound "
                "on its number of iterations: pass maximum_iterations=N to tf.while_loop (XLA keeps the "
                "forward values of at most N iterations). Forward-mode (ForwardAccumulator) and eager loops "
                "need no bound."
            )
        return tuple(lax.while_loop(c, b, carry0))
    n = int(max_iter)

    def bounded(cr0: tuple) -> tuple:
        def c2(s: tuple) -> Any:
            return (s[0] < n) & c(s[1])

        def b2(s: tuple) -> tuple:
            return s[0] + 1, b(s[1])

        return lax.while_loop(c2, b2, (jnp.int32(0), cr0))[1]

    def scanned(cr0: tuple) -> tuple:
        def step(cr: tuple, _: Any) -> tuple:
            return lax.cond(c(cr), b, lambda x: x, cr), None

        return lax.scan(step, cr0, None, length=n)[0]

    if not any(_is_tracer(v) and type(v).__name__ in ("LinearizeTracer", "JVPTracer") for v in vals):
        return tuple(bounded(carry0))
    # Differentiated: a masked scan of maximum_iterations steps, which reverse mode can
    # transpose (JAX cannot transpose a while_loop); forward values are the same.
    return tuple(scanned(carry0))


WHILE = _ControlFlowPrimitive("while_loop", _while_impl, multiple_results=True)


def _check_structure(api: str, expected: Any, got: Any, what: str) -> None:
    if not _same_structure(expected, got):
        raise ValueError(
            f"The two structures don't have the same nested structure.\n\nFirst structure: {expected}\n\n"
            f"Second structure: {got}\n\nMore specifically: the {what} of {api} must have the same structure as "
            "loop_vars."
        )


def _max_iter_value(maximum_iterations: Any) -> Any:
    if maximum_iterations is None:
        return None
    v = _value(maximum_iterations)
    if _is_tracer(v):
        raise ValueError(
            "maximum_iterations of tf.while_loop must be known when tapejax.function traces the loop "
            "(a Python int or a constant tensor), because XLA needs a static bound."
        )
    v = np.asarray(v)
    if v.ndim != 0:
        raise ValueError(f"maximum_iterations must be a scalar, saw shape: {v.shape}")
    return int(v)


def while_loop(cond: Callable, body: Callable, loop_vars: Any, shape_invariants: Any = None,
               parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
               maximum_iterations: Any = None, name: str | None = None) -> Any:
    """Repeat ``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)`` (TF's ``tf.while_loop``).

    ``loop_vars`` is a tensor or a (nested) tuple/list/dict of tensors; the result
    has its structure. ``maximum_iterations`` bounds the number of iterations.
    Eagerly the loop runs in Python, op by op, as in TF. Inside
    ``tapejax.function`` it lowers to ``lax.while_loop``; a reverse-mode gradient
    through it there needs ``maximum_iterations`` (it then runs as a masked
    ``lax.scan`` of that many steps). ``shape_invariants``, ``parallel_iterations``,
    ``back_prop`` and ``swap_memory`` are accepted; a loop variable must keep its
    shape and dtype.

    Example:
        >>> import tapejax as tf
        >>> i, s = tf.while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s * 2.0),
        ...                      (tf.constant(0), tf.constant(1.0)))
        >>> int(i), float(s)
        (4, 16.0)
    """
    if not callable(cond):
        raise TypeError("cond must be callable.")
    if not callable(body):
        raise TypeError("body must be callable.")
    if isinstance(loop_vars, Tensor | VariableBase) or not isinstance(loop_vars, list | tuple):
        raise TypeError(
            "loop_vars of tf.while_loop must be a tuple or list (TF calls body(*loop_vars)); wrap a single "
            "tensor as [x] or (x,)."
        )
    if len(loop_vars) == 0:
        raise ValueError("loop_vars must be a non-empty tuple or list of tensors")
    flat, tree = _flatten(loop_vars)
    max_iter = _max_iter_value(maximum_iterations)
    tensors = [_as_tensor(x) for x in flat]
    if _lowering([t._value for t in tensors]):
        return _lowered_while(cond, body, tensors, tree, max_iter)
    # Eagerly: the Python loop TF runs, op by op (the tapes record every iteration).
    lv = _unflatten(tree, [x if isinstance(x, Tensor) or getattr(x, "_tapejax_tensor_array", False) else t
                           for x, t in zip(flat, tensors)])
    n = 0
    while max_iter is None or n < max_iter:
        pv = _pred_value(cond(*lv))
        if np.ndim(pv) != 0:
            raise ValueError(f"Shape must be rank 0 but is rank {np.ndim(pv)} for the predicate of tf.while_loop.")
        if not bool(np.asarray(pv)):
            break
        new = body(*lv)
        if not isinstance(new, list | tuple):
            # TF: the next iteration calls body(*new), which a tensor cannot be unpacked into.
            raise TypeError(
                "body of tf.while_loop returned a single value where loop_vars is a sequence: return a "
                "tuple or list of the same length as loop_vars (e.g. (x,))."
            )
        new_flat, new_tree = _flatten(new)
        if not _same_structure(tree, new_tree):
            _check_structure("tf.while_loop", tree, new_tree, "output of body")
        for a, b_ in zip(flat, new_flat):
            _check_same_type(a, b_)
        lv, flat, tree = new, new_flat, new_tree
        n += 1
    return lv


def _check_same_type(before: Any, after: Any) -> None:
    a, b = _value(before), _value(after)
    if a is None or b is None or not hasattr(b, "dtype") or not hasattr(a, "dtype"):
        return
    if np.dtype(a.dtype) != np.dtype(b.dtype):
        raise TypeError(
            f"Loop variable has dtype {np.dtype(a.dtype).name} on entry but the body returns "
            f"{np.dtype(b.dtype).name}. A tf.while_loop variable must keep its dtype: cast the body's result."
        )


def _lowered_while(cond: Callable, body: Callable, tensors: list, tree: Any, max_iter: Any) -> Any:
    avals = [jax.ShapeDtypeStruct(t._value.shape, t._value.dtype) for t in tensors]
    dtypes = tuple(np.dtype(a.dtype) for a in avals)

    def call(f: Callable, lv: Any) -> Any:
        return f(*lv)

    def make_args(arrays: list) -> tuple:
        return (_unflatten(tree, [Tensor(a) for a in arrays]),)

    carried: list = []
    for _ in range(8):
        fb = _functionalize(lambda lv: call(body, lv), make_args, avals, carried, "body")
        fc = _functionalize(lambda lv: call(cond, lv), make_args, avals, carried, "cond")
        new = [v for v in fb.written + fc.written if not any(v is c for c in carried)]
        if not new:
            break
        for v in new:
            if not any(v is c for c in carried):
                carried.append(v)
    body_tree = fb.out_tree
    # A body of one loop variable may return it bare: TF's graph mode packs it.
    if not _same_structure(tree, body_tree) and not (len(tensors) == 1 and fb.n_out == 1):
        _check_structure("tf.while_loop", tree, body_tree, "output of body")
    for k, (a, o) in enumerate(zip(avals, fb.out_avals[:fb.n_out])):
        if np.dtype(a.dtype) != np.dtype(o.dtype):
            raise TypeError(
                f"Loop variable {k} has dtype {np.dtype(a.dtype).name} on entry but the body returns "
                f"{np.dtype(o.dtype).name}. A tf.while_loop variable must keep its dtype: cast the body's result."
            )
        if tuple(a.shape) != tuple(o.shape):
            raise ValueError(
                f"Input tensor {k} enters the loop with shape {_shape_str(a.shape)}, but has shape "
                f"{_shape_str(o.shape)} after one iteration. tapejax lowers tf.while_loop to XLA, which needs "
                "loop variables of a fixed shape (shape_invariants cannot relax it): keep the shape, or run "
                "the loop eagerly."
            )
    if fc.n_out != 1:
        raise TypeError("cond of tf.while_loop must return a single boolean scalar.")
    ext = _Externals()
    cmap_b = ext.add_fn(fb)
    cmap_c = ext.add_fn(fc)
    n_loop = len(tensors)
    carry_dtypes = dtypes + tuple(np.dtype(jnp.result_type(_outer_value(v, state.bound))) for v in carried)
    # The cond jaxpr returns (pred, carried...): only its first output is used.
    var_reads = [read_variable(v) for v in carried]
    outs = bind(WHILE, *tensors, *var_reads, *ext.inputs(), cond_br=(fc.jaxpr, cmap_c), body_br=(fb.jaxpr, cmap_b),
                n_carry=n_loop + len(carried), carry_dtypes=carry_dtypes, max_iter=max_iter)
    _write_back(carried, outs[n_loop:])
    return _unflatten(tree, outs[:n_loop])
