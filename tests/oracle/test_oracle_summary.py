"""tf.summary against real TF 2.21: the same summaries written by TF and by tapejax are read back
with TF's own ``summary_iterator`` and must agree (steps, tags, plugin names, dtypes, values).
TF's tf.summary needs the ``tensorboard`` package (the oracle extra)."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import tapejax


def _program(tf, logdir):
    out = [bool(tf.summary.scalar("no_writer", 1.0, step=0))]
    w = tf.summary.create_file_writer(logdir)
    try:
        with w.as_default():
            tf.summary.scalar("a", 1.0)
    except Exception as e:  # noqa: BLE001
        out.append(type(e).__name__)
    with w.as_default(step=3):
        out.append(bool(tf.summary.scalar("loss", 0.5)))
        out.append(int(tf.summary.experimental.get_step()))
        tf.summary.histogram("h", [1.0, 2.0, 2.0, 5.0], step=4)
        tf.summary.histogram("h_int", tf.constant([3, 1, 4, 1, 5, 9, 2, 6]), step=4, buckets=5)
        tf.summary.histogram("h_single", [3.0, 3.0], step=4)
        tf.summary.histogram("h_empty", tf.zeros([0]), step=4)
        tf.summary.text("t", "hello", step=5)
        with tf.name_scope("train"):
            tf.summary.scalar("scoped", tf.constant(2, tf.int32), step=6)
        out.append(bool(tf.summary.should_record_summaries()))
        with tf.summary.record_if(False):
            out.append(bool(tf.summary.scalar("skip", 1.0)))
            out.append(bool(tf.summary.should_record_summaries()))
        try:
            tf.summary.scalar("bad", [1.0, 2.0])
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
    out.append(tf.summary.experimental.get_step())
    step = tf.Variable(10, dtype=tf.int64 if tf is not tapejax else tf.int32)

    @tf.function
    def f(x):
        with w.as_default():
            tf.summary.scalar("inside", x * 2.0, step=step)
            tf.summary.histogram("inside_h", x * tf.ones([3]), step=step)
        step.assign_add(1)
        return x

    f(tf.constant(2.0))
    f(tf.constant(3.0))
    w.flush()
    return out


def _events(real_tf, logdir):
    rows = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        for e in real_tf.compat.v1.train.summary_iterator(path):
            for v in e.summary.value:
                a = real_tf.make_ndarray(v.tensor)
                vals = a.tolist()
                if a.dtype.kind == "f":
                    vals = np.round(a.astype(np.float64), 6).tolist()
                rows.append((e.step, v.tag, v.metadata.plugin_data.plugin_name, a.dtype.name, vals))
    return rows


@pytest.fixture
def tf_with_tensorboard(real_tf):
    pytest.importorskip("tensorboard", reason="TF's tf.summary needs the tensorboard package (oracle extra)")
    return real_tf


def test_summaries_match_tf(tf_with_tensorboard, tmp_path):
    real_tf = tf_with_tensorboard
    want_out = _program(real_tf, str(tmp_path / "tf"))
    got_out = _program(tapejax, str(tmp_path / "tj"))
    assert got_out == want_out
    want = _events(real_tf, str(tmp_path / "tf"))
    got = _events(real_tf, str(tmp_path / "tj"))
    assert got == want


def test_trace_export_writes_a_graph(tf_with_tensorboard, tmp_path):
    real_tf = tf_with_tensorboard
    tf = tapejax
    w = tf.summary.create_file_writer(str(tmp_path))

    @tf.function
    def double(a):
        return a + a

    tf.summary.trace_on(graph=True)
    double(tf.constant(1))
    with w.as_default():
        tf.summary.trace_export(name="double_trace", step=0)
    w.flush()
    graphs = []
    for path in glob.glob(str(tmp_path / "events.out.tfevents.*")):
        for e in real_tf.compat.v1.train.summary_iterator(path):
            if e.graph_def:
                gd = real_tf.compat.v1.GraphDef.FromString(e.graph_def)
                graphs.append([(n.name, n.op, list(n.input)) for n in gd.node])
    assert graphs == [[("a", "Placeholder", []), ("add", "AddV2", ["a", "a"]), ("Identity", "Identity", ["add"])]]
