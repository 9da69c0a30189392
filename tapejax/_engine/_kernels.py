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
(``tanh``, ``log1p``) may differ in the last bit between them. Whole-slice and lazy-step
programs (the steady state) get XLA's full pipeline; a short one over small arrays is built
by the fast pipeline first and runs that program for ``config.replay_fast_runs`` runs while
the full one builds in the background (:class:`FastFirst`). Segment programs always get the
full pipeline.

Before any of that, a signature's first calls (:func:`host_calls`: at least
``config.kernel_host_first_calls``, more while the elements read stay within
``config.kernel_host_budget_elements``: about 970 calls of a scalar op), and a large
signature's fast-program calls when they are few, are answered by NumPy on the host where
it reproduces XLA:CPU (``_host``, through jit's own cache miss: see ``_hosted``), so a
signature a first gradient or a short loop meets hundreds of times compiles nothing. A
kernel's ``on_host`` makes the same choice for an interpreted backward pass and leaves a
host answer on the host (:class:`HostValue`), so the next kernel reads it without a
transfer either way.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import math
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import numpy as np

from .. import config as _config
from .._core._recorder import tapes_made

__all__ = ["jit", "kernel", "staged", "FAST_OPTIONS", "ArrayImpl", "FastFirst", "fast_first_eligible", "compile_whole"]

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


# A host call's fixed cost over a compiled one, in elements: measured on the project's
# 2-core machine, a host call of a scalar op costs about 12 us more than the compiled
# kernel's (jit's miss, NumPy's dispatch, a device_put of each result), and each element
# about 3 ns more (NumPy's unvectorized transcendental functions).
_HOST_CALL_ELEMENTS = 4096


def host_calls(elements: int) -> int:
    """How many calls of a small signature whose arguments hold ``elements`` elements the
    host may answer before its program is compiled: ``config.kernel_host_first_calls``,
    or while the calls' elements (each counted ``_HOST_CALL_ELEMENTS`` more) stay within
    ``config.kernel_host_budget_elements`` if that is more; 0 when the first is 0. (The
    budget holds in the tape where the signature came up, and later only for one called at
    most ``kernel_host_first_calls`` times there, until ``config.kernel_host_tapes`` tapes
    have been made since its first call: ``_host_limit``.)

    Why a budget: a compile costs 10-20 ms on the fast pipeline and a host call about 3x a
    compiled call (12 us more for a scalar op), so answering on the host until the extra
    time could have paid for the compile (a ski rental, as :func:`fast_calls`) bounds the
    total at about twice the best choice made in hindsight, and a first gradient whose
    signatures each come up hundreds of times compiles nothing. Why the tapes as well: a
    training loop calls a signature once or twice a step, and a budget of hundreds of
    calls would leave its ops at the host's 3x for hundreds of steps (mlp_step's call 30:
    5.9 against 2.4 ms); counting tapes tells the calls of one long tape from a loop's
    steps without reading a clock, so which calls run where stays reproducible."""
    n = _config.kernel_host_first_calls
    if n <= 0:
        return 0
    budget = _config.kernel_host_budget_elements
    if budget > 0:
        n = max(n, budget // (elements + _HOST_CALL_ELEMENTS))
    return n


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


def _out_info(fast: Any, full: Any, specs: tuple) -> Any:
    # The outputs' ShapeDtypeStructs of a call on arguments of these specs (``kernel``'s
    # ``out_info``), traced by the program that call would run first.
    return (full if _mode(specs) == _FULL else fast).trace(*specs).out_info


def _programs(fn: Callable) -> tuple[Any, Any, Callable]:
    """The fast and full ``jax.jit`` programs of a kernel's ``fn``, whose first calls of a
    signature are answered on the host (``_hosted``, below), and the host's answer kept on
    the host (``_host_value``), sharing their signatures' counts."""
    table = _table(fn)
    jitted = jax.jit(fn, compiler_options=FAST_OPTIONS)
    return (_hosted(jitted, table), _hosted(jax.jit(fn), table), functools.partial(_host_value, jitted, table))


# The host's signature tables, one per function: jit's executables are cached per function
# (and options), so two kernels of one function (the op library's ``add`` and the backward
# pass's cotangent sums) share them, and their host calls are counted together too. Else a
# call of one kernel could be answered on the host where its signature is compiled already,
# through the other, and a route that asks the host first (``_on_host``) would not know.
_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _table(fn: Callable) -> dict:
    try:
        t = _tables.get(fn)
        if t is None:
            t = _tables[fn] = {}
        return t
    except TypeError:  # (not weakly referable or not hashable: a table of its own)
        return {}


def _device_args(args: tuple) -> tuple:
    return tuple(a.device() if type(a) is HostValue else a for a in args)


def _on_host(host: Callable, fast: Callable, full: Callable, seen: dict, key: Any, args: tuple) -> Any:
    # A kernel call over arrays, host values and Python numbers: the program choice of a
    # call through jit (the same fast-call count), then the host's answer as a host value
    # where jit's cache miss would have taken it, else the compiled program on the
    # arguments transferred.
    m = _mode(args)
    use_fast = m == _FAST or (m == _LARGE and _large(seen, key, args))
    if m != _TRACED and _config.kernel_host_first_calls > 0 and (_on_cpu[0] if _on_cpu else _cpu()):
        out = host(args)
        if out is not None:
            return out
    dargs = _device_args(args)
    return _run(fast, full, dargs) if use_fast else full(*dargs)


def jit(fn: Callable) -> Callable:
    """``jax.jit(fn)``, whose small calls compile with :data:`FAST_OPTIONS` (see the module doc).

    Inside a trace (a tracer among the arguments) the call is inlined, as a nested
    ``jax.jit`` is.
    """
    fast, full, host = _programs(fn)
    seen: dict = {}

    def call(*args: Any) -> Any:
        m = _mode(args)
        if m == _FAST or (m == _LARGE and _large(seen, None, args)):
            return _run(fast, full, args)
        return full(*args)

    def on_host(*args: Any) -> Any:
        return _on_host(host, fast, full, seen, None, args)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    call.fast, call.full = fast, full  # type: ignore[attr-defined]  # (tests read which program ran)
    call.on_host = on_host  # type: ignore[attr-defined]
    call.out_info = lambda *specs: _out_info(fast, full, specs)  # type: ignore[attr-defined]
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


# The most operations a lowered program may hold to be built by the fast pipeline first. Its
# build is 2-3x quicker on small programs and no quicker on long ones (measured on the project's
# 2-core machine: a 38-op training step 48 against 151 ms, a 701-op gradient 71 against 141 ms,
# a 1001-op lazy step 171 against 115 ms, a 914-op solver loop 798 against 589 ms).
FAST_FIRST_MAX_OPS = 768


def fast_first_eligible(shapes: Any, lowered: Any = None) -> bool:
    """Whether a whole program whose arrays have ``shapes`` (inputs, outputs and any
    intermediate the caller knows) may run a fast-compiled form first (:class:`FastFirst`):
    on CPU, with ``config.replay_fast_runs`` and ``config.kernel_fast_compile_elements``
    on, every array at most ``kernel_fast_compile_elements`` elements (the size where the
    fast pipeline's code runs about as fast as the full one's) and, given its ``lowered``
    form, at most ``FAST_FIRST_MAX_OPS`` operations."""
    limit = _config.kernel_fast_compile_elements
    if limit <= 0 or int(getattr(_config, "replay_fast_runs", 0)) <= 0 or not (_on_cpu[0] if _on_cpu else _cpu()):
        return False
    for sh in shapes:
        if sh and math.prod(sh) > limit:
            return False
    if lowered is not None:
        try:
            module = lowered.compiler_ir()
            n = 0
            for f in module.body.operations:
                for r in f.regions:
                    for b in r.blocks:
                        n += len(b.operations)
        except Exception:  # noqa: BLE001  (no MLIR module to read: the full pipeline, as before)
            return False
        return n <= FAST_FIRST_MAX_OPS
    return True


# Full-pipeline compiles of ``FastFirst`` programs in flight (drained at exit, as the tiers' own).
_upgrades: set = set()
_upgrades_lock = threading.Lock()


class FastFirst:
    """A small hot program compiled twice: by XLA's fast pipeline (``fast``, about 3-4x
    quicker to build) for its first ``config.replay_fast_runs`` runs, and by the full
    pipeline (``build_full()``, on a background thread from the run a quarter of the way
    there) from then on, waiting for that compile at the switch if it is still running.

    Why: a training step's or a gradient slice's whole program takes 200-400 ms to build
    with the full pipeline on the project's 2-core machine, and a loop waited for it at the
    tier switch (mlp_step_small's step 9 and, in lazy mode, 19); the fast pipeline's build
    is 55-100 ms and its code, on arrays of at most ``kernel_fast_compile_elements``, runs
    10-20 % slower. A loop shorter than a quarter of the runs never builds the full program.
    The switch counts runs, never time, so which runs use which program is reproducible
    (the two pipelines agree bit for bit but for a last bit of a few transcendental
    functions: ``_kernels``' module doc).
    """

    __slots__ = ("run", "runs", "build_full", "start", "switch", "done", "full")

    def __init__(self, fast: Callable, build_full: Callable[[], Callable]):
        self.run = fast
        self.runs = 0
        self.build_full: Any = build_full
        self.switch = max(1, int(_config.replay_fast_runs))
        self.start = self.switch // 4
        self.done: threading.Event | None = None
        self.full: Any = None

    def __call__(self, *args: Any) -> Any:
        if self.build_full is None:
            return self.run(*args)
        n = self.runs = self.runs + 1
        if n >= self.start and self.done is None:
            self._begin()
        if n >= self.switch:
            self._take_over()
        return self.run(*args)

    def _begin(self) -> None:
        with _upgrades_lock:
            if self.done is not None:  # (another thread's run began it)
                return
            done = self.done = threading.Event()
            _upgrades.add(done)
        build = self.build_full

        def work() -> None:
            try:
                self.full = build()
            except Exception:  # noqa: BLE001  (the fast program keeps running: it is correct, only slower)
                self.full = None
            finally:
                done.set()
                with _upgrades_lock:
                    _upgrades.discard(done)

        threading.Thread(target=work, name="tapejax-full-compile", daemon=True).start()

    def _take_over(self) -> None:
        assert self.done is not None
        self.done.wait()
        if self.full is not None:
            self.run = self.full
        self.build_full = None  # (and the thunk's shapes with it)

    @property
    def upgraded(self) -> bool:
        """Whether the full pipeline's program runs now (tests read which one ran)."""
        return self.build_full is None and self.full is not None and self.run is self.full


def compile_whole(lowered: Any, shapes: Any, rebuild: Callable[[], Callable]) -> Callable:
    """``lowered`` (a whole slice's or lazy step's program, whose arrays have ``shapes``) compiled:
    a :class:`FastFirst` of its fast build where :func:`fast_first_eligible`, with ``rebuild()``
    (lowering again and compiling with the full pipeline) its later program; else the full
    pipeline's program now."""
    if fast_first_eligible(shapes, lowered):
        return FastFirst(lowered.compile(compiler_options=FAST_OPTIONS), rebuild)
    return lowered.compile()


@atexit.register
def _drain_upgrades() -> None:
    # XLA aborts the process if the interpreter shuts down under a compile in flight.
    with _upgrades_lock:
        pending = list(_upgrades)
    for done in pending:
        done.wait()


_CACHE_SIZE = 256  # compiled variants kept per op, one per static-parameter set (the oldest go first)


def kernel(impl: Callable) -> Callable:
    """An op's eager implementation ``impl(*arrays, **static_params)`` as compiled kernels:
    a fast/full pair of programs per set of static parameters (each keeps jit's own cache
    of input shapes). Traced, a jnp function that is itself jitted is called as it is, so a
    traced program holds its primitives, not a call of a wrapper."""
    fast, full, host = _programs(impl)
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
            pair = _pair(key, params)
        if m == _FAST or (m == _LARGE and _large(seen, key, args)):
            return _run(pair[0], pair[1], args)
        return pair[1](*args)

    def _pair(key: tuple, params: dict) -> tuple:
        with lock:
            pair = by_params.get(key)
            if pair is None:
                fn = functools.partial(impl, **params)
                pair = by_params[key] = _programs(fn)
                if len(by_params) > _CACHE_SIZE:
                    del by_params[next(iter(by_params))]
        return pair

    def out_info(*specs: Any, **params: Any) -> Any:
        # The outputs' shapes and dtypes (ShapeDtypeStructs) of ``call`` on arguments of these
        # specs: lazy mode's abstract evaluation of a new op. Traced by the program whose first
        # call would trace them (the fast one where the arguments are small), so JAX's trace
        # cache answers that call's trace: a new op is traced once, as in eager mode. Through
        # ``jax.eval_shape`` of a new partial it was traced twice, and the first time under a
        # wrapper jit caches nothing for (0.5-4 ms an op: mlp_step_small's first step 29 ms).
        if params:
            pair = _pair(tuple(sorted(params.items())), params)
            return _out_info(pair[0], pair[1], specs)
        return _out_info(fast, full, specs)

    def on_host(*args: Any, **params: Any) -> Any:
        # ``call(*args, **params)`` where arguments may be host values and a host answer
        # stays one (the interpreter's unwatched backward pass: ``_interpret``).
        if not params:
            return _on_host(host, fast, full, seen, None, args)
        key = tuple(sorted(params.items()))
        if by_params.get(key) is None:
            return call(*_device_args(args), **params)  # (builds the programs; rare)
        f, g, h = by_params[key]
        return _on_host(h, f, g, seen, key, args)

    def run1(v: Any, key: tuple = (), params: dict | None = None) -> Any:
        # ``call(v, **params)`` for one concrete jaxlib array ``v`` (the caller tested its
        # type), with ``key`` the sorted ``params`` items precomputed by the op's fast path:
        # the same program choice as ``call`` without the argument loop and key building
        # (the shape read from the aval: ``v.shape`` is a Python property over it).
        if key:
            pair = by_params.get(key)
            if pair is None:
                return call(v, **params)  # type: ignore[arg-type]  # (builds the pair)
            f, g = pair[0], pair[1]
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
            f, g = pair[0], pair[1]
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
    call.on_host = on_host  # type: ignore[attr-defined]
    call.out_info = out_info  # type: ignore[attr-defined]
    # The parameter-free programs, for the op layer's generated fast paths, which make the
    # small-call choice inline and hand any other call to ``call`` (``_ops._machinery``).
    call.fast, call.full = fast, full  # type: ignore[attr-defined]
    return call


# ---- a kernel's first calls on the host -----------------------------------------------
# A kernel signature's first calls are evaluated by NumPy (``_host``) instead of lowered
# and compiled: a new tape's first gradient then compiles nothing it runs a few times.
# The route is jit's own: its C++ dispatch finds no executable for a new signature and
# calls a Python ``cache_miss``. A kernel's jit is a copy of ``jax.jit``'s function
# object (the state pickling exposes) whose ``cache_miss`` asks the host first, so a
# host answer skips jit's trace-cache lookup and argument checks (a scalar op: about
# 12 us over a compiled call's 6; through jit's Python path it was 40-100), and a
# compiled signature never reaches Python at all.
# An answer without an executable would pin the signature to Python for good; the third
# value a miss returns (jit's "rebuild" flag, set by its profile-guided recompiles) makes
# its C++ cache drop the entry instead, so a later call misses again, and the call after
# the host's last compiles as before. Only one CPU device and concrete arguments; anything
# ``_host`` cannot reproduce compiles at once.

host_counts = {"answered": 0}  # (``replay_cache_info().host_first_calls``)
_MAX_HOST_SIGS = 1024  # signatures remembered per kernel (a forgotten one starts over)
_DECLINED = 1 << 62  # an entry's count once it cannot be answered: the next call compiles


@functools.cache
def _host_modules() -> tuple:
    # Imported at the first host call, once (not per call: a host call is on a hot path).
    from jax._src import config as jax_config
    from jax._src import core
    from jax._src.interpreters import pxla
    from jax.sharding import SingleDeviceSharding

    from . import _host

    put: Any
    try:
        import importlib

        xc: Any = importlib.import_module("jax._src.lib.xla_client")
        # (copied during the call: no result aliases an argument's buffer or another result)
        put = _bound(xc.batched_device_put, xc.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL)
    except (ImportError, AttributeError):  # pragma: no cover - another jaxlib: copy first, then transfer
        put = _copied(pxla.batched_device_put)
    _mods[:] = [jax_config.trace_context, put, SingleDeviceSharding, _host, core.trace_state_clean]
    return tuple(_mods)


def _bound(put: Callable, semantics: Any) -> Callable:
    def transfer(aval: Any, sharding: Any, xs: list, devices: list, committed: bool) -> Any:
        return put(aval, sharding, xs, devices, committed, False, semantics)

    return transfer


def _copied(put: Callable) -> Callable:
    def transfer(aval: Any, sharding: Any, xs: list, devices: list, committed: bool) -> Any:
        return put(aval, sharding, [np.array(x, order="C", copy=True) for x in xs], devices, committed)

    return transfer


_mods: list = []  # (``_host_modules()`` once imported: read without a call)


class _Sig:
    """What the host needs for one signature of one kernel: its program, the outputs'
    avals and tree, and where the outputs live."""

    __slots__ = (
        "calls", "elements", "large", "tapes", "first_tape_calls", "program", "avals", "tree", "sharding", "devices",
        "committed", "limit", "limit_key", "compiled",
    )

    def __init__(self) -> None:
        self.calls = _DECLINED
        self.program: Any = None
        self.avals: list = []
        self.tree: Any = None
        self.sharding: Any = None
        self.devices: list = []
        self.committed = False
        self.elements = 0
        self.large = False
        self.tapes = 0  # (``tapes_made`` at its first call)
        self.first_tape_calls = -1  # (its calls before the next tape was made; -1: not yet)
        self.limit = 0  # (``_host_limit`` when the settings and clock were ``limit_key``)
        self.limit_key: tuple = ()
        self.compiled = False  # (its host calls ran out once: jit compiled it then)


def _new_sig(jitted: Any, args: tuple) -> _Sig:
    e = _Sig()
    _, _, SingleDeviceSharding, _host, _ = _host_modules()  # noqa: N806
    jcfg: Any = jax.config
    if jcfg.jax_debug_nans or jcfg.jax_debug_infs:
        return e  # (JAX checks a compiled call's outputs for these)
    sharding: Any = None
    committed = False
    for a in args:
        if type(a) is _Array:
            arr: Any = a
            s = arr.sharding
            if type(s) is not SingleDeviceSharding or (sharding is not None and s != sharding):
                return e
            sharding = s
            committed = committed or arr._committed
    if sharding is None:
        return e  # (Python numbers only: jit picks the device)
    dev = next(iter(sharding.device_set))
    if dev.platform != "cpu" or (not committed and jcfg.jax_default_device is not None):
        return e  # (uncommitted arguments under jax.default_device: jit picks the device)
    try:
        traced = jitted.trace(*args)  # (jit's trace cache: the compile this defers reuses it)
        e.program = _host.Program(traced.jaxpr)
    except _host.Unsupported:
        return e
    e.avals = [v.aval for v in traced.jaxpr.jaxpr.outvars]
    tree = traced.out_tree
    e.tree = None if tree.num_leaves == 1 and tree.num_nodes == 1 else tree
    e.sharding, e.devices, e.committed = sharding, [dev], committed
    e.elements, e.large = _elements(args), _mode(args) == _LARGE
    e.tapes = tapes_made[0]
    e.calls = 0
    return e


# A large signature (an argument over ``kernel_fast_compile_elements``) whose arguments hold
# at most this many elements in all is scheduled as a small one: the host budget (about 330
# calls at 8,192 elements) and the tape clock. A nested gradient of a small network (a
# PINN's 64 x 32 activations) calls its elementwise and matmul signatures dozens of times in
# its first tape: with 8 host calls each it compiled three programs (and built XLA's MLIR
# context) inside the first gradient, 0.14 s against 0.08 s without (TF: 0.10 s).
_HOST_BUDGET_MAX_ELEMENTS = 8192


def _host_limit(e: _Sig) -> int:
    # (from the settings of each call: a test or a user may change them between calls)
    n = _config.kernel_host_first_calls
    if e.large and e.elements > _HOST_BUDGET_MAX_ELEMENTS:
        # A large signature with few fast calls left after the host's: the host takes them
        # too, and no fast program is built. With many (a signature just over the size
        # limit: 2**18 // 1290 elements = 203 calls), the host's cost per call (NumPy
        # against an unoptimized program on a larger array) would outweigh a fast
        # compile: it answers its n, then the fast program runs as before. (No element
        # budget: the kernel wrapper counts a large signature's calls to its switch to the
        # full program, ``fast_calls``, and a longer host share would compile a fast
        # program besides.)
        f = fast_calls(e.elements)
        return max(n, f) if f <= 2 * n else n
    since = tapes_made[0] - e.tapes
    if since == 0:
        return host_calls(e.elements)
    if e.first_tape_calls < 0:
        e.first_tape_calls = e.calls
    # A signature called more than n times in the tape where it came up (a long tape: a
    # solver loop, a chain of ops) compiles at its first call in a later tape: the tape is
    # being repeated, and the host's share of its calls would cost more than the compile
    # (under a background compile of the repeated tape the host's calls, Python holding
    # the GIL, ran at 100 us: euler_100's calls 2-6 took 1.9 s against 1.0 s). One called
    # a few times a tape (a training step's ops) stays on the host for
    # ``kernel_host_tapes`` tapes, past a loop's first few steps.
    if e.first_tape_calls > n or since >= _config.kernel_host_tapes:
        return n
    return host_calls(e.elements)


class _PastBudget(threading.local):
    on = False
    device = False  # (also calls whose answers go to the device: lazy mode's warming runs)


# Set while an interpreted gradient whose compiled program is on its way runs on the host
# route (``_interpret.gradient(pending=True)``): a signature whose host calls are spent
# but which has not been compiled is answered on the host again (counted, never compiled
# for it), if its first tape called it at most ``kernel_host_first_calls`` times (a training
# step's op: mlp_step's first twelve steps 0.69-0.83 -> 0.60-0.66 s). A long tape's
# signature, called hundreds of times a gradient, compiles as before: its host calls, beside
# the background compile, cost more than the compile (euler_100's steps 3-6 took 130-250
# against 50-190 ms). A signature compiled already runs compiled. Thread-local: another
# thread's kernels keep their budgets. With ``device`` set as well, the same holds for the kernel
# calls whose answers go to the device: lazy mode sets both while it runs, op by op, a program
# whose compiled form is on its way (``_lazy._Warming``): its kernels would otherwise be compiled
# in its last op-by-op steps (mlp_step_small's steps 9-10: 280 and 240 ms), for nothing.
past_budget = _PastBudget()


def _host_eval(jitted: Any, table: dict, args: tuple, host: bool = False) -> Any:
    """The signature's entry and the NumPy outputs of ``jitted(*args)`` from the host, or
    None where the call should go to jit (the signature's host calls are spent, or the
    host cannot reproduce it). Counts the call against the signature's host calls.
    ``host``: the answer stays on the host (``_host_value``), where ``past_budget`` may
    answer past the budget."""
    trace_context, _, _, _host, clean = _mods or _host_modules()
    if not clean():
        return None  # (concrete arguments inside an outer trace: jit inlines the call)
    sig: list = [trace_context()]
    for a in args:
        t = type(a)
        if t is _Array:
            sig.append((a.aval, a.sharding, a._committed))
        elif t is float or t is int or t is bool:
            sig.append(t)
        elif t is HostValue:
            # (the signature the array it stands for would have: see ``HostValue``)
            sig.append((a.aval, a.sharding, a.committed))
        else:
            return None  # (a tracer: the call is being traced, not run)
    key = tuple(sig)
    e = table.get(key)
    if e is None:
        if len(table) >= _MAX_HOST_SIGS:
            table.clear()
        e = table[key] = _new_sig(jitted, _device_args(args))
    if e.calls >= _DECLINED:
        return None
    # (the limit read again only when a setting or the tape clock moved: see ``_limit_key``)
    lk = _limit_key()
    if lk != e.limit_key:
        e.limit, e.limit_key = _host_limit(e), lk
    if e.calls >= e.limit:
        if e.compiled or not (past_budget.on and (host or past_budget.device)) \
                or e.first_tape_calls > _config.kernel_host_first_calls:
            e.compiled = True  # (the caller compiles it, or runs it compiled)
            return None
    try:
        xs = []
        for a, (dt, _) in zip(args, e.program.arg_types):
            t = type(a)
            if t is _Array:
                hit = _answers.get(id(a))
                if hit is not None and hit[0]() is a and not a.is_deleted():
                    # (the host's own answer: its value, checked when made; a donated one
                    # raises below as jit would)
                    xs.append(hit[1])
                    continue
                x = np.asarray(a)
            elif t is HostValue:
                xs.append(a.x)  # (checked when made)
                continue
            else:
                x = np.asarray(a, dt)
            _host._check(x)
            xs.append(x)
        outs = e.program.run_checked(*xs)
    except _host.Unsupported:
        e.calls, e.program = _DECLINED, None  # (the next call need not try again)
        return None
    e.calls += 1
    host_counts["answered"] += 1
    return e, outs


def _host_answer(jitted: Any, table: dict, args: tuple) -> Any:
    """The outputs of ``jitted(*args)`` from the host, as jaxlib arrays, or None where the
    call should go to jit (see ``_host_eval``)."""
    got = _host_eval(jitted, table, args)
    if got is None:
        return None
    e, outs = got
    put = _mods[1]
    res = [put(aval, e.sharding, [o], e.devices, e.committed) for aval, o in zip(e.avals, outs)]
    if not e.large:
        for r, o in zip(res, outs):
            # (an array NumPy made, not a view: a view of an argument's transfer would
            # hold that array's buffer, which its owner may donate)
            if o.base is None and o.size <= _ANSWER_ELEMENTS:
                _answers[id(r)] = (_ref(r), o)
        if len(_answers) > _MAX_ANSWERS:
            # (the oldest half; ``pop``: another thread may be evicting the same entries)
            for k in list(itertools.islice(_answers, len(_answers) - _MAX_ANSWERS // 2)):
                _answers.pop(k, None)
    return res[0] if e.tree is None else jax.tree_util.tree_unflatten(e.tree, res)


class HostValue:
    """A kernel's output that the host computed and that stays on the host: its NumPy
    value and the aval, sharding and commitment of the array jit would have returned.

    Why: the interpreter's unwatched backward pass (``_interpret``) feeds most of its
    cotangents straight into the next kernel. Each transfer to a device array and back
    costs about as much as the host's evaluation itself (a transfer about 5 us, freeing
    the array 2-3 more, jit's C++ miss 3), so a first gradient's cotangents are kept
    here and transferred once, at the end (``device``). A kernel call given one is
    keyed and counted as if given that array (``_host_eval``), so a signature's host
    budget and its switch to compiled code are the same either way, and the values are
    the same bits."""

    __slots__ = ("x", "aval", "sharding", "devices", "committed")

    def __init__(self, x: np.ndarray, aval: Any, sharding: Any, devices: list, committed: bool):
        self.x, self.aval, self.sharding, self.devices, self.committed = x, aval, sharding, devices, committed

    # (what the gradient rules and the kernels' program choice read of a value)
    @property
    def shape(self) -> tuple:
        return self.aval.shape

    @property
    def dtype(self) -> Any:
        return self.aval.dtype

    @property
    def weak_type(self) -> bool:
        return self.aval.weak_type

    @property
    def size(self) -> int:
        return self.x.size

    def device(self) -> Any:
        """The jaxlib array jit would have returned (a copy of the NumPy value)."""
        return _mods[1](self.aval, self.sharding, [self.x], self.devices, self.committed)


def _host_value(jitted: Any, table: dict, args: tuple) -> Any:
    """``_host_answer`` with each output left on the host (a :class:`HostValue`)."""
    got = _host_eval(jitted, table, args, True)
    if got is None:
        return None
    e, outs = got
    res = [HostValue(o, aval, e.sharding, e.devices, e.committed) for aval, o in zip(e.avals, outs)]
    return res[0] if e.tree is None else jax.tree_util.tree_unflatten(e.tree, res)


# The host's latest small answers, array id -> (weak reference to the array, its NumPy
# value): an answer read by a later host call (a chain of ops, a backward pass) skips its
# transfer back and its subnormal check. (The reference tells a live answer from a new
# array that got a dead one's id; it is weak, so no array outlives its last user.)
_answers: dict[int, tuple] = {}
_MAX_ANSWERS = 2048
_ANSWER_ELEMENTS = 1024
_ref = weakref.ref


def _limit_key() -> tuple:
    # What ``_host_limit`` reads: the settings and the tape clock.
    c = _config
    return (
        tapes_made[0], c.kernel_host_first_calls, c.kernel_host_budget_elements, c.kernel_host_tapes,
        c.kernel_fast_first_calls, c.kernel_fast_budget_elements,
    )


def _host_miss(jitted: Any, real: Callable, table: dict) -> Callable:
    def miss(*args: Any, **kw: Any) -> Any:
        if _config.kernel_host_first_calls > 0 and not kw and (_on_cpu[0] if _on_cpu else _cpu()):
            out = _host_answer(jitted, table, args)
            if out is not None:
                # (no executable, and the "rebuild" flag: jit drops the entry, so the next
                # call misses again)
                return out, None, True
        return real(*args, **kw)

    return miss


def _hosted(jitted: Any, table: dict) -> Any:
    """``jitted`` (a ``jax.jit`` function) whose cache misses ask the host first, sharing
    ``table`` (signature -> :class:`_Sig`) with the other pipeline's program of the same
    function, so a signature's host calls are counted once. Where this JAX's jit object
    cannot be copied so, ``jitted`` itself: every call compiles, as without the host."""
    try:
        state = jitted.__getstate__()
        real = state["cache_miss"]
        cls: Any = type(jitted)
        clone = cls.__new__(cls)
        clone.__setstate__(dict(state, cache_miss=_host_miss(jitted, real, table)))
        clone.__dict__.update(jitted.__dict__)  # (``_fun``, ``_jit_info``: lower, trace)
    except Exception:  # noqa: BLE001 - a JAX whose jit objects differ: no host answers
        return jitted
    return clone


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
# Frames skipped by the walk: ``_run`` (its caller's: a kernel's or staged's) and a kernel's
# host-first cache miss above (the compile it lets through is its caller's).
_TRANSPARENT: set = {_run.__code__, _host_miss(None, abs, {}).__code__}
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
