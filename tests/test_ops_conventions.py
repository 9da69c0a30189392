"""TF's gradient conventions, dtype rules, error types and result structures, pinned.

The expected numbers are real TF 2.21's (probe outputs in the project notes, and
re-checked live by ``tests/oracle/test_oracle_ops.py``). Gradient conventions are
checked with the replay compiled and uncompiled, and through the forward and
reverse jacobian, because each is a different JAX transform of the same rule.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import tapejax as tf

NAN = float("nan")


def grad(f, *xs, compile=True, module=tf):
    """TF-style gradient of ``f(module, *xs)`` with respect to every input (None where unconnected)."""
    xs = [module.constant(x) for x in xs]
    if module is tf:
        tf.set_replay_compile(compile)
    try:
        with module.GradientTape() as t:
            t.watch(xs)
            y = f(module, *xs)
        g = t.gradient(y, xs)
    finally:
        if module is tf:
            tf.set_replay_compile(True)
    return [None if v is None else module.convert_to_tensor(v).numpy().tolist() for v in g]


def close(a, b):
    return np.allclose(np.asarray(a, dtype=np.complex128), np.asarray(b, dtype=np.complex128), rtol=1e-5, atol=1e-6, equal_nan=True)


# ---- the conventions the issue names ---------------------------------------------------------------------

CONVENTIONS = [
    # (id, fn, inputs, TF's gradient)
    ("abs at 0", lambda tf, x: tf.abs(x), [[-2.0, 0.0, 2.0]], [[-1.0, 0.0, 1.0]]),
    ("maximum tie -> first", lambda tf, x, y: tf.maximum(x, y), [1.0, 1.0], [1.0, 0.0]),
    ("minimum tie -> first", lambda tf, x, y: tf.minimum(x, y), [1.0, 1.0], [1.0, 0.0]),
    ("maximum python tie", lambda tf, x: tf.maximum(x, 2.0), [2.0], [1.0]),
    ("where masks sqrt(0)", lambda tf, x: tf.where(x > 0, tf.sqrt(x), 0.0), [[0.0, 4.0]], [[0.0, 0.25]]),
    ("where masks sqrt(-1)", lambda tf, x: tf.where(x > 0, tf.sqrt(x), tf.zeros_like(x)), [[-1.0, 4.0]], [[0.0, 0.25]]),
    ("where masks rsqrt(0)", lambda tf, x: tf.where(x > 0, tf.math.rsqrt(x), 0.0), [[0.0]], [[0.0]]),
    ("where masks reciprocal(0)", lambda tf, x: tf.where(x > 0, tf.math.reciprocal(x), 0.0), [[0.0]], [[0.0]]),
    ("where keeps log(0)'s nan", lambda tf, x: tf.where(x > 0, tf.math.log(x), 0.0), [[0.0]], [[NAN]]),
    ("where keeps 1/x's nan", lambda tf, x: tf.where(x > 0, 1.0 / x, 0.0), [[0.0]], [[NAN]]),
    ("sqrt at 0 unmasked", lambda tf, x: tf.sqrt(x), [0.0], [float("inf")]),
    ("norm of masked zeros", lambda tf, x: tf.where(False, tf.norm(x), 0.0), [[0.0, 0.0]], [[0.0, 0.0]]),
    ("norm at 0 is nan", lambda tf, x: tf.norm(x), [[0.0, 0.0]], [[NAN, NAN]]),
    ("pow d/dp at x<0 is 0", lambda tf, x, p: tf.pow(x, p), [-2.0, 2.0], [-4.0, 0.0]),
    ("pow at 0,2", lambda tf, x, p: tf.pow(x, p), [0.0, 2.0], [0.0, 0.0]),
    ("pow 0^0: d/dx nan", lambda tf, x, p: tf.pow(x, p), [0.0, 0.0], [NAN, 0.0]),
    ("pow positive", lambda tf, x, p: tf.pow(x, p), [2.0, 2.0], [4.0, 2.7725887]),
    ("x**2 at 0", lambda tf, x: x ** 2, [0.0], [0.0]),
    ("sign connected, zero", lambda tf, x: tf.sign(x), [[-3.0, 0.0, 2.0]], [[0.0, 0.0, 0.0]]),
    ("relu at 0", lambda tf, x: tf.nn.relu(x), [[0.0, -1.0, 2.0]], [[0.0, 0.0, 1.0]]),
    ("relu6 kinks", lambda tf, x: tf.nn.relu6(x), [[0.0, 6.0, 3.0, -1.0, 7.0]], [[0.0, 0.0, 1.0, 0.0, 0.0]]),
    ("leaky_relu at 0", lambda tf, x: tf.nn.leaky_relu(x), [[0.0, -1.0]], [[0.2, 0.2]]),
    ("elu at 0", lambda tf, x: tf.nn.elu(x), [[0.0, -1.0]], [[1.0, 0.36787945]]),
    ("selu at 0", lambda tf, x: tf.nn.selu(x), [[0.0, -1.0, 1.0]], [[1.050701, 0.64676857, 1.050701]]),
    ("softplus at 0", lambda tf, x: tf.nn.softplus(x), [0.0], [0.5]),
    ("clip_by_value bounds inclusive", lambda tf, x: tf.clip_by_value(x, 0.0, 1.0), [[-1.0, 0.0, 0.5, 1.0, 2.0]], [[0.0, 1.0, 1.0, 1.0, 0.0]]),
    ("clip_by_value bound grads", lambda tf, x, lo, hi: tf.clip_by_value(x, lo, hi), [[-1.0, 0.5, 2.0], 0.0, 1.0], [[0.0, 1.0, 0.0], 1.0, 1.0]),
    ("clip_by_norm at 0", lambda tf, x: tf.clip_by_norm(x, 1.0), [[0.0, 0.0]], [[1.0, 1.0]]),
    ("clip_by_norm", lambda tf, x: tf.clip_by_norm(x, 1.0), [[3.0, 4.0]], [[0.032, -0.024]]),
    ("l2_normalize at 0", lambda tf, x: tf.math.l2_normalize(x), [[0.0, 0.0]], [[1e6, 1e6]]),
    ("reduce_max ties split", lambda tf, x: tf.reduce_max(x), [[1.0, 3.0, 3.0]], [[0.0, 0.5, 0.5]]),
    ("reduce_min ties split", lambda tf, x: tf.reduce_min(x), [[1.0, 1.0, 3.0]], [[0.5, 0.5, 0.0]]),
    ("segment_max ties split", lambda tf, x: tf.math.segment_max(x, [0, 0, 1]), [[5.0, 5.0, 2.0]], [[0.5, 0.5, 1.0]]),
    ("reduce_prod with a zero", lambda tf, x: tf.reduce_prod(x), [[2.0, 0.0, 3.0]], [[0.0, 6.0, 0.0]]),
    ("reduce_prod with two zeros", lambda tf, x: tf.reduce_prod(x), [[2.0, 0.0, 0.0]], [[0.0, 0.0, 0.0]]),
    ("cumprod with a zero (TF's div_no_nan)", lambda tf, x: tf.math.cumprod(x), [[2.0, 0.0, 3.0]], [[1.0, 0.0, 0.0]]),
    ("reduce_logsumexp all -inf", lambda tf, x: tf.reduce_logsumexp(x), [[-np.inf, -np.inf]], [[NAN, NAN]]),
    ("reduce_std constant", lambda tf, x: tf.math.reduce_std(x), [[1.0, 1.0]], [[NAN, NAN]]),
    ("top_k ties to lower index", lambda tf, x: tf.math.top_k(x, 2).values * [1.0, 10.0], [[1.0, 3.0, 2.0, 3.0]], [[0.0, 1.0, 0.0, 10.0]]),
    ("max_pool tie -> first", lambda tf, x: tf.nn.max_pool2d(x, 2, 2, "VALID"), [np.ones((1, 2, 2, 1), np.float32)], [[[[[1.0], [0.0]], [[0.0], [0.0]]]]]),
    ("max_pool overlapping", lambda tf, x: tf.nn.max_pool2d(x, 2, 1, "VALID"),
     [np.array([1.0, 3, 3, 2, 3, 1, 0, 3, 3], np.float32).reshape(1, 3, 3, 1)], [np.array([0.0, 2, 0, 0, 2, 0, 0, 0, 0]).reshape(1, 3, 3, 1).tolist()]),
    ("softmax xent: softmax - labels", lambda tf, z, x: tf.nn.softmax_cross_entropy_with_logits(z, x), [[[1.0, 1.0]], [[1.0, 2.0]]],
     [[[1.3132616, 0.31326166]], [[-0.7310586, -0.26894143]]]),
    ("sigmoid xent label grad", lambda tf, z, x: tf.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x), [[1.0, 0.3], [2.0, -1.0]],
     [[-2.0, 1.0], [-0.11920292, -0.03105858]]),
    ("eigh reads the lower triangle", lambda tf, a: tf.linalg.eigh(a)[0] * [1.0, 2.0], [[[4.0, 2.0], [0.5, 3.0]]],
     [[[1.8535533, 0.0], [0.70710665, 1.1464465]]]),
    ("cholesky grad symmetric", lambda tf, a: tf.linalg.cholesky(a) * [[1.0, 0.0], [2.0, 3.0]], [[[4.0, 2.0], [0.5, 3.0]]],
     [[[0.20117484, 0.39060128], [0.39060128, 0.87518996]]]),
    ("gather sums repeats", lambda tf, x: tf.gather(x, [0, 0, 2]), [[1.0, 2.0, 3.0]], [[2.0, 0.0, 1.0]]),
    ("dropout-free identity", lambda tf, x: tf.identity(x), [1.0], [1.0]),
    ("square complex (conjugate)", lambda tf, z: tf.square(z), [np.complex64(3 + 4j)], [6 - 8j]),
    ("abs complex", lambda tf, z: tf.abs(z), [np.complex64(3 + 4j)], [0.6 + 0.8j]),
    ("sqrt complex", lambda tf, z: tf.sqrt(z), [np.complex64(3 + 4j)], [0.2 + 0.1j]),
    ("strided getitem", lambda tf, x: x[::2] * [1.0, 10.0], [[1.0, 2.0, 3.0]], [[1.0, 0.0, 10.0]]),
]


@pytest.mark.parametrize("compile", [True, False], ids=["compiled", "uncompiled"])
@pytest.mark.parametrize("fn, xs, expected", [c[1:] for c in CONVENTIONS], ids=[c[0] for c in CONVENTIONS])
def test_gradient_convention(fn, xs, expected, compile):
    got = grad(fn, *xs, compile=compile)
    for g, e in zip(got, expected):
        assert g is not None
        assert close(g, e), (g, e)


@pytest.mark.parametrize("name, fn, x", [
    ("sqrt", lambda x: tf.where(x > 0, tf.sqrt(x), 0.0), [0.0, 4.0]),
    ("rsqrt", lambda x: tf.where(x > 0, tf.math.rsqrt(x), 0.0), [0.0, 4.0]),
    ("reciprocal", lambda x: tf.where(x > 0, tf.math.reciprocal(x), 0.0), [0.0, 4.0]),
])
def test_masked_singularity_is_zero_in_jacobians(name, fn, x):
    # The rule is a JAX custom_jvp, so forward-mode (jacfwd) and vmapped reverse-mode agree with TF.
    x = tf.constant(x)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = fn(x)
    for pfor in (True, False):
        j = t.jacobian(y, x, experimental_use_pfor=pfor).numpy()
        assert np.isfinite(j).all() and j[0, 0] == 0.0, (name, j)


def test_masked_sqrt_second_order_is_tf_nan():
    # TF: the second derivative of where(x > 0, sqrt(x), 0) at 0 is nan (SqrtGradGrad is 0/0 there).
    x = tf.constant(0.0)
    with tf.GradientTape() as t2:
        t2.watch(x)
        with tf.GradientTape() as t1:
            t1.watch(x)
            y = tf.where(x > 0, tf.sqrt(x), 0.0)
        g = t1.gradient(y, x)
    assert float(g) == 0.0
    assert np.isnan(float(t2.gradient(g, x)))


UNCONNECTED = [
    lambda tf, x: tf.round(x), lambda tf, x: tf.floor(x), lambda tf, x: tf.math.ceil(x), lambda tf, x: tf.math.rint(x),
    lambda tf, x: tf.cast(tf.argmax(x), tf.float32), lambda tf, x: tf.cast(tf.argmin(x), tf.float32), lambda tf, x: tf.cast(x > 0, tf.float32),
    lambda tf, x: tf.cast(tf.cast(x, tf.int32), tf.float32), lambda tf, x: tf.one_hot([0, 1], 2, on_value=x[0], off_value=0.0),
    lambda tf, x: tf.math.floordiv(x, 2.0), lambda tf, x: tf.cast(tf.math.count_nonzero(x), tf.float32),
    lambda tf, x: tf.random.shuffle(x), lambda tf, x: tf.stop_gradient(x),
]
UNCONNECTED_IDS = ["round", "floor", "ceil", "rint", "argmax", "argmin", "comparison", "int cast", "one_hot", "floordiv",
                   "count_nonzero", "shuffle", "stop_gradient"]


@pytest.mark.parametrize("fn", UNCONNECTED, ids=UNCONNECTED_IDS)
def test_unconnected_ops_give_none(fn):
    assert grad(fn, [1.5, -0.5]) == [None]


def test_gather_gradient_is_a_dense_tensor_that_converts():
    x = tf.Variable([1.0, 2.0, 3.0])
    with tf.GradientTape() as t:
        y = tf.reduce_sum(tf.gather(x, [0, 0, 2]))
    g = t.gradient(y, x)
    assert type(g) is tf.Tensor and g.numpy().tolist() == [2.0, 0.0, 1.0]
    assert tf.convert_to_tensor(g) is g and tf.is_tensor(g) and not tf.is_tensor(np.ones(2))
    x.assign_sub(0.5 * g)
    assert x.numpy().tolist() == [0.0, 2.0, 2.5]


def test_nested_tapes_through_tf_rules():
    # Higher order through the custom rules (pow's TF formula, sqrt's kernel).
    x = tf.constant(1.5)
    with tf.GradientTape() as t2:
        t2.watch(x)
        with tf.GradientTape() as t1:
            t1.watch(x)
            y = tf.pow(x, 3.0) + tf.sqrt(x)
        g = t1.gradient(y, x)
    h = t2.gradient(g, x)
    assert np.isclose(float(g), 3 * 1.5 ** 2 + 0.5 / np.sqrt(1.5))
    assert np.isclose(float(h), 6 * 1.5 - 0.25 * 1.5 ** -1.5)


# ---- dtype rules -------------------------------------------------------------------------------------------------

def F(tf):
    return tf.constant([1.0, 2.0])


def I(tf):  # noqa: E743
    return tf.constant([1, 2])


MIXED = [
    ("add", lambda tf: tf.add(F(tf), I(tf))), ("operator +", lambda tf: F(tf) + I(tf)), ("multiply", lambda tf: tf.multiply(I(tf), F(tf))),
    ("maximum", lambda tf: tf.maximum(F(tf), I(tf))), ("pow", lambda tf: tf.pow(F(tf), I(tf))), ("atan2", lambda tf: tf.math.atan2(F(tf), I(tf))),
    ("matmul", lambda tf: tf.matmul(tf.ones((2, 2)), tf.ones((2, 2), tf.int32))),
    ("concat", lambda tf: tf.concat([F(tf), I(tf)], 0)), ("stack", lambda tf: tf.stack([F(tf), I(tf)])), ("where", lambda tf: tf.where([True, False], F(tf), I(tf))),
    ("clip_by_value", lambda tf: tf.clip_by_value(F(tf), tf.constant(0), tf.constant(1))), ("tensordot", lambda tf: tf.tensordot(F(tf), I(tf), 1)),
    ("einsum", lambda tf: tf.einsum("i,i->", F(tf), I(tf))), ("squared_difference", lambda tf: tf.math.squared_difference(F(tf), I(tf))),
    ("add_n", lambda tf: tf.math.add_n([F(tf), I(tf)])), ("linalg.solve", lambda tf: tf.linalg.solve(tf.eye(2), tf.ones((2, 1), tf.int32))),
    ("equal", lambda tf: tf.equal(F(tf), I(tf))), ("float64 + float32", lambda tf: tf.add(tf.ones(2), tf.ones(2, tf.float16))),
]


@pytest.mark.parametrize("fn", [m[1] for m in MIXED], ids=[m[0] for m in MIXED])
def test_mixed_dtypes_raise_invalid_argument(fn):
    with pytest.raises(tf.errors.InvalidArgumentError, match="tf.cast|dtype|cast"):
        fn(tf)


FLOAT_ONLY = [
    ("sqrt", lambda tf: tf.sqrt(I(tf))), ("exp", lambda tf: tf.exp(1)), ("sigmoid", lambda tf: tf.nn.sigmoid(I(tf))), ("log", lambda tf: tf.math.log(I(tf))),
    ("softmax", lambda tf: tf.nn.softmax(I(tf))), ("is_nan", lambda tf: tf.math.is_nan(I(tf))), ("det", lambda tf: tf.linalg.det([[1, 2], [3, 4]])),
    ("clip_by_norm", lambda tf: tf.clip_by_norm(I(tf), 1)), ("reduce_sum bool", lambda tf: tf.reduce_sum([True, False])),
    ("negative uint8", lambda tf: tf.negative(tf.constant([1], tf.uint8))), ("logical_and int", lambda tf: tf.logical_and(I(tf), I(tf))),
    ("check_numerics int", lambda tf: tf.debugging.check_numerics(I(tf), "m")), ("reduce_logsumexp int", lambda tf: tf.reduce_logsumexp(I(tf))),
]


@pytest.mark.parametrize("fn", [m[1] for m in FLOAT_ONLY], ids=[m[0] for m in FLOAT_ONLY])
def test_kernel_dtype_lists_raise_invalid_argument(fn):
    with pytest.raises(tf.errors.InvalidArgumentError, match="allowed values"):
        fn(tf)


def test_python_numbers_take_the_tensor_dtype():
    assert tf.add(tf.constant([1, 2]), 3).dtype == tf.int32
    assert (tf.constant([1.0], tf.float16) * 2).dtype == tf.float16
    with pytest.raises(TypeError, match="Cannot convert 2.5"):
        tf.maximum(tf.constant(1), 2.5)
    assert tf.clip_by_value(tf.constant([1.0, 5.0]), 2, 3).numpy().tolist() == [2.0, 3.0]
    assert tf.nn.leaky_relu([-1, 2]).dtype == tf.float32  # TF converts ints to float32 here


def test_integer_ops_follow_tf():
    assert tf.abs([-1]).numpy().tolist() == [1]
    assert tf.pow(2, 3).numpy() == 8
    with pytest.raises(tf.errors.InvalidArgumentError, match="negative integer powers"):
        tf.pow(2, -1)
    assert int(tf.math.floordiv(-7, 2)) == -4
    assert float(tf.math.floormod(-7.0, 2.0)) == 1.0
    assert tf.reduce_mean([1, 2]).numpy() == 1
    assert tf.nn.relu([-1, 2]).numpy().tolist() == [0, 2]


def test_default_index_types_without_x64():
    # TF's argmax/where/count_nonzero give int64; without x64 tapejax gives int32 (documented).
    assert tf.argmax([1.0, 3.0, 2.0]).dtype == tf.int32
    assert tf.where([True, False, True]).dtype == tf.int32
    assert tf.math.top_k([1.0, 2.0]).indices.dtype == tf.int32
    assert tf.shape(tf.ones((2, 3))).dtype == tf.int32
    with pytest.raises(TypeError, match="64-bit"):
        tf.argmax([1.0, 2.0], output_type=tf.int64)


def test_default_index_types_with_x64():
    with jax.enable_x64(True):
        assert tf.argmax([1.0, 3.0, 2.0]).dtype == tf.int64
        assert tf.where([True, False, True]).numpy().tolist() == [[0], [2]]
        assert tf.where([True]).dtype == tf.int64


def test_linspace_dtype_rule():
    # TF: int endpoints give float64. tapejax: float64 under x64, else float32 (documented).
    assert tf.linspace(0, 1, 3).dtype == tf.float32
    assert tf.linspace(0.0, 1.0, 3).dtype == tf.float32
    with jax.enable_x64(True):
        assert tf.linspace(0, 1, 3).dtype == tf.float64
        assert tf.linspace(0.0, 1.0, 3).dtype == tf.float32
    assert tf.linspace([0.0, 1.0], [1.0, 2.0], 3).numpy().tolist() == [[0.0, 1.0], [0.5, 1.5], [1.0, 2.0]]
    assert grad(lambda tf, a, b: tf.linspace(a, b, 3) * [1.0, 2.0, 3.0], 0.0, 1.0) == [2.0, 4.0]


def test_creation_dtypes():
    assert tf.fill([2], 1).dtype == tf.int32 and tf.fill([2], 1.5).dtype == tf.float32
    assert tf.range(3).dtype == tf.int32 and tf.range(0, 1, 0.5).dtype == tf.float32
    assert tf.eye(2).dtype == tf.float32 and tf.eye(2, 3, dtype=tf.int32).numpy().tolist() == [[1, 0, 0], [0, 1, 0]]
    assert tf.one_hot([0, 2, -1], 3).numpy().tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 0]]
    assert tf.one_hot([0, 1], 2, on_value=5, off_value=1).dtype == tf.int32
    assert tf.one_hot([0], 2, on_value=3, dtype=tf.float32).numpy().tolist() == [[3.0, 0.0]]
    with pytest.raises(TypeError, match="does not match"):
        tf.one_hot([0], 2, on_value=1, off_value=0.0)
    assert tf.zeros([1], tf.bool).numpy().tolist() == [False]
    assert tf.dtypes.saturate_cast([300.0, -5.0], tf.uint8).numpy().tolist() == [255, 0]
    assert tf.complex(1.0, 2.0).dtype == tf.complex64
    assert grad(lambda tf, v: tf.fill([2, 2], v), 3.0) == [4.0]


# ---- TF's error types -------------------------------------------------------------------------------------------------

ERRORS = [
    ("gather out of range", lambda tf: tf.gather([1.0, 2.0, 3.0], [5]), tf.errors.InvalidArgumentError, r"indices\[0\] = 5 is not in \[0, 3\)"),
    ("gather negative", lambda tf: tf.gather([1.0, 2.0], [-1]), tf.errors.InvalidArgumentError, "not in"),
    ("gather float indices", lambda tf: tf.gather([1.0], [0.0]), tf.errors.InvalidArgumentError, "Tindices"),
    ("gather_nd out of range", lambda tf: tf.gather_nd([[1.0, 2.0], [3.0, 4.0]], [[2, 0]]), tf.errors.InvalidArgumentError, "does not index"),
    ("getitem out of range", lambda tf: tf.constant([1, 2, 3])[5], tf.errors.InvalidArgumentError, "out of bounds"),
    ("getitem negative out of range", lambda tf: tf.constant([1, 2, 3])[-4], tf.errors.InvalidArgumentError, "out of bounds"),
    ("getitem tensor out of range", lambda tf: tf.constant([1, 2, 3])[tf.constant(3)], tf.errors.InvalidArgumentError, "out of bounds"),
    ("getitem too many", lambda tf: tf.constant([1, 2, 3])[0, 0], tf.errors.InvalidArgumentError, "Index out of range"),
    ("getitem two ellipses", lambda tf: tf.ones((2, 3))[..., ...], tf.errors.InvalidArgumentError, "Multiple ellipses"),
    ("getitem step 0", lambda tf: tf.constant([1, 2])[::0], tf.errors.InvalidArgumentError, "non-zero"),
    ("getitem float", lambda tf: tf.constant([1, 2])[1.0], TypeError, "Only integers"),
    ("getitem vector tensor", lambda tf: tf.constant([1, 2])[tf.constant([0, 1])], TypeError, "Only integers"),
    ("getitem numpy array", lambda tf: tf.constant([1, 2])[np.array([0, 1])], TypeError, "Only integers"),
    ("reshape", lambda tf: tf.reshape(tf.range(6), [4, -1]), tf.errors.InvalidArgumentError, "6 values"),
    ("reshape two -1", lambda tf: tf.reshape(tf.ones(4), [-1, -1]), tf.errors.InvalidArgumentError, "Only one input size may be -1"),
    ("squeeze", lambda tf: tf.squeeze(tf.ones((2, 1)), axis=0), tf.errors.InvalidArgumentError, "Can not squeeze dim"),
    ("split", lambda tf: tf.split(tf.range(5), 2), tf.errors.InvalidArgumentError, "evenly divide"),
    ("concat shapes", lambda tf: tf.concat([tf.ones((2, 2)), tf.ones((3, 3))], 0), tf.errors.InvalidArgumentError, "Dimensions"),
    ("stack shapes", lambda tf: tf.stack([tf.ones(2), tf.ones(3)]), tf.errors.InvalidArgumentError, "Shapes of all inputs must match"),
    ("tile", lambda tf: tf.tile([1, 2], [1, 2]), tf.errors.InvalidArgumentError, "multiples"),
    ("broadcast_to", lambda tf: tf.broadcast_to([1, 2], [3]), tf.errors.InvalidArgumentError, "Incompatible shapes"),
    ("expand_dims", lambda tf: tf.expand_dims([1, 2], 3), tf.errors.InvalidArgumentError, "expand dim"),
    ("transpose", lambda tf: tf.transpose(tf.ones((2, 3)), [0, 0]), tf.errors.InvalidArgumentError, "permutation"),
    ("unstack num", lambda tf: tf.unstack(tf.ones((2, 3)), num=3), tf.errors.InvalidArgumentError, "must equal 3"),
    ("slice", lambda tf: tf.slice([1, 2, 3], [1], [5]), tf.errors.InvalidArgumentError, "size"),
    ("pad negative", lambda tf: tf.pad([1, 2, 3], [[-1, 0]]), tf.errors.InvalidArgumentError, "non-negative"),
    ("pad reflect too wide", lambda tf: tf.pad([1, 2], [[2, 0]], mode="REFLECT"), tf.errors.InvalidArgumentError, "less than"),
    ("range empty", lambda tf: tf.range(5, 2), tf.errors.InvalidArgumentError, "Requires start <= limit"),
    ("range delta 0", lambda tf: tf.range(0, 5, 0), tf.errors.InvalidArgumentError, "delta != 0"),
    ("argmax axis", lambda tf: tf.argmax([1.0, 2.0], axis=2), tf.errors.InvalidArgumentError, "Expected dimension"),
    ("reduce axis", lambda tf: tf.reduce_sum(tf.ones((2,)), axis=3), tf.errors.InvalidArgumentError, "Invalid reduction dimension"),
    ("matmul shapes", lambda tf: tf.matmul(tf.ones((2, 3)), tf.ones((2, 3))), tf.errors.InvalidArgumentError, "size-incompatible"),
    ("matmul vector", lambda tf: tf.matmul([1.0, 2.0], [[1.0], [2.0]]), tf.errors.InvalidArgumentError, "rank 2"),
    ("inv singular", lambda tf: tf.linalg.inv([[1.0, 2.0], [2.0, 4.0]]), tf.errors.InvalidArgumentError, "not invertible"),
    ("solve rank", lambda tf: tf.linalg.solve([[4.0, 1.0], [1.0, 3.0]], [1.0, 2.0]), tf.errors.InvalidArgumentError, "same rank"),
    ("segment ids unsorted", lambda tf: tf.math.segment_sum([1.0, 5.0, 2.0], [1, 0, 1]), tf.errors.InvalidArgumentError, "not increasing"),
    ("sparse xent label", lambda tf: tf.nn.sparse_softmax_cross_entropy_with_logits([2], [[1.0, 2.0]]), tf.errors.InvalidArgumentError,
     "label value of 2"),
    ("softmax axis", lambda tf: tf.nn.softmax([[1.0, 2.0]], axis=2), tf.errors.InvalidArgumentError, "dim"),
    ("top_k too large", lambda tf: tf.math.top_k([1.0, 2.0], 3), tf.errors.InvalidArgumentError, "at least k columns"),
    ("fill non-scalar", lambda tf: tf.fill([2], [1.0, 2.0]), tf.errors.InvalidArgumentError, "scalar"),
    ("where one None", lambda tf: tf.where([True], [1.0]), ValueError, "both be non-None"),
    ("where broadcast", lambda tf: tf.where([True, False, True], [1.0, 2.0], [3.0, 4.0]), tf.errors.InvalidArgumentError, "broadcastable"),
    ("boolean_mask shape", lambda tf: tf.boolean_mask([1.0, 2.0, 3.0], [True, False]), ValueError, "incompatible"),
    ("sigmoid xent shapes", lambda tf: tf.nn.sigmoid_cross_entropy_with_logits(labels=[1.0, 0.0], logits=[2.0, -1.0, 3.0]), ValueError,
     "same shape"),
    ("dropout rate 1", lambda tf: tf.nn.dropout([1.0], rate=1.0), ValueError, "range"),
    ("dropout int", lambda tf: tf.nn.dropout(tf.ones(2, tf.int32), rate=0.5), ValueError, "floating point"),
    ("check_numerics nan", lambda tf: tf.debugging.check_numerics(tf.constant([1.0, np.nan]), "msg"), tf.errors.InvalidArgumentError,
     "msg : Tensor had NaN values"),
    ("check_numerics inf", lambda tf: tf.debugging.check_numerics(tf.constant([np.inf]), "m"), tf.errors.InvalidArgumentError, "Inf values"),
    ("assert_near", lambda tf: tf.debugging.assert_near(1.0, 1.01), tf.errors.InvalidArgumentError, "tolerance"),
    ("assert_near 5e-6", lambda tf: tf.debugging.assert_near(1.0, 1.0 + 5e-6), tf.errors.InvalidArgumentError, "tolerance"),
    ("assert_near ints", lambda tf: tf.debugging.assert_near(1, 2), ValueError, "not inexact"),
    ("assert_equal", lambda tf: tf.debugging.assert_equal([1, 2], [1, 3]), tf.errors.InvalidArgumentError, "x == y"),
    ("assert_less", lambda tf: tf.debugging.assert_less(2, 1), tf.errors.InvalidArgumentError, "x < y"),
    ("assert_positive", lambda tf: tf.debugging.assert_positive([-1.0]), tf.errors.InvalidArgumentError, "x > 0"),
    ("assert_rank", lambda tf: tf.debugging.assert_rank(tf.ones((2,)), 2), ValueError, "must have rank 2"),
    ("assert_type", lambda tf: tf.debugging.assert_type(tf.ones((2,)), tf.int32), TypeError, "tf.int32"),
    ("assert_shapes", lambda tf: tf.debugging.assert_shapes([(tf.ones((2, 3)), ("N", "Q")), (tf.ones((3,)), ("N",))]), ValueError,
     "must have size 2"),
    ("Assert", lambda tf: tf.debugging.Assert(False, ["x"]), tf.errors.InvalidArgumentError, "Summarized data: x"),
    ("uniform int without maxval", lambda tf: tf.random.uniform([2], dtype=tf.int32), ValueError, "maxval"),
    ("normal int", lambda tf: tf.random.normal([2], dtype=tf.int32), TypeError, "Cannot convert"),
]


@pytest.mark.parametrize("fn, exc, match", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_have_tf_types(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn(tf)


def test_dtypes_namespace():
    d = tf.dtypes
    assert d.float32 is tf.float32 and d.as_dtype("int32") is tf.int32 and isinstance(tf.float16, d.DType)
    for name in ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
                 "complex64", "complex128"):
        dt = getattr(tf, name)
        assert dt.name == name and getattr(d, name) is dt
        assert dt.is_floating == (name in ("float16", "float32", "float64", "bfloat16"))
        assert dt.is_integer == (name.startswith("int") or name.startswith("uint"))
        assert dt.is_complex == name.startswith("complex")
        assert np.dtype(dt.as_numpy_dtype).name == name or name == "bfloat16"
    assert d.cast(tf.constant([1.7]), tf.int32).numpy().tolist() == [1]
    assert d.complex(1.0, 2.0).dtype == tf.complex64


def test_assertions_that_pass():
    assert tf.debugging.assert_greater(2, 1) is None and tf.debugging.assert_greater_equal([2, 1], [1, 1]) is None
    assert tf.debugging.assert_all_finite(tf.constant([1.0]), "m").numpy().tolist() == [1.0]
    assert tf.assert_equal(1, 1) is None and tf.Assert(True, [1]) is None
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.debugging.assert_all_finite(tf.constant([np.nan]), "bad")
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.debugging.assert_greater(1, 2)


def test_invalid_argument_is_not_a_value_error():
    assert not issubclass(tf.errors.InvalidArgumentError, ValueError)
    assert issubclass(tf.errors.InvalidArgumentError, tf.errors.OpError)


# ---- passing checks and structures ----------------------------------------------------------------------------------------


def test_passing_checks_return_none_or_the_tensor():
    assert tf.debugging.assert_near(1.0, 1.0 + 1e-6) is None
    assert tf.debugging.assert_equal([1, 2], [1, 2]) is None
    assert tf.debugging.Assert(True, ["x"]) is None
    assert tf.debugging.check_numerics(tf.constant([1.0]), "m").numpy().tolist() == [1.0]
    assert grad(lambda tf, x: tf.debugging.check_numerics(x, "m") * 2.0, [1.0]) == [[2.0]]
    assert tf.debugging.is_numeric_tensor(tf.ones(2)) and not tf.debugging.is_numeric_tensor(tf.constant([True]))


def test_result_structures_match_tf():
    tk = tf.math.top_k([1.0, 3.0, 2.0, 3.0], k=2)
    assert type(tk).__name__ == "TopKV2" and tk.indices.numpy().tolist() == [1, 3]
    qr = tf.linalg.qr(tf.ones((3, 2)))
    assert type(qr).__name__ == "Qr" and qr.q.shape == (3, 2) and qr.r.shape == (2, 2)
    assert [t.shape for t in tf.linalg.qr(tf.ones((3, 2)), full_matrices=True)] == [(3, 3), (3, 2)]
    sl = tf.linalg.slogdet([[-1.0, 0.0], [0.0, 2.0]])
    assert type(sl).__name__ == "LogMatrixDeterminant" and float(sl.sign) == -1.0
    assert type(tf.linalg.eigh([[2.0, 0.0], [0.0, 1.0]])) is tuple
    s, u, v = tf.linalg.svd(tf.ones((3, 2)))
    assert (s.shape, u.shape, v.shape) == ((2,), (3, 2), (2, 2))
    assert [t.shape for t in tf.linalg.svd(tf.ones((3, 2)), full_matrices=True)] == [(2,), (3, 3), (2, 2)]
    assert type(tf.nn.moments(tf.constant([1.0]), [0])) is tuple
    u = tf.unique([1, 1, 3])
    assert type(u).__name__ == "Unique" and u.y.numpy().tolist() == [1, 3] and u.idx.numpy().tolist() == [0, 0, 1]
    assert isinstance(tf.split(tf.range(6), 3), list) and isinstance(tf.unstack(tf.ones((2, 2))), list)
    clipped, norm = tf.clip_by_global_norm([tf.constant([3.0, 4.0]), None], 1.0)
    assert clipped[1] is None and float(norm) == 5.0


def test_getitem_follows_tf():
    x = tf.constant([[1, 2], [3, 4]])
    assert x[[0, 1]].numpy() == 2  # a Python list key is a tuple, as in TF
    assert x[[0, slice(None)]].numpy().tolist() == [1, 2]
    assert x[tf.constant([True, False])].numpy().tolist() == [[1, 2]]  # a bool tensor is boolean_mask
    with jax.enable_x64(True):
        assert x[tf.constant(1, tf.int64)].numpy().tolist() == [3, 4]
    assert tf.constant([1, 2, 3, 4])[tf.constant(1):tf.constant(3)].numpy().tolist() == [2, 3]
    assert tf.ones((2, 3, 4))[..., 1, tf.newaxis].shape == (2, 3, 1)
    assert tf.constant([1, 2, 3, 4, 5])[::-2].numpy().tolist() == [5, 3, 1]
    assert tf.constant([1, 2, 3])[1:10].numpy().tolist() == [2, 3]


def test_misc_values_match_tf():
    assert tf.nn.avg_pool2d(tf.reshape(tf.range(9.0), (1, 3, 3, 1)), 2, 2, "SAME")[0, :, :, 0].numpy().tolist() == [[2.0, 3.5], [6.5, 8.0]]
    assert np.allclose(tf.nn.gelu([1.0]).numpy(), [0.8413447]) and np.allclose(tf.nn.gelu([1.0], approximate=True).numpy(), [0.841192])
    assert tf.math.unsorted_segment_max([1.0, 2.0], [0, 0], 2).numpy().tolist() == [2.0, float(np.finfo(np.float32).min)]
    assert tf.math.segment_mean([1.0, 5.0, 2.0], [0, 0, 2]).numpy().tolist() == [3.0, 0.0, 2.0]
    assert tf.reduce_max(tf.zeros((0,))).numpy() == -np.inf
    assert np.isnan(tf.reduce_mean(tf.zeros((0,))).numpy())
    assert tf.linalg.triangular_solve([[2.0, 100.0], [1.0, 1.0]], [[2.0], [3.0]]).numpy().tolist() == [[1.0], [2.0]]
    assert tf.linalg.diag([1.0, 2.0], k=1).shape == (3, 3)
    assert tf.math.cumsum([1.0, 2.0, 3.0], exclusive=True, reverse=True).numpy().tolist() == [5.0, 3.0, 0.0]
    assert tf.math.cumprod([1.0, 2.0, 3.0], exclusive=True).numpy().tolist() == [1.0, 1.0, 2.0]
    assert tf.nn.moments(tf.constant([[1.0, 2.0], [3.0, 5.0]]), axes=[0])[1].numpy().tolist() == [1.0, 2.25]
    assert tf.pad([1, 2], [[1, 0]], mode="constant").numpy().tolist() == [0, 1, 2]
    assert tf.nn.conv2d(tf.ones((1, 3, 4, 4)), tf.ones((3, 3, 3, 2)), 1, "SAME", data_format="NCHW").shape == (1, 2, 4, 4)
    assert tf.nn.conv2d(tf.ones((2, 4, 4, 3)), tf.ones((3, 3, 3, 2)), 1, [[0, 0], [1, 1], [2, 2], [0, 0]]).shape == (2, 4, 6, 2)


@pytest.mark.usefixtures("compile_tier")
def test_ops_record_only_when_watched_and_replay_compiled():
    # A TF op is one recorded primitive: a training-style loop reuses one compiled replay.
    w = tf.Variable(tf.ones((3, 2)))
    x = tf.ones((4, 3))
    tf.replay_cache_clear()
    for _ in range(3):
        with tf.GradientTape() as t:
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(tf.one_hot([0, 1, 0, 1], 2), tf.matmul(x, w)))
        g = t.gradient(loss, w)
    g.numpy()  # lazy mode (TAPEJAX_EXECUTION=lazy): the pending gradients run here
    info = tf.replay_cache_info()
    # One program compiled, every later gradient answered by it. Lazy mode: the shape evaluation
    # of the deferred replay makes the compile, so its three runs are all hits, and each step's
    # program (its forward and deferred gradient, run when the gradient returns) is one more
    # lookup when the whole program's background compile traces it.
    assert g.shape == (3, 2) and info.misses == 1 and info.size == 1 and info.compiled == 3
    if tf.config.get_execution() == "lazy":
        assert 3 <= info.hits <= 4
    else:
        assert info.hits == 2


def test_ops_doc_is_generated_and_current():
    # compat_docs/ops.md is derived from the op table and the test registry; regenerate it with
    # `python scripts/gen_ops_doc.py` after changing either.
    import importlib.util
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("gen_ops_doc", root / "scripts" / "gen_ops_doc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (root / "compat_docs" / "ops.md").read_text() == mod.render()
