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
        a = np.asarray(x.numpy())
        if a.dtype.kind == "f":
            # Values to 5 significant digits: XLA's and TF's kernels (tanh) differ in the last ulp.
            a = np.vectorize(lambda v: float(f"{v:.5g}"), otypes=[np.float64])(a) if a.size else a
        return (kind, x.dtype.name, a.tolist())
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
def saved_model_without_signature_keeps_every_trace(tf):
    # TF's basics guide: a tf.function without input_signature is saved with the programs it
    # traced; the loaded function dispatches on the call's shapes (an untraced shape raises).
    import tempfile

    class MyModule(tf.Module):
        def __init__(self, value):
            self.weight = tf.Variable(value)

        @tf.function
        def multiply(self, x):
            return x * self.weight

    m = MyModule(3)
    m.multiply(tf.constant([1, 2, 3]))
    m.multiply(tf.constant(5))
    d = tempfile.mkdtemp()
    tf.saved_model.save(m, d)
    r = tf.saved_model.load(d)
    out = [r.multiply(tf.constant([1, 2, 3])), r.multiply(tf.constant(7))]
    try:
        r.multiply(tf.constant([1.0]))
        out.append("no error")
    except ValueError:
        out.append("ValueError")
    return out


@case
def init_scope_runs_once_at_trace_time(tf):
    # TF's function guide: the init_scope block is lifted out of the traced program.
    class Model(tf.Module):
        def __init__(self):
            self.v = tf.Variable(0)
            self.counter = 0

        @tf.function
        def __call__(self):
            if self.counter == 0:
                with tf.init_scope():
                    self.counter += 1
                    self.v.assign_add(1)
            return self.v

    m = Model()
    return [m().numpy().item() for _ in range(3)], m.v.numpy().item(), m.counter


@case
def pretty_printed_concrete_signatures_lists_every_trace(tf):
    @tf.function
    def double(a):
        return a + a

    double(tf.constant(1))
    double(tf.constant(1.5))
    double(tf.constant([1.0, 2.0]))
    return double.pretty_printed_concrete_signatures()


@case
def save_options_fields(tf):
    o = tf.saved_model.SaveOptions(experimental_custom_gradients=False, save_debug_info=True)
    return (type(o).__name__, o.experimental_custom_gradients, o.save_debug_info, o.namespace_whitelist,
            o.experimental_io_device)


@case
def dict_outputs_keep_the_order_the_function_built(tf):
    # JAX's pytrees sort dict keys; TF returns them in insertion order (nested too), every call.
    v = tf.Variable(1.0)

    @tf.function
    def f(x):
        return {"b": x + 1.0, "a": x * v, "c": {"z": x, "y": (x, {"q": x, "p": x})}}

    outs = [f(tf.constant(float(i))) for i in range(2)]
    return [(list(o), list(o["c"]), list(o["c"]["y"][1])) for o in outs], outs[1]


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
def tf_print_shapes_and_tuples(tf):
    # A TensorShape prints as TensorShape([...]); a one-element tuple keeps its comma.
    x = tf.constant([1, 2, 3])
    tf.print("@e", x.shape, tf.TensorShape([None, 2]), (3,), (x,), [x, (1, 2)])

    @tf.function
    def f(x):
        tf.print("@f", x.shape, (x,), (1, 2), [x, 1])
        return x

    f(x)
    return []


@case
def namedtuple_and_dict_outputs(tf):
    P = collections.namedtuple("P", "a b")

    @tf.function
    def f(x):
        return {"p": P(x, x * 2), "n": None, "l": [x + 1]}

    return [f(tf.constant(1.0))]


@case
def called_under_an_outer_tape_is_one_op(tf):
    w = tf.Variable(2.0)

    @tf.function
    def f(x):
        print("@trace")
        tf.print("@run")
        w.assign_add(1.0)
        if x > 0:
            y = tf.sin(x) * w
        else:
            y = x * x * w
        return y

    out = []
    for v in (0.7, 0.7, -0.5):
        x = tf.constant(v)
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            y = f(x)
        out += [y, t.gradient(y, x), t.gradient(y, w), w.numpy().item()]
    with tf.GradientTape() as t2:
        t2.watch(x)
        with tf.GradientTape() as t1:
            t1.watch(x)
            y = f(x)
        g = t1.gradient(y, x)
    out += [g, t2.gradient(g, x), f.experimental_get_tracing_count()]
    return out


@case
def leaked_tensor_numpy_raises_attribute_error(tf):
    leak = []

    @tf.function
    def f(x):
        y = x + 1
        leak.append(y)
        return y

    f(tf.constant(1.0))
    try:
        leak[0].numpy()
    except AttributeError:
        return ["AttributeError"]
    return ["no error"]


@case
def tensor_leaked_from_one_function_used_by_another_raises_type_error(tf):
    # TF's function guide, cell 40: the leak is TF's TypeError, not a loop-body error.
    leak = []

    @tf.function
    def leaky(a):
        x = a + 1
        leak.append(x)
        return x

    out = [leaky(tf.constant(1))]

    @tf.function
    def captures(b):
        return b + leak[0]

    try:
        captures(tf.constant(2))
    except TypeError as e:
        out.append("TypeError: " + ("out of scope" if "out of scope" in str(e) else str(e)))
    return out


@case
def variable_arguments_trace_by_spec(tf):
    @tf.function
    def f(v):
        v.assign_add(1.0)
        return v + 1

    a, b = tf.Variable(1.0), tf.Variable(2.0)
    return [f(a), f(b), f(a), a, b, f.experimental_get_tracing_count()]


def _names():
    return [c.__name__ for c in CASES]


@pytest.mark.parametrize("snippet", CASES, ids=_names())
def test_function_snippet_matches_tf(snippet, real_tf, capfd):
    want = outcome(snippet, real_tf, capfd)
    got = outcome(snippet, tapejax, capfd)
    assert got == want


# --- autograph: the loops and branches of TF's function and autograph guides ------------------

AG_CASES: list = []


def ag(fn):
    AG_CASES.append(fn)
    return fn


@ag
def fizzbuzz(tf):
    @tf.function
    def fizzbuzz(n):
        for i in tf.range(1, n + 1):
            if i % 15 == 0:
                tf.print("@FizzBuzz")
            elif i % 3 == 0:
                tf.print("@Fizz")
            elif i % 5 == 0:
                tf.print("@Buzz")
            else:
                tf.print("@", i)

    fizzbuzz(tf.constant(16))
    return [fizzbuzz.experimental_get_tracing_count()]


@ag
def sum_even_with_continue(tf):
    @tf.function
    def sum_even(items):
        s = 0
        for c in items:
            if c % 2 > 0:
                continue
            s += c
        return s

    return [sum_even(tf.constant([10, 12, 15, 20]))]


@ag
def while_tensor_condition(tf):
    # The guide's loop uses tanh, whose last ulp differs between XLA and TF's kernel; halving is exact.
    @tf.function
    def f(x):
        while tf.reduce_sum(x) > 1:
            tf.print("@", x)
            x = x / 2.0 + 0.01
        return x

    return [f(tf.constant([1.0, 2.0]))]


@ag
def python_loop_unrolled_and_python_if(tf):
    @tf.function
    def f(x, n):
        print("@trace")
        for i in range(n):
            x = x * 2.0 + i
        if n > 2:
            print("@python branch")
            x = x - 1.0
        return x

    return [f(tf.constant(1.0), 3), f(tf.constant(2.0), 3), f(tf.constant(1.0), 1)]


@ag
def tensor_if_traces_both_branches(tf):
    @tf.function
    def f(x):
        if x > 0:
            print("@true branch traced")
            y = x * 2.0
        else:
            print("@false branch traced")
            y = x - 1.0
        return y

    return [f(tf.constant(3.0)), f(tf.constant(-3.0))]


f_unordered = tensor_if_traces_both_branches
f_unordered.unordered = True


@ag
def break_in_tensor_loop(tf):
    @tf.function
    def f(n):
        s = tf.constant(0)
        i = tf.constant(0)
        while i < n:
            i += 1
            if i * i > 20:
                break
            s += i
        return s, i

    return [f(tf.constant(100)), f(tf.constant(3))]


@ag
def return_in_branches(tf):
    @tf.function
    def f(x):
        if x > 0:
            return x * 2.0
        elif x < -5:
            return x
        return -x

    return [f(tf.constant(1.0)), f(tf.constant(-10.0)), f(tf.constant(-2.0))]


@ag
def nested_user_function_converted(tf):
    def clip(x):
        if tf.reduce_max(x) > 1.0:
            x = x / tf.reduce_max(x)
        return x

    @tf.function
    def f(x):
        return clip(x) + clip(x * 0.1)

    return [f(tf.constant([1.0, 4.0]))]


@ag
def conditional_expression_and_boolean_ops(tf):
    @tf.function
    def f(x, y):
        z = x * 2.0 if x > y else y * 3.0
        if x > 0 and y > 0:
            z = z + 100.0
        if not (x > 0) or y < 0:
            z = z - 1000.0
        return z

    return [f(tf.constant(2.0), tf.constant(1.0)), f(tf.constant(1.0), tf.constant(2.0)),
            f(tf.constant(-1.0), tf.constant(2.0))]


@ag
def variable_assigns_in_tensor_loop(tf):
    v = tf.Variable(0)

    @tf.function
    def f(n):
        for i in tf.range(n):
            v.assign_add(i)
        return v.read_value()

    return [f(tf.constant(4)), f(tf.constant(3)), v]


@ag
def iterate_rows_of_tensor(tf):
    @tf.function
    def f(m):
        acc = tf.zeros([3])
        for row in m:
            acc = acc + row * row
        return acc

    return [f(tf.reshape(tf.range(12.0), [4, 3]))]


@ag
def while_python_counter_becomes_tensor(tf):
    @tf.function
    def f(x):
        i = 0
        while tf.reduce_sum(x) < 100.0:
            x = x * 2
            i += 1
        return x, i

    return [f(tf.constant([1.0]))]


@ag
def undefined_in_else_branch(tf):
    @tf.function
    def f(x):
        if x > 0:
            y = x * 2
        return y

    return [f(tf.constant(1.0))]


@ag
def dtype_differs_between_branches(tf):
    @tf.function
    def f(x):
        if x > 0:
            y = x * 2
        else:
            y = 1
        return y

    return [f(tf.constant(1.0))]


@ag
def return_inside_tensor_loop(tf):
    @tf.function
    def f(n):
        s = tf.constant(0)
        for i in tf.range(n):
            if i > 3:
                return s
            s += i
        return s

    return [f(tf.constant(10))]


@ag
def loop_variable_changes_dtype(tf):
    @tf.function
    def f(x):
        s = 0
        for i in tf.range(5):
            s += x
        return s

    return [f(tf.constant(1.0))]


@ag
def autograph_false_keeps_python(tf):
    @tf.function(autograph=False)
    def f(x):
        if x > 0:
            return x
        return -x

    return [f(tf.constant(1.0))]


@ag
def do_not_convert_helper(tf):
    @tf.autograph.experimental.do_not_convert
    def helper(x):
        if x > 0:
            return x
        return -x

    @tf.function
    def f(x):
        return helper(x)

    return [f(tf.constant(1.0))]


@ag
def python_list_loop_with_break(tf):
    @tf.function
    def f(x):
        for k in [1.0, 2.0, 3.0, 4.0]:
            if k > 2.5:
                break
            x = x + k
        return x

    return [f(tf.constant(0.0))]


@ag
def gradient_through_converted_control_flow(tf):
    @tf.function
    def f(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = x
            for i in tf.range(3):
                if tf.reduce_sum(y) > 2.0:
                    y = y * x
                else:
                    y = y + x * x
        return y, t.gradient(y, x)

    return [f(tf.constant([1.5])), f(tf.constant([0.5]))]


@ag
def method_with_tensor_if_and_attribute_state(tf):
    class Counter:
        def __init__(self):
            self.v = tf.Variable(0.0)

        @tf.function
        def step(self, x):
            if x > 0:
                self.v.assign_add(x)
            else:
                self.v.assign_sub(1.0)
            return self.v + 0

    c = Counter()
    return [c.step(tf.constant(2.0)), c.step(tf.constant(-2.0)), c.step(tf.constant(3.0)), c.v]


@ag
def gradient_through_while_bounded_by_set_loop_options(tf):
    @tf.function
    def f(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = x
            while tf.reduce_sum(y) < 10.0:
                tf.autograph.experimental.set_loop_options(maximum_iterations=20)
                y = y * x
        return y, t.gradient(y, x)

    return [f(tf.constant(2.0)), f(tf.constant(1.5))]


@ag
def loop_variable_changes_shape(tf):
    @tf.function
    def f(x):
        for i in tf.range(3):
            x = tf.concat([x, x], 0)
        return x

    try:
        f(tf.constant([1.0]))
    except ValueError as e:
        return [str(e).splitlines()[-1].strip()]
    return ["no error"]


@ag
def actor_critic_style_episode_with_break(tf):
    w = tf.Variable([[0.5], [-0.25]])

    @tf.function
    def episode(state, n):
        total = tf.constant(0.0)
        steps = tf.constant(0)
        with tf.GradientTape() as tape:
            for t in tf.range(n):
                tf.autograph.experimental.set_loop_options(maximum_iterations=50)
                action = tf.tanh(tf.matmul(state, w))
                state = state * 0.9 + action * 0.3
                total += tf.reduce_sum(state) * 0.5 ** tf.cast(t, tf.float32)
                steps += 1
                done = tf.reduce_sum(state) > 2.5
                if done:
                    break
        return total, steps, tape.gradient(total, w)

    return [episode(tf.constant([[1.0, 2.0]]), tf.constant(20)), episode(tf.constant([[0.1, 0.2]]), tf.constant(5))]


@ag
def tensor_array_and_nested_loop_variables(tf):
    # The function guide's dynamic_rnn: a TensorArray written in a tf.range loop; plus a loop
    # variable that is a tuple holding a dict, differentiated through from outside.
    @tf.function
    def dynamic_rnn(input_data, initial_state):
        input_data = tf.transpose(input_data, [1, 0, 2])
        states = tf.TensorArray(tf.float32, size=input_data.shape[0])
        state = (initial_state, {"c": tf.ones_like(initial_state)})
        for i in tf.range(input_data.shape[0]):
            h, d = state
            c = d["c"] * 0.5 + input_data[i]
            state = (h + c, {"c": c})
            states = states.write(i, h)
        return tf.transpose(states.stack(), [1, 0, 2]), state[1]["c"]

    x = tf.Variable(tf.reshape(tf.range(24, dtype=tf.float32), [2, 3, 4]) / 10.0)
    with tf.GradientTape() as tape:
        seq, c = dynamic_rnn(x, tf.zeros([2, 4]))
        loss = tf.reduce_sum(seq * seq) + tf.reduce_sum(c)
    return [seq, c, tape.gradient(loss, x)]


@ag
def loop_variable_changes_structure(tf):
    @tf.function
    def f(x):
        s = (x, x)
        for i in tf.range(3):
            s = (s[0],)
        return s

    try:
        f(tf.constant([1.0]))
    except TypeError:
        return ["TypeError"]
    return ["no error"]


@pytest.mark.parametrize("snippet", AG_CASES, ids=[c.__name__ for c in AG_CASES])
def test_autograph_snippet_matches_tf(snippet, real_tf, capfd):
    want = outcome(snippet, real_tf, capfd)
    got = outcome(snippet, tapejax, capfd)
    assert got == want


# --- what one XLA program cannot do: TF's answer (eager fallback) or TF's exception ---------------

DD_CASES: list = []


def dd(fn):
    DD_CASES.append(fn)
    return fn


@dd
def int_and_float_of_a_tensor_are_casts(tf):
    # TF's autograph turns int(t) / float(t) into casts; range(int(n)) is then a tensor loop.
    @tf.function
    def f(x, n):
        y = x * float(x)
        for _ in range(int(n)):
            y = y + 1.0
        return y, float(n), int(x * 2.5)

    return f(tf.constant(2.0), tf.constant(3))


@dd
def boolean_mask_unique_where_give_tfs_values(tf):
    # Data-dependent shapes: TF's graph computes them; tapejax runs the call eagerly (one warning).
    import warnings

    @tf.function
    def f(x):
        m = tf.boolean_mask(x, x > 0)
        u = tf.unique(tf.cast(tf.round(x), tf.int32))[0]
        return m * 2.0, u, tf.cast(tf.where(x > 0), tf.int32)  # int64 in TF: x64 (differences.md)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [f(tf.constant([1.0, -1.0, 2.0, 1.2])), f(tf.constant([-3.0, 5.0, 5.0, -3.0]))]


@dd
def data_dependent_shape_with_variables_and_tape(tf):
    import warnings

    v = tf.Variable([1.0, -2.0, 3.0])

    @tf.function
    def step(x):
        with tf.GradientTape() as t:
            kept = tf.boolean_mask(v * x, v > 0)
            loss = tf.reduce_sum(kept ** 2)
        g = t.gradient(loss, v)
        v.assign_sub(0.1 * g)
        return loss, g

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [step(tf.constant(2.0)), step(tf.constant(1.0)), v]


@dd
def tensor_as_a_list_index_raises_type_error(tf):
    table = [10.0, 20.0, 30.0]

    @tf.function
    def f(i):
        return table[i]

    return f(tf.constant(1))


@dd
def tensor_formatted_as_a_float_raises_type_error(tf):
    @tf.function
    def f(x):
        s = "%f" % x  # noqa: F841, UP031  (the conversion is the point)
        return x

    return f(tf.constant(1.0))


@dd
def numpy_call_on_a_tensor_raises_not_implemented(tf):
    @tf.function
    def f(x):
        return x + np.sum(x)

    return f(tf.constant(2.0))


@dd
def tensor_kept_from_a_loop_body_is_inaccessible(tf):
    @tf.function
    def f(n):
        kept = []
        i = tf.constant(0)
        while i < n:
            kept.append(i)
            i += 1
        return tf.stack(kept)

    return f(tf.constant(3))


@dd
def lazy_build_then_data_dependent_shape(tf):
    # A Keras-style lazy build on the first call, then an op with a data-dependent shape: the
    # variable keeps the initial value the first call gave it, and the call runs (eagerly).
    import warnings

    class M(tf.Module):
        def __init__(self):
            self.w = None

        @tf.function
        def __call__(self, x):
            if self.w is None:
                self.w = tf.Variable(tf.ones([3]) * 2.0 + x)
            self.w.assign_add(tf.ones([3]))
            return tf.reduce_sum(tf.boolean_mask(self.w * x, x > 0))

    m = M()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [m(tf.constant([1.0, -1.0, 2.0])), m(tf.constant([1.0, 1.0, -2.0])), m.w]


@dd
def checks_inside_a_function_raise_when_the_call_runs(tf):
    # TF's graph runs CheckNumerics / Assert with the call: InvalidArgumentError then (a traced
    # value is not known at trace time), and the call's assigns have run.
    v = tf.Variable(0.0)

    @tf.function
    def f(x):
        v.assign_add(1.0)
        y = tf.debugging.check_numerics(tf.math.log(x), "lg")
        v.assign_add(10.0)
        return y

    @tf.function
    def g(x, y):
        tf.debugging.assert_equal(x, y, message="mine")
        tf.debugging.assert_positive(x)
        tf.debugging.Assert(tf.reduce_all(x < 5), [x])
        return x + y

    @tf.function
    def h(x):
        def body(i, s):
            tf.debugging.check_numerics(s, "in the loop")
            return i + 1, s * x

        return tf.while_loop(lambda i, s: i < 3, body, (0, x))[1]

    out = []
    for fn, args in [(f, (tf.constant(-1.0),)), (f, (tf.constant(1.0),)), (g, (tf.constant([1, 2]), tf.constant([1, 3]))),
                     (g, (tf.constant([1, 2]), tf.constant([1, 2]))), (g, (tf.constant([-1]), tf.constant([-1]))),
                     (g, (tf.constant([7]), tf.constant([7]))), (h, (tf.constant(1e30),)), (h, (tf.constant(2.0),))]:
        try:
            out.append(fn(*args))
        except tf.errors.InvalidArgumentError as e:
            text = str(e)
            out.append(("InvalidArgumentError", "Tensor had NaN" in text, "Tensor had Inf" in text,
                        "assertion failed" in text, "mine" in text, "x > 0" in text))
        out.append(v)
    return out


@pytest.mark.parametrize("snippet", DD_CASES, ids=[c.__name__ for c in DD_CASES])
def test_untraceable_snippet_matches_tf(snippet, real_tf, capfd):
    want = outcome(snippet, real_tf, capfd)
    got = outcome(snippet, tapejax, capfd)
    assert got == want


# --- concrete functions, signatures, flags ----------------------------------------------------

API_CASES: list = []


def api(fn):
    API_CASES.append(fn)
    return fn


def _spec(s):
    return (tuple(s.shape.as_list()), s.dtype.name, s.name)


@api
def concrete_function_signature_and_call(tf):
    @tf.function
    def g(x):
        return {"y": x * 2.0}

    cf = g.get_concrete_function(tf.TensorSpec([3], tf.float32))
    args, kwargs = cf.structured_input_signature
    out = [[_spec(a) for a in args], kwargs, sorted(cf.structured_outputs), g.experimental_get_tracing_count()]
    out.append(cf(tf.constant([1.0, 2.0, 3.0]))["y"])
    out.append(g.experimental_get_tracing_count())
    try:
        cf(tf.constant([1, 2, 3]))
    except Exception as e:  # noqa: BLE001
        out.append(type(e).__name__)
    return out


@api
def concrete_function_output_dtypes_and_shapes(tf):
    @tf.function
    def g(x):
        return (x, {"a": x * 2.0}), None

    cf = g.get_concrete_function(tf.TensorSpec([2], tf.float32))
    return [repr(cf.output_dtypes), repr(cf.output_shapes)]


@api
def concrete_function_from_tensor_names_params(tf):
    h = tf.function(lambda x: x + 1)
    cf = h.get_concrete_function(tf.constant([1, 2]))
    args, _ = cf.structured_input_signature
    return [[_spec(a) for a in args], cf(tf.constant([5, 6]))]


@api
def concrete_function_from_input_signature(tf):
    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def k(x):
        return x * 3.0

    cf = k.get_concrete_function()
    return [[_spec(a) for a in cf.structured_input_signature[0]], cf(tf.constant([1.0, 2.0])),
            k.experimental_get_tracing_count()]


@api
def reduce_retracing_counts(tf):
    @tf.function(reduce_retracing=True)
    def f(x):
        return x * 2

    for n in [1, 2, 3, 4]:
        f(tf.ones([n]))
    f(tf.ones([2, 2]))
    f(tf.ones([3, 3]))
    f(tf.ones([3, 4]))
    return [f.experimental_get_tracing_count(), f(tf.ones([2, 5]))]


@api
def jit_compile_and_python_function(tf):
    def body(x):
        return x + 1

    j = tf.function(body, jit_compile=True)
    return [j(tf.constant(1.0)), j.python_function is body]


@api
def run_functions_eagerly(tf):
    calls = []

    @tf.function
    def f(x):
        calls.append(1)
        return x.numpy() * 2

    tf.config.run_functions_eagerly(True)
    try:
        r = [tf.config.functions_run_eagerly(), f(tf.constant(2.0)), f(tf.constant(3.0))]
    finally:
        tf.config.run_functions_eagerly(False)
    return r + [len(calls), tf.config.functions_run_eagerly()]


@pytest.mark.parametrize("snippet", API_CASES, ids=[c.__name__ for c in API_CASES])
def test_function_api_matches_tf(snippet, real_tf, capfd):
    want = outcome(snippet, real_tf, capfd)
    got = outcome(snippet, tapejax, capfd)
    assert got == want



def test_optimizer_built_inside_the_step_raises_as_in_tf():
    # TF's side builds tf.keras's SGD: it runs in a subprocess with TF's own Keras backend.
    import _tf_keras_jobs
    from _tf_side import TFError, run_tf_jobs

    theirs = run_tf_jobs(_tf_keras_jobs.__file__, [("opt", "optimizer_built_inside_the_step", ())])["opt"]
    assert isinstance(theirs, TFError) and theirs.cls == "ValueError", theirs
    with pytest.raises(ValueError):
        _tf_keras_jobs.optimizer_built_inside_the_step(tapejax)
