"""``tf.summary``: TensorBoard event files, and ``tf.profiler`` on JAX's profiler.

The event files are written with tensorboardX's synchronous ``EventsWriter`` (its record
format and protos; TF's file name ``events.out.tfevents.<time>.<host>.<pid>.<n>.v2``, flushed
every ``max_queue`` events, ``flush_millis``, ``flush()`` and on leaving ``as_default``). The
summaries in them are TF 2's own: a scalar is a float32 tensor with the ``scalars`` plugin, a
histogram TF's ``[buckets, 3]`` float64 tensor of (left edge, right edge, count) with the
``histograms`` plugin (TF's bucketing), text a string tensor with the ``text`` plugin, so
TensorBoard and ``tf.compat.v1.train.summary_iterator`` read them as TF's. Inside a compiled
``tapejax.function`` a summary is written on every call, through an ordered
``jax.debug.callback`` (as ``tf.print``), and never again when a tape replays the program.
``trace_on``/``trace_export`` write the ``ConcreteFunction.graph`` of each function traced in
between (see ``_tf/_graph.py``: the jaxpr's equations).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import jax
import jax.core
import numpy as np

from .. import errors
from .._core import _recorder as _core
from .._core._recorder import Tensor, VariableBase
from .._ops._tensor import convert_to_tensor
from . import _function, _name_scope

__all__ = [
    "SummaryWriter", "audio", "image", "create_file_writer", "create_noop_writer", "flush", "graph", "histogram", "record_if",
    "scalar", "should_record_summaries", "text", "trace_export", "trace_off", "trace_on", "write",
    "get_step", "set_step", "summary_scope", "profiler_start", "profiler_stop", "ProfilerOptions", "Trace",
    "Profile",
]

_state = threading.local()
_global = {"step": None}
_WRITER_COUNT = itertools.count()


def _writers() -> list:
    if not hasattr(_state, "writers"):
        _state.writers = []
    return _state.writers


def _conditions() -> list:
    if not hasattr(_state, "conditions"):
        _state.conditions = []
    return _state.conditions


def _tbx() -> Any:
    try:
        import tensorboardX
        from tensorboardX.proto import summary_pb2, tensor_pb2, tensor_shape_pb2  # noqa: F401
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ImportError("tf.summary writes TensorBoard event files with tensorboardX: pip install tensorboardX") from e
    return tensorboardX


def _pb2(name: str) -> Any:
    """tensorboardX's generated protobuf module ``name`` (``summary_pb2``, ...), imported on first
    use like the writer. Typed ``Any`` on purpose: protoc's Python modules create their message
    classes at import (into ``globals()``) and tensorboardX ships no stubs for them, so a type
    checker sees no ``Event``/``Summary``/... in them."""
    return importlib.import_module(f"tensorboardX.proto.{name}")


def _close_quietly(w: Any) -> None:
    if w is not None:
        try:
            w.close()
        except (OSError, ValueError):
            pass


class SummaryWriter:
    """Writes summaries to an event file in ``logdir`` (``tf.summary.create_file_writer``).

    Example:
        >>> import tapejax as tf, tempfile
        >>> w = tf.summary.create_file_writer(tempfile.mkdtemp())
        >>> with w.as_default(step=1):
        ...     bool(tf.summary.scalar("loss", 0.5))
        True
        >>> w.close()
    """

    def __init__(self, logdir: str | None, max_queue: int | None = None, flush_millis: int | None = None,
                 filename_suffix: str | None = None):
        self._logdir = logdir
        self._writer = None
        self._lock = threading.Lock()
        self._max_queue = 10 if max_queue is None else int(max_queue)
        self._flush_s = 120.0 if flush_millis is None else flush_millis / 1000
        self._pending = 0
        self._last_flush = time.time()
        if logdir is not None:
            _tbx()
            from tensorboardX.event_file_writer import EventsWriter

            os.makedirs(str(logdir), exist_ok=True)
            suffix = f".{os.getpid()}.{next(_WRITER_COUNT)}" + (".v2" if filename_suffix is None else filename_suffix)
            self._writer = EventsWriter(os.path.join(str(logdir), "events"), suffix)
        # As TF's writer: a writer that is garbage-collected flushes and closes its file.
        self._finalizer = weakref.finalize(self, _close_quietly, self._writer)

    @contextlib.contextmanager
    def as_default(self, step: Any = None) -> Iterator[SummaryWriter]:
        """Make this the default writer inside the ``with`` block (and ``step`` its default step)."""
        _writers().append(self)
        old = _global["step"]
        if step is not None:
            _global["step"] = step
        try:
            yield self
        finally:
            _writers().pop()
            if step is not None:
                _global["step"] = old
            self.flush()

    def set_as_default(self, step: Any = None) -> None:
        """Make this the default writer from now on."""
        _writers().insert(0, self) if _writers() else _writers().append(self)
        if step is not None:
            _global["step"] = step

    def init(self) -> None:
        return None

    def flush(self) -> None:
        """Write the pending summaries to disk."""
        if self._writer is not None:
            with self._lock:
                self._writer.flush()
                self._pending = 0
                self._last_flush = time.time()

    def close(self) -> None:
        """Flush and close the event file (later summaries are dropped)."""
        if self._writer is not None:
            with self._lock:
                self._writer = None
                self._finalizer()

    def _add(self, value: Any, step: int) -> None:
        event_pb2 = _pb2("event_pb2")
        summary_pb2 = _pb2("summary_pb2")

        self._add_event(event_pb2.Event(wall_time=time.time(), step=int(step),
                                        summary=summary_pb2.Summary(value=[value])))

    def _add_event(self, event: Any) -> None:
        with self._lock:
            if self._writer is None:
                return
            self._writer.write_event(event)
            self._pending += 1
            now = time.time()
            if self._pending >= self._max_queue or now - self._last_flush >= self._flush_s:
                self._writer.flush()
                self._pending = 0
                self._last_flush = now


def create_file_writer(logdir: Any, max_queue: int | None = None, flush_millis: int | None = None,
                       filename_suffix: str | None = None, name: str | None = None, **_: Any) -> SummaryWriter:
    """A ``SummaryWriter`` for the event file in ``logdir`` (created if missing)."""
    return SummaryWriter(logdir, max_queue, flush_millis, filename_suffix)


def create_noop_writer() -> SummaryWriter:
    """A writer that writes nothing."""
    return SummaryWriter(None)


def flush(writer: SummaryWriter | None = None, name: str | None = None) -> None:
    """Flush ``writer`` (default: the default writer)."""
    w = writer if writer is not None else (_writers()[-1] if _writers() else None)
    if w is not None:
        w.flush()


def set_step(step: Any) -> None:
    """The default step of the summaries (an int, tensor or variable), ``tf.summary.experimental.set_step``."""
    _global["step"] = step


def get_step() -> Any:
    return _global["step"]


@contextlib.contextmanager
def record_if(condition: Any) -> Iterator[None]:
    """Write summaries only where ``condition`` (a bool, a bool tensor or a callable) holds."""
    _conditions().append(condition)
    try:
        yield
    finally:
        _conditions().pop()


def _recording() -> bool:
    if not _writers() or _writers()[-1]._writer is None:
        return False
    for c in _conditions():
        v = c() if callable(c) else c
        if isinstance(v, Tensor | VariableBase):
            v = v._value
            if isinstance(v, jax.core.Tracer):
                raise TypeError("tf.summary.record_if with a traced condition inside a compiled tapejax.function is "
                                "not supported: pass a Python bool or a callable.")
        if not bool(np.asarray(v)):
            return False
    return True


def should_record_summaries() -> Tensor:
    """Whether a summary written now would be recorded (a default writer, and every ``record_if`` true)."""
    return Tensor(jax.numpy.asarray(_recording()))


@contextlib.contextmanager
def summary_scope(name: str, default_name: str | None = None, values: Any = None) -> Iterator[tuple]:
    """``(tag, scope)`` for a summary named ``name`` under the current name scope."""
    tag = _tag(name or default_name or "summary")
    yield tag, tag + "/"


def _tag(name: str) -> str:
    scope = _name_scope.current_scope()
    return f"{scope}{name}" if scope else name


def _tensor_proto(a: np.ndarray) -> Any:
    tensor_pb2 = _pb2("tensor_pb2")
    tensor_shape_pb2 = _pb2("tensor_shape_pb2")

    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in a.shape])
    if a.dtype == object:
        flat = [x if isinstance(x, bytes) else str(x).encode() for x in a.reshape(-1)]
        return tensor_pb2.TensorProto(dtype=7, tensor_shape=shape, string_val=flat)  # DT_STRING
    codes = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3, np.dtype(np.uint8): 4,
             np.dtype(np.int16): 5, np.dtype(np.int8): 6, np.dtype(np.int64): 9, np.dtype(np.bool_): 10,
             np.dtype(np.float16): 19}
    if a.dtype not in codes:
        a = a.astype(np.float32)
    return tensor_pb2.TensorProto(dtype=codes[a.dtype], tensor_shape=shape,
                                  tensor_content=np.ascontiguousarray(a).tobytes())


def _value(tag: str, a: np.ndarray, plugin: str, description: str | None, content: bytes = b"") -> Any:
    summary_pb2 = _pb2("summary_pb2")

    meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
        plugin_name=plugin, content=content))
    if description:
        meta.summary_description = description
    return summary_pb2.Summary.Value(tag=tag, metadata=meta, tensor=_tensor_proto(a))


def _histogram_buckets(data: np.ndarray, bucket_count: int) -> np.ndarray:
    # TF 2's histogram: bucket_count equal-width buckets over [min, max] (the last one closed), in float64.
    x = np.asarray(data, dtype=np.float64).reshape(-1)
    if bucket_count == 0 or x.size == 0:
        return np.zeros((bucket_count, 3), np.float64)
    lo, hi = x.min(), x.max()
    if hi - lo == 0:
        starts = np.full(bucket_count, lo)
        counts = np.zeros(bucket_count)
        counts[-1] = x.size
        return np.stack([starts, starts, counts], axis=1)
    width = (hi - lo) / bucket_count
    idx = np.minimum(np.floor((x - lo) / width).astype(np.int64), bucket_count - 1)
    counts = np.bincount(idx, minlength=bucket_count).astype(np.float64)
    edges = np.linspace(lo, hi, bucket_count + 1)
    edges = np.concatenate([edges[:-1], [hi]])
    return np.stack([edges[:-1], edges[1:], counts], axis=1)


def _resolve_step(step: Any) -> Any:
    s = step if step is not None else _global["step"]
    if s is None:
        raise ValueError("No step set. Please specify one either through the `step` argument or through "
                         "tf.summary.experimental.set_step()")
    return s


def _emit(kind: str, name: str, data: Any, step: Any, description: str | None, **kw: Any) -> Tensor:
    if not _recording():
        return Tensor(jax.numpy.asarray(False))
    writer = _writers()[-1]
    step = _resolve_step(step)
    tag = _tag(name)
    d = data if isinstance(data, Tensor | VariableBase) else convert_to_tensor(data)
    s = step if isinstance(step, Tensor | VariableBase) else convert_to_tensor(step)
    if kind == "scalar" and d.shape.rank != 0:
        raise ValueError(f"Expected scalar shape for tensor {name!r}, saw shape: {d.shape}.")

    def write(value: Any, step_value: Any) -> None:
        a = np.asarray(value)
        if kind == "scalar":
            v = _value(tag, a.astype(np.float32), "scalars", description)
        elif kind == "histogram":
            v = _value(tag, _histogram_buckets(a, kw["buckets"]), "histograms", description)
        elif kind == "text":
            v = _value(tag, np.asarray(a, dtype=object), "text", description)
        else:
            v = _value(tag, a, kw.get("plugin", ""), description, kw.get("content", b""))
        writer._add(v, int(np.asarray(step_value)))

    dv, sv = d._value, s._value
    if isinstance(dv, jax.core.Tracer) or isinstance(sv, jax.core.Tracer):
        if type(dv).__name__ == "StrIds":
            raise TypeError("tf.summary.text of a string computed inside a compiled tapejax.function is not "
                            "supported: write it outside the function.")
        jax.debug.callback(write, dv, sv, ordered=True)
    else:
        write(dv, sv)
    return Tensor(jax.numpy.asarray(True))


def scalar(name: str, data: Any, step: Any = None, description: str | None = None) -> Tensor:
    """Write a scalar summary (TF's ``tf.summary.scalar``); True when it was written.

    Example:
        >>> import tapejax as tf, tempfile
        >>> bool(tf.summary.scalar("no_writer", 1.0, step=0))
        False
    """
    return _emit("scalar", name, data, step, description)


def histogram(name: str, data: Any, step: Any = None, buckets: int | None = None, description: str | None = None) -> Tensor:
    """Write a histogram of ``data`` (TF's buckets, 30 by default)."""
    return _emit("histogram", name, data, step, description, buckets=30 if buckets is None else int(buckets))


def text(name: str, data: Any, step: Any = None, description: str | None = None) -> Tensor:
    """Write a text summary (a string tensor)."""
    return _emit("text", name, data, step, description)


def write(tag: str, tensor: Any, step: Any = None, metadata: Any = None, name: str | None = None) -> Tensor:
    """Write ``tensor`` under ``tag`` with plugin ``metadata`` (a ``SummaryMetadata`` or its bytes)."""
    plugin, content = "", b""
    if metadata is not None:
        summary_pb2 = _pb2("summary_pb2")

        m = metadata if not isinstance(metadata, bytes) else summary_pb2.SummaryMetadata.FromString(metadata)
        plugin, content = m.plugin_data.plugin_name, m.plugin_data.content
    return _emit("write", tag, tensor, step, None, plugin=plugin, content=content)


# --- graphs and traces --------------------------------------------------------------------------

_trace: dict[str, Any] = {"on": False, "graphs": [], "profiler": None}


def _on_trace(function: Any, entry: Any) -> None:
    if _trace["on"]:
        concrete = entry.concrete or _function.ConcreteFunction(function, entry, *entry.spec_args)
        _trace["graphs"].append(concrete.graph)


def _graph_event(graphs: list) -> Any:
    event_pb2 = _pb2("event_pb2")
    graph_pb2 = _pb2("graph_pb2")
    node_def_pb2 = _pb2("node_def_pb2")

    nodes = []
    for g in graphs:
        prefix = f"{g.name}/" if len(graphs) > 1 else ""
        for op in g.get_operations():
            nd = op.node_def
            nodes.append(node_def_pb2.NodeDef(name=prefix + nd.name, op=nd.op, input=[prefix + i for i in nd.input]))
    gd = graph_pb2.GraphDef(node=nodes)
    return event_pb2.Event(wall_time=time.time(), graph_def=gd.SerializeToString())


def graph(graph_data: Any) -> bool:
    """Write a ``ConcreteFunction.graph`` to the default writer (``tf.summary.graph``)."""
    if not _recording():
        return False
    _writers()[-1]._add_event(_graph_event([graph_data]))
    return True


def trace_on(graph: bool = True, profiler: bool = False, profiler_outdir: str | None = None) -> None:
    """Start collecting the graphs of the functions traced from now on (and with ``profiler``, a
    JAX profile written to ``profiler_outdir``)."""
    if _core.state.tracing:
        return
    _trace["on"] = bool(graph)
    _trace["graphs"] = []
    if profiler:
        profiler_start(profiler_outdir or "logs")
        _trace["profiler"] = True


def trace_export(name: str, step: Any = None, profiler_outdir: str | None = None) -> None:
    """Write the collected graphs to the default writer and stop collecting."""
    if _recording() and _trace["graphs"]:
        _resolve_step(step)
        _writers()[-1]._add_event(_graph_event(_trace["graphs"]))
    trace_off()


def trace_off() -> None:
    """Stop collecting graphs (and stop the profiler ``trace_on`` started)."""
    _trace["on"] = False
    _trace["graphs"] = []
    if _trace["profiler"]:
        _trace["profiler"] = None
        profiler_stop()


_function.TRACE_LISTENERS.append(_on_trace)


# --- tf.profiler.experimental -------------------------------------------------------------------


class ProfilerOptions:
    """Accepted for TF compatibility; JAX's profiler takes no such levels."""

    def __init__(self, host_tracer_level: int = 2, python_tracer_level: int = 0, device_tracer_level: int = 1,
                 delay_ms: int | None = None):
        self.host_tracer_level = host_tracer_level
        self.python_tracer_level = python_tracer_level
        self.device_tracer_level = device_tracer_level
        self.delay_ms = delay_ms


def profiler_start(logdir: str, options: ProfilerOptions | None = None) -> None:
    """Start JAX's profiler, writing a TensorBoard profile under ``logdir`` (``tf.profiler.experimental.start``)."""
    try:
        jax.profiler.start_trace(str(logdir))
    except RuntimeError as e:
        raise errors.AlreadyExistsError(f"Another profiler is running. ({e})") from None


def profiler_stop(save: bool = True) -> None:
    """Stop the profiler and write its profile (``tf.profiler.experimental.stop``)."""
    try:
        jax.profiler.stop_trace()
    except RuntimeError as e:
        raise errors.UnavailableError(f"Cannot export profiling results. No profiler is running. ({e})") from None


class Trace(jax.profiler.TraceAnnotation):
    """A named region in the profile (``tf.profiler.experimental.Trace``)."""

    def __init__(self, name: str, **kwargs: Any):
        super().__init__(name, **{k: str(v) for k, v in kwargs.items()})


@contextlib.contextmanager
def Profile(logdir: str, options: ProfilerOptions | None = None) -> Iterator[None]:  # noqa: N802 - TF's name
    """Profile the ``with`` block (``tf.profiler.experimental.Profile``)."""
    profiler_start(logdir, options)
    try:
        yield
    finally:
        profiler_stop()


def image(name: str, data: Any, step: Any = None, max_outputs: int = 3, description: str | None = None) -> Tensor:
    """Not provided: raises NotImplementedError (PNG encoding is not part of tapejax)."""
    raise NotImplementedError("tf.summary.image is not provided by tapejax: write the images with tensorboardX's "
                              "SummaryWriter.add_images, or as a histogram/scalar summary.")


def audio(name: str, data: Any, sample_rate: Any, step: Any = None, max_outputs: int = 3, encoding: Any = None,
          description: str | None = None) -> Tensor:
    """Not provided: raises NotImplementedError (WAV encoding is not part of tapejax)."""
    raise NotImplementedError("tf.summary.audio is not provided by tapejax: write it with tensorboardX's "
                              "SummaryWriter.add_audio.")
