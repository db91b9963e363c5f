"""The figures: what they draw is what the estimators compute (and what peers compute)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.neighbors import KNeighborsRegressor

from nadaraya import NadarayaError
from nadaraya.estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor
from nadaraya.plot import (
    plot_cv_curve,
    plot_fit,
    plot_knn_vs_kernel,
    plot_weights,
    save_figure,
    smoothing_demo,
)

pytest.importorskip("matplotlib")


def _data(rng: np.random.Generator, n: int = 50) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0, 6, (n, 1))
    return X, 2 * np.sin(X[:, 0]) + 0.5 * rng.normal(size=n)


def test_importing_the_plot_module_does_not_import_matplotlib() -> None:
    code = "import sys, nadaraya.plot; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_knn_vs_kernel_matches_the_seed_computation() -> None:
    ax = plot_knn_vs_kernel()
    # the seed's own code: scikit-learn's kNN and a normalized rbf_kernel(gamma=5)
    legacy = np.random.RandomState(42)  # np.random.seed(42) then np.random.uniform, normal
    x = legacy.uniform(0, 6, 40)
    y = 2 * np.sin(x) + legacy.normal(size=40)
    testx = np.linspace(0, 6, 500)
    knn = KNeighborsRegressor(n_neighbors=10).fit(x[:, None], y).predict(testx[:, None])
    K = rbf_kernel(testx[:, None], x[:, None], gamma=5.0)
    kernel = (K / K.sum(axis=1, keepdims=True)) @ y
    step, smooth = ax.lines[0], ax.lines[1]
    np.testing.assert_allclose(step.get_xdata(), testx)
    np.testing.assert_allclose(step.get_ydata(), knn, rtol=1e-12)
    np.testing.assert_allclose(smooth.get_ydata(), kernel, rtol=1e-10)
    np.testing.assert_allclose(ax.collections[0].get_offsets(), np.c_[x, y])


@pytest.mark.parametrize("kind", ["confidence", "prediction"])
@pytest.mark.parametrize("method", ["hc", "normal", "bootstrap"])
def test_fit_draws_the_prediction_and_its_band(rng: np.random.Generator, method: str,
                                               kind: str) -> None:
    X, y = _data(rng)
    model = LocalPolynomialRegressor(bandwidth=0.6).fit(X, y)
    ax = plot_fit(model, X, y, level=0.8, kind=kind, method=method, grid=50)
    curve = ax.lines[0]
    xs = curve.get_xdata()
    np.testing.assert_allclose(curve.get_ydata(), model.predict(xs[:, None]), rtol=1e-12)
    lo, hi = model.predict_interval(xs[:, None], level=0.8, kind=kind, method=method,
                                    random_state=0)
    band = ax.collections[1].get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(lo.min(), rel=1e-9)
    assert band[:, 1].max() == pytest.approx(hi.max(), rel=1e-9)
    name = "band" if kind == "confidence" else "prediction interval"
    assert f"80% {name} ({method})" in ax.get_legend_handles_labels()[1][1]


def test_fit_draws_the_models_default_band(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    model = LocalPolynomialRegressor(bandwidth=0.6).fit(X, y)
    ax = plot_fit(model, X, y, grid=40)
    lo, hi = model.predict_interval(ax.lines[0].get_xdata()[:, None])
    band = ax.collections[1].get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(lo.min(), rel=1e-9)
    assert band[:, 1].max() == pytest.approx(hi.max(), rel=1e-9)


def test_cv_curve_draws_every_evaluation(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    model = NadarayaWatsonRegressor().fit(X, y)
    ax = plot_cv_curve(model)
    line = ax.lines[0]
    res = model.cv_results_
    order = np.argsort(res["bandwidth"][:, 0])
    np.testing.assert_allclose(line.get_xdata(), res["bandwidth"][order, 0])
    np.testing.assert_allclose(line.get_ydata(), res["score"][order])
    assert ax.lines[1].get_xdata()[0] == pytest.approx(model.bandwidth_)
    assert ax.get_xscale() == "log"


def test_cv_curve_of_several_features(rng: np.random.Generator) -> None:
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=40)
    model = NadarayaWatsonRegressor().fit(X, y)
    ax = plot_cv_curve(model)
    labels = ax.get_legend_handles_labels()[1]
    assert any("feature 0" in label for label in labels)


def test_weights_are_the_smoother_row(rng: np.random.Generator) -> None:
    X, y = _data(rng)
    for model in (NadarayaWatsonRegressor(bandwidth=0.4).fit(X, y),
                  LocalPolynomialRegressor(bandwidth=0.4).fit(X, y)):
        ax = plot_weights(model, 0.3, X, y)
        line = ax._weight_axes[0].lines[-1]
        row = model.smoother_matrix(np.array([[0.3]]))[0]
        order = np.argsort(X[:, 0], kind="stable")
        np.testing.assert_allclose(line.get_xdata(), X[order, 0])
        np.testing.assert_allclose(line.get_ydata(), row[order], rtol=1e-12)
        assert np.sum(line.get_ydata()) == pytest.approx(1.0, rel=1e-9)


def test_figures_refuse_what_they_cannot_draw(rng: np.random.Generator) -> None:
    X = rng.normal(size=(30, 2))
    y = X[:, 0]
    two = NadarayaWatsonRegressor(bandwidth=1.0).fit(X, y)
    with pytest.raises(NadarayaError, match="one feature"):
        plot_fit(two, X, y)
    with pytest.raises(NadarayaError, match="one feature"):
        plot_weights(two, 0.0, X, y)
    with pytest.raises(NadarayaError, match="bandwidth='cv'"):
        plot_cv_curve(two)


@pytest.mark.parametrize("suffix, magic", [("png", b"\x89PNG"), ("svg", b"<?xml"),
                                           ("pdf", b"%PDF")])
def test_save_figure_is_atomic(tmp_path, rng: np.random.Generator, suffix: str,
                               magic: bytes) -> None:
    ax = plot_knn_vs_kernel()
    path = save_figure(ax.figure, tmp_path / f"knn.{suffix}")
    assert path.stat().st_size > 1000 and path.read_bytes().startswith(magic)
    assert [p.name for p in tmp_path.iterdir()] == [f"knn.{suffix}"]


def test_save_figure_failure_keeps_the_old_file(tmp_path, monkeypatch) -> None:
    fig = plot_knn_vs_kernel().figure
    path = tmp_path / "knn.png"
    path.write_bytes(b"old figure")
    real = fig.savefig

    def fails_midway(f, **kw):
        real(f, **kw)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fig, "savefig", fails_midway)
    with pytest.raises(OSError, match="No space left"):
        save_figure(fig, path)
    assert path.read_bytes() == b"old figure"
    assert [p.name for p in tmp_path.iterdir()] == ["knn.png"]


def test_save_figure_refuses_an_unknown_format_and_a_folder(tmp_path) -> None:
    fig = plot_knn_vs_kernel().figure
    with pytest.raises(NadarayaError, match="cannot write a figure as 'xyz'"):
        save_figure(fig, tmp_path / "knn.xyz")
    with pytest.raises(NadarayaError, match="is a folder"):
        save_figure(fig, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_save_figure_to_standard_output(capsysbinary) -> None:
    save_figure(plot_knn_vs_kernel().figure, "-", fmt="svg")
    assert capsysbinary.readouterr().out.startswith(b"<?xml")


@pytest.mark.slow
def test_smoothing_demo_writes_the_figures(tmp_path) -> None:
    report = smoothing_demo(tmp_path / "figs")
    names = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert names == ["knn_vs_kernel.png", "mcycle_cv.png", "mcycle_fit.png",
                     "mcycle_weights.png"]
    for name, model in report.models.items():
        assert name in report.summary
        assert f"{model.bandwidth_:7.3f}" in report.summary
        assert model.cv_results_ is not None
