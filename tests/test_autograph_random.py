"""Random nested if/while/for programs over tensors: converted and compiled by tapejax.function
vs the same Python run eagerly (issue 18). A disagreement prints the program."""

import warnings

import numpy as np
import pytest

import tapejax as tf
from _autograph_gen import make

ARGS = [
    (0.3, -0.2, 3, [0.5, -1.0, 2.0], 1),
    (-1.2, 0.7, 2, [1.0, 0.25, -0.5], 3),
    (0.9, 1.1, 0, [0.1, 0.2, 0.3], 0),
]


def _check(seed: int) -> None:
    src, prog = make(seed, tf)
    compiled = tf.function(prog)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        _compare(seed, src, prog, compiled)
    # A call that needs values for a shape (boolean_mask, unique) runs eagerly, with one warning
    # for the function, naming the generated program's line; every other program compiles.
    # (A program whose data-dependent line sits under a Python `if k > ...` that no call takes
    # compiles: hence "at most".)
    fell_back = [w for w in rec if issubclass(w.category, tf.autograph.AutoGraphWarning)]
    may_need_eager = "boolean_mask" in src or "tf.unique" in src
    assert len(fell_back) <= (1 if may_need_eager else 0), f"seed {seed}:\n{src}\n{[str(w.message) for w in rec]}"
    for w in fell_back:
        assert w.filename == f"<autograph-random-{seed}>", w.filename
        assert "boolean_mask" in str(w.message) or "unique" in str(w.message), str(w.message)


def _outcome(fn, args, acc):
    try:
        return fn(*args, acc)
    except tf.errors.InvalidArgumentError as e:
        return e


def _compare(seed, src, prog, compiled) -> None:
    for a, b, n, v, k in ARGS:
        args = (tf.constant(a), tf.constant(b), tf.constant(n), tf.constant(v), k)
        acc_e, acc_c = tf.Variable(0.25), tf.Variable(0.25)
        want, got = _outcome(prog, args, acc_e), _outcome(compiled, args, acc_c)
        # A failed tf.debugging check raises InvalidArgumentError eagerly and compiled alike (when
        # the compiled call returns; its message is the check's). Its state is then TF's (the
        # whole program's assigns, where eager Python stopped at the check): not compared.
        if isinstance(want, Exception) or isinstance(got, Exception):
            assert type(got) is type(want) is tf.errors.InvalidArgumentError, f"seed {seed}:\n{src}\n{got!r} != {want!r}"
            w, g = (str(e).split(" [Op:")[0].splitlines()[0] for e in (want, got))
            if "Tensor had" in w:
                assert w == g, f"seed {seed}:\n{src}\n{g} != {w}"
            else:  # TF's eager and graph assert messages differ in form; both name the condition.
                # (With a message= the first line is the message: look at the whole text.)
                assert "did not hold" in str(want) and "did not hold" in str(got), f"seed {seed}:\n{src}\n{got} / {want}"
            continue
        assert np.allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5), f"seed {seed}:\n{src}\n{got} != {want}"
        assert np.allclose(acc_c.numpy(), acc_e.numpy(), rtol=1e-4, atol=1e-5), f"seed {seed} (variable):\n{src}"


@pytest.mark.parametrize("seed", range(12))
def test_random_autograph_program(seed):
    _check(seed)


@pytest.mark.slow
def test_random_autograph_programs_many():
    for seed in range(12, 1012):
        _check(seed)
