"""tapejax's warnings: TF's texts, printed as often as TF prints them, in TF's format.

The same program runs under ``import tensorflow as tf`` and ``import tapejax as tf`` in fresh
processes (log counts are per process); the warning lines on stderr must agree once
``WARNING:tensorflow:`` reads ``WARNING:tapejax:``.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = r'''
import sys
if sys.argv[1] == "tf":
    import tensorflow as tf
else:
    import tapejax as tf
for _ in range(7):                         # TF: at most 5 per call site
    with tf.GradientTape() as t:
        t.watch(tf.constant(1))
for _ in range(3):                         # TF: once per process
    with tf.GradientTape(persistent=True) as t:
        x = tf.constant(2.0)
        t.watch(x)
        y = x * x
        t.gradient(y, x)
for _ in range(7):                         # a second watch site: its own 5; integer target/source: not printed
    with tf.GradientTape() as t:
        x = tf.constant(2)
        t.watch(x)
        y = x * x
    t.gradient(y, x)
for _ in range(6):
    tf.autodiff.ForwardAccumulator(tf.constant(1), tf.constant(1))
'''


def _warnings(lib: str, tmp_path: Path) -> collections.Counter:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(script), lib], env=env, capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln.replace("WARNING:tensorflow:", "WARNING:tapejax:") for ln in r.stderr.splitlines()
             if ln.startswith(("WARNING:tensorflow:", "WARNING:tapejax:"))]
    return collections.Counter(lines)


def test_tape_warnings_match_tf_in_text_count_and_format(real_tf, tmp_path):
    theirs = _warnings("tf", tmp_path)
    ours = _warnings("tapejax", tmp_path)
    assert sum(theirs.values()) == 16, theirs  # the program's premise: 10 + 1 + 5 lines in TF 2.21
    assert ours == theirs


MISSING_GRADS = r'''
import sys
if sys.argv[1] == "tf":
    import tensorflow as tf
else:
    import tapejax as tf
a, b, c = tf.Variable(1.0, name="a"), tf.Variable(2.0, name="b"), tf.Variable(3.0, name="c")
opt = tf.keras.optimizers.SGD(0.1)
for _ in range(3):                         # one call site, three calls
    with tf.GradientTape() as t:
        loss = a * 2.0
    opt.apply_gradients(zip(t.gradient(loss, [a, b, c]), [a, b, c]))
with tf.GradientTape() as t:               # a second call site
    loss = a * 2.0
opt.apply_gradients(zip(t.gradient(loss, [a, b, c]), [a, b, c]))
with tf.GradientTape() as t:               # another set of missing variables: another text
    loss = b * 2.0
opt.apply_gradients(zip(t.gradient(loss, [a, b, c]), [a, b, c]))
print("a =", float(a.numpy()), "b =", float(b.numpy()))
'''


def _missing_grad_lines(lib: str, tmp_path: Path) -> tuple:
    script = tmp_path / "missing.py"
    script.write_text(MISSING_GRADS)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(script), lib], env=env, capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    texts = [ln[ln.index("Gradients do not exist"):] for ln in r.stderr.splitlines() if "Gradients do not exist" in ln]
    return collections.Counter(texts), r.stdout


def test_missing_gradient_warning_printed_as_often_as_tf(real_tf, tmp_path):
    theirs, their_out = _missing_grad_lines("tf", tmp_path)
    ours, our_out = _missing_grad_lines("tapejax", tmp_path)
    assert sum(theirs.values()) == 2, theirs  # TF 2.21: once per distinct text, whatever the call site
    assert ours == theirs
    assert our_out == their_out
