"""``summary()`` of a fitted kernel regressor: the fit at a glance, as text, a frame or HTML.

The fields are the fitted attributes (``bandwidth_``, ``cv_score_``,
``effective_dof_``, ``residual_variance_``, ``irrelevant_``,
``feature_names_in_``), plus the in-sample ``R^2`` (weighted by the sample
weights, if any); the layout follows statsmodels' ``summary()`` tables (a
model block, then one row per variable, as R np's ``summary(npreg)``).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._errors import NadarayaError

__all__ = ["RegressionSummary", "SummaryMixin"]

_TYPES = {"c": "continuous", "u": "unordered", "o": "ordered"}
_WIDTH = 78


def _num(x: Any) -> str:
    """A number (or a vector of them, one per output) for the table."""
    a = np.atleast_1d(np.asarray(x, dtype=float))
    return ", ".join(f"{v:.6g}" for v in a)


@dataclass
class RegressionSummary:
    """The summary of a fitted kernel regressor.

    ``str(summary)`` is a text table; :meth:`as_frame` gives the per-variable
    table as a pandas DataFrame (the model's fields in its ``attrs``);
    notebooks show :meth:`_repr_html_`.

    Attributes
    ----------
    model : str
        The estimator's class (and degree for local polynomials).
    info : dict
        ``n_samples``, ``n_features``, ``n_outputs``, ``kernel``, ``criterion``,
        ``cv_score``, ``r_squared``, ``effective_dof``, ``residual_std``,
        ``irrelevant`` (feature names).
    features : list of dict
        One per feature: ``name``, ``type`` (``continuous``, ``unordered``,
        ``ordered``), ``kernel``, ``parameter`` (``h`` or ``lambda``),
        ``bandwidth`` and ``smoothed_out``.
    """

    model: str
    info: dict[str, Any] = field(default_factory=dict)
    features: list[dict[str, Any]] = field(default_factory=list)

    def _rows(self) -> list[tuple[str, str]]:
        i = self.info
        irrelevant = ", ".join(map(str, i["irrelevant"])) or "none"
        return [
            ("No. observations", str(i["n_samples"])),
            ("Kernel", str(i["kernel"])),
            ("Bandwidth selection", str(i["criterion"])),
            ("CV score (LOO MSE)", _num(i["cv_score"])),
            ("R-squared (in sample)", _num(i["r_squared"])),
            ("Effective dof (tr S)", _num(i["effective_dof"])),
            ("Residual std. dev.", _num(i["residual_std"])),
            ("Irrelevant regressors", irrelevant),
        ]

    def __str__(self) -> str:
        title = f"{self.model} Results"
        lines = [title.center(_WIDTH), "=" * _WIDTH]
        rows = self._rows()
        half = (len(rows) + 1) // 2
        for left, right in zip(rows[:half], [*rows[half:], ("", "")], strict=False):
            cell = f"{left[0] + ':':<22}{left[1]:>16}"
            other = f"{right[0] + ':':<22}{right[1]:>16}" if right[0] else ""
            lines.append(f"{cell}  {other}".rstrip())
        lines.append("=" * _WIDTH)
        head = f"{'feature':<18}{'type':<12}{'kernel':<18}{'bandwidth':>14}  status"
        lines += [head, "-" * _WIDTH]
        for f in self.features:
            value = f"{f['parameter']}={f['bandwidth']:.6g}" if f["bandwidth"] is not None \
                else "in kernel"
            status = "smoothed out" if f["smoothed_out"] else ""
            lines.append(f"{str(f['name'])[:17]:<18}{f['type']:<12}{f['kernel'][:17]:<18}"
                         f"{value:>14}  {status}".rstrip())
        lines.append("=" * _WIDTH)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def as_frame(self) -> Any:
        """The per-variable table as a pandas DataFrame, indexed by feature name.

        Columns ``type``, ``kernel``, ``parameter``, ``bandwidth``,
        ``smoothed_out``; the model's fields (:attr:`info`) are in ``.attrs``.
        """
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - pandas comes with the estimators' peers
            raise NadarayaError("as_frame needs pandas; install it with "
                                "'pip install pandas'.") from None
        frame = pd.DataFrame(self.features).set_index("name")
        frame.attrs.update(self.info, model=self.model)
        return frame

    def _repr_html_(self) -> str:
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                        f"<td>{html.escape(v)}</td></tr>" for k, v in self._rows())
        return (f"<h4>{html.escape(self.model)} Results</h4><table>{cells}</table>"
                + self.as_frame().to_html())


class SummaryMixin:
    """Adds :meth:`summary` to a fitted kernel regressor."""

    def summary(self) -> RegressionSummary:
        """The fit at a glance: sample size, kernel, bandwidths, criterion, fit statistics.

        Returns
        -------
        RegressionSummary
            ``str()`` of it is a text table (as statsmodels' ``summary()``),
            ``.as_frame()`` a pandas DataFrame of the variables, and notebooks
            show it as HTML.

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya.estimators import NadarayaWatsonRegressor
        >>> x = np.linspace(0, 1, 30)[:, None]; y = np.sin(6 * x[:, 0])
        >>> s = NadarayaWatsonRegressor(bandwidth=0.1).fit(x, y).summary()
        >>> s.features[0]["bandwidth"], s.info["n_samples"]
        (0.1, 30)
        """
        check_is_fitted(self)
        d = self.n_features_in_
        names = getattr(self, "feature_names_in_", None)
        names = [f"x{j}" for j in range(d)] if names is None else [str(v) for v in names]
        types = self._types or "c" * d
        kernel = self.kernel if isinstance(self.kernel, str) else repr(self.kernel)
        h = None if self.bandwidth_ is None else np.broadcast_to(self.bandwidth_, (d,))
        out = {str(v) for v in self.irrelevant_}
        features = []
        for j in range(d):
            kind = _TYPES[types[j]]
            kern = kernel if types[j] == "c" else (
                self.ukernel if types[j] == "u" else self.okernel)
            features.append({
                "name": names[j], "type": kind, "kernel": kern,
                "parameter": "h" if types[j] == "c" else "lambda",
                "bandwidth": None if h is None else float(h[j]),
                "smoothed_out": names[j] in out,
            })
        results = getattr(self, "cv_results_", None)
        if results is not None:
            criterion = str(results["criterion"])
        elif isinstance(self.bandwidth, str):
            criterion = self.bandwidth
        else:
            criterion = "fixed"
        info = {
            "n_samples": int(self.X_fit_.shape[0]),
            "n_features": d,
            "n_outputs": int(getattr(self, "_n_outputs", 1)),
            "kernel": kernel,
            "criterion": criterion,
            "cv_score": self.cv_score_,
            "r_squared": self._r_squared(),
            "effective_dof": self.effective_dof_,
            "residual_std": np.sqrt(self.residual_variance_),
            "irrelevant": [str(v) for v in self.irrelevant_],
        }
        model = type(self).__name__
        degree = getattr(self, "degree", None)
        if degree is not None:
            model += f" (degree {degree})"
        return RegressionSummary(model, info, features)

    def _r_squared(self) -> Any:
        """In-sample ``1 - RSS / TSS`` per output (weighted), a float for one output."""
        if getattr(self, "_y_train", None) is None or self._loo_fit.fitted is None:
            return np.nan  # fitted on Dask data: the training rows are not in memory
        Y = self._y_train
        fitted = self._loo_fit.fitted
        w = np.ones(Y.shape[0]) if self._omega is None else self._omega
        mean = w @ Y / w.sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            r2 = 1.0 - (w @ (Y - fitted) ** 2) / (w @ (Y - mean) ** 2)
        return float(r2[0]) if self._y_1d else r2
