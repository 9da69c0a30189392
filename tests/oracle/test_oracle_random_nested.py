"""Differential oracle for NESTED / higher-order differentiation (issue 14): random programs run on
real TensorFlow 2.21 (fixture ``real_tf``) and on tapejax must agree on values, None-ness,
structure and exception class names.

Hypothesis draws one program as plain data (so a shrunk counterexample prints readably):

* an inner op sequence over a constant ``x`` (2, 3) and a Variable ``v`` (3,): smooth ops, kinks
  (abs, relu, relu6, maximum), non-differentiable ops (round, floor, ceil, sign, stop_gradient,
  zeros_like, ones_like, ``a // 1.0``, an op under ``tape.stop_recording()``), reductions with
  keepdims, matmuls with fixed operands, and ``tf.custom_gradient`` ops (a custom grad, a grad
  returning None for one of two inputs, a grad_fn that reads ``dy.numpy()``, a constant output
  with a non-zero grad);
* the nesting structure: tape in tape, one persistent tape asked inside its own block, a
  ForwardAccumulator around a tape (forward-over-reverse), a tape around an accumulator
  (reverse-over-forward), two nested accumulators, three tapes deep;
* the inner call's sources, further ops on the inner derivative, and the outer call: gradient or
  jacobian (or jvp) with respect to x, v, any intermediate (outputs of non-differentiable ops and
  the inner derivative included) or a list mixing them, with unconnected_gradients none / zero.

The default test runs a few dozen programs; the ``slow`` one runs ``TAPEJAX_NESTED_EXAMPLES``
(default 3000) and prints how many programs it ran.
"""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapejax

# Same comparison (tolerances, None-ness, structure) as the first-order
# random-program oracle; tests/oracle is on sys.path (rootdir-relative imports, no __init__.py).
from test_oracle_random_programs import assert_same, to_numpy

pytestmark = pytest.mark.oracle

W33 = np.array([[0.5, -1.0, 0.25], [1.5, 0.3, -0.7], [-0.2, 0.8, 1.1]], np.float32)
M23 = np.array([[1.0, -0.5, 0.2], [0.4, 0.9, -1.3]], np.float32)
TAN_X = np.array([[1.0, -0.5, 2.0], [0.3, 1.0, -1.0]], np.float32)
TAN_V = np.array([0.5, 1.0, -2.0], np.float32)

_CUSTOM = {}


def customs(tf):
    """The custom_gradient ops, built once per framework."""
    if tf.__name__ in _CUSTOM:
        return _CUSTOM[tf.__name__]

    @tf.custom_gradient
    def cg_sin3(a):  # sin with gradient 3*cos*dy (issue families 4, 5)
        def grad(dy):
            return 3.0 * tf.cos(a) * dy

        return tf.sin(a), grad

    @tf.custom_gradient
    def cg_mul_none(a, b):  # grad returns None for its second input (family 7)
        def grad(dz):
            return dz * b, None

        return a * b, grad

    @tf.custom_gradient
    def cg_eager(a):  # grad_fn inspects concrete values, as eager TF code may (family 8)
        def grad(dy):
            s = 2.0 if np.all(np.isfinite(dy.numpy())) else 0.0
            return dy * s

        return a * 2.0, grad

    @tf.custom_gradient
    def cg_const(a):  # output does not depend on a through its ops; grad is 3*dy (family 5)
        def grad(dy):
            return 3.0 * dy

        return tf.stop_gradient(a) * 2.0, grad

    _CUSTOM[tf.__name__] = d = {"cg_sin3": cg_sin3, "cg_mul_none": cg_mul_none, "cg_eager": cg_eager,
                                "cg_const": cg_const}
    return d


def _t(tf, a):
    """A tensor of shape (2, 3) (custom ops and matmuls get tensors, not variables)."""
    return a + tf.zeros((2, 3))


def _stop_rec(tf, a, ctx):
    tape = ctx["tape"]
    if tape is None:
        return tf.sin(a)
    with tape.stop_recording():
        return tf.sin(a)


UNARY = {
    "sin": lambda tf, a, c: tf.sin(a),
    "tanh": lambda tf, a, c: tf.tanh(a),
    "square": lambda tf, a, c: tf.square(a),
    "sigmoid": lambda tf, a, c: tf.sigmoid(a),
    "relu": lambda tf, a, c: tf.nn.relu(a),
    "relu6": lambda tf, a, c: tf.nn.relu6(a * 4.0),
    "abs": lambda tf, a, c: tf.abs(a),
    "exp": lambda tf, a, c: tf.exp(a),
    "neg": lambda tf, a, c: -a,
    "scale": lambda tf, a, c: a * 1.5,
    "pow3": lambda tf, a, c: a**3,
    "sum_keep0": lambda tf, a, c: tf.reduce_sum(a, axis=0, keepdims=True),
    "sum_keep_last": lambda tf, a, c: tf.reduce_sum(a, axis=-1, keepdims=True),
    "mean_keep": lambda tf, a, c: tf.reduce_mean(a, keepdims=True),
    "sum_all": lambda tf, a, c: tf.reduce_sum(a),
    "round": lambda tf, a, c: tf.round(a),
    "floor": lambda tf, a, c: tf.floor(a),
    "ceil": lambda tf, a, c: tf.math.ceil(a),
    "sign": lambda tf, a, c: tf.sign(a),
    "stop": lambda tf, a, c: tf.stop_gradient(a),
    "zeros_like": lambda tf, a, c: tf.zeros_like(a),
    "ones_like": lambda tf, a, c: tf.ones_like(a),
    "floordiv": lambda tf, a, c: a // 1.0,
    "stop_recording": _stop_rec,
    "matmul_w": lambda tf, a, c: tf.matmul(_t(tf, a), tf.constant(W33)),
    "cg_sin3": lambda tf, a, c: customs(tf)["cg_sin3"](_t(tf, a)),
    "cg_eager": lambda tf, a, c: customs(tf)["cg_eager"](_t(tf, a)),
    "cg_const": lambda tf, a, c: customs(tf)["cg_const"](_t(tf, a)),
    "cg_self_none": lambda tf, a, c: (lambda t: customs(tf)["cg_mul_none"](t, t))(_t(tf, a)),  # f(a, a)
}
BINARY = {
    "add": lambda tf, a, b: a + b,
    "mul": lambda tf, a, b: a * b,
    "sub": lambda tf, a, b: a - b,
    "div": lambda tf, a, b: a / (1.0 + b * b),
    "maximum": lambda tf, a, b: tf.maximum(a, b),
    "matmul_bt": lambda tf, a, b: tf.matmul(tf.matmul(_t(tf, a), _t(tf, b), transpose_b=True), tf.constant(M23)),
    "cg_mul_none": lambda tf, a, b: customs(tf)["cg_mul_none"](_t(tf, a), _t(tf, b)),
}
CUSTOM_OPS = {"cg_sin3", "cg_eager", "cg_const", "cg_self_none", "cg_mul_none"}

# Indices count back from the newest value (0 = newest), so ops tend to chain.
op_step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(sorted(UNARY)), st.integers(0, 8)),
    st.tuples(st.just("b"), st.sampled_from(sorted(BINARY)), st.integers(0, 8), st.integers(0, 8)),
)
# Values with kinks and ties (0 for abs/relu/sign, .5 for round) as well as generic floats.
element = st.one_of(st.sampled_from([0.0, 0.5, -0.5, 1.0, -1.5, 2.0, 0.3]), st.floats(-2, 2, width=32))
# Indices into the value pool: 0 is x, 1 is v, larger ones intermediates (mod the pool size).
index_list = st.one_of(st.just([0]), st.just([1]), st.just([0, 1]), st.lists(st.integers(0, 15), min_size=1, max_size=3))

STRUCTURES = ["tape_in_tape", "persistent_inside", "fwd_over_rev", "rev_over_fwd", "fwd_fwd", "three_tapes"]

nested_program = st.fixed_dictionaries(
    {
        "structure": st.sampled_from(STRUCTURES),
        "x": st.lists(element, min_size=6, max_size=6),
        "v": st.lists(element, min_size=3, max_size=3),
        "steps": st.lists(op_step, min_size=1, max_size=6),
        "post": st.lists(op_step, min_size=0, max_size=3),
        "inner_src": index_list,
        "inner_list": st.booleans(),
        "inner_uc": st.sampled_from(["none", "zero"]),
        "inner_persistent": st.booleans(),
        "grad_inside": st.booleans(),  # inner gradient taken inside the (persistent) inner block
        "watch_outer_x": st.booleans(),
        "outer_persistent": st.booleans(),
        "primals": st.sampled_from(["x", "v", "xv"]),
        "inner_primals": st.sampled_from(["x", "v", "xv"]),
        "jvp_after": st.booleans(),  # fwd_fwd: outer.jvp(inner.jvp(y)) after both blocks
        "call": st.sampled_from(["gradient", "gradient", "gradient", "jacobian"]),
        "srcs": index_list,
        "src_list": st.booleans(),
        "uc": st.sampled_from(["none", "zero"]),
        "jvp_extra": st.none() | st.integers(0, 15),  # jvp of [target, vals[k]]
    }
)


def run(tf, p):
    """Execute nested program ``p`` with framework ``tf``: {"mid": inner derivatives, "out": outer result}."""
    x = tf.constant(np.array(p["x"], np.float32).reshape(2, 3))
    v = tf.Variable(np.array(p["v"], np.float32))
    vals = [x, v]
    mid = []
    ctx = {"tape": None}

    def steps(seq):
        for s in seq:
            a = vals[-1 - s[2] % len(vals)]
            if s[0] == "u":
                vals.append(UNARY[s[1]](tf, a, ctx))
            else:
                vals.append(BINARY[s[1]](tf, a, vals[-1 - s[3] % len(vals)]))

    def pick(idx, as_list):
        chosen = [vals[i % len(vals)] for i in idx]
        return chosen if as_list or len(chosen) > 1 else chosen[0]

    def keep(r):
        """Record an inner derivative and add its tensors to the value pool."""
        mid.append(r)
        for e in r if isinstance(r, list) else [r]:
            if e is not None:
                vals.append(e)

    def inner_grad(tape, src=None):
        src = pick(p["inner_src"], p["inner_list"]) if src is None else src
        keep(tape.gradient(vals[-1], src, unconnected_gradients=p["inner_uc"]))

    def outer_tape_call(tape):
        target, srcs = vals[-1], pick(p["srcs"], p["src_list"])
        if p["call"] == "jacobian":
            return tape.jacobian(target, srcs, unconnected_gradients=p["uc"])
        return tape.gradient(target, srcs, unconnected_gradients=p["uc"])

    def outer_jvp(acc, target=None):
        target = vals[-1] if target is None else target
        if p["jvp_extra"] is not None:
            target = [target, vals[p["jvp_extra"] % len(vals)]]
        return acc.jvp(target, unconnected_gradients=p["uc"])

    def fa(which, tangent_scale=1.0):
        primals = {"x": x, "v": v, "xv": [x, v]}[which]
        tangents = {"x": TAN_X * tangent_scale, "v": TAN_V * tangent_scale,
                    "xv": [TAN_X * tangent_scale, TAN_V * tangent_scale]}[which]
        tangents = [tf.constant(t) for t in tangents] if isinstance(tangents, list) else tf.constant(tangents)
        return tf.autodiff.ForwardAccumulator(primals, tangents)

    s = p["structure"]
    if s == "tape_in_tape":
        with tf.GradientTape(persistent=p["outer_persistent"]) as outer:
            if p["watch_outer_x"]:
                outer.watch(x)
            with tf.GradientTape(persistent=p["inner_persistent"]) as inner:
                inner.watch(x)
                ctx["tape"] = inner
                steps(p["steps"])
                if p["inner_persistent"] and p["grad_inside"]:
                    inner_grad(inner)
            ctx["tape"] = outer
            if not (p["inner_persistent"] and p["grad_inside"]):
                inner_grad(inner)
            steps(p["post"])
        out = outer_tape_call(outer)
    elif s == "persistent_inside":
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            ctx["tape"] = t
            steps(p["steps"])
            inner_grad(t)  # recorded by t itself: gradients of gradient results
            steps(p["post"])
        out = outer_tape_call(t)
    elif s == "fwd_over_rev":
        with fa(p["primals"]) as acc:
            with tf.GradientTape(persistent=p["inner_persistent"]) as tape:
                tape.watch(x)
                ctx["tape"] = tape
                steps(p["steps"])
            ctx["tape"] = None
            inner_grad(tape)
            steps(p["post"])
        out = outer_jvp(acc)
    elif s == "rev_over_fwd":
        with tf.GradientTape(persistent=p["outer_persistent"]) as t:
            t.watch(x)
            ctx["tape"] = t
            with fa(p["primals"]) as acc:
                steps(p["steps"])
            keep(acc.jvp(vals[-1], unconnected_gradients=p["inner_uc"]))
            steps(p["post"])
        out = outer_tape_call(t)
    elif s == "fwd_fwd":
        with fa(p["primals"], 0.5) as outer:
            with fa(p["inner_primals"]) as inner:
                steps(p["steps"])
            if p["jvp_after"]:
                y = vals[-1]
            else:
                keep(inner.jvp(vals[-1], unconnected_gradients=p["inner_uc"]))
                steps(p["post"])
        if p["jvp_after"]:
            keep(inner.jvp(y, unconnected_gradients=p["inner_uc"]))
        out = outer_jvp(outer)
    else:  # three_tapes: third derivatives
        with tf.GradientTape(persistent=p["outer_persistent"]) as t1:
            t1.watch(x)
            with tf.GradientTape() as t2:
                t2.watch(x)
                with tf.GradientTape(persistent=p["inner_persistent"]) as t3:
                    t3.watch(x)
                    ctx["tape"] = t3
                    steps(p["steps"])
                ctx["tape"] = t2
                inner_grad(t3)
            ctx["tape"] = t1
            inner_grad(t2, x)
            steps(p["post"])
        out = outer_tape_call(t1)
    return {"mid": mid, "out": out}


def outcome(tf, p):
    try:
        return "ok", to_numpy(run(tf, p))
    except Exception as e:  # noqa: BLE001 - the exception class name is what we compare
        if type(e).__name__ == "ValueError" and str(e).startswith("Internal error: Tried to take gradients"):
            # TF 2.21 bug (nested accumulators, a Variable primal, a custom_gradient): not a reference.
            return "tf_internal_error", str(e)[:80]
        return "error", type(e).__name__


def check_program(tf_real, p):
    ref = outcome(tf_real, p)
    if ref[0] == "tf_internal_error":
        return ref
    got = outcome(tapejax, p)
    from tapejax._core import _recorder as _core

    leaked = list(_core.state.recording)
    _core.state.recording.clear()
    assert not leaked, "tapejax left a tape recording on the thread's stack"
    if ref[0] != got[0]:
        raise AssertionError(f"TF gave {ref}, tapejax gave {got}")
    if ref[0] == "error":
        assert ref[1] == got[1], f"exception class differs: TF {ref[1]}, tapejax {got[1]}"
        return ref
    assert_same(ref[1]["mid"], got[1]["mid"], "mid")
    assert_same(ref[1]["out"], got[1]["out"], "out")
    return ref


@settings(max_examples=40)
@given(p=nested_program)
def test_random_nested_programs_agree_with_tensorflow(real_tf, p):
    check_program(real_tf, p)


@pytest.mark.slow
def test_random_nested_programs_big_run(real_tf, capsys):
    """``TAPEJAX_NESTED_EXAMPLES`` programs (default 3000; enough to find a 1-in-200 bug with
    probability 1 - e^-15). Every program runs (a disagreement is collected, not shrunk), then
    the test fails listing each disagreeing program; it prints how many ran."""
    n = int(os.environ.get("TAPEJAX_NESTED_EXAMPLES", "3000"))
    count = {"run": 0, "tf_raised": 0}
    failures: list = []

    @settings(max_examples=n, database=None)
    @given(p=nested_program)
    def big(p):
        count["run"] += 1
        try:
            ref = check_program(real_tf, p)
        except AssertionError as e:
            failures.append((p, " ".join(str(e).split())[:600]))
            return
        count["tf_raised"] += ref[0] == "error"

    big()
    with capsys.disabled():
        print(f"\n[nested oracle] {count['run']} random nested programs run (max_examples={n}; TF raised in "
              f"{count['tf_raised']}); {len(failures)} disagreed")
        for p, msg in failures:
            print(f"  {msg}\n    program: {p!r}")
    assert not failures, f"{len(failures)} of {count['run']} random nested programs disagree with TF (listed above)"


def test_generator_reaches_every_structure(real_tf):
    """A fixed program per structure, so each one runs even with few examples (issue-14 shapes:
    gradient w.r.t. an inner intermediate, abs kink, custom gradient, non-differentiable op output)."""
    base = {"x": [0.0, 0.5, -0.5, 1.0, -1.5, 2.0], "v": [0.3, -1.0, 0.5],
            "steps": [("b", "mul", 0, 1), ("u", "sin", 0), ("u", "abs", 0), ("b", "mul", 0, 3)], "post": [],
            "inner_src": [0], "inner_list": False, "inner_uc": "zero", "inner_persistent": True, "grad_inside": False,
            "watch_outer_x": True, "outer_persistent": True, "primals": "x", "inner_primals": "x",
            "jvp_after": True, "call": "gradient", "srcs": [0, 3], "src_list": True, "uc": "none", "jvp_extra": None}
    for s in STRUCTURES:
        p = dict(base, structure=s)
        ref = check_program(real_tf, p)
        assert ref[0] == "ok", (s, ref)
