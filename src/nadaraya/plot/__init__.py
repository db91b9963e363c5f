"""Figures of kernel smoothers (matplotlib, imported only when a figure is drawn).

* :func:`plot_knn_vs_kernel`: k-nearest-neighbour against Gaussian kernel
  regression on 40 noisy points of ``2 sin x`` (both are the same operator,
  with a k-nearest mask or a Gaussian kernel);
* :func:`plot_fit`: a fitted curve with its pointwise band over the data;
* :func:`plot_cv_curve`: the bandwidth criterion with the chosen bandwidth;
* :func:`plot_weights`: the weights of one query, under the data: which
  points a prediction attends to;
* :func:`plot_partial_dependence`: the fit averaged over the data with one
  feature set to each value (or level);
* :func:`plot_gradient`: the derivative of the fit along a feature, with its band;
* :func:`smoothing_demo`: all of them for the motorcycle data, written to a folder.

Each ``plot_*`` function draws into ``ax`` (a new figure when None) and
returns the axes.
"""

from __future__ import annotations

from ._demo import DemoReport, smoothing_demo
from ._effects import plot_gradient, plot_partial_dependence
from ._figures import (
    figure_format,
    plot_cv_curve,
    plot_fit,
    plot_knn_vs_kernel,
    plot_weights,
    save_figure,
)

__all__ = [
    "DemoReport",
    "figure_format",
    "plot_cv_curve",
    "plot_fit",
    "plot_gradient",
    "plot_knn_vs_kernel",
    "plot_partial_dependence",
    "plot_weights",
    "save_figure",
    "smoothing_demo",
]
