"""Layer 1, the recorder: Tensor, VariableBase, Tape, Primitive/Eqn, ``bind``/``record``
and the thread-local state. Knows no TF names and no op list.

* ``_recorder``: everything above (one module).
* ``_kinds``: the set of inexact (differentiable) numpy dtypes.

Imports nothing from tapejax outside ``tapejax._core``.
"""
