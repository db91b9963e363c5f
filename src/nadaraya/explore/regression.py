"""The Regression tab: a Nadaraya-Watson fit whose kernel and bandwidth move live.

The data are a shipped data set or an uploaded CSV (first two numeric columns:
x and y). The fit ``nadaraya.smooth`` on an even grid of x and, for up to
:data:`BAND_LIMIT` points, the 95 % band of
``NadarayaWatsonRegressor.predict_interval`` follow the bandwidth slider; the
leave-one-out curve of the bandwidth search (``cv_results_``) marks the
current bandwidth; a click on the plot puts a query there and draws its
weights ``nadaraya.weights`` as bars under the data.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

import nadaraya
from nadaraya.datasets import load_cps71, load_ethanol, load_faithful, load_mcycle
from nadaraya.estimators import NadarayaWatsonRegressor

from .._errors import NadarayaError
from ._common import figure, message, require_panel

__all__ = ["BAND_LIMIT", "DATASETS", "KERNELS", "RegressionTab", "read_csv"]

#: Shipped data sets: loader and the feature drawn on the x axis.
DATASETS: dict[str, tuple[Any, int]] = {
    "mcycle": (load_mcycle, 0), "cps71": (load_cps71, 0),
    "ethanol": (load_ethanol, 1), "faithful": (load_faithful, 0),
}
#: Kernel names offered by the kernel selector.
KERNELS = ("gaussian", "laplacian", "cauchy", "epanechnikov", "tricube", "uniform")
#: Largest number of points whose 95 % band follows the slider (the band needs
#: the leave-one-out pass of a fit, ``n^2`` kernel evaluations).
BAND_LIMIT = 5000


def read_csv(content: bytes) -> tuple[np.ndarray, np.ndarray, tuple[str, str]]:
    """x, y and their names from a CSV file's bytes: its first two numeric columns.

    Rows with a missing or non-finite value are dropped.

    Parameters
    ----------
    content : bytes
        The file, with a header row.

    Returns
    -------
    x, y : ndarray of shape (n,)
    names : (str, str)

    Examples
    --------
    >>> x, y, names = read_csv(b"t,v\\n0,1\\n1,3\\n2,2\\n")
    >>> names, y.tolist()
    (('t', 'v'), [1.0, 3.0, 2.0])
    """
    import pandas as pd

    try:
        frame = pd.read_csv(io.BytesIO(content))
    except (ValueError, UnicodeDecodeError) as exc:
        raise NadarayaError(f"the uploaded file is not a readable CSV ({message(exc)}); upload "
                            "a comma-separated file with a header row.") from None
    numbers = frame.select_dtypes("number")
    if numbers.shape[1] < 2:
        raise NadarayaError(f"the uploaded CSV needs two numeric columns (x, y); it has "
                            f"{numbers.shape[1]} ({', '.join(map(str, frame.columns))}). Upload "
                            "a file whose first two numeric columns are x and y.")
    xy = numbers.iloc[:, :2].to_numpy(dtype=float)
    keep = np.isfinite(xy).all(axis=1)
    if keep.sum() < 3:
        raise NadarayaError(f"the uploaded CSV has {int(keep.sum())} rows with finite x and y; "
                            "a fit needs at least 3.")
    names = (str(numbers.columns[0]), str(numbers.columns[1]))
    return xy[keep, 0], xy[keep, 1], names


class RegressionTab:
    """Widgets, plots and callbacks of the Regression tab.

    Parameters
    ----------
    dataset : str, default "mcycle"
        A key of :data:`DATASETS`.
    n_grid : int, default 200
        Number of x values the fit is drawn at.

    Attributes
    ----------
    x, y : ndarray of shape (n,)
        The data.
    grid : ndarray of shape (n_grid,)
        Where the fit is drawn.
    fit : ndarray of shape (n_grid,)
        ``nadaraya.smooth`` of the data at ``grid`` (NaN where no point weighs).
    engine : str or None
        The engine of the fit, chosen by ``nadaraya.explain`` when the data or
        the kernel change and kept while the bandwidth moves.
    query : float or None
        The clicked x; ``query_weights`` its weights over the data, shape (n,).
    sources : dict of str to ColumnDataSource
        ``data``, ``fit``, ``cv`` and ``weights`` (named ``regression-<key>`` in
        the document).

    Examples
    --------
    >>> tab = RegressionTab("mcycle")                        # doctest: +SKIP
    >>> tab.set_bandwidth(2.0); tab.select_query(20.0)       # doctest: +SKIP
    """

    def __init__(self, dataset: str = "mcycle", n_grid: int = 200) -> None:
        pn = require_panel()
        from bokeh.events import Tap
        from bokeh.models import ColumnDataSource, Span

        self.n_grid = n_grid
        self.query: float | None = None
        self.engine: str | None = None
        self._moving = False
        self.query_weights = np.zeros(0)
        columns = {"data": ("x", "y"), "fit": ("x", "fit", "lower", "upper"),
                   "cv": ("bandwidth", "score"), "weights": ("x", "w", "width")}
        self.sources = {key: ColumnDataSource({c: [] for c in names}, name=f"regression-{key}")
                        for key, names in columns.items()}
        self.dataset = pn.widgets.Select(name="Data set", options=[*DATASETS], value=dataset)
        self.upload = pn.widgets.FileInput(accept=".csv", name="CSV")
        self.kernel = pn.widgets.Select(name="Kernel", options=list(KERNELS), value="gaussian")
        self.bandwidth = pn.widgets.FloatSlider(name="Bandwidth h", start=0.1, end=1.0,
                                                value=0.5, step=0.01, format="0[.]000")
        self.status = pn.pane.Markdown("", name="regression-status")

        self.plot = figure("Data, fit and 95 % band (click: a query's weights)",
                           css_classes=["regression-plot"])
        self.plot.varea("x", "lower", "upper", source=self.sources["fit"], fill_alpha=0.25,
                        fill_color="#6baed6")
        self.plot.scatter("x", "y", source=self.sources["data"], size=4, color="#444444",
                          nonselection_alpha=1.0)
        self.plot.line("x", "fit", source=self.sources["fit"], line_width=2.5, color="#d62728")
        self.query_mark = Span(location=0.0, dimension="height", line_dash="dashed",
                               line_color="#2ca02c", visible=False, name="regression-query")
        self.plot.add_layout(self.query_mark)
        self.weights_plot = figure("Weights of the query", height=170, x_range=self.plot.x_range)
        self.weights_plot.vbar("x", top="w", width="width", source=self.sources["weights"],
                               color="#2ca02c", nonselection_alpha=1.0)
        self.cv_plot = figure("Leave-one-out error of the bandwidth search", height=260,
                              x_axis_type="log", x_axis_label="bandwidth h",
                              y_axis_label="CV mean squared error")
        self.cv_plot.line("bandwidth", "score", source=self.sources["cv"])
        self.cv_plot.scatter("bandwidth", "score", source=self.sources["cv"], size=6,
                             nonselection_alpha=1.0)
        self.cv_mark = Span(location=1.0, dimension="height", line_color="#d62728",
                            line_width=2, name="regression-cv-mark")
        self.cv_plot.add_layout(self.cv_mark)
        for fig in (self.plot, self.weights_plot):
            fig.on_event(Tap, lambda event: self.select_query(event.x))

        self.dataset.param.watch(lambda e: self.load_dataset(e.new), "value")
        self.upload.param.watch(lambda e: self.load_csv(e.new), "value")
        self.kernel.param.watch(lambda e: self.set_kernel(e.new), "value")
        self.bandwidth.param.watch(self._slider_moved, "value")
        self.panel = pn.Row(
            pn.Column(self.dataset, self.upload, self.kernel, self.bandwidth, self.status,
                      width=300),
            pn.Column(self.plot, self.weights_plot, self.cv_plot, sizing_mode="stretch_width"),
            name="Regression", sizing_mode="stretch_width")
        self.load_dataset(dataset)

    # data -----------------------------------------------------------------
    def load_dataset(self, name: str) -> None:
        """Show the shipped data set ``name`` (a key of :data:`DATASETS`)."""
        if name not in DATASETS:
            raise NadarayaError(f"dataset must be one of {', '.join(DATASETS)}; got {name!r}.")
        loader, column = DATASETS[name]
        bunch = loader()
        self.set_data(bunch.data[:, column], bunch.target,
                      (bunch.feature_names[column], bunch.target_names[0]))

    def load_csv(self, content: bytes | None) -> None:
        """Show an uploaded CSV (see :func:`read_csv`); a bad file is reported in the status."""
        if not content:
            return
        try:
            x, y, names = read_csv(content)
        except NadarayaError as exc:
            self.status.object = f"**Upload refused:** {message(exc)}"
            return
        self.set_data(x, y, names)

    def set_data(self, x: Any, y: Any, names: tuple[str, str] = ("x", "y"),
                 bandwidth: float | None = None) -> None:
        """Show data ``x``, ``y`` of shape (n,) and draw the fit.

        The bandwidth is searched (and the CV curve drawn) unless ``bandwidth``
        is given.
        """
        x = np.asarray(x, dtype=float).ravel()
        y = np.asarray(y, dtype=float).ravel()
        if x.shape != y.shape or x.size < 3 or not np.isfinite(x).all() or \
                not np.isfinite(y).all() or np.ptp(x) == 0:
            raise NadarayaError(f"x and y must be finite, of the same length >= 3, with x not "
                                f"constant; got shapes {x.shape} and {y.shape}.")
        self.x, self.y, self.names = x, y, names
        self.engine = None
        self.span = float(np.ptp(x))
        self.grid = np.linspace(x.min(), x.max(), self.n_grid)
        self.sources["data"].data = {"x": x, "y": y}
        self.plot.xaxis.axis_label, self.plot.yaxis.axis_label = names
        self.clear_query()
        if bandwidth is None:
            self.search_bandwidth()
            return
        self.sources["cv"].data = {"bandwidth": [], "score": []}
        self._moving = True
        try:
            self.bandwidth.param.update(start=min(self.span / 200, bandwidth),
                                        end=max(self.span / 2, bandwidth),
                                        step=self.span / 2000, value=bandwidth)
        finally:
            self._moving = False
        self.set_bandwidth(bandwidth)

    # kernel and bandwidth ---------------------------------------------------
    def set_kernel(self, name: str) -> None:
        """Use kernel ``name`` (a key of :data:`KERNELS`): search its bandwidth again."""
        if name not in KERNELS:
            raise NadarayaError(f"kernel must be one of {', '.join(KERNELS)}; got {name!r}.")
        if self.kernel.value != name:
            self.kernel.value = name  # the watcher comes back here
            return
        self.search_bandwidth()

    def search_bandwidth(self) -> None:
        """Fit the leave-one-out bandwidth; draw the CV curve; put the slider there."""
        self.engine = None
        model = NadarayaWatsonRegressor(self.kernel.value, bandwidth="cv", empty="nan")
        model.fit(self.x[:, None], self.y)
        results = model.cv_results_ or {"bandwidth": [], "score": []}
        h = np.asarray(results["bandwidth"], dtype=float).ravel()
        score = np.asarray(results["score"], dtype=float).ravel()
        order = np.argsort(h)
        finite = np.isfinite(score[order])
        self.sources["cv"].data = {"bandwidth": h[order][finite], "score": score[order][finite]}
        best = float(np.ravel(model.bandwidth_)[0])
        start, end = self.span / 200, self.span / 2
        self._moving = True
        try:
            self.bandwidth.param.update(start=min(start, best), end=max(end, best),
                                        step=(end - start) / 1000, value=best)
        finally:
            self._moving = False
        self.set_bandwidth(best)

    def set_bandwidth(self, h: float) -> None:
        """Draw the fit (and band) at bandwidth ``h``; move the CV mark; redo the query."""
        h = float(h)
        if not (np.isfinite(h) and h > 0):
            raise NadarayaError(f"bandwidth must be a finite number > 0; got {h!r}.")
        self.h = h
        if self.bandwidth.value != h:
            self._moving = True
            try:
                self.bandwidth.value = h
            finally:
                self._moving = False
        if self.engine is None:  # chosen once per data and kernel: a slider move only sums
            self.engine = nadaraya.explain(self.grid[:, None], self.x[:, None], self.y,
                                           self.kernel.value, bandwidth=h).engine
        self.fit = np.asarray(nadaraya.smooth(self.grid[:, None], self.x[:, None], self.y,
                                              self.kernel.value, bandwidth=h, empty="nan",
                                              engine=self.engine))
        lower = upper = np.full_like(self.fit, np.nan)
        note = ""
        if self.x.size <= BAND_LIMIT:
            try:
                model = NadarayaWatsonRegressor(self.kernel.value, bandwidth=h, empty="nan")
                lower, upper = model.fit(self.x[:, None], self.y).predict_interval(
                    self.grid[:, None])
            except NadarayaError as exc:
                note = f" No band: {message(exc)}"
        else:
            note = f" The band is drawn for up to {BAND_LIMIT} points."
        self.sources["fit"].data = {"x": self.grid, "fit": self.fit,
                                    "lower": np.asarray(lower), "upper": np.asarray(upper)}
        self.cv_mark.location = h
        self.status.object = (f"n = {self.x.size}, kernel {self.kernel.value}, "
                              f"h = {h:.4g}, engine {self.engine}.{note}")
        if self.query is not None:
            self.select_query(self.query)

    def _slider_moved(self, event: Any) -> None:
        if not self._moving:
            self.set_bandwidth(event.new)

    # a query's weights --------------------------------------------------------
    def select_query(self, x: float | None) -> None:
        """Put a query at ``x``: draw its weights over the data as bars."""
        if x is None or not np.isfinite(x):
            return
        self.query = float(x)
        w = np.asarray(nadaraya.weights(np.array([[self.query]]), self.x[:, None],
                                        self.kernel.value, bandwidth=self.h,
                                        empty="nan"))[0]
        self.query_weights = w
        width = np.full(self.x.size, self.span / max(200, 2 * self.x.size))
        self.query_mark.update(location=self.query, visible=True)
        self.sources["weights"].data = {"x": self.x, "w": np.nan_to_num(w), "width": width}

    def clear_query(self) -> None:
        """Remove the query and its bars."""
        self.query = None
        self.query_weights = np.zeros(0)
        self.sources["weights"].data = {"x": [], "w": [], "width": []}
        self.query_mark.visible = False
