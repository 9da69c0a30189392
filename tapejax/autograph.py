"""``tf.autograph``: the converter ``tapejax.function`` applies to Python control flow.

``to_code`` shows the generated source; ``experimental.do_not_convert`` marks a
function autograph must call unconverted. The converter itself lives in
``tapejax._tf._autograph`` (see its module docstring for the rules).

Example:
    >>> import tapejax as tf
    >>> def f(x):
    ...     while x > 1:
    ...         x = x / 2
    ...     return x
    >>> "while_stmt" in tf.autograph.to_code(f)
    True
"""

from __future__ import annotations

import types

from ._tf._autograph import AutoGraphWarning, do_not_convert, set_loop_options, to_code, to_graph

experimental = types.SimpleNamespace(do_not_convert=do_not_convert, set_loop_options=set_loop_options)

__all__ = ["to_code", "to_graph", "experimental", "AutoGraphWarning"]
