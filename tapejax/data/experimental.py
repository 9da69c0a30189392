"""``tf.data.experimental``: the aliases TF 2 code still uses.

Example:
    >>> import tapejax as tf
    >>> int(tf.data.experimental.cardinality(tf.data.Dataset.range(4)))
    4
    >>> tf.data.experimental.AUTOTUNE == tf.data.AUTOTUNE
    True
"""

from __future__ import annotations

from typing import Any

from ._csv import make_csv_dataset
from ._dataset import AUTOTUNE, INFINITE, UNKNOWN, Dataset

INFINITE_CARDINALITY = INFINITE
UNKNOWN_CARDINALITY = UNKNOWN


def cardinality(dataset: Dataset) -> Any:
    """``dataset.cardinality()`` (TF's older spelling)."""
    return dataset.cardinality()


__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "cardinality", "make_csv_dataset"]
