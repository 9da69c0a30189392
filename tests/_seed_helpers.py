"""Helpers shared by the seed-tutorial tests and the TF oracle tests.

- ``strip_ids``: TF 2.0 printed ``id=NNN`` inside tensor reprs; TF 2.21 (and tapejax) do not.
- ``LazyDense``: a stand-in for ``tf.keras.layers.Dense`` (Keras is out of tapejax's scope) that keeps
  the one property seed 003's example is about: a layer's variables do not exist until its first call.
- ``Outcome``/``outcome``/``assert_same``: run a TF-style snippet and reduce what it returns (or raises)
  to framework-neutral data, so that a real-TF result and a tapejax result can be compared.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np
import pytest

_ID = re.compile(r"id=\d+, ")


def strip_ids(text: str) -> str:
    """Drop TF 2.0's ``id=NNN, `` from tensor reprs so they compare with TF 2.21's format."""
    return _ID.sub("", text)


@pytest.fixture(autouse=True)
def keep_log_once_budget():
    """Restore tapejax's log-first-n counters after each test (import this fixture into a module).

    tapejax logs TF's warnings at most n times per process, as TF does. The seed and oracle tests
    trigger them many times; without this they would use up the budget and silence the warnings
    that other tests assert on."""
    from tapejax import _log

    saved = dict(_log._counts)
    yield
    _log._counts.clear()
    _log._counts.update(saved)


class LazyDense:
    """``Dense(units)`` built on first call, written against whichever ``tf`` module is passed in."""

    def __init__(self, tf: Any, units: int):
        self._tf = tf
        self.units = units
        self.variables: list = []

    def __call__(self, inputs: Any) -> Any:
        tf = self._tf
        if not self.variables:
            n = int(inputs.shape[-1])
            kernel = tf.Variable(tf.ones((n, self.units)) * 0.1, name="kernel")
            bias = tf.Variable(tf.zeros((self.units,)), name="bias")
            self.variables = [kernel, bias]
        kernel, bias = self.variables
        return tf.matmul(inputs, kernel) + bias


# --- oracle comparison -------------------------------------------------------------------------


class Raised:
    """A snippet raised: only the exception's class name is compared (TF's and tapejax's
    ``errors.InvalidArgumentError`` are different classes with the same name)."""

    def __init__(self, exc: BaseException):
        self.name = type(exc).__name__
        self.message = str(exc)

    def __repr__(self) -> str:
        return f"Raised({self.name}: {self.message[:200]!r})"


class Val:
    """A tensor or variable reduced to kind, dtype name, shape and value."""

    def __init__(self, kind: str, dtype: str, value: np.ndarray):
        self.kind = kind
        self.dtype = dtype
        self.value = value

    def __repr__(self) -> str:
        return f"{self.kind}<{self.dtype}{list(self.value.shape)}>({self.value.tolist()!r})"


class NamedTup:
    """A namedtuple: its class name, field names and normalized values."""

    def __init__(self, name: str, fields: tuple, values: list):
        self.name, self.fields, self.values = name, fields, values

    def __repr__(self) -> str:
        return f"{self.name}{dict(zip(self.fields, self.values))!r}"


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def normalize(x: Any) -> Any:
    """Framework-neutral form of a snippet's result. Containers keep their Python type."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, np.ndarray | np.generic):
        return Val("ndarray", str(x.dtype), np.asarray(x))
    if _is_namedtuple(x):
        return NamedTup(type(x).__name__, type(x)._fields, [normalize(v) for v in x])
    if isinstance(x, (list, tuple)):
        return type(x)(normalize(v) for v in x)
    if isinstance(x, dict):
        return {"__dict_keys__": list(x.keys()), **{k: normalize(v) for k, v in x.items()}}
    if isinstance(x, BaseException):
        return Raised(x)
    if hasattr(x, "dtype") and hasattr(x, "numpy"):
        # A tensor or variable of either framework. A variable is reported as such: both
        # frameworks give variables only where the snippet itself returns one.
        kind = "Variable" if hasattr(x, "assign") else "Tensor"
        dtype = x.dtype.name
        value = np.asarray(x.numpy())
        if dtype == "bfloat16":
            value = value.astype(np.float32)
        return Val(kind, dtype, value)
    raise TypeError(f"cannot normalize {type(x)!r}: {x!r}")


def outcome(snippet: Callable[[Any], Any], tf: Any) -> Any:
    """Run ``snippet(tf)``; its normalized result, or ``Raised`` for the exception it raises."""
    try:
        return normalize(snippet(tf))
    except Exception as e:  # noqa: BLE001  (the exception type IS the result being compared)
        return Raised(e)


def assert_same(expected: Any, actual: Any, path: str = "result") -> None:
    """``expected`` (real TF) and ``actual`` (tapejax) agree in structure, None-ness, dtype,
    shape, value (np.allclose, NaNs equal) and exception class name."""
    if isinstance(expected, Raised) or isinstance(actual, Raised):
        assert isinstance(expected, Raised) and isinstance(actual, Raised), f"{path}: TF {expected!r}, tapejax {actual!r}"
        assert expected.name == actual.name, f"{path}: TF raised {expected!r}, tapejax raised {actual!r}"
        return
    if expected is None or actual is None:
        assert expected is None and actual is None, f"{path}: TF {expected!r}, tapejax {actual!r}"
        return
    assert type(expected) is type(actual), f"{path}: TF {type(expected).__name__} {expected!r}, tapejax {type(actual).__name__} {actual!r}"
    if isinstance(expected, Val):
        assert expected.kind == actual.kind, f"{path}: TF {expected!r}, tapejax {actual!r}"
        assert expected.dtype == actual.dtype, f"{path}: dtype TF {expected.dtype}, tapejax {actual.dtype}"
        assert expected.value.shape == actual.value.shape, f"{path}: shape TF {expected!r}, tapejax {actual!r}"
        if expected.value.dtype.kind in "biuSUO":
            assert np.array_equal(expected.value, actual.value), f"{path}: TF {expected!r}, tapejax {actual!r}"
        else:
            assert np.allclose(expected.value, actual.value, rtol=1e-5, atol=1e-6, equal_nan=True), f"{path}: TF {expected!r}, tapejax {actual!r}"
        return
    if isinstance(expected, NamedTup):
        assert (expected.name, expected.fields) == (actual.name, actual.fields), f"{path}: TF {expected!r}, tapejax {actual!r}"
        for f, e, a in zip(expected.fields, expected.values, actual.values):
            assert_same(e, a, f"{path}.{f}")
        return
    if isinstance(expected, dict):
        assert expected["__dict_keys__"] == actual["__dict_keys__"], f"{path}: dict keys TF {expected['__dict_keys__']}, tapejax {actual['__dict_keys__']}"
        for k in expected["__dict_keys__"]:
            assert_same(expected[k], actual[k], f"{path}[{k!r}]")
        return
    if isinstance(expected, (list, tuple)):
        assert len(expected) == len(actual), f"{path}: length TF {len(expected)} {expected!r}, tapejax {len(actual)} {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{path}[{i}]")
        return
    if isinstance(expected, float):
        assert np.isclose(expected, actual, equal_nan=True), f"{path}: TF {expected!r}, tapejax {actual!r}"
        return
    assert expected == actual, f"{path}: TF {expected!r}, tapejax {actual!r}"
