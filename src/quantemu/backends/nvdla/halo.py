"""The CDP's channel halo: the channels beyond its outputs that a window reads (§3.2, §7).

A window sums up to 9 channels, 4 on each side of its centre, so a vector of ``C`` outputs needs
``C + 8`` input channels: the halo. :func:`~quantemu.backends.nvdla.cdp.cdp_window` (and its
FP16 twin) take vectors that carry it; ``cdp`` pads a cube's edges with it. Arrays here have
their channels along the last axis.
"""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError

HALO = 4  # channels supplied on each side of a cdp_window vector (the largest half-window)


def halo_outputs(x: np.ndarray, axis: int, shape: tuple[int, ...]) -> int:
    """How many output channels the vectors ``x`` carry (channels last; ``axis`` and ``shape``
    are the caller's, for the error)."""
    if x.ndim == 0 or x.shape[-1] <= 2 * HALO:
        raise InvalidInputError(
            f"cdp: X needs C + 8 > 8 channels along axis {axis} (a 4-channel halo on each side "
            f"of C outputs), got shape {shape}"
        )
    return x.shape[-1] - 2 * HALO


def with_halo(x: np.ndarray, fill: int) -> np.ndarray:
    """``x`` (channels last) with :data:`HALO` channels of ``fill`` on each side."""
    return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(HALO, HALO)], constant_values=fill)
