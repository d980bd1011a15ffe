"""TFLite's ``QuantizeMultiplier`` family: a positive real multiplier as a 31-bit fixed-point
significand and a power-of-two exponent, exactly as ``quantization_util.cc`` computes it."""

from __future__ import annotations

import math

from quantemu.errors import InvalidInputError, UnsupportedError

__all__ = [
    "quantize_multiplier",
    "quantize_multiplier_greater_than_one",
    "quantize_multiplier_smaller_than_one_exp",
]


def quantize_multiplier(m: float) -> tuple[int, int]:
    """TFLite ``QuantizeMultiplier``: ``(q, shift)`` with ``m ~ q * 2**(shift - 31)``.

    Formula: ``frac, shift = frexp(m)``; ``q = round(frac * 2**31)`` with ties away from zero
    (``TfLiteRound``); ``q == 2**31`` becomes ``(2**30, shift + 1)``; ``shift < -31`` flushes to
    ``(0, 0)``; ``m == 0`` gives ``(0, 0)``. ``shift > 0`` is a left shift.

    Policy: double arithmetic on ``m`` as given; exact here because ``frac * 2**31`` is a double
    of magnitude below 2**31 whose ``+ 0.5`` is exact. No clamp of ``shift`` to 30 (that is only
    in TFLite's ``TFLITE_SINGLE_ROUNDING`` builds, which the peers are not). NaN and infinities
    are errors.

    Mirrors: ``tflite::QuantizeMultiplier`` (kernels/internal/quantization_util.cc).

    >>> quantize_multiplier(0.5), quantize_multiplier(0.75), quantize_multiplier(2.0**-40)
    ((1073741824, 0), (1610612736, 0), (0, 0))
    >>> quantize_multiplier(1 - 2.0**-40), quantize_multiplier(3.0)
    ((1073741824, 1), (1610612736, 2))
    """
    m = float(m)
    if not math.isfinite(m):
        raise InvalidInputError(f"quantize_multiplier: multiplier {m!r} is not finite")
    if m == 0:
        return 0, 0
    frac, shift = math.frexp(m)
    t = frac * 2.0**31  # exact: a power-of-two scaling
    q = math.trunc(t + 0.5 if t >= 0 else t - 0.5)  # |t| < 2**31: the add is exact
    if q == 2**31:
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q, shift


def quantize_multiplier_smaller_than_one_exp(m: float, where: str = "") -> tuple[int, int]:
    """``QuantizeMultiplierSmallerThanOneExp``: :func:`quantize_multiplier` for ``0 < m < 1``
    (so ``shift <= 0``); TFLite aborts outside that range, here an :class:`UnsupportedError`.

    >>> quantize_multiplier_smaller_than_one_exp(0.25)
    (1073741824, -1)
    """
    if not 0 < m < 1:
        raise UnsupportedError(
            f"{where or 'quantize_multiplier_smaller_than_one_exp'}: TFLite needs a multiplier in "
            f"(0, 1) here, got {m!r}; the output scale is too small relative to the input scales"
        )
    return quantize_multiplier(m)


def quantize_multiplier_greater_than_one(m: float, where: str = "") -> tuple[int, int]:
    """``QuantizeMultiplierGreaterThanOne``: :func:`quantize_multiplier` for ``m > 1``.

    >>> quantize_multiplier_greater_than_one(3.0)
    (1610612736, 2)
    """
    if not m > 1:
        raise UnsupportedError(
            f"{where or 'quantize_multiplier_greater_than_one'}: TFLite needs a multiplier above 1 "
            f"here, got {m!r}"
        )
    return quantize_multiplier(m)
