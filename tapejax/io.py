"""``tf.io``: ``decode_raw`` (see ``tapejax._ops.strings``), ``read_file`` and ``write_file``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._core._recorder import Tensor
from ._ops._tensor import convert_to_tensor
from ._tf._namespace import populate as _populate


def read_file(filename: Any, name: str | None = None) -> Tensor:
    """The contents of a file as a scalar string tensor, as ``tf.io.read_file``.

    Example:
        >>> import tempfile, tapejax as tf
        >>> path = tempfile.mktemp()
        >>> tf.io.write_file(path, "hello")
        >>> tf.io.read_file(path).numpy()
        b'hello'
    """
    path = convert_to_tensor(filename, dtype="string")._value.item().decode()
    with open(path, "rb") as f:
        return Tensor(np.asarray(f.read(), dtype=object))


def write_file(filename: Any, contents: Any, name: str | None = None) -> None:
    """Write a scalar string tensor's bytes to a file, as ``tf.io.write_file``."""
    path = convert_to_tensor(filename, dtype="string")._value.item().decode()
    with open(path, "wb") as f:
        f.write(convert_to_tensor(contents, dtype="string")._value.item())


# Computed at import (from the op table): the generated stub io.pyi spells these names out for type checkers.
__all__ = [*_populate(globals(), "io"), "read_file", "write_file"]  # pyright: ignore[reportUnsupportedDunderAll]
