"""Generate ``compat_docs/ops.md``: for each TF symbol that tape code uses, whether
tapejax supports it, the JAX function it maps to, and how it is tested.

"Tested" is derived, never typed by hand:

* ``value + gradient``: a case of ``tests/_op_cases.CASES`` names the symbol
  (``tests/test_ops.py`` checks its value and tape gradient against the
  ``jax.numpy`` reference; ``tests/oracle/test_oracle_ops.py`` against real TF
  when the case has ``oracle=True``);
* ``value (no gradient, as TF)``: a case checks the value and that the tape
  gradient is None, TF's convention for that op;
* ``behaviour``: ``BEHAVIOUR_TESTS`` below names a test function that exercises
  the symbol (random streams, assertions); the script checks that the function
  exists in that file.

Usage: ``python scripts/gen_ops_doc.py [--check]`` (``--check`` fails if the file
on disk is out of date).
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import tapejax  # noqa: E402
from tapejax._ops import _machinery as _ops  # noqa: E402

from _op_cases import CASES  # noqa: E402  (tests/_op_cases.py)

OUT = ROOT / "compat_docs" / "ops.md"

# The TF symbols that matter to tape code, by section (issue 4's list and more).
SECTIONS: dict[str, list[str]] = {
    "dtypes": [
        "dtypes.DType", "dtypes.as_dtype", "as_dtype", "float16", "float32", "float64", "bfloat16", "int8", "int16", "int32",
        "int64", "uint8", "bool", "complex64", "complex128", "dtypes.cast", "dtypes.saturate_cast", "dtypes.complex",
    ],
    "creation": [
        "constant", "convert_to_tensor", "Variable", "cast", "identity", "zeros", "ones", "fill", "eye", "range", "linspace",
        "zeros_like", "ones_like", "one_hot", "complex", "saturate_cast", "stop_gradient", "identity_n", "zeros_initializer",
    ],
    "random": [
        "random.normal", "random.uniform", "random.truncated_normal", "random.shuffle", "random.set_seed", "random.Generator",
        "random.get_global_generator", "random.categorical", "random.gamma", "random.poisson", "random.stateless_normal",
        "random.stateless_uniform", "random.stateless_truncated_normal", "random.stateless_categorical", "random.get_seed",
        "nn.dropout",
    ],
    "math, elementwise unary": [
        "abs", "negative", "sign", "square", "sqrt", "math.rsqrt", "exp", "math.expm1", "math.log", "math.log1p", "sin", "cos",
        "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "math.log_sigmoid",
        "math.softplus", "math.softsign", "math.erf", "math.erfc", "math.erfinv", "math.ndtri", "math.lgamma", "math.digamma",
        "math.bessel_i0e", "math.bessel_i1e", "math.reciprocal", "math.reciprocal_no_nan", "math.real", "math.imag",
        "math.conj", "math.angle", "round", "floor", "math.ceil", "math.rint", "math.is_nan", "math.is_finite", "math.is_inf",
        "logical_not", "math.polygamma", "math.lbeta",
    ],
    "math, elementwise binary": [
        "add", "subtract", "multiply", "divide", "math.truediv", "realdiv", "math.floordiv", "math.floormod", "math.mod",
        "truncatediv", "truncatemod", "pow", "maximum", "minimum", "math.squared_difference", "math.atan2",
        "math.divide_no_nan", "math.multiply_no_nan", "math.xlogy", "math.xdivy", "math.xlog1py", "math.igamma", "math.igammac",
        "math.zeta", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
        "math.logical_xor", "bitwise.bitwise_and", "bitwise.bitwise_or", "bitwise.bitwise_xor", "bitwise.invert",
        "bitwise.left_shift", "bitwise.right_shift",
    ],
    "math, reductions and scans": [
        "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_logsumexp", "reduce_all", "reduce_any",
        "math.reduce_variance", "math.reduce_std", "math.reduce_euclidean_norm", "math.count_nonzero", "cumsum", "math.cumsum",
        "math.cumprod", "math.cumulative_logsumexp", "argmax", "argmin", "math.top_k", "sort", "argsort", "math.segment_sum",
        "math.segment_mean", "math.segment_max", "math.segment_min", "math.segment_prod", "math.unsorted_segment_sum",
        "math.unsorted_segment_mean", "math.unsorted_segment_max", "math.unsorted_segment_min", "math.unsorted_segment_prod",
        "math.unsorted_segment_sqrt_n", "math.bincount", "math.in_top_k", "math.confusion_matrix",
    ],
    "math, clipping and misc": [
        "clip_by_value", "clip_by_norm", "clip_by_global_norm", "linalg.global_norm", "add_n", "math.add_n",
        "math.l2_normalize", "math.scalar_mul", "math.polyval", "norm",
    ],
    "matmul, tensordot, einsum": ["matmul", "linalg.matmul", "tensordot", "einsum", "linalg.matvec"],
    "linalg": [
        "linalg.inv", "linalg.det", "linalg.slogdet", "linalg.logdet", "linalg.cholesky", "linalg.cholesky_solve", "linalg.solve",
        "linalg.triangular_solve", "linalg.lstsq", "linalg.norm", "linalg.diag", "linalg.diag_part", "linalg.set_diag",
        "linalg.trace", "linalg.eigh", "linalg.eigvalsh", "linalg.svd", "linalg.qr", "linalg.pinv", "linalg.expm",
        "linalg.adjoint", "linalg.matrix_transpose", "linalg.band_part", "linalg.cross", "linalg.eye", "linalg.l2_normalize",
        "linalg.eig", "linalg.lu", "linalg.logm", "linalg.sqrtm",
    ],
    "nn": [
        "nn.relu", "nn.relu6", "nn.elu", "nn.selu", "nn.gelu", "nn.leaky_relu", "nn.sigmoid", "nn.tanh", "nn.softmax",
        "nn.log_softmax", "nn.softplus", "nn.softsign", "nn.silu", "nn.swish", "nn.sigmoid_cross_entropy_with_logits",
        "nn.softmax_cross_entropy_with_logits", "nn.sparse_softmax_cross_entropy_with_logits",
        "nn.weighted_cross_entropy_with_logits", "nn.l2_loss", "nn.l2_normalize", "nn.moments", "nn.batch_normalization",
        "nn.bias_add", "nn.embedding_lookup", "nn.top_k", "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.convolution",
        "nn.depthwise_conv2d", "nn.conv2d_transpose", "nn.max_pool1d", "nn.max_pool2d", "nn.max_pool3d", "nn.max_pool",
        "nn.avg_pool1d", "nn.avg_pool2d", "nn.avg_pool3d", "nn.avg_pool", "nn.ctc_loss", "nn.local_response_normalization",
        "nn.separable_conv2d", "nn.conv3d_transpose",
    ],
    "arrays": [
        "reshape", "transpose", "concat", "stack", "unstack", "split", "squeeze", "expand_dims", "tile", "broadcast_to", "gather",
        "gather_nd", "where", "boolean_mask", "pad", "reverse", "slice", "strided_slice", "__getitem__", "shape", "shape_n",
        "size", "rank", "newaxis", "roll", "repeat", "meshgrid", "sequence_mask", "scatter_nd", "tensor_scatter_nd_update",
        "tensor_scatter_nd_add", "tensor_scatter_nd_sub", "tensor_scatter_nd_max", "tensor_scatter_nd_min", "unique",
        "searchsorted", "ensure_shape", "unravel_index", "IndexedSlices", "RaggedTensor", "sparse.SparseTensor",
    ],
    "utilities": [
        "print", "debugging.check_numerics", "debugging.assert_near", "debugging.assert_equal", "debugging.assert_less",
        "debugging.assert_greater", "debugging.assert_positive", "debugging.assert_rank", "debugging.assert_shapes",
        "debugging.assert_type", "debugging.assert_all_finite", "debugging.Assert", "assert_equal", "Assert", "is_tensor",
        "TensorShape", "errors.InvalidArgumentError", "errors.OpError", "errors.NotFoundError", "errors.OutOfRangeError",
        "errors.UnimplementedError",
    ],
}

# Symbols not in the op table: the JAX function they rest on.
EXTRA_JAX = {
    "dtypes.DType": "numpy.dtype", "dtypes.as_dtype": "numpy.dtype", "as_dtype": "numpy.dtype", "constant": "jax.numpy.asarray",
    "convert_to_tensor": "jax.numpy.asarray", "Variable": "jax.Array (mutable holder)", "stop_gradient": "jax.lax.stop_gradient",
    "random.normal": "jax.random.normal", "random.uniform": "jax.random.uniform / randint",
    "random.truncated_normal": "jax.random.truncated_normal", "random.shuffle": "jax.random.permutation",
    "random.set_seed": "jax.random.key / fold_in", "random.Generator": "jax.random.key + counter",
    "random.get_global_generator": "jax.random.key", "random.categorical": "jax.random.categorical",
    "random.gamma": "jax.random.gamma", "random.poisson": "jax.random.poisson", "random.stateless_normal": "jax.random.normal",
    "random.stateless_uniform": "jax.random.uniform", "random.stateless_truncated_normal": "jax.random.truncated_normal",
    "random.stateless_categorical": "jax.random.categorical", "random.get_seed": "-", "print": "jax.debug.callback (traced)",
    "is_tensor": "-", "TensorShape": "-", "newaxis": "None",
}
for _d in ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool", "complex64", "complex128"):
    EXTRA_JAX[_d] = f"jax.numpy.{_d if _d != 'bool' else 'bool_'}"

# Symbols whose behaviour (not a value/gradient pair) a named test checks: "file::function".
BEHAVIOUR_TESTS = {
    "random.normal": "tests/test_ops_random.py::test_set_seed_makes_the_sequence_reproducible",
    "random.uniform": "tests/test_ops_random.py::test_op_seed_streams_are_per_kind_and_independent_of_unseeded_ops",
    "random.truncated_normal": "tests/test_ops_random.py::test_distributions_and_dtypes",
    "random.shuffle": "tests/test_ops_random.py::test_shuffle",
    "random.set_seed": "tests/test_ops_random.py::test_set_seed_makes_the_sequence_reproducible",
    "random.get_seed": "tests/test_ops_random.py::test_op_seed_without_global_seed_is_deterministic_after_reset",
    "random.Generator": "tests/test_ops_random.py::test_generator",
    "random.get_global_generator": "tests/test_ops_random.py::test_generator",
    "random.categorical": "tests/test_ops_random.py::test_distributions_and_dtypes",
    "random.gamma": "tests/test_ops_random.py::test_distributions_and_dtypes",
    "random.poisson": "tests/test_ops_random.py::test_distributions_and_dtypes",
    "random.stateless_normal": "tests/test_ops_random.py::test_stateless_ops_depend_only_on_the_seed",
    "random.stateless_uniform": "tests/test_ops_random.py::test_stateless_ops_depend_only_on_the_seed",
    "random.stateless_truncated_normal": "tests/test_ops_random.py::test_stateless_ops_depend_only_on_the_seed",
    "random.stateless_categorical": "tests/test_ops_random.py::test_stateless_ops_depend_only_on_the_seed",
    "nn.dropout": "tests/test_ops_random.py::test_dropout",
    "debugging.check_numerics": "tests/test_ops_conventions.py::test_passing_checks_return_none_or_the_tensor",
    "debugging.assert_near": "tests/test_ops_conventions.py::test_errors_have_tf_types",
    "debugging.assert_equal": "tests/test_ops_conventions.py::test_errors_have_tf_types",
    "debugging.assert_less": "tests/test_ops_conventions.py::test_errors_have_tf_types",
    "debugging.assert_positive": "tests/test_ops_conventions.py::test_errors_have_tf_types",
    "debugging.assert_rank": "tests/test_ops_conventions.py::test_errors_have_tf_types",
    "debugging.assert_shapes": "tests/test_ops_conventions.py::test_errors_have_tf_types",
    "debugging.assert_type": "tests/test_ops_conventions.py::test_errors_have_tf_types",
    "debugging.Assert": "tests/test_ops_conventions.py::test_errors_have_tf_types",
    "errors.InvalidArgumentError": "tests/test_ops_conventions.py::test_invalid_argument_is_not_a_value_error",
    "dtypes.saturate_cast": "tests/test_ops_conventions.py::test_creation_dtypes",
    "debugging.assert_greater": "tests/test_ops_conventions.py::test_assertions_that_pass",
    "debugging.assert_all_finite": "tests/test_ops_conventions.py::test_assertions_that_pass",
    "assert_equal": "tests/test_ops_conventions.py::test_assertions_that_pass",
    "Assert": "tests/test_ops_conventions.py::test_assertions_that_pass",
    "convert_to_tensor": "tests/test_ops_conventions.py::test_gather_gradient_is_a_dense_tensor_that_converts",
    "errors.OpError": "tests/test_ops_conventions.py::test_invalid_argument_is_not_a_value_error",
    "constant": "tests/test_tensor.py::test_constant_and_conversion_dtypes",
    "Variable": "tests/test_tensor.py::test_variable_basics",
    "TensorShape": "tests/test_tensor.py::test_shape_dtype_ndim_numpy",
    "print": "tests/test_tensor.py::test_tf_print_formats_like_tf",
    "newaxis": "tests/test_ops_conventions.py::test_getitem_follows_tf",
    "is_tensor": "tests/test_ops_conventions.py::test_gather_gradient_is_a_dense_tensor_that_converts",
    "stop_gradient": "tests/test_ops_conventions.py::test_unconnected_ops_give_none",
}
for _d in ("dtypes.DType", "dtypes.as_dtype", "as_dtype", "float16", "float32", "float64", "bfloat16", "int8", "int16", "int32",
           "int64", "uint8", "bool", "complex64", "complex128"):
    BEHAVIOUR_TESTS[_d] = "tests/test_ops_conventions.py::test_dtypes_namespace"


def _resolve(name: str):
    if name.startswith("__"):
        return getattr(tapejax.Tensor, name, None)
    obj = tapejax
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _test_exists(ref: str) -> bool:
    path, func = ref.split("::")
    tree = ast.parse((ROOT / path).read_text())
    return any(isinstance(n, ast.FunctionDef) and n.name == func for n in ast.walk(tree))


def _coverage() -> dict:
    """Public name -> (status, oracle) from the case registry."""
    cov: dict = {}
    for c in CASES:
        status = ("value + gradient" if c.grad else "value (no gradient, as TF)") + (" (slow tier)" if c.slow else "")
        for n in (c.name,) + tuple(c.covers):
            old = cov.get(n)
            if old is None or (not old[0].startswith("value + gradient") and status.startswith("value + gradient")):
                cov[n] = (status, c.oracle or (old[1] if old else False))
            elif c.oracle:
                cov[n] = (old[0], True)
    return cov


def _jax_name(name: str, obj) -> str:
    if name in _ops.JAX_NAMES:
        return _ops.JAX_NAMES[name]
    if name in EXTRA_JAX:
        return EXTRA_JAX[name]
    if name == "__getitem__":
        return "jax.numpy indexing (TF's strided-slice rules)"
    mod = getattr(obj, "__module__", "") or ""
    if name.startswith("errors.") or name.startswith("debugging.") or name.startswith("assert") or name == "Assert":
        return "-"
    return "-" if not mod.startswith("jax") else mod


def render() -> str:
    cov = _coverage()
    lines = [
        "# tapejax ops: TF symbols, their JAX functions, and their tests",
        "",
        "Generated by `scripts/gen_ops_doc.py` from the op table (`tapejax._ops._machinery.EXPORTS`, `JAX_NAMES`) and the test",
        "registry (`tests/_op_cases.py`). Do not edit by hand.",
        "",
        "Columns: **supported** (the name exists in `tapejax` with TF's signature), **JAX** (what it runs on), **tested**:",
        "",
        "* `value + gradient`: `tests/test_ops.py` compares the value and the tape gradient (random inputs, random output",
        "  cotangents) with the `jax.numpy` reference and `jax.vjp`; **TF oracle** ✓ means",
        "  `tests/oracle/test_oracle_ops.py` also compares value and gradient with real TensorFlow (hypothesis-drawn shapes",
        "  and values for elementwise ops).",
        "* `value (no gradient, as TF)`: the value is compared, and the tape gradient must be None (TF registers none).",
        "* `(slow tier)`: the jax.numpy comparison compiles for seconds and runs with `pytest -m slow`; the TF oracle",
        "  comparison runs by default.",
        "* `behaviour: <test>`: a named test checks what the symbol does (random streams, assertions, errors).",
        "* `—`: supported but not covered by a registry test (it may still appear in other tests).",
        "",
    ]
    total = supported = tested = 0
    for section, names in SECTIONS.items():
        lines += [f"## {section}", "", "| TF symbol | supported | JAX | tested | TF oracle |", "|---|---|---|---|---|"]
        for n in names:
            obj = _resolve(n)
            total += 1
            ok = obj is not None or n == "newaxis"
            supported += ok
            if not ok:
                lines.append(f"| `tf.{n}` | no | - | - | - |")
                continue
            if n in cov:
                status, oracle = cov[n]
                tested += 1
            elif n in BEHAVIOUR_TESTS and _test_exists(BEHAVIOUR_TESTS[n]):
                status, oracle = f"behaviour: `{BEHAVIOUR_TESTS[n].split('::')[1]}`", False
                tested += 1
            else:
                status, oracle = "—", False
            sym = f"`tf.Tensor.{n}`" if n.startswith("__") else f"`tf.{n}`"
            lines.append(f"| {sym} | yes | `{_jax_name(n, obj)}` | {status} | {'✓' if oracle else ''} |")
        lines.append("")
    lines += [
        f"Summary: {supported} of {total} listed symbols supported, {tested} of them tested as above.",
        "",
        "## TF conventions kept (pinned by `tests/test_ops_conventions.py`, checked against TF by the oracle tests)",
        "",
        "* `abs'(0) = 0`; `maximum`/`minimum` give a tie's whole gradient to the first argument; `reduce_max`/`segment_max`",
        "  split it equally; `max_pool` gives it to the first maximum of a window; `top_k` and `sort` prefer the lower index.",
        "* `tf.where(x > 0, tf.sqrt(x), 0)` has gradient 0 (not nan) at `x = 0`: TF's Sqrt, Rsqrt and Reciprocal gradient",
        "  kernels return 0 where the upstream gradient is 0. tapejax implements this as a `jax.custom_jvp` rule over a small",
        "  linear primitive (`tapejax._ops._tfgrad.mul_nonan`), so it holds compiled or not, in reverse and forward mode",
        "  (jacobians) and under vmap. Other ops (`log`, `/`, `pow`) keep TF's nan there, as TF does.",
        "* `d pow(x, p)/dp` is 0 where `x <= 0`; `d pow(x, p)/dx` at `0^0` is nan (TF's formula).",
        "* Round, Floor, Ceil, Rint, argmax/argmin, comparisons, integer casts, one_hot, floordiv, truncatediv and",
        "  `random.shuffle` are unconnected (gradient None); Sign is connected with a zero gradient.",
        "* Kinks: `relu'(0) = 0`, `relu6'` is 0 at 0 and 6, `leaky_relu'(0) = alpha`, `elu'(0) = 1`, `selu'(0) = scale`,",
        "  `clip_by_value` passes the gradient at both bounds, `clip_by_norm` is finite at 0, `norm` is nan at 0.",
        "* `cumprod`'s gradient is TF's `div_no_nan(...)` formula (0 at a zero input, not the analytic derivative);",
        "  `softmax_cross_entropy_with_logits`' logits gradient is TF's `softmax - labels` even for labels that do not sum",
        "  to 1; `sigmoid_cross_entropy_with_logits` also differentiates the labels; `eigh` reads the lower triangle (its",
        "  gradient is lower-triangular) and `cholesky`'s gradient is symmetric.",
        "* Complex gradients are TF's (the conjugate of JAX's).",
        "* Dtypes are never promoted: mixing int32 and float32 (or float16 and float32) raises",
        "  `tf.errors.InvalidArgumentError`; ops whose TF kernel does not take a dtype (`sqrt` of an int) raise it too.",
        "  Python numbers take the tensor operand's dtype; a Python float cannot meet an int tensor (`TypeError`).",
        "* Bad indices and shapes raise TF's `InvalidArgumentError` eagerly (JAX would clamp or fail later): `gather`,",
        "  `gather_nd`, `tensor[...]`, `reshape`, `squeeze`, `split`, `tile`, `slice`, `pad`, `range`, `inv` of a singular",
        "  matrix, sparse labels out of range.",
        "",
        "## Documented differences",
        "",
        "* `tf.gather` (and `boolean_mask`, `embedding_lookup`) gradients are dense Tensors; TF returns `IndexedSlices`.",
        "  Both convert with `tf.convert_to_tensor` and feed optimizers and `Variable.assign_sub` the same way.",
        "* Without x64, TF's int64 results (`argmax`/`argmin` default `output_type`, `where(condition)`,",
        "  `count_nonzero`, `random.categorical`, `Generator.make_seeds`) are int32; an explicit `tf.int64` raises with",
        "  instructions. Under x64 they are int64 as in TF.",
        "* `tf.linspace` with integer endpoints gives float64 in TF; tapejax gives float64 under x64 and float32 otherwise",
        "  (the integer endpoints are exact in float32, so nothing the user supplied is rounded).",
        "* `tf.math.divide`/`truediv` of int32 tensors: float64 in TF, float32 without x64.",
        "* `top_k(sorted=False)` returns the values sorted (TF leaves the order unspecified).",
        "* `truncatemod` has no gradient in TF at all (its tape raises `LookupError`); tapejax returns None.",
        "* `check_numerics` checks the forward value only (TF also checks the gradient).",
        "* Random numbers follow TF's seed *semantics* (global seed, op seeds, per-kind counters, Generators,",
        "  stateless seeds) but not TF's numbers: JAX's threefry generator is not TF's Philox stream.",
        "* Inside a compiled `tf.function`, random ops draw from one random state that the function captures like a",
        "  variable: every call gives new numbers and the sequence restarts after `set_seed`, as in TF; the per-kind",
        "  op-seed counters described above apply to eager code.",
        "* `boolean_mask`, `where(condition)` and `unique` need concrete values (their output shape depends on the data);",
        "  inside a traced `tf.function` use a fixed-size formulation.",
        "* `segment_prod` builds a dense `[segments, n]` selection (JAX cannot differentiate a repeated-index",
        "  scatter-multiply): fine for moderate sizes.",
        "* Inside a traced `tf.function` index range checks are skipped (values unknown); out-of-range gathers read 0, as",
        "  TF does on GPU.",
        "",
        "## `tapejax.numpy`",
        "",
        "Every public function of `jax.numpy`, `jax.nn` and `jax.scipy.special` is `tapejax.numpy.NAME` (also",
        "`tapejax.numpy.linalg`, `.fft`, `.nn`, `.special`), recorded on the tape through one generic wrapper",
        "(`tapejax._tf._jnp_wrap.wrap`): Tensor and array arguments are data, every other argument is static, integer and bool",
        "results are never watched. Its gradients are JAX's, not TF's conventions. Tested by `tests/test_numpy_wrap.py`.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if compat_docs/ops.md is out of date")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run python scripts/gen_ops_doc.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
