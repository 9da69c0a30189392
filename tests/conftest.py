import os

import pytest
from hypothesis import HealthCheck, settings

# Deterministic by default: derandomized, no deadline (the first call compiles).
settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=40, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", deadline=None, max_examples=500, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("TAPEJAX_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _clean_tape_stack():
    """Every test must leave no tape recording on this thread."""
    from tapejax import _core

    assert not _core.state.recording, "a previous test left a tape on the stack"
    yield
    leaked = list(_core.state.recording)
    _core.state.recording.clear()
    assert not leaked, "this test left a tape recording on the thread's stack"
