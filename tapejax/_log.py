"""The ``tapejax`` logger: TF's warning texts, printed the way ``tf.get_logger()`` prints them.

TF's logger gets its own stderr handler (``WARNING:tensorflow:...``) unless the program has
configured the root logger; without one, Python's last-resort handler would print the bare
message. ``log_first_n`` counts per message and per *user* call site, as TF's ``logging.log_first_n``
does (its logger's ``findCaller`` skips TF's own frames): the same warning from two lines of a
program is printed up to ``n`` times for each line.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

__all__ = ["get_logger", "log_first_n", "vlog"]

_lock = threading.Lock()
_logger: logging.Logger | None = None
_counts: dict[tuple, int] = {}


def get_logger() -> logging.Logger:
    """``logging.getLogger("tapejax")``, with TF's handler setup on first use."""
    global _logger
    if _logger is not None:
        return _logger
    with _lock:
        if _logger is None:
            logger = logging.getLogger("tapejax")
            # As TF: no handler of ours when the program configured the root logger
            # (its handlers print our records; two would print them twice).
            if not logging.getLogger().handlers and not logger.handlers:
                handler = logging.StreamHandler(sys.stderr)
                handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT, None))
                logger.addHandler(handler)
            _logger = logger
    return _logger


def _user_site() -> tuple:
    import os

    pkg = os.path.dirname(os.path.abspath(__file__))
    f: Any = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(pkg):
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno) if f is not None else ("", 0)


def log_first_n(msg: str, n: int, *args: Any) -> None:
    """Log ``msg % args`` as a warning the first ``n`` times for this message and user line."""
    key = (msg, _user_site())
    with _lock:
        c = _counts.get(key, 0)
        if c >= n:
            return
        _counts[key] = c + 1
    get_logger().warning(msg, *args)


def vlog(msg: str, *args: Any) -> None:
    """TF's ``logging.vlog(1, ...)``: a record at level 1, below DEBUG, which no default setup prints."""
    get_logger().log(1, msg, *args)
