"""``tf.keras.optimizers``: ``SGD``, ``Adam``, ``AdamW``, ``RMSprop`` and ``Adagrad``, with optax update rules.

Every update rule is an optax ``GradientTransformation``; this module only
chooses the transform and its parameters so that the numbers are Keras 3's
(TF 2.21):

- ``SGD``: Keras keeps the learning rate *inside* the momentum buffer
  (``m = momentum * m - lr * g``), so the chain is
  ``scale_by_learning_rate(lr)`` then ``trace(momentum, nesterov)``; with a
  schedule this differs from ``optax.sgd``, which scales after the trace.
- ``Adam``/``AdamW``: Keras's epsilon is "epsilon hat" (added to ``sqrt(v)``
  before bias correction). ``optax.adam`` adds its ``eps`` after bias
  correction, so it gets ``eps_hat = epsilon / sqrt(1 - beta_2 ** t)``, which
  gives the same update. ``AdamW`` (and any optimizer given ``weight_decay``)
  decays decoupled from the gradient, ``-lr * weight_decay * w``, from the
  weights before the step, as Keras.
- ``RMSprop``: epsilon inside the square root, zero initial accumulator,
  learning rate inside the momentum buffer: ``optax.rmsprop(..., eps_in_sqrt=True,
  initial_scale=0)``; ``centered=True`` uses ``scale_by_stddev``.
- ``Adagrad``: initial accumulator 0.1, epsilon inside the square root:
  ``optax.adagrad``.
- Bias corrections count the optimizer's ``iterations`` (Keras's global step):
  the ``count`` fields of each optax state are set from it before each update.

The optax state of each variable (moments, accumulators, counts) lives in
non-trainable tapejax variables, listed in ``optimizer.variables``; they are
created on the first ``apply_gradients``, so inside ``tapejax.function`` the
first call runs eagerly and later calls compile the whole update, state
included. The learning rate is a variable (or a schedule of ``iterations``),
so changing it does not recompile.

In a saved model (``model.save``, ``copy.deepcopy``, ``pickle``) the state is
written in Keras's layout (iterations, learning rate, then Keras's slots:
``momentum``/``velocity``, ``accumulator``..., from the optax fields), so
training resumed from a file TF saved continues TF's run, and the reverse. The
one exception is ``Adam(amsgrad=True)``, whose optax maximum differs from
Keras's: it warns and saves no state.

Example:
    >>> import tapejax as tf
    >>> w = tf.Variable([1.0, 2.0])
    >>> opt = tf.keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     with tf.GradientTape() as tape:
    ...         loss = tf.reduce_sum(w * w)
    ...     _ = opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
    >>> [round(x, 4) for x in w.numpy().tolist()], int(opt.iterations)
    ([0.46, 0.92], 2)
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ... import errors
from ..._core._recorder import Tensor, VariableBase
from ..._ops._dtypes import x64_enabled
from ..._tf._gradient_tape import GradientTape
from ..._tf._variable import Variable
from .. import _naming
from .._bridge import keras, quiet_keras_array
from . import schedules
from .schedules import LearningRateSchedule

__all__ = ["Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "SGD", "get", "schedules", "serialize", "deserialize"]


def _dense(g: Any) -> Any:
    """A gradient as an array: tensors, arrays, and (values, indices, dense_shape) slices."""
    if isinstance(g, Tensor | VariableBase):
        return g._value
    if hasattr(g, "values") and hasattr(g, "indices") and hasattr(g, "dense_shape"):
        vals = _dense(g.values)
        idx = _dense(g.indices)
        shape = tuple(int(s) for s in np.asarray(_dense(g.dense_shape)))
        return jnp.zeros(shape, vals.dtype).at[idx].add(vals)
    return jnp.asarray(g)


@functools.partial(jax.jit, static_argnums=0)
def _update(static: tuple, lr: Any, iterations: Any, params: list, grads: list, states: list) -> tuple:
    """One optimizer step over all variables, as one XLA program.

    ``static`` = (optimizer class, hyperparameters, clipping, loss scale, per-variable
    (uses weight decay, has count fields)). Only optax transforms change values here.
    """
    cls, hyper, (clipnorm, clipvalue, global_clipnorm), loss_scale, flags = static
    h = dict(hyper)
    # Any: optax's transforms return its Updates pytree type (the same list here).
    gs: Any = [g.astype(p.dtype) for g, p in zip(grads, params)]
    none = optax.EmptyState()
    if loss_scale is not None:
        gs, _ = optax.scale(1.0 / loss_scale).update(gs, none)
    if global_clipnorm:
        gs, _ = optax.clip_by_global_norm(global_clipnorm).update(gs, none)
    step = jnp.asarray(iterations, jnp.int32)
    new_params, new_states = [], []
    for p, g, s, (use_wd, has_count) in zip(params, gs, states, flags):
        if clipnorm:
            g, _ = optax.clip_by_global_norm(clipnorm).update(g, none)  # one array: its own norm
        elif clipvalue:
            g, _ = optax.clip(clipvalue).update(g, none)
        tx = cls._transform(h, lr.astype(p.dtype), step, h["weight_decay"] if use_wd else None)
        if has_count:
            s = optax.tree_utils.tree_set(s, count=step)
        u, s = tx.update(g, s, p)
        new_params.append(optax.apply_updates(p, u))
        new_states.append(s)
    return new_params, new_states


_KerasSaveable: Any = keras.src.saving.keras_saveable.KerasSaveable


class Optimizer(_KerasSaveable):
    """Base class of the optax-backed Keras optimizers (``tf.keras.optimizers.Optimizer``).

    Subclasses give ``_transform(hyper, lr, step, weight_decay)``: the optax
    transformation for one variable at this step, and ``_keras_slots()``: how Keras
    lays out the same state in a saved file.
    """

    _HYPER: tuple[str, ...] = ()
    # KerasSaveable is here for Keras's saving, which walks a model's KerasSaveable attributes
    # (``model.optimizer``) for their variables; copies and pickles stay plain Python copies.
    __reduce__ = object.__reduce__

    def __init__(self, learning_rate: Any, weight_decay: float | None = None, clipnorm: float | None = None,
                 clipvalue: float | None = None, global_clipnorm: float | None = None, use_ema: bool = False,
                 ema_momentum: float = 0.99, ema_overwrite_frequency: int | None = None,
                 loss_scale_factor: float | None = None, gradient_accumulation_steps: int | None = None,
                 name: str | None = None, **kwargs: Any):
        if kwargs.pop("decay", None) is not None:
            warnings.warn("Argument `decay` is no longer supported and will be ignored.", stacklevel=2)
        if kwargs:
            raise ValueError(f"Argument(s) not recognized: {kwargs}")
        if use_ema:
            raise NotImplementedError("tapejax.keras optimizers do not implement use_ema=True.")
        if gradient_accumulation_steps:
            raise NotImplementedError("tapejax.keras optimizers do not implement gradient_accumulation_steps.")
        if sum(a is not None for a in (clipnorm, clipvalue, global_clipnorm)) > 1:
            raise ValueError(
                "Only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set. Received: "
                f"clipnorm={clipnorm}, clipvalue={clipvalue}, global_clipnorm={global_clipnorm}"
            )
        self.name = name or _naming.auto_name(type(self).__name__)
        self.weight_decay = weight_decay
        self.clipnorm = clipnorm
        self.clipvalue = clipvalue
        self.global_clipnorm = global_clipnorm
        self.use_ema = use_ema
        self.ema_momentum = ema_momentum
        self.ema_overwrite_frequency = ema_overwrite_frequency
        self.loss_scale_factor = loss_scale_factor
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.built = False
        # TF's Keras counts in int64; JAX without x64 has no int64 (Keras's JAX backend uses int32 too).
        it_dtype = "int64" if x64_enabled() else "int32"
        self._iterations = Variable(0, trainable=False, name="iteration", dtype=it_dtype)
        self._variables: list[Variable] = [self._iterations]
        schedule = callable(learning_rate) and not isinstance(learning_rate, Tensor | VariableBase)
        if isinstance(learning_rate, LearningRateSchedule) or schedule:
            self._learning_rate: Any = learning_rate
        else:
            if not isinstance(learning_rate, float):
                raise ValueError(
                    "Argument `learning_rate` should be float, or an instance of LearningRateSchedule, or a callable "
                    "(that takes in the current iteration value and returns the corresponding learning rate value). "
                    f"Received instead: learning_rate={learning_rate}"
                )
            self._learning_rate = Variable(learning_rate, trainable=False, name="learning_rate", dtype="float32")
            self._variables.append(self._learning_rate)
        self._trainable_variables: list[VariableBase] = []
        self._index: dict[int, int] = {}
        self._slots: list[tuple[Any, list[Variable], bool, bool]] = []
        self._slot_fields: list[list[str]] = []
        self._exclude_ids: set[int] = set()
        self._exclude_names: tuple[str, ...] = ()

    # ---- hyperparameters -------------------------------------------------------------------

    @classmethod
    def _transform(cls, h: dict, lr: Any, step: Any, weight_decay: float | None) -> optax.GradientTransformation:
        raise NotImplementedError

    def _hyper(self) -> tuple:
        return tuple((k, getattr(self, k)) for k in self._HYPER) + (("weight_decay", self.weight_decay),)

    @property
    def iterations(self) -> Variable:
        """The number of updates applied so far (a non-trainable integer variable)."""
        return self._iterations

    @property
    def variables(self) -> list:
        """``iterations``, the learning-rate variable (if any) and every optax state leaf, per variable."""
        return list(self._variables)

    @property
    def learning_rate(self) -> Any:
        """The current learning rate: the variable, or the schedule's value at ``iterations``."""
        lr = self._learning_rate
        if isinstance(lr, LearningRateSchedule):
            return lr(self._iterations)
        if isinstance(lr, VariableBase):
            return lr
        return lr()

    @learning_rate.setter
    def learning_rate(self, value: Any) -> None:
        old = self._learning_rate
        if isinstance(value, LearningRateSchedule) or (callable(value) and not isinstance(value, Tensor | VariableBase)):
            self._learning_rate = value
            if isinstance(old, VariableBase):
                self._variables = [v for v in self._variables if v is not old]
            return
        if isinstance(old, LearningRateSchedule):
            raise TypeError(
                "This optimizer was created with a `LearningRateSchedule` object as its `learning_rate` constructor "
                "argument, hence its learning rate is not settable. If you need the learning rate to be settable, you "
                "should instantiate the optimizer with a float `learning_rate` argument."
            )
        if isinstance(old, VariableBase):
            old.assign(Tensor(jnp.asarray(value._value if isinstance(value, Tensor | VariableBase) else value, jnp.float32)))
        else:
            self._learning_rate = Variable(float(value), trainable=False, name="learning_rate", dtype="float32")
            self._variables.insert(1, self._learning_rate)

    def _lr_value(self) -> Any:
        lr = self.learning_rate
        v = lr._value if isinstance(lr, Tensor | VariableBase) else lr
        return jnp.asarray(v, jnp.float32)

    # ---- building ---------------------------------------------------------------------------

    def exclude_from_weight_decay(self, var_list: Any = None, var_names: Any = None) -> None:
        """Exclude variables (or variables whose name contains one of ``var_names``) from weight decay."""
        if self.built:
            raise ValueError("`exclude_from_weight_decay()` can only be configured before the optimizer is built.")
        self._exclude_ids = {v._uid for v in (var_list or [])}
        self._exclude_names = tuple(var_names or ())

    def _use_weight_decay(self, v: VariableBase) -> bool:
        if self.weight_decay is None or v._uid in self._exclude_ids:
            return False
        name = getattr(v, "name", "")
        return not any(n in name for n in self._exclude_names)

    @staticmethod
    def _check_variable(v: Any) -> None:
        if not isinstance(v, VariableBase):
            raise TypeError(
                f"An optimizer updates tf.Variable objects; got {type(v).__name__} {v!r}. Pass "
                "model.trainable_variables (or your tf.Variable objects), not tensors."
            )
        dt = np.dtype(v._v.dtype)
        if not (jnp.issubdtype(dt, jnp.floating)):
            raise errors.InvalidArgumentError(
                f"cannot update variable '{getattr(v, 'name', '?')}' of dtype {dt.name}: an optimizer can only train "
                "floating-point variables (their gradients and updates are fractional). Create it with a float dtype, "
                "e.g. tf.Variable(1.0) or tf.Variable(x, dtype=tf.float32)."
            )

    def build(self, variables: Any) -> None:
        """Create the optax state of each variable (done by the first ``apply_gradients``)."""
        variables = list(variables)
        for v in variables:
            self._check_variable(v)
        zero = jnp.zeros((), jnp.float32)
        slots = []
        fields: list[list[str]] = []  # each state variable's optax field (``_keras_state``)
        index = {}
        created: list[Variable] = []
        for i, v in enumerate(variables):
            use_wd = self._use_weight_decay(v)
            tx = self._transform(dict(self._hyper()), zero, jnp.zeros((), jnp.int32), self.weight_decay if use_wd else None)
            state = tx.init(v._v)
            paths_leaves, treedef = jax.tree_util.tree_flatten_with_path(state)
            base = getattr(v, "name", "variable").split(":")[0].replace("/", "_")
            leaf_vars = []
            leaf_fields: list[str] = []
            for path, leaf in paths_leaves:
                field = next((str(getattr(k, "name", "")) for k in reversed(path) if getattr(k, "name", None)), "state")
                sv = Variable(Tensor(jnp.asarray(leaf)), trainable=False, name=f"{base}_{field}")
                leaf_vars.append(sv)
                leaf_fields.append(field)
                created.append(sv)
            has_count = bool(optax.tree_utils.tree_get_all_with_path(state, "count"))
            slots.append((treedef, leaf_vars, use_wd, has_count))
            fields.append(leaf_fields)
            index[v._uid] = i
        # Committed only once every state variable exists (a compiled step that refuses
        # variable creation re-runs this first call eagerly; nothing half-built remains).
        self._slots = slots
        self._slot_fields = fields
        self._index = index
        self._trainable_variables = variables
        self._variables.extend(created)
        self.built = True
        pending = self.__dict__.pop("_tapejax_pending_state", None)
        if pending is not None:
            self._assign_keras_state(pending)

    # ---- applying ---------------------------------------------------------------------------

    def apply_gradients(self, grads_and_vars: Any) -> Variable:
        """Apply ``(gradient, variable)`` pairs; pairs whose gradient is None are skipped with a warning.

        Returns ``iterations``, as Keras does.
        """
        grads, trainable_variables = zip(*grads_and_vars)
        self.apply(grads, trainable_variables)
        return self._iterations

    def apply(self, grads: Any, trainable_variables: Any = None) -> None:
        """Update ``trainable_variables`` (default: the variables the optimizer was built with) with ``grads``."""
        grads = list(grads)
        if len(grads) == 0:
            return
        if trainable_variables is None:
            if not self.built:
                raise ValueError(
                    "When passing `grads` without `variables`, the optimizer must already be built on a list of "
                    "variables. Call `optimizer.build(trainable_variables)` first. "
                )
            if len(grads) != len(self._index):
                raise ValueError(
                    "When passing `grads` as a list of gradient tensors, the gradients must match `optimizer.variables` "
                    f"one-to-on. Received a list of {len(grads)} gradients, but the optimizer is tracking "
                    f"{len(self._trainable_variables)} trainable variables."
                )
            variables = list(self._trainable_variables)
        else:
            variables = list(trainable_variables)
            for v in variables:
                self._check_variable(v)
            if not self.built:
                self.build(variables)
            for v in variables:
                if v._uid not in self._index:
                    raise ValueError(
                        f"Unknown variable: {v!r}. This optimizer can only be called for the variables it was originally "
                        "built with. When working with a new set of variables, you should recreate a new optimizer instance."
                    )
        pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
        missing = [getattr(v, "name", "?") for g, v in zip(grads, variables) if g is None]
        if not pairs:
            raise ValueError("No gradients provided for any variable.")
        if missing:
            warnings.warn(
                f"Gradients do not exist for variables {missing} when minimizing the loss. If using `model.compile()`, "
                "did you forget to provide a `loss` argument?",
                # stacklevel 1, as Keras: the warning's location is this line, so Python's default
                # filter prints it once per process and text, however many lines of the program
                # call apply_gradients (TF 2.21 prints it once; a user location printed it per line).
                stacklevel=1,
            )
        slots = [self._slots[self._index[v._uid]] for _, v in pairs]
        params = [v._value for _, v in pairs]
        gvals = [_dense(g) for g, _ in pairs]
        for (_, v), gv, p in zip(pairs, gvals, params):
            if tuple(gv.shape) != tuple(p.shape):
                raise ValueError(
                    f"Gradient shape {tuple(gv.shape)} does not match the shape {tuple(p.shape)} of variable "
                    f"'{getattr(v, 'name', '?')}'."
                )
        states = [jax.tree_util.tree_unflatten(treedef, [s._value for s in leaf_vars]) for treedef, leaf_vars, _, _ in slots]
        static = (
            type(self),
            self._hyper(),
            (self.clipnorm or None, self.clipvalue or None, self.global_clipnorm or None),
            self.loss_scale_factor,
            tuple((use_wd, has_count) for _, _, use_wd, has_count in slots),
        )
        new_params, new_states = _update(static, self._lr_value(), self._iterations._value, params, gvals, states)
        for (_, v), p in zip(pairs, new_params):
            v.assign(Tensor(p))
        for (_, leaf_vars, _, _), s in zip(slots, new_states):
            for sv, leaf in zip(leaf_vars, jax.tree_util.tree_leaves(s)):
                sv.assign(Tensor(leaf))
        for _, v in pairs:
            c = getattr(v, "constraint", None)
            if c is not None:
                v.assign(c(v))
        self._iterations.assign_add(1)

    def compute_gradients(self, loss: Any, var_list: Any, tape: Any = None) -> list:
        """``[(gradient, variable), ...]`` of ``loss`` (a tensor with its ``tape``, or a zero-argument callable)."""
        if not callable(loss) and tape is None:
            raise ValueError(f"`tape` is required when a `Tensor` loss is passed. Received: loss={loss}, tape={tape}.")
        if tape is None:
            tape = GradientTape()
        if callable(loss):
            with tape:
                if not callable(var_list):
                    tape.watch(var_list)
                loss = loss()
                if callable(var_list):
                    var_list = var_list()
        elif callable(var_list):
            var_list = var_list()
        var_list = list(var_list)
        grads = tape.gradient(loss, var_list)
        return list(zip(grads, var_list))

    def minimize(self, loss: Any, var_list: Any, tape: Any = None) -> Variable:
        """Compute the gradients of ``loss`` and apply them (the Keras 2 / ``tf.keras`` API).

        ``loss`` is either a tensor recorded on ``tape`` or a zero-argument callable
        (then a tape is made here). Keras 3 dropped this method; tapejax keeps it.

        Example:
            >>> import tapejax as tf
            >>> w = tf.Variable(3.0)
            >>> opt = tf.keras.optimizers.SGD(learning_rate=0.25)
            >>> _ = opt.minimize(lambda: w * w, [w])
            >>> float(w)
            1.5
        """
        return self.apply_gradients(self.compute_gradients(loss, var_list, tape))

    def scale_loss(self, loss: Any) -> Any:
        """``loss * loss_scale_factor`` when a factor is set (gradients are unscaled on apply)."""
        return loss * self.loss_scale_factor if self.loss_scale_factor is not None else loss

    def finalize_variable_values(self, var_list: Any) -> None:
        """Nothing to finalize (no EMA)."""

    # ---- config -----------------------------------------------------------------------------

    def get_config(self) -> dict:
        lr = self._learning_rate
        if isinstance(lr, LearningRateSchedule):
            lr_cfg: Any = schedules.serialize(lr)
        elif isinstance(lr, VariableBase):
            lr_cfg = float(np.asarray(lr._value))
        else:
            lr_cfg = lr
        config = {
            "name": self.name, "learning_rate": lr_cfg, "weight_decay": self.weight_decay, "clipnorm": self.clipnorm,
            "global_clipnorm": self.global_clipnorm, "clipvalue": self.clipvalue, "use_ema": self.use_ema,
            "ema_momentum": self.ema_momentum, "ema_overwrite_frequency": self.ema_overwrite_frequency,
            "loss_scale_factor": self.loss_scale_factor, "gradient_accumulation_steps": self.gradient_accumulation_steps,
        }
        config.update({k: getattr(self, k) for k in self._HYPER})
        return config

    @classmethod
    def from_config(cls, config: dict, custom_objects: dict | None = None) -> Optimizer:
        config = dict(config)
        if isinstance(config.get("learning_rate"), dict):
            config["learning_rate"] = schedules.deserialize(config["learning_rate"], custom_objects)
        opt = cls(**config)
        if config.get("name") is not None:
            # A restored optimizer keeps its saved name, as TF's does (Adam.from_config of a config
            # named "adam" is "adam", not the next auto-numbered "adam_2").
            opt.name = config["name"]
        return opt

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}, built={self.built}>"

    # ---- saving: Keras's layout of the state --------------------------------------------------

    def _obj_type(self) -> str:
        return "Optimizer"

    def _keras_slots(self) -> list | None:
        """Keras's slot variables, as groups of ``(optax field, sign)`` (Keras interleaves a group's
        slots variable by variable, and adds groups one after another); None: no known layout."""
        return []

    class _Saved:
        # One entry of the Keras layout for Keras's legacy .h5 writer, which reads ``path`` and the
        # value (through ``np.array``): the value with Keras's sign.
        def __init__(self, path: str, value: np.ndarray):
            self.path = path
            self._value = np.asarray(value)  # (a 0-d product is a NumPy scalar, not an array)

        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
            return self._value if dtype is None else self._value.astype(dtype)

    @property
    def weights(self) -> list:
        """The state in Keras's layout, as values (what Keras's legacy ``.h5`` saving writes)."""
        state = self._keras_state() if self.built else None
        if state is None:
            return []
        # (the position in the name: two layers' kernels have the same variable name)
        return [self._Saved(f"{self.name}/{i}_{str(getattr(v, 'name', 'variable')).split(':')[0]}",
                            np.asarray(v._value) * np.asarray(sign, np.asarray(v._value).dtype))
                for i, (v, sign) in enumerate(state)]

    def _create_all_weights(self, variables: Any) -> None:
        """Keras's legacy ``.h5`` loader: the state is created by the first update (``set_weights`` waits for it)."""

    def set_weights(self, values: Any) -> None:
        """Set the state from values in Keras's layout (Keras's legacy ``.h5`` loader)."""
        self.load_own_variables({str(i): v for i, v in enumerate(values)})

    def _keras_state(self) -> list | None:
        """The state as Keras's ``optimizer.variables`` lists it: iterations, the learning rate
        (a variable), then the slots; each entry ``(variable, sign)``. None: no known layout."""
        groups = self._keras_slots()
        if groups is None:
            return None
        out: list = [(self._iterations, 1.0)]
        if isinstance(self._learning_rate, VariableBase):
            out.append((self._learning_rate, 1.0))
        for group in groups:
            for (_, leaf_vars, _, _), names in zip(self._slots, self._slot_fields):
                by_field = dict(zip(names, leaf_vars))
                for field, sign in group:
                    if field not in by_field:
                        return None
                    out.append((by_field[field], sign))
        return out

    def save_own_variables(self, store: Any) -> None:
        """Keras's saving: the state in Keras's order, so a file TF loads resumes training as here."""
        state = self._keras_state()  # (unbuilt: no slots, so iterations and the learning rate)
        if state is None:
            warnings.warn(f"{type(self).__name__}'s state ({self.name}) has no Keras layout here: it is not saved, "
                          "and training resumed from the file starts it afresh.", stacklevel=2)
            return
        for i, (v, sign) in enumerate(state):
            store[str(i)] = np.asarray(v._value) * np.asarray(sign, np.asarray(v._value).dtype)

    def load_own_variables(self, store: Any) -> None:
        """Keras's loading: the state a file holds, assigned now, or when the first update builds it."""
        values = [np.asarray(store[str(i)]) for i in range(len(store.keys()))]
        if not self.built and len(values) > 1 + isinstance(self._learning_rate, VariableBase):
            self.__dict__["_tapejax_pending_state"] = values  # (Keras builds a compiled model's optimizer later)
            return
        self._assign_keras_state(values)

    def _assign_keras_state(self, values: list) -> None:
        state = self._keras_state()  # (unbuilt: no slots, so iterations and the learning rate)
        if state is None or len(state) != len(values):
            # Keras's own behaviour (and message) when the saved state does not fit the optimizer.
            warnings.warn(f"Skipping variable loading for optimizer '{self.name}', because it has "
                          f"{0 if state is None else len(state)} variables whereas the saved optimizer has "
                          f"{len(values)} variables. ", stacklevel=2)
            return
        for (v, _), x in zip(state, values):
            if tuple(x.shape) != tuple(v.shape):
                raise ValueError(f"Optimizer '{self.name}': the saved value for {getattr(v, 'name', '?')} has shape {x.shape}, "
                                 f"the variable {tuple(v.shape)}. Load the file into the model it was saved from.")
        for (v, sign), x in zip(state, values):
            v.assign(Tensor(jnp.asarray(x * sign if sign != 1.0 else x, v._v.dtype)))


def _decayed(tx: optax.GradientTransformation, lr: Any, weight_decay: float | None) -> optax.GradientTransformation:
    # Keras's decoupled decay for any optimizer: w -= lr * wd * w, from the weights before the step.
    if weight_decay is None:
        return tx
    return optax.chain(tx, optax.add_decayed_weights(-lr * weight_decay))


class SGD(Optimizer):
    """Gradient descent, with optional (Nesterov) momentum (``tf.keras.optimizers.SGD``).

    ``m = momentum * m - lr * g``; ``w += m`` (or ``w += momentum * m - lr * g`` with Nesterov).

    Example:
        >>> import tapejax as tf
        >>> opt = tf.keras.optimizers.SGD(learning_rate=0.1)
        >>> v = tf.Variable(1.0)
        >>> _ = opt.apply_gradients([(tf.constant(2.0), v)])
        >>> round(float(v), 4)
        0.8
    """

    _HYPER = ("momentum", "nesterov")

    def _keras_slots(self) -> list | None:
        # Keras's momentum m = momentum * m - lr * g is optax's trace after scale_by_learning_rate.
        return [[("trace", 1.0)]] if self.momentum else []

    def __init__(self, learning_rate: Any = 0.01, momentum: float = 0.0, nesterov: bool = False, weight_decay: float | None = None,
                 clipnorm: float | None = None, clipvalue: float | None = None, global_clipnorm: float | None = None,
                 use_ema: bool = False, ema_momentum: float = 0.99, ema_overwrite_frequency: int | None = None,
                 loss_scale_factor: float | None = None, gradient_accumulation_steps: int | None = None,
                 name: str = "SGD", **kwargs: Any):
        super().__init__(learning_rate=learning_rate, name=name if name != "SGD" else None, weight_decay=weight_decay,
                         clipnorm=clipnorm, clipvalue=clipvalue, global_clipnorm=global_clipnorm, use_ema=use_ema,
                         ema_momentum=ema_momentum, ema_overwrite_frequency=ema_overwrite_frequency,
                         loss_scale_factor=loss_scale_factor, gradient_accumulation_steps=gradient_accumulation_steps, **kwargs)
        if not isinstance(momentum, float) or momentum < 0 or momentum > 1:
            raise ValueError("`momentum` must be a float between [0, 1].")
        self.momentum = momentum
        self.nesterov = nesterov

    @classmethod
    def _transform(cls, h: dict, lr: Any, step: Any, weight_decay: float | None) -> optax.GradientTransformation:
        if h["momentum"]:
            tx = optax.chain(optax.scale_by_learning_rate(lr), optax.trace(decay=h["momentum"], nesterov=h["nesterov"]))
        else:
            tx = optax.sgd(lr)
        return _decayed(tx, lr, weight_decay)


class Adam(Optimizer):
    """Adam (``tf.keras.optimizers.Adam``), with Keras's epsilon-hat convention.

    ``amsgrad=True`` uses ``optax.amsgrad`` (the maximum of bias-corrected second
    moments), which differs from Keras's AMSGrad (the maximum of raw moments).

    Example:
        >>> import tapejax as tf
        >>> opt = tf.keras.optimizers.Adam(learning_rate=0.1)
        >>> v = tf.Variable(1.0)
        >>> _ = opt.apply_gradients([(tf.constant(2.0), v)])
        >>> round(float(v), 4)  # the first Adam step moves by lr
        0.9
    """

    _HYPER = ("beta_1", "beta_2", "epsilon", "amsgrad")

    def _keras_slots(self) -> list | None:
        if self.amsgrad:
            return None  # (optax keeps the maximum of the bias-corrected moment, Keras of the raw one)
        return [[("mu", 1.0), ("nu", 1.0)]]

    def __init__(self, learning_rate: Any = 0.001, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-7,
                 amsgrad: bool = False, weight_decay: float | None = None, clipnorm: float | None = None,
                 clipvalue: float | None = None, global_clipnorm: float | None = None, use_ema: bool = False,
                 ema_momentum: float = 0.99, ema_overwrite_frequency: int | None = None,
                 loss_scale_factor: float | None = None, gradient_accumulation_steps: int | None = None,
                 name: str | None = "adam", **kwargs: Any):
        super().__init__(learning_rate=learning_rate, name=None if name == "adam" else name,
                         weight_decay=weight_decay, clipnorm=clipnorm, clipvalue=clipvalue, global_clipnorm=global_clipnorm,
                         use_ema=use_ema, ema_momentum=ema_momentum, ema_overwrite_frequency=ema_overwrite_frequency,
                         loss_scale_factor=loss_scale_factor, gradient_accumulation_steps=gradient_accumulation_steps, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.amsgrad = amsgrad

    @classmethod
    def _transform(cls, h: dict, lr: Any, step: Any, weight_decay: float | None) -> optax.GradientTransformation:
        b1, b2 = h["beta_1"], h["beta_2"]
        # Keras adds epsilon to sqrt(v) before bias correction ("epsilon hat"); optax adds eps
        # after it. eps_hat = epsilon / sqrt(1 - b2**t) makes optax's update Keras's.
        t = (step + 1).astype(lr.dtype)
        eps_hat = h["epsilon"] / jnp.sqrt(1.0 - jnp.asarray(b2, lr.dtype) ** t)
        if h["amsgrad"]:
            return _decayed(optax.amsgrad(lr, b1=b1, b2=b2, eps=eps_hat), lr, weight_decay)
        if weight_decay is not None:
            return optax.adamw(lr, b1=b1, b2=b2, eps=eps_hat, weight_decay=weight_decay)
        return optax.adam(lr, b1=b1, b2=b2, eps=eps_hat)


class AdamW(Adam):
    """Adam with decoupled weight decay (``tf.keras.optimizers.AdamW``; ``weight_decay=0.004`` by default).

    Example:
        >>> import tapejax as tf
        >>> tf.keras.optimizers.AdamW().get_config()["weight_decay"]
        0.004
    """

    def __init__(self, learning_rate: Any = 0.001, weight_decay: float = 0.004, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-7, amsgrad: bool = False, clipnorm: float | None = None, clipvalue: float | None = None,
                 global_clipnorm: float | None = None, use_ema: bool = False, ema_momentum: float = 0.99,
                 ema_overwrite_frequency: int | None = None, loss_scale_factor: float | None = None,
                 gradient_accumulation_steps: int | None = None, name: str = "adamw", **kwargs: Any):
        super().__init__(learning_rate=learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, amsgrad=amsgrad,
                         name=name if name != "adamw" else None, weight_decay=weight_decay, clipnorm=clipnorm,
                         clipvalue=clipvalue, global_clipnorm=global_clipnorm, use_ema=use_ema, ema_momentum=ema_momentum,
                         ema_overwrite_frequency=ema_overwrite_frequency, loss_scale_factor=loss_scale_factor,
                         gradient_accumulation_steps=gradient_accumulation_steps, **kwargs)
        if self.weight_decay is None:
            raise ValueError("Argument `weight_decay` must be a float. Received: weight_decay=None")


class RMSprop(Optimizer):
    """RMSprop (``tf.keras.optimizers.RMSprop``): epsilon inside the square root, optional momentum and centering.

    Example:
        >>> import tapejax as tf
        >>> tf.keras.optimizers.RMSprop().get_config()["rho"]
        0.9
    """

    _HYPER = ("rho", "momentum", "epsilon", "centered")

    def _keras_slots(self) -> list | None:
        # Keras's momentum buffer accumulates +lr * g / rms and is subtracted; optax's trace holds its negative.
        return ([[("nu", 1.0)]] + ([[("trace", -1.0)]] if self.momentum else [])
                + ([[("mu", 1.0)]] if self.centered else []))

    def __init__(self, learning_rate: Any = 0.001, rho: float = 0.9, momentum: float = 0.0, epsilon: float = 1e-7,
                 centered: bool = False, weight_decay: float | None = None, clipnorm: float | None = None,
                 clipvalue: float | None = None, global_clipnorm: float | None = None, use_ema: bool = False,
                 ema_momentum: float = 0.99, ema_overwrite_frequency: int | None = None,
                 loss_scale_factor: float | None = None, gradient_accumulation_steps: int | None = None,
                 name: str = "rmsprop", **kwargs: Any):
        super().__init__(learning_rate=learning_rate, name=name if name != "rmsprop" else None, weight_decay=weight_decay,
                         clipnorm=clipnorm, clipvalue=clipvalue, global_clipnorm=global_clipnorm, use_ema=use_ema,
                         ema_momentum=ema_momentum, ema_overwrite_frequency=ema_overwrite_frequency,
                         loss_scale_factor=loss_scale_factor, gradient_accumulation_steps=gradient_accumulation_steps, **kwargs)
        self.rho = rho
        self.momentum = momentum
        self.epsilon = epsilon
        self.centered = centered

    @classmethod
    def _transform(cls, h: dict, lr: Any, step: Any, weight_decay: float | None) -> optax.GradientTransformation:
        tx = optax.rmsprop(lr, decay=h["rho"], eps=h["epsilon"], initial_scale=0.0, eps_in_sqrt=True,
                           centered=h["centered"], momentum=h["momentum"] if h["momentum"] > 0 else None)
        return _decayed(tx, lr, weight_decay)


class Adagrad(Optimizer):
    """Adagrad (``tf.keras.optimizers.Adagrad``): accumulators start at 0.1, epsilon inside the square root.

    Example:
        >>> import tapejax as tf
        >>> tf.keras.optimizers.Adagrad().get_config()["initial_accumulator_value"]
        0.1
    """

    _HYPER = ("initial_accumulator_value", "epsilon")

    def _keras_slots(self) -> list | None:
        return [[("sum_of_squares", 1.0)]]

    def __init__(self, learning_rate: Any = 0.001, initial_accumulator_value: float = 0.1, epsilon: float = 1e-7,
                 weight_decay: float | None = None, clipnorm: float | None = None, clipvalue: float | None = None,
                 global_clipnorm: float | None = None, use_ema: bool = False, ema_momentum: float = 0.99,
                 ema_overwrite_frequency: int | None = None, loss_scale_factor: float | None = None,
                 gradient_accumulation_steps: int | None = None, name: str = "adagrad", **kwargs: Any):
        super().__init__(learning_rate=learning_rate, name=name if name != "adagrad" else None, weight_decay=weight_decay,
                         clipnorm=clipnorm, clipvalue=clipvalue, global_clipnorm=global_clipnorm, use_ema=use_ema,
                         ema_momentum=ema_momentum, ema_overwrite_frequency=ema_overwrite_frequency,
                         loss_scale_factor=loss_scale_factor, gradient_accumulation_steps=gradient_accumulation_steps, **kwargs)
        self.initial_accumulator_value = initial_accumulator_value
        self.epsilon = epsilon

    @classmethod
    def _transform(cls, h: dict, lr: Any, step: Any, weight_decay: float | None) -> optax.GradientTransformation:
        tx = optax.adagrad(lr, initial_accumulator_value=h["initial_accumulator_value"], eps=h["epsilon"])
        return _decayed(tx, lr, weight_decay)


_BY_NAME: dict[str, type] = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop, "adagrad": Adagrad}


def get(identifier: Any) -> Optimizer:
    """An optimizer from a name (``"adam"``), a config dict, or an optimizer instance."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier.lower())
        if cls is None:
            raise ValueError(f"Could not interpret optimizer identifier: {identifier}")
        return cls()
    if isinstance(identifier, dict) and "class_name" in identifier:
        return deserialize(identifier)
    if isinstance(identifier, keras.optimizers.Optimizer):
        return _from_keras(identifier)
    raise ValueError(f"Could not interpret optimizer identifier: {identifier}")


def _from_keras(opt: Any) -> Optimizer:
    # A Keras optimizer object (Keras's legacy .h5 loader deserializes one; code that imports
    # ``keras`` itself passes one to compile): tapejax's optimizer of the same class and config.
    cls: Any = _BY_NAME.get(type(opt).__name__.lower())
    if cls is None or type(opt).__name__ != cls.__name__:
        raise ValueError(f"Could not interpret optimizer identifier: {opt}. tapejax.keras has SGD, Adam, AdamW, RMSprop "
                         "and Adagrad; pass one of them (tf.keras.optimizers.Adam(...)) or its name.")
    if opt.built:
        raise ValueError(f"{type(opt).__name__} is a Keras optimizer that has already been used: its state cannot move "
                         f"to tapejax's. Pass tf.keras.optimizers.{cls.__name__}(...) (or the name) to compile instead.")
    with quiet_keras_array():  # (Keras reads its learning-rate variable with np.array)
        config = opt.get_config()
    return cls.from_config(config)


def serialize(optimizer: Optimizer) -> dict:
    return {"module": "keras.optimizers", "class_name": type(optimizer).__name__, "config": optimizer.get_config(),
            "registered_name": None}


def deserialize(config: dict, custom_objects: dict | None = None) -> Optimizer:
    cls: Any = _BY_NAME.get(config["class_name"].lower())
    if cls is None:
        raise ValueError(f"Could not interpret optimizer identifier: {config}")
    return cls.from_config(config["config"], custom_objects)
