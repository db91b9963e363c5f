"""unit_rows: the cosine kernel's normalised rows, their zero rows and half precisions."""

from __future__ import annotations

import pytest
import torch

from nadaraya.kernels.similarity import unit_rows


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_a_zero_row_stays_zero_with_no_gradient(dtype: torch.dtype) -> None:
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=dtype, requires_grad=True)
    out = unit_rows(x)
    assert out[0].tolist() == [0.0, 0.0]
    torch.testing.assert_close(out[1].double(), torch.tensor([0.6, 0.8], dtype=torch.float64),
                               rtol=1e-2, atol=0)
    (grad,) = torch.autograd.grad((out * torch.tensor([[1.0, -2.0], [0.5, 0.25]])).sum(), x)
    assert torch.isfinite(grad).all()
    assert grad[0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_tiny_half_rows_have_the_float64_gradient(dtype: torch.dtype) -> None:
    # rows near 4e-6: subnormal in float16; a division by 2^-18 on the way back overflowed
    x = torch.tensor([[2.7e-6, -4.6e-6], [-9.2e-6, 1.0e-6]], dtype=dtype)
    g = torch.tensor([[1.0, -2.0], [0.5, 0.25]])
    a = x.clone().requires_grad_()
    (ga,) = torch.autograd.grad((unit_rows(a) * g.to(dtype)).sum(), a)
    b = x.double().requires_grad_()
    (gb,) = torch.autograd.grad((unit_rows(b) * g.double()).sum(), b)
    assert torch.isfinite(ga).all()
    # about 1 / |x| (3e4 here): within float16's range, the float64 value rounded once
    want = gb.to(dtype).double()
    assert torch.isfinite(want).all()
    torch.testing.assert_close(ga.double(), want, rtol=2e-2, atol=0)
