"""``tf.data``: input pipelines (``tf.data.Dataset``) with TF 2.21's semantics.

A dataset is lazy and re-iterable: each ``iter(ds)`` runs the pipeline from the
start through plain Python iterators over NumPy arrays, and hands out tapejax
tensors. ``map``/``filter`` functions get tapejax tensors; ``prefetch`` runs the
pipeline on a background thread; ``shuffle`` keeps TF's buffer semantics.

Why not Grain (the JAX ecosystem's data loader) underneath: its random access
``MapDataset`` shuffles by a global index permutation and its streaming
``IterDataset`` has no TF-style shuffle buffer; it has no notion of TF's
cardinality (``INFINITE``/``UNKNOWN``), of ``from_generator`` signatures or of
``interleave``'s cycle order; and it pulls absl, protobuf, array_record and
cloudpickle into an ``import``. TF's semantics are a few hundred lines of
iterators, so they are written here directly and exactly.

Example:
    >>> import numpy as np, tapejax as tf
    >>> x = np.arange(8, dtype=np.float32).reshape(4, 2)
    >>> y = np.array([0, 1, 0, 1], np.int32)
    >>> ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4, seed=0).batch(2)
    >>> for xb, yb in ds:
    ...     print(xb.shape, yb.dtype)
    (2, 2) <dtype: 'int32'>
    (2, 2) <dtype: 'int32'>
"""

from __future__ import annotations

from . import experimental
from ._dataset import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    DatasetSpec,
    Iterator,
    Options,
)

__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "Dataset", "DatasetSpec", "Iterator", "Options",
           "experimental"]
