"""PDP register block (``conformance/nvdla.md`` §4.1)."""

from __future__ import annotations

from quantemu.backends.nvdla.registers.fields import RegisterBlock, declare, enum_field, sx
from quantemu.backends.nvdla.registers.types import PdpGeometry, PoolingMethod, Precision, precision
from quantemu.errors import InvalidInputError, UnsupportedError

# Sign bit of PAD_VALUE_<n>X for n = 1..7 (§4.2): the datapath's width for n padded values.
_PAD_SIGN_BIT = {
    Precision.INT8: (7, 8, 9, 9, 10, 10, 10),
    Precision.INT16: (15, 16, 17, 17, 18, 18, 18),
}


_FIELDS = {
    "INPUT_DATA": 2, "POOLING_METHOD": 2, "SPLIT_NUM": 8,
    "CUBE_IN_WIDTH": 13, "CUBE_IN_HEIGHT": 13, "CUBE_IN_CHANNEL": 13,
    "CUBE_OUT_WIDTH": 13, "CUBE_OUT_HEIGHT": 13, "CUBE_OUT_CHANNEL": 13,
    "KERNEL_WIDTH": 4, "KERNEL_HEIGHT": 4, "KERNEL_STRIDE_WIDTH": 4, "KERNEL_STRIDE_HEIGHT": 4,
    "PAD_LEFT": 3, "PAD_TOP": 3, "PAD_RIGHT": 3, "PAD_BOTTOM": 3,
    **{f"PAD_VALUE_{n}X": 19 for n in range(1, 8)},
    "RECIP_KERNEL_WIDTH": (17, 1 << 16), "RECIP_KERNEL_HEIGHT": (17, 1 << 16),
    # D_OPERATION_MODE_CFG.FLYING_MODE (0 ON: X from the SDP, 1 OFF: X read from memory) and
    # D_NAN_FLUSH_TO_ZERO.NAN_TO_ZERO: in FP16, NaN inputs become +0 when both are 1 (cmod).
    "FLYING_MODE": 1, "NAN_TO_ZERO": 1,
}  # fmt: skip


@declare(_FIELDS)
class PdpRegisters(RegisterBlock):
    """PDP fields, ``conformance/nvdla.md`` §4.1 (split-width mode not emulated); FP16 input
    (``INPUT_DATA = 2``) pools as NVIDIA's C model does (``fp16/pdp.py``)."""

    UNIT = "PdpRegisters"

    def _check(self) -> None:
        precision(self.UNIT, "INPUT_DATA", self.INPUT_DATA, fp16=True)
        if self.POOLING_METHOD == 3:
            raise InvalidInputError(
                f"{self.UNIT}: POOLING_METHOD = 3 is reserved; use 0 (AVERAGE), 1 (MAX) or 2 (MIN)"
            )
        if self.SPLIT_NUM != 0:
            raise UnsupportedError(
                f"{self.UNIT}: SPLIT_NUM = {self.SPLIT_NUM}: split-width mode is not emulated "
                "(not covered by the conformance page); pool the whole width with SPLIT_NUM = 0"
            )
        self._check_geometry()

    def _check_geometry(self) -> None:
        g = self.geometry()
        for side, pad, k, kname in (
            ("PAD_LEFT", g.pad_left, g.kernel_width, "width"),
            ("PAD_RIGHT", g.pad_right, g.kernel_width, "width"),
            ("PAD_TOP", g.pad_top, g.kernel_height, "height"),
            ("PAD_BOTTOM", g.pad_bottom, g.kernel_height, "height"),
        ):
            if pad >= k:
                raise UnsupportedError(
                    f"{self.UNIT}: {side} = {pad} is not smaller than the kernel {kname} {k}; "
                    "windows made only of padding read stale line-buffer state in the cmod, "
                    "which is not emulated (§4.2 'not covered')"
                )
        for name, size, pad, k, s, out in (
            (
                "WIDTH",
                g.width,
                g.pad_left + g.pad_right,
                g.kernel_width,
                g.stride_width,
                g.out_width,
            ),
            (
                "HEIGHT",
                g.height,
                g.pad_top + g.pad_bottom,
                g.kernel_height,
                g.stride_height,
                g.out_height,
            ),
        ):
            expected = (size + pad - k) // s + 1 if size + pad >= k else 0
            if out != expected:
                raise InvalidInputError(
                    f"{self.UNIT}: CUBE_OUT_{name} = {out - 1} (size {out}) is inconsistent with "
                    f"CUBE_IN_{name} + 1 = {size}, pads {pad}, kernel {k}, stride {s}: the "
                    f"output size is (in + pads - kernel) // stride + 1 = {expected}; "
                    f"program CUBE_OUT_{name} = {expected - 1}"
                )
        if self.CUBE_OUT_CHANNEL != self.CUBE_IN_CHANNEL:
            raise InvalidInputError(
                f"{self.UNIT}: CUBE_OUT_CHANNEL = {self.CUBE_OUT_CHANNEL} differs from "
                f"CUBE_IN_CHANNEL = {self.CUBE_IN_CHANNEL}; pooling keeps the channel count"
            )

    input_type = enum_field("INPUT_DATA", Precision, "INT8, INT16 or FP16 (input and output).")
    method = enum_field("POOLING_METHOD", PoolingMethod, "AVERAGE, MAX or MIN.")

    def geometry(self) -> PdpGeometry:
        """Sizes, kernel, strides and pads as plain counts."""
        return PdpGeometry(
            channels=self.CUBE_IN_CHANNEL + 1,
            height=self.CUBE_IN_HEIGHT + 1,
            width=self.CUBE_IN_WIDTH + 1,
            out_height=self.CUBE_OUT_HEIGHT + 1,
            out_width=self.CUBE_OUT_WIDTH + 1,
            kernel_height=self.KERNEL_HEIGHT + 1,
            kernel_width=self.KERNEL_WIDTH + 1,
            stride_height=self.KERNEL_STRIDE_HEIGHT + 1,
            stride_width=self.KERNEL_STRIDE_WIDTH + 1,
            pad_top=self.PAD_TOP,
            pad_left=self.PAD_LEFT,
            pad_bottom=self.PAD_BOTTOM,
            pad_right=self.PAD_RIGHT,
        )

    def pad_values(self) -> tuple[int, ...]:
        """Decoded ``PAD_VALUE_<n>X`` for n = 0..7 (n = 0 is 0), as the accumulator adds them.

        Sign extension is from a per-n bit; when that bit is clear the higher raw bits are kept,
        and the result wraps to the accumulator width (16 bits for INT8, 32 for INT16), §4.2.
        """
        t = self.input_type
        if t is Precision.FP16:
            raise InvalidInputError(
                f"{self.UNIT}: INPUT_DATA = FP16: PAD_VALUE_<n>X are fp17 bit patterns there; "
                "use pad_values_fp17()"
            )
        acc_bits = 16 if t is Precision.INT8 else 32
        out = [0]
        for n in range(1, 8):
            raw, b = getattr(self, f"PAD_VALUE_{n}X"), _PAD_SIGN_BIT[t][n - 1]
            v = raw | ~((1 << (b + 1)) - 1) if raw >> b & 1 else raw
            out.append(sx(v, acc_bits))
        return tuple(out)

    def pad_values_fp17(self) -> tuple[int, ...]:
        """FP16 mode: ``PAD_VALUE_<n>X`` for n = 1..7 as the fp17 words the cmod adds (the low
        17 bits of each 19-bit field, passed through unconverted)."""
        return tuple(getattr(self, f"PAD_VALUE_{n}X") & 0x1FFFF for n in range(1, 8))
