"""Small kernels compiled for a fast first call.

An eager op, and each pullback that tier 0 runs, is a tiny XLA program compiled once per
signature, so a new tape pays one compile per distinct op signature it holds. On CPU
XLA's default pipeline spends about 20 ms on a one-op program; with LLVM's optimizer off
(``xla_backend_optimization_level=0``) and XLA:CPU's older elemental emitters
(``xla_cpu_use_fusion_emitters=False``) it spends about 7 ms (measured on the project's
2-core machine: 20 one-op programs 0.83 s against 0.34 s). The price is slower code on
large arrays (``tanh`` of a million floats: 0.18 ms against 3.1 ms) and none on small ones
(an add of 16 floats: 5.3 µs either way). So a kernel is built the fast way only when
every input holds at most ``config.kernel_fast_compile_elements`` elements (default
1024; 0 turns it off), on the CPU backend only. A larger call of the same kernel runs the
fast program for its signature's first calls (:func:`fast_calls`: at least
``config.kernel_fast_first_calls``, more while the elements read stay within
``config.kernel_fast_budget_elements``) and XLA's fully compiled program from then on: a
new tape's first gradient, a notebook cell run a few times and a short loop skip the
expensive compile (mlp_step compiles 26 programs, 25-120 ms each the full way), while a
long loop reaches the full program once the fast one's extra time would have paid for
it. The switch counts calls, so it never depends on timing. The two pipelines
agree bit for bit on arithmetic, reductions and matmuls; a few transcendental functions
(``tanh``, ``log1p``) may differ in the last bit between them. Whole-slice, segment and
lazy-step programs (the steady state) always get XLA's full pipeline.

Before any of that, a signature's first ``config.kernel_host_first_calls`` calls (default 8),
and a large signature's fast-program calls when they are few, are answered by NumPy on the
host where it reproduces XLA:CPU (``_host``; the hook is at the end of this module), so a
signature met a few times compiles nothing.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import numpy as np

from .. import config as _config

__all__ = ["jit", "kernel", "staged", "FAST_OPTIONS", "ArrayImpl"]

FAST_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}

_Tracer = jax.core.Tracer
# jaxlib's concrete array class: one type test instead of an ABC isinstance per argument
# (a JAX without it: a class nothing is, so the generic tests run).
ArrayImpl: type
try:
    from jax._src.array import ArrayImpl as _impl

    ArrayImpl = _impl
except ImportError:  # pragma: no cover
    ArrayImpl = type("_NoArrayImpl", (), {})
_Array = ArrayImpl
_on_cpu: list[bool] = []


def _cpu() -> bool:
    # Asked once: the options name XLA:CPU's pipeline, and another backend's default
    # program is left as XLA builds it.
    if not _on_cpu:
        try:
            _on_cpu.append(jax.default_backend() == "cpu")
        except Exception:  # noqa: BLE001 - no backend yet: the normal pipeline
            return False
    return _on_cpu[0]


_FULL, _FAST, _TRACED, _LARGE = 0, 1, 2, 3


def _mode(args: tuple) -> int:
    """Which program a call runs: ``_FAST`` when every argument holds at most
    ``config.kernel_fast_compile_elements`` elements (on CPU), ``_LARGE`` when one holds
    more (on CPU: the fast program while the signature is new, see :func:`_large`),
    ``_TRACED`` when one is a tracer (the call is inlined into the outer program), else
    ``_FULL``.

    This runs on every eager op, so the common cases are tested first and cheaply:
    Python numbers, then jaxlib arrays by their shape (scalars and vectors without a
    product)."""
    limit = _config.kernel_fast_compile_elements
    if limit <= 0 or not (_on_cpu[0] if _on_cpu else _cpu()):
        limit = -1
    mode = _FAST if limit >= 0 else _FULL
    for a in args:
        t = type(a)
        if t is _Array:
            if mode == _FAST:
                sh = a.shape
                if sh and (sh[0] > limit if len(sh) == 1 else math.prod(sh) > limit):
                    mode = _LARGE
        elif t is float or t is int or t is bool:
            continue
        elif isinstance(a, _Tracer):
            return _TRACED
        elif mode == _FAST and getattr(a, "size", 0) > limit:
            mode = _LARGE
    return mode


_MAX_SIGS = 4096  # large-call signatures remembered per kernel (a forgotten one runs fast once more)


def fast_calls(elements: int) -> int:
    """How many calls of a large signature whose arguments hold ``elements`` elements run the
    fast program before XLA's full one is compiled: ``config.kernel_fast_first_calls``, or
    while the elements read stay within ``config.kernel_fast_budget_elements`` if that is
    more, plus the calls the host answers first (``config.kernel_host_first_calls``), which
    count here too.

    Why a budget: the full pipeline costs 20-140 ms per program, and what it buys per call
    grows with the elements (measured, XLA:CPU on the project's 2-core machine: the fast
    program's ``tanh`` is 14 ns an element slower, ``relu`` 7, ``add`` 1.5, matmuls and
    reductions no slower). Compiling once the fast program's extra time could have paid
    for the compile (a ski rental) bounds a loop's total at about twice the best choice
    made in hindsight; compiling at the second call made a 6-step MLP loop pay 1 s of full
    compiles that 100 steps would not repay. The count depends on shapes only, never on
    timing, so which calls run which program is reproducible."""
    first = _config.kernel_fast_first_calls
    if first <= 0:
        return 0
    budget = _config.kernel_fast_budget_elements
    if budget > 0:
        first = max(first, budget // max(elements, 1))
    return first + max(_config.kernel_host_first_calls, 0)


def _large(seen: dict, key: Any, args: tuple) -> bool:
    """Whether a large call should run the fast program: its signature (``key`` and the
    arguments' avals) has been called fewer than :func:`fast_calls` times. Large calls
    only, so the signature's cost (about a microsecond) is small beside the op's own."""
    if _config.kernel_fast_first_calls <= 0:
        return False
    sig = (key, *(
        (a.shape, a.dtype, getattr(a, "weak_type", False)) if hasattr(a, "shape") else type(a) for a in args
    ))
    n = seen.get(sig, 0)
    if n < 0:
        return False  # (switched: the full program from now on, without recounting the budget)
    if n >= fast_calls(_elements(args)):
        seen[sig] = -1
        return False
    if n == 0 and len(seen) >= _MAX_SIGS:
        seen.clear()
    seen[sig] = n + 1
    return True


def _elements(args: tuple) -> int:
    return sum(math.prod(a.shape) for a in args if hasattr(a, "shape"))


def _run(fast: Callable, full: Callable, args: tuple) -> Any:
    try:
        return fast(*args)
    except ValueError as e:
        # Concrete arguments inside a trace (a constant indexed in a tapejax.function step):
        # JAX refuses options on a nested jit before compiling anything; the call is inlined.
        if "compiler_options" not in str(e):
            raise
        return full(*args)


def jit(fn: Callable) -> Callable:
    """``jax.jit(fn)``, whose small calls compile with :data:`FAST_OPTIONS` (see the module doc).

    Inside a trace (a tracer among the arguments) the call is inlined, as a nested
    ``jax.jit`` is.
    """
    full = jax.jit(fn)
    fast = jax.jit(fn, compiler_options=FAST_OPTIONS)
    seen: dict = {}

    def call(*args: Any) -> Any:
        m = _mode(args)
        if m == _FAST or (m == _LARGE and _large(seen, None, args)):
            return _run(fast, full, args)
        return full(*args)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    call.fast, call.full = fast, full  # type: ignore[attr-defined]  # (tests read which program ran)
    call.__name__ = getattr(fn, "__name__", "kernel")
    return call


def staged(fn: Callable) -> Callable:
    """``jax.jit(fn)`` for a whole program compiled on its first sighting (a jacobian's):
    its first ``config.kernel_fast_first_calls`` concrete calls run the fast program,
    later ones XLA's full pipeline, whatever the arguments' sizes. The caller keeps one
    per input signature (the replay cache is keyed by avals), so a call count is the
    signature's. Traced, the call is inlined."""
    full = jax.jit(fn)
    fast = jax.jit(fn, compiler_options=FAST_OPTIONS)
    calls = [0]

    def call(*args: Any) -> Any:
        if (
            calls[0] < _config.kernel_fast_first_calls
            and _config.kernel_fast_compile_elements > 0
            and (_on_cpu[0] if _on_cpu else _cpu())
            and not any(isinstance(a, _Tracer) for a in jax.tree_util.tree_leaves(args))
        ):
            calls[0] += 1
            return _run(fast, full, args)  # (concrete arguments inside an outer trace: inlined)
        return full(*args)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    call.fast, call.full = fast, full  # type: ignore[attr-defined]
    return call


_CACHE_SIZE = 256  # compiled variants kept per op, one per static-parameter set (the oldest go first)


def kernel(impl: Callable) -> Callable:
    """An op's eager implementation ``impl(*arrays, **static_params)`` as compiled kernels:
    a fast/full pair of programs per set of static parameters (each keeps jit's own cache
    of input shapes). Traced, a jnp function that is itself jitted is called as it is, so a
    traced program holds its primitives, not a call of a wrapper."""
    full = jax.jit(impl)
    fast = jax.jit(impl, compiler_options=FAST_OPTIONS)
    by_params: dict = {}
    seen: dict = {}
    lock = threading.Lock()
    own = hasattr(impl, "lower") or type(impl).__name__ == "ufunc"  # a jitted jnp function or a jnp ufunc

    def call(*args: Any, **params: Any) -> Any:
        m = _mode(args)
        if m == _TRACED and own:
            return impl(*args, **params)
        if not params:
            if m == _FAST or (m == _LARGE and _large(seen, None, args)):
                return _run(fast, full, args)
            return full(*args)
        key = tuple(sorted(params.items()))
        pair = by_params.get(key)
        if pair is None:
            with lock:
                pair = by_params.get(key)
                if pair is None:
                    fn = functools.partial(impl, **params)
                    pair = by_params[key] = (jax.jit(fn, compiler_options=FAST_OPTIONS), jax.jit(fn))
                    if len(by_params) > _CACHE_SIZE:
                        del by_params[next(iter(by_params))]
        if m == _FAST or (m == _LARGE and _large(seen, key, args)):
            return _run(pair[0], pair[1], args)
        return pair[1](*args)

    def run1(v: Any, key: tuple = (), params: dict | None = None) -> Any:
        # ``call(v, **params)`` for one concrete jaxlib array ``v`` (the caller tested its
        # type), with ``key`` the sorted ``params`` items precomputed by the op's fast path:
        # the same program choice as ``call`` without the argument loop and key building
        # (the shape read from the aval: ``v.shape`` is a Python property over it).
        if key:
            pair = by_params.get(key)
            if pair is None:
                return call(v, **params)  # type: ignore[arg-type]  # (builds the pair)
            f, g = pair
        else:
            f, g = fast, full
        limit = _config.kernel_fast_compile_elements
        if limit > 0 and (_on_cpu[0] if _on_cpu else _cpu()):
            sh = v.aval.shape
            if not sh or (sh[0] <= limit if len(sh) == 1 else math.prod(sh) <= limit) or _large(seen, key or None, (v,)):
                try:
                    return f(v)
                except ValueError as e:
                    if "compiler_options" not in str(e):  # (as ``_run``)
                        raise
                    return g(v)
        return g(v)

    def run2(a: Any, b: Any, key: tuple = (), params: dict | None = None) -> Any:
        # ``run1`` for two concrete jaxlib arrays.
        if key:
            pair = by_params.get(key)
            if pair is None:
                return call(a, b, **params)  # type: ignore[arg-type]
            f, g = pair
        else:
            f, g = fast, full
        limit = _config.kernel_fast_compile_elements
        if limit > 0 and (_on_cpu[0] if _on_cpu else _cpu()) and (
            (math.prod(a.aval.shape) <= limit and math.prod(b.aval.shape) <= limit) or _large(seen, key or None, (a, b))
        ):
            return _run(f, g, (a, b))
        return g(a, b)

    call.__name__ = getattr(impl, "__name__", "impl")
    call.__wrapped__ = impl  # type: ignore[attr-defined]
    call.run2 = run2  # type: ignore[attr-defined]
    call.run1 = run1  # type: ignore[attr-defined]
    # The parameter-free programs, for the op layer's generated fast paths, which make the
    # small-call choice inline and hand any other call to ``call`` (``_ops._machinery``).
    call.fast, call.full = fast, full  # type: ignore[attr-defined]
    return call


# ---- one MLIR context for the kernels' lowerings ------------------------------------
# JAX lowers every program into a new MLIR context (``mlir.make_ir_context``): loading its
# dialects costs about 2.5-3.5 ms, half of lowering a one-op kernel, and a new tape's first
# gradient lowers tens of kernels (mlp_step_small: 24, lowering 0.13-0.17 s, 0.05-0.06 s
# with the context shared). A kernel's lowering gets a context its
# thread reuses instead. The modules are the same text either way; what a shared context
# keeps is its uniqued types and attributes (a kernel's are shapes and small scalars: its
# arrays are arguments), so it is renewed after _CTX_USES lowerings, and only a compile
# that a kernel call started shares it: the first tapejax frame above the lowering is a
# kernel wrapper or an op's generated fast path (``_ops._machinery.define``). A compiled
# slice, a staged jacobian, a tapejax.function step or a user's jax.jit (which may embed
# large constants) keeps JAX's fresh context. ``TAPEJAX_SHARE_IR_CONTEXT=0`` turns it off.

OP_FILENAME = "<tapejax-op>"  # the filename of the op layer's generated functions
_CTX_USES = 256
_ctx_local = threading.local()
# (co_filename is the path the module was imported by, as __file__ is)
_PKG_DIR = os.path.dirname(os.path.dirname(__file__)) + os.sep
_k: Any = kernel(abs)
_SHARING_CODES = frozenset({jit(abs).__code__, _k.__code__, _k.run1.__code__, _k.run2.__code__})
# Frames skipped by the walk: ``_run`` (its caller's: a kernel's or staged's) and the host
# hook below (the compile it lets through is its caller's).
_TRANSPARENT: set = {_run.__code__}
del _k


def _kernel_compile() -> bool:
    f: Any = sys._getframe(2)
    for _ in range(96):
        if f is None:
            return False
        code = f.f_code
        name = code.co_filename
        if name == OP_FILENAME:
            return True
        if name.startswith(_PKG_DIR) and code not in _TRANSPARENT:
            return code in _SHARING_CODES
        f = f.f_back
    return False


def _install_shared_ir_context() -> None:
    if os.environ.get("TAPEJAX_SHARE_IR_CONTEXT", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    try:
        from jax._src.interpreters import mlir
    except ImportError:  # pragma: no cover - a JAX without this module: nothing to share
        return
    make = getattr(mlir, "make_ir_context", None)
    if make is None or getattr(make, "_tapejax_shared", False):
        return

    def make_ir_context() -> Any:
        if not _kernel_compile():
            return make()
        st = _ctx_local.__dict__
        ctx = st.get("ctx")
        if ctx is None or st["uses"] >= _CTX_USES:
            ctx = st["ctx"] = make()
            st["uses"] = 0
        st["uses"] += 1
        return ctx

    make_ir_context._tapejax_shared = True  # type: ignore[attr-defined]
    make_ir_context.__wrapped__ = make  # type: ignore[attr-defined]
    mlir.make_ir_context = make_ir_context


_install_shared_ir_context()


# ---- a kernel's first call on the host -------------------------------------------------
# A kernel signature seen for the first time is evaluated by NumPy (``_host``) instead of
# lowered and compiled: a new tape's first gradient then compiles nothing it runs once.
# The hook sits where jit, having traced a call its C++ cache missed, would compile it.
# An answer without an executable would pin the signature to jit's slow Python path for
# good; the flag jit's profile-guided recompiles use (``_EVICT``) makes its C++ cache drop
# the entry instead, so the signature's next call misses again and compiles as before
# (its trace is cached). Only a call a kernel started
# (``_kernel_compile``), on one CPU device, with no donation; anything ``_host`` cannot
# reproduce compiles at once.

# id(jaxpr) -> [jaxpr, host calls so far, Program, elements if large] (the jaxpr pins the id)
_host_calls: dict[int, list] = {}
_MAX_HOST_SIGS = 8192
host_counts = {"answered": 0}  # (``replay_cache_info().host_first_calls``)


class _Evict:
    # Read by jit's ``_need_to_rebuild_with_fdo``: true means "drop this cache entry".
    @staticmethod
    def is_enabled() -> bool:
        return True

    @staticmethod
    def is_fdo_consumed() -> bool:
        return False


_EVICT = _Evict()


@functools.cache
def _host_modules() -> tuple:
    # Imported at the first host call, once (not per call: a host call is on a hot path).
    from jax._src.interpreters import pxla
    from jax.sharding import SingleDeviceSharding

    from . import _host

    return pxla, SingleDeviceSharding, _host


def _host_outputs(args: tuple, jaxpr: Any, kw: dict, entry: list) -> list | None:
    pxla, SingleDeviceSharding, _host = _host_modules()  # noqa: N806
    jcfg: Any = jax.config
    if any(kw.get("donated_invars", ())) or jcfg.jax_debug_nans or jcfg.jax_debug_infs:
        return None  # (JAX checks a compiled call's outputs for these)
    dev: Any = None
    sharding: Any = None
    committed = False
    for a in args:
        if type(a) is _Array:
            arr: Any = a
            s = arr.sharding
            if type(s) is not SingleDeviceSharding:
                return None
            if sharding is None:
                sharding, dev = s, next(iter(s.device_set))
            elif s != sharding:
                return None
            committed = committed or arr._committed
        elif type(a) not in (float, int, bool):
            return None
    if dev is None or dev.platform != "cpu" or (not committed and jcfg.jax_default_device is not None):
        return None  # (uncommitted arguments under jax.default_device: jit picks the device)
    try:
        if entry[2] is None:
            entry[2] = _host.Program(jaxpr)
        outs = entry[2].run(args)
    except _host.Unsupported:
        return None
    # (a fresh C-ordered copy each: no result aliases an argument's buffer or another result)
    return [
        pxla.batched_device_put(v.aval, sharding, [np.array(o, order="C", copy=True)], [dev], committed)
        for v, o in zip(jaxpr.jaxpr.outvars, outs)
    ]


def _large_elements(args: tuple) -> int:
    # A large signature (an argument over ``kernel_fast_compile_elements``): its elements,
    # else 0. The host can answer every call of a large one that would run the fast
    # program (``fast_calls``), so it never builds one: on arrays that size NumPy runs
    # elementwise code and matmuls as fast as the unoptimized program or faster (add of
    # 64k floats: 15 against 150 us; tanh of 32k: about 300 against 530 us) and skips its
    # 15-40 ms compile.
    return _elements(args) if _mode(args) == _LARGE else 0


def _install_host_first_call() -> None:
    try:
        from jax._src import pjit
    except ImportError:  # pragma: no cover - a JAX without this module: every call compiles
        return
    impl = getattr(pjit, "_pjit_call_impl_python", None)
    if impl is None or getattr(impl, "_tapejax_host", False):
        return

    def _pjit_call_impl_python(*args: Any, jaxpr: Any, **kw: Any) -> Any:
        n = _config.kernel_host_first_calls
        if n > 0 and (_on_cpu[0] if _on_cpu else _cpu()) and _kernel_compile():
            entry = _host_calls.get(id(jaxpr))
            if entry is None or entry[0] is not jaxpr:
                if len(_host_calls) >= _MAX_HOST_SIGS:
                    _host_calls.clear()
                entry = _host_calls[id(jaxpr)] = [jaxpr, 0, None, _large_elements(args)]
            if entry[3]:
                # A large signature with few fast calls left after the host's: the host takes
                # them too, and no fast program is built. With many (a signature just over
                # the size limit: 2**18 // 1290 elements = 203 calls), the host's fixed cost
                # (about 0.1 ms a call over a compiled program's) would outweigh a fast
                # compile: it answers its n, then the fast program runs as before.
                f = fast_calls(entry[3])
                if f <= 2 * n:
                    n = max(n, f)
            if entry[1] < n:
                entry[1] += 1
                outs = _host_outputs(args, jaxpr, kw, entry)
                if outs is not None:
                    host_counts["answered"] += 1
                    # (no executable, and jit evicts the entry: the next call compiles)
                    return outs, None, _EVICT, []
                entry[1], entry[2] = 1 << 62, None  # (not evaluable: the next call need not try again)
        return impl(*args, jaxpr=jaxpr, **kw)

    _TRANSPARENT.add(_pjit_call_impl_python.__code__)
    _pjit_call_impl_python._tapejax_host = True  # type: ignore[attr-defined]
    _pjit_call_impl_python.__wrapped__ = impl  # type: ignore[attr-defined]
    pjit._pjit_call_impl_python = _pjit_call_impl_python


_install_host_first_call()
