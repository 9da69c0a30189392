"""``tf.data.experimental``: the aliases and transformations TF 2 code still uses.

Each ``tf.data.experimental.X(...)`` that returns a transformation is meant for
``dataset.apply(...)``, as in TF.

Example:
    >>> import tapejax as tf
    >>> int(tf.data.experimental.cardinality(tf.data.Dataset.range(4)))
    4
    >>> tf.data.experimental.AUTOTUNE == tf.data.AUTOTUNE
    True
    >>> ds = tf.data.Dataset.range(5).filter(lambda x: x < 3)
    >>> int(ds.apply(tf.data.experimental.assert_cardinality(3)).cardinality())
    3
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import errors
from . import _structure as st
from ._csv import make_csv_dataset
from ._dataset import AUTOTUNE, INFINITE, UNKNOWN, Dataset

INFINITE_CARDINALITY = INFINITE
UNKNOWN_CARDINALITY = UNKNOWN


def cardinality(dataset: Dataset) -> Any:
    """``dataset.cardinality()`` (TF's older spelling)."""
    return dataset.cardinality()


def assert_cardinality(expected_cardinality: Any) -> Callable[[Dataset], Dataset]:
    """A transformation that declares the dataset's cardinality and checks it while iterating
    (``FailedPreconditionError`` when the count differs)."""
    n = int(expected_cardinality)

    def apply(dataset: Dataset) -> Dataset:
        def make() -> Any:
            count = 0
            for e in dataset._elements():
                count += 1
                if n >= 0 and count > n:
                    raise errors.FailedPreconditionError(
                        f"Input dataset was expected to contain {n} elements but contained at least {count} elements.")
                yield e
            if n == INFINITE or (n >= 0 and count < n):
                raise errors.FailedPreconditionError(
                    f"Input dataset was expected to contain {'an infinite number of' if n == INFINITE else n} "
                    f"elements but contained only {count} elements.")

        return Dataset(make, lambda: dataset.element_spec, n, "_AssertCardinalityDataset")

    return apply


def from_list(elements: list, name: str | None = None) -> Dataset:
    """A dataset of the given elements (each a tensor or a nested structure), in order.

    Example:
        >>> import tapejax as tf
        >>> [(int(a), float(b)) for a, b in tf.data.experimental.from_list([(1, 2.0), (3, 4.0)])]
        [(1, 2.0), (3, 4.0)]
    """
    if not elements:
        raise ValueError("Invalid `elements`. `elements` should not be empty. If you want an empty dataset, use "
                         "`tf.data.Dataset.range(0)`.")
    items = [st.map_structure(st.to_numpy, st.normalize(e) if isinstance(e, list) else e) for e in elements]
    for e in items[1:]:
        if not st.same_structure(items[0], e):
            raise ValueError(f"Elements of `from_list` must have the same structure: {elements[0]!r} vs {e!r}.")
    stacked = st.pack_as(items[0], [np.stack(col) for col in zip(*[st.flatten(e) for e in items])])
    out = Dataset.from_tensor_slices(stacked)
    out._name = "_ListDataset"
    return out


def at(dataset: Dataset, index: Any) -> Any:
    """The element at ``index`` (``OutOfRangeError`` past the end)."""
    i = int(index)
    if i < 0:
        raise errors.InvalidArgumentError(f"Index must be non-negative, got {i}.")
    for k, e in enumerate(dataset._elements()):
        if k == i:
            return st.to_tensors(e)
    n = dataset._card()
    raise errors.OutOfRangeError(f"Index out of range [0, {n if n >= 0 else '?'}):{i}")


def get_single_element(dataset: Dataset) -> Any:
    """``dataset.get_single_element()``."""
    return dataset.get_single_element()


def choose_from_datasets(datasets: Any, choice_dataset: Dataset, stop_on_empty_dataset: bool = False) -> Dataset:
    """``Dataset.choose_from_datasets`` with the experimental default ``stop_on_empty_dataset=False``."""
    return Dataset.choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset)


def sample_from_datasets(datasets: Any, weights: Any = None, seed: int | None = None,
                         stop_on_empty_dataset: bool = False) -> Dataset:
    """``Dataset.sample_from_datasets``."""
    return Dataset.sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset)


def Counter(start: Any = 0, step: Any = 1, dtype: Any = None) -> Dataset:
    """``Dataset.counter``."""
    return Dataset.counter(start, step, dtype)


def enumerate_dataset(start: Any = 0) -> Callable[[Dataset], Dataset]:
    return lambda dataset: dataset.enumerate(start)


def scan(initial_state: Any, scan_func: Callable) -> Callable[[Dataset], Dataset]:
    return lambda dataset: dataset.scan(initial_state, scan_func)


def take_while(predicate: Callable) -> Callable[[Dataset], Dataset]:
    return lambda dataset: dataset.take_while(predicate)


def unbatch() -> Callable[[Dataset], Dataset]:
    return lambda dataset: dataset.unbatch()


def unique() -> Callable[[Dataset], Dataset]:
    return lambda dataset: dataset.unique()


def shuffle_and_repeat(buffer_size: Any, count: Any = None, seed: int | None = None) -> Callable[[Dataset], Dataset]:
    return lambda dataset: dataset.shuffle(buffer_size, seed).repeat(count)


def map_and_batch(map_func: Callable, batch_size: Any, num_parallel_batches: Any = None, drop_remainder: bool = False,
                  num_parallel_calls: Any = None) -> Callable[[Dataset], Dataset]:
    return lambda dataset: dataset.map(map_func, num_parallel_calls).batch(batch_size, drop_remainder)


__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "Counter", "assert_cardinality", "at",
           "cardinality", "choose_from_datasets", "enumerate_dataset", "from_list", "get_single_element",
           "make_csv_dataset", "map_and_batch", "sample_from_datasets", "scan", "shuffle_and_repeat", "take_while",
           "unbatch", "unique"]
