"""Control flow against real TF: every snippet runs eagerly and inside ``tf.function`` on the TF
side, eagerly and inside ``tapejax.function`` on ours; values, None-ness, dtypes, shapes,
structures and exception classes must agree (``_seed_helpers.assert_same``)."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from _seed_helpers import assert_same, outcome

import tapejax

SNIPPETS: list = []


def snippet(fn: Callable[[Any, Callable], Any]) -> Callable:
    SNIPPETS.append(fn)
    return fn


def _eager(tf: Any) -> Callable:
    return lambda f: f


def _compiled(tf: Any) -> Callable:
    return lambda f: tf.function(f, autograph=False)


MODES = {"eager": _eager, "function": _compiled}


# --- cond ---------------------------------------------------------------------------------------


@snippet
def cond_captures(tf, wrap):
    w = tf.Variable(2.0)
    u = tf.Variable(5.0)

    def run(x):
        with tf.GradientTape(persistent=True) as g:
            g.watch(x)
            y = tf.cond(x > 0, lambda: x * x * w, lambda: -x * u)
        return [y, g.gradient(y, x), g.gradient(y, w), g.gradient(y, u)]

    f = wrap(run)
    return [f(tf.constant(3.0)), f(tf.constant(-2.0))]


@snippet
def cond_second_order(tf, wrap):
    w = tf.Variable(1.5)

    def run(x):
        with tf.GradientTape() as g2:
            g2.watch(x)
            with tf.GradientTape() as g1:
                g1.watch(x)
                y = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.reduce_sum(tf.sin(x) * x * w),
                            lambda: tf.reduce_sum(x * x * x))
            d1 = g1.gradient(y, x)
        d2 = g2.gradient(d1, x)
        return [y, d1, d2]

    f = wrap(run)
    return [f(tf.constant([0.5, 1.0])), f(tf.constant([-0.5, -1.0]))]


@snippet
def cond_nested_and_multi_output(tf, wrap):
    def run(x, y):
        with tf.GradientTape(persistent=True) as g:
            g.watch([x, y])
            a, (b, c) = tf.cond(x > y,
                                lambda: (x * y, tf.cond(y > 0, lambda: (y * 2.0, x), lambda: (x * 3.0, y))),
                                lambda: (x + y, (y * y, x * x)))
            z = a + b * c
        return [a, b, c, g.gradient(z, [x, y])]

    f = wrap(run)
    return [f(tf.constant(2.0), tf.constant(1.0)), f(tf.constant(2.0), tf.constant(-1.0)),
            f(tf.constant(1.0), tf.constant(2.0))]


@snippet
def cond_python_values(tf, wrap):
    def run(x):
        return tf.cond(x > 0, lambda: tf.constant(1), lambda: tf.constant(2))

    f = wrap(run)
    return [f(tf.constant(1.0)), f(tf.constant(-1.0))]


@snippet
def cond_forward_accumulator(tf, wrap):
    def run(x):
        with tf.autodiff.ForwardAccumulator(x, tf.constant(1.0)) as acc:
            y = tf.cond(x < 1.0, lambda: tf.exp(x) * x, lambda: x * 2.0)
        return [y, acc.jvp(y)]

    f = wrap(run)
    return [f(tf.constant(0.5)), f(tf.constant(3.0))]


@snippet
def cond_assigns_variable(tf, wrap):
    v = tf.Variable(1.0)

    def run(x):
        tf.cond(x > 0, lambda: v.assign_add(x), lambda: v.assign(-x))
        return v.read_value()

    f = wrap(run)
    return [f(tf.constant(2.0)), f(tf.constant(-4.0)), v.read_value()]


@snippet
def cond_structure_mismatch(tf, wrap):
    # Same number of values, other structure (TF raises an AssertionError for different counts).
    f = wrap(lambda x: tf.cond(x > 0, lambda: {"a": x}, lambda: {"b": x}))
    g = wrap(lambda x: tf.cond(x > 0, lambda: [x, x], lambda: (x, x)))
    return [outcome(lambda _: f(tf.constant(1.0)), tf), outcome(lambda _: g(tf.constant(1.0)), tf)]


@snippet
def cond_dtype_mismatch(tf, wrap):
    f = wrap(lambda x: tf.cond(x > 0, lambda: x, lambda: tf.cast(x, tf.float64)))
    return f(tf.constant(1.0))


# --- switch_case / case -------------------------------------------------------------------------


@snippet
def switch_case_grad(tf, wrap):
    def run(i, x):
        with tf.GradientTape() as g:
            g.watch(x)
            y = tf.switch_case(i, [lambda: x * 2.0, lambda: x * x, lambda: tf.sin(x)])
        return [y, g.gradient(y, x)]

    f = wrap(run)
    return [f(tf.constant(k), tf.constant(1.5)) for k in (0, 1, 2, 7, -1)]


@snippet
def case_grad(tf, wrap):
    def run(x):
        with tf.GradientTape() as g:
            g.watch(x)
            y = tf.case([(x < 0.0, lambda: -x), (x < 2.0, lambda: x * x)], default=lambda: x * 3.0)
        return [y, g.gradient(y, x)]

    f = wrap(run)
    return [f(tf.constant(v)) for v in (-1.0, 1.0, 5.0)]


# --- while_loop ---------------------------------------------------------------------------------


@snippet
def while_basic(tf, wrap):
    def run(n):
        return tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + tf.cast(i, tf.float32)),
                             (tf.constant(0), tf.constant(0.0)))

    f = wrap(run)
    return [f(tf.constant(5)), f(tf.constant(0))]


@snippet
def while_gradient_max_iterations(tf, wrap):
    w = tf.Variable(1.1)

    def run(x):
        with tf.GradientTape(persistent=True) as g:
            g.watch(x)
            i, s = tf.while_loop(lambda i, s: s < 10.0, lambda i, s: (i + 1, s * x * w),
                                 (tf.constant(0), tf.constant(1.0)), maximum_iterations=20)
        return [i, s, g.gradient(s, x), g.gradient(s, w)]

    f = wrap(run)
    return [f(tf.constant(2.0)), f(tf.constant(1.5))]


@snippet
def while_second_order(tf, wrap):
    def run(x):
        with tf.GradientTape() as g2:
            g2.watch(x)
            with tf.GradientTape() as g1:
                g1.watch(x)
                _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, tf.sin(y) * x),
                                     [tf.constant(0), x], maximum_iterations=5)
            d1 = g1.gradient(y, x)
        return [y, d1, g2.gradient(d1, x)]

    return wrap(run)(tf.constant(0.7))


@snippet
def while_nested_structure(tf, wrap):
    def run(x):
        def body(i, st):
            return i + 1, {"a": st["a"] * 2.0, "b": (st["b"][0] + st["a"], st["b"][1])}

        with tf.GradientTape() as g:
            g.watch(x)
            i, st = tf.while_loop(lambda i, st: i < 3, body, (tf.constant(0), {"a": x, "b": (x * 0.0, x)}),
                                  maximum_iterations=3)
        return [i, st, g.gradient(st["b"][0], x)]

    return wrap(run)(tf.constant(1.5))


@snippet
def while_forward_accumulator(tf, wrap):
    def run(x):
        with tf.autodiff.ForwardAccumulator(x, tf.constant(1.0)) as acc:
            _, y = tf.while_loop(lambda i, y: i < 4, lambda i, y: (i + 1, y * x + 1.0), (tf.constant(0), x))
        return [y, acc.jvp(y)]

    return wrap(run)(tf.constant(1.3))


@snippet
def while_assigns_variable(tf, wrap):
    v = tf.Variable(0.0)

    def run(n):
        def body(i):
            v.assign_add(tf.cast(i, tf.float32))
            return (i + 1,)

        tf.while_loop(lambda i: i < n, body, (tf.constant(0),))
        return v.read_value()

    return [wrap(run)(tf.constant(4)), v.read_value()]


@snippet
def while_cond_inside(tf, wrap):
    def run(x):
        def body(i, y):
            return i + 1, tf.cond(y > 1.0, lambda: y * 0.5, lambda: y * x)

        with tf.GradientTape() as g:
            g.watch(x)
            _, y = tf.while_loop(lambda i, y: i < 6, body, (tf.constant(0), tf.constant(1.0)), maximum_iterations=6)
        return [y, g.gradient(y, x)]

    return wrap(run)(tf.constant(1.7))


@snippet
def while_list_body_for_tuple(tf, wrap):
    x = tf.constant(1.0)
    return wrap(lambda: tf.while_loop(lambda a, b: a < 5, lambda a, b: [a * 2, b], (x, x)))()


@snippet
def while_structure_error(tf, wrap):
    x = tf.constant(1.0)
    return wrap(lambda: tf.while_loop(lambda a, b: a < 5, lambda a, b: (a * 2,), (x, x)))()


@snippet
def while_shape_error(tf, wrap):
    return wrap(lambda: tf.while_loop(lambda a: tf.reduce_sum(a) < 5, lambda a: (tf.concat([a, a], 0),),
                                      [tf.ones(1)]))()


@snippet
def while_dtype_error(tf, wrap):
    x = tf.constant(1.0)
    return wrap(lambda: tf.while_loop(lambda a: a < 5, lambda a: (tf.cast(a * 2, tf.int32),), [x]))()


@snippet
def while_maximum_iterations_structure(tf, wrap):
    x = tf.constant(1.0)
    return [outcome(lambda _: wrap(lambda: tf.while_loop(lambda a, b: a < 5, lambda a, b: (a * 2, b), [x, x],
                                                         maximum_iterations=4))(), tf),
            outcome(lambda _: wrap(lambda: tf.while_loop(lambda a, b: a < 5, lambda a, b: (a * 2,), (x, x),
                                                         maximum_iterations=4))(), tf),
            wrap(lambda: tf.while_loop(lambda a, b: a < 5, lambda a, b: (a * 2, b), (x, x), maximum_iterations=0))()]


@snippet
def while_nonscalar_predicate(tf, wrap):
    return wrap(lambda: tf.while_loop(lambda a: a < 5, lambda a: (a * 2,), (tf.ones(2),)))()


@snippet
def while_maximum_iterations_values(tf, wrap):
    x = tf.constant(1.0)
    return wrap(lambda: tf.while_loop(lambda a: a < 500.0, lambda a: (a * 2.0,), (x,), maximum_iterations=3))()


# --- scan / foldl / foldr / map_fn / vectorized_map ---------------------------------------------


@snippet
def scan_variants(tf, wrap):
    w = tf.Variable(0.5)

    def run(e):
        with tf.GradientTape(persistent=True) as g:
            g.watch(e)
            a = tf.scan(lambda acc, x: acc * w + x, e)
            b = tf.scan(lambda acc, x: acc * w + x, e, reverse=True)
            c = tf.scan(lambda acc, x: (acc[0] + x, acc[1] * x), e, initializer=(tf.constant(0.0), tf.constant(1.0)))
            d = tf.scan(lambda acc, x: acc + x[0] * x[1], (e, e * 2.0), initializer=tf.constant(1.0))
            t = tf.reduce_sum(a) + tf.reduce_sum(b) + tf.reduce_sum(c[1]) + tf.reduce_sum(d)
        return [a, b, c, d, g.gradient(t, e), g.gradient(t, w)]

    return wrap(run)(tf.constant([1.0, 2.0, 3.0, 0.5]))


@snippet
def folds(tf, wrap):
    def run(e):
        with tf.GradientTape(persistent=True) as g:
            g.watch(e)
            l1 = tf.foldl(lambda a, x: a * x + 1.0, e)
            r1 = tf.foldr(lambda a, x: a * x + 1.0, e)
            l2 = tf.foldl(lambda a, x: {"s": a["s"] + x, "p": a["p"] * x}, e,
                          initializer={"s": tf.constant(0.0), "p": tf.constant(1.0)})
        # Key order checked inside the function (tapejax.function's own outputs sort dict keys).
        return [l1, r1, l2["s"], l2["p"], tf.constant([float(k == "s") for k in l2]), g.gradient(l1, e), g.gradient(r1, e),
                g.gradient(l2["p"], e)]

    return wrap(run)(tf.constant([1.5, 2.0, 3.0]))


@snippet
def map_fn_variants(tf, wrap):
    w = tf.Variable([1.0, -1.0])

    def run(m):
        with tf.GradientTape(persistent=True) as g:
            g.watch(m)
            a = tf.map_fn(lambda r: tf.reduce_sum(r * w), m)
            b = tf.map_fn(lambda p: (p[0] * 2.0, p[1] + 1), (m, tf.constant([[1, 2], [3, 4], [5, 6]])),
                          fn_output_signature=(tf.float32, tf.int32))
            c = tf.map_fn(lambda r: tf.cast(tf.reduce_sum(r), tf.int32), m, fn_output_signature=tf.int32)
        return [a, b, c, g.gradient(a, m), g.gradient(a, w), g.gradient(b[0], m)]

    return wrap(run)(tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))


@snippet
def map_fn_second_order(tf, wrap):
    def run(e):
        with tf.GradientTape() as g2:
            g2.watch(e)
            with tf.GradientTape() as g1:
                g1.watch(e)
                y = tf.reduce_sum(tf.map_fn(lambda x: tf.sin(x) * x * x, e))
            d1 = g1.gradient(y, e)
        return [y, d1, g2.gradient(d1, e)]

    return wrap(run)(tf.constant([0.3, 1.2]))


@snippet
def vectorized_map_grad(tf, wrap):
    w = tf.Variable([[1.0, 2.0], [0.5, -1.0]])

    def run(m):
        with tf.GradientTape(persistent=True) as g:
            g.watch(m)
            y = tf.vectorized_map(lambda r: tf.tanh(tf.linalg.matvec(w, r)), m)
        return [y, g.gradient(y, m), g.gradient(y, w)]

    return wrap(run)(tf.constant([[1.0, 2.0], [3.0, 4.0], [0.1, 0.2]]))


@snippet
def scan_in_while_with_cond(tf, wrap):
    def run(x):
        def body(i, y):
            s = tf.scan(lambda a, e: tf.cond(a > 2.0, lambda: a * 0.5 + e, lambda: a + e * y), tf.constant([1.0, 2.0]),
                        initializer=y)
            return i + 1, s[-1]

        with tf.GradientTape() as g:
            g.watch(x)
            _, y = tf.while_loop(lambda i, y: i < 3, body, (tf.constant(0), x), maximum_iterations=3)
        return [y, g.gradient(y, x)]

    return wrap(run)(tf.constant(0.4))


# --- TensorArray --------------------------------------------------------------------------------


@snippet
def tensor_array_eager_semantics(tf, wrap):
    def run():
        out = []
        for f in (lambda: tf.TensorArray(tf.float32, size=2).write(3, 1.0),
                  lambda: tf.TensorArray(tf.float32, size=2).write(0, 1.0).write(0, 2.0).stack(),
                  lambda: tf.TensorArray(tf.float32, size=2).write(0, 1.0).read(1),
                  lambda: tf.TensorArray(tf.float32, size=2, element_shape=(2,)).write(0, [1.0, 2.0]).read(1),
                  lambda: tf.TensorArray(tf.float32, size=2).write(0, [1.0, 2.0]).stack(),
                  lambda: tf.TensorArray(tf.float32, size=0, element_shape=(3,)).stack(),
                  lambda: tf.TensorArray(tf.float32, size=0, dynamic_size=True).write(2, 1.0).stack(),
                  lambda: tf.TensorArray(tf.float32, size=1).write(0, tf.constant(1)).stack(),
                  lambda: tf.TensorArray(tf.float32, size=2).write(0, [1.0]).write(1, [1.0, 2.0]).stack(),
                  lambda: tf.TensorArray(tf.float32, size=3).size(),
                  lambda: tf.TensorArray(tf.float32, size=2, infer_shape=False).write(0, [1.0]).write(1, [2.0, 3.0])
                  .concat(),
                  lambda: tf.TensorArray(tf.float32, size=3).unstack([1.0, 2.0, 3.0]).gather([2, 0]),
                  lambda: tf.TensorArray(tf.float32, size=3).scatter([2, 0], [5.0, 6.0]).stack(),
                  lambda: tf.TensorArray(tf.float32, size=2).unstack([1.0, 2.0, 3.0]).stack()):
            out.append(outcome(lambda _, f=f: f(), tf))
        return out

    return run()


@snippet
def tensor_array_in_while_loop(tf, wrap):
    def run(x):
        def body(i, ta):
            return i + 1, ta.write(i, x * tf.cast(i + 1, tf.float32))

        with tf.GradientTape() as g:
            g.watch(x)
            _, ta = tf.while_loop(lambda i, ta: i < 4, body, (tf.constant(0), tf.TensorArray(tf.float32, size=4)),
                                  maximum_iterations=4)
            s = ta.stack()
            y = tf.reduce_sum(s * s) + ta.read(2)[0]
        return [s, ta.size(), g.gradient(y, x)]

    return wrap(run)(tf.constant([1.0, -2.0]))


@snippet
def tensor_array_read_in_scan(tf, wrap):
    def run(x):
        ta = tf.TensorArray(tf.float32, size=3).unstack(x * x)
        with tf.GradientTape() as g:
            g.watch(x)
            ta = tf.TensorArray(tf.float32, size=3).unstack(x * x)
            y = tf.scan(lambda a, i: a + ta.read(i) * 2.0, tf.constant([2, 0, 1]), initializer=tf.constant(0.0))
        return [y, g.gradient(y, x)]

    return wrap(run)(tf.constant([1.0, 2.0, 3.0]))


@snippet
def tape_inside_branch_and_body(tf, wrap):
    w = tf.Variable(0.5)

    def run(x):
        def inner_grad():
            with tf.GradientTape() as t:
                t.watch(x)
                y = x * x * x * w
            return t.gradient(y, x)

        def body(i, acc):
            with tf.GradientTape() as t:
                t.watch(acc)
                z = tf.sin(acc) * x
            return i + 1, acc + t.gradient(z, acc)

        with tf.GradientTape(persistent=True) as g:
            g.watch(x)
            a = tf.cond(x > 0, inner_grad, lambda: x * w)
            _, b = tf.while_loop(lambda i, acc: i < 2, body, (tf.constant(0), x), maximum_iterations=2)
        return [a, b, g.gradient(a, x), g.gradient(a, w), g.gradient(b, x)]

    f = wrap(run)
    return [f(tf.constant(1.3)), f(tf.constant(-0.4))]


@snippet
def tensor_array_through_cond_in_loop(tf, wrap):
    def run(x):
        def body(i, ta):
            ta = tf.cond(i % 2 == 0, lambda: ta.write(i, x * tf.cast(i + 1, tf.float32)), lambda: ta)
            return i + 1, ta

        with tf.GradientTape() as g:
            g.watch(x)
            _, ta = tf.while_loop(lambda i, ta: i < 4, body,
                                  (tf.constant(0), tf.TensorArray(tf.float32, size=4, element_shape=())),
                                  maximum_iterations=4)
            y = tf.reduce_sum(ta.stack() ** 2)
        return [ta.stack(), g.gradient(y, x)]

    return wrap(run)(tf.constant(2.0))


@snippet
def while_loop_vars_not_a_sequence(tf, wrap):
    return [outcome(lambda _: wrap(lambda: tf.while_loop(lambda a: a < 5, lambda a: a * 2, tf.ones(())))(), tf),
            outcome(lambda _: wrap(lambda: tf.while_loop(lambda d: d["a"] < 5, lambda d: {"a": d["a"] * 2},
                                                         {"a": tf.ones(())}))(), tf)]


@snippet
def map_scan_fold_edge_cases(tf, wrap):
    cases = [lambda: tf.map_fn(lambda x: (x, x), tf.ones(3)),
             lambda: tf.map_fn(lambda x: tf.cast(x, tf.int32), tf.ones(3)),
             lambda: tf.map_fn(lambda x: tf.stack([x, x]), tf.ones(3)),
             lambda: tf.map_fn(lambda x: x * 2, tf.ones((0, 2))),
             lambda: tf.map_fn(lambda x: x * 2, tf.constant(1.0)),
             lambda: tf.scan(lambda a, x: (a, a), tf.ones(3)),
             lambda: tf.scan(lambda a, x: a + x, tf.ones((0,)), initializer=tf.constant(1.0)),
             lambda: tf.foldl(lambda a, x: a + x, tf.ones((0,))),
             lambda: tf.vectorized_map(lambda x: (x, x * 2), tf.ones(3))]
    return [outcome(lambda _, f=f: wrap(f)(), tf) for f in cases]


@snippet
def read_after_assign_in_branch_and_body(tf, wrap):
    v = tf.Variable(1.0)

    def run(x):
        with tf.GradientTape(persistent=True) as g:
            g.watch(x)

            def body(i, y):
                v.assign(x * 3.0)
                return i + 1, y + v.read_value() * x

            _, y = tf.while_loop(lambda i, y: i < 2, body, (tf.constant(0), tf.constant(0.0)), maximum_iterations=2)
            z = tf.cond(x > 0, lambda: v.assign_add(x).read_value() * 2.0, lambda: x)
        return [y, z, g.gradient(y, x), g.gradient(z, x), g.gradient(y, v), g.gradient(z, v)]

    return [wrap(run)(tf.constant(2.0)), v.read_value()]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("fn", SNIPPETS, ids=[f.__name__ for f in SNIPPETS])
def test_against_tf(real_tf, fn, mode):
    expected = outcome(lambda tf: fn(tf, MODES[mode](tf)), real_tf)
    actual = outcome(lambda tf: fn(tf, MODES[mode](tf)), tapejax)
    assert_same(expected, actual)
