"""Copying and saving a Keras model: tapejax against TF's tf.keras and PyTorch, first call and steady.

A porter's program copies a model (``copy.deepcopy`` of a target network, ``pickle`` to a worker)
and saves and loads it (``model.save``/``load_model``, ``.keras`` and legacy ``.h5``). Each runs in
a fresh process pinned to one core (``taskset``), after the model's first training step: the first
call of each operation (what a notebook sees) and the median of ``--repeats`` more. The table is
the median over ``--runs`` processes, with each figure's ratio to TF's in the same invocation.
PyTorch does the same with ``copy.deepcopy``, ``pickle`` and ``torch.save``/``torch.load`` of the
module (its ``.keras`` and ``.h5`` rows are its one file format).

    python benchmarks/bench_keras_saving.py
    python benchmarks/bench_keras_saving.py --models mlp --impls tapejax,tf --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.bench_lazy import run_pinned  # noqa: E402  (one way to run a pinned child)

MODELS = ["mlp", "cnn"]
IMPLS = ["tapejax", "tf", "torch"]
OPS = ["deepcopy", "pickle", "save_keras", "load_keras", "save_h5", "load_h5"]

_CHILD = r"""
import copy, json, os, pickle, statistics, sys, tempfile, time, warnings
import numpy as np
warnings.simplefilter("ignore")
model_name, impl, repeats = {args!r}
d = tempfile.mkdtemp(prefix="bench_keras_saving_")
x = np.random.default_rng(0).normal(size=(16, 8, 8, 3) if model_name == "cnn" else (16, 32)).astype(np.float32)
y = np.zeros((16, 1), np.float32)
if impl == "torch":
    import torch
    torch.set_num_threads(1)
    if model_name == "mlp":
        net = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                  torch.nn.Linear(32, 1))
    else:
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 1))
        x = np.transpose(x, (0, 3, 1, 2)).copy()
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    loss = torch.nn.functional.mse_loss(net(torch.from_numpy(x)), torch.from_numpy(y))
    loss.backward(); opt.step()
    path = os.path.join(d, "m.pt")
    ops = {{"deepcopy": lambda: copy.deepcopy(net), "pickle": lambda: pickle.loads(pickle.dumps(net)),
           "save_keras": lambda: torch.save({{"model": net, "opt": opt.state_dict()}}, path),
           "load_keras": lambda: torch.load(path, weights_only=False)}}
    ops["save_h5"], ops["load_h5"] = ops["save_keras"], ops["load_keras"]
else:
    if impl == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf
    else:
        import tapejax as tf
    layers = tf.keras.layers
    if model_name == "mlp":
        model = tf.keras.Sequential([tf.keras.Input((32,)), layers.Dense(32, activation="relu"),
                                     layers.Dense(32, activation="relu"), layers.Dense(1)])
    else:
        model = tf.keras.Sequential([tf.keras.Input((8, 8, 3)), layers.Conv2D(8, 3, activation="relu"),
                                     layers.BatchNormalization(), layers.Flatten(), layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss=tf.keras.losses.MeanSquaredError())
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    pk, ph = os.path.join(d, "m.keras"), os.path.join(d, "m.h5")
    ops = {{"deepcopy": lambda: copy.deepcopy(model), "pickle": lambda: pickle.loads(pickle.dumps(model)),
           "save_keras": lambda: model.save(pk), "load_keras": lambda: tf.keras.models.load_model(pk),
           "save_h5": lambda: model.save(ph), "load_h5": lambda: tf.keras.models.load_model(ph)}}
out = {{}}
for name in {ops!r}:
    t0 = time.perf_counter(); ops[name](); first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter(); ops[name](); times.append(time.perf_counter() - t0)
    out[name] = {{"first_s": first, "median_s": statistics.median(times)}}
print("RESULT " + json.dumps(out))
"""


def run_one(model: str, impl: str, repeats: int) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if impl == "tf":
        env.pop("KERAS_BACKEND", None)
    return run_pinned(_CHILD.format(args=(model, impl, repeats), ops=OPS), env, 900)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None, help="write the medians here")
    a = ap.parse_args(argv)
    table: dict = {}
    for model in a.models.split(","):
        for impl in a.impls.split(","):
            runs = [run_one(model, impl, a.repeats) for _ in range(a.runs)]
            good = [r for r in runs if "error" not in r]
            if not good:
                table[model, impl] = {"error": runs[0].get("error", "?")}
                continue
            table[model, impl] = {op: {k: statistics.median(r[op][k] for r in good) for k in ("first_s", "median_s")}
                                  for op in OPS}
    print("| model | operation | " + " | ".join(f"{i} first / steady (ms)" for i in a.impls.split(",")) + " |")
    print("|---|---|" + "---|" * len(a.impls.split(",")))
    for model in a.models.split(","):
        for op in OPS:
            cells = []
            tf_ref = table.get((model, "tf"), {}).get(op)
            for impl in a.impls.split(","):
                r = table[model, impl]
                if "error" in r:
                    cells.append("error")
                    continue
                f, m = r[op]["first_s"] * 1e3, r[op]["median_s"] * 1e3
                ratio = f" ({m / (tf_ref['median_s'] * 1e3):.2f}× TF)" if tf_ref and impl != "tf" else ""
                cells.append(f"{f:.1f} / {m:.1f}{ratio}")
            print(f"| {model} | {op} | " + " | ".join(cells) + " |")
    for key, r in table.items():
        if "error" in r:
            print(f"{key}: {r['error']}", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{m}/{i}": r for (m, i), r in table.items()}, f, indent=1)
    return table


if __name__ == "__main__":
    main()
