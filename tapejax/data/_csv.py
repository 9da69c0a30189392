"""``tf.data.experimental.make_csv_dataset``: numeric CSV files as a batched dataset of feature dicts."""

from __future__ import annotations

import collections
import csv
import glob
import os
from collections.abc import Iterator as PyIterator
from typing import Any

import numpy as np

from .. import errors
from .._ops._dtypes import check_width
from .._tf import _surface as tf
from ._dataset import AUTOTUNE, UNKNOWN, Dataset


def _files(file_pattern: Any) -> list:
    patterns = [file_pattern] if isinstance(file_pattern, str | os.PathLike) else list(file_pattern)
    names: list = []
    for p in patterns:
        names.extend(sorted(glob.glob(os.fspath(p))))
    if not names:
        raise ValueError(f"No files match `file_pattern` {file_pattern}.")
    return names


def _rows(filename: str, delim: str, quote: bool, header: bool, encoding: str) -> PyIterator:
    with open(filename, newline="", encoding=encoding) as f:
        reader = csv.reader(f, delimiter=delim, quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE)
        if header:
            next(reader, None)
        for row in reader:
            if row:
                yield row


def _fits(s: str, kind: str) -> bool:
    try:
        if kind in ("int32", "int64"):
            n = int(s)
            return np.iinfo(kind).min <= n <= np.iinfo(kind).max
        v = float(s)
        return kind == "float64" or not np.isfinite(v) or abs(v) <= float(np.finfo(np.float32).max)
    except ValueError:
        return False


_ORDER = ["int32", "int64", "float32", "float64"]


def _infer(value: str, na_value: str, prev: str | None) -> str | None:
    # TF's rule: the least permissive type every value seen so far fits.
    if value in ("", na_value):
        return prev
    start = _ORDER.index(prev) if prev in _ORDER else 0
    if prev == "string":
        return "string"
    for kind in _ORDER[start:]:
        if _fits(value, kind):
            return kind
    return "string"


def _field(text: str, na_value: str, dtype: np.dtype, fill: Any) -> Any:
    if text in ("", na_value):
        if fill is None:
            raise ValueError("a required field is empty")
        return fill
    return int(text) if dtype.kind in "iu" else float(text)


def make_csv_dataset(file_pattern: Any, batch_size: int, column_names: Any = None, column_defaults: Any = None,
                     label_name: str | None = None, select_columns: Any = None, field_delim: str = ",",
                     use_quote_delim: bool = True, na_value: str = "", header: bool = True, num_epochs: Any = None,
                     shuffle: bool = True, shuffle_buffer_size: int = 10000, shuffle_seed: int | None = None,
                     prefetch_buffer_size: Any = None, num_parallel_reads: Any = None, sloppy: bool = False,
                     num_rows_for_inference: int = 100, compression_type: Any = None, ignore_errors: bool = False,
                     encoding: str = "utf-8") -> Dataset:
    """Read CSV files into batches of ``(OrderedDict(column -> values), labels)`` (or just the
    dict without ``label_name``), as TF's reader does: column types inferred from the first
    ``num_rows_for_inference`` rows (int32, int64, float32, float64), shuffled, repeated
    ``num_epochs`` times (forever when None, then the last partial batch is dropped).
    tapejax has no string tensors yet: a text column raises ``TypeError`` (leave it out with
    ``select_columns``).

    Example:
        >>> import os, tempfile, tapejax as tf
        >>> path = os.path.join(tempfile.mkdtemp(), "iris.csv")
        >>> with open(path, "w") as f:
        ...     _ = f.write("sepal,petal,species\\n5.1,1.4,0\\n6.4,5.6,2\\n5.0,3.3,1\\n")
        >>> ds = tf.data.experimental.make_csv_dataset(path, 2, label_name="species", num_epochs=1, shuffle=False)
        >>> features, labels = next(iter(ds))
        >>> list(features), [round(float(v), 2) for v in features["petal"]], labels.numpy().tolist()
        (['sepal', 'petal'], [1.4, 5.6], [0, 2])
    """
    if compression_type not in (None, ""):
        raise NotImplementedError("make_csv_dataset in tapejax reads plain text files only; decompress them first.")
    filenames = _files(file_pattern)
    quote = bool(use_quote_delim)
    if column_names is None:
        if not header:
            raise ValueError("Expected `column_names` or `header` arguments. Neither is provided.")
        with open(filenames[0], newline="", encoding=encoding) as f:
            column_names = next(csv.reader(f, delimiter=field_delim,
                                           quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE))
    column_names = list(column_names)
    if len(column_names) != len(set(column_names)):
        dup = sorted({c for c in column_names if column_names.count(c) > 1})
        raise ValueError(f"Either `column_names` argument or CSV header row contains duplicate column names: "
                         f"{set(dup)}.")
    if select_columns is not None:
        idx = sorted(column_names.index(c) if isinstance(c, str) else int(c) for c in select_columns)
    else:
        idx = list(range(len(column_names)))
    fill: list = [0] * len(idx)  # the value of an empty field (None: the field is required)
    kinds: list[Any]
    if column_defaults is not None:
        kinds, fill = [], []
        for d in column_defaults:
            if isinstance(d, (tf.DType, type, str)):
                kinds.append(tf.as_dtype(d).name)
                fill.append(None)
            else:
                v = np.asarray(d._value if isinstance(d, tf.Tensor) else d)
                if v.dtype.kind in "SUO":
                    raise TypeError("tapejax has no string tensors yet (tf.string): a text column default is not "
                                    "supported.")
                kinds.append("float32" if v.dtype == np.float64 and not tf.x64_enabled() else v.dtype.name)
                fill.append(v.reshape(-1)[0].item() if v.size else None)
        if len(kinds) != len(idx):
            raise ValueError(f"If specified, `column_defaults` and `select_columns` must have the same length: "
                             f"`column_defaults` has length {len(kinds)}, `select_columns` has length {len(idx)}.")
    else:
        kinds = [None] * len(idx)
        for i, row in enumerate(_rows(filenames[0], field_delim, quote, header, encoding)):
            if i >= num_rows_for_inference:
                break
            kinds = [_infer(row[c], na_value, k) for c, k in zip(idx, kinds)]
        kinds = [k or "string" for k in kinds]
    names = [column_names[c] for c in idx]
    if label_name is not None and label_name not in names:
        raise ValueError(f"`label_name` provided must be one of the columns: {names}. Received: {label_name}.")
    for name, k in zip(names, kinds):
        if k == "string":
            raise TypeError(f"Column {name!r} holds text, and tapejax has no string tensors yet (tf.string). "
                            "Leave it out with `select_columns`, or convert it to numbers in the file.")
        check_width(np.dtype(k), f"CSV column {name!r} of type")
    dtypes = [np.dtype(k) for k in kinds]
    row_spec = tuple(tf.TensorSpec([], tf.as_dtype(d)) for d in dtypes)

    def file_rows(i: Any) -> Dataset:
        fname = filenames[int(i)]

        def make() -> PyIterator:
            for n, row in enumerate(_rows(fname, field_delim, quote, header, encoding)):
                try:
                    yield tuple(np.array(_field(row[c], na_value, d, f), d) for c, d, f in zip(idx, dtypes, fill))
                except (ValueError, IndexError):
                    if ignore_errors:
                        continue
                    raise errors.InvalidArgumentError(
                        f"Record {n} of {fname} does not fit the column types {[d.name for d in dtypes]}: "
                        f"{row!r}. Pass column_defaults, or ignore_errors=True to skip such records.") from None

        return Dataset(make, row_spec, UNKNOWN, "_CsvDataset")

    # File names are strings, which tapejax tensors cannot hold: the files are picked through a
    # dataset of their indices (shuffled per iteration as TF shuffles the names).
    order = Dataset.range(len(filenames))
    if shuffle:
        order = order.shuffle(len(filenames), shuffle_seed)
    reads = 1 if num_parallel_reads in (None, AUTOTUNE) else int(num_parallel_reads)
    rows = order.interleave(file_rows, cycle_length=reads, block_length=1)
    if shuffle:
        rows = rows.shuffle(shuffle_buffer_size, shuffle_seed)
    if num_epochs != 1:
        rows = rows.repeat(num_epochs)
    batched = rows.batch(batch_size, drop_remainder=num_epochs is None)

    def organize(columns: tuple) -> Any:
        features = collections.OrderedDict(zip(names, columns))
        if label_name is not None:
            label = features.pop(label_name)
            return features, label
        return features

    out = Dataset(lambda: (organize(e) for e in batched._elements()), lambda: organize(batched.element_spec),
                  batched._card, "_MapDataset")
    return out.prefetch(AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size)
