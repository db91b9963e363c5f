"""What a block of pixels computes depends on its halo only, not on the rest of its region.

The steering matrices scale the gradients of the region read by a power of two
(its largest gradient's) before squaring them; the logarithms of their
eigenvalues must not depend on that power, or two blocks of one image (in
memory, or two dask chunks) would disagree in the last bits where they overlap.
(Gradients spanning more than about 1e75 in one region still differ: the
smallest squares underflow once scaled by the largest gradient's power.)
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya.image.steering import steering_field


@pytest.mark.parametrize("peak", [1e3, 1e-3, 7.0, 1e30])
@pytest.mark.parametrize("lambda_scale", [0.01, 0.0])
def test_steering_field_ignores_gradients_beyond_its_window(rng: np.random.Generator,
                                                           peak: float,
                                                           lambda_scale: float) -> None:
    window = 2
    gradient = torch.from_numpy(rng.standard_normal((2, 3, 24, 24)) * 5.0)
    far = gradient.clone()
    far[:, :, :3, :3] = peak  # another largest gradient, far from the pixels compared
    near = (slice(3 + 2 * window, None), slice(3 + 2 * window, None))
    for one, other in zip(steering_field(gradient, 1.5, window, lambda_scale=lambda_scale),
                          steering_field(far, 1.5, window, lambda_scale=lambda_scale),
                          strict=True):
        assert torch.equal(one[near], other[near])


def test_steering_field_still_handles_extreme_gradients() -> None:
    # ratios and products that leave float64's range fall back to sums of logarithms
    gradient = torch.zeros(2, 1, 9, 9, dtype=torch.float64)
    gradient[0, 0, 4, 4] = 1e300
    gradient[1, 0, 2, 2] = 1e-300
    field, log_weight = steering_field(gradient, 1.0, 1, lambda_elongation=0.0,
                                       lambda_scale=0.0)
    assert not bool(torch.isnan(field).any()) and not bool(torch.isnan(log_weight).any())
