"""Random nested if/while/for programs over tensors: converted and compiled by tapejax.function
vs the same Python run eagerly (issue 18). A disagreement prints the program."""

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
    for a, b, n, v, k in ARGS:
        args = (tf.constant(a), tf.constant(b), tf.constant(n), tf.constant(v), k)
        acc_e, acc_c = tf.Variable(0.25), tf.Variable(0.25)
        want = prog(*args, acc_e)
        got = compiled(*args, acc_c)
        assert np.allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5), f"seed {seed}:\n{src}\n{got} != {want}"
        assert np.allclose(acc_c.numpy(), acc_e.numpy(), rtol=1e-4, atol=1e-5), f"seed {seed} (variable):\n{src}"


@pytest.mark.parametrize("seed", range(12))
def test_random_autograph_program(seed):
    _check(seed)


@pytest.mark.slow
def test_random_autograph_programs_many():
    for seed in range(12, 1012):
        _check(seed)
