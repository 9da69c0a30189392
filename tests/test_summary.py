"""tf.summary (``_tf/_summary.py``): the event files read back record by record (TFRecord framing,
tensorboardX's protos), summaries inside compiled functions, and tf.profiler."""

from __future__ import annotations

import glob
import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax as tf


def read_events(logdir):
    from tensorboardX.proto import event_pb2

    out = []
    for path in sorted(glob.glob(os.path.join(str(logdir), "events.out.tfevents.*"))):
        with open(path, "rb") as fh:
            data = fh.read()
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack("<Q", data[pos:pos + 8])
            body = data[pos + 12:pos + 12 + n]
            pos += 12 + n + 4
            out.append(event_pb2.Event.FromString(body))
    return out


def values(logdir):
    rows = []
    for e in read_events(logdir):
        for v in e.summary.value:
            t = v.tensor
            if t.string_val:
                val = list(t.string_val)
            else:
                dt = {1: np.float32, 2: np.float64, 3: np.int32}[t.dtype]
                shape = [d.size for d in t.tensor_shape.dim]
                val = np.frombuffer(t.tensor_content, dt).reshape(shape).tolist()
            rows.append((e.step, v.tag, v.metadata.plugin_data.plugin_name, val))
    return rows


def test_scalar_histogram_text_written_and_read_back(tmp_path):
    w = tf.summary.create_file_writer(str(tmp_path))
    assert not bool(tf.summary.scalar("x", 1.0, step=0))  # no default writer
    with w.as_default(step=2):
        assert bool(tf.summary.scalar("loss", 0.5))
        tf.summary.text("note", "hi")
        tf.summary.histogram("h", [0.0, 1.0, 1.0, 4.0], buckets=4)
        with tf.name_scope("eval"):
            tf.summary.scalar("acc", 0.75, step=3)
    rows = values(tmp_path)
    assert rows[0] == (2, "loss", "scalars", 0.5)
    assert rows[1] == (2, "note", "text", [b"hi"])
    assert rows[2] == (2, "h", "histograms", [[0.0, 1.0, 1.0], [1.0, 2.0, 2.0], [2.0, 3.0, 0.0], [3.0, 4.0, 1.0]])
    assert rows[3] == (3, "eval/acc", "scalars", 0.75)
    assert read_events(tmp_path)[0].file_version == "brain.Event:2"
    w.close()


def test_step_rules(tmp_path):
    w = tf.summary.create_file_writer(str(tmp_path))
    with w.as_default():
        with pytest.raises(ValueError, match="No step set"):
            tf.summary.scalar("a", 1.0)
        tf.summary.experimental.set_step(5)
        assert tf.summary.experimental.get_step() == 5
        tf.summary.scalar("a", 1.0)
        with tf.summary.record_if(lambda: False):
            assert not bool(tf.summary.scalar("b", 1.0))
            assert not bool(tf.summary.should_record_summaries())
        with pytest.raises(ValueError, match="scalar"):
            tf.summary.scalar("c", [1.0, 2.0])
    tf.summary.experimental.set_step(None)
    assert [r[:2] for r in values(tmp_path)] == [(5, "a")]
    w.close()


def test_summaries_in_a_compiled_step_are_written_once_per_call(tmp_path):
    w = tf.summary.create_file_writer(str(tmp_path))
    step = tf.Variable(0)
    x = tf.Variable(1.0)

    @tf.function
    def train(scale):
        with tf.GradientTape() as tape:
            loss = x * x * scale
        with w.as_default():
            tf.summary.scalar("loss", loss, step=step)
        step.assign_add(1)
        return loss

    with tf.GradientTape() as outer:
        for s in [1.0, 2.0, 3.0]:
            train(tf.constant(s))
    w.flush()
    rows = values(tmp_path)
    assert [(r[0], r[3]) for r in rows] == [(0, 1.0), (1, 2.0), (2, 3.0)]
    w.close()


def test_trace_export_and_noop_writer(tmp_path):
    w = tf.summary.create_file_writer(str(tmp_path))
    f = tf.function(lambda a: a * 2)
    tf.summary.trace_on(graph=True)
    f(tf.constant(1.0))
    with w.as_default():
        tf.summary.trace_export("f", step=0)
    w.flush()
    graphs = [e for e in read_events(tmp_path) if e.graph_def]
    assert len(graphs) == 1
    noop = tf.summary.create_noop_writer()
    with noop.as_default(step=0):
        assert not bool(tf.summary.scalar("x", 1.0))
    w.close()


def test_profiler_start_stop(tmp_path):
    tf.profiler.experimental.start(str(tmp_path))
    with pytest.raises(tf.errors.AlreadyExistsError):
        tf.profiler.experimental.start(str(tmp_path))
    with tf.profiler.experimental.Trace("train", step_num=1):
        tf.constant(1.0) + 1.0
    tf.profiler.experimental.stop()
    with pytest.raises(tf.errors.UnavailableError):
        tf.profiler.experimental.stop()
    assert glob.glob(os.path.join(str(tmp_path), "plugins", "profile", "*", "*.xplane.pb"))


@settings(max_examples=60, deadline=None)
@given(data=st.lists(st.floats(-100, 100, allow_nan=False, width=32), max_size=20), buckets=st.integers(1, 12))
def test_histogram_buckets_count_every_value(data, buckets):
    from tapejax._tf._summary import _histogram_buckets

    h = _histogram_buckets(np.asarray(data, np.float32), buckets)
    assert h.shape == (buckets, 3)
    assert h[:, 2].sum() == len(data)
    if data and max(data) > min(data):
        x = np.asarray(data, np.float32).astype(np.float64)
        assert h[0, 0] == x.min() and h[-1, 1] == x.max()
        # each value lies in the bucket it is counted in (TF: floor((x - min) / width), the last closed)
        width = (x.max() - x.min()) / buckets
        idx = np.minimum(np.floor((x - x.min()) / width).astype(int), buckets - 1)
        assert np.array_equal(np.bincount(idx, minlength=buckets), h[:, 2])
