"""``tf.nest``: flatten, map_structure, pack_sequence_as, assert_same_structure, is_nested (TF's rules)."""

from ._tf._nest import (
    assert_same_structure,
    flatten,
    is_nested,
    map_structure,
    pack_sequence_as,
)

__all__ = ["assert_same_structure", "flatten", "is_nested", "map_structure", "pack_sequence_as"]
