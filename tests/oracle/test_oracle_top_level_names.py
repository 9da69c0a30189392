"""Every public top-level name of real TF 2.21 is either provided by tapejax or refused with an
AttributeError that names it and points to the porting guide (never a bare AttributeError)."""

from __future__ import annotations

import pytest

import tapejax
from tapejax._tf._unsupported import TF_TOP_LEVEL


def _tf_names(real_tf) -> set[str]:
    return {n for n in dir(real_tf) if not n.startswith("_")}


def test_the_table_of_tf_names_is_tf_2_21s(real_tf):
    # The table is what tapejax uses to tell a TF name from a typo; it must list TF's names exactly.
    assert _tf_names(real_tf) == set(TF_TOP_LEVEL)


def test_every_tf_name_is_provided_or_refused_with_a_pointer(real_tf):
    refused = []
    for name in sorted(_tf_names(real_tf)):
        try:
            getattr(tapejax, name)
        except AttributeError as e:
            msg = str(e)
            assert f"tf.{name} is not supported by tapejax" in msg, (name, msg)
            assert "compat_docs/README.md" in msg, (name, msg)
            refused.append(name)
    # The core of a TF 2 program is never refused.
    assert not set(refused) & {"GradientTape", "Variable", "function", "constant", "keras", "nn", "math", "data"}, refused


def test_a_non_tf_name_is_a_plain_attribute_error():
    with pytest.raises(AttributeError) as e:
        tapejax.no_such_name_in_tf  # noqa: B018
    assert "porting guide" not in str(e.value)
