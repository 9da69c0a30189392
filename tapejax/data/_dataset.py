"""``tf.data.Dataset``: a lazy pipeline of Python iterators over NumPy arrays."""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import math
import os
import queue
import threading
import weakref
from collections.abc import Callable
from collections.abc import Iterator as PyIterator
from typing import Any

import jax
import numpy as np

from .. import errors
from .._log import get_logger
from .._ops._dtypes import check_width, x64_enabled
from .._tf import _surface as tf
from . import _structure as st

AUTOTUNE = -1
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2
INFINITE = INFINITE_CARDINALITY
UNKNOWN = UNKNOWN_CARDINALITY


def _index_dtype() -> Any:
    # TF counts in int64; under tapejax's x64 rule that is int32 unless x64 is on.
    return np.int64 if x64_enabled() else np.int32


def _card_tensor(n: int) -> Any:
    return tf.constant(n, dtype=tf.int64 if x64_enabled() else tf.int32)


def _int(x: Any, what: str) -> int:
    if isinstance(x, tf.Tensor):
        x = x.numpy()
    try:
        n = int(x)
    except (TypeError, ValueError):
        raise TypeError(f"`{what}` must be an integer (or a scalar integer tensor), got {x!r}.") from None
    if n != x:
        raise TypeError(f"Cannot convert {x!r} to an integer `{what}`: pass a whole number.")
    return n


def _x64_as(flag: bool) -> Any:
    """Context: this thread in ``flag``'s x64 mode. ``with jax.enable_x64():`` holds for its own
    thread only; a pipeline's worker threads follow the thread that iterates it."""
    return jax.enable_x64(flag) if x64_enabled() != flag else contextlib.nullcontext()


def _parallelism(n: Any) -> int:
    if n is None:
        return 1
    n = _int(n, "num_parallel_calls")
    return max(1, os.cpu_count() or 1) if n == AUTOTUNE else max(1, n)


class Dataset:
    """A lazy, re-iterable sequence of elements (``tf.data.Dataset``).

    An element is a tensor or a nested tuple/dict of tensors. Nothing runs until
    the dataset is iterated; each iteration starts from the beginning (a new
    shuffle order, a new pass of the generator). Iterating yields tapejax tensors.

    Example:
        >>> import tapejax as tf
        >>> ds = tf.data.Dataset.from_tensor_slices(([1., 2., 3., 4.], [0, 1, 0, 1]))
        >>> ds = ds.map(lambda x, y: (x * 2.0, y)).batch(3)
        >>> for x, y in ds:
        ...     print(x.numpy(), y.numpy())
        [2. 4. 6.] [0 1 0]
        [8.] [1]
        >>> ds.element_spec
        (TensorSpec(shape=(None,), dtype=tf.float32, name=None), TensorSpec(shape=(None,), dtype=tf.int32, name=None))
    """

    _name = "Dataset"

    def __init__(self, make: Callable[[], PyIterator], spec: Any, card: Any, name: str) -> None:
        # ``make`` returns a fresh Python iterator of NumPy elements; ``spec`` and ``card``
        # are values or zero-argument callables (evaluated once, when first asked).
        self._make = make
        # Set by map/filter: (parent, per-element function), fused by interleave/batch.
        self._per_element: Any = None
        self._spec_v: Any = spec
        self._card_v: Any = card
        self._name = name

    # --- what the dataset is --------------------------------------------------------

    @property
    def element_spec(self) -> Any:
        """The structure of ``tf.TensorSpec`` of one element.

        Example:
            >>> import tapejax as tf
            >>> tf.data.Dataset.from_tensor_slices({"x": [[1., 2.]], "y": [3]}).element_spec
            {'x': TensorSpec(shape=(2,), dtype=tf.float32, name=None), 'y': TensorSpec(shape=(), dtype=tf.int32, name=None)}
        """
        if callable(self._spec_v):
            self._spec_v = self._spec_v()
        return self._spec_v

    def _card(self) -> int:
        if callable(self._card_v):
            self._card_v = self._card_v()
        return self._card_v

    def cardinality(self) -> Any:
        """The number of elements as a scalar tensor, or ``tf.data.INFINITE_CARDINALITY`` (-1) or
        ``tf.data.UNKNOWN_CARDINALITY`` (-2) when that is not known without iterating.

        Example:
            >>> import tapejax as tf
            >>> ds = tf.data.Dataset.range(10)
            >>> int(ds.batch(3).cardinality()), int(ds.repeat().cardinality()), int(ds.filter(lambda x: x > 2).cardinality())
            (4, -1, -2)
        """
        return _card_tensor(self._card())

    def __len__(self) -> int:
        n = self._card()
        if n == INFINITE:
            raise TypeError("The dataset is infinite.")
        if n == UNKNOWN:
            raise TypeError("The dataset length is unknown.")
        return n

    def __bool__(self) -> bool:
        return True  # as TF: never falls back on __len__, which may raise

    def __repr__(self) -> str:
        return f"<{self._name} element_spec={self.element_spec!r}>"

    def _elements(self) -> PyIterator:
        return self._make()

    def __iter__(self) -> Iterator:
        return Iterator(self)

    def as_numpy_iterator(self) -> PyIterator:
        """Iterate over the elements as NumPy arrays (scalars as NumPy scalars).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(3).as_numpy_iterator()]
            [0, 1, 2]
        """
        for e in self._elements():
            yield st.to_numpy_out(e)

    # --- sources ----------------------------------------------------------------------

    @staticmethod
    def from_tensor_slices(tensors: Any, name: str | None = None) -> Dataset:
        """A dataset of the slices of ``tensors`` along their first dimension.

        Every component must have the same first dimension (``ValueError`` otherwise, as TF).

        Example:
            >>> import numpy as np, tapejax as tf
            >>> ds = tf.data.Dataset.from_tensor_slices((np.ones((3, 2), np.float32), [7, 8, 9]))
            >>> x, y = next(iter(ds))
            >>> x.shape, int(y)
            (TensorShape([2]), 7)
        """
        if tensors is None or (isinstance(tensors, tuple | dict) and not st.flatten(tensors)):
            raise ValueError("Invalid `element`. `element` should not be empty.")
        arrays = st.map_structure(st.to_numpy, tensors)
        flat = st.flatten(arrays)
        for a in flat:
            if a.ndim == 0:
                raise ValueError("Unbatching a tensor is only supported for rank >= 1")
        n = flat[0].shape[0]
        for a in flat[1:]:
            if a.shape[0] != n:
                raise ValueError(f"Dimensions {n} and {a.shape[0]} are not compatible")
        spec = st.map_structure(lambda a: tf.TensorSpec(a.shape[1:], tf.as_dtype(a.dtype)), arrays)

        def make() -> PyIterator:
            for i in range(n):
                yield st.pack_as(arrays, [a[i, ...] for a in flat])

        return Dataset(make, spec, n, "_TensorSliceDataset")

    @staticmethod
    def from_tensors(tensors: Any, name: str | None = None) -> Dataset:
        """A dataset of one element, ``tensors``.

        Example:
            >>> import tapejax as tf
            >>> [x.tolist() for x in tf.data.Dataset.from_tensors([1, 2]).as_numpy_iterator()]
            [[1, 2]]
        """
        element = st.map_structure(st.to_numpy, tensors)
        spec = st.map_structure(st.spec_of, element)
        return Dataset(lambda: iter([element]), spec, 1, "_TensorDataset")

    @staticmethod
    def range(*args: Any, output_type: Any = None, name: str | None = None) -> Dataset:
        """``range(stop)``, ``range(start, stop[, step])`` as a dataset of integer scalars.

        TF counts in int64; tapejax gives int32 unless x64 is enabled (the x64 rule).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(1, 8, 3)]
            [1, 4, 7]
        """
        if not 1 <= len(args) <= 3:
            raise ValueError(f"Invalid `args`. The length of `args` should be between 1 and 3 but was {len(args)}.")
        start, stop, step = (0, _int(args[0], "stop"), 1) if len(args) == 1 else (
            _int(args[0], "start"), _int(args[1], "stop"), _int(args[2], "step") if len(args) == 3 else 1)
        if step == 0:
            raise errors.InvalidArgumentError("step must be a non-zero integer.")
        dtype = _index_dtype() if output_type is None else tf.as_dtype(output_type)._np
        check_width(np.dtype(dtype), "Dataset.range output_type")
        r = range(start, stop, step)

        def make() -> PyIterator:
            for i in r:
                yield np.array(i, dtype)

        return Dataset(make, tf.TensorSpec([], tf.as_dtype(dtype)), len(r), "_RangeDataset")

    @staticmethod
    def zip(*args: Any, datasets: Any = None, name: str | None = None) -> Dataset:
        """Zip datasets (a nested tuple/dict of datasets, or several positional ones) element-wise;
        stops with the shortest.

        Example:
            >>> import tapejax as tf
            >>> a, b = tf.data.Dataset.range(3), tf.data.Dataset.range(10, 12)
            >>> [(int(x), int(y)) for x, y in tf.data.Dataset.zip(a, b)]
            [(0, 10), (1, 11)]
        """
        if datasets is None:
            if not args:
                raise TypeError("Must pass at least one dataset to `zip`.")
            datasets = args[0] if len(args) == 1 else tuple(args)
        elif args:
            raise TypeError("Both `*args` and `datasets` cannot be set.")
        if isinstance(datasets, list):
            raise TypeError("Invalid input to `zip`. Inputs are expected to be (nested) structures of "
                            "`tf.data.Dataset` objects. Python `list` is not supported and you should use `tuple` "
                            "instead.")
        flat = st.flatten(datasets)
        for d in flat:
            if not isinstance(d, Dataset):
                raise TypeError(f"Invalid `datasets`. `datasets` must be a nested structure of tf.data.Dataset "
                                f"objects, got {type(d).__name__}.")

        def make() -> PyIterator:
            its = [d._elements() for d in flat]
            while True:
                out = []
                for it in its:
                    try:
                        out.append(next(it))
                    except StopIteration:
                        return
                yield st.pack_as(datasets, out)

        def card() -> int:
            result = INFINITE
            for d in flat:
                n = d._card()
                if n == UNKNOWN:
                    return UNKNOWN
                if n != INFINITE:
                    result = n if result == INFINITE else min(result, n)
            return result

        return Dataset(make, lambda: st.pack_as(datasets, [d.element_spec for d in flat]), card, "_ZipDataset")

    @staticmethod
    def from_generator(generator: Callable, output_types: Any = None, output_shapes: Any = None, args: Any = None,
                       output_signature: Any = None, name: str | None = None) -> Dataset:
        """A dataset whose elements a Python generator yields; ``generator`` is called anew for
        every iteration. Describe the elements with ``output_signature`` (a structure of
        ``tf.TensorSpec``) or with ``output_types`` (and optionally ``output_shapes``).

        Example:
            >>> import tapejax as tf
            >>> def gen():
            ...     for i in range(3):
            ...         yield [1.0] * i, i
            >>> ds = tf.data.Dataset.from_generator(
            ...     gen, output_signature=(tf.TensorSpec([None], tf.float32), tf.TensorSpec([], tf.int32)))
            >>> [int(n) for _, n in ds]
            [0, 1, 2]
        """
        if not callable(generator):
            raise TypeError("`generator` must be a Python callable.")
        if output_signature is not None:
            if output_types is not None or output_shapes is not None:
                raise TypeError("The `output_types` and `output_shapes` arguments can not be used together with "
                                "the `output_signature` argument.")
            for s in st.flatten(output_signature):
                if not isinstance(s, tf.TensorSpec):
                    raise TypeError(f"`output_signature` must contain objects that are subclass of `tf.TypeSpec` "
                                    f"but found {type(s)} which is not.")
            spec = output_signature
        else:
            if output_types is None:
                raise TypeError("The `output_types` argument can not be None when `output_signature` is None.")
            if output_shapes is None:
                spec = st.map_structure(lambda t: tf.TensorSpec(None, t), output_types)
            else:
                shapes = st.pack_as(output_types, _flatten_shapes(output_types, output_shapes))
                spec = st.map_structure(lambda t, s: tf.TensorSpec(s, t), output_types, shapes)
        for s in st.flatten(spec):
            check_width(s.dtype._np, "from_generator output dtype")
        # output_types alone: any shape (TF's unknown rank).
        shaped = output_signature is not None or output_shapes is not None
        call_args = tuple(st.to_numpy(a) for a in args) if args is not None else ()

        def convert(value: Any) -> Any:
            value = st.normalize(value) if isinstance(spec, tuple | dict) else value
            if not st.same_structure(spec, value):
                raise errors.InvalidArgumentError(
                    f"TypeError: `generator` yielded an element that did not match the expected structure. "
                    f"The expected structure was {spec}, but the yielded element was {value!r}.")

            def leaf(s: Any, v: Any) -> np.ndarray:
                try:
                    a = np.asarray(v._value if isinstance(v, tf.Tensor) else v, dtype=s.dtype._np)
                except (TypeError, ValueError, OverflowError) as e:
                    raise errors.InvalidArgumentError(
                        f"TypeError: `generator` yielded an element that could not be converted to the expected "
                        f"type. The expected type was {s.dtype.name}, but the yielded element was {v!r}. ({e})"
                    ) from None
                if shaped and not s.shape.is_compatible_with(a.shape):
                    raise errors.InvalidArgumentError(
                        f"TypeError: `generator` yielded an element of shape {a.shape} where an element of shape "
                        f"{tuple(s.shape.as_list())} was expected.")
                return a

            return st.map_structure(leaf, spec, value)

        def make() -> PyIterator:
            with st.isolated():
                it = iter(generator(*call_args))
            while True:
                with st.isolated():
                    try:
                        v = next(it)
                    except StopIteration:
                        return
                yield convert(v)

        return Dataset(make, spec, UNKNOWN, "_FlatMapDataset")

    @staticmethod
    def counter(start: Any = 0, step: Any = 1, dtype: Any = None, name: str | None = None) -> Dataset:
        """The infinite count ``start, start + step, ...`` (int64 in TF; the x64 rule here).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.counter(5, 2).take(3)]
            [5, 7, 9]
        """
        a, b = _int(start, "start"), _int(step, "step")
        np_dtype = _index_dtype() if dtype is None else tf.as_dtype(dtype)._np
        check_width(np.dtype(np_dtype), "Dataset.counter dtype")
        return Dataset(lambda: (np.array(i, np_dtype) for i in itertools.count(a, b)),
                       tf.TensorSpec([], tf.as_dtype(np_dtype)), INFINITE, "_CounterDataset")

    @staticmethod
    def choose_from_datasets(datasets: Any, choice_dataset: Dataset, stop_on_empty_dataset: bool = True) -> Dataset:
        """Take each element from ``datasets[i]`` for the ``i`` that ``choice_dataset`` yields.

        Example:
            >>> import tapejax as tf
            >>> a, b = tf.data.Dataset.range(3), tf.data.Dataset.range(10, 13)
            >>> choice = tf.data.Dataset.range(2).repeat(2)  # int64 in TF (the x64 rule here)
            >>> [int(x) for x in tf.data.Dataset.choose_from_datasets([a, b], choice)]
            [0, 10, 1, 11]
        """
        datasets = list(datasets)
        if not datasets:
            raise ValueError("Invalid `datasets`. `datasets` should not be empty.")
        cs = choice_dataset.element_spec
        ok_dtypes = (tf.int64,) if x64_enabled() else (tf.int64, tf.int32)
        if not isinstance(cs, tf.TensorSpec) or cs.dtype not in ok_dtypes or cs.shape.rank != 0:
            raise TypeError(f"Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar `tf.int64` "
                            f"tensors but are {cs}.")
        spec = _common_spec(datasets)

        def make() -> PyIterator:
            its = [d._elements() for d in datasets]
            live = [True] * len(its)
            for c in choice_dataset._elements():
                i = int(c)
                if not 0 <= i < len(its):
                    raise errors.InvalidArgumentError(f"Selector index out of range: {i} not in [0, {len(its)}).")
                if not live[i]:
                    if stop_on_empty_dataset:
                        return
                    continue
                try:
                    yield next(its[i])
                except StopIteration:
                    live[i] = False
                    if stop_on_empty_dataset:
                        return

        return Dataset(make, spec, lambda: _directed_card(datasets), "_DirectedInterleaveDataset")

    @staticmethod
    def sample_from_datasets(datasets: Any, weights: Any = None, seed: int | None = None,
                             stop_on_empty_dataset: bool = False, rerandomize_each_iteration: Any = None) -> Dataset:
        """Draw each element from one of ``datasets``, picked at random with ``weights``
        (uniform by default); an exhausted dataset drops out (or ends it all with
        ``stop_on_empty_dataset``). The draws are not TF's random numbers.

        Example:
            >>> import tapejax as tf
            >>> ds = tf.data.Dataset.sample_from_datasets(
            ...     [tf.data.Dataset.range(3), tf.data.Dataset.range(10, 13)], seed=1)
            >>> sorted(int(x) for x in ds)
            [0, 1, 2, 10, 11, 12]
        """
        datasets = list(datasets)
        if not datasets:
            raise ValueError("Invalid `datasets`. `datasets` should not be empty.")
        if weights is None:
            w = np.ones(len(datasets))
        elif isinstance(weights, tf.Tensor):
            w = np.asarray(weights._value, np.float64)
            if w.shape != (len(datasets),):
                raise ValueError(f"Invalid `weights`. The shape of `weights` should be compatible with "
                                 f"`[len(datasets)]` but is {tf.TensorShape(w.shape)}.")
        else:
            if len(weights) != len(datasets):
                raise ValueError(f"Invalid `weights`. `weights` should have the same length as `datasets` but got "
                                 f"`len(weights)={len(weights)}` vs. `len(datasets)={len(datasets)}`.")
            # As TF: constant weights drop the datasets they never pick, and one dataset left is
            # the result itself (its cardinality included).
            kept = [(d, float(x)) for d, x in zip(datasets, weights) if float(x) > 0]
            datasets, w = ([d for d, _ in kept], np.array([x for _, x in kept])) if kept else (
                [datasets[0].take(0)], np.ones(1))
        spec = _common_spec(datasets)
        if len(datasets) == 1:
            return datasets[0]
        rng = _Seeds(seed, reshuffle=bool(rerandomize_each_iteration) if rerandomize_each_iteration is not None
                     else True)

        def make() -> PyIterator:
            r = rng.next()
            its = [d._elements() for d in datasets]
            live = w > 0
            while live.any():
                p = np.where(live, w, 0.0)
                i = int(r.choice(len(its), p=p / p.sum()))
                try:
                    yield next(its[i])
                except StopIteration:
                    if stop_on_empty_dataset:
                        return
                    live[i] = False

        return Dataset(make, spec, lambda: _directed_card(datasets), "_DirectedInterleaveDataset")

    # --- transformations --------------------------------------------------------------

    def map(self, map_func: Callable, num_parallel_calls: Any = None, deterministic: Any = None,
            name: str | None = None) -> Dataset:
        """Apply ``map_func`` to every element; a tuple element is unpacked into arguments.

        ``map_func`` gets tapejax tensors. It is traced and compiled once, as TF traces it
        (``tapejax.function``: a variable it reads is read for every element, no tape records
        it); a function that needs concrete values (``.numpy()``) or an input with unknown
        dimensions runs eagerly per element instead. With ``num_parallel_calls`` (a number or
        ``tf.data.AUTOTUNE``) elements are mapped on a thread pool; the output order is kept.

        Example:
            >>> import tapejax as tf
            >>> ds = tf.data.Dataset.range(4).map(lambda x: tf.cast(x, tf.float32) ** 2,
            ...                                   num_parallel_calls=tf.data.AUTOTUNE)
            >>> [float(v) for v in ds]
            [0.0, 1.0, 4.0, 9.0]
        """
        parent = self
        workers = _parallelism(num_parallel_calls)
        traced = st.trace_spec(map_func, self.element_spec)
        fn = st.Applier(map_func, compiled=traced is not None and _fully_defined(self.element_spec), like=traced)

        def apply(e: Any) -> Any:
            return st.from_user(fn(e))

        def apply_as(flag: bool, e: Any) -> Any:
            with _x64_as(flag):
                return apply(e)

        def make() -> PyIterator:
            if workers == 1:
                for e in parent._elements():
                    yield apply(e)
                return
            # Imported here: concurrent.futures costs `import tapejax` a few milliseconds.
            from concurrent.futures import ThreadPoolExecutor

            x64 = x64_enabled()
            with ThreadPoolExecutor(workers) as pool:
                pending: collections.deque = collections.deque()
                try:
                    for e in parent._elements():
                        pending.append(pool.submit(apply_as, x64, e))
                        if len(pending) >= 2 * workers:
                            yield pending.popleft().result()
                    while pending:
                        yield pending.popleft().result()
                finally:
                    for f in pending:
                        f.cancel()

        def spec() -> Any:
            if traced is not None:
                return traced
            return _spec_from_first(parent, apply)

        out = Dataset(make, spec, parent._card, "_ParallelMapDataset" if workers > 1 else "_MapDataset")
        out._per_element = (parent, lambda e: [apply(e)])
        return out

    def _predicate(self, predicate: Callable) -> Any:
        # filter and take_while: TF's scalar-bool check at trace time, then one compiled
        # application per element (per-element Python when the spec has unknown dimensions).
        traced = st.trace_spec(predicate, self.element_spec)
        if traced is not None:
            _check_predicate_spec(traced)
        return st.Applier(predicate, compiled=traced is not None and _fully_defined(self.element_spec))

    def filter(self, predicate: Callable, name: str | None = None) -> Dataset:
        """Keep the elements for which ``predicate`` returns a scalar ``tf.bool`` True.

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(6).filter(lambda x: x % 2 == 0)]
            [0, 2, 4]
        """
        parent = self
        fn = self._predicate(predicate)

        def make() -> PyIterator:
            for e in parent._elements():
                if _truth(fn(e)):
                    yield e

        out = Dataset(make, lambda: parent.element_spec, UNKNOWN, "_FilterDataset")
        out._per_element = (parent, lambda e: [e] if _truth(fn(e)) else [])
        return out

    def batch(self, batch_size: Any, drop_remainder: bool = False, num_parallel_calls: Any = None,
              deterministic: Any = None, name: str | None = None) -> Dataset:
        """Stack consecutive elements into batches of ``batch_size`` (the last one smaller
        unless ``drop_remainder``).

        Example:
            >>> import tapejax as tf
            >>> [b.tolist() for b in tf.data.Dataset.range(5).batch(2).as_numpy_iterator()]
            [[0, 1], [2, 3], [4]]
        """
        n = _int(batch_size, "batch_size")
        if n <= 0:
            raise errors.InvalidArgumentError("Batch size must be greater than zero.")
        parent = self

        def make() -> PyIterator:
            for group in _groups(parent._elements(), n, drop_remainder):
                yield _stack(group)

        def spec() -> Any:
            return st.map_structure(lambda s: _batched_spec(s, n if drop_remainder else None), parent.element_spec)

        return Dataset(make, spec, lambda: _batch_card(parent._card(), n, drop_remainder), "_BatchDataset")

    def padded_batch(self, batch_size: Any, padded_shapes: Any = None, padding_values: Any = None,
                     drop_remainder: bool = False, name: str | None = None) -> Dataset:
        """Batch elements of different shapes, padding each component to ``padded_shapes``
        (a dimension of ``None`` or -1: the longest in the batch; default: every unknown
        dimension) with ``padding_values`` (default 0).

        Example:
            >>> import tapejax as tf
            >>> ds = tf.data.Dataset.range(1, 4).map(lambda n: tf.fill([n], n))
            >>> [b.tolist() for b in ds.padded_batch(3).as_numpy_iterator()]
            [[[1, 0, 0], [2, 2, 0], [3, 3, 3]]]
        """
        n = _int(batch_size, "batch_size")
        if n <= 0:
            raise errors.InvalidArgumentError("Batch size must be greater than zero.")
        parent = self

        def shapes() -> Any:
            if padded_shapes is None:
                for s in st.flatten(parent.element_spec):
                    if s.shape.rank is None:
                        raise ValueError("You must provide `padded_shapes` argument because component "
                                         "has unknown rank.")
                return st.map_structure(lambda s: s.shape.as_list(), parent.element_spec)
            flat = _flatten_shapes(parent.element_spec, padded_shapes)
            return st.pack_as(parent.element_spec, [[None if d in (None, -1) else int(d) for d in (
                s.as_list() if isinstance(s, tf.TensorShape) else s)] for s in flat])

        def values() -> list:
            specs = st.flatten(parent.element_spec)
            if padding_values is None:
                return [np.zeros((), s.dtype._np) for s in specs]
            if isinstance(padding_values, tuple | dict):
                flat = st.flatten(padding_values)
            else:
                flat = [padding_values] * len(specs)
            return [np.asarray(v._value if isinstance(v, tf.Tensor) else v, s.dtype._np) for v, s in zip(flat, specs)]

        def make() -> PyIterator:
            target = st.flatten(shapes())
            pads = values()
            for group in _groups(parent._elements(), n, drop_remainder):
                cols = list(zip(*[st.flatten(e) for e in group]))
                out = [_pad_stack(list(c), t, p) for c, t, p in zip(cols, target, pads)]
                yield st.pack_as(group[0], out)

        def spec() -> Any:
            return st.map_structure(lambda s, shp: tf.TensorSpec([n if drop_remainder else None] + list(shp), s.dtype),
                                    parent.element_spec, shapes())

        return Dataset(make, spec, lambda: _batch_card(parent._card(), n, drop_remainder), "_PaddedBatchDataset")

    def unbatch(self, name: str | None = None) -> Dataset:
        """Split each element into the slices along its first dimension (the inverse of ``batch``).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(5).batch(2).unbatch()]
            [0, 1, 2, 3, 4]
        """
        parent = self
        for s in st.flatten(self.element_spec):
            if s.shape.rank == 0:
                raise ValueError("Cannot unbatch an input with scalar components.")
        known = {s.shape[0] for s in st.flatten(self.element_spec) if s.shape.rank and s.shape[0] is not None}
        if len(known) > 1:
            a, b = sorted(known)[:2]
            raise ValueError(f"`unbatch()` is only supported for datasets of elements whose components have a "
                             f"matching leading dimension. Encountered both {a} and {b}.")

        def make() -> PyIterator:
            for e in parent._elements():
                flat = st.flatten(e)
                m = flat[0].shape[0]
                for a in flat[1:]:
                    if a.shape[0] != m:
                        raise errors.InvalidArgumentError(
                            f"Input element must have the same batch size in each component. Component 0 had "
                            f"size {m} but component {flat.index(a)} had size {a.shape[0]}.")
                for i in range(m):
                    yield st.pack_as(e, [a[i, ...] for a in flat])

        def spec() -> Any:
            return st.map_structure(lambda s: tf.TensorSpec(None if s.shape.rank is None else s.shape.as_list()[1:],
                                                            s.dtype), parent.element_spec)

        def card() -> int:
            n = parent._card()
            lead: set[Any] = {s.shape.as_list()[0] if s.shape.rank else None for s in st.flatten(parent.element_spec)}
            if n == INFINITE:
                return INFINITE
            if n == UNKNOWN or len(lead) != 1 or None in lead:
                return UNKNOWN
            return n * lead.pop()

        return Dataset(make, spec, card, "_UnbatchDataset")

    def rebatch(self, batch_size: Any, drop_remainder: bool = False, name: str | None = None) -> Dataset:
        """Re-split a batched dataset into batches of ``batch_size``.

        Example:
            >>> import tapejax as tf
            >>> [b.tolist() for b in tf.data.Dataset.range(5).batch(3).rebatch(2).as_numpy_iterator()]
            [[0, 1], [2, 3], [4]]
        """
        out = self.unbatch().batch(batch_size, drop_remainder)
        out._name = "_RebatchDataset"
        return out

    def shuffle(self, buffer_size: Any, seed: int | None = None, reshuffle_each_iteration: bool = True,
                name: str | None = None) -> Dataset:
        """Shuffle through a buffer of ``buffer_size`` elements, as TF does: the buffer is
        filled, then each output is a uniformly random buffer entry, replaced by the next
        input. A buffer as large as the dataset gives a uniform permutation. Each iteration
        reshuffles unless ``reshuffle_each_iteration=False``; ``seed`` (or
        ``tf.random.set_seed``) makes the orders reproducible (not TF's exact orders).

        Example:
            >>> import tapejax as tf
            >>> ds = tf.data.Dataset.range(5).shuffle(5, seed=1)
            >>> sorted(int(x) for x in ds)
            [0, 1, 2, 3, 4]
        """
        size = _int(buffer_size, "buffer_size")
        if size <= 0 and size != UNKNOWN:
            raise errors.InvalidArgumentError("buffer_size must be greater than zero or UNKNOWN_CARDINALITY")
        parent = self
        seeds = _Seeds(seed, reshuffle_each_iteration)

        def make() -> PyIterator:
            r = seeds.next()
            # buffer_size=UNKNOWN_CARDINALITY: the whole dataset (a uniform permutation).
            n = parent._card()
            limit = size if size > 0 else n if n > 0 else float("inf")
            buf: list = []
            it = parent._elements()
            for e in it:
                buf.append(e)
                if len(buf) >= limit:
                    break
            for e in it:
                i = int(r.integers(len(buf)))
                out, buf[i] = buf[i], e
                yield out
            while buf:
                i = int(r.integers(len(buf)))
                buf[i], buf[-1] = buf[-1], buf[i]
                yield buf.pop()

        return Dataset(make, lambda: parent.element_spec, parent._card, "_ShuffleDataset")

    def repeat(self, count: Any = None, name: str | None = None) -> Dataset:
        """Repeat the dataset ``count`` times (forever when None or -1); each pass iterates
        the input anew (a new shuffle order).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(2).repeat(3)]
            [0, 1, 0, 1, 0, 1]
        """
        c = -1 if count is None else _int(count, "count")
        parent = self

        def make() -> PyIterator:
            for _ in (itertools.count() if c < 0 else range(c)):
                empty = True
                for e in parent._elements():
                    empty = False
                    yield e
                if empty:
                    return

        def card() -> int:
            n = parent._card()
            if c < 0:
                return 0 if n == 0 else INFINITE
            if c == 0:
                return 0
            return n if n in (INFINITE, UNKNOWN) else n * c

        return Dataset(make, lambda: parent.element_spec, card, "_RepeatDataset")

    def take(self, count: Any, name: str | None = None) -> Dataset:
        """The first ``count`` elements (all of them when -1).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(10).take(3)]
            [0, 1, 2]
        """
        c = _int(count, "count")
        parent = self

        def make() -> PyIterator:
            if c < 0:
                yield from parent._elements()
            elif c > 0:
                yield from itertools.islice(parent._elements(), c)

        def card() -> int:
            n = parent._card()
            if n == UNKNOWN:
                return UNKNOWN if c != 0 else 0
            if c < 0:
                return n
            return c if n == INFINITE else min(n, c)

        return Dataset(make, lambda: parent.element_spec, card, "_TakeDataset")

    def skip(self, count: Any, name: str | None = None) -> Dataset:
        """Everything after the first ``count`` elements (nothing when -1).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(5).skip(3)]
            [3, 4]
        """
        c = _int(count, "count")
        parent = self

        def make() -> PyIterator:
            it = parent._elements()
            if c < 0:
                for _ in it:
                    pass
                return
            yield from itertools.islice(it, c, None)

        def card() -> int:
            n = parent._card()
            if n in (INFINITE, UNKNOWN):
                return n
            return 0 if c < 0 else max(0, n - c)

        return Dataset(make, lambda: parent.element_spec, card, "_SkipDataset")

    def prefetch(self, buffer_size: Any, name: str | None = None) -> Dataset:
        """Produce up to ``buffer_size`` elements ahead on a background thread
        (``tf.data.AUTOTUNE``: a small buffer), so the input pipeline overlaps the training step.

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(3).prefetch(tf.data.AUTOTUNE)]
            [0, 1, 2]
        """
        size = _int(buffer_size, "buffer_size")
        if size < 0 and size != AUTOTUNE:
            raise errors.InvalidArgumentError("buffer_size must be >= 0 or tf.data.AUTOTUNE.")
        parent = self
        depth = 2 if size == AUTOTUNE else size

        def make() -> PyIterator:
            if depth == 0:
                return parent._elements()
            return _Prefetcher(parent, depth)

        return Dataset(make, lambda: parent.element_spec, parent._card, "_PrefetchDataset")

    def cache(self, filename: str = "", name: str | None = None) -> Dataset:
        """Keep the elements of the first complete iteration in memory; later iterations
        replay them (the input is not run again). A partial first iteration caches nothing.

        Example:
            >>> import tapejax as tf
            >>> passes = []
            >>> def gen():
            ...     passes.append(1)
            ...     yield from range(3)
            >>> ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([], tf.int32)).cache()
            >>> [int(x) for x in ds], [int(x) for x in ds], len(passes)
            ([0, 1, 2], [0, 1, 2], 1)
        """
        parent = self
        store: dict = {}
        lock = threading.Lock()

        def make() -> PyIterator:
            with lock:
                done = store.get("elements")
            if done is not None:
                yield from done
                return
            seen = []
            for e in parent._elements():
                seen.append(e)
                yield e
            with lock:
                store.setdefault("elements", seen)

        return Dataset(make, lambda: parent.element_spec, parent._card, "_CacheDataset")

    def enumerate(self, start: Any = 0, name: str | None = None) -> Dataset:
        """Pair each element with its index: ``(i, element)`` from ``start``.

        Example:
            >>> import tapejax as tf
            >>> [(int(i), int(x)) for i, x in tf.data.Dataset.range(10, 12).enumerate(start=5)]
            [(5, 10), (6, 11)]
        """
        s = _int(start, "start")
        dtype = _index_dtype()
        counter = Dataset(lambda: (np.array(i, dtype) for i in itertools.count(s)),
                          tf.TensorSpec([], tf.as_dtype(dtype)), INFINITE, "_RangeDataset")
        out = Dataset.zip((counter, self))
        out._name = "_EnumerateDataset"
        return out

    def concatenate(self, dataset: Dataset, name: str | None = None) -> Dataset:
        """The elements of this dataset, then those of ``dataset`` (same structure and dtypes).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(2).concatenate(tf.data.Dataset.range(5, 7))]
            [0, 1, 5, 6]
        """
        a, b = self, dataset
        sa, sb = a.element_spec, b.element_spec
        if not st.same_structure(sa, sb) or any(x.dtype != y.dtype for x, y in zip(st.flatten(sa), st.flatten(sb))):
            raise TypeError(f"Incompatible dataset elements:\n  {sa} vs.   {sb}")
        spec = st.map_structure(st.most_specific_compatible, sa, sb)

        def make() -> PyIterator:
            yield from a._elements()
            yield from b._elements()

        def card() -> int:
            n, m = a._card(), b._card()
            if INFINITE in (n, m):
                return INFINITE
            if UNKNOWN in (n, m):
                return UNKNOWN
            return n + m

        return Dataset(make, spec, card, "_ConcatenateDataset")

    def interleave(self, map_func: Callable, cycle_length: Any = None, block_length: Any = None,
                   num_parallel_calls: Any = None, deterministic: Any = None, name: str | None = None) -> Dataset:
        """Map each element to a dataset and interleave them: ``cycle_length`` of them are open at
        once, ``block_length`` consecutive elements are taken from each in turn (TF's order).

        Example:
            >>> import tapejax as tf
            >>> ds = tf.data.Dataset.range(1, 4).interleave(
            ...     lambda x: tf.data.Dataset.from_tensors(x).repeat(2), cycle_length=2, block_length=1)
            >>> [int(x) for x in ds]
            [1, 2, 1, 2, 3, 3]
        """
        cycle = _parallelism(AUTOTUNE) if cycle_length is None or _int(cycle_length, "cycle_length") == AUTOTUNE \
            else _int(cycle_length, "cycle_length")
        block = 1 if block_length is None else _int(block_length, "block_length")
        if cycle <= 0:
            raise errors.InvalidArgumentError("cycle_length must be > 0 or tf.data.AUTOTUNE.")
        if block <= 0:
            raise errors.InvalidArgumentError("block_length must be > 0.")
        parent = self

        def open_(e: Any) -> PyIterator:
            d = st.call(map_func, e)
            if not isinstance(d, Dataset):
                raise TypeError(f"The `map_func` argument of interleave must return a tf.data.Dataset object, "
                                f"got {type(d).__name__}.")
            return d._elements()

        def make() -> PyIterator:
            inp = parent._elements()
            slots: list = [None] * cycle
            index = block_index = num_open = 0
            end_of_input = False
            while not end_of_input or num_open > 0:
                if slots[index] is not None:
                    try:
                        v = next(slots[index])
                    except StopIteration:
                        slots[index] = None
                        num_open -= 1
                        index, block_index = (index + 1) % cycle, 0
                        continue
                    block_index += 1
                    if block_index == block:
                        index, block_index = (index + 1) % cycle, 0
                    yield v
                elif not end_of_input:
                    try:
                        e = next(inp)
                    except StopIteration:
                        end_of_input = True
                        continue
                    slots[index] = open_(e)
                    num_open += 1
                else:
                    index, block_index = (index + 1) % cycle, 0

        def spec() -> Any:
            for e in parent._elements():
                return st.call(map_func, e).element_spec
            raise ValueError("Cannot find the element_spec of an interleave over an empty dataset.")

        return Dataset(make, spec, UNKNOWN, "_InterleaveDataset")

    def flat_map(self, map_func: Callable, name: str | None = None) -> Dataset:
        """Map each element to a dataset and chain them (``interleave`` with ``cycle_length=1``).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(3).flat_map(lambda n: tf.data.Dataset.range(n))]
            [0, 0, 1]
        """
        out = self.interleave(map_func, cycle_length=1, block_length=1)
        out._name = "_FlatMapDataset"
        return out

    def shard(self, num_shards: Any, index: Any, name: str | None = None) -> Dataset:
        """Every ``num_shards``-th element, starting at ``index``.

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(7).shard(3, 1)]
            [1, 4]
        """
        k, i = _int(num_shards, "num_shards"), _int(index, "index")
        if k <= 0:
            raise errors.InvalidArgumentError(f"Number of shards must be greater than zero (currently num_shards = {k}).")
        if not 0 <= i < k:
            raise errors.InvalidArgumentError(f"Index must be between 0 and {k - 1} (currently index = {i}).")
        parent = self

        def card() -> int:
            n = parent._card()
            return n if n in (INFINITE, UNKNOWN) else n // k + (1 if n % k > i else 0)

        return Dataset(lambda: itertools.islice(parent._elements(), i, None, k), lambda: parent.element_spec, card,
                       "_ShardDataset")

    def reduce(self, initial_state: Any, reduce_func: Callable, name: str | None = None) -> Any:
        """Fold the dataset: ``state = reduce_func(state, element)`` from ``initial_state``.

        Example:
            >>> import numpy as np, tapejax as tf
            >>> int(tf.data.Dataset.range(5).reduce(np.int64(0), lambda s, x: s + x))
            10
        """
        state = st.map_structure(st.to_numpy, initial_state)
        for e in self._elements():
            with st.isolated():
                out = reduce_func(st.to_tensors(state), st.to_tensors(e))
            new = st.from_user(out)
            if not st.same_structure(state, new):
                raise TypeError(f"The element types for the new state must match the initial state. Expected "
                                f"{initial_state!r}; got {out!r}.")
            state = new
        return st.to_tensors(state)

    def apply(self, transformation_func: Callable) -> Dataset:
        """``transformation_func(self)``, which must return a dataset (for chaining).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(5).apply(lambda d: d.skip(3))]
            [3, 4]
        """
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError(f"`transformation_func` must return a `tf.data.Dataset` object. Got {type(out)}.")
        return out

    def window(self, size: Any, shift: Any = None, stride: Any = 1, drop_remainder: bool = False,
               name: str | None = None) -> Dataset:
        """Windows of ``size`` elements (every ``stride``-th), one starting every ``shift``
        elements; each window is a dataset (a structure of datasets for structured elements),
        typically flattened with ``flat_map(lambda w: w.batch(size))``.

        Example:
            >>> import tapejax as tf
            >>> ds = tf.data.Dataset.range(6).window(3, shift=1, drop_remainder=True)
            >>> [b.tolist() for b in ds.flat_map(lambda w: w.batch(3)).as_numpy_iterator()]
            [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]
        """
        size_, shift_, stride_ = _int(size, "size"), _int(size if shift is None else shift, "shift"), _int(
            stride, "stride")
        for what, v in (("size", size_), ("shift", shift_), ("stride", stride_)):
            if v <= 0:
                raise errors.InvalidArgumentError(f"Window {what} must be greater than zero, but got {v}.")
        parent = self
        span = (size_ - 1) * stride_ + 1  # input elements one full window covers

        def window_of(items: list) -> Any:
            spec = parent.element_spec
            flat = st.flatten(spec)
            cols = list(zip(*[st.flatten(e) for e in items]))
            return st.pack_as(spec, [Dataset(functools.partial(iter, c), s, len(c), "_VariantDataset")
                                     for c, s in zip(cols, flat)])

        def make() -> PyIterator:
            buf: collections.deque = collections.deque()  # (index, element) from the next window's start
            start = 0
            n = 0
            for e in parent._elements():
                if n >= start:  # a shift longer than a window skips elements
                    buf.append((n, e))
                n += 1
                while n >= start + span:
                    yield window_of([x for i, x in buf if start <= i < start + span and (i - start) % stride_ == 0])
                    start += shift_
                    while buf and buf[0][0] < start:
                        buf.popleft()
            while not drop_remainder and start < n:
                yield window_of([x for i, x in buf if i >= start and (i - start) % stride_ == 0][:size_])
                start += shift_
                while buf and buf[0][0] < start:
                    buf.popleft()

        def card() -> int:
            n = parent._card()
            if n in (INFINITE, UNKNOWN):
                return n
            if drop_remainder:
                return 0 if n < span else (n - span) // shift_ + 1
            return math.ceil(n / shift_)

        return Dataset(make, lambda: st.map_structure(DatasetSpec, parent.element_spec), card, "_WindowDataset")

    def ignore_errors(self, log_warning: bool = False, name: str | None = None) -> Dataset:
        """Drop the elements whose production raised an error. An error in the last ``map`` or
        ``filter`` function skips that element and goes on; an error further up (a generator that
        raised) ends the dataset, since a Python iterator that raised cannot go on.

        Example:
            >>> import tapejax as tf
            >>> def inverse(x):
            ...     if int(x.numpy()) == 2:
            ...         raise ValueError("no inverse")
            ...     return 1.0 / tf.cast(x - 2, tf.float32)
            >>> [float(v) for v in tf.data.Dataset.range(4).map(inverse).ignore_errors()]
            [-0.5, -1.0, 1.0]
        """
        per_element = getattr(self, "_per_element", None)
        parent = self

        def make() -> PyIterator:
            if per_element is not None:
                source, step = per_element
                for e in source._elements():
                    try:
                        outs = step(e)
                    except Exception as ex:  # noqa: BLE001  (TF's ignore_errors drops any error)
                        _log_ignored(ex, log_warning)
                        continue
                    yield from outs
                return
            it = parent._elements()
            while True:
                try:
                    e = next(it)
                except StopIteration:
                    return
                except Exception as ex:  # noqa: BLE001
                    _log_ignored(ex, log_warning)
                    return
                yield e

        return Dataset(make, lambda: parent.element_spec, UNKNOWN, "_IgnoreErrorsDataset")

    def take_while(self, predicate: Callable, name: str | None = None) -> Dataset:
        """The elements up to (not including) the first for which ``predicate`` is False.

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(10).take_while(lambda x: x < 3)]
            [0, 1, 2]
        """
        parent = self
        fn = self._predicate(predicate)

        def make() -> PyIterator:
            for e in parent._elements():
                if not _truth(fn(e)):
                    return
                yield e

        return Dataset(make, lambda: parent.element_spec, UNKNOWN, "_TakeWhileDataset")

    def scan(self, initial_state: Any, scan_func: Callable, name: str | None = None) -> Dataset:
        """A running state: ``scan_func(state, element)`` returns ``(new_state, output)``; the
        dataset yields the outputs.

        Example:
            >>> import numpy as np, tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.range(5).scan(np.int64(0), lambda s, x: (s + x, s + x))]
            [0, 1, 3, 6, 10]
        """
        parent = self
        init = st.map_structure(st.to_numpy, initial_state)

        def make() -> PyIterator:
            state = init
            for e in parent._elements():
                with st.isolated():
                    out = scan_func(st.to_tensors(state), st.to_tensors(e))
                out = st.normalize(out)
                if not isinstance(out, tuple) or len(out) != 2:
                    raise TypeError("The `scan_func` argument must return a pair (new_state, output_element).")
                new = st.from_user(out[0])
                if not st.same_structure(state, new):
                    raise TypeError(f"The element types for the new state must match the initial state. Expected "
                                    f"{initial_state!r}; got {out[0]!r}.")
                state = new
                yield st.from_user(out[1])

        def spec() -> Any:
            for e in make():
                return st.map_structure(st.spec_of, e)
            raise ValueError("Cannot find the element_spec of a scan over an empty dataset.")

        return Dataset(make, spec, parent._card, "_ScanDataset")

    def unique(self, name: str | None = None) -> Dataset:
        """Each distinct element once, in the order first seen (integer elements).

        Example:
            >>> import tapejax as tf
            >>> [int(x) for x in tf.data.Dataset.from_tensor_slices([1, 3, 1, 2, 3]).unique()]
            [1, 3, 2]
        """
        spec = self.element_spec
        if not isinstance(spec, tf.TensorSpec) or spec.dtype not in (tf.int32, tf.int64):
            dtype = spec.dtype if isinstance(spec, tf.TensorSpec) else spec
            raise TypeError(f"`tf.data.Dataset.unique` does not support type {dtype} -- only `tf.int32`, "
                            f"`tf.int64`, and `tf.string` are supported.")
        parent = self

        def make() -> PyIterator:
            seen = set()
            for e in parent._elements():
                key = (e.shape, e.tobytes())
                if key not in seen:
                    seen.add(key)
                    yield e

        return Dataset(make, spec, UNKNOWN, "_UniqueDataset")

    def get_single_element(self, name: str | None = None) -> Any:
        """The dataset's only element (``InvalidArgumentError`` if it has none or several).

        Example:
            >>> import tapejax as tf
            >>> print(tf.data.Dataset.from_tensors([1.0, 2.0]).get_single_element())
            tf.Tensor([1. 2.], shape=(2,), dtype=float32)
        """
        it = self._elements()
        try:
            e = next(it)
        except StopIteration:
            raise errors.InvalidArgumentError("Dataset was empty.") from None
        for _ in it:
            raise errors.InvalidArgumentError("Dataset had more than one element.")
        return st.to_tensors(e)

    def options(self) -> Options:
        """The dataset's options (accepted for compatibility; tapejax has nothing to tune)."""
        return Options()

    def with_options(self, options: Any, name: str | None = None) -> Dataset:
        """Accepted for compatibility: returns the dataset unchanged (no option changes its elements)."""
        return self


class DatasetSpec:
    """The spec of a dataset that is an element of another (``window``'s elements): its
    ``element_spec`` (``tf.data.DatasetSpec``).

    Example:
        >>> import tapejax as tf
        >>> tf.data.Dataset.range(5).window(2).element_spec
        DatasetSpec(TensorSpec(shape=(), dtype=tf.int32, name=None), TensorShape([]))
    """

    def __init__(self, element_spec: Any, dataset_shape: Any = ()):
        self.element_spec = element_spec
        self.dataset_shape = tf.TensorShape(dataset_shape)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatasetSpec) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return f"DatasetSpec({self.element_spec!r}, {self.dataset_shape!r})"


st.DATASET_SPEC[:] = [DatasetSpec]


class Options:
    """``tf.data.Options``: accepted, with no effect (the pipeline runs in Python)."""

    def __init__(self) -> None:
        self.deterministic = None
        self.experimental_deterministic = None


class Iterator:
    """An iterator over a ``Dataset`` (``iter(ds)``): ``next(it)`` raises ``StopIteration`` at
    the end, ``it.get_next()`` TF's ``tf.errors.OutOfRangeError``.

    Example:
        >>> import tapejax as tf
        >>> it = iter(tf.data.Dataset.range(2))
        >>> int(next(it)), int(it.get_next())
        (0, 1)
        >>> try:
        ...     it.get_next()
        ... except tf.errors.OutOfRangeError:
        ...     print("end of sequence")
        end of sequence
    """

    def __init__(self, dataset: Dataset) -> None:
        self._dataset = dataset
        self._it = dataset._elements()
        self._lock = threading.Lock()

    @property
    def element_spec(self) -> Any:
        return self._dataset.element_spec

    def __iter__(self) -> Iterator:
        return self

    def __next__(self) -> Any:
        with self._lock:  # a Python generator must not be advanced by two threads at once
            e = next(self._it)
        return st.to_tensors(e)

    def get_next(self, name: str | None = None) -> Any:
        try:
            return self.__next__()
        except StopIteration:
            raise errors.OutOfRangeError("End of sequence") from None


# --- helpers --------------------------------------------------------------------------------


def _flatten_shapes(structure: Any, shapes: Any) -> list:
    """``shapes`` (a structure of shapes matching ``structure``, whose leaves are lists) flattened."""
    if isinstance(structure, tuple | dict):
        if isinstance(structure, dict):
            if not isinstance(shapes, dict) or sorted(shapes) != sorted(structure):
                raise ValueError(f"The shapes {shapes!r} do not match the structure {structure!r}.")
            return [x for k in sorted(structure) for x in _flatten_shapes(structure[k], shapes[k])]
        if not isinstance(shapes, tuple | list) or len(shapes) != len(structure):
            raise ValueError(f"The shapes {shapes!r} do not match the structure {structure!r}.")
        return [x for s, v in zip(structure, shapes) for x in _flatten_shapes(s, v)]
    return [tf.TensorShape(shapes)]


def _groups(it: PyIterator, n: int, drop_remainder: bool) -> PyIterator:
    while True:
        group = list(itertools.islice(it, n))
        if not group or (drop_remainder and len(group) < n):
            return
        yield group


def _stack(group: list) -> Any:
    flats = [st.flatten(e) for e in group]
    out = []
    for c, col in enumerate(zip(*flats)):
        first = col[0].shape
        for j, a in enumerate(col):
            if a.shape != first:
                raise errors.InvalidArgumentError(
                    f"Cannot batch tensors with different shapes in component {c}. First element had shape "
                    f"{list(first)} and element {j} had shape {list(a.shape)}.")
        out.append(np.stack(col))
    return st.pack_as(group[0], out)


def _pad_stack(col: list, target: list, pad: np.ndarray) -> np.ndarray:
    rank = col[0].ndim
    for a in col:
        if a.ndim != rank or len(target) != rank:
            raise errors.InvalidArgumentError(
                f"All elements in a batch must have the same rank as the padded shape: expected {len(target)}, "
                f"got {a.ndim}.")
    dims = []
    for k, t in enumerate(target):
        longest = max(a.shape[k] for a in col)
        if t is not None and longest > t:
            raise errors.DataLossError(
                f"Attempted to pad to a smaller size than the input element: dimension {k} has size {longest}, "
                f"padded size {t}.")
        dims.append(longest if t is None else t)
    out = np.full([len(col)] + dims, pad, dtype=col[0].dtype)
    for i, a in enumerate(col):
        out[(i,) + tuple(slice(0, d) for d in a.shape)] = a
    return out


def _batched_spec(s: Any, lead: int | None) -> Any:
    return tf.TensorSpec(None if s.shape.rank is None else [lead] + s.shape.as_list(), s.dtype)


def _batch_card(n: int, b: int, drop: bool) -> int:
    if n in (INFINITE, UNKNOWN):
        return n
    return n // b if drop else math.ceil(n / b)


class _Seeds:
    """The random generator of each iteration of a shuffling dataset, under TF's seed rules: the
    op seed and ``tf.random.set_seed``'s global seed (``tf.random.get_seed``) fix the sequence of
    orders; a new iteration gets the next one unless it is told to repeat the first."""

    def __init__(self, seed: Any, reshuffle: bool):
        g, o = tf.random.get_seed(seed)  # both seeds, or neither (tf.random.get_seed's contract)
        self.seeded = g is not None and o is not None
        self.key: list[Any] = ([int(g) & 0xFFFFFFFF, int(o) & 0xFFFFFFFF] if g is not None and o is not None
                               else [np.random.SeedSequence().entropy])
        self.reshuffle = reshuffle
        self.epochs = itertools.count()

    def next(self) -> np.random.Generator:
        if self.reshuffle and not self.seeded:
            return np.random.default_rng()
        return np.random.default_rng([*self.key, next(self.epochs) if self.reshuffle else 0])


def _common_spec(datasets: list) -> Any:
    specs = [d.element_spec for d in datasets]
    out = specs[0]
    for s in specs[1:]:
        if not st.same_structure(out, s) or any(
                x.dtype != y.dtype for x, y in zip(st.flatten(out), st.flatten(s))):
            raise TypeError(f"Incompatible dataset elements:\n  {out} vs.   {s}")
        out = st.map_structure(st.most_specific_compatible, out, s)
    return out


def _directed_card(datasets: list) -> int:
    # TF: infinite as soon as one input is, else unknown (the choices decide).
    return INFINITE if any(d._card() == INFINITE for d in datasets) else UNKNOWN


def _truth(value: Any) -> bool:
    k = st.to_numpy(value) if not isinstance(value, bool | np.bool_) else np.asarray(value)
    if k.dtype != np.bool_ or k.shape != ():
        _check_predicate_spec(st.spec_of(k))
    return bool(k)


def _log_ignored(ex: BaseException, log_warning: bool) -> None:
    if log_warning:
        get_logger().warning("tf.data ignore_errors dropped an element: %s: %s",
                                             type(ex).__name__, ex)


def _fully_defined(spec: Any) -> bool:
    return all(isinstance(s, tf.TensorSpec) and s.shape.rank is not None and s.shape.is_fully_defined()
               for s in st.flatten(spec))


def _check_predicate_spec(spec: Any) -> None:
    if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.bool or spec.shape.as_list() != []:
        raise ValueError(f"Invalid `predicate`. `predicate` must return a `tf.bool` scalar tensor, but its return "
                         f"type is {spec}.")


def _spec_from_first(parent: Dataset, apply: Callable) -> Any:
    # The function could not be traced abstractly: it needs concrete values, so its result's
    # shape may depend on them (``tf.fill([n], n)``). TF's trace gives unknown dimensions there;
    # the first element tells the structure, the dtypes and the ranks.
    for e in parent._elements():
        return st.map_structure(lambda a: tf.TensorSpec([None] * a.ndim, tf.as_dtype(a.dtype)), apply(e))
    raise ValueError("Cannot find the element_spec of a map over an empty dataset whose function needs "
                     "concrete values.")


_END = object()


class _Prefetcher:
    """A Python iterator whose elements a daemon thread produces ``depth`` ahead. The thread stops
    when the iterator is closed or garbage collected (an abandoned epoch), or at the end."""

    def __init__(self, parent: Dataset, depth: int) -> None:
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._done = False
        t = threading.Thread(target=_produce, args=(parent, self._q, self._stop, x64_enabled()),
                             daemon=True,
                             name="tapejax.data.prefetch")
        weakref.finalize(self, self._stop.set)
        t.start()

    def __iter__(self) -> _Prefetcher:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        kind, value = self._q.get()
        if kind is _END:
            self._done = True
            self._stop.set()
            raise StopIteration
        if kind == "error":
            self._done = True
            self._stop.set()
            raise value
        return value

    def close(self) -> None:
        self._stop.set()


def _produce(parent: Dataset, q: queue.Queue, stop: threading.Event, x64: bool) -> None:
    with _x64_as(x64):
        _produce_all(parent, q, stop)


def _produce_all(parent: Dataset, q: queue.Queue, stop: threading.Event) -> None:
    def put(item: tuple) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    try:
        for e in parent._elements():
            if not put(("element", e)):
                return
    except BaseException as ex:  # noqa: BLE001  (handed to the consumer, raised there)
        put(("error", ex))
        return
    put((_END, None))
