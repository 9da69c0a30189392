"""Layer 4, the TF-named layer: thin modules over the layers below.

* ``_tape_common``: what the tape, the jacobians and ``explain`` share.
* ``_gradient_tape``: ``GradientTape`` (``gradient``, ``jacobian``, ``batch_jacobian``).
* ``_jacobian``: the jacobian API the tape's methods call.
* ``_explain``: ``tapejax.explain`` and the None-gradient warning.
* ``_forward``: ``ForwardAccumulator``.
* ``_autodiff``: ``custom_gradient``, ``stop_gradient``, ``recompute_grad``.
* ``_function``: ``tf.function``; ``_variable``: ``tf.Variable``; ``_print``: ``tf.print``.
* ``_jnp_wrap``: ``tapejax.numpy``'s wrapper; ``_namespace``: fills ``tf.math``, ``tf.nn``, ...
* ``_surface``: the whole ``tf.*`` surface in one module (``tapejax`` re-exports
  it; ``tapejax.keras`` uses it as ``tf``).

The public modules ``tapejax.math``, ``nn``, ``linalg``, ``random``, ``dtypes``,
``debugging``, ``bitwise``, ``autodiff``, ``numpy`` belong to this layer too.
"""
