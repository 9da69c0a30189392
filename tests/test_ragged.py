"""tf.ragged (``_tf/_ragged.py``): structure, conversion, indexing, elementwise ops and gradients,
checked against the same computation on Python lists / NumPy, and a random-program test."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax as tf


def test_constant_structure():
    rows = [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]]
    rt = tf.ragged.constant(rows)
    assert rt.to_list() == rows
    assert rt.ragged_rank == 1 and rt.dtype == tf.int32
    assert rt.shape.as_list() == [4, None]
    assert rt.row_lengths().numpy().tolist() == [4, 2, 3, 1]
    assert rt.row_splits.numpy().tolist() == [0, 4, 6, 9, 10]
    assert rt.flat_values.numpy().tolist() == list(range(10))
    assert int(rt.nrows()) == 4
    assert rt.value_rowids().numpy().tolist() == [0, 0, 0, 0, 1, 1, 2, 2, 2, 3]
    assert str(rt) == repr(rt) == "<tf.RaggedTensor [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]]>"
    assert tf.is_tensor(rt) and isinstance(rt, tf.RaggedTensor)


def test_nested_and_dtypes():
    r3 = tf.ragged.constant([[[1, 2], [3]], [[4]]])
    assert r3.ragged_rank == 2 and r3.shape.as_list() == [2, None, None]
    assert r3[0].to_list() == [[1, 2], [3]] and r3[0][0].numpy().tolist() == [1, 2] and int(r3[0, 1, 0]) == 3
    assert tf.ragged.constant([[1.5], [2.0, 3.0]]).dtype == tf.float32
    assert tf.ragged.constant([["a", "b"], ["c"]]).to_list() == [[b"a", b"b"], [b"c"]]
    assert tf.ragged.constant([[], [1]]).dtype == tf.int32
    assert tf.ragged.constant([[], []]).dtype == tf.float32
    assert tf.ragged.constant([[1, 2], [3]], dtype=tf.float32).dtype == tf.float32
    uniform = tf.ragged.constant([[[1, 2], [3, 4]], [[5, 6]]], ragged_rank=1)
    assert uniform.flat_values.shape.as_list() == [3, 2] and uniform.shape.as_list() == [2, None, 2]
    with pytest.raises(ValueError, match="nesting depth"):
        tf.ragged.constant([[1, [2]]])


def test_factories():
    assert tf.RaggedTensor.from_row_lengths([1, 2, 3, 4], [2, 0, 2]).to_list() == [[1, 2], [], [3, 4]]
    assert tf.RaggedTensor.from_row_splits([1, 2, 3, 4], [0, 2, 2, 4]).to_list() == [[1, 2], [], [3, 4]]
    assert tf.RaggedTensor.from_value_rowids([1, 2, 3], [0, 0, 2], nrows=4).to_list() == [[1, 2], [], [3], []]
    assert tf.RaggedTensor.from_tensor([[1, 2, 0], [3, 0, 0]], padding=0).to_list() == [[1, 2], [3]]
    assert tf.RaggedTensor.from_tensor([[1, 2, 0], [3, 0, 0]], lengths=[1, 3]).to_list() == [[1], [3, 0, 0]]
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.RaggedTensor.from_row_splits([1, 2], [0, 3])
    with pytest.raises(ValueError, match="factory"):
        tf.RaggedTensor([1], [0, 1])


def test_to_tensor_and_bounding_shape():
    rt = tf.ragged.constant([[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]])
    assert rt.to_tensor().numpy().tolist() == [[0, 1, 2, 3], [4, 5, 0, 0], [6, 7, 8, 0], [9, 0, 0, 0]]
    assert rt.to_tensor(default_value=-1, shape=[4, 2]).numpy().tolist() == [[0, 1], [4, 5], [6, 7], [9, -1]]
    assert rt.bounding_shape().numpy().tolist() == [4, 4]
    r3 = tf.ragged.constant([[[1, 2], [3]], [[4]]])
    assert r3.to_tensor().numpy().tolist() == [[[1, 2], [3, 0]], [[4, 0], [0, 0]]]
    s = tf.ragged.constant([["a"], ["b", "c"]]).to_tensor()
    assert s.numpy().tolist() == [[b"a", b""], [b"b", b"c"]]


def test_indexing():
    rt = tf.ragged.constant([[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]])
    assert rt[0].numpy().tolist() == [0, 1, 2, 3]
    assert rt[-1].numpy().tolist() == [9]
    assert rt[1:3].to_list() == [[4, 5], [6, 7, 8]]
    assert int(rt[1, 1]) == 5
    with pytest.raises(IndexError):
        rt[7]


def test_elementwise_ops_and_map_flat_values():
    rt = tf.ragged.constant([[1, 2], [3]])
    assert (rt + 1).to_list() == [[2, 3], [4]]
    assert (2 * rt).to_list() == [[2, 4], [6]]
    assert (rt + rt).to_list() == [[2, 4], [6]]
    assert (-rt).to_list() == [[-1, -2], [-3]]
    assert (rt == rt).to_list() == [[True, True], [True]]
    assert (rt > 1).to_list() == [[False, True], [True]]
    assert tf.ragged.map_flat_values(tf.square, rt).to_list() == [[1, 4], [9]]
    other = tf.ragged.constant([[1], [2, 3]])
    with pytest.raises(tf.errors.InvalidArgumentError):
        rt + other
    with pytest.raises(ValueError, match="map_flat_values"):
        tf.abs(rt)


def test_gradient_through_ragged_ops():
    v = tf.Variable([1.0, 2.0, 3.0])
    with tf.GradientTape() as tape:
        rt = tf.RaggedTensor.from_row_lengths(v * 1.0, [2, 1])
        dense = (rt * rt + 1.0).to_tensor(default_value=7.0)
        y = tf.reduce_sum(dense * tf.constant([[1.0, 10.0], [100.0, 1000.0]]))
    g = tape.gradient(y, v)
    # d/dv of sum(w * (v^2 + 1)) over the real entries; the padding is a constant
    np.testing.assert_allclose(g.numpy(), [2 * 1.0 * 1, 2 * 2.0 * 10, 2 * 3.0 * 100])


def test_ragged_through_a_compiled_function():
    f = tf.function(lambda r: r * 2.0 + 1.0)
    rt = tf.ragged.constant([[1.0, 2.0], [3.0]])
    assert f(rt).to_list() == [[3.0, 5.0], [7.0]]


def test_batched_string_split_is_ragged():
    out = tf.strings.split(tf.constant(["Gray wolf", "Quick brown fox", "Lazy dog"]))
    assert isinstance(out, tf.RaggedTensor)
    assert out.to_list() == [[b"Gray", b"wolf"], [b"Quick", b"brown", b"fox"], [b"Lazy", b"dog"]]
    assert tf.strings.bytes_split(tf.constant(["ab", "c"])).to_list() == [[b"a", b"b"], [b"c"]]
    assert tf.strings.unicode_decode(tf.constant(["ab", "c"]), "UTF-8").to_list() == [[97, 98], [99]]
    assert tf.strings.split(tf.constant([["a b", "c"], ["d", "e f g"]])).to_list() == \
        [[[b"a", b"b"], [b"c"]], [[b"d"], [b"e", b"f", b"g"]]]


rows_strategy = st.lists(st.lists(st.integers(-5, 5), max_size=4), min_size=1, max_size=5)


@settings(max_examples=80, deadline=None)
@given(rows=rows_strategy, ops=st.lists(st.sampled_from(["add", "mul", "neg", "self", "square", "slice"]),
                                        max_size=4), default=st.integers(-3, 3))
def test_random_ragged_programs_match_python_lists(rows, ops, default):
    rt = tf.ragged.constant(rows, dtype=tf.int32)
    ref = [list(r) for r in rows]
    for op in ops:
        if op == "add":
            rt, ref = rt + 3, [[x + 3 for x in r] for r in ref]
        elif op == "mul":
            rt, ref = 2 * rt, [[2 * x for x in r] for r in ref]
        elif op == "neg":
            rt, ref = -rt, [[-x for x in r] for r in ref]
        elif op == "self":
            rt, ref = rt + rt, [[2 * x for x in r] for r in ref]
        elif op == "square":
            rt, ref = tf.ragged.map_flat_values(tf.square, rt), [[x * x for x in r] for r in ref]
        elif op == "slice" and len(ref) > 1:
            rt, ref = rt[1:], ref[1:]
    assert rt.to_list() == ref
    assert rt.row_lengths().numpy().tolist() == [len(r) for r in ref]
    width = max((len(r) for r in ref), default=0)
    dense = [r + [default] * (width - len(r)) for r in ref]
    assert rt.to_tensor(default_value=default).numpy().reshape(len(ref), width).tolist() == dense
    for i, r in enumerate(ref):
        assert rt[i].numpy().tolist() == r
