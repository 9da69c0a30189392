"""``tf.train.Checkpoint`` and ``tf.train.CheckpointManager`` on Orbax.

The object graph is TF's: a checkpoint's keyword arguments are its children; a
``tf.Module`` (or any object) has its attributes as children, lists and tuples their
indices, dicts their keys; each variable is saved once, under the shortest path
that reaches it (breadth first, children in name order), as
``model/layer/w/.ATTRIBUTES/VARIABLE_VALUE``. The values go into one Orbax
checkpoint directory per save (``prefix-N``); a TF-format ``checkpoint`` state
file beside it names the latest, for ``tf.train.latest_checkpoint``.

Restoring assigns every variable whose path is in the checkpoint. A saved value
whose variable does not exist yet is kept: when a ``tf.Module`` on its path later
gets the attribute (a layer built on its first call), the value is assigned then,
as TF's deferred restoration does.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import time
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import errors
from .._core import _recorder as _core
from .._core._recorder import Tensor, VariableBase
from . import _module
from ._function import Function
from ._module import Module
from ._variable import Variable

__all__ = ["Checkpoint", "CheckpointManager", "latest_checkpoint", "list_variables", "load_variable", "restore_deferred"]

_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_KEYS_FILE = "tapejax_checkpoint.json"
_MAX_NODES = 200_000


def _is_variable(x: Any) -> bool:
    # tapejax variables, and variable-like objects of other libraries (a Keras variable).
    return isinstance(x, VariableBase) or (
        not isinstance(x, Tensor) and callable(getattr(x, "assign", None)) and callable(getattr(x, "numpy", None))
        and hasattr(x, "shape") and hasattr(x, "dtype"))


_SKIP_MODULES = ("builtins", "numpy", "jax", "jaxlib", "typing", "collections", "functools", "threading", "weakref",
                 "abc", "enum", "types")


def _walkable(x: Any) -> bool:
    if isinstance(x, Module | Checkpoint | list | tuple | dict):
        return True
    if isinstance(x, type | Tensor | Function | str | bytes | int | float | complex | bool | np.ndarray) or x is None:
        return False  # a tapejax.function's trace cache holds variables TF does not track through it
    if callable(x) and not hasattr(x, "__dict__"):
        return False
    mod = type(x).__module__.split(".")[0]
    return mod not in _SKIP_MODULES and hasattr(x, "__dict__") and not isinstance(x, type(os))


def _children(obj: Any) -> list:
    """(name, child) pairs of a node of the object graph, in TF's order."""
    if isinstance(obj, Checkpoint):
        # TF creates save_counter on first use: a checkpoint only written has none.
        extra = [("save_counter", obj._counter)] if obj._counter is not None else []
        return sorted(obj._children.items()) + extra
    if isinstance(obj, list | tuple):
        return [(str(i), c) for i, c in enumerate(obj)]
    if isinstance(obj, dict):
        return sorted((str(k), v) for k, v in obj.items())
    try:
        attrs = vars(obj)
    except TypeError:
        return []
    # Attributes in the order they were set, as TF tracks them (an alias set later is not the saved path).
    return [(k, v) for k, v in attrs.items() if k not in _IGNORED and (_is_variable(v) or _walkable(v))]


_IGNORED = frozenset({"_name_scope"})


def _walk(root: Any) -> Iterator[tuple[str, Any, Any]]:
    """(path, node, parent) for every node, breadth first; each object once, at its shortest path."""
    seen = {id(root)}
    queue = collections.deque([("", root)])
    count = 0
    while queue:
        path, node = queue.popleft()
        for name, child in _children(node):
            if id(child) in seen:
                continue
            seen.add(id(child))
            count += 1
            if count > _MAX_NODES:
                raise ValueError("The checkpoint's object graph has too many objects; pass only models, optimizers "
                                 "and variables to tf.train.Checkpoint.")
            p = f"{path}/{name}" if path else name
            yield p, child, node
            if not _is_variable(child) and _walkable(child):
                queue.append((p, child))


def _variables(root: Any) -> dict:
    return {p + _SUFFIX: v for p, v, _ in _walk(root) if _is_variable(v)}


def _numpy(v: Any) -> np.ndarray:
    if not isinstance(v, VariableBase) and hasattr(v, "_value"):
        # A Keras variable: its storage directly (Keras 3.15's numpy() warns under NumPy 2).
        a = np.asarray(v._value)
    else:
        a = v.numpy()
    if isinstance(a, bytes) or (isinstance(a, np.ndarray) and a.dtype.kind in "SO"):
        return np.asarray(a, dtype=object)  # a string variable: saved beside the arrays, not by Orbax
    return np.asarray(a)


# ---- storage (Orbax) --------------------------------------------------------------------------------


def _checkpointer() -> Any:
    # Imported on first use: Orbax (and TensorStore under it) take a second to import.
    import orbax.checkpoint as ocp

    return ocp.PyTreeCheckpointer()


def _write(path: str, values: dict) -> None:
    keys = sorted(values)
    arrays = {f"v{i:06d}": values[k] for i, k in enumerate(keys) if values[k].dtype != object}
    strings = {k: [b.decode("latin-1") for b in values[k].reshape(-1)] for k in keys if values[k].dtype == object}
    path = os.path.abspath(path)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if arrays:
        _checkpointer().save(path, arrays, force=True)
    else:
        os.makedirs(path, exist_ok=True)
    meta = {"keys": keys, "shapes": {k: list(values[k].shape) for k in keys}, "strings": strings}
    with open(os.path.join(path, _KEYS_FILE), "w") as f:
        json.dump(meta, f)


def _read(path: str) -> dict:
    path = os.path.abspath(path)
    meta_file = os.path.join(path, _KEYS_FILE)
    if not os.path.isfile(meta_file):
        raise errors.NotFoundError(
            f"Error when restoring from checkpoint at {path}: no tapejax checkpoint there. Please double-check that "
            "the path is correct. You may be missing the checkpoint suffix (e.g. the '-1' in 'path/to/ckpt-1'); "
            "tf.train.latest_checkpoint(directory) gives the latest.")
    with open(meta_file) as f:
        meta = json.load(f)
    keys = meta["keys"]
    numeric = [k for k in keys if k not in meta["strings"]]
    arrays = _checkpointer().restore(path) if numeric else {}
    out = {}
    for i, k in enumerate(keys):
        if k in meta["strings"]:
            flat = np.array([s.encode("latin-1") for s in meta["strings"][k]], dtype=object)
            out[k] = flat.reshape(meta["shapes"][k])
        else:
            out[k] = np.asarray(arrays[f"v{i:06d}"])
    return out


# ---- restoring --------------------------------------------------------------------------------------


def _assign(var: Any, value: np.ndarray, key: str) -> None:
    cur = tuple(var.shape)
    if tuple(value.shape) != cur:
        raise ValueError(f"Received incompatible tensor with shape {tuple(value.shape)} when attempting to restore "
                         f"variable with shape {cur} and name {getattr(var, 'name', key)}.")
    want = np.dtype(var.dtype.as_numpy_dtype) if hasattr(var.dtype, "as_numpy_dtype") else np.dtype(str(var.dtype))
    if value.dtype != want and not (value.dtype.kind == want.kind and value.dtype.itemsize != want.itemsize
                                    and value.dtype.kind in "iu"):
        raise errors.InvalidArgumentError(
            f"tensor_name = {key}; expected dtype {getattr(var.dtype, 'name', want)} does not equal original dtype "
            f"{value.dtype} [Op:RestoreV2]")
    value = value.astype(want) if value.dtype != want else value
    for cap in reversed(_core.state.tracing):
        # A variable created by the tf.function trace in progress (a lazy build after the
        # restore): the restored value is its initial value, as TF's deferred restoration
        # makes the checkpoint its initializer; an assign would be undone by the trace's
        # initialisation pass, which recomputes the value the variable was created with.
        new_vars = getattr(cap, "new_vars", None)
        if new_vars:
            for k, v in enumerate(new_vars):
                if v is var:
                    cap.created_init[k] = value
                    cap.bound[var._uid] = value
                    return
    var.assign(value)


class _Restoration:
    """Saved values not yet matched to a variable, and the modules they wait on."""

    def __init__(self, values: dict):
        self.values = values
        self.pending = set(values)
        self.current: set = set()  # keys of the objects that exist and were matched


# module -> list of (path prefix, restoration) waiting for attributes of that module
_DEFERRED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _restore_into(root: Any, prefix: str, r: _Restoration) -> list:
    """Assign the matching saved values under ``root`` (whose path is ``prefix``); returns the paths of current
    variables with no saved value."""
    unmatched = []
    if prefix:
        _register(root, prefix, r)
    for p, node, _ in _walk(root):
        full = f"{prefix}/{p}" if prefix else p
        if _is_variable(node):
            key = full + _SUFFIX
            if key in r.pending:
                _assign(node, r.values[key], key)
                r.pending.discard(key)
                r.current.add(key)
            elif key not in r.values:
                unmatched.append(key)
        else:
            _register(node, full, r)
    return unmatched


def restore_deferred(obj: Any) -> None:
    """Give ``obj`` the saved values that waited for variables it has created since the restore.

    ``tf.Module`` attributes trigger this by themselves; an object that creates its
    variables later without setting a module attribute (an optimizer's slots, a layer's
    weights in ``build``) calls it at the end of its build, as TF's deferred restoration.
    """
    for path, r in list(_DEFERRED.get(obj, ())):
        _restore_into(obj, path, r)
    entries = _DEFERRED.get(obj)
    if entries is not None:
        _DEFERRED[obj] = [(p, r) for p, r in entries if any(k.startswith(p + "/") for k in r.pending)]


def _register(module: Any, path: str, r: _Restoration) -> None:
    if isinstance(module, list | tuple | dict):
        return  # not weak-referenceable; a container's owner waits for it
    if any(k.startswith(path + "/") for k in r.pending):
        try:
            lst = _DEFERRED.setdefault(module, [])
        except TypeError:
            return  # an object without weak references cannot wait
        if all(x[1] is not r for x in lst):
            lst.append((path, r))


def _on_setattr(module: Module, name: str, value: Any) -> None:
    # A module got an attribute: give it the saved values waiting under that path.
    entries = _DEFERRED.get(module)
    if not entries:
        return
    for path, r in list(entries):
        sub = f"{path}/{name}"
        if not any(k == sub + _SUFFIX or k.startswith(sub + "/") for k in r.pending):
            continue
        if _is_variable(value):
            key = sub + _SUFFIX
            if key in r.pending:
                _assign(value, r.values[key], key)
                r.pending.discard(key)
                r.current.add(key)
        elif _walkable(value):
            _restore_into(value, sub, r)
    _DEFERRED[module] = [(p, r) for p, r in entries if any(k.startswith(p + "/") for k in r.pending)]


_module._SETATTR_HOOKS.append(_on_setattr)


class CheckpointLoadStatus:
    """What a restore matched (TF's ``CheckpointLoadStatus``)."""

    def __init__(self, root: Any, restoration: _Restoration, unmatched: list):
        self._root = root
        self._r = restoration
        self._unmatched = unmatched

    def _missing_objects(self) -> list:
        have = self._r.values
        return [k for k, _ in _variables(self._root).items() if k not in have]

    def assert_consumed(self) -> CheckpointLoadStatus:
        """AssertionError unless every saved value was restored and every variable got one."""
        if self._r.pending:
            k = sorted(self._r.pending)[0]
            raise AssertionError(f"Unresolved object in checkpoint (root).{k[:-len(_SUFFIX)].replace('/', '.')}: "
                                 f"checkpoint_key: \"{k}\" (its variable does not exist yet, or no longer exists: "
                                 "build the model and optimizer before restoring, or use expect_partial()).")
        return self.assert_existing_objects_matched()

    def assert_existing_objects_matched(self) -> CheckpointLoadStatus:
        """AssertionError if a variable that exists now has no value in the checkpoint."""
        missing = self._missing_objects()
        if missing:
            raise AssertionError(f"No checkpoint value for the existing variable {missing[0]!r} (and "
                                 f"{len(missing) - 1} more).")
        return self

    def assert_nontrivial_match(self) -> CheckpointLoadStatus:
        if not self._r.current:
            raise AssertionError("Nothing except the root object matched a checkpointed value.")
        return self

    def expect_partial(self) -> CheckpointLoadStatus:
        return self

    def run_restore_ops(self, session: Any = None) -> None:
        return None

    def initialize_or_restore(self, session: Any = None) -> None:
        return None


class InitializationOnlyStatus(CheckpointLoadStatus):
    """``restore(None)``: nothing to restore."""

    def __init__(self, root: Any):
        super().__init__(root, _Restoration({}), [])

    def assert_consumed(self) -> CheckpointLoadStatus:
        raise AssertionError("No checkpoint specified (save_path=None); nothing is being restored.")

    def assert_existing_objects_matched(self) -> CheckpointLoadStatus:
        raise AssertionError("No checkpoint specified (save_path=None); nothing is being restored.")

    def assert_nontrivial_match(self) -> CheckpointLoadStatus:
        raise AssertionError("No checkpoint specified (save_path=None); nothing is being restored.")


class Checkpoint:
    """Save and restore variables reachable from its keyword arguments (TF's ``tf.train.Checkpoint``).

    Example:
        >>> import tempfile, tapejax as tf
        >>> m = tf.Module()
        >>> m.v = tf.Variable([1.0, 2.0])
        >>> ckpt = tf.train.Checkpoint(model=m)
        >>> path = ckpt.save(tempfile.mkdtemp() + "/ckpt")
        >>> _ = m.v.assign([0.0, 0.0])
        >>> _ = ckpt.restore(path)
        >>> m.v.numpy().tolist(), path.endswith("ckpt-1")
        ([1.0, 2.0], True)
    """

    def __init__(self, root: Any = None, **kwargs: Any):
        children = dict(kwargs)
        if root is not None:
            children["root"] = root
        for k, v in children.items():
            if not (_is_variable(v) or _walkable(v)) or isinstance(v, list | tuple | dict) and False:
                raise ValueError(f"`Checkpoint` was expecting {k} to be a trackable object (an object derived from "
                                 f"`Trackable`), got {v!r}. Pass variables, tf.Modules, Keras models and optimizers.")
        self._children = children
        self._counter: Variable | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        # TF: a public attribute set later is one more child of the checkpoint.
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            self._children[name] = value

    def __getattr__(self, name: str) -> Any:
        children = self.__dict__.get("_children", {})
        if name in children:
            return children[name]
        raise AttributeError(f"'Checkpoint' object has no attribute {name!r}")

    @property
    def save_counter(self) -> Variable:
        """How many times ``save`` ran (saved and restored with the checkpoint)."""
        return self._save_counter

    @property
    def _save_counter(self) -> Variable:
        if self._counter is None:
            self._counter = Variable(0, trainable=False, name="save_counter")
        return self._counter

    def write(self, file_prefix: str, options: Any = None) -> str:
        """Write the values to exactly ``file_prefix`` (no counter, no state file)."""
        values = {k: _numpy(v) for k, v in _variables(self).items()}
        _write(str(file_prefix), values)
        return str(file_prefix)

    def save(self, file_prefix: str, options: Any = None) -> str:
        """Write to ``file_prefix-N`` (N the incremented ``save_counter``) and record it as the latest."""
        self._save_counter.assign_add(1)
        path = f"{file_prefix}-{int(self._save_counter.numpy())}"
        self.write(path)
        directory = os.path.dirname(os.path.abspath(path))
        state = _read_state(directory)
        paths = [p for p in state["all"] if p != path] + [path]
        _write_state(directory, path, paths, state.get("timestamps", {}))
        return path

    def read(self, save_path: str, options: Any = None) -> CheckpointLoadStatus:
        """Restore from ``save_path`` (as written by ``write``)."""
        return self.restore(save_path)

    def restore(self, save_path: str | None, options: Any = None) -> CheckpointLoadStatus:
        """Assign the saved values; values for variables not created yet wait for them (see the module doc)."""
        if save_path is None:
            return InitializationOnlyStatus(self)
        r = _Restoration(_read(str(save_path)))
        if "save_counter" + _SUFFIX in r.values:
            _ = self._save_counter  # TF restores into it (creating it) when the checkpoint has one
        unmatched = _restore_into(self, "", r)
        return CheckpointLoadStatus(self, r, unmatched)


# ---- the state file and the manager --------------------------------------------------------------------


def _read_state(directory: str) -> dict:
    f = os.path.join(directory, "checkpoint")
    state: dict = {"latest": None, "all": [], "timestamps": {}}
    if not os.path.isfile(f):
        return state
    ts: list = []
    with open(f) as fh:
        text = fh.read()
    for line in text.splitlines():
        key, _, val = line.partition(":")
        val = val.strip()
        if key == "model_checkpoint_path":
            state["latest"] = _abs(directory, json.loads(val))
        elif key == "all_model_checkpoint_paths":
            state["all"].append(_abs(directory, json.loads(val)))
        elif key == "all_model_checkpoint_timestamps":
            ts.append(float(val))
    state["timestamps"] = dict(zip(state["all"], ts))
    return state


def _abs(directory: str, p: str) -> str:
    return p if os.path.isabs(p) else os.path.join(directory, p)


def _write_state(directory: str, latest: str | None, paths: list, timestamps: dict) -> None:
    def rel(p: str) -> str:
        return os.path.relpath(p, directory) if os.path.dirname(os.path.abspath(p)) == os.path.abspath(directory) else p

    lines = []
    if latest is not None:
        lines.append(f"model_checkpoint_path: {json.dumps(rel(latest))}")
    lines += [f"all_model_checkpoint_paths: {json.dumps(rel(p))}" for p in paths]
    now = time.time()
    lines += [f"all_model_checkpoint_timestamps: {timestamps.get(p, now)}" for p in paths]
    lines.append(f"last_preserved_timestamp: {now}")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "checkpoint"), "w") as f:
        f.write("\n".join(lines) + "\n")


def latest_checkpoint(checkpoint_dir: str, latest_filename: str | None = None) -> str | None:
    """The path of the latest checkpoint saved in ``checkpoint_dir``, or None.

    Example:
        >>> import tempfile, tapejax as tf
        >>> d = tempfile.mkdtemp()
        >>> tf.train.latest_checkpoint(d) is None
        True
    """
    latest = _read_state(os.path.abspath(str(checkpoint_dir)))["latest"]
    if latest is None or not os.path.isfile(os.path.join(latest, _KEYS_FILE)):
        return None
    return latest


def list_variables(ckpt_dir_or_file: str) -> list:
    """``(key, shape)`` of every saved value, sorted, as ``tf.train.list_variables``."""
    path: Any = latest_checkpoint(ckpt_dir_or_file) if os.path.isfile(os.path.join(ckpt_dir_or_file, "checkpoint")) else ckpt_dir_or_file
    with open(os.path.join(path, _KEYS_FILE)) as f:
        meta = json.load(f)
    return [("_CHECKPOINTABLE_OBJECT_GRAPH", [])] + sorted((k, meta["shapes"][k]) for k in meta["keys"])


def load_variable(ckpt_dir_or_file: str, name: str) -> np.ndarray:
    """One saved value by key (``model/v/.ATTRIBUTES/VARIABLE_VALUE``), as ``tf.train.load_variable``."""
    path: Any = latest_checkpoint(ckpt_dir_or_file) if os.path.isfile(os.path.join(ckpt_dir_or_file, "checkpoint")) else ckpt_dir_or_file
    values = _read(path)
    if name not in values:
        raise errors.NotFoundError(f"Key {name} not found in checkpoint")
    return values[name]


class CheckpointManager:
    """Numbered saves in a directory, keeping the last ``max_to_keep`` (TF's ``tf.train.CheckpointManager``).

    Example:
        >>> import tempfile, tapejax as tf
        >>> ckpt = tf.train.Checkpoint(v=tf.Variable(1.0))
        >>> manager = tf.train.CheckpointManager(ckpt, tempfile.mkdtemp(), max_to_keep=2)
        >>> paths = [manager.save() for _ in range(3)]
        >>> [p.rsplit("/", 1)[-1] for p in manager.checkpoints]
        ['ckpt-2', 'ckpt-3']
    """

    def __init__(self, checkpoint: Checkpoint, directory: str, max_to_keep: int | None,
                 keep_checkpoint_every_n_hours: float | None = None, checkpoint_name: str = "ckpt",
                 step_counter: Any = None, checkpoint_interval: Any = None, init_fn: Any = None):
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"CheckpointManager needs a tf.train.Checkpoint, got {type(checkpoint).__name__}.")
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(f"Expected a positive integer or `None` for `max_to_keep`, got {max_to_keep}.")
        if checkpoint_interval is not None and step_counter is None:
            raise ValueError("`step_counter` should be passed if `checkpoint_interval` is not None.")
        self._checkpoint = checkpoint
        self._directory = str(directory)
        self._max_to_keep = max_to_keep
        self._keep_hours = keep_checkpoint_every_n_hours
        self._name = checkpoint_name
        self._step_counter = step_counter
        self._interval = checkpoint_interval
        self._init_fn = init_fn
        state = _read_state(os.path.abspath(self._directory))
        self._latest = state["latest"]
        self._maybe: list = [p for p in state["all"] if os.path.isfile(os.path.join(p, _KEYS_FILE))]
        self._timestamps = state["timestamps"]
        self._last_preserved = time.time()
        self._last_step: Any = None

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoint(self) -> Checkpoint:
        return self._checkpoint

    @property
    def latest_checkpoint(self) -> str | None:
        return latest_checkpoint(self._directory)

    @property
    def checkpoints(self) -> list:
        return list(self._maybe)

    @property
    def checkpoint_interval(self) -> Any:
        return self._interval

    def restore_or_initialize(self) -> str | None:
        latest = self.latest_checkpoint
        if latest is not None:
            self._checkpoint.restore(latest)
            return latest
        if self._init_fn is not None:
            self._init_fn()
        return None

    def save(self, checkpoint_number: Any = None, check_interval: bool = True, options: Any = None) -> str | None:
        """Save as ``directory/ckpt-N`` (N: ``checkpoint_number``, else the checkpoint's incremented counter)."""
        if self._interval is not None:
            # TF: with an interval, save only when the step counter moved on far enough.
            step = int(np.asarray(self._step_counter.numpy()))
            if self._last_step is not None:
                if step == self._last_step:
                    return None
                if check_interval and step < self._last_step + int(self._interval):
                    return None
            self._last_step = step
        ck = self._checkpoint
        ck._save_counter.assign_add(1)
        n = int(checkpoint_number) if checkpoint_number is not None else int(ck._save_counter.numpy())
        prefix = os.path.join(self._directory, f"{self._name}-{n}")
        ck.write(prefix)
        now = time.time()
        self._maybe = [p for p in self._maybe if p != prefix] + [prefix]
        self._timestamps[prefix] = now
        self._sweep()
        self._latest = prefix
        _write_state(os.path.abspath(self._directory), prefix, self._maybe, self._timestamps)
        return prefix

    def _sweep(self) -> None:
        if not self._max_to_keep:
            return
        while len(self._maybe) > self._max_to_keep:
            old = self._maybe.pop(0)
            ts = self._timestamps.pop(old, 0.0)
            if self._keep_hours and ts - self._keep_hours * 3600 >= self._last_preserved:
                self._last_preserved = ts
                continue
            shutil.rmtree(old, ignore_errors=True)
