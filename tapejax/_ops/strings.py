"""String tensors (``tf.string``) and ``tf.strings``.

A string tensor holds a NumPy object array of ``bytes`` on the host (JAX has no string
type); it is never differentiable and a tape never records it. The structural ops
(reshape, gather, concat, stack, where, indexing, ...) work on it unchanged: they run
on an integer array of element indices and the result picks the strings by index.
``+`` concatenates and ``==``/``!=`` compare elementwise, as in TF.

Inside a compiled ``tapejax.function`` a string tensor is carried as integer ids
(``_strtable.StrIds``): the structural ops move the ids, and every string op here runs
on the host through ``jax.pure_callback`` (``_host_op``), with the output shape found
by running the op once on stand-in values while tracing. The ops whose output shape
depends on the strings (``split``, ``bytes_split``, ``unicode_split``, ...) raise
TypeError there, as the other data-dependent-shape ops do.
"""

from __future__ import annotations

import functools
import operator
import re
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from .. import errors
from .._core._recorder import Pending, Tensor, VariableBase, read_variable
from .._engine import _kernels
from ._dtypes import as_dtype
from ._machinery import EXPORTS, OPS, PRIMS, _export
from ._strtable import StrIds, intern, lookup
from ._tensor import convert_to_tensor, is_string_value, to_bytes_array

__all__ = [
    "as_string",
    "format",
    "join",
    "length",
    "lower",
    "reduce_join",
    "regex_replace",
    "split",
    "string_to_number",
    "strip",
    "substr",
    "to_number",
    "upper",
]

# Ops that only move, copy or select elements: correct on strings through element indices.
_STRUCTURAL = ("reshape", "transpose", "stack", "concat", "unstack", "split", "squeeze", "expand_dims", "tile",
               "broadcast_to", "reverse", "slice", "roll", "repeat", "gather", "gather_nd", "where",
               "boolean_mask", "getitem", "identity", "pad")


def _by_index(impl: Callable) -> Callable:
    def run(*args: Any, **params: Any) -> Any:
        if not any(is_string_value(a) for a in args):
            return impl(*args, **params)
        if any(type(a) is StrIds for a in args):
            # Traced strings are ids already: move them; a constant string operand becomes
            # ids of the program (permanent). A pad or fill reads id 0, which is b"".
            new_ids = [a.ids if type(a) is StrIds else jnp.asarray(intern(a, True)) if is_string_value(a) else a
                       for a in args]
            res = impl(*new_ids, **params)
            return tuple(StrIds(o) for o in res) if isinstance(res, tuple | list) else StrIds(res)
        # Element indices start at 1: an index 0 (a pad or fill value) reads b"", TF's zero for strings.
        table, new, off = [np.array([b""], dtype=object)], [], 1
        for a in args:
            if is_string_value(a):
                new.append(jnp.arange(off, off + a.size, dtype=jnp.int32).reshape(a.shape))
                table.append(a.reshape(-1))
                off += a.size
            else:
                new.append(a)
        flat = np.concatenate(table)
        out = impl(*new, **params)

        def pick(o: Any) -> Any:
            idx = np.asarray(o)
            res = flat[np.where((idx > 0) & (idx < flat.size), idx, 0)]
            return np.asarray(res, dtype=object).reshape(idx.shape)

        return tuple(pick(o) for o in out) if isinstance(out, tuple | list) else pick(out)

    run.__wrapped__ = impl  # type: ignore[attr-defined]
    # The op fast paths call these on concrete jaxlib arrays only (never strings), and lazy mode's
    # abstract evaluation on shapes of numeric arrays (it defers no string op): the kernel's own.
    for attr in ("run1", "run2", "out_info"):
        if hasattr(impl, attr):
            setattr(run, attr, getattr(impl, attr))
    on_host = getattr(impl, "on_host", None)
    if on_host is not None:
        # The host-resident backward pass's call (``_interpret._host_call``), on cotangents: the
        # kernel's own, so a structural op's host answers follow its schedule (without it, a
        # ``broadcast_to`` in a reduction's backward compiled in the step where its host budget ran
        # out, even while the slice's compiled program was on its way: mlp_step_small, 20 ms).
        def host_run(*args: Any, **params: Any) -> Any:
            if any(is_string_value(a) for a in args):
                return run(*_kernels._device_args(args), **params)
            return on_host(*args, **params)

        run.on_host = host_run  # type: ignore[attr-defined]
    return run


for _name in _STRUCTURAL:
    if _name in PRIMS:
        PRIMS[_name].impl = _by_index(PRIMS[_name].impl)


_VB_VALUE = VariableBase._value


def _is_str_operand(x: Any) -> bool:
    if isinstance(x, Tensor | VariableBase):
        return is_string_value(x._aval)  # never forces a lazy tensor (it is never a string)
    if isinstance(x, str | bytes):
        return True
    if isinstance(x, list | tuple | np.ndarray):
        a = np.asarray(x, dtype=object) if not isinstance(x, np.ndarray) else x
        return a.dtype.kind in "SUO" and a.size > 0 and all(isinstance(e, str | bytes) for e in a.reshape(-1))
    return False


def _host_value(t: Any) -> np.ndarray:
    """The value of a tensor a string op reads: strings live on the host, so never a traced one."""
    v = t._value
    if isinstance(v, jax.core.Tracer | StrIds):
        raise TypeError(
            "String ops run on the host and cannot read a traced value inside a compiled tapejax.function step "
            "(JAX has no string type): return the numbers from the step and make the strings outside it.")
    return np.asarray(v)


def _str_array(x: Any) -> np.ndarray:
    if isinstance(x, VariableBase):
        x = read_variable(x)  # a read, which a recording tape watches as TF's does (never differentiated)
    if isinstance(x, Tensor):
        v = _host_value(x)
        if not is_string_value(v):
            raise errors.InvalidArgumentError(
                f"cannot compute a string op on a {x.dtype.name} tensor: convert it with tf.strings.as_string first.")
        return v
    return convert_to_tensor(x, dtype="string")._value


def _elementwise(fn: Callable, *arrays: np.ndarray, otype: Any = object) -> np.ndarray:
    return np.frompyfunc(fn, len(arrays), 1)(*arrays).astype(otype) if arrays[0].size or len(arrays) > 1 else \
        np.asarray(fn(*[a.item() for a in arrays])).astype(otype)


# ---- string ops inside a trace: on the host, through jax.pure_callback --------------------------

_HOST = threading.local()  # .active: an op runs inside a host callback (numbers stay NumPy, no JAX calls)


def _num(a: Any) -> Tensor:
    """A numeric result of a string op: a NumPy array inside a host callback, else a jax.Array."""
    return Tensor(np.asarray(a) if getattr(_HOST, "active", False) else jnp.asarray(a))


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tensor | VariableBase)


def _traced_value(x: Any) -> Any:
    if isinstance(x, Tensor | VariableBase):
        v = x._value
        if isinstance(v, jax.core.Tracer | StrIds):
            return v
    return None


def _stand_in(v: Any) -> np.ndarray:
    # A value of the same shape and dtype for finding the op's output shapes while tracing;
    # "0" parses as a number too (tf.strings.to_number).
    return np.full(v.shape, b"0", dtype=object) if type(v) is StrIds else np.zeros(v.shape, v.dtype)


def _host_op(dynamic_shape: bool = False) -> Callable:
    """Let a string op (NumPy on the host) run inside a compiled tapejax.function.

    With no traced tensor among its arguments the op runs as it is. Otherwise its output
    shapes are found by running it on stand-in values, and the op is staged into the program
    as a ``jax.pure_callback`` that reads the strings behind the traced ids, runs the op, and
    interns the strings it makes. Numbers going into it carry no gradient (string ops have none in TF).
    """

    def deco(op: Callable) -> Callable:
        @functools.wraps(op)
        def run(*args: Any, **kwargs: Any) -> Any:
            leaves, tree = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_leaf)
            pos = [i for i, x in enumerate(leaves) if _traced_value(x) is not None]
            if not pos:
                return op(*args, **kwargs)
            if dynamic_shape:
                raise TypeError(
                    f"tf.strings.{op.__name__} has a data-dependent shape (it depends on the strings), which a compiled "
                    "tapejax.function cannot have (XLA compiles for static shapes): call it outside the function.")
            vals = [_traced_value(leaves[i]) for i in pos]

            def call(host: list) -> Any:
                new = list(leaves)
                for i, a in zip(pos, host):
                    new[i] = Tensor(a)
                a2, k2 = jax.tree_util.tree_unflatten(tree, new)
                saved = getattr(_HOST, "active", False)
                _HOST.active = True
                try:
                    return op(*a2, **k2)
                finally:
                    _HOST.active = saved

            out_leaves, out_tree = jax.tree_util.tree_flatten(call([_stand_in(v) for v in vals]), is_leaf=_is_leaf)
            kinds = [is_string_value(t._value) for t in out_leaves]
            specs = [jax.ShapeDtypeStruct(np.shape(t._value), np.int32 if k else np.asarray(t._value).dtype)
                     for t, k in zip(out_leaves, kinds)]

            def callback(*arrays: Any) -> list:
                host = [lookup(a) if type(v) is StrIds else np.asarray(a) for a, v in zip(arrays, vals)]
                res = jax.tree_util.tree_leaves(call(host), is_leaf=_is_leaf)
                outs = []
                for r, k, spec in zip(res, kinds, specs):
                    a = np.asarray(r._value)
                    if a.shape != spec.shape:
                        raise errors.InvalidArgumentError(
                            f"tf.strings.{op.__name__} made shape {a.shape} inside a compiled tapejax.function, where "
                            f"it was traced with shape {spec.shape}: its shape depends on the strings. Call it outside "
                            "the function.")
                    outs.append(intern(a, False) if k else a.astype(spec.dtype))
                return outs

            callback._tapejax_op = op.__name__  # type: ignore[attr-defined]  # ConcreteFunction.graph names it
            callback._tapejax_strings = kinds  # type: ignore[attr-defined]
            operands = [v.ids if type(v) is StrIds else jax.lax.stop_gradient(v) for v in vals]
            res = jax.pure_callback(callback, specs, *operands, vmap_method="sequential")
            wrapped = [Tensor(StrIds(r)) if k else Tensor(r) for r, k in zip(res, kinds)]
            return jax.tree_util.tree_unflatten(out_tree, wrapped)

        return run

    return deco


_Array = _kernels.ArrayImpl
_NUMBERS = (float, int)


def _wrap_binary(name: str, string_fn: Callable, otype: Any) -> None:
    numeric = OPS[name]

    def strings_op(x: Any, y: Any) -> Tensor:
        a, b = _str_array(x), _str_array(y)
        r = np.asarray(np.frompyfunc(string_fn, 2, 1)(a, b), dtype=object)
        return Tensor(r) if otype is object else _num(r.astype(otype))

    strings_op.__name__ = name
    strings_op = _host_op()(strings_op)

    def op(x: Any, y: Any, name: str | None = None) -> Tensor:
        # A concrete JAX array is never a string (strings live in NumPy object arrays), nor is a
        # lazy tensor (``_lz`` set; its ``_value`` is not read: that would run its program): the
        # numeric case goes straight through, without the operand tests.
        if type(x) is Tensor and (x._lz is not None or type(x._value) is _Array) and (
                type(y) in _NUMBERS or (type(y) is Tensor and (y._lz is not None or type(y._value) is _Array))
                # a plain variable holding a JAX array or a lazy value (never a string): ``h + b``
                or (isinstance(y, VariableBase) and type(y)._value is _VB_VALUE
                    and (type(y._raw) is _Array or isinstance(y._raw, Pending)))):
            return numeric(x, y)
        if _is_str_operand(x) or _is_str_operand(y):
            return strings_op(x, y)
        return numeric(x, y)

    op.__name__ = op.__qualname__ = getattr(numeric, "__name__", name)
    op.__doc__ = numeric.__doc__
    OPS[name] = op
    for k, f in list(EXPORTS.items()):
        if f is numeric:
            EXPORTS[k] = op


def _wrap_export(name: str, string_fn: Callable) -> None:
    numeric = OPS.get(name) or EXPORTS[name]

    def op(*args: Any, **kwargs: Any) -> Any:
        first = args[0] if args else next(iter(kwargs.values()))
        if _is_str_operand(first):
            return string_fn(*args, **kwargs)
        return numeric(*args, **kwargs)

    op.__name__ = op.__qualname__ = getattr(numeric, "__name__", name)
    op.__doc__ = numeric.__doc__
    if name in OPS:
        OPS[name] = op
    for k, f in list(EXPORTS.items()):
        if f is numeric:
            EXPORTS[k] = op


def _identity(input: Any, name: str | None = None) -> Tensor:
    if isinstance(input, Tensor) and type(input._value) is StrIds:
        return Tensor(input._value)
    return Tensor(_str_array(input))


def _zeros_like(input: Any, dtype: Any = None, name: str | None = None, **_: Any) -> Tensor:
    a = _str_array(input)
    return _out(np.full(a.shape, b"", dtype=object))


def _ones_like(input: Any, dtype: Any = None, name: str | None = None, **_: Any) -> Tensor:
    raise errors.InvalidArgumentError("OnesLike has no string kernel: ones_like of a string tensor is undefined.")


_wrap_export("identity", _identity)
_wrap_export("zeros_like", _host_op()(_zeros_like))
_wrap_export("ones_like", _ones_like)

_fill_numeric = EXPORTS["fill"]


@_host_op()
def _fill_strings(dims: Any, value: Any) -> Tensor:
    shape = tuple(int(d) for d in np.asarray(dims.numpy() if hasattr(dims, "numpy") else dims).reshape(-1))
    return _out(np.full(shape, _str_array(value).item(), dtype=object))


def _fill(dims: Any, value: Any, name: str | None = None, **kw: Any) -> Tensor:
    if _is_str_operand(value):
        return _fill_strings(dims, value)
    return _fill_numeric(dims, value, name=name, **kw)


_fill.__name__ = "fill"
_fill.__doc__ = _fill_numeric.__doc__
for _k, _f in list(EXPORTS.items()):
    if _f is _fill_numeric:
        EXPORTS[_k] = _fill

_wrap_binary("add", operator.add, object)
_wrap_binary("equal", operator.eq, np.bool_)
_wrap_binary("not_equal", operator.ne, np.bool_)


def _out(a: np.ndarray) -> Tensor:
    return Tensor(np.asarray(a, dtype=object))


def _map(fn: Callable, a: np.ndarray, otype: Any = object) -> np.ndarray:
    flat = [fn(x) for x in a.reshape(-1)]
    return np.asarray(flat, dtype=otype).reshape(a.shape) if flat else np.empty(a.shape, otype)


# ---- tf.strings ------------------------------------------------------------------------------


def join(inputs: Any, separator: str = "", name: str | None = None) -> Tensor:
    """Join strings elementwise (with broadcasting), as ``tf.strings.join``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.join(["a", tf.constant(["x", "y"])], separator="-").numpy().tolist()
        [b'a-x', b'a-y']
    """
    arrays = np.broadcast_arrays(*[_str_array(x) for x in inputs])
    sep = separator.encode() if isinstance(separator, str) else separator
    if not arrays:
        return _out(np.asarray(b"", dtype=object))
    flat = [sep.join(parts) for parts in zip(*[a.reshape(-1) for a in arrays])]
    return _out(np.asarray(flat, dtype=object).reshape(arrays[0].shape) if flat else np.empty(arrays[0].shape, object))


def _scalar_text(v: Any) -> str:
    # TF's summaries (shared with tf.print): floats without a trailing ".0", bools as 1/0, strings quoted.
    if isinstance(v, np.floating):
        s = str(v)
        return s.removesuffix(".0")
    if isinstance(v, np.bool_ | bool):
        return "1" if v else "0"
    if isinstance(v, bytes):
        return '"' + v.decode("utf-8", "replace") + '"'
    return str(v)


def _summary(a: np.ndarray, summarize: int, indent: int = 0) -> str:
    if a.ndim == 0:
        return _scalar_text(a[()])
    n = a.shape[0]
    idx: list = list(range(n))
    if summarize >= 0 and n > 2 * summarize:
        idx = list(range(summarize)) + [None] + list(range(n - summarize, n))
    if a.ndim == 1:
        return "[" + " ".join("..." if i is None else _scalar_text(a[i]) for i in idx) + "]"
    sep = "\n" + " " * (indent + 1)
    return "[" + sep.join("..." if i is None else _summary(a[i], summarize, indent + 1) for i in idx) + "]"


def format(template: str, inputs: Any, placeholder: str = "{}", summarize: int = 3, name: str | None = None) -> Tensor:
    """Fill ``{}`` placeholders with tensor summaries, as ``tf.strings.format``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.format("x={}", tf.constant([1, 2, 3])).numpy()
        b'x=[1 2 3]'
    """
    ins = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
    parts = template.split(placeholder)
    if len(parts) - 1 != len(ins):
        raise errors.InvalidArgumentError(
            f"num placeholders in template and num inputs must match: {len(parts) - 1} vs. {len(ins)}")
    out = parts[0]
    for t, p in zip(ins, parts[1:]):
        out += _summary(_host_value(convert_to_tensor(t)), summarize) + p
    return _out(np.asarray(out.encode("utf-8"), dtype=object))


def as_string(input: Any, precision: int = -1, scientific: bool = False, shortest: bool = False, width: int = -1,
              fill: str = "", name: str | None = None) -> Tensor:
    """Format numbers (or bools) as strings, as ``tf.strings.as_string`` (floats with 6 decimals).

    Example:
        >>> import tapejax as tf
        >>> tf.strings.as_string(tf.constant([1.5, 2.0])).numpy().tolist()
        [b'1.500000', b'2.000000']
    """
    t = convert_to_tensor(input)
    a = _host_value(t)
    if is_string_value(a):
        return t  # TF 2.21's AsString passes strings through
    if a.dtype.kind == "b":
        fmt: Callable = lambda x: b"true" if x else b"false"
    elif a.dtype.kind in "iu":
        fmt = lambda x: f"{int(x):{fill}{width if width > 0 else ''}d}".encode()
    else:
        spec = ("e" if scientific else ("g" if shortest else "f"))
        prec = f".{precision}" if precision >= 0 else ("" if shortest else ".6")
        fmt = lambda x: f"{float(x):{fill}{width if width > 0 else ''}{prec}{spec}}".encode()
    return _out(_map(fmt, a))


def to_number(string_tensor: Any, out_type: Any = "float32", name: str | None = None) -> Tensor:
    """Parse numbers, as ``tf.strings.to_number`` (InvalidArgumentError for text that is not one).

    Example:
        >>> import tapejax as tf
        >>> tf.strings.to_number(tf.constant(["1.5", "2"])).numpy().tolist()
        [1.5, 2.0]
    """
    a = _str_array(string_tensor)
    d = as_dtype(out_type)

    def parse(x: bytes) -> Any:
        s = x.decode("utf-8", "replace").strip()
        try:
            return int(s) if d.is_integer else float(s)
        except ValueError:
            raise errors.InvalidArgumentError(f"StringToNumberOp could not correctly convert string: {s}") from None

    return _num(_map(parse, a, d._np))


string_to_number = to_number


def length(input: Any, unit: str = "BYTE", name: str | None = None) -> Tensor:
    """Lengths in bytes (or ``unit="UTF8_CHAR"``: characters), as ``tf.strings.length``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.length(tf.constant(["abc", "é"])).numpy().tolist()
        [3, 2]
    """
    a = _str_array(input)
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"unit must be one of BYTE, UTF8_CHAR, got {unit!r}")
    f = (lambda x: len(x)) if unit == "BYTE" else (lambda x: len(x.decode("utf-8", "replace")))
    return _num(_map(f, a, np.int32))


# tf.RaggedTensor lives in the tf layer (_tf/_ragged.py), which registers how to build one here.
_RAGGED_BUILDER: Callable | None = None


def set_ragged_builder(fn: Callable) -> None:
    global _RAGGED_BUILDER
    _RAGGED_BUILDER = fn


def _per_string(a: np.ndarray, parts_of: Callable, otype: Any = object) -> Any:
    """A scalar string's parts as a 1-D tensor; a batch's as a RaggedTensor (one row per string), as TF."""
    if a.ndim == 0:
        parts = parts_of(a.item())
        arr = np.asarray(parts, dtype=otype).reshape(-1) if len(parts) else np.empty((0,), otype)
        return _out(arr) if otype is object else _num(arr)
    rows = [parts_of(x) for x in a.reshape(-1)]
    flat = [p for r in rows for p in r]
    values = np.asarray(flat, dtype=otype).reshape(-1) if flat else np.empty((0,), otype)
    assert _RAGGED_BUILDER is not None
    return _RAGGED_BUILDER(values, np.asarray([len(r) for r in rows], np.int64), a.shape)


def split(input: Any, sep: Any = None, maxsplit: int = -1, name: str | None = None) -> Any:
    """Split strings (whitespace by default), as ``tf.strings.split``: a scalar gives a 1-D string
    tensor, a batch a RaggedTensor with one row per string.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.split(tf.constant("a,b,,c"), sep=",").numpy().tolist()
        [b'a', b'b', b'', b'c']
        >>> print(tf.strings.split(tf.constant(["a b", "c"])))
        <tf.RaggedTensor [[b'a', b'b'], [b'c']]>
    """
    a = _str_array(input)

    def parts_of(s: bytes) -> list:
        if sep is None or sep == "":
            return s.split(None, maxsplit) if maxsplit >= 0 else s.split()
        b = sep.encode() if isinstance(sep, str) else sep
        return s.split(b, maxsplit)

    return _per_string(a, parts_of)


def _bytes_map(fn: Callable) -> Callable:
    def op(input: Any, encoding: str = "", name: str | None = None) -> Tensor:
        return _out(_map(fn, _str_array(input)))

    return op


lower = _bytes_map(lambda x: x.lower())
upper = _bytes_map(lambda x: x.upper())
lower.__name__, upper.__name__ = "lower", "upper"
lower.__doc__ = """ASCII letters to lower case (other bytes unchanged), as ``tf.strings.lower``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.lower(tf.constant("AbC")).numpy()
        b'abc'
    """
upper.__doc__ = """ASCII letters to upper case (other bytes unchanged), as ``tf.strings.upper``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.upper(tf.constant("abc")).numpy()
        b'ABC'
    """


def strip(input: Any, name: str | None = None) -> Tensor:
    """Strip leading and trailing whitespace, as ``tf.strings.strip``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.strip(tf.constant(" a ")).numpy()
        b'a'
    """
    return _out(_map(lambda x: x.strip(), _str_array(input)))


def reduce_join(inputs: Any, axis: Any = None, keepdims: bool = False, separator: str = "", name: str | None = None) -> Tensor:
    """Join the strings along ``axis`` (all of them by default), as ``tf.strings.reduce_join``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.reduce_join(tf.constant(["a", "bc"]), separator=",").numpy()
        b'a,bc'
    """
    a = _str_array(inputs)
    sep = separator.encode() if isinstance(separator, str) else separator
    axes = tuple(range(a.ndim)) if axis is None else tuple(int(x) % max(a.ndim, 1) for x in np.atleast_1d(axis))
    moved = np.moveaxis(a, axes, tuple(range(a.ndim - len(axes), a.ndim)))
    keep = moved.shape[: a.ndim - len(axes)]
    rows = moved.reshape(keep + (-1,))
    out = np.empty(keep, dtype=object)
    for idx in np.ndindex(*keep):
        out[idx] = sep.join(rows[idx])
    if keepdims:
        out = np.expand_dims(out, axes)
    return _out(out)


def substr(input: Any, pos: int, len: int, unit: str = "BYTE", name: str | None = None) -> Tensor:
    """The substring at ``pos`` of length ``len`` (bytes), as ``tf.strings.substr``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.substr(tf.constant("hello"), 1, 3).numpy()
        b'ell'
    """
    p, n = int(pos), int(len)
    return _out(_map(lambda x: x[p:p + n] if p >= 0 else x[p:][:n], _str_array(input)))


def regex_replace(input: Any, pattern: str, rewrite: str, replace_global: bool = True, name: str | None = None) -> Tensor:
    """Replace matches of ``pattern`` (Python's ``re``, close to TF's RE2) with ``rewrite``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.regex_replace(tf.constant("hello"), "l+", "L").numpy()
        b'heLo'
    """
    rx = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
    rw = rewrite.encode() if isinstance(rewrite, str) else rewrite
    rw = re.sub(rb"\\(\d)", rb"\\g<\1>", rw)
    return _out(_map(lambda x: rx.sub(rw, x, count=0 if replace_global else 1), _str_array(input)))


def bytes_split(input: Any, name: str | None = None) -> Any:
    """The bytes of each string, one per element, as ``tf.strings.bytes_split`` (a batch gives a RaggedTensor).

    Example:
        >>> import tapejax as tf
        >>> tf.strings.bytes_split(tf.constant("Duck")).numpy().tolist()
        [b'D', b'u', b'c', b'k']
    """
    return _per_string(_str_array(input), lambda b: [b[i:i + 1] for i in range(len(b))])


def unicode_split(input: Any, input_encoding: str, errors: str = "replace", replacement_char: int = 65533,
                  name: str | None = None) -> Tensor:
    """The characters of a scalar string, each UTF-8 encoded, as ``tf.strings.unicode_split``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.unicode_split(tf.constant("né"), "UTF-8").numpy().tolist()
        [b'n', b'\xc3\xa9']
    """
    enc = input_encoding.lower().replace("_", "-")
    return _per_string(_str_array(input), lambda b: [c.encode("utf-8") for c in b.decode(enc, "replace")])


def unicode_decode(input: Any, input_encoding: str, errors: str = "replace", replacement_char: int = 65533,
                   replace_control_characters: bool = False, name: str | None = None) -> Tensor:
    """The code points of a scalar string (int32), as ``tf.strings.unicode_decode``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.unicode_decode(tf.constant("né"), "UTF-8").numpy().tolist()
        [110, 233]
    """
    enc = input_encoding.lower().replace("_", "-")
    return _per_string(_str_array(input), lambda b: [ord(c) for c in b.decode(enc, "replace")], np.int32)


def unicode_encode(input: Any, output_encoding: str, errors: str = "replace", replacement_char: int = 65533,
                   name: str | None = None) -> Tensor:
    """Encode code points (the last axis) into strings, as ``tf.strings.unicode_encode``.

    Example:
        >>> import tapejax as tf
        >>> tf.strings.unicode_encode(tf.constant([110, 233]), "UTF-8").numpy()
        b'n\xc3\xa9'
    """
    a = _host_value(convert_to_tensor(input)).astype(np.int64)
    enc = output_encoding.lower().replace("_", "-")
    rows = a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)
    out = np.asarray(["".join(chr(int(c)) for c in r).encode(enc) for r in rows], dtype=object)
    return _out(out.reshape(a.shape[:-1]) if a.ndim else out.reshape(()))


def decode_raw(input_bytes: Any, out_type: Any, little_endian: bool = True, fixed_length: Any = None,
               name: str | None = None) -> Tensor:
    """Reinterpret the bytes of each string as numbers of ``out_type``, as ``tf.io.decode_raw``.

    Example:
        >>> import tapejax as tf
        >>> tf.io.decode_raw(tf.constant("Duck"), tf.uint8).numpy().tolist()
        [68, 117, 99, 107]
    """
    a = _str_array(input_bytes)
    d = as_dtype(out_type)
    dt = d._np.newbyteorder("<" if little_endian else ">")
    rows = [np.frombuffer(b, dtype=dt).astype(d._np) for b in a.reshape(-1)]
    if len({r.size for r in rows}) > 1:
        raise errors.InvalidArgumentError("DecodeRaw requires input strings to all be the same size")
    n = rows[0].size if rows else 0
    return Tensor(jnp.asarray(np.stack(rows).reshape(a.shape + (n,)) if rows else np.zeros(a.shape + (0,), d._np)))


# Inside a compiled function: on the host (shape known from the stand-in values), or refused
# where the shape depends on the strings.
join, format, as_string, to_number, length, lower, upper, strip, reduce_join, substr, regex_replace, unicode_encode = (
    _host_op()(f) for f in (join, format, as_string, to_number, length, lower, upper, strip, reduce_join, substr,
                            regex_replace, unicode_encode))
split, bytes_split, unicode_split, unicode_decode, decode_raw = (
    _host_op(dynamic_shape=True)(f) for f in (split, bytes_split, unicode_split, unicode_decode, decode_raw))
string_to_number = to_number

_export(decode_raw, "io.decode_raw")
for _f in (join, format, as_string, to_number, length, split, lower, upper, strip, reduce_join, substr, regex_replace,
           bytes_split, unicode_split, unicode_decode, unicode_encode):
    _export(_f, f"strings.{_f.__name__}")
_export(as_string, "as_string")
_export(to_number, "strings.string_to_number")
__all__ += ["to_bytes_array"]
