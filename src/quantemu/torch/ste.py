"""The straight-through estimator of quantization-aware training (:mod:`quantemu.torch.qat`).

At every tensor the target quantizes, the forward value is the target's exact one and the
gradient is taken from the float twin's value ``x``:

- **to the input** (clipped STE): 1 where ``low <= x <= high``, 0 outside the range; on a
  logarithmic grid (NNIE) ``y / x`` inside, the derivative of ``2^(round(16 log2 x) / 16)``
  with the rounding passed straight through (0 where the value fell to zero);
- **to a learned range** (LSQ, Esser et al. 2020, written for the two ends of a range): on an
  evenly spaced grid of ``n`` steps over ``[low, high]``, ``y = low + s * round((x - low) / s)``
  with ``s = (high - low) / n``, so inside the range ``dy/dhigh = (y - x) / (high - low)`` and
  ``dy/dlow = -(y - x) / (high - low)`` (the rounding error, LSQ's step-size gradient), and a
  clipped value follows its end: ``dy/dhigh = 1`` above, ``dy/dlow = 1`` below. On a
  logarithmic grid the levels scale with the clip, so the rounding error contributes nothing
  inside and only the clipped values move it. Each range's gradient is scaled by
  ``1 / sqrt(elements * 255)``, LSQ's balance between a range and the weights.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from quantemu.errors import InvalidInputError


def straight_through(
    twin: torch.Tensor,
    exact: torch.Tensor,
    rng,
    *,
    logarithmic: bool = False,
    learned: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """``exact`` in the forward pass; the gradients of the module docstring in the backward
    pass. ``rng``: the tensor's range (``min``, ``max``, ``axis``), ``None`` for none;
    ``learned``: the ``(low, high)`` parameters that range was made from, when they are learned.
    """
    if exact.shape != twin.shape:
        raise InvalidInputError(
            f"quantemu.torch: the float twin computes shape {tuple(twin.shape)} where the "
            f"program holds {tuple(exact.shape)}; this model's layout is not supported yet"
        )
    x = twin.detach()
    through = twin - x  # zero, with twin's gradient
    if logarithmic:
        through = through * torch.where(x != 0, exact / torch.where(x != 0, x, 1), 0)
    if rng is None:
        return exact + through
    low, high = (_broadcast(v, rng.axis, twin.dim()) for v in (rng.min, rng.max))
    above, below = x > high, x < low
    out = exact + through * ~(above | below)
    if learned is not None:
        out = out + _range_terms(x, exact, learned, above, below, logarithmic=logarithmic)
    return out


def _range_terms(x, exact, learned, above, below, *, logarithmic: bool) -> torch.Tensor:
    """Zero in value; the LSQ gradients of the learned ``(low, high)`` (module docstring)."""
    low, high = learned
    width = (high - low).detach().float().clamp_min(torch.finfo(torch.float32).tiny)
    inside = ~(above | below)
    error = torch.zeros_like(x) if logarithmic else (exact - x) / width * inside
    scale = 1 / math.sqrt(max(1, x.numel()) * 255)
    # per element: the loss's gradient reaches each end through every element it shapes
    grad_high = (error + above.to(x.dtype)) * scale
    grad_low = (below.to(x.dtype) - error) * scale
    # the ends may be float64 parameters: their zero is cast so that the values stay float32
    return (high - high.detach()).float() * grad_high + (low - low.detach()).float() * grad_low


def _broadcast(value, axis: int | None, ndim: int) -> torch.Tensor:
    """A range bound as a tensor broadcasting along ``axis`` (per-channel) or a scalar."""
    tensor = torch.as_tensor(np.asarray(value, np.float32))
    if axis is None or tensor.dim() == 0:
        return tensor
    shape = [1] * ndim
    shape[axis % ndim] = tensor.numel()
    return tensor.reshape(shape)
