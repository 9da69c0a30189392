"""Tensor and Variable surface, conversion rules and the x64 rule (issue 2)."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf


def test_repr_and_str_like_tf():
    assert str(tf.constant(6.0)) == "tf.Tensor(6.0, shape=(), dtype=float32)"
    assert repr(tf.constant(6.0)) == "<tf.Tensor: shape=(), dtype=float32, numpy=6.0>"
    assert str(tf.constant([1, 2, 3])) == "tf.Tensor([1 2 3], shape=(3,), dtype=int32)"
    assert repr(tf.constant([1, 2, 3])) == "<tf.Tensor: shape=(3,), dtype=int32, numpy=array([1, 2, 3], dtype=int32)>"
    assert str(tf.constant([[1.0, 2.0], [3.0, 4.0]])) == "tf.Tensor(\n[[1. 2.]\n [3. 4.]], shape=(2, 2), dtype=float32)"
    assert repr(tf.constant(True)) == "<tf.Tensor: shape=(), dtype=bool, numpy=True>"
    assert repr(tf.constant(1 / 3)) == "<tf.Tensor: shape=(), dtype=float32, numpy=0.3333333432674408>"
    assert str(tf.constant(1 / 3)) == "tf.Tensor(0.33333334, shape=(), dtype=float32)"
    assert repr(tf.Variable([[1.0, 2.0]], name="w")) == (
        "<tf.Variable 'w:0' shape=(1, 2) dtype=float32, numpy=array([[1., 2.]], dtype=float32)>"
    )
    assert repr(tf.float32) == "tf.float32" and str(tf.float32) == "<dtype: 'float32'>"


def test_shape_dtype_ndim_numpy():
    t = tf.ones((2, 3))
    assert t.shape == (2, 3) and t.shape.as_list() == [2, 3] and t.shape.rank == 2 and t.ndim == 2
    assert repr(t.shape) == "TensorShape([2, 3])" and str(t.shape) == "(2, 3)"
    assert t.dtype == tf.float32 and t.dtype.name == "float32" and t.dtype.is_floating and not t.dtype.is_integer
    assert t.dtype == np.float32 and t.dtype == "float32" and t.dtype.as_numpy_dtype is np.float32
    assert isinstance(t.numpy(), np.ndarray) and t.numpy().shape == (2, 3)
    s = tf.constant(3.0).numpy()
    assert isinstance(s, np.float32) and s == 3.0


def test_python_protocols():
    s = tf.constant(3.5)
    assert float(s) == 3.5 and int(s) == 3 and bool(s)
    assert not bool(tf.constant(0.0))
    with pytest.raises(ValueError):
        bool(tf.constant([1.0, 2.0]))
    assert list(range(tf.constant(3))) == [0, 1, 2]
    assert [10, 20, 30][tf.constant(1)] == 20
    with pytest.raises(TypeError):
        range(tf.constant(3.0))
    with pytest.raises(TypeError, match="Scalar tensor has no `len"):
        len(s)
    assert len(tf.ones((4, 2))) == 4
    rows = list(tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    assert [r.numpy().tolist() for r in rows] == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(TypeError, match="iterate over a scalar"):
        iter(s).__next__()
    assert np.asarray(tf.constant([1.0, 2.0])).dtype == np.float32
    assert jnp.asarray(tf.constant([1.0, 2.0])).dtype == jnp.float32


def test_unhashable_with_ref():
    t = tf.constant(1.0)
    v = tf.Variable(1.0)
    with pytest.raises(TypeError, match="Tensor is unhashable"):
        hash(t)
    with pytest.raises(TypeError, match="Variable is unhashable"):
        {v: 1}
    d = {t.ref(): 1, v.ref(): 2}
    assert d[t.ref()] == 1 and t.ref().deref() is t and v.ref().deref() is v
    assert tf.constant(1.0).ref() != t.ref()


def test_indexing_and_operators():
    x = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x[1][2].numpy() == 6.0
    assert x[:, ::2].numpy().tolist() == [[1.0, 3.0], [4.0, 6.0]]
    assert x[..., tf.newaxis].shape == (2, 3, 1)
    assert x[tf.constant(1)].numpy().tolist() == [4.0, 5.0, 6.0]
    assert ((x + 1) * 2 - x / 2).numpy()[0, 0] == 3.5
    assert (x @ tf.transpose(x)).shape == (2, 2)
    assert (2.0**tf.constant(3.0)).numpy() == 8.0
    assert (-x).numpy()[0, 0] == -1.0 and abs(-x).numpy()[0, 0] == 1.0
    assert (x > 2.0).dtype == tf.bool and (x > 2.0).numpy().sum() == 4
    assert (x == x).numpy().all()
    assert (tf.constant(7) // 2).numpy() == 3 and (tf.constant(7) % 2).numpy() == 1
    assert (tf.constant(5.5) % 2).numpy() == 1.5


def test_tf_dtype_strictness():
    with pytest.raises(tf.errors.InvalidArgumentError, match="Mul"):
        tf.constant(1.0) * tf.constant(1)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.add(tf.constant(1.0), tf.constant(1))
    with pytest.raises(TypeError, match="Cannot convert 2.5 to EagerTensor of dtype int32"):
        tf.constant(1) * 2.5
    assert (tf.constant(1.0) * 2).dtype == tf.float32
    assert (tf.constant(1.0, tf.float16) * 2.0).dtype == tf.float16
    assert (2 ** tf.constant(3)).dtype == tf.int32
    assert (tf.constant(1.0) * np.float64(2.5)).dtype == tf.float32
    assert (tf.constant(1) * np.float64(2.0)).numpy() == 2
    assert (tf.constant(1.0) * True).numpy() == 1.0
    assert issubclass(tf.errors.InvalidArgumentError, tf.errors.OpError)


def test_constant_and_conversion_dtypes():
    assert tf.constant(1).dtype == tf.int32
    if tf.x64_enabled():
        assert tf.constant(2**40).dtype == tf.int64
    else:
        with pytest.raises(TypeError, match="64-bit"):
            tf.constant(2**40)
    assert tf.constant([1, 2.0]).dtype == tf.float32
    assert tf.constant(np.float32(1)).dtype == tf.float32
    assert tf.constant(1, dtype=tf.float32).numpy() == 1.0
    assert tf.constant(np.array([1.0]), dtype=tf.float32).dtype == tf.float32
    assert tf.constant(0.0, shape=[2, 3]).shape == (2, 3)
    with pytest.raises(TypeError, match="Cannot convert 1.5 to EagerTensor of dtype int32"):
        tf.constant(1.5, dtype=tf.int32)
    assert tf.convert_to_tensor(2.0).dtype == tf.float32 and tf.convert_to_tensor(2).dtype == tf.int32
    assert tf.ones((2, 2)).dtype == tf.float32 and tf.zeros(3).dtype == tf.float32
    assert tf.ones_like(tf.constant([1, 2])).dtype == tf.int32
    t = tf.constant(1.0)
    assert tf.convert_to_tensor(t) is t
    with pytest.raises(ValueError, match="requested dtype int32"):
        tf.convert_to_tensor(t, dtype=tf.int32)
    assert tf.constant([tf.constant(1.0), 2.0]).numpy().tolist() == [1.0, 2.0]


def test_numpy_int64_narrowed_without_x64_when_lossless():
    assert tf.constant(np.array([1, 2])).dtype == tf.int32
    if not tf.x64_enabled():
        with pytest.raises(TypeError, match="64-bit"):
            tf.constant(np.array([2**40]))


def test_float64_without_x64_raises_with_instructions():
    if tf.x64_enabled():
        pytest.skip("this process runs with x64 on; the subprocess test below covers both modes")
    for make in (lambda: tf.constant(1.0, dtype=tf.float64), lambda: tf.constant(np.array([1.0])),
                 lambda: tf.Variable(np.float64(1.0)), lambda: tf.zeros(2, dtype=tf.float64)):
        with pytest.raises(TypeError, match="JAX_ENABLE_X64=1"):
            make()


def test_float64_inside_jax_enable_x64_context():
    with jax.enable_x64():
        x = tf.constant(np.array([1.0, 2.0]))
        assert x.dtype == tf.float64
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.reduce_sum(x * x)
        g = t.gradient(y, x)
        assert g.dtype == tf.float64
        np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
        assert tf.linspace(-10, 10, 5).dtype == tf.float64


def test_both_x64_modes_in_subprocesses():
    code = (
        "import numpy as np, tapejax as tf\n"
        "x = tf.constant(np.array([1.5, 2.0]))\n"
        "with tf.GradientTape() as t:\n"
        "    t.watch(x); y = tf.reduce_sum(x ** 3)\n"
        "g = t.gradient(y, x)\n"
        "print(g.dtype.name, g.numpy().tolist())\n"
    )
    on = subprocess.run([sys.executable, "-c", code], env={**_env(), "JAX_ENABLE_X64": "1"}, capture_output=True, text=True)
    assert on.returncode == 0, on.stderr
    assert on.stdout.strip() == "float64 [6.75, 12.0]"
    off = subprocess.run([sys.executable, "-c", code], env={**_env(), "JAX_ENABLE_X64": "0"}, capture_output=True, text=True)
    assert off.returncode != 0 and "TypeError" in off.stderr and "JAX_ENABLE_X64" in off.stderr


def _env():
    import os

    return {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}


def test_linspace_int_endpoints_without_x64_is_float32():
    if tf.x64_enabled():
        pytest.skip("x64 mode on")
    x = tf.linspace(-10, 10, 5)
    assert x.dtype == tf.float32 and x.numpy().tolist() == [-10.0, -5.0, 0.0, 5.0, 10.0]


def test_variable_basics():
    assert tf.Variable(2).dtype == tf.int32 and tf.Variable(2.0).dtype == tf.float32
    assert tf.Variable([1, 2]).dtype == tf.int32 and tf.Variable([1.0, 2]).dtype == tf.float32
    v = tf.Variable(5, dtype=tf.float32, name="myvar")
    assert v.name == "myvar:0" and v.trainable and v.numpy() == 5.0 and v.shape == ()
    r = v.assign(2.0)
    assert v.numpy() == 2.0 and r is not None
    assert v.assign(3.0, read_value=False) is None
    v.assign_add(1.5)
    v.assign_sub(0.5)
    assert v.numpy() == 4.0
    assert float(v.value()) == 4.0 and float(v.read_value()) == 4.0
    assert isinstance(v + 1.0, tf.Tensor) and (v * 2.0).numpy() == 8.0
    w = tf.Variable([1.0, 2.0])
    with pytest.raises(ValueError, match="Shape mismatch"):
        w.assign([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="Shape mismatch"):
        w.assign(1.0)
    with pytest.raises(ValueError, match="requested dtype float32"):
        w.assign(tf.constant([1, 2]))
    w.assign(np.array([3.0, 4.0]))  # NumPy values convert to the variable's dtype, as in TF
    assert w.numpy().tolist() == [3.0, 4.0]
    with pytest.raises(TypeError):
        w.assign("a")
    assert tf.Variable(lambda: tf.ones(2)).numpy().tolist() == [1.0, 1.0]


def test_assign_inside_tape_watches_variable_as_tf():
    v = tf.Variable(1.0)
    with tf.GradientTape() as t:
        v.assign(2.0)
    assert t.watched_variables() == (v,)


def test_tensor_and_variable_are_pytrees():
    t = tf.constant([1.0, 2.0])
    v = tf.Variable([3.0])
    leaves = jax.tree_util.tree_leaves({"t": t, "v": v})
    assert len(leaves) == 2 and all(isinstance(x, jax.Array) for x in leaves)

    @jax.jit
    def f(tree):
        return jax.tree_util.tree_map(lambda a: a * 2, tree)

    out = f({"t": t, "v": v})
    # A rebuilt Variable is its value: a detached Variable's assign would reach nothing.
    assert type(out["t"]) is tf.Tensor and type(out["v"]) is tf.Tensor
    assert out["t"].numpy().tolist() == [2.0, 4.0] and out["v"].numpy().tolist() == [6.0]
    assert jax.tree_util.tree_structure(jax.tree_util.tree_map(lambda a: a, v)) == jax.tree_util.tree_structure(t)
    g = jax.grad(lambda tree: jnp.sum(tree["t"]._value ** 2))({"t": t})
    assert g["t"].numpy().tolist() == [2.0, 4.0]


def test_respects_default_device():
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):
        x = tf.constant([1.0])
        with tf.GradientTape() as t:
            t.watch(x)
            y = x * 2.0
        g = t.gradient(y, x)
    assert g._value.devices() == {cpu}


def test_tf_print_formats_like_tf(capsys):
    tf.print(tf.constant([8.0, 8.0]), tf.constant(6.0), None, "s", output_stream=sys.stdout)
    tf.print(tf.constant([[1.5, 2.0], [3.0, 4.0]]))
    out, err = capsys.readouterr()
    assert out == "[8 8] 6 None s\n"
    assert err == "[[1.5 2]\n [3 4]]\n"


def test_python_scalar_constants_share_one_device_array():
    # tf.constant of a Python scalar reuses one immutable device array per (type, value, dtype):
    # a fresh host-to-device transfer per call costs a compiled step about as much as the step.
    import math

    import jax

    a, b = tf.constant(3), tf.constant(3)
    assert a._value is b._value and a is not b and a._id != b._id
    assert tf.constant(3.0)._value is not a._value and tf.constant(3.0).dtype == tf.float32
    assert tf.constant(True).dtype == tf.bool and tf.constant(1).dtype == tf.int32
    assert tf.constant(3, dtype=tf.float32).dtype == tf.float32
    # -0.0 and 0.0 are different constants; NaN is one.
    assert math.copysign(1.0, float(tf.constant(-0.0))) == -1.0
    assert math.copysign(1.0, float(tf.constant(0.0))) == 1.0
    assert np.isnan(tf.constant(float("nan")).numpy())
    # Inside a JAX trace a conversion is staged, never served from (or stored into) the cache.
    seen = []

    @jax.jit
    def g(x):
        c = tf.constant(5.0)
        seen.append(isinstance(c._value, jax.core.Tracer))
        return x + c._value

    assert float(g(1.0)) == 6.0
    from tapejax._ops import _tensor

    assert all(not isinstance(v, jax.core.Tracer) for v in _tensor._SCALARS.values())
    # TF's dtype rules still apply (1.5 into int32 raises).
    with pytest.raises(TypeError):
        tf.constant(1.5, dtype=tf.int32)
