"""TF's own tape unit tests, ported to the public API, run under both tapejax and real TF.

Every test takes the ``tf`` fixture, which is ``tapejax`` or (marked ``oracle``) real TensorFlow: the
TF run proves the port asserts what TF does; the tapejax run checks tapejax does the same. A test that
tapejax fails on purpose carries ``@pytest.mark.tapejax_xfail(reason=...)``: it becomes a strict xfail
for the tapejax run only (the TF run must still pass), and the reason names the section of
compat_docs/differences.md that explains the difference.
"""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "tapejax_xfail(reason): a documented difference; strict xfail for the tapejax run only"
    )


@pytest.fixture(params=["tapejax", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def tf(request):
    if request.param == "tapejax":
        import tapejax

        return tapejax
    return pytest.importorskip("tensorflow", reason="the `oracle` extra (tensorflow-cpu) is not installed")


def pytest_collection_modifyitems(config, items):
    for item in items:
        mark = item.get_closest_marker("tapejax_xfail")
        callspec = getattr(item, "callspec", None)
        if mark is not None and callspec is not None and callspec.params.get("tf") == "tapejax":
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"documented difference: {mark.kwargs['reason']}"))
