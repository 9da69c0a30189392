"""TF's exception classes (``tf.errors``), so TF code that catches them keeps working.

Example:
    >>> import tapejax as tf
    >>> try:
    ...     tf.constant(1.0) * tf.constant(1)
    ... except tf.errors.InvalidArgumentError as e:
    ...     print(type(e).__name__)
    InvalidArgumentError
"""

from __future__ import annotations

__all__ = [
    "OpError",
    "CancelledError",
    "UnknownError",
    "InvalidArgumentError",
    "DeadlineExceededError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "AbortedError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "UnavailableError",
    "DataLossError",
    "UnauthenticatedError",
    "OperatorNotAllowedInGraphError",
]


class OpError(Exception):
    """Base class of the errors an op raises while running (as ``tf.errors.OpError``)."""

    def __init__(self, node_def=None, op=None, message: str = "", *args):
        # TF's signature is (node_def, op, message); accept a lone message too.
        if message == "" and isinstance(node_def, str) and op is None:
            message, node_def = node_def, None
        super().__init__(message)
        self.node_def = node_def
        self.op = op
        self.message = message

    def __str__(self) -> str:
        return self.message


def _make(name: str, doc: str) -> type:
    return type(name, (OpError,), {"__doc__": doc, "__module__": __name__})


CancelledError = _make("CancelledError", "The operation was cancelled.")
UnknownError = _make("UnknownError", "An unknown error.")
InvalidArgumentError = _make("InvalidArgumentError", "An op received an invalid argument (wrong dtype, shape or value).")
DeadlineExceededError = _make("DeadlineExceededError", "A deadline expired.")
NotFoundError = _make("NotFoundError", "A requested entity was not found.")
AlreadyExistsError = _make("AlreadyExistsError", "An entity already exists.")
PermissionDeniedError = _make("PermissionDeniedError", "Permission denied.")
ResourceExhaustedError = _make("ResourceExhaustedError", "A resource (such as memory) is exhausted.")
FailedPreconditionError = _make("FailedPreconditionError", "The system is not in a state to run the op.")
AbortedError = _make("AbortedError", "The operation was aborted.")
OutOfRangeError = _make("OutOfRangeError", "An index or iteration went out of range.")
UnimplementedError = _make("UnimplementedError", "The operation is not implemented.")
InternalError = _make("InternalError", "An internal invariant was broken.")
UnavailableError = _make("UnavailableError", "A service is unavailable.")
DataLossError = _make("DataLossError", "Unrecoverable data loss.")
UnauthenticatedError = _make("UnauthenticatedError", "The request lacks valid credentials.")


class OperatorNotAllowedInGraphError(TypeError):
    """A symbolic tensor was used where Python needs a concrete value (``bool``, ``int``,
    iteration) while a ``tf.function`` was traced, in code autograph did not convert."""


def needs_values(exc: BaseException) -> BaseException:
    """Mark ``exc`` as raised because an op needs its input's values to know its output's shape
    (``tf.boolean_mask``, ``tf.unique``, a shape argument computed by the step): XLA compiles
    static shapes only, where TF's graphs have dynamic ones. ``tapejax.function`` then runs that
    call eagerly (TF's numbers, with one warning) instead of failing. Returns ``exc``."""
    exc.tapejax_needs_values = True  # type: ignore[attr-defined]
    return exc
