"""``tf.keras.Model``, ``Sequential``, the functional API, training and saving.

The classes are Keras 3's ``Model``/``Sequential``/``Functional`` with the
tape's ``LayerMixin`` and a TF-style trainer in front: ``fit``, ``evaluate``
and ``predict`` loop over Keras's own data adapters and callbacks (History,
EarlyStopping, ModelCheckpoint, the progress bar...) and call
``train_step(self, data)`` / ``test_step`` / ``predict_step`` written as in
TensorFlow (a ``tf.GradientTape`` and ``optimizer.apply_gradients``), compiled
with ``tapejax.function`` unless ``run_eagerly=True``. Override ``train_step``
exactly as in the keras.io examples.

Example:
    >>> import numpy as np
    >>> import tapejax as tf
    >>> inputs = tf.keras.Input(shape=(3,))
    >>> outputs = tf.keras.layers.Dense(1)(tf.keras.layers.Dense(4, activation="relu")(inputs))
    >>> model = tf.keras.Model(inputs, outputs)
    >>> model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    >>> history = model.fit(np.ones((8, 3)), np.zeros((8, 1)), epochs=2, verbose=0)
    >>> sorted(history.history)
    ['loss']
    >>> model.predict(np.ones((2, 3)), verbose=0).shape
    (2, 1)
"""

from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
from keras.src import tree  # noqa: E402
from keras.src.callbacks import callback_list as _callback_list  # noqa: E402
from keras.src.models.functional import Functional as _KFunctional  # noqa: E402
from keras.src.models.model import functional_init_arguments  # noqa: E402
from keras.src.trainers.data_adapters import data_adapter_utils  # noqa: E402
from keras.src.trainers.epoch_iterator import EpochIterator  # noqa: E402

from .._core._recorder import Tensor, VariableBase
from .._tf import _distribute_ctx as _dctx
from .._tf import _surface as tf
from . import _saving
from . import optimizers as _optimizers
from ._bridge import in_stateless_scope, keras, mirrors, quiet_keras_array, stateful_call
from ._layer import LayerMixin, adapt_callable
from ._objects import _cached, tape_metric

# The tf.* namespace gets its op names at import (the op table): typed Any where used.
_tf_ops: Any = tf

__all__ = ["Model", "Sequential", "Functional", "tape_model", "clone_model", "load_model", "save_model", "model_from_json"]


def _to_tensors(data: Any) -> Any:
    def conv(x: Any) -> Any:
        if isinstance(x, Tensor | VariableBase) or x is None:
            return x
        if isinstance(x, np.ndarray | jax.Array | np.generic):
            return tf.constant(x)
        return x

    return tree.map_structure(conv, data)


def _to_numpy(data: Any) -> Any:
    """tapejax tensors given to fit/evaluate/predict as NumPy arrays (Keras's data adapters take those)."""
    return jax.tree_util.tree_map(lambda v: np.asarray(v) if isinstance(v, Tensor | VariableBase) else v, data,
                                  is_leaf=lambda v: isinstance(v, Tensor | VariableBase))


def _pythonify(logs: dict) -> dict:
    out = {}
    for k, v in (logs or {}).items():
        if isinstance(v, Tensor | VariableBase | jax.Array | np.ndarray | np.generic):
            a = np.asarray(v)
            v = float(a) if a.ndim == 0 else a
        out[k] = v
    return out


def _note_strategy(model: Any) -> None:
    # TF's Keras: a model is trained with the strategy whose scope it was created in.
    if _dctx.stacks.strategies:
        model.__dict__["_tapejax_strategy"] = _dctx.stacks.strategies[-1]


def _replicas_in_run() -> int:
    return int(_dctx.stacks.replicas[-1].num_replicas_in_sync) if _dctx.stacks.replicas else 1


def _unscale(loss: Any) -> Any:
    """The loss tracker's value: the replica's own mean loss (Keras's unscale_loss_for_distribution)."""
    n = _replicas_in_run()
    return loss * float(n) if n > 1 else loss


def _replicated_step(strategy: Any, step: Any, kind: str) -> Any:
    """``step`` run on every replica by ``strategy.run``, its outputs reduced as TF's Keras trainer does.

    Train and test logs are the mean over the replicas of each replica's metric results;
    predictions are the replicas' outputs concatenated in batch order.
    """

    def replicated(data: Any) -> Any:
        out = strategy.run(step, args=(data,))
        if kind == "predict":
            return jax.tree_util.tree_map(lambda v: strategy.gather(v, axis=0), out, is_leaf=_dist_leaf)
        return jax.tree_util.tree_map(lambda v: strategy.reduce("MEAN", v, axis=None), out, is_leaf=_dist_leaf)

    replicated.__name__ = f"{kind}_function"
    return replicated


def _dist_leaf(x: Any) -> bool:
    return isinstance(x, Tensor) or type(x).__name__ == "PerReplica"


def _uneven_batch(model: Any, kind: str, batch: Any) -> Any:
    """A batch the replicas cannot split evenly (the last, partial one): run as one replica would.

    tapejax runs all replicas as one SPMD program with equal shares; the partial batch runs
    unsplit on the replicated variables, which computes the global mean loss (TF splits it
    unevenly and averages the replicas' means; see compat_docs/distribute.md).
    """
    steps = model.__dict__.setdefault("_tapejax_steps", {})
    fn = steps.get((kind, None))
    if fn is None:
        f = getattr(model, f"{kind}_step")
        fn = f if model.run_eagerly else tf.function(f)
        steps[(kind, None)] = fn
    return fn(_to_tensors(batch))


@contextlib.contextmanager
def _partial_execution_ok(iterator: EpochIterator) -> Any:
    """Silence Keras's "input ran out of data" warning for the last, shorter execution of an epoch.

    With ``steps_per_execution=k`` and a batch count not divisible by k, Keras's
    ``EpochIterator`` fills the last execution's buffer past the end of the data and
    warns although nothing is missing; the warning stays when the data really runs
    out (``steps_per_epoch`` larger than the data, or an unknown size).
    """
    if iterator.steps_per_execution > 1 and iterator.steps_per_epoch is None and iterator.num_batches:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Your input ran out of data")
            yield
    else:
        yield


if TYPE_CHECKING:
    # The mixin is only ever combined with Keras's class (untyped, so Any): its Keras
    # attributes come from there.
    from keras import Model as _TapeTrainerBase
else:
    _TapeTrainerBase = object


class TapeTrainer(_TapeTrainerBase):
    """fit / evaluate / predict as TensorFlow's trainer runs them, with tapejax steps."""

    # ---- compile ------------------------------------------------------------------------

    def compile(self, optimizer: Any = "rmsprop", loss: Any = None, loss_weights: Any = None, metrics: Any = None,
                weighted_metrics: Any = None, run_eagerly: bool = False, steps_per_execution: int = 1,
                jit_compile: Any = "auto", auto_scale_loss: bool = True) -> None:
        opt = _optimizers.get(optimizer) if optimizer is not None else None
        # Loss and metric functions written with tapejax ops run inside the step's ops, on JAX values.
        loss, metrics, weighted_metrics = jax.tree_util.tree_map(
            adapt_callable, (loss, metrics, weighted_metrics), is_leaf=callable)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            keras.Model.compile(self, optimizer="sgd", loss=loss, loss_weights=loss_weights, metrics=metrics,
                                weighted_metrics=weighted_metrics, run_eagerly=run_eagerly,
                                steps_per_execution=steps_per_execution, jit_compile=False, auto_scale_loss=False)
        self.optimizer = opt
        self._compile_config.config["optimizer"] = None  # get_compile_config writes tapejax's
        # In place (a class swap): reassigning would make Keras track them twice.
        tape_metric(self._loss_tracker)
        tape_metric(self._compile_metrics)
        self._run_eagerly = bool(run_eagerly)
        self.__dict__["_tapejax_steps"] = {}

    def get_compile_config(self) -> Any:
        cfg = keras.Model.get_compile_config(self)
        if cfg is not None and getattr(self, "optimizer", None) is not None:
            cfg = dict(cfg)
            cfg["optimizer"] = _optimizers.serialize(self.optimizer)  # type: ignore[arg-type]  # compiled: set
        return cfg

    def compile_from_config(self, config: Any) -> None:
        from keras.src.saving import serialization_lib

        config = dict(config)
        opt = config.pop("optimizer", None)
        rest = serialization_lib.deserialize_keras_object(config)
        self.compile(optimizer=_optimizers.get(opt) if opt is not None else None, **rest)

    @property
    def run_eagerly(self) -> bool:
        return bool(getattr(self, "_run_eagerly", False))

    @run_eagerly.setter
    def run_eagerly(self, value: bool) -> None:
        self._run_eagerly = bool(value)
        self.__dict__["_tapejax_steps"] = {}

    # ---- losses and metrics on the tape --------------------------------------------------------

    def compute_loss(self, x: Any = None, y: Any = None, y_pred: Any = None, sample_weight: Any = None, training: bool = True) -> Any:
        if in_stateless_scope():
            return keras.Model.compute_loss(self, x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training)
        # One op over every variable the loss may read (regularisation penalties) and
        # the compiled loss's trackers.
        state = list(keras.Model.variables.fget(self))
        if self._compile_loss is not None:
            state += list(self._compile_loss.variables)
        loss = stateful_call(_cached(self, "compute_loss"), state, (),
                             dict(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training))
        # Inside strategy.run each replica's loss is the mean over its share of the batch, and the
        # replicas' gradients are summed: scaled by 1/replicas (Keras's scale_loss_for_distribution
        # under TF), their sum is the gradient of the global mean.
        n = _replicas_in_run()
        return loss / float(n) if n > 1 else loss

    def compute_metrics(self, x: Any, y: Any, y_pred: Any, sample_weight: Any = None) -> dict:
        if in_stateless_scope():
            return keras.Model.compute_metrics(self, x, y, y_pred, sample_weight=sample_weight)
        if self._compile_metrics is not None:
            self._compile_metrics.update_state(y, y_pred, sample_weight=sample_weight)
        return self.get_metrics_result()

    def get_metrics_result(self) -> dict:
        out = {}
        for m in self.metrics:
            r = tape_metric(m).result()
            if isinstance(r, dict):
                out.update(r)
            else:
                out[m.name] = r
        return out

    def _metrics_or_logs(self, logs: dict) -> dict:
        # Keras's _get_metrics_result_or_logs: the epoch's logs are the metrics read after the last
        # step (across replicas under a strategy) when the step returned exactly those.
        if not logs:
            return logs
        result = _pythonify(self.get_metrics_result())
        return result if set(result) == set(logs) else logs

    def reset_metrics(self) -> None:
        for m in self.metrics:
            tape_metric(m).reset_state()

    # ---- distribution ------------------------------------------------------------------------

    @property
    def distribute_strategy(self) -> Any:
        """The ``tf.distribute`` strategy whose scope the model was created in, else the current one (as TF's Keras)."""
        s = self.__dict__.get("_tapejax_strategy")
        return s if s is not None else _dctx.current_strategy()

    def _tapejax_replicas(self) -> Any:
        """The strategy ``fit``/``evaluate``/``predict`` split each batch over, or None for one replica."""
        s = self.distribute_strategy
        cur = _dctx.stacks.strategies[-1] if _dctx.stacks.strategies else None
        if cur is not None and s is not cur:
            # TF's Keras: a model is trained by the strategy it was created under.
            raise RuntimeError(
                f"Mixing different tf.distribute.Strategy objects: {cur} is not {s}. Train the model outside any "
                "scope or under the scope of the strategy it was created under (model.distribute_strategy)."
            )
        if s is None or s is _dctx.default_strategy or int(s.num_replicas_in_sync) < 2:
            return None
        return s

    def _tapejax_place(self, strategy: Any) -> None:
        # TF creates a model's variables mirrored when it is built under the scope; Keras builds
        # some lazily (optimizer slots, compiled metrics), so everything the steps touch is
        # replicated here, before the first step, instead of on the first call's inputs.
        kvars = list(keras.Model.variables.fget(self)) + list(keras.Model.metrics_variables.fget(self))
        if self.optimizer is not None:
            kvars += list(getattr(self.optimizer, "variables", []))
        for m in mirrors(kvars):
            m._v = strategy._place_variable(m._v)

    # ---- steps (TensorFlow's trainer, tapejax's tape) ---------------------------------------

    def train_step(self, data: Any) -> dict:
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True) if self._call_has_training_arg else self(x)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
            first = next(i for i in tree.flatten(x) if i is not None)
        self._loss_tracker.update_state(_unscale(loss), sample_weight=_tf_ops.shape(first)[0])
        trainable = self.trainable_weights
        if trainable:
            grads = tape.gradient(loss, trainable)
            self.optimizer.apply_gradients(zip(grads, trainable))  # type: ignore[union-attr]  # compiled: set
        else:
            warnings.warn("The model does not have any trainable weights.", stacklevel=2)
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def test_step(self, data: Any) -> dict:
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        y_pred = self(x, training=False) if self._call_has_training_arg else self(x)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=False)
        first = next(i for i in tree.flatten(x) if i is not None)
        self._loss_tracker.update_state(_unscale(loss), sample_weight=_tf_ops.shape(first)[0])
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def predict_step(self, data: Any) -> Any:
        x, _, _ = data_adapter_utils.unpack_x_y_sample_weight(data)
        return self(x, training=False) if self._call_has_training_arg else self(x)

    def _step(self, kind: str) -> Any:
        steps = self.__dict__.setdefault("_tapejax_steps", {})
        strategy = self._tapejax_replicas()
        fn = steps.get((kind, strategy))
        if fn is None:
            f = getattr(self, f"{kind}_step")
            if strategy is not None:
                f = _replicated_step(strategy, f, kind)
            fn = f if self.run_eagerly else tf.function(f)
            steps[(kind, strategy)] = fn
        return fn

    def _run_step(self, kind: str, fn: Any, batch: Any) -> Any:
        strategy = self._tapejax_replicas()
        if strategy is not None:
            n = int(strategy.num_replicas_in_sync)
            sizes = {np.shape(a)[0] for a in tree.flatten(batch) if a is not None and np.ndim(a) > 0}
            if len(sizes) != 1 or next(iter(sizes)) % n:
                return _uneven_batch(self, kind, batch)
            return fn(strategy._distribute_global(_to_tensors(batch)))
        return fn(_to_tensors(batch))

    def _run_steps(self, kind: str, fn: Any, batches: list) -> Any:
        """One execution: ``len(batches)`` steps (``compile(steps_per_execution=k)``) as ONE compiled program.

        TF's trainer runs ``steps_per_execution`` steps inside one ``tf.function`` call; so does
        this, each step ``strategy.run`` under a strategy. Returns the last step's logs (predict:
        every step's outputs). A batch the replicas cannot split evenly runs its steps one at a time.
        """
        if len(batches) == 1:
            out = self._run_step(kind, fn, batches[0])
            return [out] if kind == "predict" else out
        strategy = self._tapejax_replicas()
        if strategy is not None:
            n = int(strategy.num_replicas_in_sync)
            for b in batches:
                sizes = {np.shape(a)[0] for a in tree.flatten(b) if a is not None and np.ndim(a) > 0}
                if len(sizes) != 1 or next(iter(sizes)) % n:
                    outs = [self._run_step(kind, fn, b) for b in batches]
                    return outs if kind == "predict" else outs[-1]
            data = tuple(strategy._distribute_global(_to_tensors(b)) for b in batches)
        else:
            data = tuple(_to_tensors(b) for b in batches)
        steps = self.__dict__.setdefault("_tapejax_steps", {})
        multi = steps.get((kind, strategy, "execution"))
        if multi is None:
            one = getattr(self, f"{kind}_step")
            if strategy is not None:
                one = _replicated_step(strategy, one, kind)

            def execution(batches: tuple) -> Any:
                outs = [one(b) for b in batches]
                return outs if kind == "predict" else outs[-1]

            execution.__name__ = f"multi_step_{kind}_function"
            multi = execution if self.run_eagerly else tf.function(execution)
            steps[(kind, strategy, "execution")] = multi
        return multi(data)

    def _steps_per_execution(self) -> int:
        return max(1, int(getattr(self, "steps_per_execution", 1) or 1))

    def make_train_function(self, force: bool = False) -> Any:
        if force:
            self.__dict__["_tapejax_steps"] = {}
        self.train_function = self._step("train")
        return self.train_function

    def make_test_function(self, force: bool = False) -> Any:
        if force:
            self.__dict__["_tapejax_steps"] = {}
        self.test_function = self._step("test")
        return self.test_function

    def make_predict_function(self, force: bool = False) -> Any:
        if force:
            self.__dict__["_tapejax_steps"] = {}
        self.predict_function = self._step("predict")
        return self.predict_function

    def _tapejax_prepare(self, iterator: EpochIterator) -> None:
        # Variables are created before any compiled step: build the model, the
        # compiled metrics and losses symbolically from the first batch.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._symbolic_build(iterator=iterator)
        if self.optimizer is not None and not getattr(self.optimizer, "built", True):
            self.optimizer.build(self.trainable_variables)
        strategy = self._tapejax_replicas()
        if strategy is not None:
            self._tapejax_place(strategy)

    # ---- loops ------------------------------------------------------------------------

    def fit(self, x: Any = None, y: Any = None, batch_size: Any = None, epochs: int = 1, verbose: Any = "auto",
            callbacks: Any = None, validation_split: float = 0.0, validation_data: Any = None, shuffle: bool = True,
            class_weight: Any = None, sample_weight: Any = None, initial_epoch: int = 0, steps_per_epoch: Any = None,
            validation_steps: Any = None, validation_batch_size: Any = None, validation_freq: int = 1) -> Any:
        self._assert_compile_called("fit")
        x, y, sample_weight, validation_data = _to_numpy((x, y, sample_weight, validation_data))
        if validation_split and validation_data is None:
            from keras.src.trainers.data_adapters import array_slicing

            # (Keras is untyped: pyright infers None among its tree helpers' results, never returned here.)
            (x, y, sample_weight), validation_data = array_slicing.train_validation_split(  # pyright: ignore[reportGeneralTypeIssues]
                (x, y, sample_weight), validation_split=validation_split)
        val_x = val_y = val_sample_weight = None
        if validation_data is not None:
            val_x, val_y, val_sample_weight = data_adapter_utils.unpack_x_y_sample_weight(validation_data)
        epoch_iterator = EpochIterator(x=x, y=y, sample_weight=sample_weight, batch_size=batch_size,
                                       steps_per_epoch=steps_per_epoch, shuffle=shuffle, class_weight=class_weight,
                                       steps_per_execution=self._steps_per_execution())
        self._tapejax_prepare(epoch_iterator)
        epoch_iterator.reset()
        if not isinstance(callbacks, _callback_list.CallbackList):
            callbacks = _callback_list.CallbackList(callbacks, add_history=True, add_progbar=verbose != 0,
                                                    verbose=verbose, epochs=epochs, steps=epoch_iterator.num_batches,
                                                    model=self)
        train_function = self.make_train_function()
        self.stop_training = False
        callbacks.on_train_begin()
        training_logs: dict = {}
        logs: dict = {}
        for epoch in range(initial_epoch, epochs):
            self.reset_metrics()
            callbacks.on_epoch_begin(epoch)
            with epoch_iterator.catch_stop_iteration(), _partial_execution_ok(epoch_iterator):
                for begin_step, end_step, batch in epoch_iterator:
                    callbacks.on_train_batch_begin(begin_step)
                    logs = _pythonify(self._run_steps("train", train_function, batch))
                    callbacks.on_train_batch_end(end_step, logs)
                    if self.stop_training:
                        break
            epoch_logs = dict(self._metrics_or_logs(logs))
            if validation_data is not None and self._should_eval(epoch, validation_freq):
                val_logs = self.evaluate(x=val_x, y=val_y, sample_weight=val_sample_weight,
                                         batch_size=validation_batch_size or batch_size, steps=validation_steps,
                                         callbacks=callbacks, return_dict=True)
                epoch_logs.update({f"val_{k}": v for k, v in val_logs.items()})
            callbacks.on_epoch_end(epoch, epoch_logs)
            training_logs = epoch_logs
            if self.stop_training:
                break
        callbacks.on_train_end(logs=training_logs)
        return self.history

    def evaluate(self, x: Any = None, y: Any = None, batch_size: Any = None, verbose: Any = "auto",
                 sample_weight: Any = None, steps: Any = None, callbacks: Any = None, return_dict: bool = False,
                 **kwargs: Any) -> Any:
        self._assert_compile_called("evaluate")
        x, y, sample_weight = _to_numpy((x, y, sample_weight))
        epoch_iterator = EpochIterator(x=x, y=y, sample_weight=sample_weight, batch_size=batch_size,
                                       steps_per_epoch=steps, shuffle=False, steps_per_execution=self._steps_per_execution())
        self._tapejax_prepare(epoch_iterator)
        epoch_iterator.reset()
        if not isinstance(callbacks, _callback_list.CallbackList):
            callbacks = _callback_list.CallbackList(callbacks, add_progbar=verbose != 0, verbose=verbose, epochs=1,
                                                    steps=epoch_iterator.num_batches, model=self)
        test_function = self.make_test_function()
        self.stop_evaluating = False
        callbacks.on_test_begin()
        logs: dict = {}
        self.reset_metrics()
        with epoch_iterator.catch_stop_iteration(), _partial_execution_ok(epoch_iterator):
            for begin_step, end_step, batch in epoch_iterator:
                callbacks.on_test_batch_begin(begin_step)
                logs = _pythonify(self._run_steps("test", test_function, batch))
                callbacks.on_test_batch_end(end_step, logs)
                if self.stop_evaluating:
                    break
        logs = _pythonify(self.get_metrics_result())
        callbacks.on_test_end(logs)
        if return_dict:
            return logs
        return self._flatten_metrics_in_order(logs)

    def predict(self, x: Any, batch_size: Any = None, verbose: Any = "auto", steps: Any = None, callbacks: Any = None) -> Any:
        x = _to_numpy(x)
        epoch_iterator = EpochIterator(x=x, batch_size=batch_size, steps_per_epoch=steps, shuffle=False,
                                       steps_per_execution=self._steps_per_execution())
        if not all(layer.built for layer in self._flatten_layers()):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._symbolic_build(iterator=epoch_iterator)
            epoch_iterator.reset()
        if not isinstance(callbacks, _callback_list.CallbackList):
            callbacks = _callback_list.CallbackList(callbacks, add_progbar=verbose != 0, verbose=verbose, epochs=1,
                                                    steps=epoch_iterator.num_batches, model=self)
        predict_function = self.make_predict_function()
        self.stop_predicting = False
        callbacks.on_predict_begin()
        batches = []
        with epoch_iterator.catch_stop_iteration(), _partial_execution_ok(epoch_iterator):
            for begin_step, end_step, batch in epoch_iterator:
                callbacks.on_predict_batch_begin(begin_step)
                outs = self._run_steps("predict", predict_function, batch)
                outs = [jax.tree_util.tree_map(np.asarray, o, is_leaf=lambda t: isinstance(t, Tensor)) for o in outs]
                batches.extend(outs)
                out = outs[-1] if len(outs) == 1 else jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *outs)
                callbacks.on_predict_batch_end(end_step, {"outputs": out})
                if self.stop_predicting:
                    break
        callbacks.on_predict_end()
        return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *batches)

    def train_on_batch(self, x: Any, y: Any = None, sample_weight: Any = None, class_weight: Any = None, return_dict: bool = False) -> Any:
        self._assert_compile_called("train_on_batch")
        data = (x, y, sample_weight)
        self._symbolic_build(data_batch=data)
        if self.optimizer is not None and not getattr(self.optimizer, "built", True):
            self.optimizer.build(self.trainable_variables)
        strategy = self._tapejax_replicas()
        if strategy is not None:
            self._tapejax_place(strategy)
        logs = _pythonify(self.make_train_function()(_to_tensors(data)))
        return logs if return_dict else self._flatten_metrics_in_order(logs)

    def test_on_batch(self, x: Any, y: Any = None, sample_weight: Any = None, return_dict: bool = False) -> Any:
        self._assert_compile_called("test_on_batch")
        data = (x, y, sample_weight)
        self._symbolic_build(data_batch=data)
        logs = _pythonify(self.make_test_function()(_to_tensors(data)))
        return logs if return_dict else self._flatten_metrics_in_order(logs)

    def predict_on_batch(self, x: Any) -> Any:
        out = self.make_predict_function()(_to_tensors((x,)))
        return jax.tree_util.tree_map(np.asarray, out, is_leaf=lambda t: isinstance(t, Tensor))

    # ---- saving ----------------------------------------------------------------------

    def save(self, filepath: Any, overwrite: bool = True, zipped: Any = None, **kwargs: Any) -> None:
        with quiet_keras_array():
            keras.Model.save(self, filepath, overwrite=overwrite, zipped=zipped, **kwargs)

    def save_weights(self, filepath: Any, overwrite: bool = True, *args: Any, **kwargs: Any) -> None:
        # (*args: Keras's further positional parameters, max_shard_size, pass through as Keras has them.)
        with quiet_keras_array():
            keras.Model.save_weights(self, filepath, overwrite, *args, **kwargs)

    def load_weights(self, filepath: Any, skip_mismatch: bool = False, **kwargs: Any) -> None:
        with quiet_keras_array():
            keras.Model.load_weights(self, filepath, skip_mismatch=skip_mismatch, **kwargs)

    # ---- variables as tf.Variables -------------------------------------------------------

    @property
    def metrics_variables(self) -> list:
        return mirrors(super().metrics_variables)


# (Keras's own Model.quantize and Layer.quantize, which LayerMixin stands for to a checker, differ; the
# MRO gives Keras's Model's.)
class Model(TapeTrainer, LayerMixin, keras.Model):  # pyright: ignore[reportIncompatibleMethodOverride]
    """Keras 3's ``Model`` on the tape: subclass it (``call`` with tapejax ops) or give it ``inputs``/``outputs``.

    Example:
        >>> import tapejax as tf
        >>> class MLP(tf.keras.Model):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.hidden = tf.keras.layers.Dense(8, activation="relu")
        ...         self.out = tf.keras.layers.Dense(1)
        ...     def call(self, x, training=False):
        ...         return self.out(self.hidden(x))
        >>> model = MLP()
        >>> _ = model(tf.ones((4, 3)))
        >>> len(model.trainable_variables)
        4
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if functional_init_arguments(args, kwargs) and cls is Model:
            return Functional.__new__(Functional, *args, **kwargs)
        return keras.Model.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any):
        _note_strategy(self)
        if functional_init_arguments(args, kwargs) and not isinstance(self, _KFunctional):
            # A subclass of tf.keras.Model built from inputs/outputs (the keras.io
            # custom train_step pattern): Keras makes the class Functional by
            # rewriting its bases; stop at tapejax's Model, which must stay as is.
            _inject_functional(type(self))
            Functional.__init__(self, *args, **kwargs)
            return
        keras.Model.__init__(self, *args, **kwargs)


def _inject_functional(cls: type) -> type:
    if cls is Model:
        return Functional
    if cls is object or not issubclass(cls, Model) or issubclass(cls, Functional):
        return cls
    cls.__bases__ = tuple(_inject_functional(b) for b in cls.__bases__)
    return cls


class Functional(Model, _KFunctional):
    """A model defined by ``tf.keras.Model(inputs, outputs)`` (Keras 3's ``Functional``)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return _KFunctional.__new__(cls)

    def __init__(self, inputs: Any, outputs: Any, name: Any = None, **kwargs: Any):
        _note_strategy(self)
        _KFunctional.__init__(self, inputs, outputs, name=name, **kwargs)


class Sequential(Model, keras.Sequential):
    """Keras 3's ``Sequential`` on the tape: the whole stack is one op per call.

    Example:
        >>> import tapejax as tf
        >>> model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        >>> model.output_shape
        (None, 2)
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return keras.Sequential.__new__(cls)

    def __init__(self, layers: Any = None, trainable: bool = True, name: Any = None):
        _note_strategy(self)
        keras.Sequential.__init__(self, layers=layers, trainable=trainable, name=name)


def tape_model(model: Any) -> Any:
    """A model Keras built (``keras.applications``...) as tapejax's class: its calls go on the tape."""
    if isinstance(model, LayerMixin) or not isinstance(model, keras.Model):
        return model
    if isinstance(model, keras.Sequential):
        model.__class__ = Sequential
    elif isinstance(model, _KFunctional) and type(model) is _KFunctional:
        model.__class__ = Functional
    return model


# Saved as Keras's classes, and loaded back as these (_saving).
_saving.register(Model, keras.Model)
_saving.register(Sequential, keras.Sequential)
_saving.register(Functional, _KFunctional)


def load_model(filepath: Any, custom_objects: Any = None, compile: bool = True, safe_mode: bool = True) -> Any:
    """Load a model saved with ``model.save("x.keras")`` into tapejax's classes.

    Example:
        >>> import os, tempfile
        >>> import tapejax as tf
        >>> model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        >>> path = os.path.join(tempfile.mkdtemp(), "m.keras")
        >>> model.save(path)
        >>> again = tf.keras.models.load_model(path)
        >>> bool((again.predict(tf.ones((1, 3)), verbose=0) == model.predict(tf.ones((1, 3)), verbose=0)).all())
        True
    """
    with _saving.loading(), quiet_keras_array():
        model = keras.saving.load_model(filepath, custom_objects=custom_objects, compile=compile, safe_mode=safe_mode)
    return tape_model(model)


def save_model(model: Any, filepath: Any, overwrite: bool = True, **kwargs: Any) -> None:
    """``model.save(filepath)``."""
    model.save(filepath, overwrite=overwrite, **kwargs)


def model_from_json(json_string: str, custom_objects: Any = None) -> Any:
    with _saving.loading():
        return tape_model(keras.models.model_from_json(json_string, custom_objects=custom_objects))


def clone_model(model: Any, input_tensors: Any = None, clone_function: Any = None, call_function: Any = None,
                recursive: bool = False, **kwargs: Any) -> Any:
    """A new model with the same architecture and fresh weights (Keras's ``clone_model``), in tapejax's classes.

    Example:
        >>> import tapejax as tf
        >>> model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        >>> twin = tf.keras.models.clone_model(model)
        >>> type(twin).__name__, twin.output_shape
        ('Sequential', (None, 2))
    """
    with _saving.loading():
        return tape_model(keras.models.clone_model(model, input_tensors=input_tensors, clone_function=clone_function,
                                        call_function=call_function, recursive=recursive, **kwargs))
