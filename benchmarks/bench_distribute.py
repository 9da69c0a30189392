#!/usr/bin/env python
"""Step time under ``tf.distribute.MirroredStrategy`` on 1, 2, 4 and 8 devices, tapejax and TF.

    python benchmarks/bench_distribute.py [--devices 1 2 4 8] [--repeats 3]

Two workloads from ``tests/_distribute_programs.py`` (the programs the distribute tests check):

- ``loop``: TF's custom-training-loop guide step (``strategy.run`` of a tape step under
  ``tf.function``, a 5-8-3 model, global batch 16, Adam, an accuracy metric);
- ``fit``: Keras ``model.fit`` of a 5-8-3 ``Sequential`` created under ``strategy.scope()``
  (global batch 16, Adam, accuracy), time per step over two epochs after a warm-up epoch.

Each (workload, devices, library) runs in a fresh process with
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (tapejax) or N logical CPUs (TF);
the median of ``--repeats`` processes is printed. On a CPU machine the N "devices" share the
same cores: the numbers are the SPMD program's per-replica and collective overhead, not a
speed-up. Run on a multi-GPU host to measure scaling.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "_distribute_programs.py")


def one_run(mode: str, devices: int) -> float:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), DIST_TIMING="1",
               TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    if "tf-" in mode:
        env.pop("KERAS_BACKEND", None)
    else:
        env["KERAS_BACKEND"] = "jax"
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "o.npz")
        r = subprocess.run([sys.executable, PROGRAMS, mode, out], env=env, capture_output=True, text=True, timeout=900)
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        return float(np.load(out)["step_s"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-tf", action="store_true", help="tapejax only")
    a = p.parse_args()
    libs = ["tapejax"] + ([] if a.no_tf else ["tf"])
    print("| workload | devices | " + " | ".join(f"{lib} ms/step" for lib in libs) + " |")
    print("|---|---|" + "---|" * len(libs))
    for work in ("loop", "fit"):
        for n in a.devices:
            cells = []
            for lib in libs:
                mode = f"{lib}-{n}" if work == "loop" else f"fit-{lib}-{n}"
                try:
                    cells.append(f"{1e3 * statistics.median(one_run(mode, n) for _ in range(a.repeats)):.2f}")
                except Exception as e:  # a library missing or failing: say so in the table
                    cells.append(f"failed ({str(e).strip().splitlines()[-1][:60] if str(e).strip() else type(e).__name__})")
            print(f"| {work} | {n} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
