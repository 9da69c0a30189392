"""``tf.name_scope``: the per-thread scope prefix that names variables (``outer/w:0``)."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["current_scope", "name_scope"]


class _Scope(threading.local):
    # TF keeps the eager scope name on its per-thread context.
    def __init__(self) -> None:
        self.name = ""


_scope = _Scope()


def current_scope() -> str:
    """The active scope prefix ("" or ending in "/")."""
    return _scope.name


class name_scope:
    """A context manager that prefixes the names of variables created inside it.

    TF 2's eager rules: scopes nest (``a/b/``), a name ending in ``/`` is an
    absolute scope, ``""`` resets to the root, and names are not uniquified.

    Example:
        >>> import tapejax as tf
        >>> with tf.name_scope("outer") as scope:
        ...     v = tf.Variable(1.0, name="w")
        >>> scope, v.name
        ('outer/', 'outer/w:0')
    """

    __slots__ = ("_exit_fns", "_name")

    def __init__(self, name: Any) -> None:
        if not isinstance(name, str):
            raise ValueError("name for name_scope must be a string.")
        self._name = name
        self._exit_fns: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def __enter__(self) -> str:
        old = _scope.name
        name = self._name
        if not name:
            new = ""
        elif name[-1] == "/":
            new = name
        else:
            new = old + name + "/"
        _scope.name = new
        self._exit_fns.append(old)
        return new

    def __exit__(self, *exc: object) -> None:
        _scope.name = self._exit_fns.pop()
