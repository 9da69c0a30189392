import os

import pytest

# One process holds one Keras backend, and `import tensorflow` (the in-process oracle
# tests) imports keras: make that keras the JAX one tapejax.keras runs on. TF's own
# tf.keras is only ever used in subprocesses (tests/oracle/_tf_side.py).
os.environ["KERAS_BACKEND"] = "jax"

from tapejax.testing._profiles import load_profile

# The profiles are defined once, in tapejax.testing (also behind the pytest
# plugin entry point). Deterministic by default: derandomized, no deadline (the
# first call compiles); TAPEJAX_HYPOTHESIS_PROFILE=thorough for a long run.
load_profile(default="deterministic")


@pytest.fixture(autouse=True)
def _clean_tape_stack():
    """Every test must leave no tape recording on this thread."""
    from tapejax._core import _recorder as _core

    assert not _core.state.recording, "a previous test left a tape on the stack"
    yield
    leaked = list(_core.state.recording)
    _core.state.recording.clear()
    assert not leaked, "this test left a tape recording on the thread's stack"


@pytest.fixture
def compile_tier():
    """Pin eager gradients to the compiled tier: for tests of the compile cache itself
    (hits, misses, evictions, which transform a slice compiles to)."""
    from tapejax import config

    old = config.replay_tier
    config.replay_tier = "compile"
    yield
    config.replay_tier = old


@pytest.fixture
def execution_mode():
    """``execution_mode("lazy" | "eager")`` sets ``config.set_execution`` for one test;
    the mode before it is restored after."""
    from tapejax import config

    old = config.get_execution()
    yield config.set_execution
    config.set_execution(old)
