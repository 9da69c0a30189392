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
outputs (and, in loops, as extra loop state) and written back after the op;
a read after an assign there is a fresh read of the variable, as in TF.

Entry points for autograph (TF's signatures): ``cond(pred, true_fn, false_fn)``,
``while_loop(cond, body, loop_vars, maximum_iterations=None)`` (``body(*loop_vars)``
returns a tuple/list like ``loop_vars``), and ``needs_lowering(*values)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import errors
from .._core import _recorder as _core
from .._core._recorder import (
    Primitive,
    Tensor,
    VariableBase,
    bind,
    read_variable,
    state,
)
from .._engine._interpret import handle
from .._ops._dtypes import as_dtype
from .._ops._tensor import convert_to_tensor, is_string_value
from .._ops.array import concat, expand_dims, stack, unstack
from . import _tensor_array
from ._tensor_array import TensorArray

__all__ = ["TensorArray", "case", "cond", "foldl", "foldr", "map_fn", "scan", "switch_case", "vectorized_map",
           "while_loop"]


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


def _unflatten(treedef: Any, leaves: Sequence[Any], like: Any = None) -> Any:
    """Rebuild a structure; dicts keep the key order of ``like`` (TF's nest does, jax sorts)."""
    out = jax.tree_util.tree_unflatten(treedef, list(leaves))
    return out if like is None else _reorder(like, out)


def _reorder(like: Any, value: Any) -> Any:
    if isinstance(like, dict) and isinstance(value, dict) and set(like) == set(value):
        return type(value)((k, _reorder(like[k], value[k])) for k in like) if type(value) is dict else value
    if isinstance(like, list | tuple) and isinstance(value, list | tuple) and len(like) == len(value):
        items = [_reorder(a, b) for a, b in zip(like, value)]
        if hasattr(value, "_fields"):
            return type(value)(*items)
        return type(value)(items)
    return value


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


def needs_lowering(*values: Any) -> bool:
    """Would a construct over ``values`` be lowered (a compiled step traces, or a value is a tracer)?

    For autograph: a Python ``if``/``while`` on a tensor for which this is False can run as
    Python (the value is concrete); otherwise convert it to ``cond``/``while_loop``.
    """
    return _lowering(list(values))


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

    def __init__(self, prev: Any, outer_bound: dict | None = None, bound: dict | None = None):
        self.prev = prev
        self.reads: dict[int, VariableBase] = {}
        self.writes: dict[int, VariableBase] = {}
        self.outer_bound = outer_bound
        self.bound = bound
        self.views: set[int] = set()

    def note_read(self, var: VariableBase) -> None:
        # Registration only, up the chain: an enclosing body's bound values are not touched
        # while this one traces (a value made here would leak into that trace).
        if isinstance(self.prev, _Hook):
            self.prev.note_read(var)
        elif self.prev is not None:
            self.prev.read(var)
        self.reads.setdefault(var._uid, var)

    def read(self, var: VariableBase) -> None:
        self.note_read(var)
        b = self.bound
        if b is None or var._uid not in b:
            return
        cur = b[var._uid]
        src = _outer_value(var, self.outer_bound)
        if cur is src or id(cur) in self.views or not jnp.issubdtype(jnp.result_type(cur), jnp.inexact):
            return
        # A read after an assign (in this body, or carried from an earlier iteration) is, as in TF, a
        # fresh read of the variable: its value is the assigned one, but no gradient flows back into
        # what was assigned; its gradient goes to the variable itself (the value it entered with).
        view = _fresh_read(cur, src)
        self.views.add(id(view))
        b[var._uid] = view

    def write(self, var: VariableBase) -> None:
        if self.prev is not None:
            self.prev.write(var)
        self.reads.setdefault(var._uid, var)
        self.writes.setdefault(var._uid, var)

    def created(self, var: VariableBase) -> None:
        # A compiled step's first trace reacts by running that call eagerly (a lazy build):
        # let it, and refuse only where nothing else can.
        if self.prev is not None:
            self.prev.created(var)
        raise ValueError(
            "A tf.Variable was created inside a tf.cond branch or a loop body while it was being traced "
            "(inside tapejax.function). Create the variable outside the control-flow construct."
        )


@jax.custom_jvp
def _fresh_read(cur: Any, src: Any) -> Any:
    """``cur``'s value with ``src``'s tangent: a read after an assign, as TF differentiates it.

    Written as ``stop_gradient(cur) + (src - stop_gradient(src))`` it would cost two elementwise
    ops per read on every iteration of a compiled loop (XLA keeps ``src - src`` for NaN's sake);
    as a custom rule the forward is ``cur`` itself.
    """
    return cur


@_fresh_read.defjvp
def _fresh_read_jvp(primals: tuple, tangents: tuple) -> tuple:
    cur, _ = primals
    _, dsrc = tangents
    return cur, dsrc


def _outer_value(var: VariableBase, bound: dict | None) -> Any:
    if bound is not None and var._uid in bound:
        return bound[var._uid]
    return var._v


class _Fn:
    """A functionalized callable: ``jaxpr(consts, *args, *carried) -> (*outs, *carried', *written)``.

    ``consts`` are classified as ("var", variable), ("tensor", id) or ("const",):
    see ``_Externals``. ``out_leaves`` are the callable's flattened outputs as it returned
    them (a TensorArray is rebuilt from its buffer); ``like`` the returned structure.
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
        self.out_leaves = out_leaves
        self.like: Any = None


def _is_ta(x: Any) -> bool:
    return isinstance(x, TensorArray)


def _leaf_array(x: Any) -> Any:
    if isinstance(x, Tensor | VariableBase):
        if is_string_value(x._value):
            raise TypeError(
                "A tf.cond branch or loop body inside a compiled tapejax.function returned a string tensor, which "
                "tapejax's lowered control flow does not carry: compute the condition's numbers inside, and the "
                "strings with tf.where (or outside the function).")
        return x._value
    if _is_ta(x):
        return _tensor_array.to_array(x)._value
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
        bound = dict(outer_bound) if outer_bound else {}
        for v, a in zip(carried, arrays[n_args:]):
            bound[v._uid] = a
        hook = _Hook(prev, outer_bound, bound)
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
        info.update(tree=tree, written=written, ids=ids, reads=dict(hook.reads), flat=flat, out=out)
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
    f = _Fn(closed.jaxpr, list(closed.consts), kinds, info["tree"], list(shapes), n_out, info["written"],
            out_leaves)
    f.like = info["out"]
    return f


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


def _lowered_switch(index: Any, fns: Sequence[Callable], api: str) -> Any:
    # TF traces tf.cond's true_fn before its false_fn (Python side effects such as print come in
    # that order); cond passes [false_fn, true_fn], so it traces them back to front.
    order = range(len(fns) - 1, -1, -1) if api == "cond" else range(len(fns))
    by_index = {k: _functionalize(fns[k], lambda arrays: (), [], [], api) for k in order}
    traced = [by_index[k] for k in range(len(fns))]
    first = traced[0]
    for k, t in enumerate(traced[1:], 1):
        if t.out_tree != first.out_tree:
            # TF raises TypeError for branches of different structure (with TF's own message).
            raise TypeError(
                f"true_fn and false_fn arguments to tf.cond must have the same number, type, and overall "
                f"structure of return values.\n\n{api}: branch 0 returned {first.out_tree}, branch {k} returned "
                f"{t.out_tree}."
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
    for k, x in enumerate(first.out_leaves):
        if any(_is_ta(t.out_leaves[k]) != _is_ta(x) for t in traced):
            raise TypeError(
                f"true_fn and false_fn arguments to tf.cond must have the same number, type, and overall structure "
                f"of return values: output {k} of {api} is a TensorArray in one branch only."
            )
    idx = _as_tensor(index)
    outs = bind(SWITCH, idx, *ext.inputs(), branches=tuple(branches), out_dtypes=out_dtypes)
    _write_back(written, outs[first.n_out:])
    # A TensorArray a branch returns comes back as its buffer: rebuild the array.
    res = [_tensor_array.from_array(x, o) if _is_ta(x) else o for x, o in zip(first.out_leaves, outs)]
    return _unflatten(first.out_tree, res, first.like)


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
            raise errors.InvalidArgumentError(
                f"The predicate of tf.cond must be a scalar, but it has shape {_shape_str(pt._value.shape)}: "
                "reduce it (tf.reduce_all / tf.reduce_any) first."
            )
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
    fallback: Callable = fns[-1] if default is None else default
    bi = _pred_value(branch_index)
    if _lowering([bi]):
        it = _as_tensor(branch_index)
        i = jnp.asarray(it._value, jnp.int32)
        n = len(fns)
        # Out of range -> the default, which is appended as branch n.
        idx = Tensor(jnp.where((i < 0) | (i >= n), n, i))
        return _lowered_switch(idx, fns + [fallback], "switch_case")
    if isinstance(branch_index, Tensor | VariableBase) and not np.issubdtype(np.dtype(bi.dtype), np.integer):
        raise TypeError(f"branch_index must be an int32 or int64 tensor, got {np.dtype(bi.dtype).name}.")
    k = int(np.asarray(bi))
    return (fns[k] if 0 <= k < len(fns) else fallback)()


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


def _reverse_mode(vals: Sequence[Any]) -> bool:
    # A reverse-mode derivative (jax.vjp / linearize) sees LinearizeTracers; forward mode JVPTracers.
    def lin(v: Any) -> bool:
        t = type(v)
        return _is_tracer(v) and t.__name__ == "LinearizeTracer"

    return any(lin(v) for v in vals)


def _while_impl(*vals: Any, cond_br: tuple, body_br: tuple, n_carry: int, carry_dtypes: tuple,
                max_iter: int | None, dyn_max: bool = False) -> tuple:
    if dyn_max:
        # maximum_iterations known only at run time: it is the last input.
        return _while_dynamic_max(vals, cond_br, body_br, n_carry, carry_dtypes)
    # Every function below takes its data from its own arguments ``v`` (never from ``vals``):
    # under the custom_jvp they are the differentiated inputs.
    def split(v: tuple) -> tuple:
        return tuple(_strong(x, d) for x, d in zip(v[:n_carry], carry_dtypes)), v[n_carry:]

    def c(ext: tuple, cr: tuple) -> Any:
        return jnp.reshape(_eval(cond_br[0], cond_br[1], ext, cr)[0], ()).astype(bool)

    def b(ext: tuple, cr: tuple) -> tuple:
        outs = _eval(body_br[0], body_br[1], ext, cr)
        return tuple(_strong(o, d) for o, d in zip(outs, carry_dtypes))

    if max_iter is None:
        if _reverse_mode(vals):
            raise _unbounded_error()

        def unbounded(v: tuple) -> tuple:
            cr0, ext = split(v)
            return tuple(lax.while_loop(lambda cr: c(ext, tuple(cr)), lambda cr: b(ext, tuple(cr)), cr0))

        # The tangent rule is the while_loop's own (forward mode works); a reverse-mode
        # derivative meets it partially evaluated and gets the clear error, also where this
        # loop sits inside another lowered construct's body.
        return _with_tangent_rule(unbounded, unbounded, vals, reverse_error=True)
    n = int(max_iter)

    def bounded(v: tuple) -> tuple:
        cr0, ext = split(v)

        def c2(s: tuple) -> Any:
            return (s[0] < n) & c(ext, s[1])

        def b2(s: tuple) -> tuple:
            return s[0] + 1, b(ext, s[1])

        return tuple(lax.while_loop(c2, b2, (jnp.int32(0), cr0))[1])

    def scanned(v: tuple) -> tuple:
        cr0, ext = split(v)

        def step(cr: tuple, _: Any) -> tuple:
            return lax.cond(c(ext, cr), lambda x: b(ext, x), lambda x: x, cr), None

        return tuple(lax.scan(step, cr0, None, length=n)[0])

    # Values from a while_loop that stops early; derivatives (any mode, any order) from a
    # masked scan of maximum_iterations steps, which reverse mode can transpose.
    return _with_tangent_rule(bounded, scanned, vals, reverse_error=False)


def _while_dynamic_max(vals: tuple, cond_br: tuple, body_br: tuple, n_carry: int, carry_dtypes: tuple) -> tuple:
    if _reverse_mode(vals):
        raise _unbounded_error()

    def run(v: tuple) -> tuple:
        m = v[-1]
        cr0 = tuple(_strong(x, d) for x, d in zip(v[:n_carry], carry_dtypes))
        ext = v[n_carry:-1]

        def c2(s: tuple) -> Any:
            return (s[0] < m) & jnp.reshape(_eval(cond_br[0], cond_br[1], ext, s[1])[0], ()).astype(bool)

        def b2(s: tuple) -> tuple:
            outs = _eval(body_br[0], body_br[1], ext, s[1])
            return s[0] + 1, tuple(_strong(o, d) for o, d in zip(outs, carry_dtypes))

        return tuple(lax.while_loop(c2, b2, (jnp.zeros((), jnp.asarray(m).dtype), cr0))[1])

    return _with_tangent_rule(run, run, vals, reverse_error=True)


def _unbounded_error() -> Exception:
    return errors.UnimplementedError(
        "A reverse-mode gradient through a tf.while_loop traced inside tapejax.function needs a static bound "
        "on its number of iterations: pass maximum_iterations=N (a Python int or a constant, not a traced "
        "tensor) to tf.while_loop (XLA keeps the forward values of at most N iterations). Forward-mode "
        "(ForwardAccumulator) and eager loops need no bound."
    )


def _with_tangent_rule(primal: Callable, derivative: Callable, vals: tuple, reverse_error: bool) -> tuple:
    @jax.custom_jvp
    def f(*v: Any) -> tuple:
        return primal(v)

    @f.defjvp
    def rule(p: tuple, t: tuple) -> tuple:
        if reverse_error and any(type(x).__name__ == "JaxprTracer" for x in t):
            raise _unbounded_error()
        return jax.jvp(lambda *v: derivative(v), p, t)

    return f(*vals)


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
        # Known only when the compiled step runs: it bounds the loop's values; reverse mode
        # through the loop then needs a static bound (see _while_impl).
        t = _as_tensor(maximum_iterations)
        if t._value.ndim != 0:
            raise ValueError(f"maximum_iterations must be a scalar, saw shape: {tuple(t._value.shape)}")
        return t
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
    tensors = [x if _is_ta(x) else _as_tensor(x) for x in flat]
    if isinstance(max_iter, Tensor) or _lowering([t._value for t in tensors if not _is_ta(t)]):
        return _lowered_while(cond, body, tensors, tree, max_iter, loop_vars)
    # Eagerly: the Python loop TF runs, op by op (the tapes record every iteration).
    lv = _unflatten(tree, [x if isinstance(x, Tensor) or _is_ta(x) else t for x, t in zip(flat, tensors)])
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
        if max_iter is not None and new_tree != tree:
            # With maximum_iterations TF's eager loop also compares sequence types (list vs tuple).
            raise TypeError(
                "The two structures don't have the same nested structure: the output of body of "
                f"tf.while_loop is {new_tree}, loop_vars are {tree} (with maximum_iterations, TF compares "
                "list and tuple types too): return the same sequence types as loop_vars."
            )
        lv, flat, tree = new, new_flat, new_tree
        n += 1
    return lv


def _probe_element_shapes(body: Callable, leaves: list, tree: Any) -> None:
    """TensorArray loop variables of unknown element shape learn it from a trace of the body
    (its first write at a traced index fixes it, as TF infers it)."""
    unknown = [k for k, x in enumerate(leaves) if _is_ta(x) and x._element_shape is None]
    if not unknown:
        return
    probes: dict = {}

    def make_args(arrays: list) -> tuple:
        it = iter(arrays)
        out = []
        for k, x in enumerate(leaves):
            if k in probes or (_is_ta(x) and x._element_shape is None):
                c = x._clone()
                c._items = list(x._items) if x._items is not None else None
                probes[k] = c
                out.append(c)
            elif _is_ta(x):
                out.append(_tensor_array.from_array(x, Tensor(next(it))))
            else:
                out.append(Tensor(next(it)))
        return (_unflatten(tree, out),)

    known = [x for x in leaves if not (_is_ta(x) and x._element_shape is None)]
    avals = [_aval(_tensor_array.to_array(x)._value if _is_ta(x) else x._value) for x in known]

    def run(lv: Any) -> Any:
        body(*lv)  # only its writes matter here
        return ()

    _functionalize(run, make_args, avals, [], "body")
    for k in unknown:
        es = probes[k]._element_shape
        if es is None:
            raise ValueError(
                "A tf.TensorArray loop variable is never written in the loop body and has no element_shape: "
                "pass element_shape= when creating it."
            )
        leaves[k]._element_shape = es


def _lowered_while(cond: Callable, body: Callable, leaves: list, tree: Any, max_iter: Any, like: Any) -> Any:
    _probe_element_shapes(body, leaves, tree)
    tensors = [_tensor_array.to_array(x) if _is_ta(x) else x for x in leaves]
    avals = [jax.ShapeDtypeStruct(t._value.shape, t._value.dtype) for t in tensors]
    dtypes = tuple(np.dtype(a.dtype) for a in avals)

    def call(f: Callable, lv: Any) -> Any:
        return f(*lv)

    def rebuild(values: list) -> list:
        return [_tensor_array.from_array(x, v) if _is_ta(x) else v for x, v in zip(leaves, values)]

    def make_args(arrays: list) -> tuple:
        return (_unflatten(tree, rebuild([Tensor(a) for a in arrays])),)

    carried: list = []
    rounds = 0
    while True:  # at most 8 rounds (`while True`: a checker then knows fb and fc are bound after it)
        fb = _functionalize(lambda lv: call(body, lv), make_args, avals, carried, "body")
        fc = _functionalize(lambda lv: call(cond, lv), make_args, avals, carried, "cond")
        new = [v for v in fb.written + fc.written if not any(v is c for c in carried)]
        for v in new:
            if not any(v is c for c in carried):
                carried.append(v)
        rounds += 1
        if not new or rounds == 8:
            break
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
    if tuple(fc.out_avals[0].shape) != ():
        raise errors.InvalidArgumentError(
            f"The predicate of tf.while_loop must be a scalar, but it has shape {_shape_str(fc.out_avals[0].shape)}: "
            "reduce it (tf.reduce_all / tf.reduce_any) first."
        )
    ext = _Externals()
    cmap_b = ext.add_fn(fb)
    cmap_c = ext.add_fn(fc)
    n_loop = len(tensors)
    carry_dtypes = dtypes + tuple(np.dtype(jnp.result_type(_outer_value(v, state.bound))) for v in carried)
    # The cond jaxpr returns (pred, carried...): only its first output is used.
    var_reads = [read_variable(v) for v in carried]
    dyn = isinstance(max_iter, Tensor)
    outs = bind(WHILE, *tensors, *var_reads, *ext.inputs(), *([max_iter] if dyn else []), cond_br=(fc.jaxpr, cmap_c),
                body_br=(fb.jaxpr, cmap_b), n_carry=n_loop + len(carried), carry_dtypes=carry_dtypes,
                max_iter=None if dyn else max_iter, **({"dyn_max": True} if dyn else {}))
    _write_back(carried, outs[n_loop:])
    return _unflatten(tree, rebuild(list(outs[:n_loop])), like)


# --------------------------------------------------------------------------
# scan, foldl, foldr, map_fn: one lowered primitive (lax.scan) with a carry and stacked outputs.


def _scan_impl(*vals: Any, body_br: tuple, n_carry: int, n_xs: int, n_ys: int, n_vars: int, carry_dtypes: tuple,
               length: int, reverse: bool) -> tuple:
    nc = n_carry
    carry0 = tuple(_strong(v, d) for v, d in zip(vals[:nc] + vals[nc + n_xs:nc + n_xs + n_vars], carry_dtypes))
    xs = tuple(vals[nc:nc + n_xs])
    ext = vals[nc + n_xs + n_vars:]

    def step(carry: tuple, x: tuple) -> tuple:
        outs = _eval(body_br[0], body_br[1], ext, (*carry[:nc], *x, *carry[nc:]))
        new = tuple(_strong(o, d) for o, d in zip(outs[:nc] + outs[nc + n_ys:], carry_dtypes))
        return new, tuple(outs[nc:nc + n_ys])

    final, ys = lax.scan(  # type: ignore[var-annotated]  # (a tuple of arrays)
        step, carry0, xs, length=length, reverse=reverse)
    return (*final[:nc], *ys, *final[nc:])


SCAN = _ControlFlowPrimitive("scan", _scan_impl, multiple_results=True)


def _lowered_scan(step: Callable, carry: list, carry_tree: Any, xs: list, xs_tree: Any, length: int,
                  reverse: bool, api: str) -> tuple[list, list, Any]:
    """Lower ``step(carry_struct, x_struct) -> (carry_struct, ys_struct)`` over the leading axis of
    ``xs``; returns (final carry tensors, stacked ys tensors, ys treedef)."""
    c_avals = [jax.ShapeDtypeStruct(t._value.shape, t._value.dtype) for t in carry]
    x_avals = [jax.ShapeDtypeStruct(t._value.shape[1:], t._value.dtype) for t in xs]
    nc = len(carry)

    def make_args(arrays: list) -> tuple:
        return (_unflatten(carry_tree, [Tensor(a) for a in arrays[:nc]]),
                _unflatten(xs_tree, [Tensor(a) for a in arrays[nc:]]))

    info: dict = {}

    def user(c: Any, x: Any) -> Any:
        new_c, ys = step(c, x)
        nf, ntree = _flatten(new_c)
        if not _same_structure(carry_tree, ntree):
            _check_structure(api, carry_tree, ntree, "output of fn")
        yf, ytree = _flatten(ys)
        info["ys_tree"] = ytree
        info["n_ys"] = len(yf)
        info["ys_obj"] = ys
        return tuple(nf) + tuple(yf)

    carried: list = []
    rounds = 0
    while True:  # at most 8 rounds (`while True`: a checker then knows fb is bound after it)
        fb = _functionalize(user, make_args, c_avals + x_avals, carried, "fn")
        carried.extend(v for v in fb.written if not any(v is c for c in carried))
        rounds += 1
        if not fb.written or rounds == 8:
            break
    for a, o in zip(c_avals, fb.out_avals[:nc]):
        if np.dtype(a.dtype) != np.dtype(o.dtype) or tuple(a.shape) != tuple(o.shape):
            raise ValueError(
                f"The accumulator of {api} changes from {np.dtype(a.dtype).name}{_shape_str(a.shape)} to "
                f"{np.dtype(o.dtype).name}{_shape_str(o.shape)} in one step: fn must return an accumulator of the "
                "initializer's dtype and shape."
            )
    ext = _Externals()
    cmap = ext.add_fn(fb)
    n_ys = info["n_ys"]
    outer = state.bound
    carry_dtypes = tuple(np.dtype(a.dtype) for a in c_avals) + tuple(
        np.dtype(jnp.result_type(_outer_value(v, outer))) for v in carried)
    var_reads = [read_variable(v) for v in carried]
    outs = bind(SCAN, *carry, *xs, *var_reads, *ext.inputs(), body_br=(fb.jaxpr, cmap), n_carry=nc, n_xs=len(xs),
                n_ys=n_ys, n_vars=len(carried), carry_dtypes=carry_dtypes, length=length, reverse=reverse)
    _write_back(carried, outs[nc + n_ys:])
    return list(outs[:nc]), list(outs[nc:nc + n_ys]), (info["ys_tree"], info["ys_obj"])


def _elems(elems: Any, api: str) -> tuple[list, Any, int]:
    flat, tree = _flatten(elems)
    if not flat:
        raise ValueError(f"{api}: elems must be a tensor or a nested structure of tensors, got {elems!r}.")
    tensors = [_as_tensor(x) for x in flat]
    for t in tensors:
        if t._value.ndim == 0:
            raise ValueError(
                f"Elements in elems must be 1+ dimensional Tensors, not scalars: {api} iterates over the first axis."
            )
    n = tensors[0]._value.shape[0]
    for t in tensors[1:]:
        if t._value.shape[0] != n:
            raise ValueError(
                f"Tensors in elems must have the same first dimension (size of the iteration), got "
                f"{[int(u._value.shape[0]) for u in tensors]}."
            )
    return tensors, tree, int(n)


def _stack_all(rows: list, n_leaves: int) -> list:
    return [stack([r[k] for r in rows]) for k in range(n_leaves)]


def _rows(tensors: list) -> list:
    cols = [unstack(t) for t in tensors]
    return [[c[i] for c in cols] for i in range(len(cols[0]))] if cols and cols[0] else []


def _scan_common(fn: Callable, elems: Any, initializer: Any, reverse: bool, api: str, stack_outputs: bool) -> Any:
    tensors, xs_tree, n = _elems(elems, api)
    if initializer is None:
        if n == 0:
            msg = "Tried to read from index 0 but array size is: 0"
            if _lowering([t._value for t in tensors]):
                raise errors.InvalidArgumentError(f"{api}: {msg} (elems is empty and there is no initializer).")
            raise errors.OutOfRangeError(msg)
        rows = _rows(tensors)
        first = rows[-1] if reverse else rows[0]
        acc0 = _unflatten(xs_tree, first)
        rest = [_slice_rows(t, reverse) for t in tensors]
        carry_flat, carry_tree = list(first), xs_tree
        xs, length = rest, n - 1
    else:
        acc0 = initializer
        cf, carry_tree = _flatten(initializer)
        carry_flat = [_as_tensor(c) for c in cf]
        xs, length = tensors, n

    def step(c: Any, x: Any) -> tuple:
        a = fn(c, x)
        return a, (a if stack_outputs else ())

    if _lowering([t._value for t in tensors + carry_flat]):
        final, ys, (ytree, _) = _lowered_scan(step, carry_flat, carry_tree, xs, xs_tree, length, reverse, api)
    else:
        # Eagerly: TF's Python loop, op by op, over the rows of elems.
        acc = _unflatten(carry_tree, carry_flat) if initializer is None else acc0
        order = range(length - 1, -1, -1) if reverse else range(length)
        rows = _rows(xs) if length else []
        outs = []
        for i in order:
            acc = fn(acc, _unflatten(xs_tree, rows[i]))
            af, atree = _flatten(acc)
            if not _same_structure(carry_tree, atree):
                _check_structure(api, carry_tree, atree, "output of fn")
            outs.append([_as_tensor(a) for a in af])
        final = [_as_tensor(a) for a in _flatten(acc)[0]]
        if reverse:
            outs.reverse()
        ytree = carry_tree
        if stack_outputs:
            if not outs:
                ys = [Tensor(jnp.zeros((0,) + tuple(t._value.shape), t._value.dtype)) for t in carry_flat]
            else:
                ys = _stack_all(outs, len(outs[0]))
        else:
            ys = []
    like = acc0 if initializer is not None else elems
    if not stack_outputs:
        return _unflatten(carry_tree, final, like)
    if initializer is None:
        # TF's output starts with the first element itself (the end, in reverse).
        firsts = [expand_dims(f, 0) for f in carry_flat]
        ys = [concat([y, f], 0) if reverse else concat([f, y], 0) for f, y in zip(firsts, ys)]
    return _unflatten(ytree, ys, like)


def _slice_rows(t: Tensor, reverse: bool) -> Tensor:
    return t[:-1] if reverse else t[1:]


def scan(fn: Callable, elems: Any, initializer: Any = None, parallel_iterations: int = 10, back_prop: bool = True,
         swap_memory: bool = False, infer_shape: bool = True, reverse: bool = False, name: str | None = None) -> Any:
    """Stacked accumulators ``a_i = fn(a_{i-1}, elems[i])`` (TF's ``tf.scan``).

    ``elems`` and the accumulator may be nested structures; with no
    ``initializer`` the first element starts the scan (and is the first output).
    ``reverse=True`` scans from the end. Lowered to ``lax.scan`` inside
    ``tapejax.function``; eagerly a Python loop.

    Example:
        >>> import tapejax as tf
        >>> tf.scan(lambda a, x: a + x, tf.constant([1, 2, 3, 4])).numpy().tolist()
        [1, 3, 6, 10]
    """
    return _scan_common(fn, elems, initializer, reverse, "tf.scan", True)


def foldl(fn: Callable, elems: Any, initializer: Any = None, parallel_iterations: int = 10, back_prop: bool = True,
          swap_memory: bool = False, name: str | None = None) -> Any:
    """The final accumulator of ``a = fn(a, x)`` over ``elems`` from the first element (TF's ``tf.foldl``).

    Example:
        >>> import tapejax as tf
        >>> int(tf.foldl(lambda a, x: a * 10 + x, tf.constant([1, 2, 3])))
        123
    """
    return _scan_common(fn, elems, initializer, False, "tf.foldl", False)


def foldr(fn: Callable, elems: Any, initializer: Any = None, parallel_iterations: int = 10, back_prop: bool = True,
          swap_memory: bool = False, name: str | None = None) -> Any:
    """The final accumulator of ``a = fn(a, x)`` over ``elems`` from the last element (TF's ``tf.foldr``).

    Example:
        >>> import tapejax as tf
        >>> int(tf.foldr(lambda a, x: a * 10 + x, tf.constant([1, 2, 3])))
        321
    """
    return _scan_common(fn, elems, initializer, True, "tf.foldr", False)


def _output_dtypes(sig: Any) -> Any:
    """fn_output_signature / dtype: a structure of dtypes (or TensorSpecs) -> a structure of np dtypes."""
    def one(s: Any) -> Any:
        d = getattr(s, "dtype", s)
        return np.dtype(as_dtype(d)._np)

    return jax.tree_util.tree_map(one, sig, is_leaf=lambda s: not isinstance(s, list | tuple | dict))


def map_fn(fn: Callable, elems: Any, dtype: Any = None, parallel_iterations: int | None = None,
           back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True, name: str | None = None,
           fn_output_signature: Any = None) -> Any:
    """``fn`` applied to each element along the first axis of ``elems``, results stacked (TF's ``tf.map_fn``).

    ``elems`` may be a nested structure (``fn`` gets the same structure of
    slices); ``fn_output_signature`` (or the deprecated ``dtype``) gives the
    output structure and dtypes when they differ from ``elems``'. Eagerly a
    Python loop; inside ``tapejax.function`` a ``lax.scan``.

    Example:
        >>> import tapejax as tf
        >>> tf.map_fn(lambda x: x * x, tf.constant([1.0, 2.0, 3.0])).numpy().tolist()
        [1.0, 4.0, 9.0]
        >>> tf.map_fn(lambda p: p[0] + p[1], (tf.constant([1, 2]), tf.constant([10, 20])),
        ...           fn_output_signature=tf.int32).numpy().tolist()
        [11, 22]
    """
    sig = fn_output_signature if fn_output_signature is not None else dtype
    tensors, xs_tree, n = _elems(elems, "tf.map_fn")
    if sig is not None:
        expected = _output_dtypes(sig)
        exp_tree = _flatten(expected)[1] if not isinstance(expected, np.dtype) else None
        exp_dtypes = jax.tree_util.tree_leaves(expected)
    else:
        # TF: without a signature, fn must return elems' structure and dtypes.
        exp_tree = xs_tree
        exp_dtypes = [np.dtype(t._value.dtype) for t in tensors]

    def apply(x: Any) -> Any:
        y = fn(x)
        yf, ytree = _flatten(y)
        if len(exp_dtypes) != len(yf) or (exp_tree is not None and not _same_structure(exp_tree, ytree)):
            raise ValueError(
                "The two structures don't have the same nested structure: fn of tf.map_fn returned "
                f"{ytree}, expected {exp_tree if exp_tree is not None else 'one tensor'} (pass fn_output_signature "
                "when fn's output differs from elems)."
            )
        return _unflatten(ytree, [_as_tensor_dtype(v, d) for v, d in zip(yf, exp_dtypes)], y)

    if _lowering([t._value for t in tensors]):
        _, ys, (ytree, like) = _lowered_scan(lambda c, x: ((), apply(x)), [], _flatten(())[1], tensors, xs_tree, n,
                                             False, "tf.map_fn")
        return _unflatten(ytree, ys, like)
    if n == 0:
        # TF's eager map_fn stacks an empty TensorArray whose element shape it never learned.
        zeros = [Tensor(jnp.zeros((0,), d)) for d in exp_dtypes]
        if exp_tree is None:
            return zeros[0]
        return _unflatten(exp_tree, zeros, sig if sig is not None else elems)
    outs = []
    ytree = None
    y_obj = None
    for r in _rows(tensors):
        y_obj = apply(_unflatten(xs_tree, r, elems))
        yf, ytree = _flatten(y_obj)
        outs.append([_as_tensor(y) for y in yf])
    return _unflatten(ytree, _stack_all(outs, len(outs[0])), y_obj)


def _as_tensor_dtype(v: Any, d: np.dtype) -> Tensor:
    if isinstance(v, Tensor | VariableBase):
        t = _as_tensor(v)
        if np.dtype(t._value.dtype) != d:
            raise errors.InvalidArgumentError(
                f"TensorArray dtype is {d.name} but Op is trying to write dtype {np.dtype(t._value.dtype).name}: "
                "fn of tf.map_fn must return the dtypes of fn_output_signature (elems' dtypes without one)."
            )
        return t
    return convert_to_tensor(v, dtype=d.name)


# --------------------------------------------------------------------------
# vectorized_map: jax.vmap of the functionalized fn.


def _vmap_impl(*vals: Any, body_br: tuple, n_xs: int) -> tuple:
    xs = vals[:n_xs]
    ext = vals[n_xs:]
    return tuple(jax.vmap(lambda *x: tuple(_eval(body_br[0], body_br[1], ext, x)))(*xs))


VMAP = _ControlFlowPrimitive("vectorized_map", _vmap_impl, multiple_results=True)


def vectorized_map(fn: Callable, elems: Any, fallback_to_while_loop: bool = True, warn: bool = True) -> Any:
    """``fn`` over the first axis of ``elems``, vectorized (TF's ``tf.vectorized_map``, here ``jax.vmap``).

    The result equals ``tf.map_fn(fn, elems)``; ``fn`` runs once, traced, and
    the batch is computed in one vectorized program, eagerly too. Gradients flow
    to ``elems``, to tensors ``fn`` captures and to variables it reads; ``fn``
    must not assign variables.

    Example:
        >>> import tapejax as tf
        >>> tf.vectorized_map(lambda x: tf.reduce_sum(x * x), tf.constant([[1.0, 2.0], [3.0, 4.0]])).numpy().tolist()
        [5.0, 25.0]
    """
    tensors, xs_tree, _ = _elems(elems, "tf.vectorized_map")
    x_avals = [jax.ShapeDtypeStruct(t._value.shape[1:], t._value.dtype) for t in tensors]
    fb = _functionalize(fn, lambda arrays: (_unflatten(xs_tree, [Tensor(a) for a in arrays]),), x_avals, [],
                        "fn")
    if fb.written:
        raise ValueError("fn of tf.vectorized_map must not assign variables: use tf.map_fn for a stateful fn.")
    ext = _Externals()
    cmap = ext.add_fn(fb)
    outs = bind(VMAP, *tensors, *ext.inputs(), body_br=(fb.jaxpr, cmap), n_xs=len(tensors))
    return _unflatten(fb.out_tree, outs, fb.like)
