"""
Bilateral, non-local means and steering kernel regression side by side
=======================================================================

Three image filters, one operator over augmented vectors ``t = [position; value]``: the bilateral
filter weighs neighbours by distance and by difference in value, non-local means by the
difference of whole patches, steering kernel regression by a distance stretched along the local
edges. Each denoises scikit-image's ``camera`` with parameters set from the noise level.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from skimage import data

from nadaraya.image import denoise, psnr

image = data.camera()[128:384, 128:384]
rng = np.random.default_rng(0)
sigma = 25.0
noisy = np.clip(image + rng.normal(0, sigma, image.shape), 0, 255).astype(np.uint8)

panels = {"noisy": noisy}
for name, method in (("bilateral", "bilateral"), ("non-local means", "nlm"),
                     ("steering kernel regression", "skr")):
    t0 = time.perf_counter()
    panels[name] = denoise(noisy, method=method, sigma=sigma)
    print(f"{name}: {psnr(image, panels[name]):.2f} dB in {time.perf_counter() - t0:.2f} s")

fig, axes = plt.subplots(1, 4, figsize=(14, 4))
for ax, (name, img) in zip(axes, panels.items(), strict=True):
    ax.imshow(img, cmap="gray", vmin=0, vmax=255)
    ax.set_title(f"{name}\n{psnr(image, img):.2f} dB")
    ax.axis("off")
fig.tight_layout()
