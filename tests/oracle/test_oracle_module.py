"""Differential tests of the API around the tape (issue 17: tf.Module, name scopes, tf.nest and the
utilities, strings, composites, checkpoints): each snippet runs with ``tf = tensorflow`` and with
``tf = tapejax`` and the outcomes must agree (values, dtypes, shapes, structures, None-ness and
exception class names), as in test_oracle_core.py.
"""

from __future__ import annotations

import collections
from typing import Any, Callable

import numpy as np
import pytest

import tapejax
from _seed_helpers import assert_same, keep_log_once_budget, outcome  # noqa: F401  (autouse fixture)

CASES: dict = collections.defaultdict(list)
_group = ["module"]


def case(fn: Callable) -> Callable:
    CASES[_group[0]].append(pytest.param(fn, id=fn.__name__.removeprefix("c_")))
    return fn


def raises(f: Callable) -> str:
    try:
        f()
    except Exception as e:  # noqa: BLE001  (the class name is the result)
        return type(e).__name__
    return "no error"


def check(snippet: Callable, real_tf: Any) -> None:
    assert_same(outcome(snippet, real_tf), outcome(snippet, tapejax))


# ---- tf.Module and tf.name_scope ------------------------------------------------------------


@case
def c_module_names(tf):
    class MyMod(tf.Module):
        pass

    class HTTPServer2D(tf.Module):
        pass

    return [MyMod().name, HTTPServer2D().name, MyMod().name_scope.name, tf.Module().name,
            tf.Module(name="given").name_scope.name]


@case
def c_module_invalid_names(tf):
    return [raises(lambda n=n: tf.Module(name=n)) for n in ["a b", "1a", "a/b", "", "a-b", "ü", "ok_1"]]


@case
def c_name_scopes_nest_and_name_variables(tf):
    out = []
    m = tf.Module(name="outer")
    with m.name_scope as s:
        out.append(s)
        out.append(tf.Variable(1.0, name="w").name)
        out.append(tf.Module(name="inner").name_scope.name)
        with tf.name_scope("x") as s2:
            out += [s2, tf.Variable(1.0).name]
        with tf.name_scope("/abs/") as s3:
            out.append(s3)
        with tf.name_scope("") as s4:
            out += [s4, tf.Variable(1.0, name="r").name]
    with tf.name_scope("a"), tf.name_scope("a"):
        out.append(tf.Variable(1.0).name)  # eager scopes are not uniquified
    out.append(tf.Variable(1.0, name="w").name)
    out.append(raises(lambda: tf.name_scope(None)))
    out.append(raises(lambda: tf.name_scope(3)))
    out.append(tf.name_scope("q").name)
    return out


@case
def c_module_tracking_order_and_dedup(tf):
    class M(tf.Module):
        def __init__(self):
            super().__init__()
            self.b = tf.Variable(1.0, name="b")
            self.a = [tf.Variable(2.0, name="a0", trainable=False),
                      {"z": tf.Variable(3.0, name="z"), "y": (tf.Variable(4.0, name="y"),)}]
            self.sub = tf.Module(name="sub")
            self.sub.v = tf.Variable(5.0, name="subv")
            self.sub.again = self.b
            self.sub.deeper = [tf.Module(name="d1"), {"k": tf.Module(name="d0")}]
            self.sub.deeper[0].w = tf.Variable(7.0, name="d1w")
            self.c = self.b
            self._private = tf.Variable(6.0, name="priv")
            self.t = tf.constant(1.0)
            self.s = "text"

    m = M()
    m.late = tf.Variable(8.0, name="late")
    m.a.append(tf.Variable(9.0, name="appended"))
    return ([v.name for v in m.variables], [v.name for v in m.trainable_variables],
            [v.name for v in m.non_trainable_variables], [s.name for s in m.submodules],
            [float(v.numpy()) for v in m.variables])


@case
def c_module_submodule_cycle(tf):
    a, b, c = tf.Module(name="a"), tf.Module(name="b"), tf.Module(name="c")
    a.b, b.c, c.a = b, c, a
    a.v, c.v = tf.Variable(1.0, name="av"), tf.Variable(2.0, name="cv")
    return [[s.name for s in a.submodules], [s.name for s in b.submodules], [v.name for v in c.variables]]


@case
def c_with_name_scope_lazy_build(tf):
    class Dense(tf.Module):
        def __init__(self, out_features, name=None):
            super().__init__(name=name)
            self.is_built = False
            self.out_features = out_features

        @tf.Module.with_name_scope
        def __call__(self, x):
            if not self.is_built:
                self.w = tf.Variable(tf.ones([x.shape[-1], self.out_features]) * 0.5, name="w")
                self.b = tf.Variable(tf.zeros([self.out_features]), name="b")
                self.is_built = True
            return tf.nn.relu(tf.matmul(x, self.w) + self.b)

    class MLP(tf.Module):
        def __init__(self, name=None):
            super().__init__(name=name)
            with self.name_scope:
                self.layers = [Dense(3), Dense(2, name="last")]

        @tf.Module.with_name_scope
        def __call__(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    m = MLP(name="mlp")
    before = len(m.variables)
    x = tf.constant([[1.0, 2.0]])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(m(x))
    grads = tape.gradient(y, m.trainable_variables)
    return [before, y, [v.name for v in m.variables], list(grads), [s.name for s in m.submodules],
            MLP.__call__.__name__]


@case
def c_guide_intro_to_modules(tf):
    # TF's guide "Introduction to modules": SimpleModule / SequentialModule with tf.function.
    class SimpleModule(tf.Module):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.a_variable = tf.Variable(5.0, name="train_me")
            self.non_trainable_variable = tf.Variable(5.0, trainable=False, name="do_not_train_me")

        def __call__(self, x):
            return self.a_variable * x + self.non_trainable_variable

    simple_module = SimpleModule(name="simple")
    r1 = simple_module(tf.constant(5.0))

    class Dense(tf.Module):
        def __init__(self, in_features, out_features, name=None):
            super().__init__(name=name)
            self.w = tf.Variable(tf.reshape(tf.range(in_features * out_features, dtype=tf.float32) / 10.0,
                                            [in_features, out_features]), name="w")
            self.b = tf.Variable(tf.zeros([out_features]), name="b")

        def __call__(self, x):
            y = tf.matmul(x, self.w) + self.b
            return tf.nn.relu(y)

    class SequentialModule(tf.Module):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.dense_1 = Dense(in_features=3, out_features=3)
            self.dense_2 = Dense(in_features=3, out_features=2)

        @tf.function
        def __call__(self, x):
            x = self.dense_1(x)
            return self.dense_2(x)

    my_model = SequentialModule(name="the_model")
    r2 = my_model(tf.constant([[2.0, 2.0, 2.0]]))
    return [r1, len(simple_module.trainable_variables), len(simple_module.variables), r2,
            [s.name for s in my_model.submodules], [v.name for v in my_model.variables]]


@pytest.mark.parametrize("snippet", CASES["module"])
def test_module_and_name_scope_match_tf(snippet, real_tf):
    check(snippet, real_tf)


_group[0] = "nest"
# ---- tf.nest -----------------------------------------------------------------------------------

N = collections.namedtuple("N", "b a")


@case
def c_nest_flatten_orders(tf):
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    s = [1, (2, {"z": 3, "a": [4, None]}), N(5, 6), od, "str", ()]
    return [tf.nest.flatten(s), tf.nest.flatten(None), tf.nest.flatten(1), tf.nest.flatten({}),
            tf.nest.flatten({"b": {"y": 1, "x": 2}, "a": 3}),
            tf.nest.flatten(collections.defaultdict(int, {"b": 1, "a": 2})),
            len(tf.nest.flatten([tf.constant([1.0]), tf.Variable(1.0), np.arange(2)])),
            raises(lambda: tf.nest.flatten({"b": 1, 1: 2}))]


@case
def c_nest_map_and_pack(tf):
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    dbl = tf.nest.map_structure(lambda x: x * 2, [1, (2, {"z": 3, "a": 4}), N(5, 6), od])
    return [dbl, type(dbl[3]).__name__, list(dbl[3].keys()),
            tf.nest.pack_sequence_as([1, (2, {"z": 3, "a": 4})], ["a", "b", "c", "d"]),
            tf.nest.pack_sequence_as({"b": 0, "a": 0}, [1, 2]),
            list(tf.nest.pack_sequence_as(od, [10, 20]).items()),
            tf.nest.pack_sequence_as(1, [7]),
            tf.nest.map_structure(lambda a, b: a + b, [1, 2], (1, 2), check_types=False),
            tf.nest.map_structure(lambda x, y: (x, y), {"b": 1, "a": 2}, od),
            tf.nest.map_structure(lambda x: x + 1, tf.constant(1.0)),
            [tf.nest.is_nested(v) for v in ([], 1, np.arange(2), tf.constant([1]), N(1, 2), "ab", {})]]


@case
def c_nest_errors(tf):
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    M = collections.namedtuple("M", "b a")
    N2 = collections.namedtuple("N", "b a")
    return [raises(lambda: tf.nest.assert_same_structure([1, 2], [1, 2, 3])),
            raises(lambda: tf.nest.assert_same_structure([1, 2], (1, 2))),
            raises(lambda: tf.nest.assert_same_structure([1, 2], (1, 2), check_types=False)),
            raises(lambda: tf.nest.assert_same_structure({"a": 1}, {"b": 1})),
            raises(lambda: tf.nest.assert_same_structure([1, [2]], [1, 2])),
            raises(lambda: tf.nest.assert_same_structure(1, [1])),
            raises(lambda: tf.nest.assert_same_structure(od, {"a": 1, "b": 2})),
            raises(lambda: tf.nest.assert_same_structure(N(1, 2), (1, 2))),
            raises(lambda: tf.nest.assert_same_structure(N(1, 2), N2(1, 2))),
            raises(lambda: tf.nest.assert_same_structure(N(1, 2), M(1, 2))),
            raises(lambda: tf.nest.map_structure(lambda a, b: a, [1, 2], [1, 2, 3])),
            raises(lambda: tf.nest.map_structure(lambda a, b: a, [1, 2], (1, 2))),
            raises(lambda: tf.nest.map_structure(lambda x: x, {"a": 1}, bad=1)),
            raises(lambda: tf.nest.map_structure(lambda x: x)),
            raises(lambda: tf.nest.pack_sequence_as([1, 2], [1])),
            raises(lambda: tf.nest.pack_sequence_as(1, [1, 2])),
            raises(lambda: tf.nest.pack_sequence_as([1], 1))]


@pytest.mark.parametrize("snippet", CASES["nest"])
def test_nest_matches_tf(snippet, real_tf):
    check(snippet, real_tf)


_group[0] = "utils"
# ---- small utilities -----------------------------------------------------------------------------


@case
def c_gather_scalar_index(tf):
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape() as g:
        g.watch(x)
        y = tf.gather(x, 1)
    return [y, tf.gather(tf.constant([[1.0, 2.0], [3.0, 4.0]]), 1, axis=1), tf.convert_to_tensor(g.gradient(y, x)),
            raises(lambda: tf.gather(x, 5))]


@pytest.mark.parametrize("snippet", CASES["utils"])
def test_utilities_match_tf(snippet, real_tf):
    check(snippet, real_tf)
