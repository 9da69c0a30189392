"""The runnable examples in examples/, run on small synthetic data, with their metrics checked."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"tapejax_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_linear_regression_recovers_w3_b1():
    r = load("linear_regression").main(samples=300, epochs=10, verbose=False)
    assert r["w"] == pytest.approx(3.0, abs=0.02) and r["b"] == pytest.approx(1.0, abs=0.02)
    assert r["w_optimizer"] == pytest.approx(3.0, abs=1e-3) and r["b_optimizer"] == pytest.approx(1.0, abs=1e-3)


def test_linear_regression_history_plot_and_progress(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib is in the test extra")
    png = tmp_path / "weights.png"
    r = load("linear_regression").main(samples=100, epochs=2, verbose=True, plot=str(png))
    out = capsys.readouterr().out
    assert r["plotted"] and png.stat().st_size > 1000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The history is the tutorial's w_list/b_list: one entry per sample, ending at the result.
    assert len(r["history"]) == 100 and r["history"][-1] == (r["w"], r["b"])
    assert r["history"][0][0] > -1.0  # the first step moved w up from its start towards 3
    assert len(re.findall(r"step \d+/100", out)) == 5 and "written to" in out


def test_mlp_classifier_eager_and_compiled(capsys):
    r = load("mlp_classifier").main(epochs=2, samples=512, verbose=True)
    for mode in ("eager", "function"):
        assert r[mode]["accuracy"] >= 0.95, r
        assert r[mode]["steps"] == 2 * (512 // 64)
    # Same seeds, same data: the compiled run reproduces the eager one (dropout masks included).
    assert r["function"]["accuracy"] == pytest.approx(r["eager"]["accuracy"], abs=1e-6)
    assert r["function"]["loss"] == pytest.approx(r["eager"]["loss"], rel=1e-4)
    # The first call creates the optimizer's variables: TF traces such a function twice.
    assert r["function"]["traces"] == 2
    out = capsys.readouterr().out
    assert len(re.findall(r"^Epoch [12]/2 - loss: \d+\.\d{4} - accuracy: \d\.\d{4}$", out, re.M)) == 4
    assert f"ran on {r['device']}" in out and r["device"]


def test_physics_forces_hessian_and_solver_gradient():
    r = load("physics").main(steps=10, verbose=False)
    assert r["force_error"] < 1e-5 and r["net_force"] < 1e-4
    assert r["hessian_error"] < 1e-5 and r["hessian_asymmetry"] < 1e-5 and r["translation_residual"] < 1e-5
    assert r["solver_grad_error"] < 1e-4 and r["dmsd_dsigma"] != 0.0
    assert r["energy_drift"] < 1e-3


def test_gan_step_two_tapes():
    r = load("gan_step").main(steps=400, verbose=False)
    assert r["grad_error"] < 1e-5  # both tapes' gradients against jax.grad of the same losses
    assert r["traces"] == 1
    # The generator starts near 0 and learns the real mean (4); GAN training oscillates around it.
    assert abs(r["fake_mean"] - 4.0) < 1.5, r
    assert 1.0 < r["disc_loss"] < 1.8, r  # near 2 ln 2: the discriminator is being fooled half the time


def test_input_pipeline_feeds_a_compiled_step():
    r = load("input_pipeline").main(samples=512, epochs=20, verbose=False)
    assert r["accuracy"] >= 0.95, r
    assert r["steps"] == 20 * (512 // 64) and r["traces"] == 1


def test_conv_classifier_fit(capsys):
    r = load("conv_classifier").main(epochs=2, samples=384, verbose=True)
    assert r["val_accuracy"] >= 0.9, r
    assert len(r["history"]["loss"]) == 2 and r["history"]["loss"][1] < r["history"]["loss"][0]
    assert sorted(r["history"]) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    out = capsys.readouterr().out
    assert "Epoch 2/2" in out and "val_accuracy" in out  # Keras's own progress output
