"""Sphinx configuration of nadaraya's documentation site.

Built offline by ``./scripts/docs`` (warnings are errors): the API reference
from the docstrings (numpydoc), the guides (Markdown through MyST), and the
gallery from ``examples/`` (sphinx-gallery, every example executed).
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import nadaraya  # noqa: E402

project = "nadaraya"
author = "the nadaraya developers"
copyright = "the nadaraya developers"
release = version = nadaraya.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_templates", "gallery/**/*.ipynb", "gallery/**/*.py",
                    "gallery/**/*.zip", "gallery/**/*.json", "gallery/**/*.md5"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

autosummary_generate = True
templates_path = ["_templates"]
autodoc_typehints = "none"  # numpydoc renders the types from the docstrings
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# the intersphinx inventories would need the network: references to other projects stay text
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "gallery",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"/_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
    "show_memory": False,
    "min_reported_time": 1,
    "abort_on_example_error": True,
    "reset_modules": ("matplotlib",),
}

html_theme = "pydata_sphinx_theme"
html_title = "nadaraya"
html_static_path = ["_static"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": [],
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False

# warnings of third-party code that are not ours to fix
warnings.filterwarnings("ignore", message=".*is non-interactive, and thus cannot be shown.*")
