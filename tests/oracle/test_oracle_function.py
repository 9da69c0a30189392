"""tf.function against real TF (issue 18): each snippet runs with ``tf = tensorflow`` and with
``tf = tapejax``; values (dtype, shape, numbers), Python-side trace counts, the lines ``tf.print``
and ``print`` wrote (stdout and stderr, captured at the file-descriptor level: TF's tf.print writes
to stderr from C++), ``experimental_get_tracing_count`` and exception classes must agree.

A snippet takes the framework as ``tf`` and returns a structure. Lines it prints that matter start
with ``@`` (TF also writes its own log lines to stderr; those are ignored).
"""

from __future__ import annotations

import collections
import sys

import numpy as np
import pytest

import tapejax

CASES: list = []


def case(fn):
    CASES.append(fn)
    return fn


def norm(x):
    if hasattr(x, "numpy") and hasattr(x, "dtype") and hasattr(x, "shape"):
        kind = "Variable" if "Variable" in type(x).__name__ else "Tensor"
        return (kind, x.dtype.name, np.asarray(x.numpy()).tolist())
    if isinstance(x, list | tuple):
        return (type(x).__name__, [norm(v) for v in x])
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items()}
    if isinstance(x, float):
        return round(x, 5)
    return x


def outcome(fn, tf, capfd):
    capfd.readouterr()
    try:
        res = norm(fn(tf))
    except Exception as e:  # noqa: BLE001  (the class is the result)
        res = ("raised", type(e).__name__, isinstance(e, TypeError), isinstance(e, ValueError))
    sys.stdout.flush()
    sys.stderr.flush()
    cap = capfd.readouterr()
    lines = [ln for ln in (cap.out + cap.err).splitlines() if ln.startswith("@")]
    return res, sorted(lines) if getattr(fn, "unordered", False) else lines


# --- state (the silent wrong results) ---------------------------------------------


@case
def returned_variable_is_its_value_after_the_call(tf):
    v = tf.Variable(0.0)

    @tf.function
    def inc():
        v.assign_add(1.0)
        return v

    return [inc(), inc(), inc(), v.numpy().item(), inc.experimental_get_tracing_count()]


@case
def assign_under_python_condition_traced_once_runs_every_call(tf):
    class M(object):
        def __init__(self):
            self.count = 0
            self.v = tf.Variable(0.0)

        @tf.function
        def g(self):
            print("@trace")
            if self.count == 0:
                self.count += 1
                self.v.assign_add(1)
            return self.v + 0

    m = M()
    return [m.g(), m.g(), m.g(), m.v.numpy().item(), m.count]


@case
def tf_print_every_call_python_args(tf):
    @tf.function
    def f(a):
        tf.print("@p", a)
        print("@trace", a)
        return a

    f(1)
    f(1)
    f(2)
    return [f.experimental_get_tracing_count()]


@case
def python_scalar_returns_become_tensors(tf):
    @tf.function
    def f(a):
        return 1 + a

    @tf.function
    def g():
        return 3, 2.5, True, None

    return [f(1), g()]


@case
def variable_created_every_call_raises(tf):
    @tf.function
    def bad(x):
        return x * tf.Variable(1.0)

    try:
        bad(tf.constant(1.0))
    except ValueError:
        return ["ValueError", bad.experimental_get_tracing_count()]
    return ["no error"]


@case
def variable_created_on_first_call_traces_twice(tf):
    holder = []

    @tf.function
    def f(x):
        print("@trace")
        tf.print("@run")
        if not holder:
            holder.append(tf.Variable(x * 2))
        holder[0].assign_add(1.0)
        return holder[0]

    return [f(tf.constant(1.0)), f(tf.constant(1.0)), f(tf.constant(1.0)), f.experimental_get_tracing_count()]


@case
def lazy_layer_build_and_training(tf):
    class Dense(object):
        def __init__(self):
            self.w = None

        def __call__(self, x):
            if self.w is None:
                self.w = tf.Variable(tf.ones((3, 2)) * 0.5)
            return tf.matmul(x, self.w)

    layer = Dense()

    @tf.function
    def step(x):
        with tf.GradientTape() as t:
            loss = tf.reduce_sum(layer(x) ** 2)
        layer.w.assign_sub(0.01 * t.gradient(loss, layer.w))
        return loss

    x = tf.ones((2, 3))
    return [step(x), step(x), step(x), layer.w, step.experimental_get_tracing_count()]


@case
def second_variable_creation_in_new_signature_raises(tf):
    holder = []

    @tf.function
    def f(x):
        if len(holder) < 2:
            holder.append(tf.Variable(1.0))
        return x * holder[0]

    out = [f(tf.constant(1.0))]
    try:
        f(tf.constant([1.0, 2.0]))
        out.append("no error")
    except ValueError:
        out.append("ValueError")
    return out


@case
def reads_and_assigns_in_program_order(tf):
    v = tf.Variable(1.0)
    w = tf.Variable(10.0)

    @tf.function
    def f():
        a = v + 0
        v.assign(v * 3)
        b = v.read_value()
        w.assign_add(v)
        v.assign_sub(w)
        return a, b, v.read_value(), w.read_value()

    return [f(), f(), v, w]


@case
def global_variable_read_first_seen_late_traces_once(tf):
    v = tf.Variable(2.0)
    u = tf.Variable(5.0)

    @tf.function
    def f(x):
        print("@trace")
        y = x * v
        if x.shape[0] > 1:
            y = y + u
        return y

    r = [f(tf.constant([1.0])), f(tf.constant([1.0, 2.0]))]
    v.assign(4.0)
    u.assign(1.0)
    r += [f(tf.constant([1.0])), f(tf.constant([1.0, 2.0])), f.experimental_get_tracing_count()]
    return r


@case
def nested_tf_functions(tf):
    v = tf.Variable(1.0)

    @tf.function
    def inner(x):
        v.assign_add(x)
        return v * 2

    @tf.function
    def outer(x):
        return inner(x) + inner(x)

    return [outer(tf.constant(1.0)), outer(tf.constant(1.0)), v, outer.experimental_get_tracing_count()]


@case
def input_signature_none_dims_trace_count(tf):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def f(x):
        return tf.reduce_sum(x)

    return [f(tf.constant([1.0])), f(tf.constant([1.0, 2.0])), f(tf.constant([1.0, 2.0, 3.0])),
            f.experimental_get_tracing_count()]


@case
def retracing_counts(tf):
    @tf.function
    def f(x, s):
        return x * s

    f(tf.constant(1.0), 2)
    f(tf.constant(2.0), 2)
    f(tf.constant([1.0]), 2)
    f(tf.constant(1.0), 3)
    f(tf.constant(1), 3)
    return [f.experimental_get_tracing_count()]


@case
def tf_print_formats_every_call(tf):
    v = tf.Variable([1.0, 2.0])

    @tf.function
    def f(x):
        tf.print("@x", x, "v", v, [1, 2], {"a": x})
        v.assign_add([1.0, 1.0])
        return x

    f(tf.constant(1.0))
    f(tf.constant(2.0))
    return [v]


@case
def namedtuple_and_dict_outputs(tf):
    P = collections.namedtuple("P", "a b")

    @tf.function
    def f(x):
        return {"p": P(x, x * 2), "n": None, "l": [x + 1]}

    return [f(tf.constant(1.0))]


def _names():
    return [c.__name__ for c in CASES]


@pytest.mark.parametrize("snippet", CASES, ids=_names())
def test_function_snippet_matches_tf(snippet, real_tf, capfd):
    want = outcome(snippet, real_tf, capfd)
    got = outcome(snippet, tapejax, capfd)
    assert got == want
