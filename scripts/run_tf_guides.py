"""Run TensorFlow's own guide notebooks cell by cell under real TF and under tapejax.

Measures how many code cells of the guides (autodiff, advanced autodiff, basic training
loops, intro to modules, custom training walkthrough, basics, core optimizers, variable,
function, tensor) behave the same when the notebook's ``import tensorflow as tf`` becomes
``import tapejax as tf``.  Not part of the pytest run (it takes minutes).

Usage (from the repository root)::

    PYTHONPATH=$PWD python scripts/run_tf_guides.py [--dir scripts/tf_guides] \
        [--out /tmp/tf_guides] [--only autodiff] [--tf-runs 2]

Each (notebook, library) pair runs in a fresh subprocess; the cells of one notebook share
one namespace, as in Jupyter.  ``tf`` runs real TensorFlow with its own Keras (no
KERAS_BACKEND); ``tapejax`` runs with KERAS_BACKEND=jax.  A cell matches when both succeed
with the same printed output and last-expression repr (numbers compared with rtol 1e-4,
object addresses, device strings and timings ignored) or both raise the same exception
class.  TF is run twice (``--tf-runs``): a cell whose TF output differs between the two
runs is reported as nondeterministic.  Writes ``summary.json`` and ``table.md`` to --out.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import linecache
import math
import os
import re
import subprocess
import sys
import time
import traceback

CELL_TIMEOUT_S = 60
NB_TIMEOUT_S = 300

# Cells whose code needs the internet (datasets, downloads): this machine has none.
NETWORK_MARKERS = ("tfds.", "import tensorflow_datasets", "get_file(", "urlopen", "urlretrieve")


def load_cells(path):
    with open(path) as f:
        nb = json.load(f)
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def prepare(src, library):
    """Returns (code, skip_reason): shell/magic lines dropped, plt.show() stubbed out."""
    # tensorflow_datasets is not installed (and its data needs the internet): an import cell
    # keeps its other lines (``import tensorflow as tf``) and drops the tfds ones.
    src = "\n".join(ln for ln in src.splitlines()
                    if "import tensorflow_datasets" not in ln and "tfds.__version__" not in ln)
    if any(m in src for m in NETWORK_MARKERS):
        return None, "needs network"
    if "timeit" in src:
        # Its output is wall-clock times (never comparable), and the guide's eager-vs-function
        # conv benchmark takes many minutes on a small shared CPU.
        return None, "timing benchmark"
    lines = []
    for line in src.splitlines():
        s = line.lstrip()
        if s.startswith(("!", "%")):
            continue
        line = line.replace("plt.show()", "None")
        if library == "tapejax":
            line = re.sub(r"^(\s*)import tensorflow as tf\b", r"\1import tapejax as tf", line)
            line = re.sub(r"^(\s*)import tensorflow$", r"\1import tapejax as tensorflow", line)
        lines.append(line)
    code = "\n".join(lines)
    only_comments = not any(ln.strip() and not ln.strip().startswith("#") for ln in lines)
    if src.strip() and only_comments and any(ln.lstrip().startswith(("!", "%")) for ln in src.splitlines()):
        return None, "shell/magic"
    return code, None


class _CellTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _CellTimeout()


def child(nb_path, library):
    """Runs every cell of one notebook; prints one JSON list of per-cell records."""
    import signal

    import matplotlib

    matplotlib.use("Agg")
    signal.signal(signal.SIGALRM, _alarm)
    ns = {"__name__": "__main__"}
    results = []
    real_stdout = sys.stdout
    for i, src in enumerate(load_cells(nb_path)):
        code, skip = prepare(src, library)
        rec = {"index": i}
        if skip:
            rec.update(status="skipped", reason=skip)
            results.append(rec)
            continue
        buf = io.StringIO()
        t0 = time.time()
        sys.__stderr__.write(f"@@cell {i}\n")
        sys.__stderr__.flush()
        try:
            # Jupyter registers each cell's source in linecache: autograph (TF's and tapejax's)
            # reads function source through inspect, and without it TF silently skips conversion.
            fname = f"<ipython-cell-{library}-{i}>"
            linecache.cache[fname] = (len(code), None, [ln + "\n" for ln in code.splitlines()], fname)
            tree = ast.parse(code)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            signal.alarm(CELL_TIMEOUT_S)
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
                exec(compile(tree, fname, "exec"), ns)  # noqa: S102 - running the notebook is the point
                value = None
                if last is not None:
                    value = eval(compile(last, fname, "eval"), ns)
            signal.alarm(0)
            rec.update(status="ok", value=None if value is None else _safe_repr(value))
        except _CellTimeout:
            rec.update(status="error", exc="Timeout", msg=f"cell ran over {CELL_TIMEOUT_S} s")
        except BaseException as e:  # noqa: BLE001 - the notebook's own errors are data
            signal.alarm(0)
            tb = traceback.extract_tb(e.__traceback__)
            where = ""
            for fr in reversed(tb):
                if "/tapejax/" in fr.filename or "/tensorflow/" in fr.filename or "/keras/" in fr.filename:
                    where = f"{fr.filename.split('site-packages/')[-1]}:{fr.lineno}"
                    break
            msg = str(e).strip().splitlines()
            rec.update(status="error", exc=type(e).__name__, msg=msg[0][:300] if msg else "", where=where)
        rec["stdout"] = buf.getvalue()[:20000]
        rec["seconds"] = round(time.time() - t0, 2)
        results.append(rec)
    real_stdout.write("\n@@RESULTS@@" + json.dumps(results) + "\n")
    real_stdout.flush()


def _safe_repr(v):
    try:
        return repr(v)[:20000]
    except Exception as e:  # noqa: BLE001
        return f"<repr failed: {type(e).__name__}>"


def run_child(nb_path, library):
    env = dict(os.environ)
    env["MPLBACKEND"] = "Agg"
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env.pop("KERAS_BACKEND", None)
    if library == "tapejax":
        env["KERAS_BACKEND"] = "jax"
    workdir = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tfguide_{library}_{os.getpid()}")
    os.makedirs(workdir, exist_ok=True)
    t0 = time.time()
    try:
        p = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", os.path.abspath(nb_path), library],
            capture_output=True, text=True, check=False, timeout=NB_TIMEOUT_S, env=env, cwd=workdir,
        )
        out = p.stdout
        with open(os.path.join(workdir, "stderr.txt"), "w") as f:
            f.write(p.stderr)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    dt = time.time() - t0
    if "@@RESULTS@@" not in out:
        return None, dt
    return json.loads(out.split("@@RESULTS@@")[-1]), dt


_ADDR = re.compile(r"0x[0-9a-fA-F]+")
_DEVICE = re.compile(r"/job:[\w/:]+")
_TIME = re.compile(r"[\d.]+\s*(ms|s|sec|seconds|µs|us)\b")
_NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|\bnan\b|\binf\b", re.IGNORECASE)


def normalize(text):
    text = _ADDR.sub("0x?", text)
    # TF's eager error prefix names its kernel and device ({{function_node __wrapped__Reshape_device_...}}).
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
    text = _DEVICE.sub("<device>", text)
    text = re.sub(r"Time taken: .*", "Time taken: ?", text)
    text = re.sub(r"(?i)(time|elapsed|took)[^\n]*?" + _TIME.pattern, r"\1 ?", text)
    return text


def same_text(a, b, rtol=1e-4, atol=1e-6):
    a, b = normalize(a or ""), normalize(b or "")
    na, nb_ = _NUM.findall(a), _NUM.findall(b)
    sa = re.sub(r"\s+", " ", _NUM.sub("#", a)).strip()
    sb = re.sub(r"\s+", " ", _NUM.sub("#", b)).strip()
    # numpy drops the space after '[' and pads differently: compare without spaces
    if sa.replace(" ", "") != sb.replace(" ", "") or len(na) != len(nb_):
        return False
    for x, y in zip(na, nb_):
        fx, fy = float(x), float(y)
        if math.isnan(fx) and math.isnan(fy):
            continue
        if abs(fx - fy) > atol + rtol * abs(fy):
            return False
    return True


def first_code_line(src):
    for ln in src.splitlines():
        s = ln.strip()
        if s and not s.startswith("#"):
            return s[:90]
    return src.strip().splitlines()[0][:90] if src.strip() else ""


def out_of(rec):
    return (rec.get("stdout") or "") + "\n" + (rec.get("value") or "")


def classify(nb_cells, tf_runs, tj):
    rows = []
    net_skipped = False
    for i, src in enumerate(nb_cells):
        t = tf_runs[0][i] if tf_runs[0] else None
        j = tj[i] if tj else None
        row = {"index": i, "first_line": first_code_line(src)}
        if t is None or j is None:
            row.update(result="tapejax-fails" if t else "tf-fails", exc="crash", msg="subprocess died")
        elif t["status"] == "skipped":
            net_skipped = net_skipped or t["reason"] == "needs network"
            row.update(result="skipped", reason=t["reason"])
        elif (t["status"] == "error" and t["exc"] == "NameError" and net_skipped
              and j["status"] == "error"):
            row.update(result="skipped", reason="needs network (uses a skipped cell's result)")
        elif t["status"] == "error":
            if j["status"] == "error" and j["exc"] == t["exc"]:
                row.update(result="matched", note=f"both raise {t['exc']}")
            else:
                row.update(result="differs", tf=f"{t['exc']}: {t['msg']}",
                           tapejax=(f"{j['exc']}: {j['msg']}" if j["status"] == "error" else "ok"))
        elif j["status"] == "error":
            row.update(result="tapejax-fails", exc=j["exc"], msg=j["msg"], where=j.get("where", ""))
        elif same_text(out_of(t), out_of(j)):
            row.update(result="matched")
        else:
            deterministic = all(r and same_text(out_of(t), out_of(r[i])) for r in tf_runs[1:])
            if not deterministic:
                row.update(result="nondeterministic")
            else:
                row.update(result="differs", tf=out_of(t).strip()[:400], tapejax=out_of(j).strip()[:400])
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--dir", default=os.path.join(here, "tf_guides"))
    ap.add_argument("--out", default="/tmp/tf_guides_out")
    ap.add_argument("--only", default=None)
    ap.add_argument("--tf-runs", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    summary = {}
    prev = os.path.join(args.out, "summary.json")
    if args.only and os.path.exists(prev):
        # --only reruns some notebooks and keeps the others' earlier results
        with open(prev) as f:
            summary = json.load(f)
    names = sorted(f[:-6] for f in os.listdir(args.dir) if f.endswith(".ipynb"))
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    for name in names:
        path = os.path.join(args.dir, name + ".ipynb")
        cells = load_cells(path)
        tf_runs = []
        for _ in range(args.tf_runs):
            r, dt = run_child(path, "tf")
            print(f"{name}: tf run {dt:.0f} s", file=sys.stderr)
            tf_runs.append(r)
        tj, dt = run_child(path, "tapejax")
        print(f"{name}: tapejax run {dt:.0f} s", file=sys.stderr)
        rows = classify(cells, tf_runs, tj)
        counts = {}
        for row in rows:
            counts[row["result"]] = counts.get(row["result"], 0) + 1
        summary[name] = {"cells": len(cells), "counts": counts, "rows": rows,
                         "raw": {"tf": tf_runs[0], "tapejax": tj}}
        print(f"{name}: {counts}", file=sys.stderr)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
    write_table(summary, os.path.join(args.out, "table.md"))


def write_table(summary, path):
    cols = ["matched", "nondeterministic", "differs", "tapejax-fails", "skipped"]
    lines = ["| notebook | cells | " + " | ".join(cols) + " |", "|---" * (len(cols) + 2) + "|"]
    tot = {c: 0 for c in cols}
    ncells = 0
    for name, s in sorted(summary.items()):
        ncells += s["cells"]
        for c in cols:
            tot[c] += s["counts"].get(c, 0)
        lines.append(f"| {name} | {s['cells']} | " + " | ".join(str(s["counts"].get(c, 0)) for c in cols) + " |")
    lines.append(f"| **total** | {ncells} | " + " | ".join(f"**{tot[c]}**" for c in cols) + " |")
    lines.append("")
    for name, s in sorted(summary.items()):
        bad = [r for r in s["rows"] if r["result"] in ("differs", "tapejax-fails", "tf-fails")]
        if not bad:
            continue
        lines.append(f"### {name}")
        lines.append("")
        for r in bad:
            if r["result"] == "tapejax-fails":
                why = f"{r['exc']}: {r['msg']}" + (f" ({r['where']})" if r.get("where") else "")
            else:
                why = f"differs — TF: `{_short(r.get('tf'))}` / tapejax: `{_short(r.get('tapejax'))}`"
            lines.append(f"- cell {r['index']} `{r['first_line']}` — {r['result']}: {_short(why, 300)}")
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def _short(s, n=160):
    s = re.sub(r"\s+", " ", str(s or "")).replace("|", "\\|").replace("`", "'")
    return s if len(s) <= n else s[: n - 1] + "…"


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main()
