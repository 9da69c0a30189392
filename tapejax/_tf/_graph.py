"""``ConcreteFunction.graph``: a traced program shown as TF shows a ``FuncGraph``.

tapejax traces a function into a jaxpr (JAX's program of equations), not a TF graph. The
``Graph`` here is a read-only view of that jaxpr in TF's vocabulary: one ``Placeholder``
operation per tensor argument (named as TF names them: the parameter's name, ``x_1`` for a
nested structure's later leaves, ``args_0`` for ``*args``), one per captured variable, one
``Const`` per constant, one operation per equation (named after the JAX primitive, or the
string op that a host callback runs, made unique with ``_1``, ``_2`` as TF does), and one
``Identity`` per output. ``as_graph_def().node`` lists them with their inputs as TF's
``NodeDef``s do. The operation *types* are JAX's primitives (``add``, ``dot_general``,
``pure_callback``), a few mapped to TF's names (``AddV2``, ``MatMul``...); the node counts
are the XLA program's, which differ from TF's graph (TF's graph has different ops).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.extend.core
import numpy as np

from .._ops._dtypes import from_np
from .._ops._tensor import TensorShape

__all__ = ["Graph", "Operation", "GraphTensor", "leaf_names"]

# JAX primitives whose TF op has another name (the type shown; the node's name stays TF-like).
_TF_TYPES = {
    "add": "AddV2", "sub": "Sub", "mul": "Mul", "div": "RealDiv", "neg": "Neg", "exp": "Exp", "log": "Log",
    "tanh": "Tanh", "logistic": "Sigmoid", "max": "Maximum", "min": "Minimum", "sqrt": "Sqrt", "rsqrt": "Rsqrt",
    "abs": "Abs", "sin": "Sin", "cos": "Cos", "pow": "Pow", "integer_pow": "Pow", "dot_general": "MatMul",
    "reduce_sum": "Sum", "reduce_max": "Max", "reduce_min": "Min", "reduce_prod": "Prod", "reshape": "Reshape",
    "transpose": "Transpose", "concatenate": "ConcatV2", "select_n": "SelectV2", "convert_element_type": "Cast",
    "eq": "Equal", "ne": "NotEqual", "lt": "Less", "le": "LessEqual", "gt": "Greater", "ge": "GreaterEqual",
    "while": "While", "cond": "If", "pjit": "PartitionedCall", "jit": "PartitionedCall",
}


def leaf_names(fn: Callable, args: tuple, kwargs: dict, is_leaf: Callable) -> list:
    """TF's placeholder names for the leaves of ``(args, kwargs)``, in ``tree_flatten`` order."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), "args")
    names: list = []
    for i, a in enumerate(args):
        base = positional[i].name if i < len(positional) else f"{var}_{i - len(positional)}"
        n = len(jax.tree_util.tree_leaves(a, is_leaf=is_leaf))
        names += [base if k == 0 else f"{base}_{k}" for k in range(n)]
    # kwargs flatten in sorted key order (JAX's dict order)
    for key in sorted(kwargs):
        n = len(jax.tree_util.tree_leaves(kwargs[key], is_leaf=is_leaf))
        names += [key if k == 0 else f"{key}_{k}" for k in range(n)]
    return names


class GraphTensor:
    """An output of an ``Operation`` (TF's symbolic ``Tensor`` of a graph): name, shape, dtype."""

    def __init__(self, op: Operation, index: int, aval: Any, string: bool = False):
        self.op = op
        self.value_index = index
        self.shape = TensorShape(tuple(aval.shape)) if aval is not None else TensorShape(None)
        self.dtype = from_np(np.dtype(object) if string else np.dtype(aval.dtype if aval is not None else np.float32))

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self) -> Graph:
        return self.op.graph

    def __repr__(self) -> str:
        return f"<tf.Tensor '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    def __str__(self) -> str:
        return f'Tensor("{self.name}", shape={self.shape}, dtype={self.dtype.name})'


class NodeDef:
    """One node of a ``GraphDef``: ``name``, ``op`` and ``input`` (the producers, ``"op"`` or ``"op:k"``)."""

    def __init__(self, name: str, op: str, inputs: list):
        self.name = name
        self.op = op
        self.input = list(inputs)

    def __repr__(self) -> str:
        ins = "".join(f'\n  input: "{i}"' for i in self.input)
        return f'name: "{self.name}"\nop: "{self.op}"{ins}'


class GraphDef:
    """The serialisable form of a ``Graph`` as TF's ``GraphDef``: ``node`` is the list of ``NodeDef``s."""

    def __init__(self, nodes: list):
        self.node = nodes

    def __repr__(self) -> str:
        return "\n".join("node {\n  " + repr(n).replace("\n", "\n  ") + "\n}" for n in self.node)


class Operation:
    """One operation of a ``Graph``: ``name``, ``type``, ``inputs`` and ``outputs`` (TF's ``tf.Operation``)."""

    def __init__(self, graph: Graph, name: str, type_: str, inputs: list, avals: list, strings: list | None = None):
        self.graph = graph
        self.name = name
        self.type = type_
        self.inputs = list(inputs)
        strings = strings or [False] * len(avals)
        self.outputs = [GraphTensor(self, k, a, s) for k, (a, s) in enumerate(zip(avals, strings))]

    @property
    def node_def(self) -> NodeDef:
        return NodeDef(self.name, self.type, [t.name.removesuffix(":0") for t in self.inputs])

    def __repr__(self) -> str:
        return f"<tf.Operation '{self.name}' type={self.type}>"


class Graph:
    """A traced program in TF's terms (``ConcreteFunction.graph``): operations, inputs, outputs.

    Example:
        >>> import tapejax as tf
        >>> @tf.function
        ... def double(a):
        ...     return a + a
        >>> g = double.get_concrete_function(tf.constant(1)).graph
        >>> for n in g.as_graph_def().node:
        ...     print(n.input, "->", n.name)
        [] -> a
        ['a', 'a'] -> add
        ['add'] -> Identity
        >>> g.get_operations()[1]
        <tf.Operation 'add' type=AddV2>
    """

    def __init__(self, closed: Any, input_names: list, input_strings: list, n_out: int, out_strings: list,
                 variables: list, assigned: tuple, name: str = "graph"):
        self.name = name
        self.jaxpr = closed
        self._ops: list[Operation] = []
        self._by_name: dict[str, Operation] = {}
        self._counts: dict[str, int] = {}
        jaxpr = closed.jaxpr
        where: dict[Any, GraphTensor] = {}

        def src(v: Any) -> GraphTensor:
            if isinstance(v, jax.extend.core.Literal):
                return self._add("Const", "Const", [], [v.aval]).outputs[0]
            return where[v]

        for cv in jaxpr.constvars:
            where[cv] = self._add("Const", "Const", [], [cv.aval]).outputs[0]
        n_data = len(jaxpr.invars) - len(variables)
        self.inputs: list = []
        for i, v in enumerate(jaxpr.invars):
            if i < n_data:
                nm = input_names[i] if i < len(input_names) and input_names[i] else f"input_{i}"
                s = input_strings[i] if i < len(input_strings) else False
            else:
                var = variables[i - n_data]
                nm = str(getattr(var, "_name", "variable")).split(":")[0].replace("/", "_") + "_resource"
                s = False
            t = self._add(nm, "Placeholder", [], [v.aval], [s]).outputs[0]
            where[v] = t
            self.inputs.append(t)
        for eqn in jaxpr.eqns:
            prim = eqn.primitive.name
            base = prim
            if prim == "pure_callback":
                base = getattr(getattr(eqn.params.get("callback"), "callback_func", None), "_tapejax_op", prim)
            strings = [bool(getattr(getattr(eqn.params.get("callback"), "callback_func", None), "_tapejax_strings",
                                    [False] * len(eqn.outvars))[k]) if prim == "pure_callback" else False
                       for k in range(len(eqn.outvars))]
            op = self._add(base, _TF_TYPES.get(prim, prim), [src(v) for v in eqn.invars],
                           [v.aval for v in eqn.outvars], strings)
            for v, t in zip(eqn.outvars, op.outputs):
                where[v] = t
        self.outputs: list = []
        for k, v in enumerate(jaxpr.outvars[:n_out]):
            s = out_strings[k] if k < len(out_strings) else False
            inp = src(v)
            op = self._add("Identity", "Identity", [inp], [getattr(v, "aval", None)], [s])
            self.outputs.append(op.outputs[0])
        finals = jaxpr.outvars[n_out:n_out + len(variables)]
        for i in assigned:
            self._add("AssignVariableOp", "AssignVariableOp", [self.inputs[n_data + i], src(finals[i])], [])

    def _add(self, base: str, type_: str, inputs: list, avals: list, strings: list | None = None) -> Operation:
        k = self._counts.get(base, 0)
        name = base if k == 0 else f"{base}_{k}"
        while name in self._by_name:
            k += 1
            name = f"{base}_{k}"
        self._counts[base] = k + 1
        op = Operation(self, name, type_, inputs, avals, strings)
        self._ops.append(op)
        self._by_name[name] = op
        return op

    def get_operations(self) -> list:
        """Every operation, in program order (TF's ``Graph.get_operations``)."""
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"The name '{name}' refers to an Operation not in the graph.") from None

    def get_tensor_by_name(self, name: str) -> GraphTensor:
        op, _, k = name.partition(":")
        return self.get_operation_by_name(op).outputs[int(k or 0)]

    def as_graph_def(self) -> GraphDef:
        """The operations as ``NodeDef``s (``name``, ``op``, ``input``), TF's ``Graph.as_graph_def``."""
        return GraphDef([op.node_def for op in self._ops])

    def __repr__(self) -> str:
        return f"<tapejax Graph {self.name!r}: {len(self._ops)} operations>"


# --- the signature of a traced function, in TF's printed form ----------------------------------------


def type_text(x: Any, spec_type: type) -> str:
    """How TF prints the type of a traced function's input or output: a ``TensorSpec`` without its
    name, ``Literal[v]`` for a Python value, ``List[...]``/``Tuple[...]``/``Dict[[k, v], ...]``."""
    if isinstance(x, spec_type):
        spec: Any = x
        return repr(spec_type(spec.shape, spec.dtype))
    if type(x) is list:
        return "List[" + ", ".join(type_text(v, spec_type) for v in x) + "]"
    if type(x) is tuple:
        return "Tuple[" + ", ".join(type_text(v, spec_type) for v in x) + "]"
    if type(x) is dict:
        return "Dict[" + ", ".join(f"[{k!r}, {type_text(v, spec_type)}]" for k, v in x.items()) + "]"
    return f"Literal[{x!r}]"


class _Text(str):
    # An annotation that inspect.Signature prints as it is (not as a repr with quotes).
    def __repr__(self) -> str:
        return str(self)


class FunctionType(inspect.Signature):
    """The signature of a traced function with TF's type constraints (``ConcreteFunction.function_type``).

    An ``inspect.Signature`` whose annotations are the inputs' and output's types as TF prints them.
    """

    __slots__ = ()

    def __str__(self) -> str:
        text = super().__str__()
        return text if self.return_annotation is not inspect.Signature.empty else text + " -> None"


def function_type(fn: Callable, args: tuple, kwargs: dict, outputs: Any, spec_type: type) -> FunctionType:
    """The FunctionType of one trace: ``args``/``kwargs`` are its TensorSpecs and Python values."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    out = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), "args")
    for i, a in enumerate(args):
        p = positional[i] if i < len(positional) else None
        name, kind = (p.name, p.kind) if p else (f"{var}_{i - len(positional)}", inspect.Parameter.POSITIONAL_ONLY)
        out.append(inspect.Parameter(name, kind, annotation=_Text(type_text(a, spec_type))))
    by_name = {p.name: p for p in params}
    for k, v in kwargs.items():
        p = by_name.get(k)
        kind = inspect.Parameter.KEYWORD_ONLY if p is None or p.kind is p.VAR_KEYWORD else p.kind
        if kind is inspect.Parameter.POSITIONAL_ONLY:
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        out.append(inspect.Parameter(k, kind, annotation=_Text(type_text(v, spec_type))))
    # inspect.Signature wants its parameters in kind order
    out.sort(key=lambda p: p.kind)
    return FunctionType(out, return_annotation=_Text(type_text(outputs, spec_type)), __validate_parameters__=False)


class AtomicFunction:
    """The compiled program of a ``ConcreteFunction`` (``ConcreteFunction.inference_fn``), called with
    its flat tensor inputs; TF's ``AtomicFunction``."""

    def __init__(self, concrete: Any):
        self._concrete = concrete
        self.name = f"__inference_{concrete.name}"

    def __call__(self, *args: Any) -> Any:
        return self._concrete(*args)

    @property
    def graph(self) -> Graph:
        return self._concrete.graph

    @property
    def function_type(self) -> FunctionType:
        return self._concrete.function_type

    def __repr__(self) -> str:
        return f"<AtomicFunction> {self.name}{self._concrete.function_type}"
