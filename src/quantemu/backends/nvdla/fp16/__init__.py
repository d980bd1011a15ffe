"""NVDLA's FP16 pipeline, bit-exact to NVIDIA's C model (``conformance/nvdla-fp16``).

The FP16 variant of the nvdla backend, with the backend's file roles (``ARCHITECTURE.md``); the
register blocks, the LUT selection rule and what else INT8 and FP16 share stay in
:mod:`quantemu.backends.nvdla`, whose unit ops (``sdp``, ``cdp``, ``pdp``) run these for
registers that select FP16. Every float step is the cmod's own arithmetic
(:mod:`quantemu.intmath.nvdla_float`), not IEEE 754.

- ops by unit: :mod:`.cmac` (the Booth products and atomic ops) and :mod:`.cc` (CACC and the
  convolution loops), :mod:`.sdp`, :mod:`.pdp`, :mod:`.cdp`;
- :mod:`.reference`: their scalar twins, the specification the ops are tested against (``==``);
- :mod:`.lut_program`: the FP16 LUTs NVIDIA's compiler programs;
- :mod:`.check`: seed 001's FP16 error thresholds;
- :mod:`.lower`: whole models on the FP16 pipeline (``--option precision=fp16``), which
  :func:`quantemu.backends.nvdla.lower.lower` picks;
- ``CONV_NOTES.md``: the cmod's lines behind the convolution, PDP and CDP.
"""

from quantemu.backends.nvdla.fp16.cc import (
    cacc_add_fp16,
    cacc_fp48_to_fp32,
    conv_fp16,
    conv_fp16_grouped,
)
from quantemu.backends.nvdla.fp16.cdp import cdp_fp16, cdp_window_fp16
from quantemu.backends.nvdla.fp16.cmac import booth_fp16, cmac_cell_fp16
from quantemu.backends.nvdla.fp16.lut_program import lrn_fp16_lut, sdp_fp16_lut
from quantemu.backends.nvdla.fp16.pdp import pdp_fp16
from quantemu.backends.nvdla.fp16.sdp import sdp_fp16

__all__ = [
    "booth_fp16",
    "cacc_add_fp16",
    "cacc_fp48_to_fp32",
    "cdp_fp16",
    "cdp_window_fp16",
    "cmac_cell_fp16",
    "conv_fp16",
    "conv_fp16_grouped",
    "lrn_fp16_lut",
    "pdp_fp16",
    "sdp_fp16",
    "sdp_fp16_lut",
]
