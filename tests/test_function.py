"""tapejax.function: a whole TF-style step compiled into one XLA program (issue 6)."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapejax as tf
from tapejax._core import _recorder as _core


def make_mlp(seed=0, sizes=(4, 8, 3)):
    rng = np.random.default_rng(seed)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params.append(tf.Variable(rng.normal(size=(a, b)).astype(np.float32) * 0.5))
        params.append(tf.Variable(np.zeros(b, np.float32)))
    return params


def loss_fn(params, x, y):
    h = x
    for i in range(0, len(params), 2):
        h = tf.matmul(h, params[i]) + params[i + 1]
        if i + 2 < len(params):
            h = tf.nn.relu(h)
    return tf.reduce_mean((h - y) ** 2)


def sgd_step(params, x, y, lr=0.1):
    with tf.GradientTape() as tape:
        loss = loss_fn(params, x, y)
    grads = tape.gradient(loss, params)
    for p, g in zip(params, grads):
        p.assign_sub(lr * g)
    return loss


def data(seed=1, n=16):
    rng = np.random.default_rng(seed)
    return tf.constant(rng.normal(size=(n, 4)).astype(np.float32)), tf.constant(rng.normal(size=(n, 3)).astype(np.float32))


def test_compiled_step_matches_eager_and_jax():
    x, y = data()
    p_eager, p_comp = make_mlp(), make_mlp()
    step = tf.function(lambda x, y: sgd_step(p_comp, x, y))
    for _ in range(5):
        le = sgd_step(p_eager, x, y)
        lc = step(x, y)
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-5)
    for a, b in zip(p_eager, p_comp):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert step.experimental_get_tracing_count() == 1

    # The same step as a pure jax function.
    def pure(ws, x, y):
        h = x
        for i in range(0, len(ws), 2):
            h = h @ ws[i] + ws[i + 1]
            if i + 2 < len(ws):
                h = jax.nn.relu(h)
        return jnp.mean((h - y) ** 2)

    ws = [jnp.asarray(p.numpy()) for p in make_mlp()]
    for _ in range(5):
        g = jax.grad(pure)(ws, x._value, y._value)
        ws = [w - 0.1 * gw for w, gw in zip(ws, g)]
    for a, b in zip(ws, p_comp):
        np.testing.assert_allclose(np.asarray(a), b.numpy(), rtol=1e-4, atol=1e-5)


def test_retracing_rules():
    v = tf.Variable(1.0)
    calls = []

    @tf.function
    def f(x, scale):
        calls.append(1)  # a Python side effect: runs at trace time only
        return tf.cast(x, tf.float32) * v * scale

    f(tf.constant([1.0]), 2.0)
    f(tf.constant([5.0]), 2.0)
    v.assign(3.0)  # a variable's value never retraces ...
    out = f(tf.constant([1.0]), 2.0)
    np.testing.assert_allclose(out.numpy(), [6.0])  # ... and the new value is used
    assert f.experimental_get_tracing_count() == 1
    f(tf.constant([1.0, 2.0]), 2.0)  # new shape
    assert f.experimental_get_tracing_count() == 2
    f(tf.constant([1, 2]), 2)  # new dtype (int) and Python value
    assert f.experimental_get_tracing_count() == 3
    f(tf.constant([1.0]), 3.0)  # different Python value
    assert f.experimental_get_tracing_count() == 4


def test_input_signature_and_flags():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)], reduce_retracing=True, jit_compile=True)
    def f(x):
        return tf.reduce_sum(x * x)

    assert float(f(tf.constant([1.0, 2.0]))) == 5.0
    with pytest.raises(TypeError, match="input_signature"):
        f(tf.constant([1, 2]))
    with pytest.raises(TypeError, match="input_signature"):
        f(tf.constant([[1.0]]))


def test_variables_created_on_first_call_only():
    class Dense:
        def __init__(self):
            self.w = None

        def __call__(self, x):
            if self.w is None:
                self.w = tf.Variable(tf.ones((3, 2)))
            return tf.matmul(x, self.w)

    layer = Dense()

    @tf.function
    def step(x):
        with tf.GradientTape() as t:
            loss = tf.reduce_sum(layer(x) ** 2)
        layer.w.assign_sub(0.01 * t.gradient(loss, layer.w))
        return loss

    x = tf.ones((2, 3))
    losses = [float(step(x)) for _ in range(3)]
    w = np.ones((3, 2), np.float32)
    for expected in losses:
        assert abs(expected - float(np.sum((np.ones((2, 3)) @ w) ** 2))) < 1e-3
        w = w - 0.01 * 2 * np.ones((2, 3)).T @ (np.ones((2, 3)) @ w)

    @tf.function
    def bad(x):
        return x * tf.Variable(1.0)

    # TF traces a variable-creating function twice; the second trace creates again: ValueError.
    with pytest.raises(ValueError, match="first call"):
        bad(tf.constant(1.0))


def test_print_at_trace_time_tf_print_every_call(capsys):
    @tf.function
    def f(x):
        print("traced")
        tf.print("x =", x, output_stream=sys.stdout)
        return x + 1.0

    f(tf.constant(1.0))
    f(tf.constant(2.0))
    out = capsys.readouterr().out
    assert out.count("traced") == 1 and "x = 1\n" in out and "x = 2\n" in out


def test_tape_semantics_inside_compiled_step():
    x0 = tf.constant([0.5, -1.0])

    def body(x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape(persistent=True) as inner:
                inner.watch(x)
                y = tf.reduce_sum(tf.sin(x) * x**2)
            g = inner.gradient(y, x)
            g2 = inner.gradient(y, x)
            z = inner.gradient(y, tf.constant(1.0), unconnected_gradients="zero")
        h = outer.gradient(g, x)
        return g, g2, z, h

    eager = body(x0)
    comp = tf.function(body)(x0)
    for a, b in zip(eager, comp):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)
    xv = np.array([0.5, -1.0])
    np.testing.assert_allclose(comp[0].numpy(), np.cos(xv) * xv**2 + 2 * xv * np.sin(xv), rtol=1e-5)
    assert float(comp[2]) == 0.0


def test_exception_during_trace_leaves_state_clean():
    v = tf.Variable(1.0)

    @tf.function
    def f(x):
        with tf.GradientTape():
            v.assign(5.0)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        f(tf.constant(1.0))
    assert not _core.state.recording and not _core.state.tracing
    assert float(v) == 1.0  # no half-assigned variable
    with tf.GradientTape() as t:
        y = v * 3.0
    assert float(t.gradient(y, v)) == 3.0


def test_python_control_flow_on_tensor_values_gives_clear_error():
    def f(x):
        return x * 2.0 if x > 0 else x

    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError, match="test_function.py"):
        tf.function(f, autograph=False)(tf.constant(1.0))


def test_called_under_an_outer_tape_is_differentiable():
    @tf.function
    def f(x):
        return tf.sin(x) * x

    x = tf.constant(0.7)
    with tf.GradientTape() as t:
        t.watch(x)
        y = f(x)
    np.testing.assert_allclose(float(t.gradient(y, x)), np.cos(0.7) * 0.7 + np.sin(0.7), rtol=1e-6)


def test_methods_and_default_device():
    class Model:
        def __init__(self):
            self.w = tf.Variable(2.0)

        @tf.function
        def __call__(self, x):
            return x * self.w

    m1, m2 = Model(), Model()
    m2.w.assign(3.0)
    assert float(m1(tf.constant(1.0))) == 2.0 and float(m2(tf.constant(1.0))) == 3.0
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):
        out = m1(tf.constant(2.0))
    assert out._value.devices() == {cpu}


def test_data_parallel_step_on_8_host_devices_matches_one_device():
    code = textwrap.dedent(
        """
        import numpy as np, jax
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        import tapejax as tf
        assert len(jax.devices()) == 8
        rng = np.random.default_rng(0)
        X = rng.normal(size=(64, 4)).astype(np.float32); Y = rng.normal(size=(64, 1)).astype(np.float32)
        W0 = rng.normal(size=(4, 1)).astype(np.float32)

        def run(x, y):
            w = tf.Variable(W0)
            @tf.function
            def step(x, y):
                with tf.GradientTape() as t:
                    loss = tf.reduce_mean((tf.matmul(x, w) - y) ** 2)
                w.assign_sub(0.1 * t.gradient(loss, w))
                return loss
            losses = [float(step(x, y)) for _ in range(5)]
            return losses, w.numpy()

        single = run(tf.constant(X), tf.constant(Y))
        mesh = Mesh(np.array(jax.devices()), ("batch",))
        sh = NamedSharding(mesh, P("batch"))
        xs = tf.Tensor(jax.device_put(X, sh)); ys = tf.Tensor(jax.device_put(Y, sh))
        assert len(xs._value.sharding.device_set) == 8
        multi = run(xs, ys)
        np.testing.assert_allclose(single[0], multi[0], rtol=1e-5)
        np.testing.assert_allclose(single[1], multi[1], rtol=1e-5)
        print("OK", single[0][-1])
        """
    )
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("OK")


def test_fast_call_path_keeps_every_rule():
    # After a first call, a same-shaped all-tensor call takes the fast path; what would change
    # the general path's decision must still change it.
    w = tf.Variable(1.0)

    @tf.function
    def step(x):
        w.assign_add(x)
        return {"b": w * 1.0, "a": x}

    x = tf.constant(2.0)
    out = step(x)
    assert list(out) == ["b", "a"] and float(out["b"]) == 3.0
    out = step(x)  # fast path: dict order kept, assign written back
    assert list(out) == ["b", "a"] and float(out["b"]) == 5.0 and float(w) == 5.0
    # Under a tape: one recorded op, differentiable.
    with tf.GradientTape() as t:
        t.watch(x)
        y = step(x)["b"]
    assert float(t.gradient(y, x)) == 1.0 and float(w) == 7.0
    # run_functions_eagerly switches the fast path off too.
    tf.config.run_functions_eagerly(True)
    try:
        float(step(tf.constant(float("nan")))["b"])
        assert np.isnan(float(w))
    finally:
        tf.config.run_functions_eagerly(False)
    w.assign(0.0)
    # Another shape or dtype retraces.
    assert float(step(tf.constant(3.0, dtype=tf.float32))["b"]) == 3.0
    assert step.experimental_get_tracing_count() == 1
    v = tf.Variable([0.0, 0.0])

    @tf.function
    def g(x):
        v.assign_add(x)
        return v

    g(tf.constant([1.0, 2.0]))
    g(tf.constant([1.0, 2.0]))
    with pytest.raises(Exception):
        g(tf.constant([1.0, 2.0, 3.0]))  # a new shape retraces (and TF's shape error), not the old program
    assert v.numpy().tolist() == [2.0, 4.0]
    h = tf.function(lambda x: x * 2)
    h(tf.constant([1.0]))
    h(tf.constant([1.0]))
    assert h(tf.constant([1.0, 2.0])).numpy().tolist() == [2.0, 4.0]
    assert h(tf.constant([1, 2])).dtype == tf.int32
    assert h.experimental_get_tracing_count() == 3


def test_tensor_range_loop_condition_is_one_compare():
    # `for i in tf.range(n)` with a step known at trace time: the while condition is `i < n`,
    # not a lax.cond over the step's sign on every iteration (it cost XLA a conditional).
    @tf.function
    def f(n):
        s = tf.constant(0)
        for i in tf.range(n):
            s += i
        for j in tf.range(n, 0, -1):
            s += j
        return s

    assert int(f(tf.constant(5))) == 10 + 15
    assert int(f(tf.constant(0))) == 0
    closed = next(iter(f._entries.values())).closed

    def prims(j):
        for e in j.eqns:
            yield e
            for v in e.params.values():
                for sub in (v if isinstance(v, tuple) else (v,)):
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        yield from prims(inner)

    whiles = [e for e in prims(closed.jaxpr) if e.primitive.name == "while"]
    assert len(whiles) == 2
    for e in whiles:
        assert [q.primitive.name for q in e.params["cond_jaxpr"].jaxpr.eqns if q.primitive.name == "cond"] == []


def test_data_dependent_shape_runs_the_call_eagerly_with_one_warning_at_the_line():
    import warnings

    v = tf.Variable([1.0, -2.0, 3.0])
    printed = []

    @tf.function
    def step(x):
        printed.append(1)
        kept = tf.boolean_mask(v * x, v > 0)  # the line the warning names
        v.assign_add(tf.ones_like(v))
        return tf.reduce_sum(kept)

    line = step.python_function.__code__.co_firstlineno + 3
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = [float(step(tf.constant(2.0))) for _ in range(3)]
    # Eagerly: [1, 3] * 2; then v = [2, -1, 4] -> [2, 4] * 2; then [3, 0, 5] -> [3, 5] * 2.
    assert got == [8.0, 12.0, 16.0]
    assert v.numpy().tolist() == [4.0, 1.0, 6.0]  # the failed trace assigned nothing
    fell = [w for w in rec if issubclass(w.category, tf.autograph.AutoGraphWarning)]
    assert len(fell) == 1 and fell[0].filename == __file__ and fell[0].lineno == line
    assert "boolean_mask" in str(fell[0].message) and "eagerly" in str(fell[0].message)
    # The Python body ran at the failed trace, then every call (eager): documented.
    assert len(printed) == 4
    # Under a tape: the eager call's ops are recorded, so the gradient is eager's.
    x = tf.constant(2.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = step(x)
    assert float(t.gradient(y, x)) == float(tf.reduce_sum(tf.boolean_mask(v - 1.0, v - 1.0 > 0)))
    # A traced concrete function cannot run eagerly: the op's TypeError.
    with pytest.raises(TypeError, match="boolean_mask"):
        tf.function(lambda x: tf.boolean_mask(x, x > 0)).get_concrete_function(tf.TensorSpec([3], tf.float32))


def test_int_and_float_of_tensors_in_converted_code_are_casts():
    @tf.function
    def f(x, n):
        total = x * 0.0
        for i in range(int(n)):  # a tensor loop: int(n) is a tensor inside the function
            total += float(i)
        return total, float(n), int(x)

    total, fn, ix = f(tf.constant(2.7), tf.constant(4))
    assert float(total) == 6.0 and fn.dtype == tf.float32 and float(fn) == 4.0
    assert ix.dtype == tf.int32 and int(ix) == 2
    assert f.experimental_get_tracing_count() == 1
    int_ = int  # another name: no conversion (and the same numbers eagerly)
    assert int_(tf.constant(3)) == 3


def test_tensor_kept_from_a_loop_body_raises_tfs_error():
    @tf.function
    def f(n):
        kept = []
        i = tf.constant(0)
        while i < n:
            kept.append(i)
            i += 1
        return tf.stack(kept)

    with pytest.raises(ValueError, match="loop variable|TensorArray") as e:
        f(tf.constant(3))
    assert type(e.value).__name__ == "InaccessibleTensorError"


def test_debugging_checks_raise_when_the_compiled_call_runs():
    v = tf.Variable(0.0)

    @tf.function
    def f(x):
        v.assign_add(1.0)
        y = tf.debugging.check_numerics(tf.math.log(x), "log of x")
        return tf.cond(y > 0.0, lambda: tf.debugging.check_numerics(y * 1e38 * 1e38, "big"), lambda: y)

    assert float(f(tf.constant(1.0))) == 0.0
    with pytest.raises(tf.errors.InvalidArgumentError, match="log of x : Tensor had NaN values"):
        f(tf.constant(-1.0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="big : Tensor had Inf values"):
        f(tf.constant(3.0))  # a check inside a tf.cond branch
    assert float(f(tf.constant(1.0))) == 0.0  # no report left over from the failed calls
    assert float(v) == 4.0  # as TF: the failed calls' assigns ran
    assert f.experimental_get_tracing_count() == 1
    # Under a tape the call is one recorded op: the check runs (once) with it.
    x = tf.constant(-2.0)
    with tf.GradientTape() as t:
        t.watch(x)
        with pytest.raises(tf.errors.InvalidArgumentError, match="NaN"):
            f(x)

    @tf.function
    def g(x, y):
        tf.debugging.assert_less(x, y, message="x must stay below y")
        return x

    g(tf.constant([1, 2]), tf.constant([3, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"x must stay below y.*\[x = \] \[1 4\]"):
        g(tf.constant([1, 4]), tf.constant([3, 3]))


def test_checks_in_jax_jit_of_tapejax_code_are_not_reported_later():
    # A jax.jit of tapejax code (no tapejax.function) has no check (as before); nothing it ran
    # may surface in a later function call.
    import jax

    @jax.jit
    def j(x):
        return tf.debugging.check_numerics(tf.math.log(tf.constant(1.0) * x), "jit")._value

    assert np.isnan(float(j(-1.0)))
    assert float(tf.function(lambda x: x + 1.0)(tf.constant(1.0))) == 2.0
