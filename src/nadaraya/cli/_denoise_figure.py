"""The --compare figure of ``nadaraya denoise``: noisy, denoised and their difference."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["figure"]


def _shown(image: Any, low: float, data_range: float, np: Any) -> Any:
    """An image as matplotlib shows it: floats in [0, 1]."""
    return np.clip((image.astype(np.float64) - low) / data_range, 0.0, 1.0)


def figure(args: argparse.Namespace, noisy: Any, out: Any, data_range: float,
           scores: tuple[float, float] | None, name: str) -> None:
    """Write the --compare figure: noisy, denoised (by the method ``name``) and their
    difference, with PSNR in the titles when ``scores`` are given."""
    import numpy as np
    from matplotlib.figure import Figure

    from ..plot import save_figure

    gray = noisy.ndim == 2
    low = 0.0 if noisy.dtype.kind in "ui" else float(noisy.min())
    diff = noisy.astype(np.float64) - out.astype(np.float64)
    top = float(np.abs(diff).max()) or 1.0
    fig = Figure(figsize=(12, 4.4), layout="constrained")
    axes = fig.subplots(1, 3)
    titles = ["noisy", f"denoised ({name})", "difference (noisy - denoised)"]
    if scores is not None:
        titles[0] += f"\nPSNR {scores[0]:.2f} dB"
        titles[1] += f"\nPSNR {scores[1]:.2f} dB"
    cmap = "gray" if gray else None
    axes[0].imshow(_shown(noisy, low, data_range, np), cmap=cmap, vmin=0, vmax=1)
    axes[1].imshow(_shown(out, low, data_range, np), cmap=cmap, vmin=0, vmax=1)
    shown = diff if gray else diff.mean(axis=2)
    im = axes[2].imshow(shown, cmap="RdBu_r", vmin=-top, vmax=top)
    fig.colorbar(im, ax=axes[2], shrink=0.8)
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title)
        ax.set_axis_off()
    save_figure(fig, args.outputs["--compare"], dpi=100)
