"""``nadaraya explore``: a local web application over the engine (Panel / Bokeh).

Four tabs, each a module: :mod:`~nadaraya.explore.regression` (a fit whose
kernel and bandwidth move live, the CV curve, a query's weights),
:mod:`~nadaraya.explore.attention` (a MiniLM head's map as Nadaraya-Watson
weights under softmax, rbf or laplacian kernels), :mod:`~nadaraya.explore.images`
(denoising, a pixel's kernel over its window, PSNR) and
:mod:`~nadaraya.explore.scale` (which engine runs a problem of a given size,
why, and how fast). :func:`serve` runs them on a Bokeh server whose page
loads its JavaScript from the installed packages only, so it works offline;
:func:`build_app` gives the same page for Jupyter. Needs Panel:
``pip install 'nadaraya[explore]'``.

Examples
--------
>>> import panel as pn                                       # doctest: +SKIP
>>> from nadaraya.explore import build_app
>>> pn.extension(); build_app()                              # doctest: +SKIP
"""

from __future__ import annotations

from .app import TABS, Explorer, build_app, check_port, serve

__all__ = ["TABS", "Explorer", "build_app", "check_port", "serve"]
