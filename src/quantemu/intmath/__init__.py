"""Exact integer primitives, backend-neutral (DESIGN "Layers").

Rounding right shifts named by tie rule (:mod:`~quantemu.intmath.rounding`), saturation and
wrapping (:mod:`~quantemu.intmath.saturation`), fixed-point multiplies
(:mod:`~quantemu.intmath.fixedpoint`), gemmlowp's fixed-point exp, logistic, tanh and
reciprocals (:mod:`~quantemu.intmath.gemmlowp`), float-to-int conversions as targets perform them
(:mod:`~quantemu.intmath.floatconv`), saturating accumulation
(:mod:`~quantemu.intmath.accumulate`), the rounding shift whose rounding add wraps
(:mod:`~quantemu.intmath.wrapping_shift`), the exact integer GEMM
(:mod:`~quantemu.intmath.matmul`), sliding windows (:mod:`~quantemu.intmath.windows`), and
the enums naming their variants
(:mod:`~quantemu.intmath.policies`). :mod:`~quantemu.intmath.reference` holds the same
primitives on plain Python ints: the specification they are tested against.
:mod:`~quantemu.intmath.parallel` splits large arrays across cores (same results at any thread
count).
"""

from quantemu.intmath import (
    fixedpoint,
    floatconv,
    gemmlowp,
    matmul,
    rounding,
    saturation,
    windows,
    wrapping_shift,
)
from quantemu.intmath.accumulate import accumulate, accumulate_count
from quantemu.intmath.fixedpoint import (  # noqa: F401
    multiply_by_quantized_multiplier_double_rounding,
    multiply_shift_right_round_half_away,
    multiply_shift_right_round_half_up,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul_round_half_up,
)
from quantemu.intmath.floatconv import (  # noqa: F401
    float32_round_half_up_add_floor,
    float32_to_int_round_half_even_saturate,
    float64_round_half_away_add_truncate,
    float64_to_int_round_half_away_add_truncate,
)
from quantemu.intmath.gemmlowp import (  # noqa: F401
    EXP_BARREL_MULTIPLIERS,
    exp_on_interval_between_negative_one_quarter_and_0_excl,
    exp_on_negative_values,
    logistic,
    one_minus_x_over_one_plus_x_for_x_in_0_1,
    one_over_one_plus_x_for_x_in_0_1,
    reciprocal_with_headroom,
    rounding_half_sum,
    saturating_doubling_high_mul_toward_zero_int16,
    saturating_rounding_doubling_high_mul_round_half_up_int16,
    saturating_rounding_multiply_by_pot,
    tanh,
)
from quantemu.intmath.matmul import ArrayCache, GemmEngine, frozen, matmul_exact  # noqa: F401
from quantemu.intmath.policies import Bounds, Granularity, NanPolicy, NegativeShift
from quantemu.intmath.rounding import (  # noqa: F401
    shift_left_saturate,
    shift_right_floor,
    shift_right_round_half_away,
    shift_right_round_half_down,
    shift_right_round_half_even,
    shift_right_round_half_up,
    shift_right_toward_zero,
)
from quantemu.intmath.saturation import (  # noqa: F401
    saturate,
    saturate_count,
    saturate_symmetric,
    saturate_symmetric_count,
    saturate_unsigned,
    saturate_unsigned_count,
    wrap,
    wrap_unsigned,
)
from quantemu.intmath.windows import sliding_windows, window_columns  # noqa: F401
from quantemu.intmath.wrapping_shift import (  # noqa: F401
    shift_right_round_half_up_wrapping_add,
    shift_right_round_half_up_wrapping_add_count,
)

#: Every public name: accumulate's and policies' (modules without an ``__all__``), then each other
#: module's own ``__all__`` whole (so their imports above need ``noqa: F401``).
__all__ = ["Bounds", "Granularity", "NanPolicy", "NegativeShift", "accumulate", "accumulate_count"]
__all__ += fixedpoint.__all__ + floatconv.__all__ + gemmlowp.__all__ + matmul.__all__
__all__ += rounding.__all__ + saturation.__all__ + windows.__all__ + wrapping_shift.__all__
