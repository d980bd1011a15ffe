"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR, TFLite's int8 reference kernels.

Both resize H and W of NCHW codes (TFLite's NHWC ``Dims(1)``, ``Dims(2)``) and keep the input's
quantization (the converter gives them one scale and zero point: no requantization). Their
``Prepare`` has no parameters beyond the two flags ``align_corners`` and ``half_pixel_centers``
(``ResizeNearestNeighborOptions`` / ``ResizeBilinearOptions``) and the output size.

- RESIZE_NEAREST_NEIGHBOR (``reference_ops::ResizeNearestNeighbor``, ``GetNearestNeighbor``):
  per axis, in float32, ``scale = in / out`` (``(in - 1) / (out - 1)`` with ``align_corners``
  and ``out > 1``), ``v = (i + offset) * scale`` with ``offset = 0.5`` for half-pixel centers;
  the source is ``round(v)`` (half away from zero) with ``align_corners``, else ``floor(v)``,
  capped at ``in - 1`` (and at 0 from below with half-pixel centers). A gather of codes.
- RESIZE_BILINEAR (the int8 ``reference_ops::ResizeBilinear``): Q10 fixed point. Per axis
  ``scale_10 = (1024 in + out / 2) / out`` (C division; ``align_corners``: ``(1024 (in - 1) +
  (out - 1) / 2) / (out - 1)``), ``p = i scale_10`` (half-pixel: ``+ scale_10 / 2 - 512``),
  ``lo = max(p / 1024, 0)`` with C's truncating division, ``hi = min((p + 1023) / 1024,
  in - 1)``, ``w = p - 1024 lo`` (negative at a half-pixel border, where ``lo = hi``). The four
  corner codes weigh ``(1024 - wy)(1024 - wx)``, ``wy (1024 - wx)``, ``(1024 - wy) wx``,
  ``wy wx`` in int64; the sum ``s`` is divided by 2^20 rounding half away from zero: ``(s +
  sign(s) 2^19) / 2^20``, truncating.

The scalar twins are :func:`quantemu.backends.tflite.reference.resize_nearest` and
``resize_bilinear``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError

_ONE = 1 << 10  # Q10's 1.0


@dataclass(frozen=True)
class ResizeParams:
    """``ResizeBilinearOptions`` / ``ResizeNearestNeighborOptions`` and the output size."""

    size: tuple[int, int]  # output (height, width)
    align_corners: bool = False
    half_pixel_centers: bool = False
    bilinear: bool = False

    def __post_init__(self) -> None:
        if len(self.size) != 2 or min(self.size) < 1:
            raise InvalidInputError(f"resize: output size {self.size} must be two positive ints")
        if self.bilinear and self.align_corners and self.half_pixel_centers:
            # resize_bilinear.cc's Prepare: "If half_pixel_centers is True, align_corners must
            # be False."
            raise InvalidInputError(
                "RESIZE_BILINEAR: half_pixel_centers and align_corners cannot both be set"
            )

    @property
    def op(self) -> str:
        return "RESIZE_BILINEAR" if self.bilinear else "RESIZE_NEAREST_NEIGHBOR"


def nearest_source(size_in: int, size_out: int, align: bool, half: bool) -> np.ndarray:
    """``GetNearestNeighbor`` for every output position of one axis (float32 arithmetic)."""
    if align and size_out > 1:
        scale = np.float32(size_in - 1) / np.float32(size_out - 1)
    else:
        scale = np.float32(size_in) / np.float32(size_out)
    offset = np.float32(0.5 if half else 0.0)
    v = ((np.arange(size_out, dtype=np.float32) + offset) * scale).astype(np.float64)
    # TfLiteRound is std::round (half away from zero); v >= 0 and exact in float64.
    index = np.floor(v + 0.5) if align else np.floor(v)
    index = np.minimum(index, size_in - 1)
    return np.maximum(index, 0).astype(np.intp) if half else index.astype(np.intp)


def bilinear_taps(size_in: int, size_out: int, align: bool, half: bool):
    """``(lo, hi, w)`` per output position of one axis: the two source rows and the Q10
    weight of ``hi`` (``ComputeInterpolationValues``, integer form)."""
    if align and size_out > 1:
        scale = (_ONE * (size_in - 1) + (size_out - 1) // 2) // (size_out - 1)
    else:
        scale = (_ONE * size_in + size_out // 2) // size_out
    p = np.arange(size_out, dtype=np.int64) * scale
    if half:
        p = p + scale // 2 - _ONE // 2
    # C's p / 1024 truncates toward zero: p > -1024 here, so a negative p gives 0.
    lo = np.maximum(np.where(p < 0, 0, p // _ONE), 0)
    hi = np.minimum((p + _ONE - 1) // _ONE, size_in - 1)
    if int(lo.max()) > size_in - 1:
        # The Q10 scale rounds up: far enough along, the kernel reads past the input row.
        raise UnsupportedError(
            f"RESIZE_BILINEAR from {size_in} to {size_out}: TFLite's Q10 kernel reads source "
            f"index {int(lo.max())}, beyond the input ({size_in}); its result is undefined"
        )
    return lo, hi, p - _ONE * lo


def resize_nearest(x: np.ndarray, params: ResizeParams) -> np.ndarray:
    """RESIZE_NEAREST_NEIGHBOR of NCHW int8 codes: a gather along H and W."""
    (_, _, h, w), (oh, ow) = x.shape, params.size
    a, hp = params.align_corners, params.half_pixel_centers
    y = np.take(x, nearest_source(h, oh, a, hp), axis=2)
    return np.ascontiguousarray(np.take(y, nearest_source(w, ow, a, hp), axis=3))


def resize_bilinear(x: np.ndarray, params: ResizeParams) -> np.ndarray:
    """RESIZE_BILINEAR of NCHW int8 codes (module docstring)."""
    (_, _, h, w), (oh, ow) = x.shape, params.size
    a, hp = params.align_corners, params.half_pixel_centers
    y0, y1, wy = bilinear_taps(h, oh, a, hp)
    x0, x1, wx = bilinear_taps(w, ow, a, hp)
    wy, wx = wy[:, None], wx[None, :]
    rows = [np.take(x.astype(np.int64), r, axis=2) for r in (y0, y1)]
    c00, c01 = (np.take(rows[0], c, axis=3) for c in (x0, x1))
    c10, c11 = (np.take(rows[1], c, axis=3) for c in (x0, x1))
    # |code| <= 128 and each weight product <= 1280 * 1280 (a half-pixel border weighs
    # 1024 + 512 at most): the sum stays below 2^30, exact in int64.
    s = (
        c00 * (_ONE - wy) * (_ONE - wx)
        + c10 * wy * (_ONE - wx)
        + c01 * (_ONE - wy) * wx
        + c11 * wy * wx
    )
    s = s + np.where(s > 0, 1 << 19, -(1 << 19))
    q = np.sign(s) * (np.abs(s) >> 20)  # C's division by 2^20, toward zero
    # The weights are an affine combination (they sum to 2^20, and a negative one only where
    # lo == hi, which merges it with its positive partner): q lies between the corner codes.
    return q.astype(np.int8)
