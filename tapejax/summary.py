"""``tf.summary``: TensorBoard event files (see ``tapejax._tf._summary``).

Example:
    >>> import tapejax as tf, tempfile
    >>> writer = tf.summary.create_file_writer(tempfile.mkdtemp())
    >>> with writer.as_default(step=0):
    ...     ok = tf.summary.scalar("loss", 0.25)
    >>> bool(ok)
    True
"""

from __future__ import annotations

import types as _pytypes

from ._tf._summary import (
    SummaryWriter,
    audio,
    create_file_writer,
    create_noop_writer,
    flush,
    get_step,
    graph,
    histogram,
    image,
    record_if,
    scalar,
    set_step,
    should_record_summaries,
    summary_scope,
    text,
    trace_export,
    trace_off,
    trace_on,
    write,
)

experimental = _pytypes.ModuleType("tapejax.summary.experimental", "tf.summary.experimental: the default step.")
experimental.get_step = get_step  # type: ignore[attr-defined]
experimental.set_step = set_step  # type: ignore[attr-defined]
experimental.summary_scope = summary_scope  # type: ignore[attr-defined]

__all__ = ["SummaryWriter", "audio", "image", "create_file_writer", "create_noop_writer", "experimental", "flush", "graph", "histogram",
           "record_if", "scalar", "should_record_summaries", "text", "trace_export", "trace_off", "trace_on", "write"]
