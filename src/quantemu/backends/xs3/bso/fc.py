"""The lib_nn fully-connected operators: fully_connected_8/16 (BSO) and the legacy
fc_deepin_shallowout_16/8 (plain bias, shifts and Q1.14 scales).

Semantics: ``xs3.md`` sections 5, 6.5 and 6.6. Pure functions returning an
:class:`~quantemu.backends.xs3.bso.result.OpResult`. Each also takes a batch ``X`` of shape
``(N, C_in)`` and returns ``(N, C_out)``, every row computed exactly as a separate call would
(counters add up over the batch).
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.xs3.bso.accumulation import Saturation, Steps, accumulate_conv
from quantemu.backends.xs3.bso.output_stage import LastStep, bso_stage, legacy_stage
from quantemu.backends.xs3.bso.packing import check_shift, unpack_bso
from quantemu.backends.xs3.bso.params import DEFAULT_OPTIONS, Model, OutputOptions
from quantemu.backends.xs3.bso.result import OpResult, make_result
from quantemu.backends.xs3.bso.validate import check_multiple_of_4, check_shape, check_tensor
from quantemu.errors import InvalidInputError

VLMACCR_BYTES = 32
LEGACY_MAX_C_OUT = 16  # "shallow out": one group of 16 accumulators


def _check_fc(w, x, op: str) -> tuple[int, int]:
    """W int8 ``(C_out, C_in)`` and X int8 ``(C_in,)`` or ``(N, C_in)`` with C_in % 4 == 0."""
    check_tensor(w, "W", np.int8, 2, op)
    check_tensor(x, "X", np.int8, (1, 2), op)
    c_out, c_in = w.shape
    want = (*x.shape[:-1], c_in)
    check_shape(x, "X", want, f"C_in = {c_in} from W's shape {w.shape}", op)
    check_multiple_of_4(c_in, "C_in", op)
    return c_in, c_out


def _accumulate(w, x, bias, model: Model, host_mode: Saturation):
    """The fc accumulators: ``host_mode`` on the host, VLMACCR per-32 chunks on the device."""
    c_out, c_in = w.shape
    host = model is Model.HOST_REFERENCE
    xmax = max(-int(x.min()), int(x.max()))
    return accumulate_conv(
        x.reshape(-1, 1, c_in),
        w.reshape(c_out, 1, c_in),
        bias,
        mode=host_mode if host else Saturation.STEPWISE,
        steps=Steps(c_in, VLMACCR_BYTES),
        xmax=xmax,
    )


def _bso_fc(w, x, bso, options: OutputOptions, *, last: LastStep, op: str) -> OpResult:
    _, c_out = _check_fc(w, x, op)
    ch = unpack_bso(bso, c_out, op=op)
    accumulated = _accumulate(w, x, ch.bias, options.model, Saturation.AT_END)
    y, counters, y_raw = bso_stage(
        accumulated[0], ch, last, options.output_low, options.model, raw=True
    )
    return make_result(y, accumulated, counters, (*x.shape[:-1], c_out), y_raw)


def fully_connected_8(
    W: np.ndarray, X: np.ndarray, BSO: np.ndarray, options: OutputOptions = DEFAULT_OPTIONS
) -> OpResult:
    """lib_nn ``fully_connected_8``: ``Y = W @ X`` through the BSO stage, int8 output.

    ``W``: int8 ``(C_out, C_in)``, C_in % 4 == 0, any C_out >= 1; ``X``: int8 ``(C_in,)``.
    Host: ``acc = SAT_32(bias + sum)``, one saturation at the end; device: per 32-byte chunk.
    Output: ``CLAMP(RSHR(a2, shift2), lo, 127)``.
    """
    return _bso_fc(W, X, BSO, options, last=LastStep.INT8_EXACT, op="fully_connected_8")


def fully_connected_16(
    W: np.ndarray, X: np.ndarray, BSO: np.ndarray, model: Model = Model.HOST_REFERENCE
) -> OpResult:
    """lib_nn ``fully_connected_16``: as fully_connected_8 with an int16 output.

    Output: ``SAT_16(RSHR_W(a2, shift2))`` in [-32767, 32767]; the host's rounding add wraps.
    """
    options = OutputOptions(False, Model.parse(model))
    return _bso_fc(W, X, BSO, options, last=LastStep.INT16_WRAPPING, op="fully_connected_16")


def _check_legacy(w, b, x, shifts, scales, *, op: str) -> int:
    c_in, c_out = _check_fc(w, x, op)
    if c_in % VLMACCR_BYTES:
        raise InvalidInputError(
            f'{op}: C_in = {c_in} is not a multiple of 32 ("deep in": whole VLMACCR chunks); '
            f"pad W and X with zeros to {c_in + (-c_in % 32)} or use fully_connected_8/16"
        )
    if c_out > LEGACY_MAX_C_OUT:
        raise InvalidInputError(
            f'{op}: C_out = {c_out} > 16 ("shallow out": one group of 16 accumulators); '
            "split the layer or use fully_connected_8/16"
        )
    for arr, name, dtype in (
        (b, "B", np.int32),
        (shifts, "shifts", np.uint16),
        (scales, "scales", np.int16),
    ):
        check_tensor(arr, name, dtype, 1, op)
        check_shape(arr, name, (c_out,), f"one per output channel, C_out = {c_out} from W", op)
    check_shift(shifts.astype(np.int64), "shifts", op)
    return c_out


def _legacy(tensors: tuple, *, model, out_bits: int, op: str) -> OpResult:
    w, b, x, shifts, scales = tensors
    model = Model.parse(model)
    c_out = _check_legacy(w, b, x, shifts, scales, op=op)
    accumulated = _accumulate(w, x, b.astype(np.int64), model, Saturation.WRAP_THEN_LIFT)
    y, counters = legacy_stage(
        accumulated[0], shifts.astype(np.int64), scales.astype(np.int64), out_bits, model
    )
    return make_result(y, accumulated, counters, (*x.shape[:-1], c_out))


def fc_deepin_shallowout_16(W, B, X, shifts, scales, *, model=Model.HOST_REFERENCE) -> OpResult:
    """lib_nn's legacy ``fc_deepin_shallowout_16``: C_in % 32 == 0, C_out <= 16, int16 out.

    ``W`` int8 ``(C_out, C_in)``, ``B`` int32, ``X`` int8 ``(C_in,)``, ``shifts`` uint16 in
    0..31, ``scales`` int16 (Q1.14). Host accumulation: per 32-chunk ``max(WRAP32(acc + s),
    -(2^31-1))`` (the C widens only after the 32-bit add); device: per-chunk saturation.
    Output: ``SAT_16(RSHR(SAT_16(RSHR_W(acc, shift)) * scale, 14))``.
    """
    return _legacy(
        (W, B, X, shifts, scales), model=model, out_bits=16, op="fc_deepin_shallowout_16"
    )


def fc_deepin_shallowout_8(W, B, X, shifts, scales, *, model=Model.HOST_REFERENCE) -> OpResult:
    """lib_nn's legacy ``fc_deepin_shallowout_8``: as the 16-bit one, then ``SAT_8(RSHR(y16, 8))``.

    The int8 output is always symmetric, [-127, 127].
    """
    return _legacy((W, B, X, shifts, scales), model=model, out_bits=8, op="fc_deepin_shallowout_8")
