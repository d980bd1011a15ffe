"""Prepare-time parameters of TFLite's two-input int8 arithmetic: ADD, SUB, MUL and
SQUARED_DIFFERENCE (the kernels: :mod:`quantemu.backends.tflite.elementwise`).

Every builder starts from the operands' checked quantization
(:func:`~quantemu.backends.tflite.params.two_input_quantization`: float32 scales and the
``ArithmeticParams`` offsets); ADD, SUB and SQUARED_DIFFERENCE then bring both inputs onto the
common scale ``2 * max(s1, s2)`` (:meth:`~quantemu.backends.tflite.params.TwoInputQuantization.
input_rescale`) and differ only in the output multiplier; MUL rescales the product once.
LiteRT's reference kernels and TFLite-Micro derive the same integers (checked against both).
"""

from __future__ import annotations

from dataclasses import dataclass

from quantemu.backends.tflite.multiplier import (
    quantize_multiplier,
    quantize_multiplier_smaller_than_one_exp,
)
from quantemu.backends.tflite.params import (
    INT8_MAX,
    INT8_MIN,
    FusedActivation,
    _check_multiplier,
    _check_range,
    _zero_point,
    fused_activation_clamp,
    two_input_quantization,
)
from quantemu.errors import InvalidInputError, UnsupportedError

__all__ = [
    "ADD_LEFT_SHIFT",
    "SQDIFF_LEFT_SHIFT",
    "AddParams",
    "MulParams",
    "SquaredDifferenceParams",
    "add_params",
    "mul_params",
    "squared_difference_params",
    "sub_params",
]

#: ``left_shift`` of TFLite's 8-bit ADD/SUB: codes are scaled by 2**20 before rescaling.
ADD_LEFT_SHIFT = 20
#: ``left_shift`` of SQUARED_DIFFERENCE: 255**2 * 2**14 fits int32.
SQDIFF_LEFT_SHIFT = 7


@dataclass(frozen=True)
class AddParams:
    """8-bit ADD/SUB (gemmlowp arithmetic): ``a_i = MBQM((x_i + input_i_offset) * 2**left_shift,
    m_i, s_i)``, ``y = clamp(MBQM(a_1 +- a_2, m_out, s_out) + output_offset)``; ``subtract``
    chooses ``-`` (SUB)."""

    input1_offset: int
    input2_offset: int
    output_offset: int
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int
    output_multiplier: int
    output_shift: int
    act_min: int = INT8_MIN
    act_max: int = INT8_MAX
    # Whether act_min / act_max come from a fused activation (a ReLU at zero point -128 sets
    # act_min to the rail itself): the clamps there count as activation_clamped, not lost.
    floor: bool = False
    ceiling: bool = False
    subtract: bool = False
    left_shift: int = ADD_LEFT_SHIFT

    def __post_init__(self) -> None:
        where = "AddParams"
        for i in (1, 2):
            _zero_point(-getattr(self, f"input{i}_offset"), f"-input{i}_offset", where)
        _zero_point(self.output_offset, "output_offset", where)
        for name in ("input1", "input2", "output"):
            q, s = getattr(self, f"{name}_multiplier"), getattr(self, f"{name}_shift")
            _check_multiplier(q, s, where, f"{name}_multiplier")
            if s > 0:
                raise InvalidInputError(
                    f"{where}: {name}_shift = {s} must be <= 0 (a SmallerThanOneExp multiplier)"
                )
        if self.left_shift != ADD_LEFT_SHIFT:
            raise InvalidInputError(f"{where}: left_shift is {ADD_LEFT_SHIFT} for 8-bit data")
        _check_range(self.act_min, self.act_max, where)


def _add_like(s1, z1, s2, z2, s_out, z_out, *, act, where) -> dict:  # noqa: PLR0917 -- TFLite's (scale, zero point) order
    q = two_input_quantization(s1, z1, s2, z2, s_out, z_out, where)
    rescale = q.input_rescale(where)
    r_out = q.twice_max / ((1 << ADD_LEFT_SHIFT) * q.s_out)
    qo, eo = quantize_multiplier_smaller_than_one_exp(r_out, where)
    clamp = fused_activation_clamp(act, q.s_out, z_out)
    return {**q.offsets(), **rescale, "output_multiplier": qo, "output_shift": eo, **clamp}


def add_params(  # noqa: PLR0917 -- TFLite's (scale, zero point) order
    s1, z1, s2, z2, s_out, z_out, act=FusedActivation.NONE
) -> AddParams:
    """ADD's ``Prepare`` (LiteRT and TFLite-Micro alike): ``twice_max = 2 * max(s1, s2)``,
    input multipliers ``s_i / twice_max``, output ``twice_max / (2**20 * s_out)``, each through
    ``QuantizeMultiplierSmallerThanOneExp``, in double.

    >>> p = add_params(0.5, 0, 0.25, 0, 1.0, 0)
    >>> (p.input1_multiplier, p.input1_shift), (p.input2_shift, p.output_shift)
    ((1073741824, 0), (-1, -19))
    """
    return AddParams(**_add_like(s1, z1, s2, z2, s_out, z_out, act=act, where="add_params"))


def sub_params(  # noqa: PLR0917 -- TFLite's (scale, zero point) order
    s1, z1, s2, z2, s_out, z_out, act=FusedActivation.NONE, *, runtime=None
) -> AddParams:
    """SUB's ``Prepare``: ADD's parameters (:func:`add_params`), and a kernel that subtracts.

    Both peers (LiteRT 2.3.0 ``BUILTIN_REF`` and TFLite-Micro) compute this, checked over all
    65536 code pairs: not TensorFlow's older SUB that negates ``input2_multiplier`` and adds
    (``SaturatingRoundingDoublingHighMul(x, -m)`` rounds a tie differently from ``-(x*m)``),
    nor TFLite-Micro sources that form the quotients in float32. ``runtime`` (a
    :class:`TfliteRuntime` or None) is accepted so that callers pass it to every builder alike;
    it changes nothing here.

    >>> p = sub_params(0.5, 0, 0.25, 0, 1.0, 0)
    >>> p.input2_multiplier, p.subtract
    (1073741824, True)
    """
    return AddParams(
        **_add_like(s1, z1, s2, z2, s_out, z_out, act=act, where="sub_params"), subtract=True
    )


@dataclass(frozen=True)
class MulParams:
    """8-bit MUL: ``y = clamp(MBQM((x1 + o1) * (x2 + o2), m, s) + output_offset)``."""

    input1_offset: int
    input2_offset: int
    output_offset: int
    output_multiplier: int
    output_shift: int
    act_min: int = INT8_MIN
    act_max: int = INT8_MAX
    # Whether act_min / act_max come from a fused activation (a ReLU at zero point -128 sets
    # act_min to the rail itself): the clamps there count as activation_clamped, not lost.
    floor: bool = False
    ceiling: bool = False

    def __post_init__(self) -> None:
        where = "MulParams"
        _zero_point(-self.input1_offset, "-input1_offset", where)
        _zero_point(-self.input2_offset, "-input2_offset", where)
        _zero_point(self.output_offset, "output_offset", where)
        _check_multiplier(self.output_multiplier, self.output_shift, where)
        _check_range(self.act_min, self.act_max, where)


def mul_params(  # noqa: PLR0917 -- TFLite's (scale, zero point) order
    s1, z1, s2, z2, s_out, z_out, act=FusedActivation.NONE
) -> MulParams:
    """MUL's ``Prepare``: ``QuantizeMultiplier(double(s1) * double(s2) / double(s_out))``.

    >>> mul_params(0.5, 0, 0.5, 0, 0.125, 0).output_shift
    2
    """
    q = two_input_quantization(s1, z1, s2, z2, s_out, z_out, "mul_params")
    m, s = quantize_multiplier(q.s1 * q.s2 / q.s_out)
    clamp = fused_activation_clamp(act, q.s_out, z_out)
    return MulParams(**q.offsets(), output_multiplier=m, output_shift=s, **clamp)


@dataclass(frozen=True)
class SquaredDifferenceParams:
    """SQUARED_DIFFERENCE's ``ArithmeticParams`` for int8 (``left_shift`` is 7)."""

    input1_offset: int
    input2_offset: int
    output_offset: int
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int
    output_multiplier: int
    output_shift: int


def squared_difference_params(s1, z1, s2, z2, s_out, z_out) -> SquaredDifferenceParams:  # noqa: PLR0917 -- TFLite's (scale, zero point) order
    """SQUARED_DIFFERENCE's Prepare: ADD's input stage (``twice_max = 2 * max(s1, s2)``, input
    multipliers ``s_i / twice_max``, ``QuantizeMultiplierSmallerThanOneExp``), output
    ``twice_max**2 / (2**14 * s_out)`` (``QuantizeMultiplier``), in double.

    >>> p = squared_difference_params(0.5, 0, 0.25, 0, 1.0, 0)
    >>> (p.input1_shift, p.input2_shift), (p.output_multiplier, p.output_shift)
    ((0, -1), (1073741824, -13))
    """
    where = "squared_difference_params"
    q = two_input_quantization(s1, z1, s2, z2, s_out, z_out, where)
    rescale = q.input_rescale(where)
    twice_max = q.twice_max
    qo, eo = quantize_multiplier(twice_max * twice_max / ((1 << 2 * SQDIFF_LEFT_SHIFT) * q.s_out))
    if not -31 <= eo <= 0:
        raise UnsupportedError(
            f"{where}: output multiplier {twice_max**2 / (2**14 * q.s_out)!r} (s1={q.s1}, "
            f"s2={q.s2}, s_out={q.s_out}) needs a shift of {eo}; the peers' int32 arithmetic "
            "takes only multipliers below 1 here: use a larger output scale"
        )
    return SquaredDifferenceParams(**q.offsets(), **rescale, output_multiplier=qo, output_shift=eo)
