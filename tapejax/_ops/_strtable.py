"""String tensors inside a compiled ``tapejax.function``: strings as integer ids.

XLA has no string type, so a string tensor that is an input, an intermediate or an
output of a traced program is carried through the program as an ``int32`` array of
ids into a host-side table of ``bytes`` (``StrIds``). The structural ops (reshape,
gather, concat, where, ...) move ids like any integers; the string ops
(``tf.strings``, ``+``, ``==``) run on the host through ``jax.pure_callback``,
reading the strings behind the ids and interning the strings they produce.
A string input is interned when the function is called and the outputs are read
back from the table when it returns, so a string tensor is traced by shape and
dtype (never by value), as TF traces it.

Ids are never compared for equality (``==`` compares the bytes on the host), so the
table need not be canonical across its lifetime:

* permanent ids (>= 0) are strings that are constants of a traced program (id 0 is
  ``b""``, the value a pad or fill reads); they live as long as the process;
* call ids (< 0) are the strings of one call's inputs and of what its host ops make.
  They live in two generations: when the current one holds ``_GENERATION`` strings
  it becomes the previous one and the previous one is dropped, which bounds the
  table's memory. A call would have to see ``_GENERATION`` other strings made while
  it runs for an id it holds to be dropped; ``lookup`` then raises rather than
  returning a wrong string.
"""

from __future__ import annotations

import threading
from typing import Any

import jax
import numpy as np

from .. import errors

__all__ = ["StrIds", "intern", "lookup", "is_traced_string"]

_GENERATION = 1 << 20
_lock = threading.Lock()
_perm_by_str: dict[bytes, int] = {b"": 0}
_perm: list[bytes] = [b""]
_cur: dict[bytes, int] = {}
_cur_by_id: dict[int, bytes] = {}
_prev_by_id: dict[int, bytes] = {}
_prev: dict[bytes, int] = {}
_next_call_id = -1


class StrIds:
    """The value of a string tensor inside a trace: the traced ``int32`` ids, with the shape
    and the ``object`` dtype that ``Tensor.shape``/``.dtype`` read (so it reports ``tf.string``)."""

    __slots__ = ("ids",)
    dtype = np.dtype(object)

    def __init__(self, ids: Any):
        self.ids = ids

    @property
    def shape(self) -> tuple:
        return tuple(self.ids.shape)

    @property
    def ndim(self) -> int:
        return len(self.ids.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.ids.shape, dtype=np.int64))

    def reshape(self, *shape: Any) -> StrIds:
        return StrIds(self.ids.reshape(*shape))

    def __repr__(self) -> str:
        return f"StrIds(shape={self.shape})"


def is_traced_string(v: Any) -> bool:
    return type(v) is StrIds


def intern(strings: Any, permanent: bool) -> np.ndarray:
    """The ids of a NumPy array of ``bytes`` (``permanent`` for constants of a traced program)."""
    global _next_call_id, _cur, _cur_by_id, _prev, _prev_by_id
    flat = strings.reshape(-1)
    out = np.empty(flat.shape, np.int32)
    with _lock:
        for i, s in enumerate(flat):
            k = _perm_by_str.get(s)
            if k is None and permanent:
                k = _perm_by_str[s] = len(_perm)
                _perm.append(s)
            if k is None:
                k = _cur.get(s)
                if k is None:
                    k = _prev.get(s)
                if k is None:
                    if len(_cur) >= _GENERATION or _next_call_id <= -(1 << 31) + 1:
                        _prev, _prev_by_id, _cur, _cur_by_id = _cur, _cur_by_id, {}, {}
                        if _next_call_id <= -(1 << 31) + 1:
                            _next_call_id = -1
                    k = _next_call_id
                    _next_call_id -= 1
                    _cur[s] = k
                    _cur_by_id[k] = s
            out[i] = k
    return out.reshape(strings.shape)


def lookup(ids: Any) -> np.ndarray:
    """The ``bytes`` behind an array of ids (a NumPy object array of the same shape)."""
    a = np.asarray(ids)
    flat = a.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    with _lock:
        for i, k in enumerate(flat.tolist()):
            if k >= 0:
                s = _perm[k] if k < len(_perm) else None
            else:
                s = _cur_by_id.get(k)
                if s is None:
                    s = _prev_by_id.get(k)
            if s is None:
                raise errors.InternalError(
                    "a string of a compiled tapejax.function call was released before the call read it: more than "
                    f"{_GENERATION} other strings were made while it ran. Call it again with fewer strings in flight.")
            out[i] = s
    return out.reshape(a.shape)


# A pytree of its ids: JAX transformations over Tensors (control-flow branches and bodies, vmap)
# carry traced strings through as integers and give StrIds back.
jax.tree_util.register_pytree_node(StrIds, lambda s: ((s.ids,), None), lambda _, c: StrIds(c[0]))
