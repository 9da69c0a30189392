"""Every code example of the seed tutorials in ``shared/seeds/`` (TF GradientTape tutorials in Korean
and Chinese), run with ``import tapejax as tf``, checked against the numbers the tutorials print.

The tutorial code is kept as written (comments translated where it helps). Each test captures what
the example prints and compares it with the output shown in the tutorial:

- printed tensors use TF's ``str`` format, ``tf.Tensor(10.0, shape=(), dtype=float32)``;
- notebook cells show ``repr``; TF 2.0 printed ``id=NNN`` in it, TF 2.21 does not, so the ids are
  stripped before comparing (``strip_ids``);
- where a tutorial shows what its own code cannot produce (seed 001 EX3, EX4 and EX7 Method 2), the
  test asserts real TF 2.21's result, which was run and is cross-checked in
  ``tests/oracle/test_oracle_core.py`` (``test_seed_errata_match_tf``).
"""

from __future__ import annotations

import collections.abc as abc
import time

import matplotlib
import numpy as np
import pytest

import tapejax as tf
from tapejax._engine import _lazy
from _seed_helpers import LazyDense, keep_log_once_budget, strip_ids  # noqa: F401  (autouse fixture)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after selecting the Agg backend)


def T(value: str, shape: str = "()", dtype: str = "float32") -> str:
    """TF's ``str`` of a tensor."""
    return f"tf.Tensor({value}, shape={shape}, dtype={dtype})"


def lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


# =====================================================================================
# seed 000: Korean notebook (TF 2.0) — "그래디언트 테이프(GradientTape)"
# =====================================================================================


def test_seed000_dz_dx_of_reduce_sum_squared_and_spent_tape(capsys):
    # In [30]
    x = tf.ones((2, 2))

    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(x)
        z = tf.multiply(y, y)

    # 입력 텐서 x에 대한 z의 도함수
    dz_dx = t.gradient(z, x)
    for i in [0, 1]:
        for j in [0, 1]:
            assert dz_dx[i][j].numpy() == 8.0

    # In [31]: dz_dx
    assert repr(dz_dx) == strip_ids(
        "<tf.Tensor: id=101, shape=(2, 2), dtype=float32, numpy=\n"
        "array([[8., 8.],\n"
        "       [8., 8.]], dtype=float32)>"
    )

    # In [36]: 한번 사용한 것은 더 이상 사용할 수 없습니다. (a used tape cannot be used again)
    try:
        t.gradient(z, x)
    except Exception as e:
        print(e)
        caught = e
    # The notebook shows TF 2.0's text "GradientTape.gradient can only be called once on
    # non-persistent tapes."; TF 2.21 raises RuntimeError with the text below (tapejax adds a hint).
    assert type(caught) is RuntimeError
    (printed,) = lines(capsys)
    assert printed.startswith("A non-persistent GradientTape can only be used to compute one set of gradients (or jacobians)")


def test_seed000_public_names_of_gradient_tape(capsys):
    # In [42]  (jacobian and batch_jacobian are part of the listing the notebook shows)
    for i in dir(tf.GradientTape):
        if not i.startswith("_"):
            print(i)
    assert lines(capsys) == [
        "batch_jacobian",
        "gradient",
        "jacobian",
        "reset",
        "stop_recording",
        "watch",
        "watched_variables",
    ]


def test_seed000_gradient_tape_is_not_an_iterator_or_generator():
    x = tf.constant(1.0)
    with tf.GradientTape() as t:
        t.watch(x)
    # In [40], In [39]
    assert issubclass(tf.GradientTape, abc.Iterator) is False
    assert issubclass(type(t), abc.Generator) is False


def test_seed000_dz_dy_wrt_intermediate():
    # In [32]
    x = tf.ones((2, 2))

    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(x)
        z = tf.multiply(y, y)

    dz_dy = t.gradient(z, y)
    assert dz_dy.numpy() == 8.0

    # In [33]: dz_dy
    assert repr(dz_dy) == strip_ids("<tf.Tensor: id=143, shape=(), dtype=float32, numpy=8.0>")


def test_seed000_unwatched_constant_gives_none_and_tf_print(capsys):
    # In [14]
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        # print(g.watch(x))
        y = x * x
    dy_dx = g.gradient(y, x)  # Will compute to 6.0

    # In [15]: dy_dx  (a notebook shows nothing for None)
    assert dy_dx is None

    # In [16]: tf.print writes to stderr, as in TF
    tf.print(dy_dx)
    assert capsys.readouterr().err == "None\n"


def test_seed000_watch_returns_none(capsys):
    # In [18]
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        print(g.watch(x))
        y = x * x
    dy_dx = g.gradient(y, x)  # Will compute to 6.0
    assert lines(capsys) == ["None"]

    # In [19]: dy_dx
    assert repr(dy_dx) == strip_ids("<tf.Tensor: id=47, shape=(), dtype=float32, numpy=6.0>")


def test_seed000_second_derivative_with_two_tapes():
    # In [7]: GradientTape를 두번 사용해서 고차미분하기
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        with tf.GradientTape() as gg:
            gg.watch(x)
            y = x * x
            dy_dx = gg.gradient(y, x)  # Will compute to 6.0
        d2y_dx2 = g.gradient(dy_dx, x)  # Will compute to 2.0

    # In [8], In [9]
    assert repr(dy_dx) == strip_ids("<tf.Tensor: id=18, shape=(), dtype=float32, numpy=6.0>")
    assert repr(d2y_dx2) == strip_ids("<tf.Tensor: id=24, shape=(), dtype=float32, numpy=2.0>")


def test_seed000_persistent_tape_gradients_inside_context():
    # In [20]: gradient() inside the block of a persistent tape (TF logs a warning; so does tapejax)
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
        z = y * y
        dz_dx = g.gradient(z, x)  # 108.0 (4*x^3 at x = 3)
        dy_dx = g.gradient(y, x)  # 6.0
    # del g  # Drop the reference to the tape

    # In [21], In [22]
    assert repr(dz_dx) == strip_ids("<tf.Tensor: id=57, shape=(), dtype=float32, numpy=108.0>")
    assert repr(dy_dx) == strip_ids("<tf.Tensor: id=61, shape=(), dtype=float32, numpy=6.0>")


# =====================================================================================
# seed 001: Korean tutorial — tf.GradientTape() EX 1..7 and "주의할 점" (pitfalls)
# =====================================================================================


def test_seed001_ex1_first_derivative(capsys):
    x = tf.Variable(5, dtype=tf.float32)  # STEP1 입력 변수 정의

    with tf.GradientTape() as tape:  # STEP2 GradientTape 생성
        tape.watch(x)  # STEP3 trainable할 변수 설정
        y = x**2  # STEP4 미분할 함수 정의
    dydx = tape.gradient(y, x)  # STEP5 미분

    print(dydx)  ## tf.Tensor(10.0, shape=(), dtype=float32)
    assert lines(capsys) == [T("10.0")]


def test_seed001_ex2_second_derivative_inside_outer_block(capsys):
    x = tf.Variable(3, dtype=tf.float32)

    with tf.GradientTape() as tape:
        tape.watch(x)
        with tf.GradientTape() as tape2:
            tape2.watch(x)
            y = x**2
        dydx = tape2.gradient(y, x)  # 들여쓰기 했을 때 (indented: inside the outer block)
    dydx2 = tape.gradient(dydx, x)

    print(dydx)  ## tf.Tensor(6.0, shape=(), dtype=float32)
    print(dydx2)  ## tf.Tensor(2.0, shape=(), dtype=float32)
    assert lines(capsys) == [T("6.0"), T("2.0")]


def test_seed001_ex2_first_derivative_outside_outer_block_gives_none(capsys):
    x = tf.Variable(3, dtype=tf.float32)

    with tf.GradientTape() as tape:
        tape.watch(x)
        with tf.GradientTape() as tape2:
            tape2.watch(x)
            y = x**2
    dydx = tape2.gradient(y, x)  # 들여쓰기 안했을 때 (not indented: the outer tape no longer records)
    dydx2 = tape.gradient(dydx, x)

    print(dydx)  ## tf.Tensor(6.0, shape=(), dtype=float32)
    print(dydx2)  ## None
    assert lines(capsys) == [T("6.0"), "None"]


def test_seed001_ex3_two_persistent_gradients(capsys):
    x = tf.Variable(2, dtype=tf.float32)
    w = tf.Variable(5, dtype=tf.float32)

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(w)
        y = x**2
        z = w**3
    dydx = tape.gradient(y, x)
    dzdw = tape.gradient(z, w)

    print(dydx)  ## tf.Tensor(10.0, shape=(), dtype=float32)
    print(dzdw)  ## tf.Tensor(27.0, shape=(), dtype=float32)
    # Erratum: the tutorial's 10 and 27 are for x=5, w=3 (its formula), but its code sets x=2, w=5.
    # Real TF 2.21 prints 4.0 (2x) and 75.0 (3w^2) for this code; that is the truth asserted here.
    assert lines(capsys) == [T("4.0"), T("75.0")]


def test_seed001_ex4_chain_rule(capsys):
    x = tf.Variable(3, dtype=tf.float32)

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x**2
        z = y**3
    dzdx = tape.gradient(z, x)
    dydx = tape.gradient(y, x)

    print(dzdx)  ## tf.Tensor(1458.0, shape=(), dtype=float32)
    print(dydx)  ## tf.Tensor(27.0, shape=(), dtype=float32)
    # Erratum: the code computes y = x**2 (not x**3), so dy/dx = 2x = 6 at x=3; real TF 2.21 prints 6.0.
    # dz/dx = d(x^6)/dx = 6x^5 = 1458 as the tutorial says.
    assert lines(capsys) == [T("1458.0"), T("6.0")]


def test_seed001_ex5_list_and_dict_sources(capsys):
    x = tf.Variable(2, dtype=tf.float32)
    y = tf.Variable(3, dtype=tf.float32)

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(y)
        z = (x**2 + 2 * y) ** 2

    # Method 1 : List
    dzdx, dzdy = tape.gradient(z, [x, y])

    print(dzdx)  ## tf.Tensor(80.0, shape=(), dtype=float32)
    print(dzdy)  ## tf.Tensor(40.0, shape=(), dtype=float32)

    # Method 2 : Dictionary
    my_vars = {"x": x, "y": y}
    grad = tape.gradient(z, my_vars)
    print(grad["x"])  ## tf.Tensor(80.0, shape=(), dtype=float32)
    print(grad["y"])  ## tf.Tensor(40.0, shape=(), dtype=float32)

    assert lines(capsys) == [T("80.0"), T("40.0"), T("80.0"), T("40.0")]
    assert isinstance(grad, dict) and list(grad) == ["x", "y"]


def _sigmoid_plot_example():
    x = tf.linspace(-10, 10, 100)

    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.nn.sigmoid(x)

    dydx = tape.gradient(y, x)

    # draw plot
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    ax.plot(x, y, label="y")
    ax.plot(x, dydx, label="dydx")
    ax.set(xlabel="x", title="sigmoid function")
    ax.legend()

    # plt.show()  -> nothing to show under Agg; the plotted data is checked instead
    plotted = [np.asarray(line.get_ydata()) for line in ax.get_lines()]
    plt.close(fig)
    return x, y, dydx, plotted


def test_seed001_ex6_sigmoid_derivative_plot():
    x, y, dydx, plotted = _sigmoid_plot_example()
    xs = np.linspace(-10.0, 10.0, 100)
    sig = 1.0 / (1.0 + np.exp(-xs))
    # TF gives float64 for integer linspace endpoints; tapejax gives float32 without x64 (see the
    # linspace docstring); the x64 variant below checks TF's dtype.
    assert x.dtype == tf.float32 and dydx.dtype == tf.float32
    np.testing.assert_allclose(y.numpy(), sig, rtol=1e-6)
    np.testing.assert_allclose(dydx.numpy(), y.numpy() * (1 - y.numpy()), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(plotted[0], y.numpy())
    np.testing.assert_allclose(plotted[1], dydx.numpy())
    assert dydx.numpy().max() == pytest.approx(0.25, abs=1e-3)  # the peak of sigmoid' at 0


def test_seed001_ex6_sigmoid_derivative_plot_float64_with_x64():
    import jax

    with jax.enable_x64():
        x, y, dydx, _ = _sigmoid_plot_example()
        assert x.dtype == tf.float64 and dydx.dtype == tf.float64  # as in TF
        yv = y.numpy()
        np.testing.assert_allclose(dydx.numpy(), yv * (1 - yv), rtol=1e-12)


def test_seed001_ex7_non_scalar_targets_are_summed(capsys):
    # Method 1. Dictionary
    x = tf.Variable(3, dtype=tf.float32)

    with tf.GradientTape() as tape:
        tape.watch(x)
        y1 = 2 * x
        y2 = x**3
        y3 = -(x**2) + 5 * x

    dydx = tape.gradient({"y1": y1, "y2": y2, "y3": y3}, x)
    print(dydx)  ## tf.Tensor(28.0, shape=(), dtype=float32)

    # Method 2. List
    # Erratum: the tutorial shows 28.0 here, but `tape` is non-persistent and was used by Method 1,
    # so real TF 2.21 raises RuntimeError on this call (and so does tapejax).
    with pytest.raises(RuntimeError, match="non-persistent GradientTape can only be used to compute one set"):
        dydx = tape.gradient([y1, y2, y3], x)
        print(dydx)  ## tf.Tensor(28.0, shape=(), dtype=float32)

    # Method 3. List
    x = tf.Variable(3, dtype=tf.float32)

    with tf.GradientTape() as tape:
        tape.watch(x)
        y = [2 * x, x**3, -(x**2) + 5 * x]

    dydx = tape.gradient(y, x)
    print(dydx)  ## tf.Tensor(28.0, shape=(), dtype=float32)

    assert lines(capsys) == [T("28.0"), T("28.0")]


def test_seed001_ex7_method2_on_a_fresh_tape_gives_28(capsys):
    # What Method 2 prints when it gets a tape of its own (2 + 27 - 1 = 28).
    x = tf.Variable(3, dtype=tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y1 = 2 * x
        y2 = x**3
        y3 = -(x**2) + 5 * x
    dydx = tape.gradient([y1, y2, y3], x)
    print(dydx)  ## tf.Tensor(28.0, shape=(), dtype=float32)
    assert lines(capsys) == [T("28.0")]


def test_seed001_non_trainable_variable_is_not_watched(capsys):
    # trainable하지 않은 변수의 경우 자동으로 인식하지 않는다.
    x = tf.Variable(5, dtype=tf.float32, trainable=False)
    with tf.GradientTape() as tape:
        y = x**2
    dydx = tape.gradient(y, x)

    print(dydx)  ## None
    assert lines(capsys) == ["None"]


def test_seed001_watch_accessed_variables_false(capsys):
    x = tf.Variable(5, dtype=tf.float32)

    with tf.GradientTape(watch_accessed_variables=False) as tape:
        y = x**2
    dydx = tape.gradient(y, x)

    print(dydx)  ## None
    assert lines(capsys) == ["None"]


def test_seed001_a_tensor_computed_from_a_variable_is_not_a_source(capsys):
    x1 = tf.Variable(2, dtype=tf.float32)
    x2 = x1 + 1

    with tf.GradientTape(persistent=True) as tape:
        y = x1**3 + x2**3

    dydx1 = tape.gradient(y, x1)
    dydx2 = tape.gradient(y, x2)

    print(f"type={type(x1).__name__},\t x={x1.numpy()},\t  dydx={dydx1}")
    print(f"type={type(x2).__name__},\t x={x2.numpy()},\t  dydx={dydx2}")

    ## Output
    ## type=ResourceVariable,	 x=2.0,	  dydx=12.0
    ## type=EagerTensor,	     x=3.0,	  dydx=None
    # The class names are TF's (ResourceVariable/EagerTensor); tapejax's are Variable/Tensor. The
    # numbers and the formatting of the values (f-string of a scalar tensor) are TF's.
    assert lines(capsys) == [
        "type=Variable,\t x=2.0,\t  dydx=12.0",
        "type=Tensor,\t x=3.0,\t  dydx=None",
    ]
    assert isinstance(x1, tf.Variable) and isinstance(x2, tf.Tensor)


def test_seed001_integer_variable_gives_none(capsys):
    x = tf.Variable(2)

    with tf.GradientTape() as tape:
        y = x**4

    dydx = tape.gradient(y, x)

    print(f"type={type(x).__name__},\t x={x.numpy()},\t  dydx={dydx}")

    ## Output
    ## type=ResourceVariable,	 x=2,	  dydx=None
    assert lines(capsys) == ["type=Variable,\t x=2,\t  dydx=None"]
    assert x.dtype == tf.int32


def test_seed001_unconnected_none_and_zero(capsys):
    x = tf.Variable([2.0, 2.0])
    y = tf.Variable(3.0)

    with tf.GradientTape(persistent=True) as tape:
        z = y**2

    print(tape.gradient(z, x))
    print(tape.gradient(z, x, unconnected_gradients=tf.UnconnectedGradients.ZERO))

    ## Output
    ## None
    ## tf.Tensor([0. 0.], shape=(2,), dtype=float32)
    assert lines(capsys) == ["None", T("[0. 0.]", "(2,)")]


# =====================================================================================
# seed 002: Korean notes — gradient(), a constant vs a variable, simple linear regression
# =====================================================================================


def test_seed002_constant_and_variable_sources(capsys):
    t1 = tf.constant([1, 2, 3], dtype=tf.float32)
    t2 = tf.Variable([10, 20, 30], dtype=tf.float32)

    with tf.GradientTape() as tape:
        t3 = t1 * t2

    gradients = tape.gradient(t3, [t1, t2])
    print(gradients[0])  # None
    print(gradients[1])
    # The tutorial shows only the None; the second line is real TF 2.21's output (dt3/dt2 = t1).
    assert lines(capsys) == ["None", T("[1. 2. 3.]", "(3,)")]


@pytest.fixture(scope="module")
def linear_regression_run():
    """Seed 002's linear regression, run once for the two tests below (compiled tier pinned:
    the second test checks that the 1,000 steps reuse one compiled program)."""
    old_tier, tf.config.replay_tier = tf.config.replay_tier, "compile"
    cache_before = tf.replay_cache_info()
    lazy_before = _lazy.stats()
    start = time.perf_counter()
    x_data = tf.random.normal(shape=(1000,), dtype=tf.float32)
    y_data = 3 * x_data + 1
    # 3x + 1

    w = tf.Variable(-1.0)
    b = tf.Variable(-1.0)

    learning_rata = 0.01

    w_list, b_list = list(), list()
    for x, y in zip(x_data, y_data):
        with tf.GradientTape() as tape:
            predictions = x * w + b
            loss = tf.pow((predictions - y), 2)

        gradients = tape.gradient(loss, [w, b])

        w_list.append(w.numpy())
        b_list.append(b.numpy())

        w = tf.Variable(w - learning_rata * gradients[0])
        b = tf.Variable(b - learning_rata * gradients[1])

    fig, ax = plt.subplots(2, figsize=(10, 5))
    ax[0].plot(w_list)
    ax[0].set_xlabel("weight")
    ax[1].plot(b_list)
    ax[1].set_xlabel("bias")
    fig.subplots_adjust(hspace=0.3)
    # plt.show()
    plt.close(fig)
    elapsed = time.perf_counter() - start
    tf.config.replay_tier = old_tier
    return {
        "w": w, "b": b, "w_list": w_list, "b_list": b_list, "elapsed": elapsed,
        "cache_before": cache_before, "cache_after": tf.replay_cache_info(),
        "lazy_before": lazy_before, "lazy_after": _lazy.stats(),
    }


def test_seed002_simple_linear_regression_plot(linear_regression_run):
    r = linear_regression_run
    assert len(r["w_list"]) == len(r["b_list"]) == 1000
    assert (r["w_list"][0], r["b_list"][0]) == (-1.0, -1.0)
    # y = 3x + 1 without noise: SGD with lr 0.01 over 1000 samples converges to w=3, b=1.
    assert r["w"].numpy() == pytest.approx(3.0, abs=1e-2)
    assert r["b"].numpy() == pytest.approx(1.0, abs=1e-2)
    # 1000 tapes and 1000 gradient() calls record the same ops, so they reuse one compiled replay.
    before, after = r["cache_before"], r["cache_after"]
    if after.compile:
        assert after.misses - before.misses <= 2
        assert after.compiled - before.compiled == 1000  # every gradient answered by the compiled tier
        if tf.config.get_execution() == "lazy":
            # Lazy mode: the whole step (forward, that replay, the variables' new values) is one
            # pending program, compiled once and run for every step past its schedule (the tiers
            # hand the gradient over after replay_hot + replay_lag steps; that program then
            # warms for _lazy.HOT + replay_lag more, ``_lazy._Warming``); the replay inside it
            # runs as part of it, not as cache hits.
            cfg = tf.config
            warm = cfg.replay_hot + cfg.replay_lag + _lazy.HOT + cfg.replay_lag
            assert r["lazy_after"]["runs_compiled"] - r["lazy_before"]["runs_compiled"] >= 1000 - warm
        else:
            assert after.hits - before.hits >= 998


def test_seed002_apply_gradients():
    # The tutorial's fragment `optimizer.apply_gradients(zip(gradients, [w, b]))`, with the plain SGD
    # optimizer it describes (theta_{i+1} = theta_i - lr * gradient).
    pytest.importorskip("tapejax.keras")
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.01)
    x, y = tf.constant(2.0), tf.constant(7.0)
    w = tf.Variable(-1.0)
    b = tf.Variable(-1.0)
    with tf.GradientTape() as tape:
        loss = tf.pow((x * w + b - y), 2)
    gradients = tape.gradient(loss, [w, b])

    optimizer.apply_gradients(zip(gradients, [w, b]))

    # residual r = 2*(-1) - 1 - 7 = -10; dloss/dw = 2 r x = -40, dloss/db = 2 r = -20
    assert [g.numpy() for g in gradients] == [-40.0, -20.0]
    assert w.numpy() == pytest.approx(-1.0 + 0.4) and b.numpy() == pytest.approx(-1.0 + 0.2)


# =====================================================================================
# seed 003: Korean notes on the tf.GradientTape API page
# =====================================================================================


def test_seed003_first_derivative():
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    dy_dx = g.gradient(y, x)  # Will compute to 6.0
    assert dy_dx.numpy() == 6.0


def test_seed003_nested_second_derivative():
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        with tf.GradientTape() as gg:
            gg.watch(x)
            y = x * x
        dy_dx = gg.gradient(y, x)  # Will compute to 6.0
    d2y_dx2 = g.gradient(dy_dx, x)  # Will compute to 2.0
    assert (dy_dx.numpy(), d2y_dx2.numpy()) == (6.0, 2.0)


def test_seed003_persistent_tape():
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
        z = y * y
    dz_dx = g.gradient(z, x)  # 108.0 (4*x^3 at x = 3)
    dy_dx = g.gradient(y, x)  # 6.0
    del g  # Drop the reference to the tape
    assert (dz_dx.numpy(), dy_dx.numpy()) == (108.0, 6.0)


def test_seed003_watch_accessed_variables_false():
    variable_a = tf.Variable(2.0)
    variable_b = tf.Variable(3.0)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(variable_a)
        y = variable_a**2  # Gradients will be available for `variable_a`.
        z = variable_b**3  # No gradients will be available since `variable_b` is
        # not being watched.
    da, db = tape.gradient([y, z], [variable_a, variable_b])
    assert (da.numpy(), db) == (4.0, None)


def test_seed003_unbuilt_layer_variables_are_not_watched():
    # tf.keras.layers.Dense is outside tapejax; LazyDense keeps what the example is about: a layer's
    # variables are created on its first call, so `a.variables` is [] when it is watched.
    inputs = tf.ones((1, 4))
    a = LazyDense(tf, 32)
    b = LazyDense(tf, 32)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(a.variables)  # Since `a.build` has not been called at this point
        # `a.variables` will return an empty list and the
        # tape will not be watching anything.
        result = b(a(inputs))
    grads = tape.gradient(result, a.variables)  # The result of this computation will be
    # a list of `None`s since a's variables
    # are not being watched.
    assert len(a.variables) == 2 and grads == [None, None]


def test_seed003_unbuilt_keras_layer_variables_are_not_watched():
    # The same example, verbatim with tf.keras.layers.Dense, where tapejax.keras is available.
    pytest.importorskip("tapejax.keras")
    inputs = tf.ones((2, 4))
    a = tf.keras.layers.Dense(32)
    b = tf.keras.layers.Dense(32)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(a.variables)  # Since `a.build` has not been called at this point
        # `a.variables` will return an empty list and the
        # tape will not be watching anything.
        result = b(a(inputs))
    grads = tape.gradient(result, a.variables)  # The result of this computation will be
    # a list of `None`s since a's variables
    # are not being watched.
    assert len(a.variables) == 2 and grads == [None, None]


def test_seed003_reset_is_like_a_new_tape():
    w = tf.Variable(2.0)

    def loss_fn():
        return w * w  # d/dw = 4

    def other_loss_fn():
        return w * 10.0  # d/dw = 10

    with tf.GradientTape() as t:
        loss = loss_fn()
    with tf.GradientTape() as t:
        loss += other_loss_fn()
    g1 = t.gradient(loss, w)  # Only differentiates other_loss_fn, not loss_fn

    # The following is equivalent to the above
    with tf.GradientTape() as t:
        loss = loss_fn()
        t.reset()
        loss += other_loss_fn()
    g2 = t.gradient(loss, w)  # Only differentiates other_loss_fn, not loss_fn

    assert g1.numpy() == g2.numpy() == 10.0


def test_seed003_reset_under_control_flow():
    w = tf.Variable(3.0)
    k = 5.0
    with tf.GradientTape() as t:
        loss = w * w
        if loss > k:
            t.reset()
        loss = loss + w * 2.0
    assert t.gradient(loss, w).numpy() == 2.0  # only the part after reset() is differentiated


def test_seed003_stop_recording_inside_persistent_tape():
    class Model:
        def __init__(self):
            self.variables = [tf.Variable([1.0, 2.0]), tf.Variable(3.0)]

    def compute_loss(model):
        v, s = model.variables
        return tf.reduce_sum(v * v) * s

    model = Model()
    with tf.GradientTape(persistent=True) as t:
        loss = compute_loss(model)
        with t.stop_recording():
            # The gradient computation below is not traced, saving memory.
            grads = t.gradient(loss, model.variables)
    np.testing.assert_allclose(grads[0].numpy(), [6.0, 12.0])  # 2 v s
    assert grads[1].numpy() == 5.0  # sum(v^2)
    # Not traced: the gradient's value is not connected on the tape.
    assert t.gradient(grads[1], model.variables) == [None, None]


def test_seed003_batch_jacobian_example():
    with tf.GradientTape() as g:
        x = tf.constant([[1.0, 2.0], [3.0, 4.0]], dtype=tf.float32)
        g.watch(x)
        y = x * x
    batch_jacobian = g.batch_jacobian(y, x)
    # batch_jacobian is [[[2, 0], [0, 4]], [[6, 0], [0, 8]]]
    assert batch_jacobian.shape == (2, 2, 2)
    np.testing.assert_array_equal(batch_jacobian.numpy(), [[[2, 0], [0, 4]], [[6, 0], [0, 8]]])


def test_seed003_jacobian_example():
    with tf.GradientTape() as g:
        x = tf.constant([1.0, 2.0])
        g.watch(x)
        y = x * x
    jacobian = g.jacobian(y, x)
    # jacobian value is [[2., 0.], [0., 4.]]
    np.testing.assert_array_equal(jacobian.numpy(), [[2.0, 0.0], [0.0, 4.0]])


# =====================================================================================
# seed 004: Chinese notebook
# =====================================================================================


def test_seed004_scalar_gradients_inside_persistent_context(capsys):
    # In [8]
    # ------------------一元梯度 (one variable)----------------------
    print("1D derivation")
    x = tf.constant(value=3.0)  # 微分器里面必须是浮点数！！！
    with tf.GradientTape(persistent=True, watch_accessed_variables=True) as tape:
        # persistent表示可以反复使用。
        tape.watch(x)  # watch确定记录的变量

        # 定义function
        y1 = x * 2
        y2 = x * x + 2
        y3 = x * x + 2 * x

        # 求导
        dy1_dx = tape.gradient(target=y1, sources=x)  # 自变量是x，函数是y
        dy2_dx = tape.gradient(target=y2, sources=x)  # 自变量是x，函数是y
        dy3_dx = tape.gradient(target=y3, sources=x)  # 自变量是x，函数是y

        # 输出
        print("dy1_dx:", dy1_dx)
        print("dy2_dx:", dy2_dx)
        print("dy3_dx:", dy3_dx)

    # ------------------二元梯度 (two variables)-----------------------
    print("2D derivation")
    x = tf.constant(value=3.0)
    y = tf.constant(value=2.0)

    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, y])

        # 构造函数
        z = x * x * y + x * y

        # 求导
        dz_dx = tape.gradient(sources=x, target=z)
        dz_dx_dy = tape.gradient(sources=[x, y], target=z)

        print(dz_dx)
        print(dz_dx_dy)

    shown = """\
1D derivation
dy1_dx: tf.Tensor(2.0, shape=(), dtype=float32)
dy2_dx: tf.Tensor(6.0, shape=(), dtype=float32)
dy3_dx: tf.Tensor(8.0, shape=(), dtype=float32)
2D derivation
tf.Tensor(14.0, shape=(), dtype=float32)
[<tf.Tensor: id=184, shape=(), dtype=float32, numpy=14.0>, <tf.Tensor: id=185, shape=(), dtype=float32, numpy=12.0>]
"""
    assert capsys.readouterr().out == strip_ids(shown)


def test_seed004_matrix_function_and_intermediate(capsys):
    # In [29]
    x = tf.ones((2, 2))

    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(x)  # reduce_sum是按行列，或者整个矩阵中每个元素都加起来的和
        z = tf.multiply(y, y)

    # In [21]: 查看一个tape里面记录的内容。
    dz_dx = t.gradient(z, x)

    for i in [0, 1]:
        for j in [0, 1]:
            assert dz_dx[i][j].numpy() == 8

    # In [30]: in the notebook's page order, this cell calls the tape a second time; the tape is
    # non-persistent, so real TF 2.21 raises RuntimeError (the tutorial's own text says it cannot be
    # called twice).
    with pytest.raises(RuntimeError):
        dz_dy = t.gradient(z, y)

    # The execution counts (In [29] then In [30]; In [21] ran earlier) show the notebook ran
    # In [30] right after re-running In [29], on a fresh tape: then it prints 8.0.
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(x)
        z = tf.multiply(y, y)
    dz_dy = t.gradient(z, y)
    print(dz_dy.numpy())
    assert lines(capsys) == ["8.0"]


def test_seed004_persistent_then_del():
    # In [37]
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
        z = y * y

    dz_dx = t.gradient(z, x)
    dy_dx = t.gradient(y, x)

    # 释放内存，用完了就销毁tape。
    del t
    assert (dz_dx.numpy(), dy_dx.numpy()) == (108.0, 6.0)


def test_seed004_python_control_flow():
    # In [43]
    def f(x, y):
        output = 1.0
        for i in range(y):
            if i > 1 and i < 5:
                output = tf.multiply(output, x)
        return output

    def grad(x, y):
        with tf.GradientTape() as t:
            t.watch(x)
            out = f(x, y)  # f(x,y)具体是什么函数还取决于x或者y的值
        return t.gradient(out, x)

    x = tf.convert_to_tensor(2.0)

    # 检验一下答案，如果有问题就产生error。
    assert grad(x, 6).numpy() == 12.0
    assert grad(x, 5).numpy() == 12.0
    assert grad(x, 4).numpy() == 4.0


def test_seed004_higher_order_with_variable(capsys):
    # In [48]
    x = tf.Variable(1.0)

    with tf.GradientTape() as t:
        with tf.GradientTape() as t2:
            y = x * x * x

        dy_dx = t2.gradient(y, x)
    d2y_dx2 = t.gradient(dy_dx, x)

    assert dy_dx.numpy() == 3.0
    assert d2y_dx2.numpy() == 6.0

    print(dy_dx.numpy(), d2y_dx2.numpy())
    assert lines(capsys) == ["3.0 6.0"]
