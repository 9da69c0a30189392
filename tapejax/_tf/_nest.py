"""``tf.nest``: TF's structure utilities (lists, tuples, namedtuples, mappings, attrs classes).

TF's rules, which differ from ``jax.tree_util``: ``None`` is a leaf (not an empty
node), a Tensor or Variable is a leaf, every Mapping (``OrderedDict`` included)
flattens in sorted key order, and rebuilding a mapping keeps its own key order.
Composite tensors (``SparseTensor``, ``IndexedSlices``) are leaves unless
``expand_composites=True``, when they flatten to their component tensors.
"""

from __future__ import annotations

import collections.abc
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "assert_same_structure",
    "flatten",
    "flatten_with_tuple_paths",
    "is_nested",
    "map_structure",
    "pack_sequence_as",
    "register_composite",
]

# Composite types (SparseTensor, IndexedSlices) register (type, to_components, from_components),
# so that this module need not import them.
_COMPOSITES: dict[type, tuple[Callable, Callable]] = {}


def register_composite(cls: type, to_components: Callable, from_components: Callable) -> None:
    _COMPOSITES[cls] = (to_components, from_components)


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _is_attrs(x: Any) -> bool:
    return hasattr(type(x), "__attrs_attrs__")


def _composite(x: Any, expand: bool) -> tuple | None:
    if not expand:
        return None
    for cls in type(x).__mro__:
        if cls in _COMPOSITES:
            return _COMPOSITES[cls]
    return None


def _is_seq(x: Any, expand: bool = False) -> bool:
    if isinstance(x, str | bytes):
        return False
    return (isinstance(x, list | tuple | collections.abc.Mapping) or _is_attrs(x)
            or _composite(x, expand) is not None)


def _sorted_keys(m: Any) -> list:
    try:
        return sorted(m)
    except TypeError as e:
        raise TypeError(f"nest only supports dicts with sortable keys: {e}") from None


def _children(x: Any, expand: bool) -> list:
    """The direct children of a nested value, in TF's order."""
    if isinstance(x, collections.abc.Mapping):
        return [x[k] for k in _sorted_keys(x)]
    if _is_attrs(x):
        return [getattr(x, a.name) for a in type(x).__attrs_attrs__]
    c = _composite(x, expand)
    if c is not None:
        return list(c[0](x))
    return list(x)


def _child_paths(x: Any, expand: bool) -> list:
    if isinstance(x, collections.abc.Mapping):
        return _sorted_keys(x)
    if _is_attrs(x):
        return [a.name for a in type(x).__attrs_attrs__]
    return list(range(len(_children(x, expand))))


def _rebuild(x: Any, children: list, expand: bool) -> Any:
    if isinstance(x, collections.abc.Mapping):
        by_key = dict(zip(_sorted_keys(x), children))
        if isinstance(x, collections.defaultdict):
            out = type(x)(x.default_factory)
            for k in x:
                out[k] = by_key[k]
            return out
        ctor: Any = type(x)  # a Mapping subclass built from pairs
        return ctor((k, by_key[k]) for k in x)
    if _is_namedtuple(x):
        return type(x)(*children)
    if _is_attrs(x):
        return type(x)(*children)
    c = _composite(x, expand)
    if c is not None:
        return c[1](x, children)
    return type(x)(children)


def is_nested(seq: Any) -> bool:
    """True for lists, tuples, namedtuples, mappings and attrs classes (not strings, arrays or tensors).

    Example:
        >>> import tapejax as tf
        >>> tf.nest.is_nested([1]), tf.nest.is_nested(tf.constant([1]))
        (True, False)
    """
    return _is_seq(seq)


def _flat(x: Any, expand: bool) -> Iterator[Any]:
    if not _is_seq(x, expand):
        yield x
        return
    for c in _children(x, expand):
        yield from _flat(c, expand)


def flatten(structure: Any, expand_composites: bool = False) -> list:
    """The leaves of ``structure`` in TF's order (mapping keys sorted; ``None`` is a leaf).

    Example:
        >>> import tapejax as tf
        >>> tf.nest.flatten({"b": [1, None], "a": (2,)})
        [2, 1, None]
    """
    return list(_flat(structure, expand_composites))


def flatten_with_tuple_paths(structure: Any, expand_composites: bool = False) -> list:
    """``(path, leaf)`` pairs, ``path`` a tuple of keys and indices."""
    out: list = []

    def walk(x: Any, path: tuple) -> None:
        if not _is_seq(x, expand_composites):
            out.append((path, x))
            return
        for p, c in zip(_child_paths(x, expand_composites), _children(x, expand_composites)):
            walk(c, path + (p,))

    walk(structure, ())
    return out


def _short(x: Any) -> str:
    return f"type={type(x).__name__} str={x}"


def _skeleton(x: Any) -> Any:
    if not _is_seq(x):
        return "."
    s = _rebuild(x, [_skeleton(c) for c in _children(x, False)], False)
    return s


def _skeleton_text(x: Any) -> str:
    return str(_skeleton(x)).replace("'.'", ".")


def _same_type(a: Any, b: Any) -> bool:
    if isinstance(a, collections.abc.Mapping) and isinstance(b, collections.abc.Mapping):
        return True  # TF: a dict and an OrderedDict have the same structure
    if _is_namedtuple(a) and _is_namedtuple(b):
        ta: type[Any] = type(a)  # (a namedtuple class: a checker that narrowed a to Mapping above cannot see _fields)
        tb: type[Any] = type(b)
        return ta.__name__ == tb.__name__ and ta._fields == tb._fields
    return type(a) is type(b)


def _assert_same(a: Any, b: Any, check_types: bool, expand: bool) -> tuple[type, str] | None:
    """The first difference as (exception class, detail), or None."""
    sa, sb = _is_seq(a, expand), _is_seq(b, expand)
    if sa != sb:
        seq, other = (a, b) if sa else (b, a)
        return ValueError, f'Substructure "{_short(seq)}" is a sequence, while substructure "{_short(other)}" is not'
    if not sa:
        return None
    if check_types and not _same_type(a, b):
        return TypeError, (f"The two namedtuples don't have the same sequence type. First structure {_short(a)} has type "
                           f"{type(a).__name__}, while second structure {_short(b)} has type {type(b).__name__}")
    if isinstance(a, collections.abc.Mapping) and isinstance(b, collections.abc.Mapping) and set(a) != set(b):
        return ValueError, (f"The two dictionaries don't have the same set of keys. First structure has keys "
                            f"{_short(list(a))}, while second structure has keys {_short(list(b))}")
    ca, cb = _children(a, expand), _children(b, expand)
    if len(ca) != len(cb):
        return ValueError, (f"The two structures don't have the same number of elements. First structure: {_short(a)}. "
                            f"Second structure: {_short(b)}")
    for x, y in zip(ca, cb):
        d = _assert_same(x, y, check_types, expand)
        if d is not None:
            return d
    return None


def assert_same_structure(nest1: Any, nest2: Any, check_types: bool = True, expand_composites: bool = False) -> None:
    """Raise unless the two structures nest the same way (ValueError; TypeError for differing types).

    Example:
        >>> import tapejax as tf
        >>> tf.nest.assert_same_structure([1, (2, 3)], ["a", ("b", "c")])
    """
    d = _assert_same(nest1, nest2, check_types, expand_composites)
    if d is None:
        return
    cls, detail = d
    raise cls(
        "The two structures don't have the same nested structure.\n\n"
        f"First structure: {_short(nest1)}\n\nSecond structure: {_short(nest2)}\n\n"
        f"More specifically: {detail}\nEntire first structure:\n{_skeleton_text(nest1)}\n"
        f"Entire second structure:\n{_skeleton_text(nest2)}"
    )


def map_structure(func: Callable, *structure: Any, **kwargs: Any) -> Any:
    """Apply ``func`` to corresponding leaves of the structures; the result has the first's structure.

    Example:
        >>> import tapejax as tf
        >>> tf.nest.map_structure(lambda a, b: a + b, {"x": 1, "y": [2]}, {"x": 10, "y": [20]})
        {'x': 11, 'y': [22]}
    """
    if not callable(func):
        raise TypeError(f"func must be callable, got: {func}")
    if not structure:
        raise ValueError("Must provide at least one structure")
    check_types = kwargs.pop("check_types", True)
    expand = kwargs.pop("expand_composites", False)
    if kwargs:
        raise ValueError("Only valid keyword arguments are `check_types` and `expand_composites`, not: `"
                         + "`, `".join(kwargs) + "`")
    for other in structure[1:]:
        assert_same_structure(structure[0], other, check_types=check_types, expand_composites=expand)
    flats = [flatten(s, expand) for s in structure]
    return pack_sequence_as(structure[0], [func(*xs) for xs in zip(*flats)], expand_composites=expand)


def pack_sequence_as(structure: Any, flat_sequence: Any, expand_composites: bool = False) -> Any:
    """Rebuild ``structure`` with the leaves of ``flat_sequence`` (in ``flatten``'s order).

    Example:
        >>> import tapejax as tf
        >>> tf.nest.pack_sequence_as({"b": 0, "a": 0}, [1, 2])
        {'b': 2, 'a': 1}
    """
    if not _is_seq(flat_sequence):
        raise TypeError(f"Attempted to pack value:\n  {flat_sequence}\ninto a structure, but found incompatible type "
                        f"`{type(flat_sequence)}` instead.")
    flat = list(flat_sequence)
    if not _is_seq(structure, expand_composites):
        if len(flat) != 1:
            raise ValueError(f"The target structure is of type `{type(structure)}`\n  {structure}\nHowever the input is a "
                             f"sequence ({type(flat_sequence)}) of length {len(flat)}.\n  {flat_sequence}\nnest cannot "
                             "guarantee that it is safe to map one to the other.")
        return flat[0]
    n = len(flatten(structure, expand_composites))
    if n != len(flat):
        raise ValueError(f"Could not pack sequence. Structure had {n} atoms, but flat_sequence had {len(flat)} items.  "
                         f"Structure: {structure}, flat_sequence: {flat_sequence}.")
    it = iter(flat)

    def build(x: Any) -> Any:
        if not _is_seq(x, expand_composites):
            return next(it)
        return _rebuild(x, [build(c) for c in _children(x, expand_composites)], expand_composites)

    return build(structure)
