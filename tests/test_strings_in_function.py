"""String tensors inside a compiled ``tapejax.function`` (``_ops/_strtable.py``, ``_ops/strings.py``):
inputs, outputs, constants and string ops, compared with the same code run eagerly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax as tf
from tapejax._ops import _strtable


def test_string_argument_is_traced_by_shape_not_value():
    traces = []

    @tf.function
    def double(a):
        traces.append(str(a))
        return a + a

    assert double(tf.constant("a")).numpy() == b"aa"
    assert double(tf.constant("bcd")).numpy() == b"bcdbcd"
    assert traces == ['Tensor("a:0", shape=(), dtype=string)']
    assert double(tf.constant(["x", "yz"])).numpy().tolist() == [b"xx", b"yzyz"]
    assert double.experimental_get_tracing_count() == 2
    assert double(tf.constant(1)).numpy() == 2


def test_string_ops_in_a_step_match_eager():
    def body(s, x):
        n = tf.strings.length(s)
        joined = tf.strings.join([s, "!"], separator="-")
        return {
            "n": n + 1,
            "joined": joined,
            "eq": s == "bb",
            "ne": tf.not_equal(s, "bb"),
            "as_string": tf.strings.as_string(n),
            "format": tf.strings.format("{} and {}", [s, x]),
            "upper": tf.strings.upper(joined),
            "regex": tf.strings.regex_replace(s, "b+", "B"),
            "substr": tf.strings.substr(s, 0, 2),
            "reduce": tf.strings.reduce_join(s, separator="|"),
            "num": tf.strings.to_number(tf.strings.as_string(x)) * 2.0,
            "stack": tf.stack([s, joined]),
            "gather": tf.gather(s, [2, 0]),
            "rev": tf.reverse(s, [0]),
            "item": s[1],
            "where": tf.where(n > 2, s, joined),
            "concat": tf.concat([s, tf.constant(["const"])], 0),
            "reshape": tf.reshape(s, [3, 1]),
            "ident": tf.identity(s),
            "zeros": tf.zeros_like(s),
            "const": tf.constant("k"),
        }

    s = tf.constant(["a", "bb", "ccc"])
    x = tf.constant([1.5, 2.0, -3.0])
    eager = body(s, x)
    step = tf.function(body)
    for args in [(s, x), (tf.constant(["dddd", "e", ""]), tf.constant([0.0, 1.0, 2.0]))]:
        got = step(*args)
        want = body(*args)
        assert set(got) == set(want)
        for k in want:
            assert got[k].dtype == want[k].dtype, k
            np.testing.assert_array_equal(got[k].numpy(), want[k].numpy(), err_msg=k)
    assert step.experimental_get_tracing_count() == 1
    assert eager["joined"].numpy().tolist() == [b"a-!", b"bb-!", b"ccc-!"]


def test_numpy_string_argument_and_tensorspec():
    f = tf.function(lambda s: tf.strings.join([s, s]))
    assert f(np.array([b"p", b"q"], dtype=object)).numpy().tolist() == [b"pp", b"qq"]
    cf = f.get_concrete_function(tf.TensorSpec([2], tf.string))
    assert cf.structured_outputs.dtype == tf.string
    assert cf(tf.constant(["u", "v"])).numpy().tolist() == [b"uu", b"vv"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected to be a string tensor"):
        cf(tf.constant([1, 2]))


def test_gradient_through_a_step_mixing_strings_and_floats():
    x = tf.Variable([1.0, 2.0])

    @tf.function
    def loss(s):
        n = tf.cast(tf.strings.length(s), tf.float32)
        return tf.reduce_sum(n * x * x), tf.strings.as_string(x)

    s = tf.constant(["ab", "cde"])
    with tf.GradientTape() as tape:
        value, text = loss(s)
    g = tape.gradient(value, x)
    np.testing.assert_allclose(g.numpy(), [2 * 2 * 1.0, 3 * 2 * 2.0])
    assert float(value) == 2 * 1 + 3 * 4
    assert text.numpy().tolist() == [b"1.000000", b"2.000000"]


def test_data_dependent_string_shapes_raise_type_error_in_a_step():
    f = tf.function(lambda s: tf.strings.split(s))
    with pytest.raises(TypeError, match="data-dependent shape"):
        f(tf.constant("a b"))
    # eagerly it works
    assert tf.strings.split(tf.constant("a b")).numpy().tolist() == [b"a", b"b"]


def test_string_and_number_mix_raises_tf_error_at_trace():
    # TF raises TypeError while tracing (Input 'y' of 'Add' Op has type int32 ...)
    f = tf.function(lambda s: s + 1)
    with pytest.raises(TypeError):
        f(tf.constant("a"))


def test_string_tensor_prints_as_symbolic_inside_the_trace():
    seen = []

    @tf.function
    def f(s, *rest, k=None):
        seen.append((str(s), repr(rest[0]), str(k), str(s + s)))
        return s

    f(tf.constant("a"), tf.constant(1), k=tf.constant(2.0))
    assert seen[0][:3] == ('Tensor("s:0", shape=(), dtype=string)', "<tf.Tensor 'rest_0:0' shape=() dtype=int32>",
                           'Tensor("k:0", shape=(), dtype=float32)')
    # an intermediate has no name: it prints as traced
    assert seen[0][3] == "tf.Tensor(<traced>, shape=(), dtype=string)"


def test_call_ids_are_released_in_generations(monkeypatch):
    # The table of call strings is bounded: after two generations an id is gone, and reading it
    # raises rather than returning another string.
    monkeypatch.setattr(_strtable, "_GENERATION", 4)
    ids = _strtable.intern(np.array([b"g0"], dtype=object), False)
    assert _strtable.lookup(ids).tolist() == [b"g0"]
    for i in range(12):
        _strtable.intern(np.array([f"other{i}".encode()], dtype=object), False)
    with pytest.raises(tf.errors.InternalError, match="released"):
        _strtable.lookup(ids)
    f = tf.function(lambda s: tf.strings.upper(s))
    for i in range(20):
        assert f(tf.constant([f"w{i}", "x"])).numpy().tolist() == [f"W{i}".encode(), b"X"]
    # permanent ids (program constants) stay
    p = _strtable.intern(np.array([b"perm"], dtype=object), True)
    for i in range(12):
        _strtable.intern(np.array([f"more{i}".encode()], dtype=object), False)
    assert _strtable.lookup(p).tolist() == [b"perm"]


_UNARY = {
    "upper": lambda s: tf.strings.upper(s),
    "lower": lambda s: tf.strings.lower(s),
    "strip": lambda s: tf.strings.strip(s),
    "plus": lambda s: s + "x ",
    "prefix": lambda s: tf.strings.join(["<", s]),
    "reverse": lambda s: tf.reverse(s, [0]),
    "substr": lambda s: tf.strings.substr(s, 1, 2),
    "regex": lambda s: tf.strings.regex_replace(s, "[aeiou]", "_"),
    "roll": lambda s: tf.roll(s, 1, 0),
    "where": lambda s: tf.where(tf.strings.length(s) > 2, s, tf.strings.upper(s)),
    "self_add": lambda s: s + s,
}
_TAILS = {
    "length": lambda s: tf.strings.length(s),
    "equal_first": lambda s: tf.equal(s, s[0]),
    "reduce": lambda s: tf.strings.reduce_join(s, separator=","),
    "identity": lambda s: s,
}


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(st.text(alphabet="abcde XYZ", max_size=6), min_size=1, max_size=5),
    ops=st.lists(st.sampled_from(sorted(_UNARY)), min_size=1, max_size=5),
    tail=st.sampled_from(sorted(_TAILS)),
)
def test_random_string_programs_compiled_match_eager(words, ops, tail):
    def program(s):
        for name in ops:
            s = _UNARY[name](s)
        return _TAILS[tail](s)

    s = tf.constant(words)
    want = program(s)
    got = tf.function(program)(s)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_tf_print_of_traced_and_constant_strings_in_a_step(capfd):
    import sys

    @tf.function
    def p(s):
        tf.print("value:", s, tf.constant("c"), tf.strings.length(s), output_stream=sys.stdout)
        return s

    p(tf.constant(["ab", "c"]))
    p(tf.constant(["xyz", ""]))
    assert capfd.readouterr().out == 'value: ["ab" "c"] "c" [2 1]\nvalue: ["xyz" ""] "c" [3 0]\n'


def test_unsupported_string_uses_in_a_step_raise_type_error_saying_what_to_do():
    v = tf.Variable("abc")

    @tf.function
    def assign():
        v.assign(v + "d")

    with pytest.raises(TypeError, match="string variable"):
        assign()

    @tf.function
    def branch(s):
        return tf.cond(tf.strings.length(s) > 1, lambda: s + "long", lambda: s)

    with pytest.raises(TypeError, match="tf.where"):
        branch(tf.constant("ab"))

    # what the message suggests works
    where = tf.function(lambda s: tf.where(tf.strings.length(s) > 1, s + "long", s))
    assert where(tf.constant(["ab", "a"])).numpy().tolist() == [b"ablong", b"a"]
