import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/oracle/" in str(item.fspath):
            item.add_marker(pytest.mark.oracle)


@pytest.fixture(scope="session")
def real_tf():
    """Real TensorFlow (the `oracle` extra). Oracle tests skip, saying why, when it is absent."""
    tf = pytest.importorskip("tensorflow", reason="the `oracle` extra (tensorflow-cpu) is not installed")
    return tf
