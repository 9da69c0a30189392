"""Bad input against real TF: the same call on both, the same exception type where TF's type is
meaningful; where TF's is an accident of its internals (an AttributeError), TF is pinned to that
accident and tapejax to the clear TypeError documented in compat_docs/differences.md.
"""

from __future__ import annotations

import numpy as np
import pytest

import tapejax as tj


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        return e
    return None


def _name(e) -> str | None:
    return None if e is None else type(e).__name__


def _both(real_tf, case, *args):
    """Run ``case(lib, *args)`` on real TF and on tapejax; return both exceptions (or None)."""
    return _raised(lambda: case(real_tf, *args)), _raised(lambda: case(tj, *args))


def _same_type(real_tf, case, *args) -> None:
    e_tf, e_tj = _both(real_tf, case, *args)
    assert e_tf is not None, "TF accepted the call"
    assert _name(e_tj) == _name(e_tf), f"TF raised {_name(e_tf)}: {e_tf}; tapejax raised {_name(e_tj)}: {e_tj}"


def _persistent_square(lib):
    x = lib.constant([1.0, 2.0, 3.0])
    with lib.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
    return g, x, y


# --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [1.0, 3, "abc", np.array([1.0, 2.0]), None, [1.0]], ids=repr)
def test_watch_non_tensor(real_tf, bad):
    def case(lib, bad):
        with lib.GradientTape() as g:
            g.watch(bad)

    _same_type(real_tf, case, bad)  # ValueError


@pytest.mark.parametrize("role", ["target", "source"])
@pytest.mark.parametrize("bad", [None, "abc"], ids=repr)
def test_none_or_string_target_or_source(real_tf, role, bad):
    def case(lib, role, bad):
        g, x, y = _persistent_square(lib)
        g.gradient(bad, x) if role == "target" else g.gradient(y, bad)

    _same_type(real_tf, case, role, bad)  # TypeError


@pytest.mark.parametrize("role", ["target", "source", "nested target", "nested source"])
@pytest.mark.parametrize("bad", [3.0, np.array(1.0)], ids=repr)
def test_number_or_array_target_or_source_is_a_clear_type_error(real_tf, role, bad):
    def case(lib, role, bad):
        g, x, y = _persistent_square(lib)
        args = {"target": (bad, x), "source": (y, bad), "nested target": ([y, bad], x),
                "nested source": (y, [x, bad])}[role]
        g.gradient(*args)

    e_tf, e_tj = _both(real_tf, case, role, bad)
    assert isinstance(e_tf, AttributeError)  # TF: an accident of its internals
    assert isinstance(e_tj, TypeError) and "must be tf.Tensor or tf.Variable" in str(e_tj)


@pytest.mark.parametrize("shape", [(2,), (3, 1), (2, 3)])
def test_mismatched_output_gradient_shape(real_tf, shape):
    def case(lib, shape):
        g, x, y = _persistent_square(lib)
        g.gradient(y, x, output_gradients=lib.ones(shape))

    _same_type(real_tf, case, shape)  # InvalidArgumentError


def test_output_gradient_dtype_mismatch(real_tf):
    def case(lib):
        g, x, y = _persistent_square(lib)
        g.gradient(y, x, output_gradients=lib.ones(3, lib.float16))

    _same_type(real_tf, case)  # InvalidArgumentError


@pytest.mark.parametrize("og", [[None], (None,)], ids=repr)
def test_none_output_gradient(real_tf, og):
    def case(lib, og):
        g, x, y = _persistent_square(lib)
        g.gradient([y], x, output_gradients=og)

    _same_type(real_tf, case, og)  # ValueError


def test_broadcast_output_gradient_values_agree(real_tf):
    results = []
    for lib in (real_tf, tj):
        g, x, y = _persistent_square(lib)
        results.append(g.gradient(y, x, output_gradients=lib.constant([2.0])).numpy())
    np.testing.assert_array_equal(results[0], results[1])


def test_batch_jacobian_mismatched_batch_dims(real_tf):
    def case(lib):
        x = lib.ones((2, 2))
        with lib.GradientTape(persistent=True) as g:
            g.watch(x)
            y = lib.reduce_sum(x) * lib.ones((4, 1))
        g.batch_jacobian(y, x)

    e_tf, e_tj = _both(real_tf, case)
    assert _name(e_tj) == _name(e_tf) == "ValueError"
    assert str(e_tj) == str(e_tf)


def test_batch_jacobian_rank_1(real_tf):
    def case(lib):
        x = lib.constant([1.0, 2.0])
        with lib.GradientTape(persistent=True) as g:
            g.watch(x)
            y = x * x
        g.batch_jacobian(y, x)

    _same_type(real_tf, case)  # ValueError


@pytest.mark.parametrize("state", ["never entered", "exited", "spent", "nested in itself"])
def test_stop_recording_on_a_tape_that_is_not_recording(real_tf, state):
    def case(lib, state):
        x = lib.constant(1.0)
        g = lib.GradientTape()
        if state == "never entered":
            with g.stop_recording():
                pass
        elif state == "exited":
            with g:
                g.watch(x)
            with g.stop_recording():
                pass
        elif state == "spent":
            with g:
                g.watch(x)
                y = x * x
            g.gradient(y, x)
            with g.stop_recording():
                pass
        else:
            with g:
                with g.stop_recording():
                    with g.stop_recording():
                        pass

    _same_type(real_tf, case, state)  # RuntimeError / ValueError / RuntimeError / ValueError


def test_gradient_twice_on_a_non_persistent_tape(real_tf):
    def case(lib):
        x = lib.constant(3.0)
        with lib.GradientTape() as g:
            g.watch(x)
            y = x * x
        g.gradient(y, x)
        g.gradient(y, x)

    _same_type(real_tf, case)  # RuntimeError


def test_re_entering_an_active_tape(real_tf):
    def case(lib):
        with lib.GradientTape() as g:
            with g:
                pass

    e_tf, e_tj = _both(real_tf, case)
    assert _name(e_tj) == _name(e_tf) == "ValueError"
    assert str(e_tj) == str(e_tf)


@pytest.mark.parametrize("bad", ["ZERO", "None", "foo", None, 0], ids=repr)
def test_unknown_unconnected_gradients(real_tf, bad):
    def case(lib, bad):
        g, x, y = _persistent_square(lib)
        g.gradient(y, x, unconnected_gradients=bad)

    e_tf, e_tj = _both(real_tf, case, bad)
    assert _name(e_tj) == _name(e_tf) == "ValueError"
    assert str(e_tj).startswith(str(e_tf))  # TF's text, then what to use instead


def test_reset_outside_the_block(real_tf):
    def case(lib):
        lib.GradientTape().reset()

    _same_type(real_tf, case)  # ValueError


@pytest.mark.parametrize(
    "value_kind",
    ["longer list", "scalar", "int tensor", "float16 tensor", "string"],
)
@pytest.mark.parametrize("op", ["assign", "assign_add", "assign_sub"])
def test_mismatched_assign(real_tf, value_kind, op):
    def case(lib, value_kind, op):
        v = lib.Variable([1.0, 2.0])
        value = {
            "longer list": [1.0, 2.0, 3.0],
            "scalar": 1.0,
            "int tensor": lib.constant([1, 2]),
            "float16 tensor": lib.constant([1.0, 2.0], lib.float16),
            "string": "a",
        }[value_kind]
        getattr(v, op)(value)

    # ValueError from assign's check, InvalidArgumentError from the AssignAdd/Sub kernels (shapes),
    # ValueError for a dtype, TypeError for a string.
    _same_type(real_tf, case, value_kind, op)


# An int variable given to an optimizer: tests/oracle/test_oracle_keras.py (TF's tf.keras runs in a
# subprocess there: this process's keras is the JAX one).


# --------------------------------------------------------------------------
# NaN and Inf propagate identically.


@pytest.mark.parametrize(
    "name",
    ["x*x", "exp", "sum x*x", "sqrt at 0", "log at 0", "1/x at 0", "x/x at 0", "norm at 0"],
)
def test_nan_and_inf_gradients_match_tf(real_tf, name):
    def grad(lib):
        if name.endswith("at 0"):
            x = lib.constant([0.0, 0.0]) if name == "norm at 0" else lib.constant(0.0)
        else:
            x = lib.constant([np.nan, np.inf, -np.inf, 1.0])
        with lib.GradientTape() as g:
            g.watch(x)
            y = {
                "x*x": lambda: x * x,
                "exp": lambda: lib.exp(x),
                "sum x*x": lambda: lib.reduce_sum(x * x),
                "sqrt at 0": lambda: lib.sqrt(x),
                "log at 0": lambda: lib.math.log(x),
                "1/x at 0": lambda: 1.0 / x,
                "x/x at 0": lambda: x / x,
                "norm at 0": lambda: lib.sqrt(lib.reduce_sum(x * x)),
            }[name]()
        return g.gradient(y, x).numpy()

    np.testing.assert_array_equal(grad(tj), grad(real_tf))


@pytest.mark.parametrize("shape", [[7, -1], [0, -1], [7, 3]], ids=str)
def test_reshape_size_mismatch_message(real_tf, shape):
    # TF's guide (tensor.ipynb) prints this message: with a -1 TF says "requires a multiple of".
    e_tf, e_tj = _both(real_tf, lambda lib: lib.reshape(lib.range(30), shape))
    assert _name(e_tj) == _name(e_tf) == "InvalidArgumentError"
    assert str(e_tf).split("}}")[-1].strip() == str(e_tj)
