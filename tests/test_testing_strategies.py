"""tapejax.testing.strategies, the hypothesis profiles and the pytest plugin."""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument, Unsatisfiable

import tapejax as tf
from tapejax.testing import _profiles, _pytest_plugin
from tapejax.testing import strategies as tst
from tapejax.testing._strategies import _inward

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- strategies ------------------------------------------------------------------------------


@settings(max_examples=25)
@given(st.data())
def test_domain_values_lie_in_their_domain_and_are_exact_in_the_dtype(data):
    domain = data.draw(st.sampled_from(sorted(tst.DOMAINS)))
    dtype = data.draw(st.sampled_from(["float16", "float32", "bfloat16"]))
    a = data.draw(tst.arrays(dtype, (5,), domain=domain))
    assert a.dtype == tf.as_dtype(dtype).as_numpy_dtype
    v = a.astype(np.float64)
    intervals = tst.domain_intervals(domain)
    assert all(any(lo <= e <= hi for lo, hi in intervals) for e in v), (domain, dtype, v)
    assert np.all(np.isfinite(v))


def test_domain_intervals_match_the_documented_table():
    assert tst.domain_intervals("log") == [(0.1, 10.0)]
    assert tst.domain_intervals("division") == [(-10.0, -0.1), (0.1, 10.0)]
    assert tst.domain_intervals("asin", margin=0.05) == [(-0.95, 0.95)]
    assert tst.domain_intervals("acosh", max_magnitude=3.0) == [(1.1, 3.0)]
    with pytest.raises(ValueError, match="Unknown domain"):
        tst.domain_intervals("tan")
    with pytest.raises(ValueError, match="empty"):
        tst.domain_intervals("asin", margin=1.5)


def test_bounds_round_inward_for_narrow_dtypes():
    # 0.1 is not representable in bfloat16 or float16: the lower bound must round up, not down.
    for dt in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(np.float32)):
        lo, hi = _inward(0.1, 0.9, dt)
        assert 0.1 <= lo < 0.11 and 0.89 < hi <= 0.9
        assert float(np.array([lo]).astype(dt)[0]) == lo and float(np.array([hi]).astype(dt)[0]) == hi


@settings(max_examples=15)
@given(tst.tensors(shape=st.sampled_from([(), (2,), (2, 3)]), domain="division"), tst.variables(shape=(2,)))
def test_tensors_and_variables(t, v):
    assert isinstance(t, tf.Tensor) and t.dtype == tf.float32 and tuple(t.shape) in [(), (2,), (2, 3)]
    assert np.all(np.abs(t.numpy()) >= 0.1)
    assert isinstance(v, tf.Variable) and v.trainable and tuple(v.shape) == (2,)


@settings(max_examples=15)
@given(tst.broadcastable_tensors(3, domains=("real", "log", "division"), max_dims=2, max_side=3))
def test_broadcastable_tensors(args):
    x, y, z = args
    shape = np.broadcast_shapes(tuple(x.shape), tuple(y.shape), tuple(z.shape))  # raises if not broadcastable
    assert len(shape) <= 2
    assert np.all(y.numpy() >= 0.1) and np.all(np.abs(z.numpy()) >= 0.1)


@settings(max_examples=10)
@given(tst.tensors(tst.dtypes(["float16", "float32"]), shape=(2,)), tst.arrays("complex64", (3,)))
def test_drawn_dtypes_and_complex(t, c):
    assert t.dtype in (tf.float16, tf.float32)
    assert c.dtype == np.complex64 and np.all(np.abs(c) <= 10.0 * (1 + 1e-6))


def test_elements_for_integer_and_bool_dtypes():
    assert tst.elements("int32").validate() is None and tst.elements("bool").validate() is None
    with pytest.raises(ValueError, match="Complex elements"):
        tst.elements("complex64", "log")


def _kept(check, *values):
    """Whether ``check(*values)`` keeps the example (run inside a one-example property test)."""
    calls = []

    @settings(max_examples=1, database=None)
    @given(st.just(values))
    def prop(vals):
        check(*vals)
        calls.append(True)

    try:
        prop()
    except Unsatisfiable:
        return False
    return bool(calls)


def test_kink_helpers_call_assume():
    assert _kept(tst.assume_away_from_kinks, tf.constant([0.5, -0.3]))
    assert not _kept(tst.assume_away_from_kinks, tf.constant([0.5, 0.005]))  # within 0.01 of the kink at 0
    relu6 = lambda x: tst.assume_away_from_kinks(x, kinks=(0.0, 6.0))  # noqa: E731
    assert not _kept(relu6, np.array([5.97]))  # margin 0.06 at the kink at 6
    assert _kept(relu6, np.array([5.9]))
    assert _kept(tst.assume_apart, tf.constant([1.0, 2.0]), tf.constant(1.5))
    assert not _kept(tst.assume_apart, tf.constant([1.0, 2.0]), tf.constant(1.995))


@settings(max_examples=20)
@given(tst.tensors(shape=(3,), max_magnitude=0.5))
def test_kink_helper_filters_examples_inside_given(x):
    tst.assume_away_from_kinks(x)
    assert np.all(np.abs(x.numpy()) > 0.01)


# --- profiles -----------------------------------------------------------------------------------


def _restore():
    # What tests/conftest.py selected for this run.
    _profiles.load_profile(default="deterministic")


def test_profiles_are_registered_with_the_documented_settings():
    _profiles.register_profiles()
    det = settings.get_profile("tapejax-deterministic")
    assert det.derandomize is True and det.deadline is None and det.database is None
    thorough = settings.get_profile("tapejax-thorough")
    assert thorough.derandomize is False and thorough.deadline is None and thorough.max_examples == 500
    assert _profiles.resolve_profile("deterministic") == "tapejax-deterministic"
    assert _profiles.resolve_profile("ci") == "tapejax-deterministic"
    assert _profiles.resolve_profile(" Thorough ") == "tapejax-thorough"


def test_this_suite_runs_the_profile_selected_by_the_environment():
    expected = _profiles.resolve_profile(os.environ.get("TAPEJAX_HYPOTHESIS_PROFILE", "deterministic"))
    assert settings.default.derandomize == settings.get_profile(expected).derandomize
    assert settings.default.max_examples == settings.get_profile(expected).max_examples


def test_env_var_selects_the_profile(monkeypatch):
    try:
        with monkeypatch.context() as m:
            m.setenv("TAPEJAX_HYPOTHESIS_PROFILE", "thorough")
            assert _profiles.load_profile() == "tapejax-thorough"
            assert settings.default.max_examples == 500 and not settings.default.derandomize
            m.setenv("TAPEJAX_HYPOTHESIS_PROFILE", "no-such-profile")
            with pytest.raises(InvalidArgument, match="Unknown hypothesis profile 'no-such-profile'"):
                _profiles.load_profile()
    finally:
        _restore()
    assert _profiles.load_profile(default=None) in (None, _profiles.resolve_profile(
        os.environ.get("TAPEJAX_HYPOTHESIS_PROFILE", "x")))


class _Config:
    def __init__(self, ini="", explicit=None):
        self.ini, self.explicit = ini, explicit

    def getoption(self, name, default=None):
        assert name == "hypothesis_profile"
        return self.explicit

    def getini(self, name):
        assert name == _pytest_plugin.INI_OPTION
        return self.ini


def test_plugin_loads_a_profile_only_when_asked(monkeypatch):
    try:
        with monkeypatch.context() as m:
            m.delenv("TAPEJAX_HYPOTHESIS_PROFILE", raising=False)
            settings.load_profile("default")
            _pytest_plugin.pytest_configure(_Config())  # nothing asked: hypothesis defaults untouched
            assert settings.default.derandomize is False and settings.default.max_examples == 100
            _pytest_plugin.pytest_configure(_Config(ini="deterministic"))
            assert settings.default.derandomize is True
            m.setenv("TAPEJAX_HYPOTHESIS_PROFILE", "thorough")  # the environment beats the ini option
            _pytest_plugin.pytest_configure(_Config(ini="deterministic"))
            assert settings.default.max_examples == 500
            settings.load_profile("default")
            _pytest_plugin.pytest_configure(_Config(explicit="default"))  # --hypothesis-profile wins
            assert settings.default.max_examples == 100
    finally:
        _restore()


def test_plugin_entry_point_is_declared_in_pyproject():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml on Python < 3.11 needs tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)
    assert meta["project"]["entry-points"]["pytest11"]["tapejax"] == "tapejax_pytest"
    assert hasattr(_pytest_plugin, "pytest_configure") and hasattr(_pytest_plugin, "pytest_addoption")


def test_plugin_imports_neither_tapejax_nor_jax():
    # The entry point runs in every pytest session of the environment: an unrelated
    # project must not pay for JAX's import or see its configuration read early.
    code = ("import sys, tapejax_pytest; "
            "print(sorted(m for m in ('tapejax', 'jax', 'hypothesis') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_plugin_end_to_end_in_a_pytest_subprocess(tmp_path):
    # A real pytest run outside this repository: the plugin's hooks must register (ini option)
    # and the environment variable must beat the ini option. `-p no:tapejax` first, in case the
    # entry point is installed, so the module is not registered twice.
    import subprocess

    (tmp_path / "test_profile.py").write_text(
        "from hypothesis import settings\n"
        "def test_profile():\n"
        "    assert settings.default.max_examples == 500 and not settings.default.derandomize\n"
    )
    env = dict(os.environ, TAPEJAX_HYPOTHESIS_PROFILE="thorough", PYTHONPATH=ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:tapejax",
         "-p", "tapejax_pytest", "-o", "tapejax_hypothesis_profile=deterministic",
         "test_profile.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
