"""Formulas for mixed data: ``"y ~ x1 + C(x2) + O(x3)"`` read with formulaic.

A kernel regression needs no design matrix, only its features and their
types, so a formula here names columns: a plain name is the column as it
is (numeric: continuous; a pandas ``category`` column: unordered, or
ordered when the categorical is ordered), ``C(x)`` makes ``x`` an unordered
categorical feature, ``O(x)`` an ordered one (levels in their categorical
order, else sorted), and any other expression (``np.log(x)``,
``I(x ** 2)``) is evaluated by formulaic into one continuous feature named
by its text. Interactions (``x1:x2``, ``x1 * x2``) are refused: the product
kernel lets every feature interact with every other already. The intercept
(``1``, ``0``, ``-1``) has no meaning here and is ignored.

formulaic is imported on first use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._errors import NadarayaError

__all__ = ["FormulaDesign", "FormulaTerm", "from_formula", "parse_formula"]

_WRAPPED = re.compile(r"^\s*([CO])\((.*)\)\s*$", re.S)
_NAME = re.compile(r"^\s*(?:`([^`]+)`|([A-Za-z_][A-Za-z0-9_.]*))\s*$")
_MISSING = ("drop", "raise")


def _formulaic() -> Any:
    try:
        import formulaic
    except ImportError:
        raise NadarayaError("formulas need the package formulaic, which is not installed; "
                            "install it with 'pip install formulaic', or pass X and y "
                            "(a DataFrame with var_types) to fit.") from None
    return formulaic


@dataclass(frozen=True)
class FormulaTerm:
    """One side's term: a feature (or the target) and how to read it.

    Attributes
    ----------
    name : str
        The feature's name: the column for ``x``, ``C(x)``, ``O(x)``; the
        expression's text otherwise.
    kind : str
        ``'u'`` for ``C(x)``, ``'o'`` for ``O(x)``, ``'c'`` for an
        expression, ``''`` for a plain column (its dtype decides).
    column : str or None
        The column read, for a plain name, ``C(x)`` and ``O(x)``.
    """

    name: str
    kind: str
    column: str | None


@dataclass
class FormulaDesign:
    """A parsed formula: the target, the features, and what was dropped at fit.

    Attributes
    ----------
    formula : str
    target : FormulaTerm
    terms : list of FormulaTerm
        The features, in the formula's order.
    dropped : int
        Rows left out for missing values by :meth:`frames` (0 before).
    missing_by_column : dict of str to int
        How many of the rows were missing in each term (features and target).
    """

    formula: str
    target: FormulaTerm
    terms: list[FormulaTerm]
    dropped: int = 0
    missing_by_column: dict[str, int] = field(default_factory=dict)

    @property
    def feature_names(self) -> list[str]:
        """The features' names, in order."""
        return [t.name for t in self.terms]

    @property
    def columns(self) -> list[str]:
        """The data columns the formula reads (expressions' variables included)."""
        return list(dict.fromkeys([*self.target_columns, *self.feature_columns]))

    @property
    def target_columns(self) -> list[str]:
        """The data columns the target reads."""
        return _reads([self.target])

    @property
    def feature_columns(self) -> list[str]:
        """The data columns the features read."""
        return _reads(self.terms)

    def features(self, data: Any) -> Any:
        """The features of ``data``, a DataFrame of shape (n_rows, n_features).

        For the queries of ``predict``: missing values are kept (the
        estimator refuses them, by column).
        """
        import pandas as pd

        _check_frame(data)
        return pd.DataFrame({t.name: _column(t, data) for t in self.terms}, index=data.index)

    def frames(self, data: Any, *, missing: str = "drop") -> tuple[Any, Any]:
        """Features and target of ``data`` with the formula's types.

        Parameters
        ----------
        data : pandas DataFrame of shape (n_rows, n_columns)
        missing : {"drop", "raise"}, default "drop"
            Leave out rows with a missing value in a used column (counted in
            :attr:`dropped` and :attr:`missing_by_column`), or raise.

        Returns
        -------
        X : pandas DataFrame of shape (n_kept, n_features)
            Numeric columns are continuous, ``category`` columns unordered,
            ordered categoricals ordered.
        y : pandas Series of shape (n_kept,)
        """
        if missing not in _MISSING:
            raise NadarayaError(f"missing must be 'drop' or 'raise'; got {missing!r}.")
        X = self.features(data)
        target = self.target
        y = (_lookup(target, data) if target.column is not None
             else _column(target, data)).rename(target.name)
        na = np.column_stack([X.isna().to_numpy(), y.isna().to_numpy()[:, None]])
        rows = na.any(axis=1)
        names = [*self.feature_names, self.target.name]
        self.missing_by_column = {n: int(c) for n, c in zip(names, na.sum(axis=0), strict=True)
                                  if c}
        self.dropped = int(rows.sum())
        if self.dropped and missing == "raise":
            raise NadarayaError(
                f"{self.dropped} row(s) of the data have missing values in the formula's "
                f"columns ({_counts(self.missing_by_column)}); pass missing='drop' to leave "
                "them out, or fill them."
            )
        if self.dropped == len(rows):
            raise NadarayaError(
                f"every row of the data has a missing value in the formula's columns "
                f"({_counts(self.missing_by_column)}); nothing is left to fit."
            )
        return X.loc[~rows], y.loc[~rows]


def _reads(terms: list[FormulaTerm]) -> list[str]:
    out: list[str] = []
    for term in terms:
        if term.column is not None:
            out.append(term.column)
        else:
            out.extend(sorted(str(v) for v in _formulaic().Formula(
                "0 + " + term.name).required_variables))
    return list(dict.fromkeys(out))


def _counts(by_column: dict[str, int]) -> str:
    return ", ".join(f"{name}: {count}" for name, count in by_column.items())


def _check_frame(data: Any) -> None:
    if not (hasattr(data, "columns") and hasattr(data, "loc") and getattr(data, "ndim", 0) == 2):
        raise NadarayaError(f"data must be a pandas DataFrame whose columns the formula "
                            f"names; got {type(data).__name__}. Wrap it: pd.DataFrame(...).")


def _lookup(term: FormulaTerm, data: Any) -> Any:
    if term.column not in data.columns:
        shown = ", ".join(map(str, list(data.columns)[:20]))
        raise NadarayaError(f"the formula names column {term.column!r}, which is not in the "
                            f"data; its columns are: {shown}.")
    return data[term.column]


def _column(term: FormulaTerm, data: Any) -> Any:
    """The values of ``term`` in ``data`` as a Series with its type's dtype."""
    import pandas as pd

    if term.column is None:
        try:
            out = _formulaic().model_matrix("0 + " + term.name, data, na_action="ignore",
                                            ensure_full_rank=False)
        except Exception as exc:  # formulaic's evaluation errors: an unknown name, a bad call
            raise NadarayaError(f"the formula term {term.name!r} cannot be evaluated on the "
                                f"data ({exc}).") from None
        if out.shape[1] != 1:
            raise NadarayaError(f"the formula term {term.name!r} gives {out.shape[1]} columns; "
                                "a term is one feature. Write C(...) for a categorical one.")
        return pd.Series(np.asarray(out, dtype=np.float64)[:, 0], index=data.index,
                         name=term.name)
    col = _lookup(term, data)
    if term.kind == "u":
        return (col.cat.as_unordered() if isinstance(col.dtype, pd.CategoricalDtype)
                else col.astype("category"))
    if term.kind == "o":
        return (col.cat.as_ordered() if isinstance(col.dtype, pd.CategoricalDtype)
                else pd.Series(pd.Categorical(col, ordered=True), index=col.index,
                               name=col.name))
    if term.kind == "" and not (isinstance(col.dtype, pd.CategoricalDtype)
                                or col.dtype.kind in "biuf"):
        raise NadarayaError(f"the formula term {term.name!r} is column {term.column!r} of "
                            f"dtype {col.dtype}, neither numeric nor categorical; write "
                            f"C({term.name}) for unordered levels or O({term.name}) for "
                            "ordered ones.")
    return col


def _term(factor: Any, side: str) -> FormulaTerm:
    text = str(factor.expr)
    if factor.eval_method.value == "lookup":
        return FormulaTerm(text, "", text)
    wrapped = _WRAPPED.match(text)
    if wrapped:
        name = _NAME.match(wrapped.group(2))
        if name is None:
            raise NadarayaError(
                f"the formula term {text!r}: {wrapped.group(1)}() takes one column name "
                f"(e.g. {wrapped.group(1)}(sex)); give the column's levels (and their order) "
                "by its pandas categorical dtype instead of arguments."
            )
        column = name.group(1) or name.group(2)
        if side == "lhs":
            raise NadarayaError(f"the target {text!r} cannot be C() or O(); write the column "
                                "name (a classifier takes labels as they are).")
        return FormulaTerm(column, "u" if wrapped.group(1) == "C" else "o", column)
    return FormulaTerm(text.strip(), "c", None)


def parse_formula(formula: str) -> FormulaDesign:
    """Parse ``"target ~ term + term + ..."`` into its target and features.

    Parameters
    ----------
    formula : str
        Terms are column names, ``C(col)`` (unordered), ``O(col)`` (ordered)
        or expressions formulaic evaluates (one continuous feature each).

    Returns
    -------
    FormulaDesign

    Raises
    ------
    NadarayaError
        Not a string, a syntax error, no target, several parts (``|``),
        an interaction, or no feature.

    Examples
    --------
    >>> from nadaraya.estimators import parse_formula
    >>> parse_formula("lwage ~ C(female) + educ + O(numdep)").feature_names
    ['female', 'educ', 'numdep']
    """
    if not isinstance(formula, str):
        raise NadarayaError(f"formula must be a string such as 'y ~ x1 + C(x2) + O(x3)'; got "
                            f"{type(formula).__name__}.")
    formulaic = _formulaic()
    try:
        parsed = formulaic.Formula(formula)
    except Exception as exc:  # formulaic's parsing errors
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NadarayaError(f"formula {formula!r} cannot be parsed ({first}); write e.g. "
                            "'y ~ x1 + C(x2) + O(x3)'.") from None
    lhs, rhs = getattr(parsed, "lhs", None), getattr(parsed, "rhs", None)
    if lhs is None or rhs is None or not hasattr(lhs, "__iter__"):
        raise NadarayaError(f"formula {formula!r} needs one target and one set of features, "
                            "'target ~ x1 + x2' (no '|' parts).")
    sides = {"lhs": list(lhs), "rhs": list(rhs)}
    for terms in sides.values():
        for term in terms:
            if not hasattr(term, "factors"):
                raise NadarayaError(f"formula {formula!r} needs one target and one set of "
                                    "features, 'target ~ x1 + x2' (no '|' parts).")
            if len(term.factors) > 1:
                parts = " + ".join(str(f.expr) for f in term.factors)
                raise NadarayaError(
                    f"formula {formula!r} has the interaction {str(term)!r}; a kernel "
                    "regression needs none (its product kernel lets every feature interact "
                    f"with every other). Write the features once each: {parts}."
                )
    targets = [t for t in sides["lhs"] if t.factors[0].eval_method.value != "literal"]
    if len(targets) != 1:
        raise NadarayaError(f"formula {formula!r} needs one target left of '~'; got "
                            f"{len(targets)}.")
    features = [_term(t.factors[0], "rhs") for t in sides["rhs"]
                if t.factors[0].eval_method.value != "literal"]
    if not features:
        raise NadarayaError(f"formula {formula!r} has no feature right of '~'; write e.g. "
                            "'y ~ x1 + C(x2)'.")
    names = [t.name for t in features]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise NadarayaError(f"formula {formula!r} uses {twice} as more than one feature "
                            "(e.g. x and C(x)); give each column one type.")
    return FormulaDesign(formula, _term(targets[0].factors[0], "lhs"), features)


def from_formula(formula: str, data: Any, estimator: Any = None, *,
                 missing: str = "drop") -> Any:
    """Fit ``estimator`` to the columns of ``data`` that ``formula`` names.

    Parameters
    ----------
    formula : str
        ``"y ~ x1 + C(x2) + O(x3)"``: see :func:`parse_formula`.
    data : pandas DataFrame of shape (n_rows, n_columns)
    estimator : estimator, optional
        An unfitted :class:`LocalPolynomialRegressor` (the default, local
        linear with cross-validated bandwidths),
        :class:`NadarayaWatsonRegressor`, :class:`KernelClassifier` or
        :class:`MetricKernelRegressor`; a clone of it is fitted, its
        ``var_types`` set from the formula.
    missing : {"drop", "raise"}, default "drop"
        Leave out rows with a missing value in a used column, or raise.

    Returns
    -------
    estimator
        Fitted on the features as a DataFrame (``feature_names_in_`` are the
        formula's names); ``formula_`` is the :class:`FormulaDesign`, whose
        ``features(new_data)`` gives the queries of ``predict`` and whose
        ``dropped`` counts the rows left out.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from nadaraya.estimators import NadarayaWatsonRegressor, from_formula
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.uniform(size=60), "g": rng.choice(["a", "b"], 60)})
    >>> df["y"] = df["x"] + (df["g"] == "b")
    >>> model = from_formula("y ~ x + C(g)", df, NadarayaWatsonRegressor())
    >>> model.feature_names_in_.tolist(), model.formula_.dropped
    (['x', 'g'], 0)
    """
    from sklearn.base import clone

    from ._regression import LocalPolynomialRegressor
    from ._tabular import frame_types

    design = parse_formula(formula)
    _check_frame(data)
    X, y = design.frames(data, missing=missing)
    model = LocalPolynomialRegressor() if estimator is None else clone(estimator)
    if "var_types" in model.get_params():
        model.set_params(var_types=frame_types(X))
    model.fit(X, y)
    model.formula_ = design
    return model
