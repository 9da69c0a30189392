"""Runtime switches of tapejax (``tapejax.config``).

``explain_none_gradients``: when True, ``GradientTape.gradient`` issues a
``tapejax.NoneGradientWarning`` naming, for each source whose gradient is None,
the cause found by ``tapejax.explain``. Return values do not change. Off by
default; the environment variable ``TAPEJAX_EXPLAIN_NONE=1`` turns it on at import.

The replay tiers of an eager gradient (see ``compat_docs/performance.md``):

- ``replay_tier``: ``"auto"`` (default) interprets a slice seen for the first time
  op by op (each op's pullback a small kernel compiled once per op signature) and
  compiles a slice whole once it is hot; ``"interpret"`` and ``"compile"`` force one
  tier. Set at import by ``TAPEJAX_REPLAY_TIER``.
- ``replay_hot``: sightings after which a slice structure is hot (default 2).
- ``replay_background_compile``: compile a hot slice on a background thread while
  tier 0 answers (default True); ``replay_lag`` sightings later (default 8) the
  compiled program takes over, waiting for the compile if needed, so the switch
  point never depends on timing.
- ``replay_max_compile_eqns``: slices longer than this are never compiled whole
  (default 256): a whole-slice compile grows faster than linearly with length. A hot
  longer slice is *segmented* instead: cut into runs of ``replay_segment_eqns``
  (default 128) equations, each run's pullback a small program compiled once per run
  structure, so a loop body recorded many times shares a few programs. 0 keeps long
  slices interpreted.
- ``kernel_fast_compile_elements``: an eager op's or a tier-0 pullback's program whose
  inputs all hold at most this many elements (default 1024) is compiled by XLA:CPU with
  its optimizer off: about 3x faster to build, as fast to run at that size. 0 turns it
  off. A larger call runs that fast program too while its signature is new: for its
  first ``kernel_fast_first_calls`` calls (default 1; 0 compiles the full program at
  once), or, if more, while its calls have read at most ``kernel_fast_budget_elements``
  elements (default 2**18, so 8 calls on 32k-element arrays and 1 on 256k; 0
  turns the budget off), then XLA's full pipeline, which costs 20-140 ms to build and
  runs elementwise code up to 8x faster.
- ``replay_fast_runs``: a hot whole-slice or lazy-mode program whose arrays all hold at
  most ``kernel_fast_compile_elements`` elements is compiled by the fast pipeline first
  (55-100 ms instead of 200-400 ms for a small training step on CPU) and runs that program
  for its first ``replay_fast_runs`` runs (default 1000); XLA's full pipeline compiles it
  on a background thread from run ``replay_fast_runs // 4`` and takes over at the count
  (waiting for that compile if it is still running). 0 compiles the full program at once.
  Segment programs and larger programs always get the full pipeline.
- ``kernel_host_first_calls`` and ``kernel_host_budget_elements``: a kernel signature's
  first calls are evaluated on the host with NumPy instead of compiled, when the program
  holds only operations NumPy computes as XLA:CPU does (bit for bit for IEEE arithmetic,
  to a few ulp for transcendental functions, reductions and matmuls); the call after the
  last compiles. How many: at least ``kernel_host_first_calls`` (default 8), and more
  while the calls' elements, each call counted 4096 more for its own fixed cost, stay
  within ``kernel_host_budget_elements`` (default 4,000,000: about 970 calls of a scalar
  op, 780 on 1024-element arrays; 0 turns the budget off), about as long as the host's
  extra time over a compiled call adds up to one compile. The budget holds in the tape
  where the signature came up; after that a signature called more than
  ``kernel_host_first_calls`` times in that tape (a long tape, now repeated) compiles at
  its next call, and one called a few times a tape (a training step's op) keeps the
  budget until ``kernel_host_tapes`` tapes (default 8) have been made since its first
  call, so a loop compiles its signatures from about step 9. The budget is for small
  signatures (every input at most ``kernel_fast_compile_elements``, or 8,192 elements in
  all); a larger signature gets ``kernel_host_first_calls``, and its fast-program calls
  (below) too when they number at most twice that, so it builds only the full program. CPU only;
  ``kernel_host_first_calls = 0`` turns it off (``TAPEJAX_KERNEL_HOST_FIRST_CALLS``,
  ``TAPEJAX_KERNEL_HOST_BUDGET_ELEMENTS`` and ``TAPEJAX_KERNEL_HOST_TAPES`` at import).

Across processes, ``set_compilation_cache_dir(path)`` (or ``TAPEJAX_COMPILATION_CACHE_DIR``)
keeps the compiled programs on disk, so a later process loads its kernels instead of
compiling them. Off by default.

Example:
    >>> import tapejax as tf
    >>> tf.config.explain_none_gradients = True   # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any

_run_eagerly = False


def run_functions_eagerly(run_eagerly: bool) -> None:
    """Run every ``tf.function`` as plain Python (TF's ``tf.config.run_functions_eagerly``), for debugging.

    Example:
        >>> import tapejax as tf
        >>> tf.config.run_functions_eagerly(True)
        >>> tf.config.functions_run_eagerly()
        True
        >>> tf.config.run_functions_eagerly(False)
    """
    global _run_eagerly
    _run_eagerly = bool(run_eagerly)


def functions_run_eagerly() -> bool:
    """Whether ``run_functions_eagerly(True)`` is in effect (TF's ``tf.config.functions_run_eagerly``).

    Example:
        >>> import tapejax as tf
        >>> tf.config.functions_run_eagerly()
        False
    """
    return _run_eagerly


explain_none_gradients: bool = os.environ.get("TAPEJAX_EXPLAIN_NONE", "").strip().lower() not in ("", "0", "false", "no", "off")


def _env_tier() -> str:
    raw = os.environ.get("TAPEJAX_REPLAY_TIER", "auto").strip().lower() or "auto"
    if raw not in ("auto", "interpret", "compile"):
        raise ValueError(
            f"TAPEJAX_REPLAY_TIER must be one of auto, interpret, compile; got {raw!r}. Unset it for the default (auto)."
        )
    return raw


replay_tier: str = _env_tier()
replay_hot: int = 2
replay_lag: int = 8
replay_background_compile: bool = True
replay_max_compile_eqns: int = 256
replay_segment_eqns: int = 128
kernel_fast_compile_elements: int = 1024
kernel_fast_first_calls: int = 1
kernel_fast_budget_elements: int = 1 << 18
replay_fast_runs: int = 1000


def _env_count(name: str, default: int, zero: str) -> int:
    # ``zero``: what 0 means, for the message
    raw = os.environ.get(name, "").strip() or str(default)
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number (0 {zero}); got {raw!r}.") from None
    return max(n, 0)


kernel_host_first_calls: int = _env_count("TAPEJAX_KERNEL_HOST_FIRST_CALLS", 8, "turns host first calls off")
kernel_host_budget_elements: int = _env_count("TAPEJAX_KERNEL_HOST_BUDGET_ELEMENTS", 4_000_000, "turns the host budget off")
kernel_host_tapes: int = _env_count(
    "TAPEJAX_KERNEL_HOST_TAPES", 8, "keeps the host budget to the tape where a signature came up"
)


# ---- execution mode (eager / lazy) ------------------------------------------------------------

def _env_execution() -> str:
    raw = os.environ.get("TAPEJAX_EXECUTION", "eager").strip().lower() or "eager"
    if raw not in ("eager", "lazy"):
        raise ValueError(f"TAPEJAX_EXECUTION must be eager or lazy; got {raw!r}. Unset it for the default (eager).")
    return raw


_execution = [_env_execution()]
# The engine's lazy module registers here (the base layer imports nothing of tapejax).
_execution_listeners: list = []


def set_execution(mode: str) -> None:
    """Choose how eager code runs: ``"eager"`` (default, op by op) or ``"lazy"``.

    In lazy mode ops build a pending program that runs when a value is needed
    (``.numpy()``, ``float()``, printing, a tape's ``gradient``...); a repeated
    structure runs as one compiled program. Values are those of eager mode. The
    environment variable ``TAPEJAX_EXECUTION=lazy`` sets it at import. See
    ``compat_docs/performance.md`` ("Lazy execution").

    Example:
        >>> import tapejax as tf
        >>> tf.config.set_execution("lazy")
        >>> x = tf.constant(2.0)
        >>> float(x * x + 1.0)
        5.0
        >>> tf.config.set_execution("eager")
        >>> tf.config.get_execution()
        'eager'
    """
    m = str(mode).strip().lower()
    if m not in ("eager", "lazy"):
        raise ValueError(f"set_execution takes 'eager' or 'lazy'; got {mode!r}.")
    for f in _execution_listeners:
        f(m)
    _execution[0] = m


def get_execution() -> str:
    """The execution mode, ``"eager"`` or ``"lazy"`` (see ``set_execution``).

    Example:
        >>> import tapejax as tf
        >>> tf.config.get_execution() in ("eager", "lazy")
        True
    """
    return _execution[0]


# ---- persistent compilation cache --------------------------------------------------------------

# JAX options this switch sets, with the values they had before it first did (restored when
# the cache is turned off again).
_CACHE_OPTIONS = {
    "jax_enable_compilation_cache": True,
    # tapejax's kernels compile in milliseconds: JAX's default (1 s) would keep every one of
    # them out of the cache.
    "jax_persistent_cache_min_compile_time_secs": 0.0,
    # -1: no size floor (a one-op CPU kernel is a few kilobytes).
    "jax_persistent_cache_min_entry_size_bytes": -1,
}
_cache_dir: list = [None]
_cache_saved: dict = {}


def set_compilation_cache_dir(path: Any) -> None:
    """Keep compiled XLA programs in the directory ``path``, across processes; ``None`` stops.

    A new process pays one XLA compile per distinct op signature of its first tape: about
    two thirds of a small model's first gradient. With this cache a later process loads
    those programs from disk instead (on the project's 2-core CPU machine mlp_step_small's
    first call goes from 0.75 s to 0.26 s; see ``compat_docs/performance.md``). It is JAX's
    persistent compilation cache (``jax_compilation_cache_dir``), set so that tapejax's
    small kernels qualify: it holds every program JAX compiles in this process, yours
    included, and its keys cover the program, the compiler options, the device and the
    JAX version, so an entry is never used for anything but the program it was built from.
    Off by default (it writes to disk); the environment variable
    ``TAPEJAX_COMPILATION_CACHE_DIR`` turns it on at import. Entries are executable code:
    do not share the directory with users you do not trust.

    Example:
        >>> import tempfile
        >>> import tapejax as tf
        >>> d = tempfile.mkdtemp()
        >>> tf.config.set_compilation_cache_dir(d)
        >>> tf.config.get_compilation_cache_dir() == d
        True
        >>> tf.config.set_compilation_cache_dir(None)
        >>> tf.config.get_compilation_cache_dir() is None
        True
    """
    import jax  # here, not at the top: reading tapejax.config must not start JAX's backends
    from jax.experimental.compilation_cache import compilation_cache as cc

    if path is None or (isinstance(path, str) and not path.strip()):
        if _cache_dir[0] is None:
            return
        for name, value in _cache_saved.items():
            jax.config.update(name, value)
        _cache_saved.clear()
        _cache_dir[0] = None
        cc.reset_cache()
        return
    try:
        p = os.path.abspath(os.path.expanduser(os.fspath(path)))
    except TypeError:
        raise TypeError(f"set_compilation_cache_dir takes a directory path or None; got {path!r}.") from None
    if os.path.exists(p) and not os.path.isdir(p):
        raise ValueError(f"set_compilation_cache_dir: {p!r} is a file; give a directory (it is created if missing).")
    os.makedirs(p, exist_ok=True)
    if not os.access(p, os.W_OK):
        raise PermissionError(f"set_compilation_cache_dir: {p!r} is not writable; give a directory you can write to.")
    if _cache_dir[0] is None:
        _cache_saved.update({name: getattr(jax.config, name) for name in ("jax_compilation_cache_dir", *_CACHE_OPTIONS)})
    jax.config.update("jax_compilation_cache_dir", p)
    for name, value in _CACHE_OPTIONS.items():
        jax.config.update(name, value)
    # JAX opens its cache once, at the first compile that looks for it; a cache opened
    # before (another directory, or none) is dropped so the next compile opens this one.
    cc.reset_cache()
    _cache_dir[0] = p


def get_compilation_cache_dir() -> str | None:
    """The directory given to ``set_compilation_cache_dir`` (absolute), or ``None`` when off.

    Example:
        >>> import tapejax as tf
        >>> tf.config.get_compilation_cache_dir() is None or isinstance(tf.config.get_compilation_cache_dir(), str)
        True
    """
    return _cache_dir[0]


# ---- devices (tf.config.list_physical_devices / list_logical_devices) ----------------------------

import collections  # noqa: E402

PhysicalDevice = collections.namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = collections.namedtuple("LogicalDevice", ["name", "device_type"])


def _jax_devices(device_type: Any) -> list:
    import jax  # here, not at the top: reading tapejax.config must not start JAX's backends

    kinds = {"CPU": "cpu", "GPU": "gpu", "TPU": "tpu"}
    wanted = [k for k in kinds if device_type is None or k == str(device_type).upper()]
    out = []
    for k in wanted:
        try:
            out += [(k, i) for i, _ in enumerate(jax.devices(kinds[k]))]
        except RuntimeError:
            pass  # no backend of this kind
    return out


def list_physical_devices(device_type: Any = None) -> list:
    """The devices JAX sees, as TF names them (``/physical_device:CPU:0``).

    Example:
        >>> import tapejax as tf
        >>> tf.config.list_physical_devices("CPU")[0].device_type
        'CPU'
    """
    return [PhysicalDevice(f"/physical_device:{k}:{i}", k) for k, i in _jax_devices(device_type)]


def list_logical_devices(device_type: Any = None) -> list:
    """The devices JAX sees, as TF's logical devices (``/device:CPU:0``).

    Example:
        >>> import tapejax as tf
        >>> tf.config.list_logical_devices("CPU")[0].name
        '/device:CPU:0'
    """
    return [LogicalDevice(f"/device:{k}:{i}", k) for k, i in _jax_devices(device_type)]


def get_visible_devices(device_type: Any = None) -> list:
    """The visible physical devices (all of JAX's), as ``tf.config.get_visible_devices``."""
    return list_physical_devices(device_type)


def set_visible_devices(devices: Any, device_type: Any = None) -> None:
    """Accepted when it keeps the devices JAX already uses (TF's call after initialization).

    JAX fixes its devices when it starts: to hide some, set ``CUDA_VISIBLE_DEVICES`` or
    ``JAX_PLATFORMS`` before importing tapejax.
    """
    wanted = [devices] if isinstance(devices, PhysicalDevice) else list(devices)
    current = list_physical_devices(device_type)
    if sorted(wanted) != sorted(current):
        raise RuntimeError(
            "Visible devices cannot be modified after being initialized: JAX fixed its devices when it started. "
            "Set CUDA_VISIBLE_DEVICES (or JAX_PLATFORMS=cpu) before importing tapejax instead.")


_soft_placement = [True]


def get_soft_device_placement() -> bool:
    return _soft_placement[0]


def set_soft_device_placement(enabled: bool) -> None:
    """Recorded only: ``tf.device`` always falls back to the default device (soft placement)."""
    _soft_placement[0] = bool(enabled)


class _Namespace:
    def __init__(self, name: str, **fns: Any):
        self.__name__ = name
        self.__dict__.update(fns)

    def __repr__(self) -> str:
        return f"<namespace {self.__name__}>"


_memory_growth: dict = {}


def _set_memory_growth(device: Any, enable: bool) -> None:
    # JAX preallocates GPU memory unless XLA_PYTHON_CLIENT_PREALLOCATE=false is set before it starts;
    # the setting is recorded (and validated as TF does), it does not change JAX's allocator.
    if getattr(device, "device_type", None) != "GPU":
        raise ValueError("Cannot set memory growth on non-GPU and non-Pluggable devices")
    _memory_growth[device] = bool(enable)


def _get_memory_growth(device: Any) -> bool:
    if getattr(device, "device_type", None) != "GPU":
        raise KeyError(device)
    return _memory_growth.get(device, False)


experimental = _Namespace(
    "tf.config.experimental", set_memory_growth=_set_memory_growth, get_memory_growth=_get_memory_growth,
    list_physical_devices=list_physical_devices, list_logical_devices=list_logical_devices,
    get_visible_devices=get_visible_devices, set_visible_devices=set_visible_devices,
    enable_op_determinism=lambda: None,  # XLA's CPU and GPU kernels here are deterministic already
)
_threads = {"intra": 0, "inter": 0}
threading = _Namespace(  # noqa: A001  (TF's name)
    "tf.config.threading",
    set_intra_op_parallelism_threads=lambda n: _threads.__setitem__("intra", int(n)),
    get_intra_op_parallelism_threads=lambda: _threads["intra"],
    set_inter_op_parallelism_threads=lambda n: _threads.__setitem__("inter", int(n)),
    get_inter_op_parallelism_threads=lambda: _threads["inter"],
)
_jit = [False]
optimizer = _Namespace("tf.config.optimizer", set_jit=lambda enabled: _jit.__setitem__(0, bool(enabled)),
                       get_jit=lambda: _jit[0])


_env_cache_dir = os.environ.get("TAPEJAX_COMPILATION_CACHE_DIR", "").strip()
if _env_cache_dir:
    set_compilation_cache_dir(_env_cache_dir)
