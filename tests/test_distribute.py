"""tf.distribute: strategies on one device in-process; 8 host devices and two processes in subprocesses.

The test process has already started JAX with one CPU device, so every multi-device check runs
``tests/_distribute_programs.py`` in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (or two processes with ``TF_CONFIG``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tapejax as tf

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = str(Path(__file__).resolve().parent / "_distribute_programs.py")


def _env(devices: int, **extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env.update(extra)
    return env


def run_program(tmp_path: Path, mode: str, devices: int = 1, **extra: str) -> dict:
    out = tmp_path / f"{mode}.npz"
    env = _env(devices, **extra)
    if mode.startswith("tf-"):
        env.pop("KERAS_BACKEND", None)  # real TF's tf.keras: Keras on TF's backend
    r = subprocess.run([sys.executable, PROGRAMS, mode, str(out)], env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return dict(np.load(out))


def one_device_reference() -> dict:
    """The canonical loop on one device, in this process (the number every distributed run must give)."""
    spec = importlib.util.spec_from_file_location("_distribute_programs", PROGRAMS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.loop(tf, tf.distribute.OneDeviceStrategy("/cpu:0"), tf.keras.optimizers)


def assert_same_training(a: dict, b: dict) -> None:
    for k in ("losses", "a", "b", "c", "accuracy"):
        np.testing.assert_allclose(a[k], b[k], rtol=2e-5, atol=2e-6, err_msg=k)
    assert int(a["iterations"]) == int(b["iterations"]) == 12


# --- one device, in process -----------------------------------------------------------------


def test_compute_average_loss_analytic():
    per = np.array([1.0, 2.0, 3.0, 6.0], np.float32)
    assert float(tf.nn.compute_average_loss(per)) == pytest.approx(per.mean())
    assert float(tf.nn.compute_average_loss(per, global_batch_size=8)) == pytest.approx(per.sum() / 8)
    w = np.array([1.0, 0.0, 2.0, 0.5], np.float32)
    assert float(tf.nn.compute_average_loss(per, sample_weight=w, global_batch_size=2)) == pytest.approx((per * w).sum() / 2)
    per2 = np.ones((2, 3), np.float32)
    assert float(tf.nn.compute_average_loss(per2)) == pytest.approx(3.0)


def test_compute_average_loss_bad_input():
    with pytest.raises(ValueError, match="at least rank 1"):
        tf.nn.compute_average_loss(tf.constant(1.0))
    with pytest.raises(TypeError, match="integer"):
        tf.nn.compute_average_loss([1.0], global_batch_size=2.0)
    with pytest.raises(ValueError, match="positive"):
        tf.nn.compute_average_loss([1.0], global_batch_size=0)
    s = tf.distribute.OneDeviceStrategy("/cpu:0")
    with s.scope(), pytest.raises(RuntimeError, match="cross replica context"):
        tf.nn.compute_average_loss([1.0, 2.0])
    with s.scope(), pytest.raises(RuntimeError, match="cross replica context"):
        tf.nn.scale_regularization_loss(1.0)


def test_scale_regularization_loss_divides_by_replicas():
    assert float(tf.nn.scale_regularization_loss(tf.constant([1.0, 3.0]))) == 4.0
    s = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert float(s.run(lambda: tf.nn.scale_regularization_loss(6.0))) == 6.0


def test_default_strategy_and_contexts():
    s = tf.distribute.get_strategy()
    assert s.num_replicas_in_sync == 1 and not tf.distribute.has_strategy()
    ctx = tf.distribute.get_replica_context()
    assert ctx.num_replicas_in_sync == 1 and int(ctx.replica_id_in_sync_group) == 0
    assert not tf.distribute.in_cross_replica_context()
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    with one.scope():
        assert tf.distribute.get_strategy() is one and tf.distribute.has_strategy()
        assert tf.distribute.in_cross_replica_context() and tf.distribute.get_replica_context() is None
        inner = one.run(lambda: (tf.distribute.get_replica_context().strategy, tf.distribute.in_cross_replica_context()))
        assert inner == (one, False)
    assert tf.distribute.get_strategy() is s


def test_one_device_strategy_trains_like_no_strategy():
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(8, 1)
    y = 3.0 * x + 1.0

    def train(strategy):
        with strategy.scope():
            w = tf.Variable([[0.5]])
            opt = tf.keras.optimizers.SGD(0.1, momentum=0.5)
        ds = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(4))

        def step(inp):
            xb, yb = inp
            with tf.GradientTape() as t:
                loss = tf.nn.compute_average_loss(tf.reduce_sum((tf.matmul(xb, w) - yb) ** 2, axis=1))
            opt.apply_gradients(zip(t.gradient(loss, [w]), [w]))
            return loss

        losses = [float(strategy.reduce("SUM", strategy.run(step, args=(b,)), axis=None)) for _ in range(2) for b in ds]
        return losses, w.numpy()

    l1, w1 = train(tf.distribute.OneDeviceStrategy("/cpu:0"))
    l0, w0 = train(tf.distribute.get_strategy())
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    np.testing.assert_allclose(w1, w0, rtol=1e-6)


def test_one_replica_values():
    s = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert s.num_replicas_in_sync == 1
    out = s.run(lambda a: a + 1.0, args=(tf.constant([1.0, 2.0]),))
    assert [t.numpy().tolist() for t in s.experimental_local_results(out)] == [[2.0, 3.0]]
    assert float(s.reduce(tf.distribute.ReduceOp.SUM, out, axis=0)) == 5.0
    assert float(s.reduce(tf.distribute.ReduceOp.MEAN, out, axis=0)) == 2.5
    assert float(s.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", tf.constant(2.0)))) == 2.0
    merged = s.run(lambda: tf.distribute.get_replica_context().merge_call(lambda strat, v: (strat, tf.distribute.in_cross_replica_context(), v), args=(3,)))
    assert merged == (s, True, 3)


def test_bad_input():
    with pytest.raises(ValueError, match="TPU"):
        tf.distribute.TPUStrategy()
    with pytest.raises(ValueError, match="does not exist"):
        tf.distribute.OneDeviceStrategy("/gpu:7")
    with pytest.raises(ValueError, match="Cannot parse device"):
        tf.distribute.MirroredStrategy(["not a device"])
    a, b = tf.distribute.OneDeviceStrategy("/cpu:0"), tf.distribute.OneDeviceStrategy("/cpu:0")
    with a.scope(), pytest.raises(RuntimeError, match="Mixing different tf.distribute.Strategy"), b.scope():
        pass
    with pytest.raises(ValueError, match="reduce_op"):
        a.reduce("MAX", tf.constant(1.0), axis=None)
    ctx = tf.distribute.InputContext(num_replicas_in_sync=3)
    with pytest.raises(ValueError, match="not divisible"):
        ctx.get_per_replica_batch_size(8)


def test_mixing_strategies_is_tf_runtime_error():
    a, b = tf.distribute.OneDeviceStrategy("/cpu:0"), tf.distribute.OneDeviceStrategy("/cpu:0")
    with a.scope():
        with pytest.raises(RuntimeError, match="Mixing different tf.distribute.Strategy"):
            b.run(lambda: tf.constant(1.0))
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32)
    before = model.get_weights()
    with b.scope(), pytest.raises(RuntimeError, match="created under"):
        model.fit(x, y, epochs=1, verbose=0)
    for w0, w1 in zip(before, model.get_weights()):
        np.testing.assert_array_equal(w0, w1)
    with a.scope():
        model.fit(x, y, epochs=1, verbose=0)  # its own strategy's scope: fine
    model.fit(x, y, epochs=1, verbose=0)  # outside every scope: fine


def test_merge_call_and_extended_one_replica():
    s = tf.distribute.OneDeviceStrategy("/cpu:0")
    with s.scope():
        v = tf.Variable([1.0, 2.0])

    def step(g):
        ctx = tf.distribute.get_replica_context()

        def merge_fn(strategy, g):
            r = strategy.extended.reduce_to("SUM", g, v)
            [m] = strategy.extended.batch_reduce_to("MEAN", [(g, v)])
            strategy.extended.update(v, lambda var, d: var.assign_sub(d), args=(r,))
            return r + m

        return ctx.merge_call(merge_fn, args=(g,))

    out = s.run(step, args=(tf.constant([0.5, 0.25]),))
    np.testing.assert_allclose(out.numpy(), [1.0, 0.5])
    np.testing.assert_allclose(v.numpy(), [0.5, 1.75])
    assert s.extended.worker_devices == ("/job:localhost/replica:0/task:0/device:CPU:0",)


def test_multi_worker_without_tf_config_is_one_process():
    s = tf.distribute.MultiWorkerMirroredStrategy()
    assert s.num_replicas_in_sync == 1 and s.cluster_resolver.task_id is None


# --- 8 host devices / 2 processes, in subprocesses ---------------------------------------


def test_mirrored_spmd_features_on_8_devices():
    r = subprocess.run([sys.executable, PROGRAMS, "features"], env=_env(8), capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0 and "features OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def test_custom_training_loop_8_replicas_matches_one_device(tmp_path):
    one = one_device_reference()
    eight = run_program(tmp_path, "tapejax-8", 8)
    assert int(one["replicas"]) == 1 and int(eight["replicas"]) == 8
    assert_same_training(eight, one)


def test_keras_fit_under_mirrored_scope_8_replicas_matches_one_device(tmp_path):
    eight = run_program(tmp_path, "fit-tapejax-8", 8)
    one = run_program(tmp_path, "fit-tapejax-1", 1)
    assert int(eight["replicas"]) == 8 and int(one["replicas"]) == 1
    # Keras created the layers' variables replicated over the 8 devices (Keras's DataParallel over
    # the strategy's mesh), and the strategy kept them, the optimizer's slots too, on all 8.
    assert int(eight["created_devices"]) == 8 and bool(eight["created_replicated"])
    assert int(eight["variable_devices"]) == 8 and int(eight["slot_devices"]) == 8
    assert int(one["variable_devices"]) == 1
    # Every step's inputs (x and y of fit, evaluate and predict) were split over the 8 devices
    # along the 'batch' axis: rows/8 each. 72 samples in batches of 16: four of 16, one of 8.
    inputs = eight["inputs"]
    assert len(inputs) == 2 * (3 * 5) + 2 * 5 + 3  # fit (x, y; 3 epochs), evaluate (x, y), predict (x; 40 samples)
    assert (inputs[:, 0] == 8).all() and (inputs[:, 1] * 8 == inputs[:, 2]).all() and inputs[:, 3].all()
    assert set(inputs[:, 2].tolist()) == {16, 8}
    assert len(one["inputs"]) == 0  # one replica: the step runs on the batch as is
    for k in ("loss", "accuracy", "evaluate", "predict", "w0", "w1", "w2", "w3", "uneven_loss", "uneven_w0"):
        np.testing.assert_allclose(eight[k], one[k], rtol=2e-5, atol=2e-6, err_msg=k)
    assert int(eight["iterations"]) == int(one["iterations"]) == 15


@pytest.mark.oracle
def test_keras_fit_under_mirrored_scope_matches_tf(tmp_path):
    pytest.importorskip("tensorflow")
    ours = run_program(tmp_path, "fit-tapejax-8", 8)
    theirs = run_program(tmp_path, "fit-tf-8", 1)
    assert int(theirs["replicas"]) == 8
    for k in ("loss", "accuracy", "evaluate", "predict", "w0", "w1", "w2", "w3"):
        np.testing.assert_allclose(ours[k], theirs[k], rtol=2e-5, atol=5e-6, err_msg=k)
    assert int(ours["iterations"]) == int(theirs["iterations"])


def test_keras_steps_per_execution_under_mirrored_scope(tmp_path):
    # compile(steps_per_execution=3): three steps per compiled call (the last call of an epoch of
    # five batches runs two), the same numbers as one step per call; callbacks every execution.
    three = run_program(tmp_path, "fit-tapejax-8", 8, DIST_SPE="3")
    one = run_program(tmp_path, "fit-tapejax-8", 8)
    for k in ("loss", "accuracy", "evaluate", "predict", "w0", "w1", "w2", "w3"):
        np.testing.assert_allclose(three[k], one[k], rtol=1e-6, atol=1e-7, err_msg=k)
    assert int(three["iterations"]) == 15
    assert three["batches"].tolist() == [2, 5] * 3 and one["batches"].tolist() == [0, 1, 2, 3, 4] * 3
    inputs = three["inputs"]
    assert (inputs[:, 0] == 8).all() and (inputs[:, 1] * 8 == inputs[:, 2]).all()


@pytest.mark.oracle
def test_keras_steps_per_execution_matches_tf(tmp_path):
    pytest.importorskip("tensorflow")
    ours = run_program(tmp_path, "fit-tapejax-8", 8, DIST_SPE="3")
    theirs = run_program(tmp_path, "fit-tf-8", 1, DIST_SPE="3")
    for k in ("loss", "accuracy", "evaluate", "predict", "w0", "w1", "w2", "w3"):
        np.testing.assert_allclose(ours[k], theirs[k], rtol=2e-5, atol=5e-6, err_msg=k)
    assert ours["batches"].tolist() == theirs["batches"].tolist()


def test_random_merge_call_programs_4_replicas():
    # hypothesis (deterministic, 150 programs): reduce / reduce_to / batch_reduce_to / gather /
    # local results of a random per-replica value in merge_fn, eager or compiled, against NumPy.
    r = subprocess.run([sys.executable, PROGRAMS, "random-merge"], env=_env(4), capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0 and "random merge programs OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def test_steps_per_execution_without_strategy_matches_one_step_per_call():
    x = np.linspace(-1, 1, 50, dtype=np.float32).reshape(25, 2)
    y = (x.sum(1) > 0).astype(np.int32)

    def train(spe):
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(4, activation="tanh"), tf.keras.layers.Dense(2)])
        model.set_weights([np.cos(np.arange(w.size) + 0.5).reshape(w.shape).astype(np.float32) for w in model.get_weights()])
        model.compile(optimizer=tf.keras.optimizers.Adam(0.02), metrics=["accuracy"], steps_per_execution=spe,
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        hist = model.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)  # 7 batches: 3 + 3 + 1
        return (hist.history, model.evaluate(x, y, batch_size=4, verbose=0), model.predict(x, batch_size=4, verbose=0),
                model.get_weights(), int(model.optimizer.iterations.numpy()))

    one, three = train(1), train(3)
    for k in ("loss", "accuracy"):
        np.testing.assert_allclose(three[0][k], one[0][k], rtol=1e-6)
    np.testing.assert_allclose(three[1], one[1], rtol=1e-6)
    np.testing.assert_allclose(three[2], one[2], rtol=1e-6, atol=1e-7)
    for a, b in zip(three[3], one[3]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert three[4] == one[4] == 14


def _merge_expected(n: int) -> dict:
    x = np.arange(4 * n, dtype=np.float32).reshape(2 * n, 2) ** 1.5
    local = np.stack([(x[2 * r:2 * r + 2] ** 2).sum(0) + r for r in range(n)])
    total = local.sum(0)
    return {"total": total, "mean": total / n, "along": total.sum(), "gathered": local.reshape(-1), "listed": local,
            "local": local, "v": np.array([1.0, 2.0]) - 2 * 1e-3 * total}


def test_merge_call_as_an_optimizer_uses_it_8_replicas(tmp_path):
    # merge_fn sees every replica's value (reduce_to, batch_reduce_to, reduce along an axis,
    # gather, local results), updates a replicated variable with extended.update, and each replica
    # gets its own value of a distributed result back; inside tf.function, two steps.
    ours = run_program(tmp_path, "merge-tapejax-8", 8)
    for k, want in _merge_expected(8).items():
        np.testing.assert_allclose(ours[k], want, rtol=1e-5, err_msg=k)


@pytest.mark.oracle
def test_merge_call_matches_tf(tmp_path):
    pytest.importorskip("tensorflow")
    ours = run_program(tmp_path, "merge-tapejax-8", 8)
    theirs = run_program(tmp_path, "merge-tf-8", 1)
    for k in ("total", "mean", "along", "gathered", "listed", "local", "v"):
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-6, err_msg=k)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_multi_worker_two_processes_match_one_process(tmp_path):
    ports = [_free_port(), _free_port()]
    procs = []
    for i in range(2):
        cfg = {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": i}}
        procs.append(subprocess.Popen([sys.executable, PROGRAMS, "worker", str(tmp_path / f"w{i}.npz")],
                                      env=_env(2, TF_CONFIG=json.dumps(cfg)), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outs)
    w0, w1 = (dict(np.load(tmp_path / f"w{i}.npz")) for i in range(2))
    # Two processes with two devices each: four replicas, two of them across the process boundary.
    assert int(w0["process_count"]) == 2 and int(w0["replicas"]) == 4
    assert_same_training(w0, one_device_reference())
    for k in ("a", "b", "c"):
        np.testing.assert_array_equal(w0[k], w1[k])


@pytest.mark.parametrize("modname", ["tapejax.distribute", "tapejax.distribute._strategy", "tapejax.distribute._values",
                                     "tapejax.distribute.experimental",
                                     "tapejax._tf._distribute_ctx"])
def test_docstring_examples_run(modname):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(modname), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_tf_config_cluster_resolver_and_options(monkeypatch):
    cfg = {"cluster": {"chief": ["h0:1"], "worker": ["h1:2", "h2:3"]}, "task": {"type": "worker", "index": 1},
           "rpc_layer": "grpc"}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cfg))
    r = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    assert (r.task_type, r.task_id) == ("worker", 1)
    assert r.cluster_spec().as_dict() == cfg["cluster"] and r.cluster_spec().num_tasks("worker") == 2
    assert r.master() == "grpc://h2:3"
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        tf.distribute.cluster_resolver.TFConfigClusterResolver()
    monkeypatch.delenv("TF_CONFIG")
    opts = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    s = tf.distribute.experimental.MultiWorkerMirroredStrategy(communication_options=opts)
    assert s.num_replicas_in_sync == 1 and isinstance(s.cluster_resolver, tf.distribute.cluster_resolver.TFConfigClusterResolver)
    assert tf.distribute.DistributedValues is tf.distribute.PerReplica
    tf.distribute.InputOptions(experimental_fetch_to_device=True)
