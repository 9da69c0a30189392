"""``tf.ragged``: ragged tensors (rows of different lengths); see ``tapejax._tf._ragged``.

Example:
    >>> import tapejax as tf
    >>> rt = tf.ragged.constant([[1, 2], [3]])
    >>> print(tf.ragged.map_flat_values(tf.square, rt))
    <tf.RaggedTensor [[1, 4], [9]]>
"""

from __future__ import annotations

from ._tf._ragged import RaggedTensor, constant, map_flat_values

__all__ = ["RaggedTensor", "constant", "map_flat_values"]
