"""``tf.saved_model``: save an object's ``tf.function``s as serialized XLA programs (``jax.export``).

``save(obj, export_dir)`` exports every ``tf.function`` of ``obj`` that has an
``input_signature`` with known shapes (or the ``signatures`` given), with the
values of the variables those programs use. ``load(export_dir)`` returns an
object with the same function names; calling one runs the saved program (no
Python of the original is needed) and updates the loaded variables it assigns.
The format is tapejax's own (a directory of ``jax.export`` blobs and an
``.npz``), not TF's SavedModel protocol buffers: TF cannot read it, and tapejax
cannot read TF's. Programs that call back into Python (``tf.print``) cannot be
exported (``NotImplementedError``); checkpoints of variables alone are
``tf.train.Checkpoint``'s job.

Example:
    >>> import tempfile, tapejax as tf
    >>> class Scale:
    ...     def __init__(self):
    ...         self.w = tf.Variable(3.0)
    ...     @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    ...     def __call__(self, x):
    ...         return x * self.w
    >>> d = tempfile.mkdtemp()
    >>> tf.saved_model.save(Scale(), d)
    >>> loaded = tf.saved_model.load(d)
    >>> loaded(tf.constant([1.0, 2.0])).numpy().tolist()
    [3.0, 6.0]
"""

from __future__ import annotations

import json
import os
import pickle
from typing import Any

import jax
import numpy as np
from jax import export as _export

from ._core._recorder import Tensor, VariableBase
from ._tf._function import ConcreteFunction, Function
from ._tf._variable import Variable

__all__ = ["SaveOptions", "save", "load"]

_FORMAT = "tapejax-saved-model-1"


class SaveOptions:
    """Options for ``tf.saved_model.save`` (TF's ``tf.saved_model.SaveOptions``), accepted and kept.

    tapejax's saved programs are ``jax.export`` blobs: a custom gradient is part of the exported
    program whatever ``experimental_custom_gradients`` says, and the TF-specific options
    (namespaces, debug info, I/O device, variable policy, image format) change nothing.

    Example:
        >>> import tapejax as tf
        >>> tf.saved_model.SaveOptions(experimental_custom_gradients=True).experimental_custom_gradients
        True
    """

    def __init__(self, namespace_whitelist: Any = None, save_debug_info: bool = False, function_aliases: Any = None,
                 experimental_debug_stripper: bool = False, experimental_io_device: Any = None,
                 experimental_variable_policy: Any = None, experimental_custom_gradients: bool = True,
                 experimental_image_format: bool = False, experimental_skip_saver: bool = False,
                 experimental_sharding_callback: Any = None, extra_tags: Any = None):
        self.namespace_whitelist = namespace_whitelist
        self.save_debug_info = save_debug_info
        self.function_aliases = dict(function_aliases) if function_aliases else {}
        self.experimental_debug_stripper = experimental_debug_stripper
        self.experimental_io_device = experimental_io_device
        self.experimental_variable_policy = experimental_variable_policy
        self.experimental_custom_gradients = experimental_custom_gradients
        self.experimental_image_format = experimental_image_format
        self.experimental_skip_saver = experimental_skip_saver
        self.experimental_sharding_callback = experimental_sharding_callback
        self.extra_tags = extra_tags


def _functions_of(obj: Any, signatures: Any) -> dict:
    if signatures is not None:
        if isinstance(signatures, Function | ConcreteFunction):
            return {"serving_default": signatures}
        return dict(signatures)
    found: dict = {}
    if isinstance(obj, Function):
        return {"__call__": obj}
    for name in dir(type(obj)):
        attr = getattr(type(obj), name, None)
        if isinstance(attr, Function):
            found[name] = getattr(obj, name)
    for name, attr in vars(obj).items() if hasattr(obj, "__dict__") else ():
        if isinstance(attr, Function):
            found[name] = attr
    return found


def _concretes(fn: Any, name: str) -> list:
    """The programs saved for ``fn``: its input_signature's, else every trace it has so far (as TF)."""
    if isinstance(fn, ConcreteFunction):
        return [fn]
    if fn.input_signature is not None:
        return [fn.get_concrete_function()]
    traced = [e for e in list(fn._entries.values())
              if e.closed is not None and e.spec_args is not None and e.jitted is not None and not e.eager]
    if not traced:
        raise ValueError(
            f"tf.saved_model.save: the tf.function {name!r} has no input_signature and has not been called, so "
            "there is no program to save. Call it once with tensors of the shapes to serve, give it "
            "input_signature=[tf.TensorSpec(...)] with known shapes, or pass "
            "signatures={'name': f.get_concrete_function(tf.TensorSpec(...))}."
        )
    out = []
    for e in traced:
        if e.concrete is None:
            e.concrete = ConcreteFunction(fn, e, *e.spec_args)
        out.append(e.concrete)
    return out


def save(obj: Any, export_dir: str, signatures: Any = None, options: Any = None) -> None:
    """Export ``obj``'s ``tf.function``s and their variables.

    A function with an ``input_signature`` is saved for that signature; one without is saved
    with every program it has traced so far, as TF saves its concrete functions (the loaded
    function dispatches a call to the program traced for its shapes and dtypes).
    """
    fns = _functions_of(obj, signatures)
    if not fns:
        raise ValueError(f"tf.saved_model.save: {type(obj).__name__} has no tf.function to save.")
    os.makedirs(export_dir, exist_ok=True)
    variables: list = []
    index: dict = {}
    meta: dict = {"format": _FORMAT, "functions": {}}
    files = 0
    for name, fn in fns.items():
        meta["functions"][name] = []
        for cf in _concretes(fn, name):
            meta["functions"][name].append(_save_program(export_dir, files, name, cf, variables, index))
            files += 1
    arrays: dict[str, Any] = {f"v{k}": np.asarray(v._v) for k, v in enumerate(variables)}
    np.savez(os.path.join(export_dir, "variables.npz"), **arrays)
    meta["variables"] = [{"name": getattr(v, "name", f"v{k}"), "trainable": v._trainable} for k, v in enumerate(variables)]
    with open(os.path.join(export_dir, "tapejax_saved_model.json"), "w") as f:
        json.dump(meta, f)


def _save_program(export_dir: str, file: int, name: str, cf: ConcreteFunction, variables: list, index: dict) -> dict:
    entry = cf._entry
    if entry.has_effects:
        raise NotImplementedError(
            f"tf.saved_model.save: {name!r} calls back into Python (tf.print), which a serialized XLA "
            "program cannot hold. Remove the tf.print, or save the variables with tf.train.Checkpoint."
        )
    arrays = [jax.ShapeDtypeStruct(tuple(s.shape.as_list()), s.dtype._np) for s in cf.inputs]
    var_avals = [jax.ShapeDtypeStruct(v._v.shape, v._v.dtype) for v in entry.variables]
    try:
        exported = _export.export(entry.jitted)(arrays, var_avals)
    except Exception as e:  # noqa: BLE001  (any export failure is this one error to the user)
        raise NotImplementedError(f"tf.saved_model.save: {name!r} could not be exported with jax.export: {e}") from e
    for v in entry.variables:
        if v._uid not in index:
            index[v._uid] = len(variables)
            variables.append(v)
    with open(os.path.join(export_dir, f"fn_{file}.bin"), "wb") as f:
        f.write(exported.serialize())
    with open(os.path.join(export_dir, f"fn_{file}.tree"), "wb") as f:
        pickle.dump({"in_tree": jax.tree_util.tree_structure((cf._args, cf._kwargs)), "out": entry.out_spec,
                     "in_avals": [(tuple(a.shape), str(np.dtype(a.dtype))) for a in arrays]}, f)
    return {"file": file, "variables": [index[v._uid] for v in entry.variables], "assigned": list(entry.assigned)}


class _Program:
    def __init__(self, exported: Any, tree: dict, variables: list, assigned: list):
        self.exported = exported
        self.out = tree["out"]
        self.in_avals = tree.get("in_avals")
        self.variables = variables
        self.assigned = assigned


class _LoadedFunction:
    """A saved function: one exported program per traced signature, chosen by the call's shapes and dtypes."""

    def __init__(self, programs: list, name: str):
        self._programs = programs
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves = jax.tree_util.tree_leaves((args, kwargs), is_leaf=lambda x: isinstance(x, Tensor | VariableBase))
        arrays = [x._value if isinstance(x, Tensor | VariableBase) else np.asarray(x) for x in leaves]
        got = [(tuple(np.shape(a)), str(np.dtype(a.dtype))) for a in arrays]
        prog = next((p for p in self._programs if p.in_avals is None or p.in_avals == got), None)
        if prog is None:
            raise ValueError(
                f"Could not find matching concrete function to call loaded from the SavedModel: {self.__name__} was "
                f"saved for the inputs {[p.in_avals for p in self._programs]} and got {got}. Save it after calling "
                "it with these shapes and dtypes, or with an input_signature that covers them."
            )
        dyn, new = prog.exported.call(arrays, [v._v for v in prog.variables])
        for i, val in zip(prog.assigned, new):
            prog.variables[i]._value = val
        out_tree, static = prog.out
        it = iter(dyn)
        outs = [Tensor(next(it)) if s[0] == "T" else next(it) if s[0] == "A" else s[1] for s in static]
        return jax.tree_util.tree_unflatten(out_tree, outs)


class _Loaded:
    """What ``load`` returns: the saved functions as attributes, ``signatures``, ``variables``."""

    def __init__(self) -> None:
        self.signatures: dict = {}
        self.variables: list = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fn = self.__dict__.get("__call__") or self.signatures.get("serving_default")
        if fn is None:
            raise TypeError("This loaded object was saved without a __call__ function.")
        return fn(*args, **kwargs)


def load(export_dir: str, tags: Any = None, options: Any = None) -> Any:
    """Load what ``save`` wrote: an object whose attributes are the saved functions."""
    path = os.path.join(export_dir, "tapejax_saved_model.json")
    if not os.path.exists(path):
        raise NotImplementedError(
            f"{export_dir} is not a tapejax saved model (no tapejax_saved_model.json). tapejax cannot read TF's "
            "SavedModel protocol buffers: load it with TensorFlow, or re-export the model from tapejax."
        )
    with open(path) as f:
        meta = json.load(f)
    vals = np.load(os.path.join(export_dir, "variables.npz"))
    variables = [Variable(vals[f"v{k}"], trainable=m["trainable"], name=m["name"].split(":")[0])
                 for k, m in enumerate(meta["variables"])]
    out = _Loaded()
    out.variables = variables
    for name, infos in meta["functions"].items():
        programs = []
        for info in infos if isinstance(infos, list) else [infos]:
            with open(os.path.join(export_dir, f"fn_{info['file']}.bin"), "rb") as f:
                exported = _export.deserialize(bytearray(f.read()))
            with open(os.path.join(export_dir, f"fn_{info['file']}.tree"), "rb") as f:
                tree = pickle.load(f)  # noqa: S301  (written by save() above)
            programs.append(_Program(exported, tree, [variables[k] for k in info["variables"]], info["assigned"]))
        fn = _LoadedFunction(programs, name)
        out.signatures[name] = fn
        if name.isidentifier():
            out.__dict__[name] = fn
    return out
