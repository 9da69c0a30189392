"""``tf.Module``: a named container that finds the variables and submodules in its attributes."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

from .._core._recorder import VariableBase
from ._name_scope import name_scope
from ._nest import flatten_with_tuple_paths

__all__ = ["Module"]

# Called as hook(module, name, value) after an attribute is set (deferred checkpoint restoration).
_SETATTR_HOOKS: list = []

_CAMEL_TO_SNAKE = re.compile(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))")
_VALID_IDENTIFIER = re.compile(r"^[a-zA-Z_]([a-zA-Z0-9_])*$")


def camel_to_snake(value: str) -> str:
    return _CAMEL_TO_SNAKE.sub(r"_\1", value).lower()


class Module:
    """Base class of models: variables and submodules held in attributes (also inside
    lists, tuples and dicts) are found by ``variables``, ``trainable_variables`` and
    ``submodules``, in TF's order: attributes sorted by name, then submodules breadth
    first, each object once.

    Example:
        >>> import tapejax as tf
        >>> class Dense(tf.Module):
        ...     def __init__(self, n_in, n_out, name=None):
        ...         super().__init__(name=name)
        ...         self.w = tf.Variable(tf.ones([n_in, n_out]), name="w")
        ...         self.b = tf.Variable(tf.zeros([n_out]), name="b")
        ...     def __call__(self, x):
        ...         return tf.matmul(x, self.w) + self.b
        >>> d = Dense(3, 2, name="dense")
        >>> [v.name for v in d.trainable_variables]
        ['b:0', 'w:0']
        >>> d(tf.ones([1, 3])).numpy().tolist()
        [[3.0, 3.0]]
    """

    _TF_MODULE_IGNORED_PROPERTIES: frozenset = frozenset()

    def __init__(self, name: str | None = None):
        if name is None:
            name = camel_to_snake(type(self).__name__)
        elif not isinstance(name, str) or not _VALID_IDENTIFIER.match(name):
            raise ValueError(f"{name!r} is not a valid module name. Module names must be valid Python identifiers "
                             "(e.g. a valid class name).")
        self._name = name
        # TF enters the scope once to resolve the full name (inside a parent's scope: parent/name/).
        with name_scope(name) as scope_name:
            self._name_scope = name_scope(scope_name)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        for hook in _SETATTR_HOOKS:
            hook(self, name, value)

    @property
    def name(self) -> str:
        """The name given to (or derived for) this module, without parent scopes."""
        return self._name

    @property
    def name_scope(self) -> name_scope:
        """The module's ``tf.name_scope`` (``with self.name_scope: ...``)."""
        return self._name_scope

    @property
    def variables(self) -> tuple:
        """Every variable of this module and its submodules (attributes in name order, then submodules)."""
        return tuple(self._flatten(predicate=_is_variable, expand_composites=True))

    @property
    def trainable_variables(self) -> tuple:
        """The trainable ones among ``variables``."""
        return tuple(self._flatten(predicate=_is_trainable, expand_composites=True))

    @property
    def non_trainable_variables(self) -> tuple:
        """The non-trainable ones among ``variables``."""
        return tuple(self._flatten(predicate=_is_non_trainable, expand_composites=True))

    @property
    def submodules(self) -> tuple:
        """Every module reachable through attributes, breadth first."""
        return tuple(self._flatten(predicate=_is_module))

    def _flatten(self, recursive: bool = True, predicate: Callable | None = None,
                 attribute_traversal_key: Callable | None = None, with_path: bool = False,
                 expand_composites: bool = False) -> Iterator[Any]:
        return _flatten_module(self, recursive, predicate or (lambda _: True), attribute_traversal_key,
                               self._TF_MODULE_IGNORED_PROPERTIES, with_path, expand_composites, (), None, None)

    @classmethod
    def with_name_scope(cls, method: Callable) -> Callable:
        """Decorator: run the method inside the module's name scope.

        Example:
            >>> import tapejax as tf
            >>> class M(tf.Module):
            ...     @tf.Module.with_name_scope
            ...     def __call__(self, x):
            ...         if not hasattr(self, "w"):
            ...             self.w = tf.Variable(x)
            ...         return self.w * x
            >>> m = M()
            >>> _ = m(tf.constant(2.0))
            >>> m.w.name
            'm/Variable:0'
        """

        @functools.wraps(method)
        def method_with_name_scope(self: Any, *args: Any, **kwargs: Any) -> Any:
            with self.name_scope:
                return method(self, *args, **kwargs)

        return method_with_name_scope


def _is_variable(x: Any) -> bool:
    return isinstance(x, VariableBase)


def _is_trainable(x: Any) -> bool:
    return isinstance(x, VariableBase) and bool(getattr(x, "trainable", False))


def _is_non_trainable(x: Any) -> bool:
    return isinstance(x, VariableBase) and not bool(getattr(x, "trainable", False))


def _is_module(x: Any) -> bool:
    return isinstance(x, Module)


def _flatten_module(module: Any, recursive: bool, predicate: Callable, key: Callable | None, ignore: frozenset,
                    with_path: bool, expand: bool, module_path: tuple, seen: set | None,
                    stack: list | None) -> Iterator[Any]:
    # TF's module._flatten_module: one pass over this module's attributes (sorted by
    # name; a value reached twice is yielded once), then each submodule in turn, with
    # back edges of a cycle not followed.
    module_id = id(module)
    if seen is None:
        seen = {module_id}
    if stack is None:
        stack = []
    if module_id in stack:
        recursive = False
    attrs = vars(module)
    submodules = []
    for name in sorted(attrs, key=key):
        if name in ignore:
            continue
        prop = attrs[name]
        try:
            leaves = flatten_with_tuple_paths(prop, expand_composites=expand)
        except Exception as cause:
            raise ValueError(f"Error processing property {name!r} of {prop!r}") from cause
        for leaf_path, leaf in leaves:
            leaf_path = (name, *leaf_path)
            if not with_path:
                if id(leaf) in seen:
                    continue
                seen.add(id(leaf))
            if predicate(leaf):
                yield (module_path + leaf_path, leaf) if with_path else leaf
            if recursive and _is_module(leaf):
                submodules.append((module_path + leaf_path, leaf))
    stack.append(module_id)
    for path, sub in submodules:
        yield from _flatten_module(sub, recursive, predicate, key, sub._TF_MODULE_IGNORED_PROPERTIES, with_path,
                                   expand, path, seen, stack)
    stack.pop()
