"""Enums that name the arithmetic variants of the primitives (DESIGN principle 5).

Each variant that changes a result is an explicit enum argument: never a flag, a global or an
environment variable. The vectorised primitives and their Python-int references share these.
"""

from __future__ import annotations

import enum


class NegativeShift(enum.Enum):
    """What a negative shift amount means in a right-shift primitive.

    ``ERROR``: a negative shift is a caller error (the default; most hardware fields are unsigned).
    ``LEFT``: shift left by ``-shift`` exactly (no rounding is needed; the result must stay
    representable, or the call is an error).
    ``SATURATING_LEFT``: shift left by ``-shift`` and saturate to ``bits`` two's-complement bits
    (NVDLA's signed slope shifts, ``SSHR`` on the nvdla conformance page).
    """

    ERROR = "error"
    LEFT = "left"
    SATURATING_LEFT = "saturating_left"


class Bounds(enum.Enum):
    """Which range a saturating operation clamps to, for a width of ``b`` bits.

    ``TWOS_COMPLEMENT``: ``[-2**(b-1), 2**(b-1) - 1]``.
    ``SYMMETRIC``: ``[-(2**(b-1) - 1), 2**(b-1) - 1]`` (the XS3 VPU).
    """

    TWOS_COMPLEMENT = "twos_complement"
    SYMMETRIC = "symmetric"


class Granularity(enum.Enum):
    """When a saturating accumulator clamps, as products are added in order.

    ``PER_PRODUCT``: after every product (lib_nn conv2d_1x1 host reference).
    ``PER_CHUNK``: after each chunk of ``chunk`` consecutive products, the last chunk possibly
    shorter (XS3 ``VLMACCR``: 32 products per instruction).
    ``AT_END``: the exact sum is clamped once (lib_nn fully_connected host reference).
    ``WRAP``: never clamps; the sum wraps to the width (plain two's-complement adds).
    """

    PER_PRODUCT = "per_product"
    PER_CHUNK = "per_chunk"
    AT_END = "at_end"
    WRAP = "wrap"


class NanPolicy(enum.Enum):
    """What a float-to-int conversion does with NaN.

    ``ERROR``: NaN is a caller error.
    ``X86_INDEFINITE``: what ``cvtps2dq`` followed by saturating packs gives: the "integer
    indefinite" ``-2**31``, then saturated to the destination (the minimum of a signed range,
    0 for an unsigned one).
    """

    ERROR = "error"
    X86_INDEFINITE = "x86_indefinite"
