"""Layer 2, the engine: turning a record into JAX.

* ``_replay``: slicing a record, the pure function of a slice, the vjp /
  residual-vjp / jacobian transforms and the compile cache.
* ``_interpret``: the interpreted tier (per-op VJPs and JVPs over recorded
  tensors) used when a gradient is itself watched.
* ``_lazy``: lazy execution (``config.set_execution("lazy")``): pending programs,
  cached and compiled whole per structure.

Imports only ``tapejax._core`` (and jax/numpy).
"""
