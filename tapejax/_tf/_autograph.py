"""AutoGraph: rewrite a Python function's control flow so that it works on tensors.

``tapejax.function`` (with ``autograph=True``, TF's default) traces a converted
copy of the user's function. The converter works on Python's ``ast``, in the
passes TF's autograph uses:

1. ``return`` inside ``if``/``while``/``for`` becomes ``do_return``/``retval``
   assignments, and the statements after a statement that may return are
   guarded by ``if not do_return``.
2. ``break``/``continue`` become flags (``break_``/``continue_``); statements
   after them are guarded, and ``break`` joins the loop's condition.
3. ``if``/``while``/``for`` become calls of ``if_stmt``/``while_stmt``/``for_stmt``
   below, with the branch/body as nested functions that write the enclosing
   function's locals (``nonlocal``) and a ``get_state``/``set_state`` pair over
   the names the statement modifies.
4. ``and``/``or``/``not`` and ``a if c else b`` become lazy calls; every call
   ``f(...)`` becomes ``converted_call(f, ...)``, which converts user functions
   recursively (not tapejax, jax, numpy or the standard library).

At run time each statement looks at its condition: a Python value runs plain
Python (a Python ``if`` stays a Python ``if``: only the taken branch is traced);
a tensor inside a traced function becomes ``tf.cond``/``tf.while_loop`` (so
tapes differentiate through them). TF's rules: a variable set in only one
branch must not be used after the ``if``; both branches must give it the same
dtype; loop variables keep their dtype and shape; a ``return`` inside a
tensor loop is ``NotImplementedError``.

Example:
    >>> import tapejax as tf
    >>> @tf.function
    ... def collatz_steps(n):
    ...     steps = 0
    ...     while n > 1:
    ...         if n % 2 == 0:
    ...             n = n // 2
    ...         else:
    ...             n = 3 * n + 1
    ...         steps += 1
    ...     return steps
    >>> int(collatz_steps(tf.constant(6)))
    8
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import itertools
import os
import sys
import textwrap
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .._core import _recorder as _core
from .._core._recorder import Tensor, VariableBase
from .._log import get_logger
from .._ops._tensor import convert_to_tensor
from . import _control_flow as _cf

__all__ = ["to_code", "to_graph", "do_not_convert", "convert_for_trace", "AutoGraphWarning", "Undefined"]

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))


# FunctionDef's type_params field exists from Python 3.12 on.
_TYPE_PARAMS: dict[str, Any] = {"type_params": []} if sys.version_info >= (3, 12) else {}


class AutoGraphWarning(UserWarning):
    """AutoGraph could not convert a function and ran it another way (TF logs the same case)."""


class ConversionError(Exception):
    """Raised (internally) where autograph cannot express a construct; the caller falls back."""


# ============================================================================================
# Run-time operators (the generated code calls these through the name ``ag__``).
# ============================================================================================


class Undefined:
    """The value of a local variable that has not been assigned yet."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<undefined {self.name}>"

    def __getattr__(self, attr: str) -> Any:
        raise UnboundLocalError(f"local variable '{self.name}' referenced before assignment")


class UndefinedReturnValue(Undefined):
    """The return value of a function that has not returned yet."""


def _undefined(v: Any) -> bool:
    return isinstance(v, Undefined)


def _is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase)


def _tracing() -> bool:
    return bool(_core.state.tracing)


def _staged(x: Any) -> bool:
    """Whether a condition is a tensor that must become tf.cond / tf.while_loop."""
    return _is_tensor(x) and _tracing()


def not_(x: Any) -> Any:
    if _is_tensor(x):
        return _logical("logical_not", x)
    return not x


def _logical(name: str, *xs: Any) -> Any:
    from .._ops._machinery import EXPORTS

    return EXPORTS[name](*[convert_to_tensor(x) if not _is_tensor(x) else x for x in xs])


def and_(*thunks: Callable) -> Any:
    v = thunks[0]()
    for t in thunks[1:]:
        if _staged(v):
            prev = v
            v = _cf.cond(prev, t, lambda prev=prev: prev)
        elif _is_tensor(v):
            if not bool(v):
                return v
            v = t()
        else:
            if not v:
                return v
            v = t()
    return v


def or_(*thunks: Callable) -> Any:
    v = thunks[0]()
    for t in thunks[1:]:
        if _staged(v):
            prev = v
            v = _cf.cond(prev, lambda prev=prev: prev, t)
        elif _is_tensor(v):
            if bool(v):
                return v
            v = t()
        else:
            if v:
                return v
            v = t()
    return v


def if_exp(cond: Any, if_true: Callable, if_false: Callable) -> Any:
    if _staged(cond):
        return _cf.cond(cond, if_true, if_false)
    return if_true() if cond else if_false()


def _loop_leaf(x: Any) -> bool:
    return _is_tensor(x) or isinstance(x, _cf.TensorArray)


def _as_loop_value(name: str, v: Any) -> Any:
    # TF's loop variables are nests (tuples, lists, dicts) of tensors and TensorArrays; Python
    # numbers in them become tensors, anything else cannot be carried by a tf.while_loop.
    def one(x: Any) -> Any:
        if _loop_leaf(x):
            return x
        if isinstance(x, bool | int | float | np.ndarray | np.generic):
            return convert_to_tensor(x)
        raise ValueError(
            f"'{name}' is used in a loop over tensors (a tf.while_loop), so it must be a tensor (or a nest of "
            f"tensors and TensorArrays), but it holds a {type(x).__name__}: {x!r:.60}. Make it a tensor before the "
            "loop, or keep it out of the loop."
        )

    if _loop_leaf(v):
        return v
    return jax.tree_util.tree_map(one, v, is_leaf=_loop_leaf)


def _leaf_dtypes(v: Any) -> tuple:
    # A TensorArray's dtype is checked when it is written; only tensors' dtypes are compared here.
    return tuple(x.dtype for x in jax.tree_util.tree_leaves(v, is_leaf=_loop_leaf) if _is_tensor(x))


def _check_loop_value(name: str, old: Any, v: Any) -> None:
    """TF's rules for a loop variable after one iteration: the same nest, dtypes and shapes."""
    old_tree: Any
    old_leaves, old_tree = jax.tree_util.tree_flatten(old, is_leaf=_loop_leaf)
    new_leaves, new_tree = jax.tree_util.tree_flatten(v, is_leaf=_loop_leaf)
    if old_tree != new_tree:
        raise TypeError(
            f"'{name}' does not have the same nested structure after one iteration: {old_tree} before the loop, "
            f"{new_tree} after. A loop variable must keep its nested structure."
        )
    for o, n in zip(old_leaves, new_leaves):
        if isinstance(o, _cf.TensorArray) or isinstance(n, _cf.TensorArray):
            if not (isinstance(o, _cf.TensorArray) and isinstance(n, _cf.TensorArray)):
                raise ValueError(f"'{name}' changes between a TensorArray and a tensor in the loop.")
            continue
        if n.dtype != o.dtype:
            raise TypeError(
                f"'{name}' has dtype {o.dtype.name} before the loop, but dtype {n.dtype.name} after one iteration"
            )
        if tuple(n.shape) != tuple(o.shape):
            raise ValueError(
                f"'{name}' has shape {tuple(o.shape)} before the loop, but shape {tuple(n.shape)} after one "
                "iteration. Use tf.autograph.experimental.set_loop_options to set shape invariants."
            )


def _dtype_name(v: Any) -> str:
    return convert_to_tensor(v).dtype.name if not _is_tensor(v) else v.dtype.name


def if_stmt(cond: Any, body: Callable, orelse: Callable, get_state: Callable, set_state: Callable,
            names: tuple, live_out: tuple) -> None:
    """``if cond: body() else: orelse()``; a tensor ``cond`` in a trace becomes ``tf.cond``.

    The outputs of the ``tf.cond`` are the ``names`` defined before the statement and, of
    those first defined inside it, the ones used after it (and a pending return value):
    those must be defined by both branches, with one dtype (TF's rules).
    """
    if not _staged(cond):
        if _is_tensor(cond):
            cond = bool(cond)
        if cond:
            body()
        else:
            orelse()
        return
    init = get_state()
    fixed = [k for k, v in enumerate(init) if not _undefined(v)]
    maybe = [k for k, v in enumerate(init)
             if _undefined(v) and (names[k] in live_out or isinstance(v, UndefinedReturnValue))]
    runs: dict[str, tuple] = {}

    def branch(fn: Callable, which: str) -> Callable:
        def run() -> tuple:
            set_state(init)
            fn()
            state = get_state()
            defined = [k for k in maybe if not _undefined(state[k])]
            dtypes = {}
            out = []
            for k in fixed + defined:
                v = state[k]
                if _undefined(v):
                    raise ValueError(f"'{names[k]}' must also be initialized in the {which} branch")
                v = _as_loop_value(names[k], v) if not _is_tensor(v) else v
                dtypes[k] = _leaf_dtypes(v)
                out.append(v)
            if runs:
                (other, (o_defined, o_dtypes)), = runs.items()
                for k in maybe:
                    if (k in defined) != (k in o_defined):
                        missing = which if k not in defined else other
                        if isinstance(init[k], UndefinedReturnValue):
                            raise ValueError(f"the {missing} branch must also have a return statement.")
                        raise ValueError(f"'{names[k]}' must also be initialized in the {missing} branch")
                for k, d in dtypes.items():
                    if len(o_dtypes[k]) != len(d):
                        continue  # a structure mismatch: tf.cond raises TF's TypeError for it
                    for mine, theirs in zip(d, o_dtypes[k]):
                        if mine != theirs:
                            main, els = (mine, theirs) if which == "main" else (theirs, mine)
                            raise TypeError(f"'{names[k]}' has dtype {main.name} in the main branch, but "
                                            f"dtype {els.name} in the else branch")
            runs[which] = (defined, dtypes)
            return tuple(out)

        return run

    out = _cf.cond(cond, branch(body, "main"), branch(orelse, "else"))
    final = list(init)
    for k, v in zip(fixed + runs["main"][0], out):
        final[k] = v
    set_state(tuple(final))


def set_loop_options(parallel_iterations: Any = None, swap_memory: Any = None, maximum_iterations: Any = None,
                     shape_invariants: Any = None) -> None:
    """TF's ``tf.autograph.experimental.set_loop_options``: the first statement of a loop body.

    Autograph hoists it into the loop: ``maximum_iterations`` bounds a tensor loop (and lets
    a tape differentiate through it inside a ``tf.function``). ``shape_invariants`` cannot
    relax shapes under XLA (a loop variable keeps its shape); the others are accepted.
    Called anywhere else it does nothing, as in TF.

    Example:
        >>> import tapejax as tf
        >>> @tf.function
        ... def f(x):
        ...     with tf.GradientTape() as t:
        ...         t.watch(x)
        ...         y = x
        ...         while tf.reduce_sum(y) < 10.0:
        ...             tf.autograph.experimental.set_loop_options(maximum_iterations=20)
        ...             y = y * x
        ...     return y, t.gradient(y, x)
        >>> [float(v) for v in f(tf.constant(2.0))]
        [16.0, 32.0]
    """


def loop_options(**kw: Any) -> dict:
    return kw


def while_stmt(test: Callable, body: Callable, get_state: Callable, set_state: Callable, names: tuple,
               live_out: tuple, has_return: bool = False, opts: dict | None = None) -> None:
    """``while test(): body()``; a tensor condition in a trace becomes ``tf.while_loop``."""
    c = test()
    while not _staged(c):
        if _is_tensor(c):
            c = bool(c)
        if not c:
            return
        body()
        c = test()
    _tensor_loop(lambda: test(), lambda: body(), get_state, set_state, names, live_out, has_return,
                 (opts or {}).get("maximum_iterations"))


def _tensor_loop(test: Callable, body: Callable, get_state: Callable, set_state: Callable, names: tuple,
                 live_out: tuple, has_return: bool, max_iter: Any, extra: tuple = ()) -> tuple:
    if has_return:
        raise NotImplementedError(
            "a return statement cannot be placed inside this TensorFlow loop; this may happen if a return "
            "statement depends on a static Python condition such as a hyperparameter"
        )
    init = get_state()
    carried: list[int] = []
    for k, (n, v) in enumerate(zip(names, init)):
        if _undefined(v):
            if n in live_out:
                raise ValueError(
                    f"'{n}' must be defined before the loop: it is assigned inside a loop over tensors "
                    "(a tf.while_loop) and used after it."
                )
            continue
        carried.append(k)
    init_vals = tuple(_as_loop_value(names[k], init[k]) for k in carried)

    def load(vals: tuple) -> None:
        full = list(init)
        for k, v in zip(carried, vals[len(extra):]):
            full[k] = v
        set_state(tuple(full))

    def cond_fn(*vals: Any) -> Any:
        load(vals)
        return test(*vals[:len(extra)])

    def body_fn(*vals: Any) -> tuple:
        load(vals)
        new_extra = body(*vals[:len(extra)])
        state = get_state()
        out = []
        for k, old in zip(carried, init_vals):
            v = state[k]
            if _undefined(v):
                raise ValueError(f"'{names[k]}' became undefined inside the loop.")
            v = _as_loop_value(names[k], v)
            _check_loop_value(names[k], old, v)
            out.append(v)
        return tuple(new_extra or ()) + tuple(out)

    out = _cf.while_loop(cond_fn, body_fn, tuple(extra) + init_vals, maximum_iterations=max_iter)
    load(tuple(out))
    return tuple(out[:len(extra)])


class _TensorRange:
    """``tf.range(...)``/``range(...)`` with a tensor bound, iterated by a tensor loop."""

    def __init__(self, start: Any, limit: Any, delta: Any, dtype: Any):
        self.start, self.limit, self.delta, self.dtype = start, limit, delta, dtype

    def materialize(self) -> Any:
        from .._ops._machinery import EXPORTS

        return EXPORTS["range"](self.start, self.limit, self.delta, dtype=self.dtype)


def cast_builtin(func: Callable, x: Any) -> Any:
    """``int(x)`` / ``float(x)`` in converted code: of a tensor inside a trace, TF's autograph
    gives ``tf.cast(x, tf.int32)`` / ``tf.cast(x, tf.float32)`` (its value is not known yet);
    anything else (or another function named ``int``) is the plain call."""
    if (func is builtins.int or func is builtins.float) and _tracing() and _is_tensor(x):
        from .._ops._machinery import EXPORTS

        return EXPORTS["cast"](x, "int32" if func is builtins.int else "float32")
    return func(x)


def range_(func: Callable, *args: Any, **kwargs: Any) -> Any:
    """``for i in tf.range(n)`` / ``range(n)`` with a tensor ``n`` inside a trace: a tensor loop."""
    from .._ops._machinery import EXPORTS

    is_tf = func is EXPORTS.get("range")
    if (is_tf or func is builtins.range) and _tracing() and any(_is_tensor(a) for a in args):
        dtype = kwargs.get("dtype")
        if len(args) == 1:
            start, limit, delta = 0, args[0], 1
        elif len(args) == 2:
            (start, limit), delta = args, 1
        else:
            start, limit, delta = args[:3]
        return _TensorRange(start, limit, delta, dtype)
    return func(*args, **kwargs)


def for_stmt(iterable: Any, extra_test: Callable | None, body: Callable, get_state: Callable,
             set_state: Callable, names: tuple, live_out: tuple, has_return: bool = False,
             opts: dict | None = None) -> None:
    """``for x in iterable: body(x)``: over a tensor (its first axis) or a tensor range in a trace,
    a ``tf.while_loop``; over anything else (a list, a Python range, a tf.data dataset), Python."""
    bound = (opts or {}).get("maximum_iterations")
    if isinstance(iterable, _TensorRange) or (_staged(iterable) and not isinstance(iterable, VariableBase)):
        _tensor_for(iterable, extra_test, body, get_state, set_state, names, live_out, has_return, bound)
        return
    if isinstance(iterable, VariableBase) and _tracing():
        _tensor_for(_core.read_variable(iterable), extra_test, body, get_state, set_state, names, live_out, has_return,
                    bound)
        return
    for x in iterable:
        if extra_test is not None:
            t = extra_test()
            if _staged(t):
                # The loop is already decided by Python; a tensor break flag guards the rest.
                if_stmt(t, functools.partial(body, x), lambda: None, get_state, set_state, names, live_out)
                continue
            if not t:
                break
        body(x)


def _tensor_for(iterable: Any, extra_test: Callable | None, body: Callable, get_state: Callable,
                set_state: Callable, names: tuple, live_out: tuple, has_return: bool, bound: Any = None) -> None:
    from .._ops._machinery import EXPORTS

    if isinstance(iterable, _TensorRange):
        r = iterable
        dt = r.dtype
        start = convert_to_tensor(r.start, dtype=dt) if not _is_tensor(r.start) else r.start
        dt = dt or start.dtype
        limit = EXPORTS["cast"](r.limit, start.dtype) if _is_tensor(r.limit) else convert_to_tensor(r.limit, dtype=start.dtype)
        delta = EXPORTS["cast"](r.delta, start.dtype) if _is_tensor(r.delta) else convert_to_tensor(r.delta, dtype=start.dtype)
        max_iter = None
        if not any(isinstance(v._value, __import__("jax").core.Tracer) for v in (start, limit, delta)):
            max_iter = max(0, int(np.ceil((float(limit) - float(start)) / float(delta))))
        if bound is not None:
            max_iter = bound

        jax_ = __import__("jax")
        # A step known now (the usual `tf.range(n)`) picks the comparison in Python: the loop's
        # condition is then one compare, not a lax.cond over the step's sign on every iteration.
        d0 = r.delta._value if isinstance(r.delta, Tensor) else r.delta
        sign = None if isinstance(d0, jax_.core.Tracer | VariableBase) else float(np.asarray(d0))

        def test(i: Any) -> Any:
            if sign is not None:
                more = i < limit if sign > 0 else i > limit if sign < 0 else i != i
            else:
                more = or_(lambda: and_(lambda: delta > 0, lambda: i < limit),
                           lambda: and_(lambda: delta < 0, lambda: i > limit))
            return and_(lambda: more, extra_test) if extra_test is not None else more

        def step(i: Any) -> tuple:
            body(i)
            return (i + delta,)

        _tensor_loop(test, step, get_state, set_state, names, live_out, has_return, max_iter, (start,))
        return
    x = iterable
    if len(x.shape) == 0:
        raise TypeError("Cannot iterate over a scalar tensor.")
    n = x.shape[0]
    if n is None:
        raise ValueError("Cannot iterate over a tensor whose first dimension is unknown.")
    n_t = convert_to_tensor(int(n))

    def elem_test(i: Any) -> Any:
        more = i < n_t
        return and_(lambda: more, extra_test) if extra_test is not None else more

    def elem_step(i: Any) -> tuple:
        body(EXPORTS["gather"](x, i))
        return (i + 1,)

    _tensor_loop(elem_test, elem_step, get_state, set_state, names, live_out, has_return,
                 int(n) if bound is None else bound, (convert_to_tensor(0),))


# --- calls ----------------------------------------------------------------------------------

_DO_NOT_CONVERT = "__tapejax_do_not_convert__"


def do_not_convert(func: Callable | None = None) -> Any:
    """Mark a function that autograph must call as it is (TF's ``tf.autograph.experimental.do_not_convert``).

    Example:
        >>> import tapejax as tf
        >>> @tf.autograph.experimental.do_not_convert
        ... def plain(x):
        ...     return x + 1
        >>> int(tf.function(lambda x: plain(x))(tf.constant(1)))
        2
    """
    if func is None:
        return do_not_convert

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    setattr(wrapper, _DO_NOT_CONVERT, True)
    return wrapper


def _internal_module(fn: Any) -> bool:
    """Library code autograph leaves alone: tapejax, jax, numpy, the standard library, installed
    packages. Judged by the code's file (a doctest of a tapejax module is user code)."""
    code = getattr(fn, "__code__", None)
    if code is not None:
        f = code.co_filename
        if f.startswith("<doctest"):
            return False
        if not f.startswith("<"):
            f = os.path.abspath(f)
            return f.startswith((_PKG_DIR, _STDLIB_DIR)) or "site-packages" in f
    # Code made by exec (tapejax's generated ops among it): by its module.
    mod = getattr(fn, "__module__", None) or ""
    return mod.split(".")[0] in ("tapejax", "jax", "jaxlib", "numpy", "tensorflow", "keras", "optax", "builtins")


def _convertible(f: Any) -> bool:
    return (isinstance(f, types.FunctionType) and not getattr(f, _DO_NOT_CONVERT, False)
            and not _internal_module(f))


def converted_call(f: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``f``, converted first when it is a user function (TF converts user code recursively)."""
    if _tracing():
        if isinstance(f, types.MethodType) and _convertible(f.__func__):
            conv = _convert_cached(f.__func__)
            if conv is not None:
                return conv(f.__self__, *args, **kwargs)
        elif _convertible(f):
            conv = _convert_cached(f)
            if conv is not None:
                return conv(*args, **kwargs)
        elif not isinstance(f, type) and _convertible(getattr(type(f), "__call__", None)):  # noqa: B004  (the class's __call__ function, to convert its source)
            # A user object with its own __call__.
            conv = _convert_cached(type(f).__call__)
            if conv is not None:
                return conv(f, *args, **kwargs)
    return f(*args, **kwargs)


# ============================================================================================
# The converter.
# ============================================================================================


_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# CPython 3.11-3.12 keeps the AST converter's recursion depth in interpreter-wide state, so
# two threads inside ``ast.parse``/``compile`` at once (a thread switch happens when a
# collection there runs a finalizer) can fail with "SystemError: AST constructor recursion
# depth mismatch". Every parse and compile of this module runs under this lock.
_ast_lock = threading.RLock()
_failed: set = set()
# Code objects autograph ran unconverted (no source, lambdas): a tensor used as a Python
# bool there makes tapejax.function fall back to eager execution (with a warning).
_unconverted: weakref.WeakSet = weakref.WeakSet()


def unconverted_in(tb: Any) -> bool:
    """Whether a traceback passes through code autograph could not convert."""
    while tb is not None:
        if tb.tb_frame.f_code in _unconverted:
            return True
        tb = tb.tb_next
    return False
_counter = itertools.count()


def _convert_cached(fn: Any) -> Callable | None:
    """The converted function, or None (with one warning) where the source is not available."""
    conv = _cache.get(fn)
    if conv is not None:
        return conv
    try:
        with _ast_lock:
            conv = _cache.get(fn)
            if conv is not None:
                return conv
            conv = _convert(fn)
            _cache[fn] = conv
    except (OSError, TypeError, SyntaxError, ConversionError) as e:
        key = getattr(fn, "__code__", fn)
        if isinstance(key, types.CodeType):
            _unconverted.add(key)
        if key not in _failed:
            _failed.add(key)
            # TF logs this (it is not an error: the function still runs, unconverted).
            get_logger().warning("AutoGraph could not transform %s and will run it as-is. Cause: %s",
                            fn.__qualname__, e)
        return None
    return conv


def convert_for_trace(fn: Callable) -> Callable:
    """What ``tapejax.function`` traces: ``fn`` converted (methods and partials through to their function)."""
    if isinstance(fn, functools.partial):
        inner = convert_for_trace(fn.func)
        return functools.partial(inner, *fn.args, **fn.keywords)
    if isinstance(fn, types.MethodType):
        inner = convert_for_trace(fn.__func__)
        return types.MethodType(inner, fn.__self__)
    if not isinstance(fn, types.FunctionType) or getattr(fn, _DO_NOT_CONVERT, False) or _internal_module(fn):
        return fn
    conv = _convert_cached(fn)
    return fn if conv is None else conv


def to_code(entity: Callable, recursive: bool = True, experimental_optional_features: Any = None) -> str:
    """The Python source autograph generates for ``entity`` (TF's ``tf.autograph.to_code``).

    Example:
        >>> import tapejax as tf
        >>> def f(x):
        ...     if x > 0:
        ...         x = x * 2
        ...     return x
        >>> "if_stmt" in tf.autograph.to_code(f)
        True
    """
    fn = getattr(entity, "python_function", entity)
    if isinstance(fn, functools.partial):
        fn = fn.func
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    with _ast_lock:
        node, _ = _transform(fn)
        return ast.unparse(node)


def to_graph(entity: Callable, recursive: bool = True, experimental_optional_features: Any = None) -> Callable:
    """``entity`` converted (TF's ``tf.autograph.to_graph``): call it inside a ``tf.function``."""
    fn = getattr(entity, "python_function", entity)
    return convert_for_trace(fn)


def _lambda_tree(fn: types.FunctionType) -> ast.FunctionDef:
    """A lambda as ``def``: found (uniquely, by its parameters) in the source lines around it."""
    lines, start = inspect.getsourcelines(fn)
    src = textwrap.dedent("".join(lines))
    try:
        tree = ast.parse(src)
    except SyntaxError:
        tree = ast.parse("(\n" + src.strip().rstrip(",").rstrip("\\") + "\n)")
        start -= 1
    params = list(fn.__code__.co_varnames[:fn.__code__.co_argcount])
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and [a.arg for a in n.args.args] == params]
    if len(found) != 1:
        raise ConversionError("the lambda could not be told apart from others on its line")
    lam = found[0]
    node = ast.FunctionDef(name="_converted_lambda", args=lam.args, body=[ast.Return(lam.body)], decorator_list=[],
                           returns=None, **_TYPE_PARAMS)
    ast.copy_location(node, lam)
    ast.copy_location(node.body[0], lam.body)
    ast.increment_lineno(node, start - 1)
    return node


def _source_tree(fn: types.FunctionType) -> ast.FunctionDef:
    if fn.__name__ == "<lambda>":
        return _lambda_tree(fn)
    src = textwrap.dedent(inspect.getsource(fn))
    tree = ast.parse(src)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise ConversionError(f"{fn.__qualname__} is not a def statement")
    ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
    return node


def _transform(fn: Any) -> tuple[ast.FunctionDef, list]:
    node = _source_tree(fn)
    node.decorator_list = []
    # Defaults and annotations are evaluated where the def runs (the factory, which lacks the
    # user's scope): placeholders here; the real defaults are the original function's.
    a = node.args
    a.defaults = [ast.Constant(None) for _ in a.defaults]
    a.kw_defaults = [None if d is None else ast.Constant(None) for d in a.kw_defaults]
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if arg is not None:
            arg.annotation = None
    node.returns = None
    conv = _Converter(node)
    new = conv.run()
    return new, conv.freevars


def _convert(fn: types.FunctionType) -> Callable:
    node, _ = _transform(fn)
    # Not the function's own name: a recursive call must reach the original binding (a global
    # or a closure cell), not the factory's local.
    node.name = "__ag_converted"
    freevars = list(fn.__code__.co_freevars)
    # A factory binds the original closure names (and ag__) as enclosing locals; the
    # converted function is then rebuilt on the original closure cells, so it sees
    # later changes of the variables it closes over, as the original does.
    factory_args = ["ag__"] + [v for v in freevars if v != "ag__"]
    body: list = [ast.Assign(targets=[ast.Name(v, ast.Store())], value=ast.Constant(None)) for v in factory_args[1:]]
    body += [node, ast.Return(ast.Name(node.name, ast.Load()))]
    factory = ast.FunctionDef(
        name="__ag_factory", args=ast.arguments(posonlyargs=[], args=[ast.arg("ag__")], kwonlyargs=[],
                                                kw_defaults=[], defaults=[]),
        body=body, decorator_list=[], returns=None, **_TYPE_PARAMS)
    mod = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(mod)
    filename = fn.__code__.co_filename
    code = compile(mod, filename, "exec")
    ns: dict = {}
    exec(code, fn.__globals__, ns)  # noqa: S102  (the user's own code, rewritten)
    made = ns["__ag_factory"](sys.modules[__name__])
    new_code = made.__code__
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    ag_cell = types.CellType(sys.modules[__name__])
    closure = tuple(cells[n] if n in cells else (ag_cell if n == "ag__" else types.CellType(None))
                    for n in new_code.co_freevars)
    out: Any = types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__dict__.update(fn.__dict__)
    out.__wrapped_autograph__ = fn
    return out


# --- analysis ---------------------------------------------------------------------------------


class _Names(ast.NodeVisitor):
    """Names stored and loaded in a subtree, not descending into nested scopes."""

    def __init__(self) -> None:
        self.stored: list[str] = []
        self.loaded: list[str] = []

    def visit_Name(self, node: ast.Name) -> None:
        (self.stored if isinstance(node.ctx, ast.Store | ast.Del) else self.loaded).append(node.id)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name.startswith("ag__"):
            # Generated helpers: what they store through nonlocal is stored here.
            for st in node.body:
                if isinstance(st, ast.Nonlocal):
                    self.stored.extend(st.names)
            for st in node.body:
                if not isinstance(st, ast.Nonlocal):
                    self.visit(st)
            return
        self.stored.append(node.name)
        for d in node.decorator_list:
            self.visit(d)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]  # the same handling for both kinds

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.stored.append(node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        # A lambda reads names of the enclosing scope.
        inner = _Names()
        inner.visit(node.body)
        params = {a.arg for a in node.args.args}
        self.loaded.extend(n for n in inner.loaded if n not in params)

    def visit_ListComp(self, node: Any) -> None:
        inner = _Names()
        for g in node.generators:
            inner.visit(g.iter)
            inner.visit(g.target)
            for c in g.ifs:
                inner.visit(c)
        for attr in ("elt", "key", "value"):
            if hasattr(node, attr):
                inner.visit(getattr(node, attr))
        targets = set(inner.stored)
        self.loaded.extend(n for n in inner.loaded if n not in targets)

    visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_ListComp

    def visit_Import(self, node: Any) -> None:
        for a in node.names:
            self.stored.append((a.asname or a.name).split(".")[0])

    visit_ImportFrom = visit_Import


def _stored(nodes: list) -> list[str]:
    v = _Names()
    for n in nodes:
        v.visit(n)
    return list(dict.fromkeys(v.stored))


def _loaded(nodes: list) -> list[str]:
    v = _Names()
    for n in nodes:
        v.visit(n)
    return v.loaded


def _has(nodes: list, kinds: tuple, stop: tuple = ()) -> bool:
    for n in nodes:
        if isinstance(n, stop):
            continue
        for sub in _walk_scope(n, stop):
            if isinstance(sub, kinds):
                return True
    return False


def _walk_scope(node: ast.AST, stop: tuple = ()) -> Any:
    """ast.walk without entering nested functions/classes (or ``stop`` node types below the root)."""
    todo = [node]
    first = True
    while todo:
        n = todo.pop()
        yield n
        if not first and isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if not first and isinstance(n, stop):
            continue
        first = False
        todo.extend(ast.iter_child_nodes(n))


def _name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id_, ast.Store() if store else ast.Load())


def _ag(attr: str) -> ast.Attribute:
    return ast.Attribute(_name("ag__"), attr, ast.Load())


def _call(fn: ast.expr, args: list, keywords: list | None = None) -> ast.Call:
    return ast.Call(func=fn, args=args, keywords=keywords or [])


def _strs(names: Any) -> ast.Tuple:
    return ast.Tuple([ast.Constant(n) for n in names], ast.Load())


def _assign(name: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[_name(name, True)], value=value)


def _fdef(name: str, params: list[str], body: list) -> ast.FunctionDef:
    return ast.FunctionDef(
        name=name,
        args=ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], kwonlyargs=[], kw_defaults=[],
                           defaults=[]),
        body=body or [ast.Pass()], decorator_list=[], returns=None, **_TYPE_PARAMS)


class _Converter:
    """Converts one function definition (and the functions defined inside it)."""

    def __init__(self, node: ast.FunctionDef):
        self.node = node
        self.freevars: list = []

    def run(self) -> ast.FunctionDef:
        node = self.node
        _ReturnLowering(node).run()
        _FunctionScope(node).run()
        _ExprConverter().visit(node)
        ast.fix_missing_locations(node)
        return node


class _ReturnLowering:
    """Pass 1: ``return`` inside compound statements -> ``do_return``/``retval`` + guards."""

    def __init__(self, fn: ast.FunctionDef):
        self.fn = fn

    def run(self) -> None:
        fn = self.fn
        fn.body = _cond_return_rewrite(fn.body)
        compound = (ast.If, ast.While, ast.For, ast.With, ast.Try)
        nested = any(isinstance(s, compound) and _has([s], (ast.Return,)) for s in fn.body)
        if not nested:
            return
        body = self._block(fn.body, in_loop=False)
        init: list[ast.stmt] = [
            _assign("do_return", ast.Constant(False)),
            _assign("retval_", _call(_ag("UndefinedReturnValue"), [ast.Constant("retval_")])),
        ]
        fn.body = init + body + [ast.Return(_name("retval_"))]

    def _block(self, stmts: list, in_loop: bool) -> list:
        out: list = []
        for k, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                out += [ast.copy_location(_assign("do_return", ast.Constant(True)), s),
                        ast.copy_location(_assign("retval_", s.value or ast.Constant(None)), s)]
                if in_loop:
                    out.append(ast.copy_location(ast.Break(), s))
                return out
            may_return = _has([s], (ast.Return,))
            if isinstance(s, ast.If):
                s.body = self._block(s.body, in_loop)
                s.orelse = self._block(s.orelse, in_loop)
            elif isinstance(s, ast.While | ast.For):
                s.body = self._block(s.body, in_loop=True)
                if may_return:
                    loop: Any = s  # a mark the loop's conversion reads
                    loop._ag_has_return = True
            elif isinstance(s, ast.With):
                s.body = self._block(s.body, in_loop)
            elif isinstance(s, ast.Try):
                s.body = self._block(s.body, in_loop)
                for h in s.handlers:
                    h.body = self._block(h.body, in_loop)
                s.orelse = self._block(s.orelse, in_loop)
                s.finalbody = self._block(s.finalbody, in_loop)
            out.append(s)
            if may_return:
                rest = stmts[k + 1:]
                if rest:
                    guard = ast.If(test=ast.UnaryOp(ast.Not(), _name("do_return")),
                                   body=self._block(rest, in_loop), orelse=[])
                    out.append(ast.copy_location(guard, rest[0]))
                elif in_loop:
                    pass
                return out
        return out


def _definitely_returns(stmts: list) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    if isinstance(last, ast.If):
        return _definitely_returns(last.body) and _definitely_returns(last.orelse)
    return False


def _cond_return_rewrite(stmts: list) -> list:
    """TF's ConditionalReturnRewriter: ``if c: return a`` followed by more statements puts
    them in the ``else`` (so both branches return); inner blocks first."""
    for s in stmts:
        for attr in ("body", "orelse", "finalbody"):
            if isinstance(s, ast.If | ast.While | ast.For | ast.With | ast.Try) and hasattr(s, attr):
                setattr(s, attr, _cond_return_rewrite(getattr(s, attr)))
        if isinstance(s, ast.Try):
            for h in s.handlers:
                h.body = _cond_return_rewrite(h.body)
    out: list = []
    for k, s in enumerate(stmts):
        out.append(s)
        rest = stmts[k + 1:]
        if isinstance(s, ast.If) and rest:
            if _definitely_returns(s.body):
                s.orelse = s.orelse + rest
                return out
            if _definitely_returns(s.orelse):
                s.body = s.body + rest
                return out
    return out


class _FunctionScope:
    """Passes 2 and 3 over one function scope (nested defs are their own scopes)."""

    def __init__(self, fn: ast.FunctionDef):
        self.fn = fn
        self.params = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
        if fn.args.vararg:
            self.params.add(fn.args.vararg.arg)
        if fn.args.kwarg:
            self.params.add(fn.args.kwarg.arg)
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        for n in _walk_scope(fn):
            if isinstance(n, ast.Global):
                self.globals.update(n.names)
            elif isinstance(n, ast.Nonlocal):
                self.nonlocals.update(n.names)
        self.all_loads = _loaded(fn.body)

    def run(self) -> None:
        fn = self.fn
        # Nested user functions are scopes of their own.
        for n in list(_walk_scope(fn)):
            if n is not fn and isinstance(n, ast.FunctionDef) and not n.name.startswith("ag__"):
                _FunctionScope(n).run()
        fn.body = self._block(fn.body)
        local = [n for n in _stored(fn.body) if n not in self.params and n not in self.globals
                 and n not in self.nonlocals and not n.startswith("ag__")]
        init = [_assign(n, _call(_ag("Undefined"), [ast.Constant(n)])) for n in local
                if n not in ("do_return", "retval_")]
        _fix_super(fn)
        fn.body = _located(init, fn) + fn.body

    # --- statements ---

    def _block(self, stmts: list) -> list:
        out: list = []
        for s in stmts:
            out.extend(self._stmt(s))
        return out

    def _stmt(self, s: ast.stmt) -> list:
        if isinstance(s, ast.If):
            return self._if(s)
        if isinstance(s, ast.While):
            return self._while(s)
        if isinstance(s, ast.For):
            return self._for(s)
        if isinstance(s, ast.With):
            s.body = self._block(s.body)
        elif isinstance(s, ast.Try):
            s.body = self._block(s.body)
            for h in s.handlers:
                h.body = self._block(h.body)
            s.orelse = self._block(s.orelse)
            s.finalbody = self._block(s.finalbody)
        return [s]

    def _live_out(self, s: ast.stmt, names: list) -> list:
        inside = _loaded([s])
        counts: dict[str, int] = {}
        for n in self.all_loads:
            counts[n] = counts.get(n, 0) + 1
        for n in inside:
            counts[n] = counts.get(n, 0) - 1
        return [n for n in names if counts.get(n, 0) > 0 or n == "retval_"]

    def _modified(self, nodes: list) -> list:
        return [n for n in _stored(nodes) if n not in self.globals and n not in self.nonlocals
                and not n.startswith("ag__")]

    def _state_fns(self, uid: int, names: list) -> list:
        get = _fdef(f"ag__get_state_{uid}", [], [ast.Return(ast.Tuple([_name(n) for n in names], ast.Load()))])
        if names:
            set_body = [ast.Nonlocal(names) if names else ast.Pass(),
                        ast.Assign(targets=[ast.Tuple([_name(n, True) for n in names], ast.Store())],
                                   value=_name("ag__vals"))]
        else:
            set_body = [ast.Pass()]
        setf = _fdef(f"ag__set_state_{uid}", ["ag__vals"], set_body)
        return [get, setf]

    def _helper(self, name: str, params: list[str], body: list, modified: list) -> ast.FunctionDef:
        decl: list = []
        nl = [n for n in modified if n not in params]
        nl += [n for n in dict.fromkeys(_stored(body)) if n in self.nonlocals and n not in nl]
        if nl:
            decl.append(ast.Nonlocal(nl))
        gl = [n for n in _stored(body) if n in self.globals]
        if gl:
            decl.append(ast.Global(list(dict.fromkeys(gl))))
        return _fdef(name, params, decl + body)

    def _if(self, s: ast.If) -> list:
        uid = next(_counter)
        original = [s]
        names = self._modified(original)
        live = self._live_out(s, names)
        body = self._block(s.body)
        orelse = self._block(s.orelse)
        out = [
            self._helper(f"ag__if_body_{uid}", [], body, names),
            self._helper(f"ag__else_body_{uid}", [], orelse, names),
            *self._state_fns(uid, names),
        ]
        call = _call(_ag("if_stmt"), [s.test, _name(f"ag__if_body_{uid}"), _name(f"ag__else_body_{uid}"),
                                      _name(f"ag__get_state_{uid}"), _name(f"ag__set_state_{uid}"), _strs(names),
                                      _strs(live)])
        out.append(ast.Expr(call))
        return _located(out, s)

    @staticmethod
    def _hoist_options(s: ast.While | ast.For) -> ast.expr:
        """TF's rule: ``set_loop_options(...)`` calls in the loop body configure the loop."""
        kws: list = []
        body = []
        for st in s.body:
            c = st.value if isinstance(st, ast.Expr) else None
            f = c.func if isinstance(c, ast.Call) else None
            if (isinstance(f, ast.Attribute) and f.attr == "set_loop_options") or (
                    isinstance(f, ast.Name) and f.id == "set_loop_options"):
                kws += c.keywords if isinstance(c, ast.Call) else []
            else:
                body.append(st)
        s.body = body or [ast.Pass()]
        return _call(_ag("loop_options"), [], kws)

    def _loop_flags(self, s: ast.While | ast.For, uid: int) -> tuple[list, ast.expr | None, list]:
        """Lower break/continue in the loop body (pass 2); returns (pre, extra_test, body)."""
        has_break = _has(s.body, (ast.Break,), stop=(ast.While, ast.For))
        has_cont = _has(s.body, (ast.Continue,), stop=(ast.While, ast.For))
        pre: list = []
        body = s.body
        extra = None
        # One flag per loop: a nested loop's break must not stop the loop around it.
        if has_cont:
            flag = f"continue_{uid}"
            body = _lower_jumps(body, flag, ast.Continue)
            body = [_assign(flag, ast.Constant(False))] + body
        if has_break:
            flag = f"break_{uid}"
            body = _lower_jumps(body, flag, ast.Break)
            pre.append(_assign(flag, ast.Constant(False)))
            extra = ast.UnaryOp(ast.Not(), _name(flag))
        return pre, extra, body

    def _while(self, s: ast.While) -> list:
        if s.orelse:
            raise ConversionError("while/else is not supported by autograph")
        uid = next(_counter)
        opts = self._hoist_options(s)
        pre, extra, body = self._loop_flags(s, uid)
        s.body = body
        test = s.test if extra is None else ast.BoolOp(ast.And(), [extra, s.test])
        names = self._modified([s] + pre)
        live = self._live_out(s, names)
        body = self._block(s.body)
        out = pre + [
            _fdef(f"ag__loop_test_{uid}", [], [ast.Return(test)]),
            self._helper(f"ag__loop_body_{uid}", [], body, names),
            *self._state_fns(uid, names),
            ast.Expr(_call(_ag("while_stmt"), [_name(f"ag__loop_test_{uid}"), _name(f"ag__loop_body_{uid}"),
                                               _name(f"ag__get_state_{uid}"), _name(f"ag__set_state_{uid}"),
                                               _strs(names), _strs(live),
                                               ast.Constant(bool(getattr(s, "_ag_has_return", False))), opts])),
        ]
        return _located(out, s)

    def _for(self, s: ast.For) -> list:
        if s.orelse:
            raise ConversionError("for/else is not supported by autograph")
        uid = next(_counter)
        opts = self._hoist_options(s)
        pre, extra, body = self._loop_flags(s, uid)
        names = self._modified([s] + pre + body)
        live = self._live_out(s, names)
        target_assign = ast.Assign(targets=[s.target], value=_name("ag__itr"))
        body = [target_assign] + self._block(body)
        it = s.iter
        if isinstance(it, ast.Call) and (
            (isinstance(it.func, ast.Attribute) and it.func.attr == "range")
            or (isinstance(it.func, ast.Name) and it.func.id == "range")
        ):
            it = _call(_ag("range_"), [it.func] + it.args, it.keywords)
        extra_fn: ast.expr = ast.Constant(None)
        helpers: list = []
        if extra is not None:
            helpers.append(_fdef(f"ag__extra_test_{uid}", [], [ast.Return(extra)]))
            extra_fn = _name(f"ag__extra_test_{uid}")
        out = pre + helpers + [
            self._helper(f"ag__loop_body_{uid}", ["ag__itr"], body, names),
            *self._state_fns(uid, names),
            ast.Expr(_call(_ag("for_stmt"), [it, extra_fn, _name(f"ag__loop_body_{uid}"),
                                             _name(f"ag__get_state_{uid}"), _name(f"ag__set_state_{uid}"),
                                             _strs(names), _strs(live),
                                             ast.Constant(bool(getattr(s, "_ag_has_return", False))), opts])),
        ]
        return _located(out, s)


def _located(nodes: list, s: ast.stmt) -> list:
    """Generated nodes get the statement's first line (only: CPython puts a method call on
    its attribute's last line, and tracebacks must name the ``if``/``while``/``for`` line)."""
    def place(n: Any) -> None:
        n.lineno, n.end_lineno = s.lineno, s.lineno
        n.col_offset, n.end_col_offset = s.col_offset, s.col_offset + 1

    for n in nodes:
        if not hasattr(n, "lineno") or isinstance(n, ast.FunctionDef | ast.Expr):
            place(n)
        for sub in ast.walk(n):
            if not hasattr(sub, "lineno") or getattr(sub, "lineno", None) is None:
                place(sub)
    return nodes


def _lower_jumps(stmts: list, flag: str, kind: type) -> list:
    """Replace ``break``/``continue`` (of this loop) by ``flag = True``; guard what follows."""
    out: list = []
    for k, s in enumerate(stmts):
        if isinstance(s, kind):
            stmt: Any = s  # (isinstance with a type variable narrows to object)
            out.append(ast.copy_location(_assign(flag, ast.Constant(True)), stmt))
            return out
        jumps = _has([s], (kind,), stop=(ast.While, ast.For))
        if isinstance(s, ast.If) and jumps:
            s.body = _lower_jumps(s.body, flag, kind)
            s.orelse = _lower_jumps(s.orelse, flag, kind)
        elif isinstance(s, ast.With | ast.Try) and jumps:
            s.body = _lower_jumps(s.body, flag, kind)
        out.append(s)
        if jumps:
            rest = stmts[k + 1:]
            if rest:
                guard = ast.If(test=ast.UnaryOp(ast.Not(), _name(flag)), body=_lower_jumps(rest, flag, kind),
                               orelse=[])
                out.append(ast.copy_location(guard, rest[0]))
            return out
    return out


def _fix_super(fn: ast.FunctionDef) -> None:
    """Zero-argument ``super()`` needs the class cell the rewritten function no longer has."""
    args = fn.args.posonlyargs + fn.args.args
    if not args:
        return
    for n in ast.walk(fn):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "super" and not n.args):
            n.args = [_name("__class__"), _name(args[0].arg)]


class _ExprConverter(ast.NodeTransformer):
    """Pass 4: lazy boolean operators, conditional expressions, converted calls."""

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        self.generic_visit(node)
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        thunks = [ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                             body=v) for v in node.values]
        return ast.copy_location(_call(_ag(fn), thunks), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call(_ag("not_"), [node.operand]), node)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        self.generic_visit(node)
        lam = lambda b: ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],  # noqa: E731
                                                      defaults=[]), body=b)
        return ast.copy_location(_call(_ag("if_exp"), [node.test, lam(node.body), lam(node.orelse)]), node)

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "ag__":
            return node
        if (isinstance(f, ast.Name) and f.id in ("int", "float") and len(node.args) == 1 and not node.keywords
                and not isinstance(node.args[0], ast.Starred)):
            # TF's autograph: int(t) / float(t) of a tensor inside a function is a cast.
            return ast.copy_location(_call(_ag("cast_builtin"), [f, node.args[0]]), node)
        if isinstance(f, ast.Name) and f.id in ("super", "locals", "globals", "vars", "eval", "exec", "print",
                                                  "isinstance", "len", "range", "enumerate", "zip", "getattr",
                                                  "setattr", "hasattr", "type", "int", "float", "bool", "list",
                                                  "tuple", "dict", "set", "str", "max", "min", "abs", "sum"):
            return node
        return ast.copy_location(_call(_ag("converted_call"), [f] + node.args, node.keywords), node)
