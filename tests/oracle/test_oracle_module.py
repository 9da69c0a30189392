"""Differential tests of the API around the tape (issue 17: tf.Module, name scopes, tf.nest and the
utilities, strings, composites, checkpoints): each snippet runs with ``tf = tensorflow`` and with
``tf = tapejax`` and the outcomes must agree (values, dtypes, shapes, structures, None-ness and
exception class names), as in test_oracle_core.py.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _seed_helpers import assert_same, keep_log_once_budget, outcome  # noqa: F401  (autouse fixture)
import _tf_keras_jobs
from _tf_side import result, run_tf_jobs

import tapejax

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
def c_module_flatten_with_paths(tf):
    m = tf.Module(name="root")
    m.w = tf.Variable(1.0, name="w")
    m.layers = [tf.Module(name="l0"), {"k": tf.Variable(2.0, name="k")}]
    m.layers[0].v = tf.Variable(3.0, name="v")
    m.again = m.w
    is_var = lambda x: isinstance(x, tf.Variable)  # noqa: E731
    with_path = [(p, v.name) for p, v in m._flatten(predicate=is_var, with_path=True)]
    flat = [v.name for v in m._flatten(predicate=is_var)]
    shallow = [v.name for v in m._flatten(predicate=is_var, recursive=False)]
    by_reverse = [v.name for v in m._flatten(predicate=is_var, attribute_traversal_key=lambda k: [-ord(c) for c in k])]
    return [with_path, flat, shallow, by_reverse]

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



@case
def c_get_static_value_and_identity_n(tf):
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        a, b = tf.identity_n([x * 2, x])
    return [tf.get_static_value(tf.constant([1, 2])), tf.get_static_value(tf.Variable(1.0)), tf.get_static_value(3),
            tf.get_static_value([1, 2]), tf.get_static_value(np.array(2.0)), a, b, g.gradient(a, x), g.gradient(b, x),
            type(tf.identity_n([x, x])).__name__]


@case
def c_grad_pass_through(tf):
    x = tf.constant(2.4)
    with tf.GradientTape() as g:
        g.watch(x)
        y = tf.grad_pass_through(lambda z: tf.round(z) * 3.0)(x)
    v = tf.Variable(2.0)
    with tf.GradientTape() as g2:
        g2.watch(x)
        y2 = tf.grad_pass_through(v.assign)(tf.constant(5.0) * x)
    return [y, g.gradient(y, x), y2, g2.gradient(y2, x)]


@case
def c_numpy_function_and_py_function_eager(tf):
    x = tf.constant([1.0, 2.0])
    v = tf.Variable(2.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = tf.numpy_function(lambda a: (a * 3).astype(np.float32), [x], tf.float32)
        z = tf.py_function(lambda a: a * a * 3, [x], tf.float32)
        w = tf.py_function(lambda a: [a * 2, a], [x], [tf.float32, tf.float32])
        c = tf.py_function(lambda a: a * v, [x], tf.float32)
    return [y, g.gradient(y, x), z, g.gradient(z, x), w, type(w).__name__, g.gradient(w, x), c, g.gradient(c, v),
            tf.numpy_function(lambda a: 3, [x], tf.float32), tf.numpy_function(lambda a: None, [x], []),
            tf.py_function(lambda a: None, [x], []), tf.numpy_function(lambda a: [a], [x], [tf.float32]),
            raises(lambda: tf.py_function(lambda a: None, [x], None)),
            raises(lambda: tf.py_function(lambda a: a * 3, [x], tf.int32)),
            raises(lambda: tf.numpy_function(lambda a: 1 / 0, [x], tf.float32)),
            raises(lambda: tf.py_function(lambda a: 1 / 0, [x], tf.float32))]


@case
def c_numpy_function_and_py_function_in_function(tf):
    calls = []

    def host(a):
        calls.append(1)
        return (a * 3).astype(np.float32)

    @tf.function
    def f(x):
        y = tf.numpy_function(host, [x], tf.float32)
        with tf.GradientTape() as g:
            g.watch(x)
            z = tf.py_function(lambda a: a * a * 3, [x], tf.float32)
        return y, z, g.gradient(z, x)

    x = tf.constant([1.0, 2.0])
    first = f(x)
    n = len(calls)
    second = f(x + 1)
    return [first, second, len(calls) - n]


@case
def c_ensure_shape_and_set_shape(tf):
    t = tf.ones([2, 3])
    return [tf.ensure_shape(t, [2, None]), raises(lambda: tf.ensure_shape(t, [3, None])),
            t.set_shape([2, 3]), t.set_shape([None, 3]), raises(lambda: t.set_shape([3, 3])),
            raises(lambda: t.set_shape([2]))]


@case
def c_tensor_shape_methods(tf):
    S = tf.TensorShape
    return [S([None, 3]).merge_with([2, None]).as_list(), raises(lambda: S([None, 3]).merge_with([2, 4])),
            S(None).merge_with([2, 4]).as_list(), S([1]).concatenate([2, None]).as_list(), S(None).concatenate([2]).rank,
            S([None, 3]).num_elements(), S(None).num_elements(), S(None).rank, raises(lambda: S(None).as_list()),
            S(None).is_compatible_with([1, 2]), S([1, 2]).is_compatible_with([1, None]), S([1, 2]).is_compatible_with([1]),
            raises(lambda: S([1, 2]).assert_is_compatible_with([1, 3])), S([1, 2]).assert_is_compatible_with([1, None]),
            raises(lambda: S([1, 2]).assert_has_rank(3)), raises(lambda: S([1, 2]).assert_same_rank([3])),
            S([1, None]).is_fully_defined(), raises(lambda: S([1, None]).assert_is_fully_defined()),
            S([1, None]).with_rank(2).as_list(), raises(lambda: S([1, None]).with_rank(3)), repr(S(None)), str(S(None)),
            repr(S([1, None])), str(S([1, None])), S(None) == S(None), S([1, 2]) == [1, 2], S(None).dims, S([1, 2])[0],
            S([1, 2])[1:].as_list(), S(None)[0], S([1, 2]).most_specific_compatible_shape([1, 3]).as_list(),
            raises(lambda: len(S(None))), S(3).as_list(), S([]).rank, (S([1, 2]) + S([3])).as_list(),
            raises(lambda: list(S(None))), list(S([1, None])), S(None)[1:].rank, S([None, 3]) == S([None, 3])]


@case
def c_tensor_diag(tf):
    d = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with tf.GradientTape() as g:
        g.watch(d)
        t = tf.linalg.tensor_diag(d)
        y = tf.reduce_sum(t * tf.reshape(tf.range(16, dtype=tf.float32), [2, 2, 2, 2]))
    return [t, g.gradient(y, d), tf.linalg.tensor_diag_part(t), tf.linalg.tensor_diag([1, 2, 3]),
            tf.linalg.diag(tf.constant([1.0, 2.0])), tf.linalg.diag_part(tf.constant([[1.0, 2.0], [3.0, 4.0]])),
            raises(lambda: tf.linalg.tensor_diag_part(tf.ones([2, 3])))]


@case
def c_image_resize_and_flips(tf):
    rng = np.random.RandomState(0)
    img = rng.rand(2, 5, 7, 3).astype(np.float32)
    w = rng.rand(2, 3, 9, 3).astype(np.float32)
    out = [tf.image.resize(img, size, method=m) for size in [(10, 14), (3, 4), (5, 7), (8, 3), (1, 1)]
           for m in ["bilinear", "nearest"]]
    x = tf.constant(img)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = tf.reduce_sum(tf.image.resize(x, (3, 9)) * w)
        n = tf.reduce_sum(tf.image.resize(x, (3, 9), method="nearest") * w)
        z = (tf.reduce_sum(tf.image.flip_left_right(x) * tf.range(7, dtype=tf.float32)[:, None])
             + tf.reduce_sum(tf.image.rot90(x, 3)[0, 0]) + tf.reduce_sum(tf.image.central_crop(x, 0.5) * 2.0)
             + tf.reduce_sum(tf.image.flip_up_down(x)[:, 0]) + tf.reduce_sum(tf.image.transpose(x)[:, 1]))
    return out + [g.gradient(y, x), g.gradient(n, x), g.gradient(z, x),
                  tf.image.resize(np.arange(12, dtype=np.int32).reshape(3, 4, 1), (6, 5), method="nearest"),
                  tf.image.resize(np.arange(12, dtype=np.int32).reshape(3, 4, 1), (6, 5)),
                  tf.image.resize(img, (4, 4), preserve_aspect_ratio=True),
                  tf.image.rgb_to_grayscale(img), tf.image.adjust_brightness(img, 0.1),
                  tf.image.central_crop(img[0], 0.33), raises(lambda: tf.image.resize(img[0, 0], (2, 2)))]


@case
def c_image_crops_pads_and_conversions(tf):
    rng = np.random.RandomState(1)
    img = rng.rand(2, 5, 6, 3).astype(np.float32)
    w = tf.constant(rng.rand(2, 4, 8, 3).astype(np.float32))
    x = tf.constant(img)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        a = tf.reduce_sum(tf.image.resize_with_crop_or_pad(x, 4, 8) * w)
        b = tf.reduce_sum(tf.image.per_image_standardization(x) * tf.constant(rng.rand(2, 5, 6, 3).astype(np.float32)))
    u8 = tf.constant((img * 255).astype(np.uint8))
    img = x
    return [tf.image.crop_to_bounding_box(img, 1, 2, 3, 3), tf.image.pad_to_bounding_box(img, 1, 2, 8, 9),
            tf.image.resize_with_crop_or_pad(img, 3, 9), tf.image.resize_with_crop_or_pad(img[0], 7, 4),
            tf.image.per_image_standardization(img), tf.image.per_image_standardization(u8),
            tf.image.adjust_contrast(img, 0.5), tf.image.grayscale_to_rgb(img[..., :1]),
            tf.image.convert_image_dtype(u8, tf.float32), tf.image.convert_image_dtype(img, tf.uint8),
            tf.image.convert_image_dtype(img * 2, tf.uint8, saturate=True),
            tf.image.convert_image_dtype(u8, tf.int32), tf.image.convert_image_dtype(img, tf.float16),
            g.gradient(a, x), g.gradient(b, x),
            raises(lambda: tf.image.crop_to_bounding_box(img, 3, 0, 3, 3)),
            raises(lambda: tf.image.pad_to_bounding_box(img, 0, 0, 3, 3)),
            raises(lambda: tf.image.grayscale_to_rgb(img))]

@case
def c_devices(tf):
    with tf.device("/CPU:0"):
        x = tf.ones(2) * 2
    with tf.device("/GPU:0"):  # absent: soft placement, as TF
        y = tf.ones(2) * 3
    return [x, y, "CPU" in x.device.upper(), [d.device_type for d in tf.config.list_physical_devices("CPU")][:1],
            tf.config.list_physical_devices("CPU")[0].name, tf.config.list_logical_devices("CPU")[0].name,
            type(tf.config.list_physical_devices("CPU")[0]).__name__, tf.config.list_physical_devices("GPU"),
            _config_calls(tf)]


def _config_calls(tf):
    cpu = tf.config.list_physical_devices("CPU")[0]
    return [raises(lambda: tf.config.experimental.set_memory_growth(cpu, True)),
            raises(lambda: tf.config.experimental.get_memory_growth(cpu)),
            [d.name for d in tf.config.get_visible_devices("CPU")], tf.config.set_visible_devices([], "GPU"),
            tf.config.set_visible_devices(cpu), tf.config.set_visible_devices([cpu], "CPU"),
            [d.name for d in tf.config.experimental.list_physical_devices("CPU")],
            tf.config.threading.get_intra_op_parallelism_threads(), tf.config.optimizer.set_jit(False),
            tf.config.get_soft_device_placement()]
    # Not enable_op_determinism: real TF's switch is process-wide and cannot be turned off
    # again, and later oracle tests in this process would see TF's deterministic-mode errors.

@pytest.mark.parametrize("snippet", CASES["utils"])
def test_utilities_match_tf(snippet, real_tf):
    check(snippet, real_tf)


_group[0] = "strings"
# ---- string tensors ------------------------------------------------------------------------------


@case
def c_string_tensors_repr_and_structure(tf):
    s = tf.constant("abc")
    v = tf.constant(["a", "bc"])
    u = tf.constant([["é", "b"]])
    return [repr(s), str(s), repr(v), str(v), repr(u), s.numpy(), type(s.numpy()).__name__, v.numpy(), s.dtype.name,
            repr(s.dtype), tf.string.is_floating, v.shape.as_list(), tf.constant(np.array(["a", "b"])),
            tf.constant(b"\xff"), tf.constant("a", dtype=tf.string), raises(lambda: tf.constant(1, dtype=tf.string)),
            raises(lambda: tf.constant(["a", 1])), tf.convert_to_tensor("x").dtype.name, tf.as_dtype("string").name,
            tf.shape(v), tf.size(v), tf.reshape(v, [2, 1]), v[1], tf.concat([v, v], 0), tf.stack([s, s]),
            tf.gather(v, [1, 0]), tf.identity(v), tf.where([True, False], v, tf.constant(["x", "y"])), len(v), list(v),
            tf.zeros_like(v), tf.fill([2], "a"), tf.transpose(u), tf.tile(v, [2]), tf.expand_dims(s, 0)]


@case
def c_string_structural_ops(tf):
    v = tf.constant([["a", "b", "c"], ["d", "e", "f"]])
    return [tf.boolean_mask(v, [True, False]), tf.unstack(v), tf.split(v, 3, axis=1), tf.reverse(v, [1]),
            tf.squeeze(v[:1]), tf.slice(v, [0, 1], [2, 2]), tf.roll(v, 1, 1), tf.repeat(v, 2, axis=0),
            tf.broadcast_to(v[0], [2, 3]), v[:, ::-1], tf.gather_nd(v, [[0, 1], [1, 2]]), tf.pad(v, [[0, 1], [0, 0]]),
            tf.where(tf.constant([[True, False, True], [False, False, True]]), v, "z"), tf.rank(v),
            tf.unique(tf.constant(["a", "b", "a"])), raises(lambda: tf.sort(tf.constant(["b", "a"]))),
            raises(lambda: tf.ones_like(v)), tf.stack([v[0], v[1]], axis=1)]

@case
def c_string_ops(tf):
    s = tf.constant("abc")
    v = tf.constant(["a", "bc"])
    return [s == "abc", v == "a", tf.equal(v, ["a", "x"]), v != "a", raises(lambda: s == 1), s + s, v + "!",
            tf.strings.join(["a", v], separator="-"), tf.strings.join([v, v]),
            tf.strings.format("x={} y={}", [tf.constant(1.5), v]), tf.strings.format("x={}", tf.constant([1, 2, 3])),
            tf.strings.as_string(tf.constant([1.5, 2.0])), tf.strings.as_string(tf.constant([1, 2])),
            tf.strings.as_string(tf.constant([True])), tf.strings.as_string(tf.constant([1.5]), precision=2),
            tf.as_string(tf.constant(7)),
            tf.strings.to_number(tf.constant(["1.5", "2"])), tf.strings.to_number(tf.constant(["1", "2"]), out_type=tf.int32),
            raises(lambda: tf.strings.to_number(tf.constant(["x"]))),
            tf.strings.length(tf.constant(["abc", "é"])), tf.strings.length(tf.constant(["abc", "é"]), unit="UTF8_CHAR"),
            tf.strings.split(tf.constant("a b  c")), tf.strings.split(tf.constant("a,b,,c"), sep=","),
            tf.strings.lower(tf.constant(["AbÉ"])), tf.strings.upper(tf.constant(["abé"])),
            tf.strings.strip(tf.constant([" a "])), tf.strings.reduce_join(v), tf.strings.reduce_join(v, separator=","),
            tf.strings.reduce_join(tf.constant([["a", "b"], ["c", "d"]]), axis=1),
            tf.strings.substr(tf.constant("hello"), 1, 3), tf.strings.regex_replace(tf.constant("hello"), "l+", "L"),
            raises(lambda: tf.cast(s, tf.float32)), tf.strings.as_string(s),
            tf.strings.format("{}", tf.range(10)), tf.strings.format("{}", tf.reshape(tf.range(64), [8, 8])),
            tf.strings.format("{} {}", [tf.constant(True), tf.constant([[1.5, 2.25]])]),
            tf.strings.format("{}", tf.range(10), summarize=2)]


@case
def c_guide_tensor_strings(tf):
    # TF's guide "Introduction to Tensors", string tensors section (the ragged batch split left out).
    scalar_string_tensor = tf.constant("Gray wolf")
    tensor_of_strings = tf.constant(["Gray wolf", "Quick brown fox", "Lazy dog"])
    text = tf.constant("1 10 100")
    unicode_bytes = tf.constant("アヒル 🦆")
    return [str(scalar_string_tensor), str(tensor_of_strings), repr(tf.constant("🥳👍")),
            tf.strings.split(scalar_string_tensor, sep=" "), tf.strings.to_number(tf.strings.split(text, " ")),
            tf.strings.bytes_split(tf.constant("Duck")), tf.io.decode_raw(tf.constant("Duck"), tf.uint8),
            tf.io.decode_raw(tf.constant(["Duck", "Goos"]), tf.uint8),
            tf.strings.unicode_split(unicode_bytes, "UTF-8"), tf.strings.unicode_decode(unicode_bytes, "UTF-8"),
            tf.strings.unicode_encode(tf.constant([65, 12450], tf.int32), "UTF-8"),
            raises(lambda: tf.io.decode_raw(tf.constant(["Duck", "Go"]), tf.uint8))]

@case
def c_tape_ignores_strings(tf):
    # TF's backprop unit tests: a string target or source gives None (the tape logs and skips it).
    s = tf.constant("abc")
    x = tf.constant(1.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        g.watch(s)
        t = tf.strings.as_string(x)
        y = x * 2
    return [g.gradient(t, x), g.gradient(y, s), g.gradient(s, s), g.gradient(t, [x, s]), g.gradient([t, y], x),
            g.gradient(y, s, unconnected_gradients="zero"), len(g.watched_variables()),
            tf.Variable("abc"), tf.Variable("abc").assign("d").numpy() == b"d", type(tf.Variable("abc").numpy()).__name__]



@case
def c_string_variables_on_the_tape(tf):
    sv = tf.Variable("abc")
    w = tf.Variable(2.0)
    with tf.GradientTape(persistent=True) as g:
        y = tf.strings.join([sv, "x"])
        z = w * 3.0
        q = tf.identity(sv)
    return [sv.trainable, [v.name for v in g.watched_variables()], g.gradient(y, sv), g.gradient(z, sv),
            g.gradient(z, [w, sv]), g.gradient(q, sv), y]


@case
def c_watched_strings_through_structural_ops(tf):
    s = tf.constant(["a", "b"])
    x = tf.constant(2.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(s)
        g.watch(x)
        r = tf.reshape(s, [2, 1])
        c = tf.concat([s, s], 0)
        w = tf.where([True, False], s, s)
        y = x * x
    return [g.gradient(y, x), g.gradient(r, s), g.gradient(c, s), g.gradient([y, r], [x, s]),
            g.gradient(w, s, unconnected_gradients="zero"), g.jacobian(y, x)]

@pytest.mark.parametrize("snippet", CASES["strings"])
def test_strings_match_tf(snippet, real_tf):
    check(snippet, real_tf)


_group[0] = "composites"
# ---- SparseTensor and IndexedSlices ----------------------------------------------------------------
# Index components compare by value: TF stores them as int64, tapejax as int32 unless x64 is on
# (compat_docs/differences.md).


def _ints(t):
    return np.asarray(t.numpy()).tolist()


def _sp(st):
    return [_ints(st.indices), st.values, _ints(st.dense_shape), st.shape.as_list(), st.dtype.name]


@case
def c_sparse_tensor_build_and_convert(tf):
    st = tf.sparse.SparseTensor(indices=[[0, 0], [1, 2]], values=[1.0, 2.0], dense_shape=[3, 4])
    unordered = tf.sparse.SparseTensor([[1], [0]], [1.0, 2.0], [2])
    return [_sp(st), tf.sparse.to_dense(st), tf.sparse.to_dense(st, default_value=-1.0),
            _sp(tf.sparse.from_dense(tf.constant([[0.0, 1.0], [2.0, 0.0]]))), _sp(tf.SparseTensor([[0]], [1], [2])),
            raises(lambda: tf.sparse.SparseTensor([[0, 0]], [1.0], [2])), raises(lambda: tf.sparse.to_dense(unordered)),
            _sp(tf.sparse.reorder(unordered)), raises(lambda: tf.convert_to_tensor(st)),
            tf.sparse.reduce_sum(st), tf.sparse.reduce_sum(st, axis=1),
            tf.sparse.sparse_dense_matmul(st, tf.ones([4, 2])), _sp(tf.sparse.add(st, st)),
            tf.sparse.add(st, tf.ones([3, 4])), tf.sparse.to_dense(tf.sparse.transpose(st)), isinstance(st, tf.SparseTensor),
            tf.is_tensor(st), _sp(st * 2), tf.sparse.to_dense(tf.sparse.map_values(tf.square, st)), st.get_shape().as_list(),
            tf.sparse.to_dense(tf.sparse.expand_dims(st, 0)).shape.as_list(), tf.sparse.to_dense(tf.sparse.reshape(st, [12])),
            tf.sparse.to_dense(tf.sparse.reshape(st, [-1, 2])),
            raises(lambda: tf.sparse.to_dense(tf.sparse.SparseTensor([[0, 0], [0, 0]], [1.0, 2.0], [2, 2]))),
            raises(lambda: tf.sparse.to_dense(tf.sparse.SparseTensor([[5]], [1.0], [2])))]


@case
def c_sparse_concat_retain_slice_eye(tf):
    a = tf.sparse.SparseTensor([[0, 0], [1, 2]], [1.0, 2.0], [2, 3])
    b = tf.sparse.SparseTensor([[0, 1]], [3.0], [2, 2])
    vals = tf.constant([1.0, 2.0])
    with tf.GradientTape() as g:
        g.watch(vals)
        c = tf.sparse.SparseTensor([[0, 0], [1, 2]], vals, [2, 3])
        y = tf.reduce_sum(tf.sparse.concat(0, [c, c]).values * tf.constant([1.0, 2.0, 3.0, 4.0]))
    return [_sp(tf.sparse.concat(1, [a, b])), _sp(tf.sparse.concat(0, [a, a])), _sp(tf.sparse.retain(a, [False, True])),
            _sp(tf.sparse.slice(a, [1, 1], [5, 5])), _sp(tf.sparse.eye(2, 3)), _sp(tf.sparse.eye(2, dtype=tf.int32)),
            raises(lambda: tf.sparse.concat(0, [a, b])), g.gradient(y, vals)]

@case
def c_sparse_gradients_flow_to_values(tf):
    values = tf.constant([1.0, 2.0])
    w = tf.reshape(tf.range(12, dtype=tf.float32), [3, 4])
    with tf.GradientTape(persistent=True) as g:
        g.watch(values)
        st = tf.sparse.SparseTensor([[0, 0], [1, 2]], values, [3, 4])
        y = tf.reduce_sum(tf.sparse.to_dense(st) * w)
        z = tf.reduce_sum(tf.sparse.sparse_dense_matmul(st, tf.ones([4, 2])))
        d = tf.constant([[0.0, 3.0], [4.0, 0.0]])
        g.watch(d)
        f = tf.reduce_sum(tf.sparse.from_dense(d).values ** 2)
    return [g.gradient(y, values), g.gradient(z, values), g.gradient(f, d)]


@case
def c_sparse_op_gradients(tf):
    vals = tf.constant([1.0, 2.0])
    w = tf.constant([3.0, 5.0])
    with tf.GradientTape(persistent=True) as g:
        g.watch(vals)
        c = tf.sparse.SparseTensor([[0, 0], [1, 2]], vals, [2, 3])
        ys = [tf.reduce_sum(tf.sparse.concat(0, [c, c]).values),
              tf.reduce_sum(tf.sparse.retain(c, [False, True]).values * 3.0),
              tf.reduce_sum(tf.sparse.slice(c, [1, 1], [5, 5]).values),
              tf.reduce_sum(tf.sparse.reorder(c).values * w), tf.reduce_sum(tf.sparse.transpose(c).values * w),
              tf.reduce_sum(tf.sparse.add(c, c).values * w), tf.reduce_sum(tf.sparse.reshape(c, [6]).values * w),
              tf.reduce_sum(tf.sparse.reduce_sum(c, axis=1) * w), tf.reduce_sum(tf.sparse.map_values(tf.square, c).values)]
    out = []
    for y in ys:
        gr = g.gradient(y, vals)
        out.append(None if gr is None else tf.convert_to_tensor(gr))
    return out

@case
def c_indexed_slices(tf):
    i = tf.IndexedSlices(values=tf.constant([[1.0, 2.0], [3.0, 4.0]]), indices=tf.constant([0, 2]),
                         dense_shape=tf.constant([3, 2]))
    dup = tf.IndexedSlices(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([0, 0]), tf.constant([3, 2]))
    return [str(i)[:14], tf.convert_to_tensor(i), tf.convert_to_tensor(dup), i.values, _ints(i.indices),
            _ints(i.dense_shape), i.dtype.name, i.shape.as_list(),
            raises(lambda: tf.convert_to_tensor(tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([1])))),
            raises(lambda: i * 2), tf.multiply(i, 2), tf.is_tensor(i), tf.add_n([i, tf.ones([3, 2])])]


@case
def c_composites_with_tape_and_nest(tf):
    st = tf.sparse.SparseTensor([[0, 0], [1, 2]], [1.0, 2.0], [3, 4])
    i = tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([1]), tf.constant([3, 2]))
    x = tf.constant([1.0])
    out = []
    for target in (st, i, [x, st]):
        with tf.GradientTape() as g:
            out.append(g.watch(target))  # TF watches the components (logging the integer ones)
    with tf.GradientTape() as g:
        g.watch(st.values)
        y = tf.reduce_sum(tf.sparse.to_dense(st))
    out.append(g.gradient(y, st.values))
    out.append([np.asarray(c).tolist() for c in tf.nest.flatten(st, expand_composites=True)])
    out.append(len(tf.nest.flatten(i, expand_composites=True)))
    out.append(tf.nest.flatten(st) [0] is st)
    out.append(raises(lambda: tf.nest.map_structure(lambda t: t * 2, st, expand_composites=True)))
    out.append(_sp(tf.nest.map_structure(lambda t: t, st, expand_composites=True)))
    return out


@pytest.mark.parametrize("snippet", CASES["composites"])
def test_composites_match_tf(snippet, real_tf):
    check(snippet, real_tf)


_group[0] = "checkpoints"
# ---- tf.train.Checkpoint / CheckpointManager ---------------------------------------------------------


class _Tmp:
    """A fresh directory per framework run (the snippet runs once with TF and once with tapejax)."""

    def __init__(self):
        import tempfile

        self.path = tempfile.mkdtemp(prefix="tapejax_ckpt_")


def _rel(p, d):
    return None if p is None else p[len(d):]


@case
def c_checkpoint_save_restore_and_state(tf):
    d = _Tmp().path

    class Lazy(tf.Module):
        def __init__(self):
            super().__init__()
            self.built = False

        def __call__(self, x):
            if not self.built:
                self.w = tf.Variable(tf.ones([x.shape[-1], 2]), name="w")
                self.built = True
            return x @ self.w

    m = tf.Module()
    m.v = tf.Variable([1.0, 2.0])
    m.sub = Lazy()
    m.sub(tf.ones([1, 3]))
    m.sub.w.assign(m.sub.w * 3)
    m.lst = [tf.Variable(5.0)]
    m.alias = m.v
    ck = tf.train.Checkpoint(model=m, extra=tf.Variable(7.0))
    out = [int(ck.save_counter.numpy())]
    p1 = ck.save(d + "/ck")
    p2 = ck.save(d + "/ck")
    out += [_rel(p1, d), _rel(p2, d), int(ck.save_counter.numpy()), _rel(tf.train.latest_checkpoint(d), d),
            tf.train.list_variables(p2), _rel(ck.write(d + "/written"), d)]
    m.v.assign([0.0, 0.0])
    m.lst[0].assign(0.0)
    st = ck.restore(p1)
    out += [m.v, m.lst[0], type(st).__name__, st.assert_consumed() is st]
    # Restore before build: the lazily created variable gets its value when the module sets it (TF's deferral).
    m2 = tf.Module()
    m2.v = tf.Variable([0.0, 0.0])
    m2.sub = Lazy()
    m2.lst = [tf.Variable(0.0)]
    ck2 = tf.train.Checkpoint(model=m2, extra=tf.Variable(0.0))
    st2 = ck2.restore(p2)
    out += [raises(st2.assert_consumed), st2.assert_existing_objects_matched() is st2]
    m2.sub(tf.ones([1, 3]))
    out += [m2.sub.w, int(ck2.save_counter.numpy()), st2.assert_consumed() is st2, ck2.extra]
    m3 = tf.Module()
    m3.v = tf.Variable([0.0, 0.0, 0.0])
    out.append(raises(lambda: tf.train.Checkpoint(model=m3).restore(p2)))
    m4 = tf.Module()
    m4.v = tf.Variable([0, 0])
    out.append(raises(lambda: tf.train.Checkpoint(model=m4).restore(p2)))
    out.append(raises(lambda: tf.train.Checkpoint(model=tf.Module()).restore(d + "/nonexistent")))
    out.append(tf.train.latest_checkpoint(d + "/nowhere"))
    out.append(raises(lambda: tf.train.Checkpoint(model=3)))
    m5 = tf.Module()
    m5.v = tf.Variable([0.0, 0.0])
    out += [type(tf.train.Checkpoint(model=m5).read(d + "/written")).__name__, m5.v]
    out.append(raises(tf.train.Checkpoint(model=m5).restore(None).assert_consumed))
    out.append(raises(tf.train.Checkpoint(model=tf.Module()).restore(p2).assert_consumed))
    return out


@case
def c_checkpoint_children_set_later(tf):
    d = _Tmp().path
    ck = tf.train.Checkpoint(a=tf.Variable(1.0))
    ck.b = tf.Variable(2.0)
    ck.nested = {"x": [tf.Variable([3.0]), tf.Variable(4)]}
    p = ck.save(d + "/c")
    ck.b.assign(0.0)
    ck.nested["x"][1].assign(0)
    ck.restore(p).assert_consumed()
    return [tf.train.list_variables(p), ck.b, ck.nested["x"][1], ck.a]

@case
def c_checkpoint_manager(tf):
    d = _Tmp().path + "/mgr"
    ck = tf.train.Checkpoint(v=tf.Variable(1.0))
    mgr = tf.train.CheckpointManager(ck, d, max_to_keep=2)
    out = [mgr.latest_checkpoint, mgr.checkpoints]
    for _ in range(4):
        ck.v.assign_add(1.0)
        out.append(_rel(mgr.save(), d))
    out += [_rel(mgr.latest_checkpoint, d), [_rel(p, d) for p in mgr.checkpoints],
            sorted({f.split(".")[0] for f in __import__("os").listdir(d)}),  # older saves deleted
            _rel(mgr.save(checkpoint_number=10), d), [_rel(p, d) for p in mgr.checkpoints]]
    mgr2 = tf.train.CheckpointManager(ck, d, max_to_keep=2)
    out += [_rel(mgr2.latest_checkpoint, d), [_rel(p, d) for p in mgr2.checkpoints]]
    ck.v.assign(0.0)
    ck.restore(mgr2.latest_checkpoint)
    out += [ck.v, mgr.directory == d, raises(lambda: tf.train.CheckpointManager(ck, d, max_to_keep=0))]
    step = tf.Variable(0)
    mgr3 = tf.train.CheckpointManager(tf.train.Checkpoint(s=step), d + "/steps", max_to_keep=None, step_counter=step)
    step.assign(7)
    out.append(_rel(mgr3.save(), d))
    return out


@case
def c_guide_intro_to_modules_checkpoints(tf):
    # TF's guide "Introduction to modules": lazily built modules, tf.function, write / list / restore,
    # the restore happening before the new model builds its variables.
    d = _Tmp().path

    class FlexibleDenseModule(tf.Module):
        def __init__(self, out_features, name=None):
            super().__init__(name=name)
            self.is_built = False
            self.out_features = out_features

        def __call__(self, x):
            if not self.is_built:
                n = x.shape[-1] * self.out_features
                self.w = tf.Variable(tf.reshape(tf.range(n, dtype=tf.float32) / 7.0 - 0.3,
                                                [x.shape[-1], self.out_features]), name="w")
                self.b = tf.Variable(tf.zeros([self.out_features]), name="b")
                self.is_built = True
            y = tf.matmul(x, self.w) + self.b
            return tf.nn.relu(y)

    class MySequentialModule(tf.Module):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.dense_1 = FlexibleDenseModule(out_features=3)
            self.dense_2 = FlexibleDenseModule(out_features=2)

        @tf.function
        def __call__(self, x):
            x = self.dense_1(x)
            return self.dense_2(x)

    my_model = MySequentialModule(name="the_model")
    first = my_model(tf.constant([[2.0, 2.0, 2.0]]))
    for v in my_model.trainable_variables:
        v.assign(v * 2.0 + 0.1)
    chkp_path = d + "/my_checkpoint"
    checkpoint = tf.train.Checkpoint(model=my_model)
    written = checkpoint.write(chkp_path)
    listed = tf.train.list_variables(chkp_path)
    new_model = MySequentialModule()
    new_checkpoint = tf.train.Checkpoint(model=new_model)
    new_checkpoint.restore(chkp_path)
    again = new_model(tf.constant([[2.0, 2.0, 2.0]]))
    return [first, written == chkp_path, listed, again, my_model(tf.constant([[2.0, 2.0, 2.0]])),
            [v.name for v in new_model.variables], [s.name for s in new_model.submodules]]

@pytest.mark.parametrize("snippet", CASES["checkpoints"])
def test_checkpoints_match_tf(snippet, real_tf):
    check(snippet, real_tf)


def test_checkpoint_restores_optimizer_slots_matches_tf():
    # TF's side uses tf.keras's Adam: it runs in a subprocess with TF's own Keras backend
    # (this process's keras is the JAX one, which TF's Checkpoint cannot track).
    expected = result(run_tf_jobs(_tf_keras_jobs.__file__, [("slots", "checkpoint_restores_optimizer_slots", ())]), "slots")
    assert _tf_keras_jobs.checkpoint_restores_optimizer_slots(tapejax) == expected
