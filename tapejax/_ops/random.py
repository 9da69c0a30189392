"""``tf.random``: TF's seed semantics over ``jax.random`` keys that tapejax manages.

TF's rules, kept here (the numbers differ from TF's: JAX uses another generator):

* No global seed and no op seed: every draw is fresh (a process key seeded from
  OS entropy).
* ``set_seed(g)`` and no op seed: the draws that follow are a reproducible
  sequence; each such op takes the next value of an internal counter as its op
  seed, so the n-th unseeded op after ``set_seed`` always gives the same values.
* An op seed ``s``: the global seed is ``g`` (or TF's default 87654321), and each
  op kind (``uniform``, ``normal``, ``truncated_normal``, ``shuffle``, ...) keeps its
  own counter per ``(g, s)``: repeating the same call gives new values, repeating
  the whole sequence after ``set_seed(g)`` gives the same ones. The shape and the
  range of a draw do not matter, as in TF.
* ``Generator`` objects carry an explicit key and counter, independent of the
  global seed; ``stateless_*`` ops depend on their ``seed=[a, b]`` only.
"""

from __future__ import annotations

import threading
import zlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import errors
from .._core import _recorder as _core
from .._core._recorder import Tensor, VariableBase
from ._dtypes import as_dtype, check_width, x64_enabled
from ._machinery import OPS
from ._tensor import convert_to_tensor

__all__ = [
    "set_seed", "get_seed", "next_key", "normal", "uniform", "truncated_normal", "shuffle", "categorical", "gamma",
    "poisson", "stateless_normal", "stateless_uniform", "stateless_truncated_normal", "stateless_categorical",
    "Generator", "get_global_generator", "set_global_generator",
]

DEFAULT_GRAPH_SEED = 87654321
_lock = threading.Lock()
_state: dict[str, Any] = {"key": None, "global_seed": None, "counter": 0, "op_counts": {}}


def _entropy() -> int:
    # Fresh OS entropy, as an int (SeedSequence().entropy is one when no entropy is given).
    return int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]


def _entropy_key_data() -> np.ndarray:
    return np.asarray([_entropy() % (2**32), _entropy() % (2**32)], np.uint32)


# Inside a compiled tapejax.function, random ops draw from this holder instead:
# it is a (non-trainable) variable, so the function captures it as state,
# reads it as an input and writes the advanced key back after every call. A
# compiled step therefore draws new numbers on every call (as TF's does), and
# the sequence restarts after set_seed.
_traced_key = VariableBase(_entropy_key_data(), trainable=False)


def set_seed(seed: int | None) -> None:
    """Set the global random seed: the draws that follow become reproducible.

    Example:
        >>> import tapejax as tf
        >>> tf.random.set_seed(1); a = tf.random.normal((2,))
        >>> tf.random.set_seed(1); b = tf.random.normal((2,))
        >>> bool((a == b).numpy().all())
        True
    """
    with _lock:
        _state["global_seed"] = None if seed is None else int(seed)
        _state["key"] = None
        _state["counter"] = 0
        _state["op_counts"] = {}
        if seed is None:
            _traced_key._value = _entropy_key_data()
        else:
            key = jax.random.fold_in(jax.random.key(np.uint32(int(seed) & 0xFFFFFFFF)), 0x7ACE)
            _traced_key._value = np.asarray(jax.random.key_data(key), np.uint32)


def get_seed(op_seed: int | None) -> tuple:
    """TF's ``(global_seed, op_seed)`` pair for an op (``tf.random.get_seed``); either may be None.

    Example:
        >>> import tapejax as tf
        >>> tf.random.set_seed(3); tf.random.get_seed(5)
        (3, 5)
    """
    g = _state["global_seed"]
    if g is None and op_seed is None:
        return None, None
    if g is None:
        return DEFAULT_GRAPH_SEED, int(op_seed)  # type: ignore[arg-type]
    if op_seed is None:
        return g, _state["counter"]
    return g, int(op_seed)


def _kind_tag(kind: str) -> int:
    return zlib.crc32(kind.encode()) & 0x7FFFFFFF


def next_key(seed: int | None, kind: str = "uniform") -> jax.Array:
    """The key for one random op of ``kind`` with op seed ``seed``, under TF's rules (advances the state)."""
    if _core.state.tracing:
        # In a tapejax.function: draw from the captured holder (fresh numbers every call).
        k, sub = jax.random.split(jax.random.wrap_key_data(_traced_key._value))
        _traced_key._value = jax.random.key_data(k)
        tag = _kind_tag(kind) if seed is None else (_kind_tag(kind) ^ (int(seed) & 0x7FFFFFFF))
        return jax.random.fold_in(sub, tag)
    with _lock:
        g = _state["global_seed"]
        if seed is not None:
            gs = DEFAULT_GRAPH_SEED if g is None else g
            slot = (kind, gs, int(seed))
            n = _state["op_counts"].get(slot, 0)
            _state["op_counts"][slot] = n + 1
            base = jax.random.fold_in(jax.random.fold_in(jax.random.key(np.uint32(gs & 0xFFFFFFFF)), int(seed) & 0x7FFFFFFF),
                                      _kind_tag(kind))
            return jax.random.fold_in(base, n)
        if g is not None:
            # TF: the op seed is the next value of a counter reset by set_seed.
            c = _state["counter"]
            _state["counter"] = c + 1
            return jax.random.fold_in(jax.random.fold_in(jax.random.key(np.uint32(g & 0xFFFFFFFF)), 0x5EED), c)
        # Under a foreign JAX trace (Keras's jit building a model runs a tf.random initializer),
        # the split must still run eagerly: a traced key stored in the global state would leak.
        with jax.ensure_compile_time_eval():
            if _state["key"] is None:
                _state["key"] = jax.random.key(int(_entropy() % (2**31)))
            _state["key"], k = jax.random.split(_state["key"])
        return k


def _next_key(seed: int | None, kind: str = "uniform") -> jax.Array:
    # The name other modules (keras initializers) import.
    return next_key(seed, kind)


def _shape(shape: Any) -> tuple:
    if isinstance(shape, Tensor | VariableBase):
        shape = np.asarray(shape._value).tolist()
    if isinstance(shape, int | np.integer):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _float_dtype(dtype: Any, what: str) -> Any:
    d = as_dtype(dtype)
    check_width(d._np, "Requested dtype")
    if not d.is_floating:
        raise TypeError(f"Cannot convert 0.0 to EagerTensor of dtype {d.name}: {what} needs a floating dtype.")
    return d


def _affine(z: jax.Array, scale: Any, shift: Any, dtype: Any) -> Tensor:
    """``z * scale + shift``, recorded when ``scale``/``shift`` are tensors (TF differentiates through them)."""
    t = Tensor(z)
    if isinstance(scale, Tensor | VariableBase) or isinstance(shift, Tensor | VariableBase):
        return OPS["add"](OPS["multiply"](t, _cast_like(scale, dtype)), _cast_like(shift, dtype))
    return Tensor((z * jnp.asarray(scale, dtype._np) + jnp.asarray(shift, dtype._np)).astype(dtype._np))


def _cast_like(v: Any, dtype: Any) -> Any:
    if isinstance(v, Tensor | VariableBase):
        return v
    return convert_to_tensor(v, dtype=dtype)


def normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32", seed: int | None = None, name: Any = None) -> Tensor:
    """Normal samples, as ``tf.random.normal`` (differentiable with respect to tensor ``mean``/``stddev``).

    Example:
        >>> import tapejax as tf
        >>> tf.random.normal((3,), seed=1).shape
        TensorShape([3])
    """
    d = _float_dtype(dtype, "normal")
    z = jax.random.normal(next_key(seed, "normal"), _shape(shape), d._np)
    return _affine(z, stddev, mean, d)


def uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = "float32", seed: int | None = None, name: Any = None) -> Tensor:
    """Uniform samples in ``[minval, maxval)`` (``maxval`` defaults to 1 for floats), as ``tf.random.uniform``.

    Example:
        >>> import tapejax as tf
        >>> x = tf.random.uniform((100,), 2, 5, dtype=tf.int32, seed=1)
        >>> bool(((x >= 2) & (x < 5)).numpy().all())
        True
    """
    d = as_dtype(dtype)
    check_width(d._np, "Requested dtype")
    if d.is_integer:
        if maxval is None:
            raise ValueError(f"Must specify maxval for integer dtype {d!r}")
        lo, hi = (int(np.asarray(v._value if isinstance(v, Tensor | VariableBase) else v)) for v in (minval, maxval))
        if lo >= hi:
            raise errors.InvalidArgumentError(f"Need minval < maxval: {lo} >= {hi} [Op:RandomUniformInt]")
        return Tensor(jax.random.randint(next_key(seed, "uniform_int"), _shape(shape), lo, hi, d._np))
    if not d.is_floating:
        raise ValueError(f"Invalid dtype {d!r} for tf.random.uniform: use a floating or integer dtype.")
    z = jax.random.uniform(next_key(seed, "uniform"), _shape(shape), d._np)
    top = 1.0 if maxval is None else maxval
    if isinstance(top, Tensor | VariableBase) or isinstance(minval, Tensor | VariableBase):
        width = OPS["subtract"](_cast_like(top, d), _cast_like(minval, d))
        return _affine(z, width, minval, d)
    return _affine(z, float(top) - float(minval), float(minval), d)


def truncated_normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32", seed: int | None = None,
                     name: Any = None) -> Tensor:
    """Normal samples redrawn until within two standard deviations, as ``tf.random.truncated_normal``.

    Example:
        >>> import tapejax as tf
        >>> x = tf.random.truncated_normal((1000,), seed=1)
        >>> bool((tf.abs(x) <= 2.0).numpy().all())
        True
    """
    d = _float_dtype(dtype, "truncated_normal")
    z = jax.random.truncated_normal(next_key(seed, "truncated_normal"), -2.0, 2.0, _shape(shape), d._np)
    return _affine(z, stddev, mean, d)


def shuffle(value: Any, seed: int | None = None, name: Any = None) -> Tensor:
    """A random permutation along the first axis, as ``tf.random.shuffle`` (not differentiable, as in TF).

    Example:
        >>> import tapejax as tf
        >>> sorted(tf.random.shuffle(tf.constant([1, 2, 3, 4]), seed=1).numpy().tolist())
        [1, 2, 3, 4]
    """
    v = value._value if isinstance(value, Tensor | VariableBase) else convert_to_tensor(value)._value
    if v.ndim == 0:
        raise ValueError("Shape must be at least rank 1 but is rank 0 for tf.random.shuffle.")
    return Tensor(jax.random.permutation(next_key(seed, "shuffle"), v, axis=0, independent=False))


def _index_dtype(dtype: Any) -> Any:
    if dtype is None:
        return np.dtype(np.int64) if x64_enabled() else np.dtype(np.int32)
    d = as_dtype(dtype)._np
    check_width(d, "Requested dtype")
    return d


def categorical(logits: Any, num_samples: int, dtype: Any = None, seed: int | None = None, name: Any = None) -> Tensor:
    """Samples of class indices from ``logits`` ``[batch, classes]`` (int64 in TF; int32 without x64).

    Example:
        >>> import tapejax as tf
        >>> tf.random.categorical(tf.math.log([[0.5, 0.5]]), 5, seed=1).shape
        TensorShape([1, 5])
    """
    lg = logits._value if isinstance(logits, Tensor | VariableBase) else convert_to_tensor(logits)._value
    if lg.ndim != 2:
        raise errors.InvalidArgumentError(f"logits should be a matrix, got shape {list(lg.shape)} [Op:Multinomial]")
    k = next_key(seed, "categorical")
    s = jax.random.categorical(k, lg[:, None, :], axis=-1, shape=(lg.shape[0], int(num_samples)))
    return Tensor(s.astype(_index_dtype(dtype)))


def gamma(shape: Any, alpha: Any, beta: Any = None, dtype: Any = "float32", seed: int | None = None, name: Any = None) -> Tensor:
    """Gamma samples of shape ``shape + alpha.shape``, as ``tf.random.gamma``."""
    d = _float_dtype(dtype, "gamma")
    a = jnp.asarray(alpha._value if isinstance(alpha, Tensor | VariableBase) else alpha, d._np)
    b = 1.0 if beta is None else jnp.asarray(beta._value if isinstance(beta, Tensor | VariableBase) else beta, d._np)
    out_shape = _shape(shape) + tuple(jnp.broadcast_shapes(jnp.shape(a), jnp.shape(b)))
    g = jax.random.gamma(next_key(seed, "gamma"), jnp.broadcast_to(a, out_shape), out_shape, d._np)
    return Tensor((g / b).astype(d._np))


def poisson(shape: Any, lam: Any, dtype: Any = "float32", seed: int | None = None, name: Any = None) -> Tensor:
    """Poisson samples of shape ``shape + lam.shape``, as ``tf.random.poisson``."""
    d = as_dtype(dtype)
    check_width(d._np, "Requested dtype")
    lm = jnp.asarray(lam._value if isinstance(lam, Tensor | VariableBase) else lam)
    out_shape = _shape(shape) + tuple(jnp.shape(lm))
    return Tensor(jax.random.poisson(next_key(seed, "poisson"), jnp.broadcast_to(lm, out_shape), out_shape).astype(d._np))


# ---- stateless ops ---------------------------------------------------------------------------------


def _seed_key(seed: Any) -> jax.Array:
    s = np.asarray(seed._value if isinstance(seed, Tensor | VariableBase) else seed).reshape(-1)
    if s.shape != (2,):
        raise errors.InvalidArgumentError(f"seed must have shape [2], not {list(s.shape)}")
    return jax.random.fold_in(jax.random.key(np.uint32(int(s[0]) & 0xFFFFFFFF)), int(s[1]) & 0x7FFFFFFF)


def stateless_normal(shape: Any, seed: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32", name: Any = None,
                     alg: Any = "auto_select") -> Tensor:
    """Normal samples that depend only on ``seed = [a, b]``, as ``tf.random.stateless_normal``.

    Example:
        >>> import tapejax as tf
        >>> a = tf.random.stateless_normal([2], seed=[1, 2]); b = tf.random.stateless_normal([2], seed=[1, 2])
        >>> bool((a == b).numpy().all())
        True
    """
    d = _float_dtype(dtype, "stateless_normal")
    return _affine(jax.random.normal(_seed_key(seed), _shape(shape), d._np), stddev, mean, d)


def stateless_uniform(shape: Any, seed: Any, minval: Any = 0, maxval: Any = None, dtype: Any = "float32", name: Any = None,
                      alg: Any = "auto_select") -> Tensor:
    """Uniform samples that depend only on ``seed = [a, b]``, as ``tf.random.stateless_uniform``."""
    d = as_dtype(dtype)
    check_width(d._np, "Requested dtype")
    k = _seed_key(seed)
    if d.is_integer:
        if maxval is None:
            raise ValueError(f"Must specify maxval for integer dtype {d!r}")
        return Tensor(jax.random.randint(k, _shape(shape), int(minval), int(maxval), d._np))
    hi = 1.0 if maxval is None else float(maxval)
    return _affine(jax.random.uniform(k, _shape(shape), d._np), hi - float(minval), float(minval), d)


def stateless_truncated_normal(shape: Any, seed: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32",
                               name: Any = None, alg: Any = "auto_select") -> Tensor:
    """Truncated normal samples that depend only on ``seed = [a, b]``."""
    d = _float_dtype(dtype, "stateless_truncated_normal")
    return _affine(jax.random.truncated_normal(_seed_key(seed), -2.0, 2.0, _shape(shape), d._np), stddev, mean, d)


def stateless_categorical(logits: Any, num_samples: int, seed: Any, dtype: Any = None, name: Any = None) -> Tensor:
    """Categorical samples that depend only on ``seed = [a, b]``."""
    lg = jnp.asarray(logits._value if isinstance(logits, Tensor | VariableBase) else logits)
    s = jax.random.categorical(_seed_key(seed), lg[:, None, :], axis=-1, shape=(lg.shape[0], int(num_samples)))
    return Tensor(s.astype(_index_dtype(dtype)))


# ---- Generator -------------------------------------------------------------------------------------


class Generator:
    _key_data: Any
    _counter: Any

    """A random generator with explicit state (a key and a counter), as ``tf.random.Generator``.

    Each draw uses ``fold_in(key, counter)`` and advances the counter, so a
    generator made ``from_seed(s)`` replays the same sequence, independently of
    the global seed. ``split`` makes independent child generators.

    Example:
        >>> import tapejax as tf
        >>> g1 = tf.random.Generator.from_seed(3); g2 = tf.random.Generator.from_seed(3)
        >>> bool((g1.normal([3]) == g2.normal([3])).numpy().all())
        True
    """

    def __init__(self, copy_from: Generator | None = None, state: Any = None, alg: Any = None):
        self._lock = threading.Lock()
        if copy_from is not None:
            self._key_data = copy_from._key_data
            self._counter = copy_from._counter
        elif state is not None:
            self._set_state(state)
        else:
            raise ValueError("Generator needs copy_from or state; use Generator.from_seed(seed) or "
                             "Generator.from_non_deterministic_state().")
        self._alg = alg

    # --- construction --------------------------------------------------------------

    @classmethod
    def from_seed(cls, seed: int, alg: Any = None) -> Generator:
        """A generator whose sequence is determined by ``seed``."""
        g = cls.__new__(cls)
        g._lock = threading.Lock()
        g._alg = alg
        g.reset_from_seed(seed)
        return g

    @classmethod
    def from_non_deterministic_state(cls, alg: Any = None) -> Generator:
        """A generator seeded from OS entropy."""
        return cls.from_seed(int(_entropy() % (2**63)), alg)

    @classmethod
    def from_key_counter(cls, key: Any, counter: Any, alg: Any = None) -> Generator:
        """A generator from an explicit ``key`` (int) and ``counter`` (int or list; its first entry is used)."""
        g = cls.from_seed(int(np.asarray(key).reshape(-1)[0]), alg)
        g._counter = int(np.asarray(counter).reshape(-1)[0])
        return g

    @classmethod
    def from_state(cls, state: Any, alg: Any = None) -> Generator:
        """A generator from a ``state`` tensor as returned by ``.state``."""
        return cls(state=state, alg=alg)

    # --- state ---------------------------------------------------------------------

    def _set_state(self, state: Any) -> None:
        s = np.asarray(state._value if isinstance(state, Tensor | VariableBase) else state).reshape(-1)
        if s.size < 3:
            raise ValueError(f"A Generator state has 3 entries (two key words and a counter), got {s.size}.")
        self._key_data = np.asarray(s[:2], dtype=np.uint32)
        self._counter = int(s[2])

    @property
    def state(self) -> Tensor:
        """``[key_word_0, key_word_1, counter]`` as a uint32 tensor (TF: an int64 variable)."""
        return Tensor(jnp.asarray(np.concatenate([self._key_data, np.asarray([self._counter], np.uint32)])))

    @property
    def algorithm(self) -> str:
        return "threefry2x32"

    @property
    def key(self) -> Tensor:
        return Tensor(jnp.asarray(self._key_data))

    def reset(self, state: Any) -> None:
        """Set the state (as returned by ``.state``)."""
        with self._lock:
            self._set_state(state)

    def reset_from_seed(self, seed: int) -> None:
        """Restart the sequence of ``Generator.from_seed(seed)``."""
        with self._lock:
            k = jax.random.key(np.uint32(int(seed) & 0xFFFFFFFF))
            k = jax.random.fold_in(k, (int(seed) >> 32) & 0x7FFFFFFF)
            self._key_data = np.asarray(jax.random.key_data(k), dtype=np.uint32)
            self._counter = 0

    def reset_from_key_counter(self, key: Any, counter: Any) -> None:
        self.reset_from_seed(int(np.asarray(key).reshape(-1)[0]))
        self._counter = int(np.asarray(counter).reshape(-1)[0])

    def skip(self, delta: int) -> Tensor:
        """Advance the counter by ``delta`` draws; returns the old state."""
        with self._lock:
            old = self.state
            self._counter += int(delta)
            return old

    def _next(self) -> jax.Array:
        with self._lock:
            k = jax.random.fold_in(jax.random.wrap_key_data(jnp.asarray(self._key_data)), self._counter)
            self._counter += 1
            return k

    # --- draws -----------------------------------------------------------------------

    def normal(self, shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32", name: Any = None) -> Tensor:
        """Normal samples."""
        d = _float_dtype(dtype, "normal")
        return _affine(jax.random.normal(self._next(), _shape(shape), d._np), stddev, mean, d)

    def truncated_normal(self, shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32", name: Any = None) -> Tensor:
        """Normal samples within two standard deviations."""
        d = _float_dtype(dtype, "truncated_normal")
        return _affine(jax.random.truncated_normal(self._next(), -2.0, 2.0, _shape(shape), d._np), stddev, mean, d)

    def uniform(self, shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = "float32", name: Any = None) -> Tensor:
        """Uniform samples in ``[minval, maxval)``; for ints both bounds are needed (or neither: full range)."""
        d = as_dtype(dtype)
        check_width(d._np, "Requested dtype")
        if d.is_integer:
            if (minval is None) != (maxval is None):
                raise ValueError(f"For integer dtype {d!s}, minval and maxval must be both `None` or both non-`None`; "
                                 f"got minval={minval} and maxval={maxval}")
            if maxval is None:
                return self.uniform_full_int(shape, d)
            return Tensor(jax.random.randint(self._next(), _shape(shape), int(minval), int(maxval), d._np))
        hi = 1.0 if maxval is None else maxval
        z = jax.random.uniform(self._next(), _shape(shape), d._np)
        return _affine(z, float(hi) - float(minval), float(minval), d)

    def uniform_full_int(self, shape: Any, dtype: Any = "uint64", name: Any = None) -> Tensor:
        """Integers uniform over the whole range of ``dtype``."""
        d = as_dtype(dtype)
        check_width(d._np, "Requested dtype")
        bits = jax.random.bits(self._next(), _shape(shape), dtype=np.dtype(f"uint{d.size * 8}"))
        return Tensor(bits.view(d._np) if d._np != bits.dtype else bits)

    def binomial(self, shape: Any, counts: Any, probs: Any, dtype: Any = "int32", name: Any = None) -> Tensor:
        """Binomial samples with ``counts`` trials of success probability ``probs``."""
        d = as_dtype(dtype)
        n = jnp.asarray(counts._value if isinstance(counts, Tensor | VariableBase) else counts, jnp.float32)
        p = jnp.asarray(probs._value if isinstance(probs, Tensor | VariableBase) else probs, jnp.float32)
        out = jax.random.binomial(self._next(), jnp.broadcast_to(n, _shape(shape)), jnp.broadcast_to(p, _shape(shape)))
        return Tensor(out.astype(d._np))

    def make_seeds(self, count: int = 1) -> Tensor:
        """``[2, count]`` seeds for ``stateless_*`` ops (int64 in TF; int32 without x64)."""
        dt = np.int64 if x64_enabled() else np.int32
        bits = jax.random.bits(self._next(), (2, int(count)), dtype=np.uint32)
        return Tensor(jnp.asarray(np.asarray(bits).astype(np.int64) & 0x7FFFFFFF).astype(dt))

    def split(self, count: int = 1) -> list:
        """``count`` new, independent generators (this one advances)."""
        out = []
        for _ in range(int(count)):
            k = self._next()
            g = Generator.__new__(Generator)
            g._lock = threading.Lock()
            g._alg = self._alg
            g._key_data = np.asarray(jax.random.key_data(k), dtype=np.uint32)
            g._counter = 0
            out.append(g)
        return out

    def __repr__(self) -> str:
        return f"<tapejax.random.Generator counter={self._counter}>"


_global_generator: list = []


def get_global_generator() -> Generator:
    """The process-wide generator (created from OS entropy on first use), as TF's."""
    if not _global_generator:
        _global_generator.append(Generator.from_non_deterministic_state())
    return _global_generator[0]


def set_global_generator(generator: Generator) -> None:
    """Replace the process-wide generator."""
    _global_generator[:] = [generator]
