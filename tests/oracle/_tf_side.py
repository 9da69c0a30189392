"""Run oracle functions under real TensorFlow's ``tf.keras`` in a subprocess.

One process holds one Keras backend: tapejax's ``tf.keras`` is Keras 3 on JAX,
TensorFlow's is Keras 3 on TensorFlow. So the TF side of a Keras oracle test
runs in a fresh interpreter (``KERAS_BACKEND`` unset, TF's Keras imported
first), which imports the *test module itself* and calls its module-level job
functions ``fn(tf, *args)`` with ``tf`` the real TensorFlow. All of a module's
jobs go in one subprocess (TF's import costs seconds). Results come back
pickled (NumPy arrays and Python values; TF tensors are converted); a job that
raises comes back as ``TFError(class name, message)``.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from typing import Any, NamedTuple


class TFError(NamedTuple):
    cls: str
    message: str


_SCRIPT = r"""
import importlib.util, os, pickle, sys, traceback
import numpy as np
import tensorflow as tf
tf.keras.layers  # TF's Keras (the TensorFlow backend) before anything else imports keras

def plain(x):
    if isinstance(x, (list, tuple)):
        return type(x)(plain(v) for v in x) if not hasattr(x, "_fields") else tuple(plain(v) for v in x)
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (tf.Tensor, tf.Variable)) or type(x).__name__ == "Variable":
        return np.asarray(x)
    return x

sys.path.insert(0, os.path.dirname(sys.argv[1]))
spec = importlib.util.spec_from_file_location("_oracle_tf_side", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
jobs = pickle.load(open(sys.argv[2], "rb"))
out = {}
for key, name, args in jobs:
    try:
        out[key] = ("ok", plain(getattr(mod, name)(tf, *args)))
    except Exception as e:
        out[key] = ("error", type(e).__name__, str(e) + "\n" + traceback.format_exc())
pickle.dump(out, open(sys.argv[3], "wb"))
"""


def run_tf_jobs(module_file: str, jobs: list[tuple[Any, str, tuple]], timeout: int = 600) -> dict:
    """``{key: result}`` of ``module.name(tf, *args)`` for each ``(key, name, args)``, under real TF."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("the `oracle` extra (tensorflow-cpu) is not installed")
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with tempfile.TemporaryDirectory() as d:
        jobs_path, out_path = os.path.join(d, "jobs.pkl"), os.path.join(d, "out.pkl")
        with open(jobs_path, "wb") as f:
            pickle.dump(jobs, f)
        proc = subprocess.run([sys.executable, "-c", _SCRIPT, os.path.abspath(module_file), jobs_path, out_path],
                              env=env, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"the TensorFlow side failed:\n{proc.stderr[-4000:]}")
        with open(out_path, "rb") as f:
            raw = pickle.load(f)
    out = {}
    for key, r in raw.items():
        out[key] = r[1] if r[0] == "ok" else TFError(r[1], r[2])
    return out


def result(results: dict, key: Any) -> Any:
    """One job's result; a job that raised on the TF side fails the test with TF's traceback."""
    r = results[key]
    if isinstance(r, TFError):
        raise AssertionError(f"TF side raised {r.cls}: {r.message}")
    return r
